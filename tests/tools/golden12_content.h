/*
 * golden12_content.h - the format-1.2 golden archive (chunk checksums,
 * spec 19b):
 *
 *   tests/golden/v12/chunk_sums.wpack   4 KiB chunk checksums on a tensor of
 *                                      four whole chunks and a short one; a
 *                                      tensor of exactly one chunk (none), an
 *                                      alias of the chunked one, a splat
 *   tests/golden/v12/chunk_sums.expect golden_describe() of it
 *   tests/golden/v12/errors/           one 1.2 rule broken per file (EXPECT)
 *
 * Shared by tests/tools/make_golden12.c (writes them) and
 * tests/unit/test_golden.c (reads them back line by line, regenerates them
 * byte for byte). Nothing is compressed, so the bytes depend on no libzstd
 * version: the regeneration is checked everywhere.
 */
#ifndef WPACK_TESTS_GOLDEN12_CONTENT_H
#define WPACK_TESTS_GOLDEN12_CONTENT_H

#include "tools/golden11_content.h" /* golden11_noise() */

#define G12_CHUNK 4096u             /* wpack_writer_options.chunk_sums */
#define G12_CHUNKED "chunked.f32"   /* f32 [4,1100]: 17600 bytes, 4 chunks + 1216 */
#define G12_ONE "one_chunk.u8"      /* u8 [4096]: exactly one chunk, no sums */
#define G12_ALIAS "tied.chunked"    /* -> chunked.f32: its target's sums */
#define G12_SPLAT "splat.half"      /* f16 [32,32] fill 0.5: no bytes, no sums */
#define G12_ROWS 4
#define G12_COLS 1100
#define G12_CHUNKED_BYTES (4u * G12_ROWS * G12_COLS)
#define G12_CHUNKED_SUMS 5          /* ceil(17600 / 4096) */

static inline int golden12_chunk_sums_write(const char *path, char *err, size_t errlen)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = GOLDEN_ALIGNMENT;
    opt.weight_stats = 0;
    opt.compress_level = 0; /* nothing compressed: no libzstd version in the bytes */
    opt.chunk_sums = G12_CHUNK;
    wpack_writer *w;
    int rc = golden_writer_open(&w, path, &opt, err, errlen);
    if (rc)
        return rc;
    {
        /* every chunk different, so a sum moved to another chunk is wrong */
        static uint8_t v[G12_CHUNKED_BYTES];
        for (uint32_t i = 0; i < G12_ROWS * G12_COLS; i++) {
            float f = (float)(int)(i % 97) * 0.25f - (float)(i / G12_COLS);
            uint32_t u;
            memcpy(&u, &f, 4);
            wpk_st32(v + 4 * i, u);
        }
        uint64_t d[2] = {G12_ROWS, G12_COLS};
        G_TRY(wpack_writer_add_tensor(w, G12_CHUNKED, WPACK_DTYPE_F32, 2, d, v, sizeof v));
    }
    {
        static uint8_t one[G12_CHUNK];
        golden11_noise(one, sizeof one, 0x2545f491u);
        uint64_t d[1] = {G12_CHUNK};
        G_TRY(wpack_writer_add_tensor(w, G12_ONE, WPACK_DTYPE_U8, 1, d, one, sizeof one));
    }
    {
        uint64_t d[2] = {32, 32};
        uint8_t half[2];
        wpk_st16(half, 0x3800); /* f16 0.5 */
        G_TRY(wpack_writer_add_splat(w, G12_SPLAT, WPACK_DTYPE_F16, 2, d, half, 2));
        G_TRY(wpack_writer_add_alias(w, G12_ALIAS, G12_CHUNKED));
    }
    G_TRY(wpack_writer_set_string(w, "wpack.producer", GOLDEN_PRODUCER));
    G_TRY(wpack_writer_set_string(w, "model.name", "golden-chunk-sums"));
    return golden_writer_finish(w, err, errlen);
}

#endif
