/* nameset.h - a hash set of names (stored elsewhere) for duplicate checks. */
#ifndef WPACK_FORMAT_NAMESET_H
#define WPACK_FORMAT_NAMESET_H

#include <stdint.h>

/* Each slot holds item+1 (0 = empty); the caller's get() gives an item's bytes. */
typedef struct {
    uint64_t *slots;
    uint64_t cap, used;
} wpk_nameset;

typedef const uint8_t *(*wpk_nameset_get)(void *ctx, uint64_t item, uint64_t *len);

/* Find name; returns 1 and *item when present. */
int wpk_nameset_find(const wpk_nameset *s, wpk_nameset_get get, void *ctx, const uint8_t *name,
                     uint64_t len, uint64_t *item);
/* Insert item (whose bytes are name); 0 when memory runs out. */
int wpk_nameset_insert(wpk_nameset *s, wpk_nameset_get get, void *ctx, const uint8_t *name,
                       uint64_t len, uint64_t item);
void wpk_nameset_free(wpk_nameset *s);

#endif
