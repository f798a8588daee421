/* nameset.c - open addressing with linear probing, grown at half load. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "nameset.h"

static uint64_t slot_of(const wpk_nameset *s, const uint8_t *name, uint64_t len)
{
    return wpk_xxh3(name, (size_t)len) & (s->cap - 1);
}

int wpk_nameset_find(const wpk_nameset *s, wpk_nameset_get get, void *ctx, const uint8_t *name,
                     uint64_t len, uint64_t *item)
{
    if (!s->cap)
        return 0;
    for (uint64_t i = slot_of(s, name, len);; i = (i + 1) & (s->cap - 1)) {
        uint64_t v = s->slots[i];
        if (!v)
            return 0;
        uint64_t l;
        const uint8_t *p = get(ctx, v - 1, &l);
        if (l == len && memcmp(p, name, (size_t)len) == 0) {
            *item = v - 1;
            return 1;
        }
    }
}

static int grow(wpk_nameset *s, wpk_nameset_get get, void *ctx)
{
    uint64_t cap = s->cap ? s->cap * 2 : 1024;
    uint64_t *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots)
        return 0;
    wpk_nameset n = {slots, cap, s->used};
    for (uint64_t i = 0; i < s->cap; i++) {
        uint64_t v = s->slots[i];
        if (!v)
            continue;
        uint64_t l;
        const uint8_t *p = get(ctx, v - 1, &l);
        uint64_t j = slot_of(&n, p, l);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = v;
    }
    free(s->slots);
    *s = n;
    return 1;
}

int wpk_nameset_insert(wpk_nameset *s, wpk_nameset_get get, void *ctx, const uint8_t *name,
                       uint64_t len, uint64_t item)
{
    if ((s->used + 1) * 2 > s->cap && !grow(s, get, ctx))
        return 0;
    uint64_t i = slot_of(s, name, len);
    while (s->slots[i])
        i = (i + 1) & (s->cap - 1);
    s->slots[i] = item + 1;
    s->used++;
    return 1;
}

void wpk_nameset_free(wpk_nameset *s)
{
    free(s->slots);
    s->slots = NULL;
    s->cap = s->used = 0;
}
