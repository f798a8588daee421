/* source.c - tensor bytes of an archive read through a caller's source
 * with no mapping (wpack_open_source): an entry's stored bytes are fetched
 * whole and checked against its XXH3 before any of them is handed out, so
 * a server that sends other bytes than the archive's index describes never
 * gets them to the caller. Partial reads fetch the whole entry too: the
 * checksum covers the whole entry and nothing else can check a part. */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"

const wpack_archive *wpk_holder(const wpack_archive *ar, const wpack_tensor *t)
{
    uint64_t own = t->kind == WPACK_KIND_ALIAS ? t->alias_target : t->index;
    const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, own, WPK_ENTRY_SIZE);
    if (r[WPK_E_KIND_OFF] != WPACK_KIND_EXTERNAL)
        return ar;
    uint32_t s = wpk_ld32(r + WPK_E_TARGET_OFF);
    return s < ar->nshards ? ar->shards[s] : NULL;
}

int wpk_needs_fetch(const wpack_archive *ar, const wpack_tensor *t)
{
    if (t->fill || t->data)
        return 0;
    const wpack_archive *h = wpk_holder(ar, t);
    return h && wpk_unmapped(h);
}

int wpk_fetch_stored(const wpack_archive *ar, const wpack_tensor *t, uint8_t *dst)
{
    const wpack_archive *h = wpk_holder(ar, t);
    char q[256];
    wpk_quote(q, sizeof q, t->name, t->name_len);
    if (!h || !wpk_unmapped(h))
        return wpk_fail((wpack_archive *)ar, WPACK_E_NO_VIEW, "tensor '%s': no source to fetch from",
                        q);
    if (t->stored_length > SIZE_MAX)
        return wpk_fail((wpack_archive *)ar, WPACK_E_NOMEM, "tensor '%s': too large for memory", q);
    uint64_t got = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        char msg[400] = "";
        int rc = t->stored_length ? h->src.read(h->src.user, t->offset, dst,
                                                (size_t)t->stored_length, msg, sizeof msg)
                                  : WPACK_OK;
        if (rc)
            return wpk_fail((wpack_archive *)ar, rc, "tensor '%s': %s", q,
                            *msg ? msg : wpack_error_describe(rc));
        got = wpk_xxh3(dst, (size_t)t->stored_length);
        if (got == t->checksum)
            return WPACK_OK;
    }
    return wpk_fail((wpack_archive *)ar, WPACK_E_CHECKSUM,
                    "tensor '%s': fetched bytes hash to %016llx twice, the index says %016llx "
                    "(the source serves other bytes than the archive it opened)",
                    q, (unsigned long long)got, (unsigned long long)t->checksum);
}

int wpk_fetch_stored_new(const wpack_archive *ar, const wpack_tensor *t, uint8_t **out)
{
    *out = NULL;
    uint8_t *p = t->stored_length < SIZE_MAX ? malloc((size_t)t->stored_length + 1) : NULL;
    if (!p)
        return WPACK_E_NOMEM;
    int rc = wpk_fetch_stored(ar, t, p);
    if (rc)
        free(p);
    else
        *out = p;
    return rc;
}

/* The record that describes t's codec and seek table (an alias's target). */
static const uint8_t *owner_rec(const wpack_archive *ar, const wpack_tensor *t)
{
    uint64_t own = t->kind == WPACK_KIND_ALIAS ? t->alias_target : t->index;
    return wpk_rec(ar, WPK_SEC_ENTRIES, own, WPK_ENTRY_SIZE);
}

int wpk_source_read(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset, void *dst,
                    size_t n)
{
    if (t->codec != WPACK_CODEC_ZSTD && offset == 0 && n == t->stored_length)
        return wpk_fetch_stored(ar, t, dst); /* the whole tensor: straight into dst */
    uint8_t *buf;
    int rc = wpk_fetch_stored_new(ar, t, &buf);
    if (rc)
        return rc;
    if (t->codec == WPACK_CODEC_ZSTD)
        rc = wpk_read_zstd_in(ar, owner_rec(ar, t), buf, t->nbytes, offset, dst, n);
    else if (n)
        memcpy(dst, buf + offset, n);
    free(buf);
    return rc;
}

int wpk_source_stream(const wpack_archive *ar, const wpack_tensor *t, wpk_piece_fn fn, void *user)
{
    uint8_t *buf;
    int rc = wpk_fetch_stored_new(ar, t, &buf);
    if (rc)
        return rc;
    if (t->codec == WPACK_CODEC_ZSTD) {
        rc = wpk_stream_zstd_in(ar, owner_rec(ar, t), buf, t->nbytes, fn, user);
    } else {
        for (uint64_t done = 0; rc == WPACK_OK && done < t->nbytes; done += WPK_PIECE)
            rc = fn(user, buf + done,
                    t->nbytes - done < WPK_PIECE ? (size_t)(t->nbytes - done) : WPK_PIECE);
    }
    free(buf);
    return rc;
}

int wpk_padding_zero(wpack_archive *ar, uint64_t off, uint64_t n)
{
    /* Mapped or a buffer: in place. A source: one request for the whole gap
     * (padding is shorter than the alignment, at most 2 MiB), not one per
     * 4 KiB piece. */
    if (!wpk_unmapped(ar) || n > WPACK_MAX_ALIGNMENT)
        return wpk_zero_range(ar, off, n);
    uint8_t *b = malloc(n ? (size_t)n : 1);
    if (!b)
        return wpk_zero_range(ar, off, n);
    int z = wpk_read_at(ar, off, n, b) ? wpk_all_zero(b, n) : -1;
    free(b);
    return z;
}
