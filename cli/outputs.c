/*
 * outputs.c - the same-file guard: before a command reads anything, refuse
 * an output that is the same file as one of its inputs, or two outputs
 * that are the same file (issue 13). The rule is the library's
 * (format/same_files.c, which wpack_resolve_file and
 * wpack_externalize_file apply too): this lists the command's files and
 * prints its refusal.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "path_lock.h"
#include "shard_of.h"
#include "same_files.h"

static void add(cli_files *f, const char *path, int kind)
{
    if (!path || f->nomem)
        return;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct wpk_file_ref *v = realloc(f->v, cap * sizeof *v);
        if (!v) {
            f->nomem = 1;
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    char *copy = strdup(path);
    if (!copy) {
        f->nomem = 1;
        return;
    }
    f->v[f->n++] = (struct wpk_file_ref){.path = copy, .kind = kind};
}

void cli_files_in(cli_files *f, const char *path)
{
    add(f, path, WPK_FILE_IN);
}

void cli_files_out(cli_files *f, const char *path)
{
    add(f, path, WPK_FILE_OUT);
}

void cli_files_out_archive(cli_files *f, const char *path)
{
    add(f, path, WPK_FILE_OUT_ARCHIVE);
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
        free((char *)f->v[i].path);
    free(f->v);
    memset(f, 0, sizeof *f);
}

int cli_files_check(const char *cmd, cli_files *f)
{
    char err[8192];
    int rc = f->nomem ? WPACK_E_NOMEM
                      : wpk_files_check(f->v, f->n, f->outputs_distinct, f->hint, err, sizeof err);
    if (rc == WPACK_E_NOMEM)
        cli_error("%s: out of memory [%s]", cmd, wpack_error_name(WPACK_E_NOMEM));
    else if (rc)
        cli_error("%s: %s [%s]", cmd, err, wpack_error_name(rc));
    return rc == WPACK_OK;
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

/* Take the updaters' lock (format/path_lock.c) on the file at path, so
 * that no `wpack update` commits into it between our read and our rename
 * (its change would be lost with the replaced file): the fd, or -1
 * (printed). */
static int lock_for_rewrite(const char *cmd, const char *path)
{
    char msg[512];
    int fd, rc = wpk_lock_path(path, O_RDONLY, &fd, msg, sizeof msg);
    if (rc)
        cli_error("%s: cannot lock for --in-place: %s [%s]", cmd, msg, wpack_error_name(rc));
    return rc ? -1 : fd;
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
    /* !ar: cli_open_checked said why */
    char *set = NULL;
    if (ar && wpk_shard_of_set(ar, in, &set) != WPACK_OK)
        cli_error("%s: out of memory [%s]", cmd, wpack_error_name(WPACK_E_NOMEM));
    else if (ar && wpack_shard_count(ar))
        cli_error("%s: %s is a sharded set: --in-place rewrites single-file archives only "
                  "(use -o) [%s]",
                  cmd, in, wpack_error_name(WPACK_E_UNSUPPORTED));
    else if (set) /* its manifest records its length and index XXH3 */
        cli_error("%s: %s is a shard of the set at %s: rewritten in place it would make the "
                  "whole set fail to open; write a separate archive with -o [%s]",
                  cmd, in, set, wpack_error_name(WPACK_E_SHARD));
    else if (ar && !*target)
        cli_error("%s: %s: cannot resolve its path: %s [%s]", cmd, in, strerror(resolve_errno),
                  wpack_error_name(WPACK_E_IO));
    else if (ar)
        return ar;
    free(set);
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
