/* copy.c - everything in an archive, through the public API, into a writer. */
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "internal.h"

static int fail(wpack_writer *w, char *err, size_t errlen, int rc, const char *what)
{
    wpk_fmt(err, errlen, "%s: %s", what, w ? wpack_writer_errmsg(w) : wpack_error_describe(rc));
    return rc;
}

typedef struct {
    wpack_writer *w;
    int write_rc;                   /* the writer's error, if it stopped the stream */
} copy_job;

static int put_piece(void *user, const void *p, size_t n)
{
    copy_job *j = user;
    return j->write_rc = wpack_writer_write(j->w, p, n);
}

int wpk_copy_data(const wpack_archive *ar, wpack_writer *w, const wpack_tensor *t, char *err,
                     size_t errlen)
{
    int rc = wpack_writer_begin_tensor(w, t->name, t->dtype, t->rank, t->dims);
    if (rc)
        return fail(w, err, errlen, rc, t->name);
    /* Views straight from the mapping, zstd chunks decoded once each; checked
     * against the tensor's XXH3 when ar has WPACK_OPEN_VERIFY_READS. */
    copy_job j = {w, WPACK_OK};
    rc = wpack_read_stream(ar, t->index, put_piece, &j, 0);
    if (rc && rc != j.write_rc) {
        wpk_fmt(err, errlen, "%s", wpack_errmsg(ar)); /* names the tensor */
        return rc;
    }
    if (rc == WPACK_OK)
        rc = wpack_writer_end_tensor(w);
    return rc ? fail(w, err, errlen, rc, t->name) : WPACK_OK;
}

int wpk_copy_meta(const wpack_archive *ar, wpack_writer *w, const wpack_meta *m)
{
    if (!strcmp(m->key, "wpack.shards") || !strcmp(m->key, "wpack.shard_lengths") ||
        !strcmp(m->key, "wpack.shard_index_xxh3") || !strcmp(m->key, "wpack.manifest"))
        return WPACK_OK; /* the source's layout (the writer sets the copy's own): a copy of a
                          * shard is no shard of that set */
    switch (m->type) {
    case WPACK_META_STRING: return wpack_writer_set_string(w, m->key, m->str);
    case WPACK_META_I64: return wpack_writer_set_i64(w, m->key, m->i64);
    case WPACK_META_F64: return wpack_writer_set_f64(w, m->key, m->f64);
    case WPACK_META_BOOL: return wpack_writer_set_bool(w, m->key, m->boolean);
    case WPACK_META_BYTES: return wpack_writer_set_bytes(w, m->key, m->bytes, (size_t)m->count);
    }
    /* arrays: gather the elements into the form set_array takes */
    size_t width = m->elem_type == WPACK_META_I64 ? sizeof(int64_t)
                   : m->elem_type == WPACK_META_F64 ? sizeof(double)
                   : m->elem_type == WPACK_META_BOOL ? sizeof(int)
                   : m->elem_type == WPACK_META_STRING ? sizeof(char *)
                                                       : sizeof(wpack_bytes);
    void *v = malloc(m->count ? (size_t)m->count * width : 1);
    if (!v)
        return WPACK_E_NOMEM;
    for (uint64_t j = 0; j < m->count; j++) {
        wpack_meta e;
        wpack_meta_elem(ar, m, j, &e);
        switch (m->elem_type) {
        case WPACK_META_I64: ((int64_t *)v)[j] = e.i64; break;
        case WPACK_META_F64: ((double *)v)[j] = e.f64; break;
        case WPACK_META_BOOL: ((int *)v)[j] = e.boolean; break;
        case WPACK_META_STRING: ((const char **)v)[j] = e.str; break;
        default: ((wpack_bytes *)v)[j] = (wpack_bytes){e.bytes, (size_t)e.count};
        }
    }
    int rc = wpack_writer_set_array(w, m->key, m->elem_type, m->count, v);
    free(v);
    return rc;
}

int wpk_copy_stats(wpack_writer *w, const wpack_stats *s)
{
    uint32_t C = s->channels;
    double *v = malloc(5 * (size_t)C * sizeof *v);
    double *edges = s->hist_bins ? malloc(((size_t)s->hist_bins + 1) * sizeof *edges) : NULL;
    uint64_t *counts = s->hist_bins ? malloc((size_t)s->hist_bins * sizeof *counts) : NULL;
    double *pct = s->percentile_count ? malloc(2 * (size_t)s->percentile_count * sizeof *pct) : NULL;
    int rc = WPACK_E_NOMEM;
    if (!v || (s->hist_bins && (!edges || !counts)) || (s->percentile_count && !pct))
        goto out;
    for (int k = 0; k < 5; k++)
        for (uint32_t c = 0; c < C; c++)
            v[(size_t)k * C + c] = wpack_stats_value(s, k, c);
    for (uint32_t b = 0; b < s->hist_bins; b++)
        wpack_stats_bin(s, b, &edges[b], &edges[b + 1], &counts[b]);
    for (uint32_t j = 0; j < s->percentile_count; j++)
        wpack_stats_percentile(s, j, &pct[2 * j], &pct[2 * j + 1]);
    wpack_stats_in in = {.key = s->key, .kind = s->kind, .granularity = s->granularity,
                         .axis = s->axis, .channels = C, .count = s->count, .min = v,
                         .max = v + C, .absmax = v + 2 * (size_t)C, .mean = v + 3 * (size_t)C,
                         .variance = v + 4 * (size_t)C, .hist_bins = s->hist_bins,
                         .hist_edges = edges, .hist_counts = counts,
                         .percentile_count = s->percentile_count, .percentiles = pct};
    rc = wpack_writer_add_stats(w, &in);
out:
    free(v);
    free(edges);
    free(counts);
    free(pct);
    return rc;
}

int wpk_copy_archive(const wpack_archive *ar, wpack_writer *w, char *err, size_t errlen)
{
    return wpk_copy_archive_cb(ar, w, NULL, NULL, err, errlen);
}

int wpk_copy_archive_cb(const wpack_archive *ar, wpack_writer *w, wpk_copy_done_fn done,
                        void *user, char *err, size_t errlen)
{
    wpack_info in;
    wpack_get_info(ar, &in);
    int rc;
    for (uint64_t k = 0; k < in.block_dtype_count; k++) {
        const char *name;
        uint32_t elems, bytes;
        const void *params;
        uint64_t plen;
        int code;
        wpack_block_dtype_at(ar, k, &name, &elems, &bytes, &params, &plen);
        if ((rc = wpack_writer_add_block_dtype(w, name, elems, bytes, params, (size_t)plen, &code)))
            return fail(w, err, errlen, rc, name);
    }
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        if (t.kind == WPACK_KIND_DATA || t.kind == WPACK_KIND_EXTERNAL) {
            if ((rc = wpk_copy_data(ar, w, &t, err, errlen)))
                return rc;
        } else if (t.kind == WPACK_KIND_SPLAT) {
            if ((rc = wpack_writer_add_splat(w, t.name, t.dtype, t.rank, t.dims, t.fill, t.fill_size)))
                return fail(w, err, errlen, rc, t.name);
        } else if (t.kind == WPACK_KIND_ALIAS) {
            wpack_tensor target;
            wpack_tensor_at(ar, t.alias_target, &target);
            if ((rc = wpack_writer_add_alias(w, t.name, target.name)))
                return fail(w, err, errlen, rc, t.name);
        } else {
            return fail(NULL, err, errlen, WPACK_E_KIND, t.name);
        }
        if (done)
            done(user, &t);
    }
    for (uint64_t i = 0; i < wpack_meta_count(ar); i++) {
        wpack_meta m;
        wpack_meta_at(ar, i, &m);
        if ((rc = wpk_copy_meta(ar, w, &m)))
            return fail(w, err, errlen, rc, m.key);
    }
    if ((rc = wpk_copy_names(ar, w, err, errlen)))
        return rc;
    for (uint64_t i = 0; i < wpack_stats_count(ar); i++) {
        wpack_stats s;
        wpack_stats_at(ar, i, &s);
        if ((rc = wpk_copy_stats(w, &s)))
            return fail(w, err, errlen, rc, s.key);
    }
    return WPACK_OK;
}

int wpk_copy_names(const wpack_archive *ar, wpack_writer *w, char *err, size_t errlen)
{
    for (uint64_t i = 0; i < wpack_namemap_count(ar); i++) {
        const char *other;
        uint64_t e;
        wpack_tensor t;
        wpack_namemap_at(ar, i, &other, &e);
        wpack_tensor_at(ar, e, &t);
        int rc = wpack_writer_add_name(w, other, t.name);
        if (rc) {
            wpk_fmt(err, errlen, "name map '%s': %s", other, wpack_writer_errmsg(w));
            return rc;
        }
    }
    return WPACK_OK;
}
