/* weightstats.h - streaming per-tensor statistics of float tensors: a pure
 * computation shared by the writer (automatic weight stats, histograms) and
 * libwpack-import (the stats of a tensor's values before --cast), so it
 * lives with the other shared internals in format/. */
#ifndef WPACK_FORMAT_WEIGHTSTATS_H
#define WPACK_FORMAT_WEIGHTSTATS_H

#include <stddef.h>
#include <stdint.h>

/* Count, min, max, mean and M2 (sum of squared deviations) of the finite
 * values seen; merged block by block with Chan's formula so it stays exact
 * enough over billions of values. */
typedef struct {
    uint64_t n;
    double min, max, mean, m2;
} wpk_acc;

void wpk_acc_init(wpk_acc *a);
/* Feed count whole elements of a float dtype (WPACK_DTYPE_F64..F8E5M2),
 * on AVX-512 or AVX2 where the CPU has it. */
void wpk_acc_feed(wpk_acc *a, int dtype, const void *data, size_t count);
/* The same, with portable set: the plain C path whatever the CPU (the same
 * bits; wpack_writer_options.portable_stats, tests). */
void wpk_acc_feed_path(wpk_acc *a, int dtype, const void *data, size_t count, int portable);
/* The instruction set the calls below use (WPK_CPU_SCALAR when portable):
 * ask once per operation (CPUID traps in a virtual machine), then feed with
 * wpk_acc_feed_isa. Any level wpk_cpu_supports allows gives the same bits. */
int wpk_acc_isa(int portable);
void wpk_acc_feed_isa(wpk_acc *a, int dtype, const void *data, size_t count, int isa);
/* The same split in two for running on several threads with the same
 * bits: elements are taken in blocks of WPK_STATS_BLOCK from data on (the
 * last one shorter); wpk_acc_blocks summarizes blocks first..first+nblocks
 * (any thread, any order), and wpk_acc_fold merges the summaries into a in
 * block order, then wpk_acc_clamp once per call. wpk_acc_feed_path(a, ...)
 * is exactly blocks + fold over all blocks, then clamp. */
#define WPK_STATS_BLOCK 4096
typedef struct {
    uint64_t n;                 /* finite values in the block */
    double min, max, mean, m2;
    int redo;                   /* fold must re-read the block (rare: sum overflows) */
} wpk_bsum;
void wpk_acc_blocks(int dtype, const void *data, size_t count, size_t first, size_t nblocks,
                    int portable, wpk_bsum *out);
void wpk_acc_fold(wpk_acc *a, int dtype, const void *data, size_t count, size_t first,
                  size_t nblocks, const wpk_bsum *sums);
void wpk_acc_clamp(wpk_acc *a);
/* wpk_acc_feed_path with the blocks summarized on ex, the same bits (ex
 * NULL or of one thread: on this thread). side, when not NULL, is given
 * all count elements' bytes, in order, a step (<= 8 MiB) at a time on one
 * of ex's threads while the others summarize that step (the writer hashes
 * them: each step is read while in cache). */
typedef void (*wpk_side_fn)(void *user, const void *p, size_t n);
struct wpack_executor;
void wpk_acc_feed_on(wpk_acc *a, int dtype, const void *data, size_t count, int portable,
                     const struct wpack_executor *ex, wpk_side_fn side, void *user);
/* Population variance. */
double wpk_acc_variance(const wpk_acc *a);
/* A tensor record's mean, variance and absmax from a (n > 0): all finite,
 * as the spec wants, even where f64 values overflowed the sums. Every
 * writer of weight stats from an accumulator goes through it. */
void wpk_acc_summary(const wpk_acc *a, double *mean, double *variance, double *absmax);

/* Add count elements into bins equal-width bins spanning [lo, hi]; values
 * outside (none, when lo/hi are the min/max) and non-finite ones are skipped. */
void wpk_hist_feed(uint64_t *counts, uint32_t bins, double lo, double hi, int dtype,
                   const void *data, size_t count);
/* The same on instruction set isa (wpk_acc_isa; tests): the same counts. */
void wpk_hist_feed_isa(uint64_t *counts, uint32_t bins, double lo, double hi, int dtype,
                       const void *data, size_t count, int isa);
/* The edges the writer uses for a tensor's histogram: bins+1 values,
 * strictly increasing even when min == max. */
void wpk_hist_edges(double min, double max, uint32_t bins, double *edges);

#endif
