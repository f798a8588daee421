/* writer_meta.c - the writer's index records other than entries: metadata
 * keys, the name map (and wpack.module_names at finish) and calibration
 * statistics. */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "writer.h"

int wpack_writer_set_shards(wpack_writer *w, uint32_t n, const char *const *names,
                            const uint64_t *lengths, const uint64_t *index_checksums)
{
    if (!n || n > WPK_MAX_SHARDS || !names || !lengths || !index_checksums)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "shard list: 1 to %u shards", WPK_MAX_SHARDS);
    int64_t *v = malloc(2 * (size_t)n * sizeof *v);
    if (!v)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    for (uint32_t k = 0; k < n; k++) {
        v[k] = (int64_t)lengths[k];
        v[n + k] = (int64_t)index_checksums[k];
    }
    int rc = wpack_writer_set_array(w, "wpack.shards", WPACK_META_STRING, n, names);
    if (rc == WPACK_OK)
        rc = wpack_writer_set_array(w, "wpack.shard_lengths", WPACK_META_I64, n, v);
    if (rc == WPACK_OK)
        rc = wpack_writer_set_array(w, "wpack.shard_index_xxh3", WPACK_META_I64, n, v + n);
    free(v);
    return rc;
}

const wpk_pending_meta *wpk_meta_named(const wpack_writer *w, const char *key)
{
    const wpk_pending_meta *m = (const wpk_pending_meta *)(void *)w->meta.p;
    for (size_t i = 0; i < w->meta.len / sizeof *m; i++)
        if (strcmp(wpk_pool_str(w, m[i].key), key) == 0)
            return &m[i];
    return NULL;
}

const char *wpk_meta_elem_str(const wpack_writer *w, const wpk_pending_meta *m, uint64_t j,
                              size_t *len)
{
    /* a string array's value is (pool offset, length) pairs, each string
     * followed by its NUL in the pool */
    const uint8_t *pair = w->aux.p + m->value + 16 * j;
    if (len)
        *len = (size_t)wpk_ld64(pair + 8);
    return (const char *)w->strings.p + wpk_ld64(pair);
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int wpk_check_shard_list(wpack_writer *w, uint64_t *n)
{
    static const char *const keys[3] = {"wpack.shards", "wpack.shard_lengths",
                                        "wpack.shard_index_xxh3"};
    const wpk_pending_meta *m[3];
    for (int k = 0; k < 3; k++) {
        m[k] = wpk_meta_named(w, keys[k]);
        int elem = k ? WPACK_META_I64 : WPACK_META_STRING;
        if (!m[k] || m[k]->type != WPACK_META_ARRAY || m[k]->elem != elem || !m[k]->count ||
            m[k]->count > WPK_MAX_SHARDS || m[k]->count != m[0]->count)
            return wpk_wfail(w, WPACK_E_SHARD,
                             "sharded set: metadata '%s' missing, not %s array, or not of 1..%u "
                             "elements like 'wpack.shards' (wpack_writer_set_shards writes the list)",
                             keys[k], k ? "an i64" : "a string", WPK_MAX_SHARDS);
    }
    *n = m[0]->count;
    const char **names = malloc((size_t)*n * sizeof *names);
    if (!names)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    int rc = WPACK_OK;
    for (uint64_t s = 0; s < *n && rc == WPACK_OK; s++) {
        size_t len;
        names[s] = wpk_meta_elem_str(w, m[0], s, &len);
        const char *why = wpk_shard_name_problem(names[s], len);
        if (why) {
            char q[256];
            wpk_quote(q, sizeof q, names[s], len);
            rc = wpk_wfail(w, WPACK_E_SHARD, "sharded set: shard %llu '%s': %s",
                           (unsigned long long)s, q, why);
        }
    }
    if (rc == WPACK_OK)
        qsort(names, (size_t)*n, sizeof *names, by_str);
    for (uint64_t s = 1; s < *n && rc == WPACK_OK; s++)
        if (strcmp(names[s - 1], names[s]) == 0) {
            char q[256];
            wpk_quote(q, sizeof q, names[s], strlen(names[s]));
            rc = wpk_wfail(w, WPACK_E_SHARD, "sharded set: shard '%s' is listed twice", q);
        }
    free(names);
    return rc;
}

/* ---- metadata ---- */

static int add_meta(wpack_writer *w, const char *key, int type, int elem, uint64_t value,
                    uint64_t count)
{
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    if (w->meta.len / sizeof(wpk_pending_meta) >= WPK_LIMIT_META)
        return wpk_wfail(w, WPACK_E_LIMIT, "more than %llu metadata keys",
                         (unsigned long long)WPK_LIMIT_META);
    wpk_pending_meta m;
    memset(&m, 0, sizeof m);
    if ((rc = wpk_pool_name(w, key, "metadata key", &m.key)))
        return rc;
    uint64_t item;
    if (wpk_nameset_find(&w->meta_set, wpk_meta_key_of, w, (const uint8_t *)key, m.key.len, &item))
        return wpk_wfail(w, WPACK_E_EXISTS, "metadata key '%s' set twice", key);
    m.type = (uint8_t)type;
    m.elem = (uint8_t)elem;
    m.value = value;
    m.count = count;
    uint64_t idx = w->meta.len / sizeof m;
    if (!wpk_buf_append(&w->meta, &m, sizeof m) ||
        !wpk_nameset_insert(&w->meta_set, wpk_meta_key_of, w, (const uint8_t *)key, m.key.len, idx))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return wpk_check_reserved_key(w, key); /* a bad value stays refused at finish too */
}

/* A metadata string value: valid UTF-8 without NUL, pooled. */
static int pool_value(wpack_writer *w, const char *key, const char *s, wpk_str_ref *ref)
{
    int rc = wpk_name_ok(w, key, "metadata key"); /* the messages below show it as it is */
    if (rc)
        return rc;
    if (!s)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': NULL string", key);
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (k > 1 && (n - i < k || wpk_name_problem((const uint8_t *)s + i, k)))
            return wpk_wfail(w, WPACK_E_METADATA, "metadata '%s': value is not valid UTF-8", key);
        i += k;
    }
    ref->off = w->strings.len;
    ref->len = (uint32_t)n;
    if (!wpk_buf_append(&w->strings, s, n + 1))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

int wpack_writer_set_string(wpack_writer *w, const char *key, const char *value)
{
    wpk_str_ref v;
    size_t mark = w->strings.len;
    int rc = pool_value(w, key, value, &v);
    if (rc == WPACK_OK && (rc = add_meta(w, key, WPACK_META_STRING, 0, v.off, v.len)))
        w->strings.len = mark;
    return rc;
}

int wpack_writer_set_i64(wpack_writer *w, const char *key, int64_t value)
{
    return add_meta(w, key, WPACK_META_I64, 0, (uint64_t)value, 0);
}

int wpack_writer_set_f64(wpack_writer *w, const char *key, double value)
{
    uint64_t u;
    memcpy(&u, &value, sizeof u);
    return add_meta(w, key, WPACK_META_F64, 0, u, 0);
}

int wpack_writer_set_bool(wpack_writer *w, const char *key, int value)
{
    return add_meta(w, key, WPACK_META_BOOL, 0, value ? 1 : 0, 0);
}

int wpack_writer_set_bytes(wpack_writer *w, const char *key, const void *value, size_t len)
{
    uint64_t off = w->aux.len;
    if (len && !wpk_buf_append(&w->aux, value, len))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    int rc = add_meta(w, key, WPACK_META_BYTES, 0, off, len);
    if (rc) /* a refused value leaves no bytes between aux items (spec 17 rule 3) */
        w->aux.len = off;
    return rc;
}

int wpack_writer_set_array(wpack_writer *w, const char *key, int elem_type, uint64_t count,
                           const void *values)
{
    int rc = wpk_name_ok(w, key, "metadata key"); /* the messages below show it as it is */
    if (rc)
        return rc;
    if (count > WPK_LIMIT_ARRAY || (count && !values))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': bad array", key);
    if (elem_type < WPACK_META_STRING || elem_type > WPACK_META_BYTES)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': element type %d not settable",
                         key, elem_type);
    uint64_t off = w->aux.len;
    for (uint64_t j = 0; j < count && rc == WPACK_OK; j++) {
        uint8_t rec[16];
        size_t n = 8;
        switch (elem_type) {
        case WPACK_META_I64:
            wpk_st64(rec, (uint64_t)((const int64_t *)values)[j]);
            break;
        case WPACK_META_F64:
            wpk_stf64(rec, ((const double *)values)[j]);
            break;
        case WPACK_META_BOOL:
            rec[0] = ((const int *)values)[j] ? 1 : 0;
            n = 1;
            break;
        case WPACK_META_STRING: {
            wpk_str_ref v;
            if ((rc = pool_value(w, key, ((const char *const *)values)[j], &v)))
                break;
            wpk_st64(rec, v.off);
            wpk_st64(rec + 8, v.len);
            n = 16;
            break;
        }
        case WPACK_META_BYTES: {
            const wpack_bytes *b = &((const wpack_bytes *)values)[j];
            /* The bytes go to aux after the pair table: append them to a side buffer first. */
            wpk_st64(rec, 0);
            wpk_st64(rec + 8, b->len);
            n = 16;
            break;
        }
        default:
            rc = wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "metadata '%s': element type %d not settable",
                           key, elem_type);
        }
        if (rc == WPACK_OK && !wpk_buf_append(&w->aux, rec, n))
            rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    }
    /* Bytes elements: their data follows the pair table; patch the offsets. */
    for (uint64_t j = 0; j < count && rc == WPACK_OK && elem_type == WPACK_META_BYTES; j++) {
        const wpack_bytes *b = &((const wpack_bytes *)values)[j];
        uint64_t at = w->aux.len;
        if (b->len && (!b->data || !wpk_buf_append(&w->aux, b->data, b->len)))
            rc = wpk_wfail(w, b->data ? WPACK_E_NOMEM : WPACK_E_INVALID_ARGUMENT,
                           "metadata '%s': bytes element %llu", key, (unsigned long long)j);
        else
            wpk_st64(w->aux.p + off + 16 * j, at);
    }
    if (rc == WPACK_OK)
        rc = add_meta(w, key, WPACK_META_ARRAY, elem_type, off, count);
    if (rc)
        w->aux.len = off;
    return rc;
}

/* ---- name map and stats ---- */

int wpack_writer_add_name(wpack_writer *w, const char *other_name, const char *entry)
{
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    wpk_pending_name m;
    size_t mark = w->strings.len;
    if ((rc = wpk_pool_name(w, other_name, "name-map name", &m.name)) ||
        (rc = wpk_pool_name(w, entry, "name-map entry", &m.entry))) {
        w->strings.len = mark;
        return rc;
    }
    uint64_t item;
    if (wpk_nameset_find(&w->name_set, wpk_map_name_of, w, (const uint8_t *)other_name, m.name.len,
                         &item) ||
        wpk_nameset_find(&w->entry_set, wpk_entry_name_of, w, (const uint8_t *)other_name, m.name.len,
                         &item)) {
        w->strings.len = mark;
        return wpk_wfail(w, WPACK_E_EXISTS, "name-map name '%s' already names an entry", other_name);
    }
    uint64_t idx = w->names.len / sizeof m;
    if (!wpk_buf_append(&w->names, &m, sizeof m) ||
        !wpk_nameset_insert(&w->name_set, wpk_map_name_of, w, (const uint8_t *)other_name, m.name.len,
                            idx))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

/*
 * Name-map names whose target is no entry but a module path with
 * activation stats (`wpack create --name model.0=0`, "0" an nn.Sequential
 * layer) cannot be name-map records, whose target is an entry number: they
 * go into the metadata key wpack.module_names (spec section 9), an array of
 * strings [other, key, other, key, ...] sorted by other name, which the
 * resolver's --annotate reads. Called at finish, when all stats are known.
 */
static int pair_cmp(const void *a, const void *b)
{
    return strcmp(((char *const *)a)[0], ((char *const *)b)[0]);
}

int wpk_module_names_finish(wpack_writer *w)
{
    wpk_pending_name *ns = (wpk_pending_name *)(void *)w->names.p;
    size_t n = w->names.len / sizeof *ns, keep = 0, np = 0;
    const wpk_pending_stats *ss = (const wpk_pending_stats *)(void *)w->stats.p;
    size_t nstats = w->stats.len / sizeof *ss;
    char **pairs = NULL;
    int rc = WPACK_OK;
    for (size_t i = 0; i < n; i++) {
        const char *target = wpk_pool_str(w, ns[i].entry);
        uint64_t item;
        int module = 0;
        if (!wpk_nameset_find(&w->entry_set, wpk_entry_name_of, w, (const uint8_t *)target,
                              ns[i].entry.len, &item))
            for (size_t k = 0; k < nstats && !module; k++)
                module = ss[k].kind == WPACK_STATS_ACTIVATION &&
                         strcmp(wpk_pool_str(w, ss[k].key), target) == 0;
        if (!module) {
            ns[keep++] = ns[i];
            continue;
        }
        char **grown = realloc(pairs, (np + 1) * 2 * sizeof *pairs);
        if (!grown) {
            rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
            break;
        }
        pairs = grown;
        /* copies: the pool moves while the array's strings are added to it */
        pairs[2 * np] = strdup(wpk_pool_str(w, ns[i].name));
        pairs[2 * np + 1] = strdup(target);
        np++;
        if (!pairs[2 * np - 2] || !pairs[2 * np - 1]) {
            rc = wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
            break;
        }
    }
    if (rc == WPACK_OK && np) {
        w->names.len = keep * sizeof *ns; /* the name set is not consulted after this */
        qsort(pairs, np, 2 * sizeof *pairs, pair_cmp);
        uint64_t item;
        if (wpk_nameset_find(&w->meta_set, wpk_meta_key_of, w, (const uint8_t *)"wpack.module_names", 18,
                             &item))
            rc = wpk_wfail(w, WPACK_E_EXISTS,
                           "name map '%s': '%s' is a module path (activation stats only), which goes "
                           "into metadata 'wpack.module_names', but that key is set already",
                           pairs[0], pairs[1]);
        else
            rc = wpack_writer_set_array(w, "wpack.module_names", WPACK_META_STRING, 2 * np,
                                        (const char *const *)pairs);
    }
    for (size_t i = 0; i < 2 * np; i++)
        free(pairs[i]);
    free(pairs);
    return rc;
}

int wpack_writer_add_stats(wpack_writer *w, const wpack_stats_in *s)
{
    int rc = wpk_writer_usable(w);
    if (rc)
        return rc;
    if (!s)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "stats: NULL record");
    if ((rc = wpk_name_ok(w, s->key, "stats key"))) /* the messages below show it as it is */
        return rc;
    char why[300];
    if (WPK_RESERVED_CHECK(s, "wpack_stats_in", "wpack.h", why, sizeof why))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "stats '%s': %s", s->key, why);
    const char *k = s->key;
    uint32_t C = s->channels;
    /* The reader's rules (format/stats_rules.c): a bad record fails here, not at open. */
    if ((rc = wpk_stats_shape_rule(s->kind, s->granularity, s->axis, C, s->hist_bins,
                                   s->percentile_count, why, sizeof why)))
        return wpk_wfail(w, rc, "stats '%s': %s", k, why);
    if (!s->min || !s->max || !s->absmax || !s->mean || !s->variance ||
        (s->hist_bins && (!s->hist_edges || !s->hist_counts)) ||
        (s->percentile_count && !s->percentiles))
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT, "stats '%s': a NULL array", k);
    const double *arr[5] = {s->min, s->max, s->absmax, s->mean, s->variance};
    for (uint32_t c = 0; c < C; c++)
        if ((rc = wpk_stats_values_rule(c, s->min[c], s->max[c], s->absmax[c], s->mean[c],
                                        s->variance[c], why, sizeof why)))
            return wpk_wfail(w, rc, "stats '%s': %s", k, why);
    if (s->hist_bins) {
        uint64_t sum = 0;
        for (uint32_t b = 0; b <= s->hist_bins; b++)
            if ((rc = wpk_stats_edge_rule(b, s->hist_edges[b], b ? s->hist_edges[b - 1] : 0, why,
                                          sizeof why)))
                return wpk_wfail(w, rc, "stats '%s': %s", k, why);
        for (uint32_t b = 0; b < s->hist_bins; b++)
            if ((rc = wpk_stats_bin_rule(&sum, s->hist_counts[b], why, sizeof why)))
                return wpk_wfail(w, rc, "stats '%s': %s", k, why);
        if ((rc = wpk_stats_sum_rule(sum, s->count, why, sizeof why)))
            return wpk_wfail(w, rc, "stats '%s': %s", k, why);
    }
    for (uint32_t j = 0; j < s->percentile_count; j++) {
        double pq = j ? s->percentiles[2 * j - 2] : 0, pv = j ? s->percentiles[2 * j - 1] : 0;
        if ((rc = wpk_stats_percentile_rule(j, s->percentiles[2 * j], s->percentiles[2 * j + 1], pq,
                                            pv, why, sizeof why)))
            return wpk_wfail(w, rc, "stats '%s': %s", k, why);
    }
    wpk_pending_stats p;
    memset(&p, 0, sizeof p);
    size_t smark = w->strings.len, amark = w->aux.len;
    if ((rc = wpk_pool_name(w, k, "stats key", &p.key)))
        return rc;
    p.kind = (uint8_t)s->kind;
    p.gran = (uint8_t)s->granularity;
    p.axis = s->axis;
    p.channels = C;
    p.count = s->count;
    p.bins = s->hist_bins;
    p.pcts = s->percentile_count;
    int ok = 1;
    p.values_off = w->aux.len;
    for (int j = 0; j < 5 && ok; j++)
        for (uint32_t c = 0; c < C && ok; c++) {
            uint8_t b[8];
            wpk_stf64(b, arr[j][c]);
            ok = wpk_buf_append(&w->aux, b, 8);
        }
    if (p.bins) {
        p.hist_off = w->aux.len;
        for (uint32_t b = 0; b <= p.bins && ok; b++) {
            uint8_t x[8];
            wpk_stf64(x, s->hist_edges[b]);
            ok = wpk_buf_append(&w->aux, x, 8);
        }
        for (uint32_t b = 0; b < p.bins && ok; b++) {
            uint8_t x[8];
            wpk_st64(x, s->hist_counts[b]);
            ok = wpk_buf_append(&w->aux, x, 8);
        }
    }
    if (p.pcts) {
        p.pct_off = w->aux.len;
        for (uint32_t j = 0; j < 2 * p.pcts && ok; j++) {
            uint8_t x[8];
            wpk_stf64(x, s->percentiles[j]);
            ok = wpk_buf_append(&w->aux, x, 8);
        }
    }
    if (!ok || !wpk_buf_append(&w->stats, &p, sizeof p)) {
        w->strings.len = smark;
        w->aux.len = amark;
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    }
    return WPACK_OK;
}
