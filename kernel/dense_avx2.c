/* dense_avx2.c - the AVX2 + FMA + F16C path: 8 lanes, register tiles of
 * 4 weight rows x 3 batch rows (12 accumulators of 16 registers). */
#include <immintrin.h>

#include "dense.h"

#if defined(__x86_64__) || defined(__i386__)
#define WPK_T __attribute__((target("avx2,fma,f16c")))
#define WPK_FN(name) name##_avx2
#define VL 8
#define V __m256
#define VZERO() _mm256_setzero_ps()
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VLOADX(p) _mm256_loadu_ps(p)
#define VLOAD_F32(p) _mm256_loadu_ps((const float *)(const void *)(p))
#define VLOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define VLOAD_BF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32( \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16))
#define VLOAD_I8(p) \
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define TILE_RN 3
/* never prefetch: slower on Zen 3 in cache and from DRAM (dense_tile.h) */
#define GEMV_PF_MIN_BYTES UINT64_MAX
/* but start the next tile's rows early: 1 KiB of each (dense_tile.h) */
#define GEMV_KICK_BYTES 1024u

/* Sum of the 8 lanes, in a fixed order. */
static inline __attribute__((always_inline)) WPK_T float wpk_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define VREDUCE(v) wpk_hsum256(v)
#include "dense_tile.h"
#else
void wpk_dense_rows_avx2(const wpk_dense_job *j, size_t o0, size_t o1)
{
    wpk_dense_rows_scalar(j, o0, o1);
}
#endif
