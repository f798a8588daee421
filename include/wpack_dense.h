/*
 * wpack_dense.h - libwpack-dense: Linear(+bias)(+ReLU) layers run straight
 * from an archive's mapped weights (pkg-config wpack-dense; needs libwpack).
 */
#ifndef WPACK_DENSE_H
#define WPACK_DENSE_H

#include "wpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- dense kernel */

/*
 * The dense-layer kernel and the in-place stats updater.
 *
 * A Linear layer y = act(x . W^T + b) runs straight from the archive's
 * mapped weights: W [out, in] row-major as PyTorch and IREE store it, no
 * copy, no repacking. x and y are f32 row-major [batch, in] / [batch, out]
 * in caller buffers of any alignment. Sums are accumulated in f32.
 *
 * Weight dtypes: f32, f16, bf16 and i8. Scales (kernel/README.md "Scaled
 * weights"): when an entry "NAME_scale" (f32, shape [out] or [out, 1])
 * exists next to the weight entry NAME, output channel o is multiplied by
 * scale[o] before the bias: y = act((x . W^T) * scale + b). An i8 weight
 * must have one (symmetric per-output-channel quantization, W ~ q * scale);
 * `wpack cast --to int8` writes it. The bias (optional, shape [out]) may be
 * f32, f16 or bf16.
 *
 * The arithmetic runs on the best SIMD path of the CPU, chosen once per
 * process: "avx512" (AVX512F/BW/VL + FMA + F16C), "avx2" (AVX2 + FMA +
 * F16C) or the portable "scalar" reference; both CPUID and the OS's saved
 * register state (XGETBV) are checked. The environment variable
 * WPACK_ISA=scalar|avx2|avx512 forces a path (a path the machine lacks makes
 * every call fail with WPACK_E_UNSUPPORTED). Rows are split over a small
 * persistent thread pool of WPACK_THREADS threads (default: online CPUs);
 * small layers run on the calling thread. An idle pool thread spins about
 * 5 ms for the next call before it sleeps (a core stays busy meanwhile);
 * WPACK_SPIN_US=N sets that to N microseconds, 0 to sleep at once. Calls
 * may be made from any number of threads at once; they share the pool.
 *
 * Host byte order must be little-endian (the format's): on a big-endian host
 * wpack_linear_bind() returns WPACK_E_UNSUPPORTED.
 */

/* ------------------------------------------------------------ dense layers */

/* Activations fused into wpack_linear_forward(). */
#define WPACK_ACT_NONE 0
#define WPACK_ACT_RELU 1

/* A Linear layer bound to archive entries. Plain data: the pointers point
 * into the mapped archive and stay valid until wpack_close(); nothing needs
 * freeing. Fill it with wpack_linear_bind() or wpack_linear_from_tensors(). */
typedef struct wpack_linear {
    uint64_t in_features, out_features;
    int weight_dtype;           /* WPACK_DTYPE_F32/F16/BF16/I8 */
    const void *weight;         /* [out, in] */
    const void *scale;          /* f32 [out] or NULL */
    int bias_dtype;             /* WPACK_DTYPE_F32/F16/BF16, 0 without bias */
    const void *bias;           /* [out] or NULL */
} wpack_linear;

/*
 * Bind the Linear module at prefix: entries "PREFIX.weight", optional
 * "PREFIX.weight_scale" and optional "PREFIX.bias" (found like wpack_find(),
 * so name-map names work too). Errors, each with a message in err (may be
 * NULL) naming the entry: WPACK_E_NOT_FOUND (no weight), WPACK_E_NO_VIEW
 * (a splat), WPACK_E_DTYPE (a dtype the kernel does not take, an i8 weight
 * without scale), WPACK_E_SHAPE (weight not rank 2, scale or bias not [out],
 * a zero dimension).
 */
int wpack_linear_bind(const wpack_archive *ar, const char *prefix, wpack_linear *out,
                      char *err, size_t errlen);

/* The same from entries the caller looked up; scale and bias may be NULL. */
int wpack_linear_from_tensors(const wpack_tensor *weight, const wpack_tensor *scale,
                              const wpack_tensor *bias, wpack_linear *out, char *err,
                              size_t errlen);

/*
 * y[b][o] = act(sum_k x[b][k] * W[o][k] * scale[o] + bias[o]) for b < batch,
 * x [batch, in_features] and y [batch, out_features] f32 row-major, any
 * alignment, not overlapping. batch 0 does nothing. act is WPACK_ACT_*.
 * Errors: WPACK_E_INVALID_ARGUMENT (NULL pointers, unknown act, sizes whose
 * product overflows), WPACK_E_DTYPE (a layer not filled by the bind calls),
 * WPACK_E_UNSUPPORTED (WPACK_ISA names a path this machine lacks, or junk).
 * The same inputs give the same bits whatever the thread count, and a row
 * of x gives the same bits alone (batch 1) as inside any batch.
 */
int wpack_linear_forward(const wpack_linear *l, const float *x, float *y, size_t batch, int act);

/* The SIMD path the forward calls use: "avx512", "avx2" or "scalar"; NULL
 * when WPACK_ISA asks for one the machine lacks (or names none). */
const char *wpack_dense_isa(void);

/* Threads the forward calls may use (WPACK_THREADS, default online CPUs). */
unsigned wpack_dense_threads(void);

#ifdef __cplusplus
}
#endif
#endif /* WPACK_DENSE_H */
