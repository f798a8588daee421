/* natural_order.c - display order for names and module paths. */
#include <string.h>

#include "cli.h"

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/*
 * Runs of digits compare by their value, so "layers.2" sorts before
 * "layers.10"; everything else compares bytewise. Equal values with more
 * leading zeros ("01" after "1") come later, so that only equal strings
 * compare equal. Display only: the index and every lookup stay bytewise.
 */
int cli_natural_cmp(const char *a, const char *b)
{
    const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;
    int zeros = 0; /* the first difference in leading zeros, the last tie-break */
    while (*p && *q) {
        if (!is_digit(*p) || !is_digit(*q)) {
            if (*p != *q)
                return *p < *q ? -1 : 1;
            p++, q++;
            continue;
        }
        const unsigned char *p0 = p, *q0 = q;
        while (*p == '0')
            p++;
        while (*q == '0')
            q++;
        const unsigned char *ps = p, *qs = q;
        while (is_digit(*p))
            p++;
        while (is_digit(*q))
            q++;
        size_t lp = (size_t)(p - ps), lq = (size_t)(q - qs);
        if (lp != lq)
            return lp < lq ? -1 : 1;
        int c = memcmp(ps, qs, lp);
        if (c)
            return c < 0 ? -1 : 1;
        if (!zeros && ps - p0 != qs - q0)
            zeros = ps - p0 < qs - q0 ? -1 : 1;
    }
    if (*p || *q)
        return *p ? 1 : -1;
    return zeros;
}
