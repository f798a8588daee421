/* mlir_generic.c - the weight globals in the generic form
 * ("ml_program.global"() <{props}> {attrs} : () -> (), also util.global and
 * the pre-properties form with everything in {attrs}). */
#include "mlir_scan_int.h"

/* Pick the fields of a generic global out of one dictionary. */
static int generic_fields(wpk_scanner *sc, wpk_global *g, size_t open, int is_util, int *have_name)
{
    wpk_dict_entry e[32];
    size_t n, close;
    if (wpk_mlir_parse_dict(sc->doc->buf, sc->doc->len, open, e, 32, &n, &close))
        return wpk_scan_fail(sc, open, "malformed attribute dictionary of a generic global");
    const char *buf = sc->doc->buf;
    for (size_t i = 0; i < n && i < 32; i++) {
        wpk_span k = e[i].key, v = e[i].value;
        if (wpk_span_is(buf, k, "sym_name")) {
            if (v.len < 2 || buf[v.off] != '"')
                return wpk_scan_fail(sc, v.off, "generic global: sym_name is not a string");
            g->sym = v;
            if (wpk_scan_set_name(sc, g, buf + v.off, v.len))
                return sc->failed;
            *have_name = 1;
        } else if (wpk_span_is(buf, k, "type")) {
            g->type = v;
        } else if (wpk_span_is(buf, k, is_util ? "initial_value" : "value")) {
            g->value = v;
        } else if (wpk_span_is(buf, k, "is_mutable")) {
            g->is_mutable = 1;
        } else if (wpk_span_is(buf, k, "wpack.uri")) {
            g->uri_value = v;
        }
    }
    if (!g->value_insert)
        g->value_insert = close;
    return 0;
}

/* "ml_program.global"() [<{props}>] [{attrs}] : () -> () [loc(...)] */
int wpk_scan_generic(wpk_scanner *sc, wpk_tok name, int is_util)
{
    wpk_global *g = wpk_scan_new_global(sc, is_util ? WPK_FORM_UTIL_GENERIC : WPK_FORM_ML_GENERIC, name.off);
    if (!g)
        return sc->failed;
    int have_name = 0;
    wpk_tok open = wpk_lex_next(&sc->lx); /* '(' (checked by the caller) */
    size_t close;
    if (wpk_scan_skip_group(sc, open, &close))
        goto bad;
    g->attrs_insert = close + 1;
    if (wpk_scan_peek_is(sc, '<')) {
        wpk_tok lt = wpk_lex_next(&sc->lx);
        wpk_tok br = wpk_lex_peek(&sc->lx);
        if (!wpk_tok_is(&sc->lx, br, '{')) {
            wpk_scan_fail(sc, lt.off, "generic op: expected '<{' properties");
            goto bad;
        }
        if (generic_fields(sc, g, br.off, is_util, &have_name))
            goto bad;
        size_t pclose;
        if (wpk_scan_skip_group(sc, lt, &pclose))
            goto bad;
        g->props = (wpk_span){lt.off, pclose + 1 - lt.off};
        g->attrs_insert = pclose + 1;
    }
    if (wpk_scan_peek_is(sc, '{')) {
        wpk_tok br = wpk_lex_peek(&sc->lx);
        size_t vi = g->value_insert;
        if (generic_fields(sc, g, br.off, is_util, &have_name))
            goto bad;
        if (g->props.len)
            g->value_insert = vi; /* a missing initial_value goes into the properties */
        wpk_span dummy = {0, 0};
        if (wpk_scan_attr_dict(sc, &g->attrs, &dummy))
            goto bad;
    }
    wpk_tok t;
    if (wpk_scan_next(sc, &t, "a generic op's type") || !wpk_tok_is(&sc->lx, t, ':')) {
        wpk_scan_fail(sc, t.off, "generic op: expected ': () -> ()'");
        goto bad;
    }
    wpk_span ftype;
    if (wpk_scan_type(sc, &ftype))
        goto bad;
    size_t end = ftype.off + ftype.len;
    if (wpk_scan_trailing_loc(sc, &end))
        goto bad;
    if (!have_name) {
        wpk_scan_fail(sc, name.off, "generic global without a sym_name");
        goto bad;
    }
    if (g->type.len == 0) {
        wpk_scan_fail(sc, name.off, "generic global @%s without a type", g->name);
        goto bad;
    }
    return wpk_scan_finish_global(sc, g, end);
bad:
    return sc->failed;
}
