/*
 * safetensors.h - safetensors files: 8-byte little-endian header length N,
 * N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [b, e]}, ...,
 * "__metadata__": {str: str}}, then the data (offsets relative to it).
 *
 * Every rule of the reference implementation is enforced before anything
 * is handed on: N <= 100 MB and inside the file; the header is a JSON object
 * without duplicate keys; known dtypes; shapes of non-negative ints with a
 * checked product; data_offsets b <= e with e - b = elements x dtype size;
 * sorted by offset, the first at 0, each starting where the previous ended
 * (no holes, no overlaps), the last ending at the end of the file (no
 * trailing bytes); __metadata__ string to string.
 */
#ifndef WPACK_PACKER_SAFETENSORS_H
#define WPACK_PACKER_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

#define SAFETENSORS_MAX_HEADER 100000000ull

typedef struct {
    int is_meta;               /* 1: a __metadata__ pair (name = key, value = value) */
    const char *name;          /* NUL-terminated, valid during the call */
    const char *value;
    int dtype;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    const uint8_t *data;       /* points into the buffer */
    uint64_t nbytes;
    uint64_t file_offset;
} st_item;

typedef int (*st_visit_fn)(void *user, const st_item *it);

/* Validate the whole file in buf, then call fn for each metadata pair and
 * then each tensor in file order. Returns WPACK_OK, WPACK_E_INPUT,
 * WPACK_E_UNSUPPORTED (dtype), WPACK_E_RANK, WPACK_E_OVERFLOW, WPACK_E_SIZE,
 * WPACK_E_OVERLAP, WPACK_E_DUPLICATE, WPACK_E_LIMIT, WPACK_E_NOMEM or what fn
 * returned. Meant for libFuzzer too. */
int st_scan_buffer(const uint8_t *buf, size_t len, st_visit_fn fn, void *user, char *err,
                   size_t errlen);

/* The safetensors dtype string for a wpack dtype ("F32", "BF16", ...) or NULL. */
const char *st_dtype_name(int dtype);

#endif
