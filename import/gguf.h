/*
 * gguf.h - GGUF (llama.cpp / ggml model files, versions 2 and 3), in and out.
 *
 * Layout (ggml docs/gguf.md), all little-endian:
 *   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
 *   kv_count x {string key, u32 value_type, value},
 *   tensor_count x {string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset},
 *   zero padding to the alignment, then the data section; a tensor's offset is
 *   relative to the data section and a multiple of the alignment
 *   (general.alignment, a u32, default 32). A string is u64 length + bytes; an
 *   array value is u32 element type, u64 count, the elements.
 *   ne[] is innermost first: the wpack entry has the dims reversed (PyTorch order).
 *
 * gguf_parse() checks the whole header against the buffer before anything is
 * used: every count, length and offset is bounded by the bytes that remain,
 * with overflow-checked arithmetic (import/README.md lists each rejection).
 */
#ifndef WPACK_IMPORT_GGUF_H
#define WPACK_IMPORT_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wpack.h"

/* A GGUF f32 value as the f64 wpack metadata holds, and back, bit for bit:
 * a NaN keeps its sign and payload (a C conversion would quiet a
 * signalling NaN: 0x7f800001 came back 0x7fc00001). */
static inline double gguf_f32_widen(uint32_t u)
{
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) {
        uint64_t b = (uint64_t)(u >> 31) << 63 | 0x7ffull << 52 | (uint64_t)(u & 0x7fffffu) << 29;
        double d;
        memcpy(&d, &b, 8);
        return d;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t gguf_f32_narrow(double d)
{
    uint64_t b;
    memcpy(&b, &d, 8);
    if ((b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (b & 0xfffffffffffffull)) {
        uint32_t m = (uint32_t)(b >> 29) & 0x7fffffu;
        return (uint32_t)(b >> 63) << 31 | 0x7f800000u | (m ? m : 0x400000u);
    }
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* GGUF metadata value types. */
enum {
    GGUF_T_U8 = 0, GGUF_T_I8, GGUF_T_U16, GGUF_T_I16, GGUF_T_U32, GGUF_T_I32, GGUF_T_F32,
    GGUF_T_BOOL, GGUF_T_STRING, GGUF_T_ARRAY, GGUF_T_U64, GGUF_T_I64, GGUF_T_F64,
    GGUF_T_COUNT
};

#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u   /* GGML_MAX_DIMS: what ggml readers take */
#define GGUF_MAX_NAME 63u  /* GGML_MAX_NAME 64 with its NUL */

/* Metadata keys wpack adds on import (and reads on export) to give back the
 * GGUF file it came from: its KV keys in file order, each one's GGUF type
 * (GGUF_KV_TYPE()), and its tensor names in file order. */
#define GGUF_META_KV_ORDER "gguf.kv_order"
#define GGUF_META_KV_TYPES "gguf.kv_types"
#define GGUF_META_TENSOR_ORDER "gguf.tensor_order"
/* The value of gguf.kv_types for a key: the type, or for an array 9 | element type << 8. */
#define GGUF_KV_TYPE(type, elem) ((type) == GGUF_T_ARRAY ? (type) | ((elem) << 8) : (type))

/* A GGML tensor type: its name, block geometry, and the built-in wpack
 * dtype it is (0: a block dtype "ggml.NAME" with params "ggml" + u32 LE id). */
typedef struct {
    uint32_t id;
    const char *name;
    uint32_t block_elems, block_bytes;
    int dtype;
} ggml_type_info;

/* NULL for an id that no current GGUF writer produces. */
const ggml_type_info *ggml_type_get(uint32_t id);
/* The GGML type of a built-in wpack dtype, or -1. */
int ggml_type_of_dtype(int dtype);
/* The params of the block dtype for a GGML type: "ggml" + u32 LE id (8 bytes). */
#define GGML_PARAMS_LEN 8u
void ggml_block_params(uint32_t id, uint8_t out[GGML_PARAMS_LEN]);

typedef struct {
    const uint8_t *key;
    uint64_t key_len;
    uint32_t type, elem_type;  /* elem_type: arrays only */
    uint64_t count;            /* arrays: elements */
    const uint8_t *val;        /* scalars: the value; strings: the length; arrays: element 0 */
    uint64_t val_len;          /* encoded bytes from val */
} gguf_kv;

typedef struct {
    const uint8_t *name;
    uint64_t name_len;
    uint32_t n_dims;
    uint64_t ne[WPACK_MAX_RANK]; /* innermost first */
    uint32_t type;
    uint64_t offset;             /* relative to the data section */
    uint64_t nbytes;
} gguf_tensor;

typedef struct {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *t;
    uint32_t alignment;
    uint64_t data_start;         /* file offset of the data section */
} gguf_file;

/* Parse and check a whole GGUF buffer; on failure a code and "gguf: ..." in err. */
int gguf_parse(const uint8_t *p, size_t len, gguf_file *g, char *err, size_t errlen);
void gguf_free(gguf_file *g);

/* Bytes of one scalar of a fixed-size GGUF type (0 for string, array, unknown). */
size_t gguf_scalar_size(uint32_t type);

/* The data alignment gguf_export writes ar with: its metadata
 * general.alignment (an integer power of two up to 2^30), else 32. Every
 * tensor's bytes and the data section's start are padded to it, so a small
 * archive asking for 2^30 would be a GiB of zeros a tensor: the export's
 * size bound counts it (export.c). */
uint32_t gguf_export_alignment(const wpack_archive *ar);

/* An archive written as GGUF v3 to fd (import/gguf_export.c); read_flags
 * for wpk_export_copy_fd. */
typedef void (*gguf_done_fn)(void *user, const wpack_tensor *t);
int gguf_export(const wpack_archive *ar, int fd, unsigned read_flags, gguf_done_fn done,
                void *user, char *err, size_t errlen);

#endif
