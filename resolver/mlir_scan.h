/*
 * mlir_scan.h - a streaming scanner for just enough MLIR text to find the
 * weight globals of a module (ml_program.global, util.global), the
 * attribute and type aliases, the resources section and the op locations,
 * with byte offsets for every piece so that a rewriter can copy everything
 * else through byte for byte.
 *
 * The scanner never copies the input: spans point into the caller's buffer
 * (typically mmap'd), and memory grows with the number of globals, aliases,
 * resources and located ops, never with the bytes of inline weights.
 */
#ifndef WPACK_RESOLVER_MLIR_SCAN_H
#define WPACK_RESOLVER_MLIR_SCAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct wpk_span {
    size_t off, len;
} wpk_span;

#define WPK_SPAN_NONE ((wpk_span){0, 0})

/* How a global is written. */
enum {
    WPK_FORM_ML_PRETTY = 1,    /* ml_program.global private @x(...) : T */
    WPK_FORM_ML_GENERIC = 2,   /* "ml_program.global"() <{...}> : () -> () */
    WPK_FORM_UTIL_PRETTY = 3,  /* util.global private @x = ... : T */
    WPK_FORM_UTIL_GENERIC = 4  /* "util.global"() <{...}> : () -> () */
};

/* What a global's initial value is (after following an attribute alias). */
enum {
    WPK_VAL_NONE = 0,          /* no initial value */
    WPK_VAL_EXTERN = 1,        /* #ml_program.extern : T */
    WPK_VAL_PARAM = 2,         /* #flow.parameter.named<["scope"::]"key"> */
    WPK_VAL_DENSE = 3,         /* dense<...> (literal or "0x..." hex) */
    WPK_VAL_RESOURCE = 4,      /* dense_resource<key> */
    WPK_VAL_OTHER = 5          /* anything else: left alone */
};

/* One `key = value` (or bare `key`) of an attribute dictionary. */
typedef struct wpk_dict_entry {
    wpk_span key;              /* as written (may be a quoted string) */
    wpk_span value;            /* empty for a unit attribute */
} wpk_dict_entry;

typedef struct wpk_global {
    wpk_span op;               /* the whole op, op name to last token */
    wpk_span sym;              /* the symbol as written: @x, @"x.y", "x" */
    char *name;                /* the decoded symbol name (NUL-terminated; owned by the doc) */
    size_t name_len;
    wpk_span value;            /* the initial value as written (may be an alias) */
    wpk_span value_body;       /* value after following an alias */
    wpk_span value_type;       /* EXTERN, DENSE, RESOURCE: the value's own T
                                  (#ml_program.extern : T, dense<...> : T), alias followed */
    wpk_span type;             /* the global's type as written */
    wpk_span type_body;        /* type after following a type alias */
    wpk_span attrs;            /* discardable attr dict incl. braces, or len 0 */
    wpk_span props;            /* generic form: <{...}> incl. delimiters, or len 0 */
    wpk_span uri_value;        /* value of an existing wpack.uri attribute */
    size_t attrs_insert;       /* where " {attrs}" goes when there are none */
    size_t value_insert;       /* util pretty: where "= value " goes (the ':') */
    unsigned line, col;        /* of the op's first byte, 1-based */
    /* small fields last, in one word: the record is written for every
     * global (200 bytes, not 216: 100,000 globals are 20 MB of memory) */
    unsigned char form;        /* WPK_FORM_* */
    unsigned char value_kind;  /* WPK_VAL_* */
    unsigned char is_mutable;
    unsigned char classified;  /* internal: the scanner's fast path set value_kind,
                                  value_body, type_body and value_type already */
    uint32_t scope;            /* the module (symbol table) it is in: 0 the top level,
                                  else a number per module body, in file order */
} wpk_global;

/* `#name = value` or `!name = value` at the top level. */
typedef struct wpk_alias {
    wpk_span name;             /* without the # or ! */
    wpk_span value;            /* to the end of the definition */
    int is_type;
} wpk_alias;

/* One entry of the builtin dialect's resources: key: "0x<align><bytes>". */
typedef struct wpk_resource {
    wpk_span key;
    wpk_span blob;             /* the hex digits after 0x (even count, >= 8) */
    uint32_t alignment;
} wpk_resource;

/* An op that carries a trailing location, for --annotate. */
typedef struct wpk_located_op {
    size_t op_start;           /* first byte of the statement (the result or op name) */
    size_t attr_insert;        /* where " {attrs}" goes: before the ':' of its type,
                                  or before loc( for ops without a trailing type */
    wpk_span attrs;            /* its discardable attr dict if any (len 0 if none) */
    wpk_span loc;              /* the inside of loc(...) */
    unsigned depth;            /* regions below the innermost module body (`module`,
                                  `builtin.module`, generic "builtin.module") or,
                                  outside any, the top level: 1 = a function body */
} wpk_located_op;

/* A module body (a symbol table): wpk_global.scope N is modules[N-1]. */
typedef struct wpk_module {
    uint32_t parent;           /* the scope it is in (0: the top level) */
    wpk_span sym;              /* its @name as written (pretty `module @a`), or len 0 */
} wpk_module;

/* A torch-mlir `torch.vtensor.literal` op or a constant op (`arith.constant`,
 * `stablehlo.constant`, `mhlo.constant`; region level): its op name token,
 * pretty `torch.vtensor.literal(...)` / `arith.constant ...` or generic
 * `"torch.vtensor.literal"(` / `"arith.constant"(`. externalize reads the
 * rest (extern_torch.c). */
enum { WPK_OP_TORCH = 0, WPK_OP_ARITH, WPK_OP_STABLEHLO, WPK_OP_MHLO };
typedef struct wpk_torch_op {
    wpk_span name;
    size_t stmt;               /* its own statement's start (its result) */
    size_t top_stmt;           /* the statement around it in its module body (or
                                  the top level): where a hoisted global goes */
    uint32_t scope;            /* its module, as wpk_global.scope */
    unsigned char generic;
    unsigned char arith;       /* a constant op (its value is hoisted to a global) */
    unsigned char kind;        /* WPK_OP_* */
} wpk_torch_op;

typedef struct wpk_mlir_doc {
    const char *buf;
    size_t len;
    wpk_global *globals;
    size_t nglobals, capglobals;
    size_t globals_map_bytes;  /* internal: globals is a mapping of this size (0: heap) */
    size_t globals_fresh;      /* internal: mapped slots from here on were never written */
    wpk_alias *aliases;        /* sorted by (is_type, name) after the scan */
    size_t naliases, capaliases;
    wpk_resource *resources;
    size_t nresources, capresources;
    wpk_located_op *ops;       /* only when WPK_SCAN_OPS was asked for */
    size_t nops, capops;
    wpk_torch_op *torch_ops;   /* torch.vtensor.literal and constant ops, in file order */
    size_t ntorch_ops, captorch_ops;
    wpk_module *modules;       /* every module body, in file order */
    size_t nmodules, capmodules;
    size_t meta_count;         /* {-# ... #-} sections seen */
    struct wpk_name_block *names; /* where the globals' names live (freed with the doc) */
    size_t name_blocks;        /* internal: how many blocks names has had */
} wpk_mlir_doc;

/* Flags for wpk_mlir_scan_buffer(). */
#define WPK_SCAN_OPS 1u        /* also record located ops (for --annotate) */
#define WPK_SCAN_NO_FAST 2u    /* general parser only, no one-line fast path for
                                  simple globals (tests compare the two) */

/*
 * Scan an MLIR text buffer. On success returns 0 and *out holds the
 * document (free with wpk_mlir_doc_free). On malformed input returns
 * WPACK_E_INPUT and writes "LINE:COL: what" to errbuf; on allocation
 * failure WPACK_E_NOMEM. *out is NULL on failure. buf needs no NUL.
 * Doubles as the fuzz entry point.
 */
int wpk_mlir_scan_buffer(const char *buf, size_t len, unsigned flags, wpk_mlir_doc **out,
                         char *errbuf, size_t errlen);
void wpk_mlir_doc_free(wpk_mlir_doc *doc);

/* The alias named by `ref` (a #name or !name token), or NULL. */
const wpk_alias *wpk_mlir_find_alias(const wpk_mlir_doc *doc, wpk_span ref);

/* 1-based line and column of a byte offset (O(offset)). */
void wpk_mlir_line_col(const char *buf, size_t len, size_t off, unsigned *line, unsigned *col);

/* The same for many offsets: a cursor counts the newlines from where its
 * last call stopped, so offsets in increasing order cost O(the bytes
 * between them) in all (an offset before the last starts again from the
 * beginning). Messages about thousands of ops or globals need it: one
 * wpk_mlir_line_col each would read the file once per message. */
typedef struct wpk_line_cursor {
    size_t pos;                /* newlines before pos are counted */
    size_t line_start;         /* the start of the line pos is on */
    unsigned line;
} wpk_line_cursor;
#define WPK_LINE_CURSOR_INIT {0, 0, 1}
void wpk_line_cursor_at(wpk_line_cursor *c, const char *buf, size_t len, size_t off,
                        unsigned *line, unsigned *col);

/* Decode an MLIR string literal (with quotes) into a heap NUL-terminated
 * string; *n receives its length. NULL on allocation failure. */
char *wpk_mlir_decode_string(const char *s, size_t len, size_t *n);

/* Parse an attribute dictionary {a = 1, "b", c = {...}} starting at `open`
 * (the '{'). Fills up to max entries (returns the total count in *count),
 * and sets *close to the offset of the matching '}'. 0 ok, -1 malformed. */
int wpk_mlir_parse_dict(const char *buf, size_t len, size_t open, wpk_dict_entry *entries,
                        size_t max, size_t *count, size_t *close);

/* Zeroed memory for large per-document tables (names, the plan, hash
 * tables, output buffer): from 256 KiB on an anonymous mapping in 2 MiB
 * steps advised to use transparent huge pages (a page fault per 2 MiB
 * instead of per 4 KiB, which is what such tables cost on bench/resolver's
 * 100,000 globals), below that calloc. Free with wpk_big_free and the same
 * size. NULL on failure. */
void *wpk_big_calloc(size_t bytes);
void wpk_big_free(void *p, size_t bytes);

/* Does span s hold exactly the bytes of the C string w? */
int wpk_span_is(const char *buf, wpk_span s, const char *w);

/* Byte order of a[0..an) and b[0..bn) (a prefix first), as memcmp: <0, 0, >0. */
int wpk_bytes_cmp(const char *a, size_t an, const char *b, size_t bn);

#endif
