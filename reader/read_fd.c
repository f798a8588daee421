/* read_fd.c - wpack_read_to_fd: an entry's bytes to a file (extract,
 * export). Stored bytes of an archive file move file to file inside the
 * kernel (copy_file_range) where the archive's and the output's offsets
 * line up in a page (wpk_pages_line_up, format/write_all.c: the rule the
 * writer follows too); when they must be checked, what landed in the
 * output is read back and hashed, so the check covers exactly the bytes the
 * caller gets even if the archive file changed under us. Where the offsets
 * do not line up (nearly every .npy extracted: its data starts 128 bytes
 * in; most safetensors tensors), a step is read with pread, hashed and
 * written: the kernel's copy of split pages cost more system time than
 * writing the step just read, still in cache, and the bytes checked are
 * again the bytes written. Nothing here touches the mapping, and what the
 * stream path reads from it is dropped from the process as it goes: memory
 * stays flat whatever the size.
 *
 * Why read back, and in small steps: hashing the source before copying it
 * (a pread, or the mapping) checks bytes that copy_file_range then reads
 * again from the archive file, so a file changed in between would hand the
 * caller bytes nobody checked. Reading back a STEP that was just copied
 * finds it in the CPU's cache (the kernel's memcpy just wrote it), so the
 * check costs one cached pread and XXH3 of it: with 8 MiB steps the
 * read-back missed the cache and took a fifth of extract's time. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "reader.h"

#define COPY_STEP (256u << 10) /* bytes per copy_file_range call: read back while in cache */
#define COPY_MIN (64u << 10) /* below this the reopen and syscalls cost more than they save */
#define BUF_BYTES (256u << 10) /* read-back / read-write buffer */

typedef struct {
    const wpack_archive *ar;
    const wpack_tensor *t;
    int in, out;
    uint64_t in_off;    /* next byte of the archive file */
    uint64_t out_pos;   /* out's file offset (for reading back) */
    wpk_hasher *h;      /* NULL: not checking */
    uint8_t *buf;
    int use_range;
} copier;

static int put_failed(const wpack_archive *ar, const wpack_tensor *t, int err)
{
    char q[256];
    wpk_quote(q, sizeof q, t->name, t->name_len);
    wpk_fail((wpack_archive *)ar, WPACK_E_IO, "tensor '%s': writing its bytes failed: %s", q,
             strerror(err));
    errno = err;
    return WPACK_E_IO;
}

/* The read-write path for n bytes: pread, hash, write. */
static int copy_rw(copier *c, uint64_t n)
{
    while (n) {
        size_t k = n < BUF_BYTES ? (size_t)n : BUF_BYTES;
        int e = wpk_pread_all(c->in, c->buf, k, c->in_off);
        if (e) {
            char q[256];
            wpk_quote(q, sizeof q, c->t->name, c->t->name_len);
            return wpk_fail((wpack_archive *)c->ar, WPACK_E_IO,
                            "tensor '%s': reading the archive file at %llu failed: %s", q,
                            (unsigned long long)c->in_off,
                            e == EIO || e == ENODATA ? "it ended early or could not be read" : strerror(e));
        }
        if (c->h)
            wpk_hasher_update(c->h, c->buf, k);
        if ((e = wpk_write_all(c->out, c->buf, k)))
            return put_failed(c->ar, c->t, e);
        c->in_off += k;
        c->out_pos += k;
        n -= k;
    }
    return WPACK_OK;
}

/* n bytes with copy_file_range (then read back and hashed when checking)
 * while the offsets line up in a page, the rest by copy_rw: where they do
 * not (both move by the same count: a tensor that starts off the line
 * stays off it), or once the kernel refuses or copies nothing. */
static int copy_range(copier *c, uint64_t n)
{
    while (n && c->use_range && wpk_pages_line_up(c->in_off, c->out_pos)) {
        size_t want = n < COPY_STEP ? (size_t)n : COPY_STEP;
        int64_t k = wpk_copy_range_step(c->in, c->in_off, c->out, want);
        if (k < 0)
            return put_failed(c->ar, c->t, (int)-k);
        if (k == 0) { /* refused, or the archive file ended: read/write says which */
            c->use_range = 0;
            break;
        }
        for (uint64_t done = 0; c->h && done < (uint64_t)k;) {
            size_t m = (uint64_t)k - done < BUF_BYTES ? (size_t)((uint64_t)k - done) : BUF_BYTES;
            int e = wpk_pread_all(c->out, c->buf, m, c->out_pos + done);
            if (e)
                return put_failed(c->ar, c->t, e == ENODATA ? EIO : e);
            wpk_hasher_update(c->h, c->buf, m);
            done += m;
        }
        c->in_off += (uint64_t)k;
        c->out_pos += (uint64_t)k;
        n -= (uint64_t)k;
    }
    return copy_rw(c, n);
}

/* The archive file holding t's bytes, reopened by path: its fd, or -1 when
 * it is gone or is another file now (then the mapping serves). */
static int reopen(const wpack_archive *h)
{
    if (!h || !h->map || !h->path)
        return -1;
    struct stat st;
    int code;
    char msg[300];
    int fd = wpk_open_input(AT_FDCWD, h->path, 0, &st, &code, msg, sizeof msg);
    if (fd >= 0 && ((uint64_t)st.st_dev != h->file_dev || (uint64_t)st.st_ino != h->file_ino ||
                    (uint64_t)st.st_size < h->len)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int copy_direct(const wpack_archive *ar, const wpack_tensor *t, const wpack_archive *h,
                       int in, int fd, unsigned flags, int check)
{
    copier c = {ar, t, in, fd, (uint64_t)((const uint8_t *)t->data - h->base), 0, NULL, NULL,
                !(flags & WPACK_READ_NO_COPY_RANGE)};
    off_t pos = lseek(fd, 0, SEEK_CUR);
    int mode = fcntl(fd, F_GETFL);
    if (pos < 0 || mode < 0 || (check && (mode & O_ACCMODE) != O_RDWR))
        c.use_range = 0; /* not a file we can copy into, or read back from */
    c.out_pos = pos < 0 ? 0 : (uint64_t)pos;
    if (!(c.buf = malloc(BUF_BYTES)) || (check && !(c.h = wpk_hasher_new()))) {
        free(c.buf);
        return wpk_fail((wpack_archive *)ar, WPACK_E_NOMEM, "out of memory");
    }
    int rc = c.use_range ? copy_range(&c, t->nbytes) : copy_rw(&c, t->nbytes);
    if (rc == WPACK_OK && c.h) {
        uint64_t got = wpk_hasher_digest(c.h);
        if (got != t->decoded_checksum)
            rc = wpk_bad_hash(ar, t, got);
        else
            wpk_checked_set(ar, wpk_owner_of(t), WPACK_OK);
    }
    wpk_hasher_free(c.h);
    free(c.buf);
    return rc;
}

/* The stream path: pieces to fd; those that are views of a file's mapping
 * (h's) leave the process once written, and so do a zstd tensor's stored
 * bytes of the chunks already handed out. */
typedef struct {
    const wpack_archive *h;
    int fd, err;
    long page;
    const uint8_t *zbase, *seek; /* zstd in h's map: stored bytes, seek table */
    uint64_t chunk, nchunks, done;
} put_ctx;

#define RELEASE_MIN ((size_t)256 << 10)

static void release(const wpack_archive *h, const uint8_t *p, size_t n, long page)
{
    const uint8_t *m = h ? h->map : NULL;
    /* not for small pieces: a system call per 4 KiB tensor was a fifth of
     * extracting 40k of them, and their pages are few */
    if (!m || page <= 0 || p < m || p >= m + h->map_len || n < RELEASE_MIN)
        return;
    uint64_t a = (uint64_t)(p - m) / (uint64_t)page * (uint64_t)page;
    uint64_t b = (uint64_t)(p - m) + n;
    if (b > h->map_len)
        b = h->map_len;
    madvise((void *)(m + a), (size_t)(b - a), MADV_DONTNEED); /* refaults from the cache */
}

static int put_piece(void *u, const void *p, size_t n)
{
    put_ctx *c = u;
    if ((c->err = wpk_write_all(c->fd, p, n)))
        return WPACK_E_IO;
    c->done += n;
    if (!c->zbase) {
        release(c->h, p, n, c->page);
    } else if (c->done / c->chunk) { /* chunks [0, k) are out: their stored bytes too */
        uint64_t k = c->done / c->chunk < c->nchunks ? c->done / c->chunk : c->nchunks;
        uint64_t end = wpk_ld64(c->seek + 8 * (k - 1)) & ~WPK_CHUNK_RAW;
        release(c->h, c->zbase, (size_t)end, c->page);
    }
    return 0;
}

int wpack_read_to_fd(const wpack_archive *ar, uint64_t i, int fd, unsigned flags)
{
    if (!ar || i >= ar->info.entry_count)
        return WPACK_E_NOT_FOUND;
    if (fd < 0 || (flags & ~(WPACK_READ_VERIFY | WPACK_READ_NO_COPY_RANGE)))
        return wpk_fail((wpack_archive *)ar, WPACK_E_INVALID_ARGUMENT,
                        "wpack_read_to_fd: fd %d or flags %#x", fd, flags);
    wpack_tensor t;
    wpk_fill_tensor(ar, i, &t);
    uint64_t owner = wpk_owner_of(&t);
    int verify = (flags & WPACK_READ_VERIFY) || (ar->flags & WPACK_OPEN_VERIFY_READS);
    int known = wpk_known_check(ar, &t);
    if (known > 0) /* found bad before: refused, verifying or not */
        return wpk_failed_before(ar, &t, known);
    if (!verify)
        known = WPACK_OK; /* below: -1 asks for the hash */
    const wpack_archive *h = wpk_holder(ar, &t);
    /* a checked bool tensor streams: each byte is checked to be 0 or 1 */
    int bools = verify && t.dtype == WPACK_DTYPE_BOOL;
    if (t.codec == WPACK_CODEC_NONE && t.data && t.nbytes >= COPY_MIN && !bools) {
        int in = reopen(h);
        if (in >= 0) {
            int rc = copy_direct(ar, &t, h, in, fd, flags, known < 0);
            close(in);
            return rc;
        }
    }
    put_ctx c = {h, fd, 0, sysconf(_SC_PAGESIZE), NULL, NULL, 1, 0, 0};
    if (t.codec == WPACK_CODEC_ZSTD && h && h->map && t.chunk_size) {
        /* validated at open: the seek table's ends lie inside the stored bytes */
        const uint8_t *r = wpk_rec(ar, WPK_SEC_ENTRIES, owner, WPK_ENTRY_SIZE);
        uint64_t off = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF), len = wpk_ld64(r + WPK_E_STORED_LEN_OFF);
        if (wpk_in_bounds(off, len, h->map_len)) {
            c.zbase = (const uint8_t *)h->map + off;
            c.seek = ar->sec[WPK_SEC_AUX] + wpk_ld64(r + WPK_E_AUX_OFF) + 8;
            c.chunk = t.chunk_size;
            c.nchunks = (t.nbytes + t.chunk_size - 1) / t.chunk_size;
        }
    }
    int rc = wpk_check_stream(ar, i, put_piece, &c,
                              (known < 0 ? WPK_CHECK_HASH : 0) | (bools ? WPK_CHECK_BOOL : 0));
    if (rc == WPACK_E_IO && c.err)
        return put_failed(ar, &t, c.err);
    return rc;
}
