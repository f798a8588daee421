/* mlir_classify.c - after the scan: aliases sorted and looked up, and what
 * each global's value is (extern, parameter, dense literal, resource, other)
 * through any attribute and type aliases. */
#include <stdlib.h>
#include <string.h>

#include "mlir_scan_int.h"

static int alias_cmp(const void *a, const void *b, const char *buf)
{
    const wpk_alias *x = a, *y = b;
    if (x->is_type != y->is_type)
        return x->is_type - y->is_type;
    size_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
    int c = memcmp(buf + x->name.off, buf + y->name.off, n);
    if (c)
        return c;
    return x->name.len < y->name.len ? -1 : x->name.len > y->name.len;
}

static int alias_qcmp(const void *a, const void *b, void *buf)
{
    return alias_cmp(a, b, buf);
}

void wpk_doc_sort_aliases(wpk_mlir_doc *doc)
{
    if (doc->naliases)
        qsort_r(doc->aliases, doc->naliases, sizeof *doc->aliases, alias_qcmp, (void *)doc->buf);
}

const wpk_alias *wpk_mlir_find_alias(const wpk_mlir_doc *doc, wpk_span ref)
{
    if (ref.len < 2 || (doc->buf[ref.off] != '#' && doc->buf[ref.off] != '!'))
        return NULL;
    wpk_alias key = {{ref.off + 1, ref.len - 1}, {0, 0}, doc->buf[ref.off] == '!'};
    size_t lo = 0, hi = doc->naliases;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = alias_cmp(&key, &doc->aliases[mid], doc->buf);
        if (c == 0)
            return &doc->aliases[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* A span that is one #alias or !alias token and nothing else. */
static wpk_span follow_alias(const wpk_mlir_doc *doc, wpk_span s)
{
    for (int hops = 0; hops < 8; hops++) {
        /* spans start at a token: only '#' and '!' start an alias */
        if (s.len < 2 || (doc->buf[s.off] != '#' && doc->buf[s.off] != '!'))
            return s;
        wpk_lexer lx;
        wpk_lex_init(&lx, doc->buf, s.off + s.len, s.off);
        wpk_tok t = wpk_lex_next(&lx);
        if ((t.kind != WPK_TOK_HASH && t.kind != WPK_TOK_BANG) || t.off + t.len != s.off + s.len)
            return s;
        const wpk_alias *a = wpk_mlir_find_alias(doc, (wpk_span){t.off, t.len});
        if (!a)
            return s;
        s = a->value;
    }
    return s;
}

int wpk_span_starts_word(const char *buf, wpk_span s, const char *w)
{
    size_t n = strlen(w);
    if (s.len < n || memcmp(buf + s.off, w, n) != 0)
        return 0;
    /* a whole identifier: the next byte must not continue it */
    if (s.len == n)
        return 1;
    char c = buf[s.off + n];
    return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '$');
}

/* The T of `dense<...> : T` / `dense_resource<...> : T`: after the last
 * ':' outside brackets, found from the end (the value itself may be a
 * long hex string; a weight's tensor type holds no string: a '"' ends the
 * search). Len 0 when there is none. */
static wpk_span trailing_type(const char *buf, wpk_span v)
{
    unsigned depth = 0;
    for (size_t i = v.len; i-- > 0;) {
        char c = buf[v.off + i];
        if (c == '>' || c == ')' || c == ']' || c == '}') {
            depth++;
        } else if (c == '<' || c == '(' || c == '[' || c == '{') {
            if (!depth)
                break;
            depth--;
        } else if (c == '"') {
            break;
        } else if (c == ':' && !depth) {
            size_t p = i + 1;
            while (p < v.len && (buf[v.off + p] == ' ' || buf[v.off + p] == '\t' ||
                                 buf[v.off + p] == '\n' || buf[v.off + p] == '\r'))
                p++;
            return (wpk_span){v.off + p, v.len - p};
        }
    }
    return WPK_SPAN_NONE;
}

int wpk_scan_classify(wpk_scanner *sc, wpk_global *g)
{
    const wpk_mlir_doc *d = sc->doc;
    g->type_body = follow_alias(d, g->type);
    if (g->value.len == 0) {
        g->value_kind = WPK_VAL_NONE;
        return 0;
    }
    g->value_body = follow_alias(d, g->value);
    wpk_span b = g->value_body;
    if (wpk_span_starts_word(d->buf, b, "#ml_program.extern")) {
        g->value_kind = WPK_VAL_EXTERN;
        /* the usual `#ml_program.extern : T` with T written as the global's
         * type: the same bytes parse to the same type span, no lexing */
        size_t p = b.off + sizeof "#ml_program.extern" - 1, e = b.off + b.len;
        while (p < e && d->buf[p] == ' ')
            p++;
        if (p < e && d->buf[p] == ':') {
            p++;
            while (p < e && d->buf[p] == ' ')
                p++;
            if (e - p == g->type.len && g->type.len &&
                memcmp(d->buf + p, d->buf + g->type.off, g->type.len) == 0) {
                g->value_type = follow_alias(d, (wpk_span){p, e - p});
                return 0;
            }
        }
        wpk_lexer save = sc->lx;
        wpk_lex_init(&sc->lx, d->buf, b.off + b.len, b.off);
        wpk_lex_next(&sc->lx);
        wpk_tok colon = wpk_lex_next(&sc->lx);
        if (wpk_tok_is(&sc->lx, colon, ':')) {
            if (wpk_scan_type(sc, &g->value_type)) {
                sc->lx = save;
                return sc->failed;
            }
            g->value_type = follow_alias(d, g->value_type);
        }
        sc->lx = save;
    } else if (wpk_span_starts_word(d->buf, b, "#flow.parameter.named")) {
        g->value_kind = WPK_VAL_PARAM;
    } else if (wpk_span_starts_word(d->buf, b, "dense_resource")) {
        g->value_kind = WPK_VAL_RESOURCE;
        g->value_type = follow_alias(d, trailing_type(d->buf, b));
    } else if (wpk_span_starts_word(d->buf, b, "dense")) {
        g->value_kind = WPK_VAL_DENSE;
        g->value_type = follow_alias(d, trailing_type(d->buf, b));
    } else {
        g->value_kind = WPK_VAL_OTHER;
    }
    return 0;
}
