/* bench_stats.c - weight statistics (format/weightstats.c) against read
 * bandwidth, in one run: for f32, bf16 and f16, in cache (a 256 KiB buffer
 * fed again and again) and out of cache (256 MiB), the time of
 *   peer-sum   a plain sum of the buffer's 64-bit words (-O2: the read bandwidth)
 *   memcpy     the buffer into another one
 *   stats      wpk_acc_feed_isa on the best ISA, asked once (what the writer does)
 *   portable   the same on the portable path (WPACK_ISA=scalar)
 *   hist       wpk_hist_feed with 256 bins (--histogram 256)
 * Prints GB/s and "peer-sum time / time" (1.00: as fast as reading the data).
 * Benchmarks are not tests: this never fails on a slow figure.
 *
 * usage: bench_stats [MiB out of cache (256)] [repetitions (5)] [only this kind (for perf)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_features.h"
#include "internal.h"
#include "weightstats.h"
#include "wpack.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile uint64_t sink;
#ifndef OLD_API
static int best_isa;
#endif

/* The read-bandwidth peer: 4 independent chains so it is not add-latency bound. */
static void peer_sum(const void *p, size_t bytes)
{
    const uint64_t *w = p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t n = bytes / 8, i = 0;
    for (; i + 4 <= n; i += 4) {
        a += w[i];
        b += w[i + 1];
        c += w[i + 2];
        d += w[i + 3];
    }
    sink += a + b + c + d;
}

enum { PEER, MEMCPY, STATS, PORTABLE, HIST, NKIND };
static const char *const kind_name[NKIND] = {"peer-sum", "memcpy", "stats", "portable", "hist"};

static void run(int kind, int dtype, const void *p, void *dst, size_t bytes)
{
    size_t count = bytes / wpack_dtype_size(dtype);
    wpk_acc a;
    static uint64_t counts[256];
    switch (kind) {
    case PEER: peer_sum(p, bytes); break;
    case MEMCPY: memcpy(dst, p, bytes); sink += ((uint8_t *)dst)[bytes / 2]; break;
    case STATS:
    case PORTABLE:
        wpk_acc_init(&a);
#ifdef OLD_API /* before wpk_acc_feed_isa: the ISA was asked per 4096-element block */
        wpk_acc_feed_path(&a, dtype, p, count, kind == PORTABLE);
#else
        wpk_acc_feed_isa(&a, dtype, p, count, kind == PORTABLE ? WPK_CPU_SCALAR : best_isa);
#endif
        sink += a.n;
        break;
    default:
        wpk_hist_feed(counts, 256, -1, 1, dtype, p, count);
        sink += counts[7];
    }
}

/* Random weights in [-1, 1) of dtype. */
static void fill(int dtype, void *p, size_t bytes)
{
    uint64_t s = 88172645463325252ull;
    size_t size = wpack_dtype_size(dtype), n = bytes / size;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        float f = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        uint32_t u;
        memcpy(&u, &f, 4);
        if (dtype == WPACK_DTYPE_F32)
            memcpy((uint8_t *)p + 4 * i, &u, 4);
        else {
            uint16_t h = dtype == WPACK_DTYPE_BF16 ? wpk_to_bf16(f) : wpk_to_f16(f);
            memcpy((uint8_t *)p + 2 * i, &h, 2);
        }
    }
}

int main(int argc, char **argv)
{
    size_t big = (size_t)(argc > 1 ? atoi(argv[1]) : 256) << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    const char *only = argc > 3 ? argv[3] : NULL;
    const size_t small = 256 << 10;
    char cpu[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    for (char line[512]; f && fgets(line, sizeof line, f);)
        if (strncmp(line, "model name", 10) == 0) {
            snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
    double load[3] = {0};
    f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
        load[0] = -1;
    if (f)
        fclose(f);
    printf("weight stats benchmark: %s, AVX2 %d, AVX-512 %d, load %.2f %.2f %.2f\n", cpu,
           wpk_cpu_supports(WPK_CPU_AVX2), wpk_cpu_supports(WPK_CPU_AVX512), load[0], load[1],
           load[2]);
    /* What one ISA check costs (CPUID traps in a virtual machine). */
    double t0 = now();
    for (int i = 0; i < 100; i++)
        sink += (uint64_t)wpk_cpu_supports(WPK_CPU_AVX512);
    printf("one wpk_cpu_supports(AVX512): %.2f us\n", (now() - t0) / 100 * 1e6);
#ifndef OLD_API
    best_isa = wpk_acc_isa(0);
#endif
    uint8_t *src = aligned_alloc(4096, big), *dst = aligned_alloc(4096, big);
    if (!src || !dst) {
        fprintf(stderr, "bench_stats: cannot allocate 2 x %zu bytes\n", big);
        return 1;
    }
    memset(dst, 1, big);
    static const int dtypes[] = {WPACK_DTYPE_F32, WPACK_DTYPE_BF16, WPACK_DTYPE_F16};
    static const char *const dname[] = {"f32", "bf16", "f16"};
    printf("%-5s %-13s %-9s %9s %8s\n", "dtype", "buffer", "what", "GB/s", "vs-peer");
    for (int d = 0; d < 3; d++) {
        fill(dtypes[d], src, big);
        for (int where = 0; where < 2; where++) {
            size_t bytes = where ? big : small;
            /* In cache: enough passes over the 256 KiB for ~the same bytes. */
            size_t passes = where ? 1 : big / small;
            double best[NKIND];
            for (int k = 0; k < NKIND; k++)
                best[k] = 1e30;
            for (int r = 0; r < reps; r++)
                for (int k = 0; k < NKIND; k++) { /* interleaved */
                    if (only && k != PEER && strcmp(only, kind_name[k]) != 0)
                        continue;
                    double t0 = now();
                    for (size_t i = 0; i < passes; i++)
                        run(k, dtypes[d], src, dst, bytes);
                    double t = now() - t0;
                    best[k] = t < best[k] ? t : best[k];
                }
            for (int k = 0; k < NKIND; k++)
                if (best[k] < 1e30)
                    printf("%-5s %-13s %-9s %9.2f %8.2f\n", dname[d],
                       where ? "out-of-cache" : "in-cache", kind_name[k],
                       (double)bytes * passes / best[k] / 1e9, best[PEER] / best[k]);
        }
    }
    free(src);
    free(dst);
    return 0;
}
