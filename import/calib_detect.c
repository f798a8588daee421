/* calib_detect.c - `--stats FILE` / `--stats-from FILE`: which kind of
 * calibration file this is, by content (spec appendix A.1), and the one
 * entry point that loads any of them into a stats sink. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "import.h"
#include "internal.h"
#include "manifest_stats.h"

int calib_ranges(stats_sink_fn sink, void *ctx, const char *key, uint32_t n, uint32_t axis,
                 const double *mn, const double *mx, char *err, size_t errlen)
{
    double *a = n ? malloc((size_t)n * 3 * sizeof *a) : NULL;
    if (!a) {
        wpk_fmt(err, errlen, "'%s': %s", key, n ? "out of memory" : "no values");
        return n ? WPACK_E_NOMEM : WPACK_E_STATS;
    }
    for (uint32_t c = 0; c < n; c++) {
        if (!(mn[c] <= mx[c]) || !isfinite(mn[c]) || !isfinite(mx[c])) {
            if (n == 1)
                wpk_fmt(err, errlen, "'%s': range [%g, %g] is not finite and ordered", key,
                        mn[c], mx[c]);
            else
                wpk_fmt(err, errlen, "'%s': channel %u: range [%g, %g] is not finite and "
                        "ordered", key, c, mn[c], mx[c]);
            free(a);
            return WPACK_E_STATS;
        }
        a[c] = fmax(fabs(mn[c]), fabs(mx[c]));
        a[n + c] = mn[c] + (mx[c] - mn[c]) / 2;
        a[2 * (size_t)n + c] = 0;
    }
    wpack_stats_in s = {.key = key, .kind = WPACK_STATS_ACTIVATION,
                        .granularity = n == 1 ? WPACK_GRAN_TENSOR : WPACK_GRAN_CHANNEL,
                        .axis = n == 1 ? 0 : axis, .channels = n, .count = 0, .min = mn,
                        .max = mx, .absmax = a, .mean = a + n, .variance = a + 2 * (size_t)n};
    const char *why = "";
    int rc = sink ? sink(ctx, &s, &why) : WPACK_OK;
    if (rc)
        wpk_fmt(err, errlen, "'%s': %s", key, why && *why ? why : wpack_error_name(rc));
    free(a);
    return rc;
}

int calib_range(stats_sink_fn sink, void *ctx, const char *key, double mn, double mx,
                char *err, size_t errlen)
{
    return calib_ranges(sink, ctx, key, 1, 0, &mn, &mx, err, errlen);
}

/* Is the JSON document the wpack schema ({"version", "stats": [...]})? */
static int is_wpack_json(const uint8_t *p, size_t len)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)p, len, 0, &je);
    int yes = !root || (json_is_object(root) && json_object_get(root, "stats"));
    json_decref(root); /* unparseable: the wpack loader says what is wrong */
    return yes;
}

int stats_load_file_to(const char *path, stats_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    char msg[900] = "";
    wpk_sink tmp;
    wpk_sink_init(&tmp, NULL, msg, sizeof msg);
    wpk_sink_input(&tmp, path, NULL); /* messages start with the path */
    wpk_mapped m;
    int rc = wpk_map_file(&tmp, path, &m);
    if (rc) {
        wpk_fmt(err, errlen, "%s", msg);
        return rc;
    }
    size_t i = 0;
    while (i < m.len && (m.p[i] == ' ' || m.p[i] == '\t' || m.p[i] == '\r' || m.p[i] == '\n'))
        i++;
    const char *kind = NULL;
    if (m.len - i >= 4 && memcmp(m.p + i, "TRT-", 4) == 0) {
        kind = "TensorRT calibration cache";
        rc = calib_trt_parse(m.p, m.len, sink, ctx, msg, sizeof msg);
    } else if (m.len >= 4 && memcmp(m.p, "GGUF", 4) == 0) {
        kind = "imatrix GGUF";
        rc = calib_imatrix_gguf_parse(m.p, m.len, sink, ctx, msg, sizeof msg);
    } else if (m.len >= 4 && memcmp(m.p, "PK\x03\x04", 4) == 0) {
        kind = "torch checkpoint";
        rc = calib_torch_parse(m.p, m.len, sink, ctx, msg, sizeof msg);
    } else if (i < m.len && m.p[i] == '{' && !is_wpack_json(m.p, m.len)) {
        kind = "ONNX Runtime calibration table";
        rc = calib_ort_parse(m.p, m.len, sink, ctx, msg, sizeof msg);
    } else if (i < m.len && m.p[i] == '{') {
        wpk_unmap_file(&m);
        return stats_load_json_file_to(path, sink, ctx, err, errlen);
    } else if (calib_imatrix_dat_sniff(m.p, m.len)) {
        kind = "imatrix .dat";
        rc = calib_imatrix_dat_parse(m.p, m.len, sink, ctx, msg, sizeof msg);
    } else {
        rc = WPACK_E_STATS;
        wpk_fmt(msg, sizeof msg, "not calibration data: want wpack stats JSON, a TensorRT "
                "calibration cache, an ONNX Runtime calibration table (JSON), a llama.cpp "
                "imatrix (.dat or GGUF) or a torch checkpoint with torch.ao observers");
    }
    wpk_unmap_file(&m);
    if (rc && kind)
        wpk_fmt(err, errlen, "%s: %s: %s", path, kind, msg);
    else if (rc)
        wpk_fmt(err, errlen, "%s: %s", path, msg);
    return rc;
}
