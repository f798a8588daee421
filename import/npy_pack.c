/*
 * npy_pack.c - stream one .npy file into a wpack writer as one tensor.
 *
 * C order: pread in chunks into one buffer, byte-swap in place, write; or,
 * with nothing to swap, file to file through the writer (pack_c_direct).
 * Fortran order: the file is mapped and transposed into the same buffer a
 * band of output rows at a time (see pack_fortran), so memory is the buffer
 * plus page cache, whatever the array size.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* pread, O_CLOEXEC under plain -std=c11 */
#endif
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

#define NPY_PROGRESS_STEP (4u << 20)

typedef struct packer {
    wpack_writer *w;
    const char *qpath;          /* quoted path for messages */
    const npy_header *h;
    uint8_t *buf;
    size_t buf_bytes;
    npy_progress_fn progress;
    void *user;
    uint64_t done, reported;
    char *err;
    size_t errlen;
} packer;

static void swap_elems(uint8_t *p, size_t nbytes, size_t esize)
{
    /* memcpy keeps this free of aliasing and alignment assumptions; compilers
     * turn each step into one load, bswap and store. */
    size_t i = 0;
    switch (esize) {
    case 2:
        for (; i + 2 <= nbytes; i += 2) {
            uint16_t v;
            memcpy(&v, p + i, 2);
            v = __builtin_bswap16(v);
            memcpy(p + i, &v, 2);
        }
        break;
    case 4:
        for (; i + 4 <= nbytes; i += 4) {
            uint32_t v;
            memcpy(&v, p + i, 4);
            v = __builtin_bswap32(v);
            memcpy(p + i, &v, 4);
        }
        break;
    case 8:
        for (; i + 8 <= nbytes; i += 8) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            v = __builtin_bswap64(v);
            memcpy(p + i, &v, 8);
        }
        break;
    default:
        break;
    }
}

static int writer_failed(packer *pk, int rc)
{
    const char *m = wpack_writer_errmsg(pk->w);
    wpk_fmt(pk->err, pk->errlen, "%s: %s", pk->qpath, m && *m ? m : wpack_error_name(rc));
    return rc;
}

/* Hand nbytes of pk->buf to the writer (swapped first when needed). */
static int emit(packer *pk, size_t nbytes)
{
    if (pk->h->byteswap)
        swap_elems(pk->buf, nbytes, pk->h->elem_size);
    int rc = wpack_writer_write(pk->w, pk->buf, nbytes);
    if (rc)
        return writer_failed(pk, rc);
    pk->done += nbytes;
    if (pk->progress &&
        (pk->done - pk->reported >= NPY_PROGRESS_STEP || pk->done == pk->h->nbytes)) {
        pk->progress(pk->user, pk->done);
        pk->reported = pk->done;
    }
    return WPACK_OK;
}

/* pread exactly n bytes at off; a short file is an error (it shrank). */
static int read_at(packer *pk, int fd, void *dst, size_t n, uint64_t off)
{
    int e = wpk_pread_all(fd, dst, n, off);
    if (e == ENODATA) {
        wpk_fmt(pk->err, pk->errlen, "%s: file shrank while being read (it ends before byte %llu)",
                pk->qpath, (unsigned long long)(off + n));
        return WPACK_E_IO;
    }
    if (e) {
        wpk_fmt(pk->err, pk->errlen, "%s: read at byte %llu failed: %s", pk->qpath,
                (unsigned long long)off, strerror(e));
        return WPACK_E_IO;
    }
    return WPACK_OK;
}

static int pack_c(packer *pk, int fd)
{
    uint64_t left = pk->h->nbytes, off = pk->h->data_offset;
    while (left) {
        size_t n = left < pk->buf_bytes ? (size_t)left : pk->buf_bytes;
        int rc = read_at(pk, fd, pk->buf, n, off);
        if (rc)
            return rc;
        rc = emit(pk, n);
        if (rc)
            return rc;
        off += n;
        left -= n;
    }
    return WPACK_OK;
}

/* C order, native little-endian: hand the writer the file (fd) and the
 * offsets alone; it reads each step into a buffer that stays in cache,
 * hashes it there and writes it (or has the kernel copy it where the file's
 * and the archive's offsets line up; writer_copy.c says why, and why not
 * from a mapping). Memory stays flat whatever the file size. */
static int pack_c_direct(packer *pk, int fd)
{
    uint64_t off = pk->h->data_offset, end = off + pk->h->nbytes;
    while (off < end) {
        size_t n = end - off < pk->buf_bytes ? (size_t)(end - off) : pk->buf_bytes;
        int rc = wpack_writer_write_from_fd(pk->w, NULL, fd, off, n);
        if (rc)
            return writer_failed(pk, rc);
        off += n;
        pk->done += n;
        if (pk->progress &&
            (pk->done - pk->reported >= NPY_PROGRESS_STEP || pk->done == pk->h->nbytes)) {
            pk->progress(pk->user, pk->done);
            pk->reported = pk->done;
        }
    }
    return WPACK_OK;
}

/* count elements of esize bytes: contiguous at src, dst_stride apart at dst. */
static void scatter(uint8_t *dst, size_t dst_stride, const uint8_t *src, uint64_t count,
                    size_t esize)
{
    switch (esize) {
    case 1:
        for (uint64_t i = 0; i < count; i++)
            dst[i * dst_stride] = src[i];
        break;
    case 2:
        for (uint64_t i = 0; i < count; i++)
            memcpy(dst + i * dst_stride, src + 2 * i, 2);
        break;
    case 4:
        for (uint64_t i = 0; i < count; i++)
            memcpy(dst + i * dst_stride, src + 4 * i, 4);
        break;
    default:
        for (uint64_t i = 0; i < count; i++)
            memcpy(dst + i * dst_stride, src + esize * i, esize);
        break;
    }
}

/*
 * Fortran order to C order. Element (i0, ..., i{r-1}) is at
 *     i0 + d0 * F(i1, ..., i{r-1})
 * in the file, F being the Fortran offset within the shape (d1, ...). The
 * output, in C order, is d0 rows of cols = d1 x ... x d{r-1} elements. A band
 * of h consecutive rows fills the buffer: for each column (walked in C order
 * by an odometer that keeps F up to date) the h elements of the band are
 * contiguous in the file, so the mapping is read in runs rather than one
 * element per page. When one row is bigger than the buffer, h is 1 and the
 * row goes out in pieces (then the reads are single elements, d0 apart).
 */
static int pack_fortran(packer *pk, const uint8_t *src)
{
    const npy_header *h = pk->h;
    const size_t es = h->elem_size;
    const unsigned r = h->rank;
    const uint64_t d0 = h->dims[0], cols = h->nelems / d0;
    const uint64_t buf_elems = pk->buf_bytes / es;
    uint64_t t[WPACK_MAX_RANK], idx[WPACK_MAX_RANK];

    /* F strides within (d1, ...): bounded by nelems, so no overflow. */
    t[1] = 1;
    for (unsigned k = 2; k < r; k++)
        t[k] = t[k - 1] * h->dims[k - 1];

    uint64_t band = cols <= buf_elems ? buf_elems / cols : 1;
    uint64_t piece = cols <= buf_elems ? cols : buf_elems;
    for (uint64_t a = 0; a < d0; a += band) {
        uint64_t hh = d0 - a < band ? d0 - a : band;
        uint64_t f = 0;
        for (unsigned k = 1; k < r; k++)
            idx[k] = 0;
        for (uint64_t q0 = 0; q0 < cols; q0 += piece) {
            uint64_t pw = cols - q0 < piece ? cols - q0 : piece;
            for (uint64_t j = 0; j < pw; j++) {
                scatter(pk->buf + j * es, (size_t)(pw * es), src + (a + d0 * f) * es, hh, es);
                /* Next column in C order: the last index moves fastest. */
                unsigned k = r - 1;
                idx[k]++;
                f += t[k];
                while (k > 1 && idx[k] == h->dims[k]) {
                    f -= t[k] * h->dims[k];
                    idx[k] = 0;
                    k--;
                    idx[k]++;
                    f += t[k];
                }
            }
            int rc = emit(pk, (size_t)(hh * pw * es));
            if (rc)
                return rc;
        }
    }
    return WPACK_OK;
}

/* Fortran order is C order already when at most one dim is above 1. */
static int needs_transpose(const npy_header *h)
{
    unsigned big = 0;
    for (unsigned k = 0; k < h->rank; k++)
        big += h->dims[k] > 1;
    return h->fortran_order && h->nelems > 0 && big > 1;
}

int npy_pack_fd(wpack_writer *w, const char *name, const char *path, int fd,
                const struct stat *st, npy_progress_fn progress, void *user, size_t buffer_bytes,
                char *err, size_t errlen)
{
    char qpath[512], msg[400];
    wpk_quote(qpath, sizeof qpath, path, strlen(path));
    packer pk = {.w = w, .qpath = qpath, .progress = progress, .user = user, .err = err,
                 .errlen = errlen};
    npy_header h;
    pk.h = &h;
    if (errlen)
        err[0] = 0;
    int rc = WPACK_OK;
    uint8_t *hbuf = NULL;
    void *map = MAP_FAILED;
    size_t map_len = 0;
    uint64_t size = (uint64_t)st->st_size;

    /* The preamble says how long the header is; then read and parse it. */
    uint8_t pre[NPY_PREAMBLE_V2];
    size_t pre_n = size < sizeof pre ? (size_t)size : sizeof pre;
    uint64_t hend;
    if ((rc = read_at(&pk, fd, pre, pre_n, 0)))
        goto out;
    if ((rc = npy_header_extent(pre, pre_n, &hend, msg, sizeof msg))) {
        wpk_fmt(err, errlen, "%s: %s", qpath, msg);
        goto out;
    }
    if (hend > size) {
        wpk_fmt(err, errlen, "%s: file is %llu bytes, header needs %llu", qpath,
                (unsigned long long)size, (unsigned long long)hend);
        rc = WPACK_E_INPUT;
        goto out;
    }
    hbuf = malloc((size_t)hend);
    if (!hbuf) {
        wpk_fmt(err, errlen, "%s: out of memory for a %llu-byte header", qpath,
                (unsigned long long)hend);
        rc = WPACK_E_NOMEM;
        goto out;
    }
    if ((rc = read_at(&pk, fd, hbuf, (size_t)hend, 0)))
        goto out;
    if ((rc = npy_parse_header(hbuf, (size_t)hend, &h, msg, sizeof msg))) {
        wpk_fmt(err, errlen, "%s: %s", qpath, msg);
        goto out;
    }
    free(hbuf);
    hbuf = NULL;

    uint64_t need;
    if (!wpk_add(h.data_offset, h.nbytes, &need)) {
        wpk_fmt(err, errlen, "%s: shape overflows: header and data exceed 2^64 bytes", qpath);
        rc = WPACK_E_INPUT;
        goto out;
    }
    if (size != need) {
        if (size < need)
            wpk_fmt(err, errlen, "%s: file is %llu bytes, header needs %llu (truncated)", qpath,
                    (unsigned long long)size, (unsigned long long)need);
        else
            wpk_fmt(err, errlen, "%s: file is %llu bytes, header needs %llu: %llu bytes of "
                    "trailing garbage after the array", qpath, (unsigned long long)size,
                    (unsigned long long)need, (unsigned long long)(size - need));
        rc = WPACK_E_INPUT;
        goto out;
    }

    int transpose = needs_transpose(&h);
    /* Plain C order that needs no swapping goes file to file (pack_c_direct);
     * the transpose reads a mapping. */
    int direct_c = !transpose && !h.byteswap && h.nbytes > 0;
    if (transpose) {
        if (size > SIZE_MAX) {
            wpk_fmt(err, errlen, "%s: %llu bytes are too many to map", qpath,
                    (unsigned long long)size);
            rc = WPACK_E_NOMEM;
            goto out;
        }
        /* Truncating the file while it is mapped would SIGBUS us; that is
         * the caller's file and a risk every mmap reader takes. */
        map_len = (size_t)size;
        map = mmap(NULL, map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            wpk_fmt(err, errlen, "%s: mmap of %llu bytes failed: %s", qpath,
                    (unsigned long long)size, strerror(errno));
            rc = WPACK_E_IO;
            goto out;
        }
    }
    if (h.nbytes) {
        pk.buf_bytes = buffer_bytes & ~(size_t)7;
        if (pk.buf_bytes < 8)
            pk.buf_bytes = 8;
        if (pk.buf_bytes > h.nbytes)
            pk.buf_bytes = (size_t)h.nbytes;
        pk.buf = malloc(pk.buf_bytes);
        if (!pk.buf) {
            wpk_fmt(err, errlen, "%s: out of memory for a %zu-byte buffer", qpath, pk.buf_bytes);
            rc = WPACK_E_NOMEM;
            goto out;
        }
    }

    rc = wpack_writer_begin_tensor(w, name, h.dtype, h.rank, h.dims);
    if (rc) {
        writer_failed(&pk, rc);
        goto out;
    }
    if (transpose)
        rc = pack_fortran(&pk, (const uint8_t *)map + h.data_offset);
    else if (direct_c)
        rc = pack_c_direct(&pk, fd);
    else
        rc = pack_c(&pk, fd);
    if (rc)
        goto out;
    if ((rc = wpack_writer_end_tensor(w)))
        writer_failed(&pk, rc);
    else if (progress && h.nbytes == 0)
        progress(user, 0);

out:
    if (map != MAP_FAILED)
        munmap(map, map_len);
    free(pk.buf);
    free(hbuf);
    return rc;
}

int npy_pack_file_buffered(wpack_writer *w, const char *name, const char *path,
                           npy_progress_fn progress, void *user, size_t buffer_bytes,
                           char *err, size_t errlen)
{
    /* Non-blocking, regular files only: a FIFO named NAME.npy must not hang. */
    char msg[400];
    struct stat st;
    int code, fd = wpk_open_input(AT_FDCWD, path, 0, &st, &code, msg, sizeof msg);
    if (fd >= 0 && (code = wpk_refuse_output(w, fd, path, err, errlen))) {
        close(fd);
        return code;
    }
    if (fd < 0) {
        char qpath[512];
        wpk_quote(qpath, sizeof qpath, path, strlen(path));
        wpk_fmt(err, errlen, "%s: %s", qpath, msg);
        return code;
    }
    int rc = npy_pack_fd(w, name, path, fd, &st, progress, user, buffer_bytes, err, errlen);
    close(fd);
    return rc;
}

int npy_pack_file(wpack_writer *w, const char *name, const char *path, npy_progress_fn progress,
                  void *user, char *err, size_t errlen)
{
    return npy_pack_file_buffered(w, name, path, progress, user, NPY_BUFFER_BYTES, err, errlen);
}
