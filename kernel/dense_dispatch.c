/* dense_dispatch.c - which SIMD path the kernel runs: the best the CPU has
 * (format/cpu_features.c), or one forced through wpack_dense_configure()
 * (the CLI passes WPACK_ISA). The CPU is asked once. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_features.h"
#include "dense.h"

static int supported[WPK_ISA_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* The path in use: WPK_ISA_COUNT until chosen (then the best), -1 when a
 * forced one is unusable. */
static atomic_int selected = WPK_ISA_COUNT;

static const char *const names[WPK_ISA_COUNT] = {"scalar", "avx2", "avx512"};

static void detect(void)
{
    supported[WPK_ISA_SCALAR] = 1;
    supported[WPK_ISA_AVX2] = wpk_cpu_supports(WPK_CPU_AVX2);
    supported[WPK_ISA_AVX512] = wpk_cpu_supports(WPK_CPU_AVX512);
}

static int best(void)
{
    int b = WPK_ISA_SCALAR;
    for (int i = 0; i < WPK_ISA_COUNT; i++)
        if (supported[i])
            b = i;
    return b;
}

int wpk_isa_supported(int isa)
{
    pthread_once(&once, detect);
    return isa >= 0 && isa < WPK_ISA_COUNT && supported[isa];
}

int wpk_isa_select(const char *name, char *err, size_t errlen)
{
    pthread_once(&once, detect);
    int s = -1, known = 0;
    if (!name || !*name)
        s = best();
    for (int i = 0; s < 0 && i < WPK_ISA_COUNT; i++)
        if (strcmp(name, names[i]) == 0) {
            known = 1;
            s = supported[i] ? i : -1;
            break;
        }
    atomic_store(&selected, s);
    if (s >= 0)
        return WPACK_OK;
    if (known)
        wpk_fmt(err, errlen, "wpack_dense_settings: isa '%s': this machine lacks that path; its "
                "best is %s", name, names[best()]);
    else
        wpk_fmt(err, errlen, "wpack_dense_settings: isa '%.64s': unknown SIMD path: want scalar, "
                "avx2 or avx512", name);
    wpk_msg_escape(err, errlen); /* the name may hold anything */
    return WPACK_E_UNSUPPORTED;
}

int wpk_isa_selected(void)
{
    pthread_once(&once, detect);
    int s = atomic_load(&selected);
    return s == WPK_ISA_COUNT ? best() : s;
}

const char *wpk_isa_name(int isa)
{
    return isa >= 0 && isa < WPK_ISA_COUNT ? names[isa] : NULL;
}

const char *wpack_dense_isa(void)
{
    return wpk_isa_name(wpk_isa_selected());
}
