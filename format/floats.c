/* floats.c - exact widening of the narrow float types to f32. */
#include <math.h>
#include <string.h>

#include "internal.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float wpk_bf16_to_f32(uint16_t h)
{
    return from_bits((uint32_t)h << 16);
}

float wpk_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f)
        return from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    return from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

/* e4m3fn: bias 7, no infinities, S.1111.111 is NaN. */
float wpk_f8e4m3fn_to_f32(uint8_t v)
{
    int sign = v >> 7;
    int exp = (v >> 3) & 0xf;
    int man = v & 7;
    float r;
    if (exp == 0xf && man == 7)
        return NAN;
    if (exp == 0)
        r = ldexpf((float)man, -9);
    else
        r = ldexpf((float)(8 + man), exp - 10);
    return sign ? -r : r;
}

/* e5m2: bias 15, IEEE-like with infinities and NaNs. */
float wpk_f8e5m2_to_f32(uint8_t v)
{
    return wpk_f16_to_f32((uint16_t)v << 8);
}
