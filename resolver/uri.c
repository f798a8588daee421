/* uri.c - wpack: URIs (resolver/README.md): wpack:<16 hex>/<percent-encoded name>. */
#include <string.h>

#include "internal.h"
#include "resolve_int.h"

/* ALPHA DIGIT - . _ ~ (RFC 3986 unreserved) */
static const unsigned char unreserved[256] = {
    ['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

char *wpk_uri_put(char *d, const char *name, size_t n)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t i = 0;
    while (i < n && unreserved[s[i]]) /* mostly the whole name: one copy */
        i++;
    memcpy(d, s, i);
    d += i;
    for (; i < n; i++) {
        unsigned char c = s[i];
        if (unreserved[c]) {
            *d++ = (char)c;
        } else {
            d[0] = '%';
            d[1] = "0123456789ABCDEF"[c >> 4];
            d[2] = "0123456789ABCDEF"[c & 15];
            d += 3;
        }
    }
    return d;
}

size_t wpk_uri_encode(const char *name, size_t n, char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += unreserved[s[i]] ? 1 : 3;
    if (need >= len) /* and the NUL */
        return 0;
    char *end = wpk_uri_put(buf, name, n);
    *end = 0;
    return (size_t)(end - buf);
}

int wpack_entry_uri(const wpack_archive *ar, const char *name, char *buf, size_t len)
{
    if (!ar || !name || !buf || len < 24)
        return WPACK_E_INVALID_ARGUMENT;
    wpack_info info;
    wpack_get_info(ar, &info);
    wpk_fmt(buf, len, "wpack:%016llx/", (unsigned long long)info.index_checksum);
    size_t n = strlen(name);
    if (n == 0 || !wpk_uri_encode(name, n, buf + 23, len - 23))
        return WPACK_E_INVALID_ARGUMENT;
    return WPACK_OK;
}
