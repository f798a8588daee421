/*
 * output_commit.c - put externalize's two outputs in place together: the
 * new archive and the MLIR that names it by its index checksum. Each is
 * complete and fsynced in its temporary file before either is renamed; the
 * archive goes first (a reader of the new MLIR then finds its archive),
 * then the MLIR. If the MLIR's rename fails after the archive's succeeded,
 * the file that was at the archive's path before is put back from a hard
 * link taken beforehand (or the new archive removed if there was none), so
 * that on a failure both paths keep their previous content. A crash
 * between the two renames can still leave the new archive beside the old
 * MLIR (the old archive then sits under a temporary name that the next
 * writer of that path sweeps).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "internal.h"
#include "resolve_int.h"

/* Is the file at path the one with this device and inode? */
static int is_file(const char *path, const struct stat *f)
{
    struct stat st;
    return lstat(path, &st) == 0 && st.st_dev == f->st_dev && st.st_ino == f->st_ino;
}

/* The archive's commit (or the MLIR's) failed after the new archive took
 * its path: the old file back, or none. 0 done; -1 failed (appended to
 * err: the old archive then stays at `old`). */
static int restore_archive(const char *path, const char *old, int had_old, char *err,
                           size_t errlen)
{
    if (had_old ? rename(old, path) == 0 : unlink(path) == 0)
        return 0;
    size_t n = strlen(err);
    wpk_fmt(err + n, errlen - n, "; %s could not be put back (%s)%s%s", path, strerror(errno),
            had_old ? ": the old archive is at " : "", had_old ? old : "");
    return -1;
}

int wpk_commit_outputs(wpack_writer *w, const char *archive_path, wpk_atomic *out,
                       const char *out_path, char *err, size_t errlen)
{
    wpk_atomic bak = {NULL, NULL, -1};
    char *old = NULL, *target = NULL;
    int had_old = 0, keep_old = 0, rc;
    struct stat new_ar, new_out;
    const char *prepared = wpack_writer_prepared_path(w);
    /* through a symlink the writer replaces the link's target: keep that
     * (a copy: the commit frees the writer) */
    target = strdup(wpack_writer_target_path(w) ? wpack_writer_target_path(w) : archive_path);
    if (!target) {
        wpk_fmt(err, errlen, "out of memory");
        rc = WPACK_E_NOMEM;
        goto fail;
    }
    archive_path = target;
    if (!prepared || stat(prepared, &new_ar) != 0 || fstat(out->fd, &new_out) != 0) {
        wpk_fmt(err, errlen, "%s: the new archive is not ready: %s", archive_path,
                prepared ? strerror(errno) : wpack_writer_errmsg(w));
        rc = WPACK_E_STATE;
        goto fail;
    }
    if ((rc = wpk_atomic_sync(out, err, errlen)))
        goto fail;
    /* a hard link to the old archive under a name of a live temporary of
     * ours (bak, locked: no sweep removes it while we run) */
    if ((rc = wpk_atomic_open(&bak, archive_path, WPK_ATOMIC_NO_SWEEP, err, errlen)))
        goto fail;
    size_t bl = strlen(bak.tmp);
    old = malloc(bl + 5);
    if (!old) {
        wpk_fmt(err, errlen, "out of memory");
        rc = WPACK_E_NOMEM;
        goto fail;
    }
    memcpy(old, bak.tmp, bl);
    memcpy(old + bl, ".old", 5);
    if (link(archive_path, old) == 0) {
        had_old = 1;
    } else if (errno != ENOENT) {
        wpk_fmt(err, errlen, "%s: cannot keep the old archive while the outputs go in place "
                "(hard link %s: %s); nothing was changed", archive_path, old, strerror(errno));
        rc = WPACK_E_IO;
        goto fail;
    }
    rc = wpack_writer_commit(w, err, errlen);
    w = NULL;
    if (rc) {
        if (is_file(archive_path, &new_ar)) /* renamed, then the directory's fsync failed */
            keep_old = restore_archive(archive_path, old, had_old, err, errlen) != 0;
        goto fail;
    }
    /* the MLIR never over the new archive: a file system that folds names
     * (case-insensitive) can take two different paths for one file */
    wpk_atomic_run run = {0};
    rc = wpk_atomic_run_add(&run, (unsigned long long)new_ar.st_dev,
                            (unsigned long long)new_ar.st_ino, 0);
    if (rc == WPACK_OK) {
        wpk_atomic_join(out, &run, 1);
        rc = wpk_atomic_commit(out, err, errlen);
    } else {
        wpk_fmt(err, errlen, "out of memory");
    }
    wpk_atomic_run_free(&run);
    if (rc == WPACK_E_SAME_FILE)
        wpk_fmt(err, errlen, "%s and %s are one file on this file system (it takes both names "
                "for one: it ignores case or normalizes names): nothing written, both paths as "
                "before", out_path, archive_path);
    if (rc && !is_file(out_path, &new_out))
        keep_old = restore_archive(archive_path, old, had_old, err, errlen) != 0;
    /* else the MLIR is in place too (its directory's fsync failed): both
     * outputs are the new pair, and the error says what failed */
fail:
    if (w)
        wpack_writer_abort(w);
    wpk_atomic_abort(out);
    if (had_old && !keep_old)
        unlink(old); /* gone already when it was put back */
    free(old);
    free(target);
    wpk_atomic_abort(&bak);
    return rc;
}
