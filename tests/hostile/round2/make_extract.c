/*
 * make_extract.c - writes the issue-14 round-two archives that the
 * extract/export/convert/cast tests use (tests/cli/test_extract2.sh), with
 * the library's own writer, so each is a valid archive whose only fault is
 * what it asks a command to do:
 *
 *   splat_huge.wpack    one f32 splat [2^31, 2^29]: 2^62 bytes from 680 bytes.
 *                       extract/export: WPACK_E_TOO_LARGE (output cap)
 *   splat_8m.wpack      an 8 MiB f32 splat + a 4-element tensor: small enough
 *                       to really write; refused under --max-output 1M
 *   zstd_huge.wpack     zstd zeros, f32 [786432, 1024] = 3 GiB (1.5 GiB as
 *                       bf16) from ~170 KB, and a plain 4-element 'small'.
 *                       extract, export, convert, cast --to bf16:
 *                       WPACK_E_TOO_LARGE
 *   names_collide.wpack 'L.xxx...' (210 bytes) and the 197-byte name that
 *                       extract's long-name rule maps to the same file:
 *                       extract: WPACK_E_SAME_FILE naming both
 *   decode_bad.wpack    a zstd tensor whose first frame's magic is broken:
 *                       extract: WPACK_E_DECODE (not a stale errno)
 *
 * Built by hand, from the repository root:
 *   make lib
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude -Iformat tests/hostile/round2/make_extract.c \
 *       build/libwpack.a -lxxhash -lzstd -lm -lpthread -o build/make_extract
 *   build/make_extract [dir]          (default: tests/hostile/round2)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "wpack.h"

static const char *dir = "tests/hostile/round2";

static void die(const char *what, wpack_writer *w)
{
    fprintf(stderr, "make_extract: %s: %s\n", what, w ? wpack_writer_errmsg(w) : "failed");
    exit(1);
}

static wpack_writer *start(const char *name, int compress)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.alignment = 64;
    o.weight_stats = 0;
    o.compress_level = compress;
    o.compress_min = 0;
    wpack_writer *w;
    if (wpack_writer_open(&w, path, &o) != WPACK_OK)
        die(path, w);
    return w;
}

static void finish(wpack_writer *w, const char *name)
{
    char err[512];
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK) {
        fprintf(stderr, "make_extract: %s: %s\n", name, err);
        exit(1);
    }
}

static void small(wpack_writer *w, const char *name)
{
    float v[4] = {1, 2, 3, 4};
    uint64_t d = 4;
    if (wpack_writer_add_tensor(w, name, WPACK_DTYPE_F32, 1, &d, v, sizeof v))
        die(name, w);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        dir = argv[1];
    float fill = 1.5f;

    wpack_writer *w = start("splat_huge.wpack", 0);
    uint64_t huge[2] = {1ull << 31, 1ull << 29};
    if (wpack_writer_add_splat(w, "huge", WPACK_DTYPE_F32, 2, huge, &fill, 4))
        die("huge", w);
    finish(w, "splat_huge.wpack");

    w = start("splat_8m.wpack", 0);
    uint64_t eight[2] = {2048, 1024};
    if (wpack_writer_add_splat(w, "big", WPACK_DTYPE_F32, 2, eight, &fill, 4))
        die("big", w);
    small(w, "small");
    finish(w, "splat_8m.wpack");

    w = start("zstd_huge.wpack", 19);
    uint64_t zd[2] = {786432, 1024};
    enum { STEP = 4 << 20 };
    void *zeros = calloc(1, STEP);
    if (!zeros || wpack_writer_begin_tensor(w, "huge", WPACK_DTYPE_F32, 2, zd))
        die("huge", w);
    for (uint64_t done = 0; done < zd[0] * zd[1] * 4; done += STEP)
        if (wpack_writer_write(w, zeros, STEP))
            die("huge", w);
    if (wpack_writer_end_tensor(w))
        die("huge", w);
    free(zeros);
    small(w, "small");
    finish(w, "zstd_huge.wpack");

    /* extract cuts names longer than 200 bytes to 180 + '~' + 16 hex digits
     * of their XXH3; a 197-byte name can spell that out itself. */
    char a[211], b[256];
    memset(a, 'x', 210);
    memcpy(a, "L.", 2);
    a[210] = 0;
    snprintf(b, sizeof b, "%.180s~%016llx", a, (unsigned long long)wpk_xxh3(a, 210));
    w = start("names_collide.wpack", 0);
    small(w, a);
    small(w, b);
    small(w, "c");
    finish(w, "names_collide.wpack");

    w = start("decode_bad.wpack", 3);
    float *pat = malloc(65536 * 4);
    if (!pat)
        die("w", NULL);
    for (int i = 0; i < 65536; i++)
        pat[i] = (float)(i % 7);
    uint64_t pd = 65536;
    if (wpack_writer_add_tensor(w, "w", WPACK_DTYPE_F32, 1, &pd, pat, 65536 * 4))
        die("w", w);
    free(pat);
    finish(w, "decode_bad.wpack");
    char path[1024];
    snprintf(path, sizeof path, "%s/decode_bad.wpack", dir);
    wpack_archive *ar;
    wpack_tensor t;
    if (wpack_open_file(&ar, path, 0) || wpack_find(ar, "w", &t) || t.codec != WPACK_CODEC_ZSTD)
        die("decode_bad.wpack: not compressed", NULL);
    uint64_t at = t.offset;
    wpack_close(ar);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, "\0", 1, (off_t)at) != 1 || close(fd))
        die("decode_bad.wpack: patch", NULL);
    return 0;
}
