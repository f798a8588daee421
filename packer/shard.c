/* shard.c - write an archive as a sharded set: shards, then the manifest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy.h"
#include "internal.h"

/* Shard k's file name for manifest path "dir/model.wpack": "model-0000k-of-0000n.wpack". */
static char *shard_name(const char *out_path, uint32_t k, uint32_t n)
{
    const char *base = strrchr(out_path, '/');
    base = base ? base + 1 : out_path;
    size_t len = strlen(base);
    if (len > 6 && strcmp(base + len - 6, ".wpack") == 0)
        len -= 6;
    char *s = malloc(len + 32);
    if (s)
        snprintf(s, len + 32, "%.*s-%05u-of-%05u.wpack", (int)len, base, k + 1, n);
    return s;
}

static char *beside(const char *out_path, const char *name)
{
    const char *slash = strrchr(out_path, '/');
    size_t dir = slash ? (size_t)(slash - out_path) + 1 : 0;
    char *p = malloc(dir + strlen(name) + 1);
    if (p) {
        memcpy(p, out_path, dir);
        strcpy(p + dir, name);
    }
    return p;
}

int wpk_write_sharded(const wpack_archive *ar, const char *out_path, uint64_t shard_size,
                      uint32_t alignment, char *err, size_t errlen)
{
    if (errlen)
        err[0] = 0;
    uint64_t n = wpack_count(ar);
    uint32_t *shard_of = malloc((n + 1) * sizeof *shard_of);
    if (!shard_of) {
        wpk_fmt(err, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    /* Plan: data entries in name order, a new shard when the next would overflow. */
    uint32_t nshards = 0;
    uint64_t fill = 0;
    for (uint64_t i = 0; i < n; i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        shard_of[i] = UINT32_MAX;
        if (t.kind != WPACK_KIND_DATA && t.kind != WPACK_KIND_EXTERNAL)
            continue;
        if (!nshards || (fill && fill + t.nbytes > shard_size)) {
            nshards++;
            fill = 0;
        }
        fill += t.nbytes;
        shard_of[i] = nshards - 1;
    }
    if (!nshards)
        nshards = 1; /* an archive of splats only: one empty shard keeps the set well-formed */
    char **names = calloc(nshards, sizeof *names);
    char **paths = calloc(nshards, sizeof *paths);
    uint64_t *lengths = calloc(nshards, sizeof *lengths), *sums = calloc(nshards, sizeof *sums);
    wpack_archive **opened = calloc(nshards, sizeof *opened);
    int rc = names && paths && lengths && sums && opened ? WPACK_OK : WPACK_E_NOMEM;
    if (rc)
        wpk_fmt(err, errlen, "out of memory");
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = alignment;
    opt.weight_stats = 0; /* stats records are copied */
    for (uint32_t s = 0; s < nshards && rc == WPACK_OK; s++) {
        names[s] = shard_name(out_path, s, nshards);
        paths[s] = names[s] ? beside(out_path, names[s]) : NULL;
        if (!paths[s]) {
            rc = WPACK_E_NOMEM;
            break;
        }
        wpack_writer *w;
        if ((rc = wpack_writer_open(&w, paths[s], &opt))) {
            wpk_fmt(err, errlen, "%s", wpack_writer_errmsg(w));
            wpack_writer_abort(w);
            break;
        }
        for (uint64_t i = 0; i < n && rc == WPACK_OK; i++) {
            if (shard_of[i] != s)
                continue;
            wpack_tensor t;
            wpack_stats st;
            wpack_tensor_at(ar, i, &t);
            rc = wpk_copy_data(ar, w, &t, err, errlen);
            if (rc == WPACK_OK && wpack_stats_find(ar, t.name, WPACK_STATS_WEIGHT, &st) == WPACK_OK)
                rc = wpk_copy_stats(w, &st);
        }
        if (rc == WPACK_OK)
            rc = wpack_writer_set_string(w, "wpack.manifest",
                                         strrchr(out_path, '/') ? strrchr(out_path, '/') + 1 : out_path);
        if (rc) {
            if (!*err)
                wpk_fmt(err, errlen, "%s", wpack_writer_errmsg(w));
            wpack_writer_abort(w);
            break;
        }
        if ((rc = wpack_writer_finish(w, err, errlen)))
            break;
        wpack_archive *sh;
        if ((rc = wpack_open_file(&sh, paths[s], 0))) {
            wpk_fmt(err, errlen, "%s", wpack_errmsg(sh));
            wpack_close(sh);
            break;
        }
        wpack_info in;
        wpack_get_info(sh, &in);
        lengths[s] = in.file_length;
        sums[s] = in.index_checksum;
        opened[s] = sh;
    }
    /* The manifest: every entry, external where the bytes went to a shard. */
    wpack_writer *m = NULL;
    opt.alignment = WPACK_MIN_ALIGNMENT; /* the manifest holds no data */
    if (rc == WPACK_OK && (rc = wpack_writer_open(&m, out_path, &opt)))
        wpk_fmt(err, errlen, "%s", wpack_writer_errmsg(m));
    wpack_info ain;
    wpack_get_info(ar, &ain);
    for (uint64_t k = 0; k < ain.block_dtype_count && rc == WPACK_OK; k++) {
        const char *bn;
        uint32_t be, bb;
        const void *params;
        uint64_t plen;
        int code;
        wpack_block_dtype_at(ar, k, &bn, &be, &bb, &params, &plen);
        rc = wpack_writer_add_block_dtype(m, bn, be, bb, params, (size_t)plen, &code);
    }
    for (uint64_t i = 0; i < n && rc == WPACK_OK; i++) {
        wpack_tensor t, st;
        wpack_tensor_at(ar, i, &t);
        if (shard_of[i] != UINT32_MAX) {
            rc = wpack_find(opened[shard_of[i]], t.name, &st);
            if (rc == WPACK_OK)
                rc = wpack_writer_add_external(m, t.name, shard_of[i], &st);
        } else if (t.kind == WPACK_KIND_SPLAT) {
            rc = wpack_writer_add_splat(m, t.name, t.dtype, t.rank, t.dims, t.fill, t.fill_size);
        } else {
            wpack_tensor target;
            wpack_tensor_at(ar, t.alias_target, &target);
            rc = wpack_writer_add_alias(m, t.name, target.name);
        }
    }
    for (uint64_t i = 0; i < wpack_meta_count(ar) && rc == WPACK_OK; i++) {
        wpack_meta md;
        wpack_meta_at(ar, i, &md);
        if (strncmp(md.key, "wpack.shard", 11) != 0)
            rc = wpk_copy_meta(ar, m, &md);
    }
    for (uint64_t i = 0; i < wpack_namemap_count(ar) && rc == WPACK_OK; i++) {
        const char *other;
        uint64_t e;
        wpack_tensor t;
        wpack_namemap_at(ar, i, &other, &e);
        wpack_tensor_at(ar, e, &t);
        rc = wpack_writer_add_name(m, other, t.name);
    }
    for (uint64_t i = 0; i < wpack_stats_count(ar) && rc == WPACK_OK; i++) {
        wpack_stats st;
        wpack_stats_at(ar, i, &st);
        rc = wpk_copy_stats(m, &st);
    }
    if (rc == WPACK_OK)
        rc = wpack_writer_set_shards(m, nshards, (const char *const *)names, lengths, sums);
    if (m && rc != WPACK_OK && !*err)
        wpk_fmt(err, errlen, "manifest: %s", wpack_writer_errmsg(m));
    if (m && rc == WPACK_OK)
        rc = wpack_writer_finish(m, err, errlen);
    else
        wpack_writer_abort(m);
    for (uint32_t s = 0; s < nshards; s++) {
        if (opened)
            wpack_close(opened ? opened[s] : NULL);
        if (rc && paths && paths[s])
            unlink(paths[s]);
        if (names)
            free(names[s]);
        if (paths)
            free(paths[s]);
    }
    free(names);
    free(paths);
    free(lengths);
    free(sums);
    free(opened);
    free(shard_of);
    return rc;
}
