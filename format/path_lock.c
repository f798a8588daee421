/* path_lock.c - the updaters' lock (path_lock.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "path_lock.h"

int wpk_lock_path(const char *path, int oflags, int *fd, char *err, size_t errlen)
{
    *fd = -1;
    for (int attempt = 0; attempt < 16; attempt++) {
        int f = open(path, oflags | O_CLOEXEC | O_NONBLOCK);
        if (f < 0) {
            wpk_fmt(err, errlen, "%s: %s", path, strerror(errno));
            return WPACK_E_IO;
        }
        struct stat a, b;
        if (fstat(f, &a) != 0 || !S_ISREG(a.st_mode)) {
            wpk_fmt(err, errlen, "%s: not a regular file", path);
            close(f);
            return WPACK_E_FILE_TYPE;
        }
        if (flock(f, LOCK_EX) != 0) {
            wpk_fmt(err, errlen, "%s: lock: %s", path, strerror(errno));
            close(f);
            return WPACK_E_IO;
        }
        if (stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *fd = f;
            return WPACK_OK;
        }
        close(f); /* replaced while we waited: lock the file now at path */
    }
    wpk_fmt(err, errlen, "%s: replaced by other files while waiting for its lock", path);
    return WPACK_E_IO;
}
