/* float_cast.c - narrowing casts to bf16 and f16, one rounding from the
 * exact value (round to nearest even), for `create --cast` and `wpack cast`. */
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"

/* Round |x| to a float with mbits mantissa bits and ebits exponent bits.
 * Scaling by powers of two is exact and nearbyint rounds half to even, so
 * there is exactly one rounding, from the exact input value. */
static uint16_t round_small(double x, int mbits, int ebits)
{
    const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, emax = bias;
    const uint16_t sign = signbit(x) ? (uint16_t)(1u << (mbits + ebits)) : 0;
    const uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    if (isnan(x))
        return (uint16_t)(sign | inf | (1u << (mbits - 1)));
    double a = fabs(x);
    if (isinf(a))
        return sign | inf;
    if (a < ldexp(1.0, emin)) /* subnormal; rounding up to 2^mbits gives the least normal */
        return (uint16_t)(sign | (uint16_t)nearbyint(ldexp(a, mbits - emin)));
    int e;
    double m = frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
    int E = e - 1;
    double q = nearbyint(ldexp(m, mbits + 1)); /* [2^mbits, 2^(mbits+1)] */
    if (q >= ldexp(1.0, mbits + 1)) {
        q = ldexp(1.0, mbits);
        E++;
    }
    if (E > emax)
        return sign | inf;
    return (uint16_t)(sign | (uint16_t)((E + bias) << mbits) | ((uint16_t)q - (1u << mbits)));
}

uint16_t wpk_to_bf16(double x)
{
    return round_small(x, 7, 8);
}

uint16_t wpk_to_f16(double x)
{
    return round_small(x, 10, 5);
}

double wpk_load_float(int dtype, const uint8_t *p)
{
    switch (dtype) {
    case WPACK_DTYPE_F64:
        return wpk_ldf64(p);
    case WPACK_DTYPE_F32: {
        uint32_t u = wpk_ld32(p);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case WPACK_DTYPE_F16:
        return wpk_f16_to_f32(wpk_ld16(p));
    case WPACK_DTYPE_BF16:
        return wpk_bf16_to_f32(wpk_ld16(p));
    case WPACK_DTYPE_F8E4M3FN:
        return wpk_f8e4m3fn_to_f32(*p);
    case WPACK_DTYPE_F8E5M2:
        return wpk_f8e5m2_to_f32(*p);
    default:
        return 0;
    }
}

size_t wpk_cast_block(int src_dtype, const void *src, int dst_dtype, uint16_t *dst, size_t count)
{
    const uint8_t *p = src;
    size_t es = wpack_dtype_size(src_dtype), over = 0;
    if (src_dtype == WPACK_DTYPE_F32 && dst_dtype == WPACK_DTYPE_BF16) {
        for (size_t i = 0; i < count; i++) { /* the usual bit trick, same result */
            uint32_t u = wpk_ld32(p + 4 * i);
            if ((u & 0x7fffffffu) > 0x7f800000u)
                dst[i] = (uint16_t)((u >> 16) | 0x40);
            else
                dst[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
            /* a finite f32 above bf16's largest rounds up to inf */
            over += (u & 0x7f800000u) != 0x7f800000u && (dst[i] & 0x7fffu) == 0x7f80u;
        }
        return over;
    }
    /* bf16 and f16 both encode inf as all-ones exponent, zero mantissa */
    uint16_t inf = dst_dtype == WPACK_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < count; i++) {
        double v = wpk_load_float(src_dtype, p + es * i);
        dst[i] = dst_dtype == WPACK_DTYPE_BF16 ? wpk_to_bf16(v) : wpk_to_f16(v);
        over += isfinite(v) && (dst[i] & 0x7fffu) == inf;
    }
    return over;
}

void wpk_cast_overflow_text(char *out, size_t outlen, uint64_t overflowed, uint64_t count,
                            int dst_dtype)
{
    wpk_fmt(out, outlen, "%llu of %llu values are beyond %s's range (+-%s) and became +-inf",
            (unsigned long long)overflowed, (unsigned long long)count,
            dst_dtype == WPACK_DTYPE_BF16 ? "bf16" : "f16",
            dst_dtype == WPACK_DTYPE_BF16 ? "3.39e38" : "65504");
}

