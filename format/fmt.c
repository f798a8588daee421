/* fmt.c - bounded message formatting. */
#include <stdio.h>

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
