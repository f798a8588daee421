/*
 * name_index.c - names in hash tables for the resolver's plan: the
 * globals' symbols (is one defined twice?) and the archive's entry names
 * (which entry has this exact name?), see resolve_plan.h.
 */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "resolve_plan.h"

uint64_t wpk_name_hash(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w = 0;
    if (n >= 8) {
        const char *end = s + n;
        for (; end - s > 8; s += 8) {
            memcpy(&w, s, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
        }
        memcpy(&w, end - 8, 8); /* the last 8 bytes (overlapping the previous word) */
    } else {
        for (size_t i = 0; i < n; i++)
            w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    }
    /* murmur3's finalizer: every input bit reaches the low (index) and the
     * high (tag) bits */
    h ^= w;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 33);
}

/* Slots of a hash table for n names: load <= 1/2 (short probes); for
 * 100,000 names 2 MiB, one huge page from wpk_big_calloc. 0: too many. */
static size_t table_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n) {
        if (cap > ((size_t)-1) / 16)
            return 0;
        cap *= 2;
    }
    return cap;
}

/* Globals' names in a growing hash set, for the duplicate check: a slot
 * is the global's index + 1 (0: empty) in the low 32 bits, the high 32
 * bits of its name's hash above (compared before the names). */
typedef struct {
    uint64_t *slot;
    size_t cap, n;
} name_set;

static void name_set_put(uint64_t *slot, size_t cap, uint64_t h, size_t i)
{
    size_t j = h & (cap - 1);
    while (slot[j])
        j = (j + 1) & (cap - 1);
    slot[j] = (h & 0xFFFFFFFF00000000ull) | (i + 1);
}

/* A global's symbol is unique in its module (symbol table) only: the
 * same name in two nested modules is two symbols. */
static uint64_t scoped_hash(const wpk_global *g)
{
    return wpk_name_hash(g->name, g->name_len) ^ (g->scope * 0x9E3779B97F4A7C15ull);
}

/* Add global i (i < 2^32 - 1): 1 its name was there already in its
 * module, 0 added, -1 out of memory. */
static int name_set_add(name_set *s, const wpk_mlir_doc *doc, size_t i)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t c = s->cap ? s->cap * 2 : 64;
        uint64_t *ns = c <= ((size_t)-1) / 16 ? wpk_big_calloc(c * sizeof *ns) : NULL;
        if (!ns)
            return -1;
        for (size_t j = 0; j < s->cap; j++) {
            if (!s->slot[j])
                continue;
            const wpk_global *o = &doc->globals[(s->slot[j] & 0xFFFFFFFFu) - 1];
            name_set_put(ns, c, scoped_hash(o), (s->slot[j] & 0xFFFFFFFFu) - 1);
        }
        wpk_big_free(s->slot, s->cap * sizeof *s->slot);
        s->slot = ns;
        s->cap = c;
    }
    const wpk_global *g = &doc->globals[i];
    uint64_t h = scoped_hash(g), tag = h & 0xFFFFFFFF00000000ull;
    for (size_t j = h & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1)) {
        if ((s->slot[j] & 0xFFFFFFFF00000000ull) != tag)
            continue;
        const wpk_global *o = &doc->globals[(s->slot[j] & 0xFFFFFFFFu) - 1];
        if (o->scope == g->scope && o->name_len == g->name_len &&
            memcmp(o->name, g->name, g->name_len) == 0)
            return 1;
    }
    name_set_put(s->slot, s->cap, h, i);
    s->n++;
    return 0;
}

static int name_cmp_idx(const void *a, const void *b, void *ctx)
{
    const wpk_global *g = ctx;
    const wpk_global *x = &g[*(const size_t *)a], *y = &g[*(const size_t *)b];
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    if (x->name_len != y->name_len)
        return x->name_len < y->name_len ? -1 : 1;
    if (x->scope != y->scope)
        return x->scope < y->scope ? -1 : 1;
    return x->op.off < y->op.off ? -1 : 1;
}

void wpk_report_duplicates(wpk_diag *d, const wpk_mlir_doc *doc, int dup)
{
    if (doc->nglobals < 2 || dup == 0)
        return;
    size_t *idx = malloc(doc->nglobals * sizeof *idx);
    if (!idx) {
        wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_NOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < doc->nglobals; i++)
        idx[i] = i;
    qsort_r(idx, doc->nglobals, sizeof *idx, name_cmp_idx, doc->globals);
    size_t first = 0, times = 1; /* the run of one name: its first definition */
    for (size_t i = 1; i < doc->nglobals; i++) {
        const wpk_global *a = &doc->globals[idx[first]], *b = &doc->globals[idx[i]];
        if (a->scope != b->scope || a->name_len != b->name_len ||
            memcmp(a->name, b->name, a->name_len) != 0) {
            first = i;
            times = 1;
            continue;
        }
        char w[400];
        wpk_global_where(w, sizeof w, d, b);
        times++;
        if (times == 2)
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_DUPLICATE,
                          "%s: symbol defined twice (first at %u:%u)", w, a->line, a->col);
        else
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_DUPLICATE,
                          "%s: symbol defined %zu times (first at %u:%u)", w, times, a->line, a->col);
    }
    free(idx);
}

void wpk_entry_index_init(wpk_entry_index *x, const wpack_archive *ar, uint64_t count)
{
    memset(x, 0, sizeof *x);
    x->ar = ar;
    x->count = count;
}

void wpk_entry_index_free(wpk_entry_index *x)
{
    wpk_big_free(x->slot, x->cap * sizeof *x->slot);
    wpk_big_free(x->names, x->count * sizeof *x->names);
    x->slot = NULL;
    x->names = NULL;
}

/* Name of entry i (< count), fetched once through wpack_tensor_at. */
static const char *entry_name_at(wpk_entry_index *x, uint64_t i, size_t *n)
{
    if (!x->names && !x->no_names && !(x->names = wpk_big_calloc(x->count * sizeof *x->names)))
        x->no_names = 1;
    if (x->names && x->names[i].p) {
        *n = x->names[i].n;
        return x->names[i].p;
    }
    wpack_tensor t;
    if (wpack_tensor_at(x->ar, i, &t) != WPACK_OK) { /* i < count: not expected */
        *n = 0;
        return "";
    }
    if (x->names)
        x->names[i] = (wpk_entry_name){t.name, t.name_len};
    *n = t.name_len;
    return t.name;
}

static void entry_index_build(wpk_entry_index *x)
{
    size_t cap = table_cap((size_t)x->count);
    x->slot = cap ? wpk_big_calloc(cap * sizeof *x->slot) : NULL;
    if (!x->slot) {
        x->no_table = 1;
        return;
    }
    x->cap = cap;
    /* 16 entries a step: their slots are fetched while the next are hashed
     * (the table is larger than L2: each insert would wait on memory) */
    enum { STEP = 16 };
    uint64_t h[STEP];
    for (uint64_t i = 0; i < x->count; i += STEP) {
        size_t m = x->count - i < STEP ? (size_t)(x->count - i) : STEP;
        for (size_t k = 0; k < m; k++) {
            size_t n;
            const char *name = entry_name_at(x, i + k, &n);
            h[k] = wpk_name_hash(name, n);
            __builtin_prefetch(&x->slot[h[k] & (cap - 1)], 1);
        }
        for (size_t k = 0; k < m; k++)
            name_set_put(x->slot, cap, h[k], (size_t)(i + k));
    }
}

static int entry_is(wpk_entry_index *x, uint64_t i, const char *name, size_t n)
{
    size_t en;
    const char *e = entry_name_at(x, i, &en);
    return en == n && wpk_same_bytes(e, name, n);
}

uint64_t wpk_entry_index_find(wpk_entry_index *x, const char *name, size_t n)
{
    /* the entry after the last one found, or the one after that (one
     * name in between, as p10009 p1001 p10010 sort) */
    for (uint64_t i = x->next; i < x->count && i < x->next + 2; i++) {
        if (entry_is(x, i, name, n)) {
            x->next = i + 1;
            return i;
        }
    }
    if (!x->slot && !x->no_table && ++x->misses >= 32)
        entry_index_build(x);
    uint64_t i = UINT64_MAX;
    if (x->slot) {
        uint64_t h = wpk_name_hash(name, n), tag = h & 0xFFFFFFFF00000000ull;
        size_t mask = x->cap - 1;
        for (size_t j = h & mask; x->slot[j]; j = (j + 1) & mask) {
            uint64_t k = (x->slot[j] & 0xFFFFFFFFu) - 1;
            if ((x->slot[j] & 0xFFFFFFFF00000000ull) == tag && entry_is(x, k, name, n)) {
                i = k;
                break;
            }
        }
    } else {
        /* the entry names first (then the name map, whose hits are no entry
         * of this name: their names differ); a name with a NUL is none */
        wpack_tensor t;
        if (memchr(name, 0, n) == NULL && wpack_find(x->ar, name, &t) == WPACK_OK &&
            t.name_len == n && wpk_same_bytes(t.name, name, n))
            i = t.index;
    }
    if (i != UINT64_MAX)
        x->next = i + 1;
    return i;
}

/*
 * Is any symbol defined twice? With ix, every global's symbol is looked up
 * as an entry name first (match[i] = entry + 1, 0 none, for the plan): two
 * globals on one entry's name are a duplicate, and only the names that are
 * no entry's go into the hash set. 1 yes, 0 no, -1 out of memory (the sort
 * in report_duplicates then decides).
 */
int wpk_find_duplicates(const wpk_mlir_doc *doc, wpk_entry_index *ix, uint32_t *match)
{
    if (doc->nglobals >= UINT32_MAX - 1)
        return -1;
    unsigned char *seen = NULL;
    if (ix && !(seen = calloc((size_t)(ix->count / 8 + 1), 1)))
        ix = NULL; /* the hash set alone, and no match[] */
    name_set set = {NULL, 0, 0};
    int dup = 0, nomem = 0;
    for (size_t i = 0; i < doc->nglobals && (ix || !(dup || nomem)); i++) {
        const wpk_global *g = &doc->globals[i];
        if (ix) {
            uint64_t e = wpk_entry_index_find(ix, g->name, g->name_len);
            if (e != UINT64_MAX) {
                match[i] = (uint32_t)(e + 1);
                dup |= (seen[e / 8] >> (e % 8)) & 1;
                seen[e / 8] |= (unsigned char)(1u << (e % 8));
                continue;
            }
        }
        if (dup || nomem)
            continue;
        int r = name_set_add(&set, doc, i);
        if (r < 0)
            nomem = 1;
        dup |= r > 0;
    }
    free(seen);
    wpk_big_free(set.slot, set.cap * sizeof *set.slot);
    return dup ? 1 : nomem ? -1 : 0;
}
