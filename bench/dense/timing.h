/* timing.h - how the bench_dense files time calls: the clock, blocks of
 * calls, medians. */
#ifndef BENCH_TIMING_H
#define BENCH_TIMING_H
#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort order of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Timing: the implementations of one comparison are measured in
 * interleaved rounds (OpenBLAS, then each wpack variant, again and
 * again), each block 10 ms of warm-up calls then up to BENCH_BLOCK_CALLS
 * calls, and each gets the median of all its calls. On a shared machine
 * whose load changes from second to second, every implementation thus
 * sees the same mix of quiet and busy moments, so the ratios of one run
 * are comparable. */
#define BENCH_ROUNDS_MAX 8
#define BENCH_BLOCK_CALLS 200

typedef struct {
    double t[BENCH_ROUNDS_MAX * BENCH_BLOCK_CALLS];
    int n;
} bench_samples;

typedef void (*bench_fn)(void *ctx);

/* Untimed calls before a block: on this VM a thread woken from sleep takes
 * 1-5 ms to run, so one warm-up call left the first milliseconds of a
 * block to whichever library's threads happened to be awake. */
#define BENCH_WARMUP_S 0.01

/* One block of calls of fn(ctx), at most block_s seconds (at least 3
 * calls), appended to s. */
static inline void bench_block(bench_fn fn, void *ctx, double block_s, bench_samples *s)
{
    double warm = bench_now();
    do /* page in, wake the threads */
        fn(ctx);
    while (bench_now() - warm < BENCH_WARMUP_S);
    double start = bench_now();
    for (int i = 0; i < BENCH_BLOCK_CALLS && (i < 3 || bench_now() - start < block_s); i++) {
        double t0 = bench_now();
        fn(ctx);
        s->t[s->n++] = bench_now() - t0;
    }
}

static inline double bench_median(bench_samples *s)
{
    qsort(s->t, (size_t)s->n, sizeof *s->t, bench_cmp_double);
    return s->t[s->n / 2];
}
#endif
