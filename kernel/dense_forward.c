/* dense_forward.c - wpack_linear_forward: check, pick the path, split rows. */
#include "dense.h"

static const wpk_dense_rows_fn paths[WPK_ISA_COUNT] = {
    wpk_dense_rows_scalar, wpk_dense_rows_avx2, wpk_dense_rows_avx512};

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
    /* the bind calls zero them: a layer with one set was not filled by them */
    return WPK_RESERVED_CHECK(l, "wpack_linear", "wpack_dense.h", NULL, 0) == WPACK_OK;
}

int wpk_linear_forward_on(wpack_pool *pool, const wpack_linear *l, const float *x, float *y,
                          size_t batch, int act, int isa, unsigned threads)
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
    if (!pool || threads <= 1 || work < wpk_min_parallel()) {
        paths[isa](&j, 0, j.out);
        return WPACK_OK;
    }
    /* About four chunks per thread, whole row tiles, so a slow thread does not
     * hold the others up and results do not depend on the split. */
    size_t chunk = (j.out + threads * 4 - 1) / (threads * 4);
    chunk = (chunk + WPK_DENSE_ROW_TILE - 1) / WPK_DENSE_ROW_TILE * WPK_DENSE_ROW_TILE;
    wpk_pool_run(pool, &j, paths[isa], j.out, chunk, threads);
    return WPACK_OK;
}

int wpk_linear_forward_isa(const wpack_linear *l, const float *x, float *y, size_t batch,
                           int act, int isa, unsigned threads)
{
    wpack_pool *pool = NULL;
    if (threads > 1)
        (void)wpk_default_pool(&pool); /* out of memory: the caller alone, as ever */
    return wpk_linear_forward_on(pool, l, x, y, batch, act, isa, threads);
}

int wpack_linear_forward_pool(wpack_pool *pool, const wpack_linear *l, const float *x, float *y,
                              size_t batch, int act)
{
    int isa = wpk_isa_selected();
    if (isa < 0)
        return WPACK_E_UNSUPPORTED;
    return wpk_linear_forward_on(pool, l, x, y, batch, act, isa, wpack_pool_threads(pool));
}

int wpack_linear_forward(const wpack_linear *l, const float *x, float *y, size_t batch, int act)
{
    int isa = wpk_isa_selected();
    if (isa < 0)
        return WPACK_E_UNSUPPORTED;
    /* the default pool only when the layer is worth it: small layers start no thread */
    wpack_pool *pool = NULL;
    uint64_t work;
    if ((!wpk_mul(batch, l ? l->out_features : 0, &work) ||
         !wpk_mul(work, l ? l->in_features : 0, &work) || work >= wpk_min_parallel()) &&
        wpk_default_pool(&pool))
        return WPACK_E_NOMEM;
    return wpk_linear_forward_on(pool, l, x, y, batch, act, isa, wpack_pool_threads(pool));
}
