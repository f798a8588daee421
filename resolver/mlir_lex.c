/* mlir_lex.c - the MLIR tokenizer (see mlir_lex.h). */
#include <string.h>

#include "mlir_lex.h"

void wpk_lex_init(wpk_lexer *lx, const char *buf, size_t len, size_t pos)
{
    lx->buf = buf;
    lx->len = len;
    lx->pos = pos;
    lx->err = NULL;
    lx->err_off = 0;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* bare-id continuation: letters, digits, _ $ . */
static int is_id_char(char c)
{
    return is_alpha(c) || is_digit(c) || c == '$' || c == '.';
}

/* suffix-id (after # ! % ^ @): also '-' */
static int is_suffix_char(char c)
{
    return is_id_char(c) || c == '-';
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
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
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

wpk_tok wpk_lex_next(wpk_lexer *lx)
{
    skip_space(lx);
    const char *b = lx->buf;
    size_t p = lx->pos, n = lx->len;
    if (p >= n)
        return (wpk_tok){WPK_TOK_EOF, n, 0};
    char c = b[p];
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
    if (is_alpha(c)) {
        size_t q = p + 1;
        while (q < n && is_id_char(b[q]))
            q++;
        lx->pos = q;
        return (wpk_tok){WPK_TOK_BAREID, p, q - p};
    }
    if (is_digit(c)) {
        size_t q = p + 1;
        while (q < n) {
            char d = b[q];
            if (is_id_char(d)) {
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
        while (q < n && (is_suffix_char(b[q]) || (c == '%' && b[q] == '#')))
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

wpk_tok wpk_lex_peek(const wpk_lexer *lx)
{
    wpk_lexer copy = *lx;
    return wpk_lex_next(&copy);
}

int wpk_tok_is(const wpk_lexer *lx, wpk_tok tok, char c)
{
    return tok.kind == WPK_TOK_PUNCT && lx->buf[tok.off] == c;
}
