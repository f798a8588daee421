/* source.c - tensor bytes of an archive read through a caller's source
 * with no mapping (wpack_open_source). An entry fetched whole is checked
 * against its XXH3 before any of it is handed out (a mismatch is fetched
 * once more, the source told to forget its copy first), so a server that
 * sends other bytes than the archive's index describes never gets them to
 * the caller. The last entry fetched whole (up to WPK_KEEP_MAX bytes) is
 * kept per handle: the partial reads that usually follow a verified one
 * (get_slice) are served from it, not fetched again. A partial read of a
 * plain entry without verification fetches only its bytes (unchecked: the
 * checksum covers the whole entry; the caller asked for no check), of a
 * compressed one only the chunks holding them, when those are at most
 * half of it (zstd_part). A
 * stream of a plain entry larger than the source's stream_window goes in
 * windows, hashed as they arrive, checked at the end (stream_windows). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"

uint32_t wpk_shard_slot(const wpack_archive *ar, const wpack_tensor *t)
{
    const uint8_t *r = wpk_owner_rec(ar, t);
    return r[WPK_E_KIND_OFF] == WPACK_KIND_EXTERNAL ? wpk_ld32(r + WPK_E_TARGET_OFF) : UINT32_MAX;
}

const wpack_archive *wpk_holder(const wpack_archive *ar, const wpack_tensor *t)
{
    uint32_t s = wpk_shard_slot(ar, t);
    if (s == UINT32_MAX)
        return ar;
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
        if (h->src.forget) /* a cached copy may be what is wrong: fetch afresh */
            h->src.forget(h->src.user, t->offset, t->stored_length);
    }
    /* remembered: no part of it is handed out later either (source_read) */
    wpk_checked_set(ar, wpk_owner_of(t), WPACK_E_CHECKSUM);
    return wpk_fail((wpack_archive *)ar, WPACK_E_CHECKSUM,
                    "tensor '%s': fetched bytes hash to %016llx twice, the index says %016llx "
                    "(the source serves other bytes than the archive it opened)",
                    q, (unsigned long long)got, (unsigned long long)t->checksum);
}

/* ------------------------------------------------ the last entry kept */

#define WPK_KEEP_MAX ((uint64_t)128 << 20)
/* The largest block held as the handle's spare between reads. */
#define WPK_SPARE_MAX ((size_t)64 << 20)

struct wpk_kept {
    pthread_mutex_t lock;
    const wpack_archive *from;  /* the holder (ar or a shard) of the bytes */
    uint64_t off, len;          /* its stored extent there */
    uint8_t *buf;               /* NULL: nothing kept */
    size_t cap;                 /* buf's size */
    uint8_t *spare;             /* a block the last keep replaced, for the next fetch */
    size_t spare_cap;
};

int wpk_kept_new(wpack_archive *ar)
{
    if (!(ar->kept = calloc(1, sizeof *ar->kept)))
        return WPACK_E_NOMEM;
    pthread_mutex_init(&ar->kept->lock, NULL);
    return WPACK_OK;
}

void wpk_kept_free(wpack_archive *ar)
{
    if (!ar->kept)
        return;
    pthread_mutex_destroy(&ar->kept->lock);
    free(ar->kept->buf);
    free(ar->kept->spare);
    free(ar->kept);
    ar->kept = NULL;
}

/* A block of at least need bytes for fetched bytes: the handle's spare when
 * it is large enough (freed first when it is not), else a new one. Reusing
 * blocks matters: each page of a new block is faulted in on first touch,
 * and on a VM those faults cost more than the copy into them (perf of
 * `verify URL`: ~40% of its time for 1 GiB). */
static uint8_t *scratch_take(const wpack_archive *ar, size_t need, size_t *cap)
{
    struct wpk_kept *k = ar->kept;
    uint8_t *p = NULL;
    if (k) {
        pthread_mutex_lock(&k->lock);
        if (k->spare && k->spare_cap >= need) {
            p = k->spare;
            *cap = k->spare_cap;
        } else {
            free(k->spare);
        }
        k->spare = NULL;
        k->spare_cap = 0;
        pthread_mutex_unlock(&k->lock);
    }
    if (!p && (p = malloc(need ? need : 1)))
        *cap = need;
    return p;
}

/* A block back to the handle: kept as the spare (the larger of two) up to
 * WPK_SPARE_MAX, else freed. */
static void scratch_give(const wpack_archive *ar, uint8_t *buf, size_t cap)
{
    struct wpk_kept *k = ar->kept;
    if (!buf)
        return;
    if (!k || cap > WPK_SPARE_MAX) {
        free(buf);
        return;
    }
    pthread_mutex_lock(&k->lock);
    if (!k->spare || k->spare_cap < cap) {
        free(k->spare);
        k->spare = buf;
        k->spare_cap = cap;
        buf = NULL;
    }
    pthread_mutex_unlock(&k->lock);
    free(buf);
}

int wpk_fetch_stored_new(const wpack_archive *ar, const wpack_tensor *t, uint8_t **out,
                         size_t *cap)
{
    *out = NULL;
    uint8_t *p = t->stored_length < SIZE_MAX ? scratch_take(ar, (size_t)t->stored_length + 1, cap)
                                             : NULL;
    if (!p)
        return WPACK_E_NOMEM;
    int rc = wpk_fetch_stored(ar, t, p);
    if (rc)
        scratch_give(ar, p, *cap);
    else
        *out = p;
    return rc;
}

/* Keep buf (t's checked stored bytes, cap bytes, owned now) as the
 * handle's last fetch, or give it back when too large to keep. */
static void keep(const wpack_archive *ar, const wpack_tensor *t, uint8_t *buf, size_t cap)
{
    struct wpk_kept *k = ar->kept;
    if (!k || t->stored_length > WPK_KEEP_MAX) {
        scratch_give(ar, buf, cap);
        return;
    }
    pthread_mutex_lock(&k->lock);
    uint8_t *old = k->buf;
    size_t old_cap = k->cap;
    k->buf = buf;
    k->cap = cap;
    k->from = wpk_holder(ar, t);
    k->off = t->offset;
    k->len = t->stored_length;
    pthread_mutex_unlock(&k->lock);
    scratch_give(ar, old, old_cap);
}

/* Part of t from the kept fetch: 1 (*rc set) when t is the one kept. */
static int from_kept(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset, void *dst,
                     size_t n, int *rc)
{
    struct wpk_kept *k = ar->kept;
    if (!k)
        return 0;
    pthread_mutex_lock(&k->lock);
    int hit = k->buf && k->from == wpk_holder(ar, t) && k->off == t->offset &&
              k->len == t->stored_length;
    if (hit) {
        *rc = WPACK_OK;
        if (t->codec == WPACK_CODEC_ZSTD)
            *rc = wpk_read_zstd_in(ar, wpk_owner_rec(ar, t), k->buf, t->nbytes, offset, dst, n);
        else if (n)
            memcpy(dst, k->buf + offset, n);
    }
    pthread_mutex_unlock(&k->lock);
    return hit;
}

/* A partial read of a compressed entry without verification: when the
 * chunks holding the bytes are at most half of the stored bytes, fetch just
 * them and decode (unchecked, as a plain entry's partial read; the
 * decoder still checks each frame's size). -1: not worth it, fetch whole. */
static int zstd_part(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *h,
                     uint64_t offset, void *dst, size_t n)
{
    uint64_t from, to;
    wpk_zstd_stored_span(ar, wpk_owner_rec(ar, t), t->nbytes, offset, n, &from, &to);
    if (to - from > t->stored_length / 2)
        return -1;
    char q[256], msg[400] = "";
    wpk_quote(q, sizeof q, t->name, t->name_len);
    int known = wpk_checked_get(ar, wpk_owner_of(t));
    if (known > 0)
        return wpk_fail((wpack_archive *)ar, known, "tensor '%s': %s (found by an earlier check)", q,
                        wpack_error_describe(known));
    uint8_t *part = malloc((size_t)(to - from)); /* <= stored_length / 2: it fits */
    if (!part)
        return wpk_fail((wpack_archive *)ar, WPACK_E_NOMEM, "tensor '%s': out of memory", q);
    int rc = h->src.read(h->src.user, t->offset + from, part, (size_t)(to - from), msg, sizeof msg);
    if (rc)
        rc = wpk_fail((wpack_archive *)ar, rc, "tensor '%s': %s", q,
                      *msg ? msg : wpack_error_describe(rc));
    else
        rc = wpk_read_zstd_part(ar, wpk_owner_rec(ar, t), part, from, t->nbytes, offset, dst, n);
    free(part);
    return rc;
}

/* Part of t from a fetch of all of it, checked against its XXH3 and then
 * kept for the partial reads that follow. */
static int whole_then_part(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset,
                           void *dst, size_t n)
{
    uint8_t *buf;
    size_t cap;
    int rc = wpk_fetch_stored_new(ar, t, &buf, &cap);
    if (rc)
        return rc;
    if (t->codec == WPACK_CODEC_ZSTD)
        rc = wpk_read_zstd_in(ar, wpk_owner_rec(ar, t), buf, t->nbytes, offset, dst, n);
    else if (n)
        memcpy(dst, buf + offset, n);
    keep(ar, t, buf, cap);
    return rc;
}

int wpk_source_read(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset, void *dst,
                    size_t n)
{
    int rc;
    if (from_kept(ar, t, offset, dst, n, &rc))
        return rc;
    if (t->codec != WPACK_CODEC_ZSTD && offset == 0 && n == t->stored_length)
        return wpk_fetch_stored(ar, t, dst); /* the whole tensor: straight into dst */
    const wpack_archive *h = wpk_holder(ar, t);
    if (t->codec != WPACK_CODEC_ZSTD && h && wpk_unmapped(h)) {
        /* only the bytes asked for (n <= stored_length - offset: checked by
         * the caller against nbytes, which a plain entry's stored_length is),
         * unless a whole fetch of the entry already failed its check */
        char q[256], msg[400] = "";
        wpk_quote(q, sizeof q, t->name, t->name_len);
        int known = wpk_checked_get(ar, wpk_owner_of(t));
        if (known > 0)
            return wpk_fail((wpack_archive *)ar, known, "tensor '%s': %s (found by an earlier check)",
                            q, wpack_error_describe(known));
        rc = n ? h->src.read(h->src.user, t->offset + offset, dst, n, msg, sizeof msg) : WPACK_OK;
        if (rc)
            return wpk_fail((wpack_archive *)ar, rc, "tensor '%s': %s", q,
                            *msg ? msg : wpack_error_describe(rc));
        return WPACK_OK;
    }
    if (t->codec == WPACK_CODEC_ZSTD && h && wpk_unmapped(h) && n &&
        (rc = zstd_part(ar, t, h, offset, dst, n)) >= 0)
        return rc;
    return whole_then_part(ar, t, offset, dst, n);
}

/* A plain entry larger than the source's stream_window, in windows: each
 * read, hashed and handed to fn in pieces; the XXH3 of the whole entry,
 * known only at its end, decides (fn's owner discards its output on
 * failure). Memory: one window, whatever the entry's size. */
/* Between pieces handed to the caller: the source's transfers go on. */
static void source_idle(const wpack_archive *h)
{
    if (h && wpk_unmapped(h) && h->src.idle)
        h->src.idle(h->src.user);
}

static int stream_windows(const wpack_archive *ar, const wpack_tensor *t,
                          const wpack_archive *h, wpk_piece_fn fn, void *user)
{
    char q[256], msg[400] = "";
    wpk_quote(q, sizeof q, t->name, t->name_len);
    uint64_t own = wpk_owner_of(t);
    int known = wpk_checked_get(ar, own);
    if (known > 0)
        return wpk_fail((wpack_archive *)ar, known, "tensor '%s': %s (found by an earlier check)",
                        q, wpack_error_describe(known));
    uint64_t w = h->src.stream_window, len = t->stored_length;
    size_t cap = 0;
    uint8_t *buf = w <= SIZE_MAX ? scratch_take(ar, (size_t)w, &cap) : NULL;
    wpk_hasher *hs = buf ? wpk_hasher_new() : NULL;
    if (!hs) {
        scratch_give(ar, buf, cap);
        return wpk_fail((wpack_archive *)ar, WPACK_E_NOMEM, "tensor '%s': out of memory", q);
    }
    int rc = WPACK_OK;
    for (uint64_t done = 0; rc == WPACK_OK && done < len;) {
        size_t k = len - done < w ? (size_t)(len - done) : (size_t)w;
        rc = h->src.read(h->src.user, t->offset + done, buf, k, msg, sizeof msg);
        if (rc) {
            wpk_fail((wpack_archive *)ar, rc, "tensor '%s': %s", q,
                     *msg ? msg : wpack_error_describe(rc));
            break;
        }
        wpk_hasher_update(hs, buf, k);
        for (size_t p = 0; rc == WPACK_OK && p < k; p += WPK_PIECE) {
            rc = fn(user, buf + p, k - p < WPK_PIECE ? k - p : WPK_PIECE);
            source_idle(h);
        }
        done += k;
    }
    uint64_t got = wpk_hasher_digest(hs);
    wpk_hasher_free(hs);
    scratch_give(ar, buf, cap);
    if (rc)
        return rc;
    if (got != t->checksum) {
        if (h->src.forget) /* a cached copy may be what is wrong */
            h->src.forget(h->src.user, t->offset, len);
        wpk_checked_set(ar, own, WPACK_E_CHECKSUM);
        return wpk_fail((wpack_archive *)ar, WPACK_E_CHECKSUM,
                        "tensor '%s': fetched bytes hash to %016llx, the index says %016llx "
                        "(the source serves other bytes than the archive it opened; "
                        "what was streamed of it is to be discarded)",
                        q, (unsigned long long)got, (unsigned long long)t->checksum);
    }
    return WPACK_OK;
}

int wpk_source_stream(const wpack_archive *ar, const wpack_tensor *t, wpk_piece_fn fn, void *user)
{
    const wpack_archive *h = wpk_holder(ar, t);
    if (t->codec != WPACK_CODEC_ZSTD && h && wpk_unmapped(h) && h->src.stream_window &&
        t->stored_length > h->src.stream_window)
        return stream_windows(ar, t, h, fn, user);
    uint8_t *buf;
    size_t cap;
    int rc = wpk_fetch_stored_new(ar, t, &buf, &cap);
    if (rc)
        return rc;
    if (t->codec == WPACK_CODEC_ZSTD) {
        rc = wpk_stream_zstd_in(ar, wpk_owner_rec(ar, t), buf, t->nbytes, fn, user);
    } else {
        for (uint64_t done = 0; rc == WPACK_OK && done < t->nbytes; done += WPK_PIECE) {
            rc = fn(user, buf + done,
                    t->nbytes - done < WPK_PIECE ? (size_t)(t->nbytes - done) : WPK_PIECE);
            source_idle(h);
        }
    }
    keep(ar, t, buf, cap);
    return rc;
}

/* stream_windows' consumer for a checked partial read: the bytes of
 * [offset, offset + n) of the stream copied out as they pass. */
typedef struct {
    uint64_t pos, offset;
    uint8_t *dst;
    size_t n;
} slice_out;

static int copy_slice(void *user, const void *p, size_t k)
{
    slice_out *s = user;
    uint64_t a = s->pos > s->offset ? s->pos : s->offset;
    uint64_t b = s->pos + k < s->offset + s->n ? s->pos + k : s->offset + s->n;
    if (a < b)
        memcpy(s->dst + (a - s->offset), (const uint8_t *)p + (a - s->pos), (size_t)(b - a));
    s->pos += k;
    return WPACK_OK;
}

int wpk_source_read_checked(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset,
                            void *dst, size_t n)
{
    int rc;
    if (from_kept(ar, t, offset, dst, n, &rc)) /* kept copies were checked whole */
        return rc;
    /* with chunk checksums: only the chunks that hold the part, each
     * checked (spec 19b), straight into dst but for partial end chunks */
    wpk_sums sums;
    const wpack_archive *sh;
    if (t->codec == WPACK_CODEC_NONE && wpk_sums_of(ar, t, &sh, &sums) && wpk_unmapped(sh)) {
        int known = wpk_checked_get(ar, wpk_owner_of(t));
        return known > 0 ? wpk_failed_before(ar, t, known)
                         : wpk_sums_fetch(ar, t, sh, &sums, offset, dst, n);
    }
    const wpack_archive *h = wpk_holder(ar, t);
    if (t->codec != WPACK_CODEC_ZSTD && h && wpk_unmapped(h) && h->src.stream_window &&
        t->stored_length > h->src.stream_window) {
        /* too large to hold: streamed whole, hashed, the slice copied out
         * on the way; dst counts only when the whole entry's XXH3 matched */
        slice_out s = {0, offset, dst, n};
        rc = stream_windows(ar, t, h, copy_slice, &s);
    } else {
        rc = whole_then_part(ar, t, offset, dst, n);
    }
    if (rc == WPACK_OK)
        wpk_checked_set(ar, wpk_owner_of(t), WPACK_OK);
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

/* ------------------------------------------------ read plans */

/* Entries' stored extents held by h, in the caller's order, to h's source. */
static void plan_holder(const wpack_archive *ar, const wpack_archive *h, const uint64_t *entries,
                       size_t n, uint64_t *v)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        wpack_tensor t;
        wpk_fill_tensor(ar, entries[i], &t);
        if (t.fill || t.data || !t.stored_length || wpk_holder(ar, &t) != h)
            continue;
        if (k && v[2 * k - 2] == t.offset && v[2 * k - 1] == t.stored_length)
            continue; /* an alias right after its target: read from the kept copy */
        v[2 * k] = t.offset;
        v[2 * k + 1] = t.stored_length;
        k++;
    }
    h->src.plan(h->src.user, v, k);
}

int wpack_read_plan(const wpack_archive *ar, const uint64_t *entries, size_t n)
{
    if (!ar || (n && !entries))
        return WPACK_E_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (entries[i] >= ar->info.entry_count)
            return wpk_fail((wpack_archive *)ar, WPACK_E_NOT_FOUND,
                            "wpack_read_plan: entry %llu of %llu", (unsigned long long)entries[i],
                            (unsigned long long)ar->info.entry_count);
    uint64_t *v = n <= SIZE_MAX / (2 * sizeof *v) ? malloc(2 * (n ? n : 1) * sizeof *v) : NULL;
    if (!v)
        return WPACK_E_NOMEM;
    for (uint32_t s = 0; s <= ar->nshards; s++) {
        const wpack_archive *h = s ? ar->shards[s - 1] : ar;
        if (h && wpk_unmapped(h) && h->src.plan)
            plan_holder(ar, h, entries, n, v);
    }
    free(v);
    return WPACK_OK;
}
