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
    /* O_NONBLOCK: a FIFO given as input is refused below instead of
     * blocking the open (no effect on a regular file) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        wpk_fmt(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return WPACK_E_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        wpk_fmt(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return WPACK_E_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        wpk_fmt(err, errlen, "%s: not a regular file", path);
        close(fd);
        return WPACK_E_FILE_TYPE;
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

void wpk_fd_sink_init(wpk_fd_sink *s, int fd, int in_fd, const char *path)
{
    s->fd = fd;
    s->in_fd = in_fd;
    s->failed = 0;
    s->err = 0;
    s->path = path;
    s->used = 0;
}

/* The sink failed with error e (kept for the message). */
static int sink_failed(wpk_fd_sink *s, int e)
{
    s->err = e;
    s->failed = 1;
    return 1;
}

void wpk_fd_sink_describe(void *user, char *err, size_t errlen)
{
    const wpk_fd_sink *s = user;
    if (s->err)
        wpk_fmt(err, errlen, "%s: writing failed: %s", s->path ? s->path : "output", strerror(s->err));
    else
        wpk_fmt(err, errlen, "%s: writing failed", s->path ? s->path : "output");
}

int wpk_fd_sink_flush(wpk_fd_sink *s)
{
    int e;
    if (!s->failed && s->used && (e = wpk_write_all(s->fd, s->buf, s->used)))
        sink_failed(s, e);
    s->used = 0;
    return s->failed;
}

int wpk_fd_sink_copy(void *user, size_t off, size_t n)
{
    wpk_fd_sink *s = user;
    if (s->in_fd < 0 || wpk_fd_sink_flush(s))
        return 1;
    /* the page-line rule (format/write_all.c): off it, the caller's write
     * from the mapping costs less than the kernel's copy of split pages */
    off_t at = lseek(s->fd, 0, SEEK_CUR);
    if (at < 0 || !wpk_pages_line_up((uint64_t)off, (uint64_t)at))
        return 1;
    size_t done = 0;
    while (done < n) {
        int64_t c = wpk_copy_range_step(s->in_fd, off + done, s->fd, n - done);
        if (c <= 0) {
            if (done == 0 && c == 0)
                return 1; /* not supported here: the caller writes instead */
            /* part copied, or a real failure: writing the rest from the
             * mapping is the caller's job, so report it through the sink */
            sink_failed(s, c < 0 ? (int)-c : EIO); /* no errno for a short copy */
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
        int e = wpk_write_all(s->fd, data, n);
        if (e)
            sink_failed(s, e);
        return s->failed;
    }
    if (s->used + n > sizeof s->buf && wpk_fd_sink_flush(s))
        return 1;
    memcpy(s->buf + s->used, data, n);
    s->used += n;
    return 0;
}
