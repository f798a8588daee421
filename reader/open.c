/* open.c - wpack_open_file / wpack_open_memory / wpack_close and errors. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader.h"

int wpk_fail(wpack_archive *ar, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&ar->err_lock);
    ar->errcode = code;
    wpk_vfmt(ar->errmsg, sizeof ar->errmsg, fmt, ap);
    pthread_mutex_unlock(&ar->err_lock);
    va_end(ap);
    return code;
}

static wpack_archive *new_handle(void)
{
    wpack_archive *ar = calloc(1, sizeof *ar);
    if (ar)
        pthread_mutex_init(&ar->err_lock, NULL);
    return ar;
}

static int validate(wpack_archive *ar, unsigned flags)
{
    ar->flags = flags;
    int rc = wpk_check_header(ar);
    if (rc == WPACK_OK)
        rc = wpk_check_index(ar);
    if (rc == WPACK_OK)
        rc = wpk_check_shards(ar);
    if (rc == WPACK_OK)
        rc = wpk_reads_init(ar);
    if (rc == WPACK_OK && (flags & WPACK_OPEN_VERIFY))
        rc = wpack_verify_all(ar, NULL, NULL);
    if (rc == WPACK_OK) {
        /* Rule 4a may have recorded a rejected candidate trailer; open succeeded. */
        ar->errcode = WPACK_OK;
        ar->errmsg[0] = 0;
    }
    return rc;
}

int wpack_open_memory(wpack_archive **out, const void *buf, size_t len, unsigned flags)
{
    wpack_archive *ar = new_handle();
    *out = ar;
    if (!ar)
        return WPACK_E_NOMEM;
    if (!buf && len)
        return wpk_fail(ar, WPACK_E_INVALID_ARGUMENT, "NULL buffer of %zu bytes", len);
    ar->base = buf;
    ar->len = len;
    return validate(ar, flags);
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
    ar->path = strdup(path);
    if (!ar->path)
        return wpk_fail(ar, WPACK_E_NOMEM, "out of memory");
    ar->flags = flags; /* before validate: the shard check reads it */
    /* Non-blocking and regular files only: a FIFO must not hang the open. */
    struct stat st;
    char msg[400];
    int code, fd = wpk_open_input(dirfd, name, input_flags, &st, &code, msg, sizeof msg);
    if (fd < 0)
        return wpk_fail(ar, code, "%s: %s", path, msg);
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return wpk_fail(ar, WPACK_E_IO, "%s: too large to map", path);
    }
    size_t len = (size_t)st.st_size;
    if (len > 0) {
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return wpk_fail(ar, WPACK_E_IO, "%s: cannot mmap: %s", path, strerror(e));
        }
        ar->map = m;
        ar->map_len = len;
        ar->base = m;
    }
    close(fd);
    ar->len = len;
    int rc = validate(ar, flags);
    if (rc != WPACK_OK) {
        /* Prefix the path so the message says where. */
        char tmp[sizeof ar->errmsg];
        memcpy(tmp, ar->errmsg, sizeof tmp);
        wpk_fmt(ar->errmsg, sizeof ar->errmsg, "%s: %s", path, tmp);
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
    if (ar->map)
        munmap(ar->map, ar->map_len);
    pthread_mutex_destroy(&ar->err_lock);
    free(ar);
}

int wpack_errcode(const wpack_archive *ar)
{
    return ar ? ar->errcode : WPACK_E_NOMEM;
}

const char *wpack_errmsg(const wpack_archive *ar)
{
    return ar ? ar->errmsg : "out of memory";
}

void wpack_get_info(const wpack_archive *ar, wpack_info *info)
{
    *info = ar->info;
}
