/*
 * wpack.h - the public header of libwpack, the core library (pkg-config wpack).
 *
 * libwpack reads and writes wpack archives: page-aligned files that map dotted
 * module paths ("encoder.layers.0.attn.q_proj.weight") to tensors, plus typed
 * metadata, a name map and calibration statistics. The byte format is defined
 * in spec/wpack-format.md; this header documents every call.
 *
 * Conventions
 *  - Every call that can fail returns an int: WPACK_OK (0) or a positive
 *    wpack_error code. wpack_error_name() names a code; the handle that the
 *    call was made on carries a readable message (wpack_errmsg(),
 *    wpack_writer_errmsg()) saying what failed and where. Every message
 *    of the wpack libraries (handles, error buffers, warnings, MLIR
 *    diagnostics) is escaped as wpack_text_escape() does: the paths, file
 *    and member names, keys and symbols it quotes may hold anything, yet
 *    it holds no control character and is valid UTF-8.
 *  - Handles are opaque. Closing or aborting NULL is a no-op. A NULL path,
 *    name or key (open, find, prefix range, metadata and stats lookups,
 *    writer calls) is WPACK_E_INVALID_ARGUMENT, as are unknown flag bits.
 *  - Strings handed out by the reader point into the archive and are
 *    NUL-terminated (the format guarantees a NUL after every string); they
 *    stay valid until wpack_close().
 *  - Tensor bytes are stored little-endian, row-major (C order). A view
 *    (wpack_tensor.data) points straight into the mapped file: no copy.
 *  - Thread safety: after a successful open, any number of threads may call
 *    the reader functions on one wpack_archive at once (what they change -
 *    error message, per-entry check marks, the kept zstd chunk - is locked
 *    or atomic), except wpack_close() and wpack_set_executor(); such
 *    threads read a failure's message with wpack_errmsg_copy(), not
 *    wpack_errmsg(). A writer or update handle belongs to one thread at a
 *    time. The library keeps no state between calls outside its handles.
 *  - Structs never change size (the rule of every wpack library's header).
 *    A struct the caller fills and passes in - wpack_writer_options,
 *    wpack_source, wpack_stats_in, wpack_executor, wpack_import_options and
 *    wpack_export_options (wpack_import.h), wpack_resolve_options and
 *    wpack_externalize_options (wpack_mlir.h), wpack_remote_options
 *    (wpack_remote.h), wpack_dense_settings (wpack_dense.h) - ends with reserved fields
 *    (reserved_ptr[], reserved[]): a new field takes the place of one of
 *    them, after the old fields, and its zero value keeps the old
 *    behaviour. Fill such a struct with its *_init() call (wpack_source,
 *    wpack_stats_in, wpack_executor: all zeros) before setting fields. Every call taking one refuses it
 *    when a reserved field is not zero, with WPACK_E_INVALID_ARGUMENT and
 *    a message naming the struct and the field ("wpack_writer_options:
 *    reserved[0] is not zero ..."): a program built against a newer
 *    header asking for something this library does not have (the message
 *    of wpack_set_executor() is wpack_errmsg(ar); wpack_dense_configure()
 *    has none, wpack_dense_configure_ex() gives it). A struct the
 *    library fills - wpack_info, wpack_tensor, wpack_meta, wpack_stats,
 *    wpack_resolve_result, wpack_externalize_result, wpack_linear - has
 *    reserved fields too, which it sets to zero: a newer library's fields
 *    land there, inside the caller's struct (a wpack_linear passed back
 *    to a forward call with one not zero is refused as not filled by the
 *    bind calls).
 */
#ifndef WPACK_H
#define WPACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define WPACK_VERSION_MAJOR 0
#define WPACK_VERSION_MINOR 1
#define WPACK_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, comparable with wpack_version_number(). */
#define WPACK_VERSION_NUMBER \
    (WPACK_VERSION_MAJOR * 10000 + WPACK_VERSION_MINOR * 100 + WPACK_VERSION_PATCH)
#define WPACK_VERSION_STRING "0.1.0"

/* The newest archive format version this library reads and writes; it
 * reads every 1.x archive (a newer minor only adds optional parts). It
 * writes 1.0 unless an archive uses a 1.1 feature (zstd-compressed tensors,
 * a sharded set) or the 1.2 one (chunk checksums: minor 2). */
#define WPACK_FORMAT_MAJOR 1
#define WPACK_FORMAT_MINOR 2

/* The library actually linked, which may differ from the header compiled. */
unsigned wpack_version_number(void);
const char *wpack_version_string(void);

/* ------------------------------------------------------------------ limits */

#define WPACK_MAX_RANK 8          /* dims per tensor (spec: Limits) */
#define WPACK_MAX_NAME 16384      /* bytes in a name, key or map name */
/* The default alignment of tensor data in a new archive, and its bounds. */
#define WPACK_DEFAULT_ALIGNMENT 4096u
#define WPACK_MIN_ALIGNMENT 64u
#define WPACK_MAX_ALIGNMENT (2u * 1024u * 1024u)
/* Bytes per zstd chunk (spec: Compressed tensors): a power of two in
 * 4 KiB .. 64 MiB. Readers reject bigger chunks at open (WPACK_E_LIMIT). */
#define WPACK_MIN_CHUNK (4u * 1024u)
#define WPACK_MAX_CHUNK (64u * 1024u * 1024u)
/* Bytes per checksummed chunk of an uncompressed tensor (spec: Chunk
 * checksums, format 1.2) unless the writer is told otherwise: a reader
 * checks a part of a tensor by hashing (or fetching) only the chunks that
 * hold it. Same bounds as WPACK_MIN_CHUNK .. WPACK_MAX_CHUNK. */
#define WPACK_DEFAULT_CHUNK_SUMS (1u * 1024u * 1024u)

/* ------------------------------------------------------------------ errors */

/* Stable numbers: a code never changes meaning; new codes are added at the
 * end of their group. */
typedef enum wpack_error {
    WPACK_OK = 0,
    /* usage and environment */
    WPACK_E_IO = 1,                /* open/read/write/fsync/rename failed */
    WPACK_E_NOMEM = 2,             /* allocation failed */
    WPACK_E_INVALID_ARGUMENT = 3,  /* a caller's argument is out of range */
    WPACK_E_NOT_FOUND = 4,         /* no such entry, key or stats record */
    WPACK_E_STATE = 5,             /* call out of order (e.g. write outside a tensor) */
    WPACK_E_EXISTS = 6,            /* a name is added twice to a writer */
    WPACK_E_NO_VIEW = 7,           /* no bytes to view in place (splat, zstd, remote): wpack_read */
    WPACK_E_SAME_FILE = 8,         /* an output is the same file as an input or another output */
    WPACK_E_TOO_LARGE = 9,         /* output would exceed its cap (size limit or free space) */
    WPACK_E_FILE_TYPE = 10,        /* not a regular file, or a link leading out of its directory */
    WPACK_E_EMPTY = 11,            /* nothing to do: no input, nothing matched or changed */
    /* archive structure: each names the rule broken (spec: Mandatory rejections) */
    WPACK_E_BAD_MAGIC = 20,        /* not a wpack file, or mangled in text mode */
    WPACK_E_VERSION = 21,          /* unsupported format major version */
    WPACK_E_FEATURE = 22,          /* unknown required feature bit */
    WPACK_E_ENDIAN = 23,           /* endianness marker says byte-swapped */
    WPACK_E_ALIGNMENT = 24,        /* alignment not a power of two in range */
    WPACK_E_TRUNCATED = 25,        /* file shorter than its header says */
    WPACK_E_HEADER_CHECKSUM = 26,  /* superblock or trailer checksum wrong */
    WPACK_E_TRAILER = 27,          /* trailer disagrees with the superblock */
    WPACK_E_RESERVED = 28,         /* a reserved field is not zero (padding: PADDING) */
    WPACK_E_INDEX_CHECKSUM = 29,   /* index bytes do not match their checksum */
    WPACK_E_LAYOUT = 30,           /* regions or sections misplaced */
    WPACK_E_LIMIT = 31,            /* a count or length above the format's limits */
    WPACK_E_NAME = 32,             /* empty, too long, NUL, control byte, bad UTF-8 */
    WPACK_E_UNSORTED = 33,         /* names (or keys) not in bytewise order */
    WPACK_E_DUPLICATE = 34,        /* the same name (or key) twice */
    WPACK_E_DTYPE = 35,            /* unknown dtype code or bad block dtype */
    WPACK_E_RANK = 36,             /* rank above WPACK_MAX_RANK */
    WPACK_E_SHAPE = 37,            /* dims not allowed for the dtype */
    WPACK_E_OVERFLOW = 38,         /* element count x element size overflows */
    WPACK_E_SIZE = 39,             /* stored length disagrees with shape x dtype */
    WPACK_E_BOUNDS = 40,           /* offset + length outside its region */
    WPACK_E_MISALIGNED = 41,       /* data offset not a multiple of the alignment */
    WPACK_E_OVERLAP = 42,          /* two extents share bytes, or leave a hole */
    WPACK_E_KIND = 43,             /* unknown entry kind, or fields wrong for it */
    WPACK_E_ALIAS = 44,            /* alias target missing, an alias, or unlike */
    WPACK_E_CODEC = 45,            /* unknown codec */
    WPACK_E_METADATA = 46,         /* bad metadata record or value */
    WPACK_E_NAMEMAP = 47,          /* bad name-map record */
    WPACK_E_STATS = 48,            /* bad calibration statistics record */
    WPACK_E_CHECKSUM = 49,         /* tensor bytes do not match their checksum */
    WPACK_E_PADDING = 50,          /* a padding byte is not zero (spec rules 12, 23, 50) */
    WPACK_E_DECODE = 51,           /* compressed bytes do not decode to their declared size */
    WPACK_E_SHARD = 52,            /* a sharded set's shard is missing, changed or inconsistent */
    WPACK_E_VALUE = 53,            /* a stored value its dtype does not allow (bool not 0/1) */
    /* inputs of the packer */
    WPACK_E_INPUT = 60,            /* malformed input file (.npy, ...) */
    WPACK_E_UNSUPPORTED = 61       /* valid input wpack does not take (object arrays) */
} wpack_error;

/* "WPACK_E_TRUNCATED" for WPACK_E_TRUNCATED; "WPACK_E_UNKNOWN" otherwise. */
const char *wpack_error_name(int code);
/* A one-line English description of a code. */
const char *wpack_error_describe(int code);

/* Untrusted text (a tensor name, a metadata value, a path) made safe to
 * print to a terminal or a log, as the libraries' messages already are:
 * s[0..n) into buf with C0 controls (newline, CR and tab included) and DEL
 * shown as \x1b, the C1 controls U+0080..U+009F and the bidirectional
 * controls (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) as
 * \u009b, and each byte that is not valid UTF-8 as \xff; printable ASCII
 * (the backslash too) and all other valid UTF-8 are copied, so escaping
 * escaped text changes nothing. Cut to fit len bytes (before a character or
 * an escape, never inside one) and NUL-terminated; 4 x n + 1 bytes always
 * suffice. Returns the bytes written; nothing for len 0. */
size_t wpack_text_escape(char *buf, size_t len, const char *s, size_t n);

/* ------------------------------------------------------------------ dtypes */

/* Numbered codes stored in the file (spec: Data types). Codes 128..255 name
 * the archive's own block dtypes (WPACK_DTYPE_BLOCK_BASE + table index). */
typedef enum wpack_dtype {
    WPACK_DTYPE_F64 = 1,
    WPACK_DTYPE_F32 = 2,
    WPACK_DTYPE_F16 = 3,
    WPACK_DTYPE_BF16 = 4,
    WPACK_DTYPE_F8E4M3FN = 5,
    WPACK_DTYPE_F8E5M2 = 6,
    WPACK_DTYPE_I64 = 7,
    WPACK_DTYPE_I32 = 8,
    WPACK_DTYPE_I16 = 9,
    WPACK_DTYPE_I8 = 10,
    WPACK_DTYPE_U64 = 11,
    WPACK_DTYPE_U32 = 12,
    WPACK_DTYPE_U16 = 13,
    WPACK_DTYPE_U8 = 14,
    WPACK_DTYPE_BOOL = 15
} wpack_dtype;
#define WPACK_DTYPE_BLOCK_BASE 128

/* Bytes per element of a built-in dtype; 0 for codes that are not built in. */
size_t wpack_dtype_size(int dtype);
/* "f32", "bf16", ...; NULL for codes that are not built in. */
const char *wpack_dtype_name(int dtype);
/* The code for a name from wpack_dtype_name(), or 0. */
int wpack_dtype_from_name(const char *name);
/* 1 for f64, f32, f16, bf16, f8e4m3fn, f8e5m2. */
int wpack_dtype_is_float(int dtype);

/* ------------------------------------------------------------------ reader */

typedef struct wpack_archive wpack_archive;

/* Flags for wpack_open_file(), wpack_open_memory() and wpack_open_source().
 * Any other bit is WPACK_E_INVALID_ARGUMENT: a flag of a newer header is
 * refused, not ignored. */
#define WPACK_OPEN_VERIFY 1u  /* also verify every entry at open (wpack_verify_all) */
/* Sharded sets: follow symbolic links among the shard names (refused by
 * default with WPACK_E_FILE_TYPE: a link may lead out of the manifest's
 * directory). A shard that is not a regular file (a FIFO, a device) is
 * always refused. */
#define WPACK_OPEN_FOLLOW_LINKS 2u
/* Verify on read, the default: every call that hands out an entry's bytes
 * first checks them against the entry's XXH3 (the decoded checksum for a
 * compressed tensor) and fails with WPACK_E_CHECKSUM (or WPACK_E_DECODE)
 * instead of handing out corrupt bytes: wpack_read(), wpack_read_ex(),
 * wpack_read_stream(), wpack_read_to_fd(), wpack_tensor_view() and
 * wpack_linear_bind(). Each entry is hashed at most once per open (the
 * result, pass or fail, is remembered per entry, thread-safely); a splat's
 * fill is checked at every open anyway. Cost: one XXH3 pass (several GB/s)
 * over each entry at its first read. WPACK_OPEN_NO_VERIFY_READS opts out
 * (the bytes are then handed out unchecked unless a call asks with
 * WPACK_READ_VERIFY); WPACK_OPEN_VERIFY_READS says the default explicitly
 * (both together: WPACK_E_INVALID_ARGUMENT). Not a hand-out:
 * wpack_tensor.data as filled by wpack_tensor_at() / wpack_find() says
 * where the bytes are mapped, unchecked; use wpack_tensor_view() (or call
 * wpack_verify_once() first) to get them checked. */
#define WPACK_OPEN_VERIFY_READS 4u
#define WPACK_OPEN_NO_VERIFY_READS 8u

/*
 * Open an archive file read-only, or a caller's buffer (which must stay
 * valid and unchanged until wpack_close()). The superblock, trailer and the
 * whole index are validated here (spec: Reader rules); after a successful
 * open no reader call can touch a byte outside the file. A path that is not
 * a regular file (a FIFO, a directory) is WPACK_E_FILE_TYPE, found without
 * blocking.
 *
 * A file's superblock, trailer and index are read with pread (the index
 * into memory the handle owns) and only its data region is mapped (mmap,
 * MAP_SHARED). An in-place update (wpack_update_*) never shrinks the file or
 * touches the data, so open handles keep working across it, and an open
 * that races with one retries. mmap hazard: if the file is truncated or
 * overwritten in place by other means while a handle is open (`cp` over it,
 * a program rewriting it), the next access to tensor data may kill the
 * process with SIGBUS or show the new bytes. Replace an archive by writing a
 * new file and rename()-ing it over the old path (what wpack_writer_finish()
 * and every wpack command do): open handles keep the old file.
 *
 * *out always receives a handle, except when memory runs out (then NULL and
 * WPACK_E_NOMEM). When the call fails, the handle is in a failed state: only
 * wpack_errmsg(), wpack_errcode() and wpack_close() may be used on it.
 */
int wpack_open_file(wpack_archive **out, const char *path, unsigned flags);
int wpack_open_memory(wpack_archive **out, const void *buf, size_t len, unsigned flags);

/*
 * An archive read through a caller's byte source (an object store, a
 * socket, a custom cache): every rule of wpack_open_file() applies
 * unchanged. Without a mapping (base NULL) nothing has a zero-copy view
 * (wpack_tensor.data is NULL, wpack_tensor_view() is WPACK_E_NO_VIEW, as for
 * compressed tensors) and wpack_read(), wpack_read_ex() and
 * wpack_read_stream() fetch an entry's stored bytes whole and check them
 * against its XXH3 before handing out any byte, whatever the flags (a
 * mismatch is fetched once more, forget() called first, then
 * WPACK_E_CHECKSUM naming the tensor). Two exceptions: a partial read of a
 * plain entry without verification (opened with WPACK_OPEN_NO_VERIFY_READS,
 * no WPACK_READ_VERIFY) reads only the bytes asked for, unchecked (a part
 * cannot be checked alone); and the handle keeps the last entry fetched
 * whole (up to 128 MiB), so reads of it that follow are served from that
 * checked copy without a read(). (And stream_window below: streams of
 * large entries are checked at their end.)
 * The open reads the superblock, the trailer and the index through read().
 */
typedef struct wpack_source {
    void *user;                 /* passed to the calls below */
    const char *name;           /* for messages (a URL); copied at open; may be NULL */
    uint64_t size;              /* the archive's size in bytes (or found by open) */
    const void *base;           /* optional: all size bytes mapped (zero-copy views) */
    /* Optional, called first: set *size (a remote source learns it from
     * its first request); an error code with a message fails the open. */
    int (*open)(void *user, uint64_t *size, char *msg, size_t msglen);
    /* Read [off, off + n) (inside size) into dst: WPACK_OK, or an error code
     * with a message in msg. May be called from several threads at once. */
    int (*read)(void *user, uint64_t off, void *dst, size_t n, char *msg, size_t msglen);
    /* Optional, for a sharded set's manifest: open its shard called name
     * (relative to this source) with flags; *out receives a handle as
     * wpack_open_*() gives one. Without it a manifest is WPACK_E_SHARD. */
    int (*open_shard)(void *user, const char *name, unsigned flags, wpack_archive **out);
    /* Optional: called once by wpack_close() of the handle (after a failed
     * open too), the source's last use. */
    void (*close)(void *user);
    /* Optional: the bytes read at [off, off + n) did not match the index's
     * checksum; drop any local copy of them (a cache) so that the read that
     * follows fetches them again. */
    void (*forget)(void *user, uint64_t off, uint64_t n);
    /* Optional (0: off): wpack_read_stream() and wpack_read_to_fd() of a
     * plain entry larger than this many bytes read it in windows of this
     * size, each hashed as it arrives and handed on, instead of fetching it
     * whole first: memory stays bounded by the window, and the entry's XXH3
     * over all windows decides the call's result (WPACK_E_CHECKSUM naming
     * the tensor, not fetched again: the caller discards what it made of
     * the bytes, as for any stream with WPACK_READ_VERIFY). */
    uint64_t stream_window;
    /* Optional: the n ranges (pairs off, len, in the order they will be
     * read) that the reads which follow will ask for (wpack_read_plan); a
     * new plan replaces the last, n 0 drops it. A hint: the source may fetch
     * ahead and merge neighbouring ranges; what it hands out still goes
     * through read() and the checks above. */
    void (*plan)(void *user, const uint64_t *ranges, size_t n);
    /* Optional: called between the pieces of an entry the reader hands on
     * (about every MiB, while the caller writes them): a source with
     * requests in flight moves them on without waiting, so its connections
     * do not idle while the caller is busy. */
    void (*idle)(void *user);
    /* Zero: start from an all-zero struct ("Structs never change size"
     * above); wpack_open_source refuses any other value. */
    void *reserved_ptr[4];
    uint64_t reserved[4];
} wpack_source;
int wpack_open_source(wpack_archive **out, const wpack_source *src, unsigned flags);
void wpack_close(wpack_archive *ar);

/* The last error on this handle: code and message ("" when none). The
 * message is the handle's one buffer: while other threads may fail on the
 * same handle it can be rewritten as it is read; use wpack_errmsg_copy()
 * there. */
int wpack_errcode(const wpack_archive *ar);
const char *wpack_errmsg(const wpack_archive *ar);
/* The last error's code (returned) and message (into buf, cut to len - 1
 * bytes and NUL-terminated; nothing for len 0), taken together under the
 * handle's lock: safe while other threads read ar. With several threads
 * failing at once the pair is one of theirs, whole. NULL ar: "out of
 * memory", WPACK_E_NOMEM. */
int wpack_errmsg_copy(const wpack_archive *ar, char *buf, size_t len);

typedef struct wpack_info {
    uint16_t format_major, format_minor;
    uint32_t alignment;
    uint64_t required_features, optional_features;
    uint64_t generation;        /* 1 for a new archive; +1 per in-place update */
    uint64_t file_length;       /* bytes that belong to the archive */
    uint64_t data_offset, data_length;
    uint64_t index_offset, index_length;
    uint64_t index_checksum;    /* XXH3-64 of the index: the archive's identity */
    uint64_t entry_count, metadata_count, namemap_count, stats_count, block_dtype_count;
    int recovered;              /* 1 when bytes past file_length look like an interrupted
                                 * update (ignored); the superseded generations that
                                 * in-place updates leave and reuse do not count */
    void *reserved_ptr[2];      /* set to zero; see "Structs never change size" above */
    uint64_t reserved[4];
} wpack_info;
void wpack_get_info(const wpack_archive *ar, wpack_info *info);

/* Entry kinds (spec: Entries). */
#define WPACK_KIND_DATA 1   /* bytes in the data region */
#define WPACK_KIND_SPLAT 2  /* one fill value repeated; no bytes in the file */
#define WPACK_KIND_ALIAS 3  /* a second name for another entry */
#define WPACK_KIND_EXTERNAL 4 /* bytes in shard archive number alias_target (sharded sets, 1.1) */

/* Codecs of stored bytes (spec: Compressed tensors). */
#define WPACK_CODEC_NONE 0
#define WPACK_CODEC_ZSTD 1  /* independent zstd frames of chunk_size bytes + seek table (1.1) */

typedef struct wpack_tensor {
    const char *name;           /* NUL-terminated, points into the archive */
    size_t name_len;
    uint64_t index;             /* position in name order, 0..count-1 */
    int kind;                   /* WPACK_KIND_* */
    int dtype;                  /* WPACK_DTYPE_* or a block dtype code */
    int codec;                  /* WPACK_CODEC_* */
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t nelems;            /* product of dims (1 for rank 0) */
    uint64_t nbytes;            /* logical size: nelems x element size */
    uint64_t offset;            /* file offset of the bytes (data, alias) */
    uint64_t stored_length;     /* bytes in the file (0 for splat) */
    uint64_t checksum;          /* XXH3-64 of the stored bytes (of the fill value for splat) */
    const void *data;           /* where the bytes are mapped, not checked (NULL for splat and
                                   without a mapping): wpack_tensor_view() checks them */
    const void *fill;           /* splat: the fill value, one element */
    size_t fill_size;
    uint64_t alias_target;      /* alias: index of the entry it names; external: shard number */
    uint32_t chunk_size;        /* zstd: uncompressed bytes per chunk */
    uint64_t decoded_checksum;  /* zstd: XXH3-64 of the decoded bytes; else = checksum */
    void *reserved_ptr[2];      /* set to zero; see "Structs never change size" above */
    uint64_t reserved[4];
} wpack_tensor;

uint64_t wpack_count(const wpack_archive *ar);
/* Entry i in name order. */
int wpack_tensor_at(const wpack_archive *ar, uint64_t i, wpack_tensor *out);
/* Look a name up: first the entry names, then the name map (torch.export
 * placeholders, torch-mlir globals, ...). O(log n). WPACK_E_NOT_FOUND if
 * neither has it. */
int wpack_find(const wpack_archive *ar, const char *name, wpack_tensor *out);
/* Entry names that start with the bytes of prefix form one run in name
 * order: [*first, *first + *count). "" gives every entry. For a module path
 * pass it with its trailing dot ("encoder.layers.0.") so that
 * "encoder.layers.01.x" is not included. */
int wpack_prefix_range(const wpack_archive *ar, const char *prefix, uint64_t *first,
                       uint64_t *count);

/* Sharded sets (spec: Sharded sets). wpack_open_file() of a manifest
 * archive also opens and validates every shard it lists (paths relative to
 * the manifest), checks each shard's length and index XXH3 against the
 * manifest, and then serves every entry through this one handle: lookups,
 * prefix ranges, views, reads and verification work as for one file. A
 * shard that is a FIFO or any other non-regular file is WPACK_E_FILE_TYPE
 * (never blocking), so is a shard that is a symlink unless
 * WPACK_OPEN_FOLLOW_LINKS; a set naming one file twice is WPACK_E_SHARD. */
uint32_t wpack_shard_count(const wpack_archive *ar);
/* Shard s: its path as opened and its own handle (owned by ar). Through a
 * wpack_source (a URL) the path is the shard handle's own name (the
 * source's name of it: a URL, credentials hidden). */
int wpack_shard_at(const wpack_archive *ar, uint32_t s, const char **path,
                   const wpack_archive **shard);
/* The file ar was opened from: *path as given to wpack_open_file (valid
 * while ar is open; path may be NULL), its device and inode (fstat at
 * open): what a caller writing files compares its outputs with (the
 * same-file rule). WPACK_OK, or WPACK_E_NOT_FOUND for an archive in a
 * buffer or behind a source (no file), WPACK_E_INVALID_ARGUMENT (NULL ar,
 * dev or ino). For a sharded set: the manifest's file; each shard's
 * through wpack_shard_at. */
int wpack_file_identity(const wpack_archive *ar, const char **path, uint64_t *dev, uint64_t *ino);

/* The zero-copy view of entry i's bytes: *data and *nbytes. A splat or a
 * compressed tensor has no bytes to point at: WPACK_E_NO_VIEW (use
 * wpack_read()). wpack_tensor.data is the same pointer, or NULL. Unless the
 * archive was opened with WPACK_OPEN_NO_VERIFY_READS, the entry is checked once first (see
 * wpack_verify_once(); *data and *nbytes are set either way). An entry
 * whose bytes an earlier check of this handle found bad (wpack_verify_once,
 * a verified read) is refused with that error by every call that hands
 * bytes out - view, read, read_ex, read_stream, read_to_fd - with or
 * without verification asked for. */
int wpack_tensor_view(const wpack_archive *ar, uint64_t i, const void **data, uint64_t *nbytes);
/* A zero-copy view of nbytes of entry i's bytes from byte offset: *data
 * points into the mapping, valid while the archive is open, as
 * wpack_tensor_view()'s. Unless the archive was opened with
 * WPACK_OPEN_NO_VERIFY_READS, an entry with chunk checksums (format 1.2,
 * wpack_tensor_chunk_size() > 0) has only the chunks that hold the part
 * checked (each once per open, as by wpack_read_ex()), not the whole entry:
 * the rows of a tensor-parallel shard are viewed without paging in, or
 * hashing, the rest. An entry without them is checked whole, once
 * (wpack_verify_once()). WPACK_E_NO_VIEW when the entry has no bytes to
 * point at (compressed, a splat, a URL: use wpack_read_ex());
 * WPACK_E_INVALID_ARGUMENT when the part passes the entry's end;
 * WPACK_E_CHECKSUM for a bad chunk (the message names it and its bytes);
 * an entry found bad before is refused, verifying or not. *data is NULL
 * after any error. */
int wpack_tensor_view_range(const wpack_archive *ar, uint64_t i, uint64_t offset,
                            uint64_t nbytes, const void **data);
/* The size of entry i's checksummed chunks (format 1.2, spec 19b): > 0
 * when its bytes (an alias's target's, an external entry's in its shard)
 * carry one XXH3-64 per chunk of that size, so that a verified
 * wpack_read_ex() of a part hashes - or, from a URL, fetches - only the
 * chunks that hold it instead of the whole entry (a mapped chunk once per
 * open, as a whole entry; a fetched one at each read). A zstd entry's
 * chunks are its zstd chunks, each checked once decoded (only those
 * holding the part are fetched and decoded). 0: none (a splat, an entry of
 * one chunk, an archive written without them). */
uint64_t wpack_tensor_chunk_size(const wpack_archive *ar, uint64_t i);

/* Copy nbytes of entry i's logical bytes, starting at byte offset, into dst,
 * whatever its kind and codec: a splat is expanded, a zstd tensor decodes
 * only the chunks that hold the range (in parallel when the archive has an
 * executor, see wpack_set_executor(); else on the calling thread). Each chunk's declared size is checked before it
 * is decoded and output never exceeds it: WPACK_E_DECODE for corrupt
 * compressed bytes, WPACK_E_NOMEM. A chunk read only in part is kept
 * decoded (one per archive), so small reads walking through a big chunk
 * decode it once. This call sets no message (the archive is shared between
 * threads), except for a failed check (verify on read) or an
 * entry found bad before (wpack_tensor_view() above). */
int wpack_read(const wpack_archive *ar, uint64_t i, uint64_t offset, void *dst, size_t nbytes);

/*
 * Parallel decoding. libwpack starts no thread: by default zstd chunks are
 * decoded one after another on the thread that reads. A caller with threads
 * of its own attaches an executor, and reads of compressed tensors
 * (wpack_read, wpack_read_stream, verification) then decode several chunks
 * at once on it; streaming decodes a batch of whole chunks per step, one
 * per executor thread, at most 16 MiB (or one chunk): memory stays bounded.
 * The same bytes either way.
 *
 * run(self, n, fn, ctx) must call fn(ctx, i) exactly once for every i in
 * [0, n), on any threads, possibly at the same time, and return only when
 * every call has returned; fn never calls run. Several threads reading one
 * archive may call run at once. threads: how many calls may run at once
 * (sizes the streaming batch; 0 counts as 1). libwpack-dense gives one over
 * its thread pool (wpack_pool_executor() in wpack_dense.h).
 *
 * wpack_set_executor copies *ex into the archive (and its shards); NULL
 * detaches (serial again). Call it before reading, not while other threads
 * read ar; the executor must outlive its use by ar (wpack_close, or the next
 * wpack_set_executor). WPACK_E_INVALID_ARGUMENT for a NULL ar or run, and
 * for a reserved field that is not zero (message in wpack_errmsg(ar); the
 * archive keeps the executor it had). wpack_writer_options.executor is
 * checked alike by wpack_writer_open().
 */
typedef struct wpack_executor {
    void (*run)(void *self, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);
    void *self;
    unsigned threads;
    /* Zero: start from an all-zero struct ("Structs never change size"
     * above; wpack_pool_executor() sets them). */
    void *reserved_ptr[2];
    uint64_t reserved[2];
} wpack_executor;
int wpack_set_executor(wpack_archive *ar, const wpack_executor *ex);

/* Flags for wpack_read_ex() and wpack_read_stream() (any other bit:
 * WPACK_E_INVALID_ARGUMENT, as is a NULL dst with nbytes > 0). */
#define WPACK_READ_VERIFY 1u  /* check the entry's bytes even under WPACK_OPEN_NO_VERIFY_READS */

/*
 * wpack_read() that can check what it hands out: with WPACK_READ_VERIFY in
 * flags (or an archive opened without WPACK_OPEN_NO_VERIFY_READS) the entry's
 * bytes are checked against its checksum before dst is trusted:
 * WPACK_E_CHECKSUM or WPACK_E_DECODE (WPACK_E_VALUE: a bool byte other
 * than 0 or 1, spec 21.17), with a message naming the entry
 * (wpack_errmsg(); several threads failing at once leave one of their
 * messages). A read of the whole tensor hashes what it copied, in one pass;
 * a partial read checks the whole tensor once (wpack_verify_once()), so a
 * tensor read in many pieces is hashed only at its first read. On an error
 * dst holds nothing usable.
 */
int wpack_read_ex(const wpack_archive *ar, uint64_t i, uint64_t offset, void *dst, size_t nbytes,
                  unsigned flags);

/*
 * Stream all of entry i's logical bytes, in order, to fn in pieces of at most
 * 1 MiB: views straight from the mapping (no copy), each zstd chunk decoded
 * once (several at a time on the archive's executor, see
 * wpack_set_executor(); at most 16 MiB or one chunk held), splats expanded. A non-zero return from fn stops the stream and is
 * returned as is. With WPACK_READ_VERIFY (or verify on read, the default) each
 * piece is hashed just before fn gets it and the call returns
 * WPACK_E_CHECKSUM at the end when the bytes do not match (message naming
 * the entry): fn has then seen bad bytes, and the caller must discard what
 * it made of them (the CLI writes to a temporary file and removes it).
 * An entry already checked in this open is not hashed again.
 */
typedef int (*wpack_read_fn)(void *user, const void *data, size_t n);
int wpack_read_stream(const wpack_archive *ar, uint64_t i, wpack_read_fn fn, void *user,
                      unsigned flags);

/* Flag for wpack_read_to_fd(): read and write, never copy_file_range (the
 * same bytes; the CLI sets it under WPACK_NO_COPY_RANGE=1). */
#define WPACK_READ_NO_COPY_RANGE 2u

/*
 * Write all of entry i's logical bytes to fd at its file offset (which
 * advances by nbytes), as wpack_read_stream() hands them out, for a caller
 * that writes them to a file (extract, export). The stored bytes of an
 * uncompressed entry of an archive file move inside the kernel
 * (copy_file_range, the archive file reopened by its path and checked to
 * be the same file) where fd's offset and the entry's offset in the archive
 * lie at the same place in a 4 KiB page, and go through pread and write
 * elsewhere (cheaper than the kernel's copy of split pages), when the
 * kernel refuses (another file system, an old kernel, an fd that is not a
 * regular file, WPACK_READ_NO_COPY_RANGE) or the file was replaced. Compressed
 * tensors, splats, small entries and archives in memory or behind a source
 * stream as wpack_read_stream() does. Pages of the archive's mapping read
 * here are dropped from the process as they are consumed (they stay in the
 * page cache), so memory stays flat whatever the size.
 *
 * With WPACK_READ_VERIFY (or verify on read, the default) the bytes are checked
 * against the entry's checksum unless this open checked the entry before:
 * what copy_file_range wrote is read back from fd (fd must then be open
 * for reading too, else the bytes go through read and write) and hashed,
 * and what goes through read and write is hashed as it is written, so the
 * check covers exactly the bytes fd received. A mismatch returns
 * WPACK_E_CHECKSUM at the end (message naming the entry) and fd holds bad
 * bytes: the caller discards them, as with wpack_read_stream().
 *
 * A failure sets a message naming the entry (wpack_errmsg()): a write to
 * fd that failed is WPACK_E_IO with errno set; WPACK_E_INVALID_ARGUMENT for
 * fd < 0 or unknown flags, WPACK_E_NOT_FOUND for i out of range.
 */
int wpack_read_to_fd(const wpack_archive *ar, uint64_t i, int fd, unsigned flags);

/* A hint before reading the n entries (indices) whole, in this order
 * (extract, export and verify give it): an archive behind a source that
 * takes plans (wpack_open_url) then fetches them ahead, several requests
 * in flight while the caller works on earlier ones and small neighbours
 * merged into one request; its shards each get their part. Nothing
 * changes for a mapped archive or for what a read returns (every entry is
 * still checked before any byte of it is handed out). n 0 drops the plan.
 * WPACK_OK, WPACK_E_NOT_FOUND for an index out of range (no plan given),
 * WPACK_E_NOMEM. */
int wpack_read_plan(const wpack_archive *ar, const uint64_t *entries, size_t n);

/* Check entry i's bytes against its checksum once per open: the first call
 * hashes them (decodes a compressed tensor), later calls (from any thread)
 * return the remembered result: WPACK_OK, WPACK_E_CHECKSUM or
 * WPACK_E_DECODE (message naming the entry). An alias is its target's
 * check. Use it before trusting a zero-copy wpack_tensor.data pointer. */
int wpack_verify_once(const wpack_archive *ar, uint64_t i);

/* Check entry i's stored bytes against its checksum, and for a compressed
 * tensor also decode it and check the decoded bytes: WPACK_OK,
 * WPACK_E_CHECKSUM or WPACK_E_DECODE (message names the entry, expected
 * and actual). A bool tensor's bytes (or splat fill) must also all be 0 or
 * 1: WPACK_E_VALUE names the first other byte (a plain open does not
 * look at tensor values). */
int wpack_verify_entry(wpack_archive *ar, uint64_t i);
/* Verify every entry and that the padding between extents is zero. Calls
 * on_bad (if not NULL) for each failure and goes on; returns WPACK_OK or the
 * first failure's code. */
typedef void (*wpack_verify_cb)(void *user, uint64_t entry, int code, const char *message);
int wpack_verify_all(wpack_archive *ar, wpack_verify_cb on_bad, void *user);
/* The same, also calling on_entry(user, i) (if not NULL) after each entry
 * i with bytes of its own has been checked: a progress display. */
typedef void (*wpack_verify_progress_cb)(void *user, uint64_t entry);
int wpack_verify_all_progress(wpack_archive *ar, wpack_verify_cb on_bad,
                              wpack_verify_progress_cb on_entry, void *user);

/* Block dtype k < wpack_info.block_dtype_count (code WPACK_DTYPE_BLOCK_BASE + k):
 * its name, block geometry and the parameter bytes stored with it. Any output
 * pointer may be NULL (that field is not wanted). WPACK_E_NOT_FOUND past the end. */
int wpack_block_dtype_at(const wpack_archive *ar, uint64_t k, const char **name,
                         uint32_t *block_elems, uint32_t *block_bytes, const void **params,
                         uint64_t *params_len);

/* ---------------------------------------------------------------- metadata */

/* Metadata value types (spec: Metadata). */
#define WPACK_META_STRING 1
#define WPACK_META_I64 2
#define WPACK_META_F64 3
#define WPACK_META_BOOL 4
#define WPACK_META_BYTES 5
#define WPACK_META_ARRAY 6

typedef struct wpack_meta {
    const char *key;            /* NUL-terminated */
    int type;                   /* WPACK_META_* */
    int elem_type;              /* arrays: the type of every element */
    uint64_t count;             /* arrays: elements; string/bytes: bytes */
    int64_t i64;
    double f64;
    int boolean;
    const char *str;            /* string: NUL-terminated, count bytes */
    const void *bytes;          /* bytes: count bytes */
    const void *priv_;          /* private: where array elements are */
    void *reserved_ptr[2];      /* set to zero; see "Structs never change size" above */
    uint64_t reserved[4];
} wpack_meta;

uint64_t wpack_meta_count(const wpack_archive *ar);
int wpack_meta_at(const wpack_archive *ar, uint64_t i, wpack_meta *out);
int wpack_meta_find(const wpack_archive *ar, const char *key, wpack_meta *out);
/* Element j of an array value, as a scalar wpack_meta (key is the array's). */
int wpack_meta_elem(const wpack_archive *ar, const wpack_meta *array, uint64_t j,
                    wpack_meta *out);

/* ---------------------------------------------------------------- name map */

/* Other names consumers use for entries, sorted by that name. */
uint64_t wpack_namemap_count(const wpack_archive *ar);
int wpack_namemap_at(const wpack_archive *ar, uint64_t i, const char **other_name,
                     uint64_t *entry);

/* ------------------------------------------------------ calibration stats */

#define WPACK_STATS_WEIGHT 1       /* keyed by a tensor name */
#define WPACK_STATS_ACTIVATION 2   /* keyed by a module path: its output */
#define WPACK_GRAN_TENSOR 0
#define WPACK_GRAN_CHANNEL 1

/* Which per-channel value wpack_stats_value() returns. */
#define WPACK_STAT_MIN 0
#define WPACK_STAT_MAX 1
#define WPACK_STAT_ABSMAX 2
#define WPACK_STAT_MEAN 3
#define WPACK_STAT_VARIANCE 4

typedef struct wpack_stats {
    const char *key;            /* tensor name or module path */
    int kind;                   /* WPACK_STATS_* */
    int granularity;            /* WPACK_GRAN_* */
    uint32_t axis;              /* per-channel: the channel axis */
    uint32_t channels;          /* 1 for per-tensor */
    uint64_t count;             /* finite values observed */
    /* channel 0 (per-tensor: the only one), for convenience */
    double min, max, absmax, mean, variance;
    uint32_t hist_bins;         /* 0: no histogram */
    uint32_t percentile_count;
    const void *priv_[3];       /* private: values, histogram, percentiles */
    /* Over all channels (per-tensor: the same as min..variance above):
     * the least min, the greatest max and their absmax, exact; mean and
     * variance pool the channels with equal weight (the record keeps one
     * count for all channels), exact when every channel saw as many finite
     * values, as when a weight record's count is the element count. */
    double overall_min, overall_max, overall_absmax, overall_mean, overall_variance;
    void *reserved_ptr[2];      /* set to zero; see "Structs never change size" above */
    uint64_t reserved[4];
} wpack_stats;

uint64_t wpack_stats_count(const wpack_archive *ar);
int wpack_stats_at(const wpack_archive *ar, uint64_t i, wpack_stats *out);
int wpack_stats_find(const wpack_archive *ar, const char *key, int kind, wpack_stats *out);
/* One of WPACK_STAT_* for channel c < channels. */
double wpack_stats_value(const wpack_stats *s, int which, uint32_t c);
/* Histogram bin b < hist_bins: [lo, hi) and its count (the last bin is closed). */
void wpack_stats_bin(const wpack_stats *s, uint32_t b, double *lo, double *hi, uint64_t *count);
/* Percentile j < percentile_count: q in [0, 100] and its value. */
void wpack_stats_percentile(const wpack_stats *s, uint32_t j, double *q, double *value);
/* The record's arrays in one call each (a binding pays per call: one per
 * channel is thousands for a wide tensor). The caller gives each buffer and
 * its length in elements; a buffer shorter than needed is
 * WPACK_E_INVALID_ARGUMENT with nothing written, as is a NULL one (a
 * NULL buffer of length 0 is fine when nothing is needed) or a NULL s.
 * values: 5 x channels doubles, row w (WPACK_STAT_*) at values[w * channels]
 * (what wpack_stats_value() gives one at a time).
 * edges: hist_bins + 1 (bin b is [edges[b], edges[b + 1])), counts:
 * hist_bins (none without a histogram).
 * percentiles: 2 x percentile_count, (q, value) pairs. */
int wpack_stats_values(const wpack_stats *s, double *values, uint64_t len);
int wpack_stats_histogram(const wpack_stats *s, double *edges, uint64_t edges_len,
                          uint64_t *counts, uint64_t counts_len);
int wpack_stats_percentiles(const wpack_stats *s, double *percentiles, uint64_t len);

/* ------------------------------------------------------------------ writer */

typedef struct wpack_writer wpack_writer;

typedef struct wpack_writer_options {
    uint32_t alignment;         /* 0: WPACK_DEFAULT_ALIGNMENT */
    int weight_stats;           /* 1: per-tensor stats for float tensors (default via NULL options) */
    uint32_t histogram_bins;    /* >0: weight stats also get a histogram (a second read of each tensor at finish) */
    /* zstd compression (format 1.1), off when compress_level is 0 */
    int compress_level;         /* zstd level: 1..22, or negative for the fast levels */
    uint32_t compress_chunk;    /* uncompressed bytes per chunk: a power of two, 4 KiB..64 MiB (default 1 MiB; above: WPACK_E_LIMIT) */
    uint64_t compress_min;      /* tensors smaller than this are stored as they are (default 64 KiB) */
    uint32_t compress_min_saving; /* percent: a tensor is stored compressed only if it shrinks by at least this much (default 5) */
    /* >0: write a sharded set (format 1.1) in one pass: path becomes the
     * manifest, and tensor bytes go to shard files beside it,
     * "NAME-0000k-of-0000N.wpack" (NAME: path's file name without
     * ".wpack"), each holding about shard_size data bytes (a tensor is never
     * split; a bigger one gets a shard to itself). Shards are finished under
     * temporary names ("path.tmp-PID-RANDOM.shard-0000k", beside the
     * manifest's own temporary) and linked to their names when the
     * manifest is written, never over an existing file (a taken name
     * becomes "NAME-0000k-of-0000N.G.wpack", smallest free G >= 2); the
     * shards of a set at path that this one replaces are removed after the
     * manifest's rename (as for any archive written over a set, see
     * wpack_writer_open), so a crash leaves the old set or the new one
     * whole. An aborted writer removes its shards; what a killed one left
     * (its shards, or the old set's once its manifest was in place: both
     * stay linked as "path.tmp-PID-RANDOM.new-SHARD" / ".gone-SHARD" until
     * the writer is done) is removed by the next writer of path. Not with
     * compression (external entries are stored raw). Weight stats are
     * computed in each shard and copied into the manifest. */
    uint64_t shard_size;
    /* >0: the most tensor bytes (logical, before compression; splat entries
     * and aliases count nothing) the archive may hold. A tensor that would
     * pass it is refused before any of its bytes are written, with
     * WPACK_E_TOO_LARGE naming the tensor, its size and the cap (the CLI's
     * output cap against amplifying inputs, e.g. a stride-0 torch view). */
    uint64_t max_data_bytes;
    /* 1: weight stats on the portable C path even where the CPU has AVX2
     * (the same bits, slower; the CLI sets it under WPACK_ISA=scalar). */
    int portable_stats;
    /* 1: wpack_writer_write_from_fd() reads and writes instead of using
     * copy_file_range (the same bytes; the CLI sets it under
     * WPACK_NO_COPY_RANGE=1). */
    int no_copy_range;
    /* Non-NULL: the weight stats of large tensors (and their histograms at
     * finish) are computed in parallel on this executor (see
     * wpack_set_executor()), XXH3 hashing on one of its threads meanwhile;
     * the archive's bytes are the same as without it. NULL (default): all
     * on the calling thread, no thread started. *executor and the pool it
     * runs on must stay valid until wpack_writer_finish() or _abort(). */
    const wpack_executor *executor;
    /* 0 (default): the archive is durable when wpack_writer_finish()
     * returns (fsync of the file, rename, fsync of its directory). 1: do
     * not fsync the archive or its directory (nor start writeback as it is
     * written): the rename is still atomic for other processes, but after
     * a power loss or OS crash the new file may be missing, empty or torn
     * (wpack detects a torn archive at open), and the file it replaced may
     * be lost; for scratch outputs and benchmarks (`--no-sync`). Shards of
     * a sharded set alike. The in-place update (wpack_update_*) always
     * fsyncs: its order of fsyncs is its crash safety. */
    int no_sync;
    /* Zero (set by wpack_writer_options_init); see "Structs never change
     * size" above. wpack_writer_open refuses any other value. */
    void *reserved_ptr[4];
    /* (In the place of reserved[0].) Chunk checksums (format 1.2): an
     * uncompressed data tensor larger than this many bytes also gets the
     * XXH3-64 of each chunk of this size (8 bytes per chunk in the
     * index), so that a reader checks a part of it (a slice, rows for one
     * host) by hashing or fetching only the chunks that hold it; a zstd
     * tensor of more than one zstd chunk gets one per decoded zstd chunk
     * (compress_chunk). A power of two, WPACK_MIN_CHUNK ..
     * WPACK_MAX_CHUNK; wpack_writer_options_init sets
     * WPACK_DEFAULT_CHUNK_SUMS; 0: none (the archive stays 1.0/1.1). */
    uint64_t chunk_sums;
    uint64_t reserved[3];       /* zero, as reserved_ptr */
} wpack_writer_options;
/* The defaults: alignment 4096, weight stats on, no histograms, no
 * compression (but the compression defaults above filled in), chunk
 * checksums of 1 MiB chunks, reserved fields zero. */
void wpack_writer_options_init(wpack_writer_options *opt);

/*
 * Start a new archive that will appear at path when wpack_writer_finish()
 * succeeds. Bytes go to a temporary file beside it ("path.tmp-PID-RANDOM",
 * mode 0666 less the umask, or the permission bits - and, where the caller
 * may give them, the owner and group - of the regular file at path it
 * replaces, locked with flock while the writer lives); an
 * existing file at path is untouched until the final rename, and stays as
 * it was if the writer is aborted or the process dies. Temporaries of path
 * left by dead writers (killed processes) are removed here; a live
 * writer's are not. opt may be NULL. A regular file at path whose mode
 * has no write bit (chmod a-w) is write-protected: refused here with
 * WPACK_E_IO, whoever the caller is (root too); so is, at finish, the
 * replacement of a sharded set one of whose shards is write-protected
 * (nothing changed). With a long file name the
 * temporary's name is shortened (its head and extension: README, Long
 * names), so any name the file system takes is a path.
 *
 * When path holds a sharded set's manifest (one that opens whole), the
 * new archive replaces the set: once it is in place (not before: a crash
 * leaves the old set whole), the shards the old manifest named (and that
 * name that manifest's file as theirs, wpack.manifest: a copy of a
 * manifest, or another hard link to it, removes none of its original's) are
 * removed, except any file the new archive names as its own shard; a
 * writer killed after the rename leaves them linked as
 * "path.tmp-PID-RANDOM.gone-SHARD", and the next writer of path removes
 * them. A
 * caller that reads inputs should keep those shards out of them
 * (wpack_replaced_among); the CLI refuses them. When path holds a shard of
 * a set (its manifest, named by the shard's wpack.manifest, opens whole
 * and lists it), the open fails with WPACK_E_SHARD and nothing is written:
 * the manifest records the shard's length and index XXH3, and the file
 * replaced would make the whole set fail to open.
 *
 * Like the reader, *out receives a handle even on failure (for its message)
 * unless memory runs out; free a failed one with wpack_writer_abort().
 * A refused call (a bad argument, a name given twice) changes nothing and
 * the writer goes on; a failure that leaves the temporary file unfinishable
 * (a failed open or write, a tensor ended short) fails the writer: every
 * later call, finish included, returns that code and the message keeps
 * saying what broke it.
 */
int wpack_writer_open(wpack_writer **out, const char *path, const wpack_writer_options *opt);
int wpack_writer_errcode(const wpack_writer *w);
const char *wpack_writer_errmsg(const wpack_writer *w);

/* Add a whole tensor from memory. nbytes must be product(dims) x size.
 * A bool tensor's bytes (and a bool splat's fill) must each be 0 or 1:
 * anything else is WPACK_E_INVALID_ARGUMENT, and a refused call (whole,
 * streamed write or splat) changes nothing. */
int wpack_writer_add_tensor(wpack_writer *w, const char *name, int dtype, unsigned rank,
                            const uint64_t *dims, const void *data, uint64_t nbytes);
/* Stream a tensor: begin, any number of writes totalling its size, end.
 * Memory does not grow with the tensor's size. */
int wpack_writer_begin_tensor(wpack_writer *w, const char *name, int dtype, unsigned rank,
                              const uint64_t *dims);
int wpack_writer_write(wpack_writer *w, const void *data, size_t nbytes);
/* wpack_writer_write() of the nbytes at offset off of file fd (a regular
 * file, open for reading), with the same result byte for byte. data, when
 * not NULL, is those same bytes (e.g. fd mapped): the checksum and weight
 * stats read them there; NULL: they are read with pread, a cache-sized step
 * just before that step is copied (faster than reading a mapping). Where
 * the bytes go to the archive as they are (not compressed, not sharded)
 * and sit at the same offset in a 4 KiB page as in the archive, they move
 * with copy_file_range, inside the kernel (or shared, on a file system with
 * reflinks); elsewhere, or where the kernel or file system refuses it
 * (another file system, an old kernel), the step just read and hashed is
 * written (cheaper than the kernel's copy of pages that do not line up). */
int wpack_writer_write_from_fd(wpack_writer *w, const void *data, int fd, uint64_t off,
                               size_t nbytes);
int wpack_writer_end_tensor(wpack_writer *w);
/* Inside a streamed tensor: nbytes zero bytes, as a hole in the file where
 * the file system allows (stripped benchmark archives, huge test tensors).
 * Not for compressed or float-with-stats tensors' speed: those see the
 * zeros like any other bytes. */
int wpack_writer_write_zeros(wpack_writer *w, uint64_t nbytes);
/* A tensor whose every element is fill (one element of dtype). */
int wpack_writer_add_splat(wpack_writer *w, const char *name, int dtype, unsigned rank,
                           const uint64_t *dims, const void *fill, size_t fill_size);
/* An entry whose bytes live in shard archive number `shard` of a sharded
 * set, copied from that shard's entry t (its dtype, shape, offset, length
 * and checksum). The manifest must also carry the metadata arrays
 * "wpack.shards" (file names), "wpack.shard_lengths" and
 * "wpack.shard_index_xxh3" (i64 bit patterns): wpack_writer_set_shards()
 * writes them. */
int wpack_writer_add_external(wpack_writer *w, const char *name, uint32_t shard,
                              const wpack_tensor *t);
/* The shard list of a manifest: n shard file names (relative to the
 * manifest's directory), each one's file length and index checksum.
 * wpack_writer_finish refuses with WPACK_E_SHARD what a reader refuses
 * before it opens a shard (spec 19a): a name with a '/' or a control byte,
 * "." or "..", a name listed twice, the three arrays of unequal lengths,
 * an external entry's shard number past the list. */
int wpack_writer_set_shards(wpack_writer *w, uint32_t n, const char *const *names,
                            const uint64_t *lengths, const uint64_t *index_checksums);

/* name becomes a second name for target (a data or splat entry; may be added
 * later in the same writer). Checked at finish. */
int wpack_writer_add_alias(wpack_writer *w, const char *name, const char *target);
/* A block-quantized dtype: every block_elems elements along the last dim take
 * block_bytes bytes. params (may be NULL) are stored with it. Returns the
 * dtype code to use in *code. */
int wpack_writer_add_block_dtype(wpack_writer *w, const char *name, uint32_t block_elems,
                                 uint32_t block_bytes, const void *params, size_t params_len,
                                 int *code);

/* Metadata: one value per key; setting a key twice is WPACK_E_EXISTS.
 * Keys the spec defines (wpack.producer, wpack.layers, wpack.manifest,
 * wpack.module_names, the shard list: spec section 9) in another type or
 * form are refused as they are set (WPACK_E_METADATA) and fail the finish
 * too (a shard list, three keys, is checked whole there: WPACK_E_SHARD);
 * other wpack.* keys are kept as given. */
int wpack_writer_set_string(wpack_writer *w, const char *key, const char *value);
int wpack_writer_set_i64(wpack_writer *w, const char *key, int64_t value);
int wpack_writer_set_f64(wpack_writer *w, const char *key, double value);
int wpack_writer_set_bool(wpack_writer *w, const char *key, int value);
int wpack_writer_set_bytes(wpack_writer *w, const char *key, const void *value, size_t len);
/* One element of a bytes array for wpack_writer_set_array(). */
typedef struct wpack_bytes {
    const void *data;
    size_t len;
} wpack_bytes;
/* An array of count elements of elem_type: values points to int64_t[],
 * double[], int[] (bool), const char *[] (strings) or wpack_bytes[]. */
int wpack_writer_set_array(wpack_writer *w, const char *key, int elem_type, uint64_t count,
                           const void *values);

/* Record that a consumer calls entry `entry` by other_name. When `entry`
 * is no tensor but the key of activation stats (a module path), the pair
 * goes into the metadata array wpack.module_names instead (at finish; spec
 * section 9), which wpack_resolve's --annotate reads. */
int wpack_writer_add_name(wpack_writer *w, const char *other_name, const char *entry);

/* A calibration statistics record. Arrays have channels elements;
 * hist_edges has hist_bins+1, hist_counts hist_bins; percentiles are
 * (q, value) pairs. Replaces the automatic weight stats of the same key. */
typedef struct wpack_stats_in {
    const char *key;
    int kind;                   /* WPACK_STATS_* */
    int granularity;            /* WPACK_GRAN_* */
    uint32_t axis;
    uint32_t channels;          /* 1 for per-tensor */
    uint64_t count;
    const double *min, *max, *absmax, *mean, *variance;
    uint32_t hist_bins;
    const double *hist_edges;
    const uint64_t *hist_counts;
    uint32_t percentile_count;
    const double *percentiles;  /* 2 x percentile_count */
    /* Zero: start from an all-zero record ("Structs never change size"
     * above); the calls taking records refuse any other value. */
    void *reserved_ptr[2];
    uint64_t reserved[4];
} wpack_stats_in;
int wpack_writer_add_stats(wpack_writer *w, const wpack_stats_in *s);

/* Number of tensors added so far (all kinds). */
uint64_t wpack_writer_count(const wpack_writer *w);
/* Would nbytes more tensor bytes fit under opt.max_data_bytes? WPACK_OK
 * (always, without a cap), or WPACK_E_TOO_LARGE with a message (in
 * wpack_writer_errmsg) naming what, the size and the cap; the writer then
 * stays usable. begin_tensor asks this for each tensor; an importer that
 * knows its total in advance asks once, before writing anything. */
int wpack_writer_room(wpack_writer *w, const char *what, uint64_t nbytes);

/* Write the index and trailer, fsync, rename into place, fsync the directory
 * (both fsyncs skipped under opt.no_sync), and free the writer (whatever the result). On failure nothing appears at
 * path and an existing file there is untouched; the message is copied to
 * errbuf (if not NULL) before the handle goes away. */
int wpack_writer_finish(wpack_writer *w, char *errbuf, size_t errlen);
/* Discard everything: remove the temporary file, free the writer. */
void wpack_writer_abort(wpack_writer *w);

/*
 * Two-phase finish, for a caller that puts the archive in place together
 * with other files (wpack_externalize_file: the archive, then the MLIR that
 * names it by its index checksum). wpack_writer_prepare() does everything
 * wpack_writer_finish() does but the rename: the archive is complete and
 * durable (fsynced, unless opt.no_sync) in its temporary file, still locked, which
 * wpack_writer_prepared_path() names (open it to read the archive back).
 * On failure the writer is in a failed state (its message in
 * wpack_writer_errmsg()): abort it. After a successful prepare only
 * wpack_writer_prepared_path(), wpack_writer_commit() and
 * wpack_writer_abort() are valid (everything else is WPACK_E_STATE).
 * wpack_writer_commit() renames the prepared file over path, fsyncs the
 * directory and frees the writer whatever the result; when the rename fails
 * nothing changed at path (the message is copied to errbuf if not NULL).
 * wpack_writer_commit() on a writer that was not prepared is
 * wpack_writer_finish().
 */
int wpack_writer_prepare(wpack_writer *w);
const char *wpack_writer_prepared_path(const wpack_writer *w);
/* The file the commit replaces: the path given to wpack_writer_open, or,
 * when that was a symlink, its target (the writer writes through links of
 * the caller's; README: What is at OUT). NULL for a NULL writer. */
const char *wpack_writer_target_path(const wpack_writer *w);
int wpack_writer_commit(wpack_writer *w, char *errbuf, size_t errlen);

/* The files an archive written at path removes once committed: the shards
 * of the sharded set whose manifest is at path now, as opened (paths beside
 * the manifest). Nothing there, a single archive or a set that does not
 * open whole: WPACK_OK with *n = 0. *paths is n malloc'd strings in a
 * malloc'd array (NULL when n is 0): free it with wpack_paths_free(). */
int wpack_replaced_shards(const char *path, char ***paths, uint32_t *n);
void wpack_paths_free(char **paths, uint32_t n);
/* Whether an archive written at path would remove one of files[0..n): *hit
 * is the index of the first that is one of wpack_replaced_shards(path),
 * compared by device and inode (any name of the file counts; a file that
 * does not exist or a NULL entry is none), or n. WPACK_OK, WPACK_E_NOMEM,
 * WPACK_E_INVALID_ARGUMENT (NULL path or hit, NULL files with n > 0). */
int wpack_replaced_among(const char *path, const char *const *files, size_t n, size_t *hit);
/* Whether the open file fd is one that w replaces when it finishes: the
 * file at w's path when w was opened (a symlink's target), or a shard of
 * the set there (wpack_replaced_shards). The importers ask it of every file
 * they open, so a file an input names (a safetensors index's shard, a raw
 * manifest's data file) is refused as an output (WPACK_E_SAME_FILE), as the
 * CLI refuses the inputs themselves. 1 yes, 0 no (or unknown: fd not open,
 * out of memory). */
int wpack_writer_replaces_fd(wpack_writer *w, int fd);

/* -------------------------------------------------- in-place index update */

/*
 * Change the index of an existing archive file in place, without rewriting
 * its data (spec 14, In-place update protocol): calibration statistics,
 * metadata strings and name-map names. A session holds an exclusive lock
 * (flock) on the file from begin to commit; only one updater runs at a time.
 * A file replaced at path while begin waited for the lock (the CLI's
 * convert/cast --in-place hold it until their rename) is not updated: begin
 * starts again on the file now at path.
 * Commit writes a new index generation holding only the live records, where
 * it overlaps nothing the current generation uses, fsyncs, then rewrites the
 * 128-byte superblock and fsyncs. Killed at any moment, the file opens as
 * the old archive or the new one. The file never shrinks, and the space of
 * superseded generations is reused: the part after the data region stays
 * below three times the largest index generation.
 *
 * Readers need no lock: an open handle keeps working across updates (it
 * maps only the data region, which updates never touch, and holds its own
 * copy of the index). Replacing an archive by any other means while it is
 * open (truncating it, `cp` over it, rewriting its data) makes a process
 * that mapped it fault (SIGBUS) on its next access to the data: write a new
 * file and rename() it over the old one, as wpack_writer_finish() does.
 *
 * Every edit is checked at commit by the reader's own validation of the new
 * index (a weight stats key must name a tensor, values must be consistent,
 * strings valid UTF-8, ...); nothing is written when a check fails. Calls
 * return WPACK_OK or a code with a message in wpack_update_errmsg(); a
 * failed edit call leaves the session as it was.
 */
typedef struct wpack_update wpack_update;

#ifdef WPACK_TEST_HOOKS
/* Test hook, in test builds only (compiled with WPACK_TEST_HOOKS; a released
 * library refuses every flag with WPACK_E_INVALID_ARGUMENT): commit returns
 * WPACK_E_IO right after the new generation is written and synced, before
 * the superblock names it, as if killed there. */
#define WPACK_UPDATE_STOP_AFTER_APPEND 1u
#endif

/* Lock and open the archive at path. *out always receives a session (NULL
 * only when memory runs out); on failure only wpack_update_errmsg() and
 * wpack_update_abort()/commit() (which fails) may be used. errbuf (may be
 * NULL) receives the message. A previous update that stopped between its
 * two steps is committed first. flags: 0 (others are test hooks).
 * WPACK_E_SHARD: path is a shard of a sharded set whose manifest (named by
 * the shard's `wpack.manifest`, beside it) lists it now; the manifest
 * records the shard's length and index XXH3, so changing it would make the
 * whole set fail to open. Update the manifest instead. WPACK_E_IO: path
 * is write-protected (no write bit in its mode, chmod a-w; root too). */
int wpack_update_begin(wpack_update **out, const char *path, unsigned flags, char *errbuf,
                       size_t errlen);
/* Add a stats record, or replace the archive's record of the same key and
 * kind. The arrays are copied. Given again in one session, the later wins. */
int wpack_update_set_stats(wpack_update *u, const wpack_stats_in *s);
/* Drop the archive's stats record of key and kind (WPACK_STATS_*; 0: both
 * kinds). WPACK_E_NOT_FOUND when it has none. A record set in the same
 * session is kept. */
int wpack_update_drop_stats(wpack_update *u, const char *key, int kind);
/* Set metadata key to a string value (added, or replacing any value). */
int wpack_update_set_string(wpack_update *u, const char *key, const char *value);
/* Record that consumers call entry `entry` other_name (added, or replacing
 * the entry other_name named). WPACK_E_EXISTS if other_name is an entry
 * name, WPACK_E_NOT_FOUND if entry is not one. */
int wpack_update_add_name(wpack_update *u, const char *other_name, const char *entry);
const char *wpack_update_errmsg(const wpack_update *u);
/* Write the new generation (see above) and end the session, whatever the
 * result; errbuf (may be NULL) receives the message. */
int wpack_update_commit(wpack_update *u, char *errbuf, size_t errlen);
/* End the session without writing anything. NULL is a no-op. */
void wpack_update_abort(wpack_update *u);

/* One-call form: begin, set each record (a key and kind given twice is
 * WPACK_E_EXISTS), commit. */
int wpack_update_add_stats(const char *path, const wpack_stats_in *records, size_t count,
                           char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* WPACK_H */
