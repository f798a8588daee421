/*
 * import.h - every input `wpack create` takes, behind one interface.
 *
 *  - wpk_import_detect() says what a file is by its content (not its name).
 *  - wpk_import_file() packs it through a sink (below).
 *  - The sink sits between an importer and the writer: it puts names under
 *    the input's --prefix, casts float tensors (--cast bf16|f16, optionally
 *    only for names matching --only globs) with round-to-nearest-even after
 *    computing their weight statistics on the original values, turns
 *    scalars into metadata, and reports a name that two inputs both produce
 *    ("tensor 'x' from b.pt is already taken by a.safetensors").
 *
 * Importers hand the sink little-endian bytes in C order.
 */
#ifndef WPACK_PACKER_IMPORT_H
#define WPACK_PACKER_IMPORT_H

#include <locale.h>
#include <stddef.h>
#include <stdint.h>

#include "weightstats.h"
#include "wpack.h"
#include "wpack_import.h"

typedef enum {
    WPK_IN_UNKNOWN = 0,
    WPK_IN_NPY,
    WPK_IN_TORCH,        /* torch.save zip (>= 1.6) */
    WPK_IN_TORCH_LEGACY, /* torch.save before 1.6: refused with advice */
    WPK_IN_SAFETENSORS,
    WPK_IN_ZIP,          /* a zip that is not a torch checkpoint: .npz or a zip of .npy */
    WPK_IN_TAR,          /* tar, tar.gz, tar.zst, tar.xz, tar.bz2 (libarchive) */
    WPK_IN_MANIFEST,     /* JSON manifest of raw binaries */
    /* 8 is WPACK_INPUT_DIRECTORY (a directory is walked, not imported) */
    WPK_IN_GGUF = 9,     /* GGUF v2/v3 (llama.cpp) */
    WPK_IN_IRPA = 10     /* IREE parameter archive */
} wpk_input_kind;

const char *wpk_input_kind_name(int kind);

/* Caps on decompressed input (zip bombs). */
#define WPK_DEFAULT_MAX_TOTAL (1ull << 40)   /* 1 TiB out of one bundle */
#define WPK_DEFAULT_MAX_RATIO 200u           /* output bytes per compressed byte */
#define WPK_RATIO_GRACE (64ull << 20)        /* the ratio is checked past 64 MiB out */

typedef struct {
    const char *prefix;          /* NULL/"": none; else names become PREFIX.name */
    const char *key;             /* torch: use only this sub-dict (dotted path) */
    int cast;                    /* 0, WPACK_DTYPE_BF16 or WPACK_DTYPE_F16 */
    const char *const *only;     /* fnmatch globs limiting the cast; NULL: every float tensor */
    size_t nonly;
    int weight_stats;            /* as in the writer options (stats of cast tensors are ours) */
    uint64_t max_total;          /* 0: WPK_DEFAULT_MAX_TOTAL */
    uint32_t max_ratio;          /* 0: WPK_DEFAULT_MAX_RATIO */
    int follow_links;            /* 1: follow symlinks among the files an input names (a
                                  * manifest's data files, safetensors shards); 0: refuse
                                  * them (WPACK_E_FILE_TYPE) */
    const char *temp_dir;        /* Fortran-order bundle members spill here; NULL: /tmp */
    int keep_observers;          /* torch: store torch.ao observer buffers as tensors too */
    const wpack_executor *executor; /* stats before a cast on it; NULL: this thread */
    int portable_stats;             /* those stats on the portable C path */
} wpk_import_opts;

typedef void (*wpk_progress_fn)(void *user, uint64_t bytes_done);

typedef struct wpk_owner wpk_owner;

typedef struct {
    wpack_writer *w;
    const wpk_import_opts *o;
    const char *source;          /* the input being packed, for messages */
    wpk_progress_fn progress;
    void *user;
    /* a value an importer skips (an unsupported checkpoint scalar); NULL: silent */
    void (*warn)(void *warn_user, const char *message);
    void *warn_user;
    uint64_t done;               /* input bytes handed over for this input */
    uint64_t tensors, metas;     /* added by this sink so far */
    char *err;
    size_t errlen;
    /* the tensor being streamed */
    int in_tensor;
    char *name;                  /* full (prefixed) name */
    int src_dtype, dst_dtype;
    size_t src_size;
    int own_stats;
    uint64_t cast_over, cast_seen; /* of this tensor's values cast: overflowed to +-inf, all */
    wpk_acc acc;
    uint8_t carry[8];
    size_t carry_len;
    uint8_t *cbuf;
    uint8_t *rbuf;                 /* wpk_sink_stream_file's read buffer */
    /* which input first produced each name */
    wpk_owner **owners;
    size_t owner_cap, owner_count;
    struct wpk_sink_dtype *dtypes; /* block dtypes added through wpk_sink_block_dtype */
} wpk_sink;

void wpk_sink_init(wpk_sink *s, wpack_writer *w, char *err, size_t errlen);
void wpk_sink_free(wpk_sink *s);
/* The next input: its path (kept by pointer) and options. */
void wpk_sink_input(wpk_sink *s, const char *source, const wpk_import_opts *o);

/* name is the importer's name (before the prefix). dims may be NULL for rank 0. */
int wpk_sink_begin(wpk_sink *s, const char *name, int dtype, unsigned rank, const uint64_t *dims);
int wpk_sink_write(wpk_sink *s, const void *data, size_t n);
int wpk_sink_end(wpk_sink *s);
/* A tensor whose every element is fill (one little-endian element of dtype):
 * a splat entry, cast like a streamed tensor. */
int wpk_sink_splat(wpk_sink *s, const char *name, int dtype, unsigned rank, const uint64_t *dims,
                   const void *fill);
/* Before writing anything: will nbytes of tensors (the importer's total, at
 * their own dtypes) fit under the writer's max_data_bytes? WPACK_E_TOO_LARGE
 * naming `what` if not. With --cast the total is only known per tensor:
 * then the writer checks each tensor as it begins. */
int wpk_sink_room(wpk_sink *s, const char *what, uint64_t nbytes);
/* Say (through s->warn) that something of the input was left out. */
void wpk_sink_warn(wpk_sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A second name for target (both before the prefix). */
int wpk_sink_alias(wpk_sink *s, const char *name, const char *target);
int wpk_sink_meta_string(wpk_sink *s, const char *key, const char *value);
int wpk_sink_meta_i64(wpk_sink *s, const char *key, int64_t v);
int wpk_sink_meta_f64(wpk_sink *s, const char *key, double v);
int wpk_sink_meta_bool(wpk_sink *s, const char *key, int v);
int wpk_sink_meta_bytes(wpk_sink *s, const char *key, const void *v, size_t len);
/* An array as in wpack_writer_set_array(). */
int wpk_sink_meta_array(wpk_sink *s, const char *key, int elem_type, uint64_t count,
                        const void *values);
/* The code of block dtype name, added to the writer the first time (later
 * inputs reuse it; the same name with another geometry or params is
 * WPACK_E_DTYPE). */
int wpk_sink_block_dtype(wpk_sink *s, const char *name, uint32_t block_elems,
                         uint32_t block_bytes, const void *params, size_t params_len, int *code);
/* For tensors written to the writer directly (plain .npy): remember that
 * the current input owns full_name; and who owns a name (NULL: nobody). */
void wpk_sink_claim(wpk_sink *s, const char *full_name);
const char *wpk_sink_owner(const wpk_sink *s, const char *full_name);
/* Record bytes of input consumed, for the progress line. */
void wpk_sink_progress(wpk_sink *s, uint64_t input_bytes);
/* A message for the sink's err buffer, prefixed with the input's path. */
int wpk_sink_fail(wpk_sink *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Open an input file with wpk_open_input (format/internal.h: never blocks
 * on a FIFO, regular files only, WPK_INPUT_NOFOLLOW: no links): the fd, or
 * minus the error code with the message (after label, when not NULL) in the
 * sink. */
struct stat;
int wpk_open_in(wpk_sink *s, int dirfd, const char *name, unsigned flags, const char *label,
                struct stat *st);

/* A whole input file mapped read-only (an empty file maps to len 0), and
 * its descriptor kept open (fd; -1 when none) so that unchanged bytes can be
 * moved to the archive with wpack_writer_write_from_fd. */
typedef struct {
    const uint8_t *p;
    size_t len;
    int fd;
} wpk_mapped;
int wpk_map_file(wpk_sink *s, const char *path, wpk_mapped *m);
/* The same for name relative to dirfd, opened by wpk_open_in. */
int wpk_map_at(wpk_sink *s, int dirfd, const char *name, unsigned flags, const char *label,
               wpk_mapped *m);
void wpk_unmap_file(wpk_mapped *m);
/* Done with [off, off+len) for now: drop the pages it touches from this
 * process (they stay in the page cache), so mapped inputs do not grow the
 * resident set. A page dropped that is read again is faulted back in. */
void wpk_map_release(const wpk_mapped *m, uint64_t off, uint64_t len);
/* n bytes at off of m's file into dst, with pread (from the mapping when
 * there is no descriptor): a wpk_zip_read_fn (zipread.h); m is a wpk_mapped.
 * 0 or an errno, ENODATA when the file ends first. */
int wpk_map_read(void *m, uint64_t off, void *dst, size_t n);

/* wpk_sink_write of n bytes inside m's mapping (data points into m->p):
 * bytes kept as they are move from m's file to the archive in the kernel. */
int wpk_sink_write_mapped(wpk_sink *s, const wpk_mapped *m, const void *data, size_t n);
/* Bytes [off, off+len) of m's file, all of the current tensor's data or its
 * next part, with progress. Read with pread a step of WPK_READ_STEP at a
 * time into a buffer that stays in cache; the CRC-32 (when crc is not NULL:
 * *crc is updated, for zip members), the writer's XXH3 and weight stats
 * read it there, and the writer writes that step or copies the same bytes
 * from m's file with copy_file_range (writer_copy.c says when). Hashing the mapping instead cost ~4x the CPU time (page
 * faults and TLB misses; writer_copy.c). The mapping is not touched, so
 * memory stays flat however large the tensor; a file that shrank is an
 * error (WPACK_E_IO), not a SIGBUS. Without a file (fd < 0): pieces of
 * WPK_MAP_PIECE from the mapping, each piece's pages leaving the process
 * once written. */
#define WPK_MAP_PIECE (4u << 20)
#define WPK_READ_STEP (256u << 10)
int wpk_sink_stream_file(wpk_sink *s, const wpk_mapped *m, uint64_t off, uint64_t len,
                         uint32_t *crc);
/* wpk_sink_stream_file without a CRC. */
int wpk_sink_stream_mapped(wpk_sink *s, const wpk_mapped *m, uint64_t off, uint64_t len);

/* A byte source: up to n bytes into buf; 0 at the end, or on error minus
 * its WPACK_E_* code (the message already in the sink): a zip bomb found
 * inside a member is WPACK_E_LIMIT, not a read error. */
typedef long (*wpk_read_fn)(void *ctx, void *buf, size_t n);
/* One .npy stream (header, C-order data, nothing after) as tensor name;
 * what names the stream in messages ("member 'enc/0/w.npy'"). */
int wpk_npy_stream(wpk_sink *s, const char *name, const char *what, wpk_read_fn rd, void *ctx);

/* The importers (each: map or open the file, check it all, then stream). */
int torch_pack_file(wpk_sink *s, const char *path);
int safetensors_pack_file(wpk_sink *s, const char *path);
int archive_pack_file(wpk_sink *s, const char *path);
int manifest_pack_file(wpk_sink *s, const char *path);
/* A .npy from fd, a regular file the caller opened (import_api.c: under
 * the directory it was listed from) and closes. */
int npy_sink_pack_fd(wpk_sink *s, const char *name, int fd);
int gguf_pack_file(wpk_sink *s, const char *path);  /* import/gguf_pack.c */
int irpa_pack_file(wpk_sink *s, const char *path);  /* import/irpa.c */

/* The JSON document (a json_t *, to json_decref) of the input file at path,
 * opened with wpk_open_input and refused when it is out's (may be NULL)
 * output (wpk_refuse_output); NULL with *code and a message ("PATH: WHAT
 * JSON: ..." for a syntax error). */
void *wpk_json_load_input(const char *path, const char *what, wpack_writer *out, int *code,
                          char *err, size_t errlen);
/* WPACK_E_SAME_FILE with a message naming name when the open file fd is
 * one the writer w replaces (wpack_writer_replaces_fd: an output never
 * overwrites an input, including the files an input names); WPACK_OK when
 * it is not, or w is NULL. Every input file opened here is asked. */
int wpk_refuse_output(wpack_writer *w, int fd, const char *name, char *err, size_t errlen);
/* libarchive's last message for a, into buf without its trailing newline. */
struct archive;
const char *wpk_archive_error(struct archive *a, char *buf, size_t n);

/* libarchive converts member names through the calling thread's locale; in
 * the "C" locale (the CLI's, and any program that never calls setlocale)
 * it can convert no byte above 0x7f: a UTF-8 zip name (numpy.savez of a
 * non-ASCII key) reads as no name, a tar cannot be written, a zip's names
 * are not marked UTF-8. Names of the format are UTF-8: every libarchive
 * use runs between begin and end, which switch this thread (uselocale, not
 * the process) to LC_CTYPE C.UTF-8 and back. Without that locale nothing
 * changes. */
typedef struct {
    locale_t utf8, old;
} wpk_archive_locale;
void wpk_archive_locale_begin(wpk_archive_locale *l);
void wpk_archive_locale_end(wpk_archive_locale *l);
/* A Hugging Face model.safetensors.index.json (root: its json_t *), its
 * shard files in dirfd (dir: that directory, for messages); see
 * import/safetensors_index.c. */
int st_index_pack(wpk_sink *s, void *root, int dirfd, const char *dir);
/* The checks of the index alone (for fuzzing too): weight_map an object of
 * at least one tensor, each naming a plain file name. *files: the distinct
 * shard names in bytewise order (pointing into root; free the array). */
int st_index_check(void *root, const char ***files, size_t *nfiles, char *err, size_t errlen);
/* A mapped safetensors file through the sink (with its __metadata__ when
 * with_meta). */
int safetensors_pack_mapped(wpk_sink *s, const wpk_mapped *m, int with_meta);

/* What the file at path is, by its first bytes (and, for a zip, by its
 * central directory). WPK_IN_UNKNOWN with a message when nothing fits
 * (*code: why the file could not be opened, else 0). */
int wpk_import_detect(const char *path, int *code, char *err, size_t errlen);
/* The same for any path: WPACK_INPUT_DIRECTORY for a directory, and
 * *code always set when the result is WPK_IN_UNKNOWN (import_walk.c). */
int wpk_detect_input(const char *path, int *code, char *err, size_t errlen);
/* wpack_import_list with the message in err (import_walk.c); o is whole. */
int wpk_import_list(const char *path, const wpack_import_options *o, wpack_import_item_fn fn,
                    void *user, char *err, size_t errlen);

/* The bytes an input brings, for progress and output caps: its size, and
 * for a JSON manifest or safetensors index also the size of each distinct
 * file it names (files that cannot be stat'ed count 0; the import says
 * why). follow: --follow-links. */
uint64_t wpk_import_bytes(const char *path, int kind, int follow);
uint64_t manifest_input_bytes(const char *path, int follow);

/* Pack the file at path (of a kind from wpk_import_detect) through s. */
int wpk_import_file(wpk_sink *s, const char *path, int kind);

#endif
