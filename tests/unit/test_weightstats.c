/* test_weightstats.c - the writer's weight statistics: the f32/f16/bf16
 * fast paths (AVX2 where the CPU has it, and the portable C one) must give
 * the very bits of the general path, and all must agree with a plain
 * two-pass computation. */
#include <float.h>
#include <math.h>
#include <unistd.h>
#include <stdint.h>

#include "testlib.h"
#include "weightstats.h"
#include "wpack.h"

static uint64_t rng = 88172645463325252ull;
static double next_unit(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static float value(int mode)
{
    double r = next_unit();
    switch (mode) {
    case 0: return (float)(r * 2 - 1);
    case 1: return (float)((r - 0.5) * 1e30);   /* squares near the top of double's range */
    case 2: return r < 0.5 ? -0.0f : 0.0f;       /* signed zeros only */
    case 3: return (float)(r * 1e-40);           /* f32 denormals */
    default: return (float)(r * 100 + 1e6);      /* a large offset: the shift must save the variance */
    }
}

/* Feed n elements of dtype at src on the SIMD path (a), on the portable
 * path (p), and the same values as f64 at d (b), in the same random pieces;
 * 1 when the three accumulators are equal bit for bit. */
static int same_bits(int dtype, const void *src, const double *d, size_t n, wpk_acc *a, wpk_acc *b)
{
    const size_t size = wpack_dtype_size(dtype);
    wpk_acc p;
    wpk_acc_init(a);
    wpk_acc_init(b);
    wpk_acc_init(&p);
    for (size_t done = 0; done < n;) {
        size_t k = 1 + (size_t)(next_unit() * (double)(n - done - 1));
        if (k > n - done)
            k = n - done;
        wpk_acc_feed_path(a, dtype, (const uint8_t *)src + size * done, k, 0);
        wpk_acc_feed_path(&p, dtype, (const uint8_t *)src + size * done, k, 1);
        wpk_acc_feed(b, WPACK_DTYPE_F64, d + done, k);
        done += k;
    }
    return memcmp(a, b, sizeof *a) == 0 && memcmp(&p, b, sizeof p) == 0;
}

/* Feed the same values as f32 (the fast path) and widened to f64 (the
 * general path) in the same random pieces; the accumulators must be equal
 * bit for bit, NaN and infinity included. */
static void test_f32_path_matches_general_path(void)
{
    enum { MAXN = 20000 };
    static float f[MAXN + 1];
    static double d[MAXN];
    int differ = 0;
    for (int t = 0; t < 2000; t++) {
        size_t n = 1 + (size_t)(next_unit() * (t < 600 ? 40 : MAXN - 1));
        int mode = t % 5;
        for (size_t i = 0; i < n; i++)
            f[i + 1] = value(mode);
        if (t % 7 == 0)
            f[1 + (size_t)(next_unit() * n)] = NAN;
        if (t % 11 == 0)
            f[1 + (size_t)(next_unit() * n)] = -INFINITY;
        for (size_t i = 0; i < n; i++)
            d[i] = f[i + 1];
        wpk_acc a, b; /* the misaligned case is below */
        if (!same_bits(WPACK_DTYPE_F32, f + 1, d, n, &a, &b) && differ++ < 3)
            printf("  case %d (n %zu, mode %d): mean %a vs %a, m2 %a vs %a\n", t, n, mode, a.mean,
                   b.mean, a.m2, b.m2);
    }
    CHECK(differ == 0, "%d cases differ", differ);

    /* misaligned f32 input (a tensor cut at an odd byte in a stream) */
    static unsigned char raw[4 * 1000 + 3];
    for (int i = 0; i < 1000; i++) {
        float v = value(0);
        memcpy(raw + 3 + 4 * i, &v, 4);
        d[i] = v;
    }
    wpk_acc a, b, p;
    wpk_acc_init(&a);
    wpk_acc_init(&b);
    wpk_acc_init(&p);
    wpk_acc_feed(&a, WPACK_DTYPE_F32, raw + 3, 1000);
    wpk_acc_feed(&b, WPACK_DTYPE_F64, d, 1000);
    wpk_acc_feed_path(&p, WPACK_DTYPE_F32, raw + 3, 1000, 1);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "misaligned input: mean %a vs %a", a.mean, b.mean);
    CHECK(memcmp(&p, &b, sizeof p) == 0, "misaligned input, portable: mean %a vs %a", p.mean,
          b.mean);
}

float wpk_f16_to_f32(uint16_t h);
float wpk_bf16_to_f32(uint16_t h);

/* f16 and bf16 from random bit patterns (zeros, denormals, NaN, infinity
 * included) against the same values widened to f64. */
static void test_half_paths_match_general_path(void)
{
    enum { MAXN = 9000 };
    static uint16_t h[MAXN];
    static double d[MAXN];
    int differ = 0;
    for (int t = 0; t < 800; t++) {
        int dtype = t % 2 ? WPACK_DTYPE_F16 : WPACK_DTYPE_BF16;
        size_t n = 1 + (size_t)(next_unit() * (t < 200 ? 30 : MAXN - 1));
        /* mostly one binade-ish range so blocks stay finite; some fully random */
        int wild = t % 4 == 0;
        for (size_t i = 0; i < n; i++) {
            uint16_t bits = (uint16_t)(next_unit() * 65536);
            if (!wild)
                bits = (uint16_t)((bits & 0x83ff) | (dtype == WPACK_DTYPE_F16 ? 0x3800 : 0x3f00));
            h[i] = bits;
            d[i] = dtype == WPACK_DTYPE_F16 ? wpk_f16_to_f32(bits) : wpk_bf16_to_f32(bits);
        }
        wpk_acc a, b;
        if (!same_bits(dtype, h, d, n, &a, &b) && differ++ < 3)
            printf("  case %d (%s, n %zu): mean %a vs %a, m2 %a vs %a\n", t,
                   dtype == WPACK_DTYPE_F16 ? "f16" : "bf16", n, a.mean, b.mean, a.m2, b.m2);
    }
    CHECK(differ == 0, "%d cases differ", differ);
}

/* Against a plain two-pass computation in long double. */
static void test_matches_two_pass(void)
{
    enum { N = 100003 };
    static float f[N];
    long double sum = 0, ss = 0;
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < N; i++) {
        f[i] = value(4) * (i % 3 ? 1 : -1);
        sum += f[i];
        lo = f[i] < lo ? f[i] : lo;
        hi = f[i] > hi ? f[i] : hi;
    }
    long double mean = sum / N;
    for (int i = 0; i < N; i++)
        ss += (f[i] - mean) * (f[i] - mean);
    wpk_acc a;
    wpk_acc_init(&a);
    wpk_acc_feed(&a, WPACK_DTYPE_F32, f, N);
    CHECK_EQ(a.n, N);
    CHECK(a.min == lo && a.max == hi, "min %g max %g, want %g %g", a.min, a.max, lo, hi);
    CHECK(fabs(a.mean - (double)mean) <= 1e-12 * fabs((double)mean) + 1e-9, "mean %.17g want %.17Lg",
          a.mean, mean);
    double var = wpk_acc_variance(&a), want = (double)(ss / N);
    CHECK(fabs(var - want) <= 1e-9 * want, "variance %.17g want %.17g", var, want);
}


/* Edges must be finite and strictly increasing for any finite range,
 * degenerate ones at the ends of f64 included (fuzz_roundtrip found a
 * constant DBL_MAX tensor whose edges stepped past it to inf). */
static void test_hist_edges_extremes(void)
{
    static const double ends[][2] = {
        {DBL_MAX, DBL_MAX}, {-DBL_MAX, -DBL_MAX}, {-DBL_MAX, DBL_MAX}, {0, 0}, {5, 5},
        {1e300, 1e300}, {-1e-310, -1e-310}, {4.9e-324, 4.9e-324}, {1, 1.0000000000000002},
    };
    static const uint32_t bin_counts[] = {1, 2, 7, 255, 4096};
    static double edges[4097];
    double below_max = nextafter(DBL_MAX, 0);
    for (size_t i = 0; i < sizeof ends / sizeof ends[0] + 1; i++) {
        double lo = i < sizeof ends / sizeof ends[0] ? ends[i][0] : below_max;
        double hi = i < sizeof ends / sizeof ends[0] ? ends[i][1] : DBL_MAX;
        for (size_t k = 0; k < sizeof bin_counts / sizeof bin_counts[0]; k++) {
            uint32_t bins = bin_counts[k];
            wpk_hist_edges(lo, hi, bins, edges);
            int ok = isfinite(edges[0]) && edges[0] <= lo;
            for (uint32_t b = 1; b <= bins; b++)
                ok = ok && isfinite(edges[b]) && edges[b] > edges[b - 1];
            CHECK(ok && edges[bins] >= hi, "range [%g, %g], %u bins: edges not finite, increasing "
                  "and covering it", lo, hi, bins);
        }
    }
}

/* The writer's own histogram of a constant DBL_MAX tensor: finish must
 * accept it and the reader must open it. */
static void test_writer_histogram_of_dbl_max(void)
{
    char path[] = "/tmp/wpack-test-ws-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.histogram_bins = 255;
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, path, &opt), WPACK_OK);
    double v[3] = {DBL_MAX, DBL_MAX, DBL_MAX};
    uint64_t dims[1] = {3};
    CHECK_EQ(wpack_writer_add_tensor(w, "top", WPACK_DTYPE_F64, 0, dims, v, 8), WPACK_OK);
    CHECK_EQ(wpack_writer_add_tensor(w, "top3", WPACK_DTYPE_F64, 1, dims, v, sizeof v), WPACK_OK);
    char err[256] = "";
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    wpack_stats st;
    CHECK_EQ(wpack_stats_find(ar, "top3", WPACK_STATS_WEIGHT, &st), WPACK_OK);
    CHECK_EQ(st.hist_bins, 255u);
    wpack_close(ar);
    unlink(path);
}

/* The writer's portable_stats option: the same stats records, bit for
 * bit, as the SIMD path (the CLI sets it under WPACK_ISA=scalar). */
static void test_writer_portable_option(void)
{
    enum { N = 50000 };
    static float f[N];
    for (int i = 0; i < N; i++)
        f[i] = value(i % 5);
    wpack_stats st[2];
    for (int portable = 0; portable < 2; portable++) {
        char path[] = "/tmp/wpack-test-ws-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0, "mkstemp");
        close(fd);
        wpack_writer_options opt;
        wpack_writer_options_init(&opt);
        CHECK_EQ(opt.portable_stats, 0);
        opt.portable_stats = portable;
        opt.histogram_bins = 16;
        wpack_writer *w;
        uint64_t dims[1] = {N};
        CHECK_EQ(wpack_writer_open(&w, path, &opt), WPACK_OK);
        CHECK_EQ(wpack_writer_add_tensor(w, "w", WPACK_DTYPE_F32, 1, dims, f, sizeof f), WPACK_OK);
        char err[256] = "";
        CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
        wpack_archive *ar;
        CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "open: %s", wpack_errmsg(ar));
        CHECK_EQ(wpack_stats_find(ar, "w", WPACK_STATS_WEIGHT, &st[portable]), WPACK_OK);
        wpack_close(ar);
        unlink(path);
    }
    CHECK(st[0].count == N && st[0].count == st[1].count && st[0].min == st[1].min &&
              st[0].max == st[1].max && memcmp(&st[0].mean, &st[1].mean, sizeof st[0].mean) == 0 &&
              memcmp(&st[0].variance, &st[1].variance, sizeof st[0].variance) == 0,
          "portable stats differ: mean %a vs %a", st[0].mean, st[1].mean);
}

int main(void)
{
    RUN(test_f32_path_matches_general_path);
    RUN(test_half_paths_match_general_path);
    RUN(test_matches_two_pass);
    RUN(test_hist_edges_extremes);
    RUN(test_writer_histogram_of_dbl_max);
    RUN(test_writer_portable_option);
    return tl_finish();
}
