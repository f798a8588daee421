/* manifest_stats.c - calibration statistics JSON -> wpack_writer_add_stats. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "internal.h"
#include "layout.h"
#include "manifest_stats.h"

#define STATS_MAX_CHANNELS (1u << 24)

typedef struct {
    wpack_stats_in in;
    double *arrays[5];
    double *edges, *pcts;
    uint64_t *counts;
} stats_rec;

static void rec_free(stats_rec *r)
{
    for (int k = 0; k < 5; k++)
        free(r->arrays[k]);
    free(r->edges);
    free(r->pcts);
    free(r->counts);
}

/* A field that is a number (per-tensor) or an array of channels numbers. */
static int numbers(json_t *v, uint32_t channels, double **out)
{
    *out = malloc(channels * sizeof **out);
    if (!*out)
        return 0;
    if (json_is_number(v) && channels == 1) {
        (*out)[0] = json_number_value(v);
        return 1;
    }
    if (!json_is_array(v) || json_array_size(v) != channels)
        return 0;
    for (uint32_t c = 0; c < channels; c++) {
        json_t *x = json_array_get(v, c);
        if (!json_is_number(x))
            return 0;
        (*out)[c] = json_number_value(x);
    }
    return 1;
}

static int parse_rec(json_t *e, size_t i, stats_rec *r, char *err, size_t errlen)
{
    static const char *const fields[5] = {"min", "max", "absmax", "mean", "variance"};
    memset(r, 0, sizeof *r);
    json_t *key = json_object_get(e, "key"), *kind = json_object_get(e, "kind"),
           *gran = json_object_get(e, "granularity"), *axis = json_object_get(e, "axis"),
           *count = json_object_get(e, "count");
    if (!json_is_object(e) || !json_is_string(key)) {
        wpk_fmt(err, errlen, "stats[%zu]: want an object with a string \"key\"", i);
        return WPACK_E_STATS;
    }
    const char *k = json_string_value(key);
    r->in.key = k;
    const char *kv = json_is_string(kind) ? json_string_value(kind) : "weight";
    if (strcmp(kv, "weight") == 0)
        r->in.kind = WPACK_STATS_WEIGHT;
    else if (strcmp(kv, "activation") == 0)
        r->in.kind = WPACK_STATS_ACTIVATION;
    else {
        wpk_fmt(err, errlen, "stats[%zu] '%s': kind must be \"weight\" or \"activation\"", i, k);
        return WPACK_E_STATS;
    }
    const char *gv = json_is_string(gran) ? json_string_value(gran) : "tensor";
    json_t *mx = json_object_get(e, "max");
    if (strcmp(gv, "tensor") == 0) {
        r->in.granularity = WPACK_GRAN_TENSOR;
        r->in.channels = 1;
    } else if (strcmp(gv, "channel") == 0) {
        r->in.granularity = WPACK_GRAN_CHANNEL;
        if (!json_is_array(mx) || json_array_size(mx) < 1 ||
            json_array_size(mx) > STATS_MAX_CHANNELS) {
            wpk_fmt(err, errlen, "stats[%zu] '%s': per-channel stats need a max array", i, k);
            return WPACK_E_STATS;
        }
        r->in.channels = (uint32_t)json_array_size(mx);
        if (!json_is_integer(axis) || json_integer_value(axis) < 0 ||
            json_integer_value(axis) >= WPACK_MAX_RANK) {
            wpk_fmt(err, errlen, "stats[%zu] '%s': per-channel stats need an int axis 0..%d", i,
                    k, WPACK_MAX_RANK - 1);
            return WPACK_E_STATS;
        }
        r->in.axis = (uint32_t)json_integer_value(axis);
    } else {
        wpk_fmt(err, errlen, "stats[%zu] '%s': granularity must be \"tensor\" or \"channel\"", i,
                k);
        return WPACK_E_STATS;
    }
    if (!json_is_integer(count) || json_integer_value(count) < 0) {
        wpk_fmt(err, errlen, "stats[%zu] '%s': count must be an int >= 0", i, k);
        return WPACK_E_STATS;
    }
    r->in.count = (uint64_t)json_integer_value(count);
    for (int f = 0; f < 5; f++) {
        json_t *v = json_object_get(e, fields[f]);
        if (!v && f == 2 && json_object_get(e, "min") && mx) {
            /* absmax may be left out: max(|min|, |max|) */
            continue;
        }
        if (!v && f == 4)
            continue; /* variance optional: 0 */
        if (!v || !numbers(v, r->in.channels, &r->arrays[f])) {
            wpk_fmt(err, errlen, "stats[%zu] '%s': \"%s\" must be %s", i, k, fields[f],
                    r->in.channels == 1 ? "a number" : "an array of one number per channel");
            return WPACK_E_STATS;
        }
    }
    for (int f = 2; f <= 4; f += 2)
        if (!r->arrays[f]) {
            r->arrays[f] = calloc(r->in.channels, sizeof(double));
            if (!r->arrays[f])
                return WPACK_E_NOMEM;
            for (uint32_t c = 0; f == 2 && c < r->in.channels; c++) {
                double a = r->arrays[0][c] < 0 ? -r->arrays[0][c] : r->arrays[0][c];
                double b = r->arrays[1][c] < 0 ? -r->arrays[1][c] : r->arrays[1][c];
                r->arrays[2][c] = a > b ? a : b;
            }
        }
    r->in.min = r->arrays[0];
    r->in.max = r->arrays[1];
    r->in.absmax = r->arrays[2];
    r->in.mean = r->arrays[3];
    r->in.variance = r->arrays[4];
    json_t *hist = json_object_get(e, "histogram");
    if (hist) {
        json_t *edges = json_object_get(hist, "edges"), *counts = json_object_get(hist, "counts");
        size_t nb = json_array_size(counts);
        if (json_is_array(counts) && nb > WPK_LIMIT_HIST_BINS) {
            wpk_fmt(err, errlen, "stats[%zu] '%s': histogram of %zu bins, limit %u", i, k, nb,
                    WPK_LIMIT_HIST_BINS);
            return WPACK_E_LIMIT;
        }
        if (!json_is_array(edges) || !json_is_array(counts) || nb < 1 ||
            json_array_size(edges) != nb + 1) {
            wpk_fmt(err, errlen, "stats[%zu] '%s': histogram wants counts[N] and edges[N+1]", i, k);
            return WPACK_E_STATS;
        }
        r->edges = malloc((nb + 1) * sizeof *r->edges);
        r->counts = malloc(nb * sizeof *r->counts);
        if (!r->edges || !r->counts)
            return WPACK_E_NOMEM;
        for (size_t b = 0; b <= nb; b++) {
            json_t *x = json_array_get(edges, b);
            if (!json_is_number(x)) {
                wpk_fmt(err, errlen, "stats[%zu] '%s': histogram edge %zu is not a number", i, k, b);
                return WPACK_E_STATS;
            }
            r->edges[b] = json_number_value(x);
            if (b < nb) {
                json_t *c = json_array_get(counts, b);
                if (!json_is_integer(c) || json_integer_value(c) < 0) {
                    wpk_fmt(err, errlen, "stats[%zu] '%s': histogram count %zu is not an int >= 0",
                            i, k, b);
                    return WPACK_E_STATS;
                }
                r->counts[b] = (uint64_t)json_integer_value(c);
            }
        }
        r->in.hist_bins = (uint32_t)nb;
        r->in.hist_edges = r->edges;
        r->in.hist_counts = r->counts;
    }
    json_t *pc = json_object_get(e, "percentiles");
    if (pc) {
        size_t np = json_array_size(pc);
        if (!json_is_array(pc) || np > (1u << 16)) {
            wpk_fmt(err, errlen, "stats[%zu] '%s': percentiles wants [[q, value], ...]", i, k);
            return WPACK_E_STATS;
        }
        r->pcts = malloc((np ? np : 1) * 2 * sizeof *r->pcts);
        if (!r->pcts)
            return WPACK_E_NOMEM;
        for (size_t j = 0; j < np; j++) {
            json_t *p = json_array_get(pc, j);
            if (!json_is_array(p) || json_array_size(p) != 2 ||
                !json_is_number(json_array_get(p, 0)) || !json_is_number(json_array_get(p, 1))) {
                wpk_fmt(err, errlen, "stats[%zu] '%s': percentiles[%zu] is not [q, value]", i, k, j);
                return WPACK_E_STATS;
            }
            r->pcts[2 * j] = json_number_value(json_array_get(p, 0));
            r->pcts[2 * j + 1] = json_number_value(json_array_get(p, 1));
        }
        r->in.percentile_count = (uint32_t)np;
        r->in.percentiles = r->pcts;
    }
    return WPACK_OK;
}

/* The writer as a stats sink. */
int stats_to_writer(void *ctx, const wpack_stats_in *s, const char **why)
{
    int rc = wpack_writer_add_stats(ctx, s);
    *why = wpack_writer_errmsg(ctx);
    return rc;
}

static int load(stats_sink_fn sink, void *ctx, json_t *root, char *err, size_t errlen)
{
    json_t *list = json_is_object(root) ? json_object_get(root, "stats") : NULL;
    json_t *ver = json_is_object(root) ? json_object_get(root, "version") : NULL;
    if (!json_is_array(list)) {
        wpk_fmt(err, errlen, "stats: want {\"version\": 1, \"stats\": [...]}");
        return WPACK_E_STATS;
    }
    if (ver && (!json_is_integer(ver) || json_integer_value(ver) != 1)) {
        wpk_fmt(err, errlen, "stats: version must be 1");
        return WPACK_E_STATS;
    }
    size_t n = json_array_size(list);
    stats_rec *recs = calloc(n ? n : 1, sizeof *recs);
    if (!recs) {
        wpk_fmt(err, errlen, "stats: out of memory");
        return WPACK_E_NOMEM;
    }
    int rc = WPACK_OK;
    size_t parsed = 0;
    for (; parsed < n && !rc; parsed++)
        rc = parse_rec(json_array_get(list, parsed), parsed, &recs[parsed], err, errlen);
    for (size_t i = 0; i < n && !rc && sink; i++) {
        const char *why = "";
        if ((rc = sink(ctx, &recs[i].in, &why)))
            wpk_fmt(err, errlen, "stats[%zu] '%s': %s", i, recs[i].in.key, why);
    }
    for (size_t i = 0; i < parsed; i++)
        rec_free(&recs[i]);
    free(recs);
    return rc;
}

int stats_load_buffer(wpack_writer *w, const char *buf, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        wpk_fmt(err, errlen, "stats JSON: %s (line %d)", je.text, je.line);
        return WPACK_E_STATS;
    }
    int rc = load(w ? stats_to_writer : NULL, w, root, err, errlen);
    json_decref(root);
    return rc;
}

int stats_load_file(wpack_writer *w, const char *path, char *err, size_t errlen)
{
    return stats_load_file_to(path, stats_to_writer, w, err, errlen);
}

/* The wpack schema from the file at path into any sink (errors as before
 * calib_detect.c: "PATH: stats JSON: ..." or "stats[i] 'key': ..."). */
int stats_load_json_file_to(const char *path, stats_sink_fn sink, void *ctx, char *err,
                            size_t errlen)
{
    int code; /* wpk_json_load_input: a FIFO or a device is refused, without blocking */
    json_t *root = wpk_json_load_input(path, "stats", NULL, &code, err, errlen);
    if (!root)
        return code == WPACK_E_INPUT ? WPACK_E_STATS : code;
    int rc = load(sink, ctx, root, err, errlen);
    json_decref(root);
    return rc;
}

/* The wpack schema from a buffer into any sink (calib_detect.c calls it). */
int stats_load_json_to(const char *buf, size_t len, stats_sink_fn sink, void *ctx, char *err,
                       size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        wpk_fmt(err, errlen, "stats JSON: %s (line %d)", je.text, je.line);
        return WPACK_E_STATS;
    }
    int rc = load(sink, ctx, root, err, errlen);
    json_decref(root);
    return rc;
}
