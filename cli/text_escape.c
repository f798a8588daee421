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
 *   a byte that is not part of valid UTF-8              \xff
 * Everything else (printable ASCII, valid UTF-8 from U+00A0 on) is copied.
 * UTF-8 validity is the name rule's (wpk_name_problem on one code point):
 * no overlongs, no surrogates, nothing above U+10FFFF.
 */
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
            if (c == 0xc2 && p[i + 1] < 0xa0) {
                if (f)
                    fprintf(f, "\\u%04x", p[i + 1]);
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
