/* names.c - the rule every name, key and map name must follow (spec: Names). */
#include <string.h>

#include "internal.h"

const char *wpk_name_problem(const uint8_t *s, uint64_t len)
{
    if (len == 0)
        return "empty name";
    if (len > WPACK_MAX_NAME)
        return "name longer than 16384 bytes";
    uint64_t i = 0;
    /* Fast path: 8 printable ASCII bytes at a time (almost every name). */
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (len - i >= 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        uint64_t del = w ^ (0x7f * ones);
        if ((w & highs) || ((w - 0x20 * ones) & ~w & highs) || ((del - ones) & ~del & highs))
            break; /* a byte >= 0x80, < 0x20 or 0x7f: look at it closely below */
        i += 8;
    }
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (c == 0)
                return "NUL byte in name";
            if (c < 0x20 || c == 0x7f)
                return "control byte in name";
            i++;
            continue;
        }
        uint32_t cp;
        unsigned need;
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return "invalid UTF-8 in name";
        }
        if (len - i <= need)
            return "invalid UTF-8 in name (truncated sequence)";
        for (unsigned k = 1; k <= need; k++) {
            uint8_t t = s[i + k];
            if ((t & 0xc0) != 0x80)
                return "invalid UTF-8 in name";
            cp = (cp << 6) | (t & 0x3f);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000))
            return "overlong UTF-8 in name";
        if (cp >= 0xd800 && cp <= 0xdfff)
            return "UTF-16 surrogate in name";
        if (cp > 0x10ffff)
            return "code point above U+10FFFF in name";
        i += need + 1;
    }
    return NULL;
}

const char *wpk_shard_name_problem(const char *name, size_t len)
{
    const char *why = wpk_name_problem((const uint8_t *)name, len);
    if (why)
        return why;
    if (memchr(name, '/', len))
        return "a '/' in a shard name (shards are files beside the manifest)";
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
        return "'.' or '..' as a shard name";
    return NULL;
}

const char *wpk_stats_kind_name(int kind)
{
    return kind == WPACK_STATS_WEIGHT       ? "weight"
           : kind == WPACK_STATS_ACTIVATION ? "activation"
                                            : "unknown-kind";
}
