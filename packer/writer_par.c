/* writer_par.c - a tensor's weight stats and XXH3 on the caller's executor
 * (wpack_writer_options.executor), with the same bits as on one thread.
 *
 * The serial stats fold fixed blocks of WPK_STATS_BLOCK elements, counted
 * from the start of each piece the writer is given, into the accumulator
 * one after the other. wpk_acc_feed_on (weightstats.c) summarizes the
 * blocks in parallel, a step at a time, and folds them in block order on
 * the calling thread: the blocks and the order of the merges are those of
 * the serial path, whatever the thread count. XXH3 is sequential: one item
 * hashes the step's bytes while the others summarize them, so each step's
 * bytes are read while they are in cache. Histogram counts are integers:
 * per-task counts summed in any order give the same totals. */
#include <stdlib.h>
#include <string.h>

#include "writer.h"

#define PAR_MIN (1u << 20) /* bytes: smaller pieces are not worth a job */
#define HIST_COUNTS (1u << 20) /* histogram counters of all tasks together */

const wpack_executor *wpk_par_executor(const wpack_writer *w)
{
    const wpack_executor *ex = w->opt.executor;
    return ex && ex->run && ex->threads > 1 ? ex : NULL;
}

typedef struct {
    wpack_writer *w;
    const uint8_t *base; /* the piece: its byte 0 is at copy_in->off */
} side_ctx;

/* Hash a step's bytes and, for a piece from a file, copy them out (on one
 * thread, in order, while the others summarize the step). */
static void hash_side(void *user, const void *p, size_t n)
{
    side_ctx *c = user;
    wpk_tensor_hash(c->w, p, n);
    wpk_copy_in *ci = c->w->copy_in;
    if (ci && !ci->rc && n)
        ci->rc = wpk_copy_out(c->w, ci->fd, ci->off + (uint64_t)((const uint8_t *)p - c->base),
                              p, n);
}

int wpk_par_hash_stats(wpack_writer *w, wpk_pending_entry *e, const uint8_t *p, size_t n,
                       size_t pre, size_t whole)
{
    const wpack_executor *ex = wpk_par_executor(w);
    if (!ex || n < PAR_MIN)
        return 0;
    size_t mid = whole * wpack_dtype_size(e->dtype);
    side_ctx c = {w, p};
    hash_side(&c, p, pre); /* the bytes that completed a split element */
    wpk_acc_feed_on(&e->acc, e->dtype, p + pre, whole, w->opt.portable_stats, ex, hash_side, &c);
    hash_side(&c, p + pre + mid, n - pre - mid); /* a split element's first bytes */
    if (w->copy_in)
        w->copy_in->used = 1;
    return 1;
}

typedef struct {
    int dtype;
    uint32_t bins;
    double lo, hi;
    const uint8_t *p;
    size_t count, per_task;
    uint64_t *counts; /* bins per task */
} hist_job;

static void hist_task(void *ctx, size_t i)
{
    hist_job *j = ctx;
    size_t first = i * j->per_task;
    size_t n = j->count - first < j->per_task ? j->count - first : j->per_task;
    uint64_t *c = j->counts + (size_t)j->bins * i;
    memset(c, 0, (size_t)j->bins * sizeof *c);
    wpk_hist_feed(c, j->bins, j->lo, j->hi, j->dtype, j->p + first * wpack_dtype_size(j->dtype), n);
}

int wpk_par_hist_feed(wpack_writer *w, uint64_t *counts, uint32_t bins, double lo, double hi,
                      int dtype, const void *data, size_t count)
{
    const wpack_executor *ex = wpk_par_executor(w);
    size_t tasks = ex ? ex->threads : 1;
    if (tasks > 16)
        tasks = 16;
    if (tasks > HIST_COUNTS / bins) /* per-task counts stay within 8 MiB */
        tasks = HIST_COUNTS / bins;
    if (!ex || tasks < 2 || count * wpack_dtype_size(dtype) < PAR_MIN || count < tasks)
        return 0;
    uint64_t *part = malloc(tasks * bins * sizeof *part);
    if (!part)
        return 0; /* the serial path needs no memory */
    hist_job j = {dtype, bins, lo, hi, data, count, (count + tasks - 1) / tasks, part};
    tasks = (count + j.per_task - 1) / j.per_task;
    ex->run(ex->self, tasks, hist_task, &j);
    for (size_t t = 0; t < tasks; t++)
        for (uint32_t b = 0; b < bins; b++)
            counts[b] += part[t * bins + b];
    free(part);
    return 1;
}
