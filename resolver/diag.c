/* diag.c - the resolver's diagnostics: counted, the first error's code
 * kept, every error message ending with its code's name. */
#include <stdarg.h>
#include <string.h>

#include "internal.h"
#include "resolve_int.h"

void wpk_diag_emit(wpk_diag *d, int severity, int code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wpk_msg_escape(msg, sizeof msg); /* file names, symbols and entry names may hold anything */
    /* an error says which code it is, as every failure message does */
    if (severity == WPACK_DIAG_ERROR && code) {
        size_t n = strlen(msg), k = strlen(wpack_error_name(code)) + 3;
        if (n + k >= sizeof msg)
            n = sizeof msg - k - 1;
        wpk_fmt(msg + n, sizeof msg - n, " [%s]", wpack_error_name(code));
    }
    if (severity == WPACK_DIAG_ERROR) {
        d->errors++;
        if (!d->first_error)
            d->first_error = code;
    } else if (severity == WPACK_DIAG_WARNING) {
        d->warnings++;
    }
    if (d->fn)
        d->fn(d->user, severity, msg);
}

void wpk_global_where(char *buf, size_t len, const wpk_diag *d, const wpk_global *g)
{
    char q[300];
    wpk_quote(q, sizeof q, g->name, g->name_len);
    wpk_fmt(buf, len, "%s:%u:%u: global @%s", d->source, g->line, g->col, q);
}
