/*
 * writer_shards.c - a writer whose output is a sharded set (spec: Sharded
 * sets), written in one pass.
 *
 * With opt.shard_size set, the writer the caller holds becomes the
 * manifest: every tensor it is given is streamed into the current shard (a
 * writer of its own) and recorded in the manifest as an external entry. A
 * shard is closed when the next tensor would take it past shard_size (a
 * tensor is never split; a bigger one gets a shard to itself). Shards are
 * finished under temporary names ("<manifest temporary>.shard-0000k",
 * atomic_file.h), because their final names
 * ("NAME-0000k-of-0000N.wpack") hold the count, known only at the end.
 * Each shard is fsynced as it is finished (its directory is not: the
 * manifest's commit fsyncs it once, after every link and rename).
 * wpack_writer_finish writes and fsyncs the whole manifest first (still a
 * temporary), then links the shards to their names, then renames the
 * manifest.
 *
 * Replacing a set never puts its files at risk: a shard is put only at a
 * name where nothing exists (NAME-0000k-of-0000N.wpack, else
 * NAME-0000k-of-0000N.G.wpack with the smallest free G >= 2; the link
 * refuses to replace), so the old manifest and its shards stay whole
 * until the new manifest's rename, the one step that switches sets. Each
 * shard is tied to that rename (wpk_atomic_add_file: it stays linked as
 * "<manifest temporary>.new-NAME" until then), and so is each shard of
 * the set replaced (replaced_set.c, for any archive written over a set:
 * "<manifest temporary>.gone-NAME"): after the rename the new shards stay
 * and the old ones go, before it the other way round - done by the writer,
 * or after a kill by the next writer's sweep (atomic_file.h). A crash or a
 * failure at any point leaves one whole set, old or new, and no file that
 * the next writer of the same path does not clean up. Nothing is written
 * twice.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"
#include "writer_shards.h"
#include "internal.h"

struct wpk_shard_set {
    wpack_writer_options opt;  /* for each shard: the caller's, without sharding */
    uint64_t limit;            /* data bytes per shard */
    wpack_writer *cur;         /* the shard being written, NULL between shards */
    uint64_t cur_bytes;        /* data bytes in cur so far */
    uint32_t n;                /* shards started */
    char **parts;              /* shard k's temporary path, once it is finished */
    uint64_t *lengths, *sums;  /* shard k's file length and index XXH3 */
    uint32_t cap;
    char **names;              /* shard k's final file name (n of them, at finish) */
};

static const char *base_name(const char *path)
{
    return path + wpk_dir_len(path);
}

/* "dir/model.wpack" -> "model-0000k-of-0000n.wpack" (k counted from 1),
 * or with g >= 2 "model-0000k-of-0000n.g.wpack". A stem too long for the
 * 255-byte NAME_MAX of the common file systems is cut (at a UTF-8
 * character): a manifest of any name the file system takes has shards. */
static char *final_name(const char *manifest, uint32_t k, uint32_t n, unsigned g)
{
    const char *base = base_name(manifest);
    size_t len = strlen(base);
    if (len > 6 && strcmp(base + len - 6, ".wpack") == 0)
        len -= 6;
    char tail[64];
    if (g < 2)
        snprintf(tail, sizeof tail, "-%05u-of-%05u.wpack", k + 1, n);
    else
        snprintf(tail, sizeof tail, "-%05u-of-%05u.%u.wpack", k + 1, n, g);
    size_t t = strlen(tail);
    if (len + t > 255) {
        len = 255 - t;
        while (len > 0 && ((unsigned char)base[len] & 0xC0) == 0x80)
            len--;
    }
    char *s = malloc(len + t + 1);
    if (s)
        snprintf(s, len + t + 1, "%.*s%s", (int)len, base, tail);
    return s;
}

/* name, in the manifest's directory. */
static char *beside(const char *manifest, const char *name)
{
    size_t dir = (size_t)(base_name(manifest) - manifest);
    char *p = malloc(dir + strlen(name) + 1);
    if (p) {
        memcpy(p, manifest, dir);
        strcpy(p + dir, name);
    }
    return p;
}

static int pass_failure(wpack_writer *w, wpack_writer *shard, int rc)
{
    return wpk_wbreak(w, rc, "%s", shard ? wpack_writer_errmsg(shard) : "out of memory");
}

int wpk_shards_init(wpack_writer *w)
{
    wpk_shard_set *s = calloc(1, sizeof *s);
    if (!s)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    w->shards = s;
    s->opt = w->opt;
    s->opt.shard_size = 0;
    s->limit = w->opt.shard_size;
    if (w->opt.compress_level)
        return wpk_wfail(w, WPACK_E_INVALID_ARGUMENT,
                         "a sharded set stores its shards uncompressed: no compression with shard_size");
    w->opt.alignment = WPACK_MIN_ALIGNMENT; /* the manifest itself holds no data */
    return WPACK_OK;
}

/* Finish the current shard under its temporary name; note its length and
 * index checksum, and copy its weight stats into the manifest. */
static int close_shard(wpack_writer *w)
{
    wpk_shard_set *s = w->shards;
    wpack_writer *cur = s->cur;
    uint32_t k = s->n - 1;
    char err[600];
    s->cur = NULL;
    int rc = wpack_writer_finish(cur, err, sizeof err);
    if (rc)
        return wpk_wfail(w, rc, "shard %u: %s", k + 1, err);
    wpack_archive *ar;
    if ((rc = wpack_open_file(&ar, s->parts[k], 0))) {
        rc = wpk_wfail(w, rc, "shard %u: %s", k + 1, wpack_errmsg(ar));
        wpack_close(ar);
        return rc;
    }
    wpack_info in;
    wpack_get_info(ar, &in);
    s->lengths[k] = in.file_length;
    s->sums[k] = in.index_checksum;
    for (uint64_t i = 0; i < wpack_stats_count(ar) && rc == WPACK_OK; i++) {
        wpack_stats st;
        wpack_stats_at(ar, i, &st);
        rc = wpk_copy_stats(w, &st);
    }
    wpack_close(ar);
    return rc;
}

static int open_shard(wpack_writer *w)
{
    wpk_shard_set *s = w->shards;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 16;
        if (cap > WPK_MAX_SHARDS)
            cap = WPK_MAX_SHARDS;
        if (s->n == cap)
            return wpk_wfail(w, WPACK_E_LIMIT, "more than %u shards: raise shard_size",
                             WPK_MAX_SHARDS);
        char **parts = realloc(s->parts, cap * sizeof *parts);
        if (parts)
            s->parts = parts;
        uint64_t *l = realloc(s->lengths, cap * sizeof *l);
        if (l)
            s->lengths = l;
        uint64_t *c = realloc(s->sums, cap * sizeof *c);
        if (c)
            s->sums = c;
        if (!parts || !l || !c)
            return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
        s->cap = cap;
    }
    /* Under the manifest's own temporary name: the manifest writer's lock
     * covers the part, and a later run sweeps it if this one dies. */
    size_t len = strlen(w->out.tmp) + 32;
    char *part = malloc(len);
    if (!part)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    snprintf(part, len, "%s.shard-%05u", w->out.tmp, s->n + 1);
    s->parts[s->n++] = part;
    /* No fsync of the directory per shard: the manifest's commit, after
     * the shards' renames in the same directory, makes them all durable. */
    int rc = wpk_writer_open_flags(&s->cur, part, &s->opt,
                                   WPK_ATOMIC_NO_SWEEP | WPK_ATOMIC_NO_DIR_SYNC | WPK_ATOMIC_OWN_NAME);
    /* the shards of a set that replaces a file get the permission bits and
     * owner the manifest kept from it: a private set's data stays private */
    if (rc == WPACK_OK)
        wpk_atomic_keep_like(&w->out, s->cur->out.fd);
    /* its messages name the set the user asked for, not the temporary */
    if (rc == WPACK_OK) {
        size_t sl = strlen(w->shown) + 32;
        char *shown = malloc(sl);
        if (shown) {
            snprintf(shown, sl, "%s (shard %u)", w->shown, s->n);
            free(s->cur->shown);
            s->cur->shown = shown;
        }
    }
    if (rc == WPACK_OK)
        rc = wpack_writer_set_string(s->cur, "wpack.manifest", base_name(w->path));
    /* Block dtypes keep their codes: every shard gets the manifest's, in order. */
    const wpk_pending_dtype *d = (const wpk_pending_dtype *)(const void *)w->dtypes.p;
    for (size_t i = 0; rc == WPACK_OK && i < w->dtypes.len / sizeof *d; i++) {
        int code;
        rc = wpack_writer_add_block_dtype(s->cur, wpk_pool_str(w, d[i].name), d[i].block_elems,
                                          d[i].block_bytes, (const uint8_t *)w->aux.p + d[i].params_off,
                                          (size_t)d[i].params_len, &code);
    }
    if (rc) {
        rc = pass_failure(w, s->cur, rc);
        wpack_writer_abort(s->cur);
        s->cur = NULL;
        free(s->parts[--s->n]); /* never finished: nothing on disk to remove */
        return rc;
    }
    s->cur_bytes = 0;
    return WPACK_OK;
}

int wpk_shards_begin(wpack_writer *w, const char *name, int dtype, unsigned rank,
                     const uint64_t *dims, uint64_t nbytes)
{
    wpk_shard_set *s = w->shards;
    int rc;
    int full = nbytes > s->limit || s->cur_bytes > s->limit - nbytes; /* cur_bytes + nbytes > limit */
    if (s->cur && s->cur_bytes && full && (rc = close_shard(w)))
        return rc;
    if (!s->cur && (rc = open_shard(w)))
        return rc;
    if ((rc = wpack_writer_begin_tensor(s->cur, name, dtype, rank, dims)))
        return pass_failure(w, s->cur, rc);
    s->cur_bytes += nbytes;
    return WPACK_OK;
}

int wpk_shards_write(wpack_writer *w, const void *data, size_t n)
{
    int rc = wpack_writer_write(w->shards->cur, data, n);
    return rc ? pass_failure(w, w->shards->cur, rc) : WPACK_OK;
}

int wpk_shards_write_zeros(wpack_writer *w, uint64_t n)
{
    int rc = wpack_writer_write_zeros(w->shards->cur, n);
    return rc ? pass_failure(w, w->shards->cur, rc) : WPACK_OK;
}

int wpk_shards_end(wpack_writer *w, wpk_pending_entry *e)
{
    wpk_shard_set *s = w->shards;
    int rc = wpack_writer_end_tensor(s->cur);
    if (rc)
        return pass_failure(w, s->cur, rc);
    const wpk_pending_entry *in = &wpk_entries(s->cur)[wpk_entry_count(s->cur) - 1];
    e->offset = in->offset;
    e->stored = in->stored;
    e->nbytes = in->nbytes;
    e->checksum = in->checksum;
    e->shard = s->n - 1;
    return WPACK_OK;
}

int wpk_shards_add_block_dtype(wpack_writer *w, const char *name, uint32_t block_elems,
                               uint32_t block_bytes, const void *params, size_t params_len)
{
    wpack_writer *cur = w->shards->cur;
    int code;
    if (!cur)
        return WPACK_OK; /* the next shard gets it from the manifest's list */
    int rc = wpack_writer_add_block_dtype(cur, name, block_elems, block_bytes, params, params_len, &code);
    return rc ? pass_failure(w, cur, rc) : WPACK_OK;
}

/* Shard k's final name: the first of NAME-0000k-of-0000N.wpack,
 * NAME-0000k-of-0000N.2.wpack, ... where nothing exists now (an old set's
 * shard, or any file of the user's, is never renamed over). */
static int free_name(wpack_writer *w, uint32_t k)
{
    wpk_shard_set *s = w->shards;
    for (unsigned g = 1; g <= 1000; g++) {
        char *name = final_name(w->path, k, s->n, g);
        char *path = name ? beside(w->path, name) : NULL;
        if (!path) {
            free(name);
            return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
        }
        struct stat st;
        int taken = lstat(path, &st) == 0, e = errno;
        free(path);
        if (!taken && e == ENOENT) {
            s->names[k] = name;
            return WPACK_OK;
        }
        free(name);
        if (!taken)
            return wpk_wfail(w, WPACK_E_IO, "%s: cannot look at shard %u's name: %s", w->path,
                             k + 1, strerror(e));
    }
    return wpk_wfail(w, WPACK_E_LIMIT, "%s: names for shard %u taken up to generation 1000",
                     w->path, k + 1);
}

int wpk_shards_finish(wpack_writer *w)
{
    wpk_shard_set *s = w->shards;
    int rc;
    if (!s->n && (rc = open_shard(w))) /* no data at all: one empty shard keeps the set well-formed */
        return rc;
    if (s->cur && (rc = close_shard(w)))
        return rc;
    if (!(s->names = calloc(s->n, sizeof *s->names)))
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    for (uint32_t k = 0; k < s->n; k++)
        if ((rc = free_name(w, k)))
            return rc;
    return wpack_writer_set_shards(w, s->n, (const char *const *)s->names, s->lengths, s->sums);
}

int wpk_shards_place(wpack_writer *w)
{
    wpk_shard_set *s = w->shards;
    char err[600];
    for (uint32_t k = 0; k < s->n; k++) {
        /* tied to the manifest's rename: removed again if it does not happen */
        int rc = wpk_atomic_add_file(&w->out, s->parts[k], s->names[k], err, sizeof err);
        if (rc)
            return wpk_wfail(w, rc, "shard %u: %s", k + 1, err);
        free(s->parts[k]);
        s->parts[k] = NULL; /* the manifest's temporary has it now */
    }
    return WPACK_OK;
}

void wpk_shards_free(wpack_writer *w, int remove_files)
{
    wpk_shard_set *s = w->shards;
    if (!s)
        return;
    wpack_writer_abort(s->cur);
    for (uint32_t k = 0; k < s->n; k++) {
        if (remove_files && s->parts[k])
            unlink(s->parts[k]);
        free(s->parts[k]);
        if (s->names)
            free(s->names[k]);
    }
    free(s->names);
    free(s->parts);
    free(s->lengths);
    free(s->sums);
    free(s);
    w->shards = NULL;
}
