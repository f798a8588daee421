/*
 * dense_tile.h - the SIMD body shared by dense_avx2.c and dense_avx512.c,
 * included once by each after defining:
 *   WPK_T           the target attribute of every function here
 *   WPK_FN(name)    name with the path's suffix
 *   VL, V           lanes and vector type (f32)
 *   VZERO() VFMA(a, b, c) VLOADX(p) VREDUCE(v)
 *   VLOAD_F32(p) VLOAD_F16(p) VLOAD_BF16(p) VLOAD_I8(p)  VL weights at p, as f32
 *   VLOAD_BF16_GEMV(p)  optional: bf16 for batch 1 (exactly the same values)
 *   TILE_RN         batch rows per register tile (acc = 4 x TILE_RN vectors)
 *   GEMV_PF_MIN_BYTES  weight bytes from which batch 1 prefetches the next tile
 *   GEMV_KICK_BYTES    bytes of each next-tile row batch 1 starts early (0: never)
 *   GEMV_KICK_MIN_BYTES  weight bytes from which it does
 *
 * A register tile is RM (4, or 1 for the last rows) weight rows x RN batch
 * rows: every weight vector is loaded (and widened) once and used RN times,
 * both operands are contiguous along K, so the archive's row-major weights
 * are used as they are. Batch 1 has its own loop (wpk_gemv_tile, below).
 * Each output's sum is one accumulator chain in k order, whatever RM, RN or
 * the thread split: results do not depend on the tiling.
 */
#define WPK_INLINE static inline __attribute__((always_inline)) WPK_T

WPK_INLINE V wpk_load_w(const uint8_t *p, int dt)
{
    switch (dt) {
    case WPACK_DTYPE_F32: return VLOAD_F32(p);
    case WPACK_DTYPE_F16: return VLOAD_F16(p);
    case WPACK_DTYPE_BF16: return VLOAD_BF16(p);
    default: return VLOAD_I8(p);
    }
}

#ifndef VLOAD_BF16_GEMV
#define VLOAD_BF16_GEMV VLOAD_BF16
#endif
WPK_INLINE V wpk_load_w_gemv(const uint8_t *p, int dt)
{
    return dt == WPACK_DTYPE_BF16 ? VLOAD_BF16_GEMV(p) : wpk_load_w(p, dt);
}

/* The accumulators are named variables, not an array, so that they stay in
 * registers (GCC keeps a V[4][6] array on the stack); statements for rows
 * r >= RM or batch rows n >= RN fold away once RM and RN are constants. */
#define WPK_ACC_ROW(r) V a##r##0 = VZERO(), a##r##1 = VZERO(), a##r##2 = VZERO(), \
    a##r##3 = VZERO(), a##r##4 = VZERO(), a##r##5 = VZERO()
#define WPK_FMA_ROW(r, wsrc)                                                   \
    if (RM > r) {                                                              \
        V wv = wpk_load_w(wsrc, dt);                                           \
        if (RN > 0) a##r##0 = VFMA(wv, x0, a##r##0);                           \
        if (RN > 1) a##r##1 = VFMA(wv, x1, a##r##1);                           \
        if (RN > 2) a##r##2 = VFMA(wv, x2, a##r##2);                           \
        if (RN > 3) a##r##3 = VFMA(wv, x3, a##r##3);                           \
        if (RN > 4) a##r##4 = VFMA(wv, x4, a##r##4);                           \
        if (RN > 5) a##r##5 = VFMA(wv, x5, a##r##5);                           \
    }
#define WPK_STORE(r, n)                                                        \
    if (RM > r && RN > n) {                                                    \
        float v_ = wpk_dense_finish(j->l, o + r, VREDUCE(a##r##n), j->act);    \
        memcpy(j->y + (b + n) * j->out + o + r, &v_, 4);                       \
    }
#define WPK_STORE_ROW(r) WPK_STORE(r, 0) WPK_STORE(r, 1) WPK_STORE(r, 2) \
    WPK_STORE(r, 3) WPK_STORE(r, 4) WPK_STORE(r, 5)

WPK_INLINE void wpk_tile(const wpk_dense_job *j, const uint8_t *wbase, size_t o, size_t b,
                         const int RM, const int RN, const int dt)
{
    const size_t in = j->in, es = wpk_dtype_bytes(dt);
    const float *x = j->x + b * in;
    const uint8_t *w = wbase + o * in * es;
    const uint8_t *w0 = w, *w1 = w + in * es, *w2 = w + 2 * in * es, *w3 = w + 3 * in * es;
    WPK_ACC_ROW(0);
    WPK_ACC_ROW(1);
    WPK_ACC_ROW(2);
    WPK_ACC_ROW(3);
    V x0 = VZERO(), x1 = VZERO(), x2 = VZERO(), x3 = VZERO(), x4 = VZERO(), x5 = VZERO();
    size_t k = 0;
    for (; k + VL <= in; k += VL) {
        if (RN > 0) x0 = VLOADX(x + k);
        if (RN > 1) x1 = VLOADX(x + in + k);
        if (RN > 2) x2 = VLOADX(x + 2 * in + k);
        if (RN > 3) x3 = VLOADX(x + 3 * in + k);
        if (RN > 4) x4 = VLOADX(x + 4 * in + k);
        if (RN > 5) x5 = VLOADX(x + 5 * in + k);
        WPK_FMA_ROW(0, w0 + k * es)
        WPK_FMA_ROW(1, w1 + k * es)
        WPK_FMA_ROW(2, w2 + k * es)
        WPK_FMA_ROW(3, w3 + k * es)
    }
    if (k < in) {
        /* The last partial vector, through zero-padded copies. */
        size_t rest = in - k;
        float xt[6][VL];
        uint8_t wt[4][VL * 4];
        memset(xt, 0, sizeof xt);
        memset(wt, 0, sizeof wt);
        for (int n = 0; n < RN; n++)
            memcpy(xt[n], x + n * in + k, rest * 4);
        for (int r = 0; r < RM; r++)
            memcpy(wt[r], w + (r * in + k) * es, rest * es);
        if (RN > 0) x0 = VLOADX(xt[0]);
        if (RN > 1) x1 = VLOADX(xt[1]);
        if (RN > 2) x2 = VLOADX(xt[2]);
        if (RN > 3) x3 = VLOADX(xt[3]);
        if (RN > 4) x4 = VLOADX(xt[4]);
        if (RN > 5) x5 = VLOADX(xt[5]);
        WPK_FMA_ROW(0, wt[0])
        WPK_FMA_ROW(1, wt[1])
        WPK_FMA_ROW(2, wt[2])
        WPK_FMA_ROW(3, wt[3])
    }
    WPK_STORE_ROW(0)
    WPK_STORE_ROW(1)
    WPK_STORE_ROW(2)
    WPK_STORE_ROW(3)
}

/* Batch 1 (GEMV): the weight stream is all the work, so what counts is how
 * many independent cache lines are in flight. RM (8, 4 or 1) weight rows
 * are streamed at once, 64 bytes (one line) of each per step, one
 * accumulator per row (8 independent FMA chains); x stays in L1/L2. The
 * hardware prefetchers follow the 8 streams but stop at 4 KiB pages (an i8
 * row of 4096 is one page), so each step also asks for the same line of the
 * next tile's rows into L2 (_MM_HINT_T1) - only inside this chunk, so two
 * threads do not fetch each other's rows. Measured on the AVX-512 EPYC of
 * bench/dense/README.md: 8 rows beat 4 (and 12-16, which spill); prefetching
 * the same row ahead into L1 was slower than none. The prefetch can only pay
 * for weights streamed from DRAM, so a path does it (PF) only for layers of
 * at least GEMV_PF_MIN_BYTES; on the AVX2 EPYC (Zen 3) it was slower in
 * every case, in cache and from DRAM, so that path never does it. There,
 * a lighter hint pays instead (GEMV_KICK_BYTES, when PF is off): during the
 * last GEMV_KICK_BYTES of the tile's rows, each step fetches one line of
 * the first GEMV_KICK_BYTES of the next tile's rows into L1, so those
 * streams have started when the tile begins and the hardware prefetcher
 * picks them up from there (per call A/B on Zen 3, two threads, lines of
 * 1 KiB vs none: int8 +8-12%, bf16 +4%, f32 +1-2% from DRAM; a prefetch
 * on every step was slower). In layers that stay in L2/L3 the kick only
 * costs (session 5, interleaved in one process: 3-10% a call), so it runs
 * from GEMV_KICK_MIN_BYTES of weights on. Each row's sum is the same
 * single chain in k order as wpk_tile's, so the results do not depend on
 * RM (or on how rows are split between threads). */
#define WPK_G_ACC(r) V g##r = VZERO()
#define WPK_G_FMA(r, off)                                                      \
    if (RM > r)                                                                \
        g##r = VFMA(wpk_load_w_gemv(w##r + (off) * es, dt), xv, g##r);
#define WPK_G_FMA_ALL(off) WPK_G_FMA(0, off) WPK_G_FMA(1, off) WPK_G_FMA(2, off) \
    WPK_G_FMA(3, off) WPK_G_FMA(4, off) WPK_G_FMA(5, off) WPK_G_FMA(6, off) WPK_G_FMA(7, off)
#define WPK_G_PF(r)                                                            \
    if (PF && RM > r)                                                          \
        _mm_prefetch((const char *)(w##r + k * es) + next, _MM_HINT_T1);
#define WPK_G_KICK(r)                                                          \
    if (RM > r)                                                                \
        _mm_prefetch((const char *)w##r + kick_off, _MM_HINT_T0);
#define WPK_G_STORE(r)                                                         \
    if (RM > r) {                                                              \
        float v_ = wpk_dense_finish(j->l, o + r, VREDUCE(g##r), j->act);       \
        memcpy(j->y + o + r, &v_, 4);                                          \
    }

WPK_INLINE void wpk_gemv_tile(const wpk_dense_job *j, const uint8_t *wbase, size_t o,
                              size_t o1, const int RM, const int PF, int kick_on, const int dt)
{
    const size_t in = j->in, es = wpk_dtype_bytes(dt), row = in * es;
    const float *x = j->x;
    const uint8_t *w0 = wbase + o * row, *w1 = w0 + row, *w2 = w1 + row, *w3 = w2 + row;
    const uint8_t *w4 = w3 + row, *w5 = w4 + row, *w6 = w5 + row, *w7 = w6 + row;
    /* offset from a row to the same row of the next tile; 0 (the line
     * just loaded, a no-op) when that tile is not in this chunk */
    const size_t next = o + 2 * (size_t)RM <= o1 ? (size_t)RM * row : 0;
    /* the kick (see above): from byte kick_from of a row on, the line at
     * next + (byte + kick - row) of the same row in the next tile */
#if GEMV_KICK_BYTES
    const size_t kick = kick_on && !PF && next ? (row < GEMV_KICK_BYTES ? row : GEMV_KICK_BYTES) : 0;
#else
    (void)kick_on;
    const size_t kick = 0;
#endif
    const size_t kick_from = kick ? row - kick : SIZE_MAX;
    WPK_G_ACC(0); WPK_G_ACC(1); WPK_G_ACC(2); WPK_G_ACC(3);
    WPK_G_ACC(4); WPK_G_ACC(5); WPK_G_ACC(6); WPK_G_ACC(7);
    const size_t step = 64 / es;      /* elements in one cache line of a row */
    const int U = (int)(step / VL);   /* vectors in it */
    size_t k = 0;
    for (; k + step <= in; k += step) {
        WPK_G_PF(0) WPK_G_PF(1) WPK_G_PF(2) WPK_G_PF(3)
        WPK_G_PF(4) WPK_G_PF(5) WPK_G_PF(6) WPK_G_PF(7)
        if (k * es >= kick_from) {
            const size_t kick_off = next + k * es + kick - row;
            WPK_G_KICK(0) WPK_G_KICK(1) WPK_G_KICK(2) WPK_G_KICK(3)
            WPK_G_KICK(4) WPK_G_KICK(5) WPK_G_KICK(6) WPK_G_KICK(7)
        }
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) {
            V xv = VLOADX(x + k + (size_t)u * VL);
            WPK_G_FMA_ALL(k + (size_t)u * VL)
        }
    }
    for (; k + VL <= in; k += VL) {
        V xv = VLOADX(x + k);
        WPK_G_FMA_ALL(k)
    }
    if (k < in) {
        /* the last partial vector, through zero-padded copies */
        size_t rest = in - k;
        float xt[VL];
        uint8_t wt[8][VL * 4];
        memset(xt, 0, sizeof xt);
        memset(wt, 0, sizeof wt);
        memcpy(xt, x + k, rest * 4);
        for (int r = 0; r < RM; r++)
            memcpy(wt[r], wbase + (o + (size_t)r) * row + k * es, rest * es);
        V xv = VLOADX(xt);
        const uint8_t *t0 = wt[0], *t1 = wt[1], *t2 = wt[2], *t3 = wt[3];
        const uint8_t *t4 = wt[4], *t5 = wt[5], *t6 = wt[6], *t7 = wt[7];
#define WPK_G_FMA_T(r) if (RM > r) g##r = VFMA(wpk_load_w_gemv(t##r, dt), xv, g##r);
        WPK_G_FMA_T(0) WPK_G_FMA_T(1) WPK_G_FMA_T(2) WPK_G_FMA_T(3)
        WPK_G_FMA_T(4) WPK_G_FMA_T(5) WPK_G_FMA_T(6) WPK_G_FMA_T(7)
#undef WPK_G_FMA_T
    }
    WPK_G_STORE(0) WPK_G_STORE(1) WPK_G_STORE(2) WPK_G_STORE(3)
    WPK_G_STORE(4) WPK_G_STORE(5) WPK_G_STORE(6) WPK_G_STORE(7)
}

/* All batch rows for RM weight rows at o, in groups of TILE_RN. */
WPK_INLINE void wpk_rows_batch(const wpk_dense_job *j, const uint8_t *w, size_t o, const int RM,
                               const int dt)
{
    size_t b = 0;
    for (; b + TILE_RN <= j->batch; b += TILE_RN)
        wpk_tile(j, w, o, b, RM, TILE_RN, dt);
    switch (j->batch - b) {
#if TILE_RN > 5
    case 5: wpk_tile(j, w, o, b, RM, 5, dt); break;
#endif
#if TILE_RN > 4
    case 4: wpk_tile(j, w, o, b, RM, 4, dt); break;
#endif
#if TILE_RN > 3
    case 3: wpk_tile(j, w, o, b, RM, 3, dt); break;
#endif
#if TILE_RN > 2
    case 2: wpk_tile(j, w, o, b, RM, 2, dt); break;
#endif
    case 1: wpk_tile(j, w, o, b, RM, 1, dt); break;
    default: break;
    }
}

WPK_INLINE void wpk_rows_dtype(const wpk_dense_job *j, size_t o0, size_t o1, const int dt)
{
    const uint8_t *w = j->l->weight;
    size_t o = o0;
    if (j->batch == 1) {
        /* how far ahead batch 1 fetches depends on the layer's size (see
         * wpk_gemv_tile): decided here, once per call */
        const uint64_t bytes = (uint64_t)j->out * j->in * wpk_dtype_bytes(dt);
        const int kick = bytes >= (uint64_t)GEMV_KICK_MIN_BYTES;
        if (bytes >= (uint64_t)GEMV_PF_MIN_BYTES) {
            for (; o + 8 <= o1; o += 8)
                wpk_gemv_tile(j, w, o, o1, 8, 1, kick, dt);
        } else {
            for (; o + 8 <= o1; o += 8)
                wpk_gemv_tile(j, w, o, o1, 8, 0, kick, dt);
        }
        for (; o + 4 <= o1; o += 4)
            wpk_gemv_tile(j, w, o, o1, 4, 0, kick, dt);
        for (; o < o1; o++)
            wpk_gemv_tile(j, w, o, o1, 1, 0, kick, dt);
        return;
    }
    for (; o + 4 <= o1; o += 4)
        wpk_rows_batch(j, w, o, 4, dt);
    for (; o < o1; o++)
        wpk_rows_batch(j, w, o, 1, dt);
}

#define WPK_ROWS_FOR(dt, tag) \
    static WPK_T void WPK_FN(rows_##tag)(const wpk_dense_job *j, size_t o0, size_t o1) \
    { wpk_rows_dtype(j, o0, o1, dt); }
WPK_ROWS_FOR(WPACK_DTYPE_F32, f32)
WPK_ROWS_FOR(WPACK_DTYPE_F16, f16)
WPK_ROWS_FOR(WPACK_DTYPE_BF16, bf16)
WPK_ROWS_FOR(WPACK_DTYPE_I8, i8)

WPK_T void WPK_FN(wpk_dense_rows)(const wpk_dense_job *j, size_t o0, size_t o1)
{
    switch (j->l->weight_dtype) {
    case WPACK_DTYPE_F32: WPK_FN(rows_f32)(j, o0, o1); break;
    case WPACK_DTYPE_F16: WPK_FN(rows_f16)(j, o0, o1); break;
    case WPACK_DTYPE_BF16: WPK_FN(rows_bf16)(j, o0, o1); break;
    default: WPK_FN(rows_i8)(j, o0, o1); break;
    }
}
