/*
 * write_all.c - write a whole buffer to a file descriptor.
 *
 * write(2) may write less than asked (signals, pipes, a full disk reached
 * part way), so every writer of the project loops; this is the one loop.
 */
#include <errno.h>
#include <unistd.h>

#include "internal.h"

int wpk_write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno ? errno : EIO;
        if (k == 0) /* no error but no progress: report it as a full disk */
            return ENOSPC;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}
