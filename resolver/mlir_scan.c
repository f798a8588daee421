/*
 * mlir_scan.c - walk an MLIR text buffer once, keeping bracket balance, and
 * record the weight globals, aliases, builtin resources and located ops
 * (see mlir_scan.h). Globals are recognised in region context only (the
 * module body or any region), never inside attribute or type brackets.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "bytes.h"
#include "internal.h"
#include "mlir_lex.h"
#include "mlir_scan.h"
#include "wpack.h"

#define MAX_NESTING 10000

typedef struct {
    char c;              /* ( [ { < */
    size_t off;
    size_t stmt_start;   /* '{' only: the current statement of this region */
} open_bracket;

typedef struct {
    wpk_mlir_doc *doc;
    wpk_lexer lx;
    unsigned flags;
    open_bracket *stack;
    size_t sp, cap;
    size_t top_stmt;     /* statement start at the top level */
    size_t prev_end;     /* end of the previous token */
    /* line numbers, counted as globals are found (they come in file
     * order): the last global's start, its line and line start, and the
     * end of its op if that is one line (nothing to count up to there) */
    size_t lc_pos, lc_line_start, lc_skip;
    unsigned lc_line;
    size_t nfast;        /* globals the fast path classified */
    char *err;
    size_t errlen;
    int failed;          /* WPACK_E_INPUT or WPACK_E_NOMEM once failed */
} scanner;

static int fail_at(scanner *sc, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(scanner *sc, size_t off, const char *fmt, ...)
{
    if (sc->failed)
        return sc->failed;
    unsigned line, col;
    wpk_mlir_line_col(sc->doc->buf, sc->doc->len, off, &line, &col);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wpk_fmt(sc->err, sc->errlen, "%u:%u: %s", line, col, msg);
    sc->failed = WPACK_E_INPUT;
    return sc->failed;
}

static int fail_nomem(scanner *sc)
{
    if (!sc->failed) {
        wpk_fmt(sc->err, sc->errlen, "out of memory while scanning MLIR");
        sc->failed = WPACK_E_NOMEM;
    }
    return sc->failed;
}

/* Grow an array of elements of size sz to hold one more. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 1;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > ((size_t)-1) / sz)
        return 0;
    void *p = realloc(*v, c * sz);
    if (!p)
        return 0;
    *v = p;
    *cap = c;
    return 1;
}

/* memchr for '\n', inline for the few bytes between one-line globals
 * (a libc call costs more than looking at 3 bytes) */
static const char *find_nl(const char *p, size_t n)
{
    if (n > 16)
        return memchr(p, '\n', n);
    for (size_t i = 0; i < n; i++)
        if (p[i] == '\n')
            return p + i;
    return NULL;
}

void wpk_mlir_line_col(const char *buf, size_t len, size_t off, unsigned *line, unsigned *col)
{
    if (off > len)
        off = len;
    unsigned l = 1;
    size_t line_start = 0;
    const char *p = buf, *end = buf + off;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        l++;
        line_start = (size_t)(nl - buf) + 1;
        p = nl + 1;
    }
    *line = l;
    *col = (unsigned)(off - line_start + 1);
}

int wpk_span_is(const char *buf, wpk_span s, const char *w)
{
    size_t n = strlen(w);
    return s.len == n && memcmp(buf + s.off, w, n) == 0;
}

static int tok_is_word(const scanner *sc, wpk_tok t, const char *w)
{
    return t.kind == WPK_TOK_BAREID && wpk_span_is(sc->doc->buf, (wpk_span){t.off, t.len}, w);
}

static int is_hex_digit(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(unsigned char c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Decode the string body s[0..len) into out (room for len + 1 bytes);
 * returns the decoded length. */
static size_t decode_into(char *out, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\\' && i + 1 < len) {
            char d = s[i + 1];
            if (d == 'n') {
                out[o++] = '\n';
                i++;
            } else if (d == 't') {
                out[o++] = '\t';
                i++;
            } else if (d == '"' || d == '\\') {
                out[o++] = d;
                i++;
            } else if (i + 2 < len && is_hex_digit((unsigned char)d) &&
                       is_hex_digit((unsigned char)s[i + 2])) {
                out[o++] = (char)(hex_val((unsigned char)d) * 16 + hex_val((unsigned char)s[i + 2]));
                i += 2;
            } else {
                out[o++] = c;
            }
        } else {
            out[o++] = c;
        }
    }
    out[o] = 0;
    return o;
}

/* tolerate a missing pair of quotes: decode what is there */
static void strip_quotes(const char **s, size_t *len)
{
    if (*len >= 2 && (*s)[0] == '"' && (*s)[*len - 1] == '"') {
        (*s)++;
        *len -= 2;
    }
}

char *wpk_mlir_decode_string(const char *s, size_t len, size_t *n)
{
    strip_quotes(&s, &len);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    *n = decode_into(out, s, len);
    return out;
}

/* The globals' names: carved out of blocks, one allocation for thousands
 * of names instead of one each: a 64 KiB block, then 2 MiB blocks of
 * huge pages from wpk_big_calloc. */
struct wpk_name_block {
    struct wpk_name_block *next;
    size_t used, cap;
    size_t bytes;               /* of the allocation, for wpk_big_free */
    char data[];
};

#define NAME_BLOCK ((size_t)64 << 10)
#define NAME_BIG_BLOCK ((size_t)2 << 20)

/* Room for a name of up to len bytes and its NUL in the doc's blocks;
 * *blk gets the block (add what was used to its `used`). */
static char *name_room(wpk_mlir_doc *doc, size_t len, struct wpk_name_block **blk)
{
    struct wpk_name_block *b = doc->names;
    if (!b || b->cap - b->used < len + 1) {
        size_t std = doc->name_blocks >= 1 ? NAME_BIG_BLOCK : NAME_BLOCK;
        size_t bytes = std;
        if (len + 1 > std - sizeof *b) {
            if (len + 1 > ((size_t)-1) - sizeof *b)
                return NULL;
            bytes = sizeof *b + len + 1;
        }
        b = bytes >= NAME_BIG_BLOCK ? wpk_big_calloc(bytes) : malloc(bytes);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = bytes - sizeof *b;
        b->bytes = bytes;
        doc->name_blocks++;
        /* a block for one long name goes behind the current one, so the
         * current block keeps being filled */
        if (doc->names && bytes > std) {
            b->next = doc->names->next;
            doc->names->next = b;
        } else {
            b->next = doc->names;
            doc->names = b;
        }
    }
    *blk = b;
    return b->data + b->used;
}

static void free_name(struct wpk_name_block *b)
{
    if (b->bytes >= NAME_BIG_BLOCK)
        wpk_big_free(b, b->bytes);
    else
        free(b);
}

static char *doc_decode_name(wpk_mlir_doc *doc, const char *s, size_t len, size_t *n)
{
    strip_quotes(&s, &len);
    struct wpk_name_block *b;
    char *out = name_room(doc, len, &b);
    if (!out)
        return NULL;
    *n = decode_into(out, s, len);
    b->used += *n + 1;
    return out;
}

/* A name with nothing to decode (a bare @symbol). */
static char *doc_copy_name(wpk_mlir_doc *doc, const char *s, size_t len)
{
    struct wpk_name_block *b = doc->names;
    char *out;
    if (b && b->cap - b->used > len) /* room in the current block */
        out = b->data + b->used;
    else if (!(out = name_room(doc, len, &b)))
        return NULL;
    memcpy(out, s, len);
    out[len] = 0;
    b->used += len + 1;
    return out;
}

/* ------------------------------------------------------------ groups */

static int is_opener(const wpk_lexer *lx, wpk_tok t)
{
    return t.kind == WPK_TOK_PUNCT &&
           (lx->buf[t.off] == '(' || lx->buf[t.off] == '[' || lx->buf[t.off] == '{' ||
            lx->buf[t.off] == '<');
}

static char closer_of(char c)
{
    return c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : '>';
}

/* '>' directly followed by '=' outside '<...>' is the ">=" of an integer
 * set, not a bracket. */
static int is_ge(const wpk_lexer *lx, wpk_tok t, char top)
{
    return top != '<' && t.off + 1 < lx->len && lx->buf[t.off + 1] == '=';
}

/* Consume a bracketed group whose opener `open` was just read; *close gets
 * the offset of the matching closer. Strings, comments and nesting inside
 * are handled by the lexer and a local stack. */
static int skip_group(scanner *sc, wpk_tok open, size_t *close)
{
    char local[64];
    size_t lofs[64];
    char *stk = local;
    size_t *ofs = lofs;
    size_t sp = 0, cap = 64;
    int rc = 0;
    stk[sp] = sc->doc->buf[open.off];
    ofs[sp++] = open.off;
    while (sp) {
        wpk_tok t = wpk_lex_next(&sc->lx);
        if (t.kind == WPK_TOK_ERROR) {
            rc = fail_at(sc, sc->lx.err_off, "%s", sc->lx.err);
            break;
        }
        if (t.kind == WPK_TOK_EOF) {
            rc = fail_at(sc, ofs[sp - 1], "unbalanced '%c': no matching '%c' before the end of the file",
                         stk[sp - 1], closer_of(stk[sp - 1]));
            break;
        }
        if (t.kind == WPK_TOK_META_BEGIN || t.kind == WPK_TOK_META_END) {
            rc = fail_at(sc, t.off, "'%.3s' inside an unclosed '%c' (opened at byte %zu)",
                         sc->doc->buf + t.off, stk[sp - 1], ofs[sp - 1]);
            break;
        }
        if (t.kind != WPK_TOK_PUNCT)
            continue;
        char c = sc->doc->buf[t.off];
        if (is_opener(&sc->lx, t)) {
            if (sp == cap) {
                if (cap >= MAX_NESTING) {
                    rc = fail_at(sc, t.off, "brackets nested deeper than %d", MAX_NESTING);
                    break;
                }
                size_t ncap = cap * 2;
                char *ns = malloc(ncap);
                size_t *no = malloc(ncap * sizeof *no);
                if (!ns || !no) {
                    free(ns);
                    free(no);
                    rc = fail_nomem(sc);
                    break;
                }
                memcpy(ns, stk, sp);
                memcpy(no, ofs, sp * sizeof *no);
                if (stk != local) {
                    free(stk);
                    free(ofs);
                }
                stk = ns;
                ofs = no;
                cap = ncap;
            }
            stk[sp] = c;
            ofs[sp++] = t.off;
        } else if (c == ')' || c == ']' || c == '}' || c == '>') {
            if (c == '>' && is_ge(&sc->lx, t, stk[sp - 1]))
                continue;
            if (c != closer_of(stk[sp - 1])) {
                unsigned l, col;
                wpk_mlir_line_col(sc->doc->buf, sc->doc->len, ofs[sp - 1], &l, &col);
                rc = fail_at(sc, t.off, "unbalanced brackets: '%c' closes the '%c' opened at %u:%u",
                             c, stk[sp - 1], l, col);
                break;
            }
            sp--;
            if (!sp)
                *close = t.off;
        }
    }
    if (stk != local) {
        free(stk);
        free(ofs);
    }
    return rc;
}

/* Read the next token, failing on a lexer error or end of file. */
static int next_tok(scanner *sc, wpk_tok *t, const char *what)
{
    *t = wpk_lex_next(&sc->lx);
    if (t->kind == WPK_TOK_ERROR)
        return fail_at(sc, sc->lx.err_off, "%s", sc->lx.err);
    if (t->kind == WPK_TOK_EOF)
        return fail_at(sc, t->off, "end of file while reading %s", what);
    return 0;
}

static int peek_is(scanner *sc, char c)
{
    wpk_tok t = wpk_lex_peek(&sc->lx);
    return wpk_tok_is(&sc->lx, t, c);
}

/* A type: `tensor<...>`, `f32`, `!alias`, `!dialect.t<...>`, `(...)`. */
static int parse_type(scanner *sc, wpk_span *out)
{
    wpk_tok t;
    if (next_tok(sc, &t, "a type"))
        return sc->failed;
    size_t end = t.off + t.len;
    if (t.kind == WPK_TOK_BAREID || t.kind == WPK_TOK_BANG) {
        wpk_tok p = wpk_lex_peek(&sc->lx);
        if (wpk_tok_is(&sc->lx, p, '<') && p.off == end) {
            wpk_lex_next(&sc->lx);
            size_t close;
            if (skip_group(sc, p, &close))
                return sc->failed;
            end = close + 1;
        }
    } else if (wpk_tok_is(&sc->lx, t, '(')) {
        size_t close;
        if (skip_group(sc, t, &close))
            return sc->failed;
        end = close + 1;
        if (wpk_lex_peek(&sc->lx).kind == WPK_TOK_ARROW) {
            wpk_lex_next(&sc->lx);
            wpk_span r;
            if (parse_type(sc, &r))
                return sc->failed;
            end = r.off + r.len;
        }
    } else {
        return fail_at(sc, t.off, "expected a type, found '%.*s'", (int)(t.len > 40 ? 40 : t.len),
                       sc->doc->buf + t.off);
    }
    *out = (wpk_span){t.off, end - t.off};
    return 0;
}

/* Tokens of one value up to (not including) a ',' or a closer at depth 0,
 * or, with stop_colon, a ':' at depth 0. */
static int parse_value(scanner *sc, int stop_colon, wpk_span *out)
{
    size_t start = (size_t)-1, end = 0;
    for (;;) {
        wpk_tok p = wpk_lex_peek(&sc->lx);
        if (p.kind == WPK_TOK_ERROR) {
            wpk_lex_next(&sc->lx);
            return fail_at(sc, sc->lx.err_off, "%s", sc->lx.err);
        }
        if (p.kind == WPK_TOK_EOF)
            return fail_at(sc, p.off, "end of file inside an attribute value");
        if (p.kind == WPK_TOK_PUNCT) {
            char c = sc->doc->buf[p.off];
            if (c == ',' || c == ')' || c == ']' || c == '}' || (c == '>' && !is_ge(&sc->lx, p, 0)))
                break;
            if (stop_colon && c == ':')
                break;
        }
        if (p.kind == WPK_TOK_META_BEGIN || p.kind == WPK_TOK_META_END)
            return fail_at(sc, p.off, "'%.3s' inside an attribute value", sc->doc->buf + p.off);
        wpk_tok t = wpk_lex_next(&sc->lx);
        if (t.kind == WPK_TOK_ERROR)
            return fail_at(sc, sc->lx.err_off, "%s", sc->lx.err);
        if (start == (size_t)-1)
            start = t.off;
        end = t.off + t.len;
        if (is_opener(&sc->lx, t)) {
            size_t close;
            if (skip_group(sc, t, &close))
                return sc->failed;
            end = close + 1;
        }
    }
    *out = start == (size_t)-1 ? (wpk_span){sc->lx.pos, 0} : (wpk_span){start, end - start};
    return 0;
}

int wpk_mlir_parse_dict(const char *buf, size_t len, size_t open, wpk_dict_entry *entries,
                        size_t max, size_t *count, size_t *close)
{
    wpk_mlir_doc d = {.buf = buf, .len = len};
    char err[8];
    scanner sc = {.doc = &d, .err = err, .errlen = sizeof err};
    wpk_lex_init(&sc.lx, buf, len, open);
    wpk_tok t = wpk_lex_next(&sc.lx);
    if (!wpk_tok_is(&sc.lx, t, '{'))
        return -1;
    size_t n = 0;
    for (;;) {
        if (next_tok(&sc, &t, "an attribute dictionary"))
            return -1;
        if (wpk_tok_is(&sc.lx, t, '}'))
            break;
        if (t.kind != WPK_TOK_BAREID && t.kind != WPK_TOK_STRING)
            return -1;
        wpk_dict_entry e = {{t.off, t.len}, {t.off + t.len, 0}};
        if (peek_is(&sc, '=')) {
            wpk_lex_next(&sc.lx);
            if (parse_value(&sc, 0, &e.value) || e.value.len == 0)
                return -1;
        }
        if (n < max)
            entries[n] = e;
        n++;
        if (next_tok(&sc, &t, "an attribute dictionary"))
            return -1;
        if (wpk_tok_is(&sc.lx, t, '}'))
            break;
        if (!wpk_tok_is(&sc.lx, t, ','))
            return -1;
    }
    *count = n;
    *close = t.off;
    return 0;
}

/* ---------------------------------------------------------- globals */

/*
 * The globals array (200 bytes a global: 20 MB for 100,000). Past 64 KB it
 * moves from the heap to an anonymous mapping advised to use transparent
 * huge pages (grown by mremap): one page fault per 2 MB instead of 512,
 * which was 15-20% of the run time on bench/resolver's 100,000-globals
 * file. Where the kernel refuses the advice nothing changes; where mmap or
 * mremap is missing the heap is used throughout.
 */
#if defined(__linux__) && defined(MREMAP_MAYMOVE) && defined(MADV_HUGEPAGE)
#define WPK_MAP_GLOBALS 1
#endif
#define MAP_FROM_BYTES ((size_t)64 << 10)
#define HUGE_BYTES ((size_t)2 << 20)
/* wpk_big_calloc maps from this size on: a 4 KiB page fault costs ~3 us on
 * the benchmark's VM, zeroing a 2 MiB huge page ~0.1 ms */
#define BIG_FROM_BYTES ((size_t)256 << 10)

void *wpk_big_calloc(size_t bytes)
{
#ifdef WPK_MAP_GLOBALS
    if (bytes >= BIG_FROM_BYTES) {
        if (bytes > ((size_t)-1) - HUGE_BYTES)
            return NULL;
        size_t len = (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        madvise(p, len, MADV_HUGEPAGE); /* advice: failure changes nothing */
        return p;
    }
#endif
    return calloc(1, bytes ? bytes : 1);
}

void wpk_big_free(void *p, size_t bytes)
{
    if (!p)
        return;
#ifdef WPK_MAP_GLOBALS
    if (bytes >= BIG_FROM_BYTES) {
        munmap(p, (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1));
        return;
    }
#endif
    free(p);
}

static int grow_globals(wpk_mlir_doc *d)
{
    size_t sz = sizeof *d->globals;
    if (d->nglobals < d->capglobals)
        return 1;
#ifdef WPK_MAP_GLOBALS
    size_t c = d->capglobals * 2;
    if (d->capglobals && c <= ((size_t)-1) / sz - HUGE_BYTES && c * sz >= MAP_FROM_BYTES) {
        size_t bytes = (c * sz + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
        void *p;
        if (d->globals_map_bytes) {
            p = mremap(d->globals, d->globals_map_bytes, bytes, MREMAP_MAYMOVE);
            if (p == MAP_FAILED)
                return 0;
        } else {
            p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                return grow((void **)&d->globals, &d->capglobals, d->nglobals, sz);
            madvise(p, bytes, MADV_HUGEPAGE); /* advice: failure changes nothing */
            memcpy(p, d->globals, d->nglobals * sz);
            free(d->globals);
            d->globals_fresh = d->nglobals; /* the rest is zero (mremap adds zeros too) */
        }
        d->globals = p;
        d->globals_map_bytes = bytes;
        d->capglobals = bytes / sz;
        return 1;
    }
#endif
    return grow((void **)&d->globals, &d->capglobals, d->nglobals, sz);
}

static void free_globals(wpk_mlir_doc *d)
{
#ifdef WPK_MAP_GLOBALS
    if (d->globals_map_bytes) {
        munmap(d->globals, d->globals_map_bytes);
        return;
    }
#endif
    free(d->globals);
}

static wpk_global *new_global(scanner *sc, int form, size_t start)
{
    wpk_mlir_doc *d = sc->doc;
    if (!grow_globals(d)) {
        fail_nomem(sc);
        return NULL;
    }
    wpk_global *g = &d->globals[d->nglobals];
    if (d->globals_map_bytes && d->nglobals >= d->globals_fresh)
        d->globals_fresh = d->nglobals + 1; /* still the kernel's zeros */
    else
        memset(g, 0, sizeof *g);
    g->form = form;
    g->op.off = start;
    /* its line and column: from the last global's start, skipping a
     * one-line op (the fast path's), the newlines up to start */
    if (sc->lc_skip > sc->lc_pos && sc->lc_skip <= start)
        sc->lc_pos = sc->lc_skip;
    sc->lc_skip = 0;
    while (sc->lc_pos < start) {
        const char *nl = find_nl(d->buf + sc->lc_pos, start - sc->lc_pos);
        if (!nl) {
            sc->lc_pos = start;
            break;
        }
        sc->lc_line++;
        sc->lc_pos = (size_t)(nl - d->buf) + 1;
        sc->lc_line_start = sc->lc_pos;
    }
    g->line = sc->lc_line;
    g->col = (unsigned)(start - sc->lc_line_start + 1);
    return g;
}

static int set_name(scanner *sc, wpk_global *g, const char *s, size_t n)
{
    g->name = doc_decode_name(sc->doc, s, n, &g->name_len);
    if (!g->name)
        return fail_nomem(sc);
    if (g->name_len == 0)
        return fail_at(sc, g->sym.off, "empty symbol name");
    return 0;
}

/* The symbol of a pretty op: @name or @"quoted". */
static int parse_symbol(scanner *sc, wpk_global *g)
{
    wpk_tok t;
    if (next_tok(sc, &t, "a global's symbol"))
        return sc->failed;
    if (t.kind != WPK_TOK_AT)
        return fail_at(sc, t.off, "expected the global's @symbol, found '%.*s'",
                       (int)(t.len > 40 ? 40 : t.len), sc->doc->buf + t.off);
    g->sym = (wpk_span){t.off, t.len};
    return set_name(sc, g, sc->doc->buf + t.off + 1, t.len - 1);
}

/* [public|private|nested] [mutable] */
static void parse_visibility_mutable(scanner *sc, wpk_global *g)
{
    wpk_tok t = wpk_lex_peek(&sc->lx);
    if (tok_is_word(sc, t, "public") || tok_is_word(sc, t, "private") || tok_is_word(sc, t, "nested")) {
        wpk_lex_next(&sc->lx);
        t = wpk_lex_peek(&sc->lx);
    }
    if (tok_is_word(sc, t, "mutable")) {
        wpk_lex_next(&sc->lx);
        g->is_mutable = 1;
    }
}

/* `{...}` attribute dictionary: record it and an existing wpack.uri. */
static int parse_attr_dict(scanner *sc, wpk_span *attrs, wpk_span *uri)
{
    wpk_tok open = wpk_lex_next(&sc->lx);
    size_t close;
    if (skip_group(sc, open, &close))
        return sc->failed;
    *attrs = (wpk_span){open.off, close + 1 - open.off};
    wpk_dict_entry e[64];
    size_t n, cl;
    if (wpk_mlir_parse_dict(sc->doc->buf, sc->doc->len, open.off, e, 64, &n, &cl) == 0) {
        for (size_t i = 0; i < n && i < 64; i++)
            if (wpk_span_is(sc->doc->buf, e[i].key, "wpack.uri"))
                *uri = e[i].value;
    }
    return 0;
}

/* Optional trailing loc(...). */
static int parse_trailing_loc(scanner *sc, size_t *end)
{
    wpk_tok t = wpk_lex_peek(&sc->lx);
    if (!tok_is_word(sc, t, "loc"))
        return 0;
    wpk_lexer save = sc->lx;
    wpk_lex_next(&sc->lx);
    wpk_tok p = wpk_lex_next(&sc->lx);
    if (!wpk_tok_is(&sc->lx, p, '(')) {
        sc->lx = save;
        return 0;
    }
    size_t close;
    if (skip_group(sc, p, &close))
        return sc->failed;
    *end = close + 1;
    return 0;
}

static int finish_global(scanner *sc, wpk_global *g, size_t end)
{
    g->op.len = end - g->op.off;
    if (g->attrs.len == 0 && g->attrs_insert == 0)
        g->attrs_insert = end;
    sc->doc->nglobals++;
    return 0;
}

/* ml_program.global [vis] [mutable] @sym [(value)] : type [{attrs}] [loc(...)] */
static int parse_ml_pretty(scanner *sc, wpk_tok name)
{
    wpk_global *g = new_global(sc, WPK_FORM_ML_PRETTY, name.off);
    if (!g)
        return sc->failed;
    parse_visibility_mutable(sc, g);
    if (parse_symbol(sc, g))
        goto bad;
    wpk_tok t;
    if (peek_is(sc, '(')) {
        wpk_tok open = wpk_lex_next(&sc->lx);
        if (parse_value(sc, 0, &g->value))
            goto bad;
        if (next_tok(sc, &t, "a global's initial value"))
            goto bad;
        if (!wpk_tok_is(&sc->lx, t, ')')) {
            unsigned l, c;
            wpk_mlir_line_col(sc->doc->buf, sc->doc->len, open.off, &l, &c);
            fail_at(sc, t.off, "global @%s: unbalanced '(' (opened at %u:%u): found '%c' before ')'",
                    g->name, l, c, sc->doc->buf[t.off]);
            goto bad;
        }
    }
    if (next_tok(sc, &t, "a global's type"))
        goto bad;
    if (!wpk_tok_is(&sc->lx, t, ':')) {
        fail_at(sc, t.off, "global @%s: expected ':' and its type", g->name);
        goto bad;
    }
    if (parse_type(sc, &g->type))
        goto bad;
    size_t end = g->type.off + g->type.len;
    g->attrs_insert = end;
    if (peek_is(sc, '{')) {
        if (parse_attr_dict(sc, &g->attrs, &g->uri_value))
            goto bad;
        end = g->attrs.off + g->attrs.len;
    }
    if (parse_trailing_loc(sc, &end))
        goto bad;
    return finish_global(sc, g, end);
bad:
    return sc->failed;
}

/* util.global [vis] [mutable] @sym [{attrs}] [= value] : type [loc(...)] */
static int parse_util_pretty(scanner *sc, wpk_tok name)
{
    wpk_global *g = new_global(sc, WPK_FORM_UTIL_PRETTY, name.off);
    if (!g)
        return sc->failed;
    parse_visibility_mutable(sc, g);
    if (parse_symbol(sc, g))
        goto bad;
    g->attrs_insert = g->sym.off + g->sym.len;
    if (peek_is(sc, '{') && parse_attr_dict(sc, &g->attrs, &g->uri_value))
        goto bad;
    wpk_tok t;
    if (peek_is(sc, '=')) {
        wpk_lex_next(&sc->lx);
        if (parse_value(sc, 1, &g->value))
            goto bad;
    }
    if (next_tok(sc, &t, "a global's type"))
        goto bad;
    if (!wpk_tok_is(&sc->lx, t, ':')) {
        fail_at(sc, t.off, "global @%s: expected ':' and its type", g->name);
        goto bad;
    }
    g->value_insert = t.off;
    if (parse_type(sc, &g->type))
        goto bad;
    size_t end = g->type.off + g->type.len;
    if (parse_trailing_loc(sc, &end))
        goto bad;
    return finish_global(sc, g, end);
bad:
    return sc->failed;
}

/* ------------------------------------------- the one-line fast path */

static size_t *stmt_slot(scanner *sc);

/*
 * Most weight globals are one line in the form mlir-opt prints:
 *   ml_program.global [public|private|nested] [mutable] @sym(#ml_program.extern : T) : T
 *   util.global [public|private|nested] [mutable] @sym : T
 * with T a bare type, optionally with one <...> of identifier characters
 * (tensor<4x3xf32>), single spaces between the parts, and neither an
 * attribute dictionary nor a loc(...) after it. fast_global() reads such a
 * line with one tight pass over its bytes and records exactly what
 * parse_ml_pretty / parse_util_pretty would; anything else (comments,
 * quoted symbols, aliases, other values, line breaks, attributes) returns 0
 * with nothing consumed, and the general parser takes the op.
 * tests/unit/test_resolver_scan.c checks both paths give the same records
 * (WPK_SCAN_NO_FAST turns this one off).
 */
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
static int fast_one(scanner *sc, size_t at, size_t name_len, int is_util, size_t *next)
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
    wpk_global *g = new_global(sc, is_util ? WPK_FORM_UTIL_PRETTY : WPK_FORM_ML_PRETTY, at);
    if (!g)
        return 1;
    g->is_mutable = is_mutable;
    g->sym = (wpk_span){sym, sym_end - sym};
    g->name_len = sym_end - sym - 1;
    g->name = doc_copy_name(sc->doc, b + sym + 1, g->name_len);
    if (!g->name) {
        fail_nomem(sc);
        return 1;
    }
    g->type = g->type_body = (wpk_span){p, ty_end - p};
    /* what classify() would find: no alias can be involved (the type
     * starts with a letter, the value is not one #alias token) */
    g->classified = 1;
    if (is_util) {
        g->value_kind = WPK_VAL_NONE;
        g->attrs_insert = sym_end;
        g->value_insert = colon;
    } else {
        g->value_kind = WPK_VAL_EXTERN;
        g->value = g->value_body = value;
        g->extern_type = ext;
        g->attrs_insert = ty_end;
    }
    finish_global(sc, g, ty_end);
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
static int fast_global(scanner *sc, wpk_tok name, int is_util)
{
    const char *b = sc->doc->buf;
    size_t n = sc->doc->len, next;
    if (!fast_one(sc, name.off, name.len, is_util, &next))
        return 0;
    while (!sc->failed && next < n) {
        /* a new line (so the main loop would start a statement there) */
        size_t end = sc->lx.pos;
        if (!find_nl(b + end, next - end))
            break;
        int util = op_name_at(b, n, next, "util.global", 11);
        if (!util && !op_name_at(b, n, next, "ml_program.global", 17))
            break;
        *stmt_slot(sc) = next;
        if (!fast_one(sc, next, util ? 11 : 17, util, &next))
            break;
    }
    return 1;
}

/* Pick the fields of a generic global out of one dictionary. */
static int generic_fields(scanner *sc, wpk_global *g, size_t open, int is_util, int *have_name)
{
    wpk_dict_entry e[32];
    size_t n, close;
    if (wpk_mlir_parse_dict(sc->doc->buf, sc->doc->len, open, e, 32, &n, &close))
        return fail_at(sc, open, "malformed attribute dictionary of a generic global");
    const char *buf = sc->doc->buf;
    for (size_t i = 0; i < n && i < 32; i++) {
        wpk_span k = e[i].key, v = e[i].value;
        if (wpk_span_is(buf, k, "sym_name")) {
            if (v.len < 2 || buf[v.off] != '"')
                return fail_at(sc, v.off, "generic global: sym_name is not a string");
            g->sym = v;
            if (set_name(sc, g, buf + v.off, v.len))
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
static int parse_generic(scanner *sc, wpk_tok name, int is_util)
{
    wpk_global *g = new_global(sc, is_util ? WPK_FORM_UTIL_GENERIC : WPK_FORM_ML_GENERIC, name.off);
    if (!g)
        return sc->failed;
    int have_name = 0;
    wpk_tok open = wpk_lex_next(&sc->lx); /* '(' (checked by the caller) */
    size_t close;
    if (skip_group(sc, open, &close))
        goto bad;
    g->attrs_insert = close + 1;
    if (peek_is(sc, '<')) {
        wpk_tok lt = wpk_lex_next(&sc->lx);
        wpk_tok br = wpk_lex_peek(&sc->lx);
        if (!wpk_tok_is(&sc->lx, br, '{')) {
            fail_at(sc, lt.off, "generic op: expected '<{' properties");
            goto bad;
        }
        if (generic_fields(sc, g, br.off, is_util, &have_name))
            goto bad;
        size_t pclose;
        if (skip_group(sc, lt, &pclose))
            goto bad;
        g->props = (wpk_span){lt.off, pclose + 1 - lt.off};
        g->attrs_insert = pclose + 1;
    }
    if (peek_is(sc, '{')) {
        wpk_tok br = wpk_lex_peek(&sc->lx);
        size_t vi = g->value_insert;
        if (generic_fields(sc, g, br.off, is_util, &have_name))
            goto bad;
        if (g->props.len)
            g->value_insert = vi; /* a missing initial_value goes into the properties */
        wpk_span dummy = {0, 0};
        if (parse_attr_dict(sc, &g->attrs, &dummy))
            goto bad;
    }
    wpk_tok t;
    if (next_tok(sc, &t, "a generic op's type") || !wpk_tok_is(&sc->lx, t, ':')) {
        fail_at(sc, t.off, "generic op: expected ': () -> ()'");
        goto bad;
    }
    wpk_span ftype;
    if (parse_type(sc, &ftype))
        goto bad;
    size_t end = ftype.off + ftype.len;
    if (parse_trailing_loc(sc, &end))
        goto bad;
    if (!have_name) {
        fail_at(sc, name.off, "generic global without a sym_name");
        goto bad;
    }
    if (g->type.len == 0) {
        fail_at(sc, name.off, "generic global @%s without a type", g->name);
        goto bad;
    }
    return finish_global(sc, g, end);
bad:
    return sc->failed;
}

/* -------------------------------------------------------- aliases */

/* #name = value / !name = value: the value runs to the end of its line
 * (continuing while brackets are open). */
static int parse_alias(scanner *sc, wpk_tok name)
{
    wpk_lex_next(&sc->lx); /* '=' */
    size_t start = (size_t)-1, end = 0;
    for (;;) {
        wpk_tok p = wpk_lex_peek(&sc->lx);
        if (p.kind == WPK_TOK_EOF || p.kind == WPK_TOK_META_BEGIN)
            break;
        if (start != (size_t)-1 && memchr(sc->doc->buf + end, '\n', p.off - end))
            break;
        wpk_tok t = wpk_lex_next(&sc->lx);
        if (t.kind == WPK_TOK_ERROR)
            return fail_at(sc, sc->lx.err_off, "%s", sc->lx.err);
        if (start == (size_t)-1)
            start = t.off;
        end = t.off + t.len;
        if (is_opener(&sc->lx, t)) {
            size_t close;
            if (skip_group(sc, t, &close))
                return sc->failed;
            end = close + 1;
        } else if (t.kind == WPK_TOK_PUNCT && strchr(")]}>", sc->doc->buf[t.off])) {
            return fail_at(sc, t.off, "unbalanced '%c' in the definition of '%.*s'",
                           sc->doc->buf[t.off], (int)(name.len > 60 ? 60 : name.len),
                           sc->doc->buf + name.off);
        }
    }
    if (start == (size_t)-1)
        return fail_at(sc, name.off, "alias '%.*s' has no value", (int)(name.len > 60 ? 60 : name.len),
                       sc->doc->buf + name.off);
    wpk_mlir_doc *d = sc->doc;
    if (!grow((void **)&d->aliases, &d->capaliases, d->naliases, sizeof *d->aliases))
        return fail_nomem(sc);
    d->aliases[d->naliases++] = (wpk_alias){
        {name.off + 1, name.len - 1}, {start, end - start}, d->buf[name.off] == '!'};
    return 0;
}

/* ------------------------------------------------------ resources */

/* A blob's checks; digits_ok: wpk_lex_hex_blob already saw only hex digits. */
static int check_blob(scanner *sc, wpk_tok key, wpk_tok val, int digits_ok, wpk_resource *r)
{
    const unsigned char *s = (const unsigned char *)sc->doc->buf + val.off;
    size_t n = val.len;
    if (n < 4 || s[1] != '0' || (s[2] != 'x' && s[2] != 'X'))
        return fail_at(sc, val.off, "resource '%.*s': blob is not a \"0x...\" hex string",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off);
    size_t digits = n - 4;
    const unsigned char *h = s + 3;
    size_t run = digits_ok ? digits : wpk_hex_run((const char *)h, digits);
    if (run < digits)
        return fail_at(sc, val.off + 3 + run, "resource '%.*s': '%c' is not a hex digit",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off, h[run]);
    if (digits % 2)
        return fail_at(sc, val.off, "resource '%.*s': odd number of hex digits (%zu)",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off, digits);
    if (digits < 8)
        return fail_at(sc, val.off, "resource '%.*s': truncated blob (%zu bytes; the 4-byte "
                       "alignment header is missing)", (int)(key.len > 60 ? 60 : key.len),
                       sc->doc->buf + key.off, digits / 2);
    uint32_t a = 0;
    for (int i = 0; i < 4; i++)
        a |= (uint32_t)(hex_val(h[2 * i]) * 16 + hex_val(h[2 * i + 1])) << (8 * i);
    if (!a || (a & (a - 1)))
        return fail_at(sc, val.off, "resource '%.*s': alignment %u is not a power of two",
                       (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off, a);
    r->key = (wpk_span){key.off, key.len};
    r->blob = (wpk_span){val.off + 3, digits};
    r->alignment = a;
    return 0;
}

/* `{ key: value, ... }` inside the metadata; level 0 is the section
 * itself (closed by #-}), level 1 dialect_resources, level 2 one dialect. */
static int parse_meta_dict(scanner *sc, int level, int builtin)
{
    for (;;) {
        wpk_tok t;
        if (next_tok(sc, &t, "the {-# #-} section"))
            return sc->failed;
        if (level == 0 && t.kind == WPK_TOK_META_END)
            return 0;
        if (level > 0 && wpk_tok_is(&sc->lx, t, '}'))
            return 0;
        if (t.kind != WPK_TOK_BAREID && t.kind != WPK_TOK_STRING)
            return fail_at(sc, t.off, "expected a key in the {-# #-} section");
        wpk_tok key = t;
        if (next_tok(sc, &t, "the {-# #-} section") || !wpk_tok_is(&sc->lx, t, ':'))
            return fail_at(sc, t.off, "expected ':' after a key in the {-# #-} section");
        /* a builtin blob: the common case in one pass over its digits
         * (before any peek, which would lex the whole string first) */
        wpk_tok v;
        int blob_ok = level == 2 && builtin && wpk_lex_hex_blob(&sc->lx, &v);
        if (!blob_ok)
            v = wpk_lex_peek(&sc->lx);
        if (!blob_ok && wpk_tok_is(&sc->lx, v, '{') && level < 2) {
            wpk_lex_next(&sc->lx);
            int sub_builtin = level == 1 && tok_is_word(sc, key, "builtin");
            int sub_level = level == 0 && tok_is_word(sc, key, "dialect_resources") ? 1
                          : level == 1 ? 2 : 3;
            if (sub_level == 3) {
                size_t close;
                if (skip_group(sc, v, &close))
                    return sc->failed;
            } else if (parse_meta_dict(sc, sub_level, sub_builtin)) {
                return sc->failed;
            }
        } else if (level == 2 && builtin) {
            /* anything but the common case through the lexer's string
             * rules and errors */
            int digits_ok = blob_ok;
            if (!digits_ok && next_tok(sc, &v, "a resource blob"))
                return sc->failed;
            if (v.kind != WPK_TOK_STRING)
                return fail_at(sc, v.off, "resource '%.*s': expected a \"0x...\" blob",
                               (int)(key.len > 60 ? 60 : key.len), sc->doc->buf + key.off);
            wpk_mlir_doc *d = sc->doc;
            if (!grow((void **)&d->resources, &d->capresources, d->nresources, sizeof *d->resources))
                return fail_nomem(sc);
            if (check_blob(sc, key, v, digits_ok, &d->resources[d->nresources]))
                return sc->failed;
            d->nresources++;
        } else {
            wpk_span ignored;
            if (parse_value(sc, 0, &ignored))
                return sc->failed;
        }
        if (next_tok(sc, &t, "the {-# #-} section"))
            return sc->failed;
        if (level == 0 && t.kind == WPK_TOK_META_END)
            return 0;
        if (level > 0 && wpk_tok_is(&sc->lx, t, '}'))
            return 0;
        if (!wpk_tok_is(&sc->lx, t, ','))
            return fail_at(sc, t.off, "expected ',' or the end of the dictionary in the {-# #-} section");
    }
}

/* -------------------------------------------------- post-processing */

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

static int starts_with(const char *buf, wpk_span s, const char *w)
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

static int classify(scanner *sc, wpk_global *g)
{
    const wpk_mlir_doc *d = sc->doc;
    g->type_body = follow_alias(d, g->type);
    if (g->value.len == 0) {
        g->value_kind = WPK_VAL_NONE;
        return 0;
    }
    g->value_body = follow_alias(d, g->value);
    wpk_span b = g->value_body;
    if (starts_with(d->buf, b, "#ml_program.extern")) {
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
                g->extern_type = follow_alias(d, (wpk_span){p, e - p});
                return 0;
            }
        }
        wpk_lexer save = sc->lx;
        wpk_lex_init(&sc->lx, d->buf, b.off + b.len, b.off);
        wpk_lex_next(&sc->lx);
        wpk_tok colon = wpk_lex_next(&sc->lx);
        if (wpk_tok_is(&sc->lx, colon, ':')) {
            if (parse_type(sc, &g->extern_type)) {
                sc->lx = save;
                return sc->failed;
            }
            g->extern_type = follow_alias(d, g->extern_type);
        }
        sc->lx = save;
    } else if (starts_with(d->buf, b, "#flow.parameter.named")) {
        g->value_kind = WPK_VAL_PARAM;
    } else if (starts_with(d->buf, b, "dense_resource")) {
        g->value_kind = WPK_VAL_RESOURCE;
    } else if (starts_with(d->buf, b, "dense")) {
        g->value_kind = WPK_VAL_DENSE;
    } else {
        g->value_kind = WPK_VAL_OTHER;
    }
    return 0;
}

/* ------------------------------------------------------- main loop */

static int push_bracket(scanner *sc, wpk_tok t)
{
    if (sc->sp >= MAX_NESTING)
        return fail_at(sc, t.off, "brackets nested deeper than %d", MAX_NESTING);
    if (!grow((void **)&sc->stack, &sc->cap, sc->sp, sizeof *sc->stack))
        return fail_nomem(sc);
    sc->stack[sc->sp++] = (open_bracket){sc->doc->buf[t.off], t.off, (size_t)-1};
    return 0;
}

static int pop_bracket(scanner *sc, wpk_tok t)
{
    char c = sc->doc->buf[t.off];
    if (!sc->sp)
        return fail_at(sc, t.off, "unbalanced brackets: '%c' closes nothing", c);
    open_bracket *o = &sc->stack[sc->sp - 1];
    if (c != closer_of(o->c)) {
        unsigned l, col;
        wpk_mlir_line_col(sc->doc->buf, sc->doc->len, o->off, &l, &col);
        return fail_at(sc, t.off, "unbalanced brackets: '%c' closes the '%c' opened at %u:%u", c,
                       o->c, l, col);
    }
    sc->sp--;
    return 0;
}

static int region_level(const scanner *sc)
{
    return sc->sp == 0 || sc->stack[sc->sp - 1].c == '{';
}

static unsigned region_depth(const scanner *sc)
{
    unsigned d = 0;
    for (size_t i = 0; i < sc->sp; i++)
        d += sc->stack[i].c == '{';
    return d;
}

static size_t *stmt_slot(scanner *sc)
{
    return sc->sp ? &sc->stack[sc->sp - 1].stmt_start : &sc->top_stmt;
}

static int record_loc(scanner *sc, wpk_tok word)
{
    wpk_tok open = wpk_lex_next(&sc->lx);
    size_t close;
    if (skip_group(sc, open, &close))
        return sc->failed;
    size_t start = *stmt_slot(sc);
    if (start == (size_t)-1 || !(sc->flags & WPK_SCAN_OPS))
        return 0;
    wpk_mlir_doc *d = sc->doc;
    if (!grow((void **)&d->ops, &d->capops, d->nops, sizeof *d->ops))
        return fail_nomem(sc);
    wpk_located_op *op = &d->ops[d->nops++];
    memset(op, 0, sizeof *op);
    op->op_start = start;
    op->attr_insert = word.off;
    op->loc = (wpk_span){open.off + 1, close - open.off - 1};
    op->depth = region_depth(sc);
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

static int scan_all(scanner *sc)
{
    const char *buf = sc->doc->buf;
    for (;;) {
        wpk_tok t = wpk_lex_next(&sc->lx);
        if (t.kind == WPK_TOK_EOF)
            break;
        if (t.kind == WPK_TOK_ERROR)
            return fail_at(sc, sc->lx.err_off, "%s", sc->lx.err);
        int line_first = t.off == 0 || sc->prev_end == 0 ||
                         gap_has_newline(buf, sc->prev_end, t.off);
        if (region_level(sc) && line_first && !(t.kind == WPK_TOK_PUNCT && strchr(")]}>", buf[t.off])))
            *stmt_slot(sc) = t.off;
        switch (t.kind) {
        case WPK_TOK_PUNCT: {
            char c = buf[t.off];
            if (c == '(' || c == '[' || c == '{' || c == '<') {
                if (c == '{' && sc->sp == 0 && sc->top_stmt != (size_t)-1 &&
                    starts_with(buf, (wpk_span){sc->top_stmt, t.off - sc->top_stmt}, "module"))
                    sc->doc->has_module = 1;
                if (push_bracket(sc, t))
                    return sc->failed;
            } else if (c == ')' || c == ']' || c == '}' || c == '>') {
                if (c == '>' && is_ge(&sc->lx, t, sc->sp ? sc->stack[sc->sp - 1].c : 0))
                    break;
                if (pop_bracket(sc, t))
                    return sc->failed;
            }
            break;
        }
        case WPK_TOK_META_BEGIN:
            if (sc->sp)
                return fail_at(sc, t.off, "'{-#' inside an unclosed '%c'", sc->stack[sc->sp - 1].c);
            sc->doc->meta_count++;
            if (parse_meta_dict(sc, 0, 0))
                return sc->failed;
            break;
        case WPK_TOK_META_END:
            return fail_at(sc, t.off, "'#-}' without a '{-#'");
        case WPK_TOK_HASH:
        case WPK_TOK_BANG:
            if (sc->sp == 0 && line_first && peek_is(sc, '=') && parse_alias(sc, t))
                return sc->failed;
            break;
        case WPK_TOK_BAREID:
            if (!region_level(sc))
                break;
            if (tok_is_word(sc, t, "ml_program.global")) {
                int fast = !(sc->flags & WPK_SCAN_NO_FAST) && fast_global(sc, t, 0);
                if (fast ? sc->failed : parse_ml_pretty(sc, t))
                    return sc->failed;
            } else if (tok_is_word(sc, t, "util.global")) {
                int fast = !(sc->flags & WPK_SCAN_NO_FAST) && fast_global(sc, t, 1);
                if (fast ? sc->failed : parse_util_pretty(sc, t))
                    return sc->failed;
            } else if (tok_is_word(sc, t, "loc") && peek_is(sc, '(')) {
                if (record_loc(sc, t))
                    return sc->failed;
            }
            break;
        case WPK_TOK_STRING:
            if (!region_level(sc) || !peek_is(sc, '('))
                break;
            if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"ml_program.global\"")) {
                if (parse_generic(sc, t, 0))
                    return sc->failed;
            } else if (wpk_span_is(buf, (wpk_span){t.off, t.len}, "\"util.global\"")) {
                if (parse_generic(sc, t, 1))
                    return sc->failed;
            }
            break;
        default:
            break;
        }
        sc->prev_end = sc->lx.pos;
    }
    if (sc->sp) {
        open_bracket *o = &sc->stack[sc->sp - 1];
        return fail_at(sc, o->off, "unbalanced '%c': no matching '%c' before the end of the file",
                       o->c, closer_of(o->c));
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
    scanner sc = {.doc = doc, .flags = flags, .err = errbuf, .errlen = errlen,
                  .top_stmt = (size_t)-1, .lc_line = 1};
    wpk_lex_init(&sc.lx, doc->buf, doc->len, 0);
    int rc = scan_all(&sc);
    if (!rc && doc->naliases) {
        qsort_r(doc->aliases, doc->naliases, sizeof *doc->aliases, alias_qcmp, (void *)doc->buf);
    }
    /* what the fast path did not classify (aliases are all known now) */
    for (size_t i = 0; !rc && sc.nfast < doc->nglobals && i < doc->nglobals; i++)
        if (!doc->globals[i].classified)
            rc = classify(&sc, &doc->globals[i]);
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
    while (doc->names) {
        struct wpk_name_block *next = doc->names->next;
        free_name(doc->names);
        doc->names = next;
    }
    free_globals(doc);
    free(doc->aliases);
    free(doc->resources);
    free(doc->ops);
    free(doc);
}
