/* safetensors.c - a strict safetensors reader over a buffer (jansson for the JSON). */
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "safetensors.h"

static const struct {
    const char *name;
    int dtype;
} st_dtypes[] = {
    {"F64", WPACK_DTYPE_F64}, {"F32", WPACK_DTYPE_F32}, {"F16", WPACK_DTYPE_F16},
    {"BF16", WPACK_DTYPE_BF16}, {"F8_E4M3", WPACK_DTYPE_F8E4M3FN},
    {"F8_E5M2", WPACK_DTYPE_F8E5M2}, {"I64", WPACK_DTYPE_I64}, {"I32", WPACK_DTYPE_I32},
    {"I16", WPACK_DTYPE_I16}, {"I8", WPACK_DTYPE_I8}, {"U64", WPACK_DTYPE_U64},
    {"U32", WPACK_DTYPE_U32}, {"U16", WPACK_DTYPE_U16}, {"U8", WPACK_DTYPE_U8},
    {"BOOL", WPACK_DTYPE_BOOL},
};

const char *st_dtype_name(int dtype)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == dtype)
            return st_dtypes[i].name;
    return NULL;
}

/* A fault of this format's parser, "safetensors: ..." in err (format/fmt.c). */
#define st_fail(err, errlen, code, ...) wpk_fail_in(err, errlen, code, "safetensors", __VA_ARGS__)

typedef struct {
    const char *name;
    int dtype;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t begin, end;
} st_tensor;

static int by_begin(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int parse_tensor(const char *name, json_t *v, st_tensor *t, char *err, size_t errlen)
{
    char q[200];
    wpk_quote(q, sizeof q, name, strlen(name));
    if (!json_is_object(v))
        return st_fail(err, errlen, WPACK_E_INPUT, "tensor '%s': not an object", q);
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
           *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs))
        return st_fail(err, errlen, WPACK_E_INPUT,
                       "tensor '%s': needs a string dtype, a shape array and data_offsets", q);
    t->name = name;
    t->dtype = 0;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(json_string_value(dt), st_dtypes[i].name) == 0)
            t->dtype = st_dtypes[i].dtype;
    if (!t->dtype)
        return st_fail(err, errlen, WPACK_E_UNSUPPORTED, "tensor '%s': dtype '%.40s' not supported",
                       q, json_string_value(dt));
    size_t r = json_array_size(shape);
    if (r > WPACK_MAX_RANK)
        return st_fail(err, errlen, WPACK_E_RANK, "tensor '%s': rank %zu above %d", q, r,
                       WPACK_MAX_RANK);
    t->rank = (unsigned)r;
    uint64_t n = 1;
    for (size_t k = 0; k < r; k++) {
        json_t *d = json_array_get(shape, k);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return st_fail(err, errlen, WPACK_E_INPUT, "tensor '%s': shape[%zu] is not an int >= 0",
                           q, k);
        t->dims[k] = (uint64_t)json_integer_value(d);
        if (!wpk_mul(n, t->dims[k], &n))
            return st_fail(err, errlen, WPACK_E_OVERFLOW, "tensor '%s': element count overflows",
                           q);
    }
    uint64_t nbytes;
    if (!wpk_mul(n, wpack_dtype_size(t->dtype), &nbytes))
        return st_fail(err, errlen, WPACK_E_OVERFLOW, "tensor '%s': byte size overflows", q);
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (json_array_size(offs) != 2 || !json_is_integer(b) || !json_is_integer(e) ||
        json_integer_value(b) < 0 || json_integer_value(e) < json_integer_value(b))
        return st_fail(err, errlen, WPACK_E_INPUT,
                       "tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", q);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    if (t->end - t->begin != nbytes)
        return st_fail(err, errlen, WPACK_E_SIZE,
                       "tensor '%s': data_offsets hold %llu bytes but shape x %s needs %llu", q,
                       (unsigned long long)(t->end - t->begin), json_string_value(dt),
                       (unsigned long long)nbytes);
    return WPACK_OK;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One member of the header's top-level object: the key's and the value's
 * byte ranges (the key with its quotes). */
typedef struct {
    size_t kbeg, kend, vbeg, vend;
} hdr_member;

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* End of the string starting at the quote at p (one past its closing quote),
 * or 0 when it does not close. Escapes are checked by jansson later. */
static size_t string_end(const char *h, size_t n, size_t p)
{
    for (size_t i = p + 1; i < n; i++) {
        if (h[i] == '\\')
            i++;
        else if (h[i] == '"')
            return i + 1;
    }
    return 0;
}

/* End of the value starting at p: a string, an object or array (brackets
 * counted outside strings), or a scalar up to the next delimiter. */
static size_t value_end(const char *h, size_t n, size_t p)
{
    if (p >= n)
        return 0;
    if (h[p] == '"')
        return string_end(h, n, p);
    if (h[p] != '{' && h[p] != '[') {
        size_t i = p;
        while (i < n && !is_ws(h[i]) && h[i] != ',' && h[i] != '}' && h[i] != ']')
            i++;
        return i > p ? i : 0;
    }
    size_t depth = 0;
    for (size_t i = p; i < n; i++) {
        if (h[i] == '"') {
            size_t e = string_end(h, n, i);
            if (!e)
                return 0;
            i = e - 1;
        } else if (h[i] == '{' || h[i] == '[') {
            depth++;
        } else if (h[i] == '}' || h[i] == ']') {
            if (--depth == 0)
                return i + 1;
        }
    }
    return 0;
}

/* The next member of the top-level object from *pos (just after '{' or the
 * previous value): 1 and its ranges, 0 at the closing '}' (only whitespace
 * may follow), or minus an error code with the message. */
static int hdr_next(const char *h, size_t n, size_t *pos, int first, hdr_member *m, char *err,
                    size_t errlen)
{
    size_t p = *pos;
    while (p < n && is_ws(h[p]))
        p++;
    if (p < n && h[p] == '}') {
        for (p++; p < n && is_ws(h[p]); p++)
            ;
        if (p != n)
            return -st_fail(err, errlen, WPACK_E_INPUT,
                            "header JSON: end of file expected (at byte %zu of the header)", p);
        return 0;
    }
    if (!first) {
        if (p >= n || h[p] != ',')
            return -st_fail(err, errlen, WPACK_E_INPUT,
                            "header JSON: ',' or '}' expected (at byte %zu of the header)", p);
        for (p++; p < n && is_ws(h[p]); p++)
            ;
    }
    if (p >= n || h[p] != '"' || !(m->kend = string_end(h, n, p)))
        return -st_fail(err, errlen, WPACK_E_INPUT,
                        "header JSON: string or '}' expected (at byte %zu of the header)", p);
    m->kbeg = p;
    for (p = m->kend; p < n && is_ws(h[p]); p++)
        ;
    if (p >= n || h[p] != ':')
        return -st_fail(err, errlen, WPACK_E_INPUT,
                        "header JSON: ':' expected (at byte %zu of the header)", p);
    for (p++; p < n && is_ws(h[p]); p++)
        ;
    m->vbeg = p;
    if (!(m->vend = value_end(h, n, p)))
        return -st_fail(err, errlen, WPACK_E_INPUT,
                        "header JSON: unterminated value (at byte %zu of the header)", p);
    *pos = m->vend;
    return 1;
}

/* jansson on the bytes [b, e) of the header (a key or a value). */
static json_t *hdr_json(const char *h, size_t b, size_t e, size_t flags, char *err, size_t errlen,
                        int *rc)
{
    json_error_t je;
    json_t *j = json_loadb(h + b, e - b, flags | JSON_DECODE_ANY, &je);
    if (!j) {
        int dup = strstr(je.text, "duplicate") != NULL;
        *rc = st_fail(err, errlen, dup ? WPACK_E_DUPLICATE : WPACK_E_INPUT,
                      "header JSON: %s (at byte %zu of the header)", je.text,
                      b + (size_t)(je.position > 0 ? je.position : 0));
    }
    return j;
}

int st_scan_buffer(const uint8_t *buf, size_t len, st_visit_fn fn, void *user, char *err,
                   size_t errlen)
{
    if (errlen)
        err[0] = 0;
    if (len < 8)
        return st_fail(err, errlen, WPACK_E_INPUT, "file of %zu bytes has no header length", len);
    uint64_t n = wpk_ld64(buf);
    if (n > SAFETENSORS_MAX_HEADER)
        return st_fail(err, errlen, WPACK_E_LIMIT, "header length %llu above the 100 MB limit",
                       (unsigned long long)n);
    if (n > len - 8)
        return st_fail(err, errlen, WPACK_E_INPUT,
                       "header length %llu runs past the end of the %zu-byte file (truncated?)",
                       (unsigned long long)n, len);
    if (n < 2 || buf[8] != '{')
        return st_fail(err, errlen, WPACK_E_INPUT, "header does not start with '{'");
    /* The header is walked member by member (hdr_next): only one tensor's
     * JSON tree exists at a time, so memory is the tensor table and the
     * names, not a tree of the whole header (300,000 tensors took 427 MB). */
    const char *h = (const char *)buf + 8;
    size_t pos = 1, nt = 0, cap = 0, used = 0;
    int rc = WPACK_OK;
    st_tensor *ts = NULL;
    json_t *meta = NULL;
    char *names = malloc((size_t)n); /* decoded keys are shorter than the header */
    if (!names) {
        rc = st_fail(err, errlen, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    for (int first = 1;; first = 0) {
        hdr_member mb = {0, 0, 0, 0};
        int more = hdr_next(h, (size_t)n, &pos, first, &mb, err, errlen);
        if (more < 0) {
            rc = -more;
            goto out;
        }
        if (!more)
            break;
        json_t *v = hdr_json(h, mb.vbeg, mb.vend, JSON_REJECT_DUPLICATES, err, errlen, &rc);
        json_t *k = v ? hdr_json(h, mb.kbeg, mb.kend, 0, err, errlen, &rc) : NULL;
        if (!k || !json_is_string(k)) {
            if (k && !rc)
                rc = st_fail(err, errlen, WPACK_E_INPUT, "header JSON: a key is not a string");
            json_decref(k);
            json_decref(v);
            goto out;
        }
        const char *key = json_string_value(k);
        size_t klen = json_string_length(k);
        if (strcmp(key, "__metadata__") == 0) {
            if (meta) {
                rc = st_fail(err, errlen, WPACK_E_DUPLICATE,
                             "header JSON: duplicate object key '__metadata__'");
                json_decref(k);
                json_decref(v);
                goto out;
            }
            meta = v;
            json_decref(k);
            continue;
        }
        if (nt == cap) {
            size_t nc = cap ? cap * 2 : 64;
            st_tensor *t2 = realloc(ts, nc * sizeof *ts);
            if (!t2) {
                rc = st_fail(err, errlen, WPACK_E_NOMEM, "out of memory");
                json_decref(k);
                json_decref(v);
                goto out;
            }
            ts = t2;
            cap = nc;
        }
        memcpy(names + used, key, klen + 1);
        rc = parse_tensor(names + used, v, &ts[nt], err, errlen);
        used += klen + 1;
        json_decref(k);
        json_decref(v);
        if (rc)
            goto out;
        nt++;
    }
    /* Duplicate names (the whole-header parse found them before). */
    if (nt > 1) {
        const char **byname = malloc(nt * sizeof *byname);
        if (!byname) {
            rc = st_fail(err, errlen, WPACK_E_NOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < nt; i++)
            byname[i] = ts[i].name;
        qsort(byname, nt, sizeof *byname, cmp_name);
        for (size_t i = 1; i < nt && !rc; i++)
            if (strcmp(byname[i - 1], byname[i]) == 0) {
                char q[200];
                wpk_quote(q, sizeof q, byname[i], strlen(byname[i]));
                rc = st_fail(err, errlen, WPACK_E_DUPLICATE,
                             "header JSON: duplicate object key '%s'", q);
            }
        free(byname);
        if (rc)
            goto out;
    }
    const char *key;
    json_t *v;
    if (meta) {
        if (!json_is_object(meta)) {
            rc = st_fail(err, errlen, WPACK_E_INPUT, "__metadata__ is not an object");
            goto out;
        }
        json_object_foreach(meta, key, v) if (!json_is_string(v))
        {
            rc = st_fail(err, errlen, WPACK_E_INPUT, "__metadata__['%.60s'] is not a string", key);
            goto out;
        }
    }
    if (nt) /* no tensors: no table */
        qsort(ts, nt, sizeof *ts, by_begin);
    uint64_t at = 0, data_len = len - 8 - n;
    for (size_t i = 0; i < nt; i++) {
        if (ts[i].begin != at) {
            rc = st_fail(err, errlen, WPACK_E_OVERLAP,
                         "tensor '%.100s' starts at data byte %llu but the previous data ends at "
                         "%llu (%s)",
                         ts[i].name, (unsigned long long)ts[i].begin, (unsigned long long)at,
                         ts[i].begin > at ? "a hole" : "an overlap");
            goto out;
        }
        at = ts[i].end;
    }
    if (at != data_len) {
        rc = st_fail(err, errlen, at < data_len ? WPACK_E_INPUT : WPACK_E_BOUNDS,
                     at < data_len ? "%llu trailing bytes after the last tensor"
                                   : "tensors need %llu more bytes than the file has (truncated?)",
                     (unsigned long long)(at < data_len ? data_len - at : at - data_len));
        goto out;
    }
    if (meta)
        json_object_foreach(meta, key, v) {
            st_item it = {.is_meta = 1, .name = key, .value = json_string_value(v)};
            if ((rc = fn(user, &it)))
                goto out;
        }
    for (size_t i = 0; i < nt; i++) {
        st_item it = {.name = ts[i].name, .dtype = ts[i].dtype, .rank = ts[i].rank,
                      .data = buf + 8 + n + ts[i].begin, .nbytes = ts[i].end - ts[i].begin,
                      .file_offset = 8 + n + ts[i].begin};
        memcpy(it.dims, ts[i].dims, sizeof it.dims);
        if ((rc = fn(user, &it)))
            goto out;
    }
out:
    free(ts);
    free(names);
    json_decref(meta);
    return rc;
}
