/*
 * extern_torch.c - externalize's torch-mlir weights: torch-mlir's FX
 * importer inlines every weight as
 *
 *   %0 = torch.vtensor.literal(dense_resource<KEY> : tensor<...>) : !torch.vtensor<...>
 *   %0 = "torch.vtensor.literal"() <{value = dense_resource<KEY> : tensor<...>}> : () -> ...
 *
 * with KEY's bytes in the file's builtin resources. Such a literal moves to
 * the archive as entry KEY (literals sharing a key share the entry) and
 * becomes torch-mlir's own external reference, which its
 * convert-torch-to-mlprogram pass turns into `ml_program.global @KEY
 * (#ml_program.extern)` (what `wpack resolve` reads back):
 *
 *   %0 = torch.vtensor.external.literal(@KEY) {wpack.uri = "..."} : !torch.vtensor<...>
 *   %0 = "torch.vtensor.external.literal"() <{name = @KEY}> {wpack.uri = "..."} : () -> ...
 *
 * (wpack.uri with --emit uri only). A literal of any other value
 * (dense<...>, no name to give its entry) stays as it is.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mlir_lex.h"
#include "resolve_int.h"

/* The offset of the bracket closing the one at open (any of ( [ { <,
 * strings skipped by the lexer), or 0. */
static size_t group_end(const char *buf, size_t len, size_t open)
{
    wpk_lexer lx;
    wpk_lex_init(&lx, buf, len, open);
    int depth = 0;
    for (;;) {
        wpk_tok t = wpk_lex_next(&lx);
        if (t.kind == WPK_TOK_EOF || t.kind == WPK_TOK_ERROR)
            return 0;
        if (t.kind == WPK_TOK_ARROW)
            continue;
        if (t.kind != WPK_TOK_PUNCT)
            continue;
        char c = buf[t.off];
        if (c == '(' || c == '[' || c == '{' || c == '<')
            depth++;
        else if (c == ')' || c == ']' || c == '}' || c == '>') {
            if (--depth == 0)
                return t.off;
        }
    }
}

static wpk_span trim(const char *buf, wpk_span s)
{
    while (s.len && strchr(" \t\r\n", buf[s.off])) {
        s.off++;
        s.len--;
    }
    while (s.len && strchr(" \t\r\n", buf[s.off + s.len - 1]))
        s.len--;
    return s;
}

/* "dense_resource<KEY> : T": T's span; 0 if value is not that. */
static int resource_value(const char *buf, wpk_span v, wpk_span *type)
{
    wpk_lexer lx;
    wpk_lex_init(&lx, buf, v.off + v.len, v.off);
    wpk_tok t = wpk_lex_next(&lx);
    if (t.kind != WPK_TOK_BAREID || !wpk_span_is(buf, (wpk_span){t.off, t.len}, "dense_resource"))
        return 0;
    if (!wpk_tok_is(&lx, wpk_lex_next(&lx), '<'))
        return 0;
    t = wpk_lex_next(&lx);
    if (t.kind != WPK_TOK_BAREID && t.kind != WPK_TOK_STRING)
        return 0;
    if (!wpk_tok_is(&lx, wpk_lex_next(&lx), '>') || !wpk_tok_is(&lx, wpk_lex_next(&lx), ':'))
        return 0;
    *type = trim(buf, (wpk_span){lx.pos, v.off + v.len - lx.pos});
    return type->len != 0;
}

int wpk_torch_lit_parse(const char *buf, size_t len, const wpk_torch_op *op, wpk_torch_lit *l)
{
    memset(l, 0, sizeof *l);
    l->generic = op->generic;
    l->op = op->name;
    size_t open = op->name.off + op->name.len;
    while (open < len && strchr(" \t\r\n", buf[open]))
        open++;
    size_t close = open < len && buf[open] == '(' ? group_end(buf, len, open) : 0;
    if (!close)
        return 0;
    wpk_lexer lx;
    if (!op->generic) {
        l->value = trim(buf, (wpk_span){open + 1, close - open - 1});
        l->replace = (wpk_span){op->name.off, close + 1 - op->name.off};
        l->attrs_insert = close + 1;
        wpk_lex_init(&lx, buf, len, close + 1);
        wpk_tok t = wpk_lex_peek(&lx);
        if (wpk_tok_is(&lx, t, '{')) {
            size_t e = group_end(buf, len, t.off);
            if (!e)
                return 0;
            l->attrs = (wpk_span){t.off, e + 1 - t.off};
        }
        return resource_value(buf, l->value, &l->type);
    }
    /* generic: () [<{props}>] [{attrs}], the value in one of them */
    if (close != open + 1 && trim(buf, (wpk_span){open + 1, close - open - 1}).len)
        return 0; /* operands: not a literal */
    l->replace = op->name;
    l->attrs_insert = close + 1;
    wpk_lex_init(&lx, buf, len, close + 1);
    wpk_tok t = wpk_lex_peek(&lx);
    size_t props_open = 0, props_close = 0;
    if (wpk_tok_is(&lx, t, '<')) {
        wpk_lex_next(&lx);
        wpk_tok b = wpk_lex_next(&lx);
        size_t e;
        if (!wpk_tok_is(&lx, b, '{') || !(e = group_end(buf, len, b.off)))
            return 0;
        props_open = b.off;
        props_close = e;
        wpk_lex_init(&lx, buf, len, e + 1);
        if (!wpk_tok_is(&lx, wpk_lex_next(&lx), '>'))
            return 0;
        l->attrs_insert = lx.pos;
        t = wpk_lex_peek(&lx);
    }
    if (wpk_tok_is(&lx, t, '{')) {
        size_t e = group_end(buf, len, t.off);
        if (!e)
            return 0;
        l->attrs = (wpk_span){t.off, e + 1 - t.off};
    }
    wpk_dict_entry ent[16];
    size_t n, dclose;
    for (int pass = 0; pass < 2; pass++) {
        size_t at = pass == 0 ? props_open : l->attrs.off;
        if ((pass == 0 && !props_close) || (pass == 1 && !l->attrs.len))
            continue;
        if (wpk_mlir_parse_dict(buf, len, at, ent, 16, &n, &dclose) || n > 16)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (wpk_span_is(buf, ent[i].key, "value") && ent[i].value.len) {
                l->value = trim(buf, ent[i].value);
                l->entry = (wpk_span){ent[i].key.off, ent[i].value.off + ent[i].value.len - ent[i].key.off};
                l->in_attrs = pass == 1;
                return resource_value(buf, l->value, &l->type);
            }
    }
    return 0;
}

/* @KEY: bare when KEY is a bare identifier, else quoted with \XX escapes. */
static void put_symbol(wpk_strbuf *a, const char *k, size_t n)
{
    int bare = n && (wpk_char_class[(unsigned char)k[0]] & WPK_C_ID_START);
    for (size_t i = 0; bare && i < n; i++)
        bare = (wpk_char_class[(unsigned char)k[i]] & WPK_C_ID) != 0;
    wpk_sb_puts(a, bare ? "@" : "@\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)k[i];
        if (!bare && (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f)) {
            char e[4];
            wpk_fmt(e, sizeof e, "\\%02X", c);
            wpk_sb_put(a, e, 3);
        } else {
            wpk_sb_put(a, (const char *)&c, 1);
        }
    }
    if (!bare)
        wpk_sb_puts(a, "\"");
}

int wpk_torch_lit_patches(const char *buf, size_t len, const wpk_torch_lit *l, const char *key,
                          size_t key_len, const char *uri, wpk_patch *out, size_t *np,
                          char **texts)
{
    wpk_strbuf a = {0}, b = {0}, c = {0};
    wpk_strbuf ours = {0};
    if (uri) {
        wpk_sb_puts(&ours, "wpack.uri = \"");
        wpk_sb_puts(&ours, uri);
        wpk_sb_puts(&ours, "\"");
    }
    *np = 0;
    if (!l->generic) {
        wpk_sb_puts(&a, "torch.vtensor.external.literal(");
        put_symbol(&a, key, key_len);
        wpk_sb_puts(&a, ")");
    } else {
        wpk_sb_puts(&a, "\"torch.vtensor.external.literal\"");
        wpk_sb_puts(&b, "name = ");
        put_symbol(&b, key, key_len);
    }
    int rc = 0;
    size_t uoff = 0, ulen = 0;
    if (uri && l->generic && l->in_attrs) { /* beside the name in the same dict */
        wpk_sb_puts(&b, ", ");
        wpk_sb_put(&b, ours.p, ours.n);
    } else if (uri) {
        rc = wpk_attr_merge(buf, len, l->attrs, l->attrs_insert, " ", "", ours.p, ours.n, NULL, 1,
                            &c, &uoff, &ulen);
    }
    if (!rc && (a.failed || b.failed || c.failed || ours.failed))
        rc = WPACK_E_NOMEM;
    free(ours.p);
    if (rc) {
        free(a.p);
        free(b.p);
        free(c.p);
        return rc;
    }
    texts[0] = a.p;
    texts[1] = b.p;
    texts[2] = c.p;
    out[(*np)++] = (wpk_patch){l->replace.off, l->replace.len, a.p, a.n};
    if (l->generic)
        out[(*np)++] = (wpk_patch){l->entry.off, l->entry.len, b.p, b.n};
    if (c.p)
        out[(*np)++] = (wpk_patch){uoff, ulen, c.p, c.n};
    return 0;
}
