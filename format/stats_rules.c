/* stats_rules.c - the consistency rules of a calibration stats record (spec
 * section 10), one implementation for the writer (wpack_writer_add_stats),
 * the reader's validation at open (reader/stats.c, which in-place updates
 * also use) and anything else that builds records. Each rule takes plain
 * values, so a caller reading little-endian bytes and one holding doubles
 * ask the same question; each returns WPACK_OK or the code of the fault with
 * a message (without the key: the caller says which record) in why. */
#include <math.h>

#include "bytes.h"
#include "internal.h"
#include "layout.h"

int wpk_stats_shape_rule(int kind, int gran, uint32_t axis, uint32_t channels, uint32_t bins,
                         uint32_t pcts, char *why, size_t n)
{
    if (kind != WPACK_STATS_WEIGHT && kind != WPACK_STATS_ACTIVATION) {
        wpk_fmt(why, n, "unknown kind %d", kind);
        return WPACK_E_STATS;
    }
    if (gran == WPACK_GRAN_TENSOR) {
        if (axis != 0 || channels != 1) {
            wpk_fmt(why, n, "per-tensor with axis %u, %u channels", axis, channels);
            return WPACK_E_STATS;
        }
    } else if (gran == WPACK_GRAN_CHANNEL) {
        if (channels < 1 || channels > WPK_LIMIT_CHANNELS || axis >= WPACK_MAX_RANK) {
            wpk_fmt(why, n, "per-channel axis %u, %u channels out of range", axis, channels);
            return WPACK_E_STATS;
        }
    } else {
        wpk_fmt(why, n, "unknown granularity %d", gran);
        return WPACK_E_STATS;
    }
    if (bins > WPK_LIMIT_HIST_BINS) {
        wpk_fmt(why, n, "%u histogram bins, limit %u", bins, WPK_LIMIT_HIST_BINS);
        return WPACK_E_LIMIT;
    }
    if (pcts > WPK_LIMIT_PERCENTILES) {
        wpk_fmt(why, n, "%u percentiles, limit %u", pcts, WPK_LIMIT_PERCENTILES);
        return WPACK_E_LIMIT;
    }
    return WPACK_OK;
}

int wpk_stats_values_rule(uint32_t c, double mn, double mx, double am, double mean, double var,
                          char *why, size_t n)
{
    if (!isfinite(mn) || !isfinite(mx) || !isfinite(am) || !isfinite(mean) || !isfinite(var)) {
        wpk_fmt(why, n, "channel %u: value not finite", c);
        return WPACK_E_STATS;
    }
    if (!(mn <= mx) || am != fmax(fabs(mn), fabs(mx)) || !(mn <= mean && mean <= mx) || var < 0) {
        wpk_fmt(why, n, "channel %u: inconsistent min %g max %g absmax %g mean %g variance %g", c,
                mn, mx, am, mean, var);
        return WPACK_E_STATS;
    }
    return WPACK_OK;
}

int wpk_stats_edge_rule(uint32_t b, double e, double prev, char *why, size_t n)
{
    if (!isfinite(e) || (b > 0 && !(e > prev))) {
        wpk_fmt(why, n, "histogram edge %u (%g) not finite and increasing", b, e);
        return WPACK_E_STATS;
    }
    return WPACK_OK;
}

int wpk_stats_bin_rule(uint64_t *sum, uint64_t bin_count, char *why, size_t n)
{
    if (!wpk_add(*sum, bin_count, sum)) {
        wpk_fmt(why, n, "histogram counts overflow");
        return WPACK_E_STATS;
    }
    return WPACK_OK;
}

int wpk_stats_sum_rule(uint64_t sum, uint64_t count, char *why, size_t n)
{
    if (sum != count) {
        wpk_fmt(why, n, "histogram counts sum to %llu, count is %llu", (unsigned long long)sum,
                (unsigned long long)count);
        return WPACK_E_STATS;
    }
    return WPACK_OK;
}

int wpk_stats_percentile_rule(uint32_t j, double q, double v, double prev_q, double prev_v,
                              char *why, size_t n)
{
    int ok = q >= 0 && q <= 100 && isfinite(v);
    if (j > 0)
        ok = ok && q > prev_q && v >= prev_v;
    if (!ok) {
        wpk_fmt(why, n, "percentile %u (q %g, value %g) out of order or range", j, q, v);
        return WPACK_E_STATS;
    }
    return WPACK_OK;
}
