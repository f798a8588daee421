/* mlir_type.c - MLIR tensor types against wpack dtypes (see mlir_type.h). */
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "mlir_type.h"

typedef struct {
    const char *elem;
    int dtype;      /* what it is stored as */
    int also;       /* a second dtype it matches (signless ints), or 0 */
} elem_map;

static const elem_map elems[] = {
    {"f64", WPACK_DTYPE_F64, 0},   {"f32", WPACK_DTYPE_F32, 0},
    {"f16", WPACK_DTYPE_F16, 0},   {"bf16", WPACK_DTYPE_BF16, 0},
    {"f8E4M3FN", WPACK_DTYPE_F8E4M3FN, 0}, {"f8E5M2", WPACK_DTYPE_F8E5M2, 0},
    {"i1", WPACK_DTYPE_BOOL, 0},
    {"i8", WPACK_DTYPE_I8, WPACK_DTYPE_U8},    {"si8", WPACK_DTYPE_I8, 0},   {"ui8", WPACK_DTYPE_U8, 0},
    {"i16", WPACK_DTYPE_I16, WPACK_DTYPE_U16}, {"si16", WPACK_DTYPE_I16, 0}, {"ui16", WPACK_DTYPE_U16, 0},
    {"i32", WPACK_DTYPE_I32, WPACK_DTYPE_U32}, {"si32", WPACK_DTYPE_I32, 0}, {"ui32", WPACK_DTYPE_U32, 0},
    {"i64", WPACK_DTYPE_I64, WPACK_DTYPE_U64}, {"si64", WPACK_DTYPE_I64, 0}, {"ui64", WPACK_DTYPE_U64, 0},
};

static const elem_map *find_elem(const char *elem)
{
    for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++)
        if (strcmp(elems[i].elem, elem) == 0)
            return &elems[i];
    return NULL;
}

int wpk_mlir_elem_matches(const char *elem, int dtype)
{
    const elem_map *m = find_elem(elem);
    return m && (m->dtype == dtype || (m->also && m->also == dtype));
}

int wpk_mlir_elem_dtype(const char *elem)
{
    const elem_map *m = find_elem(elem);
    return m ? m->dtype : 0;
}

static const char *elem_for(int dtype)
{
    switch (dtype) {
    case WPACK_DTYPE_U8: return "ui8";
    case WPACK_DTYPE_U16: return "ui16";
    case WPACK_DTYPE_U32: return "ui32";
    case WPACK_DTYPE_U64: return "ui64";
    default: break;
    }
    for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++)
        if (elems[i].dtype == dtype)
            return elems[i].elem;
    return NULL;
}

void wpk_mlir_format_tensor(char *buf, size_t len, int dtype, unsigned rank, const uint64_t *dims)
{
    const char *e = elem_for(dtype);
    size_t o = 0;
    wpk_fmt(buf, len, "tensor<");
    o = strlen(buf);
    for (unsigned d = 0; d < rank && o < len; d++) {
        wpk_fmt(buf + o, len - o, "%llux", (unsigned long long)dims[d]);
        o += strlen(buf + o);
    }
    if (o < len) {
        if (e)
            wpk_fmt(buf + o, len - o, "%s>", e);
        else
            wpk_fmt(buf + o, len - o, "!dtype%d>", dtype);
    }
}

int wpk_mlir_parse_tensor(const char *s, size_t n, wpk_mlir_tensor *t, char *why, size_t whylen)
{
    memset(t, 0, sizeof *t);
    const char *p = s, *end = s + n;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\n' || end[-1] == '\t'))
        end--;
    if (end - p < 8 || memcmp(p, "tensor<", 7) != 0 || end[-1] != '>') {
        wpk_fmt(why, whylen, "not a tensor type");
        return WPACK_E_UNSUPPORTED;
    }
    p += 7;
    end--;
    if (p < end && *p == '*') {
        wpk_fmt(why, whylen, "unranked tensor (dynamic shape)");
        return WPACK_E_UNSUPPORTED;
    }
    for (;;) {
        while (p < end && *p == ' ')
            p++;
        if (p < end && *p == '?') {
            wpk_fmt(why, whylen, "dynamic dimension (?)");
            return WPACK_E_UNSUPPORTED;
        }
        if (p < end && *p >= '0' && *p <= '9') {
            uint64_t v = 0;
            while (p < end && *p >= '0' && *p <= '9') {
                if (!wpk_mul(v, 10, &v) || !wpk_add(v, (uint64_t)(*p - '0'), &v)) {
                    wpk_fmt(why, whylen, "dimension too large");
                    return WPACK_E_UNSUPPORTED;
                }
                p++;
            }
            if (p >= end || *p != 'x') {
                wpk_fmt(why, whylen, "expected 'x' after a dimension");
                return WPACK_E_UNSUPPORTED;
            }
            p++;
            if (t->rank == WPACK_MAX_RANK) {
                wpk_fmt(why, whylen, "rank above %d", WPACK_MAX_RANK);
                return WPACK_E_UNSUPPORTED;
            }
            t->dims[t->rank++] = v;
            continue;
        }
        break;
    }
    const char *e = p;
    while (p < end && *p != ',' && *p != ' ')
        p++;
    size_t elen = (size_t)(p - e);
    while (p < end && *p == ' ')
        p++;
    if (p < end) {
        wpk_fmt(why, whylen, "tensor encodings are not supported");
        return WPACK_E_UNSUPPORTED;
    }
    if (elen == 0 || elen >= sizeof t->elem) {
        wpk_fmt(why, whylen, "unsupported element type");
        return WPACK_E_UNSUPPORTED;
    }
    memcpy(t->elem, e, elen);
    t->elem[elen] = 0;
    if (!find_elem(t->elem)) {
        wpk_fmt(why, whylen, "element type %s has no wpack dtype", t->elem);
        return WPACK_E_UNSUPPORTED;
    }
    return 0;
}

int wpk_mlir_tensor_equal(const wpk_mlir_tensor *a, const wpk_mlir_tensor *b)
{
    if (strcmp(a->elem, b->elem) != 0 || a->rank != b->rank)
        return 0;
    for (unsigned d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return 0;
    return 1;
}
