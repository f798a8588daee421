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
 * (--emit uri). An arith, stablehlo or mhlo constant of a
 * dense_resource<KEY> (the same blobs after lowering) cannot hold a reference: it becomes
 * `ml_program.global_load_const @KEY` of a global hoisted before its
 * module-level op; with --emit iree a torch literal loads such a global
 * too (torch_c.from_builtin_tensor of the load): IREE loads parameters only
 * into #flow.parameter.named globals. A torch literal of dense<...> has no
 * name: its entry is torch_literal_<XXH3-64 of the value's text>.
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

/* "WORD<...> : T" (dense_resource<KEY>: one key inside): T's span; 0 if
 * value is not that. */
static int typed_value(const char *buf, wpk_span v, const char *word, wpk_span *type)
{
    size_t end = v.off + v.len;
    wpk_lexer lx;
    wpk_lex_init(&lx, buf, end, v.off);
    wpk_tok t = wpk_lex_next(&lx);
    if (t.kind != WPK_TOK_BAREID || !wpk_span_is(buf, (wpk_span){t.off, t.len}, word))
        return 0;
    wpk_tok o = wpk_lex_next(&lx);
    size_t e = wpk_tok_is(&lx, o, '<') ? group_end(buf, end, o.off) : 0;
    if (!e)
        return 0;
    if (strcmp(word, "dense_resource") == 0) {
        t = wpk_lex_next(&lx);
        if ((t.kind != WPK_TOK_BAREID && t.kind != WPK_TOK_STRING) || t.off + t.len != e)
            return 0;
    }
    wpk_lex_init(&lx, buf, end, e + 1);
    if (!wpk_tok_is(&lx, wpk_lex_next(&lx), ':'))
        return 0;
    *type = trim(buf, (wpk_span){lx.pos, end - lx.pos});
    return type->len != 0;
}

static int resource_value(const char *buf, wpk_span v, wpk_span *type)
{
    return typed_value(buf, v, "dense_resource", type);
}

/* A literal's value: a resource, or (l->dense) a dense<...> literal. */
static int torch_value(const char *buf, wpk_torch_lit *l)
{
    if (resource_value(buf, l->value, &l->type))
        return 1;
    return l->dense = typed_value(buf, l->value, "dense", &l->type);
}

/* An optional attribute dictionary at the lexer's position: recorded in
 * l->attrs, the lexer moved past it. 0 when it does not close. */
static int take_attrs(const char *buf, size_t len, wpk_lexer *lx, wpk_torch_lit *l)
{
    wpk_tok t = wpk_lex_peek(lx);
    if (!wpk_tok_is(lx, t, '{'))
        return 1;
    size_t e = group_end(buf, len, t.off);
    if (!e)
        return 0;
    l->attrs = (wpk_span){t.off, e + 1 - t.off};
    wpk_lex_init(lx, buf, len, e + 1);
    return 1;
}

/* Pretty `OP [{attrs}] dense_resource<KEY> : tensor<...>` or
 * `OP [{attrs}] dense<...> : tensor<...>` (OP arith.constant,
 * stablehlo.constant or mhlo.constant, whose printers put the attr-dict
 * first; torch-mlir's stablehlo pipeline turns a torch literal's resource
 * into a stablehlo.constant of it): the value runs to the end of the tensor
 * type (a type alias is not read). */
static int arith_pretty(const char *buf, size_t len, wpk_torch_lit *l)
{
    wpk_lexer lx;
    wpk_lex_init(&lx, buf, len, l->op.off + l->op.len);
    if (!take_attrs(buf, len, &lx, l))
        return 0;
    wpk_tok t = wpk_lex_next(&lx);
    size_t vstart = t.off;
    if (t.kind != WPK_TOK_BAREID ||
        !(wpk_span_is(buf, (wpk_span){t.off, t.len}, "dense") ||
          wpk_span_is(buf, (wpk_span){t.off, t.len}, "dense_resource")))
        return 0;
    wpk_tok o = wpk_lex_next(&lx);
    size_t e = wpk_tok_is(&lx, o, '<') ? group_end(buf, len, o.off) : 0;
    if (!e)
        return 0;
    wpk_lex_init(&lx, buf, len, e + 1);
    if (!wpk_tok_is(&lx, wpk_lex_next(&lx), ':'))
        return 0;
    t = wpk_lex_next(&lx);
    if (t.kind != WPK_TOK_BAREID || !wpk_span_is(buf, (wpk_span){t.off, t.len}, "tensor"))
        return 0;
    o = wpk_lex_next(&lx);
    if (!wpk_tok_is(&lx, o, '<') || !(e = group_end(buf, len, o.off)))
        return 0;
    l->value = (wpk_span){vstart, e + 1 - vstart};
    l->replace = (wpk_span){l->op.off, e + 1 - l->op.off};
    return torch_value(buf, l);
}

/* Generic `: () -> R`: l->result = R when it is a builtin tensor<...>. */
static void result_type(const char *buf, size_t len, wpk_torch_lit *l)
{
    size_t e = group_end(buf, len, l->fn_open);
    if (!e)
        return;
    wpk_lexer lx;
    wpk_lex_init(&lx, buf, len, e + 1);
    if (wpk_lex_next(&lx).kind != WPK_TOK_ARROW)
        return;
    wpk_tok t = wpk_lex_next(&lx), o = wpk_lex_next(&lx);
    if (t.kind != WPK_TOK_BAREID || !wpk_span_is(buf, (wpk_span){t.off, t.len}, "tensor") ||
        !wpk_tok_is(&lx, o, '<') || !(e = group_end(buf, len, o.off)))
        return;
    l->result = (wpk_span){t.off, e + 1 - t.off};
}

int wpk_torch_lit_parse(const char *buf, size_t len, const wpk_torch_op *op, wpk_torch_lit *l)
{
    memset(l, 0, sizeof *l);
    l->generic = op->generic;
    l->op = op->name;
    l->arith = op->arith;
    l->top_stmt = op->top_stmt;
    l->stmt = op->stmt;
    l->scope = op->scope;
    l->kind = op->kind;
    if (op->arith && !op->generic)
        return arith_pretty(buf, len, l);
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
        if (!take_attrs(buf, len, &lx, l))
            return 0;
        wpk_tok t = wpk_lex_peek(&lx);
        if (wpk_tok_is(&lx, t, ':'))
            l->colon = t.off;
        return torch_value(buf, l);
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
    }
    if (!take_attrs(buf, len, &lx, l))
        return 0;
    wpk_tok c = wpk_lex_next(&lx), f = wpk_lex_next(&lx);
    if (wpk_tok_is(&lx, c, ':') && wpk_tok_is(&lx, f, '(')) {
        l->colon = c.off;
        l->fn_open = f.off;
        result_type(buf, len, l);
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
                return torch_value(buf, l);
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

/* Text inserted at `at` putting `line` on a line of its own, with at's
 * indentation (or between blanks when at does not start its line). */
static void line_before(wpk_strbuf *g, const char *buf, size_t at, const wpk_strbuf *line)
{
    size_t ls = at;
    while (ls > 0 && (buf[ls - 1] == ' ' || buf[ls - 1] == '\t'))
        ls--;
    int own_line = ls == 0 || buf[ls - 1] == '\n';
    if (!own_line && ls == at) /* right after a '{': one blank each side */
        wpk_sb_puts(g, " ");
    wpk_sb_put(g, line->p ? line->p : "", line->n);
    if (own_line) {
        wpk_sb_puts(g, "\n");
        wpk_sb_put(g, buf + ls, at - ls);
    } else if (buf[at] != ' ' && buf[at] != '\t') {
        wpk_sb_puts(g, " ");
    }
}

/* The hoisted global: ml_program.global private @KEY(VALUE) : T [{wpack.uri}]. */
static void hoisted_global(wpk_strbuf *g, const char *buf, const wpk_torch_lit *l,
                           const wpk_hoist_name *hn, const char *uri, const char *scope)
{
    wpk_sb_puts(g, "ml_program.global private ");
    put_symbol(g, hn->sym, hn->sym_len);
    if (uri) {
        wpk_sb_puts(g, "(#ml_program.extern : ");
    } else {
        wpk_sb_puts(g, "(#flow.parameter.named<\"");
        wpk_sb_puts(g, scope);
        wpk_sb_puts(g, "\"::\"");
        wpk_sb_put(g, hn->key, hn->key_len);
        wpk_sb_puts(g, "\"> : ");
    }
    wpk_sb_put(g, buf + l->type.off, l->type.len);
    wpk_sb_puts(g, ") : ");
    wpk_sb_put(g, buf + l->type.off, l->type.len);
    if (uri) {
        wpk_sb_puts(g, " {wpack.uri = \"");
        wpk_sb_puts(g, uri);
        wpk_sb_puts(g, "\"}");
    }
}

/* texts[0..3) = the buffers' texts; all freed and WPACK_E_NOMEM when one
 * ran out of memory. */
static int take_texts(const wpk_strbuf *s, char **texts)
{
    int failed = s[0].failed || s[1].failed || s[2].failed;
    for (int k = 0; k < 3; k++) {
        texts[k] = failed ? NULL : s[k].p;
        if (failed)
            free(s[k].p);
    }
    return failed ? WPACK_E_NOMEM : 0;
}

int wpk_const_patches(const char *buf, size_t len, const wpk_torch_lit *l, const wpk_hoist_name *hn,
                      const char *uri, const char *scope, int hoist, wpk_patch *out, size_t *np,
                      char **texts)
{
    wpk_strbuf g = {0}, a = {0}, b = {0};
    *np = 0;
    if (hoist) { /* the global, on a line of its own with the op's indentation */
        wpk_strbuf line = {0};
        hoisted_global(&line, buf, l, hn, uri, scope);
        line_before(&g, buf, l->top_stmt, &line);
        g.failed |= line.failed;
        free(line.p);
    }
    if (!l->generic) {
        wpk_sb_puts(&a, "ml_program.global_load_const ");
        put_symbol(&a, hn->sym, hn->sym_len);
        wpk_sb_puts(&a, " : ");
        wpk_sb_put(&a, buf + l->type.off, l->type.len);
        if (l->attrs.len) { /* its printer puts the attr-dict after the type */
            wpk_sb_puts(&a, " ");
            wpk_sb_put(&a, buf + l->attrs.off, l->attrs.len);
        }
    } else {
        wpk_sb_puts(&a, "\"ml_program.global_load_const\"");
        wpk_sb_puts(&b, "global = ");
        put_symbol(&b, hn->sym, hn->sym_len);
    }
    (void)len;
    wpk_strbuf all[3] = {g, a, b};
    if (take_texts(all, texts))
        return WPACK_E_NOMEM;
    if (hoist)
        out[(*np)++] = (wpk_patch){l->top_stmt, 0, g.p, g.n};
    out[(*np)++] = (wpk_patch){l->replace.off, l->replace.len, a.p, a.n};
    if (l->generic)
        out[(*np)++] = (wpk_patch){l->entry.off, l->entry.len, b.p, b.n};
    return 0;
}

/* attrs without its entry e (and one comma beside it); empty when e was
 * its only entry. */
static void attrs_without(wpk_strbuf *a, const char *buf, wpk_span attrs, wpk_span e)
{
    size_t from = e.off, to = e.off + e.len, end = attrs.off + attrs.len - 1; /* the '}' */
    size_t k = to;
    while (k < end && strchr(" \t\r\n", buf[k]))
        k++;
    if (k < end && buf[k] == ',') { /* an entry follows: up to it */
        to = k + 1;
        while (to < end && strchr(" \t\r\n", buf[to]))
            to++;
    } else { /* the last: from the comma before it */
        k = from;
        while (k > attrs.off + 1 && strchr(" \t\r\n", buf[k - 1]))
            k--;
        if (buf[k - 1] == ',')
            from = k - 1;
        else
            return; /* the only entry: no dictionary */
    }
    wpk_sb_puts(a, " ");
    wpk_sb_put(a, buf + attrs.off, from - attrs.off);
    wpk_sb_put(a, buf + to, attrs.off + attrs.len - to);
}

int wpk_torch_param_patches(const char *buf, size_t len, const wpk_torch_lit *l,
                            const wpk_hoist_name *hn, const char *scope, int hoist, const char *ssa,
                            wpk_patch *out, size_t *np, char **texts)
{
    *np = 0;
    if (!l->colon || (l->generic && !l->fn_open) || l->stmt >= l->op.off)
        return WPACK_E_UNSUPPORTED;
    wpk_strbuf g = {0}, ld = {0}, a = {0}, line = {0};
    if (hoist) {
        hoisted_global(&line, buf, l, hn, NULL, scope);
        line_before(&g, buf, l->top_stmt, &line);
        free(line.p);
        line = (wpk_strbuf){0};
    }
    /* the load, on a line of its own before the op's statement */
    wpk_sb_puts(&line, "%");
    wpk_sb_puts(&line, ssa);
    wpk_sb_puts(&line, " = ml_program.global_load_const ");
    put_symbol(&line, hn->sym, hn->sym_len);
    wpk_sb_puts(&line, " : ");
    wpk_sb_put(&line, buf + l->type.off, l->type.len);
    line_before(&ld, buf, l->stmt, &line);
    /* the op: `torch_c.from_builtin_tensor %ssa {attrs} : T -> R` (pretty),
     * `"torch_c.from_builtin_tensor"(%ssa) {attrs} : (T) -> R` (generic);
     * R stays where it is */
    wpk_sb_puts(&a, l->generic ? "\"torch_c.from_builtin_tensor\"(%" : "torch_c.from_builtin_tensor %");
    wpk_sb_puts(&a, ssa);
    if (l->generic)
        wpk_sb_puts(&a, ")");
    if (l->in_attrs) {
        attrs_without(&a, buf, l->attrs, l->entry);
    } else if (l->attrs.len) {
        wpk_sb_puts(&a, " ");
        wpk_sb_put(&a, buf + l->attrs.off, l->attrs.len);
    }
    wpk_sb_puts(&a, l->generic ? " : (" : " : ");
    wpk_sb_put(&a, buf + l->type.off, l->type.len);
    if (!l->generic)
        wpk_sb_puts(&a, " ->");
    (void)len;
    g.failed |= line.failed;
    free(line.p);
    wpk_strbuf all[3] = {g, ld, a};
    if (take_texts(all, texts))
        return WPACK_E_NOMEM;
    if (hoist)
        out[(*np)++] = (wpk_patch){l->top_stmt, 0, g.p, g.n};
    out[(*np)++] = (wpk_patch){l->stmt, 0, ld.p, ld.n};
    size_t end = l->generic ? l->fn_open + 1 : l->colon + 1;
    out[(*np)++] = (wpk_patch){l->op.off, end - l->op.off, a.p, a.n};
    return 0;
}
