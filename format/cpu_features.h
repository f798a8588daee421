/* cpu_features.h - SIMD support of this CPU and OS (format/cpu_features.c). */
#ifndef WPACK_FORMAT_CPU_FEATURES_H
#define WPACK_FORMAT_CPU_FEATURES_H

/* Instruction-set levels, best last; AVX2 includes FMA and F16C, AVX-512 is
 * F + BW + VL with the OS saving the ZMM state. */
enum { WPK_CPU_SCALAR = 0, WPK_CPU_AVX2 = 1, WPK_CPU_AVX512 = 2 };

/* 1 when the CPU and the OS support level isa, else 0. */
int wpk_cpu_supports(int isa);

#endif
