/*
 * bytes.h - little-endian loads/stores and overflow-checked arithmetic.
 *
 * Every field of an archive is read through these, never by casting a
 * pointer: the mapped file has no alignment promise and the host may be
 * big-endian.
 */
#ifndef WPACK_FORMAT_BYTES_H
#define WPACK_FORMAT_BYTES_H

#include <stdint.h>
#include <string.h>

/* a[0..n) == b[0..n), 8 bytes a step: for the short names and words of
 * hot loops (the resolver's), where a libc memcmp call costs more than
 * the compare itself. */
static inline int wpk_same_bytes(const void *a, const void *b, size_t n)
{
    const char *pa = a, *pb = b;
    uint64_t x, y;
    if (n < 8)
        return memcmp(pa, pb, n) == 0;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&x, pa + i, 8);
        memcpy(&y, pb + i, 8);
        if (x != y)
            return 0;
    }
    memcpy(&x, pa + n - 8, 8); /* the last 8 (overlapping the previous step) */
    memcpy(&y, pb + n - 8, 8);
    return x == y;
}

/* Chunks of 2^log2 bytes (log2 < 64) that cover n bytes: the last may be short. */
static inline uint64_t wpk_chunk_count(uint64_t n, unsigned log2)
{
    return (n >> log2) + ((n & (((uint64_t)1 << log2) - 1)) != 0);
}

/* A bool tensor's bytes must be 0 or 1 (spec 21.17): the offset of the
 * first other byte in p[0..n), or n when all are fine. 8 bytes a step. */
static inline size_t wpk_first_bad_bool(const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; n - i >= 8; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if (v & 0xFEFEFEFEFEFEFEFEull) /* any bit above bit 0 */
            break;
    }
    for (; i < n; i++)
        if (p[i] > 1)
            return i;
    return n;
}

static inline uint16_t wpk_ld16(const void *p)
{
    const uint8_t *b = p;
    return (uint16_t)(b[0] | (b[1] << 8));
}

static inline uint32_t wpk_ld32(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
           ((uint32_t)b[3] << 24);
}

static inline uint64_t wpk_ld64(const void *p)
{
    const uint8_t *b = p;
    return (uint64_t)wpk_ld32(b) | ((uint64_t)wpk_ld32(b + 4) << 32);
}

static inline double wpk_ldf64(const void *p)
{
    uint64_t u = wpk_ld64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline void wpk_st16(void *p, uint16_t v)
{
    uint8_t *b = p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}

static inline void wpk_st32(void *p, uint32_t v)
{
    uint8_t *b = p;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static inline void wpk_st64(void *p, uint64_t v)
{
    uint8_t *b = p;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static inline void wpk_stf64(void *p, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    wpk_st64(p, u);
}

/* Checked arithmetic: return 0 and leave *r unspecified on overflow. */
static inline int wpk_add(uint64_t a, uint64_t b, uint64_t *r)
{
    return !__builtin_add_overflow(a, b, r);
}

static inline int wpk_mul(uint64_t a, uint64_t b, uint64_t *r)
{
    return !__builtin_mul_overflow(a, b, r);
}

/* Round v up to a multiple of the power of two a; 0 on overflow. */
static inline int wpk_align_up(uint64_t v, uint64_t a, uint64_t *r)
{
    uint64_t t;
    *r = 0;
    if (!wpk_add(v, a - 1, &t))
        return 0;
    *r = t & ~(a - 1);
    return 1;
}

/* Is [off, off+len) inside [0, size)? Overflow-safe. */
static inline int wpk_in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

static inline int wpk_is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

#endif
