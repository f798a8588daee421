/*
 * wpack_mlir.h - libwpack-mlir: resolve MLIR weight globals to archive
 * entries, externalize inline weights, annotate ops with calibration stats
 * (pkg-config wpack-mlir; needs libwpack).
 *
 * The options and result structs never change size (wpack.h, "Structs
 * never change size"): fill options with their *_options_init() call; the
 * calls refuse non-zero reserved fields (WPACK_E_INVALID_ARGUMENT, a
 * diagnostic naming the struct and the field) and set a result's to zero.
 */
#ifndef WPACK_MLIR_H
#define WPACK_MLIR_H

#include "wpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The resolver connects MLIR modules to archives: it points the weight
 * globals that compilers keep out of the IR (`ml_program.global @w
 * (#ml_program.extern : T) : T`, IREE `util.global` without a value) at
 * archive entries. It reads MLIR text with a streaming scanner and copies
 * every byte it does not rewrite through unchanged; memory does not grow
 * with inline weight bytes. The emitted forms and the wpack: URI are
 * defined in the spec, appendix B. */
/* ---------------------------------------------------------------- resolver */

/* How a resolved global refers to its entry (resolver/README.md). */
#define WPACK_EMIT_URI 0     /* keeps #ml_program.extern, adds {wpack.uri = "wpack:..."} */
#define WPACK_EMIT_IREE 1    /* value #flow.parameter.named<"scope"::"entry"> : T */
#define WPACK_EMIT_INLINE 2  /* value dense_resource<key> : T plus a resources blob */

/* An emit mode by its name ("uri", "iree", "inline", as --emit takes
 * them): its WPACK_EMIT_* value, or -1 for no mode. */
int wpack_emit_from_name(const char *name);
/* What a mode does: WPACK_EMIT_* flags below (0 for no mode). */
unsigned wpack_emit_flags(int emit);
#define WPACK_EMIT_CAN_EXTERNALIZE 1u /* wpack_externalize_file can write it */
#define WPACK_EMIT_HAS_SCOPE 2u       /* the options' scope is used */
#define WPACK_EMIT_READS_BYTES 4u     /* the output carries the entries' bytes: checked unless the
                                         archive was opened with WPACK_OPEN_NO_VERIFY_READS */

/* Severity of a resolver diagnostic. */
#define WPACK_DIAG_ERROR 0
#define WPACK_DIAG_WARNING 1
#define WPACK_DIAG_NOTE 2

/* Called once per diagnostic: message is one line, "FILE:LINE:COL: what"
 * when it concerns a place in the MLIR text, without a trailing newline;
 * the file name, symbols and entry names in it escaped (wpack_text_escape(),
 * wpack.h), so it holds no control character. Valid only during the call. */
typedef void (*wpack_diag_fn)(void *user, int severity, const char *message);

/* Output sink: write n bytes; return 0 on success, non-zero to stop. */
typedef int (*wpack_write_fn)(void *user, const void *data, size_t n);

typedef struct wpack_resolve_options {
    int emit;                      /* WPACK_EMIT_* (default URI) */
    const char *scope;             /* EMIT_IREE: the parameter scope; NULL is "model" */
    /* An explicit map global symbol -> entry name (the CLI's --map FILE.json),
     * consulted after the symbol name itself and the archive's name map. */
    const char *const *map_globals;
    const char *const *map_entries;
    size_t map_count;
    int allow_missing;             /* leave unresolved globals untouched (a warning each) */
    const char *source_name;       /* the MLIR file's name in messages; NULL is "<input>" */
    wpack_diag_fn diag;            /* NULL: diagnostics are dropped */
    void *diag_user;
    unsigned max_suggestions;      /* closest entry names per unresolved global; 0 is 3 */
    /* Calibration stats into the IR (spec appendix B, "Annotations"): each
     * module path with activation stats puts PREFIX.min/.max/.absmax (and
     * .axis for per-channel stats) on the op producing that module's output;
     * each resolved global gets its entry's weight stats the same way. */
    int annotate;
    const char *attr_prefix;       /* NULL is "wpack" */
    /* annotate: module paths of the IR's locations that differ from the
     * archive's activation keys (a wrapper's "model.0", dynamo's
     * "L['self'].0" for the archive's "0"). Each location name is tried as
     * written, with each matching strip prefix removed ("model" or "model."
     * takes "model.0" to "0"), and rewritten by the module map: the longest
     * dotted prefix of the name found in the archive's wpack.module_names
     * (spec section 9), then in module_map_ir, is replaced by its key. */
    const char *const *strip_prefixes;
    size_t strip_count;
    const char *const *module_map_ir;   /* IR module path -> */
    const char *const *module_map_keys; /* archive activation key */
    size_t module_map_count;
    /* annotate: an activation record that no op's location names, or an op
     * whose location names only module paths without activation stats, is
     * an error (WPACK_E_NOT_FOUND; the message gives a count and the first
     * few); so is a wpack.uri naming another archive (WPACK_E_NOT_FOUND).
     * Without it they are warnings / notes. */
    int strict;
    /* annotate: no op annotated with activation stats is not an error
     * (it is WPACK_E_EMPTY otherwise). */
    int allow_none;
    /* annotate: how a record is written, WPACK_ANNOTATE_* (default ATTRS). */
    int annotate_form;
    /* wpack_resolve_file: 1 = no fsync of the output or its directory (as
     * wpack_writer_options.no_sync: still renamed into place atomically,
     * but a power loss may leave it missing, empty or torn). 0: durable. */
    int no_sync;
    /* >0: the most bytes the output may have. Its size is counted before
     * anything is written (the edits, and for EMIT_INLINE each blob's
     * 2 hex digits a byte, without reading it); a larger output is refused
     * with WPACK_E_TOO_LARGE giving both figures. 0: no cap. The CLI sets
     * it from the inputs' size (README, "Security: what is capped"): a
     * small archive can hold entries of terabytes (zstd of zeros). A splat
     * entry costs a few bytes whatever its size: EMIT_INLINE writes it as
     * the splat dense<"0xFILL"> (dense<true>/dense<false> for i1), no blob. */
    uint64_t max_output;
    /* Zero (set by wpack_resolve_options_init); see the top of this file. */
    void *reserved_ptr[4];
    uint64_t reserved[4];
} wpack_resolve_options;

/* Annotation forms (spec appendix B, "Annotations"). */
#define WPACK_ANNOTATE_ATTRS 0  /* P.min/.max/.absmax = F : f32 (+ P.axis per-channel) */
#define WPACK_ANNOTATE_QUANT 1  /* P.range = !quant.calibrated<f32<MIN:MAX>>, the f64 stats
                                   exact; a record that type cannot hold (per-channel,
                                   MIN == MAX) keeps the ATTRS form */
/* A form by its name ("attrs", "quant", as --form takes them): its
 * WPACK_ANNOTATE_* value, or -1 for no form. */
int wpack_annotate_form_from_name(const char *name);

/* Defaults: URI, scope "model", no map, unresolved globals are errors, 3
 * suggestions, reserved fields zero. */
void wpack_resolve_options_init(wpack_resolve_options *opt);

typedef struct wpack_resolve_result {
    uint64_t globals;              /* weight globals seen (extern or parameter) */
    uint64_t resolved;             /* of those, pointed at an entry */
    uint64_t missing;              /* unresolved (an error unless allow_missing) */
    uint64_t unused_entries;       /* archive entries that no global uses */
    uint64_t warnings;
    uint64_t annotated_ops;        /* annotate: ops that got activation stats */
    uint64_t annotated_globals;    /* annotate: globals that got weight stats */
    uint64_t unplaced_stats;       /* annotate: activation records no op was found for */
    uint64_t unmatched_ops;        /* annotate: ops naming module paths without stats */
    uint64_t uri_reread;           /* globals whose entry came from an existing wpack.uri */
    uint64_t uri_other_archive;    /* of those, URIs naming another archive id */
    uint64_t annotated_as_attrs;   /* annotate, form QUANT: ops and globals whose stats
                                      kept the ATTRS form (per-channel, MIN == MAX) */
    void *reserved_ptr[2];         /* set to zero; see the top of this file */
    uint64_t reserved[4];
} wpack_resolve_result;

/*
 * Resolve the MLIR text mlir[0..len) against archive ar and stream the
 * result to write(). Nothing is written unless the whole module checks out:
 * every weight global maps to an entry (the entry its existing wpack.uri
 * names unless opt->map_* names one; else symbol name, then the archive's
 * name map, then opt->map_*), its tensor type matches the entry's dtype and every
 * dim, no symbol is defined twice, globals sharing an entry have one type.
 * Every problem is reported through opt->diag (all of them, not only the
 * first); the return is WPACK_OK or the first problem's code:
 * WPACK_E_INPUT (malformed MLIR, with line and column), WPACK_E_NOT_FOUND
 * (unresolved global), WPACK_E_DTYPE / WPACK_E_SHAPE (type mismatch),
 * WPACK_E_UNSUPPORTED (dynamic dims, non-tensor types, a name IREE cannot
 * print), WPACK_E_DUPLICATE (a symbol twice), WPACK_E_IO (write failed),
 * WPACK_E_EMPTY (annotate: no op annotated, unless opt->allow_none),
 * WPACK_E_TOO_LARGE (the output above opt->max_output; nothing written).
 * Error diagnostics end with their code's name ("... [WPACK_E_NOT_FOUND]").
 * Resolving the output again with the same archive and options reproduces
 * it byte for byte. res may be NULL.
 */
int wpack_resolve_buffer(const wpack_archive *ar, const char *mlir, size_t len,
                         const wpack_resolve_options *opt, wpack_write_fn write, void *user,
                         wpack_resolve_result *res);

/* The same from file to file: in_path is mapped read-only; the output goes
 * to a temporary file beside out_path that is renamed into place only on
 * success. out_path must not be in_path nor the file ar was opened from or
 * one of its shards (device and inode, wpack_file_identity: a hard link or
 * symlink counts): checked before anything is read or written, else
 * WPACK_E_SAME_FILE naming both paths and nothing is written. */
int wpack_resolve_file(const wpack_archive *ar, const char *in_path, const char *out_path,
                       const wpack_resolve_options *opt, wpack_resolve_result *res);

/*
 * Externalize: the reverse of resolve, like IREE's export-parameters pass.
 * Every ml_program.global (pretty or generic) and util.global whose initial
 * value is inline - a dense<...> literal (nested lists, a splat scalar),
 * hex dense<"0x...">, or dense_resource<KEY> with its blob in the file's
 * builtin resources - and whose tensor holds at least min_bytes bytes moves
 * into a new archive (so do torch-mlir's torch.vtensor.literal and an
 * arith, stablehlo or mhlo constant of a dense_resource<KEY>: entry KEY, a
 * torch literal of dense<...>: entry torch_literal_<XXH3-64 of its text>,
 * and an arith.constant, stablehlo.constant or mhlo.constant of dense<...>
 * (not a splat: a fill stays): entry dense_literal_<XXH3-64 of its text>;
 * a torch literal becomes torch.vtensor.external.literal(@KEY) in uri
 * mode, a constant, and in iree mode a torch literal, a load of a global
 * @KEY put before its function, @KEY_N with a note when the file has a
 * symbol @KEY already): one entry per global, named by its
 * symbol (by "module/.../symbol" for a symbol moved from several nested
 * modules), of the
 * global's element type (f16 bf16 f32 f64 i1 i8..i64 si* ui*; signless
 * integers are stored signed, i1 as bool) and shape. The IR keeps a
 * reference in the emit mode's form (spec appendix B, "Externalize").
 * Bytes stream from the mapped input through a small buffer into the
 * writer: memory does not grow with the weight bytes. A splat literal (a
 * bare scalar, hex of one element, i1 "0x00"/"0xFF" for more than 8
 * elements) becomes a splat entry: one element, whatever the tensor's size.
 * The other tensors' bytes are checked once, before anything is written,
 * against the writer options' max_data_bytes (WPACK_E_TOO_LARGE). Moved
 * blobs leave the resources section when nothing else refers to them.
 */
typedef struct wpack_externalize_options {
    int emit;                      /* WPACK_EMIT_URI (default) or WPACK_EMIT_IREE */
    const char *scope;             /* EMIT_IREE: the parameter scope; NULL is "model" */
    uint64_t min_bytes;            /* smaller tensors stay inline (default 256) */
    const wpack_writer_options *writer; /* the new archive's options; NULL: defaults.
                                         * Its no_sync also spares the MLIR output's fsyncs */
    const char *source_name;       /* the MLIR file's name in messages; NULL: in_path */
    wpack_diag_fn diag;            /* NULL: diagnostics are dropped */
    void *diag_user;
    /* Zero (set by wpack_externalize_options_init); see the top of this
     * file. The writer options' reserved fields are checked as well. */
    void *reserved_ptr[4];
    uint64_t reserved[4];
} wpack_externalize_options;

/* Defaults: URI, scope "model", min_bytes 256, default writer options,
 * reserved fields zero. */
void wpack_externalize_options_init(wpack_externalize_options *opt);

typedef struct wpack_externalize_result {
    uint64_t globals;              /* globals with an inline value seen */
    uint64_t moved;                /* of those, moved into the archive */
    uint64_t bytes_moved;          /* their tensor bytes */
    uint64_t kept;                 /* left inline: small, or a type externalize does not take */
    uint64_t resources_dropped;    /* blobs removed from the resources section */
    uint64_t warnings;
    void *reserved_ptr[2];         /* set to zero; see the top of this file */
    uint64_t reserved[4];
} wpack_externalize_result;

/*
 * Externalize in_path into out_path (MLIR) and archive_path (a new
 * archive, written first: a wpack: URI names it by its index checksum).
 * Both go to temporary files, complete and fsynced (unless the writer
 * options' no_sync) before either is
 * renamed into place (the archive first, then the MLIR): on failure both
 * paths keep what they held before (an old archive that the MLIR's failed
 * rename would have orphaned is put back from a hard link taken first;
 * where no hard link can be made, nothing is written). Returns WPACK_OK
 * or the first problem's code: WPACK_E_INPUT (malformed MLIR or literal,
 * a literal out of its type's range, a blob of the wrong size, a missing
 * resource; with line and column), WPACK_E_UNSUPPORTED (a symbol or scope
 * IREE cannot print), WPACK_E_EXISTS / WPACK_E_NAME (a symbol the archive
 * cannot take), WPACK_E_TOO_LARGE (above the writer's max_data_bytes),
 * WPACK_E_IO, WPACK_E_SAME_FILE (below). res may be NULL.
 * in_path, out_path and archive_path must be three different files
 * (device and inode: the same path, a hard link, a symlink, /proc/self/fd/N;
 * two outputs not there yet by directory and name): checked before
 * anything is read or written, else WPACK_E_SAME_FILE naming both paths and
 * nothing is written. Two names a folding file system takes for one file
 * ('Out.x', 'out.x' where case is ignored) are caught at the commit: the
 * MLIR is not renamed over the new archive, which is taken back (the old
 * file at archive_path put back), WPACK_E_SAME_FILE naming both paths.
 */
int wpack_externalize_file(const char *in_path, const char *out_path, const char *archive_path,
                           const wpack_externalize_options *opt, wpack_externalize_result *res);

/* The wpack: URI of an entry of ar ("wpack:<16 hex>/<percent-encoded name>",
 * resolver/README.md) into buf; WPACK_E_INVALID_ARGUMENT if it does not
 * fit (it needs 23 + 3 x name_len bytes at most). */
int wpack_entry_uri(const wpack_archive *ar, const char *name, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* WPACK_MLIR_H */
