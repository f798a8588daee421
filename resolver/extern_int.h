/* extern_int.h - what externalize's files share (extern_resources.c). */
#ifndef WPACK_RESOLVER_EXTERN_INT_H
#define WPACK_RESOLVER_EXTERN_INT_H

#include "resolve_int.h"

/* The builtin resources by decoded key, sorted (equal keys in file order). */
typedef struct {
    char *key;
    size_t n, ix;
} wpk_res_key;
typedef struct {
    wpk_res_key *v;
    size_t n;
} wpk_res_index;
int wpk_res_index_build(const wpk_mlir_doc *doc, wpk_res_index *x); /* 0 or WPACK_E_NOMEM */
void wpk_res_index_free(wpk_res_index *x);
/* The resource of key (a later definition wins), or NULL. */
const wpk_resource *wpk_find_resource(const wpk_mlir_doc *doc, const wpk_res_index *x,
                                      const char *key, size_t n);
/* The key of the value `dense_resource<KEY> ...` at v (decoded, heap), or NULL. */
char *wpk_resource_key(const char *buf, wpk_span v, size_t *n);
/* refs[r] += the references to resource r outside the moved values
 * (spans in file order: moved globals' and torch literals') and blobs. */
void wpk_count_refs(const wpk_mlir_doc *doc, const wpk_res_index *keys, const wpk_span *moved,
                    size_t nmoved, const wpk_span *lits, size_t nlits, size_t *refs);
/* Patches removing the resources marked in drop[] (with their commas). */
size_t wpk_drop_patches(const wpk_mlir_doc *doc, const unsigned char *drop, wpk_patch *out);

#endif
