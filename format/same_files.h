/*
 * same_files.h - the same-file rule (README, "What is at OUT"): before a
 * call reads or writes anything, refuse an output that is the same file as
 * one of its inputs, or two outputs that are the same file. One
 * implementation for the library's file-to-file calls (resolve,
 * externalize) and the CLI's guard (cli/outputs.c).
 *
 * Files are compared as the file system sees them: device and inode
 * (stat, symlinks followed: hard links, symlinks, "./x" and "x",
 * /proc/self/fd/N all caught). Two outputs of which one does not exist yet
 * are compared by their directory (device and inode: bind mounts too) and
 * file name. An output of kind WPK_FILE_OUT_ARCHIVE is a wpack archive: an
 * input that is a shard of the set whose manifest is at that path now
 * (removed once the new archive is in place, wpack_writer_open) is refused
 * too.
 */
#ifndef WPACK_FORMAT_SAME_FILES_H
#define WPACK_FORMAT_SAME_FILES_H

#include <stddef.h>
#include <sys/stat.h>

#define WPK_FILE_IN 0
#define WPK_FILE_OUT 1
#define WPK_FILE_OUT_ARCHIVE 2

typedef struct wpk_file_ref {
    const char *path; /* as the caller named it (messages) */
    int kind;         /* WPK_FILE_* */
    int known;        /* the caller set exists and st (an open file's identity) */
    int exists;       /* st is valid: set by wpk_files_check unless known */
    struct stat st;
} wpk_file_ref;

/* Check v[0..n): WPACK_OK; WPACK_E_SAME_FILE with err naming both paths
 * ("output 'O' is the same file as input 'I'[; hint]: nothing was
 * written", "outputs 'A' and 'B' are the same file: ...", or "input 'I' is
 * a shard of the set at output 'O', which the new archive replaces and
 * removes: ..."), without the code's name; WPACK_E_NOMEM. With
 * outputs_distinct the caller knows its outputs differ: only each output
 * against each input is checked (not every pair: 200k outputs). hint may
 * be NULL. */
int wpk_files_check(wpk_file_ref *v, size_t n, int outputs_distinct, const char *hint, char *err,
                    size_t errlen);

#endif
