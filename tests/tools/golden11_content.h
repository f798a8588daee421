/*
 * golden11_content.h - the format-1.1 golden archives (issue 15, point 4):
 *
 *   tests/golden/v11/compressed.wpack   zstd-chunked tensors with seek tables,
 *                                      a raw chunk, plain neighbours, alias, splat
 *   tests/golden/v11/sharded.wpack      a manifest and its three shards
 *   tests/golden/v11/NAME.expect       golden_describe() of each
 *   tests/golden/v11/errors/           one 1.1 rule broken per file (EXPECT)
 *
 * Shared by tests/tools/make_golden.c (writes them) and
 * tests/unit/test_golden.c (reads them back line by line, regenerates them
 * byte for byte). Deterministic content and an explicit producer, as for
 * v1_basic; the compressed bytes also depend on libzstd's version, which the
 * committed files record (GOLDEN11_ZSTD_VERSION): with another version the
 * byte-for-byte regeneration of compressed.wpack is skipped visibly, and
 * everything else is still checked.
 */
#ifndef WPACK_TESTS_GOLDEN11_CONTENT_H
#define WPACK_TESTS_GOLDEN11_CONTENT_H

#include "tools/golden_content.h"

/* ZSTD_versionNumber() of the libzstd that wrote compressed.wpack. */
#define GOLDEN11_ZSTD_VERSION 10504u

#define G11_RAMP "comp.ramp"       /* f32 [3000], three 4 KiB chunks, all zstd */
#define G11_MIXED "comp.mixed"     /* u8 [8192]: chunk 0 zstd, chunk 1 raw (noise) */
#define G11_NOISE "plain.noise"    /* u8 [2048] noise: does not shrink, stays codec 0 */
#define G11_SMALL "plain.small"    /* below compress_min, codec 0 */

/* A fixed xorshift stream: bytes that zstd cannot shrink. */
static inline void golden11_noise(uint8_t *b, size_t n, uint32_t seed)
{
    uint32_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (uint8_t)(x >> 11);
    }
}

static inline int golden11_compressed_write(const char *path, char *err, size_t errlen)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = GOLDEN_ALIGNMENT;
    opt.weight_stats = 0;
    opt.compress_level = 3;
    opt.compress_chunk = 4096;
    opt.compress_min = 1024;
    opt.compress_min_saving = 5;
    opt.chunk_sums = 0; /* the 1.1 form: no 1.2 chunk checksums (golden v12 has them) */
    wpack_writer *w;
    int rc = golden_writer_open(&w, path, &opt, err, errlen);
    if (rc)
        return rc;
    {
        static uint8_t ramp[3000 * 4];
        for (int i = 0; i < 3000; i++) {
            float f = (float)(i % 16) - 7.5f;
            uint32_t u;
            memcpy(&u, &f, 4);
            wpk_st32(ramp + 4 * i, u);
        }
        uint64_t d[1] = {3000};
        G_TRY(wpack_writer_add_tensor(w, G11_RAMP, WPACK_DTYPE_F32, 1, d, ramp, sizeof ramp));
    }
    {
        static uint8_t mixed[8192];
        for (int i = 0; i < 4096; i++)
            mixed[i] = (uint8_t)(i / 64);
        golden11_noise(mixed + 4096, 4096, 0x9e3779b9u);
        uint64_t d[1] = {8192};
        G_TRY(wpack_writer_add_tensor(w, G11_MIXED, WPACK_DTYPE_U8, 1, d, mixed, sizeof mixed));
    }
    {
        uint8_t noise[2048];
        golden11_noise(noise, sizeof noise, 12345u);
        uint64_t d[2] = {32, 64};
        G_TRY(wpack_writer_add_tensor(w, G11_NOISE, WPACK_DTYPE_U8, 2, d, noise, sizeof noise));
    }
    {
        const float v[4] = {1, -2, 0.5f, 4};
        uint64_t d[1] = {4};
        G_TRY(golden_add_f32(w, G11_SMALL, 1, d, v, 4));
    }
    {
        uint64_t d[2] = {64, 64};
        uint8_t half[2];
        wpk_st16(half, 0x3800); /* f16 0.5 */
        G_TRY(wpack_writer_add_splat(w, "splat.half", WPACK_DTYPE_F16, 2, d, half, 2));
        G_TRY(wpack_writer_add_alias(w, "alias.ramp", G11_RAMP));
    }
    G_TRY(wpack_writer_set_string(w, "wpack.producer", GOLDEN_PRODUCER));
    G_TRY(wpack_writer_set_string(w, "model.name", "golden-compressed"));
    G_TRY(wpack_writer_add_name(w, "_param_constant0", G11_RAMP));
    return golden_writer_finish(w, err, errlen);
}

/* A manifest and three shards: shard_size 256 puts each 256-byte tensor in
 * a shard of its own, in input order. */
static inline int golden11_sharded_write(const char *path, char *err, size_t errlen)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = GOLDEN_ALIGNMENT;
    opt.weight_stats = 1; /* computed per shard, copied into the manifest */
    opt.shard_size = 256;
    wpack_writer *w;
    int rc = golden_writer_open(&w, path, &opt, err, errlen);
    if (rc)
        return rc;
    static const char *const names[3] = {"layers.0.weight", "layers.1.weight", "layers.10.weight"};
    for (int k = 0; k < 3; k++) {
        float v[64];
        for (int i = 0; i < 64; i++)
            v[i] = (float)((i % 8) - 4) * (float)(k + 1); /* exact sums in any order */
        uint64_t d[2] = {8, 8};
        G_TRY(golden_add_f32(w, names[k], 2, d, v, 64));
    }
    {
        uint64_t d[1] = {10};
        uint8_t zero[4] = {0, 0, 0, 0};
        G_TRY(wpack_writer_add_splat(w, "layers.0.bias", WPACK_DTYPE_F32, 1, d, zero, 4));
        G_TRY(wpack_writer_add_alias(w, "tied.weight", "layers.1.weight"));
    }
    G_TRY(wpack_writer_set_string(w, "wpack.producer", GOLDEN_PRODUCER));
    G_TRY(wpack_writer_set_string(w, "model.name", "golden-sharded"));
    G_TRY(wpack_writer_add_name(w, "_param_constant1", "layers.1.weight"));
    return golden_writer_finish(w, err, errlen);
}

#endif
