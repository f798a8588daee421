/*
 * wpack_import.h - libwpack-import: other formats into wpack archives, and
 * archives back out (pkg-config wpack-import; needs libwpack and wpack.h).
 *
 * In (recognised by content, not by name; import/README.md has the rules of
 * each): .npy files and directories of them, torch.save checkpoints (zip
 * format, read without running any pickle code), safetensors files and
 * Hugging Face sharded safetensors (their model.safetensors.index.json),
 * .npz / zip / tar / tar.gz / tar.zst / tar.xz / tar.bz2 bundles of .npy, raw
 * binaries described by a JSON manifest, GGUF v2/v3, IREE .irpa parameter
 * archives, and calibration statistics (wpack JSON, TensorRT caches, ONNX
 * Runtime tables, llama.cpp imatrix files, torch.ao observers).
 * Out: safetensors, npz, tar, GGUF, .irpa, and the activation stats as a
 * TensorRT cache or an ONNX Runtime table. `wpack create` and `wpack export` are argument
 * parsing over these calls: the same inputs and options give the same bytes.
 *
 * Turning a checkpoint into an archive:
 *
 *     wpack_writer *w;
 *     char err[1024];
 *     if (wpack_writer_open(&w, "m.wpack", NULL) != WPACK_OK) ...
 *     wpack_import_options o;
 *     wpack_import_options_init(&o);
 *     o.err = err;
 *     o.err_size = sizeof err;
 *     if (wpack_import_file(w, "model.pt", &o) != WPACK_OK) {
 *         fprintf(stderr, "%s\n", err);        // "model.pt: ..." (what and where)
 *         wpack_writer_abort(w);
 *     } else if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK) ...
 *
 * Several inputs go into one writer either by calling wpack_import_file once
 * for each, or through an importer (wpack_import_open/add/close), which
 * also remembers which input produced each name, so that a name two inputs
 * both produce is reported as "b.pt: tensor 'x' is already taken by a.pt".
 *
 * Errors: calls return WPACK_OK or a wpack_error code; the message says what
 * and where (it starts with the input's path) and goes to the options' err
 * buffer and, for an importer, to wpack_import_errmsg(). Messages and
 * warnings show the paths, member names and keys they quote escaped
 * (wpack_text_escape(), wpack.h): no control character reaches a terminal
 * or a log through them. A failed import
 * may have added some of the input's entries, or left the writer inside a
 * tensor: abort the writer (wpack_writer_abort) unless you know better.
 * Input errors found while checking (every importer but the streaming
 * bundles and .npy directories checks its whole input before writing)
 * leave the writer as it was.
 *
 * The library reads no environment variable and starts no thread; memory
 * stays bounded by the inputs' structure, not their tensor bytes (see
 * import/README.md for the limits of each format).
 *
 * Options structs never change size (wpack.h, "Structs never change
 * size"): new fields take the place of reserved ones, and their zero value
 * keeps the old behaviour. Always fill a struct with its *_options_init()
 * call before setting fields; the calls refuse a struct whose reserved
 * fields are not zero (WPACK_E_INVALID_ARGUMENT, the message naming the
 * struct and the field).
 */
#ifndef WPACK_IMPORT_H
#define WPACK_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ input kinds */

/* What an input is, by its content (wpack_import_detect). */
#define WPACK_INPUT_UNKNOWN 0
#define WPACK_INPUT_NPY 1          /* "\x93NUMPY" (or a broken file named *.npy) */
#define WPACK_INPUT_TORCH 2        /* torch.save zip (torch >= 1.6): <dir>/data.pkl */
#define WPACK_INPUT_TORCH_LEGACY 3 /* torch.save before 1.6: refused, with advice */
#define WPACK_INPUT_SAFETENSORS 4  /* u64 header length, then '{' */
#define WPACK_INPUT_ZIP 5          /* any other zip: .npz, a zip of .npy */
#define WPACK_INPUT_TAR 6          /* tar, or gzip / zstd / xz / bzip2 of one */
#define WPACK_INPUT_MANIFEST 7     /* JSON: a manifest of raw binaries, or a HF safetensors index */
#define WPACK_INPUT_DIRECTORY 8    /* a directory: its .npy files, walked */
#define WPACK_INPUT_GGUF 9         /* "GGUF" v2 / v3 (llama.cpp) */
#define WPACK_INPUT_IRPA 10        /* an IREE parameter archive ("IRPA") */

/* What the file (or directory) at path is: one of WPACK_INPUT_*. On
 * WPACK_INPUT_UNKNOWN, err (may be NULL) says why ("PATH: not a recognised
 * input (...)", "PATH: No such file or directory", "PATH: a FIFO, not a
 * regular file or a directory"). Opens the file without blocking (a FIFO is
 * refused, never opened for reading) and reads its first 4 KiB (and, for a
 * zip, its central directory). */
int wpack_import_detect(const char *path, char *err, size_t errlen);
/* "npy", "torch", "torch-legacy", "safetensors", "zip", "tar", "manifest",
 * "directory", "gguf", "irpa"; "unknown" for anything else. */
const char *wpack_import_kind_name(int kind);

/* ---------------------------------------------------------------- options */

/* Input bytes of the current input done so far (about every 4 MiB, and at
 * the end of each tensor). */
typedef void (*wpack_import_progress_fn)(void *user, uint64_t bytes_done);
/* Something of the input left out: an unsupported checkpoint scalar, a
 * non-.npy file in a directory ("skipping PATH: not a .npy file"). One
 * line, without a newline; valid only during the call. */
typedef void (*wpack_import_warn_fn)(void *user, const char *message);

typedef struct wpack_import_options {
    /* Names: NULL or "" keeps the input's names; else every tensor name and
     * metadata key of the input becomes PREFIX.name (a module path). */
    const char *prefix;
    /* torch: keep only this sub-dict of the checkpoint (dotted path, e.g.
     * "model" for {'model': ..., 'epoch': 3}); NULL: everything. */
    const char *key;
    /* A .npy input: its tensor name (before the prefix). NULL: the file
     * name without ".npy" (a .npy file not named NAME.npy is then refused).
     * Other kinds ignore it. */
    const char *name;
    /* 0 keeps every dtype; WPACK_DTYPE_BF16 or WPACK_DTYPE_F16 stores float
     * tensors (f64, f32, f16, bf16, f8) in that dtype, rounded to nearest,
     * ties to even (overflow gives infinity, NaN stays a quiet NaN). Plain
     * .npy inputs with a cast must be C order. Anything else:
     * WPACK_E_INVALID_ARGUMENT. */
    int cast;
    /* With cast: only tensors whose final (prefixed) name matches one of
     * these fnmatch(3) globs are cast; only_count 0: every float tensor. */
    const char *const *only;
    size_t only_count;
    /* 1 (default): a cast tensor gets the weight statistics of its values
     * before the cast (they replace the writer's). Set it to the writer's
     * own wpack_writer_options.weight_stats. */
    int weight_stats;
    /* 0 (default): a symbolic link among the files an input names (the
     * entries of a directory, a manifest's data files, safetensors shards)
     * is refused with WPACK_E_FILE_TYPE, as it may lead out of the input's
     * directory; 1 follows them. The path given to the call itself may
     * always be a link. FIFOs and devices are always refused. */
    int follow_links;
    /* Bundles (.npz, zip, tar...): past the first 64 MiB out of a member, at
     * most max_ratio bytes out per compressed byte read (0: 200), and at
     * most max_total bytes out of one bundle (0: 1 TiB). WPACK_E_LIMIT. */
    uint32_t max_ratio;
    uint64_t max_total;
    /* After the input (path may then be NULL: nothing else is imported):
     * calibration statistics from this JSON file (schema version 1,
     * import/README.md) or, by content, a TensorRT calibration cache, an ONNX
     * Runtime calibration table (JSON) or a llama.cpp imatrix (.dat or GGUF),
     * as spec appendix A.1 says; a record replaces the automatic weight statistics
     * of its key, and a bad one fails naming "stats[i] 'key'"; a file
     * that gives no record fails too (WPACK_E_STATS, "holds no entries"). */
    const char *stats_file;
    /* After the input and stats_file: name_map_count pairs, other name ->
     * entry, as wpack_writer_add_name (an entry may be a module path with
     * activation stats only). */
    const char *const *name_map_other;
    const char *const *name_map_entry;
    size_t name_map_count;
    /* Progress and warnings (each NULL: none). */
    wpack_import_progress_fn progress;
    void *progress_user;
    wpack_import_warn_fn warn;
    void *warn_user;
    /* Where a failure's message goes (NULL: nowhere; always NUL-terminated,
     * cut to err_size). */
    char *err;
    size_t err_size;
    /* Where a Fortran-order .npy member of a bundle is spilled (an unlinked
     * temporary file) to be transposed: NULL or "" is "/tmp". The CLI
     * passes $TMPDIR. */
    const char *temp_dir;
    /* Non-NULL: with cast, the statistics of the values before the cast are
     * computed on this executor (wpack.h), the same bits as without it; the
     * writer's own work goes on its wpack_writer_options.executor (pass the
     * same). It must stay valid for the call. NULL (default): one thread. */
    const wpack_executor *executor;
    /* A .npy path that wpack_import_list listed under a directory input:
     * that directory (as given to the listing). The file is then opened
     * relative to it one component at a time, no symbolic link followed
     * unless follow_links, so a directory swapped for a link between the
     * listing and the import cannot take the import out of the tree
     * (WPACK_E_FILE_TYPE); a path not under it is WPACK_E_INVALID_ARGUMENT.
     * wpack_import_file and wpack_import_add of a directory set it
     * themselves. NULL (default): the path is opened as given. */
    const char *within;
    /* Zero (set by wpack_import_options_init); see "Options structs" above. */
    void *reserved_ptr[2];
    uint64_t reserved[2];
    /* The two fields below take the place of a third reserved u64. */
    /* 0 (default): the buffers of torch.ao observers and fake-quants in a
     * torch checkpoint (`M.activation_post_process.min_val`, ...) become
     * activation stats of module M (spec appendix A.1) and are not stored
     * as tensors; 1: the stats, and the buffers as tensors too
     * (`create --keep-observers`). */
    int keep_observers;
    /* 1: with cast, the statistics of the values before the cast on the
     * portable C path (the same bits, slower), as the writer's
     * wpack_writer_options.portable_stats does for its own (pass the same;
     * the CLI sets both under WPACK_ISA=scalar). 0 (default): SIMD where
     * the CPU has it. */
    int portable_stats;
} wpack_import_options;

/* The defaults: no prefix, key or name, no cast, weight_stats 1,
 * follow_links 0, max_ratio 200, max_total 1 TiB, nothing after the input,
 * no callbacks, no error buffer, temp_dir NULL, reserved fields zero. */
void wpack_import_options_init(wpack_import_options *opt);

/* ------------------------------------------------------------- importing */

/* Import the input at path (a file of any kind above, or a directory of
 * .npy files) into w, detecting its kind by content exactly like `wpack
 * create`. opt NULL: the defaults. A directory with no .npy adds nothing
 * and is not an error (wpack_writer_count says how many entries the
 * writer has). Nested dicts become dotted names, scalars metadata, a
 * tensor saved twice (tied weights) an alias, a torch view whose strides
 * are all 0 a splat entry. WPACK_E_EXISTS when a name is already in w.
 * The writer's max_data_bytes caps what the input may add
 * (WPACK_E_TOO_LARGE, checked for a whole checkpoint before its first
 * tensor when there is no cast). */
int wpack_import_file(wpack_writer *w, const char *path, const wpack_import_options *opt);

/* An importer: several inputs into one writer, remembering which input
 * produced each name (for the duplicate message). The writer must outlive
 * it; closing it leaves the writer as it is. */
typedef struct wpack_importer wpack_importer;
/* WPACK_OK, WPACK_E_INVALID_ARGUMENT (w NULL) or WPACK_E_NOMEM (*out NULL). */
int wpack_import_open(wpack_importer **out, wpack_writer *w);
/* wpack_import_file through the importer. path may be NULL (stats_file and
 * the name map only). */
int wpack_import_add(wpack_importer *imp, const char *path, const wpack_import_options *opt);
/* The message of the last failed call ("" when none). */
const char *wpack_import_errmsg(const wpack_importer *imp);
/* Free the importer (NULL is a no-op). */
void wpack_import_close(wpack_importer *imp);

/* One file an input consists of (wpack_import_list). */
typedef struct wpack_import_item {
    const char *path;   /* the file: the input itself, or a .npy under an input directory */
    const char *name;   /* .npy: its tensor name before any prefix (a directory's
                         * enc/layers/0/w.npy is "enc.layers.0.w"); NULL otherwise */
    int kind;           /* WPACK_INPUT_* (never DIRECTORY or UNKNOWN) */
    uint64_t bytes;     /* the input bytes it brings: its size, plus for a JSON manifest or
                         * safetensors index the size of each distinct file it names */
} wpack_import_item;
/* Return WPACK_OK to go on; anything else stops the listing and is returned. */
typedef int (*wpack_import_item_fn)(void *user, const wpack_import_item *item);

/* The files input path consists of, without importing anything: itself,
 * or for a directory its .npy files in bytewise name order, depth first
 * (hidden entries skipped, other files and non-regular .npy entries
 * skipped with a warning through opt->warn, symlinks refused unless
 * opt->follow_links, at most 64 levels deep). What `wpack create` walks
 * before writing: its output cap (bytes) and its same-file guard (path).
 * Importing each item with opt->name = item->name imports the input.
 * Errors as for wpack_import_file, the message in opt->err. The item is
 * valid only during the call. */
int wpack_import_list(const char *path, const wpack_import_options *opt, wpack_import_item_fn fn,
                      void *user);

/* -------------------------------------------------------------- exporting */

/* Formats (wpack_export_file). In npz and tar, names get `wpack extract`'s
 * escapes ('/' -> %2F, '%' -> %25, a leading '.' -> %2E); bf16 / f8 are raw
 * bits with a "# wpack dtype" comment in the .npy header. */
#define WPACK_EXPORT_SAFETENSORS 1 /* strict readers' form: header padded with spaces to 8
                                    * bytes, tensors in name order, no holes; metadata as
                                    * __metadata__ strings; aliases and splats in full */
#define WPACK_EXPORT_NPZ 2         /* a stored zip of NAME.npy, as numpy.savez writes */
#define WPACK_EXPORT_TAR 3         /* a tar of NAME.npy */
#define WPACK_EXPORT_GGUF 4        /* GGUF v3: metadata as typed KVs, dims innermost
                                    * first, ggml.* block dtypes as their GGML types;
                                    * rank <= 4, names <= 63 bytes (import/README.md) */
#define WPACK_EXPORT_IRPA 5        /* an IREE parameter archive keyed by entry name;
                                    * splats stay splats, aliases share bytes */
#define WPACK_EXPORT_TRT_CALIB 6   /* the activation stats' ranges as a TensorRT
                                    * calibration cache: scale = absmax / 127 */
#define WPACK_EXPORT_ORT_CALIB_JSON 7 /* the activation stats' ranges as an ONNX
                                       * Runtime calibration table: name -> [min, max] */

/* WPACK_EXPORT_* for "safetensors", "npz", "tar", "gguf", "irpa", "trt-calib" or
 * "ort-calib-json"; 0 for
 * anything else. */
int wpack_export_format_from_name(const char *name);

/* Called after each tensor is written: a progress display. */
typedef void (*wpack_export_progress_fn)(void *user, const wpack_tensor *t);

typedef struct wpack_export_options {
    wpack_export_progress_fn progress; /* NULL: none */
    void *progress_user;
    char *err;                         /* a failure's message ("OUT: ..."); NULL: nowhere */
    size_t err_size;
    /* trt-calib and ort-calib-json hold one range per tensor: a per-channel
     * activation record is written as the range over all its channels,
     * and warn gets one message naming it. NULL: no message. */
    wpack_import_warn_fn warn;
    void *warn_user;
    void *reserved_ptr[2];             /* zero; see "Options structs" above */
    /* WPACK_EXPORT_NO_COPY_RANGE: tensor bytes stored plain go through
     * read and write, not copy_file_range (the same bytes; the CLI sets it
     * under WPACK_NO_COPY_RANGE=1). 0: the default. */
    uint64_t flags;
    uint64_t reserved[3];
} wpack_export_options;
#define WPACK_EXPORT_NO_COPY_RANGE 1u
/* WPACK_EXPORT_NO_SYNC: no fsync of the output or its directory (still a
 * temporary renamed into place, atomic for other processes); after a power
 * loss or OS crash it may be missing, empty or torn and the file it
 * replaced lost (wpack_writer_options.no_sync; the CLI's --no-sync). */
#define WPACK_EXPORT_NO_SYNC 2u
/* The defaults: no callback, no error buffer, reserved fields zero. */
void wpack_export_options_init(wpack_export_options *opt);

/* An upper bound on the bytes wpack_export_file writes for ar in format
 * (WPACK_EXPORT_*): every tensor's logical bytes plus its header records,
 * and the metadata GGUF writes as KVs and its padding to the archive's
 * general.alignment (up to 2^30 a tensor); for WPACK_EXPORT_IRPA a splat that
 * stays a splat entry and an alias count only their entry, not their
 * expanded bytes. Any other format value: a bound for every format.
 * Check it against free space or a cap before exporting. */
uint64_t wpack_export_size_bound(const wpack_archive *ar, int format);

/* Write every tensor of ar to path in format (WPACK_EXPORT_*; anything
 * else: WPACK_E_INVALID_ARGUMENT). The output goes to a temporary file
 * beside path, fsynced (unless WPACK_EXPORT_NO_SYNC) and renamed into place: on failure nothing appears
 * at path and an existing file there is untouched. Compressed tensors are
 * decoded chunk by chunk; unless ar was opened with WPACK_OPEN_NO_VERIFY_READS
 * each tensor's bytes are checked against its XXH3 as they are written
 * (WPACK_E_CHECKSUM naming the tensor). Block-quantized tensors have no
 * equivalent in safetensors, npz and tar, nor has a tensor called "__metadata__" in
 * safetensors: WPACK_E_UNSUPPORTED naming the tensor. A safetensors header
 * above 100 MB (what its readers take) is WPACK_E_LIMIT. opt NULL: the
 * defaults. */
int wpack_export_file(const wpack_archive *ar, const char *path, int format,
                      const wpack_export_options *opt);

#ifdef __cplusplus
}
#endif
#endif /* WPACK_IMPORT_H */
