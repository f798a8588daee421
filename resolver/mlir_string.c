/* mlir_string.c - MLIR string literals (decoding their escapes) and the
 * line and column of a byte offset. */
#include <stdlib.h>
#include <string.h>

#include "mlir_scan_int.h"

void wpk_line_cursor_at(wpk_line_cursor *c, const char *buf, size_t len, size_t off,
                        unsigned *line, unsigned *col)
{
    if (off > len)
        off = len;
    if (off < c->pos)
        *c = (wpk_line_cursor)WPK_LINE_CURSOR_INIT;
    while (c->pos < off) {
        const char *nl = wpk_find_nl(buf + c->pos, off - c->pos);
        if (!nl) {
            c->pos = off;
            break;
        }
        c->line++;
        c->pos = (size_t)(nl - buf) + 1;
        c->line_start = c->pos;
    }
    *line = c->line;
    *col = (unsigned)(off - c->line_start + 1);
}

void wpk_mlir_line_col(const char *buf, size_t len, size_t off, unsigned *line, unsigned *col)
{
    wpk_line_cursor c = WPK_LINE_CURSOR_INIT;
    wpk_line_cursor_at(&c, buf, len, off, line, col);
}

int wpk_bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn;
}

int wpk_span_is(const char *buf, wpk_span s, const char *w)
{
    size_t n = strlen(w);
    return s.len == n && memcmp(buf + s.off, w, n) == 0;
}

static int is_hex_digit(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

size_t wpk_mlir_decode_into(char *out, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\\' && i + 1 < len) {
            char d = s[i + 1];
            if (d == 'n') {
                out[o++] = '\n';
                i++;
            } else if (d == 't') {
                out[o++] = '\t';
                i++;
            } else if (d == '"' || d == '\\') {
                out[o++] = d;
                i++;
            } else if (i + 2 < len && is_hex_digit((unsigned char)d) &&
                       is_hex_digit((unsigned char)s[i + 2])) {
                out[o++] = (char)(wpk_hex_val((unsigned char)d) * 16 + wpk_hex_val((unsigned char)s[i + 2]));
                i += 2;
            } else {
                out[o++] = c;
            }
        } else {
            out[o++] = c;
        }
    }
    out[o] = 0;
    return o;
}

char *wpk_mlir_decode_string(const char *s, size_t len, size_t *n)
{
    wpk_mlir_strip_quotes(&s, &len);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    *n = wpk_mlir_decode_into(out, s, len);
    return out;
}
