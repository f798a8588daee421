/* dense_dispatch.c - which SIMD path: CPUID for the instructions, XGETBV for
 * the OS saving the YMM / ZMM state, WPACK_ISA to force one. Chosen once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"

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
    if (isa == WPK_ISA_AVX2)
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

static int supported[WPK_ISA_COUNT];
static int selected = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *const names[WPK_ISA_COUNT] = {"scalar", "avx2", "avx512"};

static void choose(void)
{
    supported[WPK_ISA_SCALAR] = 1;
    supported[WPK_ISA_AVX2] = detect(WPK_ISA_AVX2);
    supported[WPK_ISA_AVX512] = detect(WPK_ISA_AVX512);
    const char *env = getenv("WPACK_ISA");
    if (env && *env) {
        selected = -1;
        for (int i = 0; i < WPK_ISA_COUNT; i++)
            if (strcmp(env, names[i]) == 0 && supported[i])
                selected = i;
        return;
    }
    selected = WPK_ISA_SCALAR;
    for (int i = 0; i < WPK_ISA_COUNT; i++)
        if (supported[i])
            selected = i;
}

int wpk_isa_supported(int isa)
{
    pthread_once(&once, choose);
    return isa >= 0 && isa < WPK_ISA_COUNT && supported[isa];
}

int wpk_isa_selected(void)
{
    pthread_once(&once, choose);
    return selected;
}

const char *wpk_isa_name(int isa)
{
    return isa >= 0 && isa < WPK_ISA_COUNT ? names[isa] : NULL;
}

const char *wpack_dense_isa(void)
{
    return wpk_isa_name(wpk_isa_selected());
}
