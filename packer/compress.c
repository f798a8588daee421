/* compress.c - writing zstd-compressed tensors as independent chunks with a
 * seek table (spec: Compressed tensors). Memory: two chunk buffers and 8
 * bytes of seek table per chunk. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "bytes.h"
#include "writer.h"

struct wpk_compressor {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    uint8_t *in, *out;              /* one chunk of input; its compressed form */
    size_t chunk, in_len, out_cap;
    int active;                     /* the current tensor is being compressed */
    uint64_t stored;                /* compressed bytes written for it */
    wpk_buf seek;                   /* u64 chunk ends (+ raw flag) */
    wpk_hasher *stored_hash;
};

void wpk_compress_free(wpk_compressor *zc)
{
    if (!zc)
        return;
    ZSTD_freeCCtx(zc->cctx);
    ZSTD_freeDCtx(zc->dctx);
    free(zc->in);
    free(zc->out);
    wpk_buf_free(&zc->seek);
    wpk_hasher_free(zc->stored_hash);
    free(zc);
}

static int setup(wpack_writer *w)
{
    if (w->zc)
        return WPACK_OK;
    wpk_compressor *zc = calloc(1, sizeof *zc);
    if (!zc)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    w->zc = zc;
    zc->chunk = w->opt.compress_chunk;
    zc->out_cap = ZSTD_compressBound(zc->chunk);
    zc->cctx = ZSTD_createCCtx();
    zc->dctx = ZSTD_createDCtx();
    zc->in = malloc(zc->chunk);
    zc->out = malloc(zc->out_cap);
    zc->stored_hash = wpk_hasher_new();
    if (!zc->cctx || !zc->dctx || !zc->in || !zc->out || !zc->stored_hash)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory for zstd buffers");
    if (ZSTD_isError(ZSTD_CCtx_setParameter(zc->cctx, ZSTD_c_compressionLevel, w->opt.compress_level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(zc->cctx, ZSTD_c_contentSizeFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(zc->cctx, ZSTD_c_checksumFlag, 0)))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "zstd level %d rejected", w->opt.compress_level);
    return WPACK_OK;
}

int wpk_compress_active(const wpack_writer *w)
{
    return w->zc && w->zc->active;
}

int wpk_compress_begin(wpack_writer *w, wpk_pending_entry *e)
{
    if (w->zc)
        w->zc->active = 0;
    if (!w->opt.compress_level || e->nbytes < w->opt.compress_min || e->nbytes == 0)
        return WPACK_OK;
    int rc = setup(w);
    if (rc)
        return rc;
    wpk_compressor *zc = w->zc;
    zc->active = 1;
    zc->in_len = 0;
    zc->stored = 0;
    zc->seek.len = 0;
    wpk_hasher_reset(zc->stored_hash);
    return WPACK_OK;
}

unsigned wpk_compress_chunk_log2(const wpack_writer *w)
{
    return (unsigned)__builtin_ctzll(w->zc->chunk);
}

/* Compress the buffered chunk and write it (raw if it would not shrink). */
static int emit_chunk(wpack_writer *w)
{
    wpk_compressor *zc = w->zc;
    size_t n = zc->in_len;
    size_t c = ZSTD_compress2(zc->cctx, zc->out, zc->out_cap, zc->in, n);
    if (ZSTD_isError(c))
        return wpk_wfail(w, WPACK_E_IO, "zstd: %s", ZSTD_getErrorName(c));
    const uint8_t *src = zc->out;
    uint64_t flag = 0;
    if (c >= n) {
        src = zc->in;
        c = n;
        flag = WPK_CHUNK_RAW;
    }
    int rc = wpk_out(w, src, c);
    if (rc)
        return rc;
    wpk_hasher_update(zc->stored_hash, src, c);
    zc->stored += c;
    uint8_t end[8];
    wpk_st64(end, zc->stored | flag);
    if (!wpk_buf_append(&zc->seek, end, 8))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory for the seek table");
    zc->in_len = 0;
    return WPACK_OK;
}

int wpk_compress_write(wpack_writer *w, const uint8_t *p, size_t n)
{
    wpk_compressor *zc = w->zc;
    while (n) {
        size_t k = zc->chunk - zc->in_len < n ? zc->chunk - zc->in_len : n;
        memcpy(zc->in + zc->in_len, p, k);
        zc->in_len += k;
        p += k;
        n -= k;
        if (zc->in_len == zc->chunk) {
            int rc = emit_chunk(w);
            if (rc)
                return rc;
        }
    }
    return WPACK_OK;
}

static int read_stored(wpack_writer *w, void *dst, size_t n, uint64_t at)
{
    int e = wpk_pread_all(w->fd, dst, n, at);
    if (e)
        return wpk_wfail(w, WPACK_E_IO, "%s: reading back failed: %s", w->shown,
                         e == ENODATA ? "short read" : strerror(e));
    return WPACK_OK;
}

/* Decode chunk k (stored at [off+s, off+e)) of a tensor into dst (raw_len bytes). */
static int decode_chunk(wpack_writer *w, uint64_t at, uint64_t stored_len, int raw, void *dst,
                        size_t raw_len)
{
    wpk_compressor *zc = w->zc;
    if (raw)
        return read_stored(w, dst, raw_len, at);
    int rc = read_stored(w, zc->out, (size_t)stored_len, at);
    if (rc)
        return rc;
    size_t d = ZSTD_decompressDCtx(zc->dctx, dst, raw_len, zc->out, (size_t)stored_len);
    if (ZSTD_isError(d) || d != raw_len)
        return wpk_wfail(w, WPACK_E_DECODE, "%s: re-reading a compressed chunk failed", w->shown);
    return WPACK_OK;
}

/* The tensor saved too little: rewrite it raw over its compressed bytes,
 * last chunk first. Chunk k's raw place starts at k*chunk, at or after the
 * end of every stored chunk before it (no chunk is stored larger than it
 * is raw), so nothing not yet decoded is overwritten. */
static int rewrite_raw(wpack_writer *w, wpk_pending_entry *e)
{
    wpk_compressor *zc = w->zc;
    int rc = wpk_out_flush(w);
    size_t nchunks = zc->seek.len / 8;
    for (size_t k = nchunks; k-- > 0 && rc == WPACK_OK;) {
        uint64_t end = wpk_ld64(zc->seek.p + 8 * k);
        uint64_t start = k ? wpk_ld64(zc->seek.p + 8 * (k - 1)) & ~WPK_CHUNK_RAW : 0;
        int raw = (end & WPK_CHUNK_RAW) != 0;
        end &= ~WPK_CHUNK_RAW;
        uint64_t at = (uint64_t)k * zc->chunk;
        size_t raw_len = (size_t)(e->nbytes - at < zc->chunk ? e->nbytes - at : zc->chunk);
        rc = decode_chunk(w, e->offset + start, end - start, raw, zc->in, raw_len);
        if (rc == WPACK_OK &&
            pwrite(w->fd, zc->in, raw_len, (off_t)(e->offset + at)) != (ssize_t)raw_len)
            rc = wpk_wfail(w, WPACK_E_IO, "%s: rewriting tensor '%s' failed: %s", w->shown,
                           wpk_pool_str(w, e->name), strerror(errno));
    }
    if (rc == WPACK_OK && lseek(w->fd, (off_t)(e->offset + e->nbytes), SEEK_SET) < 0)
        rc = wpk_wfail(w, WPACK_E_IO, "%s: seek failed: %s", w->shown, strerror(errno));
    if (rc)
        w->failed = 1;
    w->pos = e->offset + e->nbytes;
    return rc;
}

int wpk_compress_end(wpack_writer *w, wpk_pending_entry *e, uint64_t decoded_checksum)
{
    wpk_compressor *zc = w->zc;
    int rc = zc->in_len ? emit_chunk(w) : WPACK_OK;
    zc->active = 0;
    if (rc)
        return rc;
    /* Keep the compressed form only if it saves the required fraction. */
    uint64_t need = e->nbytes / 100 * w->opt.compress_min_saving +
                    e->nbytes % 100 * w->opt.compress_min_saving / 100;
    if (zc->stored >= e->nbytes || e->nbytes - zc->stored < need) {
        e->checksum = decoded_checksum;
        return rewrite_raw(w, e);
    }
    uint8_t sum[8];
    wpk_st64(sum, decoded_checksum);
    e->aux_off = w->aux.len;
    e->aux_len = 8 + zc->seek.len;
    if (!wpk_buf_append(&w->aux, sum, 8) || !wpk_buf_append(&w->aux, zc->seek.p, zc->seek.len))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory for the seek table");
    e->codec = WPACK_CODEC_ZSTD;
    e->chunk_log2 = (uint8_t)__builtin_ctzll(zc->chunk);
    e->checksum = wpk_hasher_digest(zc->stored_hash);
    e->stored = zc->stored;
    return WPACK_OK;
}

int wpk_read_back(wpack_writer *w, const wpk_pending_entry *e, uint64_t off, void *dst, size_t n)
{
    if (e->codec == WPACK_CODEC_NONE)
        return read_stored(w, dst, n, e->offset + off);
    /* compressed: decode chunk by chunk (callers read whole chunks in order) */
    wpk_compressor *zc = w->zc;
    size_t chunk = (size_t)1 << e->chunk_log2;
    const uint8_t *seek = w->aux.p + e->aux_off + 8;
    uint8_t *out = dst;
    while (n) {
        uint64_t k = off / chunk, in = off % chunk;
        uint64_t end = wpk_ld64(seek + 8 * k);
        uint64_t start = k ? wpk_ld64(seek + 8 * (k - 1)) & ~WPK_CHUNK_RAW : 0;
        int raw = (end & WPK_CHUNK_RAW) != 0;
        end &= ~WPK_CHUNK_RAW;
        size_t raw_len = (size_t)(e->nbytes - k * chunk < chunk ? e->nbytes - k * chunk : chunk);
        int rc = decode_chunk(w, e->offset + start, end - start, raw, zc->in, raw_len);
        if (rc)
            return rc;
        size_t take = chunk - in < n ? (size_t)(chunk - in) : n;
        memcpy(out, zc->in + in, take);
        out += take;
        off += take;
        n -= take;
    }
    return WPACK_OK;
}
