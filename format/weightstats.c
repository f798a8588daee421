/* weightstats.c - min/max/mean/variance and histograms of float tensors. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "weightstats.h"
#include "cpu_features.h"

#define BLOCK WPK_STATS_BLOCK

void wpk_acc_init(wpk_acc *a)
{
    a->n = 0;
    a->min = a->max = a->mean = a->m2 = 0;
}

double wpk_acc_variance(const wpk_acc *a)
{
    return a->n ? a->m2 / (double)a->n : 0;
}

void wpk_acc_summary(const wpk_acc *a, double *mean, double *variance, double *absmax)
{
    *variance = wpk_acc_variance(a);
    *absmax = -a->min > a->max ? -a->min : a->max;
    *mean = a->mean;
    /* f64 values near the top of the range overflow the squared
     * deviations: the variance is then "at least DBL_MAX", and a mean that
     * overflowed is recomputed from the bounds (spec: stats are finite). */
    if (!isfinite(*variance))
        *variance = DBL_MAX;
    if (!isfinite(*mean))
        *mean = a->min / 2 + a->max / 2;
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

/* A block's finite values as a summary; 0 when their sum overflows (the
 * caller then merges them one by one: the first s->n of v, moved there). */
static int slow_summary(double *v, size_t n, wpk_bsum *s)
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
        s->n = n;
        if (!isfinite(sum))
            return 0;
    }
    s->n = n;
    if (!n)
        return 1;
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
    s->min = mn;
    s->max = mx;
    s->mean = bmean;
    s->m2 = bm2;
    return 1;
}

static void merge_sum(wpk_acc *a, const wpk_bsum *s)
{
    if (s->n)
        merge(a, s->n, s->min, s->max, s->mean, s->m2);
}

/* Merge a block's finite values into the accumulator. */
static void feed_block(wpk_acc *a, double *v, size_t n)
{
    wpk_bsum s;
    if (slow_summary(v, n, &s)) {
        merge_sum(a, &s);
        return;
    }
    /* finite values whose sum overflows: merge one by one (v now holds
     * the finite ones first, and no single value overflows) */
    for (size_t i = 0; i < s.n; i++)
        merge(a, 1, v[i], v[i], v[i], 0);
}

/* One pass over a block in 8 independent lanes: sums of (x - K) and
 * (x - K)^2 with K the block's first value (shifted, so the variance does
 * not cancel), and lane-wise min/max. Lanes let the compiler keep 8 chains
 * in flight instead of one serial chain of additions. Lane l takes elements
 * l, l + 8, l + 16, ...; the tail after the last multiple of 8 goes to lane
 * 0. Every path below does exactly these operations in this order (no
 * fused multiply-add), so they give the same bits. */
#define LANES 8
typedef struct {
    double k, s1[LANES], s2[LANES], mn[LANES], mx[LANES];
} lanes;

static void lanes_init(lanes *L, double k)
{
    L->k = k;
    for (int l = 0; l < LANES; l++) {
        L->s1[l] = L->s2[l] = 0;
        L->mn[l] = L->mx[l] = k;
    }
}

static inline void lane_add(lanes *L, int l, double x)
{
    double d = x - L->k;
    L->s1[l] += d;
    L->s2[l] += d * d;
    L->mn[l] = x < L->mn[l] ? x : L->mn[l];
    L->mx[l] = x > L->mx[l] ? x : L->mx[l];
}

/* Reduce the lanes into the block's summary; 0 when a value was not
 * finite (the caller then takes the careful path). */
static int lanes_merge(wpk_bsum *a, const lanes *L, size_t n)
{
    double t1 = 0, t2 = 0, lo = L->mn[0], hi = L->mx[0];
    for (int l = 0; l < LANES; l++) {
        t1 += L->s1[l];
        t2 += L->s2[l];
        lo = L->mn[l] < lo ? L->mn[l] : lo;
        hi = L->mx[l] > hi ? L->mx[l] : hi;
    }
    if (!isfinite(t1) || !isfinite(t2) || !isfinite(lo) || !isfinite(hi))
        return 0;
    double m2 = t2 - t1 * t1 / (double)n;
    a->n = n;
    a->min = lo;
    a->max = hi;
    a->mean = L->k + t1 / (double)n;
    a->m2 = m2 > 0 ? m2 : 0;
    return 1;
}

static int fast_block(wpk_bsum *a, const double *v, size_t n)
{
    lanes L;
    lanes_init(&L, v[0]);
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++)
            lane_add(&L, l, v[i + l]);
    for (; i < n; i++)
        lane_add(&L, 0, v[i]);
    return lanes_merge(a, &L, n);
}

/* Element i of an f32, f16 or bf16 array (exact in double). */
static double ld_elem(int dtype, const uint8_t *p, size_t i)
{
    if (dtype == WPACK_DTYPE_F32) {
        uint32_t u = wpk_ld32(p + 4 * i);
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    uint16_t h = wpk_ld16(p + 2 * i);
    return dtype == WPACK_DTYPE_F16 ? wpk_f16_to_f32(h) : wpk_bf16_to_f32(h);
}

/* f32, f16 and bf16 (the dtypes of real weights) straight from the input,
 * with no widened copy; each dtype's loop on its own (the compiler keeps
 * the 8 lanes in vector registers where it can). */
static inline __attribute__((always_inline)) int direct_lanes(wpk_bsum *a, int dtype,
                                                              const uint8_t *p, size_t n)
{
    lanes L;
    lanes_init(&L, ld_elem(dtype, p, 0));
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++)
            lane_add(&L, l, ld_elem(dtype, p, i + l));
    for (; i < n; i++)
        lane_add(&L, 0, ld_elem(dtype, p, i));
    return lanes_merge(a, &L, n);
}

static int fast_block_direct(wpk_bsum *a, int dtype, const uint8_t *p, size_t n)
{
    if (dtype == WPACK_DTYPE_F32)
        return direct_lanes(a, WPACK_DTYPE_F32, p, n);
    if (dtype == WPACK_DTYPE_F16)
        return direct_lanes(a, WPACK_DTYPE_F16, p, n);
    return direct_lanes(a, WPACK_DTYPE_BF16, p, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86_SIMD 1
#define AVX2_TARGET __attribute__((target("avx2,f16c")))
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
/* Inlined into each dtype's loop, so the loop has no test of the dtype. */
#define AVX2_INLINE AVX2_TARGET static inline __attribute__((always_inline))
#define AVX512_INLINE AVX512_TARGET static inline __attribute__((always_inline))

/* 8 elements as floats: f32 loaded, bf16 shifted into the high half, f16
 * converted by F16C (all exact). */
AVX2_INLINE __m256 load8(int dtype, const uint8_t *p)
{
    if (dtype == WPACK_DTYPE_F32)
        return _mm256_loadu_ps((const float *)(const void *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (dtype == WPACK_DTYPE_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The min and max lanes are kept in floats: widening a float to double is
 * exact and keeps the order (and the equality of -0 and +0), so
 * min_ps(x, m) picks the same element as x < m ? x : m in double for the
 * finite values this path keeps, and 8 float lanes are the 8 double lanes. */
AVX2_INLINE void store_minmax(lanes *L, __m256 mn, __m256 mx)
{
    float fmn[LANES], fmx[LANES];
    _mm256_storeu_ps(fmn, mn);
    _mm256_storeu_ps(fmx, mx);
    for (int l = 0; l < LANES; l++) {
        L->mn[l] = fmn[l];
        L->mx[l] = fmx[l];
    }
}

/* The lanes with AVX2: sums of lanes 0-3 and 4-7 in two vectors each.
 * Returns how many elements it took (whole groups of 8). */
AVX2_INLINE size_t lanes_avx2(lanes *L, int dtype, const uint8_t *p, size_t n)
{
    const size_t size = dtype == WPACK_DTYPE_F32 ? 4 : 2;
    const __m256d K = _mm256_set1_pd(L->k);
    __m256d s1a = _mm256_setzero_pd(), s1b = s1a, s2a = s1a, s2b = s1a;
    __m256 mn = _mm256_set1_ps((float)L->k), mx = mn;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        __m256 x8 = load8(dtype, p + size * i);
        __m256d da = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x8)), K);
        __m256d db = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x8, 1)), K);
        s1a = _mm256_add_pd(s1a, da);
        s1b = _mm256_add_pd(s1b, db);
        s2a = _mm256_add_pd(s2a, _mm256_mul_pd(da, da));
        s2b = _mm256_add_pd(s2b, _mm256_mul_pd(db, db));
        mn = _mm256_min_ps(x8, mn);
        mx = _mm256_max_ps(x8, mx);
    }
    _mm256_storeu_pd(L->s1, s1a);
    _mm256_storeu_pd(L->s1 + 4, s1b);
    _mm256_storeu_pd(L->s2, s2a);
    _mm256_storeu_pd(L->s2 + 4, s2b);
    store_minmax(L, mn, mx);
    return i;
}

/* The same with AVX-512: the 8 double lanes are one register. */
AVX512_INLINE size_t lanes_avx512(lanes *L, int dtype, const uint8_t *p, size_t n)
{
    const size_t size = dtype == WPACK_DTYPE_F32 ? 4 : 2;
    const __m512d K = _mm512_set1_pd(L->k);
    __m512d s1 = _mm512_setzero_pd(), s2 = s1;
    __m256 mn = _mm256_set1_ps((float)L->k), mx = mn;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        __m256 x8 = load8(dtype, p + size * i);
        __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(x8), K);
        s1 = _mm512_add_pd(s1, d);
        s2 = _mm512_add_pd(s2, _mm512_mul_pd(d, d));
        mn = _mm256_min_ps(x8, mn);
        mx = _mm256_max_ps(x8, mx);
    }
    _mm512_storeu_pd(L->s1, s1);
    _mm512_storeu_pd(L->s2, s2);
    store_minmax(L, mn, mx);
    return i;
}

/* One block on AVX2 or AVX-512 (isa), the dtype a constant in each loop;
 * the tail after the last group of 8 goes to lane 0, as everywhere. */
#define SIMD_BLOCK(NAME, TARGET, LOOP)                                                          \
    TARGET static int NAME(wpk_bsum *a, int dtype, const uint8_t *p, size_t n)                  \
    {                                                                                           \
        lanes L;                                                                                \
        lanes_init(&L, ld_elem(dtype, p, 0));                                                   \
        size_t i = dtype == WPACK_DTYPE_F32   ? LOOP(&L, WPACK_DTYPE_F32, p, n)                 \
                   : dtype == WPACK_DTYPE_F16 ? LOOP(&L, WPACK_DTYPE_F16, p, n)                 \
                                              : LOOP(&L, WPACK_DTYPE_BF16, p, n);               \
        for (; i < n; i++)                                                                      \
            lane_add(&L, 0, ld_elem(dtype, p, i));                                              \
        return lanes_merge(a, &L, n);                                                           \
    }
SIMD_BLOCK(fast_block_avx2, AVX2_TARGET, lanes_avx2)
SIMD_BLOCK(fast_block_avx512, AVX512_TARGET, lanes_avx512)
#endif

static int direct_dtype(int dtype)
{
    return dtype == WPACK_DTYPE_F32 || dtype == WPACK_DTYPE_F16 || dtype == WPACK_DTYPE_BF16;
}

/* CPUID and XGETBV (format/cpu_features.c; its AVX2 level includes F16C).
 * Callers ask once per operation, never per block or write: in a virtual
 * machine each CPUID traps to the hypervisor (6-17 us measured, more than
 * the AVX2 pass over 100 KiB takes). */
int wpk_acc_isa(int portable)
{
#ifdef HAVE_X86_SIMD
    if (!portable)
        for (int isa = WPK_CPU_AVX512; isa > WPK_CPU_SCALAR; isa--)
            if (wpk_cpu_supports(isa))
                return isa;
#else
    (void)portable;
#endif
    return WPK_CPU_SCALAR;
}

/* The path for one call of count elements: few elements (a split element
 * between writes, a small tensor) take the portable path, which gives the
 * same bits sooner than CPUID answers in a virtual machine. */
#define FEW_ELEMS 512
static int call_isa(int dtype, size_t count, int portable)
{
    return direct_dtype(dtype) && count >= FEW_ELEMS ? wpk_acc_isa(portable) : WPK_CPU_SCALAR;
}

static int fast_direct(wpk_bsum *s, int dtype, const uint8_t *p, size_t n, int isa)
{
#ifdef HAVE_X86_SIMD
    if (isa == WPK_CPU_AVX512)
        return fast_block_avx512(s, dtype, p, n);
    if (isa == WPK_CPU_AVX2)
        return fast_block_avx2(s, dtype, p, n);
#else
    (void)isa;
#endif
    return fast_block_direct(s, dtype, p, n);
}

void wpk_acc_feed(wpk_acc *a, int dtype, const void *data, size_t count)
{
    wpk_acc_feed_path(a, dtype, data, count, 0);
}

/* One block's summary, or redo set when its values must be merged one by
 * one (finite values whose sum overflows: wpk_acc_fold does it). */
static void summarize(int dtype, const uint8_t *p, size_t n, int isa, double *v, wpk_bsum *s)
{
    s->redo = 0;
    if (direct_dtype(dtype) && fast_direct(s, dtype, p, n, isa))
        return;
    widen(dtype, p, n, v);
    if (!fast_block(s, v, n) && !slow_summary(v, n, s)) /* NaN or infinity: filter them */
        s->redo = 1;
}

/* wpk_acc_blocks with the instruction set already picked. */
static void blocks_isa(int dtype, const void *data, size_t count, size_t first, size_t nblocks,
                       int isa, wpk_bsum *out)
{
    double v[WPK_STATS_BLOCK];
    size_t size = wpack_dtype_size(dtype);
    for (size_t b = 0; b < nblocks; b++) {
        size_t at = (first + b) * WPK_STATS_BLOCK;
        size_t n = count - at < WPK_STATS_BLOCK ? count - at : WPK_STATS_BLOCK;
        summarize(dtype, (const uint8_t *)data + at * size, n, isa, v, &out[b]);
    }
}

void wpk_acc_blocks(int dtype, const void *data, size_t count, size_t first, size_t nblocks,
                    int portable, wpk_bsum *out)
{
    blocks_isa(dtype, data, count, first, nblocks, direct_dtype(dtype) ? wpk_acc_isa(portable) : 0,
               out);
}

void wpk_acc_fold(wpk_acc *a, int dtype, const void *data, size_t count, size_t first,
                  size_t nblocks, const wpk_bsum *sums)
{
    size_t size = wpack_dtype_size(dtype);
    for (size_t b = 0; b < nblocks; b++) {
        if (!sums[b].redo) {
            merge_sum(a, &sums[b]);
            continue;
        }
        double v[WPK_STATS_BLOCK];
        size_t at = (first + b) * WPK_STATS_BLOCK;
        size_t n = count - at < WPK_STATS_BLOCK ? count - at : WPK_STATS_BLOCK;
        widen(dtype, (const uint8_t *)data + at * size, n, v);
        feed_block(a, v, n);
    }
}

void wpk_acc_clamp(wpk_acc *a)
{
    /* Rounding in the merge can push the mean a hair outside [min, max]. */
    if (a->n) {
        if (a->mean < a->min)
            a->mean = a->min;
        if (a->mean > a->max)
            a->mean = a->max;
    }
}

/* The serial path: summarize and fold each block in turn. */
void wpk_acc_feed_isa(wpk_acc *a, int dtype, const void *data, size_t count, int isa)
{
    for (size_t b = 0; b * WPK_STATS_BLOCK < count; b++) {
        wpk_bsum s;
        blocks_isa(dtype, data, count, b, 1, isa, &s);
        wpk_acc_fold(a, dtype, data, count, b, 1, &s);
    }
    wpk_acc_clamp(a);
}

void wpk_acc_feed_path(wpk_acc *a, int dtype, const void *data, size_t count, int portable)
{
    wpk_acc_feed_isa(a, dtype, data, count, call_isa(dtype, count, portable));
}

#define STEP_BLOCKS 512 /* blocks per job (8 MiB of f32): summaries on the stack */
#define TASK_BLOCKS 32  /* blocks per item */

typedef struct {
    wpk_side_fn side;
    void *user;
    int dtype, isa;
    const uint8_t *p; /* the step's elements */
    size_t count, nblocks;
    wpk_bsum *sums;
} step_job;

static void step_item(void *ctx, size_t i)
{
    step_job *j = ctx;
    if (j->side && i-- == 0) {
        j->side(j->user, j->p, j->count * wpack_dtype_size(j->dtype));
        return;
    }
    size_t first = i * TASK_BLOCKS;
    size_t nb = j->nblocks - first < TASK_BLOCKS ? j->nblocks - first : TASK_BLOCKS;
    blocks_isa(j->dtype, j->p, j->count, first, nb, j->isa, j->sums + first);
}

void wpk_acc_feed_on(wpk_acc *a, int dtype, const void *data, size_t count, int portable,
                     const wpack_executor *ex, wpk_side_fn side, void *user)
{
    if (!ex || !ex->run || ex->threads < 2 || count * wpack_dtype_size(dtype) < (1u << 20)) {
        if (side)
            side(user, data, count * wpack_dtype_size(dtype));
        wpk_acc_feed_path(a, dtype, data, count, portable);
        return;
    }
    wpk_bsum sums[STEP_BLOCKS];
    const uint8_t *q = data;
    int isa = direct_dtype(dtype) ? wpk_acc_isa(portable) : WPK_CPU_SCALAR;
    for (size_t done = 0; done < count;) {
        size_t n = count - done;
        if (n > (size_t)STEP_BLOCKS * WPK_STATS_BLOCK)
            n = (size_t)STEP_BLOCKS * WPK_STATS_BLOCK;
        size_t nblocks = (n + WPK_STATS_BLOCK - 1) / WPK_STATS_BLOCK;
        step_job j = {side, user, dtype, isa, q, n, nblocks, sums};
        ex->run(ex->self, !!side + (nblocks + TASK_BLOCKS - 1) / TASK_BLOCKS, step_item, &j);
        /* steps hold whole blocks: their blocks are those of the serial call */
        wpk_acc_fold(a, dtype, q, n, 0, nblocks, sums);
        q += n * wpack_dtype_size(dtype);
        done += n;
    }
    wpk_acc_clamp(a); /* once, as the serial call does at its end */
}

void wpk_hist_edges(double min, double max, uint32_t bins, double *edges)
{
    if (!(max > min)) {
        /* One value: a range around it, at least 0.5 each side, wider for
         * large magnitudes (where +-0.5 is no change); clamped to the
         * finite doubles, so a value at DBL_MAX gets a range below it. */
        double d = fabs(min) / 1024 > 0.5 ? fabs(min) / 1024 : 0.5;
        min = min - d < -DBL_MAX ? -DBL_MAX : min - d;
        max = max + d > DBL_MAX ? DBL_MAX : max + d;
    }
    /* Halves first: max - min overflows for f64 values near the top of the range. */
    double w = (max / 2 - min / 2) / bins * 2;
    for (uint32_t b = 0; b <= bins; b++)
        edges[b] = min + w * b;
    if (!isfinite(w)) /* cannot happen with finite min/max, but never write inf */
        for (uint32_t b = 0; b <= bins; b++)
            edges[b] = b < bins ? min : max;
    edges[bins] = max;
    /* Tiny ranges can round adjacent edges together: nudge them apart,
     * upwards; where that would pass DBL_MAX, downwards from the top. */
    for (uint32_t b = 1; b <= bins; b++)
        if (!(edges[b] > edges[b - 1]))
            edges[b] = nextafter(edges[b - 1], INFINITY);
    if (!isfinite(edges[bins])) {
        edges[bins] = DBL_MAX;
        for (uint32_t b = bins; b-- > 0;)
            if (!(edges[b] < edges[b + 1]))
                edges[b] = nextafter(edges[b + 1], -INFINITY);
    }
}

/* The bin of x, a value in [lo, hi], by its relative position in halves:
 * hi - lo may overflow, or be so small (denormal) that bins / (hi - lo) is
 * infinite. */
static inline uint32_t hist_bin(double x, double lo, double span, uint32_t bins)
{
    double f = (x / 2 - lo / 2) / span * bins;
    return !(f > 0) ? 0 : f >= bins ? bins - 1 : (uint32_t)f;
}

#ifdef HAVE_X86_SIMD
/* hist_bin of 8 elements at once with the same operations in the same
 * order (x / 2 is x * 0.5, exact), so the same bins; counted where
 * lo <= x <= hi. max_pd(f, 0) is 0 for a NaN f, and f capped at bins - 1
 * truncates to bins - 1 from there on, as hist_bin does. */
AVX2_INLINE void hist_add8(uint64_t *counts, __m256 x8, double lo, double hi, double span,
                           uint32_t bins)
{
    const __m256d vlo = _mm256_set1_pd(lo), vhi = _mm256_set1_pd(hi), vlo2 = _mm256_set1_pd(lo / 2);
    const __m256d vspan = _mm256_set1_pd(span), vbins = _mm256_set1_pd(bins);
    const __m256d top = _mm256_set1_pd(bins - 1), half = _mm256_set1_pd(0.5);
    int32_t b[8];
    int m = 0;
    for (int h = 0; h < 2; h++) {
        __m256d x = _mm256_cvtps_pd(h ? _mm256_extractf128_ps(x8, 1) : _mm256_castps256_ps128(x8));
        __m256d in = _mm256_and_pd(_mm256_cmp_pd(x, vlo, _CMP_GE_OQ), _mm256_cmp_pd(x, vhi, _CMP_LE_OQ));
        __m256d f = _mm256_mul_pd(_mm256_div_pd(_mm256_sub_pd(_mm256_mul_pd(x, half), vlo2), vspan), vbins);
        f = _mm256_min_pd(_mm256_max_pd(f, _mm256_setzero_pd()), top);
        _mm_storeu_si128((__m128i *)(void *)(b + 4 * h), _mm256_cvttpd_epi32(f));
        m |= _mm256_movemask_pd(in) << (4 * h);
    }
    if (m == 0xff) /* nearly always: lo and hi are the tensor's min and max */
        for (int l = 0; l < 8; l++)
            counts[b[l]]++;
    else
        for (int l = 0; l < 8; l++)
            counts[b[l]] += (uint64_t)((m >> l) & 1);
}

/* The whole groups of 8 of n elements; returns how many it took. */
AVX2_INLINE size_t hist_avx2_loop(uint64_t *counts, uint32_t bins, double lo, double hi,
                                  double span, int dtype, const uint8_t *p, size_t n)
{
    const size_t size = dtype == WPACK_DTYPE_F32 ? 4 : 2;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        hist_add8(counts, load8(dtype, p + size * i), lo, hi, span, bins);
    return i;
}

AVX2_TARGET static size_t hist_avx2(uint64_t *counts, uint32_t bins, double lo, double hi,
                                    double span, int dtype, const uint8_t *p, size_t n)
{
    if (dtype == WPACK_DTYPE_F32)
        return hist_avx2_loop(counts, bins, lo, hi, span, WPACK_DTYPE_F32, p, n);
    if (dtype == WPACK_DTYPE_F16)
        return hist_avx2_loop(counts, bins, lo, hi, span, WPACK_DTYPE_F16, p, n);
    return hist_avx2_loop(counts, bins, lo, hi, span, WPACK_DTYPE_BF16, p, n);
}
#endif

void wpk_hist_feed(uint64_t *counts, uint32_t bins, double lo, double hi, int dtype,
                   const void *data, size_t count)
{
    wpk_hist_feed_isa(counts, bins, lo, hi, dtype, data, count, call_isa(dtype, count, 0));
}

void wpk_hist_feed_isa(uint64_t *counts, uint32_t bins, double lo, double hi, int dtype,
                       const void *data, size_t count, int isa)
{
    double v[BLOCK];
    size_t size = wpack_dtype_size(dtype);
    const uint8_t *p = data;
    double span = hi / 2 - lo / 2;
#ifdef HAVE_X86_SIMD
    if (isa >= WPK_CPU_AVX2 && direct_dtype(dtype) && bins) {
        size_t k = hist_avx2(counts, bins, lo, hi, span, dtype, p, count);
        p += k * size;
        count -= k;
    }
#else
    (void)isa;
#endif
    while (count) {
        size_t n = count < BLOCK ? count : BLOCK;
        widen(dtype, p, n, v);
        for (size_t i = 0; i < n; i++)
            if (v[i] >= lo && v[i] <= hi)
                counts[hist_bin(v[i], lo, span, bins)]++;
        p += n * size;
        count -= n;
    }
}
