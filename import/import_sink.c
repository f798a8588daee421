/*
 * import_sink.c - between the importers and the writer: prefixes, casting
 * with statistics of the original values, metadata, duplicate reports.
 */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bytes.h"
#include "import.h"
#include "internal.h"
#include "zipread.h"

#define CAST_ELEMS (1u << 20) /* elements per cast block */

struct wpk_sink_dtype {
    struct wpk_sink_dtype *next;
    uint32_t block_elems, block_bytes;
    int code;
    size_t params_len;
    uint8_t *params;
    char name[];
};

struct wpk_owner {
    wpk_owner *next;
    const char *source;
    char name[];
};

int wpk_sink_fail(wpk_sink *s, int code, const char *fmt, ...)
{
    char m[900];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(m, sizeof m, fmt, ap);
    va_end(ap);
    wpk_fmt(s->err, s->errlen, "%s: %s", s->source ? s->source : "input", m);
    return code;
}

void wpk_sink_warn(wpk_sink *s, const char *fmt, ...)
{
    char m[900], full[1000];
    va_list ap;
    if (!s->warn)
        return;
    va_start(ap, fmt);
    wpk_vfmt(m, sizeof m, fmt, ap);
    va_end(ap);
    wpk_fmt(full, sizeof full, "%s: %s", s->source ? s->source : "input", m);
    wpk_msg_escape(full, sizeof full); /* paths and names in it may hold anything */
    s->warn(s->warn_user, full);
}

void wpk_sink_init(wpk_sink *s, wpack_writer *w, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->w = w;
    s->err = err;
    s->errlen = errlen;
    if (errlen)
        err[0] = 0;
}

void wpk_sink_free(wpk_sink *s)
{
    for (size_t i = 0; i < s->owner_cap; i++)
        for (wpk_owner *o = s->owners ? s->owners[i] : NULL, *n; o; o = n) {
            n = o->next;
            free(o);
        }
    free(s->owners);
    for (struct wpk_sink_dtype *d = s->dtypes, *n; d; d = n) {
        n = d->next;
        free(d->params);
        free(d);
    }
    free(s->name);
    free(s->cbuf);
    free(s->rbuf);
    memset(s, 0, sizeof *s);
}

void wpk_sink_input(wpk_sink *s, const char *source, const wpk_import_opts *o)
{
    s->source = source;
    s->o = o;
    s->done = 0;
}

void wpk_sink_progress(wpk_sink *s, uint64_t input_bytes)
{
    s->done += input_bytes;
    if (s->progress)
        s->progress(s->user, s->done);
}

/* ------------------------------------------------------------ names */

static char *full_name(const wpk_sink *s, const char *name)
{
    const char *p = s->o && s->o->prefix ? s->o->prefix : "";
    size_t pl = strlen(p), nl = strlen(name);
    char *r = malloc(pl + nl + 2);
    if (!r)
        return NULL;
    memcpy(r, p, pl);
    if (pl)
        r[pl++] = '.';
    memcpy(r + pl, name, nl + 1);
    return r;
}

static uint64_t owner_slot(const wpk_sink *s, const char *name)
{
    return wpk_xxh3(name, strlen(name)) & (s->owner_cap - 1);
}

static wpk_owner *owner_find(const wpk_sink *s, const char *name)
{
    if (!s->owner_cap)
        return NULL;
    for (wpk_owner *o = s->owners[owner_slot(s, name)]; o; o = o->next)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

static int owner_add(wpk_sink *s, const char *name)
{
    if (s->owner_count >= s->owner_cap) {
        size_t cap = s->owner_cap ? s->owner_cap * 2 : 256;
        wpk_owner **v = calloc(cap, sizeof *v);
        if (!v)
            return 0;
        for (size_t i = 0; i < s->owner_cap; i++)
            for (wpk_owner *o = s->owners[i], *n; o; o = n) {
                n = o->next;
                uint64_t k = wpk_xxh3(o->name, strlen(o->name)) & (cap - 1);
                o->next = v[k];
                v[k] = o;
            }
        free(s->owners);
        s->owners = v;
        s->owner_cap = cap;
    }
    size_t n = strlen(name);
    wpk_owner *o = malloc(sizeof *o + n + 1);
    if (!o)
        return 0;
    memcpy(o->name, name, n + 1);
    o->source = s->source;
    uint64_t k = owner_slot(s, name);
    o->next = s->owners[k];
    s->owners[k] = o;
    s->owner_count++;
    return 1;
}

void wpk_sink_claim(wpk_sink *s, const char *name)
{
    (void)owner_add(s, name); /* only for messages: running out of memory here is harmless */
}

const char *wpk_sink_owner(const wpk_sink *s, const char *name)
{
    wpk_owner *o = owner_find(s, name);
    return o ? o->source : NULL;
}

/* A writer failure, with the duplicate's first owner when that is the cause. */
static int writer_failed(wpk_sink *s, int rc, const char *name)
{
    wpk_owner *o = rc == WPACK_E_EXISTS ? owner_find(s, name) : NULL;
    if (o && o->source && s->source && strcmp(o->source, s->source) != 0)
        return wpk_sink_fail(s, rc, "tensor '%s' is already taken by %s", name, o->source);
    if (o)
        return wpk_sink_fail(s, rc, "tensor '%s' appears twice", name);
    const char *m = wpack_writer_errmsg(s->w);
    return wpk_sink_fail(s, rc, "%s", m && *m ? m : wpack_error_name(rc));
}

static int wants_cast(const wpk_sink *s, const char *name, int dtype)
{
    if (!s->o || !s->o->cast || !wpack_dtype_is_float(dtype) || dtype == s->o->cast)
        return 0;
    if (!s->o->nonly)
        return 1;
    for (size_t k = 0; k < s->o->nonly; k++)
        if (fnmatch(s->o->only[k], name, 0) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------ tensors */

int wpk_sink_begin(wpk_sink *s, const char *name, int dtype, unsigned rank, const uint64_t *dims)
{
    if (s->in_tensor)
        return wpk_sink_fail(s, WPACK_E_STATE, "tensor '%s' begun inside '%s'", name, s->name);
    free(s->name);
    s->name = full_name(s, name);
    if (!s->name)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    s->src_dtype = dtype;
    s->dst_dtype = wants_cast(s, s->name, dtype) ? s->o->cast : dtype;
    s->src_size = wpack_dtype_size(dtype);
    s->own_stats = s->dst_dtype != dtype && s->o->weight_stats;
    s->carry_len = 0;
    s->cast_over = s->cast_seen = 0;
    wpk_acc_init(&s->acc);
    if (s->dst_dtype != dtype && !s->cbuf && !(s->cbuf = malloc(CAST_ELEMS * 8)))
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    uint64_t one = 1;
    int rc = wpack_writer_begin_tensor(s->w, s->name, s->dst_dtype, rank, rank ? dims : &one);
    if (rc)
        return writer_failed(s, rc, s->name);
    if (!owner_add(s, s->name))
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    s->in_tensor = 1;
    return WPACK_OK;
}

/* Whole source elements: stats, cast, write. */
static int put_elems(wpk_sink *s, const uint8_t *p, size_t count)
{
    if (s->own_stats) /* the same bits on the executor or not */
        wpk_acc_feed_on(&s->acc, s->src_dtype, p, count, s->o->portable_stats, s->o->executor, NULL,
                        NULL);
    while (count) {
        size_t k = count < CAST_ELEMS ? count : CAST_ELEMS;
        uint16_t *dst = (uint16_t *)(void *)s->cbuf;
        s->cast_over += wpk_cast_block(s->src_dtype, p, s->dst_dtype, dst, k);
        s->cast_seen += k;
        for (size_t i = 0; i < k; i++) /* little-endian on any host */
            wpk_st16(s->cbuf + 2 * i, dst[i]);
        int rc = wpack_writer_write(s->w, s->cbuf, k * 2);
        if (rc)
            return writer_failed(s, rc, s->name);
        p += k * s->src_size;
        count -= k;
    }
    return WPACK_OK;
}

int wpk_sink_write(wpk_sink *s, const void *data, size_t n)
{
    if (!s->in_tensor)
        return wpk_sink_fail(s, WPACK_E_STATE, "write outside a tensor");
    if (s->dst_dtype == s->src_dtype) {
        int rc = wpack_writer_write(s->w, data, n);
        return rc ? writer_failed(s, rc, s->name) : WPACK_OK;
    }
    const uint8_t *p = data;
    size_t es = s->src_size;
    if (s->carry_len) {
        size_t k = es - s->carry_len < n ? es - s->carry_len : n;
        memcpy(s->carry + s->carry_len, p, k);
        s->carry_len += k;
        p += k;
        n -= k;
        if (s->carry_len < es)
            return WPACK_OK;
        s->carry_len = 0;
        int rc = put_elems(s, s->carry, 1);
        if (rc)
            return rc;
    }
    size_t whole = n / es;
    int rc = put_elems(s, p, whole);
    if (rc)
        return rc;
    memcpy(s->carry, p + whole * es, n - whole * es);
    s->carry_len = n - whole * es;
    return WPACK_OK;
}

int wpk_sink_write_mapped(wpk_sink *s, const wpk_mapped *m, const void *data, size_t n)
{
    const uint8_t *d = data;
    if (!s->in_tensor || s->dst_dtype != s->src_dtype || m->fd < 0 || !m->p || d < m->p ||
        !wpk_in_bounds((uint64_t)(d - m->p), n, m->len))
        return wpk_sink_write(s, data, n);
    int rc = wpack_writer_write_from_fd(s->w, data, m->fd, (uint64_t)(d - m->p), n);
    return rc ? writer_failed(s, rc, s->name) : WPACK_OK;
}

/* The mapped way (a mapping without its file): pieces of the mapping,
 * each piece's pages leaving this process once written. */
static int stream_from_map(wpk_sink *s, const wpk_mapped *m, uint64_t off, uint64_t len,
                           uint32_t *crc)
{
    for (uint64_t done = 0; done < len;) {
        size_t k = len - done < WPK_MAP_PIECE ? (size_t)(len - done) : WPK_MAP_PIECE;
        if (crc)
            *crc = wpk_crc32(*crc, m->p + off + done, k);
        int rc = wpk_sink_write_mapped(s, m, m->p + off + done, k);
        if (rc)
            return rc;
        wpk_map_release(m, off + done, k);
        done += k;
        wpk_sink_progress(s, k);
    }
    return WPACK_OK;
}

int wpk_sink_stream_file(wpk_sink *s, const wpk_mapped *m, uint64_t off, uint64_t len,
                         uint32_t *crc)
{
    if (!wpk_in_bounds(off, len, m->len))
        return wpk_sink_fail(s, WPACK_E_BOUNDS, "bytes %llu..+%llu lie outside the input",
                             (unsigned long long)off, (unsigned long long)len);
    if (m->fd < 0)
        return stream_from_map(s, m, off, len, crc);
    if (!s->rbuf && !(s->rbuf = malloc(WPK_READ_STEP)))
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    for (uint64_t done = 0; done < len;) {
        size_t k = len - done < WPK_READ_STEP ? (size_t)(len - done) : WPK_READ_STEP;
        int e = wpk_pread_all(m->fd, s->rbuf, k, off + done);
        if (e) /* the file shrank or failed since it was mapped and checked */
            return wpk_sink_fail(s, WPACK_E_IO, "reading bytes %llu..+%zu failed: %s",
                                 (unsigned long long)(off + done), k,
                                 e == ENODATA ? "the file ended early" : strerror(e));
        if (crc)
            *crc = wpk_crc32(*crc, s->rbuf, k);
        int rc;
        if (s->in_tensor && s->dst_dtype == s->src_dtype) {
            rc = wpack_writer_write_from_fd(s->w, s->rbuf, m->fd, off + done, k);
            rc = rc ? writer_failed(s, rc, s->name) : WPACK_OK;
        } else {
            rc = wpk_sink_write(s, s->rbuf, k);
        }
        if (rc)
            return rc;
        done += k;
        wpk_sink_progress(s, k);
    }
    return WPACK_OK;
}

int wpk_sink_stream_mapped(wpk_sink *s, const wpk_mapped *m, uint64_t off, uint64_t len)
{
    return wpk_sink_stream_file(s, m, off, len, NULL);
}

int wpk_sink_end(wpk_sink *s)
{
    if (!s->in_tensor)
        return wpk_sink_fail(s, WPACK_E_STATE, "end outside a tensor");
    int rc = wpack_writer_end_tensor(s->w);
    if (rc)
        return writer_failed(s, rc, s->name);
    s->in_tensor = 0;
    s->tensors++;
    if (s->cast_over) {
        char why[200];
        wpk_cast_overflow_text(why, sizeof why, s->cast_over, s->cast_seen, s->dst_dtype);
        wpk_sink_warn(s, "tensor '%s': %s", s->name, why);
    }
    if (s->own_stats && s->acc.n) {
        /* The statistics of the values before the cast replace the writer's. */
        double mean, var, absmax;
        wpk_acc_summary(&s->acc, &mean, &var, &absmax);
        wpack_stats_in st = {.key = s->name, .kind = WPACK_STATS_WEIGHT,
                             .granularity = WPACK_GRAN_TENSOR, .channels = 1,
                             .count = s->acc.n, .min = &s->acc.min, .max = &s->acc.max,
                             .absmax = &absmax, .mean = &mean, .variance = &var};
        rc = wpack_writer_add_stats(s->w, &st);
        if (rc)
            return writer_failed(s, rc, s->name);
    }
    return WPACK_OK;
}

/* After the writer took (rc 0) or refused entry `name` made in one call. */
static int added(wpk_sink *s, int rc, const char *name)
{
    if (rc)
        return writer_failed(s, rc, name);
    if (!owner_add(s, name))
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    s->tensors++;
    return WPACK_OK;
}

int wpk_sink_splat(wpk_sink *s, const char *name, int dtype, unsigned rank, const uint64_t *dims,
                   const void *fill)
{
    if (s->in_tensor)
        return wpk_sink_fail(s, WPACK_E_STATE, "splat '%s' inside '%s'", name, s->name);
    char *n = full_name(s, name);
    if (!n)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    int dst = wants_cast(s, n, dtype) ? s->o->cast : dtype;
    uint8_t le[2];
    if (dst != dtype) {
        uint16_t h;
        if (wpk_cast_block(dtype, fill, dst, &h, 1))
            wpk_sink_warn(s, "tensor '%s': its one value (a splat) is beyond %s's range and "
                          "became +-inf", n, dst == WPACK_DTYPE_BF16 ? "bf16" : "f16");
        wpk_st16(le, h);
        fill = le;
    }
    uint64_t one = 1;
    size_t fs = wpack_dtype_size(dst);
    for (struct wpk_sink_dtype *d = s->dtypes; d && !fs; d = d->next)
        if (d->code == dst) /* a block dtype's element is one block */
            fs = d->block_bytes;
    int rc = added(s, wpack_writer_add_splat(s->w, n, dst, rank, rank ? dims : &one, fill, fs), n);
    free(n);
    return rc;
}

int wpk_sink_room(wpk_sink *s, const char *what, uint64_t nbytes)
{
    if (s->o && s->o->cast)
        return WPACK_OK;
    int rc = wpack_writer_room(s->w, what, nbytes);
    return rc ? wpk_sink_fail(s, rc, "%s", wpack_writer_errmsg(s->w)) : WPACK_OK;
}

int wpk_sink_alias(wpk_sink *s, const char *name, const char *target)
{
    char *n = full_name(s, name), *t = full_name(s, target);
    int rc = WPACK_OK;
    if (!n || !t)
        rc = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    else
        rc = added(s, wpack_writer_add_alias(s->w, n, t), n);
    free(n);
    free(t);
    return rc;
}

/* ------------------------------------------------------------ metadata */

static int meta_done(wpk_sink *s, int rc, const char *key)
{
    if (rc == WPACK_E_EXISTS)
        return wpk_sink_fail(s, rc, "metadata key '%s' is already set (by an earlier input?)",
                             key);
    if (rc)
        return writer_failed(s, rc, key);
    s->metas++;
    return WPACK_OK;
}

#define META_SETTER(fn, type, call)                                              \
    int fn(wpk_sink *s, const char *key, type v)                                 \
    {                                                                            \
        char *k = full_name(s, key);                                             \
        if (!k)                                                                  \
            return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");             \
        int rc = meta_done(s, call(s->w, k, v), k);                              \
        free(k);                                                                 \
        return rc;                                                               \
    }
META_SETTER(wpk_sink_meta_string, const char *, wpack_writer_set_string)
META_SETTER(wpk_sink_meta_i64, int64_t, wpack_writer_set_i64)
META_SETTER(wpk_sink_meta_f64, double, wpack_writer_set_f64)
META_SETTER(wpk_sink_meta_bool, int, wpack_writer_set_bool)

int wpk_sink_meta_bytes(wpk_sink *s, const char *key, const void *v, size_t len)
{
    char *k = full_name(s, key);
    if (!k)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    int rc = meta_done(s, wpack_writer_set_bytes(s->w, k, v, len), k);
    free(k);
    return rc;
}

int wpk_sink_meta_array(wpk_sink *s, const char *key, int elem_type, uint64_t count,
                        const void *values)
{
    char *k = full_name(s, key);
    if (!k)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    int rc = meta_done(s, wpack_writer_set_array(s->w, k, elem_type, count, values), k);
    free(k);
    return rc;
}

/* ------------------------------------------------------------ block dtypes */

int wpk_sink_block_dtype(wpk_sink *s, const char *name, uint32_t block_elems,
                         uint32_t block_bytes, const void *params, size_t params_len, int *code)
{
    for (struct wpk_sink_dtype *d = s->dtypes; d; d = d->next) {
        if (strcmp(d->name, name) != 0)
            continue;
        if (d->block_elems != block_elems || d->block_bytes != block_bytes ||
            d->params_len != params_len || (params_len && memcmp(d->params, params, params_len)))
            return wpk_sink_fail(s, WPACK_E_DTYPE, "block dtype '%s' defined twice, differently",
                                 name);
        *code = d->code;
        return WPACK_OK;
    }
    size_t n = strlen(name);
    struct wpk_sink_dtype *d = calloc(1, sizeof *d + n + 1);
    if (!d || (params_len && !(d->params = malloc(params_len)))) {
        free(d);
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    }
    int rc = wpack_writer_add_block_dtype(s->w, name, block_elems, block_bytes, params,
                                          params_len, &d->code);
    if (rc) {
        free(d->params);
        free(d);
        return writer_failed(s, rc, name);
    }
    memcpy(d->name, name, n + 1);
    if (params_len)
        memcpy(d->params, params, params_len);
    d->params_len = params_len;
    d->block_elems = block_elems;
    d->block_bytes = block_bytes;
    d->next = s->dtypes;
    s->dtypes = d;
    *code = d->code;
    return WPACK_OK;
}
