/*
 * make_zstd_hostile.c - writes tests/hostile/round2/zstd_*.wpack (issue 14,
 * points 5, 10 and 11), each a small archive with one zstd fault, re-sealed
 * (tensor, index, superblock and trailer checksums recomputed) so that the
 * fault is what a reader meets. tests/unit/test_verify_reads.c checks the
 * expected code of each (the table in its hostile_files[]).
 *
 *   zstd_trailing_skippable  chunk 0 = the right frame + a skippable frame
 *                            (hidden bytes): DECODE in reads and verify
 *   zstd_trailing_frame      chunk 0 = the right frame + a second, empty
 *                            frame (+ skippable filler): DECODE
 *   zstd_chunk_over_limit    codec_param 27 (128 MiB chunks): LIMIT at open
 *   zstd_chunk_1g            codec_param 30 (1 GiB chunks, the "hours to
 *                            extract" file of issue 14.5): LIMIT at open
 *   zstd_limit_chunks        valid: 256 MiB of zeros in 64 MiB chunks (at
 *                            the limit), a few KiB on disk; reading it all
 *                            must decode each chunk once (run under timeout)
 *   zstd_splat_codec         a splat with codec 1: KIND (spec 19 rule 1)
 *
 * Built by hand, from the repository root:
 *   make lib
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude -Iformat -Ifuzz -Itests tests/tools/make_zstd_hostile.c \
 *       build/libwpack.a -lxxhash -lzstd -lm -lpthread -o build/make_zstd_hostile
 *   build/make_zstd_hostile [tests-dir]        (default: tests)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "fix_checksums.h"
#include "slurp.h"

static const char *dir;

static int save(const char *name, const unsigned char *b, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/hostile/round2/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b, 1, len, f) == len;
    if (f)
        ok = fclose(f) == 0 && ok;
    printf("%s %s (%zu bytes)\n", ok ? "wrote" : "FAILED", path, len);
    return ok ? 0 : 1;
}

/* 8 KiB chunks of text-like bytes (a small alphabet with repeats): zstd
 * level 1 leaves slack that level 19 does not. */
enum { CHUNK = 1 << 13, N = 2 * CHUNK };
static unsigned char text[N];

static void make_text(void)
{
    uint64_t s = 12345;
    for (size_t i = 0; i < N;) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        if ((s >> 60) < 6 && i > 64) { /* repeat an earlier phrase */
            size_t from = (size_t)(s >> 20) % (i - 32), n = 8 + (size_t)(s >> 8) % 24;
            for (size_t k = 0; k < n && i < N; k++)
                text[i++] = text[from + k];
        } else {
            text[i++] = (unsigned char)("etaoin shrdlu"[(s >> 33) % 13]);
        }
    }
}

/* An archive with "s" (f32 splat), "t" (the text, zstd level 1) and, when
 * zeros_mib, "z" (that many MiB of zeros in 64 MiB chunks). */
static unsigned char *base_archive(size_t *len, unsigned zeros_mib)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/hostile/round2/.base.wpack", dir);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.alignment = 64;
    o.weight_stats = 0;
    o.compress_level = 1;
    o.compress_chunk = zeros_mib ? 64u << 20 : CHUNK;
    o.compress_min = 0;
    wpack_writer *w;
    float one = 1;
    uint64_t d1 = N, d2 = 16;
    int rc = wpack_writer_open(&w, path, &o);
    if (!rc)
        rc = wpack_writer_add_splat(w, "s", WPACK_DTYPE_F32, 1, &d2, &one, 4);
    if (!rc && !zeros_mib)
        rc = wpack_writer_add_tensor(w, "t", WPACK_DTYPE_U8, 1, &d1, text, N);
    if (!rc && zeros_mib) {
        uint64_t dz = (uint64_t)zeros_mib << 20;
        static unsigned char zero[1 << 20];
        rc = wpack_writer_begin_tensor(w, "z", WPACK_DTYPE_U8, 1, &dz);
        for (unsigned k = 0; !rc && k < zeros_mib; k++)
            rc = wpack_writer_write(w, zero, sizeof zero);
        if (!rc)
            rc = wpack_writer_end_tensor(w);
    }
    char err[600];
    if (rc) {
        fprintf(stderr, "writer: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return NULL;
    }
    if (wpack_writer_finish(w, err, sizeof err)) {
        fprintf(stderr, "finish: %s\n", err);
        return NULL;
    }
    unsigned char *b = test_slurp(path, len);
    remove(path);
    return b;
}

static uint8_t *sec(uint8_t *b, int s)
{
    uint8_t *ix = b + wpk_ld64(b + WPK_H_INDEX_OFFSET_OFF);
    return ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * s);
}

/* The record of entry name (names are short and sorted: a scan is fine). */
static uint8_t *rec(uint8_t *b, const char *name)
{
    uint8_t *ix = b + wpk_ld64(b + WPK_H_INDEX_OFFSET_OFF);
    uint64_t n = wpk_ld64(ix + WPK_I_ENTRY_COUNT_OFF);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *r = sec(b, WPK_SEC_ENTRIES) + i * WPK_ENTRY_SIZE;
        if (strcmp((const char *)sec(b, WPK_SEC_STRINGS) + wpk_ld64(r + WPK_E_NAME_OFF), name) == 0)
            return r;
    }
    return NULL;
}

/* Chunk 0 of "t" rewritten as: the same content compressed at level 19,
 * optionally an empty frame, then a skippable frame filling the rest of
 * the chunk's stored bytes. */
static int trailing(const char *name, int empty_frame)
{
    size_t len;
    unsigned char *b = base_archive(&len, 0);
    uint8_t *r = b ? rec(b, "t") : NULL;
    if (!r)
        return 1;
    uint64_t off = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
    uint64_t end0 = wpk_ld64(sec(b, WPK_SEC_AUX) + wpk_ld64(r + WPK_E_AUX_OFF) + 8);
    if (end0 & WPK_CHUNK_RAW) {
        fprintf(stderr, "%s: chunk 0 stored raw\n", name);
        return 1;
    }
    unsigned char frame[CHUNK + 512], empty[64];
    size_t fl = ZSTD_compress(frame, sizeof frame, text, CHUNK, 19);
    size_t el = empty_frame ? ZSTD_compress(empty, sizeof empty, "", 0, 1) : 0;
    if (ZSTD_isError(fl) || ZSTD_isError(el) || fl + el + 8 > end0) {
        fprintf(stderr, "%s: no room (frame %zu + %zu + 8 > %llu)\n", name, fl, el,
                (unsigned long long)end0);
        return 1;
    }
    unsigned char *p = b + off;
    memcpy(p, frame, fl);
    memcpy(p + fl, empty, el);
    size_t skip = end0 - fl - el; /* >= 8: magic, size, then the hidden bytes */
    wpk_st32(p + fl + el, 0x184D2A50u);
    wpk_st32(p + fl + el + 4, (uint32_t)(skip - 8));
    memset(p + fl + el + 8, 'H', skip - 8);
    fix_checksums(b, len, 0);
    int rc = save(name, b, len);
    free(b);
    return rc;
}

/* codec_param of "t" set to log2 (one chunk either way: the seek table fits). */
static int chunk_log2(const char *name, uint32_t log2)
{
    size_t len;
    unsigned char *b = base_archive(&len, 0);
    uint8_t *r = b ? rec(b, "t") : NULL;
    if (!r)
        return 1;
    /* one chunk of N bytes: a seek table of one entry, the end of both chunks */
    uint8_t *aux = sec(b, WPK_SEC_AUX) + wpk_ld64(r + WPK_E_AUX_OFF);
    wpk_st32(r + WPK_E_CODEC_PARAM_OFF, log2);
    wpk_st64(r + WPK_E_AUX_LEN_OFF, 16);
    wpk_st64(aux + 8, wpk_ld64(aux + 16));
    fix_checksums(b, len, 0);
    int rc = save(name, b, len);
    free(b);
    return rc;
}

static int splat_codec(void)
{
    size_t len;
    unsigned char *b = base_archive(&len, 0);
    uint8_t *r = b ? rec(b, "s") : NULL;
    if (!r)
        return 1;
    r[WPK_E_CODEC_OFF] = WPACK_CODEC_ZSTD;
    fix_checksums(b, len, 0);
    int rc = save("zstd_splat_codec.wpack", b, len);
    free(b);
    return rc;
}

int main(int argc, char **argv)
{
    dir = argc > 1 ? argv[1] : "tests";
    char path[4096];
    snprintf(path, sizeof path, "%s/hostile/round2", dir);
    mkdir(path, 0777);
    make_text();
    int bad = trailing("zstd_trailing_skippable.wpack", 0);
    bad |= trailing("zstd_trailing_frame.wpack", 1);
    bad |= chunk_log2("zstd_chunk_over_limit.wpack", 27);
    bad |= chunk_log2("zstd_chunk_1g.wpack", 30);
    bad |= splat_codec();
    size_t len;
    unsigned char *b = base_archive(&len, 256);
    bad |= !b || save("zstd_limit_chunks.wpack", b, len);
    free(b);
    return bad;
}
