/* suggest.c - the entry names closest to a name that matched nothing. */
#include <stdlib.h>
#include <string.h>

#include "resolve_int.h"

/* DP cells all suggestions of one run may cost: a distance is O(n x band),
 * and a missing 250-byte name against 20,000 others of 250 random bytes
 * (all far apart, so the band never narrows) took 9 s each, 50 names 7
 * minutes for a 7 MB archive. Typos in a real archive cost far less: 35 to
 * 80 cells per entry for names in a 100,000-entry model (once k names are
 * close the band is a few cells wide), so 256 per entry (plus a floor)
 * keeps their suggestions and bounds the work by the archive's size. */
#define SUGGEST_CELLS_PER_ENTRY 256
#define SUGGEST_CELLS_FLOOR ((uint64_t)1 << 22)

uint64_t wpk_suggest_budget(const wpack_archive *ar)
{
    uint64_t n = wpack_count(ar);
    return n > (UINT64_MAX - SUGGEST_CELLS_FLOOR) / SUGGEST_CELLS_PER_ENTRY
               ? UINT64_MAX
               : n * SUGGEST_CELLS_PER_ENTRY + SUGGEST_CELLS_FLOOR;
}

/* Levenshtein distance, or limit when it is limit or more: only the cells
 * within limit of the diagonal are computed (the others are >= limit), and
 * the work stops once a whole row reaches limit; names are capped at 256
 * bytes. *cells is charged with the cells computed. */
static unsigned distance(const char *a, size_t n, const char *b, size_t m, unsigned limit,
                         uint64_t *cells)
{
    unsigned row[257];
    if (n > 256)
        n = 256;
    if (m > 256)
        m = 256;
    if (m == 0)
        return n < limit ? (unsigned)n : limit;
    for (size_t j = 0; j <= m; j++)
        row[j] = j < limit ? (unsigned)j : limit;
    for (size_t i = 1; i <= n; i++) {
        /* the band of row i: |i - j| < limit */
        size_t lo = i >= limit ? i - limit + 1 : 1, hi = i + limit - 1 < m ? i + limit - 1 : m;
        if (lo > hi)
            return limit;
        unsigned diag = row[lo - 1], best;
        row[lo - 1] = lo == 1 && i < limit ? (unsigned)i : limit;
        best = row[lo - 1];
        for (size_t j = lo; j <= hi; j++) {
            unsigned up = row[j];
            unsigned v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v)
                v = up + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            if (v > limit)
                v = limit;
            row[j] = v;
            diag = up;
            if (v < best)
                best = v;
        }
        *cells += hi - lo + 1;
        if (best >= limit)
            return limit;
    }
    return row[m] < limit ? row[m] : limit;
}

size_t wpk_closest_entries(const wpack_archive *ar, const char *name, uint64_t *out, size_t k,
                           uint64_t *budget)
{
    if (k == 0 || k > 16)
        k = k ? 16 : 0;
    unsigned dist[16];
    size_t have = 0, n = strlen(name);
    uint64_t count = wpack_count(ar), cells = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (cells > *budget) { /* a partial scan would name "closest" entries that are not */
            *budget = 0;
            return 0;
        }
        wpack_tensor t;
        if (wpack_tensor_at(ar, i, &t) != WPACK_OK)
            continue;
        unsigned limit = have == k ? dist[k - 1] : 4096;
        size_t lendiff = t.name_len > n ? t.name_len - n : n - t.name_len;
        if (lendiff >= limit)
            continue;
        unsigned d = distance(name, n, t.name, t.name_len, limit, &cells);
        if (d >= limit)
            continue;
        size_t pos = have < k ? have++ : k - 1;
        while (pos > 0 && dist[pos - 1] > d) {
            dist[pos] = dist[pos - 1];
            out[pos] = out[pos - 1];
            pos--;
        }
        dist[pos] = d;
        out[pos] = i;
    }
    *budget -= cells;
    return have;
}
