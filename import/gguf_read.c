/* gguf_read.c - the GGML type table and a strict GGUF header parser (see gguf.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "gguf.h"
#include "internal.h"

/* Block geometry as in gguf-py's GGML_QUANT_SIZES (ids 4, 5, 31..33 and
 * 36..38 were removed from ggml and are not written to GGUF files). */
static const ggml_type_info types[] = {
    {0, "f32", 1, 4, WPACK_DTYPE_F32},       {1, "f16", 1, 2, WPACK_DTYPE_F16},
    {2, "q4_0", 32, 18, 0},                  {3, "q4_1", 32, 20, 0},
    {6, "q5_0", 32, 22, 0},                  {7, "q5_1", 32, 24, 0},
    {8, "q8_0", 32, 34, 0},                  {9, "q8_1", 32, 36, 0},
    {10, "q2_k", 256, 84, 0},                {11, "q3_k", 256, 110, 0},
    {12, "q4_k", 256, 144, 0},               {13, "q5_k", 256, 176, 0},
    {14, "q6_k", 256, 210, 0},               {15, "q8_k", 256, 292, 0},
    {16, "iq2_xxs", 256, 66, 0},             {17, "iq2_xs", 256, 74, 0},
    {18, "iq3_xxs", 256, 98, 0},             {19, "iq1_s", 256, 50, 0},
    {20, "iq4_nl", 32, 18, 0},               {21, "iq3_s", 256, 110, 0},
    {22, "iq2_s", 256, 82, 0},               {23, "iq4_xs", 256, 136, 0},
    {24, "i8", 1, 1, WPACK_DTYPE_I8},        {25, "i16", 1, 2, WPACK_DTYPE_I16},
    {26, "i32", 1, 4, WPACK_DTYPE_I32},      {27, "i64", 1, 8, WPACK_DTYPE_I64},
    {28, "f64", 1, 8, WPACK_DTYPE_F64},      {29, "iq1_m", 256, 56, 0},
    {30, "bf16", 1, 2, WPACK_DTYPE_BF16},    {34, "tq1_0", 256, 54, 0},
    {35, "tq2_0", 256, 66, 0},               {39, "mxfp4", 32, 17, 0},
    {40, "nvfp4", 64, 36, 0},                {41, "q1_0", 128, 18, 0},
};

const ggml_type_info *ggml_type_get(uint32_t id)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].id == id)
            return &types[i];
    return NULL;
}

int ggml_type_of_dtype(int dtype)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].dtype && types[i].dtype == dtype)
            return (int)types[i].id;
    return -1;
}

void ggml_block_params(uint32_t id, uint8_t out[GGML_PARAMS_LEN])
{
    memcpy(out, "ggml", 4);
    wpk_st32(out + 4, id);
}

size_t gguf_scalar_size(uint32_t type)
{
    static const uint8_t sz[GGUF_T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < GGUF_T_COUNT ? sz[type] : 0;
}

/* ------------------------------------------------------------ cursor */

typedef struct {
    const uint8_t *p;
    uint64_t len, at;
    char *err;
    size_t errlen;
} cur;

static int fail(cur *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(cur *c, int code, const char *fmt, ...)
{
    char m[600];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(m, sizeof m, fmt, ap);
    va_end(ap);
    wpk_fmt(c->err, c->errlen, "gguf: %s", m);
    return code;
}

static uint64_t left(const cur *c)
{
    return c->len - c->at;
}

/* n more bytes, or TRUNCATED naming what. */
static int need(cur *c, uint64_t n, const char *what)
{
    if (n > left(c))
        return fail(c, WPACK_E_TRUNCATED,
                    "%s at byte %llu needs %llu bytes, the file has %llu left", what,
                    (unsigned long long)c->at, (unsigned long long)n,
                    (unsigned long long)left(c));
    return WPACK_OK;
}

static int get32(cur *c, uint32_t *v, const char *what)
{
    int rc = need(c, 4, what);
    if (!rc) {
        *v = wpk_ld32(c->p + c->at);
        c->at += 4;
    }
    return rc;
}

static int get64(cur *c, uint64_t *v, const char *what)
{
    int rc = need(c, 8, what);
    if (!rc) {
        *v = wpk_ld64(c->p + c->at);
        c->at += 8;
    }
    return rc;
}

/* A GGUF string: the length is bounded by the bytes left, so no overflow. */
static int get_str(cur *c, const uint8_t **s, uint64_t *n, const char *what)
{
    int rc = get64(c, n, what);
    if (!rc && (rc = need(c, *n, what)) == WPACK_OK) {
        *s = c->p + c->at;
        c->at += *n;
    }
    return rc;
}

/* ------------------------------------------------------------ metadata */

/* One value of type (not an array), skipped after checking it. */
static int skip_value(cur *c, uint32_t type, const char *key)
{
    if (type == GGUF_T_STRING) {
        const uint8_t *s;
        uint64_t n;
        return get_str(c, &s, &n, "a string value");
    }
    size_t sz = gguf_scalar_size(type);
    int rc = need(c, sz, "a value");
    if (rc)
        return rc;
    if (type == GGUF_T_BOOL && c->p[c->at] > 1)
        return fail(c, WPACK_E_VALUE, "key '%s': bool byte %u is neither 0 nor 1", key,
                    c->p[c->at]);
    c->at += sz;
    return WPACK_OK;
}

static int parse_kv(cur *c, gguf_kv *kv, uint64_t i)
{
    char key[80];
    int rc = get_str(c, &kv->key, &kv->key_len, "a metadata key");
    if (rc)
        return rc;
    wpk_quote(key, sizeof key, (const char *)kv->key, (size_t)kv->key_len);
    if ((rc = get32(c, &kv->type, "a value type")))
        return rc;
    if (kv->type >= GGUF_T_COUNT)
        return fail(c, WPACK_E_METADATA, "key %llu '%s': value type %u is not a GGUF type (0..12)",
                    (unsigned long long)i, key, kv->type);
    uint64_t start = c->at;
    kv->count = 0;
    kv->elem_type = 0;
    if (kv->type != GGUF_T_ARRAY) {
        kv->val = c->p + c->at;
        if ((rc = skip_value(c, kv->type, key)))
            return rc;
    } else {
        if ((rc = get32(c, &kv->elem_type, "an array element type")) ||
            (rc = get64(c, &kv->count, "an array length")))
            return rc;
        if (kv->elem_type == GGUF_T_ARRAY)
            return fail(c, WPACK_E_UNSUPPORTED, "key '%s': an array of arrays (llama.cpp "
                        "refuses them too)", key);
        if (kv->elem_type >= GGUF_T_COUNT)
            return fail(c, WPACK_E_METADATA, "key '%s': array element type %u is not a GGUF type",
                        key, kv->elem_type);
        /* every element takes at least one byte (a string eight): bound the
         * count by the file before walking it */
        uint64_t min = kv->elem_type == GGUF_T_STRING ? 8 : gguf_scalar_size(kv->elem_type);
        if (kv->count > left(c) / min)
            return fail(c, WPACK_E_LIMIT, "key '%s': array of %llu elements does not fit in the "
                        "%llu bytes left", key, (unsigned long long)kv->count,
                        (unsigned long long)left(c));
        kv->val = c->p + c->at;
        start = c->at;
        if (kv->elem_type != GGUF_T_STRING && kv->elem_type != GGUF_T_BOOL)
            c->at += kv->count * min;
        else
            for (uint64_t j = 0; j < kv->count; j++)
                if ((rc = skip_value(c, kv->elem_type, key)))
                    return rc;
    }
    kv->val_len = c->at - start;
    if (kv->type == GGUF_T_ARRAY)
        kv->val = c->p + start;
    return WPACK_OK;
}

/* ------------------------------------------------------------ tensors */

static int parse_tensor(cur *c, gguf_tensor *t, uint64_t i)
{
    char name[80];
    int rc = get_str(c, &t->name, &t->name_len, "a tensor name");
    if (rc || (rc = get32(c, &t->n_dims, "a tensor's dims count")))
        return rc;
    wpk_quote(name, sizeof name, (const char *)t->name, (size_t)t->name_len);
    if (t->n_dims > WPACK_MAX_RANK)
        return fail(c, WPACK_E_RANK, "tensor %llu '%s': %u dims (wpack takes up to %u)",
                    (unsigned long long)i, name, t->n_dims, WPACK_MAX_RANK);
    for (uint32_t k = 0; k < t->n_dims; k++)
        if ((rc = get64(c, &t->ne[k], "a tensor dim")))
            return rc;
    if ((rc = get32(c, &t->type, "a tensor type")) || (rc = get64(c, &t->offset, "a tensor offset")))
        return rc;
    const ggml_type_info *ti = ggml_type_get(t->type);
    if (!ti)
        return fail(c, WPACK_E_DTYPE, "tensor '%s': GGML type %u is not one GGUF files hold", name,
                    t->type);
    uint64_t n = 1;
    for (uint32_t k = 0; k < t->n_dims; k++) {
        if (t->ne[k] > (uint64_t)INT64_MAX)
            return fail(c, WPACK_E_SHAPE, "tensor '%s': dim %u is negative", name, k);
        if (t->ne[k] && n > UINT64_MAX / t->ne[k])
            return fail(c, WPACK_E_OVERFLOW, "tensor '%s': the element count overflows", name);
        n *= t->ne[k];
    }
    if (t->n_dims == 0 ? ti->block_elems != 1 : t->ne[0] % ti->block_elems)
        return fail(c, WPACK_E_SHAPE, "tensor '%s': innermost dim %llu is not a multiple of the "
                    "%s block size %u", name, (unsigned long long)(t->n_dims ? t->ne[0] : 1),
                    ti->name, ti->block_elems);
    n /= ti->block_elems;
    if (n > UINT64_MAX / ti->block_bytes)
        return fail(c, WPACK_E_OVERFLOW, "tensor '%s': the byte size overflows", name);
    t->nbytes = n * ti->block_bytes;
    return WPACK_OK;
}

/* ------------------------------------------------------------ duplicates */

typedef struct {
    const uint8_t *s;
    uint64_t n;
    uint64_t at; /* for the overlap check: begin */
    uint64_t end;
} span;

static int by_bytes(const void *a, const void *b)
{
    const span *x = a, *y = b;
    uint64_t m = x->n < y->n ? x->n : y->n;
    int r = m ? memcmp(x->s, y->s, (size_t)m) : 0;
    return r ? r : (x->n > y->n) - (x->n < y->n);
}

static int by_begin(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->at > y->at) - (x->at < y->at);
}

/* The first name that appears twice in v (sorted in place), or NULL. */
static const span *duplicate(span *v, uint64_t n)
{
    if (n < 2)
        return NULL;
    qsort(v, (size_t)n, sizeof *v, by_bytes);
    for (uint64_t i = 1; i < n; i++)
        if (by_bytes(&v[i - 1], &v[i]) == 0)
            return &v[i];
    return NULL;
}

/* ------------------------------------------------------------ the file */

static int check_alignment(cur *c, gguf_file *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (kv->key_len != 17 || memcmp(kv->key, "general.alignment", 17) != 0)
            continue;
        if (kv->type != GGUF_T_U32)
            return fail(c, WPACK_E_METADATA, "general.alignment is of type %u, not u32 (4)",
                        kv->type);
        uint32_t a = wpk_ld32(kv->val);
        if (a == 0 || (a & (a - 1)))
            return fail(c, WPACK_E_ALIGNMENT, "general.alignment %u is not a power of two", a);
        g->alignment = a;
    }
    return WPACK_OK;
}

static int check_data(cur *c, gguf_file *g)
{
    uint64_t a = g->alignment, pad = (a - c->at % a) % a;
    if (pad > left(c) && g->n_tensors)
        return fail(c, WPACK_E_TRUNCATED, "the data section (at byte %llu, aligned to %llu) is "
                    "past the end", (unsigned long long)c->at, (unsigned long long)a);
    g->data_start = c->at + (pad > left(c) ? left(c) : pad);
    uint64_t room = c->len - g->data_start;
    span *v = g->n_tensors ? calloc((size_t)g->n_tensors, sizeof *v) : NULL;
    if (g->n_tensors && !v)
        return fail(c, WPACK_E_NOMEM, "out of memory");
    int rc = WPACK_OK;
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const gguf_tensor *t = &g->t[i];
        char name[80];
        wpk_quote(name, sizeof name, (const char *)t->name, (size_t)t->name_len);
        if (t->offset % a)
            rc = fail(c, WPACK_E_MISALIGNED, "tensor '%s': offset %llu is not a multiple of the "
                      "alignment %llu", name, (unsigned long long)t->offset, (unsigned long long)a);
        else if (t->offset > room || t->nbytes > room - t->offset)
            rc = fail(c, WPACK_E_BOUNDS, "tensor '%s': bytes %llu..%llu of the data section are "
                      "past the end of the file (%llu bytes of data)", name,
                      (unsigned long long)t->offset, (unsigned long long)t->offset + t->nbytes,
                      (unsigned long long)room);
        v[i] = (span){t->name, t->name_len, t->offset, t->offset + t->nbytes};
    }
    if (!rc) {
        const span *d = duplicate(v, g->n_tensors);
        char name[80];
        if (d) {
            wpk_quote(name, sizeof name, (const char *)d->s, (size_t)d->n);
            rc = fail(c, WPACK_E_DUPLICATE, "tensor '%s' appears twice", name);
        }
    }
    /* No two tensors share bytes: aliasing one range many times would make a
     * small file expand into a huge archive. */
    if (!rc && g->n_tensors > 1) {
        qsort(v, (size_t)g->n_tensors, sizeof *v, by_begin);
        const span *last = NULL; /* the non-empty tensor reaching furthest so far */
        for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
            if (v[i].end == v[i].at)
                continue;
            if (last && v[i].at < last->end) {
                char x[80], y[80];
                wpk_quote(x, sizeof x, (const char *)last->s, (size_t)last->n);
                wpk_quote(y, sizeof y, (const char *)v[i].s, (size_t)v[i].n);
                rc = fail(c, WPACK_E_OVERLAP, "tensors '%s' and '%s' share bytes", x, y);
            }
            if (!last || v[i].end > last->end)
                last = &v[i];
        }
    }
    free(v);
    return rc;
}

int gguf_parse(const uint8_t *p, size_t len, gguf_file *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    cur c = {p, len, 0, err, errlen};
    if (len < 4 || memcmp(p, "GGUF", 4) != 0)
        return fail(&c, WPACK_E_BAD_MAGIC, "no GGUF magic");
    c.at = 4;
    int rc = get32(&c, &g->version, "the version");
    if (rc)
        return rc;
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return fail(&c, WPACK_E_ENDIAN, "a big-endian GGUF file (version bytes swapped)");
    if (g->version != 2 && g->version != 3)
        return fail(&c, WPACK_E_VERSION, "version %u (wpack reads 2 and 3)", g->version);
    if ((rc = get64(&c, &g->n_tensors, "the tensor count")) ||
        (rc = get64(&c, &g->n_kv, "the metadata count")))
        return rc;
    /* a KV takes at least 13 bytes, a tensor record 24: bound both counts by
     * the file before allocating anything */
    if (g->n_kv > left(&c) / 13 || g->n_tensors > left(&c) / 24)
        return fail(&c, WPACK_E_LIMIT, "%llu metadata keys and %llu tensors cannot fit in a "
                    "file of %llu bytes", (unsigned long long)g->n_kv,
                    (unsigned long long)g->n_tensors, (unsigned long long)len);
    g->kv = calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof *g->kv);
    g->t = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *g->t);
    if (!g->kv || !g->t) {
        gguf_free(g);
        return fail(&c, WPACK_E_NOMEM, "out of memory");
    }
    for (uint64_t i = 0; i < g->n_kv && !rc; i++)
        rc = parse_kv(&c, &g->kv[i], i);
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++)
        rc = parse_tensor(&c, &g->t[i], i);
    if (!rc && g->n_kv) {
        span *v = calloc((size_t)g->n_kv, sizeof *v);
        if (!v)
            rc = fail(&c, WPACK_E_NOMEM, "out of memory");
        for (uint64_t i = 0; v && i < g->n_kv; i++)
            v[i] = (span){g->kv[i].key, g->kv[i].key_len, 0, 0};
        const span *d = v ? duplicate(v, g->n_kv) : NULL;
        if (d) {
            char key[80];
            wpk_quote(key, sizeof key, (const char *)d->s, (size_t)d->n);
            rc = fail(&c, WPACK_E_DUPLICATE, "metadata key '%s' appears twice", key);
        }
        free(v);
    }
    if (!rc)
        rc = check_alignment(&c, g);
    if (!rc)
        rc = check_data(&c, g);
    if (rc)
        gguf_free(g);
    return rc;
}

void gguf_free(gguf_file *g)
{
    free(g->kv);
    free(g->t);
    g->kv = NULL;
    g->t = NULL;
}
