/* calib_torch.c - torch.ao observers in a torch.save checkpoint as
 * activation stats (spec appendix A.1): `<module>.activation_post_process.
 * min_val / max_val` (MinMaxObserver, MovingAverage..., PerChannel...) and
 * HistogramObserver's `histogram` between them. Only observer buffers are
 * read; every other tensor of the checkpoint is left alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "import.h"
#include "internal.h"
#include "torch_scan.h"

#define OBS_MAX 65536u          /* observers in one checkpoint */
#define OBS_MAX_VALUES (1u << 24)

typedef struct {
    char *key;                  /* the observed module's path */
    double *v[3];               /* min_val, max_val, histogram */
    uint64_t n[3];
} observer;

typedef struct {
    observer *o;
    size_t n;
    char *err;
    size_t errlen;
} obs_set;

static const char *const FIELDS[3] = {"min_val", "max_val", "histogram"};

/* "conv.activation_post_process.min_val" -> module "conv", field 0. */
static int split(const char *name, char **key, int *field)
{
    static const char app[] = "activation_post_process";
    const char *dot = strrchr(name, '.'), *a = strstr(name, app);
    if (!dot || !a || (a != name && a[-1] != '.'))
        return 0;
    *field = -1;
    for (int f = 0; f < 3; f++)
        if (strcmp(dot + 1, FIELDS[f]) == 0)
            *field = f;
    if (*field < 0)
        return 0;
    /* eager mode: the module that owns the observer; FX: the observer itself
     * (`activation_post_process_0`) */
    size_t kl = a == name ? (size_t)(dot - name) : (size_t)(a - 1 - name);
    *key = strndup(name, kl);
    return 1;
}

static int visit(void *user, const torch_item *it)
{
    obs_set *set = user;
    char *key = NULL;
    int field;
    if (it->kind != TORCH_TENSOR || !split(it->name, &key, &field))
        return WPACK_OK;
    if (!key) {
        wpk_fmt(set->err, set->errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    if (it->dtype != WPACK_DTYPE_F32 || (!it->contiguous && it->nelems > 1) ||
        it->nelems > OBS_MAX_VALUES) {
        wpk_fmt(set->err, set->errlen, "'%s': an observer buffer that is not a contiguous f32 "
                "tensor of at most 2^24 values", it->name);
        free(key);
        return WPACK_E_STATS;
    }
    size_t i = 0;
    while (i < set->n && strcmp(set->o[i].key, key) != 0)
        i++;
    if (i == set->n) {
        observer *no = set->n < OBS_MAX ? realloc(set->o, (set->n + 1) * sizeof *no) : NULL;
        if (!no) {
            wpk_fmt(set->err, set->errlen, set->n < OBS_MAX ? "out of memory"
                                                            : "more than 65536 observers");
            free(key);
            return set->n < OBS_MAX ? WPACK_E_NOMEM : WPACK_E_LIMIT;
        }
        set->o = no;
        memset(&no[set->n], 0, sizeof *no);
        no[set->n++].key = key;
    } else {
        free(key);
    }
    observer *o = &set->o[i];
    free(o->v[field]);
    o->n[field] = it->nelems;
    o->v[field] = malloc((it->nelems ? it->nelems : 1) * sizeof(double));
    if (!o->v[field]) {
        wpk_fmt(set->err, set->errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    const uint8_t *src = it->storage + it->offset * 4;
    for (uint64_t k = 0; k < it->nelems; k++) {
        uint8_t b[4];
        for (int j = 0; j < 4; j++)
            b[j] = src[4 * k + (it->byteswap ? 3 - (unsigned)j : (unsigned)j)];
        float f;
        memcpy(&f, b, 4);
        o->v[field][k] = f;
    }
    return WPACK_OK;
}

/* One observer's record; an observer that never ran (min > max, as
 * MinMaxObserver starts at +inf / -inf, or no values) gives none. */
static int emit_obs(const observer *o, stats_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    if (!o->v[0] || !o->v[1]) {
        wpk_fmt(err, errlen, "'%s': an observer with %s but no %s", o->key,
                o->v[0] ? "min_val" : "max_val", o->v[0] ? "max_val" : "min_val");
        return WPACK_E_STATS;
    }
    uint64_t n = o->n[0];
    if (n == 0 || o->n[1] != n)
        return n == 0 && o->n[1] == 0 ? WPACK_OK : (wpk_fmt(err, errlen, "'%s': min_val has "
                "%llu values, max_val %llu", o->key, (unsigned long long)n,
                (unsigned long long)o->n[1]), WPACK_E_STATS);
    if (n == 1 && !(o->v[0][0] <= o->v[1][0]))
        return WPACK_OK; /* never ran */
    if (n == 1 && !(o->v[2] && o->v[1][0] > o->v[0][0]))
        return calib_range(sink, ctx, o->key, o->v[0][0], o->v[1][0], err, errlen);
    double *a = malloc(n * 3 * sizeof *a);
    /* a histogram over an empty range (a constant input) has no edges */
    uint32_t bins = n == 1 && o->v[2] && o->v[1][0] > o->v[0][0]
                        ? (uint32_t)(o->n[2] < UINT32_MAX ? o->n[2] : UINT32_MAX) : 0;
    double *edges = bins ? malloc((bins + 1) * sizeof *edges) : NULL;
    uint64_t *counts = bins ? malloc(bins * sizeof *counts) : NULL;
    int rc = !a || (bins && (!edges || !counts)) ? WPACK_E_NOMEM : WPACK_OK;
    uint64_t total = 0;
    for (uint64_t c = 0; !rc && c < n; c++) {
        a[c] = fmax(fabs(o->v[0][c]), fabs(o->v[1][c]));
        a[n + c] = o->v[0][c] + (o->v[1][c] - o->v[0][c]) / 2;
        a[2 * n + c] = 0;
    }
    /* HistogramObserver: bins equal parts of [min_val, max_val], counts as floats */
    for (uint32_t b = 0; !rc && b < bins; b++) {
        double h = o->v[2][b];
        if (!(h >= 0 && h < 1e18) || h != floor(h)) {
            wpk_fmt(err, errlen, "'%s': histogram bin %u (%g) is not a count", o->key, b, h);
            rc = WPACK_E_STATS;
            break;
        }
        counts[b] = (uint64_t)h;
        total += counts[b];
        edges[b] = o->v[0][0] + (o->v[1][0] - o->v[0][0]) * b / bins;
    }
    if (bins)
        edges[bins] = o->v[1][0];
    if (!rc) {
        wpack_stats_in s = {.key = o->key, .kind = WPACK_STATS_ACTIVATION,
                            .granularity = n == 1 ? WPACK_GRAN_TENSOR : WPACK_GRAN_CHANNEL,
                            .channels = (uint32_t)n, .count = total, .min = o->v[0],
                            .max = o->v[1], .absmax = a, .mean = a + n, .variance = a + 2 * n,
                            .hist_bins = bins, .hist_edges = edges, .hist_counts = counts};
        const char *why = "";
        if ((rc = sink ? sink(ctx, &s, &why) : WPACK_OK))
            wpk_fmt(err, errlen, "'%s': %s", o->key, why && *why ? why : wpack_error_name(rc));
    } else if (rc == WPACK_E_NOMEM) {
        wpk_fmt(err, errlen, "out of memory");
    }
    free(a);
    free(edges);
    free(counts);
    return rc;
}

int calib_torch_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                      size_t errlen)
{
    obs_set set = {NULL, 0, err, errlen};
    err[0] = 0;
    int rc = torch_scan_buffer(p, len, NULL, visit, &set, err, errlen);
    if (rc && rc != WPACK_E_NOMEM && rc != WPACK_E_STATS && rc != WPACK_E_LIMIT)
        rc = WPACK_E_STATS;
    if (!rc && set.n == 0) {
        wpk_fmt(err, errlen, "a torch checkpoint with no torch.ao observer "
                "(*.activation_post_process.min_val/max_val)");
        rc = WPACK_E_STATS;
    }
    for (size_t i = 0; !rc && i < set.n; i++)
        rc = emit_obs(&set.o[i], sink, ctx, err, errlen);
    for (size_t i = 0; i < set.n; i++) {
        for (int f = 0; f < 3; f++)
            free(set.o[i].v[f]);
        free(set.o[i].key);
    }
    free(set.o);
    return rc;
}
