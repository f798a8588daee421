/* read.c - tensor bytes out: wpack_read(_ex), wpack_read_stream, and
 * verify on read (each entry's bytes checked against its XXH3 once per
 * open, the result remembered per entry). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"

/* ---------------------------------------------- the per-entry check marks */

enum { MARK_UNKNOWN = 0, MARK_PASSED = 255 }; /* else the error code found */

int wpk_reads_init(wpack_archive *ar)
{
    /* one byte per entry: bounded by the index's 80 bytes per entry */
    uint64_t n = ar->info.entry_count ? ar->info.entry_count : 1;
    ar->checked = calloc((size_t)n, 1);
    if (!ar->checked || wpk_chunk_cache_new(ar) != WPACK_OK || wpk_kept_new(ar) != WPACK_OK ||
        wpk_chunk_marks_new(ar) != WPACK_OK)
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory for the read state of %llu entries",
                        (unsigned long long)n);
    return WPACK_OK;
}

void wpk_reads_free(wpack_archive *ar)
{
    free((void *)ar->checked);
    ar->checked = NULL;
    wpk_chunk_cache_free(ar);
    wpk_kept_free(ar);
    wpk_chunk_marks_free(ar);
}

void wpk_checked_set(const wpack_archive *ar, uint64_t i, int rc)
{
    /* only what the bytes themselves say; out of memory may pass next time */
    if (ar->checked && (rc == WPACK_OK || rc == WPACK_E_CHECKSUM || rc == WPACK_E_DECODE))
        atomic_store_explicit(&ar->checked[i], rc == WPACK_OK ? MARK_PASSED : (unsigned char)rc,
                              memory_order_relaxed);
}

int wpk_checked_get(const wpack_archive *ar, uint64_t i)
{
    unsigned m = ar->checked ? atomic_load_explicit(&ar->checked[i], memory_order_relaxed)
                             : MARK_UNKNOWN;
    return m == MARK_UNKNOWN ? -1 : m == MARK_PASSED ? WPACK_OK : (int)m;
}

void wpk_entry_label(const wpack_archive *ar, const wpack_tensor *t, char *buf, size_t len)
{
    char q[256];
    wpk_quote(q, sizeof q, t->name, t->name_len);
    uint32_t s = wpk_shard_slot(ar, t);
    if (s < ar->nshards && ar->shard_paths && ar->shard_paths[s])
        wpk_fmt(buf, len, "tensor '%s' (shard %s)", q, ar->shard_paths[s]);
    else
        wpk_fmt(buf, len, "tensor '%s'", q);
}

/* Messages are set under the handle's lock, so a shared handle may take
 * them; a failed check is the one thing a reader call reports this way. */
int wpk_bad_hash(const wpack_archive *ar, const wpack_tensor *t, uint64_t got)
{
    char q[768];
    wpk_entry_label(ar, t, q, sizeof q);
    wpk_checked_set(ar, wpk_owner_of(t), WPACK_E_CHECKSUM);
    if (t->codec == WPACK_CODEC_ZSTD)
        return wpk_fail((wpack_archive *)ar, WPACK_E_CHECKSUM,
                        "%s: decoded bytes hash to %016llx, expected %016llx", q,
                        (unsigned long long)got, (unsigned long long)t->decoded_checksum);
    return wpk_fail((wpack_archive *)ar, WPACK_E_CHECKSUM,
                    "%s: checksum mismatch (stored %016llx, bytes hash to %016llx)", q,
                    (unsigned long long)t->checksum, (unsigned long long)got);
}

int wpk_read_failed(const wpack_archive *ar, const wpack_tensor *t, int rc)
{
    char q[768];
    wpk_entry_label(ar, t, q, sizeof q);
    wpk_checked_set(ar, wpk_owner_of(t), rc);
    if (rc != WPACK_E_DECODE && wpk_needs_fetch(ar, t))
        return rc; /* the fetch (source.c) set a message naming the tensor */
    if (rc == WPACK_E_DECODE)
        return wpk_fail((wpack_archive *)ar, rc,
                        "%s: a compressed chunk does not decode to its declared size, "
                        "or has bytes after its frame", q);
    return wpk_fail((wpack_archive *)ar, rc, "%s: cannot decode: %s", q,
                    wpack_error_describe(rc));
}

/* A check that failed before, reported again. */
int wpk_failed_before(const wpack_archive *ar, const wpack_tensor *t, int rc)
{
    char q[768];
    wpk_entry_label(ar, t, q, sizeof q);
    return wpk_fail((wpack_archive *)ar, rc, "%s: %s (found by an earlier check)", q,
                    wpack_error_describe(rc));
}

int wpk_known_check(const wpack_archive *ar, const wpack_tensor *t)
{
    return t->fill ? WPACK_OK : wpk_checked_get(ar, wpk_owner_of(t));
}

/* ---------------------------------------------------------- reading bytes */

/* wpack_read without verification. */
static int read_raw(const wpack_archive *ar, uint64_t i, uint64_t offset, void *dst,
                    size_t nbytes)
{
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    if (!wpk_in_bounds(offset, nbytes, t.nbytes))
        return WPACK_E_INVALID_ARGUMENT;
    if (!nbytes) /* dst may be NULL */
        return WPACK_OK;
    if (wpk_needs_fetch(ar, &t))
        return wpk_source_read(ar, &t, offset, dst, nbytes);
    if (t.codec == WPACK_CODEC_ZSTD)
        return wpk_read_zstd(ar, wpk_owner_rec(ar, &t), t.nbytes, offset, dst, nbytes);
    if (t.data) {
        memcpy(dst, (const uint8_t *)t.data + offset, nbytes);
        return WPACK_OK;
    }
    uint8_t *out = dst;
    size_t unit = t.fill_size;
    for (size_t k = 0; k < nbytes; k++)
        out[k] = ((const uint8_t *)t.fill)[(offset + k) % unit];
    return WPACK_OK;
}

/* Entry i's logical bytes (any kind and codec) to fn, unchecked: views
 * straight from the mapping, zstd chunks decoded once, splats expanded. */
static int stream(const wpack_archive *ar, uint64_t i, wpk_piece_fn fn, void *user)
{
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    if (wpk_needs_fetch(ar, &t))
        return wpk_source_stream(ar, &t, fn, user);
    if (t.codec == WPACK_CODEC_ZSTD)
        return wpk_stream_zstd(ar, wpk_owner_rec(ar, &t), t.nbytes, fn, user);
    uint8_t *buf = NULL;
    if (!t.data && !(buf = malloc(t.nbytes < WPK_PIECE ? (size_t)t.nbytes + 1 : WPK_PIECE)))
        return WPACK_E_NOMEM;
    int rc = WPACK_OK;
    for (uint64_t done = 0; rc == WPACK_OK && done < t.nbytes; done += WPK_PIECE) {
        size_t n = t.nbytes - done < WPK_PIECE ? (size_t)(t.nbytes - done) : WPK_PIECE;
        if (t.data) { /* straight from the mapping */
            rc = fn(user, (const uint8_t *)t.data + done, n);
        } else { /* a splat, expanded */
            read_raw(ar, i, done, buf, n);
            rc = fn(user, buf, n);
        }
    }
    free(buf);
    return rc;
}

typedef struct {
    wpk_hasher *h;                  /* NULL: not hashing */
    wpk_piece_fn fn;
    void *user;
    int fn_rc;                      /* what the caller's fn returned, if it stopped */
    int check_bool;
    uint64_t done, bad_at;
    unsigned bad_value;
    wpk_sums_cursor *sums;          /* NULL: chunk checksums not checked */
} check_ctx;

/* Bool bytes other than 0 and 1 are refused where bytes are checked (spec
 * 21.17): at is the first such byte's offset in the tensor. */
static int bad_bool(const wpack_archive *ar, const wpack_tensor *t, uint64_t at, unsigned value)
{
    char q[256];
    wpk_quote(q, sizeof q, t->name, t->name_len);
    return wpk_fail((wpack_archive *)ar, WPACK_E_VALUE,
                    "tensor '%s': bool byte %llu is %u; bools are 0 or 1", q,
                    (unsigned long long)at, value);
}

/* The bytes [offset, offset + n) of t handed out by a checked read. */
static int check_bools(const wpack_archive *ar, const wpack_tensor *t, uint64_t offset,
                       const void *p, size_t n)
{
    if (t->dtype != WPACK_DTYPE_BOOL)
        return WPACK_OK;
    size_t b = wpk_first_bad_bool(p, n);
    return b < n ? bad_bool(ar, t, offset + b, ((const uint8_t *)p)[b]) : WPACK_OK;
}

/* Hash each piece just before the caller gets it (it is in cache then). */
static int check_piece(void *u, const void *p, size_t n)
{
    check_ctx *c = u;
    if (c->h)
        wpk_hasher_update(c->h, p, n);
    if (c->sums)
        wpk_sums_cursor_feed(c->sums, p, n);
    size_t b;
    if (c->check_bool && c->bad_at == UINT64_MAX && (b = wpk_first_bad_bool(p, n)) < n) {
        c->bad_at = c->done + b;
        c->bad_value = ((const uint8_t *)p)[b];
    }
    c->done += n;
    return c->fn ? (c->fn_rc = c->fn(c->user, p, n)) : 0;
}

int wpk_check_stream(const wpack_archive *ar, uint64_t i, wpk_piece_fn fn, void *user, int mode)
{
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    if (mode & WPK_CHECK_HASH) /* a checked read hands out only 0 and 1 as bools */
        mode |= WPK_CHECK_BOOL;
    if (t.fill) /* a splat: its fill checksum is checked at open, not its value */
        mode &= WPK_CHECK_BOOL;
    int check_bool = (mode & WPK_CHECK_BOOL) && t.dtype == WPACK_DTYPE_BOOL;
    check_ctx c = {NULL, fn, user, WPACK_OK, check_bool, 0, UINT64_MAX, 0, NULL};
    if ((mode & WPK_CHECK_HASH) && !(c.h = wpk_hasher_new()))
        return WPACK_E_NOMEM;
    /* verify: each chunk checksum too, in the same pass */
    wpk_sums_cursor sc;
    wpk_sums sums;
    const wpack_archive *holder;
    wpk_hasher *sh = NULL;
    if (c.h && (mode & WPK_CHECK_SUMS) && wpk_sums_of(ar, &t, &holder, &sums)) {
        if (!(sh = wpk_hasher_new())) {
            wpk_hasher_free(c.h);
            return WPACK_E_NOMEM;
        }
        wpk_sums_cursor_init(&sc, &sums, sh);
        c.sums = &sc;
    }
    int rc = stream(ar, i, check_piece, &c);
    uint64_t got = c.h ? wpk_hasher_digest(c.h) : 0;
    wpk_hasher_free(c.h);
    wpk_hasher_free(sh);
    if (rc && rc == c.fn_rc)
        return rc; /* the caller stopped: its own error */
    if (rc)
        return wpk_read_failed(ar, &t, rc);
    if (!c.h)
        return c.bad_at != UINT64_MAX ? bad_bool(ar, &t, c.bad_at, c.bad_value) : WPACK_OK;
    if (got != t.decoded_checksum)
        return wpk_bad_hash(ar, &t, got);
    /* the whole matched, a chunk did not: its sum is wrong, and a partial
     * read of that chunk would be refused (19b) */
    if (c.sums && (rc = wpk_sums_cursor_end(c.sums, ar, &t)))
        return rc;
    if (c.bad_at != UINT64_MAX) /* not marked passed: every checked read refuses it */
        return bad_bool(ar, &t, c.bad_at, c.bad_value);
    wpk_checked_set(ar, wpk_owner_of(&t), WPACK_OK);
    return WPACK_OK;
}

static int verifying(const wpack_archive *ar, unsigned flags)
{
    return (flags & WPACK_READ_VERIFY) || (ar->flags & WPACK_OPEN_VERIFY_READS);
}

int wpack_verify_once(const wpack_archive *ar, uint64_t i)
{
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    if (t.fill)
        return WPACK_OK;
    int known = wpk_checked_get(ar, wpk_owner_of(&t));
    if (known >= 0)
        return known ? wpk_failed_before(ar, &t, known) : WPACK_OK;
    return wpk_check_stream(ar, i, NULL, NULL, WPK_CHECK_HASH);
}

static int read_checked(const wpack_archive *ar, uint64_t i, uint64_t offset, void *dst,
                        size_t nbytes, unsigned flags);

int wpack_read_ex(const wpack_archive *ar, uint64_t i, uint64_t offset, void *dst, size_t nbytes,
                  unsigned flags)
{
    int rc = read_checked(ar, i, offset, dst, nbytes, flags);
    if (rc || !verifying(ar, flags))
        return rc;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    return check_bools(ar, &t, offset, dst, nbytes);
}

static int read_checked(const wpack_archive *ar, uint64_t i, uint64_t offset, void *dst,
                        size_t nbytes, unsigned flags)
{
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    if ((flags & ~WPACK_READ_VERIFY) || (nbytes && !dst)) /* an unknown flag may ask for a check */
        return WPACK_E_INVALID_ARGUMENT;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    int known = wpk_known_check(ar, &t);
    if (known > 0) /* found bad before: refused, verifying or not */
        return wpk_failed_before(ar, &t, known);
    if (!verifying(ar, flags))
        return read_raw(ar, i, offset, dst, nbytes);
    if (!wpk_in_bounds(offset, nbytes, t.nbytes))
        return WPACK_E_INVALID_ARGUMENT;
    if (known < 0 && offset == 0 && nbytes == t.nbytes) {
        /* the whole tensor: hash what was read, in one pass */
        int rc = read_raw(ar, i, 0, dst, nbytes);
        if (rc)
            return wpk_read_failed(ar, &t, rc);
        uint64_t got = wpk_xxh3(dst, nbytes);
        if (got != t.decoded_checksum)
            return wpk_bad_hash(ar, &t, got);
        if ((rc = check_bools(ar, &t, 0, dst, nbytes)))
            return rc; /* not marked passed (see wpk_check_stream) */
        wpk_checked_set(ar, wpk_owner_of(&t), WPACK_OK);
        return WPACK_OK;
    }
    if (wpk_needs_fetch(ar, &t) && t.codec != WPACK_CODEC_ZSTD) /* one checked fetch */
        return wpk_source_read_checked(ar, &t, offset, dst, nbytes);
    /* a part of a mapped entry with chunk checksums: only its chunks are
     * hashed, each once per open (spec 19b) */
    wpk_sums sums;
    const wpack_archive *holder;
    if (known < 0 && t.data && wpk_sums_of(ar, &t, &holder, &sums)) {
        int rc = wpk_sums_check_mapped(ar, &t, &sums, t.data, offset, nbytes);
        return rc ? rc : read_raw(ar, i, offset, dst, nbytes);
    }
    /* a part of a zstd entry with them: only its chunks decoded (fetched) */
    if (known < 0 && t.codec == WPACK_CODEC_ZSTD && wpk_sums_of(ar, &t, &holder, &sums))
        return wpk_sums_read_zstd(ar, &t, holder, &sums, offset, dst, nbytes);
    int rc = known < 0 ? wpk_check_stream(ar, i, NULL, NULL, WPK_CHECK_HASH) : WPACK_OK;
    if (rc == WPACK_OK && wpk_needs_fetch(ar, &t)) /* a fetched part: from a checked whole */
        return wpk_source_read_checked(ar, &t, offset, dst, nbytes);
    return rc ? rc : read_raw(ar, i, offset, dst, nbytes);
}

int wpack_tensor_view_range(const wpack_archive *ar, uint64_t i, uint64_t offset,
                            uint64_t nbytes, const void **data)
{
    *data = NULL;
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    if (!t.data)
        return WPACK_E_NO_VIEW;
    if (!wpk_in_bounds(offset, nbytes, t.nbytes))
        return WPACK_E_INVALID_ARGUMENT;
    int known = wpk_known_check(ar, &t);
    if (known > 0) /* found bad before: refused, verifying or not */
        return wpk_failed_before(ar, &t, known);
    int rc = WPACK_OK;
    wpk_sums sums;
    const wpack_archive *holder;
    if (known < 0 && (ar->flags & WPACK_OPEN_VERIFY_READS))
        rc = wpk_sums_of(ar, &t, &holder, &sums)
                 ? wpk_sums_check_mapped(ar, &t, &sums, t.data, offset, (size_t)nbytes)
                 : wpack_verify_once(ar, i);
    if (rc == WPACK_OK && (ar->flags & WPACK_OPEN_VERIFY_READS))
        rc = check_bools(ar, &t, offset, (const uint8_t *)t.data + offset, (size_t)nbytes);
    if (rc == WPACK_OK)
        *data = (const uint8_t *)t.data + offset;
    return rc;
}

int wpack_read(const wpack_archive *ar, uint64_t i, uint64_t offset, void *dst, size_t nbytes)
{
    return wpack_read_ex(ar, i, offset, dst, nbytes, 0);
}

int wpack_read_stream(const wpack_archive *ar, uint64_t i, wpack_read_fn fn, void *user,
                      unsigned flags)
{
    if (i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    if (!fn || (flags & ~WPACK_READ_VERIFY))
        return WPACK_E_INVALID_ARGUMENT;
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    int known = wpk_known_check(ar, &t);
    if (known > 0) /* found bad before: refused, verifying or not */
        return wpk_failed_before(ar, &t, known);
    int mode = 0;
    if (verifying(ar, flags)) /* bools each time: entries may share checked bytes */
        mode = (known < 0 ? WPK_CHECK_HASH : 0) | WPK_CHECK_BOOL;
    return wpk_check_stream(ar, i, fn, user, mode);
}
