/*
 * annotate_loc.c - the names an MLIR location carries, for --annotate:
 *   loc("name"), loc("name"(child)), loc(#alias) with `#alias = loc(...)`,
 *   loc(fused[a, b, ...]) and fused<meta>[...], loc(callsite(a at b)),
 *   file locations "file":L:C (not names) and `unknown`;
 * and torch_xla's JSON name locations ({"nn_module_stack": "k,path,type;..."}
 * or a list of such strings), whose module paths are the `path` parts.
 * Malformed locations give fewer names, never an error.
 */
#include <stdlib.h>
#include <string.h>

#include "mlir_lex.h"
#include "resolve_int.h"

#define MAX_LOC_DEPTH 64

typedef struct {
    const wpk_mlir_doc *doc;
    wpk_loc_walk *w;
    wpk_name_fn fn;
    void *user;
    size_t count;
} loc_ctx;

static int is_word(const wpk_lexer *lx, wpk_tok t, const char *w)
{
    return t.kind == WPK_TOK_BAREID && wpk_span_is(lx->buf, (wpk_span){t.off, t.len}, w);
}

/* ------------------------------------------------------------ JSON */

static size_t json_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* A JSON string at s[i] == '"' decoded into out (heap); returns the index
 * after it, or 0 when malformed. */
static size_t json_string(const char *s, size_t n, size_t i, char **out, size_t *olen)
{
    char *o = malloc(n - i + 1);
    if (!o)
        return 0;
    size_t k = 0;
    for (i++; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            o[k] = 0;
            *out = o;
            *olen = k;
            return i + 1;
        }
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        if (++i >= n)
            break;
        c = s[i];
        if (c == 'n')
            o[k++] = '\n';
        else if (c == 't')
            o[k++] = '\t';
        else if (c == 'r')
            o[k++] = '\r';
        else if (c == 'b')
            o[k++] = '\b';
        else if (c == 'f')
            o[k++] = '\f';
        else if (c == 'u' && i + 4 < n) {
            unsigned v = 0;
            for (int j = 1; j <= 4; j++) {
                char h = s[i + j];
                v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            i += 4;
            if (v < 0x80) {
                o[k++] = (char)v;
            } else if (v < 0x800) {
                o[k++] = (char)(0xC0 | v >> 6);
                o[k++] = (char)(0x80 | (v & 63));
            } else {
                o[k++] = (char)(0xE0 | v >> 12);
                o[k++] = (char)(0x80 | ((v >> 6) & 63));
                o[k++] = (char)(0x80 | (v & 63));
            }
        } else {
            o[k++] = c;
        }
    }
    free(o);
    return 0;
}

/* Skip one JSON value; index after it or 0. */
static size_t json_skip(const char *s, size_t n, size_t i)
{
    i = json_ws(s, n, i);
    if (i >= n)
        return 0;
    if (s[i] == '"') {
        for (i++; i < n; i++) {
            if (s[i] == '\\')
                i++;
            else if (s[i] == '"')
                return i + 1;
        }
        return 0;
    }
    if (s[i] == '{' || s[i] == '[') {
        unsigned depth = 0;
        for (; i < n; i++) {
            char c = s[i];
            if (c == '"') {
                size_t j = json_skip(s, n, i);
                if (!j)
                    return 0;
                i = j - 1;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0)
                    return i + 1;
            }
        }
        return 0;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']')
        i++;
    return i;
}

/* "key,path,type;key,path,type": each path (between the first and the
 * last comma of an entry). */
static void module_stack_entries(loc_ctx *c, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const char *semi = memchr(s + i, ';', n - i);
        size_t end = semi ? (size_t)(semi - s) : n;
        const char *c1 = memchr(s + i, ',', end - i);
        if (c1) {
            size_t p0 = (size_t)(c1 - s) + 1, p1 = end;
            for (size_t j = end; j > p0; j--)
                if (s[j - 1] == ',') {
                    p1 = j - 1;
                    break;
                }
            if (p1 > p0) {
                c->fn(c->user, s + p0, p1 - p0);
                c->count++;
            }
        }
        i = end + 1;
    }
}

/* A name that is a JSON object: names from its nn_module_stack, if any.
 * Returns 1 when it was such an object. */
static int json_name(loc_ctx *c, const char *s, size_t n)
{
    size_t i = json_ws(s, n, 0);
    if (i >= n || s[i] != '{')
        return 0;
    i++;
    for (;;) {
        i = json_ws(s, n, i);
        if (i >= n || s[i] != '"')
            return 1;
        char *key;
        size_t klen;
        i = json_string(s, n, i, &key, &klen);
        if (!i)
            return 1;
        int want = klen == 15 && memcmp(key, "nn_module_stack", 15) == 0;
        free(key);
        i = json_ws(s, n, i);
        if (i >= n || s[i] != ':')
            return 1;
        i = json_ws(s, n, i + 1);
        if (want && i < n && s[i] == '"') {
            char *v;
            size_t vlen;
            i = json_string(s, n, i, &v, &vlen);
            if (!i)
                return 1;
            module_stack_entries(c, v, vlen);
            free(v);
        } else if (want && i < n && s[i] == '[') {
            i++;
            for (;;) {
                i = json_ws(s, n, i);
                if (i >= n || s[i] != '"')
                    break;
                char *v;
                size_t vlen;
                i = json_string(s, n, i, &v, &vlen);
                if (!i)
                    return 1;
                module_stack_entries(c, v, vlen);
                free(v);
                i = json_ws(s, n, i);
                if (i < n && s[i] == ',')
                    i++;
            }
            while (i < n && s[i] != ']') /* the rest of the list, if odd */
                i++;
            i++;
        } else {
            i = json_skip(s, n, i);
            if (!i)
                return 1;
        }
        i = json_ws(s, n, i);
        if (i >= n || s[i] != ',')
            return 1;
        i++;
    }
}

static void emit_name(loc_ctx *c, const char *buf, wpk_tok t)
{
    size_t n;
    char *s = wpk_mlir_decode_string(buf + t.off, t.len, &n);
    if (!s)
        return;
    if (!json_name(c, s, n) && n) {
        c->fn(c->user, s, n);
        c->count++;
    }
    free(s);
}

static void parse_loc(loc_ctx *c, wpk_lexer *lx, int depth);

/* The inside of an alias's `loc(...)`. */
static void parse_alias(loc_ctx *c, wpk_tok t, int depth)
{
    const wpk_alias *a = wpk_mlir_find_alias(c->doc, (wpk_span){t.off, t.len});
    if (!a || a->is_type)
        return;
    wpk_loc_walk *walk = c->w;
    size_t ix = (size_t)(a - c->doc->aliases);
    if (walk->seen[ix] == walk->stamp)
        return; /* read in this call already: its names are known */
    walk->seen[ix] = walk->stamp;
    /* charged by its bytes, not once: 20,000 ops sharing one 1 MB
     * torch_xla JSON location were 20 GB of lexing (2.5 minutes) */
    if (a->value.len > walk->max_alias_bytes - walk->alias_bytes) {
        walk->over = 1;
        return;
    }
    walk->alias_bytes += a->value.len;
    wpk_lexer lx;
    wpk_lex_init(&lx, c->doc->buf, a->value.off + a->value.len, a->value.off);
    wpk_tok w = wpk_lex_next(&lx);
    if (!is_word(&lx, w, "loc") || !wpk_tok_is(&lx, wpk_lex_next(&lx), '('))
        return;
    parse_loc(c, &lx, depth + 1);
}

/* Skip tokens to the end of a location element: a ',' ']' ')' or `at`
 * at this level (not consumed). */
static void skip_element(wpk_lexer *lx)
{
    unsigned depth = 0;
    for (;;) {
        wpk_tok p = wpk_lex_peek(lx);
        if (p.kind == WPK_TOK_EOF || p.kind == WPK_TOK_ERROR)
            return;
        if (!depth && (wpk_tok_is(lx, p, ',') || wpk_tok_is(lx, p, ']') || wpk_tok_is(lx, p, ')') ||
                       is_word(lx, p, "at")))
            return;
        wpk_tok t = wpk_lex_next(lx);
        if (wpk_tok_is(lx, t, '(') || wpk_tok_is(lx, t, '[') || wpk_tok_is(lx, t, '<') ||
            wpk_tok_is(lx, t, '{'))
            depth++;
        else if (depth && (wpk_tok_is(lx, t, ')') || wpk_tok_is(lx, t, ']') ||
                           wpk_tok_is(lx, t, '>') || wpk_tok_is(lx, t, '}')))
            depth--;
    }
}

/* One location element; the lexer is left after it. */
static void parse_loc(loc_ctx *c, wpk_lexer *lx, int depth)
{
    if (depth > MAX_LOC_DEPTH)
        return;
    wpk_tok t = wpk_lex_next(lx);
    if (t.kind == WPK_TOK_STRING) {
        wpk_tok p = wpk_lex_peek(lx);
        if (wpk_tok_is(lx, p, ':')) { /* "file":line:col — not a name */
            skip_element(lx);
            return;
        }
        emit_name(c, lx->buf, t);
        if (wpk_tok_is(lx, p, '(')) {
            wpk_lex_next(lx);
            parse_loc(c, lx, depth + 1);
            skip_element(lx);
            if (wpk_tok_is(lx, wpk_lex_peek(lx), ')'))
                wpk_lex_next(lx);
        }
        return;
    }
    if (t.kind == WPK_TOK_HASH) {
        parse_alias(c, t, depth);
        return;
    }
    if (is_word(lx, t, "callsite") && wpk_tok_is(lx, wpk_lex_peek(lx), '(')) {
        wpk_lex_next(lx);
        parse_loc(c, lx, depth + 1);
        skip_element(lx);
        if (is_word(lx, wpk_lex_peek(lx), "at")) {
            wpk_lex_next(lx);
            parse_loc(c, lx, depth + 1);
            skip_element(lx);
        }
        if (wpk_tok_is(lx, wpk_lex_peek(lx), ')'))
            wpk_lex_next(lx);
        return;
    }
    if (is_word(lx, t, "fused")) {
        if (wpk_tok_is(lx, wpk_lex_peek(lx), '<')) { /* fused<metadata> */
            unsigned d = 0;
            do {
                wpk_tok x = wpk_lex_next(lx);
                if (x.kind == WPK_TOK_EOF || x.kind == WPK_TOK_ERROR)
                    return;
                if (wpk_tok_is(lx, x, '<'))
                    d++;
                else if (wpk_tok_is(lx, x, '>'))
                    d--;
            } while (d);
        }
        if (!wpk_tok_is(lx, wpk_lex_next(lx), '['))
            return;
        for (;;) {
            wpk_tok p = wpk_lex_peek(lx);
            if (p.kind == WPK_TOK_EOF || p.kind == WPK_TOK_ERROR)
                return;
            if (wpk_tok_is(lx, p, ']')) {
                wpk_lex_next(lx);
                return;
            }
            if (wpk_tok_is(lx, p, ',')) {
                wpk_lex_next(lx);
                continue;
            }
            size_t before = lx->pos;
            parse_loc(c, lx, depth + 1);
            skip_element(lx);
            if (lx->pos == before)
                wpk_lex_next(lx); /* always make progress */
        }
    }
    /* unknown, or something this reader does not know: no names */
}

int wpk_loc_walk_init(wpk_loc_walk *w, const wpk_mlir_doc *doc)
{
    memset(w, 0, sizeof *w);
    w->doc = doc;
    w->seen = calloc(doc->naliases + 1, sizeof *w->seen);
    w->max_alias_bytes = doc->len < ((uint64_t)1 << 20) ? (uint64_t)1 << 24 : (uint64_t)doc->len * 16;
    return w->seen ? 0 : WPACK_E_NOMEM;
}

void wpk_loc_walk_free(wpk_loc_walk *w)
{
    free(w->seen);
    w->seen = NULL;
}

size_t wpk_loc_names(wpk_loc_walk *w, wpk_span loc_inner, wpk_name_fn fn, void *user)
{
    const wpk_mlir_doc *doc = w->doc;
    if (++w->stamp == 0) { /* wrapped: no alias may look read in this call */
        memset(w->seen, 0, (doc->naliases + 1) * sizeof *w->seen);
        w->stamp = 1;
    }
    loc_ctx c = {doc, w, fn, user, 0};
    wpk_lexer lx;
    wpk_lex_init(&lx, doc->buf, loc_inner.off + loc_inner.len, loc_inner.off);
    parse_loc(&c, &lx, 0);
    return c.count;
}
