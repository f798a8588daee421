/*
 * import.c - what an input file is (by content), mapping inputs, .npy
 * streams through a sink, and the dispatch to each importer.
 */
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
#include "safetensors.h"
#include "torch_scan.h"
#include "zipread.h"

const char *wpk_input_kind_name(int kind)
{
    switch (kind) {
    case WPK_IN_NPY: return "npy";
    case WPK_IN_TORCH: return "torch";
    case WPK_IN_TORCH_LEGACY: return "torch-legacy";
    case WPK_IN_SAFETENSORS: return "safetensors";
    case WPK_IN_ZIP: return "zip";
    case WPK_IN_TAR: return "tar";
    case WPK_IN_MANIFEST: return "manifest";
    case WPK_IN_GGUF: return "gguf";   /* issue 18 */
    case WPK_IN_IRPA: return "irpa";   /* issue 18 */
    default: return "unknown";
    }
}

/* ------------------------------------------------------------ detection */

static int looks_like_tar(const uint8_t *b, size_t n)
{
    return n >= 262 && memcmp(b + 257, "ustar", 5) == 0;
}

int wpk_import_detect(const char *path, int *code, char *err, size_t errlen)
{
    struct stat st;
    char msg[400];
    *code = 0;
    int fd = wpk_open_input(AT_FDCWD, path, 0, &st, code, msg, sizeof msg);
    if (fd < 0) {
        wpk_fmt(err, errlen, "%s: %s", path, msg);
        return WPK_IN_UNKNOWN;
    }
    uint8_t b[4096];
    ssize_t n = pread(fd, b, sizeof b, 0);
    close(fd);
    if (n < 0) {
        *code = WPACK_E_IO;
        wpk_fmt(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return WPK_IN_UNKNOWN;
    }
    size_t len = (size_t)n;
    uint64_t size = (uint64_t)st.st_size;
    if (len >= 6 && memcmp(b, "\x93NUMPY", 6) == 0)
        return WPK_IN_NPY;
    /* A .npy name without the magic is a broken .npy, not some other format:
     * the npy reader says what is wrong with it. */
    size_t nl0 = strlen(path);
    if (nl0 > 4 && strcmp(path + nl0 - 4, ".npy") == 0)
        return WPK_IN_NPY;
    /* issue 18: GGUF and IREE parameter archives, by their magic */
    if (len >= 4 && memcmp(b, "GGUF", 4) == 0)
        return WPK_IN_GGUF;
    if (len >= 4 && memcmp(b, "IRPA", 4) == 0)
        return WPK_IN_IRPA;
    if (torch_is_legacy(b, len))
        return WPK_IN_TORCH_LEGACY;
    if (wpk_zip_sniff(b, len)) {
        /* torch.save writes <dir>/data.pkl first; otherwise ask the directory. */
        if (len >= 30) {
            uint32_t nl = wpk_ld16(b + 26);
            if (30 + (size_t)nl <= len && nl >= 9 && memcmp(b + 30 + nl - 9, "/data.pkl", 9) == 0)
                return WPK_IN_TORCH;
        }
        wpk_sink tmp;
        char e2[300];
        wpk_sink_init(&tmp, NULL, e2, sizeof e2);
        wpk_mapped m;
        int kind = WPK_IN_ZIP;
        if (wpk_map_file(&tmp, path, &m) == WPACK_OK) {
            wpk_zip z;
            if (wpk_zip_open_ex(&z, m.p, m.len, wpk_map_read, &m, e2, sizeof e2) == WPACK_OK) {
                for (size_t i = 0; i < z.n; i++)
                    if (z.e[i].name_len > 9 &&
                        memcmp(z.e[i].name + z.e[i].name_len - 9, "/data.pkl", 9) == 0)
                        kind = WPK_IN_TORCH;
                wpk_zip_close(&z);
            }
            wpk_unmap_file(&m);
        }
        return kind;
    }
    /* a header above the reader's limit is still a safetensors file: the
     * reader refuses it saying so (WPACK_E_LIMIT), not "not recognised" */
    if (len >= 9 && b[8] == '{' && wpk_ld64(b) <= size && wpk_ld64(b) + 8 <= size)
        return WPK_IN_SAFETENSORS;
    if ((len >= 2 && b[0] == 0x1f && b[1] == 0x8b) ||
        (len >= 4 && wpk_ld32(b) == 0xfd2fb528u) ||
        (len >= 6 && memcmp(b, "\xfd" "7zXZ\0", 6) == 0) || (len >= 3 && memcmp(b, "BZh", 3) == 0) ||
        looks_like_tar(b, len))
        return WPK_IN_TAR;
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
        i++;
    if (i < len && b[i] == '{')
        return WPK_IN_MANIFEST;
    /* Content says nothing: a name that promises a format gets that
     * format's reader, whose message says what is wrong. */
    size_t pl = strlen(path);
    if (pl > 12 && strcmp(path + pl - 12, ".safetensors") == 0)
        return WPK_IN_SAFETENSORS;
    if (pl > 5 && strcmp(path + pl - 5, ".gguf") == 0) /* issue 18 */
        return WPK_IN_GGUF;
    if (pl > 5 && strcmp(path + pl - 5, ".irpa") == 0) /* issue 18 */
        return WPK_IN_IRPA;
    if ((pl > 3 && strcmp(path + pl - 3, ".pt") == 0) ||
        (pl > 4 && strcmp(path + pl - 4, ".pth") == 0))
        return WPK_IN_TORCH;
    wpk_fmt(err, errlen,
            "%s: not a recognised input (.npy, torch.save zip, safetensors, GGUF, IREE .irpa, "
            ".npz/zip/tar of .npy, or a JSON manifest)",
            path);
    return WPK_IN_UNKNOWN;
}

/* ------------------------------------------------------------ .npy through a sink */

static void swap_elems(uint8_t *p, size_t nbytes, size_t es)
{
    for (size_t i = 0; i + es <= nbytes; i += es)
        for (size_t a = 0, z = es - 1; a < z; a++, z--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + z];
            p[i + z] = t;
        }
}

/* Bytes per piece read from a stream. */
enum { PIECE = 4 << 20 };

/* A Fortran-order member of a stream: spill its bytes to an unlinked
 * temporary file (disk, not memory), map it, and emit C order by walking
 * the output with an odometer over the Fortran strides. buf is a scratch
 * buffer of min(PIECE, h->nbytes) bytes. The tensor is begun first: the
 * output cap, the name and a duplicate are checked before a byte is spilled
 * (a member past --max-output filled $TMPDIR before it was refused). */
static int fortran_stream(wpk_sink *s, const char *name, const char *what,
                          const npy_header *h, wpk_read_fn rd, void *ctx, uint8_t *buf)
{
    int rc = wpk_sink_begin(s, name, h->dtype, h->rank, h->dims);
    if (rc)
        return rc;
    char tmpl[4096];
    const char *dir = s->o ? s->o->temp_dir : NULL; /* the caller's $TMPDIR */
    wpk_fmt(tmpl, sizeof tmpl, "%s/wpack-fortran-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return wpk_sink_fail(s, WPACK_E_IO, "%s: no temporary file for the transpose: %s", what,
                             strerror(errno));
    unlink(tmpl);
    for (uint64_t left = h->nbytes; left && rc == WPACK_OK;) {
        size_t want = left < PIECE ? (size_t)left : PIECE, have = 0;
        while (have < want) {
            long k = rd(ctx, buf + have, want - have);
            if (k <= 0) {
                close(fd);
                return k < 0 ? (int)-k
                             : wpk_sink_fail(s, WPACK_E_INPUT, "%s: truncated data", what);
            }
            have += (size_t)k;
        }
        int err = wpk_write_all(fd, buf, want);
        if (err)
            rc = wpk_sink_fail(s, WPACK_E_IO, "%s: spilling for the transpose failed: %s",
                               what, strerror(err));
        left -= want;
    }
    uint8_t extra;
    long more = rc == WPACK_OK ? rd(ctx, &extra, 1) : 0;
    if (more < 0) /* the reader said why (a zip member's CRC-32 is checked at its end) */
        rc = (int)-more;
    else if (more > 0)
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s: bytes after the array data", what);
    const uint8_t *map = NULL;
    if (rc == WPACK_OK && h->nbytes > SIZE_MAX)
        rc = wpk_sink_fail(s, WPACK_E_NOMEM, "%s: too large to map", what);
    if (rc == WPACK_OK) {
        map = mmap(NULL, (size_t)h->nbytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            map = NULL;
            rc = wpk_sink_fail(s, WPACK_E_IO, "%s: mapping for the transpose failed: %s", what,
                               strerror(errno));
        }
    }
    close(fd);
    /* stride[k] of dim k in the file (Fortran: the first dim varies fastest) */
    uint64_t stride[WPACK_MAX_RANK], idx[WPACK_MAX_RANK] = {0}, off = 0;
    size_t es = h->elem_size, per = PIECE / es;
    uint64_t acc64 = 1;
    for (unsigned k = 0; k < h->rank; k++) {
        stride[k] = acc64;
        acc64 *= h->dims[k];
    }
    for (uint64_t done = 0; rc == WPACK_OK && done < h->nelems;) {
        size_t n = h->nelems - done < per ? (size_t)(h->nelems - done) : per;
        for (size_t e = 0; e < n; e++) {
            memcpy(buf + e * es, map + off * es, es);
            /* next C-order index: the last dim varies fastest */
            for (unsigned k = h->rank; k-- > 0;) {
                off += stride[k];
                if (++idx[k] < h->dims[k])
                    break;
                off -= stride[k] * h->dims[k];
                idx[k] = 0;
            }
        }
        if (h->byteswap)
            swap_elems(buf, n * es, es);
        rc = wpk_sink_write(s, buf, n * es);
        if (rc == WPACK_OK)
            wpk_sink_progress(s, n * es);
        done += n;
    }
    if (map)
        munmap((void *)map, (size_t)h->nbytes);
    return rc ? rc : wpk_sink_end(s);
}

int wpk_npy_stream(wpk_sink *s, const char *name, const char *what, wpk_read_fn rd, void *ctx)
{

    uint8_t pre[NPY_PREAMBLE_V2];
    char msg[400];
    long got = rd(ctx, pre, sizeof pre);
    if (got < 0)
        return (int)-got;
    uint64_t hend;
    if (npy_header_extent(pre, (size_t)got, &hend, msg, sizeof msg))
        return wpk_sink_fail(s, WPACK_E_INPUT, "%s: %s", what, msg);
    if (hend < (uint64_t)got)
        return wpk_sink_fail(s, WPACK_E_INPUT, "%s: header shorter than its preamble", what);
    /* sized to the header now, to the data (at most a PIECE) once parsed:
     * 4 MiB per member, 70,000 empty members of a 78 KB .tar.xz, kept an
     * ASan build in mmap/munmap for 10 minutes (1.5 s without) */
    uint8_t *buf = malloc((size_t)hend);
    if (!buf)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    memcpy(buf, pre, (size_t)got);
    int rc = WPACK_OK;
    for (size_t have = (size_t)got; have < hend;) {
        long k = rd(ctx, buf + have, (size_t)hend - have);
        if (k < 0) {
            rc = (int)-k;
            goto out;
        }
        if (k == 0) {
            rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s: truncated inside its header", what);
            goto out;
        }
        have += (size_t)k;
    }
    npy_header h;
    if (npy_parse_header(buf, (size_t)hend, &h, msg, sizeof msg)) {
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s: %s", what, msg);
        goto out;
    }
    size_t need = h.nbytes < PIECE ? (size_t)h.nbytes : PIECE;
    if (need > hend) {
        uint8_t *grown = realloc(buf, need);
        if (!grown) {
            rc = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
            goto out;
        }
        buf = grown;
    }
    unsigned big = 0;
    for (unsigned k = 0; k < h.rank; k++)
        big += h.dims[k] > 1;
    /* an empty array has no order to undo (and a 0-byte spill cannot be
     * mapped: shape (2, 0, 3) in an .npz failed with EINVAL) */
    if (h.fortran_order && big > 1 && h.nbytes) {
        rc = fortran_stream(s, name, what, &h, rd, ctx, buf);
        goto out;
    }
    if ((rc = wpk_sink_begin(s, name, h.dtype, h.rank, h.dims)))
        goto out;
    for (uint64_t left = h.nbytes; left;) {
        size_t want = left < PIECE ? (size_t)left : PIECE, have = 0;
        while (have < want) {
            long k = rd(ctx, buf + have, want - have);
            if (k < 0) {
                rc = (int)-k;
                goto out;
            }
            if (k == 0) {
                rc = wpk_sink_fail(s, WPACK_E_INPUT,
                                   "%s: truncated: %llu of %llu data bytes missing", what,
                                   (unsigned long long)(left - have),
                                   (unsigned long long)h.nbytes);
                goto out;
            }
            have += (size_t)k;
        }
        if (h.byteswap)
            swap_elems(buf, want, h.elem_size);
        if ((rc = wpk_sink_write(s, buf, want)))
            goto out;
        wpk_sink_progress(s, want);
        left -= want;
    }
    uint8_t extra;
    long k = rd(ctx, &extra, 1);
    if (k < 0) {
        rc = (int)-k;
        goto out;
    }
    if (k > 0) {
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s: bytes after the array data", what);
        goto out;
    }
    rc = wpk_sink_end(s);
out:
    free(buf);
    return rc;
}

typedef struct {
    wpk_sink *s;
    int fd;
} fd_reader;

static long read_fd(void *ctx, void *buf, size_t n)
{
    fd_reader *r = ctx;
    for (;;) {
        ssize_t k = read(r->fd, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -(long)wpk_sink_fail(r->s, WPACK_E_IO, "read failed: %s", strerror(errno));
        return (long)k;
    }
}

int npy_sink_pack_fd(wpk_sink *s, const char *name, int fd)
{
    fd_reader r = {.s = s, .fd = fd};
    char what[WPACK_MAX_NAME + 8];
    wpk_fmt(what, sizeof what, "%s.npy", name);
    return wpk_npy_stream(s, name, what, read_fd, &r);
}


/* ------------------------------------------------------------ dispatch */

uint64_t wpk_import_bytes(const char *path, int kind, int follow)
{
    if (kind == WPK_IN_MANIFEST)
        return manifest_input_bytes(path, follow);
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

int wpk_import_file(wpk_sink *s, const char *path, int kind)
{
    switch (kind) {
    case WPK_IN_TORCH:
        return torch_pack_file(s, path);
    case WPK_IN_TORCH_LEGACY:
        return wpk_sink_fail(s, WPACK_E_UNSUPPORTED, "%s", TORCH_LEGACY_ADVICE);
    case WPK_IN_SAFETENSORS:
        return safetensors_pack_file(s, path);
    case WPK_IN_ZIP:
    case WPK_IN_TAR:
        return archive_pack_file(s, path);
    case WPK_IN_MANIFEST:
        return manifest_pack_file(s, path);
    case WPK_IN_GGUF: /* issue 18 */
        return gguf_pack_file(s, path);
    case WPK_IN_IRPA: /* issue 18 */
        return irpa_pack_file(s, path);
    default:
        return wpk_sink_fail(s, WPACK_E_INPUT, "not a recognised input");
    }
}
