/*
 * outputs.c - the same-file guard: before a command reads anything, refuse
 * an output that is the same file as one of its inputs, or two outputs
 * that are the same file (issue 13). Files are compared as the file system
 * sees them (device and inode: symlinks, hard links, "./x" and "x" are all
 * caught); outputs that do not exist yet by their directory (device and
 * inode: bind mounts too) and file name.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

struct cli_file {
    char *path;
    int output;
    int archive; /* an archive output: the shards of a set it replaces are removed */
    int exists;      /* st is valid (set by cli_files_check) */
    struct stat st;
};

static void add(cli_files *f, const char *path, int output, int archive)
{
    if (!path || f->nomem)
        return;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct cli_file *v = realloc(f->v, cap * sizeof *v);
        if (!v) {
            f->nomem = 1;
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n] = (struct cli_file){strdup(path), output, archive, 0, {0}};
    if (!f->v[f->n].path)
        f->nomem = 1;
    else
        f->n++;
}

void cli_files_in(cli_files *f, const char *path)
{
    add(f, path, 0, 0);
}

void cli_files_out(cli_files *f, const char *path)
{
    add(f, path, 1, 0);
}

void cli_files_out_archive(cli_files *f, const char *path)
{
    add(f, path, 1, 1);
}

void cli_files_archive_shards(cli_files *f, const wpack_archive *ar)
{
    for (uint32_t s = 0; ar && s < wpack_shard_count(ar); s++) {
        const char *path;
        const wpack_archive *shard;
        if (wpack_shard_at(ar, s, &path, &shard) == WPACK_OK)
            cli_files_in(f, path);
    }
}

void cli_files_free(cli_files *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].path);
    free(f->v);
    memset(f, 0, sizeof *f);
}

/* path's directory (stat: symlinks, "." and "..", bind mounts and other
 * spellings of one directory are one device and inode) into *dir; its last
 * component is returned. NULL when the directory cannot be looked at. */
static const char *where(const char *path, struct stat *dir)
{
    const char *slash = strrchr(path, '/');
    char d[PATH_MAX];
    if (!slash)
        strcpy(d, ".");
    else if (slash == path)
        strcpy(d, "/");
    else if ((size_t)(slash - path) < sizeof d)
        memcpy(d, path, (size_t)(slash - path)), d[slash - path] = 0;
    else
        return NULL;
    return stat(d, dir) == 0 ? (slash ? slash + 1 : path) : NULL;
}

/* Would files not there yet at a and b be one file: the same name in the
 * same directory, however each is spelled? */
static int same_place(const char *a, const char *b)
{
    struct stat da, db;
    const char *ba = where(a, &da), *bb = where(b, &db);
    return ba && bb && da.st_dev == db.st_dev && da.st_ino == db.st_ino && strcmp(ba, bb) == 0;
}

/* The index in f->v of the first existing input that an archive written
 * at out would remove (a shard of the set whose manifest is at out:
 * wpack_replaced_among), f->n for none, SIZE_MAX when out of memory. */
static size_t replaced_input(const cli_files *f, const char *out)
{
    const char **in = calloc(f->n ? f->n : 1, sizeof *in);
    size_t hit = SIZE_MAX;
    if (!in)
        return SIZE_MAX;
    for (size_t j = 0; j < f->n; j++)
        in[j] = !f->v[j].output && f->v[j].exists ? f->v[j].path : NULL;
    if (wpack_replaced_among(out, in, f->n, &hit) != WPACK_OK)
        hit = SIZE_MAX;
    free(in);
    return hit;
}

int cli_files_check(const char *cmd, cli_files *f)
{
    if (f->nomem) {
        cli_error("%s: out of memory [%s]", cmd, wpack_error_name(WPACK_E_NOMEM));
        return 0;
    }
    /* Each output against each input, and against the later outputs unless
     * they are known distinct (extract's DIR/NAME.npy): not every pair of
     * files, which for 200k outputs took minutes before anything was written. */
    size_t *ins = calloc(f->n ? f->n : 1, sizeof *ins), nin = 0;
    if (!ins) {
        cli_error("%s: out of memory [%s]", cmd, wpack_error_name(WPACK_E_NOMEM));
        return 0;
    }
    for (size_t i = 0; i < f->n; i++) { /* each file looked at once (symlinks followed) */
        f->v[i].exists = stat(f->v[i].path, &f->v[i].st) == 0;
        if (!f->v[i].output)
            ins[nin++] = i;
    }
    int ok = 1;
    for (size_t i = 0; i < f->n && ok; i++) {
        const struct cli_file *o = &f->v[i];
        if (!o->output)
            continue;
        size_t replaced = o->archive && o->exists ? replaced_input(f, o->path) : f->n;
        if (replaced == SIZE_MAX) {
            cli_error("%s: out of memory [%s]", cmd, wpack_error_name(WPACK_E_NOMEM));
            ok = 0;
            break;
        }
        size_t nlater = f->outputs_distinct ? 0 : f->n - i - 1;
        for (size_t k = 0; k < nin + nlater && ok; k++) {
            size_t j = k < nin ? ins[k] : i + 1 + (k - nin);
            const struct cli_file *x = &f->v[j];
            if (k >= nin && !x->output)
                continue; /* an input, already seen */
            int same;
            if (!x->output) { /* an input exists: only an existing output can be it */
                same = o->exists && x->exists && x->st.st_dev == o->st.st_dev &&
                       x->st.st_ino == o->st.st_ino;
                if (!same && j == replaced) {
                    cli_error("%s: input '%s' is a shard of the set at output '%s', which the new "
                              "archive replaces and removes: nothing was written [%s]",
                              cmd, x->path, o->path, wpack_error_name(WPACK_E_SAME_FILE));
                    same = -1;
                }
            } else if (o->exists && x->exists) {
                same = o->st.st_dev == x->st.st_dev && o->st.st_ino == x->st.st_ino;
            } else {
                same = same_place(o->path, x->path);
            }
            if (same > 0) {
                if (x->output)
                    cli_error("%s: outputs '%s' and '%s' are the same file: nothing was written [%s]",
                              cmd, x->path, o->path, wpack_error_name(WPACK_E_SAME_FILE));
                else
                    cli_error("%s: output '%s' is the same file as input '%s'%s%s: nothing was "
                              "written [%s]",
                              cmd, o->path, x->path, f->hint ? "; " : "", f->hint ? f->hint : "",
                              wpack_error_name(WPACK_E_SAME_FILE));
            }
            if (same)
                ok = 0;
        }
    }
    free(ins);
    return ok;
}

wpack_archive *cli_open_checked(const char *cmd, const char *path, cli_files *g, int verify)
{
    cli_files_in(g, path);
    wpack_archive *ar;
    if (!cli_files_check(cmd, g) || !(ar = cli_open_reads(path, verify)))
        return NULL;
    if (!wpack_shard_count(ar))
        return ar;
    cli_files_archive_shards(g, ar);
    if (cli_files_check(cmd, g))
        return ar;
    wpack_close(ar);
    return NULL;
}

/* Take the updaters' lock (packer/update.c) on the file at path, so that no
 * `wpack update` commits into it between our read and our rename (its
 * change would be lost with the replaced file): the fd, or -1 (printed).
 * A file replaced while we waited is not the one at path any more: lock
 * the new one (bounded). */
static int lock_for_rewrite(const char *cmd, const char *path)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat a, b;
        if (fd < 0 || fstat(fd, &a) != 0 || flock(fd, LOCK_EX) != 0) {
            cli_error("%s: %s: cannot lock it for --in-place: %s [%s]", cmd, path, strerror(errno),
                      wpack_error_name(WPACK_E_IO));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        if (stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return fd;
        close(fd);
    }
    cli_error("%s: %s: replaced by other files while waiting for its lock [%s]", cmd, path,
              wpack_error_name(WPACK_E_IO));
    return -1;
}

wpack_archive *cli_open_rewrite(const char *cmd, const char *in, const char *out, int in_place,
                                int verify, char **target, int *lock)
{
    cli_files g = {.hint = "to rewrite ARCHIVE itself use --in-place"};
    *target = NULL;
    *lock = -1;
    if (cli_is_url(in)) { /* rewriting reads the input as a local file */
        cli_error("%s: %s: a URL cannot be rewritten; extract or export it, or download it first "
                  "[%s]", cmd, in, wpack_error_name(WPACK_E_UNSUPPORTED));
        return NULL;
    }
    if (!in_place)
        cli_files_out_archive(&g, out);
    else if ((*target = realpath(in, NULL)) && (*lock = lock_for_rewrite(cmd, *target)) < 0) {
        free(*target);
        return NULL;
    }
    int resolve_errno = errno;
    /* in place: opened under the lock, so the archive read is the locked file */
    wpack_archive *ar = cli_open_checked(cmd, in, &g, verify);
    cli_files_free(&g);
    if (!in_place)
        return ar;
    if (!ar) {
    } else if (wpack_shard_count(ar)) {
        cli_error("%s: %s is a sharded set: --in-place rewrites single-file archives only "
                  "(use -o) [%s]",
                  cmd, in, wpack_error_name(WPACK_E_UNSUPPORTED));
    } else if (!*target) {
        cli_error("%s: %s: cannot resolve its path: %s [%s]", cmd, in, strerror(resolve_errno),
                  wpack_error_name(WPACK_E_IO));
    } else {
        return ar;
    }
    wpack_close(ar);
    cli_rewrite_unlock(lock);
    free(*target);
    *target = NULL;
    return NULL;
}

void cli_rewrite_unlock(int *lock)
{
    if (*lock >= 0)
        close(*lock);
    *lock = -1;
}
