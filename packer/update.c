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
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "bytes.h"
#include "wpack.h"
#include "reader.h"

/* A pending metadata string or name-map name (key -> value). */
typedef struct {
    char *key, *value;
} kv;

struct wpack_update {
    char *path;
    int fd;                     /* holds the updaters' lock (flock) */
    unsigned flags;
    wpack_archive *ar;
    wpack_stats_in *stats;      /* owned deep copies, one per (key, kind) */
    size_t nstats;
    kv *drops;                  /* stats to drop: key, value = kind ("1", "2" or "0": both) */
    size_t ndrops;
    kv *meta, *names;
    size_t nmeta, nnames;
    int errcode;
    char errmsg[700];
};

static int ufail(wpack_update *u, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int ufail(wpack_update *u, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(u->errmsg, sizeof u->errmsg, fmt, ap);
    va_end(ap);
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

static int pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = pwrite(fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0;
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 1;
}

/* h = template with a new magic and fields, checksummed. */
static void encode_header(uint8_t *h, const uint8_t *tmpl, const char *magic, uint64_t gen,
                          uint64_t index_off, uint64_t index_len, uint64_t sum, uint64_t file_len)
{
    memcpy(h, tmpl, WPK_HEADER_SIZE);
    memcpy(h + WPK_H_MAGIC_OFF, magic, 8);
    wpk_st64(h + WPK_H_GENERATION_OFF, gen);
    wpk_st64(h + WPK_H_INDEX_OFFSET_OFF, index_off);
    wpk_st64(h + WPK_H_INDEX_LENGTH_OFF, index_len);
    wpk_st64(h + WPK_H_INDEX_CHECKSUM_OFF, sum);
    wpk_st64(h + WPK_H_FILE_LENGTH_OFF, file_len);
    wpk_st64(h + WPK_H_CHECKSUM_OFF, wpk_xxh3(h, WPK_H_CHECKSUM_OFF));
}

static int reopen(wpack_update *u)
{
    wpack_close(u->ar);
    u->ar = NULL;
    int rc = wpack_open_file(&u->ar, u->path, 0);
    if (rc)
        return ufail(u, rc, "%s", u->ar ? wpack_errmsg(u->ar) : "out of memory");
    return WPACK_OK;
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
    if (!path) {
        rc = ufail(u, WPACK_E_INVALID_ARGUMENT, "update: NULL path");
        goto out;
    }
    if (!(u->path = strdup(path))) {
        rc = ufail(u, WPACK_E_NOMEM, "out of memory");
        goto out;
    }
    u->fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (u->fd < 0) {
        rc = ufail(u, WPACK_E_IO, "%s: %s", path, strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(u->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = ufail(u, WPACK_E_FILE_TYPE, "%s: not a regular file", path);
        goto out;
    }
    /* one updater at a time; readers take no lock */
    if (flock(u->fd, LOCK_EX) != 0) {
        rc = ufail(u, WPACK_E_IO, "%s: lock: %s", path, strerror(errno));
        goto out;
    }
    if ((rc = reopen(u)))
        goto out;
    const wpack_info *in = &u->ar->info;
    if (in->format_minor > WPACK_FORMAT_MINOR) {
        rc = ufail(u, WPACK_E_VERSION, "%s: format 1.%u is newer than this library's 1.%d: "
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
        memcpy(super + WPK_H_MAGIC_OFF, WPK_SUPERBLOCK_MAGIC, 8);
        wpk_st64(super + WPK_H_CHECKSUM_OFF, wpk_xxh3(super, WPK_H_CHECKSUM_OFF));
        if (!pwrite_all(u->fd, super, sizeof super, 0) || fsync(u->fd) != 0) {
            rc = ufail(u, WPACK_E_IO, "%s: finishing the interrupted update: %s", path,
                       strerror(errno));
            goto out;
        }
        if ((rc = reopen(u)))
            goto out;
    }
out:
    u->errcode = rc; /* a session that did not begin can only fail */
    if (rc && errbuf && errlen)
        wpk_fmt(errbuf, errlen, "%s", u->errmsg);
    return rc;
}

/* ------------------------------------------------------------ the edits */

static int name_ok(wpack_update *u, const char *what, const char *s)
{
    if (!s)
        return ufail(u, WPACK_E_INVALID_ARGUMENT, "%s: NULL", what);
    const char *why = wpk_name_problem((const uint8_t *)s, strlen(s));
    if (why) {
        char q[200];
        wpk_quote(q, sizeof q, s, strlen(s));
        return ufail(u, WPACK_E_NAME, "%s '%s': %s", what, q, why);
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
        return ufail(u, WPACK_E_STATS,
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
        return ufail(u, WPACK_E_NOMEM, "out of memory");
    }
    return WPACK_OK;
}

int wpack_update_set_stats(wpack_update *u, const wpack_stats_in *s)
{
    if (!u)
        return WPACK_E_INVALID_ARGUMENT;
    if (!s)
        return ufail(u, WPACK_E_INVALID_ARGUMENT, "stats: NULL record");
    int rc = name_ok(u, "stats key", s->key);
    if (rc)
        return rc;
    if (s->kind != WPACK_STATS_WEIGHT && s->kind != WPACK_STATS_ACTIVATION)
        return ufail(u, WPACK_E_STATS, "stats '%s': kind must be weight (%d) or activation (%d)",
                     s->key, WPACK_STATS_WEIGHT, WPACK_STATS_ACTIVATION);
    wpack_stats_in copy;
    if ((rc = copy_stats(u, &copy, s)))
        return rc;
    /* given again in this session: the later record wins */
    for (size_t i = 0; i < u->nstats; i++)
        if (u->stats[i].kind == s->kind && strcmp(u->stats[i].key, s->key) == 0) {
            free_stats(&u->stats[i]);
            u->stats[i] = copy;
            return WPACK_OK;
        }
    wpack_stats_in *n = realloc(u->stats, (u->nstats + 1) * sizeof *n);
    if (!n) {
        free_stats(&copy);
        return ufail(u, WPACK_E_NOMEM, "out of memory");
    }
    u->stats = n;
    u->stats[u->nstats++] = copy;
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
                return ufail(u, WPACK_E_NOMEM, "out of memory");
            free((*v)[i].value);
            (*v)[i].value = d;
            return WPACK_OK;
        }
    kv *g = realloc(*v, (*n + 1) * sizeof *g);
    if (!g)
        return ufail(u, WPACK_E_NOMEM, "out of memory");
    *v = g;
    g[*n].key = strdup(key);
    g[*n].value = strdup(value);
    if (!g[*n].key || !g[*n].value) {
        free(g[*n].key);
        free(g[*n].value);
        return ufail(u, WPACK_E_NOMEM, "out of memory");
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
        return ufail(u, WPACK_E_INVALID_ARGUMENT,
                     "drop stats '%s': kind must be weight, activation or 0 (both)", key);
    if (!has_stats(u->ar, key, kind))
        return ufail(u, WPACK_E_NOT_FOUND, "%s: no %s stats '%s' to drop", u->path,
                     kind ? wpk_stats_kind_name(kind) : "weight or activation", key);
    char k[2] = {(char)('0' + kind), 0};
    /* key and kind together name a drop: encode the kind into the value */
    kv *g = realloc(u->drops, (u->ndrops + 1) * sizeof *g);
    if (!g)
        return ufail(u, WPACK_E_NOMEM, "out of memory");
    u->drops = g;
    g[u->ndrops].key = strdup(key);
    g[u->ndrops].value = strdup(k);
    if (!g[u->ndrops].key || !g[u->ndrops].value) {
        free(g[u->ndrops].key);
        free(g[u->ndrops].value);
        return ufail(u, WPACK_E_NOMEM, "out of memory");
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
        return ufail(u, WPACK_E_INVALID_ARGUMENT, "metadata '%s': NULL value", key);
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
        return ufail(u, WPACK_E_EXISTS, "name-map name '%s' is an entry name", other_name);
    if (wpack_find(u->ar, entry, &t) != WPACK_OK || strcmp(t.name, entry) != 0)
        return ufail(u, WPACK_E_NOT_FOUND, "name-map entry '%s': no tensor of that name", entry);
    return push_kv(u, &u->names, &u->nnames, other_name, entry);
}

/* ------------------------------------------------------ the new index */

typedef struct {
    const wpack_archive *ar;
    wpk_buf strings, aux;
} pool;

static int put_str(pool *p, const void *s, uint64_t n, uint64_t *off)
{
    *off = p->strings.len;
    return n < SIZE_MAX && wpk_buf_append(&p->strings, s, (size_t)n) &&
           wpk_buf_zeros(&p->strings, 1) != SIZE_MAX;
}

/* An aux item at the next multiple of 8 (spec 17). */
static int put_aux(pool *p, const void *s, uint64_t n, uint64_t *off)
{
    if (p->aux.len % 8 && wpk_buf_zeros(&p->aux, 8 - p->aux.len % 8) == SIZE_MAX)
        return 0;
    *off = p->aux.len;
    return n < SIZE_MAX && wpk_buf_append(&p->aux, s, (size_t)n);
}

/* Re-home an old record's string reference (off at o, u32 len at o + 8). */
static int move_str(pool *p, uint8_t *rec, size_t o)
{
    uint64_t off, len = wpk_ld32(rec + o + 8);
    if (!put_str(p, wpk_str(p->ar, wpk_ld64(rec + o)), len, &off))
        return 0;
    wpk_st64(rec + o, off);
    return 1;
}

static const uint8_t *old_aux(const pool *p, uint64_t off)
{
    return p->ar->sec[WPK_SEC_AUX] + off;
}

/* Re-home an aux range (u64 off at o, u64 len at l); an empty one is 0. */
static int move_aux(pool *p, uint8_t *rec, size_t o, uint64_t len)
{
    uint64_t off = 0;
    if (len && !put_aux(p, old_aux(p, wpk_ld64(rec + o)), len, &off))
        return 0;
    wpk_st64(rec + o, off);
    return 1;
}

static int put_doubles(pool *p, const double *v, uint64_t n, uint64_t *off)
{
    if (!put_aux(p, NULL, 0, off))
        return 0;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t t[8];
        wpk_stf64(t, v[i]);
        if (!wpk_buf_append(&p->aux, t, 8))
            return 0;
    }
    return 1;
}

static int put_u64s(pool *p, const uint64_t *v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint8_t t[8];
        wpk_st64(t, v[i]);
        if (!wpk_buf_append(&p->aux, t, 8))
            return 0;
    }
    return 1;
}

/* One record of a sorted section: its key, and where its bytes come from. */
typedef struct {
    const uint8_t *key;
    uint64_t key_len;
    int kind;                   /* stats only */
    const uint8_t *old;         /* an old record, or NULL */
    const void *new_item;       /* wpack_stats_in * or kv * */
} item;

static int item_cmp(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = wpk_name_cmp(x->key, x->key_len, y->key, y->key_len);
    return c ? c : (x->kind > y->kind) - (x->kind < y->kind);
}

/* The sorted merge of new items and the old records no new one replaces
 * and no drop removes. */
static item *merge(const wpack_archive *ar, int sec, uint32_t rec_size, int with_kind,
                   item *fresh, size_t nfresh, const kv *drops, size_t ndrops, size_t *count)
{
    uint64_t old_n = ar->sec_len[sec] / rec_size;
    item *all = malloc((old_n + nfresh + 1) * sizeof *all);
    if (!all)
        return NULL;
    qsort(fresh, nfresh, sizeof *fresh, item_cmp);
    size_t n = 0;
    for (uint64_t i = 0; i < old_n; i++) {
        const uint8_t *r = wpk_rec(ar, sec, i, rec_size);
        item it = {(const uint8_t *)wpk_str(ar, wpk_ld64(r)), wpk_ld32(r + 8),
                   with_kind ? r[WPK_S_KIND_OFF] : 0, r, NULL};
        if (nfresh && bsearch(&it, fresh, nfresh, sizeof *fresh, item_cmp))
            continue;
        int dropped = 0;
        for (size_t d = 0; d < ndrops && !dropped; d++) {
            int k = drops[d].value[0] - '0';
            dropped = (k == 0 || k == it.kind) && strlen(drops[d].key) == it.key_len &&
                      memcmp(drops[d].key, it.key, it.key_len) == 0;
        }
        if (!dropped)
            all[n++] = it;
    }
    memcpy(all + n, fresh, nfresh * sizeof *fresh);
    n += nfresh;
    qsort(all, n, sizeof *all, item_cmp);
    *count = n;
    return all;
}

static int stats_record(pool *p, const item *it, uint8_t *rec)
{
    if (it->old) {
        memcpy(rec, it->old, WPK_STATS_REC_SIZE);
        uint64_t c = wpk_ld32(rec + WPK_S_CHANNELS_OFF), b = wpk_ld32(rec + WPK_S_HIST_BINS_OFF);
        uint64_t pc = wpk_ld32(rec + WPK_S_PCT_COUNT_OFF);
        return move_str(p, rec, WPK_S_KEY_OFF) && move_aux(p, rec, WPK_S_VALUES_OFF, 40 * c) &&
               move_aux(p, rec, WPK_S_HIST_OFF, b ? 16 * b + 8 : 0) &&
               move_aux(p, rec, WPK_S_PCT_OFF, 16 * pc);
    }
    const wpack_stats_in *s = it->new_item;
    uint64_t off, c = s->channels;
    memset(rec, 0, WPK_STATS_REC_SIZE);
    if (!put_str(p, s->key, it->key_len, &off))
        return 0;
    wpk_st64(rec + WPK_S_KEY_OFF, off);
    wpk_st32(rec + WPK_S_KEY_LEN_OFF, (uint32_t)it->key_len);
    rec[WPK_S_KIND_OFF] = (uint8_t)s->kind;
    rec[WPK_S_GRAN_OFF] = (uint8_t)s->granularity;
    wpk_st32(rec + WPK_S_AXIS_OFF, s->axis);
    wpk_st32(rec + WPK_S_CHANNELS_OFF, s->channels);
    wpk_st64(rec + WPK_S_COUNT_OFF, s->count);
    if (!put_doubles(p, s->min, 5 * c, &off)) /* min..variance are one block (copy_stats) */
        return 0;
    wpk_st64(rec + WPK_S_VALUES_OFF, off);
    wpk_st32(rec + WPK_S_HIST_BINS_OFF, s->hist_bins);
    wpk_st32(rec + WPK_S_PCT_COUNT_OFF, s->percentile_count);
    if (s->hist_bins) {
        if (!put_doubles(p, s->hist_edges, (uint64_t)s->hist_bins + 1, &off) ||
            !put_u64s(p, s->hist_counts, s->hist_bins))
            return 0;
        wpk_st64(rec + WPK_S_HIST_OFF, off);
    }
    if (s->percentile_count) {
        if (!put_doubles(p, s->percentiles, 2 * (uint64_t)s->percentile_count, &off))
            return 0;
        wpk_st64(rec + WPK_S_PCT_OFF, off);
    }
    return 1;
}

/* An array of string or bytes references: the items, then the pair table. */
static int move_ref_array(pool *p, uint8_t *rec, uint64_t count, int strings)
{
    const uint8_t *pairs = old_aux(p, wpk_ld64(rec + WPK_M_VALUE_OFF));
    wpk_buf table = {0};
    int ok = 1;
    for (uint64_t j = 0; j < count && ok; j++) {
        uint64_t o = wpk_ld64(pairs + 16 * j), n = wpk_ld64(pairs + 16 * j + 8), at = 0;
        uint8_t t[16];
        ok = strings ? put_str(p, wpk_str(p->ar, o), n, &at)
                     : (!n || put_aux(p, old_aux(p, o), n, &at));
        wpk_st64(t, at);
        wpk_st64(t + 8, n);
        ok = ok && wpk_buf_append(&table, t, 16);
    }
    uint64_t off = 0;
    ok = ok && (!count || put_aux(p, table.p, table.len, &off));
    wpk_st64(rec + WPK_M_VALUE_OFF, off);
    wpk_buf_free(&table);
    return ok;
}

static int meta_record(pool *p, const item *it, uint8_t *rec)
{
    if (!it->old) {
        const kv *m = it->new_item;
        uint64_t off, n = strlen(m->value);
        memset(rec, 0, WPK_META_REC_SIZE);
        if (!put_str(p, m->key, it->key_len, &off))
            return 0;
        wpk_st64(rec + WPK_M_KEY_OFF, off);
        wpk_st32(rec + WPK_M_KEY_LEN_OFF, (uint32_t)it->key_len);
        rec[WPK_M_TYPE_OFF] = WPACK_META_STRING;
        if (!put_str(p, m->value, n, &off))
            return 0;
        wpk_st64(rec + WPK_M_VALUE_OFF, off);
        wpk_st64(rec + WPK_M_COUNT_OFF, n);
        return 1;
    }
    memcpy(rec, it->old, WPK_META_REC_SIZE);
    if (!move_str(p, rec, WPK_M_KEY_OFF))
        return 0;
    uint64_t count = wpk_ld64(rec + WPK_M_COUNT_OFF), v = wpk_ld64(rec + WPK_M_VALUE_OFF);
    switch (rec[WPK_M_TYPE_OFF]) {
    case WPACK_META_STRING:
        if (!put_str(p, wpk_str(p->ar, v), count, &v))
            return 0;
        wpk_st64(rec + WPK_M_VALUE_OFF, v);
        return 1;
    case WPACK_META_BYTES:
        return move_aux(p, rec, WPK_M_VALUE_OFF, count);
    case WPACK_META_ARRAY:
        switch (rec[WPK_M_ELEM_TYPE_OFF]) {
        case WPACK_META_STRING:
            return move_ref_array(p, rec, count, 1);
        case WPACK_META_BYTES:
            return move_ref_array(p, rec, count, 0);
        case WPACK_META_BOOL:
            return move_aux(p, rec, WPK_M_VALUE_OFF, count);
        default: /* i64, f64 */
            return move_aux(p, rec, WPK_M_VALUE_OFF, 8 * count);
        }
    default: /* scalars: the value is in the record */
        return 1;
    }
}

static int name_record(pool *p, const item *it, uint8_t *rec)
{
    if (it->old) {
        memcpy(rec, it->old, WPK_NAMEMAP_REC_SIZE);
        return move_str(p, rec, WPK_N_NAME_OFF);
    }
    const kv *m = it->new_item;
    wpack_tensor t;
    uint64_t off;
    memset(rec, 0, WPK_NAMEMAP_REC_SIZE);
    if (wpack_find(p->ar, m->value, &t) != WPACK_OK || !put_str(p, m->key, it->key_len, &off))
        return 0; /* (the entry was found when the name was added) */
    wpk_st64(rec + WPK_N_NAME_OFF, off);
    wpk_st32(rec + WPK_N_NAME_LEN_OFF, (uint32_t)it->key_len);
    wpk_st32(rec + WPK_N_ENTRY_OFF, (uint32_t)t.index);
    return 1;
}

typedef int (*encode_fn)(pool *p, const item *it, uint8_t *rec);

static int encode_all(pool *p, const item *items, size_t n, uint32_t size, encode_fn fn,
                      wpk_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        size_t at = wpk_buf_zeros(out, size);
        if (at == SIZE_MAX || !fn(p, &items[i], out->p + at))
            return 0;
    }
    return 1;
}

/* Every record of section sec, its string at name_off and its aux range at
 * (aux_off, aux_len_off) re-homed. */
static int copy_records(pool *p, int sec, uint32_t size, size_t name_off, size_t aux_off,
                        size_t aux_len_off, wpk_buf *out)
{
    uint64_t n = p->ar->sec_len[sec] / size;
    for (uint64_t i = 0; i < n; i++) {
        size_t at = wpk_buf_zeros(out, size);
        if (at == SIZE_MAX)
            return 0;
        uint8_t *r = out->p + at;
        memcpy(r, wpk_rec(p->ar, sec, i, size), size);
        if (!move_str(p, r, name_off) || !move_aux(p, r, aux_off, wpk_ld64(r + aux_len_off)))
            return 0;
    }
    return 1;
}

static item *kv_items(const kv *v, size_t n)
{
    item *it = malloc((n + 1) * sizeof *it);
    for (size_t i = 0; it && i < n; i++)
        it[i] = (item){(const uint8_t *)v[i].key, strlen(v[i].key), 0, NULL, &v[i]};
    return it;
}

/* The new index in *out: only live records, each string and aux item once. */
static int build_index(wpack_update *u, wpk_buf *out)
{
    const wpack_archive *ar = u->ar;
    pool p = {ar, {0}, {0}};
    wpk_buf sec[WPK_SECTION_COUNT];
    memset(sec, 0, sizeof sec);
    item *fs = malloc((u->nstats + 1) * sizeof *fs), *fm = kv_items(u->meta, u->nmeta),
         *fn = kv_items(u->names, u->nnames);
    item *ss = NULL, *ms = NULL, *ns = NULL;
    size_t nss = 0, nms = 0, nns = 0;
    int ok = fs && fm && fn;
    for (size_t i = 0; ok && i < u->nstats; i++)
        fs[i] = (item){(const uint8_t *)u->stats[i].key, strlen(u->stats[i].key),
                       u->stats[i].kind, NULL, &u->stats[i]};
    ok = ok && (ss = merge(ar, WPK_SEC_STATS, WPK_STATS_REC_SIZE, 1, fs, u->nstats, u->drops,
                           u->ndrops, &nss));
    ok = ok && (ms = merge(ar, WPK_SEC_METADATA, WPK_META_REC_SIZE, 0, fm, u->nmeta, NULL, 0, &nms));
    ok = ok && (ns = merge(ar, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, 0, fn, u->nnames, NULL, 0,
                           &nns));
    /* entries (aux: splat fills, zstd seek tables) and block dtypes (aux:
     * params): copied with their strings and aux re-homed; extents and dims
     * unchanged */
    ok = ok &&
         copy_records(&p, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, WPK_E_NAME_OFF, WPK_E_AUX_OFF,
                      WPK_E_AUX_LEN_OFF, &sec[WPK_SEC_ENTRIES]) &&
         copy_records(&p, WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, WPK_D_NAME_OFF, WPK_D_PARAMS_OFF,
                      WPK_D_PARAMS_LEN_OFF, &sec[WPK_SEC_DTYPES]) &&
         wpk_buf_append(&sec[WPK_SEC_EXTENTS], ar->sec[WPK_SEC_EXTENTS],
                        (size_t)ar->sec_len[WPK_SEC_EXTENTS]) &&
         wpk_buf_append(&sec[WPK_SEC_DIMS], ar->sec[WPK_SEC_DIMS], (size_t)ar->sec_len[WPK_SEC_DIMS]);
    ok = ok && encode_all(&p, ms, nms, WPK_META_REC_SIZE, meta_record, &sec[WPK_SEC_METADATA]) &&
         encode_all(&p, ns, nns, WPK_NAMEMAP_REC_SIZE, name_record, &sec[WPK_SEC_NAMEMAP]) &&
         encode_all(&p, ss, nss, WPK_STATS_REC_SIZE, stats_record, &sec[WPK_SEC_STATS]);
    sec[WPK_SEC_STRINGS] = p.strings;
    sec[WPK_SEC_AUX] = p.aux;
    /* lay the sections out as the writer does: header, then each 8-aligned */
    ok = ok && wpk_buf_zeros(out, WPK_INDEX_HEADER_SIZE) != SIZE_MAX;
    if (ok)
        memcpy(out->p, ar->index, WPK_INDEX_HEADER_SIZE);
    for (int s = 0; ok && s < WPK_SECTION_COUNT; s++) {
        ok = wpk_buf_zeros(out, (8 - out->len % 8) % 8) != SIZE_MAX;
        uint64_t off = out->len;
        ok = ok && wpk_buf_append(out, sec[s].p, sec[s].len);
        if (ok) {
            wpk_st64(out->p + WPK_I_SECTIONS_OFF + 16 * s, off);
            wpk_st64(out->p + WPK_I_SECTIONS_OFF + 16 * s + 8, sec[s].len);
        }
    }
    ok = ok && wpk_buf_zeros(out, (8 - out->len % 8) % 8) != SIZE_MAX;
    for (int s = 0; s < WPK_SECTION_COUNT; s++)
        wpk_buf_free(&sec[s]);
    free(fs);
    free(fm);
    free(fn);
    free(ss);
    free(ms);
    free(ns);
    return ok ? WPACK_OK : ufail(u, WPACK_E_NOMEM, "out of memory building the new index");
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
    int rc = build_index(u, &idx);
    if (rc)
        return rc;
    const wpack_info *in = &u->ar->info;
    struct stat st;
    if (fstat(u->fd, &st) != 0) {
        rc = ufail(u, WPACK_E_IO, "%s: stat: %s", u->path, strerror(errno));
        goto done;
    }
    uint64_t gen = in->generation + 1, L = (uint64_t)st.st_size, n, at, file_len;
    if (!wpk_add(idx.len, WPK_HEADER_SIZE, &n) || !wpk_add(in->file_length, n, &at)) {
        rc = ufail(u, WPACK_E_OVERFLOW, "%s: new file length overflows", u->path);
        goto done;
    }
    at = place(in, L, n);
    file_len = at + n;
    uint64_t sum = wpk_xxh3(idx.p, idx.len);
    uint8_t super[WPK_HEADER_SIZE], trailer[WPK_HEADER_SIZE];
    encode_header(trailer, u->ar->head, WPK_TRAILER_MAGIC, gen, at, idx.len, sum, file_len);
    encode_header(super, u->ar->head, WPK_SUPERBLOCK_MAGIC, gen, at, idx.len, sum, file_len);
    /* The reader's own checks, before a byte is written. */
    char why[600];
    if ((rc = wpk_check_candidate(u->ar, super, idx.p, why, sizeof why))) {
        ufail(u, rc, "%s: %s", u->path, why);
        goto done;
    }
    /* Step 1: the new generation where it overlaps nothing live; sync. */
    if (!pwrite_all(u->fd, idx.p, idx.len, at) ||
        !pwrite_all(u->fd, trailer, sizeof trailer, at + idx.len) || fsync(u->fd) != 0) {
        rc = ufail(u, WPACK_E_IO, "%s: writing the new index: %s", u->path, strerror(errno));
        goto done;
    }
    if (u->flags & WPACK_UPDATE_STOP_AFTER_APPEND) {
        rc = ufail(u, WPACK_E_IO, "%s: stopped after the append (test hook)", u->path);
        goto done;
    }
    /* Step 2: the superblock, one 128-byte write in the first sector. */
    if (!pwrite_all(u->fd, super, sizeof super, 0) || fsync(u->fd) != 0) {
        rc = ufail(u, WPACK_E_IO, "%s: rewriting the superblock: %s", u->path, strerror(errno));
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
    int rc = u->errcode ? u->errcode : !u->ar ? ufail(u, WPACK_E_STATE, "update not begun")
                                              : commit(u);
    if (rc && errbuf && errlen)
        wpk_fmt(errbuf, errlen, "%s", u->errmsg);
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
        for (size_t j = 0; j < i && rc == WPACK_OK; j++)
            if (records[j].key && records[i].key && records[j].kind == records[i].kind &&
                strcmp(records[j].key, records[i].key) == 0)
                rc = ufail(u, WPACK_E_EXISTS, "%s stats '%s' given twice", wpk_stats_kind_name(records[i].kind),
                           records[i].key);
        if (rc == WPACK_OK)
            rc = wpack_update_set_stats(u, &records[i]);
    }
    if (!u)
        return rc;
    if (rc) {
        if (errbuf && errlen)
            wpk_fmt(errbuf, errlen, "%s", u->errmsg);
        wpack_update_abort(u);
        return rc;
    }
    return wpack_update_commit(u, errbuf, errlen);
}
