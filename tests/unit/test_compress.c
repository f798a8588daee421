/* test_compress.c - zstd-compressed tensors: chunks, seek table, ranges,
 * raw fallback, parallel decode, checksums, corrupt and bomb chunks. */
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "bytes.h"
#include "layout.h"
#include "testlib.h"
#include "wpack.h"
#include "wpack_dense.h"
#include "tools/golden_content.h"

static char dir[256];

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

enum { NCOMP = 100003, NRAND = 40000, NMIX = 30000 };
static float comp[NCOMP], rnd[NRAND], mix[NMIX];

static int write_archive(const char *path, int level, uint32_t chunk, uint32_t saving)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    opt.compress_level = level;
    opt.compress_chunk = chunk;
    opt.compress_min = 1024;
    opt.compress_min_saving = saving;
    opt.histogram_bins = 8;
    wpack_writer *w;
    if (wpack_writer_open(&w, path, &opt)) {
        printf("  open: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return 1;
    }
    int rc = 0;
    rc |= wpack_writer_add_tensor(w, "comp", WPACK_DTYPE_F32, 1, (uint64_t[]){NCOMP}, comp, sizeof comp);
    rc |= wpack_writer_add_tensor(w, "rand", WPACK_DTYPE_F32, 1, (uint64_t[]){NRAND}, rnd, sizeof rnd);
    /* streamed in odd pieces */
    rc |= wpack_writer_begin_tensor(w, "mix", WPACK_DTYPE_F32, 2, (uint64_t[]){NMIX / 10, 10});
    for (size_t off = 0; off < sizeof mix && !rc; off += 777) {
        size_t n = sizeof mix - off < 777 ? sizeof mix - off : 777;
        rc |= wpack_writer_write(w, (const char *)mix + off, n);
    }
    rc |= wpack_writer_end_tensor(w);
    rc |= wpack_writer_add_tensor(w, "small", WPACK_DTYPE_F32, 1, (uint64_t[]){4}, comp, 16);
    rc |= wpack_writer_add_alias(w, "tied", "comp");
    if (rc) {
        printf("  write: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return 1;
    }
    char err[512];
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc)
        printf("  finish: %s\n", err);
    return rc;
}

static int check_range(wpack_archive *ar, const char *name, const void *want, size_t size,
                       uint64_t off, size_t n)
{
    wpack_tensor t;
    if (wpack_find(ar, name, &t))
        return 0;
    char *buf = malloc(n + 1);
    int ok = wpack_read(ar, t.index, off, buf, n) == WPACK_OK &&
             memcmp(buf, (const char *)want + off, n) == 0 && off + n <= size;
    free(buf);
    return ok;
}

static void test_roundtrip(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/c.wpack", dir);
    CHECK(write_archive(path, 3, 4096, 5) == 0, "write");
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    wpack_info in;
    wpack_get_info(ar, &in);
    /* zstd tensors of several chunks also carry one checksum per decoded
     * chunk (1.2, optional bit 0): the zstd bit stays required */
    CHECK(in.format_minor == 2 && (in.required_features & 1) && in.optional_features == 1,
          "1.2 with the zstd feature bit and chunk checksums");
    wpack_tensor t;
    CHECK(wpack_find(ar, "comp", &t) == WPACK_OK, "find");
    CHECK(t.codec == WPACK_CODEC_ZSTD && t.chunk_size == 4096, "compressed, 4 KiB chunks");
    CHECK_EQ(wpack_tensor_chunk_size(ar, t.index), 4096);
    CHECK(t.stored_length < t.nbytes / 10 * 8, "shrinks: %llu of %llu", (unsigned long long)t.stored_length,
          (unsigned long long)t.nbytes);
    CHECK(t.data == NULL, "no view");
    const void *v;
    uint64_t vn;
    CHECK(wpack_tensor_view(ar, t.index, &v, &vn) == WPACK_E_NO_VIEW, "view says no");
    CHECK(t.decoded_checksum == XXH3_64bits(comp, sizeof comp), "decoded checksum");
    CHECK(check_range(ar, "comp", comp, sizeof comp, 0, sizeof comp), "whole");
    CHECK(check_range(ar, "comp", comp, sizeof comp, 4095, 2), "across a chunk edge");
    CHECK(check_range(ar, "comp", comp, sizeof comp, 12345, 40000), "middle");
    CHECK(check_range(ar, "comp", comp, sizeof comp, sizeof comp - 3, 3), "tail");
    CHECK(check_range(ar, "tied", comp, sizeof comp, 100, 9000), "alias of a compressed tensor");
    CHECK(wpack_find(ar, "tied", &t) == WPACK_OK && t.codec == WPACK_CODEC_ZSTD && !t.data,
          "alias carries the codec");
    CHECK(wpack_find(ar, "rand", &t) == WPACK_OK && t.codec == WPACK_CODEC_NONE && t.data &&
              memcmp(t.data, rnd, sizeof rnd) == 0, "incompressible: rewritten raw in place");
    CHECK(wpack_find(ar, "mix", &t) == WPACK_OK && t.codec == WPACK_CODEC_ZSTD, "mix compressed");
    CHECK(check_range(ar, "mix", mix, sizeof mix, 0, sizeof mix), "mix: raw and zstd chunks");
    CHECK(wpack_find(ar, "small", &t) == WPACK_OK && t.codec == WPACK_CODEC_NONE, "below min");
    wpack_stats s;
    CHECK(wpack_stats_find(ar, "comp", WPACK_STATS_WEIGHT, &s) == WPACK_OK && s.hist_bins == 8 &&
              s.count == NCOMP, "histogram read back through the decoder");
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify");
    /* parallel decode gives the same bytes (serial above) */
    wpack_pool *pool = wpack_pool_create(4, 0);
    wpack_executor ex;
    wpack_pool_executor(pool, &ex);
    CHECK_EQ(wpack_set_executor(ar, &ex), WPACK_OK);
    CHECK(check_range(ar, "comp", comp, sizeof comp, 1, sizeof comp - 2), "4 threads");
    CHECK(check_range(ar, "mix", mix, sizeof mix, 0, sizeof mix), "mix, 4 threads");
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify, 4 threads");
    CHECK_EQ(wpack_set_executor(ar, NULL), WPACK_OK);
    wpack_pool_destroy(pool);
    wpack_close(ar);

    /* a saving threshold nothing meets: everything stays raw and the file is 1.0 */
    CHECK(write_archive(path, 3, 4096, 100) == 0, "write 2");
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "open 2: %s", wpack_errmsg(ar));
    wpack_get_info(ar, &in);
    /* the raw rewrite keeps the sums of its zstd-sized chunks: 1.2, no zstd bit */
    CHECK(in.format_minor == 2 && in.required_features == 0, "no zstd bit when nothing is compressed");
    CHECK(wpack_find(ar, "comp", &t) == WPACK_OK && t.codec == 0 && memcmp(t.data, comp, sizeof comp) == 0,
          "raw after rewrite");
    CHECK(wpack_find(ar, "mix", &t) == WPACK_OK && t.codec == 0 && memcmp(t.data, mix, sizeof mix) == 0,
          "mix raw after rewrite");
    wpack_close(ar);
}

/* Offsets of entry `name`'s record and its aux in a file buffer. */
static const uint8_t *find_rec(const uint8_t *f, const char *name, const uint8_t **aux)
{
    const uint8_t *ix = f + wpk_ld64(f + WPK_H_INDEX_OFFSET_OFF);
    uint64_t n = wpk_ld64(ix + WPK_I_ENTRY_COUNT_OFF);
    const uint8_t *ents = ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_ENTRIES);
    const uint8_t *strs = ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_STRINGS);
    *aux = ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_AUX);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *r = ents + i * WPK_ENTRY_SIZE;
        if (strcmp((const char *)strs + wpk_ld64(r), name) == 0)
            return r;
    }
    return NULL;
}

static void test_corrupt_and_bomb(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/c.wpack", dir);
    CHECK(write_archive(path, 3, 4096, 5) == 0, "write");
    size_t len = 0;
    unsigned char *f = test_slurp(path, &len);
    const uint8_t *aux;
    const uint8_t *r = find_rec(f, "comp", &aux);
    CHECK(r != NULL, "record");
    if (!r)
        return;
    uint64_t off = wpk_ld64(r + WPK_E_DATA_OFFSET_OFF);
    const uint8_t *seek = aux + wpk_ld64(r + WPK_E_AUX_OFF) + 8;
    uint64_t c0 = wpk_ld64(seek) & ~WPK_CHUNK_RAW;

    /* a chunk whose frame declares 1 MiB instead of 4096 bytes: refused before decoding */
    unsigned char *bomb = malloc(len);
    memcpy(bomb, f, len);
    static unsigned char zeros[1 << 20], frame[4096];
    size_t fl = ZSTD_compress(frame, sizeof frame, zeros, sizeof zeros, 19);
    CHECK(!ZSTD_isError(fl) && fl <= c0, "bomb frame fits in chunk 0 (%zu <= %llu)", fl,
          (unsigned long long)c0);
    memset(bomb + off, 0, c0);
    memcpy(bomb + off, frame, fl);
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, bomb, len, 0) == WPACK_OK, "data damage is not an index error");
    wpack_tensor t;
    wpack_find(ar, "comp", &t);
    char buf[8192];
    CHECK(wpack_read(ar, t.index, 0, buf, 4096) == WPACK_E_DECODE, "declared size checked");
    CHECK(wpack_verify_entry(ar, t.index) == WPACK_E_CHECKSUM, "stored checksum catches it");
    wpack_close(ar);

    /* flipped bytes inside a frame: decode error or checksum error, never a crash */
    for (uint64_t k = 4; k < c0; k += 7) {
        memcpy(bomb, f, len);
        bomb[off + k] ^= 0x5a;
        /* without verify on read: the decoder itself meets the damage */
        if (wpack_open_memory(&ar, bomb, len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK) {
            wpack_find(ar, "comp", &t);
            int rc = wpack_read(ar, t.index, 0, buf, 8192);
            CHECK(rc == WPACK_OK || rc == WPACK_E_DECODE, "read: %d", rc);
            CHECK(wpack_verify_entry(ar, t.index) != WPACK_OK, "verify notices byte %llu",
                  (unsigned long long)k);
        }
        wpack_close(ar);
    }
    free(bomb);
    free(f);
}

/* M38: an alias of a compressed entry has no chunks of its own, so its
 * codec_param is 0 (KIND); the writer writes it so. */
static void test_alias_codec_param(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/a.wpack", dir);
    CHECK(write_archive(path, 3, 4096, 5) == 0, "write");
    size_t len = 0;
    unsigned char *f = test_slurp(path, &len);
    const uint8_t *aux;
    uint8_t *r = (uint8_t *)find_rec(f, "tied", &aux);
    CHECK(r && r[WPK_E_CODEC_OFF] == WPACK_CODEC_ZSTD && !wpk_ld32(r + WPK_E_CODEC_PARAM_OFF),
          "the alias carries codec 1 and codec_param 0");
    if (!r)
        return;
    wpk_st32(r + WPK_E_CODEC_PARAM_OFF, 12);
    gimg m = {f, len};
    gimg_seal_index(&m);
    wpack_archive *ar;
    CHECK_EQ(wpack_open_memory(&ar, f, len, 0), WPACK_E_KIND);
    wpack_close(ar);
    free(f);
}

static void test_writer_options(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/o.wpack", dir);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    CHECK(opt.compress_level == 0 && opt.compress_chunk == (1u << 20) && opt.compress_min_saving == 5,
          "defaults");
    wpack_writer *w;
    opt.compress_level = 3;
    opt.compress_chunk = 3000;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_E_INVALID_ARGUMENT, "chunk not a power of two");
    wpack_writer_abort(w);
    opt.compress_chunk = 4096;
    opt.compress_level = 99;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_E_INVALID_ARGUMENT, "level");
    wpack_writer_abort(w);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/wpack-zstd-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    for (int i = 0; i < NCOMP; i++)
        comp[i] = (float)(i % 1000);
    for (int i = 0; i < NRAND; i++) {
        uint32_t u = next_u32();
        memcpy(&rnd[i], &u, 4);
        if (rnd[i] != rnd[i])
            rnd[i] = 1; /* keep NaN out so the bytes compare */
    }
    for (int i = 0; i < NMIX; i++) {
        if (i / 1024 % 3 == 1) {
            uint32_t u = next_u32() & 0x3fffffff;
            memcpy(&mix[i], &u, 4);
        } else {
            mix[i] = 0.5f;
        }
    }
    RUN(test_roundtrip);
    RUN(test_corrupt_and_bomb);
    RUN(test_alias_codec_param);
    RUN(test_writer_options);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd))
        return 1;
    return tl_finish();
}
