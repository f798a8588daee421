/*
 * archive_in.c - bundles of .npy files read through libarchive: .npz
 * (stored or deflated zip), zip, tar, tar.gz, tar.zst, tar.xz, tar.bz2.
 * Streaming: each member is decompressed piece by piece into the sink.
 * Zip bombs: the bytes coming out are capped in total and, past a grace
 * amount, per byte read from the file. A zip's stored (uncompressed)
 * members holding a C-order little-endian .npy skip libarchive: their bytes
 * are read a cached step at a time, CRC-checked and hashed there, and go
 * to the archive from there (wpk_sink_stream_file), as torch storages do;
 * their headers are read with pread, not through the zip's mapping. A gzip file is inflated once, here, with zlib checking its
 * trailers; libarchive reads the inflated tar.
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
#include <zlib.h>

#include "bytes.h"
#include "export.h"
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

/* The code of libarchive's last failure inside a member: a CRC or checksum
 * that does not match ("ZIP bad CRC: ..." of a deflated member) is a
 * damaged file, WPACK_E_CHECKSUM as a stored member's CRC-32 or a gzip
 * trailer is here; anything else is malformed input. */
static int archive_code(struct archive *a)
{
    const char *m = archive_error_string(a);
    return m && (strstr(m, "CRC") || strstr(m, "checksum")) ? WPACK_E_CHECKSUM : WPACK_E_INPUT;
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

/* libarchive never checks a gzip member's trailer (its gzip filter reads
 * the CRC-32 and length and drops them: "XXX TODO: Verify the length and
 * CRC"), so a damaged .tar.gz packed silently. zlib checks both: a gzip
 * file is inflated here, once, and libarchive reads the inflated bytes
 * through its read callback (gz_read), as a plain tar. Every member is
 * inflated (a member followed by anything but another gzip header ends the
 * stream, as in libarchive), what libarchive leaves after the tar's end
 * too (gz_finish), under the bomb guard; a damaged one fails the input, and
 * the writer is then aborted: no archive. */
typedef struct {
    wpk_sink *s;
    int fd;
    uint64_t size, pos;  /* the file's size, the bytes read from it */
    uint64_t inflated;   /* bytes out of zlib */
    uint64_t max_total, ratio;
    z_stream z;
    uint8_t *in, *out;
    int done, rc;        /* rc: the failure, its message in the sink */
} gz_in;

enum { GZ_IN = 1 << 16, GZ_OUT = 1 << 18 };

static int gz_begin(gz_in *g, wpk_sink *s, int fd, uint64_t size, uint64_t max_total,
                    uint64_t ratio)
{
    *g = (gz_in){.s = s, .fd = fd, .size = size, .max_total = max_total, .ratio = ratio};
    g->in = malloc(GZ_IN);
    g->out = malloc(GZ_OUT);
    if (!g->in || !g->out || inflateInit2(&g->z, 15 + 16) != Z_OK) {
        free(g->in);
        free(g->out);
        g->in = g->out = NULL;
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    }
    return WPACK_OK;
}

static void gz_end(gz_in *g)
{
    if (!g->in)
        return;
    inflateEnd(&g->z);
    free(g->in);
    free(g->out);
    g->in = g->out = NULL;
}

static long gz_fail(gz_in *g, int rc)
{
    g->rc = rc;
    return -1;
}

/* The next inflated bytes into g->out: their count (0 at the end, with
 * g->done set), or -1 with g->rc. */
static long gz_step(gz_in *g)
{
    z_stream *z = &g->z;
    if (g->rc)
        return -1;
    z->next_out = g->out;
    z->avail_out = GZ_OUT;
    while (!g->done && z->avail_out == GZ_OUT) {
        if (z->avail_in == 0) {
            size_t n = g->size - g->pos < GZ_IN ? (size_t)(g->size - g->pos) : GZ_IN;
            if (n == 0)
                return gz_fail(g, wpk_sink_fail(g->s, WPACK_E_INPUT,
                                                "gzip stream truncated (damaged file)"));
            if (wpk_pread_all(g->fd, g->in, n, g->pos))
                return gz_fail(g, wpk_sink_fail(g->s, WPACK_E_IO, "read failed: %s",
                                                strerror(errno)));
            g->pos += n;
            z->next_in = g->in;
            z->avail_in = (uInt)n;
        }
        uInt before = z->avail_out;
        int zr = inflate(z, Z_NO_FLUSH);
        g->inflated += before - z->avail_out;
        if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_MEM_ERROR) {
            int check = z->msg && strstr(z->msg, "check") != NULL; /* data or length check */
            return gz_fail(g, wpk_sink_fail(g->s, check ? WPACK_E_CHECKSUM : WPACK_E_INPUT,
                                            "gzip stream at byte %llu: %s (damaged file)",
                                            (unsigned long long)(g->pos - z->avail_in),
                                            z->msg ? z->msg : "bad data"));
        }
        if (g->inflated > g->max_total ||
            (g->inflated > WPK_RATIO_GRACE && g->inflated / (g->pos ? g->pos : 1) > g->ratio)) {
            return gz_fail(g, wpk_sink_fail(g->s, WPACK_E_LIMIT,
                                            "gzip stream expands more than %llu:1 (%llu bytes "
                                            "out of %llu read): refused as a zip bomb",
                                            (unsigned long long)g->ratio,
                                            (unsigned long long)g->inflated,
                                            (unsigned long long)g->pos));
        }
        if (zr == Z_STREAM_END) {
            uint8_t magic[2];
            size_t have = z->avail_in;
            if (have < 2 && g->pos < g->size &&
                pread(g->fd, magic + have, 2 - have, (off_t)g->pos) != (ssize_t)(2 - have)) {
                g->done = 1;
                break;
            }
            if (have)
                magic[0] = z->next_in[0];
            if (have > 1)
                magic[1] = z->next_in[1];
            if ((have < 2 && g->pos >= g->size) || magic[0] != 0x1f || magic[1] != 0x8b)
                g->done = 1; /* the end, or trailing bytes libarchive ignores too */
            else
                inflateReset(z);
        }
    }
    return (long)(GZ_OUT - z->avail_out);
}

/* libarchive's read callback: the inflated stream. */
static la_ssize_t gz_read(struct archive *a, void *ctx, const void **buf)
{
    gz_in *g = ctx;
    long n = gz_step(g);
    *buf = g->out;
    if (n < 0) /* the message is in the sink; this one is libarchive's */
        archive_set_error(a, -1 /* ARCHIVE_ERRNO_MISC */, "damaged gzip stream");
    return n;
}

/* The rest of the gzip file after the tar's end, which libarchive need not
 * read: inflated and checked, the output thrown away. */
static int gz_finish(gz_in *g)
{
    while (!g->done)
        if (gz_step(g) < 0)
            return g->rc;
    return g->rc;
}

enum { WPK_MEMBER_LABEL = 4200 }; /* "member '...'" of a name up to libarchive's 4 KiB */

typedef struct {
    wpk_sink *s;
    struct archive *a;
    const char *member;
    uint64_t out, max_total, ratio;
    uint64_t stored; /* of out: stored members copied from the map (1:1, no ratio) */
    gz_in *gz;       /* a gzip file inflated here (libarchive sees a plain tar), or NULL */
} ar_reader;

/* The failure gz_read gave libarchive (its message in the sink), or 0. */
static int gz_failed(const ar_reader *r)
{
    return r->gz ? r->gz->rc : 0;
}

/* A zip's mapping and checked central directory (ok 0: not a zip). */
typedef struct {
    wpk_zip z;
    wpk_mapped m; /* m.fd is the bundle's fd, not owned */
    int ok;
} zip_view;

/* Bytes the decompression filters (ours for gzip, libarchive's for the
 * rest) have handed the format reader (member headers, skipped members and
 * data alike), or 0 without a filter (a plain tar or a zip: skipping a
 * member there is a seek, not work). */
static uint64_t unpacked_bytes(const ar_reader *r)
{
    la_int64_t n = archive_filter_count(r->a) > 1 ? archive_filter_bytes(r->a, 0) : 0;
    uint64_t u = n > 0 ? (uint64_t)n : 0;
    return r->gz && r->gz->inflated > u ? r->gz->inflated : u;
}

/* A compression filter is on: skipping a member is inflating it. */
static int compressed(const ar_reader *r)
{
    return r->gz || archive_filter_count(r->a) > 1;
}

/* The zip-bomb guard, after each piece: the bytes out of the bundle (the
 * .npy data read, and with a compression filter everything it inflated,
 * skipped members included) capped in total and, past the grace, per byte
 * read from the file. */
static int bomb_check(ar_reader *r)
{
    uint64_t in = r->gz ? r->gz->pos : (uint64_t)archive_filter_bytes(r->a, -1);
    uint64_t inflated = r->out - r->stored, un = unpacked_bytes(r);
    if (un > inflated)
        inflated = un;
    if (r->out > r->max_total || un > r->max_total)
        return wpk_sink_fail(r->s, WPACK_E_LIMIT,
                             "member '%s': more than %llu bytes after decompression (a zip bomb?)",
                             r->member, (unsigned long long)r->max_total);
    if (inflated > WPK_RATIO_GRACE && inflated / (in ? in : 1) > r->ratio)
        return wpk_sink_fail(r->s, WPACK_E_LIMIT,
                             "member '%s': expands more than %llu:1 (%llu bytes out of %llu read): "
                             "refused as a zip bomb",
                             r->member, (unsigned long long)r->ratio,
                             (unsigned long long)inflated, (unsigned long long)in);
    return WPACK_OK;
}

static long read_member(void *ctx, void *buf, size_t n)
{
    ar_reader *r = ctx;
    la_ssize_t k = archive_read_data(r->a, buf, n);
    if (k < 0) {
        char eb[300];
        if (gz_failed(r))
            return -(long)gz_failed(r);
        return -(long)wpk_sink_fail(r->s, archive_code(r->a), "member '%s': %s", r->member,
                                    wpk_archive_error(r->a, eb, sizeof eb));
    }
    r->out += (uint64_t)k;
    int rc = bomb_check(r);
    return rc ? -(long)rc : (long)k;
}

/* The rest of the current member, read here under the guard when the
 * bundle is compressed: libarchive would skip it inside the next
 * archive_read_next_header by inflating it all, unchecked (a few KB of
 * .tar.bz2 hold terabytes of zeros in a member that is not a .npy). Blocks,
 * not archive_read_data: a sparse member's holes are not filled. */
static int drain_member(ar_reader *r)
{
    if (!compressed(r))
        return WPACK_OK;
    for (;;) {
        const void *b;
        size_t n;
        la_int64_t off;
        int h = archive_read_data_block(r->a, &b, &n, &off);
        if (h == ARCHIVE_EOF)
            return WPACK_OK;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            char eb[300];
            return gz_failed(r) ? gz_failed(r)
                                : wpk_sink_fail(r->s, archive_code(r->a), "member '%s': %s",
                                                r->member, wpk_archive_error(r->a, eb, sizeof eb));
        }
        int rc = bomb_check(r);
        if (rc)
            return rc;
    }
}

/* "dir/sub/w.npy" -> "dir.sub.w", then export's escapes undone ("a%2Fb.npy"
 * -> "a/b"); NULL when the member is not a .npy. A
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
    wpk_entry_name_unescape(name); /* after: an escaped '/' is no separator */
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
    int rc = wpk_zip_open_ex(&zv->z, p, (size_t)st.st_size, wpk_map_read, &zv->m, err, sizeof err);
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
 * file: 1 when it is not one (libarchive streams it: same bytes, same
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
    /* The .npy header by pread, not through the mapping: a page fault per
     * member maps a folio of the page cache, which costs ~25x the read on
     * the VM this was measured on (zipread.h). */
    uint8_t first[4096], *hb = first;
    size_t got = len < sizeof first ? (size_t)len : sizeof first;
    char msg[400];
    npy_header h;
    if (wpk_map_read((void *)&zv->m, ze->data_offset, first, got) ||
        npy_header_extent(first, got < NPY_PREAMBLE_V2 ? got : NPY_PREAMBLE_V2, &hend, msg,
                          sizeof msg) ||
        hend > len)
        return 1;
    if (hend > got) { /* a header over 4 KiB (up to NPY_MAX_HEADER_LEN) */
        if (!(hb = malloc((size_t)hend)))
            return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        if (wpk_map_read((void *)&zv->m, ze->data_offset, hb, (size_t)hend)) {
            free(hb);
            return 1;
        }
    }
    int plain = !npy_parse_header(hb, (size_t)hend, &h, msg, sizeof msg) && !h.byteswap &&
                wpk_add(hend, h.nbytes, &need) && need == len;
    unsigned big = 0;
    for (unsigned k = 0; plain && k < h.rank; k++)
        big += h.dims[k] > 1;
    uint32_t crc = plain ? wpk_crc32(0, hb, (size_t)hend) : 0;
    if (hb != first)
        free(hb);
    if (!plain || (h.fortran_order && big > 1))
        return 1;
    int rc = wpk_sink_begin(s, name, h.dtype, h.rank, h.dims);
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

/* The decompressors that are built into libarchive, and only those:
 * archive_read_support_filter_all (or one of these when libarchive was
 * built without its library) registers external programs, and a few magic
 * bytes in the stream (LRZI, \x89LZO, GRZipII, inside a gzip too) then made
 * the library fork and exec `lrzip -d`, `lzop -d` or `grzip -d` from $PATH
 * on the bundle's bytes. */
static void support_filters(struct archive *a)
{
    if (archive_zlib_version())
        archive_read_support_filter_gzip(a);
    if (archive_bzlib_version())
        archive_read_support_filter_bzip2(a);
    if (archive_liblzma_version())
        archive_read_support_filter_xz(a);
    if (archive_libzstd_version())
        archive_read_support_filter_zstd(a);
}

/* libarchive's own gzip filter never checks a member's CRC-32 and length
 * (gz_in does, for a gzip file): a gzip stream under another layer (a
 * .tar.gz.gz, a gzip inside a .tar.zst) would pack unchecked, so it is
 * refused. The filters are chosen at open, outermost last. */
static int nested_gzip(wpk_sink *s, struct archive *a)
{
    int n = archive_filter_count(a);
    for (int i = 0; i < n; i++)
        if (archive_filter_code(a, i) == ARCHIVE_FILTER_GZIP) {
            const char *outer = i + 1 < n ? archive_filter_name(a, i + 1) : NULL;
            return wpk_sink_fail(s, WPACK_E_UNSUPPORTED,
                                 "a gzip stream inside %s compression: its checksums would not "
                                 "be checked (refused; decompress the outer layer first)",
                                 outer && strcmp(outer, "none") != 0 ? outer : "gzip");
        }
    return WPACK_OK;
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
    support_filters(a);
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
    gz_in gz = {.in = NULL};
    ar_reader r = {.s = s, .a = a};
    if ((rc = zip_precheck(s, fd, &zv)))
        goto out;
    r.max_total = s->o && s->o->max_total ? s->o->max_total : WPK_DEFAULT_MAX_TOTAL;
    r.ratio = s->o && s->o->max_ratio ? s->o->max_ratio : WPK_DEFAULT_MAX_RATIO;
    uint8_t magic[2];
    if (!zv.ok && pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        if ((rc = gz_begin(&gz, s, fd, (uint64_t)st.st_size, r.max_total, r.ratio)))
            goto out;
        r.gz = &gz;
    }
    if ((r.gz ? archive_read_open(a, &gz, NULL, gz_read, NULL)
              : archive_read_open_fd(a, fd, 1 << 16)) != ARCHIVE_OK) {
        rc = gz_failed(&r) ? gz_failed(&r)
                           : wpk_sink_fail(s, WPACK_E_INPUT, "%s",
                                           wpk_archive_error(a, eb, sizeof eb));
        goto out;
    }
    if ((rc = nested_gzip(s, a)))
        goto out;
    uint64_t found = 0;
    for (;;) {
        struct archive_entry *e;
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            rc = gz_failed(&r) ? gz_failed(&r)
                               : wpk_sink_fail(s, WPACK_E_INPUT, "%s (truncated or damaged?)",
                                               wpk_archive_error(a, eb, sizeof eb));
            goto out;
        }
        const char *mp = archive_entry_pathname(e);
        if (!mp) { /* not ignored as a member that is no .npy: it may be one */
            rc = wpk_sink_fail(s, WPACK_E_INPUT, "a member whose name cannot be read as "
                                                 "UTF-8 (%s)", wpk_archive_error(a, eb, sizeof eb));
            goto out;
        }
        r.member = mp;
        if ((rc = bomb_check(&r))) /* the headers are inflated bytes too */
            goto out;
        int bad = 0;
        char *name = archive_entry_filetype(e) == AE_IFDIR ? NULL : member_name(s, mp, &bad);
        if (bad) {
            rc = bad;
            goto out;
        }
        if (!name) { /* a directory, or not a .npy: ignored, like numpy ignores it in an .npz */
            if ((rc = drain_member(&r)))
                goto out;
            continue;
        }
        if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e)) {
            const char *what = member_type(e);
            free(name);
            rc = wpk_sink_fail(s, WPACK_E_FILE_TYPE, "member '%.200s' is %s, not a file (refused)",
                               mp, what);
            goto out;
        }
        const wpk_zip_entry *ze = zv.ok ? wpk_zip_find(&zv.z, mp, strlen(mp)) : NULL;
        rc = ze ? stored_member(&r, &zv, ze, name) : 1;
        if (rc == 1) {
            char what[WPK_MEMBER_LABEL];
            wpk_fmt(what, sizeof what, "member '%s'", mp); /* its path, not the tensor name */
            rc = wpk_npy_stream(s, name, what, read_member, &r);
        }
        if (rc && gz_failed(&r)) /* the gzip failure underneath, whatever libarchive made of it */
            rc = gz_failed(&r);
        free(name);
        if (rc)
            goto out;
        found++;
    }
    if (r.gz && (rc = gz_finish(&gz))) /* its last trailers may lie past the tar's end */
        goto out;
    if (!found)
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "no .npy members in the bundle");
out:
    archive_read_free(a);
    gz_end(&gz);
    zip_view_free(&zv);
    close(fd);
    return rc;
}
