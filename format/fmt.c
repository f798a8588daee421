/* fmt.c - bounded message formatting. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

void wpk_vfmt(char *buf, size_t len, const char *fmt, va_list ap)
{
    if (!len)
        return;
    int n = vsnprintf(buf, len, fmt, ap);
    if (n < 0)
        buf[0] = 0;
}

void wpk_fmt(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(buf, len, fmt, ap);
    va_end(ap);
}

int wpk_fail_in(char *err, size_t errlen, int code, const char *what, const char *fmt, ...)
{
    char m[700];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(m, sizeof m, fmt, ap);
    va_end(ap);
    wpk_fmt(err, errlen, "%s: %s", what, m);
    return code;
}

void wpk_quote(char *buf, size_t len, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!len)
        return;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o + 8 >= len || i >= 200) {
            if (o + 4 < len) {
                buf[o++] = '.';
                buf[o++] = '.';
                buf[o++] = '.';
            }
            break;
        }
        if (c >= 0x80) {
            /* Copy a valid UTF-8 sequence whole; escape the bytes of an invalid one,
             * so a message is valid UTF-8 whatever the name held. */
            size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            if (k <= n - i && !wpk_name_problem((const uint8_t *)s + i, k) && o + k + 8 < len) {
                memcpy(buf + o, s + i, k);
                o += k;
                i += k - 1;
                continue;
            }
        }
        if (c < 0x20 || c >= 0x7f || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = 0;
}
