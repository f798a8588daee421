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
/* Batch 1 widens bf16 otherwise: the 16 bytes go to both 128-bit halves (a
 * load, no ALU op), then one in-lane byte shuffle puts bf16 i in the top
 * half of lane i, zeros below - the same values in the same lanes, one op
 * instead of two on the two pipes Zen 3 runs both on: 8-12% faster per
 * call on a cache-resident layer. The batch tiles keep the zero-extend and
 * shift, which measured 5-15% faster there (their loads are shared by 3
 * batch rows, and the shuffle mask costs them a register). */
#define VLOAD_BF16_GEMV(p) \
    _mm256_castsi256_ps(_mm256_shuffle_epi8( \
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(p))), \
        _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7, \
                         -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15)))
#define VLOAD_I8(p) \
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p))))
#define TILE_RN 3
/* never prefetch: slower on Zen 3 in cache and from DRAM (dense_tile.h) */
#define GEMV_PF_MIN_BYTES UINT64_MAX
/* but start the next tile's rows early: 1 KiB of each (dense_tile.h), in
 * layers of at least 4 MiB (smaller ones stay in L2/L3, where it cost
 * 3-10% a call) */
#define GEMV_KICK_BYTES 1024u
#define GEMV_KICK_MIN_BYTES ((uint64_t)4 << 20)

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
