/* writer_sums.c - chunk checksums (spec 19b, format 1.2) of the tensor
 * being streamed: the bytes that go into the entry's whole-tensor XXH3 also
 * go, cut at every multiple of the chunk size, into one XXH3-64 per chunk.
 * The sums are gathered per tensor (w->cur_sums) and move to the aux pool
 * only when the entry ends up uncompressed (a compressed entry's logical
 * chunks are checked by its decoded checksum, spec 19). */
#include <string.h>

#include "bytes.h"
#include "writer.h"

int wpk_sums_option(wpack_writer *w)
{
    uint64_t c = w->opt.chunk_sums;
    if (!c)
        return WPACK_OK;
    if (!wpk_is_pow2(c) || c < WPACK_MIN_CHUNK || c > WPACK_MAX_CHUNK)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT,
                         "chunk checksum size %llu is not a power of two from 4 KiB to 64 MiB",
                         (unsigned long long)c);
    /* readers refuse chunks above their limit (spec 15): never write one */
    if (c > ((uint64_t)1 << WPK_CHUNK_LOG2_MAX))
        return wpk_wfail(w, WPACK_E_LIMIT, "chunk checksum size %llu above the limit of %llu bytes",
                         (unsigned long long)c, (unsigned long long)1 << WPK_CHUNK_LOG2_MAX);
    unsigned log2 = 0;
    while (((uint64_t)1 << log2) < c)
        log2++;
    w->sums_log2 = (uint8_t)log2;
    if (!(w->chunk_hasher = wpk_hasher_new()))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

void wpk_sums_begin(wpack_writer *w, uint64_t nbytes, unsigned log2)
{
    /* a tensor of one chunk or less: its own checksum is its chunk's */
    w->cur_log2 = (uint8_t)log2;
    w->cur_sums_on = w->sums_log2 && nbytes > ((uint64_t)1 << log2);
    w->cur_sums.len = 0;
    w->chunk_fill = 0;
    w->sums_nomem = 0;
    if (w->cur_sums_on)
        wpk_hasher_reset(w->chunk_hasher);
}

static void put_sum(wpack_writer *w, uint64_t sum)
{
    uint8_t b[8];
    wpk_st64(b, sum);
    if (!wpk_buf_append(&w->cur_sums, b, 8))
        w->sums_nomem = 1; /* reported at the tensor's end */
}

void wpk_tensor_hash(wpack_writer *w, const void *data, size_t n)
{
    wpk_hasher_update(w->hasher, data, n);
    if (!w->cur_sums_on)
        return;
    const uint8_t *p = data;
    const uint64_t chunk = (uint64_t)1 << w->cur_log2;
    while (n) {
        size_t take = chunk - w->chunk_fill < n ? (size_t)(chunk - w->chunk_fill) : n;
        if (!w->chunk_fill && take == chunk) { /* a whole chunk in hand: one call */
            put_sum(w, wpk_xxh3(p, take));
        } else {
            wpk_hasher_update(w->chunk_hasher, p, take);
            w->chunk_fill += take;
            if (w->chunk_fill == chunk) {
                put_sum(w, wpk_hasher_digest(w->chunk_hasher));
                wpk_hasher_reset(w->chunk_hasher);
                w->chunk_fill = 0;
            }
        }
        p += take;
        n -= take;
    }
}

int wpk_sums_end(wpack_writer *w, wpk_pending_entry *e)
{
    if (!w->cur_sums_on)
        return WPACK_OK;
    w->cur_sums_on = 0;
    if (w->chunk_fill) /* the last, shorter chunk */
        put_sum(w, wpk_hasher_digest(w->chunk_hasher));
    if (w->sums_nomem)
        return wpk_wbreak(w, WPACK_E_NOMEM, "tensor '%s': out of memory for its chunk checksums",
                          wpk_pool_str(w, e->name));
    /* logical bytes, cut as the zstd chunks are when compressed (their
     * seek table is in aux already: the sums' offset is never 0) */
    if (w->cur_sums.len / 8 != wpk_chunk_count(e->nbytes, w->cur_log2) ||
        (e->codec != WPACK_CODEC_NONE && (e->chunk_log2 != w->cur_log2 || !w->aux.len)))
        return wpk_wbreak(w, WPACK_E_STATE, "internal: tensor '%s': %zu chunk checksums for %llu bytes",
                          wpk_pool_str(w, e->name), w->cur_sums.len / 8,
                          (unsigned long long)e->nbytes);
    e->sums_off = w->aux.len;
    e->sums_log2 = w->cur_log2;
    if (!wpk_buf_append(&w->aux, w->cur_sums.p, w->cur_sums.len))
        return wpk_wbreak(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}
