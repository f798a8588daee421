/* dense_avx512.c - the AVX-512 path (AVX512F/BW/VL + FMA + F16C): 16 lanes,
 * register tiles of 4 weight rows x 6 batch rows (24 accumulators of 32). */
#include <immintrin.h>

#include "dense.h"

#if defined(__x86_64__) || defined(__i386__)
#define WPK_T __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define WPK_FN(name) name##_avx512
#define VL 16
#define V __m512
#define VZERO() _mm512_setzero_ps()
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VLOADX(p) _mm512_loadu_ps(p)
#define VREDUCE(v) _mm512_reduce_add_ps(v)
#define VLOAD_F32(p) _mm512_loadu_ps((const float *)(const void *)(p))
#define VLOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define VLOAD_BF16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32( \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16))
#define VLOAD_I8(p) \
    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#define TILE_RN 6
#define GEMV_PF_MIN_BYTES ((uint64_t)8 << 20) /* 8 MiB: streamed from DRAM, not cache-resident */
#define GEMV_KICK_BYTES 0u /* not measured on an AVX-512 host */
#define GEMV_KICK_MIN_BYTES UINT64_MAX
#include "dense_tile.h"
#else
void wpk_dense_rows_avx512(const wpk_dense_job *j, size_t o0, size_t o1)
{
    wpk_dense_rows_scalar(j, o0, o1);
}
#endif
