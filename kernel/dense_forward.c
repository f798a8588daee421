/* dense_forward.c - wpack_linear_forward: check, pick the path, split rows. */
#include <stdlib.h>

#include "dense.h"

/* Multiply-adds below which the calling thread does everything: waking the
 * pool costs about as much as this much work (measured with bench/dense,
 * see bench/dense/README.md). WPACK_DENSE_MIN_PARALLEL overrides it. */
#define WPK_DENSE_MIN_PARALLEL_DEFAULT (1u << 17)

static const wpk_dense_rows_fn paths[WPK_ISA_COUNT] = {
    wpk_dense_rows_scalar, wpk_dense_rows_avx2, wpk_dense_rows_avx512};

static uint64_t min_parallel(void)
{
    static uint64_t v;
    static int done;
    if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        uint64_t m = WPK_DENSE_MIN_PARALLEL_DEFAULT;
        const char *env = getenv("WPACK_DENSE_MIN_PARALLEL");
        if (env && *env)
            m = strtoull(env, NULL, 10);
        __atomic_store_n(&v, m, __ATOMIC_RELAXED);
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&v, __ATOMIC_RELAXED);
}

static int valid_layer(const wpack_linear *l)
{
    int dt = l->weight_dtype;
    if (dt != WPACK_DTYPE_F32 && dt != WPACK_DTYPE_F16 && dt != WPACK_DTYPE_BF16 &&
        dt != WPACK_DTYPE_I8)
        return 0;
    if (!l->weight || !l->in_features || !l->out_features || (dt == WPACK_DTYPE_I8 && !l->scale))
        return 0;
    if (l->bias && l->bias_dtype != WPACK_DTYPE_F32 && l->bias_dtype != WPACK_DTYPE_F16 &&
        l->bias_dtype != WPACK_DTYPE_BF16)
        return 0;
    return 1;
}

int wpk_linear_forward_isa(const wpack_linear *l, const float *x, float *y, size_t batch,
                           int act, int isa, unsigned threads)
{
    if (!l || (act != WPACK_ACT_NONE && act != WPACK_ACT_RELU))
        return WPACK_E_INVALID_ARGUMENT;
    if (!valid_layer(l))
        return WPACK_E_DTYPE;
    if (batch == 0)
        return WPACK_OK;
    if (!x || !y)
        return WPACK_E_INVALID_ARGUMENT;
    uint64_t t;
    if (l->in_features > SIZE_MAX || l->out_features > SIZE_MAX ||
        !wpk_mul(batch, l->in_features, &t) || t > SIZE_MAX / 4 ||
        !wpk_mul(batch, l->out_features, &t) || t > SIZE_MAX / 4)
        return WPACK_E_INVALID_ARGUMENT;
    if (!wpk_isa_supported(isa))
        return WPACK_E_UNSUPPORTED;
    wpk_dense_job j = {l, x, y, batch, (size_t)l->in_features, (size_t)l->out_features, act};
    uint64_t work;
    if (!wpk_mul(t, l->in_features, &work))
        work = UINT64_MAX;
    if (threads <= 1 || work < min_parallel()) {
        paths[isa](&j, 0, j.out);
        return WPACK_OK;
    }
    /* About four chunks per thread, whole row tiles, so a slow thread does not
     * hold the others up and results do not depend on the split. */
    size_t chunk = (j.out + threads * 4 - 1) / (threads * 4);
    chunk = (chunk + WPK_DENSE_ROW_TILE - 1) / WPK_DENSE_ROW_TILE * WPK_DENSE_ROW_TILE;
    wpk_pool_run(&j, paths[isa], j.out, chunk, threads);
    return WPACK_OK;
}

int wpack_linear_forward(const wpack_linear *l, const float *x, float *y, size_t batch, int act)
{
    int isa = wpk_isa_selected();
    if (isa < 0)
        return WPACK_E_UNSUPPORTED;
    return wpk_linear_forward_isa(l, x, y, batch, act, isa, wpk_pool_threads());
}
