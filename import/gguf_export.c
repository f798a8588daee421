/*
 * gguf_export.c - an archive as GGUF v3 (gguf.h). KVs: the keys of
 * gguf.kv_order first, with the GGUF types of gguf.kv_types, then every other
 * key but wpack.* and gguf.* in name order with default types. Tensors: the
 * order of gguf.tensor_order, then the rest in name order; dims reversed
 * (innermost first); data offsets and the end padded to the alignment
 * (general.alignment, else 32), as ggml and gguf-py write them. So a GGUF
 * file packed by `wpack create` comes back byte for byte.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "export.h"
#include "gguf.h"
#include "internal.h"

typedef struct {
    int fd;
    uint8_t buf[1 << 16];
    size_t n;
    uint64_t pos; /* bytes put so far: the file offset */
    int failed;
} out_t;

static int flush(out_t *o)
{
    if (o->n && !o->failed && wpk_write_all(o->fd, o->buf, o->n))
        o->failed = 1;
    o->n = 0;
    return !o->failed;
}

/* put for wpk_export_copy: non-zero on success. */
static int put(void *ctx, const void *p, size_t n)
{
    out_t *o = ctx;
    o->pos += n;
    if (n >= sizeof o->buf) {
        if (!flush(o) || wpk_write_all(o->fd, p, n))
            o->failed = 1;
        return !o->failed;
    }
    if (o->n + n > sizeof o->buf && !flush(o))
        return 0;
    if (n)
        memcpy(o->buf + o->n, p, n);
    o->n += n;
    return 1;
}

static void put32(out_t *o, uint32_t v)
{
    uint8_t b[4];
    wpk_st32(b, v);
    put(o, b, 4);
}

static void put64(out_t *o, uint64_t v)
{
    uint8_t b[8];
    wpk_st64(b, v);
    put(o, b, 8);
}

static void put_str(out_t *o, const void *p, uint64_t n)
{
    put64(o, n);
    put(o, p, (size_t)n);
}

static void put_zeros(out_t *o, uint64_t n)
{
    static const uint8_t z[256];
    for (; n; n -= n < sizeof z ? n : sizeof z)
        put(o, z, n < sizeof z ? (size_t)n : sizeof z);
}

/* A fault of this format's parser, "gguf: ..." in err (format/fmt.c). */
#define efail(err, errlen, code, ...) wpk_fail_in(err, errlen, code, "gguf", __VA_ARGS__)

/* ------------------------------------------------------------ metadata */

/* Index of metadata key in the archive (keys are sorted), or -1. */
static int64_t meta_index(const wpack_archive *ar, const char *key)
{
    uint64_t lo = 0, hi = wpack_meta_count(ar);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        wpack_meta m;
        if (wpack_meta_at(ar, mid, &m))
            return -1;
        int c = strcmp(m.key, key);
        if (!c)
            return (int64_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* k is key, or ends in "." + key (the bookkeeping of an input packed under --prefix). */
static int is_key(const char *k, const char *key)
{
    size_t a = strlen(k), b = strlen(key);
    return a == b ? strcmp(k, key) == 0 : a > b && k[a - b - 1] == '.' && strcmp(k + a - b, key) == 0;
}

static int own_key(const char *k)
{
    return strncmp(k, "wpack.", 6) == 0 || is_key(k, GGUF_META_KV_ORDER) ||
           is_key(k, GGUF_META_KV_TYPES) || is_key(k, GGUF_META_TENSOR_ORDER);
}

/* The GGUF type a wpack value gets when no gguf.kv_types says otherwise
 * (bytes: an array of u8; an array of bytes: an array of strings, which
 * GGUF does not require to be UTF-8). */
static int64_t default_type(const wpack_meta *m)
{
    switch (m->type) {
    case WPACK_META_STRING: return GGUF_T_STRING;
    case WPACK_META_I64: return GGUF_T_I64;
    case WPACK_META_F64: return GGUF_T_F64;
    case WPACK_META_BOOL: return GGUF_T_BOOL;
    case WPACK_META_BYTES: return GGUF_KV_TYPE(GGUF_T_ARRAY, GGUF_T_U8);
    default:
        return m->elem_type == WPACK_META_STRING ? GGUF_KV_TYPE(GGUF_T_ARRAY, GGUF_T_STRING)
               : m->elem_type == WPACK_META_I64  ? GGUF_KV_TYPE(GGUF_T_ARRAY, GGUF_T_I64)
               : m->elem_type == WPACK_META_F64  ? GGUF_KV_TYPE(GGUF_T_ARRAY, GGUF_T_F64)
               : m->elem_type == WPACK_META_BOOL ? GGUF_KV_TYPE(GGUF_T_ARRAY, GGUF_T_BOOL)
                                                 : GGUF_KV_TYPE(GGUF_T_ARRAY, GGUF_T_STRING);
    }
}

/* One scalar (GGUF type t) from a scalar wpack value e; 0 when e does not fit t. */
static int put_scalar(out_t *o, uint32_t t, const wpack_meta *e)
{
    int64_t v = e->i64;
    uint8_t b[8];
    switch (t) {
    case GGUF_T_STRING:
        if (e->type == WPACK_META_STRING)
            put_str(o, e->str, e->count);
        else if (e->type == WPACK_META_BYTES)
            put_str(o, e->bytes, e->count);
        else
            return 0;
        return 1;
    case GGUF_T_BOOL:
        if (e->type != WPACK_META_BOOL)
            return 0;
        b[0] = (uint8_t)e->boolean;
        put(o, b, 1);
        return 1;
    case GGUF_T_F32:
    case GGUF_T_F64:
        if (e->type != WPACK_META_F64)
            return 0;
        if (t == GGUF_T_F64) {
            wpk_stf64(b, e->f64);
            put(o, b, 8);
        } else {
            put32(o, gguf_f32_narrow(e->f64));
        }
        return 1;
    default:
        break;
    }
    if (e->type != WPACK_META_I64)
        return 0;
    switch (t) {
    case GGUF_T_U8: if (v < 0 || v > 255) return 0; b[0] = (uint8_t)v; put(o, b, 1); return 1;
    case GGUF_T_I8: if (v < -128 || v > 127) return 0; b[0] = (uint8_t)v; put(o, b, 1); return 1;
    case GGUF_T_U16: if (v < 0 || v > 65535) return 0; wpk_st16(b, (uint16_t)v); put(o, b, 2); return 1;
    case GGUF_T_I16: if (v < -32768 || v > 32767) return 0; wpk_st16(b, (uint16_t)v); put(o, b, 2); return 1;
    case GGUF_T_U32: if (v < 0 || v > 4294967295LL) return 0; put32(o, (uint32_t)v); return 1;
    case GGUF_T_I32: if (v < INT32_MIN || v > INT32_MAX) return 0; put32(o, (uint32_t)v); return 1;
    default: put64(o, (uint64_t)v); return 1; /* u64 (bit pattern), i64 */
    }
}

static int put_kv(out_t *o, const wpack_archive *ar, const wpack_meta *m, int64_t type,
                  char *err, size_t errlen)
{
    uint32_t t = (uint32_t)(type & 0xff), e = (uint32_t)(type >> 8);
    if (type < 0 || t >= GGUF_T_COUNT || (t == GGUF_T_ARRAY && (e >= GGUF_T_COUNT || e == GGUF_T_ARRAY)))
        return efail(err, errlen, WPACK_E_UNSUPPORTED, "metadata '%s' has no GGUF type", m->key);
    put_str(o, m->key, strlen(m->key));
    put32(o, t);
    int ok = 1;
    if (t != GGUF_T_ARRAY) {
        ok = m->type != WPACK_META_ARRAY && put_scalar(o, t, m);
    } else if (m->type == WPACK_META_BYTES && e == GGUF_T_U8) {
        put32(o, e);
        put_str(o, m->bytes, m->count);
    } else if (m->type == WPACK_META_ARRAY) {
        put32(o, e);
        put64(o, m->count);
        for (uint64_t j = 0; j < m->count && ok; j++) {
            wpack_meta x;
            ok = wpack_meta_elem(ar, m, j, &x) == WPACK_OK && put_scalar(o, e, &x);
        }
    } else {
        ok = 0;
    }
    if (!ok)
        return efail(err, errlen, WPACK_E_METADATA, "metadata '%s' does not fit GGUF type %u%s%.0u",
                     m->key, t, t == GGUF_T_ARRAY ? " of " : "", t == GGUF_T_ARRAY ? e : 0);
    return WPACK_OK;
}

/* gguf.kv_order and gguf.kv_types when both are there and agree. */
static int kv_record(const wpack_archive *ar, wpack_meta *order, wpack_meta *types)
{
    return wpack_meta_find(ar, GGUF_META_KV_ORDER, order) == WPACK_OK &&
           wpack_meta_find(ar, GGUF_META_KV_TYPES, types) == WPACK_OK &&
           order->type == WPACK_META_ARRAY && order->elem_type == WPACK_META_STRING &&
           types->type == WPACK_META_ARRAY && types->elem_type == WPACK_META_I64 &&
           order->count == types->count;
}

/* The alignment general.alignment (m) asks for in *align; readers take it
 * only as a u32 power of two. */
static int meta_alignment(const wpack_meta *m, uint32_t *align, char *err, size_t errlen)
{
    if (m->type != WPACK_META_I64)
        return efail(err, errlen, WPACK_E_ALIGNMENT,
                     "metadata general.alignment is not an integer (set it with the API "
                     "or Python as an int; `wpack update --meta` sets strings)");
    if (m->i64 <= 0 || m->i64 > (1LL << 30) || (m->i64 & (m->i64 - 1)))
        return efail(err, errlen, WPACK_E_ALIGNMENT,
                     "metadata general.alignment is not a power of two up to 2^30");
    *align = (uint32_t)m->i64;
    return WPACK_OK;
}

uint32_t gguf_export_alignment(const wpack_archive *ar)
{
    wpack_meta m;
    uint32_t align = GGUF_DEFAULT_ALIGNMENT;
    char err[160];
    if (wpack_meta_find(ar, "general.alignment", &m) != WPACK_OK ||
        meta_alignment(&m, &align, err, sizeof err) != WPACK_OK)
        return GGUF_DEFAULT_ALIGNMENT; /* none, or one gguf_export refuses */
    return align;
}

/* The KVs, counting them first (n_kv precedes them). pass 0: count only. */
static int put_metadata(out_t *o, const wpack_archive *ar, int pass, uint64_t *n_kv,
                        uint32_t *align, char *err, size_t errlen)
{
    uint64_t nm = wpack_meta_count(ar);
    uint8_t *used = calloc(nm ? (size_t)nm : 1, 1);
    if (!used)
        return efail(err, errlen, WPACK_E_NOMEM, "out of memory");
    wpack_meta order, types;
    int rc = WPACK_OK, have = kv_record(ar, &order, &types);
    *n_kv = 0;
    for (uint64_t i = 0; i < nm * 2 + (have ? order.count : 0) && !rc; i++) {
        /* first the recorded keys in order, then every key in name order */
        wpack_meta m, k, ty;
        int64_t type, at;
        int recorded = have && i < order.count; /* a key of the GGUF file, whatever its name */
        if (recorded) {
            if (wpack_meta_elem(ar, &order, i, &k) || wpack_meta_elem(ar, &types, i, &ty))
                continue;
            at = meta_index(ar, k.str);
            type = ty.i64;
        } else {
            at = (int64_t)(i - (have ? order.count : 0));
            if ((uint64_t)at >= nm)
                break;
            type = -2;
        }
        if (at < 0 || used[at] || wpack_meta_at(ar, (uint64_t)at, &m) || (!recorded && own_key(m.key)))
            continue;
        used[at] = 1;
        if (type == -2)
            type = default_type(&m);
        if (strcmp(m.key, "general.alignment") == 0) {
            if ((rc = meta_alignment(&m, align, err, errlen)))
                break;
            type = GGUF_T_U32;
        }
        ++*n_kv;
        if (pass)
            rc = put_kv(o, ar, &m, type, err, errlen);
    }
    free(used);
    return rc;
}

/* ------------------------------------------------------------ tensors */

/* The GGML type of t's dtype, or a message. */
static int ggml_type(const wpack_archive *ar, const wpack_tensor *t, uint32_t *id, char *err,
                     size_t errlen)
{
    int b = ggml_type_of_dtype(t->dtype);
    if (b >= 0) {
        *id = (uint32_t)b;
        return WPACK_OK;
    }
    const char *name = NULL;
    uint32_t be, bb;
    const void *params = NULL;
    uint64_t plen = 0;
    if (t->dtype >= WPACK_DTYPE_BLOCK_BASE &&
        wpack_block_dtype_at(ar, (uint64_t)(t->dtype - WPACK_DTYPE_BLOCK_BASE), &name, &be, &bb,
                             &params, &plen) == WPACK_OK &&
        plen == GGML_PARAMS_LEN && memcmp(params, "ggml", 4) == 0) {
        const ggml_type_info *ti = ggml_type_get(wpk_ld32((const uint8_t *)params + 4));
        if (ti && !ti->dtype && ti->block_elems == be && ti->block_bytes == bb) {
            *id = ti->id;
            return WPACK_OK;
        }
    }
    return efail(err, errlen, WPACK_E_UNSUPPORTED, "tensor '%s': dtype %s has no GGML type",
                 t->name, name ? name : wpack_dtype_name(t->dtype) ? wpack_dtype_name(t->dtype)
                                                                   : "?");
}

/* Entry numbers in the order they are written. */
static uint64_t *tensor_order(const wpack_archive *ar, uint64_t n)
{
    uint64_t *v = malloc((n ? n : 1) * sizeof *v), k = 0;
    uint8_t *used = calloc(n ? n : 1, 1);
    wpack_meta ord;
    if (v && used && wpack_meta_find(ar, GGUF_META_TENSOR_ORDER, &ord) == WPACK_OK &&
        ord.type == WPACK_META_ARRAY && ord.elem_type == WPACK_META_STRING)
        for (uint64_t j = 0; j < ord.count && k < n; j++) {
            wpack_meta e;
            wpack_tensor t;
            if (wpack_meta_elem(ar, &ord, j, &e) == WPACK_OK &&
                wpack_find(ar, e.str, &t) == WPACK_OK && strcmp(t.name, e.str) == 0 &&
                !used[t.index]) {
                used[t.index] = 1;
                v[k++] = t.index;
            }
        }
    for (uint64_t i = 0; v && used && i < n; i++)
        if (!used[i])
            v[k++] = i;
    free(used);
    return v;
}

int gguf_export(const wpack_archive *ar, int fd, unsigned read_flags, gguf_done_fn done,
                void *user, char *err, size_t errlen)
{
    out_t *o = calloc(1, sizeof *o);
    uint64_t n = wpack_count(ar), n_kv = 0;
    uint64_t *order = tensor_order(ar, n);
    uint32_t align = GGUF_DEFAULT_ALIGNMENT;
    int rc = WPACK_OK;
    if (!o || !order) {
        rc = efail(err, errlen, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    o->fd = fd;
    if ((rc = put_metadata(o, ar, 0, &n_kv, &align, err, errlen)))
        goto out;
    /* check every tensor before writing anything */
    for (uint64_t i = 0; i < n && !rc; i++) {
        wpack_tensor t;
        uint32_t id;
        if ((rc = wpack_tensor_at(ar, i, &t)) || (rc = ggml_type(ar, &t, &id, err, errlen)))
            break;
        if (t.rank > GGUF_MAX_DIMS)
            rc = efail(err, errlen, WPACK_E_RANK, "tensor '%s': rank %u (GGUF takes up to %u)",
                       t.name, t.rank, GGUF_MAX_DIMS);
        else if (t.name_len > GGUF_MAX_NAME)
            rc = efail(err, errlen, WPACK_E_NAME, "tensor '%s': %zu bytes, GGUF names take up to "
                       "%u", t.name, t.name_len, GGUF_MAX_NAME);
    }
    if (rc)
        goto out;
    put(o, "GGUF", 4);
    put32(o, 3);
    put64(o, n);
    put64(o, n_kv);
    if ((rc = put_metadata(o, ar, 1, &n_kv, &align, err, errlen)))
        goto out;
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        wpack_tensor t;
        uint32_t id = 0;
        wpack_tensor_at(ar, order[i], &t);
        ggml_type(ar, &t, &id, err, errlen);
        put_str(o, t.name, t.name_len);
        put32(o, t.rank);
        for (unsigned k = t.rank; k-- > 0;)
            put64(o, t.dims[k]);
        put32(o, id);
        put64(o, at);
        uint64_t pad = (align - t.nbytes % align) % align;
        if (t.nbytes > UINT64_MAX - pad - at) {
            rc = efail(err, errlen, WPACK_E_OVERFLOW, "the data section overflows");
            goto out;
        }
        at += t.nbytes + pad;
    }
    put_zeros(o, (align - o->pos % align) % align);
    for (uint64_t i = 0; i < n && !rc && !o->failed; i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, order[i], &t);
        if (!flush(o)) /* the buffered header first, then the bytes straight to fd */
            break;
        if ((rc = wpk_export_copy_fd(ar, &t, o->fd, read_flags, err, errlen)))
            break;
        o->pos += t.nbytes;
        put_zeros(o, (align - t.nbytes % align) % align);
        if (done)
            done(user, &t);
    }
    if (!rc && !flush(o))
        rc = WPACK_E_IO;
    if (!rc && o->failed)
        rc = WPACK_E_IO;
    if (rc == WPACK_E_IO && !err[0])
        wpk_fmt(err, errlen, "write failed: %s", strerror(errno));
out:
    free(order);
    free(o);
    return rc;
}
