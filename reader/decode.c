/* decode.c - zstd-compressed tensors: seek-table validation at open, range
 * decoding (across chunks in parallel on the caller's executor, serial
 * without one; the last partly read chunk kept), and streaming (each chunk
 * decoded once). The archive's decode state (chunk cache, zstd contexts,
 * executor) lives here. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "bytes.h"
#include "reader.h"

int wpk_check_seek_table(wpack_archive *ar, const char *q, uint32_t chunk_log2, uint64_t nbytes,
                         uint64_t stored, uint64_t aux_off, uint64_t aux_len)
{
    if (chunk_log2 < WPK_CHUNK_LOG2_MIN)
        return wpk_fail(ar, WPACK_E_CODEC, "tensor '%s': chunk size 2^%u below 2^%u", q, chunk_log2,
                        WPK_CHUNK_LOG2_MIN);
    /* A reader decodes a whole chunk to hand out any byte of it: the limit
     * bounds that work and the buffer (spec: Limits). */
    if (chunk_log2 > WPK_CHUNK_LOG2_MAX)
        return wpk_fail(ar, WPACK_E_LIMIT, "tensor '%s': chunk size 2^%u above the limit of 2^%u", q,
                        chunk_log2, WPK_CHUNK_LOG2_MAX);
    uint64_t chunk = 1ull << chunk_log2;
    uint64_t nchunks = nbytes ? (nbytes - 1) / chunk + 1 : 0;
    if (aux_len != 8 + 8 * nchunks) /* nchunks <= 2^52: no overflow */
        return wpk_fail(ar, WPACK_E_CODEC, "tensor '%s': seek table is %llu bytes, %llu chunks need %llu",
                        q, (unsigned long long)aux_len, (unsigned long long)nchunks,
                        (unsigned long long)(8 + 8 * nchunks));
    int rc = wpk_aux_ref(ar, aux_off, aux_len, "seek table");
    if (rc)
        return rc;
    const uint8_t *seek = ar->sec[WPK_SEC_AUX] + aux_off + 8;
    uint64_t prev = 0;
    for (uint64_t k = 0; k < nchunks; k++) {
        uint64_t v = wpk_ld64(seek + 8 * k), end = v & ~WPK_CHUNK_RAW;
        uint64_t raw_len = k + 1 < nchunks ? chunk : nbytes - k * chunk;
        /* Each chunk holds 1..raw_len stored bytes, exactly raw_len when raw:
         * so the stored size can never exceed the logical one. */
        if (end <= prev || end - prev > raw_len || ((v & WPK_CHUNK_RAW) && end - prev != raw_len))
            return wpk_fail(ar, WPACK_E_CODEC, "tensor '%s': seek table entry %llu (end %llu) invalid",
                            q, (unsigned long long)k, (unsigned long long)end);
        prev = end;
    }
    if (prev != stored)
        return wpk_fail(ar, WPACK_E_SIZE, "tensor '%s': seek table ends at %llu, stored length is %llu",
                        q, (unsigned long long)prev, (unsigned long long)stored);
    return WPACK_OK;
}

/* The archive's decode state. The last chunk decoded for a read that
 * wanted only part of it: a reader going through a big chunk in small reads
 * decodes it once, not once per read. One slot per archive; a thread that
 * finds it busy decodes into a buffer of its own instead of waiting. The
 * zstd contexts not in use (one is made when none is free, so there are as
 * many as reads ever ran at once; freed at wpack_close). The executor
 * (wpack_set_executor). */
struct wpk_chunk_cache {
    pthread_mutex_t lock;
    const uint8_t *rec;             /* entry record of the chunk held; NULL: none */
    uint64_t k;
    uint8_t *buf;
    size_t cap;
    pthread_mutex_t dctx_lock;
    ZSTD_DCtx **dctx_free;
    size_t ndctx, dctx_cap;
    wpack_executor ex;              /* ex.run NULL: serial */
};

int wpk_chunk_cache_new(wpack_archive *ar)
{
    struct wpk_chunk_cache *c = calloc(1, sizeof *c);
    if (!c)
        return WPACK_E_NOMEM;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->dctx_lock, NULL);
    ar->cache = c;
    return WPACK_OK;
}

void wpk_chunk_cache_free(wpack_archive *ar)
{
    struct wpk_chunk_cache *c = ar->cache;
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->dctx_lock);
    for (size_t i = 0; i < c->ndctx; i++)
        ZSTD_freeDCtx(c->dctx_free[i]);
    free(c->dctx_free);
    free(c->buf);
    free(c);
    ar->cache = NULL;
}

int wpack_set_executor(wpack_archive *ar, const wpack_executor *ex)
{
    if (!ar || !ar->cache || (ex && !ex->run))
        return WPACK_E_INVALID_ARGUMENT;
    char why[300];
    if (ex && WPK_RESERVED_CHECK(ex, "wpack_executor", "wpack.h", why, sizeof why))
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT, "%s", why);
    if (ex)
        ar->cache->ex = *ex;
    else
        memset(&ar->cache->ex, 0, sizeof ar->cache->ex);
    for (uint32_t s = 0; s < ar->nshards; s++)
        if (ar->shards[s])
            wpack_set_executor(ar->shards[s], ex);
    return WPACK_OK;
}

/* A zstd context for one decoding call: a free one of the archive, else a
 * new one (NULL: out of memory). Give it back with put_dctx. */
static ZSTD_DCtx *get_dctx(struct wpk_chunk_cache *c)
{
    ZSTD_DCtx *d = NULL;
    pthread_mutex_lock(&c->dctx_lock);
    if (c->ndctx)
        d = c->dctx_free[--c->ndctx];
    pthread_mutex_unlock(&c->dctx_lock);
    return d ? d : ZSTD_createDCtx();
}

static void put_dctx(struct wpk_chunk_cache *c, ZSTD_DCtx *d)
{
    pthread_mutex_lock(&c->dctx_lock);
    if (c->ndctx == c->dctx_cap) {
        size_t cap = c->dctx_cap ? 2 * c->dctx_cap : 4;
        ZSTD_DCtx **v = realloc(c->dctx_free, cap * sizeof *v);
        if (v) {
            c->dctx_free = v;
            c->dctx_cap = cap;
        }
    }
    if (c->ndctx < c->dctx_cap) {
        c->dctx_free[c->ndctx++] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&c->dctx_lock);
    ZSTD_freeDCtx(d); /* no room to keep it (NULL: kept) */
}

/* Where chunk k of a validated zstd tensor is stored. */
typedef struct {
    const uint8_t *rec;             /* its entry record (the cache key) */
    const uint8_t *base;            /* stored bytes of the tensor from byte base_off on */
    uint64_t base_off;              /* 0, or where a part fetched alone starts */
    int unchecked;                  /* such a part: kept out of the chunk cache, which
                                     * later checked reads share */
    const uint8_t *seek;            /* u64 chunk ends */
    uint64_t chunk, nbytes, nchunks;
    struct wpk_chunk_cache *cache;  /* the archive's decode state */
} zstd_tensor;

static void chunk_at(const zstd_tensor *z, uint64_t k, const uint8_t **src, size_t *len, int *raw,
                     size_t *raw_len)
{
    uint64_t v = wpk_ld64(z->seek + 8 * k);
    uint64_t start = k ? wpk_ld64(z->seek + 8 * (k - 1)) & ~WPK_CHUNK_RAW : 0;
    *raw = (v & WPK_CHUNK_RAW) != 0;
    *src = z->base + (start - z->base_off); /* the caller's chunks lie in the part */
    *len = (size_t)((v & ~WPK_CHUNK_RAW) - start);
    *raw_len = (size_t)(k + 1 < z->nchunks ? z->chunk : z->nbytes - k * z->chunk);
}

/* Decode chunk k into out (raw_len bytes), checking the frame's declared
 * size first, and that the frame fills the chunk's stored bytes: a second
 * frame after it (skippable or not) would be bytes no checksum of the
 * decoded data covers (spec section 19). */
static int decode_chunk(ZSTD_DCtx *dctx, const zstd_tensor *z, uint64_t k, uint8_t *out)
{
    const uint8_t *src;
    size_t len, raw_len;
    int raw;
    chunk_at(z, k, &src, &len, &raw, &raw_len);
    if (raw) {
        memcpy(out, src, raw_len);
        return WPACK_OK;
    }
    unsigned long long declared = ZSTD_getFrameContentSize(src, len);
    if (declared != raw_len || ZSTD_findFrameCompressedSize(src, len) != len)
        return WPACK_E_DECODE;
    size_t d = ZSTD_decompressDCtx(dctx, out, raw_len, src, len);
    return ZSTD_isError(d) || d != raw_len ? WPACK_E_DECODE : WPACK_OK;
}

/* Bytes [lo, lo + n) of chunk k through the archive's chunk cache: 1 when
 * done (*rc set), 0 when the cache is busy. */
static int read_cached(ZSTD_DCtx *dctx, const zstd_tensor *z, uint64_t k, size_t lo, size_t n,
                       uint8_t *out, int *rc)
{
    struct wpk_chunk_cache *c = z->cache;
    if (pthread_mutex_trylock(&c->lock) != 0)
        return 0;
    *rc = WPACK_OK;
    if (c->rec != z->rec || c->k != k) {
        c->rec = NULL;
        if (c->cap < z->chunk) {
            free(c->buf);
            c->cap = 0;
            if (!(c->buf = malloc((size_t)z->chunk)))
                *rc = WPACK_E_NOMEM;
            else
                c->cap = (size_t)z->chunk;
        }
        if (*rc == WPACK_OK && (*rc = decode_chunk(dctx, z, k, c->buf)) == WPACK_OK) {
            c->rec = z->rec;
            c->k = k;
        }
    }
    if (*rc == WPACK_OK)
        memcpy(out, c->buf + lo, n);
    pthread_mutex_unlock(&c->lock);
    return 1;
}

typedef struct {
    const zstd_tensor *z;
    uint64_t offset, first;       /* logical range start; its first chunk */
    uint8_t *dst;
    size_t nbytes;
    _Atomic int rc;
} range_job;

static void set_rc(range_job *job, int rc)
{
    int ok = WPACK_OK;
    atomic_compare_exchange_strong(&job->rc, &ok, rc);
}

/* Decode chunks first+[k0, k1) of the job into dst with dctx; partial
 * chunks at the ends go through the chunk cache or a bounce buffer so dst
 * is never overrun. */
static void decode_chunks(range_job *job, ZSTD_DCtx *dctx, size_t k0, size_t k1)
{
    const zstd_tensor *z = job->z;
    uint8_t *bounce = NULL;
    for (size_t c = k0; c < k1 && job->rc == WPACK_OK; c++) {
        uint64_t k = job->first + c;
        uint64_t cstart = k * z->chunk;
        size_t raw_len = (size_t)(k + 1 < z->nchunks ? z->chunk : z->nbytes - cstart);
        uint64_t lo = job->offset > cstart ? job->offset : cstart;
        uint64_t hi = job->offset + job->nbytes < cstart + raw_len ? job->offset + job->nbytes
                                                                   : cstart + raw_len;
        uint8_t *out = job->dst + (lo - job->offset);
        int rc;
        if (lo == cstart && hi == cstart + raw_len) {
            rc = decode_chunk(dctx, z, k, out);
        } else if (z->unchecked ||
                   !read_cached(dctx, z, k, (size_t)(lo - cstart), (size_t)(hi - lo), out, &rc)) {
            if (!bounce && !(bounce = malloc((size_t)z->chunk))) {
                set_rc(job, WPACK_E_NOMEM);
                break;
            }
            rc = decode_chunk(dctx, z, k, bounce);
            if (rc == WPACK_OK)
                memcpy(out, bounce + (lo - cstart), (size_t)(hi - lo));
        }
        if (rc)
            set_rc(job, rc);
    }
    free(bounce);
}

/* Chunk first+c of the job, run by the executor (any thread). */
static void decode_one(void *ctx, size_t c)
{
    range_job *job = ctx;
    if (atomic_load_explicit(&job->rc, memory_order_relaxed) != WPACK_OK)
        return; /* another chunk failed: the read fails anyway */
    ZSTD_DCtx *dctx = get_dctx(job->z->cache);
    if (!dctx) {
        set_rc(job, WPACK_E_NOMEM);
        return;
    }
    decode_chunks(job, dctx, c, c + 1);
    put_dctx(job->z->cache, dctx);
}

static void zstd_at(const wpack_archive *ar, const uint8_t *rec, const uint8_t *stored,
                    uint64_t nbytes, zstd_tensor *z)
{
    z->rec = rec;
    z->base = stored ? stored : ar->base + wpk_ld64(rec + WPK_E_DATA_OFFSET_OFF);
    z->base_off = 0;
    z->unchecked = 0;
    z->seek = ar->sec[WPK_SEC_AUX] + wpk_ld64(rec + WPK_E_AUX_OFF) + 8;
    z->chunk = 1ull << wpk_ld32(rec + WPK_E_CODEC_PARAM_OFF);
    z->nbytes = nbytes;
    z->nchunks = nbytes ? (nbytes - 1) / z->chunk + 1 : 0;
    z->cache = ar->cache;
}

int wpk_read_zstd(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes, uint64_t offset,
                  void *dst, size_t n)
{
    return wpk_read_zstd_in(ar, rec, NULL, nbytes, offset, dst, n);
}

void wpk_zstd_stored_span(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes,
                          uint64_t offset, size_t n, uint64_t *from, uint64_t *to)
{
    zstd_tensor z;
    zstd_at(ar, rec, NULL, nbytes, &z);
    uint64_t k0 = offset / z.chunk, k1 = (offset + n - 1) / z.chunk;
    *from = k0 ? wpk_ld64(z.seek + 8 * (k0 - 1)) & ~WPK_CHUNK_RAW : 0;
    *to = wpk_ld64(z.seek + 8 * k1) & ~WPK_CHUNK_RAW;
}

static int read_range(zstd_tensor *z, uint64_t offset, void *dst, size_t n);

int wpk_read_zstd_part(const wpack_archive *ar, const uint8_t *rec, const uint8_t *part,
                       uint64_t part_off, uint64_t nbytes, uint64_t offset, void *dst, size_t n)
{
    if (!n)
        return WPACK_OK;
    zstd_tensor z;
    zstd_at(ar, rec, part, nbytes, &z);
    z.base_off = part_off;
    z.unchecked = 1;
    return read_range(&z, offset, dst, n);
}

int wpk_read_zstd_in(const wpack_archive *ar, const uint8_t *rec, const uint8_t *stored,
                     uint64_t nbytes, uint64_t offset, void *dst, size_t n)
{
    if (!n)
        return WPACK_OK;
    zstd_tensor z;
    zstd_at(ar, rec, stored, nbytes, &z);
    return read_range(&z, offset, dst, n);
}

/* Logical bytes [offset, offset + n) of z (n > 0) into dst. */
static int read_range(zstd_tensor *zt, uint64_t offset, void *dst, size_t n)
{
    zstd_tensor z = *zt;
    range_job job = {&z, offset, offset / z.chunk, dst, n, WPACK_OK};
    size_t chunks = (size_t)((offset + n - 1) / z.chunk - job.first + 1);
    const wpack_executor *ex = &z.cache->ex;
    if (ex->run && chunks > 1) {
        /* one chunk per item: chunks are independent and about the same work */
        ex->run(ex->self, chunks, decode_one, &job);
        return job.rc;
    }
    ZSTD_DCtx *dctx = get_dctx(z.cache);
    if (!dctx)
        return WPACK_E_NOMEM;
    decode_chunks(&job, dctx, 0, chunks);
    put_dctx(z.cache, dctx);
    return job.rc;
}

/* Bytes decoded per step when streaming with an executor: whole chunks,
 * enough of them for each of its threads to take one, at most this much
 * (and at least one chunk, <= 2^26 bytes). */
enum { STREAM_BATCH = 1 << 24 };

int wpk_stream_zstd(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes, wpk_piece_fn fn,
                    void *user)
{
    return wpk_stream_zstd_in(ar, rec, NULL, nbytes, fn, user);
}

int wpk_stream_zstd_in(const wpack_archive *ar, const uint8_t *rec, const uint8_t *stored,
                       uint64_t nbytes, wpk_piece_fn fn, void *user)
{
    if (!nbytes)
        return WPACK_OK;
    zstd_tensor z;
    zstd_at(ar, rec, stored, nbytes, &z);
    const wpack_executor *ex = &z.cache->ex;
    uint64_t per = 1;
    if (ex->run) {
        per = STREAM_BATCH / z.chunk;
        if (per > ex->threads)
            per = ex->threads;
        if (per < 1)
            per = 1;
    }
    uint64_t batch = per * z.chunk < nbytes ? per * z.chunk : nbytes;
    uint8_t *buf = malloc((size_t)batch);
    if (!buf)
        return WPACK_E_NOMEM;
    int rc = WPACK_OK;
    for (uint64_t off = 0; rc == WPACK_OK && off < nbytes; off += batch) {
        size_t len = (size_t)(nbytes - off < batch ? nbytes - off : batch);
        /* whole chunks: each decoded once */
        rc = wpk_read_zstd_in(ar, rec, stored, nbytes, off, buf, len);
        for (size_t p = 0; rc == WPACK_OK && p < len; p += WPK_PIECE)
            rc = fn(user, buf + p, len - p < WPK_PIECE ? len - p : WPK_PIECE);
    }
    free(buf);
    return rc;
}
