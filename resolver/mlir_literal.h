/*
 * mlir_literal.h - turn an inline MLIR elements value (dense<...> literal,
 * hex dense<"0x...">, or a builtin resource blob) into the tensor's
 * little-endian bytes, streamed through a small buffer to a sink: memory
 * does not grow with the weight bytes.
 */
#ifndef WPACK_RESOLVER_MLIR_LITERAL_H
#define WPACK_RESOLVER_MLIR_LITERAL_H

#include <stddef.h>
#include <stdint.h>

#include "mlir_scan.h"
#include "mlir_type.h"

/* Receives the decoded bytes in order; non-zero stops the decode. */
typedef int (*wpk_bytes_fn)(void *user, const void *data, size_t n);

/* Element types the decoder takes: f16 bf16 f32 f64 i1 i8..i64 si* ui*.
 * Returns the dtype to store (signless ints as signed) or 0. */
int wpk_literal_dtype(const char *elem);

/*
 * Decode `value` (the initial value as written: `dense<...> : T`) for a
 * tensor of type t into n = elements x size bytes, all of them to fn.
 * Literal lists must hold exactly the tensor's element count; a bare
 * scalar, a one-element hex string or (i1) a 0x00/0xFF byte is a splat.
 * i1 hex is bit-packed as MLIR stores it (LSB first) and comes out one
 * byte per element. Returns 0; WPACK_E_INPUT with the reason and the
 * byte offset of the problem (*where) for malformed or out-of-range
 * literals; WPACK_E_UNSUPPORTED for forms it does not take (complex,
 * strings); WPACK_E_IO if fn stopped.
 */
int wpk_literal_decode(const char *buf, wpk_span value, const wpk_mlir_tensor *t, wpk_bytes_fn fn,
                     void *user, char *why, size_t whylen, size_t *where);

/*
 * Is `value` (as for wpk_literal_decode) a splat: one bare scalar, hex of
 * one element, or (i1, more than 8 elements) the one byte 0x00 or 0xFF?
 * Then *is_splat = 1 and elem[0..element size) holds the element's bytes
 * (i1: 0 or 1), as wpk_literal_decode would repeat them. Looks at the head
 * of the value only (a long hex string or a list is not a splat: *is_splat
 * = 0). Returns 0, or the error wpk_literal_decode gives for a bad splat
 * scalar or head (why, *where). wpk_literal_decode uses it: one rule.
 */
int wpk_literal_splat(const char *buf, wpk_span value, const wpk_mlir_tensor *t,
                      unsigned char elem[8], int *is_splat, char *why, size_t whylen,
                      size_t *where);

/* A builtin resource blob (hex digits after "0x", alignment first): its
 * data must be exactly the tensor's bytes (i1: one byte per element). */
int wpk_literal_blob_decode(const char *buf, const wpk_resource *r, const wpk_mlir_tensor *t,
                    wpk_bytes_fn fn, void *user, char *why, size_t whylen);

/* The tensor's byte size (elements x size, i1 one byte), 0 with *ok = 0 on
 * overflow or an element type the decoder does not take. */
uint64_t wpk_literal_nbytes(const wpk_mlir_tensor *t, int *ok);

/* The value of a hex digit (either case), or -1. */
int wpk_hex_digit(unsigned char c);

#endif
