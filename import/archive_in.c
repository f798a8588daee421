/*
 * archive_in.c - bundles of .npy files read through libarchive: .npz
 * (stored or deflated zip), zip, tar, tar.gz, tar.zst, tar.xz, tar.bz2.
 * Streaming: each member is decompressed piece by piece into the sink.
 * Zip bombs: the bytes coming out are capped in total and, past a grace
 * amount, per byte read from the file. A zip's stored (uncompressed)
 * members holding a C-order little-endian .npy skip libarchive: their bytes
 * are read a cached step at a time, CRC-checked and hashed there, and move
 * to the archive inside the kernel (wpk_sink_stream_file), as torch
 * storages do.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "import.h"
#include "internal.h"
#include "npy.h"
#include "zipread.h"


const char *wpk_archive_error(struct archive *a, char *buf, size_t n)
{
    const char *m = archive_error_string(a);
    wpk_fmt(buf, n, "%s", m ? m : "libarchive failed without a message");
    size_t k = strlen(buf);
    while (k && (buf[k - 1] == '\n' || buf[k - 1] == '\r' || buf[k - 1] == ' '))
        buf[--k] = 0; /* libarchive ends some messages with a newline */
    return buf;
}

void wpk_archive_locale_begin(wpk_archive_locale *l)
{
    l->utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    l->old = l->utf8 ? uselocale(l->utf8) : (locale_t)0;
}

void wpk_archive_locale_end(wpk_archive_locale *l)
{
    if (!l->utf8)
        return;
    uselocale(l->old);
    freelocale(l->utf8);
    l->utf8 = (locale_t)0;
}

typedef struct {
    wpk_sink *s;
    struct archive *a;
    const char *member;
    uint64_t out, max_total, ratio;
    uint64_t stored; /* of out: stored members copied from the map (1:1, no ratio) */
} ar_reader;

/* A zip's mapping and checked central directory (ok 0: not a zip). */
typedef struct {
    wpk_zip z;
    wpk_mapped m; /* m.fd is the bundle's fd, not owned */
    int ok;
} zip_view;

static long read_member(void *ctx, void *buf, size_t n)
{
    ar_reader *r = ctx;
    la_ssize_t k = archive_read_data(r->a, buf, n);
    if (k < 0) {
        char eb[300];
        wpk_sink_fail(r->s, WPACK_E_INPUT, "member '%s': %s", r->member,
                      wpk_archive_error(r->a, eb, sizeof eb));
        return -1;
    }
    r->out += (uint64_t)k;
    uint64_t in = (uint64_t)archive_filter_bytes(r->a, -1);
    if (r->out > r->max_total) {
        wpk_sink_fail(r->s, WPACK_E_LIMIT,
                      "member '%s': more than %llu bytes after decompression (a zip bomb?)",
                      r->member, (unsigned long long)r->max_total);
        return -1;
    }
    uint64_t inflated = r->out - r->stored;
    if (inflated > WPK_RATIO_GRACE && inflated / (in ? in : 1) > r->ratio) {
        wpk_sink_fail(r->s, WPACK_E_LIMIT,
                      "member '%s': expands more than %llu:1 (%llu bytes out of %llu read): "
                      "refused as a zip bomb",
                      r->member, (unsigned long long)r->ratio, (unsigned long long)r->out,
                      (unsigned long long)in);
        return -1;
    }
    return (long)k;
}

/* "dir/sub/w.npy" -> "dir.sub.w"; NULL when the member is not a .npy. A
 * leading "./" (tar writes it) is dropped; any other empty, "." or ".."
 * component is refused: "a//b.npy" would become the name "a..b". */
static char *member_name(wpk_sink *s, const char *path, int *bad)
{
    *bad = 0;
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    size_t n = strlen(path);
    if (n <= 4 || strcmp(path + n - 4, ".npy") != 0)
        return NULL;
    const char *why = path[0] == '/' ? "an absolute path" : strchr(path, '\\') ? "a backslash" : NULL;
    for (const char *c = path; !why && *c;) {
        size_t k = strcspn(c, "/");
        if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
            why = k == 2 ? "a '..' path" : "an empty or '.' path component";
        c += k;
        if (*c == '/')
            c++;
    }
    if (why) {
        *bad = wpk_sink_fail(s, WPACK_E_INPUT, "member '%.200s': %s refused", path, why);
        return NULL;
    }
    char *name = strndup(path, n - 4);
    if (!name) {
        *bad = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        return NULL;
    }
    for (char *p = name; *p; p++)
        if (*p == '/')
            *p = '.';
    return name;
}

/* What a member that is not a regular file is, for the message. */
static const char *member_type(struct archive_entry *e)
{
    if (archive_entry_hardlink(e))
        return "a hard link";
    switch (archive_entry_filetype(e)) {
    case AE_IFLNK: return "a symbolic link";
    case AE_IFIFO: return "a FIFO";
    case AE_IFCHR: return "a character device";
    case AE_IFBLK: return "a block device";
    case AE_IFSOCK: return "a socket";
    default: return "not a regular file";
    }
}

/* A zip is checked by the strict central-directory reader first: libarchive
 * reads members through the directory, and members that share bytes (nested
 * local headers) would be read once per member. */
static int zip_precheck(wpk_sink *s, int fd, zip_view *zv)
{
    struct stat st;
    memset(zv, 0, sizeof *zv);
    zv->m.fd = -1;
    if (fstat(fd, &st) != 0 || st.st_size < 4 || (uint64_t)st.st_size > SIZE_MAX)
        return WPACK_OK;
    uint8_t magic[4];
    if (pread(fd, magic, 4, 0) != 4 || !wpk_zip_sniff(magic, 4))
        return WPACK_OK;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return wpk_sink_fail(s, WPACK_E_IO, "cannot map: %s", strerror(errno));
    zv->m = (wpk_mapped){p, (size_t)st.st_size, fd}; /* kept for the stored members */
    char err[700];
    int rc = wpk_zip_open_ex(&zv->z, p, (size_t)st.st_size, wpk_map_done, &zv->m, err, sizeof err);
    if (rc) {
        munmap(p, (size_t)st.st_size);
        zv->m = (wpk_mapped){NULL, 0, -1};
        return wpk_sink_fail(s, rc, "%s", err);
    }
    zv->ok = 1;
    return WPACK_OK;
}

static void zip_view_free(zip_view *zv)
{
    if (!zv->ok)
        return;
    wpk_zip_close(&zv->z);
    munmap((void *)zv->m.p, zv->m.len);
    zv->ok = 0;
}

/* A stored member holding a C-order little-endian .npy, straight from the
 * map: 1 when it is not one (libarchive streams it: same bytes, same
 * messages), else WPACK_OK or the failure. Its CRC-32 is computed on the
 * bytes read, a step before each step is copied; a mismatch fails the
 * tensor (the writer is then aborted: no archive). */
static int stored_member(ar_reader *r, const zip_view *zv, const wpk_zip_entry *ze,
                         const char *name)
{
    wpk_sink *s = r->s;
    uint64_t len = ze->size, hend, need;
    if (ze->method != 0 || ze->comp_size != len || !wpk_in_bounds(ze->data_offset, len, zv->m.len) ||
        r->out > r->max_total || len > r->max_total - r->out)
        return 1;
    const uint8_t *p = zv->m.p + ze->data_offset;
    char msg[400];
    npy_header h;
    if (npy_header_extent(p, len < NPY_PREAMBLE_V2 ? (size_t)len : NPY_PREAMBLE_V2, &hend, msg,
                          sizeof msg) ||
        hend > len || npy_parse_header(p, (size_t)hend, &h, msg, sizeof msg) || h.byteswap ||
        !wpk_add(hend, h.nbytes, &need) || need != len)
        return 1;
    unsigned big = 0;
    for (unsigned k = 0; k < h.rank; k++)
        big += h.dims[k] > 1;
    if (h.fortran_order && big > 1)
        return 1;
    int rc = wpk_sink_begin(s, name, h.dtype, h.rank, h.dims);
    uint32_t crc = wpk_crc32(0, p, (size_t)hend);
    wpk_map_release(&zv->m, ze->data_offset, hend); /* the data goes by pread */
    if (!rc)
        rc = wpk_sink_stream_file(s, &zv->m, ze->data_offset + hend, len - hend, &crc);
    if (!rc && crc != ze->crc32)
        rc = wpk_sink_fail(s, WPACK_E_CHECKSUM,
                           "member '%s': its bytes do not match the zip's CRC-32 (damaged file)",
                           r->member);
    if (!rc)
        rc = wpk_sink_end(s);
    r->out += len;
    r->stored += len;
    return rc;
}

static int pack_file(wpk_sink *s, const char *path);

int archive_pack_file(wpk_sink *s, const char *path)
{
    wpk_archive_locale l;
    wpk_archive_locale_begin(&l);
    int rc = pack_file(s, path);
    wpk_archive_locale_end(&l);
    return rc;
}

static int pack_file(wpk_sink *s, const char *path)
{
    struct archive *a = archive_read_new();
    if (!a)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_zip(a);
    int rc = WPACK_OK;
    char eb[300]; /* libarchive's messages */
    struct stat st;
    int fd = wpk_open_in(s, AT_FDCWD, path, 0, NULL, &st); /* no FIFO: libarchive would block */
    if (fd < 0) {
        archive_read_free(a);
        return -fd;
    }
    zip_view zv;
    if ((rc = zip_precheck(s, fd, &zv)))
        goto out;
    if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s", wpk_archive_error(a, eb, sizeof eb));
        goto out;
    }
    ar_reader r = {.s = s, .a = a};
    r.max_total = s->o && s->o->max_total ? s->o->max_total : WPK_DEFAULT_MAX_TOTAL;
    r.ratio = s->o && s->o->max_ratio ? s->o->max_ratio : WPK_DEFAULT_MAX_RATIO;
    uint64_t found = 0;
    for (;;) {
        struct archive_entry *e;
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s (truncated or damaged?)",
                               wpk_archive_error(a, eb, sizeof eb));
            goto out;
        }
        const char *mp = archive_entry_pathname(e);
        if (!mp) { /* not ignored as a member that is no .npy: it may be one */
            rc = wpk_sink_fail(s, WPACK_E_INPUT, "a member whose name cannot be read as "
                                                 "UTF-8 (%s)", wpk_archive_error(a, eb, sizeof eb));
            goto out;
        }
        if (archive_entry_filetype(e) == AE_IFDIR)
            continue;
        int bad;
        char *name = member_name(s, mp, &bad);
        if (bad) {
            rc = bad;
            goto out;
        }
        if (!name)
            continue; /* not a .npy: ignored, like numpy ignores it in an .npz */
        if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e)) {
            const char *what = member_type(e);
            free(name);
            rc = wpk_sink_fail(s, WPACK_E_FILE_TYPE, "member '%.200s' is %s, not a file (refused)",
                               mp, what);
            goto out;
        }
        r.member = mp;
        const wpk_zip_entry *ze = zv.ok ? wpk_zip_find(&zv.z, mp, strlen(mp)) : NULL;
        rc = ze ? stored_member(&r, &zv, ze, name) : 1;
        if (rc == 1)
            rc = wpk_npy_stream(s, name, read_member, &r);
        free(name);
        if (rc)
            goto out;
        found++;
    }
    if (!found)
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "no .npy members in the bundle");
out:
    archive_read_free(a);
    zip_view_free(&zv);
    close(fd);
    return rc;
}
