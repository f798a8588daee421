/* mlir_meta.c - what sits at the top level beside the ops: attribute and
 * type aliases (#a = ..., !t = ...) and the {-# ... #-} section, whose
 * builtin resource blobs are checked here ("0x", hex digits, an even count,
 * a 4-byte alignment that is a power of two). */
#include <string.h>

#include "mlir_scan_int.h"

/* #name = value / !name = value: the value runs to the end of its line
 * (continuing while brackets are open). */
int wpk_scan_alias(wpk_scanner *sc, wpk_tok name)
{
    wpk_lex_next(&sc->lx); /* '=' */
    size_t start = (size_t)-1, end = 0;
    for (;;) {
        wpk_tok p = wpk_lex_peek(&sc->lx);
        if (p.kind == WPK_TOK_EOF || p.kind == WPK_TOK_META_BEGIN)
            break;
        if (start != (size_t)-1 && memchr(sc->doc->buf + end, '\n', p.off - end))
            break;
        wpk_tok t;
        if (wpk_scan_take(sc, &t, &start, &end))
            return sc->failed;
        /* a group was taken whole: a closer here has no opener */
        if (t.kind == WPK_TOK_PUNCT && strchr(")]}>", sc->doc->buf[t.off])) {
            return wpk_scan_fail(sc, t.off, "unbalanced '%c' in the definition of '%.*s'",
                           sc->doc->buf[t.off], (int)(name.len > 60 ? 60 : name.len),
                           sc->doc->buf + name.off);
        }
    }
    if (start == (size_t)-1)
        return wpk_scan_fail(sc, name.off, "alias '%.*s' has no value", (int)(name.len > 60 ? 60 : name.len),
                       sc->doc->buf + name.off);
    wpk_mlir_doc *d = sc->doc;
    if (!wpk_grow_array((void **)&d->aliases, &d->capaliases, d->naliases, sizeof *d->aliases))
        return wpk_scan_nomem(sc);
    d->aliases[d->naliases++] = (wpk_alias){
        {name.off + 1, name.len - 1}, {start, end - start}, d->buf[name.off] == '!'};
    return 0;
}

/* A blob's checks; digits_ok: wpk_lex_hex_blob already saw only hex digits. */
static int check_blob(wpk_scanner *sc, wpk_tok key, wpk_tok val, int digits_ok, wpk_resource *r)
{
    const unsigned char *s = (const unsigned char *)sc->doc->buf + val.off;
    size_t n = val.len;
    if (n < 4 || s[1] != '0' || (s[2] != 'x' && s[2] != 'X'))
        return wpk_scan_fail(sc, val.off, "resource '%.*s': blob is not a \"0x...\" hex string",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off);
    size_t digits = n - 4;
    const unsigned char *h = s + 3;
    size_t run = digits_ok ? digits : wpk_hex_run((const char *)h, digits);
    if (run < digits)
        return wpk_scan_fail(sc, val.off + 3 + run, "resource '%.*s': '%c' is not a hex digit",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off, h[run]);
    if (digits % 2)
        return wpk_scan_fail(sc, val.off, "resource '%.*s': odd number of hex digits (%zu)",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off, digits);
    if (digits < 8)
        return wpk_scan_fail(sc, val.off, "resource '%.*s': truncated blob (%zu bytes; the 4-byte "
                       "alignment header is missing)", (int)(key.len > 60 ? 60 : key.len),
                       sc->doc->buf + key.off, digits / 2);
    uint32_t a = 0;
    for (int i = 0; i < 4; i++)
        a |= (uint32_t)(wpk_hex_val(h[2 * i]) * 16 + wpk_hex_val(h[2 * i + 1])) << (8 * i);
    if (!a || (a & (a - 1)))
        return wpk_scan_fail(sc, val.off, "resource '%.*s': alignment %u is not a power of two",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off, a);
    r->key = (wpk_span){key.off, key.len};
    r->blob = (wpk_span){val.off + 3, digits};
    r->alignment = a;
    return 0;
}

/* `{ key: value, ... }` inside the metadata; level 0 is the section
 * itself (closed by #-}), level 1 dialect_resources, level 2 one dialect. */
int wpk_scan_meta_dict(wpk_scanner *sc, int level, int builtin)
{
    for (;;) {
        wpk_tok t;
        if (wpk_scan_next(sc, &t, "the {-# #-} section"))
            return sc->failed;
        if (level == 0 && t.kind == WPK_TOK_META_END)
            return 0;
        if (level > 0 && wpk_tok_is(&sc->lx, t, '}'))
            return 0;
        if (t.kind != WPK_TOK_BAREID && t.kind != WPK_TOK_STRING)
            return wpk_scan_fail(sc, t.off, "expected a key in the {-# #-} section");
        wpk_tok key = t;
        if (wpk_scan_next(sc, &t, "the {-# #-} section") || !wpk_tok_is(&sc->lx, t, ':'))
            return wpk_scan_fail(sc, t.off, "expected ':' after a key in the {-# #-} section");
        /* a builtin blob: the common case in one pass over its digits
         * (before any peek, which would lex the whole string first) */
        wpk_tok v;
        int blob_ok = level == 2 && builtin && wpk_lex_hex_blob(&sc->lx, &v);
        if (!blob_ok)
            v = wpk_lex_peek(&sc->lx);
        if (!blob_ok && wpk_tok_is(&sc->lx, v, '{') && level < 2) {
            wpk_lex_next(&sc->lx);
            int sub_builtin = level == 1 && wpk_scan_word(sc, key, "builtin");
            int sub_level = level == 0 && wpk_scan_word(sc, key, "dialect_resources") ? 1
                          : level == 1 ? 2 : 3;
            if (sub_level == 3) {
                size_t close;
                if (wpk_scan_skip_group(sc, v, &close))
                    return sc->failed;
            } else if (wpk_scan_meta_dict(sc, sub_level, sub_builtin)) {
                return sc->failed;
            }
        } else if (level == 2 && builtin) {
            /* anything but the common case through the lexer's string
             * rules and errors */
            int digits_ok = blob_ok;
            if (!digits_ok && wpk_scan_next(sc, &v, "a resource blob"))
                return sc->failed;
            if (v.kind != WPK_TOK_STRING)
                return wpk_scan_fail(sc, v.off, "resource '%.*s': expected a \"0x...\" blob",
                               (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off);
            wpk_mlir_doc *d = sc->doc;
            if (!wpk_grow_array((void **)&d->resources, &d->capresources, d->nresources, sizeof *d->resources))
                return wpk_scan_nomem(sc);
            if (check_blob(sc, key, v, digits_ok, &d->resources[d->nresources]))
                return sc->failed;
            d->nresources++;
        } else {
            wpk_span ignored;
            if (wpk_scan_value(sc, 0, &ignored))
                return sc->failed;
        }
        if (wpk_scan_next(sc, &t, "the {-# #-} section"))
            return sc->failed;
        if (level == 0 && t.kind == WPK_TOK_META_END)
            return 0;
        if (level > 0 && wpk_tok_is(&sc->lx, t, '}'))
            return 0;
        if (!wpk_tok_is(&sc->lx, t, ','))
            return wpk_scan_fail(sc, t.off, "expected ',' or the end of the dictionary in the {-# #-} section");
    }
}
