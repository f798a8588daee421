/*
 * ceiling.c - the most the batch-1 loop can give on this machine, per
 * weight dtype, as a ratio against OpenBLAS f32 on a cache-resident layer.
 *
 * The kernel runs on one core over a layer small enough to stay in L1
 * (32x784), so memory and the thread pool cost nothing: what is left is
 * the loop's own work per weight (load, widen, multiply-add). Scaled to
 * the 512x784 layer split over the run's threads, that time is a lower
 * bound for the real call, and OpenBLAS's time on 512x784 over it is an
 * upper bound for the ratio the bench can show there. A goal above its
 * ceiling cannot be met on this CPU by scheduling, prefetching or the
 * pool; only fewer instructions per weight would do (see README.md).
 * Both sides use the 10th percentile of their calls: the quiet moments of
 * a shared machine, which keeps the bound optimistic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "ceiling.h"
#include "dense.h"

#define CEIL_OUT 32
#define CEIL_IN 784
#define LAYER_OUT 512
#define LAYER_IN 784
#define CALLS 4000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double p10(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 10];
}

/* 10th-percentile seconds of one batch-1 call of l on one thread. */
static double time_wpack(const wpack_linear *l, const float *x, float *y, int isa, double *t)
{
    double warm = now_s();
    while (now_s() - warm < 0.01)
        wpk_linear_forward_isa(l, x, y, 1, WPACK_ACT_NONE, isa, 1);
    for (int i = 0; i < CALLS; i++) {
        double t0 = now_s();
        wpk_linear_forward_isa(l, x, y, 1, WPACK_ACT_NONE, isa, 1);
        t[i] = now_s() - t0;
    }
    return p10(t, CALLS);
}

static double time_blas(const float *w, const float *x, float *y, double *t)
{
    double warm = now_s();
    while (now_s() - warm < 0.01)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, LAYER_OUT, LAYER_IN, 1.0f, w, LAYER_IN, x, 1,
                    0.0f, y, 1);
    for (int i = 0; i < CALLS; i++) {
        double t0 = now_s();
        cblas_sgemv(CblasRowMajor, CblasNoTrans, LAYER_OUT, LAYER_IN, 1.0f, w, LAYER_IN, x, 1,
                    0.0f, y, 1);
        t[i] = now_s() - t0;
    }
    return p10(t, CALLS);
}

/* The small layer's weights in dtype dt: normal numbers in [-0.5, 0.5)
 * (no subnormals, which some CPUs run slowly), i8 in [-127, 127]. */
static void fill_weights(uint8_t *w, int dt, const float *src)
{
    for (size_t i = 0; i < (size_t)CEIL_OUT * CEIL_IN; i++) {
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

void print_ceiling(unsigned threads)
{
    int isa = wpk_isa_selected();
    if (isa < 0)
        return;
    size_t n = (size_t)LAYER_OUT * LAYER_IN;
    float *wf = malloc(n * 4), *x = malloc(LAYER_IN * 4), *y = malloc(LAYER_OUT * 4);
    float *scale = malloc(CEIL_OUT * 4);
    uint8_t *wq = malloc((size_t)CEIL_OUT * CEIL_IN * 4);
    double *t = malloc(CALLS * sizeof *t);
    if (!wf || !x || !y || !scale || !wq || !t) {
        fprintf(stderr, "ceiling: out of memory\n");
        exit(1);
    }
    uint32_t r = 7;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        wf[i] = (float)((r >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    for (int o = 0; o < CEIL_OUT; o++)
        scale[o] = 1.0f / 254.0f;
    for (int i = 0; i < LAYER_IN; i++)
        x[i] = (float)(i % 13) * 0.1f - 0.6f;
    double blas = time_blas(wf, x, y, t);
    printf("\n# ceiling of the batch-1 loop (%s, one core, a %dx%d layer in L1; "
           "10th-percentile calls; see ceiling.c)\n",
           wpk_isa_name(isa), CEIL_OUT, CEIL_IN);
    printf("| weights | ns per 1000 weights | ceiling x OpenBLAS f32 on %dx%d, %u threads | goal |\n",
           LAYER_OUT, LAYER_IN, threads);
    printf("|---|---|---|---|\n");
    static const struct { const char *name; int dt; const char *goal; } v[] = {
        {"f32", WPACK_DTYPE_F32, "1.0"}, {"bf16", WPACK_DTYPE_BF16, "1.8"},
        {"f16", WPACK_DTYPE_F16, "1.8"}, {"int8", WPACK_DTYPE_I8, "3.0"}};
    for (int k = 0; k < 4; k++) {
        fill_weights(wq, v[k].dt, wf);
        wpack_linear l = {CEIL_IN, CEIL_OUT, v[k].dt, wq, v[k].dt == WPACK_DTYPE_I8 ? scale : NULL,
                          0, NULL};
        double per_weight = time_wpack(&l, x, y, isa, t) / ((double)CEIL_OUT * CEIL_IN);
        double best = per_weight * (double)n / threads;
        printf("| %s | %.1f | %.2f | %s |\n", v[k].name, per_weight * 1e12, blas / best, v[k].goal);
    }
    fflush(stdout);
    free(wf);
    free(x);
    free(y);
    free(scale);
    free(wq);
    free(t);
}
