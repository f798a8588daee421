/*
 * mlir_group.c - the pieces every part of the scanner reads with: failing
 * with a position, bracketed groups (nesting, strings and comments inside),
 * the next token, a type, an attribute value, an attribute dictionary.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mlir_scan_int.h"
#include "wpack.h"

int wpk_scan_fail(wpk_scanner *sc, size_t off, const char *fmt, ...)
{
    if (sc->failed)
        return sc->failed;
    unsigned line, col;
    wpk_mlir_line_col(sc->doc->buf, sc->doc->len, off, &line, &col);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wpk_fmt(sc->err, sc->errlen, "%u:%u: %s", line, col, msg);
    sc->failed = WPACK_E_INPUT;
    return sc->failed;
}

int wpk_scan_nomem(wpk_scanner *sc)
{
    if (!sc->failed) {
        wpk_fmt(sc->err, sc->errlen, "out of memory while scanning MLIR");
        sc->failed = WPACK_E_NOMEM;
    }
    return sc->failed;
}

/* Consume a bracketed group whose opener `open` was just read; *close gets
 * the offset of the matching closer. Strings, comments and nesting inside
 * are handled by the lexer and a local stack. */
int wpk_scan_skip_group(wpk_scanner *sc, wpk_tok open, size_t *close)
{
    char local[64];
    size_t lofs[64];
    char *stk = local;
    size_t *ofs = lofs;
    size_t sp = 0, cap = 64;
    int rc = 0;
    stk[sp] = sc->doc->buf[open.off];
    ofs[sp++] = open.off;
    while (sp) {
        wpk_tok t = wpk_lex_next(&sc->lx);
        if (t.kind == WPK_TOK_ERROR) {
            rc = wpk_scan_fail(sc, sc->lx.err_off, "%s", sc->lx.err);
            break;
        }
        if (t.kind == WPK_TOK_EOF) {
            rc = wpk_scan_fail(sc, ofs[sp - 1], "unbalanced '%c': no matching '%c' before the end of the file",
                         stk[sp - 1], wpk_closer_of(stk[sp - 1]));
            break;
        }
        if (t.kind == WPK_TOK_META_BEGIN || t.kind == WPK_TOK_META_END) {
            rc = wpk_scan_fail(sc, t.off, "'%.3s' inside an unclosed '%c' (opened at byte %zu)",
                         sc->doc->buf + t.off, stk[sp - 1], ofs[sp - 1]);
            break;
        }
        if (t.kind != WPK_TOK_PUNCT)
            continue;
        char c = sc->doc->buf[t.off];
        if (wpk_scan_is_opener(&sc->lx, t)) {
            if (sp == cap) {
                if (cap >= WPK_MAX_NESTING) {
                    rc = wpk_scan_fail(sc, t.off, "brackets nested deeper than %d", WPK_MAX_NESTING);
                    break;
                }
                size_t ncap = cap * 2;
                char *ns = malloc(ncap);
                size_t *no = malloc(ncap * sizeof *no);
                if (!ns || !no) {
                    free(ns);
                    free(no);
                    rc = wpk_scan_nomem(sc);
                    break;
                }
                memcpy(ns, stk, sp);
                memcpy(no, ofs, sp * sizeof *no);
                if (stk != local) {
                    free(stk);
                    free(ofs);
                }
                stk = ns;
                ofs = no;
                cap = ncap;
            }
            stk[sp] = c;
            ofs[sp++] = t.off;
        } else if (c == ')' || c == ']' || c == '}' || c == '>') {
            if (c == '>' && wpk_scan_is_ge(&sc->lx, t, stk[sp - 1]))
                continue;
            if (c != wpk_closer_of(stk[sp - 1])) {
                unsigned l, col;
                wpk_mlir_line_col(sc->doc->buf, sc->doc->len, ofs[sp - 1], &l, &col);
                rc = wpk_scan_fail(sc, t.off, "unbalanced brackets: '%c' closes the '%c' opened at %u:%u",
                             c, stk[sp - 1], l, col);
                break;
            }
            sp--;
            if (!sp)
                *close = t.off;
        }
    }
    if (stk != local) {
        free(stk);
        free(ofs);
    }
    return rc;
}

int wpk_scan_next(wpk_scanner *sc, wpk_tok *t, const char *what)
{
    *t = wpk_lex_next(&sc->lx);
    if (t->kind == WPK_TOK_ERROR)
        return wpk_scan_fail(sc, sc->lx.err_off, "%s", sc->lx.err);
    if (t->kind == WPK_TOK_EOF)
        return wpk_scan_fail(sc, t->off, "end of file while reading %s", what);
    return 0;
}

int wpk_scan_type(wpk_scanner *sc, wpk_span *out)
{
    wpk_tok t;
    if (wpk_scan_next(sc, &t, "a type"))
        return sc->failed;
    size_t end = t.off + t.len;
    if (t.kind == WPK_TOK_BAREID || t.kind == WPK_TOK_BANG) {
        wpk_tok p = wpk_lex_peek(&sc->lx);
        if (wpk_tok_is(&sc->lx, p, '<') && p.off == end) {
            wpk_lex_next(&sc->lx);
            size_t close;
            if (wpk_scan_skip_group(sc, p, &close))
                return sc->failed;
            end = close + 1;
        }
    } else if (wpk_tok_is(&sc->lx, t, '(')) {
        size_t close;
        if (wpk_scan_skip_group(sc, t, &close))
            return sc->failed;
        end = close + 1;
        if (wpk_lex_peek(&sc->lx).kind == WPK_TOK_ARROW) {
            wpk_lex_next(&sc->lx);
            wpk_span r;
            if (wpk_scan_type(sc, &r))
                return sc->failed;
            end = r.off + r.len;
        }
    } else {
        return wpk_scan_fail(sc, t.off, "expected a type, found '%.*s'", (int)(t.len > 40 ? 40 : t.len),
                       sc->doc->buf + t.off);
    }
    *out = (wpk_span){t.off, end - t.off};
    return 0;
}

int wpk_scan_value(wpk_scanner *sc, int stop_colon, wpk_span *out)
{
    size_t start = (size_t)-1, end = 0;
    for (;;) {
        wpk_tok p = wpk_lex_peek(&sc->lx);
        if (p.kind == WPK_TOK_ERROR) {
            wpk_lex_next(&sc->lx);
            return wpk_scan_fail(sc, sc->lx.err_off, "%s", sc->lx.err);
        }
        if (p.kind == WPK_TOK_EOF)
            return wpk_scan_fail(sc, p.off, "end of file inside an attribute value");
        if (p.kind == WPK_TOK_PUNCT) {
            char c = sc->doc->buf[p.off];
            if (c == ',' || c == ')' || c == ']' || c == '}' || (c == '>' && !wpk_scan_is_ge(&sc->lx, p, 0)))
                break;
            if (stop_colon && c == ':')
                break;
        }
        if (p.kind == WPK_TOK_META_BEGIN || p.kind == WPK_TOK_META_END)
            return wpk_scan_fail(sc, p.off, "'%.3s' inside an attribute value", sc->doc->buf + p.off);
        wpk_tok t;
        if (wpk_scan_take(sc, &t, &start, &end))
            return sc->failed;
    }
    *out = start == (size_t)-1 ? (wpk_span){sc->lx.pos, 0} : (wpk_span){start, end - start};
    return 0;
}

int wpk_scan_take(wpk_scanner *sc, wpk_tok *t, size_t *start, size_t *end)
{
    *t = wpk_lex_next(&sc->lx);
    if (t->kind == WPK_TOK_ERROR)
        return wpk_scan_fail(sc, sc->lx.err_off, "%s", sc->lx.err);
    if (*start == (size_t)-1)
        *start = t->off;
    *end = t->off + t->len;
    if (wpk_scan_is_opener(&sc->lx, *t)) {
        size_t close;
        if (wpk_scan_skip_group(sc, *t, &close))
            return sc->failed;
        *end = close + 1;
    }
    return 0;
}

int wpk_mlir_parse_dict(const char *buf, size_t len, size_t open, wpk_dict_entry *entries,
                        size_t max, size_t *count, size_t *close)
{
    wpk_mlir_doc d = {.buf = buf, .len = len};
    char err[8];
    wpk_scanner sc = {.doc = &d, .err = err, .errlen = sizeof err};
    wpk_lex_init(&sc.lx, buf, len, open);
    wpk_tok t = wpk_lex_next(&sc.lx);
    if (!wpk_tok_is(&sc.lx, t, '{'))
        return -1;
    size_t n = 0;
    for (;;) {
        if (wpk_scan_next(&sc, &t, "an attribute dictionary"))
            return -1;
        if (wpk_tok_is(&sc.lx, t, '}'))
            break;
        if (t.kind != WPK_TOK_BAREID && t.kind != WPK_TOK_STRING)
            return -1;
        wpk_dict_entry e = {{t.off, t.len}, {t.off + t.len, 0}};
        if (wpk_scan_peek_is(&sc, '=')) {
            wpk_lex_next(&sc.lx);
            if (wpk_scan_value(&sc, 0, &e.value) || e.value.len == 0)
                return -1;
        }
        if (n < max)
            entries[n] = e;
        n++;
        if (wpk_scan_next(&sc, &t, "an attribute dictionary"))
            return -1;
        if (wpk_tok_is(&sc.lx, t, '}'))
            break;
        if (!wpk_tok_is(&sc.lx, t, ','))
            return -1;
    }
    *count = n;
    *close = t.off;
    return 0;
}
