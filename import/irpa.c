/*
 * irpa.c - a strict reader of IREE parameter archives (irpa.h) and the
 * importer: data entries become tensors (u8 [length], or the dtype and dims
 * of wpack's own entry metadata, block dtypes included), splat entries
 * splats (u8/u16/u32/u64 by pattern length, or wpack's dtype; a 16-byte
 * pattern without a dtype that wide is written out in full). External
 * entries name files on disk and are refused.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "import.h"
#include "internal.h"
#include "irpa.h"

/* A fault of this format's parser, "irpa: ..." in err (format/fmt.c). */
#define fail(err, errlen, code, ...) wpk_fail_in(err, errlen, code, "irpa", __VA_ARGS__)

/* [base + off, base + off + len) inside the file, overflow-checked. */
static int in_file(uint64_t base, uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && base <= size - off && len <= size - base - off;
}

typedef struct {
    uint64_t off, len;
} range;

static range ld_range(const uint8_t *p)
{
    return (range){wpk_ld64(p), wpk_ld64(p + 8)};
}

static int by_name(const void *a, const void *b)
{
    const irpa_entry *x = a, *y = b;
    uint64_t m = x->name_len < y->name_len ? x->name_len : y->name_len;
    int r = m ? memcmp(x->name, y->name, (size_t)m) : 0;
    return r ? r : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* One header at base and its entries, appended to f. */
static int parse_one(const uint8_t *p, uint64_t size, uint64_t base, irpa_file *f, uint64_t *cap,
                     uint64_t *declared, uint64_t *names, uint64_t *next, char *err,
                     size_t errlen)
{
    if (!in_file(base, 0, 32, size))
        return fail(err, errlen, WPACK_E_TRUNCATED, "header at byte %llu is cut short",
                    (unsigned long long)base);
    const uint8_t *h = p + base;
    if (memcmp(h, "IRPA", 4) != 0)
        return fail(err, errlen, WPACK_E_BAD_MAGIC, "no IRPA magic at byte %llu",
                    (unsigned long long)base);
    uint16_t major = wpk_ld16(h + 4), minor = wpk_ld16(h + 6);
    if (major != 0 || minor != 0)
        return fail(err, errlen, WPACK_E_VERSION, "version %u.%u (wpack reads 0.0)", major, minor);
    if (wpk_ld64(h + 8) != IRPA_HEADER_SIZE)
        return fail(err, errlen, WPACK_E_LAYOUT, "header size %llu, not %u",
                    (unsigned long long)wpk_ld64(h + 8), IRPA_HEADER_SIZE);
    if (!in_file(base, 0, IRPA_HEADER_SIZE, size))
        return fail(err, errlen, WPACK_E_TRUNCATED, "header at byte %llu is cut short",
                    (unsigned long long)base);
    *next = wpk_ld64(h + 16);
    uint64_t count = wpk_ld64(h + 32);
    range es = ld_range(h + 40), ms = ld_range(h + 56), ss = ld_range(h + 72);
    if (!in_file(base, es.off, es.len, size) || !in_file(base, ms.off, ms.len, size) ||
        !in_file(base, ss.off, ss.len, size))
        return fail(err, errlen, WPACK_E_BOUNDS, "a segment lies past the end of the file");
    if (count > es.len / IRPA_ENTRY_HEADER_SIZE)
        return fail(err, errlen, WPACK_E_LIMIT, "%llu entries cannot fit in an entry table of "
                    "%llu bytes", (unsigned long long)count, (unsigned long long)es.len);
    /* linked headers may point at one table: bound the entries of them all
     * by the file, or K headers of one K-entry table give K^2 entries */
    if (count > size / IRPA_ENTRY_HEADER_SIZE - *declared)
        return fail(err, errlen, WPACK_E_LIMIT, "header at byte %llu: %llu more entries (%llu "
                    "before it) cannot fit in a file of %llu bytes", (unsigned long long)base,
                    (unsigned long long)count, (unsigned long long)*declared,
                    (unsigned long long)size);
    *declared += count;
    if (f->n + count > *cap) {
        uint64_t c = f->n + count;
        irpa_entry *v = realloc(f->e, (size_t)(c ? c : 1) * sizeof *v);
        if (!v)
            return fail(err, errlen, WPACK_E_NOMEM, "out of memory");
        f->e = v;
        *cap = c;
    }
    uint64_t at = 0; /* in the entry segment */
    for (uint64_t i = 0; i < count; i++) {
        if (es.len - at < IRPA_ENTRY_HEADER_SIZE)
            return fail(err, errlen, WPACK_E_TRUNCATED, "entry %llu: the entry table ends",
                        (unsigned long long)i);
        const uint8_t *e = p + base + es.off + at;
        uint64_t esize = wpk_ld64(e);
        uint32_t type = wpk_ld32(e + 8);
        if (esize < IRPA_ENTRY_HEADER_SIZE || esize > es.len - at)
            return fail(err, errlen, WPACK_E_SIZE, "entry %llu: size %llu outside the table",
                        (unsigned long long)i, (unsigned long long)esize);
        uint64_t step = (esize + IRPA_ENTRY_ALIGNMENT - 1) / IRPA_ENTRY_ALIGNMENT *
                        IRPA_ENTRY_ALIGNMENT;
        at += step < es.len - at ? step : es.len - at;
        range nm = ld_range(e + 20), md = ld_range(e + 36);
        uint64_t min_align = wpk_ld64(e + 52);
        if (nm.off > ms.len || nm.len > ms.len - nm.off || md.off > ms.len ||
            md.len > ms.len - md.off)
            return fail(err, errlen, WPACK_E_BOUNDS, "entry %llu: name or metadata outside the "
                        "metadata segment", (unsigned long long)i);
        irpa_entry x = {.name = p + base + ms.off + nm.off, .name_len = nm.len,
                        .meta = p + base + ms.off + md.off, .meta_len = md.len,
                        .type = (int)type};
        char name[80];
        wpk_quote(name, sizeof name, (const char *)x.name, (size_t)x.name_len);
        if (type == IRPA_SKIP)
            continue;
        /* A name is a reference into the metadata segment: entries may name
         * the same bytes, and a long run of letters gave 40,000 distinct
         * 4 MB names in 7 MB, which the duplicate check's sort compared for
         * minutes. Names written once each fit in the file. */
        if (x.name_len > size - *names)
            return fail(err, errlen, WPACK_E_LIMIT, "entry %llu '%s': the names of the entries "
                        "so far take more than the file's %llu bytes (entries sharing name "
                        "bytes)", (unsigned long long)i, name, (unsigned long long)size);
        *names += x.name_len;
        if (type == IRPA_EXTERNAL)
            return fail(err, errlen, WPACK_E_UNSUPPORTED, "entry '%s' refers to an external "
                        "file (a path inside the archive is not followed)", name);
        if (type == IRPA_SPLAT) {
            if (esize < IRPA_SPLAT_ENTRY_SIZE)
                return fail(err, errlen, WPACK_E_SIZE, "splat entry '%s': size %llu < %u", name,
                            (unsigned long long)esize, IRPA_SPLAT_ENTRY_SIZE);
            x.length = wpk_ld64(e + 60);
            memcpy(x.pattern, e + 68, 16);
            x.pattern_len = e[84];
            unsigned pl = x.pattern_len;
            if (pl == 0 || pl > 16 || (pl & (pl - 1)) || x.length % pl)
                return fail(err, errlen, WPACK_E_INPUT, "splat entry '%s': pattern length %u "
                            "(1, 2, 4, 8 or 16 dividing the length %llu)", name, pl,
                            (unsigned long long)x.length);
        } else if (type == IRPA_DATA) {
            if (esize < IRPA_DATA_ENTRY_SIZE)
                return fail(err, errlen, WPACK_E_SIZE, "data entry '%s': size %llu < %u", name,
                            (unsigned long long)esize, IRPA_DATA_ENTRY_SIZE);
            range st = ld_range(e + 60);
            if (st.off > ss.len || st.len > ss.len - st.off)
                return fail(err, errlen, WPACK_E_BOUNDS, "data entry '%s': bytes %llu..%llu "
                            "outside the storage segment (%llu bytes)", name,
                            (unsigned long long)st.off, (unsigned long long)(st.off + st.len),
                            (unsigned long long)ss.len);
            x.length = st.len;
            x.offset = base + ss.off + st.off;
            if (min_align && (min_align & (min_align - 1)))
                return fail(err, errlen, WPACK_E_ALIGNMENT, "data entry '%s': minimum alignment "
                            "%llu is not a power of two", name, (unsigned long long)min_align);
            if (min_align && x.offset % min_align)
                return fail(err, errlen, WPACK_E_MISALIGNED, "data entry '%s': offset %llu is not "
                            "a multiple of its alignment %llu", name, (unsigned long long)x.offset,
                            (unsigned long long)min_align);
        } else {
            return fail(err, errlen, WPACK_E_KIND, "entry '%s': unknown type %u", name, type);
        }
        f->e[f->n++] = x;
    }
    return WPACK_OK;
}

typedef struct {
    uint64_t off, end, i;
} extent;

static int by_offset(const void *a, const void *b)
{
    const extent *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* No two data entries share part of their bytes (each copied again, entries
 * naming one range would make a small file a huge archive); entries naming
 * the very same bytes get alias_of: the first of them in the file. */
static int check_overlap(irpa_file *f, char *err, size_t errlen)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < f->n; i++)
        n += f->e[i].type == IRPA_DATA && f->e[i].length;
    if (n < 2)
        return WPACK_OK;
    extent *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return fail(err, errlen, WPACK_E_NOMEM, "out of memory");
    n = 0;
    for (uint64_t i = 0; i < f->n; i++)
        if (f->e[i].type == IRPA_DATA && f->e[i].length)
            v[n++] = (extent){f->e[i].offset, f->e[i].offset + f->e[i].length, i};
    qsort(v, (size_t)n, sizeof *v, by_offset);
    int rc = WPACK_OK;
    uint64_t first = 0; /* the first entry of the current range in v */
    for (uint64_t k = 1; k < n && !rc; k++) {
        if (v[k].off == v[first].off && v[k].end == v[first].end) {
            f->e[v[k].i].alias_of = v[first].i + 1;
            continue;
        }
        if (v[k].off < v[first].end) {
            char x[80], y[80];
            const irpa_entry *a = &f->e[v[first].i], *b = &f->e[v[k].i];
            wpk_quote(x, sizeof x, (const char *)a->name, (size_t)a->name_len);
            wpk_quote(y, sizeof y, (const char *)b->name, (size_t)b->name_len);
            rc = fail(err, errlen, WPACK_E_OVERLAP, "data entries '%s' and '%s' share part of "
                      "their bytes", x, y);
        }
        first = k;
    }
    free(v);
    return rc;
}

int irpa_parse(const uint8_t *p, size_t len, irpa_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    uint64_t base = 0, cap = 0, next = 0, declared = 0, names = 0;
    int rc;
    /* linked headers: each next offset is > 0 and inside the file, so the
     * chain moves forward and ends */
    for (;;) {
        if ((rc = parse_one(p, len, base, f, &cap, &declared, &names, &next, err, errlen)))
            break;
        if (!next)
            break;
        if (next >= len - base) {
            rc = fail(err, errlen, WPACK_E_BOUNDS, "the next header lies past the end");
            break;
        }
        base += next;
    }
    if (!rc && f->n) {
        irpa_entry *v = malloc((size_t)f->n * sizeof *v);
        if (!v)
            rc = fail(err, errlen, WPACK_E_NOMEM, "out of memory");
        for (uint64_t i = 0; v && i < f->n; i++)
            v[i] = f->e[i];
        if (v)
            qsort(v, (size_t)f->n, sizeof *v, by_name);
        for (uint64_t i = 1; v && i < f->n && !rc; i++)
            if (by_name(&v[i - 1], &v[i]) == 0) {
                char name[80];
                wpk_quote(name, sizeof name, (const char *)v[i].name, (size_t)v[i].name_len);
                rc = fail(err, errlen, WPACK_E_DUPLICATE, "entry '%s' appears twice", name);
            }
        free(v);
    }
    if (!rc)
        rc = check_overlap(f, err, errlen);
    if (rc)
        irpa_free(f);
    return rc;
}

void irpa_free(irpa_file *f)
{
    free(f->e);
    f->e = NULL;
    f->n = 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A decimal u64 at *s (advanced), or 0 with *ok cleared. */
static uint64_t number(const char **s, int *ok)
{
    uint64_t v = 0;
    if (**s < '0' || **s > '9')
        *ok = 0;
    for (; **s >= '0' && **s <= '9'; ++*s) /* exact: up to 18446744073709551615 */
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(**s - '0'), &v))
            *ok = 0;
    return v;
}

/* "NAME/ELEMS/BYTES/HEX" of a block dtype into m. */
static int parse_block(char *d, irpa_meta *m)
{
    char *a = strchr(d, '/');
    if (!a || (size_t)(a - d) >= sizeof m->block || a == d)
        return 0;
    memcpy(m->block, d, (size_t)(a - d));
    m->block[a - d] = 0;
    const char *s = a + 1;
    int ok = 1;
    uint64_t be = number(&s, &ok);
    if (!ok || *s++ != '/')
        return 0;
    uint64_t bb = number(&s, &ok);
    if (!ok || *s++ != '/' || !be || !bb || be > UINT32_MAX || bb > UINT32_MAX)
        return 0;
    m->block_elems = (uint32_t)be;
    m->block_bytes = (uint32_t)bb;
    size_t n = strlen(s);
    if (n % 2 || n / 2 > sizeof m->params)
        return 0;
    for (size_t k = 0; k < n / 2; k++) {
        int hi = hexval(s[2 * k]), lo = hexval(s[2 * k + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        m->params[k] = (uint8_t)(hi << 4 | lo);
    }
    m->params_len = n / 2;
    return 1;
}

int irpa_meta_parse(const uint8_t *meta, uint64_t len, irpa_meta *m)
{
    char b[IRPA_META_MAX];
    memset(m, 0, sizeof *m);
    if (len < 8 || len >= sizeof b || memcmp(meta, "wpack:", 6) != 0 || meta[len - 1] != ']')
        return 0;
    memcpy(b, meta + 6, (size_t)len - 6);
    b[len - 6] = 0;
    if (memchr(b, 0, (size_t)len - 6))
        return 0;
    char *br = strchr(b, '[');
    if (!br)
        return 0;
    *br = 0;
    if (strchr(b, '/') ? !parse_block(b, m) : !(m->dtype = wpack_dtype_from_name(b)))
        return 0;
    const char *s = br + 1;
    if (*s == ']')
        return s[1] == 0;
    for (;;) {
        int ok = 1;
        if (m->rank >= WPACK_MAX_RANK)
            return 0;
        m->dims[m->rank++] = number(&s, &ok);
        if (!ok)
            return 0;
        if (*s == ']')
            return s[1] == 0;
        if (*s++ != ',')
            return 0;
    }
}

uint64_t irpa_meta_nbytes(const irpa_meta *m)
{
    uint64_t n = 1;
    for (unsigned k = 0; k < m->rank; k++) {
        if (m->dims[k] && n > UINT64_MAX / m->dims[k])
            return UINT64_MAX;
        n *= m->dims[k];
    }
    if (m->dtype) {
        size_t es = wpack_dtype_size(m->dtype);
        return n > UINT64_MAX / es ? UINT64_MAX : n * es;
    }
    if (!m->rank || m->dims[m->rank - 1] % m->block_elems)
        return UINT64_MAX;
    n /= m->block_elems;
    return n > UINT64_MAX / m->block_bytes ? UINT64_MAX : n * m->block_bytes;
}

/* ------------------------------------------------------------ import */

/* The dtype and dims of entry x: wpack's own metadata when it fits the
 * length and the pattern, else bytes (splat: unsigned of the pattern's size). */
static int entry_shape(wpk_sink *s, const irpa_entry *x, int *dtype, unsigned *rank,
                       uint64_t *dims)
{
    irpa_meta m;
    if (irpa_meta_parse(x->meta, x->meta_len, &m) && irpa_meta_nbytes(&m) == x->length) {
        uint64_t elem = m.dtype ? wpack_dtype_size(m.dtype) : m.block_bytes;
        if (x->type == IRPA_DATA || elem == x->pattern_len) {
            *rank = m.rank;
            memcpy(dims, m.dims, sizeof m.dims);
            *dtype = m.dtype;
            if (m.dtype)
                return WPACK_OK;
            return wpk_sink_block_dtype(s, m.block, m.block_elems, m.block_bytes, m.params,
                                        m.params_len, dtype);
        }
    }
    unsigned pl = x->type == IRPA_SPLAT ? x->pattern_len : 1;
    *dtype = pl == 1 ? WPACK_DTYPE_U8 : pl == 2 ? WPACK_DTYPE_U16 : pl == 4 ? WPACK_DTYPE_U32
             : pl == 8 ? WPACK_DTYPE_U64 : WPACK_DTYPE_U8;
    *rank = 1;
    dims[0] = pl == 16 ? x->length : x->length / pl;
    return WPACK_OK;
}

/* name[] of entry x (no NUL inside), allocated; NULL: out of memory or *nul set. */
static char *entry_name(const irpa_entry *x, int *nul)
{
    *nul = memchr(x->name, 0, (size_t)x->name_len) != NULL;
    char *name = *nul ? NULL : malloc((size_t)x->name_len + 1);
    if (name) {
        if (x->name_len)
            memcpy(name, x->name, (size_t)x->name_len);
        name[x->name_len] = 0;
    }
    return name;
}

/* A data entry naming the very bytes of an earlier one (t): an alias of it
 * when it has the same dtype and dims (wpack's export writes aliases so),
 * else refused: bytes copied once per name would let a small file become a
 * huge archive. */
static int put_alias(wpk_sink *s, const irpa_entry *t, const char *name,
                     int dtype, unsigned rank, const uint64_t *dims)
{
    int tdtype;
    unsigned trank;
    uint64_t tdims[WPACK_MAX_RANK];
    int nul, rc = entry_shape(s, t, &tdtype, &trank, tdims);
    if (rc)
        return rc;
    if (tdtype != dtype || trank != rank || memcmp(tdims, dims, rank * sizeof *dims) != 0) {
        char q[80], r[80];
        wpk_quote(q, sizeof q, name, strlen(name));
        wpk_quote(r, sizeof r, (const char *)t->name, (size_t)t->name_len);
        return wpk_sink_fail(s, WPACK_E_OVERLAP, "irpa: data entry '%s' names the bytes of '%s' "
                             "with another dtype or shape", q, r);
    }
    char *target = entry_name(t, &nul);
    if (!target)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory"); /* t had no NUL: imported */
    rc = wpk_sink_alias(s, name, target);
    free(target);
    return rc;
}

/* The bytes 16-byte splats of the file spell out (*spelled, so far) stay
 * under the zip-bomb guard of archive_in.c: max_total, and past the grace
 * max_ratio bytes per byte of the file. A 4 KB file would otherwise ask for
 * 2^64 bytes. */
static int splat_room(wpk_sink *s, const wpk_mapped *m, const char *name, uint64_t length,
                      uint64_t *spelled)
{
    uint64_t max_total = s->o && s->o->max_total ? s->o->max_total : WPK_DEFAULT_MAX_TOTAL;
    uint64_t ratio = s->o && s->o->max_ratio ? s->o->max_ratio : WPK_DEFAULT_MAX_RATIO;
    uint64_t out = length > UINT64_MAX - *spelled ? UINT64_MAX : *spelled + length;
    if (out > max_total || (out > WPK_RATIO_GRACE && out / (m->len ? m->len : 1) > ratio)) {
        char q[80];
        wpk_quote(q, sizeof q, name, strlen(name));
        return wpk_sink_fail(s, WPACK_E_LIMIT, "irpa: splat entry '%s': its 16-byte pattern "
                             "written out makes %llu bytes from a file of %llu (more than %llu "
                             "in all, or %llu:1): refused as a bomb", q, (unsigned long long)out,
                             (unsigned long long)m->len, (unsigned long long)max_total,
                             (unsigned long long)ratio);
    }
    *spelled = out;
    return WPACK_OK;
}

static int put_entry(wpk_sink *s, const wpk_mapped *m, const irpa_file *f, const irpa_entry *x,
                     const char *name, uint64_t *spelled)
{
    int dtype;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    int rc = entry_shape(s, x, &dtype, &rank, dims);
    if (rc)
        return rc;
    if (x->type == IRPA_DATA && x->alias_of)
        return put_alias(s, &f->e[x->alias_of - 1], name, dtype, rank, dims);
    if (x->type == IRPA_SPLAT && (x->pattern_len < 16 || dtype >= WPACK_DTYPE_BLOCK_BASE))
        return wpk_sink_splat(s, name, dtype, rank, dims, x->pattern);
    if (x->type == IRPA_SPLAT && (rc = splat_room(s, m, name, x->length, spelled)))
        return rc;
    rc = wpk_sink_begin(s, name, dtype, rank, dims);
    if (rc)
        return rc;
    if (x->type == IRPA_SPLAT) { /* 16-byte pattern: no dtype that wide, write it out */
        uint8_t *buf = malloc(1 << 16);
        if (!buf)
            return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        for (size_t i = 0; i < (1 << 16); i += 16)
            memcpy(buf + i, x->pattern, 16);
        for (uint64_t done = 0; done < x->length && !rc;) {
            size_t k = x->length - done < (1 << 16) ? (size_t)(x->length - done) : (1 << 16);
            rc = wpk_sink_write(s, buf, k);
            done += k;
        }
        free(buf);
        return rc ? rc : wpk_sink_end(s);
    }
    /* data entries are stored bytes: moved as they are (wpk_sink_stream_mapped) */
    if ((rc = wpk_sink_stream_mapped(s, m, x->offset, x->length)))
        return rc;
    return wpk_sink_end(s);
}

int irpa_pack_file(wpk_sink *s, const char *path)
{
    wpk_mapped m;
    int rc = wpk_map_file(s, path, &m);
    if (rc)
        return rc;
    irpa_file f;
    char err[700];
    uint64_t spelled = 0; /* bytes of 16-byte splats written out */
    if ((rc = irpa_parse(m.p, m.len, &f, err, sizeof err))) {
        wpk_unmap_file(&m);
        return wpk_sink_fail(s, rc, "%s", err);
    }
    for (uint64_t i = 0; i < f.n && !rc; i++) {
        const irpa_entry *x = &f.e[i];
        char q[80];
        int nul;
        char *name = entry_name(x, &nul);
        if (nul) {
            wpk_quote(q, sizeof q, (const char *)x->name, (size_t)x->name_len);
            rc = wpk_sink_fail(s, WPACK_E_NAME, "irpa: entry '%s' holds a NUL byte", q);
            break;
        }
        if (!name) {
            rc = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
            break;
        }
        rc = put_entry(s, &m, &f, x, name, &spelled);
        free(name);
    }
    irpa_free(&f);
    wpk_unmap_file(&m);
    return rc;
}
