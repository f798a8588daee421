/*
 * update.c - in-place index updates (spec: In-place update protocol): add
 * or replace calibration statistics without touching the data region.
 *
 *   1. Append at align_up(old file length, 8): the new index (generation
 *      g+1) and its trailer; truncate anything after; fsync.
 *   2. Rewrite the 128-byte superblock; fsync.
 * Killed before 1 completes, the reader sees the old archive (rule 4b);
 * between 1 and 2 the new one (rule 4a); after 2 the new one (rule 3).
 *
 * The new index is the old one with its sections copied verbatim, except
 * that the new keys are appended to the strings section, the new values to
 * the aux section, and the stats section is the merge of old and new records
 * in (key, kind) order. Every reference in the index is relative to its
 * section, so copied records stay valid. Replaced records leave unreferenced
 * bytes in strings and aux, which readers never interpret.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "buf.h"
#include "bytes.h"
#include "wpack.h"
#include "reader.h"

typedef struct {
    char *msg;
    size_t len;
} errout;

static int ufail(errout *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int ufail(errout *e, int code, const char *fmt, ...)
{
    if (e->msg && e->len) {
        va_list ap;
        va_start(ap, fmt);
        wpk_vfmt(e->msg, e->len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* A stats record to write: old (bytes copied) or new (fields). */
typedef struct {
    const uint8_t *key;
    uint64_t key_len;
    int kind;
    const uint8_t *old_rec;      /* NULL for a new record */
    const wpack_stats_in *in;
} stat_item;

static int item_cmp(const void *a, const void *b)
{
    const stat_item *x = a, *y = b;
    int c = wpk_name_cmp(x->key, x->key_len, y->key, y->key_len);
    return c ? c : (x->kind > y->kind) - (x->kind < y->kind);
}

static int all_finite(const double *v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* The checks wpack_writer_add_stats makes, against the opened archive. */
static int check_record(const wpack_archive *ar, const wpack_stats_in *s, errout *e)
{
    if (!s->key)
        return ufail(e, WPACK_E_INVALID_ARGUMENT, "stats record without a key");
    size_t kl = strlen(s->key);
    const char *why = wpk_name_problem((const uint8_t *)s->key, kl);
    char q[200];
    wpk_quote(q, sizeof q, s->key, kl);
    if (why)
        return ufail(e, WPACK_E_NAME, "stats '%s': key %s", q, why);
    if (s->kind != WPACK_STATS_WEIGHT && s->kind != WPACK_STATS_ACTIVATION)
        return ufail(e, WPACK_E_STATS, "stats '%s': kind %d unknown", q, s->kind);
    if (s->granularity == WPACK_GRAN_TENSOR) {
        if (s->axis != 0 || s->channels != 1)
            return ufail(e, WPACK_E_STATS, "stats '%s': per-tensor needs axis 0 and 1 channel", q);
    } else if (s->granularity == WPACK_GRAN_CHANNEL) {
        if (s->channels < 1 || s->channels > WPK_LIMIT_CHANNELS || s->axis >= WPACK_MAX_RANK)
            return ufail(e, WPACK_E_STATS, "stats '%s': %u channels on axis %u out of range", q,
                         s->channels, s->axis);
    } else {
        return ufail(e, WPACK_E_STATS, "stats '%s': granularity %d unknown", q, s->granularity);
    }
    if (s->kind == WPACK_STATS_WEIGHT) {
        wpack_tensor t;
        if (wpack_find(ar, s->key, &t) != WPACK_OK || strcmp(t.name, s->key) != 0)
            return ufail(e, WPACK_E_STATS, "weight stats '%s': no tensor of that name", q);
        if (s->granularity == WPACK_GRAN_CHANNEL &&
            (s->axis >= t.rank || s->channels != t.dims[s->axis]))
            return ufail(e, WPACK_E_STATS, "weight stats '%s': %u channels on axis %u do not fit",
                         q, s->channels, s->axis);
    }
    uint32_t c = s->channels;
    if (!s->min || !s->max || !s->absmax || !s->mean || !s->variance)
        return ufail(e, WPACK_E_INVALID_ARGUMENT, "stats '%s': a values array is NULL", q);
    for (uint32_t i = 0; i < c; i++) {
        double mn = s->min[i], mx = s->max[i], am = s->absmax[i], me = s->mean[i], va = s->variance[i];
        if (!isfinite(mn) || !isfinite(mx) || !isfinite(am) || !isfinite(me) || !isfinite(va) ||
            !(mn <= mx) || am != fmax(fabs(mn), fabs(mx)) || !(mn <= me && me <= mx) || va < 0)
            return ufail(e, WPACK_E_STATS,
                         "stats '%s' channel %u: inconsistent min %g max %g absmax %g mean %g "
                         "variance %g", q, i, mn, mx, am, me, va);
    }
    if (s->hist_bins) {
        if (s->hist_bins > WPK_LIMIT_HIST_BINS || !s->hist_edges || !s->hist_counts)
            return ufail(e, WPACK_E_STATS, "stats '%s': bad histogram", q);
        uint64_t sum = 0;
        for (uint32_t b = 0; b <= s->hist_bins; b++)
            if (!isfinite(s->hist_edges[b]) || (b && !(s->hist_edges[b] > s->hist_edges[b - 1])))
                return ufail(e, WPACK_E_STATS, "stats '%s': histogram edges not increasing", q);
        for (uint32_t b = 0; b < s->hist_bins; b++)
            if (!wpk_add(sum, s->hist_counts[b], &sum))
                return ufail(e, WPACK_E_STATS, "stats '%s': histogram counts overflow", q);
        if (sum != s->count)
            return ufail(e, WPACK_E_STATS, "stats '%s': histogram counts sum to %llu, count %llu",
                         q, (unsigned long long)sum, (unsigned long long)s->count);
    }
    if (s->percentile_count) {
        if (s->percentile_count > WPK_LIMIT_PERCENTILES || !s->percentiles ||
            !all_finite(s->percentiles, 2 * (uint64_t)s->percentile_count))
            return ufail(e, WPACK_E_STATS, "stats '%s': bad percentiles", q);
        for (uint32_t j = 0; j < s->percentile_count; j++) {
            double pq = s->percentiles[2 * j], v = s->percentiles[2 * j + 1];
            if (pq < 0 || pq > 100 ||
                (j && !(pq > s->percentiles[2 * j - 2] && v >= s->percentiles[2 * j - 1])))
                return ufail(e, WPACK_E_STATS, "stats '%s': percentiles out of order", q);
        }
    }
    return WPACK_OK;
}

static int pad8(wpk_buf *b)
{
    if (b->len % 8 == 0) /* (an empty buffer has no pointer for memset) */
        return 1;
    return wpk_buf_zeros(b, 8 - b->len % 8) != SIZE_MAX;
}

static int put_doubles(wpk_buf *aux, uint64_t base, const double *v, uint64_t n, uint64_t *off)
{
    *off = base + aux->len;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t t[8];
        wpk_stf64(t, v[i]);
        if (!wpk_buf_append(aux, t, 8))
            return 0;
    }
    return 1;
}

/* Append a new record's key and values; encode its 64-byte record. */
static int encode_new(const stat_item *it, uint64_t strings_base, wpk_buf *strings,
                      uint64_t aux_base, wpk_buf *aux, uint8_t *rec)
{
    const wpack_stats_in *s = it->in;
    memset(rec, 0, WPK_STATS_REC_SIZE);
    wpk_st64(rec + WPK_S_KEY_OFF, strings_base + strings->len);
    wpk_st32(rec + WPK_S_KEY_LEN_OFF, (uint32_t)it->key_len);
    if (!wpk_buf_append(strings, it->key, it->key_len) || wpk_buf_zeros(strings, 1) == SIZE_MAX)
        return 0;
    rec[WPK_S_KIND_OFF] = (uint8_t)s->kind;
    rec[WPK_S_GRAN_OFF] = (uint8_t)s->granularity;
    wpk_st32(rec + WPK_S_AXIS_OFF, s->axis);
    wpk_st32(rec + WPK_S_CHANNELS_OFF, s->channels);
    wpk_st64(rec + WPK_S_COUNT_OFF, s->count);
    uint64_t off, c = s->channels;
    if (!pad8(aux) || !put_doubles(aux, aux_base, s->min, c, &off) ||
        !put_doubles(aux, aux_base, s->max, c, &(uint64_t){0}) ||
        !put_doubles(aux, aux_base, s->absmax, c, &(uint64_t){0}) ||
        !put_doubles(aux, aux_base, s->mean, c, &(uint64_t){0}) ||
        !put_doubles(aux, aux_base, s->variance, c, &(uint64_t){0}))
        return 0;
    wpk_st64(rec + WPK_S_VALUES_OFF, off);
    wpk_st32(rec + WPK_S_HIST_BINS_OFF, s->hist_bins);
    wpk_st32(rec + WPK_S_PCT_COUNT_OFF, s->percentile_count);
    if (s->hist_bins) {
        if (!put_doubles(aux, aux_base, s->hist_edges, (uint64_t)s->hist_bins + 1, &off))
            return 0;
        wpk_st64(rec + WPK_S_HIST_OFF, off);
        for (uint32_t b = 0; b < s->hist_bins; b++) {
            uint8_t t[8];
            wpk_st64(t, s->hist_counts[b]);
            if (!wpk_buf_append(aux, t, 8))
                return 0;
        }
    }
    if (s->percentile_count) {
        if (!put_doubles(aux, aux_base, s->percentiles, 2 * (uint64_t)s->percentile_count, &off))
            return 0;
        wpk_st64(rec + WPK_S_PCT_OFF, off);
    }
    return 1;
}

/* The new index bytes in *out. */
static int build_index(const wpack_archive *ar, const wpack_stats_in *recs, size_t count,
                       wpk_buf *out, errout *e)
{
    uint64_t old_n = ar->sec_len[WPK_SEC_STATS] / WPK_STATS_REC_SIZE;
    stat_item *items = calloc(old_n + count + 1, sizeof *items);
    wpk_buf strings = {0}, aux = {0}, stats = {0};
    int rc = WPACK_E_NOMEM;
    if (!items)
        goto done;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        items[n].key = (const uint8_t *)recs[i].key;
        items[n].key_len = strlen(recs[i].key);
        items[n].kind = recs[i].kind;
        items[n].in = &recs[i];
        n++;
    }
    qsort(items, n, sizeof *items, item_cmp);
    for (size_t i = 1; i < n; i++)
        if (item_cmp(&items[i - 1], &items[i]) == 0) {
            rc = ufail(e, WPACK_E_EXISTS, "stats '%s' (kind %d) given twice", recs[0].key ? (const char *)items[i].key : "", items[i].kind);
            goto done;
        }
    /* old records that no new one replaces */
    for (uint64_t i = 0; i < old_n; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_STATS, i, WPK_STATS_REC_SIZE);
        stat_item it = {(const uint8_t *)wpk_str(ar, wpk_ld64(r + WPK_S_KEY_OFF)),
                        wpk_ld32(r + WPK_S_KEY_LEN_OFF), r[WPK_S_KIND_OFF], r, NULL};
        if (!bsearch(&it, items, n, sizeof *items, item_cmp))
            items[n + (size_t)i] = it;
        else
            items[n + (size_t)i].key = NULL;
    }
    size_t total = n;
    for (uint64_t i = 0; i < old_n; i++)
        if (items[n + (size_t)i].key)
            items[total++] = items[n + (size_t)i];
    qsort(items, total, sizeof *items, item_cmp);

    uint64_t sbase = ar->sec_len[WPK_SEC_STRINGS], abase = ar->sec_len[WPK_SEC_AUX];
    /* new values start 8-aligned relative to the aux section */
    if (abase % 8 && wpk_buf_zeros(&aux, 8 - abase % 8) == SIZE_MAX)
        goto done;
    for (size_t i = 0; i < total; i++) {
        uint8_t rec[WPK_STATS_REC_SIZE];
        if (items[i].old_rec)
            memcpy(rec, items[i].old_rec, sizeof rec);
        else if (!encode_new(&items[i], sbase, &strings, abase, &aux, rec))
            goto done;
        if (!wpk_buf_append(&stats, rec, sizeof rec))
            goto done;
    }
    /* lay the sections out again */
    if (wpk_buf_zeros(out, WPK_INDEX_HEADER_SIZE) == SIZE_MAX)
        goto done;
    memcpy(out->p, ar->index, WPK_INDEX_HEADER_SIZE);
    for (int s = 0; s < WPK_SECTION_COUNT; s++) {
        if (!pad8(out))
            goto done;
        uint64_t off = out->len;
        const uint8_t *old = ar->sec[s];
        uint64_t len = ar->sec_len[s];
        if (s == WPK_SEC_STATS) {
            if (!wpk_buf_append(out, stats.p, stats.len))
                goto done;
        } else {
            if (len > SIZE_MAX || !wpk_buf_append(out, old, (size_t)len))
                goto done;
            if (s == WPK_SEC_STRINGS && !wpk_buf_append(out, strings.p, strings.len))
                goto done;
            if (s == WPK_SEC_AUX && !wpk_buf_append(out, aux.p, aux.len))
                goto done;
        }
        wpk_st64(out->p + WPK_I_SECTIONS_OFF + 16 * s, off);
        wpk_st64(out->p + WPK_I_SECTIONS_OFF + 16 * s + 8, out->len - off);
    }
    if (!pad8(out))
        goto done;
    rc = WPACK_OK;
done:
    if (rc == WPACK_E_NOMEM)
        ufail(e, rc, "out of memory building the new index");
    free(items);
    wpk_buf_free(&strings);
    wpk_buf_free(&aux);
    wpk_buf_free(&stats);
    return rc;
}

static void encode_header(uint8_t *h, const uint8_t *old_super, const char *magic, uint64_t gen,
                          uint64_t index_off, uint64_t index_len, uint64_t sum, uint64_t file_len)
{
    memcpy(h, old_super, WPK_HEADER_SIZE);
    memcpy(h + WPK_H_MAGIC_OFF, magic, 8);
    wpk_st64(h + WPK_H_GENERATION_OFF, gen);
    wpk_st64(h + WPK_H_INDEX_OFFSET_OFF, index_off);
    wpk_st64(h + WPK_H_INDEX_LENGTH_OFF, index_len);
    wpk_st64(h + WPK_H_INDEX_CHECKSUM_OFF, sum);
    wpk_st64(h + WPK_H_FILE_LENGTH_OFF, file_len);
    wpk_st64(h + WPK_H_CHECKSUM_OFF, wpk_xxh3(h, WPK_H_CHECKSUM_OFF));
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

int wpack_update_add_stats(const char *path, const wpack_stats_in *records, size_t count,
                           char *errbuf, size_t errlen)
{
    errout e = {errbuf, errlen};
    if (errbuf && errlen)
        errbuf[0] = 0;
    if (!path || (count && !records))
        return ufail(&e, WPACK_E_INVALID_ARGUMENT, "update: NULL argument");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return ufail(&e, WPACK_E_IO, "%s: %s", path, strerror(errno));
    /* one updater at a time */
    if (flock(fd, LOCK_EX) != 0) {
        int er = errno;
        close(fd);
        return ufail(&e, WPACK_E_IO, "%s: lock: %s", path, strerror(er));
    }
    wpack_archive *ar = NULL;
    wpk_buf idx = {0};
    int rc = wpack_open_file(&ar, path, 0);
    if (rc) {
        rc = ufail(&e, rc, "%s", ar ? wpack_errmsg(ar) : "out of memory");
        goto done;
    }
    if (ar->info.format_minor > WPACK_FORMAT_MINOR) {
        rc = ufail(&e, WPACK_E_VERSION, "%s: format 1.%u is newer than this library's 1.%d: "
                   "not updating an index it may not fully understand", path,
                   ar->info.format_minor, WPACK_FORMAT_MINOR);
        goto done;
    }
    if (wpk_ld64(ar->base + WPK_H_GENERATION_OFF) != ar->info.generation) {
        /* A previous update stopped between its steps (rule 4a): finish it
         * first, else our trailer would be two generations ahead. */
        uint8_t super[WPK_HEADER_SIZE];
        memcpy(super, ar->base + ar->info.file_length - WPK_HEADER_SIZE, WPK_HEADER_SIZE);
        memcpy(super + WPK_H_MAGIC_OFF, WPK_SUPERBLOCK_MAGIC, 8);
        wpk_st64(super + WPK_H_CHECKSUM_OFF, wpk_xxh3(super, WPK_H_CHECKSUM_OFF));
        if (!pwrite_all(fd, super, sizeof super, 0) || fsync(fd) != 0) {
            rc = ufail(&e, WPACK_E_IO, "%s: finishing the interrupted update: %s", path,
                       strerror(errno));
            goto done;
        }
        wpack_close(ar);
        ar = NULL;
        if ((rc = wpack_open_file(&ar, path, 0))) {
            rc = ufail(&e, rc, "%s", ar ? wpack_errmsg(ar) : "out of memory");
            goto done;
        }
    }
    for (size_t i = 0; i < count; i++)
        if ((rc = check_record(ar, &records[i], &e)))
            goto done;
    if ((rc = build_index(ar, records, count, &idx, &e)))
        goto done;
    uint64_t gen = ar->info.generation + 1, old_len = ar->info.file_length, index_off, file_len;
    if (!wpk_align_up(old_len, 8, &index_off) || !wpk_add(index_off, idx.len, &file_len) ||
        !wpk_add(file_len, WPK_HEADER_SIZE, &file_len)) {
        rc = ufail(&e, WPACK_E_OVERFLOW, "%s: new file length overflows", path);
        goto done;
    }
    uint64_t sum = wpk_xxh3(idx.p, idx.len);
    uint8_t super[WPK_HEADER_SIZE], trailer[WPK_HEADER_SIZE];
    static const uint8_t zeros[8];
    encode_header(trailer, ar->base, WPK_TRAILER_MAGIC, gen, index_off, idx.len, sum, file_len);
    encode_header(super, ar->base, WPK_SUPERBLOCK_MAGIC, gen, index_off, idx.len, sum, file_len);
    wpack_close(ar);
    ar = NULL;
    /* Step 1: append index + trailer after the old end, cut what was beyond, sync. */
    if (!pwrite_all(fd, zeros, (size_t)(index_off - old_len), old_len) ||
        !pwrite_all(fd, idx.p, idx.len, index_off) ||
        !pwrite_all(fd, trailer, sizeof trailer, index_off + idx.len) ||
        ftruncate(fd, (off_t)file_len) != 0 || fsync(fd) != 0) {
        rc = ufail(&e, WPACK_E_IO, "%s: appending the new index: %s", path, strerror(errno));
        goto done;
    }
    const char *stop = getenv("WPACK_UPDATE_STOP_AFTER");
    if (stop && strcmp(stop, "append") == 0) {
        rc = ufail(&e, WPACK_E_IO, "%s: stopped after the append (WPACK_UPDATE_STOP_AFTER)", path);
        goto done;
    }
    /* The file now opens as the new generation (rule 4a): prove it before
     * committing; on failure cut the append off again. */
    rc = wpack_open_file(&ar, path, 0);
    if (rc || ar->info.generation != gen) {
        rc = ufail(&e, rc ? rc : WPACK_E_STATE, "%s: internal: the new index does not validate: %s",
                   path, ar ? wpack_errmsg(ar) : "out of memory");
        if (ftruncate(fd, (off_t)old_len) == 0)
            (void)fsync(fd);
        goto done;
    }
    wpack_close(ar);
    ar = NULL;
    /* Step 2: the superblock, one 128-byte write in the first sector. */
    if (!pwrite_all(fd, super, sizeof super, 0) || fsync(fd) != 0) {
        rc = ufail(&e, WPACK_E_IO, "%s: rewriting the superblock: %s", path, strerror(errno));
        goto done;
    }
    rc = WPACK_OK;
done:
    wpack_close(ar);
    wpk_buf_free(&idx);
    close(fd); /* releases the lock */
    return rc;
}
