/* extern_int.h - what externalize's files share (extern_resources.c,
 * extern_ops.c). */
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

/* A global to move (externalize.c). */
typedef struct {
    size_t global;
    wpk_mlir_tensor type;
    int dtype;
    uint64_t nbytes;
    const wpk_resource *res;    /* dense_resource: its blob */
    size_t alias_of;            /* 1 + the candidate whose entry this one names (the
                                   first of its blob or literal text, of its type), or 0 */
    int splat;                  /* a splat literal: a splat entry of fill */
    unsigned char fill[8];
    const char *entry;          /* its entry's name (the symbol, or names[]) */
} wpk_ext_cand;


/* A torch.vtensor.literal or constant op weight to move (extern_torch.c). */
typedef struct {
    wpk_torch_lit lit;
    wpk_mlir_tensor type;
    int dtype;
    uint64_t nbytes;
    const wpk_resource *res;    /* its blob, or NULL: a dense<...> literal */
    int splat;                  /* dense: a splat literal, a splat entry of fill */
    unsigned char fill[8];
    char *key;                  /* its entry's name: KEY decoded, or for a dense
                                   literal torch_literal_ / dense_literal_ + the
                                   XXH3 of its text (heap) */
    size_t key_len;
    unsigned line, col;
    int writes;                 /* the first literal of its KEY writes the entry */
    int hoisting;               /* loads a global @KEY: a constant op, or a torch
                                   literal with --emit iree */
    int hoists;                 /* the first of those of its KEY in its module puts
                                   the global there */
    const char *sym;            /* the global's symbol when not KEY (the file
                                   mentions @KEY already), or NULL */
    size_t sym_len;
    int sym_owned;              /* sym is this op's to free (one of its KEY's) */
} wpk_ext_op;

/* The op name of c (for messages). */
const char *wpk_ext_op_label(const wpk_ext_op *c);
/* The torch literals and constant ops of at least min_bytes, in file order
 * (*out, heap, *nout of them; their keys heap); ops sharing a KEY share
 * one entry (their types must agree, a hashed name's texts too), and no
 * moved global may have KEY as its entry's name. 0, or WPACK_E_NOMEM
 * (other problems are diagnostics). */
int wpk_extern_collect_ops(const wpk_mlir_doc *doc, const wpk_res_index *rk, uint64_t min_bytes,
                           wpk_diag *d, wpack_externalize_result *res, const wpk_ext_cand *cand,
                           size_t ncand, const char *unescaped, wpk_ext_op **out, size_t *nout);

#endif
