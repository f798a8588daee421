/* zipread.c - the central directory of an in-memory zip, checked field by field. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

#include "bytes.h"
#include "internal.h"
#include "zipread.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

/* CRC-32 (the zip one: reflected, polynomial 0xedb88320). libdeflate's is
 * PCLMUL-accelerated where the CPU has it (several times the table loop this
 * replaced), and every storage of a checkpoint is checked as it is packed. */
uint32_t wpk_crc32(uint32_t crc, const void *data, size_t n)
{
    return libdeflate_crc32(crc, data, n);
}

int wpk_zip_sniff(const uint8_t *buf, size_t len)
{
    return len >= 4 && (wpk_ld32(buf) == SIG_LOCAL || wpk_ld32(buf) == SIG_EOCD);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(err, errlen, fmt, ap);
    va_end(ap);
    return WPACK_E_INPUT;
}

/* Names are used as lookup keys only, never as paths, but a name that could
 * escape a directory marks a file made to attack someone: refuse it. */
static const char *bad_name(const uint8_t *s, uint32_t n)
{
    if (n == 0)
        return "an empty name";
    if (s[0] == '/')
        return "an absolute name";
    if (n >= 2 && s[1] == ':')
        return "a drive-letter name";
    for (uint32_t i = 0; i < n; i++) {
        if (s[i] == 0)
            return "a NUL byte in the name";
        if (s[i] == '\\')
            return "a backslash in the name";
        if (s[i] == '.' && i + 1 < n && s[i + 1] == '.' && (i == 0 || s[i - 1] == '/') &&
            (i + 2 == n || s[i + 2] == '/'))
            return "a '..' component";
    }
    return NULL;
}

static int cmp_entry(const void *a, const void *b)
{
    const wpk_zip_entry *x = a, *y = b;
    uint32_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

/* Find the end-of-central-directory record: the last signature within the
 * final 64 KiB + 22 bytes whose comment length reaches exactly the end. */
static int find_eocd(const uint8_t *buf, size_t len, size_t *at)
{
    if (len < 22)
        return 0;
    size_t lo = len > 22 + 65535 ? len - 22 - 65535 : 0;
    for (size_t i = len - 22 + 1; i-- > lo;) {
        if (wpk_ld32(buf + i) == SIG_EOCD && i + 22 + wpk_ld16(buf + i + 20) == len) {
            *at = i;
            return 1;
        }
    }
    /* Some writers leave junk after the comment: accept the last signature. */
    for (size_t i = len - 22 + 1; i-- > lo;)
        if (wpk_ld32(buf + i) == SIG_EOCD) {
            *at = i;
            return 1;
        }
    return 0;
}

static int by_local_offset(const void *a, const void *b)
{
    const wpk_zip_entry *x = *(const wpk_zip_entry *const *)a, *y = *(const wpk_zip_entry *const *)b;
    return x->local_offset < y->local_offset ? -1 : x->local_offset > y->local_offset;
}

/* Entries whose local header + data ranges share bytes: a zip writer never
 * makes them, and they let a small file list the same bytes many times
 * (257 nested stored members made 270 MB out of 1.1 MB): refused. */
static int overlapping(const wpk_zip *z, char *err, size_t errlen)
{
    if (z->n < 2)
        return 0;
    const wpk_zip_entry **v = malloc(z->n * sizeof *v);
    if (!v)
        return fail(err, errlen, "zip: out of memory for %zu entries", z->n);
    for (size_t i = 0; i < z->n; i++)
        v[i] = &z->e[i];
    qsort(v, z->n, sizeof *v, by_local_offset);
    int bad = 0;
    for (size_t i = 1; i < z->n && !bad; i++) {
        if (v[i]->local_offset < v[i - 1]->data_offset + v[i - 1]->comp_size) {
            char q1[300], q2[300];
            wpk_quote(q1, sizeof q1, v[i - 1]->name, v[i - 1]->name_len);
            wpk_quote(q2, sizeof q2, v[i]->name, v[i]->name_len);
            bad = fail(err, errlen,
                       "zip: entries '%s' and '%s' overlap (the second starts at offset %llu, "
                       "inside the first): refused",
                       q1, q2, (unsigned long long)v[i]->local_offset);
        }
    }
    free(v);
    return bad;
}

/* The local header of e (30 bytes and its name: nlen, already bounded by
 * WPK_ZIP_MAX_NAME) into out, from buf or through read. 0, or an errno. */
#define LOCAL_MAX (30 + WPK_ZIP_MAX_NAME)
static int local_header(const uint8_t *buf, size_t len, wpk_zip_read_fn read, void *ctx,
                        uint64_t off, uint32_t nlen, uint8_t *out)
{
    size_t n = 30 + (size_t)nlen;
    if (!wpk_in_bounds(off, n, len))
        n = (size_t)(len - off); /* the caller checked off + 30 <= len */
    if (!read) {
        memcpy(out, buf + off, n);
        return 0;
    }
    return read(ctx, off, out, n);
}

int wpk_zip_open(wpk_zip *z, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    return wpk_zip_open_ex(z, buf, len, NULL, NULL, err, errlen);
}

int wpk_zip_open_ex(wpk_zip *z, const uint8_t *buf, size_t len, wpk_zip_read_fn read, void *ctx,
                    char *err, size_t errlen)
{
    memset(z, 0, sizeof *z);
    uint8_t *l = NULL; /* one local header at a time */
    size_t eocd;
    if (!find_eocd(buf, len, &eocd))
        return fail(err, errlen,
                    "zip: no end-of-central-directory record (truncated or not a zip file)");
    uint64_t count = wpk_ld16(buf + eocd + 10);
    uint64_t cd_size = wpk_ld32(buf + eocd + 12);
    uint64_t cd_off = wpk_ld32(buf + eocd + 16);
    if (wpk_ld16(buf + eocd + 4) != 0 || wpk_ld16(buf + eocd + 6) != 0)
        return fail(err, errlen, "zip: multi-disk (split) archives are not supported");
    /* zip64: a locator just before the EOCD points at the zip64 EOCD. The
     * fields at their maximum without one are their own values: Python's
     * zipfile (numpy.savez) writes exactly 65,535 entries as 0xffff with no
     * zip64 record, and reads such a file back the same way. */
    if ((count == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) && eocd >= 20 &&
        wpk_ld32(buf + eocd - 20) == SIG_LOC64) {
        uint64_t e64 = wpk_ld64(buf + eocd - 20 + 8);
        if (!wpk_in_bounds(e64, 56, eocd - 20) || wpk_ld32(buf + e64) != SIG_EOCD64)
            return fail(err, errlen, "zip: zip64 end record at offset %llu is not valid",
                        (unsigned long long)e64);
        count = wpk_ld64(buf + e64 + 32);
        cd_size = wpk_ld64(buf + e64 + 40);
        cd_off = wpk_ld64(buf + e64 + 48);
    }
    if (!wpk_in_bounds(cd_off, cd_size, eocd))
        return fail(err, errlen,
                    "zip: central directory (offset %llu, %llu bytes) runs past the end of the "
                    "file (truncated?)",
                    (unsigned long long)cd_off, (unsigned long long)cd_size);
    if (count > WPK_ZIP_MAX_ENTRIES || count > cd_size / 46 + 1)
        return fail(err, errlen, "zip: %llu entries in a %llu-byte central directory",
                    (unsigned long long)count, (unsigned long long)cd_size);
    z->e = calloc(count ? (size_t)count : 1, sizeof *z->e);
    l = malloc(LOCAL_MAX);
    if (!z->e || !l) {
        free(z->e);
        free(l);
        z->e = NULL;
        return fail(err, errlen, "zip: out of memory for %llu entries", (unsigned long long)count);
    }
    z->buf = buf;
    z->len = len;
    uint64_t p = cd_off, end = cd_off + cd_size;
    for (uint64_t i = 0; i < count; i++) {
        if (!wpk_in_bounds(p, 46, end) || wpk_ld32(buf + p) != SIG_CENTRAL) {
            fail(err, errlen, "zip: central directory entry %llu at offset %llu is damaged",
                 (unsigned long long)i, (unsigned long long)p);
            goto bad;
        }
        const uint8_t *c = buf + p;
        wpk_zip_entry *e = &z->e[i];
        uint16_t made_by = wpk_ld16(c + 4), flags = wpk_ld16(c + 8);
        e->method = wpk_ld16(c + 10);
        e->crc32 = wpk_ld32(c + 16);
        e->comp_size = wpk_ld32(c + 20);
        e->size = wpk_ld32(c + 24);
        uint32_t nlen = wpk_ld16(c + 28), xlen = wpk_ld16(c + 30), clen = wpk_ld16(c + 32);
        uint32_t ext_attr = wpk_ld32(c + 38);
        e->local_offset = wpk_ld32(c + 42);
        if (!wpk_in_bounds(p + 46, (uint64_t)nlen + xlen + clen, end)) {
            fail(err, errlen, "zip: central directory entry %llu runs past the directory",
                 (unsigned long long)i);
            goto bad;
        }
        e->name = (const char *)c + 46;
        e->name_len = nlen;
        char q[300];
        wpk_quote(q, sizeof q, e->name, nlen);
        const char *why = nlen > WPK_ZIP_MAX_NAME ? "a name too long" : bad_name(c + 46, nlen);
        if (why) {
            fail(err, errlen, "zip: entry '%s' has %s (refused: paths in a file are never trusted)",
                 q, why);
            goto bad;
        }
        if (flags & 1) {
            fail(err, errlen, "zip: entry '%s' is encrypted", q);
            goto bad;
        }
        if ((made_by >> 8) == 3 && ((ext_attr >> 16) & 0170000) == 0120000) {
            fail(err, errlen, "zip: entry '%s' is a symlink (refused)", q);
            goto bad;
        }
        /* zip64 extra field: the 64-bit values of the fields that hold 0xffffffff. */
        const uint8_t *x = c + 46 + nlen, *xend = x + xlen;
        while (xend - x >= 4) {
            uint16_t id = wpk_ld16(x), sz = wpk_ld16(x + 2);
            if (sz > xend - x - 4)
                break;
            if (id == 1) {
                const uint8_t *v = x + 4, *vend = v + sz;
                if (e->size == 0xffffffffu && vend - v >= 8) {
                    e->size = wpk_ld64(v);
                    v += 8;
                }
                if (e->comp_size == 0xffffffffu && vend - v >= 8) {
                    e->comp_size = wpk_ld64(v);
                    v += 8;
                }
                if (e->local_offset == 0xffffffffu && vend - v >= 8)
                    e->local_offset = wpk_ld64(v);
            }
            x += 4 + sz;
        }
        /* The local header: its own name and extra lengths decide where data starts. */
        int rerr = wpk_in_bounds(e->local_offset, 30, len)
                       ? local_header(buf, len, read, ctx, e->local_offset, nlen, l)
                       : ENODATA;
        if (rerr && rerr != ENODATA) {
            fail(err, errlen, "zip: entry '%s': local header at offset %llu cannot be read: %s",
                 q, (unsigned long long)e->local_offset, strerror(rerr));
            goto bad;
        }
        if (rerr || wpk_ld32(l) != SIG_LOCAL) {
            fail(err, errlen,
                 "zip: entry '%s': local header at offset %llu is missing or past the end of "
                 "the file",
                 q, (unsigned long long)e->local_offset);
            goto bad;
        }
        uint64_t data = e->local_offset + 30 + wpk_ld16(l + 26) + wpk_ld16(l + 28);
        if (wpk_ld16(l + 26) != nlen || !wpk_in_bounds(e->local_offset + 30, nlen, len) ||
            memcmp(l + 30, e->name, nlen) != 0) {
            fail(err, errlen, "zip: entry '%s': local header names a different file", q);
            goto bad;
        }
        if (e->method == 0 && e->comp_size != e->size) {
            fail(err, errlen, "zip: stored entry '%s' has compressed size %llu != size %llu", q,
                 (unsigned long long)e->comp_size, (unsigned long long)e->size);
            goto bad;
        }
        if (!wpk_in_bounds(data, e->comp_size, len)) {
            fail(err, errlen,
                 "zip: entry '%s': %llu bytes at offset %llu run past the end of the file "
                 "(%zu bytes; truncated?)",
                 q, (unsigned long long)e->comp_size, (unsigned long long)data, len);
            goto bad;
        }
        e->data_offset = data;
        p += 46 + (uint64_t)nlen + xlen + clen;
    }
    z->n = (size_t)count;
    if (p != end) { /* entries past the count would be listed by other readers, not by us */
        fail(err, errlen,
             "zip: the central directory holds %llu bytes after its %llu entries (a count "
             "that wrapped past 65,535 without zip64?)",
             (unsigned long long)(end - p), (unsigned long long)count);
        goto bad;
    }
    if (overlapping(z, err, errlen))
        goto bad;
    free(l);
    l = NULL;
    qsort(z->e, z->n, sizeof *z->e, cmp_entry);
    for (size_t i = 1; i < z->n; i++)
        if (cmp_entry(&z->e[i - 1], &z->e[i]) == 0) {
            char q[300];
            wpk_quote(q, sizeof q, z->e[i].name, z->e[i].name_len);
            fail(err, errlen, "zip: entry '%s' appears twice", q);
            goto bad;
        }
    return WPACK_OK;
bad:
    free(l);
    wpk_zip_close(z);
    return WPACK_E_INPUT;
}

void wpk_zip_close(wpk_zip *z)
{
    free(z->e);
    memset(z, 0, sizeof *z);
}

const wpk_zip_entry *wpk_zip_find(const wpk_zip *z, const char *name, size_t len)
{
    size_t lo = 0, hi = z->n;
    wpk_zip_entry key = {.name = name, .name_len = (uint32_t)len};
    if (len > WPK_ZIP_MAX_NAME)
        return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_entry(&key, &z->e[mid]);
        if (c == 0)
            return &z->e[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
