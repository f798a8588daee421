/* writer_index.c - at finish: resolve aliases, fill weight stats, sort, and
 * write the index, trailer and superblock (spec: Index, Writer rules). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bytes.h"
#include "writer.h"

/* qsort_r contexts */
static int cmp_refs(const wpack_writer *w, wpk_str_ref a, wpk_str_ref b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(wpk_pool_str(w, a), wpk_pool_str(w, b), n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

static int cmp_entry_idx(const void *x, const void *y, void *ctx)
{
    wpack_writer *w = ctx;
    return cmp_refs(w, wpk_entries(w)[*(const uint64_t *)x].name,
                    wpk_entries(w)[*(const uint64_t *)y].name);
}

static int cmp_meta(const void *x, const void *y, void *ctx)
{
    return cmp_refs(ctx, ((const wpk_pending_meta *)x)->key, ((const wpk_pending_meta *)y)->key);
}

static int cmp_names(const void *x, const void *y, void *ctx)
{
    return cmp_refs(ctx, ((const wpk_pending_name *)x)->name, ((const wpk_pending_name *)y)->name);
}

static int cmp_stats(const void *x, const void *y, void *ctx)
{
    const wpk_pending_stats *a = x, *b = y;
    int c = cmp_refs(ctx, a->key, b->key);
    return c ? c : (a->kind > b->kind) - (a->kind < b->kind);
}

static const uint8_t *entry_name_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    *len = wpk_entries(w)[i].name.len;
    return (const uint8_t *)wpk_pool_str(w, wpk_entries(w)[i].name);
}

static int lookup_entry(wpack_writer *w, wpk_str_ref name, uint64_t *idx)
{
    return wpk_nameset_find(&w->entry_set, entry_name_of, w,
                            (const uint8_t *)wpk_pool_str(w, name), name.len, idx);
}

static int resolve_aliases(wpack_writer *w)
{
    wpk_pending_entry *es = wpk_entries(w);
    for (uint64_t i = 0; i < wpk_entry_count(w); i++) {
        wpk_pending_entry *e = &es[i];
        if (e->kind != WPACK_KIND_ALIAS)
            continue;
        uint64_t t;
        if (!lookup_entry(w, e->target, &t))
            return wpk_wfail(w, WPACK_E_ALIAS, "alias '%s': no tensor '%s'", wpk_pool_str(w, e->name),
                             wpk_pool_str(w, e->target));
        if (es[t].kind == WPACK_KIND_ALIAS)
            return wpk_wfail(w, WPACK_E_ALIAS, "alias '%s': target '%s' is itself an alias",
                             wpk_pool_str(w, e->name), wpk_pool_str(w, e->target));
        e->dtype = es[t].dtype;
        e->rank = es[t].rank;
        memcpy(e->dims, es[t].dims, sizeof e->dims);
        e->offset = es[t].offset;
        e->stored = es[t].stored;
        e->checksum = es[t].checksum;
        e->nbytes = es[t].nbytes;
        e->codec = es[t].codec;
        e->chunk_log2 = es[t].chunk_log2;
        e->sorted = t; /* remembered as the target's arrival index until sorting */
    }
    return WPACK_OK;
}

/* Bytes read back at a time for a histogram (lowered in fuzz builds, like
 * the output buffer in writer.h). */
#ifndef WPK_WRITER_HIST_CHUNK
#define WPK_WRITER_HIST_CHUNK (1 << 22)
#endif

/* Read back one tensor from the temp file to build its histogram. */
static int histogram(wpack_writer *w, const wpk_pending_entry *e, uint32_t bins, double *edges,
                     uint64_t *counts)
{
    enum { CHUNK = WPK_WRITER_HIST_CHUNK };
    size_t size = wpack_dtype_size(e->dtype);
    size_t chunk = CHUNK / size * size;
    uint8_t *chunk_buf = malloc(CHUNK);
    if (!chunk_buf)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    wpk_hist_edges(e->acc.min, e->acc.max, bins, edges);
    memset(counts, 0, bins * sizeof *counts);
    /* A compressed tensor is read whole chunks at a time: CHUNK is a multiple of them. */
    if (e->codec != WPACK_CODEC_NONE)
        chunk = (size_t)1 << e->chunk_log2 > CHUNK ? (size_t)1 << e->chunk_log2 : CHUNK;
    if (chunk > CHUNK) {
        free(chunk_buf);
        if (!(chunk_buf = malloc(chunk)))
            return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    }
    for (uint64_t done = 0; done < e->nbytes;) {
        size_t n = e->nbytes - done < chunk ? (size_t)(e->nbytes - done) : chunk;
        if (wpk_read_back(w, e, done, chunk_buf, n)) {
            free(chunk_buf);
            return w->errcode;
        }
        if (!wpk_par_hist_feed(w, counts, bins, edges[0], edges[bins], e->dtype, chunk_buf,
                               n / size))
            wpk_hist_feed(counts, bins, edges[0], edges[bins], e->dtype, chunk_buf, n / size);
        done += n;
    }
    free(chunk_buf);
    return WPACK_OK;
}

static const uint8_t *stats_key_of(void *ctx, uint64_t i, uint64_t *len)
{
    wpack_writer *w = ctx;
    const wpk_pending_stats *s = &((const wpk_pending_stats *)(void *)w->stats.p)[i];
    *len = s->key.len;
    return (const uint8_t *)wpk_pool_str(w, s->key);
}

/* The caller's weight-stats keys, hashed once (not a scan per tensor). */
static int index_user_stats(wpack_writer *w, size_t user, wpk_nameset *set)
{
    const wpk_pending_stats *s = (const wpk_pending_stats *)(void *)w->stats.p;
    for (size_t i = 0; i < user; i++)
        if (s[i].kind == WPACK_STATS_WEIGHT &&
            !wpk_nameset_insert(set, stats_key_of, w, (const uint8_t *)wpk_pool_str(w, s[i].key),
                                s[i].key.len, i))
            return 0;
    return 1;
}

/* Weight stats for float data entries the caller gave none for. */
static int auto_stats(wpack_writer *w)
{
    size_t user = w->stats.len / sizeof(wpk_pending_stats);
    uint32_t bins = w->opt.histogram_bins;
    double *edges = NULL;
    uint64_t *counts = NULL;
    if (bins) {
        edges = malloc((bins + 1) * sizeof *edges);
        counts = malloc(bins * sizeof *counts);
        if (!edges || !counts) {
            free(edges);
            free(counts);
            return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
        }
    }
    int rc = bins ? wpk_out_flush(w) : WPACK_OK;
    wpk_nameset user_keys = {0};
    if (rc == WPACK_OK && !index_user_stats(w, user, &user_keys))
        rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    /* Only look up user stats when there are any: the scan is linear. */
    for (uint64_t i = 0; i < wpk_entry_count(w) && rc == WPACK_OK; i++) {
        wpk_pending_entry *e = &wpk_entries(w)[i];
        /* No finite value seen (empty, or all NaN): nothing to describe. */
        uint64_t hit;
        if (!e->has_acc || !e->acc.n ||
            (user && wpk_nameset_find(&user_keys, stats_key_of, w,
                                      (const uint8_t *)wpk_pool_str(w, e->name), e->name.len, &hit)))
            continue;
        double mean, var, am;
        wpk_acc_summary(&e->acc, &mean, &var, &am);
        wpack_stats_in s = {
            .key = wpk_pool_str(w, e->name), .kind = WPACK_STATS_WEIGHT,
            .granularity = WPACK_GRAN_TENSOR, .channels = 1, .count = e->acc.n,
            .min = &e->acc.min, .max = &e->acc.max, .absmax = &am, .mean = &mean,
            .variance = &var,
        };
        if (bins) {
            if ((rc = histogram(w, e, bins, edges, counts)))
                break;
            s.hist_bins = bins;
            s.hist_edges = edges;
            s.hist_counts = counts;
        }
        /* The key string is copied by add_stats; the pool may move, so copy it first. */
        char *key = strdup(s.key);
        if (!key) {
            rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
            break;
        }
        s.key = key;
        rc = wpack_writer_add_stats(w, &s);
        free(key);
    }
    wpk_nameset_free(&user_keys);
    free(edges);
    free(counts);
    return rc;
}

/* Index assembly: sections appended to one buffer, 8-aligned. */
typedef struct {
    wpk_buf b;
    uint64_t off[WPK_SECTION_COUNT], len[WPK_SECTION_COUNT];
} index_builder;

static int begin_section(index_builder *ib, int s)
{
    size_t pad = (8 - ib->b.len % 8) % 8;
    if (wpk_buf_zeros(&ib->b, pad) == SIZE_MAX)
        return 0;
    ib->off[s] = ib->b.len;
    return 1;
}

static void end_section(index_builder *ib, int s)
{
    ib->len[s] = ib->b.len - ib->off[s];
}

static uint8_t *grab(index_builder *ib, size_t n)
{
    size_t at = wpk_buf_zeros(&ib->b, n);
    return at == SIZE_MAX ? NULL : ib->b.p + at;
}

static int build_index(wpack_writer *w, index_builder *ib, uint64_t *order, uint64_t *rank_of,
                       uint64_t *data_count)
{
    uint64_t n = wpk_entry_count(w);
    wpk_pending_entry *es = wpk_entries(w);
    if (!grab(ib, WPK_INDEX_HEADER_SIZE))
        return 0;
    /* entries */
    uint64_t dims_next = 0;
    begin_section(ib, WPK_SEC_ENTRIES);
    for (uint64_t k = 0; k < n; k++) {
        const wpk_pending_entry *e = &es[order[k]];
        uint8_t *r = grab(ib, WPK_ENTRY_SIZE);
        if (!r)
            return 0;
        wpk_st64(r + WPK_E_NAME_OFF, e->name.off);
        wpk_st32(r + WPK_E_NAME_LEN_OFF, e->name.len);
        r[WPK_E_KIND_OFF] = e->kind;
        r[WPK_E_DTYPE_OFF] = e->dtype;
        r[WPK_E_RANK_OFF] = e->rank;
        r[WPK_E_CODEC_OFF] = e->codec;
        if (e->codec && e->kind == WPACK_KIND_DATA)
            wpk_st32(r + WPK_E_CODEC_PARAM_OFF, e->chunk_log2);
        if (e->sums_log2 && e->kind == WPACK_KIND_DATA) { /* spec 19b */
            if (!e->codec) /* codec 1: codec_param is the zstd chunk, the same */
                wpk_st32(r + WPK_E_CODEC_PARAM_OFF, e->sums_log2);
            wpk_st64(r + WPK_E_SUMS_OFF, e->sums_off);
        }
        wpk_st64(r + WPK_E_DIMS_OFF, dims_next);
        dims_next += e->rank;
        if (e->kind == WPACK_KIND_EXTERNAL)
            wpk_st32(r + WPK_E_TARGET_OFF, e->shard);
        if (e->kind != WPACK_KIND_SPLAT) {
            wpk_st64(r + WPK_E_DATA_OFFSET_OFF, e->offset);
            wpk_st64(r + WPK_E_STORED_LEN_OFF, e->stored);
        }
        wpk_st64(r + WPK_E_CHECKSUM_OFF, e->checksum);
        if (e->kind == WPACK_KIND_SPLAT || (e->codec && e->kind == WPACK_KIND_DATA)) {
            wpk_st64(r + WPK_E_AUX_OFF, e->aux_off);
            wpk_st64(r + WPK_E_AUX_LEN_OFF, e->aux_len);
        }
        if (e->kind == WPACK_KIND_ALIAS)
            wpk_st32(r + WPK_E_TARGET_OFF, (uint32_t)rank_of[e->sorted]);
    }
    end_section(ib, WPK_SEC_ENTRIES);
    /* extents: data entries in arrival order, which is offset order */
    begin_section(ib, WPK_SEC_EXTENTS);
    *data_count = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (es[i].kind != WPACK_KIND_DATA)
            continue;
        uint8_t *r = grab(ib, 4);
        if (!r)
            return 0;
        wpk_st32(r, (uint32_t)rank_of[i]);
        (*data_count)++;
    }
    end_section(ib, WPK_SEC_EXTENTS);
    begin_section(ib, WPK_SEC_DIMS);
    for (uint64_t k = 0; k < n; k++) {
        const wpk_pending_entry *e = &es[order[k]];
        for (unsigned d = 0; d < e->rank; d++) {
            uint8_t *r = grab(ib, 8);
            if (!r)
                return 0;
            wpk_st64(r, e->dims[d]);
        }
    }
    end_section(ib, WPK_SEC_DIMS);
    begin_section(ib, WPK_SEC_STRINGS);
    if (!wpk_buf_append(&ib->b, w->strings.p, w->strings.len))
        return 0;
    end_section(ib, WPK_SEC_STRINGS);
    begin_section(ib, WPK_SEC_AUX);
    if (!wpk_buf_append(&ib->b, w->aux.p, w->aux.len))
        return 0;
    end_section(ib, WPK_SEC_AUX);
    begin_section(ib, WPK_SEC_DTYPES);
    const wpk_pending_dtype *ds = (const wpk_pending_dtype *)(void *)w->dtypes.p;
    for (size_t i = 0; i < w->dtypes.len / sizeof *ds; i++) {
        uint8_t *r = grab(ib, WPK_DTYPE_REC_SIZE);
        if (!r)
            return 0;
        wpk_st64(r + WPK_D_NAME_OFF, ds[i].name.off);
        wpk_st32(r + WPK_D_NAME_LEN_OFF, ds[i].name.len);
        wpk_st32(r + WPK_D_BLOCK_ELEMS_OFF, ds[i].block_elems);
        wpk_st32(r + WPK_D_BLOCK_BYTES_OFF, ds[i].block_bytes);
        wpk_st64(r + WPK_D_PARAMS_OFF, ds[i].params_off);
        wpk_st64(r + WPK_D_PARAMS_LEN_OFF, ds[i].params_len);
    }
    end_section(ib, WPK_SEC_DTYPES);
    begin_section(ib, WPK_SEC_METADATA);
    const wpk_pending_meta *ms = (const wpk_pending_meta *)(void *)w->meta.p;
    for (size_t i = 0; i < w->meta.len / sizeof *ms; i++) {
        uint8_t *r = grab(ib, WPK_META_REC_SIZE);
        if (!r)
            return 0;
        wpk_st64(r + WPK_M_KEY_OFF, ms[i].key.off);
        wpk_st32(r + WPK_M_KEY_LEN_OFF, ms[i].key.len);
        r[WPK_M_TYPE_OFF] = ms[i].type;
        r[WPK_M_ELEM_TYPE_OFF] = ms[i].elem;
        wpk_st64(r + WPK_M_VALUE_OFF, ms[i].value);
        wpk_st64(r + WPK_M_COUNT_OFF, ms[i].count);
    }
    end_section(ib, WPK_SEC_METADATA);
    begin_section(ib, WPK_SEC_NAMEMAP);
    const wpk_pending_name *ns = (const wpk_pending_name *)(void *)w->names.p;
    for (size_t i = 0; i < w->names.len / sizeof *ns; i++) {
        uint64_t t;
        lookup_entry(w, ns[i].entry, &t); /* checked by the caller */
        uint8_t *r = grab(ib, WPK_NAMEMAP_REC_SIZE);
        if (!r)
            return 0;
        wpk_st64(r + WPK_N_NAME_OFF, ns[i].name.off);
        wpk_st32(r + WPK_N_NAME_LEN_OFF, ns[i].name.len);
        wpk_st32(r + WPK_N_ENTRY_OFF, (uint32_t)rank_of[t]);
    }
    end_section(ib, WPK_SEC_NAMEMAP);
    begin_section(ib, WPK_SEC_STATS);
    const wpk_pending_stats *ss = (const wpk_pending_stats *)(void *)w->stats.p;
    for (size_t i = 0; i < w->stats.len / sizeof *ss; i++) {
        uint8_t *r = grab(ib, WPK_STATS_REC_SIZE);
        if (!r)
            return 0;
        wpk_st64(r + WPK_S_KEY_OFF, ss[i].key.off);
        wpk_st32(r + WPK_S_KEY_LEN_OFF, ss[i].key.len);
        r[WPK_S_KIND_OFF] = ss[i].kind;
        r[WPK_S_GRAN_OFF] = ss[i].gran;
        wpk_st32(r + WPK_S_AXIS_OFF, ss[i].axis);
        wpk_st32(r + WPK_S_CHANNELS_OFF, ss[i].channels);
        wpk_st64(r + WPK_S_COUNT_OFF, ss[i].count);
        wpk_st64(r + WPK_S_VALUES_OFF, ss[i].values_off);
        wpk_st32(r + WPK_S_HIST_BINS_OFF, ss[i].bins);
        wpk_st32(r + WPK_S_PCT_COUNT_OFF, ss[i].pcts);
        wpk_st64(r + WPK_S_HIST_OFF, ss[i].hist_off);
        wpk_st64(r + WPK_S_PCT_OFF, ss[i].pct_off);
    }
    end_section(ib, WPK_SEC_STATS);
    if (wpk_buf_zeros(&ib->b, (8 - ib->b.len % 8) % 8) == SIZE_MAX)
        return 0;
    /* header */
    uint8_t *h = ib->b.p;
    memcpy(h + WPK_I_MAGIC_OFF, WPK_INDEX_MAGIC, 8);
    wpk_st32(h + WPK_I_HEADER_SIZE_OFF, WPK_INDEX_HEADER_SIZE);
    wpk_st32(h + WPK_I_ENTRY_SIZE_OFF, WPK_ENTRY_SIZE);
    wpk_st64(h + WPK_I_ENTRY_COUNT_OFF, n);
    wpk_st64(h + WPK_I_DATA_ENTRY_COUNT_OFF, *data_count);
    for (int s = 0; s < WPK_SECTION_COUNT; s++) {
        wpk_st64(h + WPK_I_SECTIONS_OFF + 16 * s, ib->off[s]);
        wpk_st64(h + WPK_I_SECTIONS_OFF + 16 * s + 8, ib->len[s]);
    }
    return 1;
}

/* Checks that need every record: references and duplicates. A manifest's
 * shard list and shard numbers as a reader checks them before it opens a
 * shard (spec 19a): a set the reader refuses for them is not written. */
static int check_references(wpack_writer *w)
{
    uint64_t shards = 0;
    int rc = wpk_check_reserved_meta(w, &shards);
    if (rc)
        return rc;
    for (uint64_t i = 0; i < wpk_entry_count(w); i++) {
        const wpk_pending_entry *e = &wpk_entries(w)[i];
        if (e->kind != WPACK_KIND_EXTERNAL)
            continue;
        if (!shards && (rc = wpk_check_shard_list(w, &shards)))
            return rc;
        if (e->shard >= shards)
            return wpk_wfail(w, WPACK_E_SHARD, "external '%s': shard %u, the list has %llu",
                             wpk_pool_str(w, e->name), e->shard, (unsigned long long)shards);
    }
    const wpk_pending_name *ns = (const wpk_pending_name *)(void *)w->names.p;
    for (size_t i = 0; i < w->names.len / sizeof *ns; i++) {
        uint64_t t;
        if (!lookup_entry(w, ns[i].entry, &t))
            return wpk_wfail(w, WPACK_E_NAMEMAP, "name map '%s': no tensor '%s' (nor activation stats of that module path)",
                             wpk_pool_str(w, ns[i].name), wpk_pool_str(w, ns[i].entry));
    }
    const wpk_pending_stats *ss = (const wpk_pending_stats *)(void *)w->stats.p;
    size_t ns_count = w->stats.len / sizeof *ss;
    for (size_t i = 0; i < ns_count; i++) {
        if (i && cmp_stats(&ss[i - 1], &ss[i], w) == 0)
            return wpk_wfail(w, WPACK_E_EXISTS, "%s stats '%s' added twice",
                             wpk_stats_kind_name(ss[i].kind), wpk_pool_str(w, ss[i].key));
        if (ss[i].kind != WPACK_STATS_WEIGHT)
            continue;
        uint64_t t;
        if (!lookup_entry(w, ss[i].key, &t))
            return wpk_wfail(w, WPACK_E_STATS, "weight stats '%s': no tensor of that name",
                             wpk_pool_str(w, ss[i].key));
        const wpk_pending_entry *e = &wpk_entries(w)[t];
        if (ss[i].gran == WPACK_GRAN_CHANNEL &&
            (ss[i].axis >= e->rank || ss[i].channels != e->dims[ss[i].axis]))
            return wpk_wfail(w, WPACK_E_STATS,
                             "weight stats '%s': %u channels on axis %u do not fit the tensor",
                             wpk_pool_str(w, ss[i].key), ss[i].channels, ss[i].axis);
    }
    return WPACK_OK;
}

static void encode_header(uint8_t *h, const char *magic, const wpack_writer *w, uint64_t data_len,
                          uint64_t index_off, uint64_t index_len, uint64_t index_sum,
                          uint64_t file_len, uint64_t entries, int features)
{
    uint64_t data_off;
    wpk_align_up(WPK_HEADER_SIZE, w->opt.alignment, &data_off);
    memset(h, 0, WPK_HEADER_SIZE);
    wpk_st16(h + WPK_H_MAJOR_OFF, WPACK_FORMAT_MAJOR);
    /* features: bit 0 zstd, bit 1 sharded, bit 2 chunk sums; 1.1 only when
     * a 1.1 feature is used, 1.2 when chunk sums are */
    wpk_st16(h + WPK_H_MINOR_OFF, features & 4 ? 2 : features ? 1 : 0);
    wpk_st32(h + WPK_H_ENDIAN_OFF, WPK_ENDIAN_MARKER);
    wpk_st32(h + WPK_H_HEADER_SIZE_OFF, WPK_HEADER_SIZE);
    wpk_st32(h + WPK_H_ALIGNMENT_OFF, w->opt.alignment);
    wpk_st64(h + WPK_H_REQUIRED_OFF, (features & 1 ? WPK_FEATURE_ZSTD : 0) |
                                         (features & 2 ? WPK_FEATURE_SHARDS : 0));
    wpk_st64(h + WPK_H_OPTIONAL_OFF, features & 4 ? WPK_OPT_CHUNK_SUMS : 0);
    wpk_st64(h + WPK_H_DATA_OFFSET_OFF, data_off);
    wpk_st64(h + WPK_H_DATA_LENGTH_OFF, data_len);
    wpk_st64(h + WPK_H_ENTRY_COUNT_OFF, entries);
    const wpk_generation g = {1, index_off, index_len, index_sum, file_len};
    wpk_header_encode(h, magic, &g);
}

/* qsort_r, which must not see a NULL array even for zero records. */
static void sort_records(void *base, size_t n, size_t size,
                         int (*cmp)(const void *, const void *, void *), void *ctx)
{
    if (n > 1)
        qsort_r(base, n, size, cmp, ctx);
}

int wpk_write_index(wpack_writer *w)
{
    int rc = resolve_aliases(w);
    if (rc == WPACK_OK && w->opt.weight_stats)
        rc = auto_stats(w);
    if (rc)
        return rc;
    uint64_t n = wpk_entry_count(w);
    uint64_t *order = malloc((n + 1) * sizeof *order);
    uint64_t *rank_of = malloc((n + 1) * sizeof *rank_of);
    if (!order || !rank_of) {
        free(order);
        free(rank_of);
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory sorting %llu entries", (unsigned long long)n);
    }
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    sort_records(order, n, sizeof *order, cmp_entry_idx, w);
    for (uint64_t k = 0; k < n; k++)
        rank_of[order[k]] = k;
    sort_records(w->meta.p, w->meta.len / sizeof(wpk_pending_meta), sizeof(wpk_pending_meta),
                 cmp_meta, w);
    sort_records(w->names.p, w->names.len / sizeof(wpk_pending_name), sizeof(wpk_pending_name),
                 cmp_names, w);
    sort_records(w->stats.p, w->stats.len / sizeof(wpk_pending_stats), sizeof(wpk_pending_stats),
                 cmp_stats, w);
    rc = check_references(w);

    /* Data length: up to the end of the last extent (arrival order = offset order). */
    uint64_t data_off, data_end;
    int zstd = 0, shards = 0, sums = 0;
    wpk_align_up(WPK_HEADER_SIZE, w->opt.alignment, &data_off);
    data_end = data_off;
    for (uint64_t i = 0; i < n; i++) {
        if (wpk_entries(w)[i].kind == WPACK_KIND_DATA)
            data_end = wpk_entries(w)[i].offset + wpk_entries(w)[i].stored;
        zstd |= wpk_entries(w)[i].codec != WPACK_CODEC_NONE;
        shards |= wpk_entries(w)[i].kind == WPACK_KIND_EXTERNAL;
        sums |= wpk_entries(w)[i].sums_log2 != 0;
    }

    index_builder ib;
    memset(&ib, 0, sizeof ib);
    uint64_t data_count = 0;
    if (rc == WPACK_OK && !build_index(w, &ib, order, rank_of, &data_count))
        rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory building the index");
    free(order);
    free(rank_of);
    if (rc) {
        wpk_buf_free(&ib.b);
        return rc;
    }
    /* The data region ends at the last extent; the writer's position is there too. */
    uint64_t index_off;
    wpk_align_up(data_end, 8, &index_off);
    if (w->pos > index_off) {
        wpk_buf_free(&ib.b);
        return wpk_wfail(w, WPACK_E_STATE, "internal: writer position past the data region");
    }
    uint64_t index_len = ib.b.len;
    uint64_t sum = wpk_xxh3(ib.b.p, ib.b.len);
    uint64_t file_len = index_off + index_len + WPK_HEADER_SIZE;
    uint8_t hdr[WPK_HEADER_SIZE];
    encode_header(hdr, WPK_TRAILER_MAGIC, w, data_end - data_off, index_off, index_len, sum,
                  file_len, n, zstd | shards << 1 | sums << 2);
    rc = wpk_out_zeros(w, index_off - w->pos);
    if (rc == WPACK_OK)
        rc = wpk_out(w, ib.b.p, ib.b.len);
    if (rc == WPACK_OK)
        rc = wpk_out(w, hdr, sizeof hdr);
    if (rc == WPACK_OK)
        rc = wpk_out_flush(w);
    wpk_buf_free(&ib.b);
    if (rc)
        return rc;
    encode_header(hdr, WPK_SUPERBLOCK_MAGIC, w, data_end - data_off, index_off, index_len, sum,
                  file_len, n, zstd | shards << 1 | sums << 2);
    if (pwrite(w->fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
        return wpk_wfail(w, WPACK_E_IO, "%s: writing the superblock failed: %s", w->shown,
                         strerror(errno));
    return WPACK_OK;
}
