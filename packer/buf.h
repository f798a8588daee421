/* buf.h - a growable byte buffer for the writer's in-memory index parts. */
#ifndef WPACK_PACKER_BUF_H
#define WPACK_PACKER_BUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t len, cap;
} wpk_buf;

/* Make room for n more bytes; 0 when memory runs out. */
static inline int wpk_buf_reserve(wpk_buf *b, size_t n)
{
    if (n <= b->cap - b->len)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2)
            return 0;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return 0;
    b->p = p;
    b->cap = cap;
    return 1;
}

static inline int wpk_buf_append(wpk_buf *b, const void *data, size_t n)
{
    if (!wpk_buf_reserve(b, n))
        return 0;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    return 1;
}

/* Append n zero bytes, returning where they start (or SIZE_MAX). */
static inline size_t wpk_buf_zeros(wpk_buf *b, size_t n)
{
    if (!wpk_buf_reserve(b, n))
        return SIZE_MAX;
    size_t at = b->len;
    if (n)
        memset(b->p + at, 0, n);
    b->len += n;
    return at;
}

static inline void wpk_buf_free(wpk_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

#endif
