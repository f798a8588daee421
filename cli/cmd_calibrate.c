/* cmd_calibrate.c - `wpack calibrate`: run samples through the layer chain
 * and store each module's output statistics in the archive, in place. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "cli.h"
#include "cli_chain.h"
#include "nameset.h"
#include "weightstats.h"

static const char help[] =
    "usage: wpack calibrate ARCHIVE [--layers SPEC] --input SAMPLES.npy [--histogram N]\n"
    "                       [--max-output SIZE]\n"
    "\n"
    "Runs SAMPLES [n, in] through the modules of SPEC (as in wpack run) and\n"
    "stores, for each module path, the statistics of its output over all\n"
    "samples and channels: min, max, absmax, mean, population variance, count\n"
    "of finite values, and with --histogram an N-bin histogram over [min, max]\n"
    "(a second pass). A Linear's output is before a following ReLU; the ReLU's\n"
    "path gets its own record; a module named more than once (a shared layer)\n"
    "gets one record of all its outputs. Existing activation stats of the same\n"
    "path are replaced. The archive is updated in place (as by wpack update): a new index\n"
    "generation holding only the live records is written where it overlaps\n"
    "nothing in use (the space of superseded generations is reused; the file\n"
    "never shrinks) and the superblock rewritten; tensor data is never\n"
    "rewritten and an interrupted update leaves the old or the new archive.\n"
    "ARCHIVE is a local file: a URL is read only (calibrate a local copy).\n"
    "  --batch N   samples per forward call (default 256)\n"
    "  --no-verify do not check the weights' bytes against their XXH3 before use\n"
    "              (checked by default, once each: a mismatch fails naming the\n"
    "              tensor and the archive is left as it was)\n"
    "  --max-output SIZE  the most bytes of histograms (counts and edges, held in\n"
    "              memory and added to the index) --histogram may ask for across\n"
    "              the records (default: the larger of 1 GiB and 1000 x ARCHIVE's\n"
    "              size; K/M/G suffixes); above it nothing runs\n"
    CHAIN_WORK_HELP;

typedef struct {
    uint64_t count;
    double min, max, mean, m2;
    uint32_t bins;
    double *edges;
    uint64_t *counts;
} acc;

typedef struct {
    acc *a;
    size_t *first; /* step -> the first step of its module path: one record a path */
    int pass;      /* 1: moments, 2: histogram */
} calib;

static const uint8_t *step_path(void *ctx, uint64_t item, uint64_t *len)
{
    const chain *ch = ctx;
    *len = strlen(ch->steps[item].path);
    return (const uint8_t *)ch->steps[item].path;
}

/* first[s]: the first step naming step s's module path. A module that runs
 * more than once (a shared layer) gets one record of all its outputs, as a
 * torch forward hook on it sees them; 0 when out of memory. */
static int first_steps(const chain *ch, size_t *first)
{
    wpk_nameset seen = {0};
    int ok = 1;
    for (size_t s = 0; ok && s < ch->n; s++) {
        const uint8_t *p = (const uint8_t *)ch->steps[s].path;
        uint64_t f, len = strlen(ch->steps[s].path);
        if (wpk_nameset_find(&seen, step_path, (void *)ch, p, len, &f))
            first[s] = (size_t)f;
        else if ((ok = wpk_nameset_insert(&seen, step_path, (void *)ch, p, len, s)))
            first[s] = s;
    }
    wpk_nameset_free(&seen);
    return ok;
}

static void observe(void *user, size_t step, const float *y, size_t batch, size_t width)
{
    calib *c = user;
    acc *a = &c->a[c->first[step]];
    size_t n = batch * width;
    for (size_t i = 0; i < n; i++) {
        double v = y[i];
        if (!isfinite(v))
            continue;
        if (c->pass == 1) {
            if (a->count == 0 || v < a->min)
                a->min = v;
            if (a->count == 0 || v > a->max)
                a->max = v;
            a->count++;
            double d = v - a->mean;
            a->mean += d / (double)a->count;
            a->m2 += d * (v - a->mean);
        } else {
            double lo = a->edges[0], hi = a->edges[a->bins];
            long b = (long)((v - lo) / (hi - lo) * a->bins);
            if (b < 0)
                b = 0;
            if (b >= (long)a->bins)
                b = (long)a->bins - 1;
            while (b > 0 && v < a->edges[b])
                b--;
            while (b + 1 < (long)a->bins && v >= a->edges[b + 1])
                b++;
            a->counts[b]++;
        }
    }
}

static int run_pass(const chain *ch, const float *x, size_t n, size_t width, size_t bs, calib *c,
                    char *err, size_t errlen)
{
    for (size_t s = 0; s < n; s += bs) {
        size_t b = n - s < bs ? n - s : bs;
        float *y;
        size_t ow;
        int rc = chain_run(ch, x + s * width, b, width, &y, &ow, observe, c, err, errlen);
        if (rc)
            return rc;
        free(y);
    }
    return WPACK_OK;
}

/* A histogram's counts and edges, per record, in memory and in the index:
 * a 900 KB archive naming 3000 one-element Linears asked for 48 GiB with
 * --histogram 1048576. Checked before the forward pass, as the cap of every
 * command's output (out_cap.c). */
static int histograms_fit(const chain *ch, const size_t *first, uint64_t bins, const char *archive,
                          const wpack_archive *ar, uint64_t max_output)
{
    uint64_t records = 0;
    for (size_t s = 0; s < ch->n; s++)
        records += first[s] == s;
    uint64_t per = (2 * bins + 1) * sizeof(double), need;
    if (!wpk_mul(records, per, &need))
        need = UINT64_MAX;
    char what[64];
    snprintf(what, sizeof what, "calibrate --histogram %llu", (unsigned long long)bins);
    return cli_check_output(what, archive, need, cli_input_bytes(ar), max_output, 1);
}

int cmd_calibrate(int argc, char **argv)
{
    const char *v;
    chain_args args = CHAIN_ARGS_INIT;
    uint64_t bins = 0, bs = 256, max_output = 0;
    int r;
    for (int i = 1; i < argc;) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        } else if ((r = cli_opt_value(argc, argv, &i, "--histogram", &v))) {
            if (r < 0)
                return CLI_USAGE;
            if (!cli_parse_size(v, &bins) || bins < 1 || bins > (1u << 20)) {
                cli_error("--histogram %s: want 1 to 1048576 bins", v);
                return CLI_USAGE;
            }
        } else if ((r = cli_opt_value(argc, argv, &i, "--batch", &v))) {
            if (r < 0)
                return CLI_USAGE;
            if (!cli_parse_size(v, &bs) || bs < 1 || bs > (1u << 20)) {
                cli_error("--batch %s: want 1 to 1048576", v);
                return CLI_USAGE;
            }
        } else if ((r = cli_max_output_opt(argc, argv, &i, &max_output))) {
            if (r < 0)
                return CLI_USAGE;
        } else if ((r = chain_arg(argc, argv, &i, "calibrate", &args)) < 0) {
            return CLI_USAGE;
        }
    }
    if (!args.archive || !args.input) {
        fputs(help, stderr);
        return CLI_USAGE;
    }
    const char *archive = args.archive;
    if (cli_is_url(archive)) { /* said before the forward pass, not after it */
        cli_error("%s: a URL is read only and calibrate updates the archive in place; "
                  "calibrate a local copy [%s]", archive, wpack_error_name(WPACK_E_UNSUPPORTED));
        return CLI_FAIL;
    }
    wpack_archive *ar;
    if (!(ar = cli_open_reads(archive, args.verify))) {
        return CLI_FAIL;
    }
    char err[1024];
    chain ch;
    float *x = NULL;
    size_t n, width;
    calib c = {NULL, NULL, 1};
    size_t nrec = 0;
    wpack_stats_in *recs = NULL;
    double *vals = NULL;
    memset(&ch, 0, sizeof ch);
    int rc = chain_read_npy(args.input, &x, &n, &width, err, sizeof err);
    if (rc == WPACK_OK)
        rc = chain_build(ar, args.spec, width, args.work_ratio, &ch, err, sizeof err);
    if (rc == WPACK_OK && (!(c.a = calloc(ch.n, sizeof *c.a)) ||
                           !(c.first = calloc(ch.n, sizeof *c.first)) || !first_steps(&ch, c.first)))
        rc = WPACK_E_NOMEM;
    int said = 0; /* the failure is on stderr already */
    if (rc == WPACK_OK && bins && !histograms_fit(&ch, c.first, bins, archive, ar, max_output)) {
        rc = WPACK_E_TOO_LARGE;
        said = 1;
    }
    if (rc == WPACK_OK)
        rc = run_pass(&ch, x, n, width, (size_t)bs, &c, err, sizeof err);
    for (size_t s = 0; rc == WPACK_OK && s < ch.n; s++)
        if (c.first[s] == s && c.a[s].count == 0) {
            snprintf(err, sizeof err, "module '%s': no finite outputs to take statistics of",
                     ch.steps[s].path);
            rc = WPACK_E_STATS;
        }
    if (rc == WPACK_OK && bins) {
        for (size_t s = 0; s < ch.n && rc == WPACK_OK; s++) {
            acc *a = &c.a[s];
            if (c.first[s] != s)
                continue;
            a->bins = (uint32_t)bins;
            a->edges = malloc((bins + 1) * sizeof *a->edges);
            a->counts = calloc(bins, sizeof *a->counts);
            if (!a->edges || !a->counts) {
                rc = WPACK_E_NOMEM;
                break;
            }
            /* the writer's edges (spec decision 14): a constant output gets
             * a range that still spans it at any magnitude (+-0.5 is no
             * change from 2^53 on) */
            wpk_hist_edges(a->min, a->max, a->bins, a->edges);
        }
        c.pass = 2;
        if (rc == WPACK_OK)
            rc = run_pass(&ch, x, n, width, (size_t)bs, &c, err, sizeof err);
    }
    if (rc == WPACK_OK) {
        recs = calloc(ch.n, sizeof *recs);
        vals = calloc(ch.n * 5, sizeof *vals);
        if (!recs || !vals)
            rc = WPACK_E_NOMEM;
    }
    for (size_t s = 0; rc == WPACK_OK && s < ch.n; s++) {
        acc *a = &c.a[s];
        if (c.first[s] != s)
            continue;
        double *vv = vals + 5 * nrec;
        vv[0] = a->min;
        vv[1] = a->max;
        vv[2] = fmax(fabs(a->min), fabs(a->max));
        vv[3] = fmin(fmax(a->mean, a->min), a->max); /* rounding must not leave [min, max] */
        vv[4] = a->m2 / (double)a->count;
        wpack_stats_in in = {ch.steps[s].path, WPACK_STATS_ACTIVATION, WPACK_GRAN_TENSOR, 0, 1,
                             a->count, &vv[0], &vv[1], &vv[2], &vv[3], &vv[4], a->bins, a->edges,
                             a->counts, 0, NULL};
        recs[nrec++] = in;
    }
    wpack_close(ar); /* the update reopens the file itself */
    ar = NULL;
    if (rc == WPACK_OK)
        rc = cli_update_stats(archive, recs, nrec, err, sizeof err);
    if (rc == WPACK_E_NOMEM)
        snprintf(err, sizeof err, "out of memory");
    if (rc && !said)
        cli_error("%s [%s]", err, wpack_error_name(rc));
    else if (!rc)
        for (size_t s = 0; s < nrec; s++)
            cli_line(stdout, "%s: min %.9g max %.9g mean %.9g variance %.9g count %llu",
                     recs[s].key, recs[s].min[0], recs[s].max[0], recs[s].mean[0],
                     recs[s].variance[0], (unsigned long long)recs[s].count);
    if (c.a)
        for (size_t s = 0; s < ch.n; s++) {
            free(c.a[s].edges);
            free(c.a[s].counts);
        }
    free(c.a);
    free(c.first);
    free(recs);
    free(vals);
    chain_free(&ch);
    free(x);
    return rc ? CLI_FAIL : CLI_OK;
}
