/* update_index.c - the new index of an in-place update (update.c): the
 * sorted merge of the archive's records with the session's edits, every
 * string and aux item copied once, sections laid out as the writer does. */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "reader.h"
#include "update.h"

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

/* The chunk checksums of the entries just copied (spec 19b): re-homed too,
 * their place in the record's bytes 72..79, their size from the entry. */
static int move_sums(pool *p, wpk_buf *entries)
{
    uint64_t n = p->ar->sec_len[WPK_SEC_ENTRIES] / WPK_ENTRY_SIZE;
    for (uint64_t i = 0; i < n; i++) {
        wpk_sums s;
        if (wpk_entry_sums(p->ar, wpk_rec(p->ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE), &s) &&
            !move_aux(p, entries->p + i * WPK_ENTRY_SIZE, WPK_E_SUMS_OFF, 8 * s.count))
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
int wpk_update_build_index(wpack_update *u, wpk_buf *out)
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
         move_sums(&p, &sec[WPK_SEC_ENTRIES]) &&
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
    return ok ? WPACK_OK : wpk_ufail(u, WPACK_E_NOMEM, "out of memory building the new index");
}
