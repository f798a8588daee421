/* test_weightstats_simd.c - every instruction-set path of the weight stats
 * (portable, AVX2, AVX-512: format/weightstats.c) gives the bits of the
 * portable path and of the general f64 path, on random f32, bf16 and f16
 * data with NaN, infinity, -0.0, denormals, odd lengths and unaligned
 * pointers; and the results agree with a long-double two-pass reference.
 * A path this CPU lacks is a visible skip line, not a pass. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu_features.h"
#include "internal.h"
#include "testlib.h"
#include "weightstats.h"
#include "wpack.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_bits(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double next_unit(void)
{
    return (double)(next_bits() >> 11) / 9007199254740992.0;
}

static const int isas[] = {WPK_CPU_SCALAR, WPK_CPU_AVX2, WPK_CPU_AVX512};
static const char *const isa_name[] = {"portable", "avx2", "avx512"};
static const int dtypes[] = {WPACK_DTYPE_F32, WPACK_DTYPE_BF16, WPACK_DTYPE_F16};
static const char *const dtype_name[] = {"f32", "bf16", "f16"};

/* One value of a kind of data, as a float. */
static float value(int mode)
{
    double r = next_unit();
    switch (mode) {
    case 0: return (float)(r * 2 - 1);                 /* weights */
    case 1: return (float)(r * 100 + 3000);            /* an offset: the shift must save the variance */
    case 2: return r < 0.5 ? -0.0f : 0.0f;              /* signed zeros only */
    case 3: return (float)((r - 0.5) * 1e-38);          /* f32 denormals (zeros in bf16/f16 rounding) */
    case 4: return (float)((r - 0.5) * 6e4);            /* near f16's top */
    default: {                                          /* any bits: NaN, infinity, everything */
        uint32_t u = (uint32_t)next_bits();
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    }
}

/* n elements of dtype at dst (maybe unaligned) from mode, their exact
 * values in d; some NaN, infinities and -0.0 sprinkled in when spice. */
static void make(int dtype, uint8_t *dst, double *d, size_t n, int mode, int spice)
{
    for (size_t i = 0; i < n; i++) {
        float f = value(mode);
        if (spice && next_unit() < 0.002) {
            static const float odd[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f};
            f = odd[next_bits() % 5];
        }
        if (dtype == WPACK_DTYPE_F32) {
            memcpy(dst + 4 * i, &f, 4);
            d[i] = f;
            continue;
        }
        uint16_t h = dtype == WPACK_DTYPE_BF16 ? wpk_to_bf16(f) : wpk_to_f16(f);
        memcpy(dst + 2 * i, &h, 2);
        d[i] = dtype == WPACK_DTYPE_BF16 ? wpk_bf16_to_f32(h) : wpk_f16_to_f32(h);
    }
}

static int same(const wpk_acc *a, const wpk_acc *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* Every available path against the portable one and the f64 path, over
 * lengths around the block and lane sizes and all byte offsets 0..3. */
static void test_paths_same_bits(void)
{
    enum { MAXN = 3 * WPK_STATS_BLOCK + 37 };
    static uint8_t buf[4 * MAXN + 8];
    static double d[MAXN];
    static const size_t lens[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 4095, 4096, 4097,
                                  8191, 8200, MAXN};
    int ran[3] = {0}, differ = 0;
    for (int isa = 1; isa < 3; isa++)
        if (!wpk_cpu_supports(isas[isa]))
            printf("  skip: this CPU has no %s; only the other paths are compared\n",
                   isa_name[isa]);
    for (int t = 0; t < 600; t++) {
        int di = t % 3, mode = (t / 3) % 6, spice = t % 5 == 0;
        size_t n = t < 17 * 6 ? lens[(t / 6) % 17] : 1 + (size_t)(next_unit() * (MAXN - 1));
        size_t off = (size_t)t % 4; /* unaligned for every element size */
        make(dtypes[di], buf + off, d, n, mode, spice);
        wpk_acc ref, gen;
        wpk_acc_init(&ref);
        wpk_acc_init(&gen);
        wpk_acc_feed_isa(&ref, dtypes[di], buf + off, n, WPK_CPU_SCALAR);
        wpk_acc_feed_isa(&gen, WPACK_DTYPE_F64, d, n, WPK_CPU_SCALAR);
        if (!same(&ref, &gen) && differ++ < 5)
            printf("  %s n %zu mode %d: portable mean %a m2 %a, f64 path mean %a m2 %a\n",
                   dtype_name[di], n, mode, ref.mean, ref.m2, gen.mean, gen.m2);
        for (int isa = 1; isa < 3; isa++) {
            if (!wpk_cpu_supports(isas[isa]))
                continue;
            wpk_acc a;
            wpk_acc_init(&a);
            /* in two pieces, as a writer gets its bytes */
            size_t cut = n ? (size_t)(next_unit() * (double)n) : 0;
            wpk_acc_feed_isa(&a, dtypes[di], buf + off, cut, isas[isa]);
            wpk_acc_feed_isa(&a, dtypes[di], buf + off + cut * wpack_dtype_size(dtypes[di]),
                             n - cut, isas[isa]);
            wpk_acc whole;
            wpk_acc_init(&whole);
            wpk_acc_feed_isa(&whole, dtypes[di], buf + off, n, isas[isa]);
            ran[isa]++;
            if (!same(&whole, &ref) && differ++ < 5)
                printf("  %s %s n %zu off %zu mode %d: min %a/%a max %a/%a mean %a/%a m2 %a/%a\n",
                       isa_name[isa], dtype_name[di], n, off, mode, whole.min, ref.min,
                       whole.max, ref.max, whole.mean, ref.mean, whole.m2, ref.m2);
            /* pieces: compared with the portable path fed the same pieces */
            wpk_acc p;
            wpk_acc_init(&p);
            wpk_acc_feed_isa(&p, dtypes[di], buf + off, cut, WPK_CPU_SCALAR);
            wpk_acc_feed_isa(&p, dtypes[di], buf + off + cut * wpack_dtype_size(dtypes[di]),
                             n - cut, WPK_CPU_SCALAR);
            if (!same(&a, &p) && differ++ < 5)
                printf("  %s %s n %zu cut %zu: pieces differ from the portable pieces\n",
                       isa_name[isa], dtype_name[di], n, cut);
        }
    }
    CHECK(differ == 0, "%d results differ", differ);
    CHECK(ran[1] > 0 || !wpk_cpu_supports(WPK_CPU_AVX2), "avx2 never ran");
    CHECK(ran[2] > 0 || !wpk_cpu_supports(WPK_CPU_AVX512), "avx512 never ran");
    /* the writer's entry: the best path of this CPU, and portable */
    CHECK(wpk_acc_isa(1) == WPK_CPU_SCALAR, "portable must pick the portable path");
    CHECK(wpk_cpu_supports(wpk_acc_isa(0)), "picked a path this CPU lacks");
}

/* Signed zeros: which zero is the min / max depends on the order the lanes
 * see them in; every path must pick the same one. */
static void test_signed_zero_order(void)
{
    float f[64];
    int differ = 0;
    for (int t = 0; t < 2000; t++) {
        size_t n = 1 + next_bits() % 64;
        for (size_t i = 0; i < n; i++)
            f[i] = next_bits() % 2 ? -0.0f : 0.0f;
        wpk_acc ref;
        wpk_acc_init(&ref);
        wpk_acc_feed_isa(&ref, WPACK_DTYPE_F32, f, n, WPK_CPU_SCALAR);
        for (int isa = 1; isa < 3; isa++) {
            if (!wpk_cpu_supports(isas[isa]))
                continue;
            wpk_acc a;
            wpk_acc_init(&a);
            wpk_acc_feed_isa(&a, WPACK_DTYPE_F32, f, n, isas[isa]);
            differ += !same(&a, &ref);
        }
    }
    CHECK(differ == 0, "%d signed-zero cases differ", differ);
}

/* Against a two-pass computation in long double over the finite values. */
static void test_long_double_reference(void)
{
    enum { N = 50021 };
    static uint8_t buf[4 * N + 4];
    static double d[N];
    int bad = 0;
    for (int t = 0; t < 36; t++) {
        int di = t % 3, mode = (t / 3) % 5, spice = t >= 18;
        size_t n = N - (size_t)t * 101;
        make(dtypes[di], buf + 1, d, n, mode, spice);
        size_t k = 0;
        long double sum = 0, ss = 0;
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (isfinite(d[i])) {
                k++;
                sum += d[i];
                lo = d[i] < lo ? d[i] : lo;
                hi = d[i] > hi ? d[i] : hi;
            }
        long double mean = k ? sum / k : 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(d[i]))
                ss += (d[i] - mean) * (d[i] - mean);
        long double var = k ? ss / k : 0;
        for (int isa = 0; isa < 3; isa++) {
            if (!wpk_cpu_supports(isas[isa]))
                continue;
            wpk_acc a;
            wpk_acc_init(&a);
            wpk_acc_feed_isa(&a, dtypes[di], buf + 1, n, isas[isa]);
            double scale = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
            int ok = a.n == k && a.min == lo && a.max == hi &&
                     fabsl(a.mean - mean) <= 1e-13L * scale + 1e-300L &&
                     fabsl(wpk_acc_variance(&a) - var) <= 1e-11L * var + 1e-300L;
            if (!ok && bad++ < 5)
                printf("  %s %s mode %d: n %llu/%zu min %a/%a max %a/%a mean %.17g/%.17Lg var "
                       "%.17g/%.17Lg\n",
                       isa_name[isa], dtype_name[di], mode, (unsigned long long)a.n, k, a.min,
                       lo, a.max, hi, a.mean, mean, wpk_acc_variance(&a), var);
        }
    }
    CHECK(bad == 0, "%d results off the long-double reference", bad);
}

/* Empty input, all-NaN input, and one value: the same on every path. */
static void test_edges(void)
{
    float nan8[9] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    float one = -2.5f;
    for (int isa = 0; isa < 3; isa++) {
        if (!wpk_cpu_supports(isas[isa]))
            continue;
        wpk_acc a;
        wpk_acc_init(&a);
        wpk_acc_feed_isa(&a, WPACK_DTYPE_F32, nan8, 0, isas[isa]);
        CHECK(a.n == 0 && a.min == 0 && a.max == 0, "%s: empty input", isa_name[isa]);
        wpk_acc_feed_isa(&a, WPACK_DTYPE_F32, nan8, 9, isas[isa]);
        CHECK(a.n == 0 && a.mean == 0 && a.m2 == 0, "%s: NaN only", isa_name[isa]);
        wpk_acc_feed_isa(&a, WPACK_DTYPE_F32, &one, 1, isas[isa]);
        CHECK(a.n == 1 && a.min == -2.5 && a.max == -2.5 && a.mean == -2.5 && a.m2 == 0,
              "%s: one value", isa_name[isa]);
    }
}

/* Histogram counts: every path against the formula of the spec's writer
 * (relative position in halves), on data with values outside [lo, hi],
 * NaN and infinity, for bin counts from 1 up. */
static void test_histogram_paths(void)
{
    enum { N = 20011 };
    static uint8_t buf[4 * N + 4];
    static double d[N];
    static uint64_t want[1000], got[1000];
    static const uint32_t binss[] = {1, 2, 7, 256, 1000};
    int bad = 0;
    for (int t = 0; t < 60; t++) {
        int di = t % 3, mode = (t / 3) % 6;
        uint32_t bins = binss[t % 5];
        size_t n = N - (size_t)t * 37, off = (size_t)t % 4;
        make(dtypes[di], buf + off, d, n, mode, t % 2);
        wpk_acc a;
        wpk_acc_init(&a);
        wpk_acc_feed_isa(&a, WPACK_DTYPE_F64, d, n, WPK_CPU_SCALAR);
        double edges[1001];
        /* the tensor's own range, or a narrower one (values fall outside) */
        double lo = t % 4 == 3 ? a.min / 2 : a.min, hi = t % 4 == 3 ? a.max / 2 : a.max;
        wpk_hist_edges(lo, hi, bins, edges);
        lo = edges[0];
        hi = edges[bins];
        memset(want, 0, sizeof want);
        double span = hi / 2 - lo / 2;
        for (size_t i = 0; i < n; i++) {
            if (!(d[i] >= lo && d[i] <= hi))
                continue;
            double f = (d[i] / 2 - lo / 2) / span * bins;
            want[!(f > 0) ? 0 : f >= bins ? bins - 1 : (uint32_t)f]++;
        }
        for (int isa = 0; isa < 3; isa++) {
            if (!wpk_cpu_supports(isas[isa]))
                continue;
            memset(got, 0, sizeof got);
            wpk_hist_feed_isa(got, bins, lo, hi, dtypes[di], buf + off, n, isas[isa]);
            if (memcmp(got, want, bins * sizeof *got) != 0 && bad++ < 5)
                printf("  %s %s mode %d bins %u: other counts\n", isa_name[isa],
                       dtype_name[di], mode, bins);
        }
    }
    CHECK(bad == 0, "%d histograms differ", bad);
}

int main(void)
{
    RUN(test_paths_same_bits);
    RUN(test_signed_zero_order);
    RUN(test_long_double_reference);
    RUN(test_edges);
    RUN(test_histogram_paths);
    return tl_finish();
}
