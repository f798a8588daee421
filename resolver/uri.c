/* uri.c - wpack: URIs (resolver/README.md): wpack:<16 hex>/<percent-encoded name>. */
#include <string.h>

#include "internal.h"
#include "resolve_int.h"

static int unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

size_t wpk_uri_encode(const char *name, size_t n, char *buf, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        size_t need = unreserved(c) ? 1 : 3;
        if (o + need >= len)
            return 0;
        if (need == 1) {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '%';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    buf[o] = 0;
    return o;
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
