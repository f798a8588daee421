/*
 * resolve_plan.h - what the pieces of the resolver's plan share:
 * resolve.c (the plan), name_index.c (name hashing, duplicate symbols, the
 * archive's entry index), entry_lookup.c (which entry a global names) and
 * type_check.c (its type against the entry's).
 */
#ifndef WPACK_RESOLVER_RESOLVE_PLAN_H
#define WPACK_RESOLVER_RESOLVE_PLAN_H

#include "resolve_int.h"

/* "src:L:C: global @name", formatted only when a message needs it. */
typedef struct {
    wpk_diag *d;
    const wpk_global *g;
    int ready;
    char buf[400];
} wpk_lazy_where;

static inline const char *wpk_where(wpk_lazy_where *w)
{
    if (!w->ready) {
        wpk_global_where(w->buf, sizeof w->buf, w->d, w->g);
        w->ready = 1;
    }
    return w->buf;
}

/* ---------------------------------------------------------- name_index.c */

/* A hash of a name for the resolver's tables (8 bytes a step; not XXH3:
 * the library call costs more than the hashing for short names). */
uint64_t wpk_name_hash(const char *s, size_t n);

/*
 * Exact entry-name lookups, for documents that look up many entries: first
 * the entry after the last one found or the one after that (documents list
 * their weights largely in the archive's name order, or in runs of it: 90%
 * of bench/resolver's globals, from cache), then a hash table of all entry
 * names (one pass over the entries, then one probe a lookup instead of a
 * binary search of ~log2(count) name comparisons; built at the 32nd miss,
 * binary searches until then). A slot is the entry index + 1 (0: empty) in
 * the low 32 bits and the high 32 bits of its name's hash above. Names are
 * compared whole (n bytes); wpack_find (the name map, names up to a NUL) is
 * the caller's next step for a name not found. Entry names come from the
 * public wpack_tensor_at(), each fetched once into a table of (pointer,
 * length) (a wpack_tensor is ~200 bytes to fill; a name compare is a few).
 */
typedef struct wpk_entry_name {
    const char *p;              /* NULL: not fetched yet */
    size_t n;
} wpk_entry_name;

typedef struct wpk_entry_index {
    const wpack_archive *ar;
    uint64_t count;             /* < 2^31 (WPK_LIMIT_ENTRIES) */
    uint64_t next;              /* the entry after the last one found */
    uint64_t *slot;             /* the table once built (wpk_big_calloc) */
    size_t cap, misses;
    int no_table;               /* building it failed: binary searches */
    wpk_entry_name *names;      /* fetched names (wpk_big_calloc), or NULL */
    int no_names;               /* allocating names failed: fetch every time */
} wpk_entry_index;

void wpk_entry_index_init(wpk_entry_index *x, const wpack_archive *ar, uint64_t count);
/* The entry named name (n bytes), or UINT64_MAX. */
uint64_t wpk_entry_index_find(wpk_entry_index *x, const char *name, size_t n);
void wpk_entry_index_free(wpk_entry_index *x);

/* Is any symbol defined twice? 1 yes, 0 no, -1 out of memory; with ix,
 * match[i] = the entry named by global i's symbol + 1 (0: none). */
int wpk_find_duplicates(const wpk_mlir_doc *doc, wpk_entry_index *ix, uint32_t *match);
/* The duplicate symbols in name order; dup from wpk_find_duplicates. */
void wpk_report_duplicates(wpk_diag *d, const wpk_mlir_doc *doc, int dup);

/* -------------------------------------------------------- entry_lookup.c */

/* --map: global symbol -> entry name, sorted by symbol (wpk_map_cmp). */
typedef struct {
    const char *global, *entry;
} wpk_map_pair;
int wpk_map_cmp(const void *a, const void *b);

/* Find global gi's entry (match from wpk_find_duplicates, or NULL): 1
 * found, 2 found through its wpack.uri (archive id in *uri_id), 0 not,
 * -1 an error reported. *lookup_name: the name looked up when it was not
 * the symbol (heap, or NULL). */
int wpk_find_entry(const wpack_archive *ar, wpk_entry_index *ix, const uint32_t *match, size_t gi,
                   const wpk_mlir_doc *doc, const wpk_global *g, const wpk_map_pair *map,
                   size_t nmap, wpack_tensor *t, char **lookup_name, uint64_t *uri_id,
                   wpk_diag *d, wpk_lazy_where *where);
/* An unresolved global, with up to k closest entry names when budget is
 * not NULL (the DP cells left for suggestions: wpk_closest_entries). */
void wpk_report_unresolved(wpk_diag *d, const wpack_archive *ar, wpk_lazy_where *where,
                           const char *name, unsigned k, int severity, uint64_t *budget);

/* ---------------------------------------------------------- type_check.c */

/* The last type parsed well and the last element match, since globals
 * mostly repeat a few types: the same bytes parse to the same type. */
typedef struct {
    const char *text;
    size_t len;
    wpk_mlir_tensor type;
    int dtype, elem_ok;         /* elem_ok for type.elem and dtype; dtype -1: none */
} wpk_type_cache;

/* Check the global's types against the entry (*ok = 0 and a diagnostic
 * when they differ). */
void wpk_check_types(wpk_diag *d, const wpk_mlir_doc *doc, const wpk_global *g,
                     const wpack_tensor *t, wpk_lazy_where *where, int *ok, wpk_type_cache *tc);

#endif
