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
#include "nameset.h"

double calib_mid(double mn, double mx)
{
    double d = mx - mn;
    return isfinite(d) ? mn + d / 2 : mn / 2 + mx / 2;
}

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
            /* say which: [1e+39, 2] read as "not finite" when it is inverted */
            const char *why = !isfinite(mn[c]) || !isfinite(mx[c]) ? "is not finite"
                                                                   : "has min above max";
            if (n == 1)
                wpk_fmt(err, errlen, "'%s': range [%g, %g] %s", key, mn[c], mx[c], why);
            else
                wpk_fmt(err, errlen, "'%s': channel %u: range [%g, %g] %s", key, c, mn[c], mx[c],
                        why);
            free(a);
            return WPACK_E_STATS;
        }
        a[c] = fmax(fabs(mn[c]), fabs(mx[c]));
        a[n + c] = calib_mid(mn[c], mx[c]);
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

enum { JSON_WPACK, JSON_ORT, JSON_NEITHER };

/* The wpack schema's marker: "stats" is a list of records, each an object
 * with a "key" (an empty list only beside "version"). A bare "stats" member
 * is not enough: an ONNX Runtime table may name a tensor "stats", and any
 * other JSON may have one. */
static int wpack_marked(json_t *root)
{
    json_t *list = json_object_get(root, "stats"), *rec;
    size_t i;
    if (!json_is_array(list))
        return 0;
    if (json_array_size(list) == 0)
        return json_object_get(root, "version") != NULL;
    json_array_foreach (list, i, rec)
        if (!json_is_object(rec) || !json_object_get(rec, "key"))
            return 0;
    return 1;
}

/* Which JSON calibration file this is. An ONNX Runtime table is
 * TensorsData.to_dict() ({"CLS": .., "data": {..}}) or an object whose every
 * member is a tensor's range: an array, or an object ({"lowest", "highest"},
 * an encoded numpy array); its own parser names a bad entry. Unparseable
 * JSON goes to the wpack loader, which says where it breaks. On
 * JSON_NEITHER, why says what the file lacks. */
static int json_kind(const uint8_t *p, size_t len, char *why, size_t whylen)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)p, len, 0, &je), *v;
    const char *key;
    int kind = JSON_ORT;
    if (!root || (json_is_object(root) && wpack_marked(root))) {
        json_decref(root);
        return JSON_WPACK;
    }
    if (!json_is_object(root) || json_object_size(root) == 0) {
        wpk_fmt(why, whylen, "%s", json_is_object(root) ? "an empty object" : "not an object");
        kind = JSON_NEITHER;
    } else if (!(json_object_get(root, "CLS") && json_is_object(json_object_get(root, "data")))) {
        json_object_foreach (root, key, v)
            if (!json_is_array(v) && !json_is_object(v)) {
                wpk_fmt(why, whylen, "member '%s' is not a tensor's range", key);
                kind = JSON_NEITHER;
                break;
            }
    }
    if (kind == JSON_NEITHER && json_object_get(root, "stats"))
        wpk_fmt(why, whylen, "its \"stats\" is not a list of records that each have a \"key\"");
    json_decref(root);
    return kind;
}

/* ---- each key once per kind in a file ----
 * A file that gives a key twice for the same kind (two 'fc:' lines in a
 * TensorRT cache, a name repeated in an imatrix) is refused at the second
 * record, whatever the file's kind, so the message names its line or entry:
 * a writer found it only at finish ("added twice", no file named), and an
 * update kept the last one silently. */
typedef struct {
    stats_sink_fn sink;
    void *ctx;
    wpk_nameset set;
    char **names; /* the set's items: the kind's digit, then the key */
    uint64_t n, cap;
} once_sink;

static const uint8_t *once_name(void *ctx, uint64_t item, uint64_t *len)
{
    const once_sink *o = ctx;
    *len = strlen(o->names[item]);
    return (const uint8_t *)o->names[item];
}

static int once(void *ctx, const wpack_stats_in *s, const char **why)
{
    once_sink *o = ctx;
    if (o->n == o->cap) {
        uint64_t cap = o->cap ? 2 * o->cap : 64;
        char **v = cap <= SIZE_MAX / sizeof *v ? realloc(o->names, (size_t)cap * sizeof *v) : NULL;
        if (!v)
            return WPACK_E_NOMEM;
        o->names = v;
        o->cap = cap;
    }
    size_t kl = strlen(s->key);
    char *name = malloc(kl + 2);
    if (!name)
        return WPACK_E_NOMEM;
    name[0] = (char)('0' + (s->kind & 7));
    memcpy(name + 1, s->key, kl + 1);
    uint64_t item;
    if (wpk_nameset_find(&o->set, once_name, o, (const uint8_t *)name, kl + 1, &item)) {
        free(name);
        *why = "a second record of the same stats in this file (a key once per kind)";
        return WPACK_E_STATS;
    }
    o->names[o->n] = name;
    if (!wpk_nameset_insert(&o->set, once_name, o, (const uint8_t *)name, kl + 1, o->n)) {
        free(name);
        return WPACK_E_NOMEM;
    }
    o->n++;
    return o->sink ? o->sink(o->ctx, s, why) : WPACK_OK;
}

static int load_file_once(const char *path, once_sink *o, char *err, size_t errlen);

int stats_load_file_to(const char *path, stats_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    once_sink o = {.sink = sink, .ctx = ctx};
    int rc = load_file_once(path, &o, err, errlen);
    for (uint64_t i = 0; i < o.n; i++)
        free(o.names[i]);
    free(o.names);
    wpk_nameset_free(&o.set);
    return rc;
}

static int load_file_once(const char *path, once_sink *o, char *err, size_t errlen)
{
    stats_sink_fn sink = once;
    void *ctx = o;
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
    /* a UTF-8 byte order mark (a Windows editor's) is not part of the text */
    size_t bom = m.len >= 3 && memcmp(m.p, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    const uint8_t *p = m.p + bom;
    size_t len = m.len - bom, i = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    const char *kind = NULL, *none = ""; /* none: why a good file gave no record */
    if (len - i >= 4 && memcmp(p + i, "TRT-", 4) == 0) {
        kind = "TensorRT calibration cache";
        none = " (a header line and no '<tensor name>: <hex>' line)";
        rc = calib_trt_parse(p, len, sink, ctx, msg, sizeof msg);
    } else if (m.len >= 4 && memcmp(m.p, "GGUF", 4) == 0) {
        kind = "imatrix GGUF";
        rc = calib_imatrix_gguf_parse(m.p, m.len, sink, ctx, msg, sizeof msg);
    } else if (m.len >= 4 && memcmp(m.p, "PK\x03\x04", 4) == 0) {
        kind = "torch checkpoint";
        none = " (its torch.ao observers never ran: min_val above max_val)";
        rc = calib_torch_parse(m.p, m.len, sink, ctx, msg, sizeof msg);
    } else if (i < len && p[i] == '{') {
        char why[300];
        int jk = json_kind(p, len, why, sizeof why);
        if (jk == JSON_WPACK) {
            rc = bom ? stats_load_json_to((const char *)p, len, sink, ctx, msg, sizeof msg)
                     : stats_load_json_file_to(path, sink, ctx, msg, sizeof msg);
            /* the loader names the file when it cannot read or parse it,
             * not in "stats[i] 'key': ..." */
            if (strncmp(msg, path, strlen(path)) != 0)
                kind = "wpack stats JSON";
            none = " (\"stats\" is an empty list)";
        } else if (jk == JSON_ORT) {
            kind = "ONNX Runtime calibration table";
            none = " (its \"data\" names no tensor)";
            rc = calib_ort_parse(p, len, sink, ctx, msg, sizeof msg);
        } else {
            rc = WPACK_E_STATS;
            wpk_fmt(msg, sizeof msg, "JSON that is neither wpack stats ({\"version\": 1, "
                    "\"stats\": [{\"key\": ..}, ..]}) nor an ONNX Runtime calibration table "
                    "({tensor name: [min, max], ..} or TensorsData): %s", why);
        }
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
    if (!rc && o->n == 0) {
        /* nothing silent: a file given as calibration data that adds nothing
         * is the wrong file or a failed run, whatever its kind (spec A.1;
         * none of wpack's own exporters writes such a file) */
        rc = WPACK_E_STATS;
        wpk_fmt(msg, sizeof msg, "holds no entries, nothing to add%s", none);
    }
    if (rc && kind)
        wpk_fmt(err, errlen, "%s: %s: %s", path, kind, msg);
    else if (rc && strncmp(msg, path, strlen(path)) == 0)
        wpk_fmt(err, errlen, "%s", msg);
    else if (rc)
        wpk_fmt(err, errlen, "%s: %s", path, msg);
    return rc;
}
