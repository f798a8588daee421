/* dense_dispatch.c - which SIMD path the kernel runs: the best the CPU has
 * (format/cpu_features.c), WPACK_ISA to force one. Chosen once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "dense.h"

static int supported[WPK_ISA_COUNT];
static int selected = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *const names[WPK_ISA_COUNT] = {"scalar", "avx2", "avx512"};

static void choose(void)
{
    supported[WPK_ISA_SCALAR] = 1;
    supported[WPK_ISA_AVX2] = wpk_cpu_supports(WPK_CPU_AVX2);
    supported[WPK_ISA_AVX512] = wpk_cpu_supports(WPK_CPU_AVX512);
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
