/*
 * fuzz_calib.c - the calibration-file parsers of import/calib.h (spec
 * appendix A.1): calib_trt_parse (TensorRT cache), calib_ort_parse (ONNX
 * Runtime JSON table), calib_imatrix_dat_sniff and calib_imatrix_dat_parse
 * (llama.cpp legacy .dat), calib_imatrix_gguf_parse (imatrix GGUF) and
 * calib_torch_parse (torch.ao observers in a torch.save checkpoint). Each
 * parser gets every input, not only what stats_load_file_to would hand it by
 * content, so each also sees the other formats' files.
 *
 * First with a checking sink that holds every record to what the parsers
 * promise: a key NUL-terminated within the input's length, an activation
 * record of one channel (per tensor) or more (per channel), no histogram
 * (torch: one of finite ascending edges from min to max, its counts adding
 * up to the count, on a per-tensor record) or percentiles, and per channel the writer's value rules (finite, min <= max,
 * absmax = max(|min|, |max|), min <= mean <= max, variance >= 0); range-only
 * records (TensorRT, ONNX Runtime) have count 0 and variance 0. A failure
 * has a named code and a message; a 4-byte message buffer gives the same
 * answer. When a parser accepts, it runs again refusing one record (the
 * sink's code must come back, and no record after it), and into a real
 * writer (aborted afterwards), whose refusals must say why.
 */
#include <math.h>
#include <unistd.h>

#include "calib.h"
#include "fuzz.h"
#include "manifest_stats.h"

typedef int (*parse_fn)(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                        size_t errlen);

static const struct {
    const char *name;
    parse_fn parse;
    int ranges; /* its records come from calib_ranges: range-only */
    int hist;   /* its records may have a histogram (torch.ao HistogramObserver) */
} parsers[] = {
    {"trt", calib_trt_parse, 1, 0},
    {"ort", calib_ort_parse, 1, 0},
    {"imatrix dat", calib_imatrix_dat_parse, 0, 0},
    {"imatrix gguf", calib_imatrix_gguf_parse, 0, 0},
    {"torch", calib_torch_parse, 0, 1},
};

/* The code the checking sink answers with when told to refuse: one no
 * parser makes itself, so that it is seen to come back unchanged. */
#define REFUSE_RC WPACK_E_UNSUPPORTED

typedef struct {
    const char *parser;
    size_t size;        /* of the input: every key is made of its bytes */
    int ranges, hist;
    uint64_t records;   /* sink calls so far */
    uint64_t refuse_at; /* refuse this record (UINT64_MAX: none) */
} check_ctx;

static int check_sink(void *vctx, const wpack_stats_in *s, const char **why)
{
    check_ctx *c = vctx;
    FUZZ_ASSERT(s && s->key, "%s: a NULL record or key", c->parser);
    FUZZ_ASSERT(strnlen(s->key, c->size + 1) <= c->size, "%s: key longer than the input",
                c->parser);
    FUZZ_ASSERT(c->records <= c->refuse_at, "%s: record after the sink refused", c->parser);
    const char *k = s->key;
    uint32_t n = s->channels;
    FUZZ_ASSERT(s->kind == WPACK_STATS_ACTIVATION, "%s '%s': kind %d", c->parser, k, s->kind);
    FUZZ_ASSERT(n >= 1, "%s '%s': %u channels", c->parser, k, n);
    FUZZ_ASSERT(n == 1 ? s->granularity == WPACK_GRAN_TENSOR && s->axis == 0
                       : s->granularity == WPACK_GRAN_CHANNEL && s->axis < WPACK_MAX_RANK,
                "%s '%s': granularity %d axis %u with %u channels", c->parser, k,
                s->granularity, s->axis, n);
    FUZZ_ASSERT(s->min && s->max && s->absmax && s->mean && s->variance,
                "%s '%s': a NULL value array", c->parser, k);
    FUZZ_ASSERT((s->hist_bins == 0 || (c->hist && n == 1)) && s->percentile_count == 0,
                "%s '%s': %u bins, %u percentiles", c->parser, k, s->hist_bins,
                s->percentile_count);
    /* a histogram: finite ascending edges from min to max, counts adding up to count */
    uint64_t sum = 0;
    for (uint32_t b = 0; b < s->hist_bins; b++) {
        FUZZ_ASSERT(isfinite(s->hist_edges[b]) && isfinite(s->hist_edges[b + 1]) &&
                        s->hist_edges[b] <= s->hist_edges[b + 1],
                    "%s '%s': edges %u, %u: %g, %g", c->parser, k, b, b + 1, s->hist_edges[b],
                    s->hist_edges[b + 1]);
        sum += s->hist_counts[b];
    }
    FUZZ_ASSERT(!s->hist_bins || (s->hist_edges[0] == s->min[0] &&
                                  s->hist_edges[s->hist_bins] == s->max[0] && sum == s->count),
                "%s '%s': a histogram over [%g, %g] of %llu for count %llu", c->parser, k,
                s->hist_edges[0], s->hist_edges[s->hist_bins], (unsigned long long)sum,
                (unsigned long long)s->count);
    if (c->ranges)
        FUZZ_ASSERT(s->count == 0, "%s '%s': a range-only record with count %llu", c->parser,
                    k, (unsigned long long)s->count);
    /* every value is read: ASan reports an array shorter than channels */
    for (uint32_t i = 0; i < n; i++) {
        double mn = s->min[i], mx = s->max[i], am = s->absmax[i], mu = s->mean[i],
               var = s->variance[i];
        FUZZ_ASSERT(isfinite(mn) && isfinite(mx) && isfinite(am) && isfinite(mu) &&
                        isfinite(var),
                    "%s '%s' channel %u: min %g max %g absmax %g mean %g variance %g",
                    c->parser, k, i, mn, mx, am, mu, var);
        FUZZ_ASSERT(mn <= mx && am == fmax(fabs(mn), fabs(mx)) && mn <= mu && mu <= mx &&
                        var >= 0,
                    "%s '%s' channel %u: inconsistent min %g max %g absmax %g mean %g "
                    "variance %g", c->parser, k, i, mn, mx, am, mu, var);
        if (c->ranges)
            FUZZ_ASSERT(var == 0, "%s '%s' channel %u: a range-only record with variance %g",
                        c->parser, k, i, var);
    }
    if (c->records++ == c->refuse_at) {
        *why = "refused by fuzz_calib";
        return REFUSE_RC;
    }
    return WPACK_OK;
}

/* The writer as the sink: what it refuses it must say why. */
static int writer_sink(void *ctx, const wpack_stats_in *s, const char **why)
{
    *why = NULL;
    int rc = stats_to_writer(ctx, s, why);
    FUZZ_ASSERT(rc == WPACK_OK || (*why && **why), "the writer refused '%s' (rc %d) without "
                "saying why", s->key, rc);
    return rc;
}

/* One parser on the input; returns its rc. */
static int check_parser(size_t i, const uint8_t *in, size_t size)
{
    const char *name = parsers[i].name;
    parse_fn parse = parsers[i].parse;
    char err[512];
    err[0] = 0;
    check_ctx c = {name, size, parsers[i].ranges, parsers[i].hist, 0, UINT64_MAX};
    int rc = parse(in, size, check_sink, &c, err, sizeof err);
    fuzz_check_message(name, err, sizeof err, rc);

    char tiny[4] = {0};
    check_ctx c2 = c;
    c2.records = 0;
    int rc2 = parse(in, size, check_sink, &c2, tiny, sizeof tiny);
    FUZZ_ASSERT(rc2 == rc && c2.records == c.records && strnlen(tiny, sizeof tiny) < sizeof tiny,
                "%s: rc %d after %llu records with a small message buffer, %d after %llu with "
                "a large one", name, rc2, (unsigned long long)c2.records, rc,
                (unsigned long long)c.records);
    if (rc != WPACK_OK)
        return rc;

    /* a sink's refusal stops the parse and comes back as it is */
    if (c.records) {
        check_ctx c3 = c;
        c3.records = 0;
        c3.refuse_at = c.records / 2;
        err[0] = 0;
        int rc3 = parse(in, size, check_sink, &c3, err, sizeof err);
        fuzz_check_message(name, err, sizeof err, rc3);
        FUZZ_ASSERT(rc3 == REFUSE_RC && c3.records == c3.refuse_at + 1,
                    "%s: rc %d after %llu records when the sink refused record %llu", name, rc3,
                    (unsigned long long)c3.records, (unsigned long long)c3.refuse_at);
    }

    wpack_writer *w = fuzz_scratch_writer("calib");
    err[0] = 0;
    int wrc = parse(in, size, writer_sink, w, err, sizeof err);
    fuzz_check_message(name, err, sizeof err, wrc);
    fuzz_scratch_abort(w);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    /* An empty file is not mapped: stats_load_file_to would pass NULL. */
    const uint8_t *in = size ? buf : NULL;
    /* ASan: the sniff reads nothing past the end */
    int sniff = calib_imatrix_dat_sniff(in, size);
    FUZZ_ASSERT(sniff == 0 || sniff == 1, "sniff returned %d", sniff);
    for (size_t i = 0; i < sizeof parsers / sizeof parsers[0]; i++) {
        int rc = check_parser(i, in, size);
        /* A .dat the parser takes must be one stats_load_file_to sends to it:
         * each entry takes at least 17 bytes, so under 16 MiB the count and
         * the first name length have a zero high byte, as the sniff wants. */
        if (parsers[i].parse == calib_imatrix_dat_parse && rc == WPACK_OK && size < (1u << 24))
            FUZZ_ASSERT(sniff, "a .dat the parser takes that the sniff does not recognize");
    }
    free(buf);
    return 0;
}
