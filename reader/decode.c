/* decode.c - zstd-compressed tensors: seek-table validation at open, range
 * decoding (parallel across chunks), and checking the decoded bytes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "bytes.h"
#include "dense.h"
#include "reader.h"

int wpk_check_seek_table(wpack_archive *ar, const char *q, uint32_t chunk_log2, uint64_t nbytes,
                         uint64_t stored, uint64_t aux_off, uint64_t aux_len)
{
    if (chunk_log2 < WPK_CHUNK_LOG2_MIN || chunk_log2 > WPK_CHUNK_LOG2_MAX)
        return wpk_fail(ar, WPACK_E_CODEC, "tensor '%s': chunk size 2^%u outside 2^12..2^30", q,
                        chunk_log2);
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

/* Where chunk k of a validated zstd tensor is stored. */
typedef struct {
    const uint8_t *base;            /* stored bytes of the tensor */
    const uint8_t *seek;            /* u64 chunk ends */
    uint64_t chunk, nbytes, nchunks;
} zstd_tensor;

static void chunk_at(const zstd_tensor *z, uint64_t k, const uint8_t **src, size_t *len, int *raw,
                     size_t *raw_len)
{
    uint64_t v = wpk_ld64(z->seek + 8 * k);
    uint64_t start = k ? wpk_ld64(z->seek + 8 * (k - 1)) & ~WPK_CHUNK_RAW : 0;
    *raw = (v & WPK_CHUNK_RAW) != 0;
    *src = z->base + start;
    *len = (size_t)((v & ~WPK_CHUNK_RAW) - start);
    *raw_len = (size_t)(k + 1 < z->nchunks ? z->chunk : z->nbytes - k * z->chunk);
}

/* Decode chunk k into out (raw_len bytes), checking the frame's declared size first. */
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
    if (declared != raw_len)
        return WPACK_E_DECODE;
    size_t d = ZSTD_decompressDCtx(dctx, out, raw_len, src, len);
    return ZSTD_isError(d) || d != raw_len ? WPACK_E_DECODE : WPACK_OK;
}

typedef struct {
    const zstd_tensor *z;
    uint64_t offset, first;       /* logical range start; its first chunk */
    uint8_t *dst;
    size_t nbytes;
    _Atomic int rc;
} range_job;

/* One zstd context per thread, kept: the pool's threads live on. */
static _Thread_local ZSTD_DCtx *thread_dctx;

/* Decode chunks first+[k0, k1) of the job into dst; partial chunks at the
 * ends go through a bounce buffer so dst is never overrun. Runs on the
 * kernel's thread pool (several chunks at once) or the caller's thread. */
static void decode_chunks(const wpk_dense_job *pj, size_t k0, size_t k1)
{
    range_job *job = pj->ctx;
    const zstd_tensor *z = job->z;
    if (!thread_dctx && !(thread_dctx = ZSTD_createDCtx())) {
        job->rc = WPACK_E_NOMEM;
        return;
    }
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
            rc = decode_chunk(thread_dctx, z, k, out);
        } else {
            if (!bounce && !(bounce = malloc((size_t)z->chunk))) {
                job->rc = WPACK_E_NOMEM;
                break;
            }
            rc = decode_chunk(thread_dctx, z, k, bounce);
            if (rc == WPACK_OK)
                memcpy(out, bounce + (lo - cstart), (size_t)(hi - lo));
        }
        if (rc) {
            int ok = WPACK_OK;
            atomic_compare_exchange_strong(&job->rc, &ok, rc);
        }
    }
    free(bounce);
}

int wpk_read_zstd(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes, uint64_t offset,
                  void *dst, size_t n);

int wpk_read_zstd(const wpack_archive *ar, const uint8_t *rec, uint64_t nbytes, uint64_t offset,
                  void *dst, size_t n)
{
    if (!n)
        return WPACK_OK;
    zstd_tensor z;
    z.base = ar->base + wpk_ld64(rec + WPK_E_DATA_OFFSET_OFF);
    z.seek = ar->sec[WPK_SEC_AUX] + wpk_ld64(rec + WPK_E_AUX_OFF) + 8;
    z.chunk = 1ull << wpk_ld32(rec + WPK_E_CODEC_PARAM_OFF);
    z.nbytes = nbytes;
    z.nchunks = (nbytes - 1) / z.chunk + 1;
    range_job job = {&z, offset, offset / z.chunk, dst, n, WPACK_OK};
    uint64_t chunks = (offset + n - 1) / z.chunk - job.first + 1;
    wpk_dense_job pj = {.ctx = &job};
    /* One chunk per claim: chunks are independent and about the same work. */
    wpk_pool_run(&pj, decode_chunks, (size_t)chunks, 1, wpk_pool_threads());
    return job.rc;
}

int wpk_verify_decoded(wpack_archive *ar, uint64_t i)
{
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    enum { STEP = 1 << 24 };
    uint8_t *buf = malloc(t.nbytes < STEP ? (size_t)t.nbytes + 1 : STEP);
    wpk_hasher *h = wpk_hasher_new();
    int rc = buf && h ? WPACK_OK : WPACK_E_NOMEM;
    /* a bool tensor's first byte other than 0/1 (spec 21.17), found in the
     * same pass; reported only once the bytes are the ones checksummed */
    uint64_t bad_at = UINT64_MAX;
    unsigned bad_value = 0;
    for (uint64_t done = 0; rc == WPACK_OK && done < t.nbytes; done += STEP) {
        size_t n = t.nbytes - done < STEP ? (size_t)(t.nbytes - done) : STEP;
        rc = wpack_read(ar, i, done, buf, n);
        if (rc == WPACK_OK)
            wpk_hasher_update(h, buf, n);
        size_t b;
        if (rc == WPACK_OK && t.dtype == WPACK_DTYPE_BOOL && bad_at == UINT64_MAX &&
            (b = wpk_first_bad_bool(buf, n)) < n) {
            bad_at = done + b;
            bad_value = buf[b];
        }
    }
    uint64_t got = rc == WPACK_OK ? wpk_hasher_digest(h) : 0;
    free(buf);
    wpk_hasher_free(h);
    char q[256];
    wpk_quote(q, sizeof q, t.name, t.name_len);
    if (rc == WPACK_E_DECODE)
        return wpk_fail(ar, rc, "tensor '%s': compressed bytes do not decode to their declared size", q);
    if (rc)
        return wpk_fail(ar, rc, "tensor '%s': cannot decode: %s", q, wpack_error_describe(rc));
    if (got != t.decoded_checksum)
        return wpk_fail(ar, WPACK_E_CHECKSUM,
                        "tensor '%s': decoded bytes hash to %016llx, expected %016llx", q,
                        (unsigned long long)got, (unsigned long long)t.decoded_checksum);
    if (bad_at != UINT64_MAX)
        return wpk_fail(ar, WPACK_E_VALUE, "tensor '%s': bool byte %llu is %u; bools are 0 or 1", q,
                        (unsigned long long)bad_at, bad_value);
    return WPACK_OK;
}
