/*
 * safetensors_index.c - a Hugging Face sharded safetensors checkpoint, given
 * by its index (`model.safetensors.index.json`):
 *
 *     {"metadata": {"total_size": N}, "weight_map": {"tensor": "model-00001-of-00002.safetensors", ...}}
 *
 * Each shard named in weight_map is a plain file name in the index's
 * directory, opened once, with the input rules (no FIFO or device; no
 * symlink unless the options allow it). Before the first tensor is written,
 * every shard is validated as a safetensors file and the map is checked
 * both ways: each tensor of a shard is in weight_map under that shard, and
 * each tensor of weight_map is found in its shard. The shards' __metadata__
 * (often {"format": "pt"}) becomes metadata once; shards that disagree on a
 * key are refused. The index's own "metadata" (total_size) is bookkeeping
 * and not kept.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "import.h"
#include "internal.h"
#include "safetensors.h"

typedef struct {
    wpk_sink *s;
    json_t *map;          /* weight_map */
    json_t *meta;         /* merged __metadata__ */
    const char *file;     /* the shard being checked */
    const char *qfile;    /* its name quoted for messages */
    size_t found;         /* its tensors */
} ix_check;

/* Pass 1, per item of one shard: in the map under this shard? */
static int check_item(void *user, const st_item *it)
{
    ix_check *c = user;
    char q[200];
    wpk_quote(q, sizeof q, it->name, strlen(it->name));
    if (it->is_meta) {
        json_t *had = json_object_get(c->meta, it->name);
        if (had && strcmp(json_string_value(had), it->value) != 0)
            return wpk_sink_fail(c->s, WPACK_E_INPUT,
                                 "shard %s: __metadata__ '%s' differs from an earlier shard's",
                                 c->qfile, q);
        if (!had && json_object_set_new(c->meta, it->name, json_string(it->value)) != 0)
            return wpk_sink_fail(c->s, WPACK_E_NOMEM, "out of memory");
        return WPACK_OK;
    }
    json_t *f = json_object_get(c->map, it->name);
    if (!f)
        return wpk_sink_fail(c->s, WPACK_E_INPUT,
                             "shard %s holds tensor '%s', which weight_map does not list", c->qfile,
                             q);
    if (strcmp(json_string_value(f), c->file) != 0) {
        char qf[200];
        wpk_quote(qf, sizeof qf, json_string_value(f), strlen(json_string_value(f)));
        return wpk_sink_fail(c->s, WPACK_E_INPUT,
                             "shard %s holds tensor '%s', which weight_map puts in %s", c->qfile,
                             q, qf);
    }
    c->found++;
    return WPACK_OK;
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int st_index_check(void *root_, const char ***files, size_t *nfiles, char *err, size_t errlen)
{
    json_t *root = root_, *map = json_object_get(root, "weight_map"),
           *meta = json_object_get(root, "metadata");
    *files = NULL;
    *nfiles = 0;
    if (!json_is_object(map) || !json_object_size(map) || (meta && !json_is_object(meta))) {
        wpk_fmt(err, errlen, "safetensors index: want {\"metadata\": {...}, \"weight_map\": "
                             "{tensor: shard file, ...}} with at least one tensor");
        return WPACK_E_INPUT;
    }
    const char **v = malloc(json_object_size(map) * sizeof *v);
    if (!v) {
        wpk_fmt(err, errlen, "out of memory");
        return WPACK_E_NOMEM;
    }
    size_t n = 0;
    const char *key;
    json_t *f;
    json_object_foreach(map, key, f) {
        const char *name = json_is_string(f) ? json_string_value(f) : NULL;
        if (!name || !*name || strchr(name, '/') || strchr(name, '\\') ||
            strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            char q[200];
            wpk_quote(q, sizeof q, key, strlen(key));
            wpk_fmt(err, errlen,
                    "safetensors index: weight_map['%s'] must be a shard file name in the "
                    "index's directory (no '/', not '.' or '..')",
                    q);
            free(v);
            return WPACK_E_INPUT;
        }
        v[n++] = name;
    }
    /* Each shard file once, in name order (model-00001-of-... first). */
    qsort(v, n, sizeof *v, by_str);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || strcmp(v[u - 1], v[i]) != 0)
            v[u++] = v[i];
    *files = v;
    *nfiles = u;
    return WPACK_OK;
}

/* The first tensor weight_map puts in file that the shard (mapped at m)
 * does not hold, for the message: an error path, so the header is parsed
 * again. */
static const char *first_missing(json_t *map, const char *file, const wpk_mapped *m)
{
    uint64_t n = m->len >= 8 ? wpk_ld64(m->p) : 0;
    json_t *hdr = n && n <= m->len - 8 ? json_loadb((const char *)m->p + 8, (size_t)n, 0, NULL)
                                       : NULL;
    const char *key, *miss = "?";
    json_t *f;
    json_object_foreach(map, key, f) {
        if (strcmp(json_string_value(f), file) == 0 && !(hdr && json_object_get(hdr, key))) {
            miss = key;
            break;
        }
    }
    json_decref(hdr);
    return miss;
}

/* How many tensors weight_map puts in each of the files (sorted). */
static size_t *listed_per_file(json_t *map, const char **files, size_t nfiles)
{
    size_t *count = calloc(nfiles, sizeof *count);
    const char *key;
    json_t *f;
    if (count)
        json_object_foreach(map, key, f) {
            const char *name = json_string_value(f);
            const char **at = bsearch(&name, files, nfiles, sizeof *files, by_str);
            if (at)
                count[at - files]++;
        }
    return count;
}

int st_index_pack(wpk_sink *s, void *root_, int dirfd, const char *dir)
{
    json_t *root = root_;
    const char **files;
    size_t nfiles;
    char err[700];
    int rc = st_index_check(root, &files, &nfiles, err, sizeof err);
    if (rc)
        return wpk_sink_fail(s, rc, "%s", err);
    unsigned flags = s->o && s->o->follow_links ? 0 : WPK_INPUT_NOFOLLOW;
    ix_check c = {.s = s, .map = json_object_get(root, "weight_map"), .meta = json_object()};
    if (!c.meta) {
        free(files);
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    }
    size_t *listed = listed_per_file(c.map, files, nfiles);
    if (!listed) {
        json_decref(c.meta);
        free(files);
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    }
    char label[4400], qfile[300];
    /* Pass 1: every shard valid, and the map true both ways. */
    size_t want = json_object_size(c.map);
    for (size_t i = 0; i < nfiles && rc == WPACK_OK; i++) {
        wpk_mapped m;
        wpk_quote(qfile, sizeof qfile, files[i], strlen(files[i]));
        wpk_fmt(label, sizeof label, "%s/%s", dir, qfile);
        if ((rc = wpk_map_at(s, dirfd, files[i], flags, label, &m)))
            break;
        c.file = files[i];
        c.qfile = qfile;
        size_t before = c.found;
        s->err[0] = 0;
        rc = st_scan_buffer(m.p, m.len, check_item, &c, err, sizeof err);
        if (rc && !s->err[0])
            wpk_sink_fail(s, rc, "%s: %s", label, err);
        if (rc == WPACK_OK && c.found - before != listed[i]) {
            const char *miss = first_missing(c.map, files[i], &m);
            char q[200];
            wpk_quote(q, sizeof q, miss, strlen(miss));
            rc = wpk_sink_fail(s, WPACK_E_INPUT,
                               "weight_map puts tensor '%s' in %s, which does not hold it", q,
                               label);
        }
        wpk_unmap_file(&m);
    }
    free(listed);
    if (rc == WPACK_OK && c.found != want)
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "weight_map lists %zu tensors, the shards hold %zu",
                           want, c.found);
    /* Pass 2: the metadata once, then each shard's tensors. */
    const char *key;
    json_t *v;
    if (rc == WPACK_OK)
        json_object_foreach(c.meta, key, v) if ((rc = wpk_sink_meta_string(s, key,
                                                                           json_string_value(v))))
            break;
    for (size_t i = 0; i < nfiles && rc == WPACK_OK; i++) {
        wpk_mapped m;
        wpk_quote(qfile, sizeof qfile, files[i], strlen(files[i]));
        wpk_fmt(label, sizeof label, "%s/%s", dir, qfile);
        if ((rc = wpk_map_at(s, dirfd, files[i], flags, label, &m)))
            break;
        rc = safetensors_pack_mapped(s, &m, 0);
        wpk_unmap_file(&m);
    }
    json_decref(c.meta);
    free(files);
    return rc;
}
