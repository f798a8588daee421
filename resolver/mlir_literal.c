/* mlir_literal.c - inline MLIR elements values (dense<...> literals, hex
 * dense<"0x...">, builtin resource blobs) to tensor bytes, for externalize
 * (see mlir_literal.h; nothing to do with the dense kernel, kernel/). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* What an MLIR token of a dense literal is, as mlir-opt-19's lexer reads it
 * (mlir/lib/AsmParser/Lexer.cpp): no '+' sign, no "nan"/"inf", a float
 * needs digits and a '.' ("1e5" and ".5" are not floats there), a hex
 * integer is "0x" (lower-case x) and hex digits. */
enum { NUM_BAD, NUM_INT, NUM_HEX, NUM_FLOAT, NUM_TRUE, NUM_FALSE };

static int digits(const char *s, size_t *i)
{
    size_t st = *i;
    while (s[*i] >= '0' && s[*i] <= '9')
        (*i)++;
    return *i > st;
}

static int number_kind(const char *s)
{
    if (strcmp(s, "true") == 0)
        return NUM_TRUE;
    if (strcmp(s, "false") == 0)
        return NUM_FALSE;
    size_t i = 0;
    if (s[0] == '0' && s[1] == 'x' && wpk_hex_digit((unsigned char)s[2]) >= 0) {
        for (i = 2; wpk_hex_digit((unsigned char)s[i]) >= 0; i++)
            ;
        return s[i] ? NUM_BAD : NUM_HEX;
    }
    if (!digits(s, &i))
        return NUM_BAD;
    if (!s[i])
        return NUM_INT;
    if (s[i++] != '.')
        return NUM_BAD;
    digits(s, &i);
    if (s[i] == 'e' || s[i] == 'E') {
        i++;
        if (s[i] == '-' || s[i] == '+')
            i++;
        if (!digits(s, &i))
            return NUM_BAD;
    }
    return s[i] ? NUM_BAD : NUM_FLOAT;
}

/* Why a word is no number, with the MLIR spelling where one is near. */
static int not_a_number(const elem_kind *k, const char *shown, const char *s, char *why,
                        size_t whylen)
{
    const char *m = s + (s[0] == '+');
    if (k->is_float && (strcasecmp(m, "nan") == 0 || strcasecmp(m, "inf") == 0 ||
                        strcasecmp(m, "infinity") == 0))
        wpk_fmt(why, whylen, "'%s' is not a number in MLIR (NaN and infinities are written as "
                "bit patterns, e.g. 0x7FC00000 for f32)", shown);
    else if (s[0] == '+')
        wpk_fmt(why, whylen, "'%s' is not a number in MLIR (no '+' sign)", shown);
    else if (k->is_float && strpbrk(s, "eE") && !strchr(s, '.') && s[0] >= '0' && s[0] <= '9')
        wpk_fmt(why, whylen, "'%s' is not a number in MLIR (a float needs a '.', e.g. 1.0e5)", shown);
    else if (s[0] == '.')
        wpk_fmt(why, whylen, "'%s' is not a number in MLIR (a float needs a digit before the '.')",
                shown);
    else
        wpk_fmt(why, whylen, "'%s' is not a number", shown);
    return WPACK_E_INPUT;
}

/* One element: the word s (NUL-terminated, no sign; neg: a '-' token came
 * first) to its bytes, with mlir-opt-19's rules: floats take a float
 * literal (read as f64, then rounded to the element type to nearest even,
 * as MLIR's APFloat conversion does) or a 0x bit pattern of at most the
 * element's width without '-'; integers take decimal or 0x digits that fit
 * (signless iN -2^(N-1)..2^N-1, siN signed, uiN unsigned and no '-', and
 * never -0); i1 also true and false. */
static int encode_literal(const elem_kind *k, int neg, const char *s, unsigned char *dst,
                          char *why, size_t whylen)
{
    char shown[100];
    wpk_fmt(shown, sizeof shown, "%s%s", neg ? "-" : "", s);
    int kind = number_kind(s);
    if (kind == NUM_BAD)
        return not_a_number(k, shown, s, why, whylen);
    if (kind == NUM_TRUE || kind == NUM_FALSE) {
        if (!k->is_bool) {
            wpk_fmt(why, whylen, "'%s' is only an i1 value", shown);
            return WPACK_E_INPUT;
        }
        if (neg) {
            wpk_fmt(why, whylen, "'%s' is not an i1 value (true, false or an integer)", shown);
            return WPACK_E_INPUT;
        }
        dst[0] = kind == NUM_TRUE;
        return 0;
    }
    if (k->is_float && kind == NUM_HEX) {
        /* a bit pattern of the element's width */
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s + 2, &end, 16);
        if (neg) {
            wpk_fmt(why, whylen, "'%s': a hexadecimal float bit pattern takes no '-'", shown);
            return WPACK_E_INPUT;
        }
        if (errno || (k->bits < 64 && v >> k->bits)) {
            wpk_fmt(why, whylen, "'%s' is not a %u-bit float bit pattern", shown, k->bits);
            return WPACK_E_INPUT;
        }
        store_le(dst, v, k->esz);
        return 0;
    }
    if (k->is_float && kind == NUM_INT) {
        wpk_fmt(why, whylen, "'%s' is an integer; %s elements need a float literal with a '.' "
                "(%s.0) or a 0x bit pattern", shown, wpack_dtype_name(k->dtype), shown);
        return WPACK_E_INPUT;
    }
    if (k->is_float) {
        double d = strtod(s, NULL); /* the grammar above is strtod's too */
        if (neg)
            d = -d;
        if (k->dtype == WPACK_DTYPE_F64) {
            uint64_t u;
            memcpy(&u, &d, 8);
            store_le(dst, u, 8);
        } else if (k->dtype == WPACK_DTYPE_F32) {
            store_le(dst, round_minifloat(d, 8, 23), 4);
        } else if (k->dtype == WPACK_DTYPE_F16) {
            store_le(dst, round_minifloat(d, 5, 10), 2);
        } else {
            store_le(dst, round_minifloat(d, 8, 7), 2);
        }
        return 0;
    }
    if (kind == NUM_FLOAT) {
        wpk_fmt(why, whylen, "'%s' is not an integer", shown);
        return WPACK_E_INPUT;
    }
    unsigned bits = k->is_bool ? 1 : k->bits;
    const char *sfx = k->is_bool ? "i1" : NULL;
    char tname[8];
    if (!sfx) {
        wpk_fmt(tname, sizeof tname, "%s%u", k->is_signed ? "si" : k->is_unsigned ? "ui" : "i", bits);
        sfx = tname;
    }
    if (neg && k->is_unsigned) {
        wpk_fmt(why, whylen, "%s does not fit in %s (a negative value)", shown, sfx);
        return WPACK_E_INPUT;
    }
    errno = 0;
    unsigned long long mag = strtoull(s + (kind == NUM_HEX ? 2 : 0), NULL, kind == NUM_HEX ? 16 : 10);
    uint64_t umax = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
    uint64_t smax = umax >> 1, nmax = smax + 1; /* largest magnitude when negative */
    /* -0 too: MLIR negates the value and wants the sign bit set */
    int ok = !errno && (neg ? mag >= 1 && mag <= nmax : mag <= (k->is_signed ? smax : umax));
    if (!ok) {
        wpk_fmt(why, whylen, "%s does not fit in %s", shown, sfx);
        return WPACK_E_INPUT;
    }
    uint64_t v = neg ? (uint64_t)0 - (uint64_t)mag : (uint64_t)mag;
    if (k->is_bool)
        v &= 1;
    store_le(dst, v, k->esz);
    return 0;
}

/* Blanks and // comments from s[*i] on (before n). */
static void skip_blanks(const unsigned char *s, size_t n, size_t *i)
{
    while (*i < n) {
        unsigned char c = s[*i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            (*i)++;
        else if (c == '/' && *i + 1 < n && s[*i + 1] == '/')
            while (*i < n && s[*i] != '\n')
                (*i)++;
        else
            break;
    }
}

static int is_lit_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '-' || c == '+' || c == '.' || c == '_';
}

/* One element at s[*i]: an optional '-' token (blanks may follow it, as
 * between any MLIR tokens), then a run of literal characters into lit
 * (NUL-terminated). 0, or WPACK_E_INPUT with why. */
static int read_word(const unsigned char *s, size_t n, size_t *i, char *lit, size_t cap, int *neg,
                     char *why, size_t whylen)
{
    *neg = 0;
    if (*i < n && s[*i] == '-') {
        *neg = 1;
        (*i)++;
        skip_blanks(s, n, i);
    }
    size_t st = *i;
    while (*i < n && is_lit_char(s[*i]))
        (*i)++;
    if (*i == st) {
        wpk_fmt(why, whylen, "expected a number after '-'");
        return WPACK_E_INPUT;
    }
    if (*i - st >= cap) {
        wpk_fmt(why, whylen, "literal too long");
        *i = st;
        return WPACK_E_INPUT;
    }
    memcpy(lit, s + st, *i - st);
    lit[*i - st] = 0;
    return 0;
}

/* After the whole value (a splat, a hex string, the outer list): only
 * blanks and comments up to dense's closing '>'. */
static int expect_close(const unsigned char *s, size_t n, size_t *i, char *why, size_t whylen)
{
    skip_blanks(s, n, i);
    if (*i < n && s[*i] == '>')
        return 0;
    wpk_fmt(why, whylen, "expected '>' after the dense value, found '%c'", *i < n ? s[*i] : ' ');
    return WPACK_E_INPUT;
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
        if (!q || (size_t)(q - s) < i + 3 || s[i + 1] != '0' || s[i + 2] != 'x')
            return 0;
        const unsigned char *h = s + i + 3;
        size_t ndig = (size_t)(q - h);
        if (check_hex(h, ndig, why, whylen))
            return 0; /* wpk_literal_decode says what is wrong */
        if (k.is_bool) {
            int b = ndig == 2 ? wpk_hex_digit(h[0]) << 4 | wpk_hex_digit(h[1]) : -1;
            size_t after = (size_t)(q - s) + 1;
            if (nel > 8 && (b == 0 || b == 0xFF) && !expect_close(s, n, &after, why, whylen)) {
                elem[0] = b ? 1 : 0;
                *is_splat = 1;
            }
            return 0;
        }
        if (ndig / 2 != k.esz || ndig / 2 == nbytes)
            return 0;
        size_t after = (size_t)(q - s) + 1;
        if (expect_close(s, n, &after, why, whylen)) {
            *where = value.off + after;
            return WPACK_E_INPUT;
        }
        for (size_t j = 0; j < k.esz; j++)
            elem[j] = (unsigned char)(wpk_hex_digit(h[2 * j]) << 4 | wpk_hex_digit(h[2 * j + 1]));
        *is_splat = 1;
        return 0;
    }
    if (i >= n || s[i] == '[' || !is_lit_char(s[i]))
        return 0; /* a list (or not a literal: wpk_literal_decode says so) */
    /* one bare scalar, then the end */
    size_t st = i;
    char lit[96];
    int neg;
    int rc = read_word(s, n, &i, lit, sizeof lit, &neg, why, whylen);
    if (!rc && (rc = encode_literal(&k, neg, lit, elem, why, whylen)))
        i = st;
    if (!rc)
        rc = expect_close(s, n, &i, why, whylen);
    if (rc) {
        *where = value.off + i;
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
        if (!q || (size_t)(q - s) < i + 3 || s[i + 1] != '0' || s[i + 2] != 'x') {
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
        size_t after = (size_t)(q - s) + 1;
        if ((rc = expect_close(s, n, &after, why, whylen))) {
            *where = value.off + after;
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
    /* literals: nested [ ... ] lists (a bare scalar is a splat, above),
     * separated as MLIR wants them: one ',' between items, none first or
     * last, nothing after the outer list but the closing '>' */
    unsigned depth = 0;
    uint64_t count = 0;
    int want_item = 1, closed = 0; /* want_item: after a '[' or a ',' */
    /* the lists' shape must be T's, as MLIR wants it: a list at depth d
     * holds dims[d-1] items, lists down to depth rank, numbers there only
     * (a ragged [[1.0, 2.0, 3.0], [4.0]] for 2x2 was taken as 4 elements) */
    uint64_t items[WPACK_MAX_RANK + 1];
    while (!rc && !o->failed && !closed) {
        skip_blanks(s, n, &i);
        if (i >= n || (s[i] == '>' && !depth))
            break;
        unsigned char c = s[i];
        if (c == ',') {
            if (want_item || !depth) {
                wpk_fmt(why, whylen, "unexpected ',' in a dense literal");
                rc = WPACK_E_INPUT;
                break;
            }
            want_item = 1;
            i++;
            continue;
        }
        if (c == '[') {
            if (!want_item) {
                wpk_fmt(why, whylen, "expected ',' or ']' before '['");
                rc = WPACK_E_INPUT;
                break;
            }
            if (depth >= t->rank) {
                wpk_fmt(why, whylen, "lists nested deeper than the type's rank %u", t->rank);
                rc = WPACK_E_INPUT;
                break;
            }
            if (depth)
                items[depth]++;
            items[++depth] = 0;
            i++;
            continue;
        }
        if (c == ']') {
            if (!depth) {
                wpk_fmt(why, whylen, "']' without '['");
                rc = WPACK_E_INPUT;
                break;
            }
            if (want_item && items[depth]) {
                wpk_fmt(why, whylen, "a ',' before ']' in a dense literal");
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
            want_item = 0;
            closed = !depth;
            i++;
            continue;
        }
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
        if (!want_item || !depth) {
            wpk_fmt(why, whylen, "expected ',' or ']' before '%c'", c);
            rc = WPACK_E_INPUT;
            break;
        }
        size_t st = i;
        char lit[96];
        int neg;
        if ((rc = read_word(s, n, &i, lit, sizeof lit, &neg, why, whylen)) ||
            (rc = encode_literal(&k, neg, lit, elem, why, whylen))) {
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
        if (depth != t->rank) {
            wpk_fmt(why, whylen, "a number at list depth %u; the type's rank is %u", depth, t->rank);
            rc = WPACK_E_INPUT;
            i = st;
            break;
        }
        items[depth]++;
        want_item = 0;
        out_put(o, elem, k.esz);
    }
    if (!rc && closed)
        rc = expect_close(s, n, &i, why, whylen);
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
