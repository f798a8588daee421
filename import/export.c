/* export.c - wpack archive -> safetensors / npz / tar (wpack_import.h,
 * "exporting"). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "bytes.h"
#include "export.h"
#include "gguf.h"
#include "calib.h"
#include "import.h"
#include "irpa.h"
#include "internal.h"
#include "npy.h"
#include "safetensors.h"
#include "wpack_import.h"

/* 1 when all n bytes were written. */
static int write_all(int fd, const void *p, size_t n)
{
    return wpk_write_all(fd, p, n) == 0;
}

/* v in the shortest form that reads back the same ("nan", "inf", "-inf"
 * for those). */
static void real_text(double v, char *buf, size_t len)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
}

/* n bytes as lowercase hex, NUL-terminated; NULL when out of memory. */
static char *hex_text(const void *p, uint64_t n)
{
    char *s = n < (SIZE_MAX - 1) / 2 ? malloc((size_t)n * 2 + 1) : NULL;
    for (uint64_t i = 0; s && i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", ((const uint8_t *)p)[i]);
    if (s)
        s[n * 2] = 0;
    return s;
}

/* One array element as JSON: bytes as a hex string like a bytes value, a
 * real JSON cannot hold (nan, inf) as the string a real value becomes. */
static json_t *elem_json(const wpack_meta *e)
{
    char buf[64], *hex;
    json_t *v;
    switch (e->type) {
    case WPACK_META_STRING: return json_string(e->str);
    case WPACK_META_I64: return json_integer(e->i64);
    case WPACK_META_BOOL: return json_boolean(e->boolean);
    case WPACK_META_F64:
        if (isfinite(e->f64))
            return json_real(e->f64);
        real_text(e->f64, buf, sizeof buf);
        return json_string(buf);
    case WPACK_META_BYTES:
        hex = hex_text(e->bytes, e->count);
        v = hex ? json_string(hex) : NULL;
        free(hex);
        return v;
    default:
        return NULL;
    }
}

/* The safetensors header as it is built: JSON text, put piece by piece
 * (json_dump_callback's form), never a JSON tree of the metadata (a tree of
 * a 16 Mi-element array took some 50 bytes an element). Past `limit` the
 * pieces are only counted (`over`), so memory stays under the limit
 * whatever the archive holds, and the size refused can still be told. */
typedef struct {
    char *p;
    size_t len, cap, limit;
    int over, nomem;
} hdr_text;

static int hdr_put(const char *s, size_t n, void *user)
{
    hdr_text *h = user;
    if (!h->over && (n > h->limit - h->len))
        h->over = 1;
    if (!h->over && h->len + n > h->cap) {
        size_t cap = h->cap ? h->cap : 1u << 16;
        while (cap < h->len + n)
            cap = cap > h->limit / 2 ? h->limit : cap * 2;
        char *q = realloc(h->p, cap);
        if (!q) {
            h->nomem = 1;
            return -1;
        }
        h->p = q;
        h->cap = cap;
    }
    if (!h->over && n)
        memcpy(h->p + h->len, s, n);
    h->len += n;
    return 0;
}

static int hdr_puts(hdr_text *h, const char *s)
{
    return hdr_put(s, strlen(s), h);
}

/* v (consumed) as compact JSON; -1 when v is NULL (not valid UTF-8, or out of memory). */
static int hdr_json(hdr_text *h, json_t *v)
{
    int rc = v ? json_dump_callback(v, hdr_put, h, JSON_COMPACT | JSON_ENCODE_ANY) : -1;
    json_decref(v);
    return rc;
}

/* The n bytes at s as the inside of a JSON string (escaped, no quotes). */
static int hdr_str_body(hdr_text *h, const char *s, size_t n)
{
    size_t at = h->len;
    if (hdr_json(h, json_stringn(s, n)))
        return -1;
    if (!h->over) /* drop the opening quote; the closing one goes with len */
        memmove(h->p + at, h->p + at + 1, h->len - at - 2);
    h->len -= 2;
    return 0;
}

/* An array value as the text of a JSON array, put as the inside of a JSON
 * string, element by element: integers and booleans as they are (nothing
 * to escape), the others through elem_json. */
static int hdr_array_body(hdr_text *h, const wpack_archive *ar, const wpack_meta *m, char *err,
                          size_t errlen)
{
    int bad = hdr_puts(h, "[");
    for (uint64_t j = 0; j < m->count && !bad; j++) {
        wpack_meta e;
        int rc = wpack_meta_elem(ar, m, j, &e);
        if (rc) {
            wpk_fmt(err, errlen, "metadata '%s' element %llu: %s", m->key,
                    (unsigned long long)j, wpack_errmsg(ar));
            return rc;
        }
        char buf[32], *text = NULL;
        if (j && (bad = hdr_puts(h, ",")))
            break;
        if (e.type == WPACK_META_I64) {
            snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, (json_int_t)e.i64);
            bad = hdr_puts(h, buf);
        } else if (e.type == WPACK_META_BOOL) {
            bad = hdr_puts(h, e.boolean ? "true" : "false");
        } else {
            json_t *v = elem_json(&e);
            text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            json_decref(v);
            bad = !text || hdr_str_body(h, text, strlen(text));
            free(text);
        }
        if (bad && !h->nomem) { /* no element is left out unsaid */
            wpk_fmt(err, errlen, "metadata '%s' element %llu: cannot be made JSON", m->key,
                    (unsigned long long)j);
            return WPACK_E_METADATA;
        }
    }
    return bad || hdr_puts(h, "]") ? WPACK_E_NOMEM : WPACK_OK;
}

/* A metadata value as the JSON string safetensors wants. */
static int hdr_meta_value(hdr_text *h, const wpack_archive *ar, const wpack_meta *m, char *err,
                          size_t errlen)
{
    char buf[64];
    char *s = NULL;
    switch (m->type) {
    case WPACK_META_ARRAY: {
        int rc = hdr_puts(h, "\"") ? WPACK_E_NOMEM : hdr_array_body(h, ar, m, err, errlen);
        return rc ? rc : hdr_puts(h, "\"") ? WPACK_E_NOMEM : WPACK_OK;
    }
    case WPACK_META_STRING:
        s = strdup(m->str);
        break;
    case WPACK_META_I64:
        snprintf(buf, sizeof buf, "%lld", (long long)m->i64);
        s = strdup(buf);
        break;
    case WPACK_META_F64:
        real_text(m->f64, buf, sizeof buf);
        s = strdup(buf);
        break;
    case WPACK_META_BOOL:
        s = strdup(m->boolean ? "true" : "false");
        break;
    case WPACK_META_BYTES:
        s = hex_text(m->bytes, m->count);
        break;
    default:
        wpk_fmt(err, errlen, "metadata '%s': type %d has no safetensors form", m->key, m->type);
        return WPACK_E_UNSUPPORTED;
    }
    if (!s) {
        wpk_fmt(err, errlen, "metadata '%s': out of memory", m->key);
        return WPACK_E_NOMEM;
    }
    json_t *v = json_string(s);
    free(s);
    if (!v) { /* no value is left out unsaid */
        wpk_fmt(err, errlen, "metadata '%s': cannot be made a JSON string", m->key);
        return WPACK_E_METADATA;
    }
    return hdr_json(h, v) ? WPACK_E_NOMEM : WPACK_OK;
}

static int check_exportable(const wpack_archive *ar, const wpack_tensor *t, char *err,
                            size_t errlen)
{
    if (!wpack_dtype_size(t->dtype)) {
        const char *block = NULL;
        if (t->dtype < WPACK_DTYPE_BLOCK_BASE ||
            wpack_block_dtype_at(ar, (uint64_t)(t->dtype - WPACK_DTYPE_BLOCK_BASE), &block, NULL,
                                 NULL, NULL, NULL))
            block = NULL;
        if (block)
            wpk_fmt(err, errlen,
                    "tensor '%s': block-quantized dtype '%s' has no equivalent outside wpack",
                    t->name, block);
        else
            wpk_fmt(err, errlen, "tensor '%s': dtype %d has no equivalent outside wpack", t->name,
                    t->dtype);
        return WPACK_E_UNSUPPORTED;
    }
    return WPACK_OK;
}

typedef struct {
    int (*put)(void *, const void *, size_t);
    void *ctx;
} put_job;

static int put_piece(void *user, const void *p, size_t n)
{
    put_job *j = user;
    return j->put(j->ctx, p, n) ? WPACK_OK : WPACK_E_IO;
}

/* Streamed: each zstd chunk decoded once, and checked against the tensor's
 * XXH3 when the archive was opened with WPACK_OPEN_VERIFY_READS. */
int wpk_export_copy(const wpack_archive *ar, const wpack_tensor *t,
                    int (*put)(void *, const void *, size_t), void *ctx, char *err,
                    size_t errlen)
{
    put_job j = {put, ctx};
    int rc = wpack_read_stream(ar, t->index, put_piece, &j, 0);
    if (rc == WPACK_E_IO)
        wpk_fmt(err, errlen, "tensor '%s': write failed: %s", t->name, strerror(errno));
    else if (rc)
        wpk_fmt(err, errlen, "%s", wpack_errmsg(ar));
    return rc;
}

int wpk_export_copy_fd(const wpack_archive *ar, const wpack_tensor *t, int fd,
                       unsigned read_flags, char *err, size_t errlen)
{
    off_t from = (read_flags & WPK_EXPORT_WRITEBACK) ? lseek(fd, 0, SEEK_CUR) : -1;
    int rc = wpack_read_to_fd(ar, t->index, fd, read_flags & ~WPK_EXPORT_WRITEBACK);
    if (rc)
        wpk_fmt(err, errlen, "%s", wpack_errmsg(ar));
    /* The disk writes this tensor while the next is copied (a hint: an
     * error shows at the fsync); small ones are left to the fsync. */
    off_t to = from >= 0 && !rc ? lseek(fd, 0, SEEK_CUR) : -1;
    if (to - from >= (off_t)(4u << 20))
        sync_file_range(fd, from, to - from, SYNC_FILE_RANGE_WRITE);
    return rc;
}

/* The progress callback of one wpack_export_file() call. */
typedef struct {
    wpack_export_progress_fn fn;
    void *user;
} done_cb;

static void tensor_done(const done_cb *cb, const wpack_tensor *t)
{
    if (cb->fn)
        cb->fn(cb->user, t);
}

/* The header's text: {"__metadata__":{KEY:VALUE,...},NAME:{"dtype":..,
 * "shape":[..],"data_offsets":[b,e]},...}, what json_dumps(JSON_COMPACT)
 * of the same object gives, keys in the archive's (name) order. */
static int safetensors_header(const wpack_archive *ar, hdr_text *h, char *big_key, size_t big_size,
                              char *err, size_t errlen)
{
    uint64_t nm = wpack_meta_count(ar), n = wpack_count(ar), at = 0;
    size_t big_len = 0;
    int rc = hdr_puts(h, nm ? "{\"__metadata__\":{" : "{") ? WPACK_E_NOMEM : WPACK_OK;
    for (uint64_t i = 0; i < nm && !rc; i++) {
        wpack_meta m;
        if ((rc = wpack_meta_at(ar, i, &m)))
            return rc;
        if ((i && hdr_puts(h, ",")) || hdr_json(h, json_string(m.key)) || hdr_puts(h, ":")) {
            wpk_fmt(err, errlen, "metadata '%s': cannot be made a JSON string", m.key);
            return h->nomem ? WPACK_E_NOMEM : WPACK_E_METADATA;
        }
        size_t from = h->len;
        if ((rc = hdr_meta_value(h, ar, &m, err, errlen)))
            return rc;
        if (h->len - from >= big_len) {
            big_len = h->len - from;
            wpk_fmt(big_key, big_size, "%s", m.key);
        }
    }
    if (nm && hdr_puts(h, "}"))
        return WPACK_E_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        wpack_tensor t;
        if ((rc = wpack_tensor_at(ar, i, &t)) || (rc = check_exportable(ar, &t, err, errlen)))
            return rc;
        if (strcmp(t.name, "__metadata__") == 0) {
            wpk_fmt(err, errlen, "a tensor called '__metadata__' cannot be written to safetensors");
            return WPACK_E_UNSUPPORTED;
        }
        json_t *shape = json_array(), *offs = json_array();
        for (unsigned k = 0; k < t.rank; k++)
            json_array_append_new(shape, json_integer((json_int_t)t.dims[k]));
        json_array_append_new(offs, json_integer((json_int_t)at));
        json_array_append_new(offs, json_integer((json_int_t)(at + t.nbytes)));
        json_t *o = json_pack("{s:s,s:o,s:o}", "dtype", st_dtype_name(t.dtype), "shape", shape,
                              "data_offsets", offs);
        if (!o) { /* its parts are a known name and numbers: only memory can fail it */
            wpk_fmt(err, errlen, "tensor '%s': out of memory", t.name);
            return WPACK_E_NOMEM;
        }
        if (((nm || i) && hdr_puts(h, ",")) || hdr_json(h, json_string(t.name)) ||
            hdr_puts(h, ":") || hdr_json(h, o)) {
            wpk_fmt(err, errlen, "tensor '%s': cannot be made a JSON key", t.name);
            return h->nomem ? WPACK_E_NOMEM : WPACK_E_NAME;
        }
        at += t.nbytes;
    }
    return hdr_puts(h, "}") ? WPACK_E_NOMEM : WPACK_OK;
}

static int export_safetensors(const wpack_archive *ar, int fd, unsigned read_flags,
                              const done_cb *cb, char *err, size_t errlen)
{
    hdr_text h = {.limit = SAFETENSORS_MAX_HEADER};
    char big_key[200] = ""; /* the largest metadata value, named if the header is too big */
    int rc = safetensors_header(ar, &h, big_key, sizeof big_key, err, errlen);
    if (h.nomem)
        rc = WPACK_E_NOMEM;
    size_t padded = (h.len + 7) / 8 * 8;
    if (!rc && (h.over || padded > SAFETENSORS_MAX_HEADER)) {
        /* strict readers (and wpack create) refuse it */
        wpk_fmt(err, errlen, "the safetensors header (metadata and tensor entries as JSON, "
                "control characters escaped to 6 bytes) would be %zu bytes, above the %llu "
                "safetensors readers take%s%s%s", padded,
                (unsigned long long)SAFETENSORS_MAX_HEADER, big_key[0] ? "; the largest "
                "metadata value is '" : "", big_key, big_key[0] ? "'" : "");
        rc = WPACK_E_LIMIT;
    }
    if (!rc) {
        uint8_t lenb[8];
        wpk_st64(lenb, padded);
        if (!write_all(fd, lenb, 8) || !write_all(fd, h.p, h.len) ||
            !write_all(fd, "        ", padded - h.len)) {
            wpk_fmt(err, errlen, "write failed: %s", strerror(errno));
            rc = WPACK_E_IO;
        }
    }
    free(h.p);
    uint64_t n = wpack_count(ar);
    for (uint64_t i = 0; i < n && !rc; i++) {
        wpack_tensor t;
        if (!(rc = wpack_tensor_at(ar, i, &t)))
            rc = wpk_export_copy_fd(ar, &t, fd, read_flags, err, errlen);
        if (!rc)
            tensor_done(cb, &t);
    }
    if (rc && !err[0])
        wpk_fmt(err, errlen, "%s", wpack_error_describe(rc));
    return rc;
}

size_t wpk_entry_file_name(const char *name, size_t n, char *out, size_t len)
{
    size_t o = 0;
    if (!len)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        int escape = c == '/' || c == '%' || c == '\\' || (i == 0 && c == '.');
        if (o + (escape ? 3 : 1) >= len)
            break;
        if (escape)
            o += (size_t)snprintf(out + o, len - o, "%%%02X", c);
        else
            out[o++] = (char)c;
    }
    out[o] = 0;
    return o;
}

/* The byte escape %XY (two hex digits, either case) stands for, or 0
 * when it is not one wpk_entry_file_name writes. */
static char escaped_byte(const char *p)
{
    if (p[0] != '%' || !p[1] || !p[2])
        return 0;
    char hi = p[1], lo = (char)(p[2] >= 'a' && p[2] <= 'f' ? p[2] - 32 : p[2]);
    return hi == '2' && lo == 'F'   ? '/'
           : hi == '2' && lo == '5' ? '%'
           : hi == '2' && lo == 'E' ? '.'
           : hi == '5' && lo == 'C' ? '\\'
                                    : 0;
}

void wpk_entry_name_unescape(char *s)
{
    char *o = s;
    for (const char *p = s; *p;) {
        char c = escaped_byte(p);
        *o++ = c ? c : *p;
        p += c ? 3 : 1;
    }
    *o = 0;
}

static int put_archive(void *ctx, const void *p, size_t n)
{
    return archive_write_data((struct archive *)ctx, p, n) == (la_ssize_t)n;
}

static int write_bundle(const wpack_archive *ar, int format, int fd, const done_cb *cb,
                        char *err, size_t errlen);

static int export_bundle(const wpack_archive *ar, int format, int fd, const done_cb *cb,
                         char *err, size_t errlen)
{
    wpk_archive_locale l; /* UTF-8 names in and out (import.h) */
    wpk_archive_locale_begin(&l);
    int rc = write_bundle(ar, format, fd, cb, err, errlen);
    wpk_archive_locale_end(&l);
    return rc;
}

static int write_bundle(const wpack_archive *ar, int format, int fd, const done_cb *cb,
                        char *err, size_t errlen)
{
    struct archive *a = archive_write_new();
    struct archive_entry *e = archive_entry_new();
    int rc = WPACK_OK;
    char eb[300]; /* libarchive's messages */
    if (!a || !e) {
        rc = WPACK_E_NOMEM;
        goto out;
    }
    if (format == WPACK_EXPORT_NPZ) {
        archive_write_set_format_zip(a);
        archive_write_set_options(a, "zip:compression=store");
    } else {
        archive_write_set_format_pax_restricted(a);
    }
    if (archive_write_open_fd(a, fd) != ARCHIVE_OK) {
        wpk_fmt(err, errlen, "%s", wpk_archive_error(a, eb, sizeof eb));
        rc = WPACK_E_IO;
        goto out;
    }
    uint64_t n = wpack_count(ar);
    for (uint64_t i = 0; i < n && !rc; i++) {
        wpack_tensor t;
        char name[WPACK_MAX_NAME * 3 + 8], header[1024];
        if ((rc = wpack_tensor_at(ar, i, &t)) || (rc = check_exportable(ar, &t, err, errlen)))
            break;
        size_t hl = npy_format_header(header, sizeof header, t.dtype, t.rank, t.dims);
        if (!hl) {
            wpk_fmt(err, errlen, "tensor '%s': cannot make a .npy header: " NPY_NO_HEADER_WHY,
                    t.name);
            rc = WPACK_E_UNSUPPORTED;
            break;
        }
        size_t nl = wpk_entry_file_name(t.name, t.name_len, name, sizeof name - 4);
        memcpy(name + nl, ".npy", 5);
        archive_entry_clear(e);
        archive_entry_set_pathname(e, name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)(hl + t.nbytes));
        archive_entry_set_mtime(e, 0, 0);
        if (archive_write_header(a, e) != ARCHIVE_OK || !put_archive(a, header, hl)) {
            wpk_fmt(err, errlen, "tensor '%s': %s", t.name, wpk_archive_error(a, eb, sizeof eb));
            rc = WPACK_E_IO;
            break;
        }
        rc = wpk_export_copy(ar, &t, put_archive, a, err, errlen);
        if (!rc)
            tensor_done(cb, &t);
    }
    if (archive_write_close(a) != ARCHIVE_OK && !rc) {
        wpk_fmt(err, errlen, "%s", wpk_archive_error(a, eb, sizeof eb));
        rc = WPACK_E_IO;
    }
out:
    if (rc && !err[0])
        wpk_fmt(err, errlen, "%s", wpack_error_describe(rc));
    archive_entry_free(e);
    archive_write_free(a);
    return rc;
}

int wpack_export_format_from_name(const char *name)
{
    return !name                            ? 0
           : strcmp(name, "safetensors") == 0 ? WPACK_EXPORT_SAFETENSORS
           : strcmp(name, "npz") == 0         ? WPACK_EXPORT_NPZ
           : strcmp(name, "tar") == 0         ? WPACK_EXPORT_TAR
           : strcmp(name, "gguf") == 0        ? WPACK_EXPORT_GGUF
           : strcmp(name, "irpa") == 0        ? WPACK_EXPORT_IRPA
           : strcmp(name, "trt-calib") == 0   ? WPACK_EXPORT_TRT_CALIB
           : strcmp(name, "ort-calib-json") == 0 ? WPACK_EXPORT_ORT_CALIB_JSON
                                              : 0;
}

void wpack_export_options_init(wpack_export_options *opt)
{
    memset(opt, 0, sizeof *opt);
}

/* add to *total, saturating */
static void bound_add(uint64_t *total, uint64_t add)
{
    *total = *total > UINT64_MAX - add ? UINT64_MAX : *total + add;
}

/* The tensors and metadata of a tensor format. Per tensor: its bytes (in
 * an irpa only those of entries with bytes there) and 4 KiB of header
 * records (npy header, tar/zip headers and padding, safetensors JSON
 * entry, GGUF tensor info, irpa entry and metadata), plus its name 6 times
 * (an npz holds it twice, '/' and '%' escaped to 3 bytes); in a GGUF its
 * padding to the alignment too. Per metadata
 * value: in safetensors a JSON string, key and value escaped (a control
 * byte to 6 bytes); an array is JSON made a JSON string (each element's
 * bytes escaped twice: 12); the GGUF KV is smaller. */
static uint64_t tensors_bound(const wpack_archive *ar, int format)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        if (wpack_tensor_at(ar, i, &t) != WPACK_OK)
            continue;
        uint64_t bytes = format == WPACK_EXPORT_IRPA && irpa_export_no_bytes(&t) ? 0 : t.nbytes;
        bound_add(&total, bytes);
        bound_add(&total, 4096 + 6 * (uint64_t)t.name_len);
    }
    if (format == WPACK_EXPORT_GGUF || !format) {
        /* GGUF pads each tensor and the data section's start to its
         * alignment, which the archive's general.alignment may set to 2^30:
         * an 860 KB archive of 200 tensors exported 200 GiB of zeros */
        uint64_t pad = gguf_export_alignment(ar) - 1;
        uint64_t n = wpack_count(ar) + 1;
        bound_add(&total, pad && n > UINT64_MAX / pad ? UINT64_MAX : n * pad);
    }
    for (uint64_t i = 0; i < wpack_meta_count(ar); i++) {
        wpack_meta m;
        if (wpack_meta_at(ar, i, &m) != WPACK_OK)
            continue;
        bound_add(&total, 128 + 6 * (uint64_t)strlen(m.key));
        if (m.type != WPACK_META_ARRAY) {
            bound_add(&total, m.count > UINT64_MAX / 6 ? UINT64_MAX : 6 * m.count);
            continue;
        }
        for (uint64_t j = 0; j < m.count; j++) {
            wpack_meta e;
            uint64_t n = wpack_meta_elem(ar, &m, j, &e) == WPACK_OK &&
                                 (e.type == WPACK_META_STRING || e.type == WPACK_META_BYTES)
                             ? e.count
                             : 0;
            bound_add(&total, 64);
            bound_add(&total, n > UINT64_MAX / 12 ? UINT64_MAX : 12 * n);
        }
    }
    return total;
}

/* trt-calib and ort-calib-json: a line per activation record, its key
 * (JSON-escaped: at most 2 bytes a byte, names have no control byte) and
 * two numbers. */
static uint64_t calib_bound(const wpack_archive *ar)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < wpack_stats_count(ar); i++) {
        wpack_stats s;
        if (wpack_stats_at(ar, i, &s) == WPACK_OK && s.kind == WPACK_STATS_ACTIVATION)
            bound_add(&total, 128 + 2 * (uint64_t)strlen(s.key));
    }
    return total;
}

/* 16 KiB for the file's own framing (tar's closing blocks and padding, the
 * zip central directory's end, the irpa header and padding) and the
 * format's records. */
uint64_t wpack_export_size_bound(const wpack_archive *ar, int format)
{
    int calib = format == WPACK_EXPORT_TRT_CALIB || format == WPACK_EXPORT_ORT_CALIB_JSON;
    int known = format >= WPACK_EXPORT_SAFETENSORS && format <= WPACK_EXPORT_ORT_CALIB_JSON;
    uint64_t total = 16384;
    if (!calib)
        bound_add(&total, tensors_bound(ar, known ? format : 0));
    if (calib || !known)
        bound_add(&total, calib_bound(ar));
    return total;
}

/* The exporters read entries in index order: a remote archive fetches
 * ahead along that plan (a hint; one out of memory is only slower). */
static void plan_in_order(const wpack_archive *ar)
{
    uint64_t n = wpack_count(ar);
    uint64_t *v = n < SIZE_MAX / sizeof *v ? malloc((size_t)(n ? n : 1) * sizeof *v) : NULL;
    for (uint64_t i = 0; v && i < n; i++)
        v[i] = i;
    if (v)
        wpack_read_plan(ar, v, (size_t)n);
    free(v);
}

int wpack_export_file(const wpack_archive *ar, const char *path, int format,
                      const wpack_export_options *opt)
{
    wpack_export_options o;
    wpack_export_options_init(&o);
    if (opt)
        o = *opt;
    char err[1024] = "";
    int rc = WPK_RESERVED_CHECK(&o, "wpack_export_options", "wpack_import.h", err, sizeof err);
    if (o.flags & ~(uint64_t)(WPACK_EXPORT_NO_COPY_RANGE | WPACK_EXPORT_NO_SYNC)) {
        wpk_fmt(err, sizeof err, "wpack_export_options: unknown flags %#llx (built against a "
                "newer wpack_import.h?)", (unsigned long long)o.flags);
        rc = WPACK_E_INVALID_ARGUMENT;
    }
    if (!rc && (!ar || !path)) {
        wpk_fmt(err, sizeof err, "wpack_export_file: %s is NULL", !ar ? "the archive" : "path");
        rc = WPACK_E_INVALID_ARGUMENT;
    }
    if (!rc && (format < WPACK_EXPORT_SAFETENSORS || format > WPACK_EXPORT_ORT_CALIB_JSON)) {
        wpk_fmt(err, sizeof err, "%s: unknown export format %d", path, format);
        rc = WPACK_E_INVALID_ARGUMENT;
    }
    if (!rc) {
        char m[900] = "";
        done_cb cb = {o.progress, o.progress_user};
        unsigned rf = (o.flags & WPACK_EXPORT_NO_COPY_RANGE) ? WPACK_READ_NO_COPY_RANGE : 0;
        if (!(o.flags & WPACK_EXPORT_NO_SYNC))
            rf |= WPK_EXPORT_WRITEBACK;
        wpk_atomic t; /* its messages name path: as they are */
        rc = wpk_atomic_open(&t, path,
                             WPK_ATOMIC_FOLLOW_LINK | ((o.flags & WPACK_EXPORT_NO_SYNC) ? WPK_ATOMIC_NO_SYNC : 0),
                             err, sizeof err);
        if (!rc) {
            plan_in_order(ar);
            if (format == WPACK_EXPORT_GGUF)
                rc = gguf_export(ar, t.fd, rf, o.progress, o.progress_user, m, sizeof m);
            else if (format >= WPACK_EXPORT_TRT_CALIB)
                rc = calib_export(ar, t.fd, format, o.warn, o.warn_user, m, sizeof m);
            else if (format == WPACK_EXPORT_IRPA)
                rc = irpa_export(ar, t.fd, rf, o.progress, o.progress_user, m, sizeof m);
            else
                rc = format == WPACK_EXPORT_SAFETENSORS
                         ? export_safetensors(ar, t.fd, rf, &cb, m, sizeof m)
                         : export_bundle(ar, format, t.fd, &cb, m, sizeof m);
            if (rc) /* the format writers' messages name no path */
                wpk_fmt(err, sizeof err, "%s: %s", path, m);
            else
                rc = wpk_atomic_commit(&t, err, sizeof err);
        }
        wpk_atomic_abort(&t);
    }
    if (o.err && o.err_size) /* escaped: paths and names in it may hold anything */
        wpack_text_escape(o.err, o.err_size, err, strlen(err));
    return rc;
}
