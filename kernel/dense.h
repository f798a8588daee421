/* dense.h - internals of the dense-layer kernel shared by its files. */
#ifndef WPACK_KERNEL_DENSE_H
#define WPACK_KERNEL_DENSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bytes.h"
#include "wpack.h"
#include "wpack_dense.h"
#include "internal.h"

/* SIMD paths, best last. */
enum { WPK_ISA_SCALAR = 0, WPK_ISA_AVX2 = 1, WPK_ISA_AVX512 = 2, WPK_ISA_COUNT = 3 };

/* One forward call: what every row range needs. */
typedef struct wpk_dense_job {
    const wpack_linear *l;
    const float *x;
    float *y;
    size_t batch, in, out;
    int act;
    void *ctx;                  /* other users of the pool (zstd chunk decoding) */
} wpk_dense_job;

/* Compute y[:, o0:o1] for every batch row. o0 is a multiple of
 * WPK_DENSE_ROW_TILE (so results never depend on how rows are split). */
typedef void (*wpk_dense_rows_fn)(const wpk_dense_job *j, size_t o0, size_t o1);
#define WPK_DENSE_ROW_TILE 4

void wpk_dense_rows_scalar(const wpk_dense_job *j, size_t o0, size_t o1);
void wpk_dense_rows_avx2(const wpk_dense_job *j, size_t o0, size_t o1);
void wpk_dense_rows_avx512(const wpk_dense_job *j, size_t o0, size_t o1);

/* Which paths the CPU and OS support (CPUID + XGETBV), and the one in use:
 * the best, or the one wpack_dense_configure() forced; -1 when the forced
 * one is unusable. wpk_isa_select: name NULL or "" for the best; an unknown
 * or unsupported name selects -1 and returns WPACK_E_UNSUPPORTED, saying
 * which in err (escaped). */
int wpk_isa_supported(int isa);
int wpk_isa_selected(void);
int wpk_isa_select(const char *name, char *err, size_t errlen);
const char *wpk_isa_name(int isa);
/* Run rows [0, out) with a given path on pool (NULL: the caller alone),
 * rows split for `threads` threads. */
int wpk_linear_forward_on(wpack_pool *pool, const wpack_linear *l, const float *x, float *y,
                          size_t batch, int act, int isa, unsigned threads);
/* The same on the default pool; for tests. */
int wpk_linear_forward_isa(const wpack_linear *l, const float *x, float *y, size_t batch,
                           int act, int isa, unsigned threads);

/* The default pool (dense_default.c), created on first call: WPACK_OK with
 * *pool NULL while the settings ask for one thread (no pool is made then,
 * so that threads configured later still come), WPACK_E_NOMEM. And the
 * multiply-adds below which a call runs on the caller. */
int wpk_default_pool(wpack_pool **pool);
uint64_t wpk_min_parallel(void);

/* Threads of a pool asked for `threads` (0: online CPUs), capped. */
#define WPK_POOL_MAX 256
unsigned wpk_pool_size(unsigned threads);
/* Run fn over [0, n) in chunks of `chunk` (a multiple of WPK_DENSE_ROW_TILE
 * for rows) on pool (NULL: the caller alone), split for up to `threads`
 * threads including the caller. */
void wpk_pool_run(wpack_pool *pool, const wpk_dense_job *j, wpk_dense_rows_fn fn, size_t n,
                  size_t chunk, unsigned threads);

/* out = act(acc * scale[o] + bias[o]): the epilogue every path shares. */
static inline float wpk_dense_finish(const wpack_linear *l, size_t o, float acc, int act)
{
    if (l->scale) {
        float s;
        memcpy(&s, (const uint8_t *)l->scale + 4 * o, 4);
        acc *= s;
    }
    if (l->bias) {
        float b;
        if (l->bias_dtype == WPACK_DTYPE_F32) {
            memcpy(&b, (const uint8_t *)l->bias + 4 * o, 4);
        } else {
            uint16_t h;
            memcpy(&h, (const uint8_t *)l->bias + 2 * o, 2);
            b = l->bias_dtype == WPACK_DTYPE_F16 ? wpk_f16_to_f32(h) : wpk_bf16_to_f32(h);
        }
        acc += b;
    }
    if (act == WPACK_ACT_RELU && !(acc > 0.0f))
        acc = acc != acc ? acc : 0.0f; /* ReLU keeps NaN, like torch */
    return acc;
}

static inline size_t wpk_dtype_bytes(int dtype)
{
    return dtype == WPACK_DTYPE_F32 ? 4 : dtype == WPACK_DTYPE_I8 ? 1 : 2;
}

#endif
