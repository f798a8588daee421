/* mlir_lex.c - the MLIR tokenizer (see mlir_lex.h). Character classes come
 * from one 256-entry table (wpk_char_class, shared with the scanner's fast
 * path); strings, comments and hex blobs are scanned with memchr or 16
 * bytes at a time, since files hold gigabytes of them. */
#include <string.h>

#include "mlir_lex.h"

const unsigned char wpk_char_class[256] = {
     0,  0,  0,  0,  0,  0,  0,  0,  0,  8,  8,  0,  0,  8,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     8,  0,  0,  0,  6,  0,  0,  0,  0,  0,  0,  0,  0,  4,  6,  0,
    54, 54, 54, 54, 54, 54, 54, 54, 54, 54,  0,  0,  0,  0,  0,  0,
     0, 39, 39, 39, 39, 39, 39,  7,  7,  7,  7,  7,  7,  7,  7,  7,
     7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  0,  0,  0,  0,  7,
     0, 39, 39, 39, 39, 39, 39,  7,  7,  7,  7,  7,  7,  7,  7,  7,
     7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
};

static int has_class(char c, unsigned cls)
{
    return wpk_char_class[(unsigned char)c] & cls;
}

void wpk_lex_init(wpk_lexer *lx, const char *buf, size_t len, size_t pos)
{
    lx->buf = buf;
    lx->len = len;
    lx->pos = pos;
    lx->err = NULL;
    lx->err_off = 0;
    lx->has_peek = 0;
}

static int is_hex(char c)
{
    return has_class(c, WPK_C_HEX);
}

/* 16 bytes as a vector (GCC and clang vector extensions: SSE2 on x86-64,
 * NEON on arm64, plain code elsewhere). */
typedef unsigned char wpk_v16 __attribute__((vector_size(16)));

/* Lanes that are not hex digits are non-zero in the result. */
static wpk_v16 not_hex16(const unsigned char *p)
{
    wpk_v16 v;
    memcpy(&v, p, sizeof v);
    wpk_v16 digit = (wpk_v16)((v - (unsigned char)'0') < 10);
    wpk_v16 letter = (wpk_v16)(((v | 0x20) - (unsigned char)'a') < 6);
    return ~(digit | letter);
}

static int any16(wpk_v16 v)
{
    unsigned long long w[2];
    memcpy(w, &v, sizeof w);
    return (w[0] | w[1]) != 0;
}

size_t wpk_hex_run(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i + 64 <= n) {
        wpk_v16 bad = not_hex16(p + i) | not_hex16(p + i + 16) | not_hex16(p + i + 32) |
                      not_hex16(p + i + 48);
        if (any16(bad))
            break;
        i += 64;
    }
    while (i + 16 <= n && !any16(not_hex16(p + i)))
        i += 16;
    while (i < n && is_hex((char)p[i]))
        i++;
    return i;
}

static wpk_tok error_at(wpk_lexer *lx, size_t off, const char *msg)
{
    lx->err = msg;
    lx->err_off = off;
    lx->pos = lx->len;
    return (wpk_tok){WPK_TOK_ERROR, off, 0};
}

/* A string literal from the opening quote at lx->pos. The search for the
 * closing quote uses memchr so that gigabytes of hex go by quickly. */
static wpk_tok lex_string(wpk_lexer *lx)
{
    const char *b = lx->buf;
    size_t start = lx->pos, p = start + 1, n = lx->len;
    const char *q = NULL;
    size_t stop = 0;
    for (;;) {
        /* the candidate closing quote; searched again only when an escape
         * (\") consumed it, so many escapes cost no repeated scans */
        if (p > stop) {
            q = p < n ? memchr(b + p, '"', n - p) : NULL;
            stop = q ? (size_t)(q - b) : n;
        }
        const char *bs = memchr(b + p, '\\', stop - p);
        const char *nl = memchr(b + p, '\n', (bs ? (size_t)(bs - b) : stop) - p);
        if (nl)
            return error_at(lx, start, "unterminated string (newline before the closing quote)");
        if (bs) {
            size_t e = (size_t)(bs - b);
            if (e + 1 >= n)
                return error_at(lx, start, "unterminated string");
            char c = b[e + 1];
            if (c == '"' || c == '\\' || c == 'n' || c == 't') {
                p = e + 2;
            } else if (e + 2 < n && is_hex(c) && is_hex(b[e + 2])) {
                p = e + 3;
            } else {
                return error_at(lx, e, "bad escape in string (expected \\\" \\\\ \\n \\t or \\XX hex)");
            }
            continue;
        }
        if (!q)
            return error_at(lx, start, "unterminated string");
        lx->pos = stop + 1;
        return (wpk_tok){WPK_TOK_STRING, start, stop + 1 - start};
    }
}

static void skip_space(wpk_lexer *lx)
{
    const char *b = lx->buf;
    size_t p = lx->pos, n = lx->len;
    while (p < n) {
        char c = b[p];
        if (has_class(c, WPK_C_SPACE)) {
            p++;
        } else if (c == '/' && p + 1 < n && b[p + 1] == '/') {
            const char *nl = memchr(b + p, '\n', n - p);
            p = nl ? (size_t)(nl - b) + 1 : n;
        } else {
            break;
        }
    }
    lx->pos = p;
}

/* End of the run of bytes of class cls from q. */
static size_t run_of(const char *b, size_t q, size_t n, unsigned cls)
{
    while (q < n && has_class(b[q], cls))
        q++;
    return q;
}

static wpk_tok lex_token(wpk_lexer *lx)
{
    const char *b = lx->buf;
    size_t p = lx->pos, n = lx->len;
    if (p < n && (has_class(b[p], WPK_C_SPACE) || b[p] == '/')) {
        skip_space(lx);
        p = lx->pos;
    }
    if (p >= n)
        return (wpk_tok){WPK_TOK_EOF, n, 0};
    char c = b[p];
    if (has_class(c, WPK_C_ID_START)) {
        size_t q = run_of(b, p + 1, n, WPK_C_ID);
        lx->pos = q;
        return (wpk_tok){WPK_TOK_BAREID, p, q - p};
    }
    if (c == '"')
        return lex_string(lx);
    if (c == '{' && p + 2 < n && b[p + 1] == '-' && b[p + 2] == '#') {
        lx->pos = p + 3;
        return (wpk_tok){WPK_TOK_META_BEGIN, p, 3};
    }
    if (c == '#' && p + 2 < n && b[p + 1] == '-' && b[p + 2] == '}') {
        lx->pos = p + 3;
        return (wpk_tok){WPK_TOK_META_END, p, 3};
    }
    if (c == '-' && p + 1 < n && b[p + 1] == '>') {
        lx->pos = p + 2;
        return (wpk_tok){WPK_TOK_ARROW, p, 2};
    }
    if (has_class(c, WPK_C_DIGIT)) {
        size_t q = p + 1;
        while (q < n) {
            char d = b[q];
            if (has_class(d, WPK_C_ID)) {
                q++;
            } else if ((d == '+' || d == '-') && (b[q - 1] == 'e' || b[q - 1] == 'E') &&
                       !(q >= p + 2 && (b[p + 1] == 'x' || b[p + 1] == 'X'))) {
                q++;
            } else {
                break;
            }
        }
        lx->pos = q;
        return (wpk_tok){WPK_TOK_NUMBER, p, q - p};
    }
    if (c == '@' || c == '#' || c == '!' || c == '%' || c == '^') {
        int kind = c == '@' ? WPK_TOK_AT : c == '#' ? WPK_TOK_HASH : c == '!' ? WPK_TOK_BANG
                 : c == '%' ? WPK_TOK_PERCENT : WPK_TOK_CARET;
        if (c == '@' && p + 1 < n && b[p + 1] == '"') {
            lx->pos = p + 1;
            wpk_tok s = lex_string(lx);
            if (s.kind == WPK_TOK_ERROR)
                return s;
            return (wpk_tok){WPK_TOK_AT, p, lx->pos - p};
        }
        size_t q = p + 1;
        while (q < n && (has_class(b[q], WPK_C_SUFFIX) || (c == '%' && b[q] == '#')))
            q++;
        if (q == p + 1)
            return error_at(lx, p, c == '@' ? "'@' not followed by a symbol name"
                                   : "sigil not followed by an identifier");
        lx->pos = q;
        return (wpk_tok){kind, p, q - p};
    }
    if (c == '\0')
        return error_at(lx, p, "NUL byte in MLIR text");
    lx->pos = p + 1;
    return (wpk_tok){WPK_TOK_PUNCT, p, 1};
}

wpk_tok wpk_lex_next(wpk_lexer *lx)
{
    if (lx->has_peek && lx->peek_at == lx->pos) {
        lx->has_peek = 0;
        lx->pos = lx->peek_end;
        return lx->peek;
    }
    lx->has_peek = 0;
    return lex_token(lx);
}

wpk_tok wpk_lex_peek(wpk_lexer *lx)
{
    if (lx->has_peek && lx->peek_at == lx->pos)
        return lx->peek;
    size_t pos = lx->pos, err_off = lx->err_off;
    const char *err = lx->err;
    wpk_tok t = lex_token(lx);
    /* errors are not remembered: wpk_lex_next reports them with lx->err */
    lx->has_peek = t.kind != WPK_TOK_ERROR;
    lx->peek_at = pos;
    lx->peek_end = lx->pos;
    lx->peek = t;
    lx->pos = pos;
    lx->err = err;
    lx->err_off = err_off;
    return t;
}

int wpk_tok_is(const wpk_lexer *lx, wpk_tok tok, char c)
{
    return tok.kind == WPK_TOK_PUNCT && lx->buf[tok.off] == c;
}

int wpk_lex_hex_blob(wpk_lexer *lx, wpk_tok *tok)
{
    if (lx->has_peek && lx->peek_at == lx->pos)
        return 0; /* already lexed: no second pass is saved */
    skip_space(lx);
    const char *b = lx->buf;
    size_t p = lx->pos, n = lx->len;
    if (n - p < 4 || b[p] != '"' || b[p + 1] != '0' || (b[p + 2] != 'x' && b[p + 2] != 'X'))
        return 0;
    size_t end = p + 3 + wpk_hex_run(b + p + 3, n - p - 3);
    if (end >= n || b[end] != '"')
        return 0;
    lx->pos = end + 1;
    *tok = (wpk_tok){WPK_TOK_STRING, p, end + 1 - p};
    return 1;
}
