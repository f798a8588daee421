/*
 * mlir_scan.c - walk an MLIR text buffer once, keeping bracket balance, and
 * record the weight globals, aliases, builtin resources and located ops
 * (see mlir_scan.h). Globals are recognised in region context only (the
 * module body or any region), never inside attribute or type brackets.
 * The parts it calls are listed in mlir_scan_int.h.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mlir_scan_int.h"
#include "wpack.h"

/* Is the statement that a '{' at off belongs to a module: `module`,
 * `builtin.module` (pretty) or "builtin.module" (generic)? The statement
 * is the current one of the region around the '{' (its attribute
 * dictionary counts too, harmlessly: it holds no ops). */
static int opens_module(const wpk_scanner *sc, size_t off)
{
    size_t rix = sc->sp ? sc->stack[sc->sp - 1].region_ix : (size_t)-1;
    size_t stmt = rix == (size_t)-1 ? sc->top_stmt : sc->stack[rix].stmt_start;
    if (stmt == (size_t)-1 || stmt >= off)
        return 0;
    wpk_span s = {stmt, off - stmt};
    static const char generic[] = "\"builtin.module\"";
    return wpk_span_starts_word(sc->doc->buf, s, "module") ||
           wpk_span_starts_word(sc->doc->buf, s, "builtin.module") ||
           (s.len >= sizeof generic - 1 && memcmp(sc->doc->buf + stmt, generic, sizeof generic - 1) == 0);
}

/* Record the module whose body opens at off (its @name, if the statement
 * is `module @name` or `builtin.module @name`). */
static int record_module(wpk_scanner *sc, size_t off, uint32_t parent)
{
    wpk_mlir_doc *d = sc->doc;
    if (!wpk_grow_array((void **)&d->modules, &d->capmodules, d->nmodules, sizeof *d->modules))
        return wpk_scan_nomem(sc);
    wpk_module m = {parent, WPK_SPAN_NONE};
    size_t rix = sc->sp ? sc->stack[sc->sp - 1].region_ix : (size_t)-1;
    size_t stmt = rix == (size_t)-1 ? sc->top_stmt : sc->stack[rix].stmt_start;
    wpk_lexer lx;
    wpk_lex_init(&lx, d->buf, off, stmt);
    wpk_tok w = wpk_lex_next(&lx), s = wpk_lex_next(&lx);
    if (w.kind == WPK_TOK_BAREID && s.kind == WPK_TOK_AT)
        m.sym = (wpk_span){s.off, s.len};
    d->modules[d->nmodules++] = m;
    return 0;
}

static int push_bracket(wpk_scanner *sc, wpk_tok t)
{
    if (sc->sp >= WPK_MAX_NESTING)
        return wpk_scan_fail(sc, t.off, "brackets nested deeper than %d", WPK_MAX_NESTING);
    if (!wpk_grow_array((void **)&sc->stack, &sc->cap, sc->sp, sizeof *sc->stack))
        return wpk_scan_nomem(sc);
    char c = sc->doc->buf[t.off];
    wpk_open_bracket b = {c, t.off, (size_t)-1, (size_t)-1, 0, 0};
    if (sc->sp) { /* by default, the region of the bracket it is in */
        b.region_ix = sc->stack[sc->sp - 1].region_ix;
        b.region = sc->stack[sc->sp - 1].region;
        b.module = sc->stack[sc->sp - 1].module;
    }
    if (c == '{') { /* a region (or a dictionary): one level deeper, or a module's */
        int module = opens_module(sc, t.off);
        b.region = module ? 0 : b.region + 1;
        b.region_ix = sc->sp;
        if (module && sc->modules < UINT32_MAX) {
            if (record_module(sc, t.off, b.module))
                return sc->failed;
            b.module = ++sc->modules; /* its own symbol table */
        }
    }
    sc->stack[sc->sp++] = b;
    sc->angles += c == '<';
    return 0;
}

static int pop_bracket(wpk_scanner *sc, wpk_tok t)
{
    char c = sc->doc->buf[t.off];
    if (!sc->sp)
        return wpk_scan_fail(sc, t.off, "unbalanced brackets: '%c' closes nothing", c);
    wpk_open_bracket *o = &sc->stack[sc->sp - 1];
    if (c != wpk_closer_of(o->c)) {
        unsigned l, col;
        wpk_mlir_line_col(sc->doc->buf, sc->doc->len, o->off, &l, &col);
        return wpk_scan_fail(sc, t.off, "unbalanced brackets: '%c' closes the '%c' opened at %u:%u", c,
                       o->c, l, col);
    }
    sc->angles -= o->c == '<';
    sc->sp--;
    return 0;
}

/* A character MLIR's lexer refuses where a token starts ("unexpected
 * character"): non-ASCII (a UTF-8 byte order mark too), control bytes
 * other than the blanks, and ~ ; & ' ` \ $. Outside strings and comments
 * only (the lexer skips those), and not inside '<...>', where a dialect's
 * own syntax may have any character. */
static int unexpected_char(unsigned char c)
{
    return c >= 0x7f || (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') ||
           (c && strchr("~;&'`\\$", c));
}

static int region_level(const wpk_scanner *sc)
{
    return sc->sp == 0 || sc->stack[sc->sp - 1].c == '{';
}

static int record_loc(wpk_scanner *sc, wpk_tok word)
{
    wpk_tok open = wpk_lex_next(&sc->lx);
    size_t close;
    if (wpk_scan_skip_group(sc, open, &close))
        return sc->failed;
    size_t start = *wpk_scan_stmt_slot(sc);
    if (start == (size_t)-1 || !(sc->flags & WPK_SCAN_OPS))
        return 0;
    wpk_mlir_doc *d = sc->doc;
    if (!wpk_grow_array((void **)&d->ops, &d->capops, d->nops, sizeof *d->ops))
        return wpk_scan_nomem(sc);
    wpk_located_op *op = &d->ops[d->nops++];
    memset(op, 0, sizeof *op);
    op->op_start = start;
    op->attr_insert = word.off;
    op->loc = (wpk_span){open.off + 1, close - open.off - 1};
    op->depth = sc->sp ? sc->stack[sc->sp - 1].region : 0;
    return 0;
}

/* Is there a newline in buf[from, to)? (Mostly a few blanks: no call.) */
static int gap_has_newline(const char *buf, size_t from, size_t to)
{
    if (to - from > 16)
        return memchr(buf + from, '\n', to - from) != NULL;
    for (size_t i = from; i < to; i++)
        if (buf[i] == '\n')
            return 1;
    return 0;
}

static int record_torch_op(wpk_scanner *sc, wpk_tok t, int generic, int kind)
{
    wpk_mlir_doc *d = sc->doc;
    int arith = kind != WPK_OP_TORCH;
    if (arith && !sc->sp)
        return 0; /* in no region of an op: no constant to hoist */
    if (!wpk_grow_array((void **)&d->torch_ops, &d->captorch_ops, d->ntorch_ops, sizeof *d->torch_ops))
        return wpk_scan_nomem(sc);
    /* the statement of the innermost module body (region 0), else the top level's */
    size_t top = sc->top_stmt;
    for (size_t i = sc->sp; i-- > 0;)
        if (sc->stack[i].c == '{' && sc->stack[i].region == 0) {
            /* no statement started on a line of its own yet: right after the '{' */
            top = sc->stack[i].stmt_start != (size_t)-1 ? sc->stack[i].stmt_start : sc->stack[i].off + 1;
            break;
        }
    if (top == (size_t)-1)
        top = 0; /* the top level (no module around): the file's start */
    size_t stmt = *wpk_scan_stmt_slot(sc);
    d->torch_ops[d->ntorch_ops++] = (wpk_torch_op){{t.off, t.len},
                                                   stmt == (size_t)-1 ? t.off : stmt,
                                                   top,
                                                   sc->sp ? sc->stack[sc->sp - 1].module : 0,
                                                   (unsigned char)generic,
                                                   (unsigned char)arith,
                                                   (unsigned char)kind};
    return 0;
}

static int word_is(const char *buf, wpk_tok t, const char *w)
{
    return t.len == strlen(w) && memcmp(buf + t.off, w, t.len) == 0;
}

/* Whether the first token of a line starts a statement: a value (%), a
 * block label, a generic op's string, an alias, or an op name. A line
 * starting with punctuation, "->", @sym or a number continues the one
 * before (`} -> T loc(..)`, mlir-opt's `(%in: f32, ...) {` of linalg.map,
 * `module @m` then `{`). So does a keyword of an op's custom form wrapped
 * onto its own line: a bare word without a '.' followed by punctuation
 * (`outs(%e : T)`, `dimensions = [1]`, `attributes {..}`, a type
 * `tensor<4xf32>`), or scf.for's `to` / `step`. The dot-less op names a
 * region may use (`return`, `module`, `call @f`) are not followed by
 * punctuation. */
static int starts_statement(wpk_scanner *sc, wpk_tok t)
{
    const char *buf = sc->doc->buf;
    switch (t.kind) {
    case WPK_TOK_PUNCT:
    case WPK_TOK_ARROW:
    case WPK_TOK_AT:
    case WPK_TOK_NUMBER:
    case WPK_TOK_META_END:
        return 0;
    case WPK_TOK_BAREID:
        break;
    default:
        return 1;
    }
    if (memchr(buf + t.off, '.', t.len) || word_is(buf, t, "module") || word_is(buf, t, "return"))
        return 1;
    if (word_is(buf, t, "to") || word_is(buf, t, "step") || word_is(buf, t, "into"))
        return 0;
    wpk_tok next = wpk_lex_peek(&sc->lx);
    return next.kind != WPK_TOK_PUNCT && next.kind != WPK_TOK_ARROW;
}

static int scan_all(wpk_scanner *sc)
{
    const char *buf = sc->doc->buf;
    for (;;) {
        wpk_tok t = wpk_lex_next(&sc->lx);
        if (t.kind == WPK_TOK_EOF)
            break;
        if (t.kind == WPK_TOK_ERROR)
            return wpk_scan_fail(sc, sc->lx.err_off, "%s", sc->lx.err);
        int line_first = t.off == 0 || sc->prev_end == 0 ||
                         gap_has_newline(buf, sc->prev_end, t.off);
        if (region_level(sc) && line_first && starts_statement(sc, t))
            *wpk_scan_stmt_slot(sc) = t.off;
        switch (t.kind) {
        case WPK_TOK_PUNCT: {
            char c = buf[t.off];
            if (!sc->angles && unexpected_char((unsigned char)c))
                return wpk_scan_fail(sc, t.off, "unexpected character 0x%02X%s (mlir-opt refuses it)",
                                     (unsigned char)c, t.off == 0 && (unsigned char)c == 0xEF
                                         ? ", a UTF-8 byte order mark" : "");
            if (c == '(' || c == '[' || c == '{' || c == '<') {
                if (push_bracket(sc, t))
                    return sc->failed;
            } else if (c == ')' || c == ']' || c == '}' || c == '>') {
                if (c == '>' && wpk_scan_is_ge(&sc->lx, t, sc->sp ? sc->stack[sc->sp - 1].c : 0))
                    break;
                if (pop_bracket(sc, t))
                    return sc->failed;
            }
            break;
        }
        case WPK_TOK_META_BEGIN:
            if (sc->sp)
                return wpk_scan_fail(sc, t.off, "'{-#' inside an unclosed '%c'", sc->stack[sc->sp - 1].c);
            sc->doc->meta_count++;
            if (wpk_scan_meta_dict(sc, 0, 0))
                return sc->failed;
            break;
        case WPK_TOK_META_END:
            return wpk_scan_fail(sc, t.off, "'#-}' without a '{-#'");
        case WPK_TOK_HASH:
        case WPK_TOK_BANG:
            if (sc->sp == 0 && line_first && wpk_scan_peek_is(sc, '=') && wpk_scan_alias(sc, t))
                return sc->failed;
            break;
        case WPK_TOK_BAREID:
            if (!region_level(sc))
                break;
            if (wpk_scan_word(sc, t, "ml_program.global")) {
                int fast = !(sc->flags & WPK_SCAN_NO_FAST) && wpk_scan_fast_global(sc, t, 0);
                if (fast ? sc->failed : wpk_scan_ml_pretty(sc, t))
                    return sc->failed;
            } else if (wpk_scan_word(sc, t, "util.global")) {
                int fast = !(sc->flags & WPK_SCAN_NO_FAST) && wpk_scan_fast_global(sc, t, 1);
                if (fast ? sc->failed : wpk_scan_util_pretty(sc, t))
                    return sc->failed;
            } else if (wpk_scan_word(sc, t, "torch.vtensor.literal") && wpk_scan_peek_is(sc, '(')) {
                if (record_torch_op(sc, t, 0, 0))
                    return sc->failed;
            } else if (wpk_scan_word(sc, t, "arith.constant")) {
                if (record_torch_op(sc, t, 0, WPK_OP_ARITH))
                    return sc->failed;
            } else if (wpk_scan_word(sc, t, "stablehlo.constant")) {
                if (record_torch_op(sc, t, 0, WPK_OP_STABLEHLO))
                    return sc->failed;
            } else if (wpk_scan_word(sc, t, "mhlo.constant")) {
                if (record_torch_op(sc, t, 0, WPK_OP_MHLO))
                    return sc->failed;
            } else if (wpk_scan_word(sc, t, "loc") && wpk_scan_peek_is(sc, '(')) {
                if (record_loc(sc, t))
                    return sc->failed;
            }
            break;
        case WPK_TOK_STRING:
            if (!region_level(sc) || !wpk_scan_peek_is(sc, '('))
                break;
            if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"ml_program.global\"")) {
                if (wpk_scan_generic(sc, t, 0))
                    return sc->failed;
            } else if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"util.global\"")) {
                if (wpk_scan_generic(sc, t, 1))
                    return sc->failed;
            } else if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"torch.vtensor.literal\"")) {
                if (record_torch_op(sc, t, 1, 0))
                    return sc->failed;
            } else if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"arith.constant\"")) {
                if (record_torch_op(sc, t, 1, WPK_OP_ARITH))
                    return sc->failed;
            } else if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"stablehlo.constant\"")) {
                if (record_torch_op(sc, t, 1, WPK_OP_STABLEHLO))
                    return sc->failed;
            } else if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"mhlo.constant\"")) {
                if (record_torch_op(sc, t, 1, WPK_OP_MHLO))
                    return sc->failed;
            }
            break;
        default:
            break;
        }
        sc->prev_end = sc->lx.pos;
    }
    if (sc->sp) {
        wpk_open_bracket *o = &sc->stack[sc->sp - 1];
        return wpk_scan_fail(sc, o->off, "unbalanced '%c': no matching '%c' before the end of the file",
                       o->c, wpk_closer_of(o->c));
    }
    return 0;
}

int wpk_mlir_scan_buffer(const char *buf, size_t len, unsigned flags, wpk_mlir_doc **out,
                         char *errbuf, size_t errlen)
{
    char dummy[8];
    if (!errbuf || !errlen) {
        errbuf = dummy;
        errlen = sizeof dummy;
    }
    errbuf[0] = 0;
    *out = NULL;
    wpk_mlir_doc *doc = calloc(1, sizeof *doc);
    if (!doc) {
        wpk_fmt(errbuf, errlen, "out of memory while scanning MLIR");
        return WPACK_E_NOMEM;
    }
    doc->buf = buf ? buf : "";
    doc->len = buf ? len : 0;
    wpk_scanner sc = {.doc = doc, .flags = flags, .err = errbuf, .errlen = errlen,
                  .top_stmt = (size_t)-1, .lc = WPK_LINE_CURSOR_INIT};
    wpk_lex_init(&sc.lx, doc->buf, doc->len, 0);
    int rc = scan_all(&sc);
    if (!rc)
        wpk_doc_sort_aliases(doc);
    /* what the fast path did not classify (aliases are all known now) */
    for (size_t i = 0; !rc && sc.nfast < doc->nglobals && i < doc->nglobals; i++)
        if (!doc->globals[i].classified)
            rc = wpk_scan_classify(&sc, &doc->globals[i]);
    free(sc.stack);
    if (rc) {
        wpk_mlir_doc_free(doc);
        return rc;
    }
    *out = doc;
    return 0;
}

void wpk_mlir_doc_free(wpk_mlir_doc *doc)
{
    if (!doc)
        return;
    wpk_doc_free_names(doc);
    wpk_doc_free_globals(doc);
    free(doc->aliases);
    free(doc->resources);
    free(doc->ops);
    free(doc->modules);
    free(doc->torch_ops);
    free(doc);
}
