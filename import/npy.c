/*
 * npy.c - the .npy header: a strict parser for untrusted files and the
 * formatter used by `wpack extract`.
 *
 * The header is a Python dict literal. numpy reads it with
 * ast.literal_eval; we accept the small subset numpy (and other writers
 * that copy it) produce, with a hand-written tokenizer, and reject the rest
 * with a message giving the file offset of the problem.
 */
#include <stdio.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "npy.h"

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ------------------------------------------------------------- preamble */

int npy_header_extent(const void *buf, size_t len, uint64_t *data_offset, char *err,
                      size_t errlen)
{
    const uint8_t *b = buf;
    size_t m = len < 6 ? len : 6;

    if (memcmp(b, npy_magic, m) != 0) {
        char hex[40];
        size_t o = 0;
        for (size_t i = 0; i < m; i++)
            o += (size_t)snprintf(hex + o, sizeof hex - o, "%s%02x", i ? " " : "", b[i]);
        hex[o] = 0;
        wpk_fmt(err, errlen, "not an npy file: starts with bytes %s, expected 93 4e 55 4d 50 59 "
                "(\"\\x93NUMPY\")", hex);
        return WPACK_E_INPUT;
    }
    if (len < 8) {
        wpk_fmt(err, errlen, "truncated: %zu bytes, too short for the npy magic and version",
                len);
        return WPACK_E_INPUT;
    }
    int major = b[6], minor = b[7];
    if (minor != 0 || major < 1 || major > 3) {
        wpk_fmt(err, errlen, "npy format version %d.%d not supported (1.0, 2.0 and 3.0 are)",
                major, minor);
        return WPACK_E_UNSUPPORTED;
    }
    size_t pre = major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    if (len < pre) {
        wpk_fmt(err, errlen, "truncated: %zu bytes, too short for the npy %d.0 header length "
                "field (needs %zu)", len, major, pre);
        return WPACK_E_INPUT;
    }
    uint64_t hlen = major == 1 ? wpk_ld16(b + 8) : wpk_ld32(b + 8);
    if (hlen > NPY_MAX_HEADER_LEN) {
        wpk_fmt(err, errlen, "header length %llu above the %u-byte limit",
                (unsigned long long)hlen, NPY_MAX_HEADER_LEN);
        return WPACK_E_INPUT;
    }
    *data_offset = pre + hlen;
    return WPACK_OK;
}

/* ------------------------------------------------------------ tokenizer */

typedef struct lexer {
    const uint8_t *s;  /* the header dict text */
    size_t n, i;
    size_t base;       /* file offset of s[0], for messages */
    int major;
    char *err;
    size_t errlen;
} lexer;

static size_t at(const lexer *lx)
{
    return lx->base + lx->i;
}

/* What is at the current position, for "found ..." in messages. */
static void found(const lexer *lx, char *buf, size_t len)
{
    if (lx->i >= lx->n) {
        wpk_fmt(buf, len, "the end of the header");
        return;
    }
    size_t k = lx->n - lx->i < 12 ? lx->n - lx->i : 12;
    char q[64];
    wpk_quote(q, sizeof q, (const char *)lx->s + lx->i, k);
    wpk_fmt(buf, len, "\"%s%s\"", q, k < lx->n - lx->i ? "..." : "");
}

static int expected(lexer *lx, const char *what)
{
    char f[96];
    found(lx, f, sizeof f);
    wpk_fmt(lx->err, lx->errlen, "header byte %zu: expected %s, found %s", at(lx), what, f);
    return WPACK_E_INPUT;
}

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static void skip_ws(lexer *lx)
{
    while (lx->i < lx->n && is_space(lx->s[lx->i]))
        lx->i++;
}

static int peek(const lexer *lx)
{
    return lx->i < lx->n ? lx->s[lx->i] : -1;
}

/* A quoted string without escapes: sets [*p, *p + *len) to its contents. */
static int lex_string(lexer *lx, const uint8_t **p, size_t *len, const char *what)
{
    int q = peek(lx);
    if (q != '\'' && q != '"')
        return expected(lx, what);
    size_t start = lx->i++;
    while (lx->i < lx->n && lx->s[lx->i] != q && lx->s[lx->i] != '\n' && lx->s[lx->i] != '\r') {
        uint8_t c = lx->s[lx->i];
        if (c == '\\') {
            wpk_fmt(lx->err, lx->errlen, "header byte %zu: escape sequences in strings are not "
                    "supported", at(lx));
            return WPACK_E_INPUT;
        }
        if (c < 0x20 || c == 0x7f) {
            wpk_fmt(lx->err, lx->errlen, "header byte %zu: control byte 0x%02x in the string "
                    "starting at byte %zu", at(lx), c, lx->base + start);
            return WPACK_E_INPUT;
        }
        lx->i++;
    }
    if (lx->i >= lx->n || lx->s[lx->i] != q) {
        wpk_fmt(lx->err, lx->errlen, "header byte %zu: unterminated string", lx->base + start);
        return WPACK_E_INPUT;
    }
    *p = lx->s + start + 1;
    *len = lx->i - start - 1;
    lx->i++;
    return WPACK_OK;
}

static int is_ident(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int lex_bool(lexer *lx, int *out)
{
    size_t start = lx->i;
    while (lx->i < lx->n && is_ident(lx->s[lx->i]))
        lx->i++;
    size_t k = lx->i - start;
    if (k == 4 && memcmp(lx->s + start, "True", 4) == 0)
        *out = 1;
    else if (k == 5 && memcmp(lx->s + start, "False", 5) == 0)
        *out = 0;
    else {
        lx->i = start;
        return expected(lx, "True or False for 'fortran_order'");
    }
    return WPACK_OK;
}

/* A dim: decimal digits, no sign, no leading zeros (Python 3 rejects them),
 * an 'L' suffix allowed in 1.0/2.0 files (Python 2 wrote longs that way;
 * numpy strips it for those versions too). */
static int lex_dim(lexer *lx, uint64_t *out)
{
    size_t start = lx->i;
    int neg = peek(lx) == '-';
    if (neg)
        lx->i++;
    size_t d0 = lx->i;
    uint64_t v = 0;
    int over = 0;
    while (lx->i < lx->n && lx->s[lx->i] >= '0' && lx->s[lx->i] <= '9') {
        unsigned dig = lx->s[lx->i] - '0';
        if (!wpk_mul(v, 10, &v) || !wpk_add(v, dig, &v))
            over = 1;
        lx->i++;
    }
    size_t nd = lx->i - d0;
    if (nd == 0) {
        lx->i = start;
        return expected(lx, "a non-negative integer dim in 'shape'");
    }
    char num[48];
    wpk_quote(num, sizeof num, (const char *)lx->s + start, lx->i - start < 40 ? lx->i - start : 40);
    if (neg) {
        wpk_fmt(lx->err, lx->errlen, "header byte %zu: shape dim %s is negative", lx->base + start,
                num);
        return WPACK_E_INPUT;
    }
    if (nd > 1 && lx->s[d0] == '0') {
        wpk_fmt(lx->err, lx->errlen, "header byte %zu: shape dim %s has a leading zero",
                lx->base + start, num);
        return WPACK_E_INPUT;
    }
    if (over) {
        wpk_fmt(lx->err, lx->errlen, "header byte %zu: shape dim %s%s does not fit in 64 bits",
                lx->base + start, num, lx->i - start > 40 ? "..." : "");
        return WPACK_E_INPUT;
    }
    if (lx->major < 3 && (peek(lx) == 'L' || peek(lx) == 'l'))
        lx->i++;
    if (lx->i < lx->n && is_ident(lx->s[lx->i]))
        return expected(lx, "',' or ')' after a shape dim");
    *out = v;
    return WPACK_OK;
}

/* A tuple of dims: "()", "(5,)", "(3, 4)", "(3, 4,)". Counts dims past
 * WPACK_MAX_RANK without storing them so the message can give the rank. */
static int lex_shape(lexer *lx, uint64_t *dims, unsigned *rank)
{
    if (peek(lx) == '[') {
        wpk_fmt(lx->err, lx->errlen, "header byte %zu: 'shape' is a list, numpy writes a tuple",
                at(lx));
        return WPACK_E_INPUT;
    }
    if (peek(lx) != '(')
        return expected(lx, "a tuple for 'shape'");
    size_t open = lx->i++;
    unsigned count = 0;
    int comma = 0;
    for (;;) {
        skip_ws(lx);
        if (peek(lx) == ')') {
            if (count == 1 && !comma) {
                wpk_fmt(lx->err, lx->errlen, "header byte %zu: 'shape' (%llu) is not a tuple: a "
                        "1-d shape needs a trailing comma, (%llu,)", lx->base + open,
                        (unsigned long long)dims[0], (unsigned long long)dims[0]);
                return WPACK_E_INPUT;
            }
            lx->i++;
            break;
        }
        if (count > 0 && !comma)
            return expected(lx, "',' or ')' in 'shape'");
        uint64_t v = 0; /* set by lex_dim; gcc -O1 -fsanitize=thread cannot see it */
        int rc = lex_dim(lx, &v);
        if (rc)
            return rc;
        if (count < WPACK_MAX_RANK)
            dims[count] = v;
        if (count < 1000000)
            count++;
        skip_ws(lx);
        comma = peek(lx) == ',';
        if (comma)
            lx->i++;
    }
    if (count > WPACK_MAX_RANK) {
        wpk_fmt(lx->err, lx->errlen, "header byte %zu: shape has rank %u, above the limit of %d",
                lx->base + open, count, WPACK_MAX_RANK);
        return WPACK_E_UNSUPPORTED;
    }
    *rank = count;
    return WPACK_OK;
}

/* ---------------------------------------------------------------- descr */

static int host_is_big_endian(void)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return 1;
#else
    return 0;
#endif
}

/* numpy's descr string to a wpack dtype. Kinds numpy has but wpack does not
 * take are WPACK_E_UNSUPPORTED; strings numpy would not understand are
 * WPACK_E_INPUT. */
static int classify_descr(const uint8_t *d, size_t n, size_t where, npy_header *h, char *err,
                          size_t errlen)
{
    char q[80];
    wpk_quote(q, sizeof q, (const char *)d, n);
    if (n == 0) {
        wpk_fmt(err, errlen, "header byte %zu: descr '' is empty", where);
        return WPACK_E_INPUT;
    }
    /* No byte-order character means native, as np.dtype('f8') does. */
    uint8_t order = '=';
    if (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=') {
        order = d[0];
        d++;
        n--;
    }
    if (n == 0) {
        wpk_fmt(err, errlen, "header byte %zu: descr '%s' has no type", where, q);
        return WPACK_E_INPUT;
    }
    static const struct {
        char kind;
        const char *what;
    } unsupported[] = {
        {'O', "object arrays"}, {'S', "byte strings"}, {'a', "byte strings"},
        {'U', "unicode strings"}, {'V', "void/raw records"}, {'M', "datetime64"},
        {'m', "timedelta64"}, {'c', "complex numbers"},
    };
    for (size_t k = 0; k < sizeof unsupported / sizeof unsupported[0]; k++) {
        if (d[0] == unsupported[k].kind) {
            wpk_fmt(err, errlen, "header byte %zu: descr '%s' (%s) not supported", where, q,
                    unsupported[k].what);
            return WPACK_E_UNSUPPORTED;
        }
    }

    int dtype = 0;
    unsigned size = 0;
    if (n == 1) {
        /* One-character type codes numpy also understands for 1-byte types. */
        if (d[0] == '?')
            dtype = WPACK_DTYPE_BOOL;
        else if (d[0] == 'b')
            dtype = WPACK_DTYPE_I8;
        else if (d[0] == 'B')
            dtype = WPACK_DTYPE_U8;
        size = 1;
    } else if (n <= 3) {
        size = 0;
        for (size_t k = 1; k < n; k++) {
            if (d[k] < '0' || d[k] > '9' || (k == 1 && d[k] == '0')) {
                size = 0;
                break;
            }
            size = size * 10 + (unsigned)(d[k] - '0');
        }
        switch (d[0]) {
        case 'f':
            dtype = size == 8 ? WPACK_DTYPE_F64 : size == 4 ? WPACK_DTYPE_F32
                  : size == 2 ? WPACK_DTYPE_F16 : 0;
            if (size == 16 || size == 12 || size == 10) {
                wpk_fmt(err, errlen, "header byte %zu: descr '%s' (extended-precision float) "
                        "not supported", where, q);
                return WPACK_E_UNSUPPORTED;
            }
            break;
        case 'i':
            dtype = size == 8 ? WPACK_DTYPE_I64 : size == 4 ? WPACK_DTYPE_I32
                  : size == 2 ? WPACK_DTYPE_I16 : size == 1 ? WPACK_DTYPE_I8 : 0;
            break;
        case 'u':
            dtype = size == 8 ? WPACK_DTYPE_U64 : size == 4 ? WPACK_DTYPE_U32
                  : size == 2 ? WPACK_DTYPE_U16 : size == 1 ? WPACK_DTYPE_U8 : 0;
            break;
        case 'b':
            dtype = size == 1 ? WPACK_DTYPE_BOOL : 0;
            break;
        default:
            break;
        }
    }
    if (!dtype) {
        wpk_fmt(err, errlen, "header byte %zu: descr '%s' is not a dtype wpack takes (expected "
                "one of f8 f4 f2 i8 i4 i2 i1 u8 u4 u2 u1 b1 after '<', '>', '|' or '=')", where,
                q);
        return WPACK_E_INPUT;
    }
    if (order == '|' && size > 1) {
        wpk_fmt(err, errlen, "header byte %zu: descr '%s': '|' (no byte order) is only valid for "
                "1-byte types", where, q);
        return WPACK_E_INPUT;
    }
    int big = order == '>' || (order == '=' && host_is_big_endian());
    h->dtype = dtype;
    h->elem_size = size;
    h->byteswap = big && size > 1;
    return WPACK_OK;
}

/* ------------------------------------------------- after the dict: comments */

/* Like numpy, the product of the non-zero dims (times the element size)
 * must not overflow even when another dim is zero, so the answer does not
 * depend on dim order: what the parser takes and the formatter writes. */
static int shape_fits(unsigned rank, const uint64_t *dims, size_t elem_size, uint64_t *nelems,
                      uint64_t *nbytes)
{
    uint64_t ne = 1, nb;
    int zero = 0;
    for (unsigned k = 0; k < rank; k++) {
        if (dims[k] == 0)
            zero = 1;
        else if (!wpk_mul(ne, dims[k], &ne))
            return 0;
    }
    if (!wpk_mul(ne, elem_size, &nb))
        return 0;
    *nelems = zero ? 0 : ne;
    *nbytes = zero ? 0 : nb;
    return 1;
}

/* "# wpack dtype bf16 (raw bits)": the comment npy_format_header writes.
 * Only taken when the stored type is the raw type that dtype is written as. */
static void apply_dtype_comment(const uint8_t *c, size_t n, npy_header *h)
{
    static const char pfx[] = "wpack dtype ";
    static const struct {
        const char *name;
        int dtype, raw;
    } raw[] = {
        {"bf16", WPACK_DTYPE_BF16, WPACK_DTYPE_U16},
        {"f8e4m3fn", WPACK_DTYPE_F8E4M3FN, WPACK_DTYPE_U8},
        {"f8e5m2", WPACK_DTYPE_F8E5M2, WPACK_DTYPE_U8},
    };
    while (n && *c == ' ') {
        c++;
        n--;
    }
    if (n < sizeof pfx - 1 || memcmp(c, pfx, sizeof pfx - 1) != 0)
        return;
    c += sizeof pfx - 1;
    n -= sizeof pfx - 1;
    size_t k = 0;
    while (k < n && is_ident(c[k]))
        k++;
    for (size_t j = 0; j < sizeof raw / sizeof raw[0]; j++) {
        if (strlen(raw[j].name) == k && memcmp(c, raw[j].name, k) == 0 &&
            h->dtype == raw[j].raw) {
            h->dtype = raw[j].dtype;
            h->dtype_from_comment = 1;
            return;
        }
    }
}

/* Only padding and Python comments may follow the dict. The first comment's
 * text goes to *cm, *cn (NULL when there is none). */
static int lex_trailer(lexer *lx, const uint8_t **cm, size_t *cn)
{
    *cm = NULL;
    *cn = 0;
    for (;;) {
        skip_ws(lx);
        if (lx->i >= lx->n)
            return WPACK_OK;
        if (lx->s[lx->i] != '#') {
            char f[96];
            found(lx, f, sizeof f);
            wpk_fmt(lx->err, lx->errlen, "header byte %zu: unexpected %s after the header dict",
                    at(lx), f);
            return WPACK_E_INPUT;
        }
        size_t start = ++lx->i;
        while (lx->i < lx->n && lx->s[lx->i] != '\n' && lx->s[lx->i] != '\r') {
            uint8_t c = lx->s[lx->i];
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                wpk_fmt(lx->err, lx->errlen, "header byte %zu: control byte 0x%02x in a comment",
                        at(lx), c);
                return WPACK_E_INPUT;
            }
            lx->i++;
        }
        if (!*cm) {
            *cm = lx->s + start;
            *cn = lx->i - start;
        }
    }
}

/* 3.0 headers are UTF-8; numpy fails to decode anything else. */
static size_t utf8_bad_at(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (n - i <= k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += k + 1;
    }
    return n;
}

/* --------------------------------------------------------------- header */

static void format_shape(char *buf, size_t len, unsigned rank, const uint64_t *dims)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, len, "(");
    for (unsigned k = 0; k < rank && o < len; k++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu", k ? ", " : "",
                              (unsigned long long)dims[k]);
    if (o < len)
        snprintf(buf + o, len - o, rank == 1 ? ",)" : ")");
}

int npy_parse_header(const void *buf, size_t len, npy_header *h, char *err, size_t errlen)
{
    const uint8_t *b = buf;
    uint64_t end;
    if (errlen)
        err[0] = 0;
    memset(h, 0, sizeof *h);
    int rc = npy_header_extent(buf, len, &end, err, errlen);
    if (rc)
        return rc;
    if (end > len) {
        wpk_fmt(err, errlen, "header length %llu runs past the end of the input: the header "
                "needs %llu bytes, only %zu are there",
                (unsigned long long)(end - (b[6] == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2)),
                (unsigned long long)end, len);
        return WPACK_E_INPUT;
    }
    h->major = b[6];
    h->minor = b[7];
    h->data_offset = end;

    lexer lx = {0};
    lx.base = h->major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    lx.s = b + lx.base;
    lx.n = (size_t)end - lx.base;
    lx.major = h->major;
    lx.err = err;
    lx.errlen = errlen;

    if (h->major == 3) {
        size_t bad = utf8_bad_at(lx.s, lx.n);
        if (bad < lx.n) {
            wpk_fmt(err, errlen, "header byte %zu: not valid UTF-8 (npy 3.0 headers are UTF-8)",
                    lx.base + bad);
            return WPACK_E_INPUT;
        }
    }

    /* Syntax first; the values are checked once the whole dict is read. */
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    size_t key_at[3] = {0};
    int seen[3] = {0};
    const uint8_t *descr = NULL;
    size_t descr_len = 0, descr_at = 0;

    skip_ws(&lx);
    if (peek(&lx) != '{')
        return expected(&lx, "'{' starting the header dict");
    lx.i++;
    for (;;) {
        skip_ws(&lx);
        if (peek(&lx) == '}') {
            lx.i++;
            break;
        }
        const uint8_t *key;
        size_t key_len, key_pos = at(&lx);
        rc = lex_string(&lx, &key, &key_len, "a quoted key or '}' in the header dict");
        if (rc)
            return rc;
        int k = -1;
        for (int j = 0; j < 3; j++)
            if (strlen(keys[j]) == key_len && memcmp(key, keys[j], key_len) == 0)
                k = j;
        if (k < 0) {
            char q[80];
            wpk_quote(q, sizeof q, (const char *)key, key_len);
            wpk_fmt(err, errlen, "header byte %zu: unknown key '%s' (expected 'descr', "
                    "'fortran_order' and 'shape')", key_pos, q);
            return WPACK_E_INPUT;
        }
        if (seen[k]) {
            wpk_fmt(err, errlen, "header byte %zu: key '%s' appears twice (first at byte %zu)",
                    key_pos, keys[k], key_at[k]);
            return WPACK_E_INPUT;
        }
        seen[k] = 1;
        key_at[k] = key_pos;
        skip_ws(&lx);
        if (peek(&lx) != ':')
            return expected(&lx, "':' after the key");
        lx.i++;
        skip_ws(&lx);
        if (k == 0) {
            if (peek(&lx) == '[') {
                wpk_fmt(err, errlen, "header byte %zu: descr is a list (a structured dtype): "
                        "not supported", at(&lx));
                return WPACK_E_UNSUPPORTED;
            }
            descr_at = at(&lx);
            rc = lex_string(&lx, &descr, &descr_len, "a quoted string for 'descr'");
        } else if (k == 1) {
            rc = lex_bool(&lx, &h->fortran_order);
        } else {
            rc = lex_shape(&lx, h->dims, &h->rank);
        }
        if (rc)
            return rc;
        skip_ws(&lx);
        if (peek(&lx) == ',') {
            lx.i++;
        } else if (peek(&lx) == '}') {
            lx.i++;
            break;
        } else {
            return expected(&lx, "',' or '}' after a value in the header dict");
        }
    }
    for (int j = 0; j < 3; j++) {
        if (!seen[j]) {
            wpk_fmt(err, errlen, "header byte %zu: the header dict has no '%s' key", lx.base,
                    keys[j]);
            return WPACK_E_INPUT;
        }
    }

    const uint8_t *comment;
    size_t comment_len;
    rc = lex_trailer(&lx, &comment, &comment_len);
    if (rc)
        return rc;

    rc = classify_descr(descr, descr_len, descr_at, h, err, errlen);
    if (rc)
        return rc;
    if (comment)
        apply_dtype_comment(comment, comment_len, h);

    if (shape_fits(h->rank, h->dims, h->elem_size, &h->nelems, &h->nbytes))
        return WPACK_OK;
    char s[WPACK_MAX_RANK * 24 + 8];
    format_shape(s, sizeof s, h->rank, h->dims);
    wpk_fmt(err, errlen, "header byte %zu: shape overflows: %s x %zu-byte elements is more than "
            "2^64 bytes", key_at[2], s, h->elem_size);
    return WPACK_E_INPUT;
}

/* ------------------------------------------------------------ formatter */

const char *npy_descr_for(int dtype)
{
    switch (dtype) {
    case WPACK_DTYPE_F64: return "<f8";
    case WPACK_DTYPE_F32: return "<f4";
    case WPACK_DTYPE_F16: return "<f2";
    case WPACK_DTYPE_BF16: return "<u2";
    case WPACK_DTYPE_F8E4M3FN: return "|u1";
    case WPACK_DTYPE_F8E5M2: return "|u1";
    case WPACK_DTYPE_I64: return "<i8";
    case WPACK_DTYPE_I32: return "<i4";
    case WPACK_DTYPE_I16: return "<i2";
    case WPACK_DTYPE_I8: return "|i1";
    case WPACK_DTYPE_U64: return "<u8";
    case WPACK_DTYPE_U32: return "<u4";
    case WPACK_DTYPE_U16: return "<u2";
    case WPACK_DTYPE_U8: return "|u1";
    case WPACK_DTYPE_BOOL: return "|b1";
    default: return NULL;
    }
}

static const char *raw_bits_name(int dtype)
{
    switch (dtype) {
    case WPACK_DTYPE_BF16: return "bf16";
    case WPACK_DTYPE_F8E4M3FN: return "f8e4m3fn";
    case WPACK_DTYPE_F8E5M2: return "f8e5m2";
    default: return NULL;
    }
}

size_t npy_format_header(char *buf, size_t buflen, int dtype, unsigned rank,
                         const uint64_t *dims)
{
    const char *descr = npy_descr_for(dtype);
    uint64_t ne, nb;
    if (!descr || rank > WPACK_MAX_RANK || (rank && !dims) ||
        !shape_fits(rank, dims, wpack_dtype_size(dtype), &ne, &nb))
        return 0; /* a shape like (2^62, 0) of f32: numpy and the parser refuse it */
    char shape[WPACK_MAX_RANK * 24 + 8], comment[48] = "";
    format_shape(shape, sizeof shape, rank, dims);
    const char *raw = raw_bits_name(dtype);
    if (raw)
        wpk_fmt(comment, sizeof comment, "  # wpack dtype %s (raw bits)", raw);
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }%s",
                     descr, shape, comment);
    if (n < 0 || (size_t)n >= sizeof dict)
        return 0;

    /* Dict, space padding, '\n'; the whole header a multiple of 64 as numpy
     * writes it, so the array bytes are aligned in a mapping. */
    size_t pre = NPY_PREAMBLE_V1, total = (pre + (size_t)n + 1 + 63) & ~(size_t)63;
    int major = 1;
    if (total - pre > 65535) {
        pre = NPY_PREAMBLE_V2;
        total = (pre + (size_t)n + 1 + 63) & ~(size_t)63;
        major = 2;
    }
    if (buflen < total)
        return 0;
    memcpy(buf, npy_magic, 6);
    buf[6] = (char)major;
    buf[7] = 0;
    if (major == 1)
        wpk_st16(buf + 8, (uint16_t)(total - pre));
    else
        wpk_st32(buf + 8, (uint32_t)(total - pre));
    memcpy(buf + pre, dict, (size_t)n);
    memset(buf + pre + n, ' ', total - pre - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}
