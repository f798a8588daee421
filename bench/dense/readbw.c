/* readbw.c - the machine's read bandwidth: threads summing their slice of a
 * buffer much larger than the caches with 256-bit loads (what a weight
 * stream does), best of several passes. */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "readbw.h"
#include "timing.h"

typedef struct {
    const float *p;
    size_t n;
    float sum;
} slice;

__attribute__((target("avx2"))) static void *sum_slice(void *arg)
{
    slice *s = arg;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= s->n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(s->p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(s->p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(s->p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(s->p + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    s->sum = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    return NULL;
}

double read_bandwidth_gbs(size_t bytes, unsigned threads, int passes)
{
    float *buf = aligned_alloc(64, bytes);
    if (!buf)
        return 0;
    memset(buf, 1, bytes);
    size_t n = bytes / 4, per = n / threads / 32 * 32;
    double best = 0;
    for (int p = 0; p < passes; p++) {
        pthread_t t[64];
        slice s[64];
        double t0 = bench_now();
        for (unsigned i = 0; i < threads; i++) {
            s[i].p = buf + i * per;
            s[i].n = per;
            if (i)
                pthread_create(&t[i], NULL, sum_slice, &s[i]);
        }
        sum_slice(&s[0]);
        for (unsigned i = 1; i < threads; i++)
            pthread_join(t[i], NULL);
        double gbs = (double)per * threads * 4 / (bench_now() - t0) / 1e9;
        if (gbs > best)
            best = gbs;
    }
    free(buf);
    return best;
}
