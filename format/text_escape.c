/* text_escape.c - untrusted text (names, paths, metadata, messages) made
 * safe for a terminal or a log: the one rule every message and every text
 * output follows. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * Names and metadata come from archives and input files anyone can write,
 * paths from whoever calls. A terminal acts on control characters: ESC
 * (0x1b) starts sequences that set the window title, clear the screen or
 * remap keys, and in UTF-8 the C1 code points U+0080..U+009F (U+009B is
 * CSI) do the same on some terminals; a newline or CR in a log line forges
 * another line. So messages and text output show each of them as an escape
 * instead:
 *   C0 (0x00..0x1f, newline and tab included) and DEL   \x1b
 *   C1 code points, UTF-8 C2 80..C2 9F                  \u009b
 *   bidirectional controls (U+061C, U+200E, U+200F,      \u202e
 *   U+202A..U+202E, U+2066..U+2069): they reorder what
 *   follows on the line, so a name could show as another
 *   (the "Trojan Source" trick, CVE-2021-42574)
 *   a byte that is not part of valid UTF-8              \xff
 * Everything else (printable ASCII, valid UTF-8 from U+00A0 on) is copied,
 * the backslash too: escaping escaped text again changes nothing, so a
 * message that quotes another (the library's in the CLI's) is never
 * escaped twice. UTF-8 validity is the name rule's (wpk_name_problem on one
 * code point): no overlongs, no surrogates, nothing above U+10FFFF.
 */
/* The code point of the valid UTF-8 sequence p[0..k). */
static unsigned code_point(const unsigned char *p, size_t k)
{
    if (k == 2)
        return (p[0] & 0x1fu) << 6 | (p[1] & 0x3fu);
    if (k == 3)
        return (p[0] & 0x0fu) << 12 | (p[1] & 0x3fu) << 6 | (p[2] & 0x3fu);
    return (p[0] & 0x07u) << 18 | (p[1] & 0x3fu) << 12 | (p[2] & 0x3fu) << 6 | (p[3] & 0x3fu);
}

static int is_shown_escaped(unsigned cp)
{
    return (cp >= 0x80 && cp < 0xa0) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

static size_t hex_escape(char *esc, char kind, unsigned v, int digits)
{
    static const char hex[] = "0123456789abcdef";
    esc[0] = '\\';
    esc[1] = kind;
    for (int d = 0; d < digits; d++)
        esc[2 + d] = hex[(v >> (4 * (digits - 1 - d))) & 15];
    return 2 + (size_t)digits;
}

size_t wpk_text_step(const char *s, size_t n, size_t *take, char esc[8])
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    *take = 1;
    if (c >= 0x20 && c < 0x7f)
        return 0;
    size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if (c >= 0x80 && k <= n && !wpk_name_problem(p, k)) {
        unsigned cp = code_point(p, k);
        *take = k;
        return is_shown_escaped(cp) ? hex_escape(esc, 'u', cp, 4) : 0;
    }
    return hex_escape(esc, 'x', c, 2);
}

size_t wpack_text_escape(char *buf, size_t len, const char *s, size_t n)
{
    size_t o = 0;
    if (!len)
        return 0;
    for (size_t i = 0; i < n;) {
        char esc[8];
        size_t take, e = wpk_text_step(s + i, n - i, &take, esc), m = e ? e : take;
        if (o + m >= len)
            break; /* cut before a code point or an escape, never inside */
        memcpy(buf + o, e ? esc : s + i, m);
        o += m;
        i += take;
    }
    buf[o] = 0;
    return o;
}

void wpk_msg_escape(char *buf, size_t len)
{
    if (!len)
        return;
    size_t n = strnlen(buf, len - 1), i = 0;
    buf[n] = 0;
    char esc[8];
    size_t take = 0;
    while (i < n && !wpk_text_step(buf + i, n - i, &take, esc))
        i += take;
    if (i == n)
        return; /* the usual case: nothing to escape */
    char *tail = malloc(n - i);
    if (!tail) {
        /* no memory for the escapes: each unit that needs one becomes '?' */
        for (; i < n; i += take)
            if (wpk_text_step(buf + i, n - i, &take, esc))
                memset(buf + i, '?', take);
        return;
    }
    memcpy(tail, buf + i, n - i);
    wpack_text_escape(buf + i, len - i, tail, n - i);
    free(tail);
}

void wpk_quote(char *buf, size_t len, const char *s, size_t n)
{
    size_t o = 0;
    if (!len)
        return;
    for (size_t i = 0; i < n;) {
        char esc[8];
        size_t take, e = wpk_text_step(s + i, n - i, &take, esc), m = e ? e : take;
        if (i >= 200 || o + m + 3 >= len) { /* cut, saying so when "..." fits */
            if (o + 3 < len) {
                memcpy(buf + o, "...", 3);
                o += 3;
            }
            break;
        }
        memcpy(buf + o, e ? esc : s + i, m);
        o += m;
        i += take;
    }
    buf[o] = 0;
}
