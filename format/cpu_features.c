/* cpu_features.c - which SIMD instruction sets this CPU and OS support:
 * CPUID for the instructions, XGETBV for the OS saving the YMM / ZMM state.
 * Shared by the dense kernel and the weight-stats pass; reads no environment
 * (a caller that wants to force a path says so in its options). */
#include <stddef.h>
#include <stdint.h>

#include "cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static int detect(int isa)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx || !fma || !f16c)
        return 0;
    uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) /* SSE and AVX (YMM) state */
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    int avx2 = (b >> 5) & 1;
    if (isa == WPK_CPU_AVX2)
        return avx2;
    int f = (b >> 16) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    /* opmask, ZMM0-15 upper halves, ZMM16-31 */
    return avx2 && f && bw && vl && (xcr0 & 0xe6) == 0xe6;
}
#else
static int detect(int isa)
{
    (void)isa;
    return 0;
}
#endif


int wpk_cpu_supports(int isa)
{
    if (isa == WPK_CPU_SCALAR)
        return 1;
    if (isa != WPK_CPU_AVX2 && isa != WPK_CPU_AVX512)
        return 0;
    /* No cache (no hidden global state), but CPUID is not cheap: in a
     * virtual machine it traps to the hypervisor (microseconds). Ask once per
     * operation, never per block of data. */
    return detect(isa);
}
