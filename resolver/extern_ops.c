/*
 * extern_ops.c - externalize's weights held by ops, not globals (the ops
 * extern_torch.c reads): torch.vtensor.literal of a dense_resource<KEY> or
 * a dense<...> literal, and constant ops (arith.constant of either,
 * stablehlo.constant and mhlo.constant of dense<...>). A resource moves as
 * entry KEY; a dense literal has no name: its entry is
 * torch_literal_<XXH3-64 of the value's text> for a torch literal and
 * dense_literal_<...> for a constant op, equal texts sharing one entry.
 * Here they are read, checked and named; externalize.c writes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extern_int.h"
#include "internal.h"
#include "mlir_lex.h"
#include "mlir_literal.h"

const char *wpk_ext_op_label(const wpk_ext_op *c)
{
    switch (c->lit.kind) {
    case WPK_OP_ARITH: return "arith.constant";
    case WPK_OP_STABLEHLO: return "stablehlo.constant";
    case WPK_OP_MHLO: return "mhlo.constant";
    default: return "torch.vtensor.literal";
    }
}

/* The first of by[0..n) (sorted by key) with key k, or n. */
static size_t find_key(wpk_ext_op **by, size_t n, const char *k, size_t kn)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (wpk_bytes_cmp(by[mid]->key, by[mid]->key_len, k, kn) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && wpk_bytes_cmp(by[lo]->key, by[lo]->key_len, k, kn) == 0 ? lo : n;
}

/* The symbols the text mentions: every @name and @"name" (decoded), found
 * with memchr, so one in a string or a comment counts too (it only costs a
 * rename that was not needed). Sorted; bare names point into the text,
 * quoted ones into *arena. */
typedef struct {
    const char *p;
    size_t n;
} sym_span;

static int span_cmp(const void *a, const void *b)
{
    const sym_span *x = a, *y = b;
    return wpk_bytes_cmp(x->p, x->n, y->p, y->n);
}

static int hex_value(char c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* The end of the quoted symbol whose '"' is at q (the byte after its
 * closing quote), or 0 when it is not closed on its line; *n its decoded
 * length, written to out when out is not NULL. */
static size_t quoted_sym(const char *buf, size_t len, size_t q, char *out, size_t *n)
{
    *n = 0;
    for (size_t i = q + 1; i < len && buf[i] != '\n'; i++) {
        char c = buf[i];
        if (c == '"')
            return i + 1;
        if (c == '\\' && i + 1 < len) {
            char e = buf[++i];
            if ((wpk_char_class[(unsigned char)e] & WPK_C_HEX) && i + 1 < len &&
                (wpk_char_class[(unsigned char)buf[i + 1]] & WPK_C_HEX)) {
                c = (char)(hex_value(e) << 4 | hex_value(buf[i + 1]));
                i++;
            } else {
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            }
        }
        if (out)
            out[*n] = c;
        (*n)++;
    }
    return 0;
}

static int mentions(const wpk_mlir_doc *doc, sym_span **out, size_t *nout, char **arena)
{
    const char *buf = doc->buf;
    size_t count = 0, quoted = 0, n;
    for (int pass = 0; pass < 2; pass++) {
        size_t k = 0, a = 0;
        for (const char *at = memchr(buf, '@', doc->len); at;
             at = memchr(at + 1, '@', doc->len - (size_t)(at + 1 - buf))) {
            size_t i = (size_t)(at - buf) + 1, e = i;
            if (i < doc->len && buf[i] == '"') {
                if (!quoted_sym(buf, doc->len, i, pass ? *arena + a : NULL, &n))
                    continue;
                if (pass)
                    (*out)[k] = (sym_span){*arena + a, n};
                a += n;
            } else {
                while (e < doc->len && (wpk_char_class[(unsigned char)buf[e]] & WPK_C_SUFFIX))
                    e++;
                if (e == i)
                    continue;
                if (pass)
                    (*out)[k] = (sym_span){buf + i, e - i};
            }
            k++;
        }
        if (!pass) {
            count = k;
            quoted = a;
            *out = malloc((count + 1) * sizeof **out);
            *arena = malloc(quoted + 1);
            if (!*out || !*arena)
                return WPACK_E_NOMEM;
        }
    }
    qsort(*out, count, sizeof **out, span_cmp);
    *nout = count;
    return 0;
}

static int mentioned(const sym_span *m, size_t nm, const char *k, size_t kn)
{
    sym_span key = {k, kn};
    return bsearch(&key, m, nm, sizeof *m, span_cmp) != NULL;
}

/* A hoisted global's symbol is its KEY unless the file mentions @KEY
 * already (a function, a global of its module or another, a use of one,
 * the global of an earlier run): that KEY's global is @KEY_N then, the
 * first N that the file does not mention and that is no other KEY (such
 * names are unique: N has no '_'). Its entry keeps the name KEY. One pass
 * over the text, whatever the number of KEYs. */
static int name_hoisted_globals(const wpk_mlir_doc *doc, wpk_ext_op **by, size_t n, wpk_diag *d)
{
    int any = 0;
    for (size_t i = 0; i < n && !any; i++)
        any = by[i]->hoisting;
    if (!any)
        return 0;
    sym_span *m = NULL;
    char *arena = NULL;
    size_t nm = 0;
    int rc = mentions(doc, &m, &nm, &arena);
    for (size_t k = 0; !rc && k < n;) {
        size_t e = k + 1;
        int hoisting = by[k]->hoisting;
        while (e < n && wpk_bytes_cmp(by[e]->key, by[e]->key_len, by[k]->key, by[k]->key_len) == 0)
            hoisting |= by[e++]->hoisting;
        if (hoisting && mentioned(m, nm, by[k]->key, by[k]->key_len)) {
            size_t cap = by[k]->key_len + 24, sl = 0;
            char *sym = malloc(cap);
            if (!sym) {
                rc = WPACK_E_NOMEM;
                break;
            }
            for (unsigned long long num = 1;; num++) {
                memcpy(sym, by[k]->key, by[k]->key_len);
                sl = by[k]->key_len + (size_t)snprintf(sym + by[k]->key_len, 24, "_%llu", num);
                if (!mentioned(m, nm, sym, sl) && find_key(by, n, sym, sl) == n)
                    break;
            }
            for (size_t j = k; j < e; j++) {
                by[j]->sym = sym;
                by[j]->sym_len = sl;
                by[j]->sym_owned = j == k;
            }
            size_t h = k; /* the note names the first op that loads the global */
            while (!by[h]->hoisting)
                h++;
            wpk_diag_emit(d, WPACK_DIAG_NOTE, 0, "%s:%u:%u: the symbol @%.*s is in the file already; "
                          "the global of entry '%.*s' is @%.*s", d->source, by[h]->line, by[h]->col,
                          (int)(by[k]->key_len > 200 ? 200 : by[k]->key_len), by[k]->key,
                          (int)(by[k]->key_len > 200 ? 200 : by[k]->key_len), by[k]->key,
                          (int)(sl > 200 ? 200 : sl), sym);
        }
        k = e;
    }
    free(m);
    free(arena);
    return rc;
}

static int tc_cmp(const void *a, const void *b)
{
    const wpk_ext_op *x = *(const wpk_ext_op *const *)a, *y = *(const wpk_ext_op *const *)b;
    int c = wpk_bytes_cmp(x->key, x->key_len, y->key, y->key_len);
    if (c)
        return c;
    if (x->hoisting != y->hoisting) /* the others first, then by module */
        return x->hoisting ? 1 : -1;
    if (x->hoisting && x->lit.scope != y->lit.scope)
        return x->lit.scope < y->lit.scope ? -1 : 1;
    return x->lit.op.off < y->lit.op.off ? -1 : 1;
}

int wpk_extern_collect_ops(const wpk_mlir_doc *doc, const wpk_res_index *rk, uint64_t min_bytes,
                         wpk_diag *d, wpack_externalize_result *res, const wpk_ext_cand *cand,
                         size_t ncand, const char *unescaped, wpk_ext_op **out, size_t *nout)
{
    wpk_ext_op *tc = calloc(doc->ntorch_ops + 1, sizeof *tc);
    wpk_ext_op **by = malloc((doc->ntorch_ops + 1) * sizeof *by);
    *out = tc;
    *nout = 0;
    if (!tc || !by) {
        free(by);
        return WPACK_E_NOMEM;
    }
    const char *buf = doc->buf;
    wpk_line_cursor lc = WPK_LINE_CURSOR_INIT;
    size_t n = 0;
    for (size_t i = 0; i < doc->ntorch_ops; i++) {
        wpk_ext_op c = {0};
        if (!wpk_torch_lit_parse(buf, doc->len, &doc->torch_ops[i], &c.lit))
            continue;
        res->globals++;
        wpk_line_cursor_at(&lc, buf, doc->len, c.lit.op.off, &c.line, &c.col);
        char why[200];
        int ok;
        if (wpk_mlir_parse_tensor(buf + c.lit.type.off, c.lit.type.len, &c.type, why, sizeof why) ||
            (c.nbytes = wpk_literal_nbytes(&c.type, &ok), !ok)) {
            res->kept++;
            wpk_diag_emit(d, WPACK_DIAG_NOTE, 0, "%s:%u:%u: %s: kept inline (type %.*s)",
                          d->source, c.line, c.col, wpk_ext_op_label(&c), (int)(c.lit.type.len > 200 ? 200 : c.lit.type.len),
                          buf + c.lit.type.off);
            continue;
        }
        c.dtype = wpk_literal_dtype(c.type.elem);
        if (c.nbytes < min_bytes) {
            res->kept++;
            continue;
        }
        /* a generic constant's `: () -> R`: a stablehlo constant of another
         * R (a quantized tensor<4x!quant.uniform<...>> of an i8 value)
         * stays; a tensor R of an element type taken must be the value's
         * type (a load of the global has the global's type) */
        wpk_mlir_tensor rt;
        int r_taken = c.lit.result.len &&
                      !wpk_mlir_parse_tensor(buf + c.lit.result.off, c.lit.result.len, &rt, why, sizeof why) &&
                      wpk_literal_dtype(rt.elem);
        if (c.lit.arith && c.lit.generic && !r_taken && c.lit.kind != WPK_OP_ARITH) {
            res->kept++;
            wpk_diag_emit(d, WPACK_DIAG_NOTE, 0, "%s:%u:%u: %s: kept inline (its result type is "
                          "not a builtin tensor of the element types taken)", d->source, c.line,
                          c.col, wpk_ext_op_label(&c));
            continue;
        }
        if (c.lit.arith && c.lit.result.len && (!r_taken || !wpk_mlir_tensor_equal(&rt, &c.type))) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_SHAPE,
                          "%s:%u:%u: %s: its result type %.*s is not its value's type %.*s", d->source,
                          c.line, c.col, wpk_ext_op_label(&c),
                          (int)(c.lit.result.len > 200 ? 200 : c.lit.result.len), buf + c.lit.result.off,
                          (int)(c.lit.type.len > 200 ? 200 : c.lit.type.len), buf + c.lit.type.off);
            continue;
        }
        if (c.lit.dense) {
            /* no name: one from its text, stable across runs, the same
             * for equal literals (which share their entry) */
            size_t at;
            int e = wpk_literal_splat(buf, c.lit.value, &c.type, c.fill, &c.splat, why, sizeof why, &at);
            if (e) {
                unsigned l, col;
                wpk_mlir_line_col(buf, doc->len, at, &l, &col);
                wpk_diag_emit(d, WPACK_DIAG_ERROR, e, "%s:%u:%u: %s: %s", d->source, l, col,
                              wpk_ext_op_label(&c), why);
                continue;
            }
            if (c.lit.arith && c.splat) {
                /* a splat constant's text is short whatever its size, and a
                 * compiler folds it (a fill) where a load would hide it */
                res->kept++;
                continue;
            }
            char nm[40];
            wpk_fmt(nm, sizeof nm, "%s_literal_%016llx", c.lit.arith ? "dense" : "torch",
                    (unsigned long long)wpk_xxh3(buf + c.lit.value.off, c.lit.value.len));
            if (!(c.key = strdup(nm))) {
                free(by);
                return WPACK_E_NOMEM;
            }
            c.key_len = strlen(nm);
            c.hoisting = c.lit.arith || unescaped;
            tc[n++] = c;
            continue;
        }
        if (!(c.key = wpk_resource_key(buf, c.lit.value, &c.key_len))) {
            free(by);
            return WPACK_E_NOMEM;
        }
        char q[300];
        wpk_quote(q, sizeof q, c.key, c.key_len);
        const char *bad = wpk_name_problem((const uint8_t *)c.key, c.key_len);
        c.res = wpk_find_resource(doc, rk, c.key, c.key_len);
        if (!c.res || bad) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, bad ? WPACK_E_NAME : WPACK_E_INPUT,
                          "%s:%u:%u: %s: dense_resource<%s> %s%s", d->source,
                          c.line, c.col, wpk_ext_op_label(&c), q, bad ? "cannot be an entry name: " : "has no blob in the file's builtin resources",
                          bad ? bad : "");
            free(c.key);
            continue;
        }
        c.hoisting = c.lit.arith || unescaped;
        if (unescaped && wpk_name_needs_escape(c.key)) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                          "%s:%u:%u: %s: dense_resource<%s> has a '\"' or '\\', which %s "
                          "prints unescaped (use --emit uri)", d->source, c.line, c.col, wpk_ext_op_label(&c), q,
                          unescaped);
            free(c.key);
            continue;
        }
        if (c.hoisting && !c.lit.arith &&
            (!c.lit.colon || (c.lit.generic && !c.lit.fn_open) || c.lit.stmt >= c.lit.op.off)) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_UNSUPPORTED,
                          "%s:%u:%u: torch.vtensor.literal: no `%%v = ... : TYPE` statement read around "
                          "it (--emit %s makes it a load of a global)", d->source, c.line, c.col,
                          unescaped);
            free(c.key);
            continue;
        }
        if (c.hoisting && !c.lit.arith && memmem(buf, doc->len, "%wpack.param.", 13)) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_EXISTS,
                          "%s:%u:%u: torch.vtensor.literal: the file uses %%wpack.param. names already, "
                          "which --emit %s gives its loads", d->source, c.line, c.col, unescaped);
            free(c.key);
            continue;
        }
        tc[n++] = c;
    }
    *nout = n;
    for (size_t i = 0; i < n; i++)
        by[i] = &tc[i];
    qsort(by, n, sizeof *by, tc_cmp);
    for (size_t k = 0; k < n; k++) {
        wpk_ext_op *c = by[k], *p = k ? by[k - 1] : NULL;
        int first = !p || wpk_bytes_cmp(c->key, c->key_len, p->key, p->key_len);
        c->hoists = c->hoisting && (first || !p->hoisting || p->lit.scope != c->lit.scope);
        if (first) {
            c->writes = 1;
            continue;
        }
        /* a dense literal's name is a hash of its text: another text (an
         * XXH3 collision, which a crafted file can make) or a resource
         * named like it would silently share its entry */
        if (c->lit.dense != p->lit.dense ||
            (c->lit.dense && (c->lit.value.len != p->lit.value.len ||
                              memcmp(buf + c->lit.value.off, buf + p->lit.value.off,
                                     c->lit.value.len) != 0))) {
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_EXISTS,
                          "%s:%u:%u: %s: its entry name '%.*s' is also that of another value at "
                          "%u:%u", d->source, c->line, c->col, wpk_ext_op_label(c),
                          (int)(c->key_len > 200 ? 200 : c->key_len), c->key, p->line, p->col);
            continue;
        }
        if (!wpk_mlir_tensor_equal(&c->type, &p->type))
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_SHAPE,
                          "%s:%u:%u: %s: its resource is read as %.*s at %u:%u",
                          d->source, c->line, c->col, wpk_ext_op_label(c), (int)(p->lit.type.len > 200 ? 200 : p->lit.type.len),
                          buf + p->lit.type.off, p->line, p->col);
    }
    for (size_t i = 0; i < ncand; i++) {
        size_t f = find_key(by, n, cand[i].entry, strlen(cand[i].entry));
        if (f < n) {
            char where[400];
            wpk_global_where(where, sizeof where, d, &doc->globals[cand[i].global]);
            wpk_diag_emit(d, WPACK_DIAG_ERROR, WPACK_E_EXISTS,
                          "%s: its entry '%s' is also the %s of the %s at %u:%u", where,
                          cand[i].entry, by[f]->lit.dense ? "name" : "resource",
                          wpk_ext_op_label(by[f]), by[f]->line, by[f]->col);
        }
    }
    int rc = name_hoisted_globals(doc, by, n, d);
    free(by);
    return rc;
}

