/* calib_text.c - TensorRT calibration caches and ONNX Runtime calibration
 * tables (JSON), in and out (spec appendix A.1). Both carry one range per
 * tensor (ONNX Runtime: or per channel): they become range-only activation
 * records (calib_ranges).
 *
 * Checked against (the search tool's copies):
 *  - TensorRT: nvdla/sw umd/utils/calibdata/resnet50.txt, a cache TensorRT
 *    5.1 wrote ("TRT-5101-EntropyCalibration2", then lines like
 *    "(Unnamed Layer* 0) [Convolution]_output: 40d0f64f"), and NVIDIA's reader
 *    next to it (calib_txt_to_json.py: the hex is unpacked as '>f', the
 *    big-endian bits of the f32 scale). Every line there has 8 digits; fewer
 *    are accepted too (a writer that drops leading zeros).
 *  - ONNX Runtime: microsoft/onnxruntime
 *    onnxruntime/python/tools/quantization/quant_utils.py
 *    write_calibration_table, at 20e3ace0 (json.dumps of {name: (min, max)})
 *    and a recent copy (json.dumps(TensorsData, cls=MyEncoder): TensorsData
 *    .to_dict() = {"CLS", "data": {name: TensorData.to_dict()},
 *    "calibration_method"}, TensorData.to_dict() = its attributes (lowest,
 *    highest, and avg, std, hist, hist_edges, bins as the method has them) +
 *    "CLS"; numpy arrays as {"data": a.tolist(), "dtype", "CLS":
 *    "numpy.array"}), with calibrate.py's TensorData / TensorsData. With
 *    per_channel (MinMaxCalibrater reduces over every axis but 1) lowest and
 *    highest are arrays of one value per channel. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "import.h"
#include "internal.h"

/* The header TensorRT 8.6.1 writes; we keep no version, so it is what
 * `export --to trt-calib` writes. */
#define TRT_HEADER "TRT-8601-EntropyCalibration2"

static int hexval(uint8_t c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int calib_trt_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                    size_t errlen)
{
    size_t at = 0, line = 0;
    int rc = WPACK_OK, header = 0;
    while (at < len && !rc) {
        const uint8_t *nl = memchr(p + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - p) : len, n = end - at;
        const uint8_t *l = p + at;
        at = end + 1;
        line++;
        if (n && l[n - 1] == '\r')
            n--;
        if (!header) {
            /* blank lines and blanks before the header are skipped, as
             * calib_detect.c's sniff skips them (an editor's or a
             * concatenation's leftovers) */
            while (n && (*l == ' ' || *l == '\t' || *l == '\r')) {
                l++;
                n--;
            }
            if (n == 0)
                continue;
            if (n < 5 || memcmp(l, "TRT-", 4) != 0 || !memchr(l + 4, '-', n - 4)) {
                wpk_fmt(err, errlen, "line %zu: want TRT-<version>-<calibrator>", line);
                return WPACK_E_STATS;
            }
            header = 1;
            continue;
        }
        if (n == 0)
            continue;
        /* "name: 3c010204": the name is everything before the last ": ", the
         * scale's big-endian bits in hex after it (1 to 8 digits) */
        size_t sep = n;
        for (size_t k = n; k-- > 1;)
            if (l[k - 1] == ':' && l[k] == ' ') {
                sep = k - 1;
                break;
            }
        size_t digits = sep < n ? n - sep - 2 : 0;
        if (sep == n || sep == 0 || digits == 0 || digits > 8) {
            wpk_fmt(err, errlen, "line %zu: want '<tensor name>: <8 hex digits>'", line);
            return WPACK_E_STATS;
        }
        uint32_t bits = 0;
        for (size_t k = sep + 2; k < n; k++) {
            int h = hexval(l[k]);
            if (h < 0) {
                wpk_fmt(err, errlen, "line %zu: '%.*s' is not 8 hex digits", line,
                        (int)digits, (const char *)l + sep + 2);
                return WPACK_E_STATS;
            }
            bits = bits << 4 | (uint32_t)h;
        }
        float scale;
        memcpy(&scale, &bits, 4);
        char *key = strndup((const char *)l, sep);
        if (!key) {
            wpk_fmt(err, errlen, "out of memory");
            return WPACK_E_NOMEM;
        }
        if (!isfinite(scale) || scale < 0 || strlen(key) != sep) {
            wpk_fmt(err, errlen, "line %zu: %s", line,
                    strlen(key) != sep ? "a NUL byte in the name"
                                                  : "scale is negative or not finite");
            free(key);
            return WPACK_E_STATS;
        }
        /* a scale of 0 (or -0) is the range [0, 0], not [-0, 0] or [+0, -0] */
        double r = (double)scale * 127.0, mn = scale == 0 ? 0.0 : -r, mx = scale == 0 ? 0.0 : r;
        char m[700];
        if ((rc = calib_range(sink, ctx, key, mn, mx, m, sizeof m)))
            wpk_fmt(err, errlen, "line %zu %s", line, m);
        free(key);
    }
    if (!rc && !header) {
        wpk_fmt(err, errlen, line ? "no TRT-<version>-<calibrator> line (only blank lines)"
                                  : "empty file");
        rc = WPACK_E_STATS;
    }
    return rc;
}

/* A number, a numpy array as ORT's encoder writes it ({"data": x or
 * [x, ...], "dtype", "CLS": "numpy.array"}) or a plain array: *n values
 * (at most 2^24) into a new *out. 0: not that. */
static int ort_values(json_t *v, double **out, size_t *n)
{
    if (json_is_object(v))
        v = json_object_get(v, "data");
    size_t k = json_is_array(v) ? json_array_size(v) : json_is_number(v) ? 1 : 0;
    if (k == 0 || k > (1u << 24) || !(*out = malloc(k * sizeof **out)))
        return 0;
    for (size_t i = 0; i < k; i++) {
        json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_number(x)) {
            free(*out);
            *out = NULL;
            return 0;
        }
        (*out)[i] = json_number_value(x);
    }
    *n = k;
    return 1;
}

int calib_ort_parse(const uint8_t *p, size_t len, stats_sink_fn sink, void *ctx, char *err,
                    size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        wpk_fmt(err, errlen, "JSON: %s (line %d)", je.text, je.line);
        return WPACK_E_STATS;
    }
    /* TensorsData.to_dict(): {"CLS": "TensorsData", "data": {...}, ...} */
    json_t *map = root;
    if (json_is_object(root) && json_is_object(json_object_get(root, "data")) &&
        json_object_get(root, "CLS"))
        map = json_object_get(root, "data");
    int rc = WPACK_OK;
    const char *key;
    json_t *v;
    if (!json_is_object(map)) { /* empty: no record, which the caller refuses */
        wpk_fmt(err, errlen, "want an object of tensor name -> [min, max] or "
                "{\"lowest\": .., \"highest\": ..}");
        rc = WPACK_E_STATS;
    }
    json_object_foreach (rc ? NULL : map, key, v) {
        double *mn = NULL, *mx = NULL;
        size_t nmn = 0, nmx = 0;
        json_t *lo = NULL, *hi = NULL;
        if (json_is_array(v) && json_array_size(v) == 2)
            lo = json_array_get(v, 0), hi = json_array_get(v, 1);
        else if (json_is_object(v))
            lo = json_object_get(v, "lowest"), hi = json_object_get(v, "highest");
        int ok = lo && hi && ort_values(lo, &mn, &nmn) && ort_values(hi, &mx, &nmx) &&
                 nmn == nmx;
        if (!ok)
            wpk_fmt(err, errlen, "'%s': want [min, max] or {\"lowest\": .., \"highest\": ..} "
                    "(numbers, or arrays of one value per channel of equal length)", key);
        /* per channel: axis 1, the one MinMaxCalibrater keeps */
        rc = ok ? calib_ranges(sink, ctx, key, (uint32_t)nmn, 1, mn, mx, err, errlen)
                : WPACK_E_STATS;
        free(mn);
        free(mx);
        if (rc)
            break;
    }
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------- out */

/* The shortest %.*g that reads back as v, always with a '.' or an exponent
 * (so it looks like Python's repr for ordinary values). */
static void shortest(char *b, size_t n, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, n, "%.*g", prec, v);
        if (strtod(b, NULL) == v)
            break;
    }
    if (!strpbrk(b, ".eEn"))
        strncat(b, ".0", n - strlen(b) - 1);
}

static int append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t k = strlen(s);
    if (*len + k + 1 > *cap) {
        size_t nc = (*cap + k + 1) * 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return WPACK_E_NOMEM;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, s, k + 1);
    *len += k;
    return WPACK_OK;
}

/* Both formats hold one range per tensor (ONNX Runtime's own
 * write_calibration_table reads one float of each TensorData's lowest and
 * highest for its flatbuffers and text tables): a per-channel record is
 * reduced to its range over all channels, and the caller is told. */
static void warn_reduced(const wpack_stats *s, int trt, wpack_import_warn_fn warn, void *user)
{
    char m[1200], a[40], b[40];
    if (!warn || s->granularity != WPACK_GRAN_CHANNEL)
        return;
    shortest(a, sizeof a, trt ? s->overall_absmax : s->overall_min);
    shortest(b, sizeof b, s->overall_max);
    if (trt)
        wpk_fmt(m, sizeof m, "stats '%s': %u per-channel ranges (axis %u) written as one scale, "
                "the absmax over all channels / 127 (%s / 127): a TensorRT calibration cache "
                "holds one scale per tensor", s->key, (unsigned)s->channels, (unsigned)s->axis, a);
    else
        wpk_fmt(m, sizeof m, "stats '%s': %u per-channel ranges (axis %u) written as one range "
                "over all channels [%s, %s]: an ONNX Runtime calibration table holds one range "
                "per tensor", s->key, (unsigned)s->channels, (unsigned)s->axis, a, b);
    wpk_msg_escape(m, sizeof m); /* the key may hold anything */
    warn(user, m);
}

int calib_export(const wpack_archive *ar, int fd, int format, wpack_import_warn_fn warn,
                 void *warn_user, char *err, size_t errlen)
{
    char *buf = NULL, line[1200];
    size_t len = 0, cap = 0, nrec = 0;
    int trt = format == WPACK_EXPORT_TRT_CALIB;
    int rc = append(&buf, &len, &cap, trt ? TRT_HEADER "\n" : "{");
    for (uint64_t i = 0; !rc && i < wpack_stats_count(ar); i++) {
        wpack_stats s;
        if ((rc = wpack_stats_at(ar, i, &s)))
            break;
        if (s.kind != WPACK_STATS_ACTIVATION)
            continue;
        warn_reduced(&s, trt, warn, warn_user);
        if (trt) {
            if (strchr(s.key, '\n') || strchr(s.key, '\r')) {
                wpk_fmt(err, errlen, "stats '%s': a line break in the name has no form in a "
                        "TensorRT calibration cache", s.key);
                rc = WPACK_E_UNSUPPORTED;
                break;
            }
            /* never -0: overall_absmax is fmax(|min|, |max|), +0 for a zero
             * range, so a zero scale is 00000000 (spec A.1) */
            float scale = (float)(s.overall_absmax / 127.0);
            uint32_t bits;
            memcpy(&bits, &scale, 4);
            rc = append(&buf, &len, &cap, s.key);
            snprintf(line, sizeof line, ": %08x\n", bits);
        } else {
            json_t *js = json_string(s.key);
            char *q = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
            json_decref(js);
            if (!q) {
                wpk_fmt(err, errlen, "stats '%s': the name is not UTF-8", s.key);
                rc = WPACK_E_UNSUPPORTED;
                break;
            }
            rc = append(&buf, &len, &cap, nrec ? ",\n  " : "\n  ");
            if (!rc)
                rc = append(&buf, &len, &cap, q);
            free(q);
            char a[40], b[40];
            shortest(a, sizeof a, s.overall_min);
            shortest(b, sizeof b, s.overall_max);
            snprintf(line, sizeof line, ": [%s, %s]", a, b);
        }
        if (!rc)
            rc = append(&buf, &len, &cap, line);
        nrec++;
    }
    if (!rc && !trt)
        rc = append(&buf, &len, &cap, nrec ? "\n}\n" : "}\n");
    if (rc == WPACK_E_NOMEM)
        wpk_fmt(err, errlen, "out of memory");
    if (!rc && nrec == 0) {
        wpk_fmt(err, errlen, "no activation stats to export");
        rc = WPACK_E_NOT_FOUND;
    }
    if (!rc && wpk_write_all(fd, buf, len) != 0) {
        wpk_fmt(err, errlen, "write failed");
        rc = WPACK_E_IO;
    }
    free(buf);
    return rc;
}
