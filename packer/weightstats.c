/* weightstats.c - min/max/mean/variance and histograms of float tensors. */
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "weightstats.h"

#define BLOCK 4096

void wpk_acc_init(wpk_acc *a)
{
    a->n = 0;
    a->min = a->max = a->mean = a->m2 = 0;
}

double wpk_acc_variance(const wpk_acc *a)
{
    return a->n ? a->m2 / (double)a->n : 0;
}

/* Widen up to BLOCK elements to double. */
static void widen(int dtype, const uint8_t *p, size_t n, double *out)
{
    switch (dtype) {
    case WPACK_DTYPE_F64:
        for (size_t i = 0; i < n; i++)
            out[i] = wpk_ldf64(p + 8 * i);
        break;
    case WPACK_DTYPE_F32:
        for (size_t i = 0; i < n; i++) {
            uint32_t u = wpk_ld32(p + 4 * i);
            float f;
            memcpy(&f, &u, sizeof f);
            out[i] = f;
        }
        break;
    case WPACK_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            out[i] = wpk_f16_to_f32(wpk_ld16(p + 2 * i));
        break;
    case WPACK_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            out[i] = wpk_bf16_to_f32(wpk_ld16(p + 2 * i));
        break;
    case WPACK_DTYPE_F8E4M3FN:
        for (size_t i = 0; i < n; i++)
            out[i] = wpk_f8e4m3fn_to_f32(p[i]);
        break;
    case WPACK_DTYPE_F8E5M2:
        for (size_t i = 0; i < n; i++)
            out[i] = wpk_f8e5m2_to_f32(p[i]);
        break;
    default:
        for (size_t i = 0; i < n; i++)
            out[i] = NAN;
    }
}

/* Merge a block's count, min, max, mean and M2 into the accumulator (Chan). */
static void merge(wpk_acc *a, uint64_t n, double mn, double mx, double bmean, double bm2)
{
    if (!a->n) {
        a->n = n;
        a->min = mn;
        a->max = mx;
        a->mean = bmean;
        a->m2 = bm2;
        return;
    }
    double na = (double)a->n, nb = (double)n, nt = na + nb;
    double delta = bmean - a->mean;
    a->mean += delta * (nb / nt);
    a->m2 += bm2 + delta * delta * (na * nb / nt);
    a->n += n;
    a->min = mn < a->min ? mn : a->min;
    a->max = mx > a->max ? mx : a->max;
}

/* Merge a block's finite values into the accumulator. */
static void feed_block(wpk_acc *a, double *v, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    if (!isfinite(sum)) {
        /* Rare: drop non-finite values, then treat the rest as the block. */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(v[i]))
                v[k++] = v[i];
        n = k;
        sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += v[i];
        if (!isfinite(sum)) { /* finite values whose sum overflows: merge one by one */
            for (size_t i = 0; i < n; i++)
                feed_block(a, &v[i], 1);
            return;
        }
    }
    if (!n)
        return;
    double mn = v[0], mx = v[0];
    for (size_t i = 1; i < n; i++) {
        mn = v[i] < mn ? v[i] : mn;
        mx = v[i] > mx ? v[i] : mx;
    }
    double bmean = sum / (double)n, bm2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = v[i] - bmean;
        bm2 += d * d;
    }
    merge(a, n, mn, mx, bmean, bm2);
}


/* One pass over a block in 8 independent lanes: sums of (x - K) and
 * (x - K)^2 with K the block's first value (shifted, so the variance does
 * not cancel), and lane-wise min/max. Returns 0 when a value is not finite
 * (the caller then takes the careful path). Lanes let the compiler keep 8
 * chains in flight instead of one serial chain of additions. */
#define LANES 8
static int fast_block(wpk_acc *a, const double *v, size_t n)
{
    double k = v[0];
    double s1[LANES] = {0}, s2[LANES] = {0}, mn[LANES], mx[LANES];
    for (int l = 0; l < LANES; l++)
        mn[l] = mx[l] = k;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            double x = v[i + l], d = x - k;
            s1[l] += d;
            s2[l] += d * d;
            mn[l] = x < mn[l] ? x : mn[l];
            mx[l] = x > mx[l] ? x : mx[l];
        }
    for (; i < n; i++) {
        double x = v[i], d = x - k;
        s1[0] += d;
        s2[0] += d * d;
        mn[0] = x < mn[0] ? x : mn[0];
        mx[0] = x > mx[0] ? x : mx[0];
    }
    double t1 = 0, t2 = 0, lo = mn[0], hi = mx[0];
    for (int l = 0; l < LANES; l++) {
        t1 += s1[l];
        t2 += s2[l];
        lo = mn[l] < lo ? mn[l] : lo;
        hi = mx[l] > hi ? mx[l] : hi;
    }
    if (!isfinite(t1) || !isfinite(t2) || !isfinite(lo) || !isfinite(hi))
        return 0;
    double m2 = t2 - t1 * t1 / (double)n;
    merge(a, n, lo, hi, k + t1 / (double)n, m2 > 0 ? m2 : 0);
    return 1;
}

void wpk_acc_feed(wpk_acc *a, int dtype, const void *data, size_t count)
{
    double v[BLOCK];
    size_t size = wpack_dtype_size(dtype);
    const uint8_t *p = data;
    while (count) {
        size_t n = count < BLOCK ? count : BLOCK;
        widen(dtype, p, n, v);
        if (!fast_block(a, v, n))
            feed_block(a, v, n); /* NaN or infinity in the block: filter them */
        p += n * size;
        count -= n;
    }
    /* Rounding in the merge can push the mean a hair outside [min, max]. */
    if (a->n) {
        if (a->mean < a->min)
            a->mean = a->min;
        if (a->mean > a->max)
            a->mean = a->max;
    }
}

void wpk_hist_edges(double min, double max, uint32_t bins, double *edges)
{
    if (!(max > min)) {
        min -= 0.5;
        max += 0.5;
    }
    /* Halves first: max - min overflows for f64 values near the top of the range. */
    double w = (max / 2 - min / 2) / bins * 2;
    for (uint32_t b = 0; b <= bins; b++)
        edges[b] = min + w * b;
    if (!isfinite(w)) /* cannot happen with finite min/max, but never write inf */
        for (uint32_t b = 0; b <= bins; b++)
            edges[b] = b < bins ? min : max;
    edges[bins] = max;
    /* Tiny ranges can round adjacent edges together: nudge them apart. */
    for (uint32_t b = 1; b <= bins; b++)
        if (!(edges[b] > edges[b - 1]))
            edges[b] = nextafter(edges[b - 1], INFINITY);
}

void wpk_hist_feed(uint64_t *counts, uint32_t bins, double lo, double hi, int dtype,
                   const void *data, size_t count)
{
    double v[BLOCK];
    size_t size = wpack_dtype_size(dtype);
    const uint8_t *p = data;
    /* Relative position in halves: hi - lo may overflow, or be so small
     * (denormal) that bins / (hi - lo) is infinite. */
    double span = hi / 2 - lo / 2;
    while (count) {
        size_t n = count < BLOCK ? count : BLOCK;
        widen(dtype, p, n, v);
        for (size_t i = 0; i < n; i++) {
            double x = v[i];
            if (!(x >= lo && x <= hi))
                continue;
            double f = (x / 2 - lo / 2) / span * bins;
            uint32_t b = !(f > 0) ? 0 : f >= bins ? bins - 1 : (uint32_t)f;
            counts[b]++;
        }
        p += n * size;
        count -= n;
    }
}
