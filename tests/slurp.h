/* slurp.h - the tests' and golden tools' one whole-file reader. */
#ifndef WPACK_TEST_SLURP_H
#define WPACK_TEST_SLURP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A whole file in a malloc'd buffer (at least 1 byte; *len its size), or
 * NULL when it cannot be opened or read. */
static inline uint8_t *test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *p = malloc(cap);
    while (p) {
        size_t k = fread(p + n, 1, cap - n, f);
        n += k;
        if (n < cap)
            break;
        uint8_t *q = realloc(p, cap * 2);
        if (!q) {
            free(p);
            p = NULL;
            break;
        }
        p = q;
        cap *= 2;
    }
    if (p && ferror(f)) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = n;
    return p;
}

#endif
