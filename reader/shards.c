/* shards.c - sharded sets: a manifest archive whose external entries point
 * into shard archives (spec: Sharded sets). The shards are opened and
 * validated with the manifest, so after open every view is safe. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "reader.h"

void wpk_close_shards(wpack_archive *ar)
{
    for (uint32_t s = 0; s < ar->nshards; s++) {
        wpack_close(ar->shards[s]);
        free(ar->shard_paths[s]);
    }
    free(ar->shards);
    free(ar->shard_paths);
    ar->shards = NULL;
    ar->shard_paths = NULL;
    ar->nshards = 0;
}

/* An i64/string array metadata value of exactly n elements, or fail. */
static int shard_array(wpack_archive *ar, const char *key, int elem, uint64_t *n, wpack_meta *m)
{
    if (wpack_meta_find(ar, key, m) != WPACK_OK || m->type != WPACK_META_ARRAY || m->elem_type != elem)
        return wpk_fail(ar, WPACK_E_SHARD, "sharded set: metadata '%s' missing or not %s array", key,
                        elem == WPACK_META_STRING ? "a string" : "an i64");
    if (*n == UINT64_MAX)
        *n = m->count;
    if (m->count != *n || !*n || *n > WPK_MAX_SHARDS)
        return wpk_fail(ar, WPACK_E_SHARD, "sharded set: '%s' has %llu elements, want %llu (1..%u)", key,
                        (unsigned long long)m->count, (unsigned long long)*n, WPK_MAX_SHARDS);
    return WPACK_OK;
}

/* Shard names are file names next to the manifest: no directories, no
 * "..", and names as the format takes them (no control bytes: the messages
 * and wpack_shard_at() hand them on as they are). */
static int shard_name_ok(wpack_archive *ar, const char *name)
{
    size_t n = strlen(name);
    if (wpk_shard_name_problem(name, n)) {
        char q[256];
        wpk_quote(q, sizeof q, name, n);
        return wpk_fail(ar, WPACK_E_SHARD, "sharded set: shard name '%s' is not a plain file name", q);
    }
    return WPACK_OK;
}

static int shard_path(wpack_archive *ar, const char *dir, const char *name, char **out)
{
    if (!(*out = wpk_path_beside(dir, name, strlen(name))))
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory");
    return WPACK_OK;
}

/* 1: DIR NAME exists (any type, links not followed), 0: not, -1: out of memory. */
static int present_in(const char *dir, const char *name)
{
    char *p = wpk_path_beside(dir, name, strlen(name));
    struct stat st;
    int r = p ? lstat(p, &st) == 0 : -1;
    free(p);
    return r;
}

/* The set's directory ("" or ending in '/', heap; NULL: out of memory):
 * the manifest path's. A manifest opened through a symlink whose directory
 * has no file named like the first shard is read beside the file the link
 * leads to: `create -o link` writes the set there (it replaces the link's
 * target), and the set read through the same link must open. A snapshot of
 * links (a link per file, the shards' links beside the manifest's) keeps
 * the link's directory. */
static char *set_dir(const char *path, const char *first)
{
    char *dir = strndup(path, wpk_dir_len(path));
    struct stat st;
    if (!dir || lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || strchr(first, '/') ||
        !strcmp(first, ".") || !strcmp(first, "..") || present_in(dir, first) != 0)
        return dir;
    char *real = realpath(path, NULL);
    char *rdir = real ? strndup(real, wpk_dir_len(real)) : NULL;
    free(real);
    if (rdir && present_in(rdir, first) == 1) {
        free(dir);
        return rdir;
    }
    free(rdir);
    return dir;
}

typedef struct {
    const char *name;
    uint64_t dev, ino;
    uint32_t slot;
} shard_key;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const shard_key *)a)->name, ((const shard_key *)b)->name);
}

static int by_file(const void *a, const void *b)
{
    const shard_key *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Each shard is a distinct file (spec: Sharded sets): a set naming one file
 * in many slots would map it once per slot (65,536 maps of one small file
 * exhaust vm.max_map_count and memory), so it is refused before anything is
 * opened, by name and then by device and inode (hard links, and symlinks
 * when they are followed). */
static int distinct_shards(wpack_archive *ar, int dirfd, const wpack_meta *names, uint64_t n)
{
    shard_key *k = calloc((size_t)n, sizeof *k);
    if (!k)
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory for %llu shards", (unsigned long long)n);
    int rc = WPACK_OK;
    int nofollow = !(ar->flags & WPACK_OPEN_FOLLOW_LINKS);
    for (uint64_t s = 0; s < n && rc == WPACK_OK; s++) {
        wpack_meta e;
        wpack_meta_elem(ar, names, s, &e);
        k[s].name = e.str;
        k[s].slot = (uint32_t)s;
        struct stat st;
        /* A name that cannot be stat'ed fails at its open, with the reason. */
        if ((rc = shard_name_ok(ar, e.str)) == WPACK_OK && dirfd >= 0 &&
            fstatat(dirfd, e.str, &st, nofollow ? AT_SYMLINK_NOFOLLOW : 0) == 0 &&
            S_ISREG(st.st_mode)) {
            k[s].dev = (uint64_t)st.st_dev;
            k[s].ino = (uint64_t)st.st_ino;
        }
    }
    if (rc == WPACK_OK) {
        qsort(k, (size_t)n, sizeof *k, by_name);
        for (uint64_t s = 1; s < n && rc == WPACK_OK; s++)
            if (strcmp(k[s - 1].name, k[s].name) == 0)
                rc = wpk_fail(ar, WPACK_E_SHARD, "sharded set: shard '%s' is listed twice (slots %u and %u)",
                              k[s].name, k[s - 1].slot, k[s].slot);
    }
    if (rc == WPACK_OK) {
        qsort(k, (size_t)n, sizeof *k, by_file);
        for (uint64_t s = 1; s < n && rc == WPACK_OK; s++)
            if (k[s].ino && k[s - 1].dev == k[s].dev && k[s - 1].ino == k[s].ino)
                rc = wpk_fail(ar, WPACK_E_SHARD,
                              "sharded set: shards '%s' and '%s' are the same file (links to one file)",
                              k[s - 1].name, k[s].name);
    }
    free(k);
    return rc;
}

/* External entry i must name a like data entry of its shard. */
static int check_external(wpack_archive *ar, uint64_t i)
{
    const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
    wpack_tensor t, st;
    wpk_fill_tensor(ar, i, &t);
    uint32_t s = wpk_ld32(r + WPK_E_TARGET_OFF);
    char q[256];
    wpk_quote(q, sizeof q, t.name, t.name_len);
    if (s >= ar->nshards)
        return wpk_fail(ar, WPACK_E_SHARD, "tensor '%s': shard %u of %u", q, s, ar->nshards);
    if (wpack_find(ar->shards[s], t.name, &st) != WPACK_OK || st.kind != WPACK_KIND_DATA)
        return wpk_fail(ar, WPACK_E_SHARD, "tensor '%s': not a data entry of shard %s", q,
                        ar->shard_paths[s]);
    int same = st.dtype == t.dtype && st.rank == t.rank && st.codec == WPACK_CODEC_NONE &&
               st.offset == t.offset && st.stored_length == t.stored_length &&
               st.checksum == t.checksum && memcmp(st.dims, t.dims, sizeof t.dims) == 0;
    if (!same)
        return wpk_fail(ar, WPACK_E_SHARD, "tensor '%s': manifest and shard %s disagree on its "
                                           "dtype, shape, place or checksum", q, ar->shard_paths[s]);
    return WPACK_OK;
}

/* Set while a shard is being opened: a shard that is itself a manifest is
 * refused before it opens shards of its own, or a manifest naming itself
 * (or two naming each other) would recurse until the stack overflows. */
static _Thread_local int opening_shard;

int wpk_check_shards(wpack_archive *ar)
{
    if (!(ar->info.required_features & WPK_FEATURE_SHARDS))
        return WPACK_OK;
    if (opening_shard)
        return wpk_fail(ar, WPACK_E_SHARD, "shard %s is itself a sharded set", ar->path);
    /* A manifest read through a caller's source opens its shards through it. */
    int from_source = ar->src.read || ar->src.base;
    if (from_source && !ar->src.open_shard)
        return wpk_fail(ar, WPACK_E_SHARD, "a sharded set's manifest read through a source needs "
                                           "the source's open_shard call");
    if (!ar->path)
        return wpk_fail(ar, WPACK_E_SHARD,
                        "a sharded set's manifest must be opened with wpack_open_file (its shards "
                        "are files beside it)");
    wpack_meta names, lengths, sums;
    uint64_t n = UINT64_MAX;
    int rc = shard_array(ar, "wpack.shards", WPACK_META_STRING, &n, &names);
    if (rc == WPACK_OK)
        rc = shard_array(ar, "wpack.shard_lengths", WPACK_META_I64, &n, &lengths);
    if (rc == WPACK_OK)
        rc = shard_array(ar, "wpack.shard_index_xxh3", WPACK_META_I64, &n, &sums);
    if (rc)
        return rc;
    /* Shard names are resolved in the manifest's directory, without
     * following links unless the caller asked (WPACK_OPEN_FOLLOW_LINKS). */
    wpack_meta first = {0};
    if (n)
        wpack_meta_elem(ar, &names, 0, &first);
    char *dir = from_source ? strndup(ar->path, wpk_dir_len(ar->path))
                            : set_dir(ar->path, first.str ? first.str : "");
    if (!dir)
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory");
    int dirfd = from_source ? -1 : open(*dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0 && !from_source) {
        rc = wpk_fail(ar, WPACK_E_SHARD, "sharded set: cannot open the directory '%s': %s",
                      *dir ? dir : ".", strerror(errno));
        free(dir);
        return rc;
    }
    rc = distinct_shards(ar, dirfd, &names, n);
    if (rc == WPACK_OK) {
        ar->shards = calloc((size_t)n, sizeof *ar->shards);
        ar->shard_paths = calloc((size_t)n, sizeof *ar->shard_paths);
        if (!ar->shards || !ar->shard_paths)
            rc = wpk_fail(ar, WPACK_E_NOMEM, "out of memory for %llu shards", (unsigned long long)n);
    }
    unsigned input_flags = ar->flags & WPACK_OPEN_FOLLOW_LINKS ? 0 : WPK_INPUT_NOFOLLOW;
    /* A shard checks what it hands out as the set does (reads through the
     * set ask for the check per call too, so it is made once either way). */
    unsigned shard_flags = ar->flags & WPACK_OPEN_VERIFY_READS ? 0 : WPACK_OPEN_NO_VERIFY_READS;
    for (uint64_t s = 0; s < n && rc == WPACK_OK; s++) {
        wpack_meta e, len, sum;
        wpack_meta_elem(ar, &names, s, &e);
        wpack_meta_elem(ar, &lengths, s, &len);
        wpack_meta_elem(ar, &sums, s, &sum);
        char *path;
        if ((rc = shard_path(ar, dir, e.str, &path)))
            break;
        ar->shard_paths[s] = path;
        ar->nshards = (uint32_t)s + 1;
        wpack_archive *sh;
        opening_shard = 1;
        int src = from_source ? ar->src.open_shard(ar->src.user, e.str, shard_flags, &sh)
                              : wpk_open_at(&sh, dirfd, e.str, path, shard_flags, input_flags);
        opening_shard = 0;
        ar->shards[s] = sh;
        /* Through a source the shard is named as the source named it (a
         * URL's query and fragment follow the path: the manifest's name
         * up to its last '/' and the shard's is no name of it) */
        if (from_source && sh && sh->path) {
            if (!(path = strdup(sh->path)))
                rc = wpk_fail(ar, WPACK_E_NOMEM, "out of memory");
            else
                free(ar->shard_paths[s]), ar->shard_paths[s] = path;
            if (rc)
                break;
        }
        if (src != WPACK_OK) {
            /* A FIFO or a link keeps its own code: what to change is the file. */
            int code = src == WPACK_E_FILE_TYPE ? src : WPACK_E_SHARD;
            rc = wpk_fail(ar, code, "shard %llu: %s", (unsigned long long)s,
                          sh ? wpack_errmsg(sh) : "out of memory");
        } else if (sh->info.file_length != (uint64_t)len.i64 ||
                   sh->info.index_checksum != (uint64_t)sum.i64)
            rc = wpk_fail(ar, WPACK_E_SHARD,
                          "shard %s changed: %llu bytes, index xxh3 %016llx; the manifest says "
                          "%llu bytes, %016llx", path, (unsigned long long)sh->info.file_length,
                          (unsigned long long)sh->info.index_checksum,
                          (unsigned long long)len.i64, (unsigned long long)sum.i64);
    }
    if (dirfd >= 0)
        close(dirfd);
    free(dir);
    if (rc)
        return rc;
    for (uint64_t i = 0; i < ar->info.entry_count; i++) {
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, i, WPK_ENTRY_SIZE);
        if (r[WPK_E_KIND_OFF] == WPACK_KIND_EXTERNAL && (rc = check_external(ar, i)))
            return rc;
    }
    return WPACK_OK;
}

uint32_t wpack_shard_count(const wpack_archive *ar)
{
    return ar->nshards;
}

int wpack_shard_at(const wpack_archive *ar, uint32_t s, const char **path,
                   const wpack_archive **shard)
{
    if (s >= ar->nshards)
        return WPACK_E_NOT_FOUND;
    *path = ar->shard_paths[s];
    *shard = ar->shards[s];
    return WPACK_OK;
}

int wpack_file_identity(const wpack_archive *ar, const char **path, uint64_t *dev, uint64_t *ino)
{
    if (!ar || !dev || !ino)
        return WPACK_E_INVALID_ARGUMENT;
    if (!ar->file_ino || !ar->path) /* a buffer or a source */
        return WPACK_E_NOT_FOUND;
    if (path)
        *path = ar->path;
    *dev = ar->file_dev;
    *ino = ar->file_ino;
    return WPACK_OK;
}
