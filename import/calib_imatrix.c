/* calib_imatrix.c - llama.cpp importance matrices (spec appendix A.1): the
 * legacy .dat form and the GGUF form (general.type = imatrix). Both give,
 * per weight tensor, the mean of the squared inputs of each input column;
 * that becomes a per-channel activation record keyed by the weight tensor's
 * name: variance = the mean of squares (the second moment about 0), mean 0,
 * and min/max/absmax = -/+ its square root (a derived range, not observed
 * extremes: imatrix keeps none). A GGUF imatrix that also has W.in_sum (the
 * sum of the inputs, llama.cpp since 2025) gives the true mean and the
 * variance about it instead.
 *
 * Checked against ggml-org/llama.cpp tools/imatrix/imatrix.cpp (006e7ef9:
 * save_imatrix_legacy, load_imatrix_legacy, save_imatrix, load_imatrix). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "calib.h"
#include "gguf.h"
#include "import.h"
#include "internal.h"
#include "nameset.h"

static float ldf32(const uint8_t *p)
{
    uint32_t b = wpk_ld32(p);
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* One record from n mean-of-squares values (and means, or NULL: 0). */
static int emit(stats_sink_fn sink, void *ctx, const char *key, const double *ms,
                const double *mu, uint32_t n, uint64_t count, char *err, size_t errlen)
{
    double *a = malloc((size_t)n * 5 * sizeof *a);
    if (!a) {
        wpk_fmt(err, errlen, "'%s': out of memory", key);
        return WPACK_E_NOMEM;
    }
    double *mn = a, *mx = a + n, *am = a + 2 * (size_t)n, *mean = a + 3 * (size_t)n,
           *var = a + 4 * (size_t)n;
    for (uint32_t c = 0; c < n; c++) {
        if (!isfinite(ms[c]) || ms[c] < 0) {
            wpk_fmt(err, errlen, "'%s': column %u: sum of squares %g is negative or not finite",
                    key, c, ms[c]);
            free(a);
            return WPACK_E_STATS;
        }
        double r = sqrt(ms[c]), m = mu && isfinite(mu[c]) ? fmax(-r, fmin(r, mu[c])) : 0;
        mn[c] = -r, mx[c] = r, am[c] = r, mean[c] = m, var[c] = fmax(0, ms[c] - m * m);
    }
    wpack_stats_in s = {.key = key, .kind = WPACK_STATS_ACTIVATION,
                        .granularity = n == 1 ? WPACK_GRAN_TENSOR : WPACK_GRAN_CHANNEL,
                        .axis = 0, .channels = n, .count = count, .min = mn, .max = mx,
                        .absmax = am, .mean = mean, .variance = var};
    const char *why = "";
    int rc = sink ? sink(ctx, &s, &why) : WPACK_OK;
    if (rc)
        wpk_fmt(err, errlen, "'%s': %s", key, why && *why ? why : wpack_error_name(rc));
    free(a);
    return rc;
}

/* Legacy .dat (llama.cpp save_imatrix_legacy), little-endian:
 *   i32 n_entries; n_entries x {i32 len, name[len], i32 ncall, i32 nval,
 *   f32[nval]}; then i32 last_call (the chunk count), i32 len, dataset[len]
 * (always written now; absent from the oldest files). A value is
 * sum2/count * ncall, so value / ncall is the mean of squares. ncall was
 * the number of matmul calls in the first versions; now it is
 * ceil(max rows / chunk size), a chunk count. An expert that saw no rows
 * is written as 1 * ncall (a mean of squares of 1, a placeholder). */
typedef struct {
    const uint8_t *p;
    size_t len, at;
} rd;

static int rd_i32(rd *r, int32_t *v)
{
    if (r->len - r->at < 4)
        return 0;
    *v = (int32_t)wpk_ld32(r->p + r->at);
    r->at += 4;
    return 1;
}

/* Check the whole framing first (check 1), then emit the records. */
static int dat_walk(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, int check,
                    char *err, size_t errlen)
{
    rd r = {p, len, 0};
    int32_t n;
    if (!rd_i32(&r, &n) || n <= 0) {
        wpk_fmt(err, errlen, "want a positive entry count");
        return WPACK_E_STATS;
    }
    for (int32_t e = 0; e < n; e++) {
        int32_t nl, ncall = 0, nval = 0;
        if (!rd_i32(&r, &nl) || nl <= 0 || (size_t)nl > r.len - r.at) {
            wpk_fmt(err, errlen, "entry %d: name length out of the file", e);
            return WPACK_E_STATS;
        }
        const uint8_t *name = p + r.at;
        r.at += (size_t)nl;
        /* each fault said as it is, naming the entry (its name up to a NUL,
         * which has its own check below) */
        char why[120] = "";
        if (!rd_i32(&r, &ncall) || !rd_i32(&r, &nval))
            wpk_fmt(why, sizeof why, "ncall and nval past the file end");
        else if (ncall < 0)
            wpk_fmt(why, sizeof why, "ncall %d is negative", ncall);
        else if (nval == 0)
            wpk_fmt(why, sizeof why, "nval is 0: no values (one per input column)");
        else if (nval < 0)
            wpk_fmt(why, sizeof why, "nval %d is negative", nval);
        else if ((size_t)nval > (r.len - r.at) / 4)
            wpk_fmt(why, sizeof why, "%d values (nval) run past the file end", nval);
        if (*why) {
            wpk_fmt(err, errlen, "entry %d '%.*s': %s", e, nl < 200 ? nl : 200,
                    (const char *)name, why);
            return WPACK_E_STATS;
        }
        const uint8_t *vals = p + r.at;
        r.at += (size_t)nval * 4;
        if (check)
            continue;
        char *key = strndup((const char *)name, (size_t)nl);
        double *ms = malloc((size_t)nval * sizeof *ms);
        int rc = WPACK_OK;
        if (!key || !ms || strlen(key) != (size_t)nl) {
            wpk_fmt(err, errlen, "entry %d: %s", e, key && ms ? "a NUL byte in the name"
                                                             : "out of memory");
            rc = key && ms ? WPACK_E_STATS : WPACK_E_NOMEM;
        }
        for (int32_t c = 0; !rc && c < nval; c++) {
            /* ncall 0 (no rows): a range of 0, but a bad value is still
             * refused (emit), as with rows */
            double v = ldf32(vals + 4 * (size_t)c);
            ms[c] = ncall ? v / ncall : isfinite(v) && v >= 0 ? 0 : v;
        }
        if (!rc)
            rc = emit(sink, ctx, key, ms, NULL, (uint32_t)nval, (uint64_t)ncall, err, errlen);
        free(key);
        free(ms);
        if (rc)
            return rc;
    }
    /* the tail: nothing, or last_call and the dataset name */
    int32_t last, dl;
    size_t tail = r.len - r.at; /* counted before the reads below move r.at */
    if (tail && (!rd_i32(&r, &last) || !rd_i32(&r, &dl) || dl < 0 ||
                 (size_t)dl != r.len - r.at)) {
        wpk_fmt(err, errlen, "%zu bytes after the entries are not last_call + dataset name",
                tail);
        return WPACK_E_STATS;
    }
    return WPACK_OK;
}

int calib_imatrix_dat_sniff(const uint8_t *p, size_t len)
{
    /* binary: a small positive entry count, then a name length (a text file
     * has no zero byte in its first 8) */
    return len >= 8 && (int32_t)wpk_ld32(p) > 0 && (size_t)wpk_ld32(p) < len && !p[3] && !p[7];
}

int calib_imatrix_dat_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx,
                            char *err, size_t errlen)
{
    int rc = dat_walk(p, len, sink, ctx, 1, err, errlen);
    return rc ? rc : dat_walk(p, len, sink, ctx, 0, err, errlen);
}

/* GGUF form (llama.cpp tools/imatrix, general.type = "imatrix"): per
 * weight tensor W, f32 tensors W.in_sum2 (ne [n_cols, n_mat]: the sum of
 * squared inputs of each column, per expert matrix), W.counts (ne
 * [1, n_mat]: the rows each matrix saw, whole numbers as floats, read with
 * lround as load_imatrix does) and, in newer files, W.in_sum (ne [n_cols,
 * n_mat]: the sum of the inputs). Mean of squares = in_sum2 / counts; mean =
 * in_sum / counts. Other tensors are ignored, as load_imatrix does. */
static const uint8_t *t_name(void *ctx, uint64_t item, uint64_t *len)
{
    const gguf_file *g = ctx;
    *len = g->t[item].name_len;
    return g->t[item].name;
}

/* name[0..nl) + suffix among g's tensors (names are unique: gguf_parse),
 * by the hash set of their names: a scan per lookup made n pairs n^2
 * compares (20,000 pairs, a 2 MB file: 8 s; hours at 100 MB). scratch:
 * room for nl + 8 bytes. */
static const gguf_tensor *find_t(const gguf_file *g, const wpk_nameset *names, char *scratch,
                                 const uint8_t *name, size_t nl, const char *suffix)
{
    size_t sl = strlen(suffix);
    uint64_t item;
    memcpy(scratch, name, nl);
    memcpy(scratch + nl, suffix, sl);
    return wpk_nameset_find(names, t_name, (void *)g, (const uint8_t *)scratch, nl + sl, &item)
               ? &g->t[item] : NULL;
}

static int is_imatrix(const gguf_file *g)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (kv->key_len == 12 && memcmp(kv->key, "general.type", 12) == 0 &&
            kv->type == GGUF_T_STRING && kv->val_len >= 8 && wpk_ld64(kv->val) == 7 &&
            kv->val_len >= 15 && memcmp(kv->val + 8, "imatrix", 7) == 0)
            return 1;
    }
    return 0;
}

int calib_imatrix_gguf_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx,
                             char *err, size_t errlen)
{
    gguf_file g;
    int rc = gguf_parse(p, len, &g, err, errlen);
    if (rc)
        return rc == WPACK_E_INPUT ? WPACK_E_STATS : rc;
    if (!is_imatrix(&g)) {
        gguf_free(&g);
        wpk_fmt(err, errlen, "a GGUF file without general.type = imatrix (a model, not "
                "calibration data?)");
        return WPACK_E_STATS;
    }
    size_t found = 0;
    wpk_nameset names = {0};
    for (uint64_t i = 0; !rc && i < g.n_tensors; i++)
        if (!wpk_nameset_insert(&names, t_name, &g, g.t[i].name, g.t[i].name_len, i)) {
            wpk_fmt(err, errlen, "out of memory");
            rc = WPACK_E_NOMEM;
        }
    for (uint64_t i = 0; !rc && i < g.n_tensors; i++) {
        const gguf_tensor *s2 = &g.t[i];
        if (s2->name_len < 8 || memcmp(s2->name + s2->name_len - 8, ".in_sum2", 8) != 0)
            continue;
        size_t nl = (size_t)s2->name_len - 8;
        char *key = malloc(nl + 8); /* scratch for find_t, then the key */
        const gguf_tensor *ct = key ? find_t(&g, &names, key, s2->name, nl, ".counts") : NULL;
        const gguf_tensor *s1 = key ? find_t(&g, &names, key, s2->name, nl, ".in_sum") : NULL;
        if (key) {
            memcpy(key, s2->name, nl);
            key[nl] = 0;
        }
        uint64_t ncols = s2->ne[0], nmat = s2->n_dims > 1 ? s2->ne[1] : 1;
        if (!key) {
            rc = WPACK_E_NOMEM;
            wpk_fmt(err, errlen, "out of memory");
            break;
        }
        /* gguf_parse takes any bytes in a name: the key would end early */
        if (strlen(key) != nl) {
            wpk_fmt(err, errlen, "tensor %llu: a NUL byte in the name", (unsigned long long)i);
            free(key);
            rc = WPACK_E_STATS;
            break;
        }
        /* n_mat 0 (ne [n_cols, 0], counts [1, 0]) would be a record of no
         * channels */
        if (!ct || s2->type != 0 || ct->type != 0 || s2->n_dims > 2 || ct->n_dims > 2 ||
            ct->nbytes != nmat * 4 || s2->nbytes != ncols * nmat * 4 || ncols == 0 ||
            nmat == 0 || ncols * nmat > (1u << 24) ||
            (s1 && (s1->type != 0 || s1->nbytes != s2->nbytes))) {
            wpk_fmt(err, errlen, "'%s': want f32 %s.in_sum2 [n_cols, n_mat], %s.counts "
                    "[1, n_mat] (1 <= n_cols x n_mat <= 2^24) and no or an f32 %s.in_sum as "
                    "large as in_sum2", key, key, key, key);
            rc = WPACK_E_STATS;
        }
        const uint8_t *sv = p + g.data_start + s2->offset;
        const uint8_t *cv = ct ? p + g.data_start + ct->offset : NULL;
        const uint8_t *mv = s1 && !rc ? p + g.data_start + s1->offset : NULL;
        double *ms = rc ? NULL : malloc((size_t)(ncols * nmat) * 2 * sizeof *ms);
        double *mu = ms ? ms + ncols * nmat : NULL;
        if (!rc && !ms) {
            rc = WPACK_E_NOMEM;
            wpk_fmt(err, errlen, "out of memory");
        }
        uint64_t total = 0;
        for (uint64_t m = 0; !rc && m < nmat; m++) {
            float c = ldf32(cv + 4 * m);
            if (!(c >= 0) || c > 1e18f) {
                wpk_fmt(err, errlen, "'%s': count %g of matrix %llu is not a count", key, c,
                        (unsigned long long)m);
                rc = WPACK_E_STATS;
                break;
            }
            double rows = floor((double)c + 0.5);
            if ((uint64_t)rows > UINT64_MAX - total) { /* 2^24 matrices of up to 1e18 */
                wpk_fmt(err, errlen, "'%s': the counts of matrices 0..%llu add up past 2^64",
                        key, (unsigned long long)m);
                rc = WPACK_E_STATS;
                break;
            }
            total += (uint64_t)rows;
            for (uint64_t j = 0; j < ncols; j++) {
                uint64_t at = 4 * (m * ncols + j);
                ms[m * ncols + j] = rows > 0 ? ldf32(sv + at) / rows : 0;
                mu[m * ncols + j] = rows > 0 && mv ? ldf32(mv + at) / rows : 0;
            }
        }
        if (!rc)
            rc = emit(sink, ctx, key, ms, mv ? mu : NULL, (uint32_t)(ncols * nmat), total, err,
                      errlen);
        free(ms);
        free(key);
        found++;
    }
    if (!rc && !found) {
        wpk_fmt(err, errlen, "an imatrix GGUF with no <name>.in_sum2 tensor");
        rc = WPACK_E_STATS;
    }
    wpk_nameset_free(&names);
    gguf_free(&g);
    return rc;
}
