/*
 * update.c - in-place index updates (spec 14, In-place update protocol):
 * add, replace or drop calibration statistics, metadata strings and
 * name-map names without touching the data region.
 *
 * The new index (generation g+1) holds only live records: it is rebuilt from
 * the open archive with every string and aux item copied once, so it has the
 * size a fresh archive's index would have. It goes, with its trailer, to the
 * first of these places that does not overlap generation g:
 *   1. right after the data region, when it fits before g's index;
 *   2. ending exactly at the end of the file, when it fits after g's trailer;
 *   3. right after g's trailer (the file grows).
 * The file never shrinks (readers may have mapped it), and its part after
 * the data region stays below three times the largest generation. Then:
 * fsync; rewrite the superblock (one 128-byte write); fsync. Killed before
 * the superblock names it, a generation placed by 1 is invisible (the old
 * one is intact), one placed by 2 or 3 is the file's last bytes and open
 * rule 4.1 takes it only when its index hashes right.
 *
 * Records are validated by the reader's own checks: the built index is
 * opened in memory (wpk_check_candidate) before anything is written.
 * The new index is built in update_index.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "buf.h"
#include "bytes.h"
#include "wpack.h"
#include "reader.h"
#include "path_lock.h"
#include "shard_of.h"
#include "update.h"

/* The flags wpack_update_begin takes: test hooks only, compiled into test
 * builds (WPACK_TEST_HOOKS: the Makefile's obj-hooks), never released. */
#ifdef WPACK_TEST_HOOKS
#define UPDATE_FLAGS WPACK_UPDATE_STOP_AFTER_APPEND
#else
#define UPDATE_FLAGS 0u
#endif

int wpk_ufail(wpack_update *u, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(u->errmsg, sizeof u->errmsg, fmt, ap);
    va_end(ap);
    wpk_msg_escape(u->errmsg, sizeof u->errmsg); /* paths and names in it may hold anything */
    return code;
}

/* ------------------------------------------------------------ the session */

static void free_kvs(kv *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].value);
    }
    free(v);
}

static void free_stats(wpack_stats_in *s)
{
    free((void *)s->key);
    free((void *)s->min); /* min..variance share one block */
    free((void *)s->hist_edges);
    free((void *)s->hist_counts);
    free((void *)s->percentiles);
}

void wpack_update_abort(wpack_update *u)
{
    if (!u)
        return;
    wpack_close(u->ar);
    if (u->fd >= 0)
        close(u->fd); /* releases the lock */
    for (size_t i = 0; i < u->nstats; i++)
        free_stats(&u->stats[i]);
    free(u->stats);
    wpk_nameset_free(&u->stats_keys[0]);
    wpk_nameset_free(&u->stats_keys[1]);
    free_kvs(u->drops, u->ndrops);
    free_kvs(u->meta, u->nmeta);
    free_kvs(u->names, u->nnames);
    free(u->path);
    free(u);
}

const char *wpack_update_errmsg(const wpack_update *u)
{
    return u ? u->errmsg : "out of memory";
}

/* 0, or the errno of a failed fsync. */
static int sync_errno(int fd)
{
    return fsync(fd) != 0 ? errno : 0;
}

static int reopen(wpack_update *u)
{
    wpack_close(u->ar);
    u->ar = NULL;
    int rc = wpack_open_file(&u->ar, u->path, 0);
    if (rc)
        return wpk_ufail(u, rc, "%s", u->ar ? wpack_errmsg(u->ar) : "out of memory");
    return WPACK_OK;
}

/* Open u->path for writing and take the updaters' lock on it. */
static int lock_path(wpack_update *u)
{
    char msg[512];
    int rc = wpk_lock_path(u->path, O_RDWR, &u->fd, msg, sizeof msg);
    struct stat st;
    if (rc == WPACK_OK && fstat(u->fd, &st) == 0) /* root opens it O_RDWR all the same */
        rc = wpk_atomic_writable(u->path, NULL, st.st_mode, msg, sizeof msg);
    return rc ? wpk_ufail(u, rc, "%s", msg) : WPACK_OK;
}

int wpack_update_begin(wpack_update **out, const char *path, unsigned flags, char *errbuf,
                       size_t errlen)
{
    if (errbuf && errlen)
        errbuf[0] = 0;
    wpack_update *u = calloc(1, sizeof *u);
    *out = u;
    if (!u) {
        if (errbuf && errlen)
            wpk_fmt(errbuf, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    u->fd = -1;
    u->flags = flags;
    int rc = WPACK_OK;
    if (flags & ~UPDATE_FLAGS) {
        rc = wpk_ufail(u, WPACK_E_INVALID_ARGUMENT, "update: unknown flags 0x%x", flags);
        goto out;
    }
    if (!path) {
        rc = wpk_ufail(u, WPACK_E_INVALID_ARGUMENT, "update: NULL path");
        goto out;
    }
    if (!(u->path = strdup(path))) {
        rc = wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    /* One updater at a time; readers take no lock. The lock is on the
     * inode: a rewrite that replaced the file while we waited (convert or
     * cast --in-place hold this lock until their rename) leaves us holding
     * the lock of a file no longer at path, and the archive we open by path
     * then is another file than the one we would write. Start again on the
     * file now at path (bounded: a path replaced without end fails). */
    for (int attempt = 0;; attempt++) {
        if ((rc = lock_path(u)))
            goto out;
        if ((rc = reopen(u)))
            goto out;
        struct stat st;
        if (fstat(u->fd, &st) != 0) {
            rc = wpk_ufail(u, WPACK_E_IO, "%s: stat: %s", path, strerror(errno));
            goto out;
        }
        if (u->ar->file_dev == (uint64_t)st.st_dev && u->ar->file_ino == (uint64_t)st.st_ino)
            break;
        if (attempt == 16) {
            rc = wpk_ufail(u, WPACK_E_IO, "%s: replaced by another file %d times while "
                                          "waiting for its lock: not updating", path, attempt + 1);
            goto out;
        }
        close(u->fd); /* releases the lock of the replaced file */
        u->fd = -1;
    }
    char *set;
    if ((rc = wpk_shard_of_set(u->ar, path, &set))) {
        rc = wpk_ufail(u, rc, "out of memory");
        goto out;
    }
    if (set) {
        rc = wpk_ufail(u, WPACK_E_SHARD, "%s is a shard of the set at %s, which records its "
                       "length and index XXH3: changed in place it would make the whole set "
                       "fail to open; update the set through %s (its stats, metadata and names "
                       "are the set's)", path, set, set);
        free(set);
        goto out;
    }
    const wpack_info *in = &u->ar->info;
    if (in->format_minor > WPACK_FORMAT_MINOR) {
        rc = wpk_ufail(u, WPACK_E_VERSION, "%s: format 1.%u is newer than this library's 1.%d: "
                   "not updating an index it may not fully understand", path, in->format_minor,
                   WPACK_FORMAT_MINOR);
        goto out;
    }
    if (wpk_ld64(u->ar->super + WPK_H_GENERATION_OFF) != in->generation) {
        /* A previous update stopped before its superblock rewrite and open
         * took its generation (rule 4.1): commit it first, else our trailer
         * would be two generations ahead of the superblock. */
        uint8_t super[WPK_HEADER_SIZE];
        memcpy(super, u->ar->head, WPK_HEADER_SIZE);
        wpk_header_seal(super, WPK_SUPERBLOCK_MAGIC);
        int e = wpk_pwrite_all(u->fd, super, sizeof super, 0);
        if (e || (e = sync_errno(u->fd))) {
            rc = wpk_ufail(u, WPACK_E_IO, "%s: finishing the interrupted update: %s", path,
                           strerror(e));
            goto out;
        }
        if ((rc = reopen(u)))
            goto out;
    }
out:
    u->errcode = rc; /* a session that did not begin can only fail */
    if (rc && errbuf && errlen)
        wpack_text_escape(errbuf, errlen, u->errmsg, strlen(u->errmsg)); /* cut whole */
    return rc;
}

/* ------------------------------------------------------------ the edits */

static int name_ok(wpack_update *u, const char *what, const char *s)
{
    if (!s)
        return wpk_ufail(u, WPACK_E_INVALID_ARGUMENT, "%s: NULL", what);
    const char *why = wpk_name_problem((const uint8_t *)s, strlen(s));
    if (why) {
        char q[200];
        wpk_quote(q, sizeof q, s, strlen(s));
        return wpk_ufail(u, WPACK_E_NAME, "%s '%s': %s", what, q, why);
    }
    return WPACK_OK;
}

static void *dup_mem(const void *p, size_t n)
{
    void *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

/* Copy s's arrays (the caller's may go away before commit). The values
 * themselves are checked at commit, by the reader's validation of the new
 * index; here only what the copy needs: sizes within limits, no NULLs. */
static int copy_stats(wpack_update *u, wpack_stats_in *d, const wpack_stats_in *s)
{
    uint32_t c = s->channels;
    if (c < 1 || c > WPK_LIMIT_CHANNELS || s->hist_bins > WPK_LIMIT_HIST_BINS ||
        s->percentile_count > WPK_LIMIT_PERCENTILES || !s->min || !s->max || !s->absmax ||
        !s->mean || !s->variance || (s->hist_bins && (!s->hist_edges || !s->hist_counts)) ||
        (s->percentile_count && !s->percentiles))
        return wpk_ufail(u, WPACK_E_STATS,
                     "%s stats '%s': channels (1..%u), bins, percentiles or a values array invalid",
                     wpk_stats_kind_name(s->kind), s->key, (unsigned)WPK_LIMIT_CHANNELS);
    memset(d, 0, sizeof *d);
    *d = *s;
    double *v = malloc(5 * (size_t)c * sizeof *v);
    d->key = strdup(s->key);
    d->min = v;
    d->hist_edges = NULL;
    d->hist_counts = NULL;
    d->percentiles = NULL;
    if (v) {
        const double *src[5] = {s->min, s->max, s->absmax, s->mean, s->variance};
        for (int j = 0; j < 5; j++)
            memcpy(v + (size_t)j * c, src[j], c * sizeof *v);
        d->max = v + c;
        d->absmax = v + 2 * (size_t)c;
        d->mean = v + 3 * (size_t)c;
        d->variance = v + 4 * (size_t)c;
    }
    int ok = d->key && v;
    if (s->hist_bins) {
        d->hist_edges = dup_mem(s->hist_edges, ((size_t)s->hist_bins + 1) * sizeof(double));
        d->hist_counts = dup_mem(s->hist_counts, (size_t)s->hist_bins * sizeof(uint64_t));
        ok = ok && d->hist_edges && d->hist_counts;
    }
    if (s->percentile_count) {
        d->percentiles = dup_mem(s->percentiles, 2 * (size_t)s->percentile_count * sizeof(double));
        ok = ok && d->percentiles;
    }
    if (!ok) {
        free_stats(d);
        return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
    }
    return WPACK_OK;
}

static const uint8_t *stats_key(void *ctx, uint64_t item, uint64_t *len)
{
    const wpack_update *u = ctx;
    *len = strlen(u->stats[item].key);
    return (const uint8_t *)u->stats[item].key;
}

/* The index in u->stats of the session's record (key, kind), or -1: a hash
 * set per kind, so a calibration file of n records is not n^2 / 2 compares
 * (100,000 TensorRT lines took 130 s, `create` of the same 1 s). */
static int64_t stats_find(const wpack_update *u, const char *key, int kind)
{
    uint64_t item;
    if (kind != WPACK_STATS_WEIGHT && kind != WPACK_STATS_ACTIVATION)
        return -1;
    return wpk_nameset_find(&u->stats_keys[kind - 1], stats_key, (void *)u, (const uint8_t *)key,
                            strlen(key), &item) ? (int64_t)item : -1;
}

int wpack_update_set_stats(wpack_update *u, const wpack_stats_in *s)
{
    if (!u)
        return WPACK_E_INVALID_ARGUMENT;
    if (!s)
        return wpk_ufail(u, WPACK_E_INVALID_ARGUMENT, "stats: NULL record");
    int rc = name_ok(u, "stats key", s->key);
    if (rc)
        return rc;
    char why[300];
    if (WPK_RESERVED_CHECK(s, "wpack_stats_in", "wpack.h", why, sizeof why))
        return wpk_ufail(u, WPACK_E_INVALID_ARGUMENT, "stats '%s': %s", s->key, why);
    if (s->kind != WPACK_STATS_WEIGHT && s->kind != WPACK_STATS_ACTIVATION)
        return wpk_ufail(u, WPACK_E_STATS, "stats '%s': kind must be weight (%d) or activation (%d)",
                     s->key, WPACK_STATS_WEIGHT, WPACK_STATS_ACTIVATION);
    wpack_stats_in copy;
    if ((rc = copy_stats(u, &copy, s)))
        return rc;
    /* given again in this session: the later record wins */
    int64_t at = stats_find(u, s->key, s->kind);
    if (at >= 0) {
        free_stats(&u->stats[at]);
        u->stats[at] = copy;
        return WPACK_OK;
    }
    if (u->nstats == u->stats_cap) {
        size_t cap = u->stats_cap ? 2 * u->stats_cap : 16;
        wpack_stats_in *n = cap <= SIZE_MAX / sizeof *n ? realloc(u->stats, cap * sizeof *n) : NULL;
        if (!n) {
            free_stats(&copy);
            return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
        }
        u->stats = n;
        u->stats_cap = cap;
    }
    u->stats[u->nstats] = copy;
    if (!wpk_nameset_insert(&u->stats_keys[s->kind - 1], stats_key, u, (const uint8_t *)copy.key,
                            strlen(copy.key), u->nstats)) {
        free_stats(&copy);
        return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
    }
    u->nstats++;
    return WPACK_OK;
}

static int has_stats(const wpack_archive *ar, const char *key, int kind)
{
    uint64_t n = ar->sec_len[WPK_SEC_STATS] / WPK_STATS_REC_SIZE;
    size_t kl = strlen(key);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_STATS, i, WPK_STATS_REC_SIZE);
        if ((kind == 0 || r[WPK_S_KIND_OFF] == kind) && wpk_ld32(r + WPK_S_KEY_LEN_OFF) == kl &&
            memcmp(wpk_str(ar, wpk_ld64(r + WPK_S_KEY_OFF)), key, kl) == 0)
            return 1;
    }
    return 0;
}

static int push_kv(wpack_update *u, kv **v, size_t *n, const char *key, const char *value)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].key, key) == 0) { /* the later one wins */
            char *d = strdup(value);
            if (!d)
                return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
            free((*v)[i].value);
            (*v)[i].value = d;
            return WPACK_OK;
        }
    kv *g = realloc(*v, (*n + 1) * sizeof *g);
    if (!g)
        return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
    *v = g;
    g[*n].key = strdup(key);
    g[*n].value = strdup(value);
    if (!g[*n].key || !g[*n].value) {
        free(g[*n].key);
        free(g[*n].value);
        return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
    }
    (*n)++;
    return WPACK_OK;
}

int wpack_update_drop_stats(wpack_update *u, const char *key, int kind)
{
    if (!u)
        return WPACK_E_INVALID_ARGUMENT;
    int rc = name_ok(u, "stats key", key);
    if (rc)
        return rc;
    if (kind != 0 && kind != WPACK_STATS_WEIGHT && kind != WPACK_STATS_ACTIVATION)
        return wpk_ufail(u, WPACK_E_INVALID_ARGUMENT,
                     "drop stats '%s': kind must be weight, activation or 0 (both)", key);
    if (!has_stats(u->ar, key, kind))
        return wpk_ufail(u, WPACK_E_NOT_FOUND, "%s: no %s stats '%s' to drop", u->path,
                     kind ? wpk_stats_kind_name(kind) : "weight or activation", key);
    char k[2] = {(char)('0' + kind), 0};
    /* key and kind together name a drop: encode the kind into the value */
    kv *g = realloc(u->drops, (u->ndrops + 1) * sizeof *g);
    if (!g)
        return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
    u->drops = g;
    g[u->ndrops].key = strdup(key);
    g[u->ndrops].value = strdup(k);
    if (!g[u->ndrops].key || !g[u->ndrops].value) {
        free(g[u->ndrops].key);
        free(g[u->ndrops].value);
        return wpk_ufail(u, WPACK_E_NOMEM, "out of memory");
    }
    u->ndrops++;
    return WPACK_OK;
}

int wpack_update_set_string(wpack_update *u, const char *key, const char *value)
{
    if (!u)
        return WPACK_E_INVALID_ARGUMENT;
    int rc = name_ok(u, "metadata key", key);
    if (rc)
        return rc;
    if (!value)
        return wpk_ufail(u, WPACK_E_INVALID_ARGUMENT, "metadata '%s': NULL value", key);
    return push_kv(u, &u->meta, &u->nmeta, key, value); /* UTF-8 is checked at commit */
}

int wpack_update_add_name(wpack_update *u, const char *other_name, const char *entry)
{
    if (!u)
        return WPACK_E_INVALID_ARGUMENT;
    int rc = name_ok(u, "name-map name", other_name);
    if (rc || (rc = name_ok(u, "name-map entry", entry)))
        return rc;
    wpack_tensor t;
    uint64_t pos;
    if (wpk_search(u->ar, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, u->ar->info.entry_count,
                   (const uint8_t *)other_name, strlen(other_name), &pos))
        return wpk_ufail(u, WPACK_E_EXISTS, "name-map name '%s' is an entry name", other_name);
    if (wpack_find(u->ar, entry, &t) != WPACK_OK || strcmp(t.name, entry) != 0)
        return wpk_ufail(u, WPACK_E_NOT_FOUND, "name-map entry '%s': no tensor of that name", entry);
    return push_kv(u, &u->names, &u->nnames, other_name, entry);
}

/* ------------------------------------------------------------ commit */

/* Where generation g+1 (n bytes with its trailer) goes; see the top. */
static uint64_t place(const wpack_info *in, uint64_t L, uint64_t n)
{
    uint64_t d = in->data_offset + in->data_length, end;
    d += (8 - d % 8) % 8;
    if (n <= in->index_offset - d) /* index_offset >= align8(data end) */
        return d;
    if (L >= in->file_length && L - in->file_length >= n) {
        end = L - L % 8; /* file lengths of ours are multiples of 8 */
        if (end - n >= in->file_length)
            return end - n;
    }
    return in->file_length;
}

static int commit(wpack_update *u)
{
    wpk_buf idx = {0};
    int rc = wpk_update_build_index(u, &idx);
    if (rc)
        return rc;
    const wpack_info *in = &u->ar->info;
    struct stat st;
    if (fstat(u->fd, &st) != 0) {
        rc = wpk_ufail(u, WPACK_E_IO, "%s: stat: %s", u->path, strerror(errno));
        goto done;
    }
    uint64_t gen = in->generation + 1, L = (uint64_t)st.st_size, n, at, file_len;
    if (!wpk_add(idx.len, WPK_HEADER_SIZE, &n) || !wpk_add(in->file_length, n, &at)) {
        rc = wpk_ufail(u, WPACK_E_OVERFLOW, "%s: new file length overflows", u->path);
        goto done;
    }
    at = place(in, L, n);
    file_len = at + n;
    uint64_t sum = wpk_xxh3(idx.p, idx.len);
    uint8_t super[WPK_HEADER_SIZE], trailer[WPK_HEADER_SIZE];
    const wpk_generation g = {gen, at, idx.len, sum, file_len};
    memcpy(trailer, u->ar->head, WPK_HEADER_SIZE);
    memcpy(super, u->ar->head, WPK_HEADER_SIZE);
    wpk_header_encode(trailer, WPK_TRAILER_MAGIC, &g);
    wpk_header_encode(super, WPK_SUPERBLOCK_MAGIC, &g);
    /* The reader's own checks, before a byte is written. */
    char why[600];
    if ((rc = wpk_check_candidate(u->ar, super, idx.p, why, sizeof why))) {
        wpk_ufail(u, rc, "%s: %s", u->path, why);
        goto done;
    }
    /* Step 1: the new generation where it overlaps nothing live; sync. */
    int e = wpk_pwrite_all(u->fd, idx.p, idx.len, at);
    if (e || (e = wpk_pwrite_all(u->fd, trailer, sizeof trailer, at + idx.len)) ||
        (e = sync_errno(u->fd))) {
        rc = wpk_ufail(u, WPACK_E_IO, "%s: writing the new index: %s", u->path, strerror(e));
        /* The superblock still names generation g, which ends before L: a
         * part of the new one written past L (a full disk) goes, else every
         * later open would warn of an interrupted update that never was. */
        if (file_len > L && ftruncate(u->fd, (off_t)L) == 0)
            (void)sync_errno(u->fd);
        goto done;
    }
#ifdef WPACK_TEST_HOOKS
    if (u->flags & WPACK_UPDATE_STOP_AFTER_APPEND) {
        rc = wpk_ufail(u, WPACK_E_IO, "%s: stopped after the append (test hook)", u->path);
        goto done;
    }
#endif
    /* Step 2: the superblock, one 128-byte write in the first sector. */
    if ((e = wpk_pwrite_all(u->fd, super, sizeof super, 0)) || (e = sync_errno(u->fd))) {
        rc = wpk_ufail(u, WPACK_E_IO, "%s: rewriting the superblock: %s", u->path, strerror(e));
        goto done;
    }
    rc = WPACK_OK;
done:
    wpk_buf_free(&idx);
    return rc;
}

int wpack_update_commit(wpack_update *u, char *errbuf, size_t errlen)
{
    if (errbuf && errlen)
        errbuf[0] = 0;
    if (!u)
        return WPACK_E_INVALID_ARGUMENT;
    int rc = u->errcode ? u->errcode : !u->ar ? wpk_ufail(u, WPACK_E_STATE, "update not begun")
                                              : commit(u);
    if (rc && errbuf && errlen)
        wpack_text_escape(errbuf, errlen, u->errmsg, strlen(u->errmsg)); /* cut whole */
    wpack_update_abort(u);
    return rc;
}

int wpack_update_add_stats(const char *path, const wpack_stats_in *records, size_t count,
                           char *errbuf, size_t errlen)
{
    if (!path || (count && !records)) {
        if (errbuf && errlen)
            wpk_fmt(errbuf, errlen, "update: NULL argument");
        return WPACK_E_INVALID_ARGUMENT;
    }
    wpack_update *u;
    int rc = wpack_update_begin(&u, path, 0, errbuf, errlen);
    for (size_t i = 0; i < count && rc == WPACK_OK; i++) {
        /* the session holds only these records: one there is given twice */
        if (records[i].key && stats_find(u, records[i].key, records[i].kind) >= 0)
            rc = wpk_ufail(u, WPACK_E_EXISTS, "%s stats '%s' given twice",
                           wpk_stats_kind_name(records[i].kind), records[i].key);
        if (rc == WPACK_OK)
            rc = wpack_update_set_stats(u, &records[i]);
    }
    if (!u)
        return rc;
    if (rc) {
        if (errbuf && errlen)
            wpack_text_escape(errbuf, errlen, u->errmsg, strlen(u->errmsg)); /* cut whole */
        wpack_update_abort(u);
        return rc;
    }
    return wpack_update_commit(u, errbuf, errlen);
}
