/*
 * mlir_global.c - the weight globals in their pretty forms
 * (`ml_program.global ... @x(...) : T`, `util.global ... @x = ... : T`) and
 * what every form shares: a new record with its line and column, its
 * symbol, its attribute dictionary, a trailing loc(...).
 */
#include <string.h>

#include "mlir_scan_int.h"
#include "wpack.h"

wpk_global *wpk_scan_new_global(wpk_scanner *sc, int form, size_t start)
{
    wpk_mlir_doc *d = sc->doc;
    if (!wpk_doc_grow_globals(d)) {
        wpk_scan_nomem(sc);
        return NULL;
    }
    wpk_global *g = &d->globals[d->nglobals];
    if (d->globals_map_bytes && d->nglobals >= d->globals_fresh)
        d->globals_fresh = d->nglobals + 1; /* still the kernel's zeros */
    else
        memset(g, 0, sizeof *g);
    g->form = form;
    g->op.off = start;
    g->scope = sc->sp ? sc->stack[sc->sp - 1].module : 0;
    /* its line and column: from the last global's start, skipping a
     * one-line op (the fast path's), the newlines up to start */
    if (sc->lc_skip > sc->lc.pos && sc->lc_skip <= start)
        sc->lc.pos = sc->lc_skip;
    sc->lc_skip = 0;
    wpk_line_cursor_at(&sc->lc, d->buf, d->len, start, &g->line, &g->col);
    return g;
}

int wpk_scan_set_name(wpk_scanner *sc, wpk_global *g, const char *s, size_t n)
{
    g->name = wpk_doc_decode_name(sc->doc, s, n, &g->name_len);
    if (!g->name)
        return wpk_scan_nomem(sc);
    if (g->name_len == 0)
        return wpk_scan_fail(sc, g->sym.off, "empty symbol name");
    return 0;
}

/* The symbol of a pretty op: @name or @"quoted". */
static int parse_symbol(wpk_scanner *sc, wpk_global *g)
{
    wpk_tok t;
    if (wpk_scan_next(sc, &t, "a global's symbol"))
        return sc->failed;
    if (t.kind != WPK_TOK_AT)
        return wpk_scan_fail(sc, t.off, "expected the global's @symbol, found '%.*s'",
                       (int)(t.len > 40 ? 40 : t.len), sc->doc->buf + t.off);
    g->sym = (wpk_span){t.off, t.len};
    return wpk_scan_set_name(sc, g, sc->doc->buf + t.off + 1, t.len - 1);
}

/* [public|private|nested] [mutable] */
static void parse_visibility_mutable(wpk_scanner *sc, wpk_global *g)
{
    wpk_tok t = wpk_lex_peek(&sc->lx);
    if (wpk_scan_word(sc, t, "public") || wpk_scan_word(sc, t, "private") || wpk_scan_word(sc, t, "nested")) {
        wpk_lex_next(&sc->lx);
        t = wpk_lex_peek(&sc->lx);
    }
    if (wpk_scan_word(sc, t, "mutable")) {
        wpk_lex_next(&sc->lx);
        g->is_mutable = 1;
    }
}

int wpk_scan_attr_dict(wpk_scanner *sc, wpk_span *attrs, wpk_span *uri)
{
    wpk_tok open = wpk_lex_next(&sc->lx);
    size_t close;
    if (wpk_scan_skip_group(sc, open, &close))
        return sc->failed;
    *attrs = (wpk_span){open.off, close + 1 - open.off};
    wpk_dict_entry e[64];
    size_t n, cl;
    if (wpk_mlir_parse_dict(sc->doc->buf, sc->doc->len, open.off, e, 64, &n, &cl) == 0) {
        for (size_t i = 0; i < n && i < 64; i++)
            if (wpk_span_is(sc->doc->buf, e[i].key, "wpack.uri"))
                *uri = e[i].value;
    }
    return 0;
}

int wpk_scan_trailing_loc(wpk_scanner *sc, size_t *end)
{
    wpk_tok t = wpk_lex_peek(&sc->lx);
    if (!wpk_scan_word(sc, t, "loc"))
        return 0;
    wpk_lexer save = sc->lx;
    wpk_lex_next(&sc->lx);
    wpk_tok p = wpk_lex_next(&sc->lx);
    if (!wpk_tok_is(&sc->lx, p, '(')) {
        sc->lx = save;
        return 0;
    }
    size_t close;
    if (wpk_scan_skip_group(sc, p, &close))
        return sc->failed;
    *end = close + 1;
    return 0;
}

int wpk_scan_finish_global(wpk_scanner *sc, wpk_global *g, size_t end)
{
    g->op.len = end - g->op.off;
    if (g->attrs.len == 0 && g->attrs_insert == 0)
        g->attrs_insert = end;
    sc->doc->nglobals++;
    return 0;
}

/* ml_program.global [vis] [mutable] @sym [(value)] : type [{attrs}] [loc(...)] */
int wpk_scan_ml_pretty(wpk_scanner *sc, wpk_tok name)
{
    wpk_global *g = wpk_scan_new_global(sc, WPK_FORM_ML_PRETTY, name.off);
    if (!g)
        return sc->failed;
    parse_visibility_mutable(sc, g);
    if (parse_symbol(sc, g))
        goto bad;
    wpk_tok t;
    if (wpk_scan_peek_is(sc, '(')) {
        wpk_tok open = wpk_lex_next(&sc->lx);
        if (wpk_scan_value(sc, 0, &g->value))
            goto bad;
        if (wpk_scan_next(sc, &t, "a global's initial value"))
            goto bad;
        if (!wpk_tok_is(&sc->lx, t, ')')) {
            unsigned l, c;
            wpk_mlir_line_col(sc->doc->buf, sc->doc->len, open.off, &l, &c);
            wpk_scan_fail(sc, t.off, "global @%s: unbalanced '(' (opened at %u:%u): found '%c' before ')'",
                    g->name, l, c, sc->doc->buf[t.off]);
            goto bad;
        }
    }
    if (wpk_scan_next(sc, &t, "a global's type"))
        goto bad;
    if (!wpk_tok_is(&sc->lx, t, ':')) {
        wpk_scan_fail(sc, t.off, "global @%s: expected ':' and its type", g->name);
        goto bad;
    }
    if (wpk_scan_type(sc, &g->type))
        goto bad;
    size_t end = g->type.off + g->type.len;
    g->attrs_insert = end;
    if (wpk_scan_peek_is(sc, '{')) {
        if (wpk_scan_attr_dict(sc, &g->attrs, &g->uri_value))
            goto bad;
        end = g->attrs.off + g->attrs.len;
    }
    if (wpk_scan_trailing_loc(sc, &end))
        goto bad;
    return wpk_scan_finish_global(sc, g, end);
bad:
    return sc->failed;
}

/* util.global [vis] [mutable] @sym [{attrs}] [= value] : type [loc(...)] */
int wpk_scan_util_pretty(wpk_scanner *sc, wpk_tok name)
{
    wpk_global *g = wpk_scan_new_global(sc, WPK_FORM_UTIL_PRETTY, name.off);
    if (!g)
        return sc->failed;
    parse_visibility_mutable(sc, g);
    if (parse_symbol(sc, g))
        goto bad;
    g->attrs_insert = g->sym.off + g->sym.len;
    if (wpk_scan_peek_is(sc, '{') && wpk_scan_attr_dict(sc, &g->attrs, &g->uri_value))
        goto bad;
    wpk_tok t;
    if (wpk_scan_peek_is(sc, '=')) {
        wpk_lex_next(&sc->lx);
        if (wpk_scan_value(sc, 1, &g->value))
            goto bad;
    }
    if (wpk_scan_next(sc, &t, "a global's type"))
        goto bad;
    if (!wpk_tok_is(&sc->lx, t, ':')) {
        wpk_scan_fail(sc, t.off, "global @%s: expected ':' and its type", g->name);
        goto bad;
    }
    g->value_insert = t.off;
    if (wpk_scan_type(sc, &g->type))
        goto bad;
    size_t end = g->type.off + g->type.len;
    if (wpk_scan_trailing_loc(sc, &end))
        goto bad;
    return wpk_scan_finish_global(sc, g, end);
bad:
    return sc->failed;
}
