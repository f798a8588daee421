/* open.c - wpack_open_file / wpack_open_memory / wpack_close and errors. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "reader.h"

int wpk_fail(wpack_archive *ar, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&ar->err_lock);
    ar->errcode = code;
    wpk_vfmt(ar->errmsg, sizeof ar->errmsg, fmt, ap);
    wpk_msg_escape(ar->errmsg, sizeof ar->errmsg); /* paths and names in it may hold anything */
    pthread_mutex_unlock(&ar->err_lock);
    va_end(ap);
    return code;
}

/* A failed open's message prefixed with the archive's name (escaped, as
 * every message), so that it says where. */
static void prefix_path(wpack_archive *ar, const char *path)
{
    char tmp[sizeof ar->errmsg];
    memcpy(tmp, ar->errmsg, sizeof tmp);
    wpk_fail(ar, ar->errcode, "%s: %s", path, tmp);
}

static wpack_archive *new_handle(void)
{
    wpack_archive *ar = calloc(1, sizeof *ar);
    if (ar) {
        pthread_mutex_init(&ar->err_lock, NULL);
        ar->fd = -1;
    }
    return ar;
}

/* A large index gets its own anonymous mapping with transparent huge pages
 * asked for: faulting fresh memory in 4 KiB pages costs up to ten times the
 * copy itself (measured at 300k entries: 250 ms against 20 ms). */
#define WPK_INDEX_MAP_MIN ((uint64_t)4 << 20)

uint8_t *wpk_index_alloc(uint64_t n)
{
    if (n > SIZE_MAX)
        return NULL;
    if (n < WPK_INDEX_MAP_MIN)
        return malloc(n ? (size_t)n : 1);
    void *p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, (size_t)n, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
    return p;
}

void wpk_index_free(uint8_t *p, uint64_t n)
{
    if (!p)
        return;
    if (n < WPK_INDEX_MAP_MIN)
        free(p);
    else
        munmap(p, (size_t)n);
}

int wpk_read_at(wpack_archive *ar, uint64_t off, uint64_t n, void *dst)
{
    if (wpk_unmapped(ar)) {
        char msg[400] = "";
        int rc = !wpk_in_bounds(off, n, ar->file_size) || n > SIZE_MAX ? WPACK_E_TRUNCATED
                 : n ? ar->src.read(ar->src.user, off, dst, (size_t)n, msg, sizeof msg)
                     : WPACK_OK;
        if (rc)
            ar->src_rc = wpk_fail(ar, rc, "reading %llu bytes at %llu: %s", (unsigned long long)n,
                                  (unsigned long long)off, *msg ? msg : wpack_error_describe(rc));
        return rc == WPACK_OK;
    }
    if (ar->fd < 0) {
        if (!wpk_in_bounds(off, n, ar->len))
            return 0;
        if (n)
            memcpy(dst, ar->base + off, (size_t)n);
        return 1;
    }
    /* A failure here means the file is shorter than it was, or unreadable. */
    return n <= SIZE_MAX && wpk_pread_all(ar->fd, dst, (size_t)n, off) == 0;
}

/* After the header: the index, the shards, the verify-on-read state and
 * the optional full verification (memory and file opens alike). */
static int check_after_header(wpack_archive *ar, unsigned flags)
{
    int rc = wpk_check_index(ar);
    if (rc == WPACK_OK)
        rc = wpk_check_shards(ar);
    if (rc == WPACK_OK)
        rc = wpk_reads_init(ar);
    if (rc == WPACK_OK && (flags & WPACK_OPEN_VERIFY))
        rc = wpack_verify_all(ar, NULL, NULL);
    return rc;
}

static int validate(wpack_archive *ar, unsigned flags)
{
    ar->flags = flags;
    int rc = wpk_check_header(ar);
    if (rc == WPACK_OK)
        rc = check_after_header(ar, flags);
    if (rc == WPACK_OK) {
        /* Rule 4a may have recorded a rejected candidate trailer; open succeeded. */
        ar->errcode = WPACK_OK;
        ar->errmsg[0] = 0;
    }
    return rc;
}

/* A flag this library does not know (one of a newer header's) is refused,
 * not ignored: it may ask for a check the caller counts on. */
static int unknown_flags(wpack_archive *ar, const char *where, unsigned flags)
{
    unsigned known = WPACK_OPEN_VERIFY | WPACK_OPEN_FOLLOW_LINKS | WPACK_OPEN_VERIFY_READS |
                     WPACK_OPEN_NO_VERIFY_READS;
    if (flags & ~known)
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT, "%s%sunknown open flags 0x%x",
                        where ? where : "", where ? ": " : "", flags & ~known);
    if ((flags & WPACK_OPEN_VERIFY_READS) && (flags & WPACK_OPEN_NO_VERIFY_READS))
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT,
                        "%s%sWPACK_OPEN_VERIFY_READS and WPACK_OPEN_NO_VERIFY_READS together",
                        where ? where : "", where ? ": " : "");
    return WPACK_OK;
}

/* Verification on read is on unless the caller opts out: from here on the
 * handle's WPACK_OPEN_VERIFY_READS bit alone says whether it is on, and
 * WPACK_OPEN_NO_VERIFY_READS is cleared. */
static unsigned effective_flags(unsigned flags)
{
    if (flags & WPACK_OPEN_NO_VERIFY_READS)
        return flags & ~(WPACK_OPEN_NO_VERIFY_READS | WPACK_OPEN_VERIFY_READS);
    return flags | WPACK_OPEN_VERIFY_READS;
}

int wpack_open_memory(wpack_archive **out, const void *buf, size_t len, unsigned flags)
{
    wpack_archive *ar = new_handle();
    *out = ar;
    if (!ar)
        return WPACK_E_NOMEM;
    if (unknown_flags(ar, NULL, flags))
        return ar->errcode;
    flags = effective_flags(flags);
    if (!buf && len)
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT, "NULL buffer of %zu bytes", len);
    ar->base = buf;
    ar->len = len;
    ar->file_size = len;
    return validate(ar, flags);
}

int wpack_open_source(wpack_archive **out, const wpack_source *src, unsigned flags)
{
    wpack_archive *ar = new_handle();
    *out = ar;
    if (!ar) {
        if (src && src->close)
            src->close(src->user);
        return WPACK_E_NOMEM;
    }
    if (!src || (!src->read && !src->base)) {
        if (src && src->close) /* its last use, as for any failed open */
            src->close(src->user);
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT, "a source needs read() or base");
    }
    ar->src = *src;
    ar->src.name = NULL;
    char why[300];
    if (WPK_RESERVED_CHECK(src, "wpack_source", "wpack.h", why, sizeof why))
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT, "%s", why);
    if (unknown_flags(ar, src->name, flags))
        return ar->errcode;
    flags = effective_flags(flags);
    if (src->name && !(ar->path = strdup(src->name)))
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory");
    ar->src.name = ar->path;
    char msg[400] = "";
    int rc = src->open ? src->open(src->user, &ar->src.size, msg, sizeof msg) : WPACK_OK;
    if (rc)
        wpk_fail(ar, rc, "%s", *msg ? msg : wpack_error_describe(rc));
    ar->base = src->base;
    ar->len = src->base ? ar->src.size : 0;
    ar->file_size = ar->src.size;
    if (rc == WPACK_OK)
        rc = validate(ar, flags);
    if (rc && ar->path)
        prefix_path(ar, ar->path);
    return rc;
}

/* Undo a failed attempt so that the handle can open again. */
static void reset(wpack_archive *ar)
{
    wpk_close_shards(ar);
    wpk_reads_free(ar);
    wpk_index_free(ar->index_buf, ar->index_buf_len);
    if (ar->map)
        munmap(ar->map, ar->map_len);
    ar->index_buf = NULL;
    ar->index_buf_len = 0;
    ar->index = NULL;
    ar->map = NULL;
    ar->map_len = 0;
    ar->base = NULL;
    ar->len = 0;
    memset(&ar->info, 0, sizeof ar->info);
    memset(ar->sec, 0, sizeof ar->sec);
    memset(ar->sec_len, 0, sizeof ar->sec_len);
    ar->dims_count = 0;
}

/* One attempt: header and index by pread, then a map of the data region only
 * (all a reader touches after open; an update never changes those bytes). */
static int open_once(wpack_archive *ar, unsigned flags)
{
    struct stat st;
    if (fstat(ar->fd, &st) != 0)
        return wpk_fail(ar, WPACK_E_IO, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return wpk_fail(ar, WPACK_E_IO, "not a regular file");
    ar->file_size = (uint64_t)st.st_size;
    ar->file_dev = (uint64_t)st.st_dev;
    ar->file_ino = (uint64_t)st.st_ino;
    int rc = wpk_check_header(ar);
    if (rc)
        return rc;
    uint64_t data_end = ar->info.data_offset + ar->info.data_length; /* <= file_length */
    if (data_end > SIZE_MAX)
        return wpk_fail(ar, WPACK_E_IO, "too large to map");
    void *m = mmap(NULL, (size_t)data_end, PROT_READ, MAP_SHARED, ar->fd, 0);
    if (m == MAP_FAILED)
        return wpk_fail(ar, WPACK_E_IO, "cannot mmap: %s", strerror(errno));
    ar->map = m;
    ar->map_len = (size_t)data_end;
    ar->base = m;
    ar->len = data_end;
    return check_after_header(ar, flags);
}

/* Did the file change since the attempt read it (an update committed, a
 * torn superblock read)? Then the failure may be the race, not the file. */
static int changed_under(wpack_archive *ar)
{
    uint8_t sb[WPK_HEADER_SIZE];
    struct stat st;
    if (fstat(ar->fd, &st) != 0 || (uint64_t)st.st_size != ar->file_size)
        return 1;
    if (ar->file_size < WPK_HEADER_SIZE)
        return 0;
    return !wpk_read_at(ar, 0, WPK_HEADER_SIZE, sb) ||
           memcmp(sb, ar->super, WPK_HEADER_SIZE) != 0;
}

/* A sharded set's manifest that failed to open whole while the path came to
 * name another file: a writer replaced the set meanwhile (and removed the
 * old shards once the new manifest was in place). Take the file now at the
 * path (the new manifest) for the next attempt: a reader gets the old set
 * or the new one, not an error for the switch. 1 when it did. */
static int took_new_manifest(wpack_archive *ar, int dirfd, const char *name, unsigned input_flags)
{
    struct stat st;
    char msg[400];
    int code;
    if (!(ar->info.required_features & WPK_FEATURE_SHARDS) ||
        fstatat(dirfd, name, &st, input_flags & WPK_INPUT_NOFOLLOW ? AT_SYMLINK_NOFOLLOW : 0) != 0 ||
        ((uint64_t)st.st_dev == ar->file_dev && (uint64_t)st.st_ino == ar->file_ino))
        return 0;
    int fd = wpk_open_input(dirfd, name, input_flags, &st, &code, msg, sizeof msg);
    if (fd < 0)
        return 0;
    close(ar->fd);
    ar->fd = fd;
    return 1;
}

int wpack_open_file(wpack_archive **out, const char *path, unsigned flags)
{
    return wpk_open_at(out, AT_FDCWD, path, path, flags, 0);
}

int wpk_open_at(wpack_archive **out, int dirfd, const char *name, const char *path,
                unsigned flags, unsigned input_flags)
{
    wpack_archive *ar = new_handle();
    *out = ar;
    if (!ar)
        return WPACK_E_NOMEM;
    if (!path || !name)
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT, "wpack_open_file: NULL path");
    if (unknown_flags(ar, path, flags))
        return ar->errcode;
    flags = effective_flags(flags);
    ar->path = strdup(path);
    if (!ar->path)
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory");
    ar->flags = flags; /* before the checks: the shard check reads it */
    /* Non-blocking and regular files only: a FIFO must not hang the open. */
    struct stat st;
    char msg[400];
    int code;
    ar->fd = wpk_open_input(dirfd, name, input_flags, &st, &code, msg, sizeof msg);
    if (ar->fd < 0)
        return wpk_fail(ar, code, "%s: %s", path, msg);
    /* An in-place update may commit while we read, or a new set replace
     * the one being opened: retry while the file keeps changing under us
     * (bounded; a damaged file fails the same way every time and is
     * reported at once). */
    int rc;
    for (int attempt = 0;; attempt++) {
        memset(ar->super, 0, sizeof ar->super);
        rc = open_once(ar, flags);
        if (rc == WPACK_OK || attempt == 16 ||
            (!changed_under(ar) && !took_new_manifest(ar, dirfd, name, input_flags)))
            break;
        reset(ar);
    }
    close(ar->fd);
    ar->fd = -1;
    if (rc == WPACK_OK) {
        /* Rule 4.1 may have recorded a rejected candidate trailer; open succeeded. */
        ar->errcode = WPACK_OK;
        ar->errmsg[0] = 0;
    } else {
        prefix_path(ar, path);
    }
    return rc;
}

void wpack_close(wpack_archive *ar)
{
    if (!ar)
        return;
    wpk_close_shards(ar);
    wpk_reads_free(ar);
    free(ar->path);
    wpk_index_free(ar->index_buf, ar->index_buf_len);
    if (ar->map)
        munmap(ar->map, ar->map_len);
    if (ar->src.close)
        ar->src.close(ar->src.user);
    pthread_mutex_destroy(&ar->err_lock);
    free(ar);
}

int wpack_errcode(const wpack_archive *ar)
{
    if (!ar)
        return WPACK_E_NOMEM;
    pthread_mutex_lock((pthread_mutex_t *)&ar->err_lock);
    int code = ar->errcode;
    pthread_mutex_unlock((pthread_mutex_t *)&ar->err_lock);
    return code;
}

int wpack_errmsg_copy(const wpack_archive *ar, char *buf, size_t len)
{
    if (!ar) {
        wpk_fmt(buf, len, "out of memory");
        return WPACK_E_NOMEM;
    }
    pthread_mutex_lock((pthread_mutex_t *)&ar->err_lock);
    int code = ar->errcode;
    wpack_text_escape(buf, len, ar->errmsg, strlen(ar->errmsg)); /* cut whole, not in a character */
    pthread_mutex_unlock((pthread_mutex_t *)&ar->err_lock);
    return code;
}

const char *wpack_errmsg(const wpack_archive *ar)
{
    return ar ? ar->errmsg : "out of memory";
}

void wpack_get_info(const wpack_archive *ar, wpack_info *info)
{
    *info = ar->info;
}
