/*
 * ceiling.c - the most the batch-1 call could show against OpenBLAS f32 on
 * the cache-resident 512x784 layer, per weight dtype, on this machine.
 *
 * With T threads each core computes out/T rows of the layer; here one
 * thread computes just such a share (512/T x 784) alone, so the pool's
 * hand-offs and the other core cost nothing and the share stays in that
 * core's caches as it does in the real call. The pooled call cannot beat
 * that time, so OpenBLAS's time on the whole layer (T threads) over it is
 * an upper bound for the ratio in the main table. A goal above its
 * ceiling cannot be met on this CPU by scheduling, prefetching or the
 * pool; only fewer instructions per weight would do (see README.md).
 * Both sides are medians of their calls, timed like the main table
 * (bench_block, timing.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "ceiling.h"
#include "dense.h"
#include "timing.h"

#define LAYER_OUT 512
#define LAYER_IN 784

/* One timed call each: OpenBLAS on the whole layer, wpack on one share. */
typedef struct {
    const float *w, *x;
    float *y;
} blas_call;

static void run_blas(void *p)
{
    blas_call *c = p;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, LAYER_OUT, LAYER_IN, 1.0f, c->w, LAYER_IN, c->x, 1,
                0.0f, c->y, 1);
}

typedef struct {
    wpack_linear l;
    const float *x;
    float *y;
    int isa;
} share_call;

static void run_share(void *p)
{
    share_call *c = p;
    wpk_linear_forward_isa(&c->l, c->x, c->y, 1, WPACK_ACT_NONE, c->isa, 1);
}

/* n weights in dtype dt: normal numbers in [-0.5, 0.5) (no subnormals,
 * which some CPUs run slowly), i8 in [-127, 127]. */
static void fill_weights(uint8_t *w, int dt, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float f = src[i];
        uint32_t u;
        memcpy(&u, &f, 4);
        if (dt == WPACK_DTYPE_F32) {
            memcpy(w + 4 * i, &f, 4);
        } else if (dt == WPACK_DTYPE_BF16) {
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(w + 2 * i, &h, 2);
        } else if (dt == WPACK_DTYPE_F16) {
            /* |f| in [2^-14, 0.5): rebias the exponent, keep 10 mantissa bits */
            int e = (int)((u >> 23) & 0xff) - 127 + 15;
            uint16_t h = e < 1 ? 0 : (uint16_t)(((u >> 16) & 0x8000) | (uint32_t)e << 10 |
                                                 ((u >> 13) & 0x3ff));
            memcpy(w + 2 * i, &h, 2);
        } else {
            w[i] = (uint8_t)(int8_t)(f * 254.0f);
        }
    }
}

void print_ceiling(unsigned threads, double block_s, int rounds)
{
    int isa = wpk_isa_selected();
    if (isa < 0)
        return;
    size_t n = (size_t)LAYER_OUT * LAYER_IN;
    float *wf = malloc(n * 4), *x = malloc(LAYER_IN * 4), *y = malloc(LAYER_OUT * 4);
    size_t share = (LAYER_OUT + threads - 1) / threads; /* rows one core computes */
    float *scale = malloc(LAYER_OUT * 4);
    uint8_t *wq[4];
    static bench_samples sb, sw[4];
    for (int k = 0; k < 4; k++)
        wq[k] = malloc(n * 4);
    if (!wf || !x || !y || !scale || !wq[0] || !wq[1] || !wq[2] || !wq[3]) {
        fprintf(stderr, "ceiling: out of memory\n");
        exit(1);
    }
    uint32_t r = 7;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        wf[i] = (float)((r >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int o = 0; o < LAYER_OUT; o++)
        scale[o] = 1.0f / 254.0f;
    for (int i = 0; i < LAYER_IN; i++)
        x[i] = (float)(i % 13) * 0.1f - 0.6f;
    static const struct { const char *name; int dt; const char *goal; } v[] = {
        {"f32", WPACK_DTYPE_F32, "1.0"}, {"bf16", WPACK_DTYPE_BF16, "1.8"},
        {"f16", WPACK_DTYPE_F16, "1.8"}, {"int8", WPACK_DTYPE_I8, "3.0"}};
    blas_call bc = {wf, x, y};
    share_call sc[4];
    for (int k = 0; k < 4; k++) {
        fill_weights(wq[k], v[k].dt, wf, share * LAYER_IN);
        share_call one = {{LAYER_IN, share, v[k].dt, wq[k],
                           v[k].dt == WPACK_DTYPE_I8 ? scale : NULL, 0, NULL}, x, y, isa};
        sc[k] = one;
    }
    sb.n = 0;
    for (int k = 0; k < 4; k++)
        sw[k].n = 0;
    for (int round = 0; round < rounds; round++) {
        bench_block(run_blas, &bc, block_s, &sb);
        usleep(300000); /* OpenBLAS's idle threads spin ~0.1 s: let them sleep */
        for (int k = 0; k < 4; k++)
            bench_block(run_share, &sc[k], block_s, &sw[k]);
    }
    double blas = bench_median(&sb);
    printf("\n# ceiling at batch 1 (%s): one thread computes one core's share of %dx%d "
           "(%zux%d) alone; see ceiling.c\n",
           wpk_isa_name(isa), LAYER_OUT, LAYER_IN, share, LAYER_IN);
    printf("| weights | share alone, us | OpenBLAS f32 %dx%d, %u threads, us | ceiling x OpenBLAS"
           " | goal |\n", LAYER_OUT, LAYER_IN, threads);
    printf("|---|---|---|---|---|\n");
    for (int k = 0; k < 4; k++) {
        double alone = bench_median(&sw[k]);
        printf("| %s | %.2f | %.2f | %.2f | %s |\n", v[k].name, alone * 1e6, blas * 1e6,
               blas / alone, v[k].goal);
    }
    fflush(stdout);
    free(wf);
    free(x);
    free(y);
    free(scale);
    for (int k = 0; k < 4; k++)
        free(wq[k]);
}
