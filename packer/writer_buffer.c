/* writer_buffer.c - the writer's output: a buffer in front of the
 * temporary file, with writeback started as it grows. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "writer.h"

static int write_all(wpack_writer *w, const void *p, size_t n)
{
    int err = wpk_write_all(w->fd, p, n);
    if (err) {
        return wpk_wbreak(w, WPACK_E_IO, "%s: write failed: %s", w->shown, strerror(err));
    }
    return WPACK_OK;
}

/* Start writeback of every 32 MiB written, so the final fsync has little
 * left to do and the disk works while we hash and compute stats (not
 * under no_sync: there is no final fsync to help). */
void wpk_out_kick(wpack_writer *w, uint64_t written_to)
{
    if (w->opt.no_sync || written_to - w->kicked < (32u << 20))
        return;
    sync_file_range(w->fd, (off_t)w->kicked, (off_t)(written_to - w->kicked), SYNC_FILE_RANGE_WRITE);
    w->kicked = written_to;
}

int wpk_out_flush(wpack_writer *w)
{
    int rc = write_all(w, w->obuf, w->olen);
    w->olen = 0;
    if (rc == WPACK_OK)
        wpk_out_kick(w, w->pos);
    return rc;
}

int wpk_out(wpack_writer *w, const void *p, size_t n)
{
    if (w->failed)
        return w->errcode;
    /* Large pieces bypass the buffer: no extra copy for tensor data. */
    if (n >= WPK_WRITER_OBUF_SIZE / 2) {
        int rc = wpk_out_flush(w);
        if (rc == WPACK_OK)
            rc = write_all(w, p, n);
        if (rc == WPACK_OK) {
            w->pos += n;
            wpk_out_kick(w, w->pos);
        }
        return rc;
    }
    if (n > WPK_WRITER_OBUF_SIZE - w->olen) {
        int rc = wpk_out_flush(w);
        if (rc)
            return rc;
    }
    memcpy(w->obuf + w->olen, p, n);
    w->olen += n;
    w->pos += n;
    return WPACK_OK;
}

int wpk_out_zeros(wpack_writer *w, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        int rc = wpk_out(w, zeros, k);
        if (rc)
            return rc;
        n -= k;
    }
    return WPACK_OK;
}
