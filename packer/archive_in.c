/*
 * archive_in.c - bundles of .npy files read through libarchive: .npz
 * (stored or deflated zip), zip, tar, tar.gz, tar.zst, tar.xz, tar.bz2.
 * Streaming: each member is decompressed piece by piece into the sink.
 * Zip bombs: the bytes coming out are capped in total and, past a grace
 * amount, per byte read from the file.
 */
#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "internal.h"

typedef struct {
    wpk_sink *s;
    struct archive *a;
    const char *member;
    uint64_t out, max_total, ratio;
} ar_reader;

static long read_member(void *ctx, void *buf, size_t n)
{
    ar_reader *r = ctx;
    la_ssize_t k = archive_read_data(r->a, buf, n);
    if (k < 0) {
        wpk_sink_fail(r->s, WPACK_E_INPUT, "member '%s': %s", r->member,
                      archive_error_string(r->a));
        return -1;
    }
    r->out += (uint64_t)k;
    uint64_t in = (uint64_t)archive_filter_bytes(r->a, -1);
    if (r->out > r->max_total) {
        wpk_sink_fail(r->s, WPACK_E_LIMIT,
                      "member '%s': more than %llu bytes after decompression (a zip bomb?)",
                      r->member, (unsigned long long)r->max_total);
        return -1;
    }
    if (r->out > WPK_RATIO_GRACE && r->out / (in ? in : 1) > r->ratio) {
        wpk_sink_fail(r->s, WPACK_E_LIMIT,
                      "member '%s': expands more than %llu:1 (%llu bytes out of %llu read): "
                      "refused as a zip bomb",
                      r->member, (unsigned long long)r->ratio, (unsigned long long)r->out,
                      (unsigned long long)in);
        return -1;
    }
    return (long)k;
}

/* "dir/sub/w.npy" -> "dir.sub.w"; NULL when the member is not a .npy. */
static char *member_name(wpk_sink *s, const char *path, int *bad)
{
    *bad = 0;
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    size_t n = strlen(path);
    if (n <= 4 || strcmp(path + n - 4, ".npy") != 0)
        return NULL;
    if (path[0] == '/' || strstr(path, "..") || strchr(path, '\\')) {
        *bad = wpk_sink_fail(s, WPACK_E_INPUT,
                             "member '%.200s': absolute or '..' path refused", path);
        return NULL;
    }
    char *name = strndup(path, n - 4);
    if (!name) {
        *bad = wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
        return NULL;
    }
    for (char *p = name; *p; p++)
        if (*p == '/')
            *p = '.';
    return name;
}

int archive_pack_file(wpk_sink *s, const char *path)
{
    struct archive *a = archive_read_new();
    if (!a)
        return wpk_sink_fail(s, WPACK_E_NOMEM, "out of memory");
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_zip(a);
    int rc = WPACK_OK;
    if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s", archive_error_string(a));
        goto out;
    }
    ar_reader r = {.s = s, .a = a};
    r.max_total = s->o && s->o->max_total ? s->o->max_total : WPK_DEFAULT_MAX_TOTAL;
    r.ratio = s->o && s->o->max_ratio ? s->o->max_ratio : WPK_DEFAULT_MAX_RATIO;
    uint64_t found = 0;
    for (;;) {
        struct archive_entry *e;
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            rc = wpk_sink_fail(s, WPACK_E_INPUT, "%s (truncated or damaged?)",
                               archive_error_string(a));
            goto out;
        }
        const char *mp = archive_entry_pathname(e);
        if (!mp)
            mp = "";
        if (archive_entry_filetype(e) == AE_IFDIR)
            continue;
        int bad;
        char *name = member_name(s, mp, &bad);
        if (bad) {
            rc = bad;
            goto out;
        }
        if (!name)
            continue; /* not a .npy: ignored, like numpy ignores it in an .npz */
        if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e)) {
            free(name);
            rc = wpk_sink_fail(s, WPACK_E_INPUT, "member '%.200s' is a link, not a file (refused)",
                               mp);
            goto out;
        }
        r.member = mp;
        rc = wpk_npy_stream(s, name, read_member, &r);
        free(name);
        if (rc)
            goto out;
        found++;
    }
    if (!found)
        rc = wpk_sink_fail(s, WPACK_E_INPUT, "no .npy members in the bundle");
out:
    archive_read_free(a);
    return rc;
}
