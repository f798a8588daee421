/*
 * attrdict.c - the discardable attributes the resolver owns: a growing
 * string buffer, merging our `key = value` entries into an op's attribute
 * dictionary (idempotently), and calibration stats as MLIR attributes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "resolve_int.h"

char *wpk_sb_reserve(wpk_strbuf *a, size_t n)
{
    if (a->failed)
        return NULL;
    if (n > (size_t)-1 / 4 - a->n) {
        a->failed = 1;
        return NULL;
    }
    if (a->n + n + 1 > a->cap) {
        size_t c = a->cap ? a->cap : 4096;
        while (c < a->n + n + 1)
            c *= 2;
        char *q = realloc(a->p, c);
        if (!q) {
            a->failed = 1;
            return NULL;
        }
        a->p = q;
        a->cap = c;
    }
    return a->p + a->n;
}

void wpk_sb_put(wpk_strbuf *a, const char *s, size_t n)
{
    char *d = wpk_sb_reserve(a, n);
    if (!d)
        return;
    memcpy(d, s, n);
    a->n += n;
    a->p[a->n] = 0;
}

void wpk_sb_puts(wpk_strbuf *a, const char *s)
{
    wpk_sb_put(a, s, strlen(s));
}

/* Is the dictionary key (as written) one the resolver writes? */
static int key_is_ours(const char *buf, wpk_span k, const char *prefix, int uri)
{
    if (uri && wpk_span_is(buf, k, "wpack.uri"))
        return 1;
    if (!prefix)
        return 0;
    /* both forms' keys: annotating in one form replaces the other's */
    static const char *const stats[] = {".min", ".max", ".absmax", ".axis", ".range"};
    size_t pl = strlen(prefix);
    if (k.len <= pl || memcmp(buf + k.off, prefix, pl) != 0)
        return 0;
    for (size_t i = 0; i < 5; i++)
        if (wpk_span_is(buf, (wpk_span){k.off + pl, k.len - pl}, stats[i]))
            return 1;
    return 0;
}

int wpk_attr_merge(const char *buf, size_t len, wpk_span dict, size_t insert_at, const char *lead,
                   const char *trail, const char *ours, size_t ours_len, const char *prefix,
                   int uri, wpk_strbuf *out, size_t *edit_off, size_t *edit_len)
{
    if (!dict.len) {
        *edit_off = insert_at;
        *edit_len = 0;
        wpk_sb_puts(out, lead);
        wpk_sb_puts(out, "{");
        wpk_sb_put(out, ours, ours_len);
        wpk_sb_puts(out, "}");
        wpk_sb_puts(out, trail);
        return out->failed ? WPACK_E_NOMEM : 0;
    }
    enum { MAXE = 512 };
    wpk_dict_entry *e = malloc(MAXE * sizeof *e);
    if (!e)
        return WPACK_E_NOMEM;
    size_t n, close;
    if (wpk_mlir_parse_dict(buf, len, dict.off, e, MAXE, &n, &close) || n > MAXE) {
        free(e);
        return WPACK_E_INPUT;
    }
    /* our entries first and contiguous (as written by an earlier run): keep
     * the rest's bytes; otherwise the others joined by ", " */
    size_t first_other = n;
    int prefix_form = 1;
    for (size_t i = 0; i < n; i++) {
        int o = key_is_ours(buf, e[i].key, prefix, uri);
        if (!o && first_other == n)
            first_other = i;
        else if (o && first_other != n)
            prefix_form = 0;
    }
    *edit_off = dict.off;
    *edit_len = close + 1 - dict.off;
    wpk_sb_puts(out, "{");
    wpk_sb_put(out, ours, ours_len);
    if (prefix_form) {
        if (first_other < n) {
            wpk_sb_puts(out, ", ");
            wpk_sb_put(out, buf + e[first_other].key.off, close - e[first_other].key.off);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            if (key_is_ours(buf, e[i].key, prefix, uri))
                continue;
            size_t end = e[i].value.len ? e[i].value.off + e[i].value.len : e[i].key.off + e[i].key.len;
            wpk_sb_puts(out, ", ");
            wpk_sb_put(out, buf + e[i].key.off, end - e[i].key.off);
        }
    }
    wpk_sb_puts(out, "}");
    free(e);
    return out->failed ? WPACK_E_NOMEM : 0;
}

/* The shortest decimal that reads back as the same value - the f32 it
 * rounds to when f32, else the f64 itself - in MLIR's float literal grammar
 * (a '.' always, "1.0e+20" rather than "1e+20"). */
static void put_float(wpk_strbuf *a, double v, int f32)
{
    float f = (float)v;
    double x = f32 ? (double)f : v;
    char s[48];
    if (isinf(x) || isnan(x)) { /* past f32's range: MLIR takes the bit pattern */
        uint32_t u;
        memcpy(&u, &f, 4);
        snprintf(s, sizeof s, "0x%08X", (unsigned)u);
        wpk_sb_puts(a, s);
        return;
    }
    for (int p = 1; p <= (f32 ? 9 : 17); p++) {
        snprintf(s, sizeof s, "%.*g", p, x);
        double back = strtod(s, NULL);
        if (f32 ? (float)back == f : back == x)
            break;
    }
    if (strpbrk(s, "eE") && fabs(x) >= 1.0 && (f32 ? fabsf(f) < 1e15f : fabs(x) < 1e15)) {
        char w[48]; /* 10.0 reads better than 1.0e+01 */
        snprintf(w, sizeof w, "%.1f", x);
        double back = strtod(w, NULL);
        if (f32 ? (float)back == f : back == x)
            memcpy(s, w, sizeof w);
    }
    char t[56];
    char *e = strpbrk(s, "eE");
    if (!strchr(s, '.')) {
        if (e)
            snprintf(t, sizeof t, "%.*s.0%s", (int)(e - s), s, e);
        else
            snprintf(t, sizeof t, "%s.0", s);
        wpk_sb_puts(a, t);
    } else {
        wpk_sb_puts(a, s);
    }
}

static void put_stat(wpk_strbuf *a, const wpack_stats *st, int which, const char *prefix,
                     const char *name)
{
    wpk_sb_puts(a, prefix);
    wpk_sb_puts(a, name);
    wpk_sb_puts(a, " = ");
    if (st->granularity == WPACK_GRAN_TENSOR) {
        put_float(a, wpack_stats_value(st, which, 0), 1);
        wpk_sb_puts(a, " : f32");
        return;
    }
    wpk_sb_puts(a, "dense<[");
    for (uint32_t c = 0; c < st->channels; c++) {
        if (c)
            wpk_sb_puts(a, ", ");
        put_float(a, wpack_stats_value(st, which, c), 1);
    }
    char ty[48];
    wpk_fmt(ty, sizeof ty, "]> : tensor<%uxf32>", st->channels);
    wpk_sb_puts(a, ty);
}

int wpack_annotate_form_from_name(const char *name)
{
    if (name && strcmp(name, "attrs") == 0)
        return WPACK_ANNOTATE_ATTRS;
    if (name && strcmp(name, "quant") == 0)
        return WPACK_ANNOTATE_QUANT;
    return -1;
}

const char *wpk_stats_quant_unfit(const wpack_stats *st)
{
    if (st->granularity != WPACK_GRAN_TENSOR)
        return "per-channel";
    if (!isfinite(st->min) || !isfinite(st->max)) /* a verified archive has none */
        return "not finite";
    if (!(st->min < st->max)) /* the type's verifier wants MIN < MAX */
        return "min == max";
    return NULL;
}

void wpk_stats_attr_text(wpk_strbuf *a, const wpack_stats *st, const char *prefix, int form)
{
    if (form == WPACK_ANNOTATE_QUANT && !wpk_stats_quant_unfit(st)) {
        wpk_sb_puts(a, prefix);
        wpk_sb_puts(a, ".range = !quant.calibrated<f32<");
        put_float(a, st->min, 0);
        wpk_sb_puts(a, ":");
        put_float(a, st->max, 0);
        wpk_sb_puts(a, ">>");
        return;
    }
    if (st->granularity != WPACK_GRAN_TENSOR) {
        char ax[64];
        wpk_fmt(ax, sizeof ax, ".axis = %u : i64, ", st->axis);
        wpk_sb_puts(a, prefix);
        wpk_sb_puts(a, ax);
    }
    put_stat(a, st, WPACK_STAT_MIN, prefix, ".min");
    wpk_sb_puts(a, ", ");
    put_stat(a, st, WPACK_STAT_MAX, prefix, ".max");
    wpk_sb_puts(a, ", ");
    put_stat(a, st, WPACK_STAT_ABSMAX, prefix, ".absmax");
}
