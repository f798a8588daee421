/* mlir_literal.c - inline MLIR elements values (dense<...> literals, hex
 * dense<"0x...">, builtin resource blobs) to tensor bytes, for externalize
 * (see mlir_literal.h; nothing to do with the dense kernel, kernel/). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "mlir_literal.h"
#include "internal.h"
#include "wpack.h"

enum { OUT_CAP = 1 << 16 };

typedef struct {
    wpk_bytes_fn fn;
    void *user;
    size_t used;
    int failed;
    unsigned char buf[OUT_CAP];
} outbuf;

static int out_flush(outbuf *o)
{
    if (!o->failed && o->used && o->fn(o->user, o->buf, o->used))
        o->failed = 1;
    o->used = 0;
    return o->failed;
}

static int out_put(outbuf *o, const void *p, size_t n)
{
    if (o->used + n > OUT_CAP && out_flush(o))
        return 1;
    memcpy(o->buf + o->used, p, n);
    o->used += n;
    return o->failed;
}

/* count copies of one element of esz bytes */
static int out_repeat(outbuf *o, const unsigned char *elem, size_t esz, uint64_t count)
{
    for (uint64_t i = 0; i < count && !o->failed; i++)
        out_put(o, elem, esz);
    return o->failed;
}

int wpk_literal_dtype(const char *elem)
{
    static const char *const ok[] = {"f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64",
                                     "si8", "si16", "si32", "si64", "ui8", "ui16", "ui32", "ui64"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(elem, ok[i]) == 0)
            return wpk_mlir_elem_dtype(elem);
    return 0;
}

uint64_t wpk_literal_nbytes(const wpk_mlir_tensor *t, int *ok)
{
    int dt = wpk_literal_dtype(t->elem);
    uint64_t n = 1;
    *ok = dt != 0;
    for (unsigned i = 0; *ok && i < t->rank; i++)
        *ok = wpk_mul(n, t->dims[i], &n);
    if (*ok)
        *ok = wpk_mul(n, wpack_dtype_size(dt), &n);
    return *ok ? n : 0;
}

static uint64_t nelems_of(const wpk_mlir_tensor *t)
{
    uint64_t n = 1;
    for (unsigned i = 0; i < t->rank; i++)
        n *= t->dims[i]; /* checked by wpk_literal_nbytes first */
    return n;
}

int wpk_hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Round a double to a binary float with ebits exponent and mbits mantissa
 * bits, to nearest even, with subnormals and overflow to infinity. */
static uint32_t round_minifloat(double v, int ebits, int mbits)
{
    uint32_t sign = signbit(v) ? 1u << (ebits + mbits) : 0;
    double a = fabs(v);
    uint32_t exp_all = (1u << ebits) - 1;
    if (isnan(v))
        return sign | exp_all << mbits | 1u << (mbits - 1);
    if (isinf(a))
        return sign | exp_all << mbits;
    if (a == 0)
        return sign;
    int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, x;
    frexp(a, &x);
    int e = x - 1;
    if (e < emin) {
        /* subnormal; a carry into the exponent field is the right encoding */
        double q = nearbyint(ldexp(a, mbits - emin));
        return sign | (uint32_t)q;
    }
    double q = nearbyint(ldexp(a, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
    if (q >= ldexp(1.0, mbits + 1)) {
        q /= 2;
        e++;
    }
    if (e > bias)
        return sign | exp_all << mbits;
    return sign | (uint32_t)(e + bias) << mbits | ((uint32_t)q - (1u << mbits));
}

typedef struct {
    int dtype;
    size_t esz;
    int is_float, is_bool, is_signed, is_unsigned; /* signless: neither */
    unsigned bits;
} elem_kind;

static void kind_of(const wpk_mlir_tensor *t, elem_kind *k)
{
    memset(k, 0, sizeof *k);
    k->dtype = wpk_literal_dtype(t->elem);
    k->esz = wpack_dtype_size(k->dtype);
    k->is_float = wpack_dtype_is_float(k->dtype);
    k->is_bool = strcmp(t->elem, "i1") == 0;
    k->is_signed = t->elem[0] == 's';
    k->is_unsigned = t->elem[0] == 'u';
    k->bits = (unsigned)k->esz * 8;
}

static void store_le(unsigned char *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One literal (NUL-terminated copy in s) to its element bytes. */
static int encode_literal(const elem_kind *k, const char *s, unsigned char *dst, char *why,
                          size_t whylen)
{
    int neg = s[0] == '-';
    const char *m = s + (s[0] == '-' || s[0] == '+');
    int hex = m[0] == '0' && (m[1] == 'x' || m[1] == 'X');
    if (k->is_bool) {
        if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0) {
            dst[0] = 1;
            return 0;
        }
        if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0) {
            dst[0] = 0;
            return 0;
        }
        wpk_fmt(why, whylen, "'%s' is not an i1 value (true, false, 1, 0)", s);
        return WPACK_E_INPUT;
    }
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
        wpk_fmt(why, whylen, "'%s' is only an i1 value", s);
        return WPACK_E_INPUT;
    }
    if (k->is_float && hex) {
        /* a bit pattern of the element's width */
        char *end;
        errno = 0;
        unsigned long long v = strtoull(m + 2, &end, 16);
        if (neg || *end || end == m + 2 || errno || (k->bits < 64 && v >> k->bits)) {
            wpk_fmt(why, whylen, "'%s' is not a %u-bit float bit pattern", s, k->bits);
            return WPACK_E_INPUT;
        }
        store_le(dst, v, k->esz);
        return 0;
    }
    if (k->is_float) {
        char *end;
        if (k->dtype == WPACK_DTYPE_F32) {
            float f = strtof(s, &end);
            if (*end || end == s) {
                wpk_fmt(why, whylen, "'%s' is not a number", s);
                return WPACK_E_INPUT;
            }
            uint32_t u;
            memcpy(&u, &f, 4);
            store_le(dst, u, 4);
            return 0;
        }
        double d = strtod(s, &end);
        if (*end || end == s) {
            wpk_fmt(why, whylen, "'%s' is not a number", s);
            return WPACK_E_INPUT;
        }
        if (k->dtype == WPACK_DTYPE_F64) {
            uint64_t u;
            memcpy(&u, &d, 8);
            store_le(dst, u, 8);
        } else if (k->dtype == WPACK_DTYPE_F16) {
            store_le(dst, round_minifloat(d, 5, 10), 2);
        } else {
            store_le(dst, round_minifloat(d, 8, 7), 2);
        }
        return 0;
    }
    /* integers: signless iN takes -2^(N-1) .. 2^N - 1 (as MLIR does) */
    char *end;
    errno = 0;
    unsigned long long mag = strtoull(m + (hex ? 2 : 0), &end, hex ? 16 : 10);
    if (*end || end == m + (hex ? 2 : 0) || errno || m[0] == '-' || m[0] == '+') {
        wpk_fmt(why, whylen, "'%s' is not an integer", s);
        return WPACK_E_INPUT;
    }
    unsigned bits = k->bits;
    uint64_t umax = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
    uint64_t smax = umax >> 1, nmax = smax + 1; /* largest magnitude when negative */
    int ok = neg ? (!k->is_unsigned && mag <= nmax) : (mag <= (k->is_signed ? smax : umax));
    if (!ok) {
        wpk_fmt(why, whylen, "%s does not fit in %s%u", s,
                k->is_signed ? "si" : k->is_unsigned ? "ui" : "i", bits);
        return WPACK_E_INPUT;
    }
    uint64_t v = neg ? (uint64_t)0 - (uint64_t)mag : (uint64_t)mag;
    store_le(dst, v, k->esz);
    return 0;
}

static int is_lit_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '-' || c == '+' || c == '.' || c == '_';
}

/* Hex digits h[0..n) (even n) decoded to the sink. */
static int hex_stream(outbuf *o, const unsigned char *h, size_t n)
{
    for (size_t i = 0; i + 1 < n && !o->failed; i += 2) {
        if (o->used == OUT_CAP && out_flush(o))
            break;
        o->buf[o->used++] = (unsigned char)(wpk_hex_digit(h[i]) << 4 | wpk_hex_digit(h[i + 1]));
    }
    return o->failed;
}

/* i1 hex: bit-packed LSB first. */
static int bool_hex(outbuf *o, const unsigned char *h, size_t ndig, uint64_t nel, char *why,
                    size_t whylen)
{
    size_t nb = ndig / 2; /* the 0x00/0xFF splat is wpk_literal_splat's */
    if (nb != (nel + 7) / 8) {
        wpk_fmt(why, whylen, "i1 hex data has %zu bytes; %llu bits packed need %llu", nb,
                (unsigned long long)nel, (unsigned long long)((nel + 7) / 8));
        return WPACK_E_INPUT;
    }
    for (uint64_t i = 0; i < nel && !o->failed; i++) {
        int b = wpk_hex_digit(h[2 * (i / 8)]) << 4 | wpk_hex_digit(h[2 * (i / 8) + 1]);
        unsigned char v = (unsigned char)((b >> (i % 8)) & 1);
        out_put(o, &v, 1);
    }
    return o->failed;
}

static int check_hex(const unsigned char *h, size_t n, char *why, size_t whylen)
{
    for (size_t i = 0; i < n; i++)
        if (wpk_hex_digit(h[i]) < 0) {
            wpk_fmt(why, whylen, "'%c' is not a hex digit", h[i]);
            return WPACK_E_INPUT;
        }
    if (n % 2) {
        wpk_fmt(why, whylen, "odd number of hex digits (%zu)", n);
        return WPACK_E_INPUT;
    }
    return 0;
}

/* After "dense" and '<' (and blanks) of value: the offset of its body, or
 * 0 with why set. */
static size_t body_start(const unsigned char *s, size_t n, char *why, size_t whylen)
{
    size_t i = 5; /* after "dense" */
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    if (i >= n || s[i] != '<') {
        wpk_fmt(why, whylen, "expected '<' after dense");
        return 0;
    }
    i++;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

int wpk_literal_splat(const char *buf, wpk_span value, const wpk_mlir_tensor *t,
                      unsigned char elem[8], int *is_splat, char *why, size_t whylen,
                      size_t *where)
{
    int ok;
    uint64_t nbytes = wpk_literal_nbytes(t, &ok);
    *is_splat = 0;
    *where = value.off;
    if (!ok) {
        wpk_fmt(why, whylen, "element type %s is not one externalize takes", t->elem);
        return WPACK_E_UNSUPPORTED;
    }
    elem_kind k;
    kind_of(t, &k);
    uint64_t nel = nelems_of(t);
    const unsigned char *s = (const unsigned char *)buf + value.off;
    size_t n = value.len, i = body_start(s, n, why, whylen);
    if (!i) {
        *where = value.off + (n < 5 ? n : 5);
        return WPACK_E_INPUT;
    }
    if (i < n && s[i] == '"') {
        /* "0x" and one element (i1: one byte 0x00 or 0xFF for more than 8
         * elements; fewer are bit-packed in that byte); only a short
         * string is looked at, a long one is data */
        size_t look = n - i - 1 < 2 + 16 + 1 ? n - i - 1 : 2 + 16 + 1;
        const unsigned char *q = memchr(s + i + 1, '"', look);
        if (!q || (size_t)(q - s) < i + 3 || s[i + 1] != '0' || (s[i + 2] | 0x20) != 'x')
            return 0;
        const unsigned char *h = s + i + 3;
        size_t ndig = (size_t)(q - h);
        if (check_hex(h, ndig, why, whylen))
            return 0; /* wpk_literal_decode says what is wrong */
        if (k.is_bool) {
            int b = ndig == 2 ? wpk_hex_digit(h[0]) << 4 | wpk_hex_digit(h[1]) : -1;
            if (nel > 8 && (b == 0 || b == 0xFF)) {
                elem[0] = b ? 1 : 0;
                *is_splat = 1;
            }
            return 0;
        }
        if (ndig / 2 != k.esz || ndig / 2 == nbytes)
            return 0;
        for (size_t j = 0; j < k.esz; j++)
            elem[j] = (unsigned char)(wpk_hex_digit(h[2 * j]) << 4 | wpk_hex_digit(h[2 * j + 1]));
        *is_splat = 1;
        return 0;
    }
    if (i >= n || s[i] == '[' || !is_lit_char(s[i]))
        return 0; /* a list (or not a literal: wpk_literal_decode says so) */
    /* one bare scalar */
    size_t st = i;
    while (i < n && is_lit_char(s[i]))
        i++;
    char lit[96];
    if (i - st >= sizeof lit) {
        wpk_fmt(why, whylen, "literal too long");
        *where = value.off + st;
        return WPACK_E_INPUT;
    }
    memcpy(lit, s + st, i - st);
    lit[i - st] = 0;
    int rc = encode_literal(&k, lit, elem, why, whylen);
    if (rc) {
        *where = value.off + st;
        return rc;
    }
    *is_splat = 1;
    return 0;
}

int wpk_literal_decode(const char *buf, wpk_span value, const wpk_mlir_tensor *t, wpk_bytes_fn fn,
                     void *user, char *why, size_t whylen, size_t *where)
{
    /* the splat check also refuses an element type the decoder does not
     * take, and an unreadable head, with the messages of this function */
    unsigned char elem[8];
    int splat, ok;
    int rc = wpk_literal_splat(buf, value, t, elem, &splat, why, whylen, where);
    if (rc)
        return rc;
    uint64_t nbytes = wpk_literal_nbytes(t, &ok);
    elem_kind k;
    kind_of(t, &k);
    uint64_t nel = nelems_of(t);
    const unsigned char *s = (const unsigned char *)buf + value.off;
    size_t n = value.len, i = body_start(s, n, why, whylen);
    outbuf *o = malloc(sizeof *o);
    if (!o) {
        wpk_fmt(why, whylen, "out of memory");
        return WPACK_E_NOMEM;
    }
    o->fn = fn;
    o->user = user;
    o->used = 0;
    o->failed = 0;
    if (splat) { /* a bare scalar, or hex of one element */
        out_repeat(o, elem, k.esz, nel);
        goto done;
    }
    if (i < n && s[i] == '"') {
        /* dense<"0x..."> : raw little-endian bytes (one element: a splat, above) */
        const unsigned char *q = memchr(s + i + 1, '"', n - i - 1);
        if (!q || (size_t)(q - s) < i + 3 || s[i + 1] != '0' || (s[i + 2] | 0x20) != 'x') {
            wpk_fmt(why, whylen, "a dense string that is not \"0x...\" hex (string tensors are not weights)");
            *where = value.off + i;
            rc = WPACK_E_UNSUPPORTED;
            goto done;
        }
        const unsigned char *h = s + i + 3;
        size_t ndig = (size_t)(q - h);
        if ((rc = check_hex(h, ndig, why, whylen))) {
            *where = value.off + i;
            goto done;
        }
        if (k.is_bool) {
            rc = bool_hex(o, h, ndig, nel, why, whylen);
        } else if (ndig / 2 == nbytes) {
            hex_stream(o, h, ndig);
        } else {
            wpk_fmt(why, whylen, "hex data has %zu bytes; %s needs %llu (or %zu for a splat)",
                    ndig / 2, t->elem, (unsigned long long)nbytes, k.esz);
            rc = WPACK_E_INPUT;
        }
        if (rc)
            *where = value.off + i;
        goto done;
    }
    /* literals: nested [ ... ] lists (a bare scalar is a splat, above) */
    int bracketed = i < n && s[i] == '[';
    unsigned depth = 0;
    uint64_t count = 0;
    /* the lists' shape must be T's, as MLIR wants it: a list at depth d
     * holds dims[d-1] items, lists down to depth rank, numbers there only
     * (a ragged [[1.0, 2.0, 3.0], [4.0]] for 2x2 was taken as 4 elements) */
    uint64_t items[WPACK_MAX_RANK + 1];
    for (; i < n && !rc && !o->failed; i++) {
        unsigned char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',')
            continue;
        if (c == '[') {
            if (depth >= t->rank) {
                wpk_fmt(why, whylen, "lists nested deeper than the type's rank %u", t->rank);
                rc = WPACK_E_INPUT;
                break;
            }
            if (depth)
                items[depth]++;
            items[++depth] = 0;
            continue;
        }
        if (c == ']') {
            if (!depth) {
                wpk_fmt(why, whylen, "']' without '['");
                rc = WPACK_E_INPUT;
                break;
            }
            if (!items[depth] && depth < t->rank) {
                wpk_fmt(why, whylen, "an empty list at depth %u; the type's rank is %u", depth,
                        t->rank);
                rc = WPACK_E_INPUT;
                break;
            }
            if (items[depth] != t->dims[depth - 1]) {
                wpk_fmt(why, whylen, "a list of %llu items at depth %u; the type's dim is %llu",
                        (unsigned long long)items[depth], depth,
                        (unsigned long long)t->dims[depth - 1]);
                rc = WPACK_E_INPUT;
                break;
            }
            depth--;
            continue;
        }
        if (c == '>')
            break;
        if (c == '(') {
            wpk_fmt(why, whylen, "complex elements are not supported");
            rc = WPACK_E_UNSUPPORTED;
            break;
        }
        if (!is_lit_char(c)) {
            wpk_fmt(why, whylen, "unexpected '%c' in a dense literal", c);
            rc = WPACK_E_INPUT;
            break;
        }
        size_t st = i;
        while (i < n && is_lit_char(s[i]))
            i++;
        char lit[96];
        size_t len = i - st;
        if (len >= sizeof lit) {
            wpk_fmt(why, whylen, "literal too long");
            rc = WPACK_E_INPUT;
            i = st;
            break;
        }
        memcpy(lit, s + st, len);
        lit[len] = 0;
        i--;
        if ((rc = encode_literal(&k, lit, elem, why, whylen))) {
            i = st;
            break;
        }
        if (++count > nel) {
            wpk_fmt(why, whylen, "more elements than the type holds (%llu)",
                    (unsigned long long)nel);
            rc = WPACK_E_INPUT;
            i = st;
            break;
        }
        if (!bracketed)
            break; /* a splat: one scalar */
        if (depth != t->rank) {
            wpk_fmt(why, whylen, "a number at list depth %u; the type's rank is %u", depth, t->rank);
            rc = WPACK_E_INPUT;
            i = st;
            break;
        }
        items[depth]++;
        out_put(o, elem, k.esz);
    }
    if (rc) {
        *where = value.off + i;
        goto done;
    }
    if (depth) {
        wpk_fmt(why, whylen, "unbalanced '[' in a dense literal");
        rc = WPACK_E_INPUT;
    } else if (count != nel) {
        wpk_fmt(why, whylen, "%llu elements; the type holds %llu", (unsigned long long)count,
                (unsigned long long)nel);
        rc = WPACK_E_INPUT;
    }
done:
    if (!rc)
        out_flush(o);
    if (!rc && o->failed) {
        wpk_fmt(why, whylen, "writing the tensor bytes failed");
        rc = WPACK_E_IO;
    }
    free(o);
    return rc;
}

int wpk_literal_blob_decode(const char *buf, const wpk_resource *r, const wpk_mlir_tensor *t,
                    wpk_bytes_fn fn, void *user, char *why, size_t whylen)
{
    int ok;
    uint64_t nbytes = wpk_literal_nbytes(t, &ok);
    if (!ok) {
        wpk_fmt(why, whylen, "element type %s is not one externalize takes", t->elem);
        return WPACK_E_UNSUPPORTED;
    }
    size_t data_digits = r->blob.len - 8; /* the scanner checked >= 8, even, hex */
    if (data_digits / 2 != nbytes) {
        wpk_fmt(why, whylen, "resource blob has %zu bytes; the type needs %llu", data_digits / 2,
                (unsigned long long)nbytes);
        return WPACK_E_INPUT;
    }
    outbuf *o = malloc(sizeof *o);
    if (!o) {
        wpk_fmt(why, whylen, "out of memory");
        return WPACK_E_NOMEM;
    }
    o->fn = fn;
    o->user = user;
    o->used = 0;
    o->failed = 0;
    hex_stream(o, (const unsigned char *)buf + r->blob.off + 8, data_digits);
    out_flush(o);
    int rc = o->failed ? WPACK_E_IO : 0;
    if (rc)
        wpk_fmt(why, whylen, "writing the tensor bytes failed");
    free(o);
    return rc;
}
