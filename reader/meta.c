/* meta.c - metadata and name-map records: validation at open and access. */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"

/* Valid UTF-8 with no NUL (metadata string values may hold newlines). */
static int utf8_ok(const uint8_t *s, uint64_t len)
{
    uint64_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        /* Reuse the name rule on one code point, which rejects overlongs etc. */
        unsigned n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (len - i < n || wpk_name_problem(s + i, n))
            return 0;
        i += n;
    }
    return 1;
}

/*
 * String values are checked in two steps. At each reference: in bounds and
 * followed by NUL (wpk_string_ref), O(1). Then, once all are known, their
 * bytes: valid UTF-8 without NUL, each distinct string scanned once. A
 * metadata array may point all of its 2^32 elements at one long string
 * (65,536 x 2 MiB made every open scan 128 GiB); scanned per reference the
 * work would grow with count x length, not with the file.
 *
 * Why once is enough: a valid value has no NUL inside and a NUL right after
 * it, so it runs to the first NUL after its offset. References that end at
 * the same NUL are suffixes of the one that starts first; if that one is
 * valid, a suffix is valid exactly when it starts on a code point (not on a
 * continuation byte). References ending at different NULs cannot both be
 * valid and overlap, so the scans of valid strings cover each byte at most
 * once, and the first invalid string ends the open.
 */
typedef struct {
    uint64_t off, end; /* end = off + length: where the NUL is */
    uint64_t rec;      /* metadata record, for the message */
} str_span;

typedef struct {
    str_span *v;
    uint64_t n, cap;
} str_spans;

static int string_value(wpack_archive *ar, uint64_t off, uint64_t len, const char *key,
                        uint64_t rec, str_spans *sp)
{
    const uint8_t *s;
    char what[300];
    wpk_fmt(what, sizeof what, "metadata '%s'", key);
    int rc = wpk_string_ref(ar, off, len, what, &s);
    if (rc)
        return rc;
    if (sp->n == sp->cap) {
        /* at most one span per record or per 16 bytes of aux: bounded by the file */
        uint64_t cap = sp->cap ? 2 * sp->cap : 64;
        str_span *v = cap <= SIZE_MAX / sizeof *v ? realloc(sp->v, (size_t)cap * sizeof *v) : NULL;
        if (!v)
            return wpk_fail(ar, WPACK_E_NOMEM, "metadata '%s': out of memory checking strings", key);
        sp->v = v;
        sp->cap = cap;
    }
    sp->v[sp->n++] = (str_span){off, off + len, rec};
    return WPACK_OK;
}

static int span_cmp(const void *a, const void *b)
{
    const str_span *x = a, *y = b;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return (x->rec > y->rec) - (x->rec < y->rec);
}

/* The UTF-8 step over all references (see above), in (end, offset, record)
 * order; the first failure ends it, so an invalid string is scanned once. */
static int check_string_spans(wpack_archive *ar, str_spans *sp)
{
    const uint8_t *strings = ar->sec[WPK_SEC_STRINGS];
    uint64_t bad = UINT64_MAX;
    if (sp->n > 1)
        qsort(sp->v, (size_t)sp->n, sizeof *sp->v, span_cmp);
    for (uint64_t k = 0; k < sp->n && bad == UINT64_MAX;) {
        const str_span *lead = &sp->v[k];
        if (!utf8_ok(strings + lead->off, lead->end - lead->off))
            bad = lead->rec;
        for (k++; k < sp->n && sp->v[k].end == lead->end && bad == UINT64_MAX; k++) {
            const str_span *x = &sp->v[k];
            if (x->off < x->end && (strings[x->off] & 0xc0) == 0x80)
                bad = x->rec;
        }
    }
    if (bad == UINT64_MAX)
        return WPACK_OK;
    const uint8_t *r = wpk_rec(ar, WPK_SEC_METADATA, bad, WPK_META_REC_SIZE);
    char q[256];
    wpk_quote(q, sizeof q, wpk_str(ar, wpk_ld64(r + WPK_M_KEY_OFF)), wpk_ld32(r + WPK_M_KEY_LEN_OFF));
    return wpk_fail(ar, WPACK_E_METADATA, "metadata '%s': string is not valid UTF-8", q);
}

static int check_array(wpack_archive *ar, const char *key, int elem, uint64_t off, uint64_t count,
                       uint64_t rec, str_spans *sp)
{
    if (count > WPK_LIMIT_ARRAY)
        return wpk_fail(ar, WPACK_E_LIMIT, "metadata '%s': %llu array elements, limit %llu", key,
                        (unsigned long long)count, (unsigned long long)WPK_LIMIT_ARRAY);
    uint64_t width = elem == WPACK_META_BOOL ? 1 : (elem == WPACK_META_STRING || elem == WPACK_META_BYTES) ? 16 : 8;
    char what[300];
    wpk_fmt(what, sizeof what, "metadata '%s' array", key);
    uint64_t bytes;
    if (!wpk_mul(count, width, &bytes))
        return wpk_fail(ar, WPACK_E_OVERFLOW, "metadata '%s': array size overflows", key);
    int rc = wpk_aux_ref(ar, off, bytes, what);
    if (rc)
        return rc;
    const uint8_t *p = ar->sec[WPK_SEC_AUX] + off;
    for (uint64_t j = 0; j < count; j++) {
        if (elem == WPACK_META_BOOL && p[j] > 1)
            return wpk_fail(ar, WPACK_E_METADATA, "metadata '%s': bool element %llu is %u", key,
                            (unsigned long long)j, p[j]);
        if (elem == WPACK_META_STRING &&
            (rc = string_value(ar, wpk_ld64(p + 16 * j), wpk_ld64(p + 16 * j + 8), key, rec, sp)))
            return rc;
        if (elem == WPACK_META_BYTES &&
            (rc = wpk_aux_ref(ar, wpk_ld64(p + 16 * j), wpk_ld64(p + 16 * j + 8), what)))
            return rc;
    }
    return WPACK_OK;
}

/* Every metadata record; string values are only referenced here (sp). */
static int check_records(wpack_archive *ar, str_spans *sp)
{
    const uint8_t *prev = NULL;
    uint64_t prev_len = 0;
    for (uint64_t i = 0; i < ar->info.metadata_count; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_METADATA, i, WPK_META_REC_SIZE);
        const uint8_t *key;
        uint64_t key_len = wpk_ld32(r + WPK_M_KEY_LEN_OFF);
        int rc = wpk_name_ref(ar, wpk_ld64(r + WPK_M_KEY_OFF), key_len, "metadata key", &key);
        if (rc)
            return rc;
        if (prev && (rc = wpk_order_check(ar, prev, prev_len, key, key_len, "metadata key")))
            return rc;
        prev = key;
        prev_len = key_len;
        char q[256];
        wpk_quote(q, sizeof q, (const char *)key, (size_t)key_len);
        int type = r[WPK_M_TYPE_OFF], elem = r[WPK_M_ELEM_TYPE_OFF];
        uint64_t value = wpk_ld64(r + WPK_M_VALUE_OFF), count = wpk_ld64(r + WPK_M_COUNT_OFF);
        if (ar->info.format_minor <= WPACK_FORMAT_MINOR && wpk_ld16(r + WPK_M_RESERVED_OFF))
            return wpk_fail(ar, WPACK_E_RESERVED, "metadata '%s': reserved field not zero", q);
        if (type < WPACK_META_STRING || type > WPACK_META_ARRAY)
            return wpk_fail(ar, WPACK_E_METADATA, "metadata '%s': unknown type %d", q, type);
        if ((type == WPACK_META_ARRAY) != (elem != 0) ||
            (type == WPACK_META_ARRAY && (elem < WPACK_META_STRING || elem > WPACK_META_BYTES)))
            return wpk_fail(ar, WPACK_E_METADATA, "metadata '%s': element type %d wrong for type %d",
                            q, elem, type);
        switch (type) {
        case WPACK_META_STRING:
            rc = string_value(ar, value, count, q, i, sp);
            break;
        case WPACK_META_I64:
        case WPACK_META_F64:
        case WPACK_META_BOOL:
            if (count != 0 || (type == WPACK_META_BOOL && value > 1))
                rc = wpk_fail(ar, WPACK_E_METADATA, "metadata '%s': bad scalar (value %llu, count %llu)",
                              q, (unsigned long long)value, (unsigned long long)count);
            break;
        case WPACK_META_BYTES:
            rc = wpk_aux_ref(ar, value, count, "metadata bytes");
            break;
        case WPACK_META_ARRAY:
            rc = check_array(ar, q, elem, value, count, i, sp);
            break;
        }
        if (rc)
            return rc;
    }
    return WPACK_OK;
}

int wpk_check_meta(wpack_archive *ar)
{
    str_spans sp = {NULL, 0, 0};
    int rc = check_records(ar, &sp);
    if (!rc)
        rc = check_string_spans(ar, &sp);
    free(sp.v);
    return rc;
}

int wpk_check_namemap(wpack_archive *ar)
{
    const uint8_t *prev = NULL;
    uint64_t prev_len = 0, count = ar->info.entry_count;
    for (uint64_t i = 0; i < ar->info.namemap_count; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_NAMEMAP, i, WPK_NAMEMAP_REC_SIZE);
        const uint8_t *name;
        uint64_t len = wpk_ld32(r + WPK_N_NAME_LEN_OFF);
        int rc = wpk_name_ref(ar, wpk_ld64(r + WPK_N_NAME_OFF), len, "name-map name", &name);
        if (rc)
            return rc;
        if (prev && (rc = wpk_order_check(ar, prev, prev_len, name, len, "name-map name")))
            return rc;
        prev = name;
        prev_len = len;
        char q[256];
#define Q (wpk_quote(q, sizeof q, (const char *)name, (size_t)len), q)
        if (ar->info.format_minor <= WPACK_FORMAT_MINOR && wpk_ld64(r + WPK_N_RESERVED_OFF))
            return wpk_fail(ar, WPACK_E_RESERVED, "name map '%s': reserved field not zero", Q);
        if (wpk_ld32(r + WPK_N_ENTRY_OFF) >= count)
            return wpk_fail(ar, WPACK_E_NAMEMAP, "name map '%s': entry %u of %llu", Q,
                            wpk_ld32(r + WPK_N_ENTRY_OFF), (unsigned long long)count);
        uint64_t pos;
        if (wpk_search(ar, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, count, name, len, &pos))
            return wpk_fail(ar, WPACK_E_NAMEMAP, "name map '%s' is also an entry name", Q);
    }
    return WPACK_OK;
#undef Q
}

/* ---- access ---- */

static void fill_meta(const wpack_archive *ar, uint64_t i, wpack_meta *m)
{
    const uint8_t *r = wpk_rec(ar, WPK_SEC_METADATA, i, WPK_META_REC_SIZE);
    uint64_t value = wpk_ld64(r + WPK_M_VALUE_OFF);
    memset(m, 0, sizeof *m);
    m->key = wpk_str(ar, wpk_ld64(r + WPK_M_KEY_OFF));
    m->type = r[WPK_M_TYPE_OFF];
    m->elem_type = r[WPK_M_ELEM_TYPE_OFF];
    m->count = wpk_ld64(r + WPK_M_COUNT_OFF);
    switch (m->type) {
    case WPACK_META_STRING:
        m->str = wpk_str(ar, value);
        break;
    case WPACK_META_I64:
        m->i64 = (int64_t)value;
        break;
    case WPACK_META_F64:
        memcpy(&m->f64, &value, sizeof m->f64);
        break;
    case WPACK_META_BOOL:
        m->boolean = (int)value;
        break;
    case WPACK_META_BYTES:
        m->bytes = ar->sec[WPK_SEC_AUX] + value;
        break;
    case WPACK_META_ARRAY:
        m->priv_ = ar->sec[WPK_SEC_AUX] + value;
        break;
    }
}

uint64_t wpack_meta_count(const wpack_archive *ar)
{
    return ar->info.metadata_count;
}

int wpack_meta_at(const wpack_archive *ar, uint64_t i, wpack_meta *out)
{
    if (i >= ar->info.metadata_count)
        return WPACK_E_NOT_FOUND;
    fill_meta(ar, i, out);
    return WPACK_OK;
}

int wpack_meta_find(const wpack_archive *ar, const char *key, wpack_meta *out)
{
    uint64_t pos;
    if (!key)
        return WPACK_E_INVALID_ARGUMENT;
    if (!wpk_search(ar, WPK_SEC_METADATA, WPK_META_REC_SIZE, ar->info.metadata_count,
                    (const uint8_t *)key, strlen(key), &pos))
        return WPACK_E_NOT_FOUND;
    fill_meta(ar, pos, out);
    return WPACK_OK;
}

int wpack_meta_elem(const wpack_archive *ar, const wpack_meta *array, uint64_t j, wpack_meta *out)
{
    if (array->type != WPACK_META_ARRAY || j >= array->count)
        return WPACK_E_INVALID_ARGUMENT;
    const uint8_t *p = array->priv_;
    memset(out, 0, sizeof *out);
    out->key = array->key;
    out->type = array->elem_type;
    switch (array->elem_type) {
    case WPACK_META_I64:
        out->i64 = (int64_t)wpk_ld64(p + 8 * j);
        break;
    case WPACK_META_F64:
        out->f64 = wpk_ldf64(p + 8 * j);
        break;
    case WPACK_META_BOOL:
        out->boolean = p[j];
        break;
    case WPACK_META_STRING:
        out->str = wpk_str(ar, wpk_ld64(p + 16 * j));
        out->count = wpk_ld64(p + 16 * j + 8);
        break;
    case WPACK_META_BYTES:
        out->bytes = ar->sec[WPK_SEC_AUX] + wpk_ld64(p + 16 * j);
        out->count = wpk_ld64(p + 16 * j + 8);
        break;
    }
    return WPACK_OK;
}

uint64_t wpack_namemap_count(const wpack_archive *ar)
{
    return ar->info.namemap_count;
}

int wpack_namemap_at(const wpack_archive *ar, uint64_t i, const char **other_name, uint64_t *entry)
{
    if (i >= ar->info.namemap_count)
        return WPACK_E_NOT_FOUND;
    const uint8_t *r = wpk_rec(ar, WPK_SEC_NAMEMAP, i, WPK_NAMEMAP_REC_SIZE);
    *other_name = wpk_str(ar, wpk_ld64(r + WPK_N_NAME_OFF));
    *entry = wpk_ld32(r + WPK_N_ENTRY_OFF);
    return WPACK_OK;
}

int wpack_block_dtype_at(const wpack_archive *ar, uint64_t k, const char **name,
                         uint32_t *block_elems, uint32_t *block_bytes, const void **params,
                         uint64_t *params_len)
{
    if (k >= ar->info.block_dtype_count)
        return WPACK_E_NOT_FOUND;
    const uint8_t *r = wpk_rec(ar, WPK_SEC_DTYPES, k, WPK_DTYPE_REC_SIZE);
    if (name)
        *name = wpk_str(ar, wpk_ld64(r + WPK_D_NAME_OFF));
    if (block_elems)
        *block_elems = wpk_ld32(r + WPK_D_BLOCK_ELEMS_OFF);
    if (block_bytes)
        *block_bytes = wpk_ld32(r + WPK_D_BLOCK_BYTES_OFF);
    if (params)
        *params = ar->sec[WPK_SEC_AUX] + wpk_ld64(r + WPK_D_PARAMS_OFF);
    if (params_len)
        *params_len = wpk_ld64(r + WPK_D_PARAMS_LEN_OFF);
    return WPACK_OK;
}
