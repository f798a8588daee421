/*
 * fuzz_roundtrip.c - the writer against the reader. The input is a little
 * program: writer options, then operations (add a tensor whole or streamed,
 * a splat, an alias, a block dtype, metadata, a name-map name, stats), each
 * taking its names, dtype, shape and bytes from the input. Every operation
 * is given to the writer and kept in a model when the writer accepts it.
 * The archive is finished into a mkstemp file under fuzz_tmpdir() ($TMPDIR,
 * else /dev/shm, else /tmp), opened with verification and compared with the
 * model; the file is removed at the end. fsync is stubbed out (below).
 *
 * It aborts when
 *   - the writer rejects an operation with a code that does not fit it, or
 *     rejects a shape, fill or stats record the model says is valid;
 *   - finish fails when the model says it must succeed, or the reverse;
 *   - the reader rejects what the writer wrote;
 *   - anything read back (tensor bytes, fills, shapes, metadata values,
 *     name map, stats, automatic weight stats) differs from the model.
 * Names come from the bytes: mostly from a small alphabet (so that
 * duplicates and shared prefixes are common), sometimes raw; the writer
 * rejecting a raw name is fine, the operation is then skipped.
 */
#include <math.h>
#include <stdarg.h>
#include <unistd.h>

#include "bytes.h"
#include "fuzz.h"
#include "internal.h"
#include "layout.h"
#include "wpack.h"

enum {
    MAX_ENT = 24, MAX_META = 8, MAX_MAP = 6, MAX_STATS = 6, MAX_DT = 4, MAX_OPS = 64,
    NAME_LEN = 24, MAX_BYTES = 12288, MAX_CH = 4, MAX_BINS = 3, MAX_PCT = 3, MAX_ELEMS = 5,
};

#define BIT(code) (1ull << (code))

typedef char name_t[NAME_LEN + 1];

typedef struct {
    const uint8_t *p;
    size_t n, i;
} input;

/* Input bytes; zeros once it is used up. */
static uint8_t u8(input *in)
{
    return in->i < in->n ? in->p[in->i++] : 0;
}

static uint64_t u64(input *in)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)u8(in) << (8 * k);
    return v;
}

static void take(input *in, uint8_t *out, size_t n)
{
    for (size_t k = 0; k < n; k++)
        out[k] = u8(in);
}

typedef struct {
    name_t name, target;         /* target: aliases */
    int kind, dtype;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t nbytes;
    size_t fill_size;            /* splats */
    uint8_t bytes[MAX_BYTES];    /* the data, or the fill */
} ent;

typedef struct {
    name_t key;
    int type, elem;
    uint64_t value;              /* i64, f64 bits, bool */
    size_t len;                  /* string or bytes length, array count */
    char bytes[32];              /* string (NUL-terminated) or bytes */
    uint64_t arr[MAX_ELEMS];     /* i64, f64 bits or bool elements */
    name_t strs[MAX_ELEMS];      /* string elements */
} meta;

typedef struct {
    name_t other, entry;
} mapping;

typedef struct {
    name_t key;
    int kind, gran;
    uint32_t axis, channels, bins, pcts;
    uint64_t count;
    double v[5][MAX_CH];         /* min, max, absmax, mean, variance */
    double edges[MAX_BINS + 1];
    uint64_t counts[MAX_BINS];
    double pct[2 * MAX_PCT];
} stats;

typedef struct {
    int code;
    uint32_t elems, bytes;
    name_t name;
    size_t plen;
    uint8_t params[8];
} block_dtype;

typedef struct {
    wpack_writer *w;
    wpack_writer_options opt;
    ent e[MAX_ENT];
    size_t ne;
    meta m[MAX_META];
    size_t nm;
    int producer_set;            /* the input set "wpack.producer" itself */
    mapping map[MAX_MAP];
    size_t nmap;
    stats s[MAX_STATS];
    size_t ns;
    block_dtype dt[MAX_DT];
    size_t ndt;
} model;

/* FUZZ_TRACE=1 in the environment prints every operation, for triage. */
static int tracing = -1;

static void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace(const char *fmt, ...)
{
    if (tracing < 0)
        tracing = getenv("FUZZ_TRACE") != NULL;
    if (!tracing)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* A name or key the format refuses: the writer checks it first, so a call
 * that has one fails with WPACK_E_NAME whatever else is wrong with it. */
static int bad_name(const char *name)
{
    return wpk_name_problem((const uint8_t *)name, strlen(name)) != NULL;
}

/* A writer call that failed must have failed with one of the allowed codes. */
static void rejected(const model *md, int rc, uint64_t allowed, const char *what)
{
    trace("  rejected %s: %s", what, wpack_writer_errmsg(md->w));
    FUZZ_ASSERT(rc > 0 && rc < 64 && ((allowed >> rc) & 1), "%s: writer rc %d (%s): %s", what,
                rc, wpack_error_name(rc), wpack_writer_errmsg(md->w));
}

/* ---------------------------------------------------------------- names */

static void gen_name(input *in, char *out)
{
    static const char alphabet[8] = "ab.01xy_";
    uint8_t b = u8(in);
    size_t len = (size_t)(b & 0x1f) % (NAME_LEN + 1);
    for (size_t k = 0; k < len; k++) {
        uint8_t c = u8(in);
        out[k] = (b & 0x40) ? (char)c : alphabet[c % 8];
    }
    out[len] = 0;
}

static int find_ent(const model *md, const char *name)
{
    for (size_t i = 0; i < md->ne; i++)
        if (strcmp(md->e[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The name of an entry added before, or a new one. */
static void ref_name(input *in, const model *md, char *out)
{
    uint8_t b = u8(in);
    if ((b & 1) && md->ne)
        strcpy(out, md->e[(b >> 1) % md->ne].name);
    else
        gen_name(in, out);
}

/* An alias's target entry, or the entry itself. */
static const ent *resolved(const model *md, const ent *e)
{
    if (e->kind != WPACK_KIND_ALIAS)
        return e;
    int t = find_ent(md, e->target);
    return t < 0 ? NULL : &md->e[t];
}

/* --------------------------------------------------------------- shapes */

static int pick_dtype(input *in, const model *md)
{
    static const int bad[6] = {0, 16, 127, 255, 300, -1};
    uint8_t b = u8(in);
    if (b < 0xd0)
        return b % 15 + 1;
    if (b < 0xf8)
        return md->ndt ? md->dt[b % md->ndt].code : WPACK_DTYPE_BLOCK_BASE;
    return bad[b % 6];
}

/* Bytes per element (per block) and elements per block; 0 if unknown. */
static uint64_t unit_of(const model *md, int dtype, uint64_t *block)
{
    *block = 1;
    if (dtype >= WPACK_DTYPE_BLOCK_BASE && dtype < WPACK_DTYPE_BLOCK_BASE + (int)md->ndt) {
        *block = md->dt[dtype - WPACK_DTYPE_BLOCK_BASE].elems;
        return md->dt[dtype - WPACK_DTYPE_BLOCK_BASE].bytes;
    }
    return wpack_dtype_size(dtype);
}

/* Mostly rank 0..4, sometimes up to 10 (above 8 is invalid). */
static unsigned pick_rank(input *in)
{
    uint8_t r = u8(in);
    return r < 240 ? r % 5u : 5u + r % 6u;
}

/* The writer's rule for a shape: 1 and *nbytes when valid. */
static int shape_bytes(const model *md, int dtype, unsigned rank, const uint64_t *dims,
                       uint64_t *nbytes)
{
    uint64_t block, unit = unit_of(md, dtype, &block), n = 1;
    if (rank > WPACK_MAX_RANK || !unit)
        return 0;
    for (unsigned d = 0; d < rank; d++)
        if (__builtin_mul_overflow(n, dims[d], &n))
            return 0;
    if (dtype >= WPACK_DTYPE_BLOCK_BASE) { /* rank 0 too with 1-element blocks (spec 7.2) */
        if (!rank || dims[rank - 1] % block)
            return 0;
        n /= block;
    }
    return !__builtin_mul_overflow(n, unit, nbytes);
}

/* Dims for a tensor with bytes: mostly 0..4, sometimes a few hundred (so
 * that compressed tensors span chunks), clamped so the data fits MAX_BYTES. */
static void data_dims(input *in, const model *md, int dtype, unsigned rank, uint64_t *dims)
{
    uint64_t block, unit = unit_of(md, dtype, &block), n = 1;
    if (!unit)
        unit = 8;
    for (unsigned d = 0; d < rank && d < WPACK_MAX_RANK + 2; d++) {
        uint8_t b = u8(in);
        dims[d] = b >= 0xf0 ? 256u * (b & 15u) : (b & 0x80) && d + 1 == rank ? block * (b % 3u) : b % 5u;
        if (n * dims[d] * unit > MAX_BYTES)
            dims[d] = 1;
        n *= dims[d] ? dims[d] : 1;
    }
}

/* Dims for a splat: anything, including products that overflow. */
static void splat_dims(input *in, unsigned rank, uint64_t *dims)
{
    for (unsigned d = 0; d < rank && d < WPACK_MAX_RANK + 2; d++) {
        uint8_t b = u8(in);
        dims[d] = b == 0xff ? u64(in) : b % 17u;
    }
}

/* ------------------------------------------------------------ tensors */

/* The spec's bool rule, checked independently of the writer. */
static int bools_ok(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] > 1)
            return 0;
    return 1;
}

static void op_tensor(model *md, input *in, int streamed)
{
    ent *e = &md->e[md->ne];
    uint64_t dims[WPACK_MAX_RANK + 2] = {0}, nbytes = 0;
    memset(e, 0, sizeof *e);
    gen_name(in, e->name);
    e->kind = WPACK_KIND_DATA;
    e->dtype = pick_dtype(in, md);
    unsigned rank = pick_rank(in);
    data_dims(in, md, e->dtype, rank, dims);
    int valid = shape_bytes(md, e->dtype, rank, dims, &nbytes) && nbytes <= MAX_BYTES;
    if (!valid)
        nbytes = 0;
    take(in, e->bytes, (size_t)nbytes);
    /* bools must be 0 or 1: refused whole (add_tensor checks before it
     * begins; a refused streamed write would leave the tensor open, so
     * such data goes through add_tensor) */
    int bad_bool = valid && e->dtype == WPACK_DTYPE_BOOL && !bools_ok(e->bytes, (size_t)nbytes);
    if (bad_bool)
        streamed = 0;
    int rc;
    if (!streamed) {
        rc = wpack_writer_add_tensor(md->w, e->name, e->dtype, rank, dims, e->bytes, nbytes);
    } else {
        rc = wpack_writer_begin_tensor(md->w, e->name, e->dtype, rank, dims);
        for (size_t done = 0; rc == WPACK_OK && done < nbytes;) {
            /* Pieces of 1..40 bytes; a 0 writes nothing, then all the rest. */
            size_t k = u8(in) % 41u;
            if (!k) {
                rc = wpack_writer_write(md->w, e->bytes + done, 0);
                FUZZ_ASSERT(rc == WPACK_OK, "empty write: %s", wpack_writer_errmsg(md->w));
                k = (size_t)nbytes - done;
            }
            k = k < nbytes - done ? k : (size_t)nbytes - done;
            rc = wpack_writer_write(md->w, e->bytes + done, k);
            FUZZ_ASSERT(rc == WPACK_OK, "write of %zu bytes: %s", k, wpack_writer_errmsg(md->w));
            done += k;
        }
        if (rc == WPACK_OK) {
            rc = wpack_writer_end_tensor(md->w);
            FUZZ_ASSERT(rc == WPACK_OK, "end_tensor: %s", wpack_writer_errmsg(md->w));
        }
    }
    if (rc != WPACK_OK) {
        rejected(md, rc, bad_name(e->name) ? BIT(WPACK_E_NAME)
                         : valid ? BIT(WPACK_E_NAME) | BIT(WPACK_E_EXISTS) |
                                       (bad_bool ? BIT(WPACK_E_INVALID_ARGUMENT) : 0)
                                 : BIT(WPACK_E_DTYPE) | BIT(WPACK_E_SHAPE) | BIT(WPACK_E_RANK) |
                                       BIT(WPACK_E_OVERFLOW) | BIT(WPACK_E_SIZE),
                 "tensor");
        return;
    }
    FUZZ_ASSERT(valid, "tensor '%s': shape accepted that the model calls invalid", e->name);
    FUZZ_ASSERT(!bad_bool, "tensor '%s': bool bytes other than 0 and 1 accepted", e->name);
    trace("tensor '%s' dtype %d rank %u, %llu bytes%s", e->name, e->dtype, rank,
          (unsigned long long)nbytes, streamed ? ", streamed" : "");
    e->rank = rank;
    memcpy(e->dims, dims, sizeof e->dims);
    e->nbytes = nbytes;
    md->ne++;
}

static void op_splat(model *md, input *in)
{
    ent *e = &md->e[md->ne];
    uint64_t dims[WPACK_MAX_RANK + 2] = {0}, nbytes = 0, block;
    memset(e, 0, sizeof *e);
    gen_name(in, e->name);
    e->kind = WPACK_KIND_SPLAT;
    e->dtype = pick_dtype(in, md);
    unsigned rank = pick_rank(in);
    splat_dims(in, rank, dims);
    uint64_t unit = unit_of(md, e->dtype, &block);
    size_t fill_size = (size_t)unit + (u8(in) == 0xff); /* sometimes one byte too many */
    take(in, e->bytes, fill_size);
    int valid = shape_bytes(md, e->dtype, rank, dims, &nbytes) && fill_size == unit;
    int bad_bool = valid && e->dtype == WPACK_DTYPE_BOOL && e->bytes[0] > 1;
    int rc = wpack_writer_add_splat(md->w, e->name, e->dtype, rank, dims, e->bytes, fill_size);
    if (rc != WPACK_OK) {
        rejected(md, rc, bad_name(e->name) ? BIT(WPACK_E_NAME)
                         : valid ? BIT(WPACK_E_NAME) | BIT(WPACK_E_EXISTS) |
                                       (bad_bool ? BIT(WPACK_E_INVALID_ARGUMENT) : 0)
                                 : BIT(WPACK_E_DTYPE) | BIT(WPACK_E_SHAPE) | BIT(WPACK_E_RANK) |
                                       BIT(WPACK_E_OVERFLOW) | BIT(WPACK_E_SIZE),
                 "splat");
        return;
    }
    FUZZ_ASSERT(valid, "splat '%s': accepted though the model calls it invalid", e->name);
    FUZZ_ASSERT(!bad_bool, "splat '%s': bool fill other than 0 or 1 accepted", e->name);
    trace("splat '%s' dtype %d rank %u, %llu bytes", e->name, e->dtype, rank,
          (unsigned long long)nbytes);
    e->rank = rank;
    memcpy(e->dims, dims, sizeof e->dims);
    e->nbytes = nbytes;
    e->fill_size = fill_size;
    md->ne++;
}

static void op_alias(model *md, input *in)
{
    ent *e = &md->e[md->ne];
    memset(e, 0, sizeof *e);
    gen_name(in, e->name);
    ref_name(in, md, e->target);
    e->kind = WPACK_KIND_ALIAS;
    int rc = wpack_writer_add_alias(md->w, e->name, e->target);
    if (rc != WPACK_OK) {
        rejected(md, rc, BIT(WPACK_E_NAME) | BIT(WPACK_E_EXISTS), "alias");
        return;
    }
    trace("alias '%s' -> '%s'", e->name, e->target);
    md->ne++;
}

static void op_block_dtype(model *md, input *in)
{
    name_t name;
    uint8_t params[8];
    gen_name(in, name);
    uint32_t elems = u8(in) % 9u, bytes = u8(in) % 9u;
    size_t plen = u8(in) % 9u;
    take(in, params, plen);
    int code = -1;
    int rc = wpack_writer_add_block_dtype(md->w, name, elems, bytes, plen ? params : NULL, plen,
                                          &code);
    if (rc != WPACK_OK) {
        rejected(md, rc, elems && bytes ? BIT(WPACK_E_NAME) : BIT(WPACK_E_DTYPE), "block dtype");
        return;
    }
    FUZZ_ASSERT(elems && bytes && code == WPACK_DTYPE_BLOCK_BASE + (int)md->ndt,
                "block dtype %u/%u accepted as code %d", elems, bytes, code);
    block_dtype *d = &md->dt[md->ndt++];
    d->code = code;
    d->elems = elems;
    d->bytes = bytes;
    strcpy(d->name, name);
    d->plen = plen;
    memcpy(d->params, params, plen);
    trace("block dtype %d: %u elements in %u bytes", code, elems, bytes);
}

/* ------------------------------------------------- metadata, name map */

static void op_meta(model *md, input *in)
{
    static const int elems[6] = {WPACK_META_I64, WPACK_META_F64, WPACK_META_BOOL,
                                 WPACK_META_STRING, WPACK_META_BYTES, 77};
    meta *m = &md->m[md->nm];
    memset(m, 0, sizeof *m);
    gen_name(in, m->key);
    int rc = WPACK_OK;
    uint64_t allowed = BIT(WPACK_E_NAME) | BIT(WPACK_E_EXISTS);
    switch (u8(in) % 6) {
    case 0:
        m->type = WPACK_META_STRING;
        gen_name(in, m->bytes);
        m->len = strlen(m->bytes);
        rc = wpack_writer_set_string(md->w, m->key, m->bytes);
        allowed |= BIT(WPACK_E_METADATA);
        break;
    case 1:
        m->type = WPACK_META_I64;
        m->value = u64(in);
        rc = wpack_writer_set_i64(md->w, m->key, (int64_t)m->value);
        break;
    case 2: {
        double d;
        m->type = WPACK_META_F64;
        m->value = u64(in);
        memcpy(&d, &m->value, sizeof d);
        rc = wpack_writer_set_f64(md->w, m->key, d);
        break;
    }
    case 3: {
        int b = (int)(int8_t)u8(in);
        m->type = WPACK_META_BOOL;
        m->value = b != 0;
        rc = wpack_writer_set_bool(md->w, m->key, b);
        break;
    }
    case 4:
        m->type = WPACK_META_BYTES;
        m->len = u8(in) % 33u;
        take(in, (uint8_t *)m->bytes, m->len);
        rc = wpack_writer_set_bytes(md->w, m->key, m->bytes, m->len);
        break;
    default: {
        int64_t i64s[MAX_ELEMS];
        double f64s[MAX_ELEMS];
        int bools[MAX_ELEMS];
        const char *strs[MAX_ELEMS];
        wpack_bytes blobs[MAX_ELEMS];
        const void *values = NULL;
        m->type = WPACK_META_ARRAY;
        m->elem = elems[u8(in) % 6];
        m->len = u8(in) % (MAX_ELEMS + 1u);
        for (size_t j = 0; j < m->len; j++) {
            m->arr[j] = u64(in);
            i64s[j] = (int64_t)m->arr[j];
            memcpy(&f64s[j], &m->arr[j], sizeof f64s[j]);
            bools[j] = (int)(m->arr[j] & 3);
            if (m->elem == WPACK_META_BOOL)
                m->arr[j] = bools[j] != 0;
            gen_name(in, m->strs[j]);
            strs[j] = m->strs[j];
            /* bytes elements: the first arr[j] bytes of strs[j] (NULs included) */
            if (m->elem == WPACK_META_BYTES)
                m->arr[j] %= sizeof m->strs[j] + 1;
            blobs[j] = (wpack_bytes){m->strs[j], (size_t)m->arr[j]};
        }
        values = m->elem == WPACK_META_I64 ? (const void *)i64s
               : m->elem == WPACK_META_F64 ? (const void *)f64s
               : m->elem == WPACK_META_BOOL ? (const void *)bools
               : m->elem == WPACK_META_BYTES ? (const void *)blobs : (const void *)strs;
        rc = wpack_writer_set_array(md->w, m->key, m->elem, m->len, values);
        allowed |= BIT(WPACK_E_METADATA) | BIT(WPACK_E_INVALID_ARGUMENT);
        break;
    }
    }
    if (rc != WPACK_OK) {
        rejected(md, rc, allowed, "metadata");
        return;
    }
    trace("metadata '%s' type %d elem %d count %zu", m->key, m->type, m->elem, m->len);
    if (strcmp(m->key, "wpack.producer") == 0)
        md->producer_set = 1;
    md->nm++;
}

static void op_name(model *md, input *in)
{
    mapping *n = &md->map[md->nmap];
    gen_name(in, n->other);
    ref_name(in, md, n->entry);
    int rc = wpack_writer_add_name(md->w, n->other, n->entry);
    if (rc != WPACK_OK) {
        rejected(md, rc, BIT(WPACK_E_NAME) | BIT(WPACK_E_EXISTS), "name map");
        return;
    }
    trace("name '%s' -> '%s'", n->other, n->entry);
    md->nmap++;
}

/* -------------------------------------------------------------- stats */

static void op_stats(model *md, input *in)
{
    stats *s = &md->s[md->ns];
    memset(s, 0, sizeof *s);
    uint8_t b = u8(in);
    s->kind = b & 1 ? WPACK_STATS_WEIGHT : WPACK_STATS_ACTIVATION;
    s->gran = b & 2 ? WPACK_GRAN_CHANNEL : WPACK_GRAN_TENSOR;
    if (s->kind == WPACK_STATS_WEIGHT)
        ref_name(in, md, s->key);
    else
        gen_name(in, s->key);
    s->channels = 1;
    if (s->gran == WPACK_GRAN_CHANNEL) {
        s->axis = u8(in) % 3u;
        s->channels = u8(in) % MAX_CH + 1u;
        int t = find_ent(md, s->key);
        const ent *e = t < 0 ? NULL : resolved(md, &md->e[t]);
        /* Usually fit the tensor: its own dims on an axis it has. */
        if ((b & 4) && e && e->rank && e->dims[s->axis % e->rank] >= 1 &&
            e->dims[s->axis % e->rank] <= MAX_CH) {
            s->axis %= e->rank;
            s->channels = (uint32_t)e->dims[s->axis];
        }
    }
    for (uint32_t c = 0; c < s->channels; c++) {
        double mn = (int8_t)u8(in), mx = mn + u8(in) % 8u;
        s->v[0][c] = mn;
        s->v[1][c] = mx;
        s->v[2][c] = fmax(fabs(mn), fabs(mx));
        s->v[3][c] = mn + (mx - mn) * (u8(in) % 5u) / 4.0;
        s->v[4][c] = u8(in) / 4.0;
    }
    int corrupt = u8(in) == 0xff;
    if (corrupt)
        s->v[2][0] += 1; /* absmax no longer max(|min|, |max|) */
    s->count = u8(in);
    s->bins = u8(in) % (MAX_BINS + 1u);
    if (s->bins) {
        s->edges[0] = (int8_t)u8(in);
        s->count = 0;
        for (uint32_t k = 0; k < s->bins; k++) {
            s->edges[k + 1] = s->edges[k] + 1 + u8(in) % 3u;
            s->counts[k] = u8(in);
            s->count += s->counts[k];
        }
    }
    s->pcts = u8(in) % (MAX_PCT + 1u);
    int pct_ok = 1;
    for (uint32_t j = 0; j < s->pcts; j++) {
        s->pct[2 * j] = (j ? s->pct[2 * j - 2] + 1 : 0) + u8(in) % 40u;
        s->pct[2 * j + 1] = (j ? s->pct[2 * j - 1] : -2) + u8(in) % 3u;
        pct_ok = pct_ok && s->pct[2 * j] <= 100;
    }
    wpack_stats_in si = {
        .key = s->key, .kind = s->kind, .granularity = s->gran, .axis = s->axis,
        .channels = s->channels, .count = s->count, .min = s->v[0], .max = s->v[1],
        .absmax = s->v[2], .mean = s->v[3], .variance = s->v[4], .hist_bins = s->bins,
        .hist_edges = s->edges, .hist_counts = s->counts, .percentile_count = s->pcts,
        .percentiles = s->pct,
    };
    int valid = !corrupt && pct_ok;
    int rc = wpack_writer_add_stats(md->w, &si);
    if (rc != WPACK_OK) {
        rejected(md, rc, bad_name(s->key) || valid ? BIT(WPACK_E_NAME) : BIT(WPACK_E_STATS), "stats");
        return;
    }
    FUZZ_ASSERT(valid, "stats '%s': invalid record accepted", s->key);
    trace("stats '%s' kind %d granularity %d axis %u channels %u bins %u percentiles %u", s->key,
          s->kind, s->gran, s->axis, s->channels, s->bins, s->pcts);
    md->ns++;
}

/* ------------------------------------------------------------- finish */

/* What finish checks across records: 1 when it must fail. */
/* Name-map record i names no entry but a module path with activation stats:
 * the writer keeps it in metadata wpack.module_names, not in the name map. */
static int module_name(const model *md, size_t i)
{
    if (find_ent(md, md->map[i].entry) >= 0)
        return 0;
    for (size_t k = 0; k < md->ns; k++)
        if (md->s[k].kind == WPACK_STATS_ACTIVATION && strcmp(md->s[k].key, md->map[i].entry) == 0)
            return 1;
    return 0;
}

static size_t module_name_count(const model *md)
{
    size_t n = 0;
    for (size_t i = 0; i < md->nmap; i++)
        n += (size_t)module_name(md, i);
    return n;
}

static int finish_must_fail(const model *md)
{
    for (size_t i = 0; i < md->ne; i++) {
        const ent *t = resolved(md, &md->e[i]);
        if (!t || t->kind == WPACK_KIND_ALIAS)
            return 1;
    }
    for (size_t i = 0; i < md->nmap; i++)
        if (find_ent(md, md->map[i].entry) < 0 && !module_name(md, i))
            return 1;
    for (size_t i = 0; i < md->nm && module_name_count(md); i++)
        if (strcmp(md->m[i].key, "wpack.module_names") == 0)
            return 1; /* the writer's own key is taken: EXISTS */
    for (size_t i = 0; i < md->ns; i++) {
        const stats *s = &md->s[i];
        for (size_t j = 0; j < i; j++)
            if (md->s[j].kind == s->kind && strcmp(md->s[j].key, s->key) == 0)
                return 1;
        if (s->kind != WPACK_STATS_WEIGHT)
            continue;
        int t = find_ent(md, s->key);
        if (t < 0)
            return 1;
        const ent *e = resolved(md, &md->e[t]);
        if (s->gran == WPACK_GRAN_CHANNEL && (s->axis >= e->rank || s->channels != e->dims[s->axis]))
            return 1;
    }
    return 0;
}

/* ----------------------------------------------------------- read back */

/* Element k of a float tensor as a double (as the writer widens it). */
static double elem_value(const ent *e, uint64_t k)
{
    const uint8_t *p = e->bytes;
    switch (e->dtype) {
    case WPACK_DTYPE_F64:
        return wpk_ldf64(p + 8 * k);
    case WPACK_DTYPE_F32: {
        uint32_t u = wpk_ld32(p + 4 * k);
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case WPACK_DTYPE_F16:
        return wpk_f16_to_f32(wpk_ld16(p + 2 * k));
    case WPACK_DTYPE_BF16:
        return wpk_bf16_to_f32(wpk_ld16(p + 2 * k));
    case WPACK_DTYPE_F8E4M3FN:
        return wpk_f8e4m3fn_to_f32(p[k]);
    default:
        return wpk_f8e5m2_to_f32(p[k]);
    }
}

static int has_user_weight_stats(const model *md, const char *name)
{
    for (size_t i = 0; i < md->ns; i++)
        if (md->s[i].kind == WPACK_STATS_WEIGHT && strcmp(md->s[i].key, name) == 0)
            return 1;
    return 0;
}

/* Finite values of a float data entry, their min and max. */
static uint64_t finite_values(const ent *e, double *mn, double *mx)
{
    uint64_t n = 0, ne = e->nbytes / wpack_dtype_size(e->dtype);
    *mn = *mx = 0;
    for (uint64_t k = 0; k < ne; k++) {
        double v = elem_value(e, k);
        if (!isfinite(v))
            continue;
        *mn = n == 0 || v < *mn ? v : *mn;
        *mx = n == 0 || v > *mx ? v : *mx;
        n++;
    }
    return n;
}

/* The writer adds weight stats to float data entries that have finite
 * values and no stats from the caller. */
static int gets_auto_stats(const model *md, const ent *e)
{
    double mn, mx;
    return e->kind == WPACK_KIND_DATA && md->opt.weight_stats && wpack_dtype_is_float(e->dtype) &&
           !has_user_weight_stats(md, e->name) && finite_values(e, &mn, &mx) > 0;
}

/* The automatic weight stats of an entry: count, min, max, bins. */
static void check_auto_stats(const model *md, const wpack_archive *ar, const ent *e)
{
    double mn, mx;
    uint64_t n = finite_values(e, &mn, &mx);
    wpack_stats s;
    FUZZ_ASSERT(wpack_stats_find(ar, e->name, WPACK_STATS_WEIGHT, &s) == WPACK_OK,
                "tensor '%s': no automatic weight stats", e->name);
    uint32_t bins = md->opt.histogram_bins;
    FUZZ_ASSERT(s.granularity == WPACK_GRAN_TENSOR && s.channels == 1 && s.count == n &&
                    s.min == mn && s.max == mx && s.hist_bins == bins,
                "tensor '%s': weight stats count %llu min %g max %g bins %u, expected %llu %g %g %u",
                e->name, (unsigned long long)s.count, s.min, s.max, s.hist_bins,
                (unsigned long long)n, mn, mx, bins);
}

static void check_entries(const model *md, const wpack_archive *ar, int *any_zstd)
{
    uint8_t got[MAX_BYTES];
    wpack_tensor t, prev, u;
    memset(&prev, 0, sizeof prev);
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        FUZZ_ASSERT(wpack_tensor_at(ar, i, &t) == WPACK_OK, "tensor_at %llu", (unsigned long long)i);
        if (i)
            FUZZ_ASSERT(strcmp(prev.name, t.name) < 0, "entries '%s', '%s' out of order", prev.name,
                        t.name);
        prev = t;
    }
    for (size_t i = 0; i < md->ne; i++) {
        const ent *e = &md->e[i], *r = resolved(md, e);
        FUZZ_ASSERT(wpack_find(ar, e->name, &t) == WPACK_OK && strcmp(t.name, e->name) == 0 &&
                        t.kind == e->kind,
                    "tensor '%s' of kind %d not read back", e->name, e->kind);
        FUZZ_ASSERT(t.dtype == r->dtype && t.rank == r->rank && t.nbytes == r->nbytes &&
                        memcmp(t.dims, r->dims, r->rank * sizeof r->dims[0]) == 0,
                    "tensor '%s': dtype %d rank %u %llu bytes, wrote dtype %d rank %u %llu bytes",
                    e->name, t.dtype, t.rank, (unsigned long long)t.nbytes, r->dtype, r->rank,
                    (unsigned long long)r->nbytes);
        if (e->kind == WPACK_KIND_ALIAS)
            FUZZ_ASSERT(wpack_find(ar, e->target, &u) == WPACK_OK && u.index == t.alias_target,
                        "alias '%s': target not '%s'", e->name, e->target);
        size_t k = t.nbytes < MAX_BYTES ? (size_t)t.nbytes : MAX_BYTES;
        FUZZ_ASSERT(wpack_read(ar, t.index, 0, got, k) == WPACK_OK, "tensor '%s': read", e->name);
        *any_zstd |= t.codec == WPACK_CODEC_ZSTD;
        if (t.codec == WPACK_CODEC_ZSTD) {
            FUZZ_ASSERT(md->opt.compress_level != 0 && r->kind == WPACK_KIND_DATA && !t.data &&
                            memcmp(got, r->bytes, k) == 0 &&
                            t.decoded_checksum == wpk_xxh3(r->bytes, (size_t)r->nbytes),
                        "compressed tensor '%s': bytes or decoded checksum differ", e->name);
        } else if (r->kind == WPACK_KIND_DATA) {
            FUZZ_ASSERT(t.data && t.stored_length == r->nbytes &&
                            memcmp(t.data, r->bytes, k) == 0 && memcmp(got, r->bytes, k) == 0,
                        "tensor '%s': bytes differ", e->name);
        } else {
            FUZZ_ASSERT(!t.data && t.fill_size == r->fill_size &&
                            memcmp(t.fill, r->bytes, r->fill_size) == 0,
                        "splat '%s': fill differs", e->name);
            for (size_t j = 0; j < k; j++)
                FUZZ_ASSERT(got[j] == r->bytes[j % r->fill_size], "splat '%s': byte %zu", e->name, j);
        }
        if (gets_auto_stats(md, e))
            check_auto_stats(md, ar, e);
    }
}

static void check_meta(const model *md, const wpack_archive *ar)
{
    size_t modules = module_name_count(md);
    FUZZ_ASSERT(wpack_meta_count(ar) == md->nm + !md->producer_set + (modules > 0),
                "%llu metadata records, wrote %zu (+ %zu module names)",
                (unsigned long long)wpack_meta_count(ar), md->nm, modules);
    if (modules) {
        /* [other, key, ...] pairs, one per module-path name */
        wpack_meta g, el;
        FUZZ_ASSERT(wpack_meta_find(ar, "wpack.module_names", &g) == WPACK_OK &&
                        g.elem_type == WPACK_META_STRING && g.count == 2 * modules,
                    "wpack.module_names: want %zu pairs", modules);
        for (size_t i = 0; i < md->nmap; i++) {
            if (!module_name(md, i))
                continue;
            int found = 0;
            for (uint64_t j = 0; j + 1 < g.count && !found; j += 2) {
                FUZZ_ASSERT(wpack_meta_elem(ar, &g, j, &el) == WPACK_OK, "wpack.module_names");
                if (strcmp(el.str, md->map[i].other) != 0)
                    continue;
                FUZZ_ASSERT(wpack_meta_elem(ar, &g, j + 1, &el) == WPACK_OK &&
                                strcmp(el.str, md->map[i].entry) == 0,
                            "wpack.module_names: '%s' -> '%s'", md->map[i].other, md->map[i].entry);
                found = 1;
            }
            FUZZ_ASSERT(found, "wpack.module_names lacks '%s'", md->map[i].other);
        }
    }
    for (size_t i = 0; i < md->nm; i++) {
        const meta *m = &md->m[i];
        wpack_meta g, el;
        FUZZ_ASSERT(wpack_meta_find(ar, m->key, &g) == WPACK_OK && g.type == m->type,
                    "metadata '%s' not read back", m->key);
        uint64_t bits;
        switch (m->type) {
        case WPACK_META_STRING:
            FUZZ_ASSERT(strcmp(g.str, m->bytes) == 0 && g.count == m->len, "metadata '%s'", m->key);
            break;
        case WPACK_META_I64:
            FUZZ_ASSERT((uint64_t)g.i64 == m->value, "metadata '%s'", m->key);
            break;
        case WPACK_META_F64:
            memcpy(&bits, &g.f64, sizeof bits);
            FUZZ_ASSERT(bits == m->value, "metadata '%s'", m->key);
            break;
        case WPACK_META_BOOL:
            FUZZ_ASSERT((uint64_t)g.boolean == m->value, "metadata '%s'", m->key);
            break;
        case WPACK_META_BYTES:
            FUZZ_ASSERT(g.count == m->len && (!m->len || memcmp(g.bytes, m->bytes, m->len) == 0),
                        "metadata '%s'", m->key);
            break;
        default:
            FUZZ_ASSERT(g.elem_type == m->elem && g.count == m->len, "metadata '%s': array",
                        m->key);
            for (size_t j = 0; j < m->len; j++) {
                FUZZ_ASSERT(wpack_meta_elem(ar, &g, j, &el) == WPACK_OK, "metadata '%s'", m->key);
                if (m->elem == WPACK_META_STRING) {
                    FUZZ_ASSERT(strcmp(el.str, m->strs[j]) == 0, "metadata '%s' [%zu]", m->key, j);
                    continue;
                }
                if (m->elem == WPACK_META_BYTES) {
                    FUZZ_ASSERT(el.count == m->arr[j] &&
                                    (!el.count || memcmp(el.bytes, m->strs[j], (size_t)el.count) == 0),
                                "metadata '%s' [%zu]: bytes", m->key, j);
                    continue;
                }
                if (m->elem == WPACK_META_BOOL)
                    bits = (uint64_t)el.boolean;
                else if (m->elem == WPACK_META_I64)
                    bits = (uint64_t)el.i64;
                else
                    memcpy(&bits, &el.f64, sizeof bits);
                FUZZ_ASSERT(bits == m->arr[j], "metadata '%s' [%zu]", m->key, j);
            }
        }
    }
}

static void check_map_and_stats(const model *md, const wpack_archive *ar)
{
    size_t modules = module_name_count(md);
    FUZZ_ASSERT(wpack_namemap_count(ar) == md->nmap - modules,
                "%llu name-map records, wrote %zu (%zu of them module paths)",
                (unsigned long long)wpack_namemap_count(ar), md->nmap, modules);
    for (size_t i = 0; i < md->nmap; i++) {
        if (module_name(md, i))
            continue; /* checked with the metadata */
        wpack_tensor a, b;
        FUZZ_ASSERT(wpack_find(ar, md->map[i].other, &a) == WPACK_OK &&
                        wpack_find(ar, md->map[i].entry, &b) == WPACK_OK && a.index == b.index,
                    "name map '%s' -> '%s' not read back", md->map[i].other, md->map[i].entry);
    }
    size_t autos = 0;
    for (size_t i = 0; i < md->ne; i++)
        autos += (size_t)gets_auto_stats(md, &md->e[i]);
    FUZZ_ASSERT(wpack_stats_count(ar) == md->ns + autos, "%llu stats records, wrote %zu + %zu",
                (unsigned long long)wpack_stats_count(ar), md->ns, autos);
    for (size_t i = 0; i < md->ns; i++) {
        const stats *s = &md->s[i];
        wpack_stats g;
        FUZZ_ASSERT(wpack_stats_find(ar, s->key, s->kind, &g) == WPACK_OK, "stats '%s' not read back",
                    s->key);
        FUZZ_ASSERT(g.granularity == s->gran && g.axis == s->axis && g.channels == s->channels &&
                        g.count == s->count && g.hist_bins == s->bins &&
                        g.percentile_count == s->pcts,
                    "stats '%s': fields differ", s->key);
        for (uint32_t c = 0; c < s->channels; c++)
            for (int w = 0; w < 5; w++)
                FUZZ_ASSERT(wpack_stats_value(&g, w, c) == s->v[w][c], "stats '%s': value %d/%u",
                            s->key, w, c);
        for (uint32_t k = 0; k < s->bins; k++) {
            double lo, hi;
            uint64_t n;
            wpack_stats_bin(&g, k, &lo, &hi, &n);
            FUZZ_ASSERT(lo == s->edges[k] && hi == s->edges[k + 1] && n == s->counts[k],
                        "stats '%s': bin %u", s->key, k);
        }
        for (uint32_t j = 0; j < s->pcts; j++) {
            double q, v;
            wpack_stats_percentile(&g, j, &q, &v);
            FUZZ_ASSERT(q == s->pct[2 * j] && v == s->pct[2 * j + 1], "stats '%s': percentile %u",
                        s->key, j);
        }
    }
}

static void check_archive(const model *md, const char *archive)
{
    wpack_archive *ar = NULL;
    int rc = wpack_open_file(&ar, archive, WPACK_OPEN_VERIFY);
    unlink(archive); /* the mapping stays valid */
    FUZZ_ASSERT(rc == WPACK_OK, "the reader rejects what the writer wrote: %s", wpack_errmsg(ar));
    wpack_info info;
    wpack_get_info(ar, &info);
    FUZZ_ASSERT(info.entry_count == md->ne && info.block_dtype_count == md->ndt &&
                    info.alignment == md->opt.alignment && info.generation == 1 && !info.recovered,
                "info: %llu entries, %llu block dtypes, alignment %u; wrote %zu, %zu, %u",
                (unsigned long long)info.entry_count, (unsigned long long)info.block_dtype_count,
                info.alignment, md->ne, md->ndt, md->opt.alignment);
    for (size_t k = 0; k < md->ndt; k++) {
        const block_dtype *d = &md->dt[k];
        const char *name;
        const void *params;
        uint32_t elems, bytes;
        uint64_t plen;
        rc = wpack_block_dtype_at(ar, k, &name, &elems, &bytes, &params, &plen);
        FUZZ_ASSERT(rc == WPACK_OK && strcmp(name, d->name) == 0 && elems == d->elems &&
                        bytes == d->bytes && plen == d->plen &&
                        (!plen || memcmp(params, d->params, plen) == 0),
                    "block dtype %zu '%s' not read back", k, d->name);
    }
    int any_zstd = 0;
    check_entries(md, ar, &any_zstd);
    FUZZ_ASSERT(!!(info.required_features & WPK_FEATURE_ZSTD) == any_zstd,
                "required features %llx, %s compressed tensor", (unsigned long long)info.required_features,
                any_zstd ? "a" : "no");
    /* chunk checksums: where they are, the archive says so (1.2, bit 0);
     * WPACK_OPEN_VERIFY above checked every one against the bytes */
    int any_sums = 0;
    for (uint64_t i = 0; i < info.entry_count; i++)
        any_sums |= wpack_tensor_chunk_size(ar, i) != 0;
    FUZZ_ASSERT(!!(info.optional_features & 1) == any_sums && (!any_sums || info.format_minor == 2),
                "optional features %llx, minor %u, %s entry with chunk checksums",
                (unsigned long long)info.optional_features, info.format_minor,
                any_sums ? "an" : "no");
    check_meta(md, ar);
    check_map_and_stats(md, ar);
    wpack_close(ar);
}

/* --------------------------------------------------------------- main */

/* Writer options from the first two bytes; *use_null: pass NULL options.
 * Returns 0 when the options are invalid (writer_open must refuse them). */
static int options(input *in, wpack_writer_options *opt, int *use_null)
{
    static const uint32_t bins[8] = {0, 0, 0, 1, 2, 4, 16, 255};
    static const uint32_t bad_alignment[4] = {32, 96, 4u << 20, 1};
    static const int levels[8] = {0, 0, 0, 1, 3, -1, -7, 99};
    static const uint32_t chunks[4] = {4096, 8192, 0, 3000};
    static const uint32_t savings[4] = {0, 5, 100, 101};
    uint8_t b = u8(in), c = u8(in);
    int valid = 1;
    wpack_writer_options_init(opt);
    *use_null = (b & 7) == 5;
    if (*use_null)
        return 1;
    opt->alignment = (b & 7) < 4 ? 64u << (b & 3) : (b & 7) == 4 ? 4096u : 0u;
    opt->weight_stats = (b >> 3) & 1;
    opt->histogram_bins = bins[(b >> 4) & 7];
    if ((b & 7) == 7 && !(b & 0x80)) {
        opt->alignment = bad_alignment[(b >> 5) & 3];
        valid = 0;
    }
    opt->compress_level = levels[c & 7];
    opt->compress_chunk = chunks[(c >> 3) & 3];
    opt->compress_min = (c >> 5) & 1 ? 0 : 512;
    opt->compress_min_saving = savings[(c >> 6) & 3];
    /* chunk checksums (format 1.2) of 4 KiB chunks, so that the small
     * tensors of a program get them; else the default (1 MiB: none here) */
    if ((c >> 3) & 1)
        opt->chunk_sums = 4096;
    if (opt->compress_level == 99 || (opt->compress_level && opt->compress_chunk == 3000) ||
        opt->compress_min_saving > 100)
        valid = 0;
    return valid;
}

/* The writer fsyncs the archive and its directory (packer/writer.c) at
 * finish. Durability is not what this target tests, and the two syncs per
 * input held it to ~360 exec/s on a disk: this definition takes the place
 * of libc's fsync in the whole binary (the library is linked in statically),
 * in the libFuzzer and the replay build alike. */
int fsync(int fd)
{
    (void)fd;
    return 0;
}

/* What a failed invariant leaves behind: the writer's temp file, the archive. */
static char path[512];
static model *current;

static void remove_files(void)
{
    if (current && current->w)
        wpack_writer_abort(current->w);
    if (path[0])
        unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_single_threaded();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size, 0};
    /* One model (~300 KB) for the whole run, cleared per input: a fresh
     * calloc of that size is a fresh mmap under ASan, and its page faults
     * were a third of the time. */
    static model the_model;
    model *md = &the_model;
    memset(md, 0, sizeof *md);
    int use_null;
    int valid_opt = options(&in, &md->opt, &use_null);

    /* A unique name for the archive; the writer makes its own temp file
     * beside it and renames that into place, so the name can go now. */
    snprintf(path, sizeof path, "%s/wpack-fuzz-XXXXXX", fuzz_tmpdir());
    int fd = mkstemp(path);
    FUZZ_ASSERT(fd >= 0, "mkstemp in %s failed", path);
    close(fd);
    unlink(path);
    current = md;
    fuzz_cleanup = remove_files;

    int rc = wpack_writer_open(&md->w, path, use_null ? NULL : &md->opt);
    if (!md->opt.alignment)
        md->opt.alignment = WPACK_DEFAULT_ALIGNMENT;
    if (rc != WPACK_OK) {
        FUZZ_ASSERT(!valid_opt && (rc == WPACK_E_ALIGNMENT || rc == WPACK_E_INVALID_ARGUMENT),
                    "writer_open: rc %d: %s", rc, wpack_writer_errmsg(md->w));
        goto out;
    }
    trace("writer: alignment %u, weight stats %d, bins %u, zstd level %d chunk %u min %llu saving %u",
          md->opt.alignment, md->opt.weight_stats, md->opt.histogram_bins, md->opt.compress_level,
          md->opt.compress_chunk, (unsigned long long)md->opt.compress_min,
          md->opt.compress_min_saving);
    FUZZ_ASSERT(valid_opt, "invalid options accepted (alignment %u, zstd level %d, chunk %u, "
                "saving %u)", md->opt.alignment, md->opt.compress_level, md->opt.compress_chunk,
                md->opt.compress_min_saving);

    for (int op = 0; op < MAX_OPS && in.i < in.n; op++) {
        switch (u8(&in) % 10) {
        case 0:
        case 1:
            if (md->ne < MAX_ENT)
                op_tensor(md, &in, 0);
            break;
        case 2:
            if (md->ne < MAX_ENT)
                op_tensor(md, &in, 1);
            break;
        case 3:
            if (md->ne < MAX_ENT)
                op_splat(md, &in);
            break;
        case 4:
            if (md->ne < MAX_ENT)
                op_alias(md, &in);
            break;
        case 5:
            if (md->nm < MAX_META)
                op_meta(md, &in);
            break;
        case 6:
            if (md->nmap < MAX_MAP)
                op_name(md, &in);
            break;
        case 7:
            if (md->ns < MAX_STATS)
                op_stats(md, &in);
            break;
        case 8:
            if (md->ndt < MAX_DT)
                op_block_dtype(md, &in);
            break;
        default:
            FUZZ_ASSERT(wpack_writer_count(md->w) == md->ne, "writer counts %llu entries, model %zu",
                        (unsigned long long)wpack_writer_count(md->w), md->ne);
            break;
        }
    }

    char err[600];
    int must_fail = finish_must_fail(md);
    wpack_writer *w = md->w;
    md->w = NULL; /* finish frees it, whatever the result */
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc == WPACK_E_IO || rc == WPACK_E_NOMEM)
        goto out; /* the environment, not the input */
    if (must_fail) {
        FUZZ_ASSERT(rc == WPACK_E_ALIAS || rc == WPACK_E_NAMEMAP || rc == WPACK_E_EXISTS ||
                        rc == WPACK_E_STATS,
                    "finish should fail on a dangling reference or duplicate stats: rc %d %s", rc,
                    err);
        goto out;
    }
    FUZZ_ASSERT(rc == WPACK_OK, "finish failed: %s (%s)", wpack_error_name(rc), err);
    check_archive(md, path);
out:
    remove_files();
    fuzz_cleanup = NULL;
    current = NULL;
    path[0] = 0;
    return 0;
}
