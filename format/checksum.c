/* checksum.c - XXH3-64 through Debian's libxxhash (spec: Checksums). */
#include <stdlib.h>
#include <xxhash.h>

#include "internal.h"

/* Debian's shared libxxhash (amd64) also exports the entry points of
 * xxhash's xxh_x86dispatch.c, which pick AVX2 / AVX-512 at run time; the
 * plain ones are built for baseline SSE2 and took most of the writer's CPU
 * time (~4.5 GB/s here). Weak references: a libxxhash without them (the
 * static libxxhash.a, other systems) leaves them NULL and the plain calls
 * are used. The hash values are the same either way. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
extern XXH64_hash_t XXH3_64bits_dispatch(const void *input, size_t len) __attribute__((weak));
extern XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t *state, const void *input,
                                                 size_t len) __attribute__((weak));
#define HAVE_DISPATCH(f) ((f) != NULL)
#else
#define HAVE_DISPATCH(f) 0
#define XXH3_64bits_dispatch XXH3_64bits
#define XXH3_64bits_update_dispatch XXH3_64bits_update
#endif

uint64_t wpk_xxh3(const void *p, size_t n)
{
    if (HAVE_DISPATCH(XXH3_64bits_dispatch))
        return (uint64_t)XXH3_64bits_dispatch(p, n);
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
    if (!n)
        return;
    if (HAVE_DISPATCH(XXH3_64bits_update_dispatch))
        XXH3_64bits_update_dispatch(h->st, p, n);
    else
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
