/* fileio.c - mapped input and buffered fd output for the resolver's *_file
 * calls (their output files go through format/atomic_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "resolve_int.h"

int wpk_rsv_map_file(const char *path, const char **buf, size_t *len, int *keep_fd, char *err,
                     size_t errlen)
{
    *buf = NULL;
    *len = 0;
    if (keep_fd)
        *keep_fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        wpk_fmt(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return WPACK_E_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        wpk_fmt(err, errlen, "%s: not a regular file", path);
        close(fd);
        return WPACK_E_IO;
    }
    if (st.st_size == 0) {
        close(fd);
        *buf = "";
        return 0;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        wpk_fmt(err, errlen, "%s: too large to map", path);
        close(fd);
        return WPACK_E_IO;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        wpk_fmt(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
        return WPACK_E_IO;
    }
    if (keep_fd)
        *keep_fd = fd;
    else
        close(fd);
    madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
    *buf = p;
    *len = (size_t)st.st_size;
    return 0;
}

void wpk_rsv_unmap_file(const char *buf, size_t len)
{
    if (buf && len)
        munmap((void *)buf, len);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int wpk_fd_sink_flush(wpk_fd_sink *s)
{
    if (!s->failed && s->used && write_all(s->fd, s->buf, s->used))
        s->failed = 1;
    s->used = 0;
    return s->failed;
}

int wpk_fd_sink_copy(void *user, size_t off, size_t n)
{
    wpk_fd_sink *s = user;
    if (s->in_fd < 0 || wpk_fd_sink_flush(s))
        return 1;
    loff_t in_off = (loff_t)off;
    size_t done = 0;
    while (done < n) {
        ssize_t c = copy_file_range(s->in_fd, &in_off, s->fd, NULL, n - done, 0);
        if (c <= 0) {
            if (c < 0 && errno == EINTR)
                continue;
            if (done == 0)
                return 1; /* not supported here: the caller writes instead */
            /* part copied: write the rest from the mapping is the caller's job,
             * so report it through the sink as a failure */
            s->failed = 1;
            return -1;
        }
        done += (size_t)c;
    }
    return 0;
}

int wpk_fd_sink_write(void *user, const void *data, size_t n)
{
    wpk_fd_sink *s = user;
    if (s->failed)
        return 1;
    /* large pieces (the emitter's 256 KiB stages) go straight to the file:
     * copying them into the buffer first would only add a pass */
    if (n >= sizeof s->buf || (s->used == 0 && n >= (64u << 10))) {
        if (wpk_fd_sink_flush(s))
            return 1;
        if (write_all(s->fd, data, n))
            s->failed = 1;
        return s->failed;
    }
    if (s->used + n > sizeof s->buf && wpk_fd_sink_flush(s))
        return 1;
    memcpy(s->buf + s->used, data, n);
    s->used += n;
    return 0;
}
