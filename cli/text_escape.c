/* text_escape.c - untrusted text (names, metadata, messages) made safe for a terminal. */
#include "cli.h"
#include "internal.h"

/*
 * Names and metadata come from archives and input files anyone can write. A
 * terminal acts on control characters: ESC (0x1b) starts sequences that set
 * the window title, clear the screen or remap keys, and in UTF-8 the C1 code
 * points U+0080..U+009F (U+009B is CSI) do the same on some terminals. So
 * text output shows each of them as an escape instead:
 *   C0 (0x00..0x1f, newline and tab included) and DEL   \x1b
 *   C1 code points, UTF-8 C2 80..C2 9F                  \u009b
 *   bidirectional controls (U+061C, U+200E, U+200F,      \u202e
 *   U+202A..U+202E, U+2066..U+2069): they reorder what
 *   follows on the line, so a name could show as another
 *   (the "Trojan Source" trick, CVE-2021-42574)
 *   a byte that is not part of valid UTF-8              \xff
 * Everything else (printable ASCII, valid UTF-8 from U+00A0 on) is copied.
 * UTF-8 validity is the name rule's (wpk_name_problem on one code point):
 * no overlongs, no surrogates, nothing above U+10FFFF.
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

size_t cli_text_escape(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t cols = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c >= 0x20 && c < 0x7f) {
            if (f)
                fputc((int)c, f);
            cols++;
            i++;
            continue;
        }
        size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (c >= 0x80 && k <= n - i && !wpk_name_problem(p + i, k)) {
            unsigned cp = code_point(p + i, k);
            if (is_shown_escaped(cp)) {
                if (f)
                    fprintf(f, "\\u%04x", cp);
                cols += 6;
            } else {
                if (f)
                    fwrite(p + i, 1, k, f);
                cols++; /* one column a code point (wide CJK is not measured) */
            }
            i += k;
            continue;
        }
        if (f)
            fprintf(f, "\\x%02x", c);
        cols += 4;
        i++;
    }
    return cols;
}
