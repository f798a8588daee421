/*
 * replaced_set.c - the shards a new archive at a path replaces (wpack.h,
 * wpack_replaced_shards), and their removal once it is in place (tied to
 * its rename: atomic_file.h). One rule
 * for the writer (which removes them) and for callers that must keep their
 * inputs out of that list (the CLI's same-file guard); and, from a shard's
 * side, the set it belongs to (shard_of.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "internal.h"
#include "shard_of.h"
#include "writer.h"

/* Does shard name the manifest file `name` as its own (wpack.manifest)? */
static int names_manifest(const wpack_archive *shard, const char *name)
{
    wpack_meta m;
    return name && wpack_meta_find(shard, "wpack.manifest", &m) == WPACK_OK &&
           m.type == WPACK_META_STRING && strcmp(m.str, name) == 0;
}

/* The shards of the set ar, opened from path, as opened; with own, only
 * those that name that manifest's file (through a symlink: its target's)
 * as theirs. A copy of a manifest (`cp model.wpack backup.wpack`, or a
 * second hard link) lists its original's shards, which name the original:
 * replacing the copy removed them, and the set still at model.wpack lost
 * its data. */
static int shards_of(const wpack_archive *ar, const char *path, int own, char ***paths, uint32_t *n)
{
    *paths = NULL;
    *n = 0;
    struct stat st;
    char *real = own && wpack_shard_count(ar) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)
                     ? realpath(path, NULL) : NULL;
    const char *at = real ? real : path, *slash = strrchr(at, '/');
    const char *name = own ? (slash ? slash + 1 : at) : NULL;
    uint32_t count = wpack_shard_count(ar);
    char **v = count ? calloc(count, sizeof *v) : NULL;
    int rc = count && !v ? WPACK_E_NOMEM : WPACK_OK;
    uint32_t k = 0;
    for (uint32_t s = 0; s < count && rc == WPACK_OK; s++) {
        const char *p;
        const wpack_archive *shard;
        if (wpack_shard_at(ar, s, &p, &shard) == WPACK_OK && (!own || names_manifest(shard, name)) &&
            !(v[k++] = strdup(p)))
            rc = WPACK_E_NOMEM;
    }
    free(real);
    if (rc != WPACK_OK || !k) { /* none: NULL, as wpack.h says */
        wpack_paths_free(v, k);
        return rc;
    }
    *paths = v;
    *n = k;
    return WPACK_OK;
}

/* shards_of the set whose manifest is at path (none: nothing there, or not a whole set). */
static int list_shards(const char *path, int own, char ***paths, uint32_t *n)
{
    *paths = NULL;
    *n = 0;
    wpack_archive *ar;
    int rc = WPACK_OK;
    if (wpack_open_file(&ar, path, 0) == WPACK_OK)
        rc = shards_of(ar, path, own, paths, n);
    wpack_close(ar);
    return rc;
}

int wpack_replaced_shards(const char *path, char ***paths, uint32_t *n)
{
    if (!path || !paths || !n)
        return WPACK_E_INVALID_ARGUMENT;
    return list_shards(path, 1, paths, n);
}

void wpack_paths_free(char **paths, uint32_t n)
{
    for (uint32_t k = 0; paths && k < n; k++)
        free(paths[k]);
    free(paths);
}

typedef struct wpk_file_id {
    dev_t dev;
    ino_t ino;
} file_id;

/* The files of paths[0..n) that exist (symlinks followed), by device and
 * inode, after room for `extra` more; NULL when out of memory. */
static file_id *ids_of(char *const *paths, uint32_t n, uint32_t extra, uint32_t *count)
{
    file_id *v = malloc(((size_t)n + extra + 1) * sizeof *v);
    *count = 0;
    struct stat st;
    for (uint32_t k = 0; v && k < n; k++)
        if (stat(paths[k], &st) == 0)
            v[(*count)++] = (file_id){st.st_dev, st.st_ino};
    return v;
}

static int is_one_of(const struct stat *st, const file_id *v, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k].dev == st->st_dev && v[k].ino == st->st_ino)
            return 1;
    return 0;
}

int wpack_replaced_among(const char *path, const char *const *files, size_t n, size_t *hit)
{
    if (!path || (n && !files) || !hit)
        return WPACK_E_INVALID_ARGUMENT;
    *hit = n;
    char **old;
    uint32_t nold, nid;
    int rc = wpack_replaced_shards(path, &old, &nold);
    if (rc != WPACK_OK || !nold)
        return rc;
    file_id *ids = ids_of(old, nold, 0, &nid);
    wpack_paths_free(old, nold);
    if (!ids)
        return WPACK_E_NOMEM;
    struct stat st;
    for (size_t k = 0; k < n && *hit == n; k++)
        if (files[k] && stat(files[k], &st) == 0 && is_one_of(&st, ids, nid))
            *hit = k;
    free(ids);
    return WPACK_OK;
}

/* w->replaces: the files of the set at w->path, which ar was opened from
 * (NULL: nothing there, or not a whole set), and the target itself. */
static int know_replaces(wpack_writer *w, const wpack_archive *ar)
{
    char **old = NULL;
    uint32_t nold = 0;
    if (ar && shards_of(ar, w->path, 1, &old, &nold) != WPACK_OK)
        return WPACK_E_NOMEM;
    w->replaces = ids_of(old, nold, 1, &w->nreplaces);
    wpack_paths_free(old, nold);
    if (!w->replaces)
        return WPACK_E_NOMEM;
    struct stat t; /* the target itself (w->path is a link's target already) */
    if (stat(w->path, &t) == 0)
        w->replaces[w->nreplaces++] = (file_id){t.st_dev, t.st_ino};
    w->replaces_known = 1;
    return WPACK_OK;
}

int wpack_writer_replaces_fd(wpack_writer *w, int fd)
{
    struct stat st;
    if (!w || !w->path || fstat(fd, &st) != 0)
        return 0;
    if (!w->replaces_known) {
        wpack_archive *ar;
        int opened = wpack_open_file(&ar, w->path, 0) == WPACK_OK;
        int rc = know_replaces(w, opened ? ar : NULL);
        wpack_close(ar);
        if (rc)
            return 0;
    }
    return is_one_of(&st, w->replaces, w->nreplaces);
}

int wpk_replaced_writable(wpack_writer *w)
{
    struct stat st;
    for (uint32_t k = 0; k < w->nreplaced; k++) {
        char shown[600], err[sizeof w->errmsg];
        if (lstat(w->replaced[k], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        wpk_fmt(shown, sizeof shown, "%s (a shard of the set %s replaces)", w->replaced[k], w->shown);
        if (wpk_atomic_writable(shown, NULL, st.st_mode, err, sizeof err))
            return wpk_wfail(w, WPACK_E_IO, "%s", err);
    }
    return WPACK_OK;
}

int wpk_tie_replaced(wpack_writer *w)
{
    if (!w->nreplaced)
        return WPACK_OK;
    /* the files the new archive names as its shards (it is complete in its
     * temporary, beside the target: the same names resolve) and itself */
    char **now = NULL;
    uint32_t nnow = 0, nkeep = 0;
    if (list_shards(w->out.tmp, 0, &now, &nnow) != WPACK_OK)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    file_id *keep = ids_of(now, nnow, 1, &nkeep);
    wpack_paths_free(now, nnow);
    struct stat st;
    if (!keep)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    if (fstat(w->out.fd, &st) == 0)
        keep[nkeep++] = (file_id){st.st_dev, st.st_ino};
    int rc = WPACK_OK;
    char err[600];
    for (uint32_t k = 0; k < w->nreplaced && rc == WPACK_OK; k++)
        if (lstat(w->replaced[k], &st) == 0 && S_ISREG(st.st_mode) && !is_one_of(&st, keep, nkeep) &&
            (rc = wpk_atomic_add_gone(&w->out, w->replaced[k], err, sizeof err)))
            wpk_wfail(w, rc, "%s", err);
    free(keep);
    return rc;
}

int wpk_refuse_shard_target(wpack_writer *w)
{
    struct stat st;
    wpack_archive *ar;
    if (lstat(w->path, &st) != 0 || !S_ISREG(st.st_mode))
        return WPACK_OK; /* nothing there to replace (a link was resolved by the open) */
    /* not an archive, or a broken one: not a shard a set needs */
    int opened = wpack_open_file(&ar, w->path, 0) == WPACK_OK;
    char *set = NULL;
    int rc = opened ? wpk_shard_of_set(ar, w->path, &set) : WPACK_OK;
    /* opened once: what importers' guard needs of it too (a set's files) */
    if (rc == WPACK_OK && !set && !w->replaces_known)
        rc = know_replaces(w, opened ? ar : NULL);
    wpack_close(ar);
    if (rc)
        return wpk_wfail(w, rc, "%s: out of memory", w->shown);
    if (set) {
        rc = wpk_wfail(w, WPACK_E_SHARD,
                       "%s is a shard of the set at %s, which records its length and index "
                       "XXH3: replaced, it would make the whole set fail to open; nothing was "
                       "written (write to another name, or replace the set through %s)",
                       w->shown, set, set);
        free(set);
    }
    return rc;
}

int wpk_shard_of_set(const wpack_archive *ar, const char *path, char **manifest)
{
    *manifest = NULL;
    wpack_meta m;
    /* a shard names its manifest by file name, in its own directory */
    if (!ar || !path || wpack_meta_find(ar, "wpack.manifest", &m) != WPACK_OK ||
        m.type != WPACK_META_STRING || !m.count || memchr(m.str, '/', (size_t)m.count))
        return WPACK_OK;
    struct stat st; /* through a link: the shard's own directory */
    char *real = lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(path, NULL) : NULL;
    const char *at = real ? real : path;
    char *p = wpk_path_beside(at, m.str, (size_t)m.count);
    if (!p) {
        free(real);
        return WPACK_E_NOMEM;
    }
    size_t hit;
    int rc = wpack_replaced_among(p, &at, 1, &hit);
    free(real);
    if (rc == WPACK_OK && hit == 0)
        *manifest = p;
    else
        free(p);
    return rc == WPACK_E_NOMEM ? rc : WPACK_OK;
}
