/*
 * resolve_int.h - what resolve.c, emit.c and externalize.c share: the plan
 * (which global gets which entry) and the rewriter that applies it.
 */
#ifndef WPACK_RESOLVER_RESOLVE_INT_H
#define WPACK_RESOLVER_RESOLVE_INT_H

#include <stdio.h>

#include "atomic_file.h"
#include "mlir_scan.h"
#include "mlir_type.h"
#include "wpack.h"
#include "wpack_mlir.h"

typedef struct wpk_plan_item {
    size_t global;              /* index in doc->globals */
    uint64_t entry;             /* tensor index in the archive */
    const char *entry_name;     /* points into the archive */
    const char *key;            /* inline: its resource key (owned by the emitter) */
    const char *attr_text;      /* annotate: "P.min = ..., ..." for its dict, or NULL */
} wpk_plan_item;

/* A growing NUL-terminated string (failed set when memory ran out). */
typedef struct wpk_strbuf {
    char *p;
    size_t n, cap;
    int failed;
} wpk_strbuf;
void wpk_sb_put(wpk_strbuf *a, const char *s, size_t n);
/* Room for n more bytes (and a NUL) at a->p + a->n, or NULL (failed set);
 * the caller writes there and adds what it wrote to a->n. */
char *wpk_sb_reserve(wpk_strbuf *a, size_t n);
void wpk_sb_puts(wpk_strbuf *a, const char *s);

/* One replacement of input bytes [off, off+len) by text (len 0: insertion). */
typedef struct wpk_patch {
    size_t off, len;
    const char *text;
    size_t text_len;
} wpk_patch;

/*
 * Our attributes `ours` (text "k = v, ...") into an attribute dictionary:
 * with dict.len 0 a new "LEAD{ours}TRAIL" goes at insert_at; otherwise the
 * dict is rewritten as {ours, <its other entries>}, dropping the entries we
 * own (wpack.uri when uri, PREFIX.min/.max/.absmax/.axis when prefix) so
 * that a second run gives the same bytes. The replacement goes to out and
 * the replaced range to *edit_off and *edit_len. 0, WPACK_E_INPUT (dict
 * unreadable) or WPACK_E_NOMEM.
 */
int wpk_attr_merge(const char *buf, size_t len, wpk_span dict, size_t insert_at, const char *lead,
                   const char *trail, const char *ours, size_t ours_len, const char *prefix,
                   int uri, wpk_strbuf *out, size_t *edit_off, size_t *edit_len);

/* "P.min = -1.5 : f32, P.max = ..., P.absmax = ..." for a stats record
 * (per-channel: "P.axis = A : i64, P.min = dense<[...]> : tensor<Cxf32>, ...");
 * with form WPACK_ANNOTATE_QUANT "P.range = !quant.calibrated<f32<MIN:MAX>>"
 * unless wpk_stats_quant_unfit says why that type cannot hold the record. */
void wpk_stats_attr_text(wpk_strbuf *a, const wpack_stats *st, const char *prefix, int form);
/* NULL when !quant.calibrated can hold st's range, else why not
 * ("per-channel", "min == max", "not finite"). */
const char *wpk_stats_quant_unfit(const wpack_stats *st);

/* Names a location names (annotate_loc.c): every NameLoc string inside
 * loc(...) through #loc aliases, fused[...] and callsite(... at ...), and
 * the module paths of a torch_xla JSON name's nn_module_stack. fn gets
 * each name (not NUL-terminated); returns how many. One walk serves all
 * the ops of a document: a location alias is read once per call (its
 * names again would change nothing; `#l2 = loc(fused[#l1, #l1])` nested
 * 30 deep was 2^30 reads), and at most max_alias_bytes of alias text
 * over all calls (16 x the document's bytes, at least 2^24: ops that each
 * reach a long chain of aliases, or one long alias, are ops x aliases),
 * past which it reads no more and sets over. */
typedef void (*wpk_name_fn)(void *user, const char *name, size_t n);
typedef struct wpk_loc_walk {
    const wpk_mlir_doc *doc;
    uint32_t *seen;             /* per alias: the stamp of the call that read it */
    uint32_t stamp;
    uint64_t alias_bytes, max_alias_bytes; /* alias text read, and its bound */
    int over;
} wpk_loc_walk;
int wpk_loc_walk_init(wpk_loc_walk *w, const wpk_mlir_doc *doc); /* 0 or WPACK_E_NOMEM */
void wpk_loc_walk_free(wpk_loc_walk *w);
size_t wpk_loc_names(wpk_loc_walk *w, wpk_span loc_inner, wpk_name_fn fn, void *user);

/* Diagnostics with counts; the first error's code is kept. */
typedef struct wpk_diag {
    wpack_diag_fn fn;
    void *user;
    const char *source;
    int first_error;
    uint64_t errors, warnings;
} wpk_diag;

void wpk_diag_emit(wpk_diag *d, int severity, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* --annotate: find the ops that produce each module's output (annotate.c)
 * and make their attribute patches (text kept in *text). Weight stats of the
 * plan's entries go to items[i].attr_text. Counts into res. */
int wpk_annotate_plan(const wpack_archive *ar, const wpk_mlir_doc *doc,
                      const wpack_resolve_options *opt, const char *prefix, wpk_diag *d,
                      wpk_plan_item *items, size_t nitems, wpk_strbuf *text,
                      wpk_patch **patches, size_t *npatches, wpack_resolve_result *res);

/* "src:L:C: global @name" for messages. */
void wpk_global_where(char *buf, size_t len, const wpk_diag *d, const wpk_global *g);

/* Percent-encode an entry name for a wpack: URI: ALPHA DIGIT - . _ ~ stay,
 * every other byte becomes %XX (upper case). Returns the length written
 * (always < len) or 0 if it does not fit. */
size_t wpk_uri_encode(const char *name, size_t n, char *buf, size_t len);
/* The same encoding of name[0..n) at d, which has room for 3 * n bytes
 * (no NUL written); returns the end. */
char *wpk_uri_put(char *d, const char *name, size_t n);

/* Up to k entry names closest to name by edit distance (ties by name
 * order) into out[] (indexes); returns how many. *budget: the edit-distance
 * cells left to spend (wpk_suggest_budget), charged here; a scan that would
 * pass it gives none, and so does every later one. */
size_t wpk_closest_entries(const wpack_archive *ar, const char *name, uint64_t *out, size_t k,
                           uint64_t *budget);
/* The cells all of one run's suggestions may cost: linear in the archive. */
uint64_t wpk_suggest_budget(const wpack_archive *ar);

typedef struct wpk_emitter {
    const wpk_mlir_doc *doc;
    const wpack_archive *ar;
    int emit;                   /* WPACK_EMIT_* */
    const char *scope;
    wpk_plan_item *items;       /* in file order */
    size_t nitems;
    wpack_write_fn write;
    void *user;
    /* extra edits (externalize: dropped resources; annotate: op attributes),
     * disjoint from each other and from the globals' edits */
    const wpk_patch *patches;
    size_t npatches;
    /* externalize: the value of a moved global becomes #ml_program.extern
     * (uri) or the parameter (iree) */
    int replace_with_extern;
    /* annotate: the prefix of the stats attributes (items' attr_text) */
    const char *attr_prefix;
    /* >0: the most bytes the output may have; the emitter counts them
     * first (a dry run: edits, input runs and blob sizes added up) and
     * refuses a larger output with WPACK_E_TOO_LARGE before writing */
    uint64_t max_output;
    /* optional: copy input bytes [off, off+n) to the output without going
     * through user space (copy_file_range); 0 ok, non-zero: use write */
    int (*copy_input)(void *user, size_t off, size_t n);
    /* optional: describe a failed write or copy (path, errno) into err */
    void (*write_error)(void *user, char *err, size_t errlen);
    /* set by wpk_emit_document: "\"wpack:<index checksum>/" and the
     * row of emit in the table of modes */
    char uri_head[32];
    const struct wpk_emit_mode *mode;
} wpk_emitter;

/* ------------------------------------------------------------ emit modes */

struct wpk_out;
struct wpk_emitter;

/* What each WPACK_EMIT_* mode does (emit_modes.c). resolve, externalize,
 * the emitter and the CLI (through wpack_emit_from_name/_flags) consult
 * this table, never the mode's number: a new mode is one row. */
typedef struct wpk_emit_mode {
    int emit;                   /* WPACK_EMIT_* */
    const char *name;           /* --emit NAME */
    unsigned flags;             /* WPACK_EMIT_CAN_EXTERNALIZE, _HAS_SCOPE, _READS_BYTES */
    /* 1: the reference is the global's initial value (iree, inline);
     * 0: it is the wpack.uri attribute, the value stays (or, for
     * externalize, becomes) #ml_program.extern (uri) */
    int edits_value;
    /* entry names and the scope are printed unescaped by this printer
     * ("IREE"), so a '"' or '\' in them is refused; NULL: escaped */
    const char *unescaped_printer;
    /* the initial value that refers to the item's entry, without its type */
    void (*put_value)(wpk_strbuf *a, const struct wpk_emitter *e, const wpk_plan_item *it);
    /* the emitter's fast path for the usual edit (emit.c, plain_edit):
     * the text every edit starts with into text (cap bytes), returning its
     * length (0: no fast path); then the rest from the entry name (n bytes)
     * on, written at d (room for 3 n + 2 + 3 + the type), returning the end */
    size_t (*plain_head)(const struct wpk_emitter *e, char *text, size_t cap);
    char *(*plain_rest)(char *d, const struct wpk_emitter *e, const wpk_global *g, const char *name,
                        size_t n);
    /* before and after the document (NULL: nothing): prepare may set
     * items' keys and a state that append (after the last input byte) and
     * release get */
    int (*prepare)(struct wpk_emitter *e, void **state);
    void (*append)(struct wpk_out *o, void *state);
    void (*release)(void *state);
} wpk_emit_mode;

/* The row of WPACK_EMIT_* emit, or NULL for no mode. */
const wpk_emit_mode *wpk_emit_mode_of(int emit);
/* Does s hold a '"' or '\' (which a printer of unescaped names cannot take)? */
int wpk_name_needs_escape(const char *s);

/* externalize: a torch.vtensor.literal op or a constant op (extern_torch.c) */
typedef struct wpk_torch_lit {
    wpk_span op;                /* its op name token */
    wpk_span value;             /* dense_resource<KEY> : T */
    wpk_span type;              /* T */
    wpk_span replace;           /* pretty: op name to ')'; generic: the op name */
    wpk_span entry;             /* generic: the `value = ...` dictionary entry */
    wpk_span attrs;             /* the discardable dictionary, or len 0 */
    size_t attrs_insert;        /* where " {...}" goes when there is none */
    int generic, in_attrs;      /* in_attrs: generic, the value in that dictionary */
    int dense;                  /* torch: the value is dense<...> : T, not a resource */
    int arith;                  /* an arith.constant (its value hoisted to a global) */
    size_t stmt;                /* the op's statement (its result) */
    size_t colon;               /* torch: the ':' of its trailing type, or 0 */
    size_t fn_open;             /* torch generic: the '(' of `: () -> R`, or 0 */
    size_t top_stmt;            /* where a hoisted global goes */
    uint32_t scope;             /* arith: its module (wpk_global.scope) */
    int kind;                   /* WPK_OP_* */
    wpk_span result;            /* generic: R of `: () -> R` when R is a builtin
                                   tensor<...>; len 0: another type, or none read */
} wpk_torch_lit;
/* 1 when op is a torch.vtensor.literal of a dense_resource or dense<...>,
 * or a constant op of one (l filled; stablehlo and mhlo constants of
 * dense<...> only), 0 when not (another value, or a form not read: left
 * as it is). */
int wpk_torch_lit_parse(const char *buf, size_t len, const wpk_torch_op *op, wpk_torch_lit *l);
/* The edits turning l into torch.vtensor.external.literal(@KEY) (with
 * wpack.uri = "uri" unless uri is NULL): up to 3 patches into out, their
 * texts (heap, to free) into texts[0..3). 0 or WPACK_E_NOMEM. */
/* A hoisted global's entry KEY and its symbol SYM (KEY unless the file
 * has a symbol of that name already). */
typedef struct wpk_hoist_name {
    const char *key;
    size_t key_len;
    const char *sym;
    size_t sym_len;
} wpk_hoist_name;
/* The edits turning an arith.constant l into `ml_program.global_load_const
 * @SYM` and, when hoist, putting `ml_program.global private @SYM(VALUE) : T`
 * before its module-level op: VALUE `#ml_program.extern : T` with
 * {wpack.uri = "uri"} (uri not NULL), else #flow.parameter.named<"scope"::"KEY">.
 * Up to 3 patches and texts, as wpk_torch_lit_patches. */
int wpk_const_patches(const char *buf, size_t len, const wpk_torch_lit *l, const wpk_hoist_name *hn,
                      const char *uri, const char *scope, int hoist, wpk_patch *out, size_t *np,
                      char **texts);
/* --emit iree: the edits turning torch literal l into a load of the
 * hoisted global @SYM (put there when hoist, as wpk_const_patches) and
 * `torch_c.from_builtin_tensor`, the form IREE's torch input takes for a
 * parameter (its torch-to-iree pipeline does not lower
 * torch.vtensor.external.literal); the load's value is %<ssa>. Up to 3
 * patches and texts. 0, WPACK_E_NOMEM, or WPACK_E_UNSUPPORTED (a form
 * not read). */
int wpk_torch_param_patches(const char *buf, size_t len, const wpk_torch_lit *l,
                            const wpk_hoist_name *hn, const char *scope, int hoist, const char *ssa,
                            wpk_patch *out, size_t *np, char **texts);
int wpk_torch_lit_patches(const char *buf, size_t len, const wpk_torch_lit *l, const char *key,
                          size_t key_len, const char *uri, wpk_patch *out, size_t *np,
                          char **texts);

/* externalize: the entry names of the moved globals doc->globals[globals[i]]
 * (extern_names.c): names[i] NULL for the symbol itself, else a heap
 * "module/.../symbol" for a symbol moved from several modules; name_lens[i]
 * the length either way. 0, or an error code after its diagnostics. */
int wpk_extern_names(const wpk_mlir_doc *doc, const size_t *globals, size_t n, char **names,
                     size_t *name_lens, wpk_diag *d);

/* Map each weight global of doc to an entry and check it (resolve.c). On
 * success *items is the plan in file order (wpk_plan_free with the same doc). */
int wpk_resolve_plan(const wpack_archive *ar, const wpk_mlir_doc *doc,
                     const wpack_resolve_options *opt, wpk_diag *d, wpk_plan_item **items,
                     size_t *nitems, wpack_resolve_result *res);
void wpk_plan_free(wpk_plan_item *items, const wpk_mlir_doc *doc);

/* wpack_resolve_buffer() with an optional input-copy shortcut and an
 * optional describer of write failures (see wpk_emitter). */
int wpk_resolve_run(const wpack_archive *ar, const char *mlir, size_t len,
                    const wpack_resolve_options *opt, wpack_write_fn write,
                    int (*copy_input)(void *, size_t, size_t),
                    void (*write_error)(void *, char *, size_t), void *user,
                    wpack_resolve_result *res);

/* Write the document with the plan applied. 0 or a wpack_error; message in err. */
int wpk_emit_document(wpk_emitter *e, char *err, size_t errlen);

/* Output through a file descriptor with a buffer (for the *_file calls). */
typedef struct wpk_fd_sink {
    int fd;
    int in_fd;                  /* the input, for wpk_fd_sink_copy (-1: none) */
    int failed;
    int err;                    /* errno of the failed write (0: none known) */
    const char *path;           /* the output's name, for messages */
    size_t used;
    char buf[1 << 20];
} wpk_fd_sink;
/* A sink on fd for the output path (in_fd: the input, or -1). */
void wpk_fd_sink_init(wpk_fd_sink *s, int fd, int in_fd, const char *path);
int wpk_fd_sink_write(void *user, const void *data, size_t n);
/* "PATH: writing failed: <strerror>" (a wpk_emitter write_error). */
void wpk_fd_sink_describe(void *user, char *err, size_t errlen);
int wpk_fd_sink_flush(wpk_fd_sink *s);
/* Copy input bytes with copy_file_range (after flushing); non-zero when
 * the kernel cannot, so the caller writes them instead. */
int wpk_fd_sink_copy(void *user, size_t off, size_t n);

/* externalize: put the prepared archive w (wpack_writer_prepare) and the
 * finished MLIR temporary out in place together (output_commit.c): on any
 * failure both paths keep what they held before (message in err). w and out
 * are released whatever the result. */
int wpk_commit_outputs(wpack_writer *w, const char *archive_path, wpk_atomic *out,
                       const char *out_path, char *err, size_t errlen);

/* Map a file read-only (a 0-byte file maps to an empty buffer). With fd
 * not NULL the descriptor stays open in *fd (close it yourself). */
int wpk_rsv_map_file(const char *path, const char **buf, size_t *len, int *fd, char *err,
                     size_t errlen);
void wpk_rsv_unmap_file(const char *buf, size_t len);

#endif
