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
 * The arithmetic runs on the best SIMD path of the CPU: "avx512"
 * (AVX512F/BW/VL + FMA + F16C), "avx2" (AVX2 + FMA + F16C) or the portable
 * "scalar" reference; both CPUID and the OS's saved register state (XGETBV)
 * are checked. wpack_dense_configure() may force a path (one the machine
 * lacks makes every call fail with WPACK_E_UNSUPPORTED).
 *
 * Threads: the library starts none unless the caller asks. Rows are split
 * over a thread pool (wpack_pool below), and small layers run on the
 * calling thread alone. wpack_linear_forward_pool() runs on a pool the
 * caller made; wpack_linear_forward() on the default pool, which is the
 * calling thread alone until wpack_dense_configure() sets threads to 0
 * (online CPUs) or N > 1; it is then created on the first call that is
 * worth threads and lives until wpack_dense_shutdown() joins it. An idle pool thread spins about 5 ms for
 * the next call before it sleeps (a core stays busy meanwhile); a pool's
 * spin_us changes that. Calls may be made from any number of threads at
 * once; calls on one pool take turns.
 *
 * The library reads no environment variable. The wpack CLI reads
 * WPACK_ISA=scalar|avx2|avx512, WPACK_THREADS=N, WPACK_SPIN_US=N and
 * WPACK_DENSE_MIN_PARALLEL=MACS (cli/cli_env.c) and passes them in here.
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
    /* Set to zero by the bind calls (wpack.h, "Structs never change
     * size": a newer library's fields land here); the forward calls refuse
     * a layer with one that is not zero as not filled by them. */
    void *reserved_ptr[2];
    uint64_t reserved[2];
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

/* The same from entries the caller looked up; scale and bias may be NULL.
 * Their bytes are not checked here (there is no handle to check them
 * with): wpack_linear_bind() checks them, or call wpack_tensor_view() on
 * each entry first. */
int wpack_linear_from_tensors(const wpack_tensor *weight, const wpack_tensor *scale,
                              const wpack_tensor *bias, wpack_linear *out, char *err,
                              size_t errlen);

/*
 * y[b][o] = act(sum_k x[b][k] * W[o][k] * scale[o] + bias[o]) for b < batch,
 * x [batch, in_features] and y [batch, out_features] f32 row-major, any
 * alignment, not overlapping. batch 0 does nothing. act is WPACK_ACT_*.
 * Errors: WPACK_E_INVALID_ARGUMENT (NULL pointers, unknown act, sizes whose
 * product overflows), WPACK_E_DTYPE (a layer not filled by the bind calls:
 * a dtype, pointer or size they never set, a reserved field not zero),
 * WPACK_E_UNSUPPORTED (the configured isa is a path this machine lacks, or
 * junk), WPACK_E_NOMEM (the default pool could not be made).
 * The same inputs give the same bits whatever the pool or thread count, and a row
 * of x gives the same bits alone (batch 1) as inside any batch.
 */
int wpack_linear_forward(const wpack_linear *l, const float *x, float *y, size_t batch, int act);

/* ------------------------------------------------------------ thread pools */

/*
 * A pool of threads: `threads` in all, the calling thread included (a pool
 * of n starts n - 1 workers at once; 0: online CPUs; at most 256; a worker
 * that cannot be started leaves a smaller pool, still correct). spin_us: how
 * long an idle worker spins for the next job before it sleeps, in
 * microseconds (negative: the default, 5000; 0: sleep at once; at most 1 s).
 * NULL when out of memory. The workers are joinable: wpack_pool_destroy()
 * joins every one, so no thread of the pool outlives it (safe before
 * dlclose). Destroy a pool only when no call runs on it.
 */
typedef struct wpack_pool wpack_pool;
wpack_pool *wpack_pool_create(unsigned threads, long spin_us);
void wpack_pool_destroy(wpack_pool *pool);
/* Threads of the pool, the caller included (1 for NULL). */
unsigned wpack_pool_threads(const wpack_pool *pool);
/* An executor (wpack.h) that runs the core's zstd decoding on pool (NULL:
 * on the calling thread): attach it with wpack_set_executor(); the pool
 * must outlive that use. A job on a pool must not start another on it. */
void wpack_pool_executor(wpack_pool *pool, wpack_executor *ex);

/* wpack_linear_forward() on pool (NULL: the calling thread alone). */
int wpack_linear_forward_pool(wpack_pool *pool, const wpack_linear *l, const float *x, float *y,
                              size_t batch, int act);

/* ------------------------------------------------------ process settings */

/* Settings of the kernel for the whole process (what the CLI reads from its
 * environment). Defaults from wpack_dense_settings_init(). */
typedef struct wpack_dense_settings {
    const char *isa;        /* NULL or "": the best path; "scalar", "avx2" or "avx512" forces one */
    unsigned threads;       /* threads of the default pool, the caller included: 1 (the
                               default) starts none; 0: online CPUs */
    long spin_us;           /* idle spin of the default pool (as wpack_pool_create); <0: 5000 */
    long long min_parallel; /* multiply-adds (batch x out x in) below which a call runs on
                               the calling thread alone, any pool; <0: 131072 */
    /* Zero (set by wpack_dense_settings_init; wpack.h, "Structs never
     * change size"): wpack_dense_configure refuses any other value with
     * WPACK_E_INVALID_ARGUMENT and changes nothing (wpack_dense_configure_ex
     * says which field). */
    void *reserved_ptr[4];
    uint64_t reserved[4];
} wpack_dense_settings;
void wpack_dense_settings_init(wpack_dense_settings *s);
/* Apply s (NULL: the defaults). Make it before forward calls, not while
 * they run. threads and spin_us apply when the default pool is created
 * (after wpack_dense_shutdown() if it runs). An isa that is unknown or that
 * this machine lacks returns WPACK_E_UNSUPPORTED, and the forward calls
 * then fail with it until another configure. */
int wpack_dense_configure(const wpack_dense_settings *s);
/* The same, with the reason of a failure in err (may be NULL; "" on
 * success; escaped, as every message): "wpack_dense_settings: reserved[0]
 * is not zero ...", "wpack_dense_settings: isa 'sse9': unknown SIMD path
 * ..." or "... this machine lacks that path ...". */
int wpack_dense_configure_ex(const wpack_dense_settings *s, char *err, size_t errlen);

/* Join and free the default pool (if it was created); a later
 * wpack_linear_forward() makes a new one. Call it when no forward call
 * runs, e.g. before dlclose or exit. */
void wpack_dense_shutdown(void);

/* The SIMD path the forward calls use: "avx512", "avx2" or "scalar"; NULL
 * when the configured isa is one the machine lacks (or names none). */
const char *wpack_dense_isa(void);

/* Threads of the default pool (created or to be created; starts nothing). */
unsigned wpack_dense_threads(void);

#ifdef __cplusplus
}
#endif
#endif /* WPACK_DENSE_H */
