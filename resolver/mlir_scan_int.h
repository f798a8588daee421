/*
 * mlir_scan_int.h - the scanner's state and the pieces its files share
 * (mlir_scan.c the main loop; mlir_group.c brackets, types, values and
 * dictionaries; mlir_global.c and mlir_generic.c the pretty and generic
 * globals; mlir_fast.c the one-line fast path; mlir_meta.c aliases and the
 * resources section; mlir_classify.c what a global's value is;
 * mlir_string.c strings and line numbers; mlir_memory.c the document's
 * tables). Not for use outside the scanner.
 */
#ifndef WPACK_RESOLVER_MLIR_SCAN_INT_H
#define WPACK_RESOLVER_MLIR_SCAN_INT_H

#include <string.h>

#include "mlir_lex.h"
#include "mlir_scan.h"

#define WPK_MAX_NESTING 10000

typedef struct wpk_open_bracket {
    char c;              /* ( [ { < */
    size_t off;
    size_t stmt_start;   /* '{' only: the current statement of this region */
    size_t region_ix;    /* the innermost '{' at or below this one (SIZE_MAX: none) */
    unsigned region;     /* of that '{': regions below the innermost module body
                            (0 the module body, or the top level without one) */
    uint32_t module;     /* the innermost module body's number (0: none) */
} wpk_open_bracket;

typedef struct wpk_scanner {
    wpk_mlir_doc *doc;
    wpk_lexer lx;
    unsigned flags;
    wpk_open_bracket *stack;
    size_t sp, cap;
    size_t top_stmt;     /* statement start at the top level */
    size_t prev_end;     /* end of the previous token */
    /* line numbers, counted as globals are found (they come in file
     * order): the last global's start, its line and line start, and the
     * end of its op if that is one line (nothing to count up to there) */
    wpk_line_cursor lc;
    size_t lc_skip;
    size_t nfast;        /* globals the fast path classified */
    uint32_t modules;    /* module bodies seen (wpk_global.scope) */
    size_t angles;       /* '<' brackets open (a dialect attribute's or type's
                            body may hold any character: MLIR does not lex it) */
    char *err;
    size_t errlen;
    int failed;          /* WPACK_E_INPUT or WPACK_E_NOMEM once failed */
} wpk_scanner;

/* Fail at byte off with "LINE:COL: what" (the first failure is kept);
 * returns sc->failed. */
int wpk_scan_fail(wpk_scanner *sc, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int wpk_scan_nomem(wpk_scanner *sc);

/* ---------------------------------------------- small helpers, inline */

/* memchr for '\n', inline for the few bytes between one-line globals
 * (a libc call costs more than looking at 3 bytes) */
static inline const char *wpk_find_nl(const char *p, size_t n)
{
    if (n > 16)
        return memchr(p, '\n', n);
    for (size_t i = 0; i < n; i++)
        if (p[i] == '\n')
            return p + i;
    return NULL;
}

static inline int wpk_scan_word(const wpk_scanner *sc, wpk_tok t, const char *w)
{
    return t.kind == WPK_TOK_BAREID && wpk_span_is(sc->doc->buf, (wpk_span){t.off, t.len}, w);
}

/* The value of a hex digit known to be one. */
static inline int wpk_hex_val(unsigned char c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Without its quotes (a missing pair tolerated: decode what is there). */
static inline void wpk_mlir_strip_quotes(const char **s, size_t *len)
{
    if (*len >= 2 && (*s)[0] == '"' && (*s)[*len - 1] == '"') {
        (*s)++;
        *len -= 2;
    }
}

static inline int wpk_scan_is_opener(const wpk_lexer *lx, wpk_tok t)
{
    return t.kind == WPK_TOK_PUNCT &&
           (lx->buf[t.off] == '(' || lx->buf[t.off] == '[' || lx->buf[t.off] == '{' ||
            lx->buf[t.off] == '<');
}

static inline char wpk_closer_of(char c)
{
    return c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : '>';
}

/* '>' directly followed by '=' outside '<...>' is the ">=" of an integer
 * set, not a bracket. */
static inline int wpk_scan_is_ge(const wpk_lexer *lx, wpk_tok t, char top)
{
    return top != '<' && t.off + 1 < lx->len && lx->buf[t.off + 1] == '=';
}

static inline int wpk_scan_peek_is(wpk_scanner *sc, char c)
{
    wpk_tok t = wpk_lex_peek(&sc->lx);
    return wpk_tok_is(&sc->lx, t, c);
}

/* Where the current statement's start is kept (the innermost region's). */
static inline size_t *wpk_scan_stmt_slot(wpk_scanner *sc)
{
    return sc->sp ? &sc->stack[sc->sp - 1].stmt_start : &sc->top_stmt;
}

/* -------------------------------------------------------- mlir_memory.c */

/* Grow an array of elements of size sz to hold one more. 1 ok, 0 no memory. */
int wpk_grow_array(void **v, size_t *cap, size_t n, size_t sz);
/* Room for one more global in doc->globals (see mlir_memory.c). */
int wpk_doc_grow_globals(wpk_mlir_doc *d);
void wpk_doc_free_globals(wpk_mlir_doc *d);
/* The globals' names, kept in the doc's blocks: decoded from a (quoted)
 * symbol, or copied as they are. NULL on allocation failure. */
char *wpk_doc_decode_name(wpk_mlir_doc *doc, const char *s, size_t len, size_t *n);
char *wpk_doc_copy_name(wpk_mlir_doc *doc, const char *s, size_t len);
void wpk_doc_free_names(wpk_mlir_doc *doc);

/* -------------------------------------------------------- mlir_string.c */

/* Decode the string body s[0..len) into out (room for len + 1 bytes);
 * returns the decoded length. */
size_t wpk_mlir_decode_into(char *out, const char *s, size_t len);

/* --------------------------------------------------------- mlir_group.c */

/* Consume a bracketed group whose opener `open` was just read; *close gets
 * the offset of the matching closer. */
int wpk_scan_skip_group(wpk_scanner *sc, wpk_tok open, size_t *close);
/* Read the next token, failing on a lexer error or end of file. */
int wpk_scan_next(wpk_scanner *sc, wpk_tok *t, const char *what);
/* A type: `tensor<...>`, `f32`, `!alias`, `!dialect.t<...>`, `(...)`. */
int wpk_scan_type(wpk_scanner *sc, wpk_span *out);
/* Tokens of one value up to (not including) a ',' or a closer at depth 0,
 * or, with stop_colon, a ':' at depth 0. */
int wpk_scan_value(wpk_scanner *sc, int stop_colon, wpk_span *out);
/* The token loop of wpk_scan_value and wpk_scan_alias (each with its own
 * stop rule): read the next token into *t, a whole bracketed group when it
 * opens one, and grow the span [*start, *end) over it (*start is SIZE_MAX
 * before the first token). Fails on a lexer error or an unclosed group. */
int wpk_scan_take(wpk_scanner *sc, wpk_tok *t, size_t *start, size_t *end);

/* ---------------------------------------- mlir_global.c, mlir_generic.c */

/* A new global record of this form starting at byte start (line and
 * column counted), or NULL (sc->failed set). */
wpk_global *wpk_scan_new_global(wpk_scanner *sc, int form, size_t start);
/* g->name from its symbol as written. */
int wpk_scan_set_name(wpk_scanner *sc, wpk_global *g, const char *s, size_t n);
/* `{...}` attribute dictionary: record it and an existing wpack.uri. */
int wpk_scan_attr_dict(wpk_scanner *sc, wpk_span *attrs, wpk_span *uri);
/* Optional trailing loc(...): *end moves past it. */
int wpk_scan_trailing_loc(wpk_scanner *sc, size_t *end);
/* The op ends at end: the global is complete. */
int wpk_scan_finish_global(wpk_scanner *sc, wpk_global *g, size_t end);
/* The op whose name token is `name`: ml_program.global / util.global
 * pretty, "ml_program.global"() / "util.global"() generic. */
int wpk_scan_ml_pretty(wpk_scanner *sc, wpk_tok name);
int wpk_scan_util_pretty(wpk_scanner *sc, wpk_tok name);
int wpk_scan_generic(wpk_scanner *sc, wpk_tok name, int is_util);

/* ---------------------------------------------------------- mlir_fast.c */

/* 1: the global whose op name token is `name` (and the simple globals on
 * the lines right after it) were taken by the one-line fast path, or
 * sc->failed is set; 0: not the simple form, nothing consumed. */
int wpk_scan_fast_global(wpk_scanner *sc, wpk_tok name, int is_util);

/* ---------------------------------------------------------- mlir_meta.c */

/* `#name = value` / `!name = value` after its name token. */
int wpk_scan_alias(wpk_scanner *sc, wpk_tok name);
/* The {-# ... #-} section after its opener (level 0). */
int wpk_scan_meta_dict(wpk_scanner *sc, int level, int builtin);

/* ------------------------------------------------------ mlir_classify.c */

/* Does span s start with the identifier w (whole)? */
int wpk_span_starts_word(const char *buf, wpk_span s, const char *w);
/* Sort doc->aliases for wpk_mlir_find_alias. */
void wpk_doc_sort_aliases(wpk_mlir_doc *doc);
/* g's value_kind, value_body, type_body, extern_type (aliases known). */
int wpk_scan_classify(wpk_scanner *sc, wpk_global *g);

#endif
