/* suggest.c - the entry names closest to a name that matched nothing. */
#include <stdlib.h>
#include <string.h>

#include "resolve_int.h"

/* Levenshtein distance, giving up (returning limit) once every cell of a
 * row reaches limit; names are capped at 256 bytes for the comparison. */
static unsigned distance(const char *a, size_t n, const char *b, size_t m, unsigned limit)
{
    unsigned row[257];
    if (n > 256)
        n = 256;
    if (m > 256)
        m = 256;
    for (size_t j = 0; j <= m; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
        unsigned diag = row[0], best;
        row[0] = (unsigned)i;
        best = row[0];
        for (size_t j = 1; j <= m; j++) {
            unsigned up = row[j];
            unsigned v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v)
                v = up + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
            if (v < best)
                best = v;
        }
        if (best >= limit)
            return limit;
    }
    return row[m] < limit ? row[m] : limit;
}

size_t wpk_closest_entries(const wpack_archive *ar, const char *name, uint64_t *out, size_t k)
{
    if (k == 0 || k > 16)
        k = k ? 16 : 0;
    unsigned dist[16];
    size_t have = 0, n = strlen(name);
    uint64_t count = wpack_count(ar);
    for (uint64_t i = 0; i < count; i++) {
        wpack_tensor t;
        if (wpack_tensor_at(ar, i, &t) != WPACK_OK)
            continue;
        unsigned limit = have == k ? dist[k - 1] : 4096;
        size_t lendiff = t.name_len > n ? t.name_len - n : n - t.name_len;
        if (lendiff >= limit)
            continue;
        unsigned d = distance(name, n, t.name, t.name_len, limit);
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
    return have;
}
