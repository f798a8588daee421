/* emit_out.c - the emitter's output: a staging buffer in front of the
 * caller's write function, input runs copied through (copy_file_range for
 * large ones when the sink can), and one edit written after the input
 * before it. */
#include <string.h>

#include "emit_int.h"
#include "internal.h"

static int emit_write_failed(wpk_out *o)
{
    if (o->e->write_error)
        o->e->write_error(o->e->user, o->err, o->errlen);
    else
        wpk_fmt(o->err, o->errlen, "writing the output failed");
    return o->rc = WPACK_E_IO;
}

void wpk_emit_count(wpk_out *o, uint64_t n)
{
    o->counted = o->counted > UINT64_MAX - n ? UINT64_MAX : o->counted + n;
}

int wpk_emit_flush(wpk_out *o)
{
    if (o->counting) {
        wpk_emit_count(o, o->used);
        o->used = 0;
        return o->rc;
    }
    if (!o->rc && o->used && o->e->write(o->e->user, o->buf, o->used))
        emit_write_failed(o);
    o->used = 0;
    return o->rc;
}

int wpk_emit_out(wpk_out *o, const void *p, size_t n)
{
    if (o->rc || !n)
        return o->rc;
    if (o->counting) {
        wpk_emit_count(o, n);
        return 0;
    }
    if (n <= o->cap - o->used) {
        memcpy(o->buf + o->used, p, n);
        o->used += n;
        return 0;
    }
    if (wpk_emit_flush(o))
        return o->rc;
    if (n < o->cap) {
        memcpy(o->buf, p, n);
        o->used = n;
        return 0;
    }
    if (o->e->write(o->e->user, p, n))
        emit_write_failed(o);
    return o->rc;
}

char *wpk_emit_room(wpk_out *o, size_t n)
{
    if (o->rc || n > o->cap || (n > o->cap - o->used && wpk_emit_flush(o)))
        return NULL;
    return o->buf + o->used;
}

int wpk_emit_input(wpk_out *o, size_t off, size_t n)
{
    if (o->rc || !n)
        return o->rc;
    if (o->counting) {
        wpk_emit_count(o, n);
        return 0;
    }
    if (n >= (1u << 20) && o->e->copy_input) {
        if (wpk_emit_flush(o))
            return o->rc;
        int r = o->e->copy_input(o->e->user, off, n);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (o->e->write_error)
                return emit_write_failed(o);
            wpk_fmt(o->err, o->errlen, "copying the input to the output failed");
            return o->rc = WPACK_E_IO;
        }
    }
    return wpk_emit_out(o, o->e->doc->buf + off, n);
}

void wpk_emit_edit(wpk_out *o, size_t *pos, size_t off, size_t len, const char *text,
                       size_t text_len)
{
    if (o->rc)
        return;
    if (off < *pos) {
        wpk_fmt(o->err, o->errlen, "internal error: overlapping edits at byte %zu", off);
        o->rc = WPACK_E_STATE;
        return;
    }
    wpk_emit_input(o, *pos, off - *pos);
    wpk_emit_out(o, text, text_len);
    *pos = off + len;
}
