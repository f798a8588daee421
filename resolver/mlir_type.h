/*
 * mlir_type.h - MLIR tensor types against wpack dtypes and shapes: parse
 * `tensor<4x3xf32>`, match an element type to a dtype, print a dtype and
 * shape as an MLIR tensor type.
 */
#ifndef WPACK_RESOLVER_MLIR_TYPE_H
#define WPACK_RESOLVER_MLIR_TYPE_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

typedef struct wpk_mlir_tensor {
    char elem[16];              /* f32, bf16, i8, si8, ui8, i1, f8E4M3FN, ... */
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
} wpk_mlir_tensor;

/* Parse a ranked, static tensor type. 0 ok; otherwise WPACK_E_UNSUPPORTED
 * (dynamic dims, unranked, encodings, non-tensor types, rank > 8, unknown
 * element types) with the reason in why. */
int wpk_mlir_parse_tensor(const char *s, size_t n, wpk_mlir_tensor *t, char *why, size_t whylen);

/* Does element type elem hold dtype? Signless iN matches the signed and the
 * unsigned dtype of that width; siN / uiN only their own; i1 is bool. */
int wpk_mlir_elem_matches(const char *elem, int dtype);

/* The dtype an element type is stored as (signless -> signed); 0 if none. */
int wpk_mlir_elem_dtype(const char *elem);

/* "tensor<3x4xf32>" for a dtype and shape (u8 -> ui8, bool -> i1). */
void wpk_mlir_format_tensor(char *buf, size_t len, int dtype, unsigned rank, const uint64_t *dims);

/* Two parsed types are the same type. */
int wpk_mlir_tensor_equal(const wpk_mlir_tensor *a, const wpk_mlir_tensor *b);

#endif
