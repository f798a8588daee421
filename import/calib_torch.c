/* calib_torch.c - torch.ao observers in a torch.save checkpoint as
 * activation stats (spec appendix A.1), for `--stats-from CKPT` and for a
 * checkpoint given to `create` as an input (torch_pack.c), where the
 * observers' buffers then stay out of the tensors.
 *
 * What torch 1.13 writes (checked against real state_dicts of eager
 * prepare() and prepare_qat(), tests/cli/test_observers_create.sh):
 *   M.activation_post_process.{eps,min_val,max_val}           MinMax-style
 *   M.activation_post_process.{eps,histogram,min_val,max_val} HistogramObserver
 *   M.activation_post_process.{fake_quant_enabled,observer_enabled,scale,
 *     zero_point} + M.activation_post_process.activation_post_process.
 *     {eps,min_val,max_val}                                    QAT FakeQuantize
 *   M.weight_fake_quant.{...same...}                           QAT weight
 *   activation_post_process_N.{...}                            FX (top level)
 * `ch_axis`, `quant_min/max`, dtype and qscheme are constructor arguments,
 * not buffers: no checkpoint has them. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "import.h"
#include "internal.h"
#include "nameset.h"
#include "torch_scan.h"
#include "zipread.h"

#define OBS_MAX 65536u          /* observers in one checkpoint */
#define OBS_MAX_VALUES (1u << 24)
/* Values held over all observers: one tensor named by many observers (an
 * alias, or views of one storage) is converted once per name, so a 2 MB
 * checkpoint naming one 2^20-value tensor 600 times took 5 GB and 80 s. A
 * stored value takes at least 2 bytes: the checkpoint's size in values plus
 * this grace is more than any real checkpoint's observers hold. */
#define OBS_GRACE_VALUES (1u << 20)

typedef struct {
    char *key;                  /* the observed module's path */
    size_t klen;
    double *v[3];               /* min_val, max_val, histogram */
    uint64_t n[3];
} observer;

struct calib_obs {
    observer *o;
    size_t n, ocap;             /* capacities double: grown by one, n observers were
                                   n^2 / 2 copies wherever realloc moves the block */
    char **learn;               /* fake-quants with learning_enabled: learned scale/zero_point */
    size_t nlearn, learncap;
    /* o's keys and learn's names by hash: a scan per lookup made n
     * observers n^2 / 2 compares (65,536 of them: 35 s) */
    wpk_nameset okeys, lkeys;
    uint64_t buffers;           /* observer buffers (tensors and aliases) */
    uint64_t weight_obs;        /* weight_fake_quant observers */
    uint64_t values, max_values; /* held in all observers' v[], and the bound */
    char *err;
    size_t errlen;
};

static const char *const FIELDS[3] = {"min_val", "max_val", "histogram"};
/* Every buffer torch.ao's observers and fake-quants register (torch 1.13:
 * torch/ao/quantization/observer.py, fake_quantize.py). */
static const char *const STATE[] = {"eps", "scale", "zero_point", "fake_quant_enabled",
                                    "observer_enabled", "static_enabled", "learning_enabled"};

enum { OBS_NONE = 0, OBS_STAT, OBS_STATE };

/* "activation_post_process" or FX's "activation_post_process_<N>" */
static int is_app(const char *c, size_t n)
{
    static const char app[] = "activation_post_process";
    const size_t al = sizeof app - 1;
    if (n < al || memcmp(c, app, al) != 0)
        return 0;
    if (n == al)
        return 1;
    if (c[al] != '_' || n == al + 1)
        return 0;
    for (size_t i = al + 1; i < n; i++)
        if (c[i] < '0' || c[i] > '9')
            return 0;
    return 1;
}

/* What a checkpoint name is to torch.ao: OBS_STAT (min_val, max_val or
 * histogram of an activation observer: *klen is the length of the observed
 * module's path at the start of name, *field which one), OBS_STATE (any other
 * observer or fake-quant buffer, and everything of a weight_fake_quant), or
 * OBS_NONE. The owner is the module before the first observer component
 * (`fc` for `fc.activation_post_process.activation_post_process.min_val`); an
 * FX-style top-level `activation_post_process_0` is its own key. */
static int classify(const char *name, size_t *klen, int *field)
{
    const char *last = strrchr(name, '.');
    if (!last)
        return OBS_NONE;
    last++;
    *field = -1;
    for (int f = 0; f < 3; f++)
        if (strcmp(last, FIELDS[f]) == 0)
            *field = f;
    int known = *field >= 0;
    for (size_t k = 0; !known && k < sizeof STATE / sizeof *STATE; k++)
        known = strcmp(last, STATE[k]) == 0;
    if (!known)
        return OBS_NONE;
    for (const char *c = name; c < last;) {
        const char *e = strchr(c, '.');
        size_t n = (size_t)(e - c);
        int wfq = n == 17 && memcmp(c, "weight_fake_quant", 17) == 0;
        if (wfq || is_app(c, n)) {
            *klen = c == name ? n : (size_t)(c - 1 - name);
            return wfq || *field < 0 ? OBS_STATE : OBS_STAT;
        }
        c = e + 1;
    }
    return OBS_NONE;
}

static int is_weight_observer(const char *name)
{
    return strncmp(name, "weight_fake_quant.", 18) == 0 || strstr(name, ".weight_fake_quant.");
}

static int nomem(calib_obs *set)
{
    wpk_fmt(set->err, set->errlen, "out of memory");
    return WPACK_E_NOMEM;
}

/* n more values for o's field (replacing the ones it had), within the bound. */
static int hold(calib_obs *set, observer *o, int field, uint64_t n, const char *name)
{
    uint64_t now = set->values - o->n[field];
    if (n > set->max_values - now) {
        wpk_fmt(set->err, set->errlen, "'%s': the observers would hold more than %llu values "
                "(the checkpoint's size + 2^20: one tensor named by many observers?)", name,
                (unsigned long long)set->max_values);
        return WPACK_E_LIMIT;
    }
    free(o->v[field]);
    o->v[field] = NULL;
    o->n[field] = 0;
    set->values = now;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return nomem(set);
    o->v[field] = v;
    o->n[field] = n;
    set->values += n;
    return WPACK_OK;
}

static const uint8_t *okey(void *ctx, uint64_t item, uint64_t *len)
{
    const calib_obs *set = ctx;
    *len = set->o[item].klen;
    return (const uint8_t *)set->o[item].key;
}

static const uint8_t *lkey(void *ctx, uint64_t item, uint64_t *len)
{
    const calib_obs *set = ctx;
    *len = strlen(set->learn[item]);
    return (const uint8_t *)set->learn[item];
}

/* The observer keyed name[0..klen), added when new. */
static int find(calib_obs *set, const char *name, size_t klen, observer **out)
{
    uint64_t i;
    if (wpk_nameset_find(&set->okeys, okey, set, (const uint8_t *)name, klen, &i)) {
        *out = &set->o[i];
        return WPACK_OK;
    }
    if (set->n >= OBS_MAX) {
        wpk_fmt(set->err, set->errlen, "more than 65536 observers");
        return WPACK_E_LIMIT;
    }
    observer *no = set->o;
    if (set->n == set->ocap) {
        size_t cap = set->ocap ? set->ocap * 2 : 64; /* <= 2 x OBS_MAX */
        if (!(no = realloc(set->o, cap * sizeof *no)))
            return nomem(set);
        set->o = no;
        set->ocap = cap;
    }
    memset(&no[set->n], 0, sizeof *no);
    if (!(no[set->n].key = strndup(name, klen)))
        return nomem(set);
    no[set->n].klen = klen;
    if (!wpk_nameset_insert(&set->okeys, okey, set, (const uint8_t *)name, klen, set->n)) {
        free(no[set->n].key);
        return nomem(set);
    }
    *out = &no[set->n++];
    return WPACK_OK;
}

/* A float tensor (f64, f32, f16, bf16; any byte order) as doubles. */
static int take_values(calib_obs *set, observer *o, int field, const torch_item *it)
{
    int fl = it->dtype == WPACK_DTYPE_F32 || it->dtype == WPACK_DTYPE_F64 ||
             it->dtype == WPACK_DTYPE_F16 || it->dtype == WPACK_DTYPE_BF16;
    if (!fl || (!it->contiguous && it->nelems > 1) || it->nelems > OBS_MAX_VALUES) {
        wpk_fmt(set->err, set->errlen, "'%s': an observer buffer that is not a contiguous float "
                "tensor of at most 2^24 values", it->name);
        return WPACK_E_STATS;
    }
    /* the zip's CRC-32, as torch_pack.c checks every tensor it stores */
    if (!*it->storage_checked &&
        wpk_crc32(0, it->storage, (size_t)it->storage_bytes) != it->storage_crc32) {
        wpk_fmt(set->err, set->errlen, "'%s': its storage does not match the zip's CRC-32 "
                "(damaged checkpoint)", it->name);
        return WPACK_E_CHECKSUM;
    }
    *it->storage_checked = 1;
    int rc = hold(set, o, field, it->nelems, it->name);
    if (rc)
        return rc;
    const uint8_t *src = it->storage + it->offset * it->elem_size;
    for (uint64_t k = 0; k < it->nelems; k++) {
        uint8_t b[8];
        for (size_t j = 0; j < it->elem_size; j++)
            b[j] = src[k * it->elem_size + (it->byteswap ? it->elem_size - 1 - j : j)];
        o->v[field][k] = wpk_load_float(it->dtype, b);
    }
    return WPACK_OK;
}

/* A second name for an observer buffer (one observer shared by two
 * modules, or an observer's two fields one tensor): the target's values
 * again. o is looked up here, after the target (whose lookup may add an
 * observer and move them all). */
static int take_alias(calib_obs *set, const char *okey, size_t oklen, int field,
                      const torch_item *it)
{
    size_t tk;
    int tf;
    if (classify(it->target, &tk, &tf) != OBS_STAT)
        return WPACK_OK;
    observer *t, *o;
    int rc = find(set, it->target, tk, &t);
    if (rc || !t->v[tf])
        return rc;
    size_t ti = (size_t)(t - set->o);
    if ((rc = find(set, okey, oklen, &o)))
        return rc;
    t = &set->o[ti];
    if (t == o && tf == field)
        return WPACK_OK;
    uint64_t n = t->n[tf];
    if ((rc = hold(set, o, field, n, it->name))) /* frees o's field only: not t's tf */
        return rc;
    memcpy(o->v[field], t->v[tf], n * sizeof *o->v[field]);
    return WPACK_OK;
}

int calib_obs_visit(void *user, const torch_item *it)
{
    calib_obs *set = user;
    size_t klen;
    int field;
    if (it->kind != TORCH_TENSOR && it->kind != TORCH_ALIAS)
        return WPACK_OK;
    int role = classify(it->name, &klen, &field);
    if (role == OBS_NONE)
        return WPACK_OK;
    set->buffers++;
    const char *last = strrchr(it->name, '.') + 1;
    if (role == OBS_STATE && strcmp(last, "learning_enabled") == 0) {
        if (set->nlearn >= OBS_MAX)
            return WPACK_E_LIMIT;
        if (set->nlearn == set->learncap) {
            size_t cap = set->learncap ? set->learncap * 2 : 16;
            char **nl = realloc(set->learn, cap * sizeof *nl);
            if (!nl)
                return nomem(set);
            set->learn = nl;
            set->learncap = cap;
        }
        size_t ll = (size_t)(last - 1 - it->name);
        uint64_t dup;
        if (wpk_nameset_find(&set->lkeys, lkey, set, (const uint8_t *)it->name, ll, &dup))
            return WPACK_OK; /* (an alias of the buffer: the name is there) */
        if (!(set->learn[set->nlearn] = strndup(it->name, ll)))
            return nomem(set);
        if (!wpk_nameset_insert(&set->lkeys, lkey, set, (const uint8_t *)it->name, ll,
                                set->nlearn)) {
            free(set->learn[set->nlearn]);
            return nomem(set);
        }
        set->nlearn++;
    }
    if (role == OBS_STATE && field == 0 && is_weight_observer(it->name))
        set->weight_obs++;
    if (role != OBS_STAT)
        return WPACK_OK;
    if (it->kind == TORCH_ALIAS)
        return take_alias(set, it->name, klen, field, it);
    observer *o;
    int rc = find(set, it->name, klen, &o);
    return rc ? rc : take_values(set, o, field, it);
}

/* One observer's record; an observer that never ran (min > max, as
 * MinMaxObserver starts at +inf / -inf, or no values) gives none. */
static int emit_obs(const observer *o, const char *key, stats_sink_fn sink, void *ctx,
                    size_t *records, char *err, size_t errlen)
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
    ++*records;
    /* no histogram (per-channel observers have none), or one over an empty
     * range (a constant input: no edges): a range record, per channel along
     * axis 0 (ch_axis is not in the checkpoint) */
    if (n > 1 || !(o->v[2] && o->v[1][0] > o->v[0][0]))
        return calib_ranges(sink, ctx, key, (uint32_t)n, 0, o->v[0], o->v[1], err, errlen);
    double *a = malloc(n * 3 * sizeof *a);
    uint32_t bins = (uint32_t)(o->n[2] < UINT32_MAX ? o->n[2] : UINT32_MAX);
    double *edges = bins ? malloc((bins + 1) * sizeof *edges) : NULL;
    uint64_t *counts = bins ? malloc(bins * sizeof *counts) : NULL;
    int rc = !a || (bins && (!edges || !counts)) ? WPACK_E_NOMEM : WPACK_OK;
    uint64_t total = 0;
    for (uint64_t c = 0; !rc && c < n; c++) {
        a[c] = fmax(fabs(o->v[0][c]), fabs(o->v[1][c]));
        a[n + c] = calib_mid(o->v[0][c], o->v[1][c]);
        a[2 * n + c] = 0;
    }
    /* HistogramObserver: bins equal parts of [min_val, max_val], counts as
     * floats. After the first batch they are fractional: each later batch is
     * merged by upsampling and re-binning (torch 1.13 observer.py
     * _combine_histograms divides counts by upsample_rate), so each bin is
     * rounded to the nearest whole count, halves up. */
    for (uint32_t b = 0; !rc && b < bins; b++) {
        double h = o->v[2][b];
        if (!(h >= 0 && h < 1e18)) {
            wpk_fmt(err, errlen, "'%s': histogram bin %u (%g) is not a count", o->key, b, h);
            rc = WPACK_E_STATS;
            break;
        }
        counts[b] = (uint64_t)floor(h + 0.5);
        total += counts[b];
        edges[b] = o->v[0][0] + (o->v[1][0] / bins - o->v[0][0] / bins) * b; /* finite */
    }
    if (bins)
        edges[bins] = o->v[1][0];
    if (!rc && total) {
        /* the histogram holds the values seen: mean and population variance
         * from its bin midpoints (within a bin's width of the true ones), not
         * the range-only placeholders, which a count > 0 would pass off as
         * observed. Weights count/total and halved differences keep every
         * sum finite; a variance past DBL_MAX (a range near 2e308) is capped */
        double mean = 0, v = 0;
        for (uint32_t b = 0; b < bins; b++)
            mean += (double)counts[b] / (double)total * (edges[b] / 2 + edges[b + 1] / 2);
        mean = fmax(o->v[0][0], fmin(o->v[1][0], mean));
        for (uint32_t b = 0; b < bins; b++) {
            double d = edges[b] / 4 + edges[b + 1] / 4 - mean / 2;
            if (counts[b])
                v += (double)counts[b] / (double)total * d * d;
        }
        a[n] = mean;
        a[2 * n] = fmin(4 * v, DBL_MAX);
    }
    if (!rc) {
        /* per-channel: axis 0, as ch_axis is not in the checkpoint */
        wpack_stats_in s = {.key = key, .kind = WPACK_STATS_ACTIVATION,
                            .granularity = n == 1 ? WPACK_GRAN_TENSOR : WPACK_GRAN_CHANNEL,
                            .channels = (uint32_t)n, .count = total, .min = o->v[0],
                            .max = o->v[1], .absmax = a, .mean = a + n, .variance = a + 2 * n,
                            .hist_bins = bins, .hist_edges = edges, .hist_counts = counts};
        const char *why = "";
        if ((rc = sink ? sink(ctx, &s, &why) : WPACK_OK))
            wpk_fmt(err, errlen, "'%s': %s", key, why && *why ? why : wpack_error_name(rc));
    } else if (rc == WPACK_E_NOMEM) {
        wpk_fmt(err, errlen, "out of memory");
    }
    free(a);
    free(edges);
    free(counts);
    return rc;
}

void calib_obs_free(calib_obs *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++) {
        for (int f = 0; f < 3; f++)
            free(set->o[i].v[f]);
        free(set->o[i].key);
    }
    for (size_t i = 0; i < set->nlearn; i++)
        free(set->learn[i]);
    free(set->learn);
    free(set->o);
    wpk_nameset_free(&set->okeys);
    wpk_nameset_free(&set->lkeys);
    free(set);
}

calib_obs *calib_obs_new(size_t input_len, char *err, size_t errlen)
{
    calib_obs *set = calloc(1, sizeof *set);
    err[0] = 0;
    if (!set) {
        wpk_fmt(err, errlen, "out of memory");
        return NULL;
    }
    set->err = err;
    set->errlen = errlen;
    set->max_values = (uint64_t)input_len + OBS_GRACE_VALUES;
    return set;
}

int calib_obs_scan(const uint8_t *p, size_t len, const char *key, wpk_zip_read_fn read,
                   void *read_ctx, calib_obs **out, char *err, size_t errlen)
{
    calib_obs *set = calib_obs_new(len, err, errlen);
    *out = NULL;
    if (!set)
        return WPACK_E_NOMEM;
    int rc = torch_scan_buffer_ex(p, len, key, calib_obs_visit, set, read, read_ctx, err, errlen);
    if (rc) {
        calib_obs_free(set);
        return rc;
    }
    *out = set;
    return WPACK_OK;
}

uint64_t calib_obs_buffers(const calib_obs *set)
{
    return set ? set->buffers : 0;
}

int calib_obs_drops(const calib_obs *set, const char *name)
{
    size_t klen;
    int field;
    if (!set || !set->buffers || classify(name, &klen, &field) == OBS_NONE)
        return 0;
    /* _LearnableFakeQuantize: scale and zero_point are learned parameters,
     * nothing rebuilds them from the observer: they stay tensors. */
    const char *last = strrchr(name, '.');
    uint64_t i;
    if ((strcmp(last, ".scale") == 0 || strcmp(last, ".zero_point") == 0) &&
        wpk_nameset_find(&set->lkeys, lkey, (void *)set, (const uint8_t *)name,
                         (size_t)(last - name), &i))
        return 0;
    return 1;
}

int calib_obs_emit(const calib_obs *set, const char *prefix, stats_sink_fn sink, void *ctx,
                   char *summary, size_t sumlen, char *err, size_t errlen)
{
    size_t records = 0, shown = 0, at = 0;
    int rc = WPACK_OK;
    char names[200] = "";
    for (size_t i = 0; !rc && i < set->n; i++) {
        size_t kl = (prefix ? strlen(prefix) + 1 : 0) + strlen(set->o[i].key) + 1;
        char *key = malloc(kl);
        if (!key) {
            wpk_fmt(err, errlen, "out of memory");
            return WPACK_E_NOMEM;
        }
        wpk_fmt(key, kl, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", set->o[i].key);
        size_t before = records;
        rc = emit_obs(&set->o[i], key, sink, ctx, &records, err, errlen);
        if (!rc && records > before && shown < 4 && at < sizeof names) {
            wpk_fmt(names + at, sizeof names - at, "%s%s", shown ? ", " : "", key);
            at = strlen(names);
            shown++;
        }
        free(key);
    }
    if (summary && sumlen)
        wpk_fmt(summary, sumlen, "%zu torch.ao observer%s became activation stats%s%s%s%s",
                records, records == 1 ? "" : "s", records ? " (" : "", names,
                records > shown ? ", ..." : "", records ? ")" : "");
    return rc;
}

uint64_t calib_obs_weight_observers(const calib_obs *set)
{
    return set ? set->weight_obs : 0;
}

int calib_torch_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                      size_t errlen)
{
    calib_obs *set;
    int rc = calib_obs_scan(p, len, NULL, NULL, NULL, &set, err, errlen);
    if (rc && rc != WPACK_E_NOMEM && rc != WPACK_E_STATS && rc != WPACK_E_LIMIT)
        rc = WPACK_E_STATS;
    if (!rc && set->n == 0) {
        wpk_fmt(err, errlen, "a torch checkpoint with no torch.ao observer "
                "(*.activation_post_process.min_val/max_val)");
        rc = WPACK_E_STATS;
    }
    if (!rc)
        rc = calib_obs_emit(set, NULL, sink, ctx, NULL, 0, err, errlen);
    calib_obs_free(set);
    return rc;
}
