/*
 * gguf_pack.c - a GGUF file through the sink: every KV as typed metadata,
 * every tensor as a wpack entry with its dims reversed (PyTorch order), GGML
 * quantized types as block dtypes "ggml.NAME" (import/README.md, "GGUF").
 */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "gguf.h"
#include "import.h"
#include "internal.h"

/* Valid UTF-8 without NUL: what a wpack metadata string may hold. */
static int is_text(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (!c)
            return 0;
        uint64_t k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (k > 1 && (n - i < k || wpk_name_problem(p + i, k)))
            return 0;
        i += k;
    }
    return 1;
}

/* A NUL-terminated copy of n bytes. */
static char *dup_n(const uint8_t *p, uint64_t n)
{
    char *r = n < SIZE_MAX ? malloc((size_t)n + 1) : NULL;
    if (r) {
        if (n)
            memcpy(r, p, (size_t)n);
        r[n] = 0;
    }
    return r;
}

/* A name or key copied out, refusing a NUL inside it. */
static int take_name(wpk_sink *s, const uint8_t *p, uint64_t n, const char *what, char **out)
{
    if (memchr(p, 0, (size_t)n)) {
        char q[80];
        wpk_quote(q, sizeof q, (const char *)p, (size_t)n);
        return wpk_sink_fail(s, WPACK_E_NAME, "gguf: %s '%s' holds a NUL byte", what, q);
    }
    if (!(*out = dup_n(p, n)))
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

/* One fixed-size scalar of type at p, as i64 (u64: its bit pattern) or f64. */
static int64_t load_int(uint32_t type, const uint8_t *p)
{
    switch (type) {
    case GGUF_T_U8: return p[0];
    case GGUF_T_I8: return (int8_t)p[0];
    case GGUF_T_U16: return wpk_ld16(p);
    case GGUF_T_I16: return (int16_t)wpk_ld16(p);
    case GGUF_T_U32: return wpk_ld32(p);
    case GGUF_T_I32: return (int32_t)wpk_ld32(p);
    default: return (int64_t)wpk_ld64(p); /* u64, i64 */
    }
}

static double load_real(uint32_t type, const uint8_t *p)
{
    if (type == GGUF_T_F64)
        return wpk_ldf64(p);
    return gguf_f32_widen(wpk_ld32(p));
}

/* An array of strings: a string array when every element is text, else an
 * array of bytes elements (gguf.kv_types still says string). */
static int put_strings(wpk_sink *s, const char *key, const gguf_kv *kv)
{
    uint64_t n = kv->count, total = 0;
    int text = 1;
    const uint8_t *p = kv->val;
    for (uint64_t j = 0, at = 0; j < n; j++) {
        uint64_t len = wpk_ld64(p + at);
        text = text && is_text(p + at + 8, len);
        total += len + 1;
        at += 8 + len;
    }
    char **v = calloc(n ? (size_t)n : 1, sizeof *v);
    wpack_bytes *b = calloc(n ? (size_t)n : 1, sizeof *b);
    char *pool = malloc((size_t)total + 1);
    int rc = WPACK_OK;
    if (!v || !b || !pool) {
        rc = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    for (uint64_t j = 0, at = 0, o = 0; j < n; j++) {
        uint64_t len = wpk_ld64(p + at);
        if (len)
            memcpy(pool + o, p + at + 8, (size_t)len);
        pool[o + len] = 0;
        v[j] = pool + o;
        b[j] = (wpack_bytes){pool + o, (size_t)len};
        o += len + 1;
        at += 8 + len;
    }
    rc = text ? wpk_sink_meta_array(s, key, WPACK_META_STRING, n, v)
              : wpk_sink_meta_array(s, key, WPACK_META_BYTES, n, b);
out:
    free(v);
    free(b);
    free(pool);
    return rc;
}

static int put_array(wpk_sink *s, const char *key, const gguf_kv *kv)
{
    uint32_t e = kv->elem_type;
    if (e == GGUF_T_STRING)
        return put_strings(s, key, kv);
    size_t es = gguf_scalar_size(e);
    uint64_t n = kv->count;
    void *v = malloc(n ? (size_t)n * 8 : 1);
    if (!v)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    int type;
    for (uint64_t j = 0; j < n; j++) {
        const uint8_t *p = kv->val + j * es;
        if (e == GGUF_T_BOOL)
            ((int *)v)[j] = p[0];
        else if (e == GGUF_T_F32 || e == GGUF_T_F64)
            ((double *)v)[j] = load_real(e, p);
        else
            ((int64_t *)v)[j] = load_int(e, p);
    }
    type = e == GGUF_T_BOOL ? WPACK_META_BOOL
           : e == GGUF_T_F32 || e == GGUF_T_F64 ? WPACK_META_F64 : WPACK_META_I64;
    int rc = wpk_sink_meta_array(s, key, type, n, v);
    free(v);
    return rc;
}

static int put_kv(wpk_sink *s, const char *key, const gguf_kv *kv)
{
    switch (kv->type) {
    case GGUF_T_ARRAY:
        return put_array(s, key, kv);
    case GGUF_T_STRING: {
        uint64_t n = wpk_ld64(kv->val);
        const uint8_t *p = kv->val + 8;
        if (!is_text(p, n))
            return wpk_sink_meta_bytes(s, key, p, (size_t)n);
        char *v = dup_n(p, n);
        int rc = v ? wpk_sink_meta_string(s, key, v)
                   : wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        free(v);
        return rc;
    }
    case GGUF_T_BOOL:
        return wpk_sink_meta_bool(s, key, kv->val[0]);
    case GGUF_T_F32:
    case GGUF_T_F64:
        return wpk_sink_meta_f64(s, key, load_real(kv->type, kv->val));
    default:
        return wpk_sink_meta_i64(s, key, load_int(kv->type, kv->val));
    }
}

static int put_metadata(wpk_sink *s, const gguf_file *g)
{
    uint64_t n = g->n_kv;
    char **keys = calloc(n ? (size_t)n : 1, sizeof *keys);
    int64_t *types = calloc(n ? (size_t)n : 1, sizeof *types);
    int rc = keys && types ? WPACK_OK : wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n && !rc; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (!(rc = take_name(s, kv->key, kv->key_len, "metadata key", &keys[i])) &&
            (!strcmp(keys[i], GGUF_META_KV_ORDER) || !strcmp(keys[i], GGUF_META_KV_TYPES) ||
             !strcmp(keys[i], GGUF_META_TENSOR_ORDER)))
            rc = wpk_sink_fail(s, WPACK_E_UNSUPPORTED,
                               "GGUF key '%s': wpack records the file's keys and tensors under "
                               "that name; a file using it cannot be packed",
                               keys[i]);
        if (!rc)
            rc = put_kv(s, keys[i], kv);
        types[i] = GGUF_KV_TYPE(kv->type, kv->elem_type);
    }
    if (!rc && n &&
        !(rc = wpk_sink_meta_array(s, GGUF_META_KV_ORDER, WPACK_META_STRING, n, keys)))
        rc = wpk_sink_meta_array(s, GGUF_META_KV_TYPES, WPACK_META_I64, n, types);
    for (uint64_t i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
    free(types);
    return rc;
}

/* The wpack dtype of a GGML type: built in, or its block dtype. */
static int dtype_of(wpk_sink *s, uint32_t id, int *dtype)
{
    const ggml_type_info *ti = ggml_type_get(id);
    if (ti->dtype) {
        *dtype = ti->dtype;
        return WPACK_OK;
    }
    char name[32];
    uint8_t params[GGML_PARAMS_LEN];
    wpk_fmt(name, sizeof name, "ggml.%s", ti->name);
    ggml_block_params(id, params);
    return wpk_sink_block_dtype(s, name, ti->block_elems, ti->block_bytes, params,
                                sizeof params, dtype);
}

static int put_tensor(wpk_sink *s, const wpk_mapped *m, const gguf_file *g, const gguf_tensor *t,
                      const char *name)
{
    uint64_t dims[WPACK_MAX_RANK];
    for (uint32_t k = 0; k < t->n_dims; k++)
        dims[k] = t->ne[t->n_dims - 1 - k];
    int dtype, rc = dtype_of(s, t->type, &dtype);
    if (rc || (rc = wpk_sink_begin(s, name, dtype, t->n_dims, dims)))
        return rc;
    /* GGUF tensor bytes are stored as wpack stores them: unless cast, each
     * step is read, hashed and written (or copied by the kernel where its
     * offset lines up with the archive's; writer_copy.c) */
    if ((rc = wpk_sink_stream_mapped(s, m, g->data_start + t->offset, t->nbytes)))
        return rc;
    return wpk_sink_end(s);
}

int gguf_pack_file(wpk_sink *s, const char *path)
{
    wpk_mapped m;
    int rc = wpk_map_file(s, path, &m);
    if (rc)
        return rc;
    gguf_file g;
    char err[700];
    if ((rc = gguf_parse(m.p, m.len, &g, err, sizeof err))) {
        wpk_unmap_file(&m);
        return wpk_sink_fail(s, rc, "%s", err);
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++)
        total += g.t[i].nbytes; /* each within the file, and they do not overlap */
    char **names = calloc(g.n_tensors ? (size_t)g.n_tensors : 1, sizeof *names);
    if (!names)
        rc = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    if (!rc)
        rc = wpk_sink_room(s, path, total);
    if (!rc)
        rc = put_metadata(s, &g);
    for (uint64_t i = 0; i < g.n_tensors && !rc; i++)
        if (!(rc = take_name(s, g.t[i].name, g.t[i].name_len, "tensor name", &names[i])))
            rc = put_tensor(s, &m, &g, &g.t[i], names[i]);
    if (!rc && g.n_tensors)
        rc = wpk_sink_meta_array(s, GGUF_META_TENSOR_ORDER, WPACK_META_STRING, g.n_tensors,
                                 names);
    for (uint64_t i = 0; names && i < g.n_tensors; i++)
        free(names[i]);
    free(names);
    gguf_free(&g);
    wpk_unmap_file(&m);
    return rc;
}
