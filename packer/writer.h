/* writer.h - the writer handle, shared by the writer's files: writer.c
 * (life cycle), writer_buffer.c (output), writer_tensor.c (entries),
 * writer_meta.c (metadata, name map, stats), writer_index.c (the index at
 * finish), writer_shards.c (sharded sets) and compress.c. */
#ifndef WPACK_PACKER_WRITER_H
#define WPACK_PACKER_WRITER_H

#include <stdint.h>

#include "atomic_file.h"
#include "buf.h"
#include "internal.h"
#include "layout.h"
#include "nameset.h"
#include "weightstats.h"

/* A string in the pool: NUL-terminated bytes at off. */
typedef struct {
    uint64_t off;
    uint32_t len;
} wpk_str_ref;

typedef struct wpk_compressor wpk_compressor;
typedef struct wpk_shard_set wpk_shard_set;

typedef struct {
    wpk_str_ref name;
    uint8_t kind, dtype, rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint64_t offset, stored, checksum;
    uint64_t nbytes;               /* logical size (stored differs when compressed) */
    uint64_t aux_off, aux_len;     /* splat fill; zstd: decoded checksum + seek table */
    uint8_t codec, chunk_log2;
    uint8_t sums_log2;             /* chunk checksums (writer_sums.c): chunk size log2, 0: none */
    uint64_t sums_off;             /* their aux offset */
    uint32_t shard;                /* external: shard number */
    wpk_str_ref target;            /* alias: target name */
    uint64_t sorted;               /* position in name order (at finish) */
    int has_acc;                   /* float data: auto weight stats */
    wpk_acc acc;
} wpk_pending_entry;

typedef struct {
    wpk_str_ref key;
    uint8_t type, elem;
    uint64_t value, count;
} wpk_pending_meta;

typedef struct {
    wpk_str_ref name, entry;
} wpk_pending_name;

typedef struct {
    wpk_str_ref key;
    uint8_t kind, gran;
    uint32_t axis, channels, bins, pcts;
    uint64_t count, values_off, hist_off, pct_off; /* aux offsets */
} wpk_pending_stats;

typedef struct {
    wpk_str_ref name;
    uint32_t block_elems, block_bytes;
    uint64_t params_off, params_len;
} wpk_pending_dtype;

struct wpack_writer {
    char *path;
    wpk_atomic out;                /* the temporary file beside path (atomic_file.h) */
    char *shown;                   /* how messages name the output: the caller's path (not
                                    * the temporary's), "OUT (shard N)" for a shard */
    int fd;                        /* out.fd */
    int failed;                    /* a write failed: only abort/finish-with-error remain */
    int errcode;
    char errmsg[600];
    wpack_writer_options opt;

    uint64_t pos;                  /* bytes written to the temp file */
    uint64_t data_bytes;           /* tensor bytes begun so far (opt.max_data_bytes) */
    uint64_t kicked;               /* writeback started up to here (sync_file_range) */
    uint8_t *obuf;                 /* output buffer */
    size_t olen;

    wpk_buf strings, aux;
    wpk_buf entries;               /* wpk_pending_entry[] */
    wpk_buf meta, names, stats, dtypes;
    wpk_nameset entry_set, meta_set, name_set;

    /* the tensor being streamed */
    int in_tensor;
    uint64_t cur_expected, cur_written;
    wpk_hasher *hasher;
    /* chunk checksums of the tensor being streamed (writer_sums.c) */
    uint8_t sums_log2;             /* opt.chunk_sums as log2; 0: none */
    uint8_t cur_log2;              /* the tensor's: sums_log2, or its zstd chunk's */
    int cur_sums_on, sums_nomem;
    wpk_hasher *chunk_hasher;
    uint64_t chunk_fill;           /* bytes of the current chunk hashed so far */
    wpk_buf cur_sums;              /* the tensor's chunk sums so far, u64 LE each */
    uint8_t carry[8];              /* a partial element between writes, for stats */
    size_t carry_len;
    int stats_isa;                 /* wpk_acc_isa, asked once at open */
    wpk_compressor *zc;            /* zstd state, NULL until the first compressed tensor */
    wpk_shard_set *shards;         /* opt.shard_size: this is a manifest (writer_shards.c) */
    char **replaced;               /* the shards of the set at path now: go with the commit */
    uint32_t nreplaced;
    struct wpk_file_id *replaces;  /* wpack_writer_replaces_fd: the target and its set's shards, */
    uint32_t nreplaces;            /* by device and inode, listed at the first question */
    int replaces_known;
    int prepared;                  /* wpack_writer_prepare done: commit or abort (writer_commit.c) */
    int copy_refused;              /* copy_file_range refused once: read/write from then on */
    struct wpk_copy_in *copy_in;   /* set by writer_copy.c around wpk_tensor_take */
    uint8_t *copy_buf;             /* writer_copy.c's read buffer (NULL until needed) */
    size_t copy_buf_len;
};

/* Bytes of the piece being taken that also go to the file with
 * copy_file_range from fd at off: the parallel path (writer_par.c) copies
 * each step while the other threads compute its stats, and sets used. */
typedef struct wpk_copy_in {
    int fd;
    uint64_t off;
    int rc, used;
} wpk_copy_in;
/* Bytes [off, off+n) of fd to the temp file at w->pos (src: the same
 * bytes, for the read/write fallback) (writer_copy.c). */
int wpk_copy_out(wpack_writer *w, int fd, uint64_t off, const uint8_t *src, size_t n);

/* Refuse a call: set the writer's code and message and return the code.
 * A failed writer keeps the code and message of what broke it: later
 * refused calls return that code and leave the message. */
int wpk_wfail(wpack_writer *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* wpk_wfail, then the writer is failed (the temporary file cannot be
 * finished): only abort, or finish with this error, remain. */
int wpk_wbreak(wpack_writer *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The output buffer; fuzz builds lower it (fuzz/fuzz.mk FUZZ_LIMITS): under
 * ASan each 1 MiB allocation is a fresh mmap whose page faults dominated a
 * round-trip fuzz run, and a small buffer exercises the flush paths more. */
#ifndef WPK_WRITER_OBUF_SIZE
#define WPK_WRITER_OBUF_SIZE (1u << 20)
#endif

/* The caller's executor when it has 2+ threads, else NULL (writer_par.c). */
const wpack_executor *wpk_par_executor(const wpack_writer *w);
/* On opt.executor (writer_par.c), 0 when there is none or n is small (the
 * caller then does it alone): hash the n bytes at p, and feed the stats
 * the `whole` elements that start `pre` bytes in, as one piece. */
int wpk_par_hash_stats(wpack_writer *w, wpk_pending_entry *e, const uint8_t *p, size_t n,
                       size_t pre, size_t whole);
/* wpk_hist_feed on opt.executor, adding into counts; 0 when not done. */
int wpk_par_hist_feed(wpack_writer *w, uint64_t *counts, uint32_t bins, double lo, double hi,
                      int dtype, const void *data, size_t count);

/* WPACK_OK when the writer takes calls: not failed, no tensor open. */
int wpk_writer_usable(wpack_writer *w);
/* WPACK_OK for a name or key the format takes, else a refusal naming it
 * (what, then the name escaped): checked before any message quotes it raw. */
int wpk_name_ok(wpack_writer *w, const char *s, const char *what);
/* Intern a checked name or key (what: for the message) into the pool. */
int wpk_pool_name(wpack_writer *w, const char *s, const char *what, wpk_str_ref *ref);
/* Name-set callbacks (nameset.h): entry names, metadata keys, name-map names. */
const uint8_t *wpk_entry_name_of(void *ctx, uint64_t i, uint64_t *len);
const uint8_t *wpk_meta_key_of(void *ctx, uint64_t i, uint64_t *len);
const uint8_t *wpk_map_name_of(void *ctx, uint64_t i, uint64_t *len);
/* At finish: name-map names whose target is a module path go into the
 * metadata array wpack.module_names (writer_meta.c). */
int wpk_module_names_finish(wpack_writer *w);
/* At finish, for a manifest (an archive with external entries): its shard
 * list as a reader checks it before opening any shard (spec 19a): the three
 * arrays, names a reader takes, no name twice. *n gets the shard count. */
int wpk_check_shard_list(wpack_writer *w, uint64_t *n);
/* The record of metadata key `key`, or NULL (linear: at finish the records
 * are sorted, which the writer's key hash set does not follow; writer_meta.c). */
const wpk_pending_meta *wpk_meta_named(const wpack_writer *w, const char *key);
/* The j-th string of a string-array metadata record and its length (len may
 * be NULL); the string is NUL-terminated in the writer's pool. */
const char *wpk_meta_elem_str(const wpack_writer *w, const wpk_pending_meta *m, uint64_t j,
                              size_t *len);
/* The metadata keys the spec defines, as readers take them (wpack.producer,
 * wpack.layers, wpack.manifest strings; wpack.module_names pairs; a shard
 * list whole when any of its keys is set: *shards its length, else 0):
 * WPACK_OK, or WPACK_E_METADATA / WPACK_E_SHARD, w failed (reserved_meta.c). */
int wpk_check_reserved_meta(wpack_writer *w, uint64_t *shards);
/* The same rules for one key, as it is set (a caller learns of a bad
 * value then, not after streaming every tensor); the shard list, set as
 * three keys, is checked whole at finish only. */
int wpk_check_reserved_key(wpack_writer *w, const char *key);

/* wpack_writer_open with wpk_atomic_open flags (WPK_ATOMIC_NO_SWEEP: a
 * shard of a set, whose name is already its manifest writer's own). */
int wpk_writer_open_flags(wpack_writer **out, const char *path, const wpack_writer_options *opt,
                          unsigned atomic_flags);

/* writer.c's finish steps, for writer_commit.c: everything up to a durable,
 * complete temporary file (index, trailer, fsync; shards renamed); and
 * freeing the handle (remove_shards: a set's shards too). */
int wpk_writer_finish_file(wpack_writer *w);
void wpk_writer_free(wpack_writer *w, int remove_shards);

static inline wpk_pending_entry *wpk_entries(wpack_writer *w)
{
    return (wpk_pending_entry *)(void *)w->entries.p;
}

static inline uint64_t wpk_entry_count(const wpack_writer *w)
{
    return w->entries.len / sizeof(wpk_pending_entry);
}

static inline const char *wpk_pool_str(const wpack_writer *w, wpk_str_ref r)
{
    return (const char *)w->strings.p + r.off;
}

/* opt.max_data_bytes: may `what` add nbytes more tensor bytes? WPACK_OK,
 * or WPACK_E_TOO_LARGE with a message naming what, the size and the cap.
 * begin_tensor asks it for each tensor; an importer that knows its total
 * in advance asks it once before writing anything. */
int wpk_writer_room(wpack_writer *w, const char *what, uint64_t nbytes);

/* Account nbytes of the streamed tensor e (not sharded): the size check,
 * the checksum and the weight stats; the caller then stores the bytes. */
int wpk_tensor_take(wpack_writer *w, wpk_pending_entry *e, const void *data, size_t nbytes);

/* Chunk checksums (writer_sums.c): check opt.chunk_sums at open; begin a
 * tensor of nbytes whose chunks are 2^log2 bytes (sums_log2, or the zstd
 * chunk of a tensor being compressed: then its decoded chunks); hash bytes of the tensor being streamed into its XXH3
 * and its chunk sums (every byte of a data tensor goes through here once,
 * in order); at its end (after compression decided its codec), put its
 * sums into the aux pool when it is stored uncompressed. */
int wpk_sums_option(wpack_writer *w);
void wpk_sums_begin(wpack_writer *w, uint64_t nbytes, unsigned log2);
void wpk_tensor_hash(wpack_writer *w, const void *data, size_t n);
int wpk_sums_end(wpack_writer *w, wpk_pending_entry *e);

/* Start writeback of what is written up to written_to (every 32 MiB). */
void wpk_out_kick(wpack_writer *w, uint64_t written_to);

/* Write bytes / zeros to the temp file through the output buffer. */
int wpk_out(wpack_writer *w, const void *p, size_t n);
int wpk_out_zeros(wpack_writer *w, uint64_t n);
int wpk_out_flush(wpack_writer *w);

/* zstd compression of the tensor being streamed (compress.c). begin
 * decides whether this tensor is compressed; write takes its bytes (instead
 * of wpk_out); end flushes the last chunk and either keeps the compressed
 * form (codec, aux, checksum set on e) or rewrites it raw in place when it
 * saved too little. */
int wpk_compress_begin(wpack_writer *w, wpk_pending_entry *e);
int wpk_compress_active(const wpack_writer *w);
/* log2 of the zstd chunk size of the tensor being compressed. */
unsigned wpk_compress_chunk_log2(const wpack_writer *w);
int wpk_compress_write(wpack_writer *w, const uint8_t *p, size_t n);
int wpk_compress_end(wpack_writer *w, wpk_pending_entry *e, uint64_t decoded_checksum);
void wpk_compress_free(wpk_compressor *zc);
/* Read bytes [off, off+n) of a finished entry's logical data back from the
 * temp file, decoding if it is compressed (for histograms). */
int wpk_read_back(wpack_writer *w, const wpk_pending_entry *e, uint64_t off, void *dst, size_t n);

/* Build and write index + trailer + superblock (writer_index.c). */
int wpk_write_index(wpack_writer *w);

/* WPACK_OK, or WPACK_E_IO (w failed, naming it) when a shard of the set
 * w replaces (w->replaced) is write-protected (wpk_atomic_writable): a
 * user's chmod a-w keeps it, as it keeps the manifest (replaced_set.c). */
int wpk_replaced_writable(wpack_writer *w);

/* WPACK_OK, or WPACK_E_SHARD (w failed, naming the set) when the file at
 * w->path is now a shard of a set (shard_of.h): replaced, it would leave
 * that set's manifest failing to open, its data unreachable; or
 * WPACK_E_NOMEM (replaced_set.c). */
int wpk_refuse_shard_target(wpack_writer *w);

/* Before the commit, the archive complete in its temporary: tie the shards
 * of the set it replaces (w->replaced) to its rename, so that they go once
 * it is in place (atomic_file.h, wpk_atomic_add_gone), except files the
 * new archive is or names as its shards (replaced_set.c). */
int wpk_tie_replaced(wpack_writer *w);

#endif
