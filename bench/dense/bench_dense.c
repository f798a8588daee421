/*
 * bench_dense.c - GB/s of weights streamed and GFLOP/s of the dense kernel,
 * as ratios against OpenBLAS (cblas_sgemv / cblas_sgemm on the same f32
 * weights, same thread count) and against the read bandwidth measured in
 * the same run. Times are medians of repeated calls, the implementations
 * measured in interleaved rounds (see bench_block in timing.h).
 * Usage: bench_dense [--quick] [--shape OUTxIN]   (WPACK_THREADS sets the thread count)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "ceiling.h"
#include "readbw.h"
#include "timing.h"
#include "wpack.h"
#include "wpack_dense.h"

void openblas_set_num_threads(int);
char *openblas_get_corename(void);
char *openblas_get_config(void);

typedef struct {
    size_t out, in, batch;
    const float *wf, *x, *bias;
    float *y;
    wpack_linear l;
} bench_ctx;

static void run_blas(void *p)
{
    bench_ctx *c = p;
    if (c->batch == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)c->out, (int)c->in, 1.0f, c->wf, (int)c->in,
                    c->x, 1, 0.0f, c->y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->batch, (int)c->out,
                    (int)c->in, 1.0f, c->x, (int)c->in, c->wf, (int)c->in, 0.0f, c->y,
                    (int)c->out);
}

static void run_wpack(void *p)
{
    bench_ctx *c = p;
    if (wpack_linear_forward(&c->l, c->x, c->y, c->batch, WPACK_ACT_NONE) != WPACK_OK) {
        fprintf(stderr, "wpack_linear_forward failed\n");
        exit(1);
    }
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* f32 -> f16 bits, round to nearest even (normal range only: |v| < 1 here). */
static uint16_t to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    if (e <= 0)
        return (uint16_t)sign;
    uint32_t m = u & 0x7fffff, r = m >> 13, rest = m & 0x1fff;
    uint32_t h = ((uint32_t)e << 10) | r;
    if (rest > 0x1000 || (rest == 0x1000 && (r & 1)))
        h++;
    return (uint16_t)(sign | h);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *only = NULL; /* --shape OUTxIN: just that one */
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[a], "--shape") == 0 && a + 1 < argc)
            only = argv[++a];
    }
    /* seconds of calls per block; rounds of blocks (see bench_block) */
    double block_s = quick ? 0.02 : 0.06;
    int rounds = quick ? 3 : 6;
    /* the library reads no environment: the bench passes WPACK_THREADS in */
    wpack_dense_settings set;
    wpack_dense_settings_init(&set);
    const char *env = getenv("WPACK_THREADS");
    set.threads = env && atoi(env) > 0 ? (unsigned)atoi(env) : 0;
    wpack_dense_configure(&set);
    unsigned threads = wpack_dense_threads();
    openblas_set_num_threads((int)threads);
    double bw = read_bandwidth_gbs((size_t)512 << 20, threads, quick ? 3 : 6);
    char cpu[600] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                snprintf(cpu, sizeof cpu, "%s", c ? c + 2 : line);
                cpu[strcspn(cpu, "\n")] = 0;
                break;
            }
        fclose(f);
    }
    printf("# CPU: %s, %u threads, wpack path %s, OpenBLAS core %s (%s)\n", cpu, threads,
           wpack_dense_isa(), openblas_get_corename(), openblas_get_config());
    printf("# read bandwidth (same run, %u threads): %.1f GB/s\n", threads, bw);
    printf("| out x in | batch | impl | weight GB/s | GFLOP/s | x OpenBLAS f32 | %% read BW |\n");
    printf("|---|---|---|---|---|---|---|\n");
    static const size_t shapes[][2] = {{4096, 4096}, {11008, 4096}, {512, 784}};
    static const size_t batches[] = {1, 8, 64};
    for (size_t s = 0; s < 3; s++) {
        size_t out = shapes[s][0], in = shapes[s][1], n = out * in;
        char name[64];
        snprintf(name, sizeof name, "%zux%zu", out, in);
        if (only && strcmp(only, name) != 0)
            continue;
        float *wf = malloc(n * 4), *scale = malloc(out * 4);
        uint16_t *wb = malloc(n * 2), *wh = malloc(n * 2);
        int8_t *wq = malloc(n);
        uint32_t r = 1;
        for (size_t i = 0; i < n; i++) {
            r = r * 1664525u + 1013904223u;
            wf[i] = (float)((r >> 9) & 0xffff) / 65536.0f - 0.5f;
            wb[i] = to_bf16(wf[i]);
            wh[i] = to_f16(wf[i]);
            wq[i] = (int8_t)lrintf(wf[i] * 254.0f);
        }
        for (size_t o = 0; o < out; o++)
            scale[o] = 1.0f / 254.0f;
        for (size_t bi = 0; bi < 3; bi++) {
            size_t batch = batches[bi];
            float *x = malloc(batch * in * 4), *y = malloc(batch * out * 4);
            for (size_t i = 0; i < batch * in; i++)
                x[i] = (float)(i % 13) * 0.1f - 0.6f;
            bench_ctx c = {out, in, batch, wf, x, NULL, y, {0}};
            double flops = 2.0 * (double)n * (double)batch;
            struct { const char *name; int dt; const void *w; size_t es; } v[] = {
                {"wpack f32", WPACK_DTYPE_F32, wf, 4}, {"wpack bf16", WPACK_DTYPE_BF16, wb, 2},
                {"wpack f16", WPACK_DTYPE_F16, wh, 2}, {"wpack int8", WPACK_DTYPE_I8, wq, 1}};
            static bench_samples sb, sw[4];
            sb.n = 0;
            for (int k = 0; k < 4; k++)
                sw[k].n = 0;
            for (int r = 0; r < rounds; r++) {
                /* Idle threads spin for a while after a call (OpenBLAS's
                 * much longer than wpack's ~60 us): let them go to sleep
                 * before the other library runs, so neither steals the
                 * other's cores. */
                usleep(2000);
                bench_block(run_blas, &c, block_s, &sb);
                for (int k = 0; k < 4; k++) {
                    wpack_linear l = {in, out, v[k].dt, v[k].w,
                                      v[k].dt == WPACK_DTYPE_I8 ? scale : NULL, 0, NULL};
                    c.l = l;
                    usleep(k == 0 ? 300000 : 2000);
                    bench_block(run_wpack, &c, block_s, &sw[k]);
                }
            }
            double tb = bench_median(&sb);
            printf("| %zux%zu | %zu | OpenBLAS f32 | %.1f | %.1f | 1.00 | %.0f%% |\n", out, in,
                   batch, n * 4 / tb / 1e9, flops / tb / 1e9, 100 * n * 4 / tb / 1e9 / bw);
            for (int k = 0; k < 4; k++) {
                double t = bench_median(&sw[k]);
                double gbs = n * v[k].es / t / 1e9;
                printf("| %zux%zu | %zu | %s | %.1f | %.1f | %.2f | %.0f%% |\n", out, in, batch,
                       v[k].name, gbs, flops / t / 1e9, tb / t, 100 * gbs / bw);
            }
            fflush(stdout);
            free(x);
            free(y);
        }
        free(wf);
        free(scale);
        free(wb);
        free(wh);
        free(wq);
    }
    if (!only || strcmp(only, "512x784") == 0)
        print_ceiling(threads, block_s, rounds);
    return 0;
}
