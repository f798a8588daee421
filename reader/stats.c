/* stats.c - calibration statistics records: validation at open and access. */
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"

/* Compare (key, kind) pairs: the stats section's order. */
static int key_kind_cmp(const uint8_t *a, uint64_t alen, int akind, const uint8_t *b,
                        uint64_t blen, int bkind)
{
    int c = wpk_name_cmp(a, alen, b, blen);
    return c ? c : (akind > bkind) - (akind < bkind);
}

/* The record's arrays against format/stats_rules.c; a fault names the key. */
static int rule_fail(wpack_archive *ar, int rc, const uint8_t *key, uint64_t key_len,
                     const char *why)
{
    char q[256];
    wpk_quote(q, sizeof q, (const char *)key, (size_t)key_len);
    return wpk_fail(ar, rc, "stats '%s': %s", q, why);
}

static int check_values(wpack_archive *ar, const uint8_t *key, uint64_t key_len, const uint8_t *v,
                        uint32_t channels)
{
    char why[200];
    for (uint32_t c = 0; c < channels; c++) {
        int rc = wpk_stats_values_rule(c, wpk_ldf64(v + 8 * ((uint64_t)0 * channels + c)),
                                       wpk_ldf64(v + 8 * ((uint64_t)1 * channels + c)),
                                       wpk_ldf64(v + 8 * ((uint64_t)2 * channels + c)),
                                       wpk_ldf64(v + 8 * ((uint64_t)3 * channels + c)),
                                       wpk_ldf64(v + 8 * ((uint64_t)4 * channels + c)), why,
                                       sizeof why);
        if (rc)
            return rule_fail(ar, rc, key, key_len, why);
    }
    return WPACK_OK;
}

static int check_histogram(wpack_archive *ar, const uint8_t *key, uint64_t key_len, uint64_t off,
                           uint32_t bins, uint64_t count)
{
    char why[200];
    uint64_t bytes = (2 * (uint64_t)bins + 1) * 8;
    int rc = wpk_aux_ref(ar, off, bytes, "stats histogram");
    if (rc)
        return rc;
    const uint8_t *p = ar->sec[WPK_SEC_AUX] + off;
    for (uint32_t b = 0; b <= bins; b++)
        if ((rc = wpk_stats_edge_rule(b, wpk_ldf64(p + 8 * b), b ? wpk_ldf64(p + 8 * (b - 1)) : 0,
                                      why, sizeof why)))
            return rule_fail(ar, rc, key, key_len, why);
    uint64_t sum = 0;
    const uint8_t *counts = p + 8 * ((uint64_t)bins + 1);
    for (uint32_t b = 0; b < bins; b++)
        if ((rc = wpk_stats_bin_rule(&sum, wpk_ld64(counts + 8 * b), why, sizeof why)))
            return rule_fail(ar, rc, key, key_len, why);
    if ((rc = wpk_stats_sum_rule(sum, count, why, sizeof why)))
        return rule_fail(ar, rc, key, key_len, why);
    return WPACK_OK;
}

static int check_percentiles(wpack_archive *ar, const uint8_t *key, uint64_t key_len, uint64_t off,
                             uint32_t n)
{
    char why[200];
    int rc = wpk_aux_ref(ar, off, 16 * (uint64_t)n, "stats percentiles");
    if (rc)
        return rc;
    const uint8_t *p = ar->sec[WPK_SEC_AUX] + off;
    for (uint32_t j = 0; j < n; j++) {
        double pq = j ? wpk_ldf64(p + 16 * (j - 1)) : 0, pv = j ? wpk_ldf64(p + 16 * (j - 1) + 8) : 0;
        if ((rc = wpk_stats_percentile_rule(j, wpk_ldf64(p + 16 * j), wpk_ldf64(p + 16 * j + 8), pq,
                                            pv, why, sizeof why)))
            return rule_fail(ar, rc, key, key_len, why);
    }
    return WPACK_OK;
}

static const uint8_t *entry_name(const wpack_archive *ar, uint64_t i)
{
    return (const uint8_t *)wpk_str(ar, wpk_ld64(wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE)));
}

static uint64_t entry_name_len(const wpack_archive *ar, uint64_t i)
{
    return wpk_ld32(wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE) + 8);
}

int wpk_check_stats(wpack_archive *ar)
{
    const uint8_t *prev = NULL;
    uint64_t prev_len = 0;
    int prev_kind = 0;
    uint64_t ecur = 0, n = ar->info.entry_count;
    for (uint64_t i = 0; i < ar->info.stats_count; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_STATS, i, WPK_STATS_REC_SIZE);
        const uint8_t *key;
        uint64_t key_len = wpk_ld32(r + WPK_S_KEY_LEN_OFF);
        int rc = wpk_string_ref(ar, wpk_ld64(r + WPK_S_KEY_OFF), key_len, "stats key", &key);
        if (rc)
            return rc;
        int kind = r[WPK_S_KIND_OFF], gran = r[WPK_S_GRAN_OFF];
        char q[256];
#define Q (wpk_quote(q, sizeof q, (const char *)key, (size_t)key_len), q)
        /* Keys come in name order, like the entries: one forward walk finds
         * the entry of each key (a merge join, not a search per record). A
         * key equal to an entry name has passed the name rule already; an
         * unsorted key the walk passed by is checked, and is UNSORTED below. */
        int c = 1;
        while (ecur < n &&
               (c = wpk_name_cmp(entry_name(ar, ecur), entry_name_len(ar, ecur), key, key_len)) < 0)
            ecur++;
        int is_entry = ecur < n && c == 0;
        /* M47 in its order: the reference, the name rule, then the order */
        if (!is_entry && (rc = wpk_name_ref(ar, wpk_ld64(r + WPK_S_KEY_OFF), key_len, "stats key", &key)))
            return rc;
        if (prev) {
            int o = key_kind_cmp(prev, prev_len, prev_kind, key, key_len, kind);
            if (o == 0)
                return wpk_fail(ar, WPACK_E_DUPLICATE, "%s stats '%s' appear twice", wpk_stats_kind_name(kind), Q);
            if (o > 0)
                return wpk_fail(ar, WPACK_E_UNSORTED, "stats '%s' out of (key, kind) order", Q);
        }
        prev = key;
        prev_len = key_len;
        prev_kind = kind;
        if (ar->info.format_minor <= WPACK_FORMAT_MINOR && wpk_ld16(r + WPK_S_RESERVED_OFF))
            return wpk_fail(ar, WPACK_E_RESERVED, "stats '%s': reserved field not zero", Q);
        uint32_t axis = wpk_ld32(r + WPK_S_AXIS_OFF), channels = wpk_ld32(r + WPK_S_CHANNELS_OFF);
        uint32_t bins = wpk_ld32(r + WPK_S_HIST_BINS_OFF), pcts = wpk_ld32(r + WPK_S_PCT_COUNT_OFF);
        char why[200];
        if ((rc = wpk_stats_shape_rule(kind, gran, axis, channels, bins, pcts, why, sizeof why)))
            return rule_fail(ar, rc, key, key_len, why);
        if (kind == WPACK_STATS_WEIGHT) {
            if (!is_entry)
                return wpk_fail(ar, WPACK_E_STATS, "weight stats '%s': no tensor of that name", Q);
            const uint8_t *er = wpk_rec(ar, WPK_SEC_ENTRIES, ecur, WPK_ENTRY_SIZE);
            unsigned rank = er[WPK_E_RANK_OFF];
            const uint8_t *dims = ar->sec[WPK_SEC_DIMS] + 8 * wpk_ld64(er + WPK_E_DIMS_OFF);
            if (gran == WPACK_GRAN_CHANNEL && (axis >= rank || channels != wpk_ld64(dims + 8 * axis)))
                return wpk_fail(ar, WPACK_E_STATS,
                                "weight stats '%s': %u channels on axis %u do not fit the tensor",
                                Q, channels, axis);
        }
        uint64_t count = wpk_ld64(r + WPK_S_COUNT_OFF);
        uint64_t voff = wpk_ld64(r + WPK_S_VALUES_OFF);
        if ((rc = wpk_aux_ref(ar, voff, 40 * (uint64_t)channels, "stats values")) ||
            (rc = check_values(ar, key, key_len, ar->sec[WPK_SEC_AUX] + voff, channels)))
            return rc;
        if (bins && (rc = check_histogram(ar, key, key_len, wpk_ld64(r + WPK_S_HIST_OFF), bins, count)))
            return rc;
        if (!bins && wpk_ld64(r + WPK_S_HIST_OFF))
            return wpk_fail(ar, WPACK_E_STATS, "stats '%s': histogram offset without bins", Q);
        if (pcts && (rc = check_percentiles(ar, key, key_len, wpk_ld64(r + WPK_S_PCT_OFF), pcts)))
            return rc;
        if (!pcts && wpk_ld64(r + WPK_S_PCT_OFF))
            return wpk_fail(ar, WPACK_E_STATS, "stats '%s': percentile offset without percentiles", Q);
    }
    return WPACK_OK;
#undef Q
}

/* ---- access ---- */

static void fill_stats(const wpack_archive *ar, uint64_t i, wpack_stats *s)
{
    const uint8_t *r = wpk_rec(ar, WPK_SEC_STATS, i, WPK_STATS_REC_SIZE);
    const uint8_t *aux = ar->sec[WPK_SEC_AUX];
    memset(s, 0, sizeof *s);
    s->key = wpk_str(ar, wpk_ld64(r + WPK_S_KEY_OFF));
    s->kind = r[WPK_S_KIND_OFF];
    s->granularity = r[WPK_S_GRAN_OFF];
    s->axis = wpk_ld32(r + WPK_S_AXIS_OFF);
    s->channels = wpk_ld32(r + WPK_S_CHANNELS_OFF);
    s->count = wpk_ld64(r + WPK_S_COUNT_OFF);
    s->hist_bins = wpk_ld32(r + WPK_S_HIST_BINS_OFF);
    s->percentile_count = wpk_ld32(r + WPK_S_PCT_COUNT_OFF);
    s->priv_[0] = aux + wpk_ld64(r + WPK_S_VALUES_OFF);
    s->priv_[1] = s->hist_bins ? aux + wpk_ld64(r + WPK_S_HIST_OFF) : NULL;
    s->priv_[2] = s->percentile_count ? aux + wpk_ld64(r + WPK_S_PCT_OFF) : NULL;
    s->min = wpack_stats_value(s, WPACK_STAT_MIN, 0);
    s->max = wpack_stats_value(s, WPACK_STAT_MAX, 0);
    s->absmax = wpack_stats_value(s, WPACK_STAT_ABSMAX, 0);
    s->mean = wpack_stats_value(s, WPACK_STAT_MEAN, 0);
    s->variance = wpack_stats_value(s, WPACK_STAT_VARIANCE, 0);
    /* Over all channels: pooled variance = mean of (variance + mean^2)
     * minus the square of the pooled mean (equal weights). */
    double mn = s->min, mx = s->max, msum = 0, sqsum = 0;
    for (uint32_t c = 0; c < s->channels; c++) {
        double cmean = wpack_stats_value(s, WPACK_STAT_MEAN, c);
        mn = fmin(mn, wpack_stats_value(s, WPACK_STAT_MIN, c));
        mx = fmax(mx, wpack_stats_value(s, WPACK_STAT_MAX, c));
        msum += cmean;
        sqsum += wpack_stats_value(s, WPACK_STAT_VARIANCE, c) + cmean * cmean;
    }
    s->overall_min = mn;
    s->overall_max = mx;
    s->overall_absmax = fmax(fabs(mn), fabs(mx));
    if (s->channels == 1) {
        s->overall_mean = s->mean;
        s->overall_variance = s->variance;
    } else {
        double mean = msum / s->channels, var = sqsum / s->channels - mean * mean;
        s->overall_mean = fmin(fmax(mean, mn), mx);
        s->overall_variance = var > 0 && isfinite(var) ? var : 0;
    }
}

uint64_t wpack_stats_count(const wpack_archive *ar)
{
    return ar->info.stats_count;
}

int wpack_stats_at(const wpack_archive *ar, uint64_t i, wpack_stats *out)
{
    if (i >= ar->info.stats_count)
        return WPACK_E_NOT_FOUND;
    fill_stats(ar, i, out);
    return WPACK_OK;
}

int wpack_stats_find(const wpack_archive *ar, const char *key, int kind, wpack_stats *out)
{
    if (!key)
        return WPACK_E_INVALID_ARGUMENT;
    uint64_t lo = 0, hi = ar->info.stats_count, klen = strlen(key);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const uint8_t *r = wpk_rec(ar, WPK_SEC_STATS, mid, WPK_STATS_REC_SIZE);
        const uint8_t *k = (const uint8_t *)wpk_str(ar, wpk_ld64(r + WPK_S_KEY_OFF));
        int c = key_kind_cmp(k, wpk_ld32(r + WPK_S_KEY_LEN_OFF), r[WPK_S_KIND_OFF],
                             (const uint8_t *)key, klen, kind);
        if (c == 0) {
            fill_stats(ar, mid, out);
            return WPACK_OK;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return WPACK_E_NOT_FOUND;
}

double wpack_stats_value(const wpack_stats *s, int which, uint32_t c)
{
    if (which < 0 || which > WPACK_STAT_VARIANCE || c >= s->channels)
        return NAN;
    return wpk_ldf64((const uint8_t *)s->priv_[0] + 8 * ((uint64_t)which * s->channels + c));
}

void wpack_stats_bin(const wpack_stats *s, uint32_t b, double *lo, double *hi, uint64_t *count)
{
    const uint8_t *p = s->priv_[1];
    if (!p || b >= s->hist_bins) {
        *lo = *hi = NAN;
        *count = 0;
        return;
    }
    *lo = wpk_ldf64(p + 8 * b);
    *hi = wpk_ldf64(p + 8 * (b + 1));
    *count = wpk_ld64(p + 8 * ((uint64_t)s->hist_bins + 1 + b));
}

void wpack_stats_percentile(const wpack_stats *s, uint32_t j, double *q, double *value)
{
    const uint8_t *p = s->priv_[2];
    if (!p || j >= s->percentile_count) {
        *q = *value = NAN;
        return;
    }
    *q = wpk_ldf64(p + 16 * j);
    *value = wpk_ldf64(p + 16 * j + 8);
}

/* ---- bulk access: one call per array, the same values as the calls above ---- */

/* need elements fit in a buffer of len; out may be NULL only when need is 0 */
static int fits(const void *out, uint64_t len, uint64_t need)
{
    return (need == 0 || out) && need <= len;
}

int wpack_stats_values(const wpack_stats *s, double *values, uint64_t len)
{
    if (!s)
        return WPACK_E_INVALID_ARGUMENT;
    uint64_t n = 5 * (uint64_t)s->channels;   /* channels is 32-bit: no overflow */
    if (!fits(values, len, n) || (n && !s->priv_[0]))
        return WPACK_E_INVALID_ARGUMENT;
    const uint8_t *p = s->priv_[0];
    for (uint64_t k = 0; k < n; k++)
        values[k] = wpk_ldf64(p + 8 * k);
    return WPACK_OK;
}

int wpack_stats_histogram(const wpack_stats *s, double *edges, uint64_t edges_len,
                          uint64_t *counts, uint64_t counts_len)
{
    if (!s)
        return WPACK_E_INVALID_ARGUMENT;
    const uint8_t *p = s->priv_[1];
    uint64_t bins = p ? s->hist_bins : 0;
    if (!fits(edges, edges_len, bins ? bins + 1 : 0) || !fits(counts, counts_len, bins))
        return WPACK_E_INVALID_ARGUMENT;
    for (uint64_t b = 0; bins && b <= bins; b++)
        edges[b] = wpk_ldf64(p + 8 * b);
    for (uint64_t b = 0; b < bins; b++)
        counts[b] = wpk_ld64(p + 8 * (bins + 1 + b));
    return WPACK_OK;
}

int wpack_stats_percentiles(const wpack_stats *s, double *percentiles, uint64_t len)
{
    if (!s)
        return WPACK_E_INVALID_ARGUMENT;
    const uint8_t *p = s->priv_[2];
    uint64_t n = p ? 2 * (uint64_t)s->percentile_count : 0;
    if (!fits(percentiles, len, n))
        return WPACK_E_INVALID_ARGUMENT;
    for (uint64_t k = 0; k < n; k++)
        percentiles[k] = wpk_ldf64(p + 8 * k);
    return WPACK_OK;
}
