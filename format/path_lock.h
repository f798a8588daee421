/* path_lock.h - the updaters' lock: an exclusive flock on the file at a
 * path, taken by wpack update (packer/update.c) and by convert / cast
 * --in-place (cli/outputs.c) from their read to their commit, so neither
 * loses the other's change. */
#ifndef WPACK_FORMAT_PATH_LOCK_H
#define WPACK_FORMAT_PATH_LOCK_H

#include <stddef.h>

/* Open path (oflags | O_CLOEXEC | O_NONBLOCK: a FIFO never blocks) and
 * take the lock, waiting for its holder. The lock is on the inode: a file
 * replaced while we waited is let go and the one now at path locked, at
 * most 16 times. WPACK_OK with *fd set; WPACK_E_FILE_TYPE (not a regular
 * file) or WPACK_E_IO, with err naming path and why. */
int wpk_lock_path(const char *path, int oflags, int *fd, char *err, size_t errlen);

#endif
