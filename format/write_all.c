/*
 * write_all.c - whole-buffer I/O on file descriptors: write all, pread all,
 * and one copy_file_range step with the project's rules for when to call it
 * (pages that line up) and for falling back.
 *
 * write(2) and pread(2) may move less than asked (signals, pipes, a full
 * disk reached part way), so every caller loops; these are the loops.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
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

int wpk_pread_all(int fd, void *p, size_t n, uint64_t off)
{
    uint8_t *b = p;
    while (n) {
        ssize_t k = pread(fd, b, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? (errno ? errno : EIO) : ENODATA; /* ENODATA: it ended first */
        b += k;
        off += (uint64_t)k;
        n -= (size_t)k;
    }
    return 0;
}

int wpk_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = pwrite(fd, b, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? (errno ? errno : EIO) : ENOSPC;
        b += k;
        off += (uint64_t)k;
        n -= (size_t)k;
    }
    return 0;
}

/* Refusals that mean "not here" (another file system, an old kernel, a
 * file system without it, a file that is not regular, O_APPEND), not a
 * failed disk: the caller reads and writes instead. */
static int copy_refused(int e)
{
    return e == EXDEV || e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == EBADF ||
           e == ETXTBSY;
}

int64_t wpk_copy_range_step(int in, uint64_t off, int out, size_t n)
{
    for (;;) {
        loff_t at = (loff_t)off;
        ssize_t k = copy_file_range(in, &at, out, NULL, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return copy_refused(errno) ? 0 : -(int64_t)(errno ? errno : EIO);
        return k; /* 0: nothing copied (the input ended): read/write says why */
    }
}

/* The page-line rule, one for the writer (packer/writer_copy.c) and the
 * reader's copy out (reader/read_fd.c): copy_file_range only where the
 * input and output offsets lie at the same place in a 4 KiB page: only
 * there can a file system share the blocks (reflink) or the kernel copy
 * whole pages. Elsewhere (nearly every tensor: the archive's data sits at
 * page multiples by default, a .npy's starts 128 bytes in, a zip member's,
 * a safetensors or GGUF tensor's anywhere) the kernel's copy (splice, each
 * output page from two input pages) cost 1.4-2x the system time of write()
 * of the step just read and hashed, still in cache: 1 GiB in 256 KiB
 * steps, ext4 on the 2-CPU EPYC VM, kernel 6.18, pread + XXH3 +
 * copy_file_range 0.37-0.50 s of system time against 0.25-0.27 s with
 * write() (0.24-0.30 s with the offsets lined up, where copy_file_range
 * stays; bench/pack README). Not measured: a network file system that
 * copies on the server, where copy_file_range might win at any offset. */
#define PAGE_LINE (4096u)

int wpk_pages_line_up(uint64_t in_off, uint64_t out_off)
{
    return in_off % PAGE_LINE == out_off % PAGE_LINE;
}
