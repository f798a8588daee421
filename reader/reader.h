/* reader.h - the archive handle and the validation steps of wpack_open_*. */
#ifndef WPACK_READER_H
#define WPACK_READER_H

#include <pthread.h>
#include <stdint.h>

#include "internal.h"
#include "layout.h"

struct wpack_archive {
    /* A caller's buffer: all of it. A file: a read-only map of [0, data
     * region end) only; the index is read into index_buf with pread, so a
     * file that an in-place update rewrites past the data (spec 14) never
     * faults or changes under an open handle. */
    const uint8_t *base;
    uint64_t len;               /* bytes addressable at base */
    void *map;                  /* mmap to undo, or NULL */
    size_t map_len;
    int fd;                     /* the file, while wpack_open_file runs; else -1 */
    uint64_t file_dev, file_ino; /* a file's identity (read_fd.c reopens it by path) */
    uint64_t file_size;         /* L: the file's (or buffer's) size at open */
    uint8_t *index_buf;         /* a file's index, read at open (owned: wpk_index_free) */
    uint64_t index_buf_len;
    uint8_t super[128];         /* the superblock as read */
    uint8_t head[128];          /* the header in force: the superblock, or the trailer of rule 4.1 */

    int errcode;
    char errmsg[600];
    pthread_mutex_t err_lock;   /* verify may report from several threads */

    char *path;                 /* wpack_open_file's path (shards are relative to it) */
    struct wpack_archive **shards;
    uint32_t nshards;
    char **shard_paths;

    wpack_info info;
    const uint8_t *index;       /* base + info.index_offset */
    const uint8_t *sec[WPK_SECTION_COUNT];
    uint64_t sec_len[WPK_SECTION_COUNT];
    uint64_t dims_count;

    /* The WPACK_OPEN_* flags given at open (shards.c: FOLLOW_LINKS; read.c:
     * VERIFY_READS), and for verify on read per entry 0 (not checked yet), 1
     * (its bytes matched their checksum) or the error code found. */
    unsigned flags;
    _Atomic unsigned char *checked;
    struct wpk_chunk_cache *cache;  /* zstd decoding: chunk cache, contexts, executor (decode.c) */
    /* wpack_open_source's source (src.read NULL: none), and the code of its
     * last failed read during open (its message is in errmsg). */
    wpack_source src;
    int src_rc;
    struct wpk_kept *kept;      /* the last entry fetched whole from a source (source.c) */
    struct wpk_chunk_marks *marks; /* mapped chunks found good by their checksums (chunk_sums.c) */
};

/* Archive bytes come through a caller's source with no mapping: no views;
 * entries are fetched whole and checked, but for unverified partial reads
 * (source.c). */
static inline int wpk_unmapped(const wpack_archive *ar)
{
    return !ar->base && ar->src.read;
}

/* Set the handle's error and return code. */
int wpk_fail(wpack_archive *ar, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Read [off, off + n) of the archive into dst: from the caller's buffer, or
 * with pread from the file being opened. 0 when the bytes are not there (a
 * file that shrank since its fstat: never a fault). */
int wpk_read_at(wpack_archive *ar, uint64_t off, uint64_t n, void *dst);

/* 1 when the n bytes at off are zero, 0 when not, -1 when not readable
 * (header.c). */
int wpk_zero_range(wpack_archive *ar, uint64_t off, uint64_t n);
/* The same for padding between extents: from an unmapped source in one
 * request (source.c). */
int wpk_padding_zero(wpack_archive *ar, uint64_t off, uint64_t n);

/* Entry t's stored bytes (n = t->stored_length) from an unmapped archive
 * (or its shard) into dst, checked against t->checksum: a mismatch is
 * fetched once more, then WPACK_E_CHECKSUM. Failures set a message naming
 * the tensor (source.c). */
int wpk_fetch_stored(const wpack_archive *ar, const wpack_tensor *t, uint8_t *dst);
/* The same into a block of *cap >= n + 1 bytes (*out: the handle's spare
 * or a new malloc'd block; freed by the caller or kept, source.c). */
int wpk_fetch_stored_new(const wpack_archive *ar, const wpack_tensor *t, uint8_t **out,
                         size_t *cap);

/* The per-handle keep of the last entry fetched whole and checked (so
 * that the partial reads that follow it do not fetch it again): made by
 * wpk_reads_init, released by wpk_reads_free (source.c). */
int wpk_kept_new(wpack_archive *ar);
void wpk_kept_free(wpack_archive *ar);

/* Memory for n bytes of a file's index, and its release. */
uint8_t *wpk_index_alloc(uint64_t n);
void wpk_index_free(uint8_t *p, uint64_t n);

/* Step 1: superblock, trailer, regions (fills ar->info, super, head; for a
 * file also reads the index into index_buf). */
int wpk_check_header(wpack_archive *ar);
/* An updater's candidate: head (the next generation's superblock) and its
 * index, validated as open would validate them, against the open archive
 * old (same file, same data). WPACK_OK, or a code and msg. */
int wpk_check_candidate(const wpack_archive *old, const uint8_t *head, const uint8_t *index,
                        char *msg, size_t msglen);
/* Step 2: the whole index. */
int wpk_check_index(wpack_archive *ar);

/* Record i of a section (no bounds check: callers pass validated i). */
static inline const uint8_t *wpk_rec(const wpack_archive *ar, int sec, uint64_t i, uint32_t size)
{
    return ar->sec[sec] + i * size;
}

/* A string of the strings section, validated at open. */
static inline const char *wpk_str(const wpack_archive *ar, uint64_t off)
{
    return (const char *)ar->sec[WPK_SEC_STRINGS] + off;
}

/* Compare a (p, n) name with entry name bytes, bytewise then by length. */
int wpk_name_cmp(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen);

/* Bytes per element (or per block) and elements per block of a dtype. */
int wpk_dtype_unit(const wpack_archive *ar, int dtype, uint64_t *unit_bytes, uint64_t *block_elems);

/* Fill a wpack_tensor from validated entry i. */
void wpk_fill_tensor(const wpack_archive *ar, uint64_t i, wpack_tensor *t);

/* Binary search over sorted records of a section by their name field at
 * offset 0 (u64 off) and 8 (u32 len). Returns 1 and *pos on a hit, else 0
 * and *pos = insertion point. */
int wpk_search(const wpack_archive *ar, int sec, uint32_t rec_size, uint64_t count,
               const uint8_t *key, uint64_t key_len, uint64_t *pos);

/* Validation helpers (index.c), each setting the handle's error. */
int wpk_all_zero(const uint8_t *p, uint64_t n);
int wpk_string_ref(wpack_archive *ar, uint64_t off, uint64_t len, const char *what,
                   const uint8_t **out);
int wpk_name_ref(wpack_archive *ar, uint64_t off, uint64_t len, const char *what,
                 const uint8_t **out);
int wpk_aux_ref(wpack_archive *ar, uint64_t off, uint64_t len, const char *what);
int wpk_order_check(wpack_archive *ar, const uint8_t *prev, uint64_t prev_len,
                    const uint8_t *cur, uint64_t cur_len, const char *what);
int wpk_check_meta(wpack_archive *ar);
/* A sharded set's manifest: open and cross-check every shard (shards.c). */
int wpk_check_shards(wpack_archive *ar);
/* wpack_open_file of name relative to dirfd (path: its name for messages
 * and ar->path), opened with wpk_open_input(input_flags). */
int wpk_open_at(wpack_archive **out, int dirfd, const char *name, const char *path,
                unsigned flags, unsigned input_flags);
void wpk_close_shards(wpack_archive *ar);
/* A zstd entry's codec_param, aux (decoded checksum + seek table) and
 * stored length agree with its logical size (decode.c). */
int wpk_check_seek_table(wpack_archive *ar, const char *q, uint32_t chunk_log2, uint64_t nbytes,
                         uint64_t stored, uint64_t aux_off, uint64_t aux_len);
/* A piece of an entry's logical bytes handed out in order; non-zero stops. */
typedef int (*wpk_piece_fn)(void *user, const void *p, size_t n);
/* Logical bytes are handed out in pieces of at most WPK_PIECE bytes. */
#define WPK_PIECE (1u << 20)
/* A zstd entry's logical bytes to fn, each chunk decoded once, a batch of
 * chunks at a time in parallel on the archive's executor (decode.c). */
int wpk_stream_zstd(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes, wpk_piece_fn fn,
                    void *user);
/* Bytes [offset, +n) of a zstd entry record: only the chunks holding them. */
int wpk_read_zstd(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes, uint64_t offset,
                  void *dst, size_t n);
/* The same two with the entry's stored bytes at stored (fetched from an
 * unmapped archive) instead of in the mapping. */
int wpk_stream_zstd_in(const wpack_archive *ar, const uint8_t *rec, const uint8_t *stored,
                       uint64_t nbytes, wpk_piece_fn fn, void *user);
int wpk_read_zstd_in(const wpack_archive *ar, const uint8_t *rec, const uint8_t *stored,
                     uint64_t nbytes, uint64_t offset, void *dst, size_t n);
/* The stored bytes [*from, *to) of the chunks that hold logical bytes
 * [offset, +n) (n > 0, in bounds) of a validated zstd entry; and the read
 * of those bytes from part, which holds just them (part[0] is stored byte
 * part_off): a partial read fetches its chunks only. */
void wpk_zstd_stored_span(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes,
                          uint64_t offset, size_t n, uint64_t *from, uint64_t *to);
int wpk_read_zstd_part(const wpack_archive *ar, const uint8_t *rec, const uint8_t *part,
                       uint64_t part_off, uint64_t nbytes, uint64_t offset, void *dst, size_t n);
/* Entry t's bytes must be fetched (an unmapped archive or shard), and its
 * bytes [offset, +n) or all of them in pieces, fetched, checked, decoded. */
int wpk_needs_fetch(const wpack_archive *ar, const wpack_tensor *t);
int wpk_source_read(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset, void *dst,
                    size_t n);
int wpk_source_stream(const wpack_archive *ar, const wpack_tensor *t, wpk_piece_fn fn, void *user);
/* Bytes [offset, +n) of t with verification: always from a fetch of the
 * whole entry checked against its XXH3 (the kept one, or a new fetch,
 * streamed when larger than the source's window), never from a ranged
 * fetch of only those bytes, which nothing could check. */
int wpk_source_read_checked(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset,
                            void *dst, size_t n);
/* The entry whose bytes t shows: an alias shows its target's. */
static inline uint64_t wpk_owner_of(const wpack_tensor *t)
{
    return t->kind == WPACK_KIND_ALIAS ? t->alias_target : t->index;
}

/* The record of that entry: its codec, seek table, chunk sums, shard. */
static inline const uint8_t *wpk_owner_rec(const wpack_archive *ar, const wpack_tensor *t)
{
    return wpk_rec(ar, WPK_SEC_ENTRIES, wpk_owner_of(t), WPK_ENTRY_SIZE);
}

/* The shard slot of entry t's stored bytes (an alias's target decides);
 * UINT32_MAX when they are in ar itself (source.c). */
uint32_t wpk_shard_slot(const wpack_archive *ar, const wpack_tensor *t);
/* The archive holding entry t's stored bytes: ar, or the shard of an
 * external entry (an alias's target decides). NULL when there is none
 * (source.c). */
const wpack_archive *wpk_holder(const wpack_archive *ar, const wpack_tensor *t);
/* "tensor 'NAME'" for a message, with " (shard PATH)" after it when t's
 * bytes are in a shard of a set: a damaged byte of a 500 GB set is then
 * one file to fetch again, not a search (read.c). len >= 64. */
void wpk_entry_label(const wpack_archive *ar, const wpack_tensor *t, char *buf, size_t len);
/* A check's failures, each setting the message naming the entry and
 * remembering the result (read.c): bytes that hash to got; a read or
 * decode that failed with rc; a failure found before (rc). */
int wpk_bad_hash(const wpack_archive *ar, const wpack_tensor *t, uint64_t got);
int wpk_read_failed(const wpack_archive *ar, const wpack_tensor *t, int rc);
int wpk_failed_before(const wpack_archive *ar, const wpack_tensor *t, int rc);
/* Entry t's check mark: WPACK_OK (passed), -1 (not checked yet), or the
 * error its bytes were found with. Bytes found bad are refused by every
 * call that hands them out, verifying or not: that error, reported again
 * (wpk_failed_before); a splat (its fill is checked at open) is WPACK_OK. */
int wpk_known_check(const wpack_archive *ar, const wpack_tensor *t);
/* Stream entry i's logical bytes to fn (may be NULL). With WPK_CHECK_HASH
 * hash them and check the hash against the entry's (decoded) checksum,
 * remembering the result; with WPK_CHECK_BOOL a bool tensor's bytes must
 * also be 0 or 1 (WPACK_E_VALUE). A failure to read or a mismatch sets a
 * message naming the entry (WPACK_E_CHECKSUM, WPACK_E_DECODE, ...); what fn
 * returns to stop is returned as is. */
#define WPK_CHECK_HASH 1
#define WPK_CHECK_BOOL 2
#define WPK_CHECK_SUMS 4 /* with HASH: every chunk checksum too (verify) */
int wpk_check_stream(const wpack_archive *ar, uint64_t i, wpk_piece_fn fn, void *user, int mode);
/* Chunk checksums of an uncompressed data entry (spec 19b, chunk_sums.c):
 * one XXH3-64 per chunk of 2^log2 of its stored bytes, in the aux section. */
typedef struct {
    uint32_t log2;
    int codec;                  /* 0: of stored bytes; 1 (zstd): of decoded chunks */
    uint64_t count, stored;     /* stored: the bytes the chunks cut (zstd: logical) */
    const uint8_t *at;          /* count u64 LE sums */
} wpk_sums;
/* The archive's chunk sums are in force (minor >= 2, optional bit 0). */
int wpk_sums_in_force(const wpack_archive *ar);
/* At open: a data entry's chunk size and sums range are valid. */
int wpk_sums_check_ref(wpack_archive *ar, const char *q, uint32_t log2, uint64_t stored,
                       uint64_t off);
/* 1 and *s when validated record rec of ar has chunk sums, else 0. */
int wpk_entry_sums(const wpack_archive *ar, const uint8_t *rec, wpk_sums *s);
/* 1 and *s, *holder when t's bytes (its target's, its shard's) have them. */
int wpk_sums_of(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive **holder,
                wpk_sums *s);
/* Bytes [offset, +n) of t checked by the chunks holding them: in the
 * mapping at data (t's stored bytes), or fetched from holder's source into
 * dst (a chunk that fails is fetched once more). A mismatch is
 * WPACK_E_CHECKSUM naming the tensor and the chunk, remembered for t. */
int wpk_sums_check_mapped(const wpack_archive *ar, const wpack_tensor *t, const wpk_sums *s,
                          const uint8_t *data, uint64_t offset, size_t n);
int wpk_sums_fetch(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *holder,
                   const wpk_sums *s, uint64_t offset, void *dst, size_t n);
/* Bytes [offset, +n) of a zstd entry with chunk sums: only the chunks
 * holding them decoded (fetched: only their stored bytes, fetched once
 * more when one fails), each checked against its sum before any of it is
 * copied out. WPACK_E_CHECKSUM / WPACK_E_DECODE name the tensor. */
int wpk_sums_read_zstd(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *holder,
                       const wpk_sums *s, uint64_t offset, void *dst, size_t n);
/* Every chunk of a stream of t's bytes checked as they pass (verify). */
typedef struct {
    wpk_sums s;
    wpk_hasher *h;
    uint64_t k, fill, bad, got;
} wpk_sums_cursor;
void wpk_sums_cursor_init(wpk_sums_cursor *c, const wpk_sums *s, wpk_hasher *h);
void wpk_sums_cursor_feed(wpk_sums_cursor *c, const void *data, size_t n);
int wpk_sums_cursor_end(const wpk_sums_cursor *c, const wpack_archive *ar, const wpack_tensor *t);
/* The chunks of mapped bytes already checked by their chunk checksums, per
 * handle (so repeated reads of rows - embedding lookups - hash a chunk once
 * per open, as whole entries are): made at open, freed at close. */
int wpk_chunk_marks_new(wpack_archive *ar);
void wpk_chunk_marks_free(wpack_archive *ar);
/* The decode state of zstd reads (decode.c). */
int wpk_chunk_cache_new(wpack_archive *ar);
void wpk_chunk_cache_free(wpack_archive *ar);
/* The verify-on-read state and the chunk cache: made at open, freed at close. */
int wpk_reads_init(wpack_archive *ar);
void wpk_reads_free(wpack_archive *ar);
/* Remember the check result of entry i, or look it up (-1: not checked yet). */
void wpk_checked_set(const wpack_archive *ar, uint64_t i, int rc);
int wpk_checked_get(const wpack_archive *ar, uint64_t i);
int wpk_check_namemap(wpack_archive *ar);
int wpk_check_stats(wpack_archive *ar);

#endif
