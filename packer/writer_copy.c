/* writer_copy.c - tensor bytes that go to the archive unchanged, moved from
 * an input file with copy_file_range: the kernel copies them from page
 * cache to page cache (or shares the extents), instead of write() copying
 * them from user buffers, which was most of `create`'s time. The checksum
 * and weight stats still read every byte, a step at a time just before
 * that step is copied (on an executor: while it is copied, writer_par.c).
 *
 * Where the caller gives no bytes (data NULL), each step is read with pread
 * into a buffer that stays in the core's cache (STEP bytes) and hashed
 * there. Measured on the 2-CPU EPYC VM (1 GiB, page cache warm, bench/pack
 * README "Where the time goes"): XXH3 over a mapping of the page cache ran
 * at ~3.5 GB/s (user 0.30 s a GiB: each first touch of a 4 KiB page is a
 * fault and a TLB miss), over a pread buffer in L2 at tens of GB/s (user
 * 0.02 s, plus 0.05 s of kernel memcpy for the pread). So: pread, hash,
 * then out, a cache-sized step at a time. Out is copy_file_range where the
 * input's and the archive's offsets line up in a page (wpk_pages_line_up), and
 * write() of the step just hashed elsewhere, which is nearly every tensor
 * (the archive's data is page-aligned, an input's seldom is): there the
 * kernel's copy cost more than writing the cached step (below). An earlier
 * measurement, pread + write() costing 3-4x the system time, was of write()
 * through the writer's buffer from 4 MiB reads, out of cache. The bytes
 * written are the bytes hashed; copy_file_range copies the file's bytes
 * again: if the file changes between the two, the archive's checksum
 * disagrees with its bytes and `wpack verify` (or any checked read) says
 * so; the same holds for a caller's mapping.
 *
 * Without weight stats, an executor (-j N) is not used. Overlapping the
 * read + hash with the kernel's copy on two pool items was tried twice and
 * measured on the shared 2-CPU VM: per 256 KiB step the fork-join cost more
 * than the ~0.07 s a GiB it could hide (bench/pack README "Where the time
 * goes"); per 4 MiB piece (copy || pread + hash, 4 GiB GGUF, --no-sync,
 * medians of 9 interleaved) 1.92-2.06 s against 1.65 s serial, with the
 * pool's idle spin 0 or not: the copy, the hash and the kernel's writeback
 * all want the two CPUs. Hashing a mapping instead of pread (prefaulted
 * with MADV_POPULATE_READ or not) was no faster: 0.50-0.52 s against
 * 0.47 s for 4 GiB. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "writer.h"

#define STEP (256u << 10)     /* bytes read, hashed, then copied per step: stays in L2 */
#define PAR_STEP (4u << 20)   /* the same with weight stats on an executor (writer_par.c) */
#define COPY_MIN (64u << 10)  /* below this the syscalls cost more than they save */

/* n bytes at off of fd into buf; WPACK_OK or a failure on the writer. */
static int read_at(wpack_writer *w, int fd, uint64_t off, uint8_t *buf, size_t n)
{
    int e = wpk_pread_all(fd, buf, n, off);
    if (e)
        return wpk_wfail(w, e == ENODATA ? WPACK_E_SIZE : WPACK_E_IO,
                         "input: read at offset %llu failed: %s", (unsigned long long)off,
                         e == ENODATA ? "the file ended early" : strerror(e));
    return WPACK_OK;
}

int wpk_copy_out(wpack_writer *w, int fd, uint64_t off, const uint8_t *src, size_t n)
{
    while (n && !w->copy_refused && wpk_pages_line_up(off, w->pos)) {
        int64_t k = wpk_copy_range_step(fd, off, w->fd, n);
        if (k < 0)
            return wpk_wbreak(w, WPACK_E_IO, "%s: copying tensor bytes in failed: %s",
                              w->shown, strerror((int)-k));
        if (k == 0) { /* refused, or the input shrank: the bytes we have are the truth */
            w->copy_refused = 1;
            break;
        }
        w->pos += (uint64_t)k;
        off += (uint64_t)k;
        src += k;
        n -= (size_t)k;
    }
    if (n) {
        int err = wpk_write_all(w->fd, src, n);
        if (err)
            return wpk_wbreak(w, WPACK_E_IO, "%s: write failed: %s", w->shown, strerror(err));
        w->pos += n;
    }
    wpk_out_kick(w, w->pos);
    return WPACK_OK;
}

/* Bytes per step: small enough to stay in cache between the hash and the
 * copy; weight stats on an executor want pieces it splits (PAR_MIN). */
static size_t step_bytes(const wpack_writer *w, const wpk_pending_entry *e)
{
    return e->has_acc && wpk_par_executor(w) ? PAR_STEP : STEP;
}

/* The read buffer, kept for the writer's life (n <= PAR_STEP + 8). */
static uint8_t *step_buf(wpack_writer *w, size_t n)
{
    if (w->copy_buf_len < n) {
        free(w->copy_buf);
        w->copy_buf_len = 0;
        if (!(w->copy_buf = malloc(n)))
            return NULL;
        w->copy_buf_len = n;
    }
    return w->copy_buf;
}

/* The ordinary path: wpack_writer_write of the bytes (read when data is
 * NULL) through the writer's kept buffer: a malloc per call would be one per
 * piece an importer hands in (and under ASan each freed buffer waits in its
 * quarantine, which held ~256 MiB on a 256 MiB compressed create). */
static int write_plain(wpack_writer *w, const uint8_t *data, int fd, uint64_t off, size_t n)
{
    if (data || !n)
        return wpack_writer_write(w, data, n);
    uint8_t *buf = step_buf(w, n < PAR_STEP ? n : PAR_STEP);
    if (!buf)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    int rc = WPACK_OK;
    for (size_t done = 0; !rc && done < n;) {
        size_t k = n - done < PAR_STEP ? n - done : PAR_STEP;
        rc = read_at(w, fd, off + done, buf, k);
        if (!rc)
            rc = wpack_writer_write(w, buf, k);
        done += k;
    }
    return rc;
}

int wpack_writer_write_from_fd(wpack_writer *w, const void *data, int fd, uint64_t off,
                               size_t nbytes)
{
    if (w->failed)
        return w->errcode;
    if (off > (uint64_t)INT64_MAX - nbytes)
        return wpk_wfail(w, WPACK_E_OVERFLOW, "input offset %llu + %zu bytes overflows",
                         (unsigned long long)off, nbytes);
    /* Cases the fast path does not cover go the ordinary way: a refused
     * call (no tensor), bools (each byte is checked), compressed or
     * sharded output, small pieces, or the caller's choice. */
    wpk_pending_entry *e = w->in_tensor ? &wpk_entries(w)[wpk_entry_count(w) - 1] : NULL;
    if (!e || fd < 0 || w->shards || w->opt.no_copy_range || w->copy_refused ||
        nbytes < COPY_MIN || e->dtype == WPACK_DTYPE_BOOL || wpk_compress_active(w))
        return write_plain(w, data, fd, off, nbytes);
    if (nbytes > w->cur_expected - w->cur_written)
        return wpk_tensor_take(w, e, data, nbytes); /* the size message, nothing taken */
    int rc = wpk_out_flush(w); /* the buffered bytes go first */
    if (rc)
        return rc;
    /* Weight stats fold blocks of WPK_STATS_BLOCK elements counted from the
     * first whole element of each piece: steps that split this piece on
     * that grid (step is a multiple of any float dtype's block bytes; the
     * first step also takes the bytes completing a carried element) give
     * the bits of one piece. */
    size_t step = step_bytes(w, e);
    size_t pre = w->carry_len ? wpack_dtype_size(e->dtype) - w->carry_len : 0;
    uint8_t *buf = data ? NULL : step_buf(w, nbytes < step + pre ? nbytes : step + pre);
    if (!data && !buf)
        return wpk_wfail(w, WPACK_E_NOMEM, "out of memory");
    for (size_t done = 0; !rc && done < nbytes;) {
        size_t lim = done ? step : step + pre;
        size_t k = nbytes - done < lim ? nbytes - done : lim;
        const uint8_t *src = data ? (const uint8_t *)data + done : buf;
        if (!data)
            rc = read_at(w, fd, off + done, buf, k);
        wpk_copy_in ci = {fd, off + done, WPACK_OK, 0};
        w->copy_in = &ci; /* on an executor the copy overlaps the stats */
        if (!rc)
            rc = wpk_tensor_take(w, e, src, k);
        w->copy_in = NULL;
        if (!rc)
            rc = ci.used ? ci.rc : wpk_copy_out(w, fd, off + done, src, k);
        done += k;
    }
    return rc;
}
