/*
 * emit_int.h - what the emitter's files share (emit.c the edits and the
 * document, emit_out.c the output, emit_modes.c the table of emit modes,
 * emit_inline.c the resource keys and blobs of --emit inline).
 */
#ifndef WPACK_RESOLVER_EMIT_INT_H
#define WPACK_RESOLVER_EMIT_INT_H

#include "resolve_int.h"

/* Output goes through a staging buffer of up to this size: one write call
 * per 256 KiB instead of two a global (the buffer stays in L2 cache); a
 * small document gets a small one. */
#define WPK_STAGE_BYTES ((size_t)256 << 10)
#define WPK_STAGE_MIN ((size_t)16 << 10)

typedef struct wpk_out {
    wpk_emitter *e;
    int rc;
    char *err;
    size_t errlen;
    char *buf;                  /* staging buffer */
    size_t used, cap;
    /* 1: a dry run that counts the output's bytes into `counted` (saturating)
     * instead of writing them: input runs and blobs are only added up */
    int counting;
    uint64_t counted;
} wpk_out;

/* Add n to a dry run's count (saturating at UINT64_MAX). */
void wpk_emit_count(wpk_out *o, uint64_t n);

/* Write n bytes (through the buffer); returns o->rc (0 or a wpack_error,
 * message in o->err). */
int wpk_emit_out(wpk_out *o, const void *p, size_t n);
int wpk_emit_flush(wpk_out *o);
/* Room for n bytes at o->buf + o->used (the caller adds what it wrote to
 * o->used), or NULL: failed already, or n larger than the buffer. */
char *wpk_emit_room(wpk_out *o, size_t n);
/* Copy input bytes [off, off+n) through: large runs by copy_file_range
 * when the sink can, else by write. */
int wpk_emit_input(wpk_out *o, size_t off, size_t n);
/* Write one edit at *pos: the input up to off, then text; *pos moves past
 * the len replaced bytes. */
void wpk_emit_edit(wpk_out *o, size_t *pos, size_t off, size_t len, const char *text,
                   size_t text_len);

/* ---------------------------------------------------------- emit_inline.c */

/* --emit inline: a resource key for every item but splats (shared
 * entries share one), then after the document the new {-# dialect_resources
 * #-} section with each entry's bytes. *state is the mode's own. The value
 * of an item: dense_resource<KEY>, or a splat entry's dense<"0xFILL">. */
void wpk_inline_value(wpk_strbuf *a, const wpk_emitter *e, const wpk_plan_item *it);
int wpk_inline_prepare(wpk_emitter *e, void **state);
void wpk_inline_append(wpk_out *o, void *state);
void wpk_inline_release(void *state);

#endif
