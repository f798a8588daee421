/*
 * open_input.c - open a file whose name came from input (a manifest's data
 * file, a shard of a sharded set, an entry of a walked directory, a path on
 * the command line) without the two traps of issue 14:
 *
 *  - a FIFO (or a device) named by hostile input blocks open() forever:
 *    every open is O_NONBLOCK, and anything fstat does not call a regular
 *    file is refused with WPACK_E_FILE_TYPE before a byte is read (and what
 *    the name already shows is not one is never opened: opening a device
 *    runs its driver);
 *  - a symlink inside a downloaded model directory may point anywhere
 *    (/etc/passwd): with WPK_INPUT_NOFOLLOW the name is resolved from a
 *    directory fd one component at a time with O_NOFOLLOW, so no link in any
 *    component is followed and "." / ".." / empty components are refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#ifndef O_PATH
#define O_PATH O_RDONLY
#endif

const char *wpk_file_type_name(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

static int refuse(int *code, int c, char *err, size_t errlen, const char *fmt, const char *a)
{
    *code = c;
    wpk_fmt(err, errlen, fmt, a);
    return -1;
}

/* Opening a device runs its driver (a tape rewinds, a watchdog arms, a
 * terminal may become ours): what a look at the name shows is not a regular
 * file is refused unopened. The fstat after the open still decides (the name
 * may change in between, but only root can put a device there). */
static int not_regular(const struct stat *st, int *code, char *err, size_t errlen)
{
    return refuse(code, WPACK_E_FILE_TYPE, err, errlen, "%s, not a regular file (refused)",
                  wpk_file_type_name(st->st_mode));
}

/* The message of a failed openat of component comp in dfd. */
static int open_failed(int e, int dfd, const char *comp, int *code, char *err, size_t errlen)
{
    struct stat st;
    if (e == ELOOP || (e == ENOTDIR && fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                       S_ISLNK(st.st_mode)))
        return refuse(code, WPACK_E_FILE_TYPE, err, errlen,
                      "'%s' is a symbolic link: refused, as it may lead out of its directory "
                      "(allow links explicitly: --follow-links)",
                      comp);
    if (e == ENOTDIR)
        return refuse(code, WPACK_E_FILE_TYPE, err, errlen, "'%s' is not a directory", comp);
    *code = WPACK_E_IO;
    wpk_fmt(err, errlen, "cannot open '%s': %s", comp, strerror(e));
    return -1;
}

/* name relative to dirfd, no link followed: the fd of its last component. */
static int open_nofollow(int dirfd, const char *name, int *code, char *err, size_t errlen)
{
    if (!*name || name[0] == '/')
        return refuse(code, WPACK_E_FILE_TYPE, err, errlen,
                      "'%s': want a relative path inside the directory", name);
    for (const char *c = name; *c;) {
        size_t k = strcspn(c, "/");
        if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.') ||
            (c[k] == '/' && !c[k + 1]))
            return refuse(code, WPACK_E_FILE_TYPE, err, errlen,
                          "'%s': an empty, '.' or '..' path component is refused", name);
        c += k + (c[k] == '/');
    }
    char *copy = strdup(name);
    if (!copy) {
        *code = WPACK_E_NOMEM;
        wpk_fmt(err, errlen, "out of memory");
        return -1;
    }
    int dfd = dirfd, fd = -1;
    char *comp = copy;
    for (;;) {
        char *slash = strchr(comp, '/');
        if (slash)
            *slash = 0;
        struct stat pre; /* a link is left to the open: ELOOP says it is one */
        if (!slash && fstatat(dfd, comp, &pre, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISREG(pre.st_mode) && !S_ISLNK(pre.st_mode)) {
            not_regular(&pre, code, err, errlen);
            break;
        }
        int flags = slash ? O_PATH | O_DIRECTORY : O_RDONLY | O_NONBLOCK | O_NOCTTY;
        int next = openat(dfd, comp, flags | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            open_failed(errno, dfd, comp, code, err, errlen);
            break;
        }
        if (dfd != dirfd)
            close(dfd);
        dfd = next;
        if (!slash) {
            fd = next;
            dfd = dirfd;
            break;
        }
        comp = slash + 1;
    }
    if (dfd != dirfd)
        close(dfd);
    free(copy);
    return fd;
}

int wpk_open_input(int dirfd, const char *name, unsigned flags, struct stat *st, int *code,
                   char *err, size_t errlen)
{
    int fd;
    if (flags & WPK_INPUT_NOFOLLOW) {
        fd = open_nofollow(dirfd, name, code, err, errlen);
        if (fd < 0)
            return -1;
    } else {
        struct stat pre;
        if (fstatat(dirfd, name, &pre, 0) == 0 && !S_ISREG(pre.st_mode))
            return not_regular(&pre, code, err, errlen);
        fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) {
            *code = WPACK_E_IO;
            wpk_fmt(err, errlen, "cannot open: %s", strerror(errno));
            return -1;
        }
    }
    if (fstat(fd, st) != 0) {
        *code = WPACK_E_IO;
        wpk_fmt(err, errlen, "cannot stat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return not_regular(st, code, err, errlen);
    }
    /* Reads of a regular file never block anyway; drop the flag for tidiness. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int wpk_map_input(int fd, const struct stat *st, const char **p, size_t *len)
{
    *p = "";
    *len = 0;
    if ((uint64_t)st->st_size > SIZE_MAX)
        return WPACK_E_LIMIT;
    if (st->st_size == 0)
        return WPACK_OK;
    void *m = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return WPACK_E_IO;
    *p = m;
    *len = (size_t)st->st_size;
    return WPACK_OK;
}

void wpk_unmap_input(const char *p, size_t len)
{
    if (len)
        munmap((void *)p, len);
}
