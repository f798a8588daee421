/*
 * mlir_fast.c - the one-line fast path of the scanner. Most weight globals
 * are one line in the form mlir-opt prints:
 *   ml_program.global [public|private|nested] [mutable] @sym(#ml_program.extern : T) : T
 *   util.global [public|private|nested] [mutable] @sym : T
 * with T a bare type, optionally with one <...> of identifier characters
 * (tensor<4x3xf32>), single spaces between the parts, and neither an
 * attribute dictionary nor a loc(...) after it. wpk_scan_fast_global() reads such a
 * line with one tight pass over its bytes and records exactly what
 * wpk_scan_ml_pretty / wpk_scan_util_pretty would; anything else (comments,
 * quoted symbols, aliases, other values, line breaks, attributes) returns 0
 * with nothing consumed, and the general parser takes the op.
 * tests/unit/test_resolver_scan.c checks both paths give the same records
 * (WPK_SCAN_NO_FAST turns this one off).
 */
#include <string.h>

#include "bytes.h"
#include "mlir_scan_int.h"

static int cls(const char *b, size_t p, unsigned c)
{
    return wpk_char_class[(unsigned char)b[p]] & c;
}

/* Does w (a word and its one space, wl bytes) start at b[p]? */
static int word_sp(const char *b, size_t n, size_t p, const char *w, size_t wl)
{
    return n - p >= wl && wpk_same_bytes(b + p, w, wl);
}

/* The first byte at or after p not of class c (or n). */
static size_t skip_cls(const char *b, size_t n, size_t p, unsigned c)
{
    while (p < n && cls(b, p, c))
        p++;
    return p;
}

/* End of a simple type at b[p] (bare-id, optionally <id chars>), or 0. */
static size_t simple_type_end(const char *b, size_t n, size_t p)
{
    if (p >= n || !cls(b, p, WPK_C_ID_START))
        return 0;
    p = skip_cls(b, n, p + 1, WPK_C_ID);
    if (p < n && b[p] == '<') {
        size_t q = ++p;
        p = skip_cls(b, n, p, WPK_C_ID);
        if (p == q || p >= n || b[p] != '>')
            return 0;
        p++;
    }
    return p;
}

/* One simple global whose op name (ml_program.global or util.global, per
 * is_util) spans b[at, at+name_len). 1: recorded (or sc->failed set: out of
 * memory), *next = the first byte after it that is not white space;
 * 0: not the simple form, nothing recorded. */
static int fast_one(wpk_scanner *sc, size_t at, size_t name_len, int is_util, size_t *next)
{
    const char *b = sc->doc->buf;
    size_t n = sc->doc->len, p = at + name_len;
    if (p >= n || b[p] != ' ')
        return 0;
    p++;
    if (word_sp(b, n, p, "private ", 8))
        p += 8;
    else if (word_sp(b, n, p, "public ", 7) || word_sp(b, n, p, "nested ", 7))
        p += 7;
    int is_mutable = 0;
    if (word_sp(b, n, p, "mutable ", 8)) {
        p += 8;
        is_mutable = 1;
    }
    if (p >= n || b[p] != '@')
        return 0;
    size_t sym = p;
    p = skip_cls(b, n, p + 1, WPK_C_SUFFIX);
    size_t sym_end = p;
    if (sym_end == sym + 1)
        return 0;
    wpk_span value = {0, 0}, ext = {0, 0};
    size_t colon = p + 1, ty_end; /* util: where "= value " would go */
    if (is_util) {
        if (n - p < 3 || memcmp(b + p, " : ", 3) != 0)
            return 0;
        p += 3;
        ty_end = simple_type_end(b, n, p);
    } else {
        static const char head[] = "(#ml_program.extern : ";
        size_t hl = sizeof head - 1;
        if (n - p < hl || !wpk_same_bytes(b + p, head, hl))
            return 0;
        size_t et_end = simple_type_end(b, n, p + hl);
        if (!et_end || n - et_end < 4 || memcmp(b + et_end, ") : ", 4) != 0)
            return 0;
        ext = (wpk_span){p + hl, et_end - (p + hl)};
        value = (wpk_span){p + 1, et_end - (p + 1)};
        p = et_end + 4;
        /* mostly the same type again: compare instead of scanning */
        if (n - p >= ext.len && wpk_same_bytes(b + p, b + ext.off, ext.len) &&
            (n - p == ext.len || !(cls(b, p + ext.len, WPK_C_ID) || b[p + ext.len] == '<')))
            ty_end = p + ext.len;
        else
            ty_end = simple_type_end(b, n, p);
    }
    if (!ty_end)
        return 0;
    /* the general parser would take a '{' or a `loc` after the type (on
     * any later line, past comments) as part of this op */
    size_t q = ty_end;
    while (q < n && cls(b, q, WPK_C_SPACE))
        q++;
    if (q < n && (b[q] == '{' || b[q] == 'l' || b[q] == '/'))
        return 0;
    wpk_global *g = wpk_scan_new_global(sc, is_util ? WPK_FORM_UTIL_PRETTY : WPK_FORM_ML_PRETTY, at);
    if (!g)
        return 1;
    g->is_mutable = is_mutable;
    g->sym = (wpk_span){sym, sym_end - sym};
    g->name_len = sym_end - sym - 1;
    g->name = wpk_doc_copy_name(sc->doc, b + sym + 1, g->name_len);
    if (!g->name) {
        wpk_scan_nomem(sc);
        return 1;
    }
    g->type = g->type_body = (wpk_span){p, ty_end - p};
    /* what wpk_scan_classify() would find: no alias can be involved (the type
     * starts with a letter, the value is not one #alias token) */
    g->classified = 1;
    if (is_util) {
        g->value_kind = WPK_VAL_NONE;
        g->attrs_insert = sym_end;
        g->value_insert = colon;
    } else {
        g->value_kind = WPK_VAL_EXTERN;
        g->value = g->value_body = value;
        g->value_type = ext;
        g->attrs_insert = ty_end;
    }
    wpk_scan_finish_global(sc, g, ty_end);
    sc->lc_skip = ty_end; /* one line: no newline to count in it */
    sc->nfast++;
    sc->lx.pos = ty_end;
    sc->lx.has_peek = 0;
    *next = q;
    return 1;
}

/* Does b[q..] start with the op name w followed by a space? */
static int op_name_at(const char *b, size_t n, size_t q, const char *w, size_t wl)
{
    return n - q > wl && b[q + wl] == ' ' && wpk_same_bytes(b + q, w, wl);
}

/* 1: the op whose name token is `name` was taken by the fast path, and
 * so were the simple globals on the lines right after it (the statements
 * the main loop would see next); or sc->failed is set. 0: not the simple
 * form, nothing consumed. */
int wpk_scan_fast_global(wpk_scanner *sc, wpk_tok name, int is_util)
{
    const char *b = sc->doc->buf;
    size_t n = sc->doc->len, next;
    if (!fast_one(sc, name.off, name.len, is_util, &next))
        return 0;
    while (!sc->failed && next < n) {
        /* a new line (so the main loop would start a statement there) */
        size_t end = sc->lx.pos;
        if (!wpk_find_nl(b + end, next - end))
            break;
        int util = op_name_at(b, n, next, "util.global", 11);
        if (!util && !op_name_at(b, n, next, "ml_program.global", 17))
            break;
        *wpk_scan_stmt_slot(sc) = next;
        if (!fast_one(sc, next, util ? 11 : 17, util, &next))
            break;
    }
    return 1;
}
