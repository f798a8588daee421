/*
 * input_file.c - opening, mapping and loading the files an importer reads,
 * always through wpk_open_input (format/open_input.c): a FIFO or a device
 * is refused without blocking, and links are refused where the caller says.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "import.h"
#include "internal.h"

int wpk_refuse_output(wpack_writer *w, int fd, const char *name, char *err, size_t errlen)
{
    if (!w || !wpack_writer_replaces_fd(w, fd))
        return WPACK_OK;
    char q[512];
    wpk_quote(q, sizeof q, name, strlen(name));
    wpk_fmt(err, errlen, "%s is the same file as the output (or one it replaces): an output "
            "never overwrites an input", q);
    return WPACK_E_SAME_FILE;
}

int wpk_open_in(wpk_sink *s, int dirfd, const char *name, unsigned flags, const char *label,
                struct stat *st)
{
    char msg[600];
    int code, fd = wpk_open_input(dirfd, name, flags, st, &code, msg, sizeof msg);
    if (fd >= 0 && (code = wpk_refuse_output(s->w, fd, name, msg, sizeof msg))) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        return -(label ? wpk_sink_fail(s, code, "%s: %s", label, msg)
                       : wpk_sink_fail(s, code, "%s", msg));
    return fd;
}

int wpk_map_at(wpk_sink *s, int dirfd, const char *name, unsigned flags, const char *label,
               wpk_mapped *m)
{
    m->p = NULL;
    m->len = 0;
    m->fd = -1;
    struct stat st;
    int fd = wpk_open_in(s, dirfd, name, flags, label, &st);
    if (fd < 0)
        return -fd;
    const char *pre = label ? label : "", *sep = label ? ": " : "";
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return wpk_sink_fail(s, WPACK_E_LIMIT, "%s%sfile too large to map", pre, sep);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return wpk_sink_fail(s, WPACK_E_IO, "%s%scannot map: %s", pre, sep, strerror(e));
        }
        m->p = p;
        m->len = (size_t)st.st_size;
    }
    m->fd = fd;
    return WPACK_OK;
}

int wpk_map_file(wpk_sink *s, const char *path, wpk_mapped *m)
{
    return wpk_map_at(s, AT_FDCWD, path, 0, NULL, m);
}

void wpk_unmap_file(wpk_mapped *m)
{
    if (m->p && m->len)
        munmap((void *)m->p, m->len);
    if (m->fd >= 0)
        close(m->fd);
    m->p = NULL;
    m->len = 0;
    m->fd = -1;
}

/* One read fault maps more than its page: the fault-around window (64 KiB
 * by default) or the page cache's whole folio (up to 2 MiB on kernels with
 * large folios), never past the 2 MiB-aligned block of addresses (a page
 * table) around it. Releasing a range drops those blocks, so what a small
 * read pulled in goes too (the mapping is read-only: a page needed again
 * is faulted back in from the page cache). */
#define FAULT_SPAN ((uintptr_t)2 << 20)

void wpk_map_release(const wpk_mapped *m, uint64_t off, uint64_t len)
{
    if (!m->p || !wpk_in_bounds(off, len, m->len))
        return;
    uintptr_t lo = (uintptr_t)m->p, hi = lo + m->len; /* the mapping: lo is page aligned */
    uintptr_t a = ((uintptr_t)m->p + (uintptr_t)off) & ~(FAULT_SPAN - 1);
    uintptr_t e = (uintptr_t)m->p + (uintptr_t)(off + len);
    uintptr_t b = hi - e < FAULT_SPAN ? hi : (e + FAULT_SPAN - 1) & ~(FAULT_SPAN - 1);
    if (a < lo)
        a = lo;
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

int wpk_map_read(void *m, uint64_t off, void *dst, size_t n)
{
    const wpk_mapped *mp = m;
    if (mp->fd >= 0)
        return wpk_pread_all(mp->fd, dst, n, off);
    if (!wpk_in_bounds(off, n, mp->len))
        return ENODATA;
    memcpy(dst, mp->p + off, n);
    return 0;
}

/* The JSON document of an input file (opened with the input rules), or NULL
 * with a message. */
void *wpk_json_load_input(const char *path, const char *what, wpack_writer *out, int *code,
                          char *err, size_t errlen)
{
    struct stat st;
    char msg[600];
    int fd = wpk_open_input(AT_FDCWD, path, 0, &st, code, msg, sizeof msg);
    if (fd >= 0 && (*code = wpk_refuse_output(out, fd, path, msg, sizeof msg))) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        wpk_fmt(err, errlen, "%s: %s", path, msg);
        return NULL;
    }
    const char *p;
    size_t len;
    int rc = wpk_map_input(fd, &st, &p, &len);
    int e = errno;
    close(fd);
    if (rc) {
        *code = rc;
        wpk_fmt(err, errlen, "%s: cannot map: %s", path, strerror(e));
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(p, len, JSON_REJECT_DUPLICATES, &je);
    wpk_unmap_input(p, len);
    if (!root) {
        /* Python's json.dump writes NaN and Infinity, which JSON lacks */
        int nonfinite = strstr(je.text, "'NaN'") || strstr(je.text, "Infinity'");
        *code = WPACK_E_INPUT;
        wpk_fmt(err, errlen, "%s: %s JSON: %s (line %d)%s", path, what, je.text, je.line,
                nonfinite ? ": JSON has no NaN or Infinity (and a range must be finite)" : "");
    }
    return root;
}
