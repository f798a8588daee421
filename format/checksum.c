/* checksum.c - XXH3-64 through Debian's libxxhash (spec: Checksums). */
#include <stdlib.h>
#include <xxhash.h>

#include "internal.h"

uint64_t wpk_xxh3(const void *p, size_t n)
{
    return (uint64_t)XXH3_64bits(p, n);
}

struct wpk_hasher {
    XXH3_state_t *st;
};

wpk_hasher *wpk_hasher_new(void)
{
    wpk_hasher *h = malloc(sizeof *h);
    if (!h)
        return NULL;
    h->st = XXH3_createState();
    if (!h->st) {
        free(h);
        return NULL;
    }
    XXH3_64bits_reset(h->st);
    return h;
}

void wpk_hasher_update(wpk_hasher *h, const void *p, size_t n)
{
    if (n)
        XXH3_64bits_update(h->st, p, n);
}

uint64_t wpk_hasher_digest(const wpk_hasher *h)
{
    return (uint64_t)XXH3_64bits_digest(h->st);
}

void wpk_hasher_reset(wpk_hasher *h)
{
    XXH3_64bits_reset(h->st);
}

void wpk_hasher_free(wpk_hasher *h)
{
    if (!h)
        return;
    XXH3_freeState(h->st);
    free(h);
}
