/* cli_chain.h - a chain of modules from a --layers SPEC ("0,1=relu,2"), run
 * by `wpack run` and `wpack calibrate`; .npy input and output of f32. */
#ifndef WPACK_CLI_CHAIN_H
#define WPACK_CLI_CHAIN_H

#include <stddef.h>

#include "wpack.h"
#include "wpack_dense.h"

typedef struct {
    char *path;          /* module path: stats key */
    int relu;            /* 1: an activation, else a Linear at this prefix */
    wpack_linear lin;
    void *fetched[3];    /* weight, scale, bias fetched from an archive without views */
} chain_step;

typedef struct {
    chain_step *steps;
    size_t n;
} chain;

/* Parse SPEC (NULL: the archive's "wpack.layers" metadata) and bind every
 * Linear. Items: PREFIX (Linear), PATH=relu, PREFIX=linear. The work per
 * input row of width in_width, counted item by item as it is bound (a
 * Linear's weight, scale and bias bytes, a ReLU's row of f32), may not
 * exceed work_ratio x (ar's size + an input row's bytes): a list repeating
 * a layer ever more times would turn a small archive into unbounded work
 * (WPACK_E_LIMIT naming the item, the figures and --max-work-ratio). */
int chain_build(const wpack_archive *ar, const char *spec, size_t in_width, uint64_t work_ratio,
                chain *c, char *err, size_t errlen);
void chain_free(chain *c);
/* Bind step s's Linear: views of a mapped archive, else (a URL) its entries
 * fetched into s->fetched (chain_fetch.c). */
int chain_bind(const wpack_archive *ar, chain_step *s, char *err, size_t errlen);

/* Called with each step's output [batch, width]. */
typedef void (*chain_observe_fn)(void *user, size_t step, const float *y, size_t batch,
                                 size_t width);
/* Run batch rows of x [batch, width]; *out ([batch, *out_width], malloc'ed)
 * is the last step's output. With observe set, ReLU is not fused so every
 * module's own output is seen. */
int chain_run(const chain *c, const float *x, size_t batch, size_t width, float **out,
              size_t *out_width, chain_observe_fn observe, void *user, char *err, size_t errlen);

/* The arguments `run` and `calibrate` share: ARCHIVE, --layers SPEC,
 * --input X.npy, --no-verify, --max-work-ratio N. */
typedef struct {
    const char *archive, *spec, *input;
    int verify;
    uint64_t work_ratio;
} chain_args;
#define CHAIN_WORK_RATIO 64
#define CHAIN_ARGS_INIT {NULL, NULL, NULL, 1, CHAIN_WORK_RATIO}
/* The help lines of --max-work-ratio. */
#define CHAIN_WORK_HELP                                                                   \
    "  --max-work-ratio N  refuse a layer list whose work per input row (weight\n"      \
    "           bytes of each Linear it names, as often as it names it, plus a row\n"   \
    "           of f32 per ReLU) is above N x (the archive's size + an input row's\n"   \
    "           bytes); default 64, room for a layer shared ~60 times\n"
/* One of them at argv[*i] for command cmd, after the command's own options:
 * 1 used, -1 a usage error (printed: a missing value, an unknown option, a
 * second archive). */
int chain_arg(int argc, char **argv, int *i, const char *cmd, chain_args *a);

/* Read a .npy of f32 or f64, rank 1 ([in]: one row) or 2 ([batch, in]). */
int chain_read_npy(const char *path, float **x, size_t *batch, size_t *width, char *err,
                   size_t errlen);
/* Write y [batch, width] as an f32 .npy (rank 2); no_sync: without fsync. */
int chain_write_npy(const char *path, const float *y, size_t batch, size_t width, int no_sync,
                    char *err, size_t errlen);

#endif
