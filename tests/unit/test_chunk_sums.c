/*
 * test_chunk_sums.c - chunk checksums (spec 19b, format 1.2): what the
 * writer puts in the index, the open-time rules, and reads of a part that
 * check (or fetch) only the chunks holding it - from memory, and from a
 * source that counts what it is asked for and can serve wrong bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "bytes.h"
#include "layout.h"
#include "testlib.h"
#include "wpack.h"

#define CH 4096u                 /* chunk size the tests write */
#define BIG (5 * CH + 100)       /* 6 chunks, the last of 100 bytes */

static char dir[256];
static uint8_t big[BIG];
static uint8_t *arc;             /* the archive written by write_archive */
static size_t arc_len;

/* big (chunked), small (one chunk: none), alias of big. */
static int write_archive(const char *path, uint64_t chunk_sums)
{
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.alignment = 64;
    o.chunk_sums = chunk_sums;
    o.compress_level = 3;
    o.compress_min = 1u << 30; /* nothing compressed but z, by its own call below */
    wpack_writer *w;
    int rc = wpack_writer_open(&w, path, &o);
    uint64_t dbig[1] = {BIG}, dsmall[1] = {100};
    if (!rc)
        rc = wpack_writer_add_tensor(w, "big", WPACK_DTYPE_U8, 1, dbig, big, BIG);
    if (!rc)
        rc = wpack_writer_add_tensor(w, "small", WPACK_DTYPE_U8, 1, dsmall, big, 100);
    if (!rc)
        rc = wpack_writer_add_alias(w, "tied", "big");
    char err[600];
    if (rc) {
        printf("writer: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return rc;
    }
    if ((rc = wpack_writer_finish(w, err, sizeof err)))
        printf("finish: %s\n", err);
    return rc;
}

static uint8_t *slurp_path(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

/* The index moved by nothing: re-seal its checksum in superblock and trailer. */
static void reseal(uint8_t *p, size_t len)
{
    uint64_t ioff = wpk_ld64(p + WPK_H_INDEX_OFFSET_OFF), ilen = wpk_ld64(p + WPK_H_INDEX_LENGTH_OFF);
    uint64_t sum = XXH3_64bits(p + ioff, (size_t)ilen);
    uint8_t *hs[2] = {p, p + len - WPK_HEADER_SIZE};
    for (int k = 0; k < 2; k++) {
        wpk_st64(hs[k] + WPK_H_INDEX_CHECKSUM_OFF, sum);
        wpk_st64(hs[k] + WPK_H_CHECKSUM_OFF, XXH3_64bits(hs[k], WPK_H_CHECKSUM_OFF));
    }
}

/* The entry record of name in an archive image (names are unique). */
static uint8_t *rec_of(uint8_t *p, const char *name)
{
    uint64_t ioff = wpk_ld64(p + WPK_H_INDEX_OFFSET_OFF);
    uint8_t *ix = p + ioff;
    uint64_t n = wpk_ld64(ix + WPK_I_ENTRY_COUNT_OFF);
    uint8_t *ents = ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_ENTRIES);
    uint8_t *strs = ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_STRINGS);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *r = ents + i * WPK_ENTRY_SIZE;
        if (strcmp((char *)strs + wpk_ld64(r + WPK_E_NAME_OFF), name) == 0)
            return r;
    }
    return NULL;
}

static uint8_t *copy_arc(void)
{
    uint8_t *c = malloc(arc_len);
    memcpy(c, arc, arc_len);
    return c;
}

static void test_written(void)
{
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, arc, arc_len, 0) == WPACK_OK, "open");
    wpack_info info;
    wpack_get_info(ar, &info);
    CHECK_EQ(info.format_minor, 2);
    CHECK_EQ(info.optional_features, 1);
    CHECK_EQ(info.required_features, 0);
    wpack_tensor t;
    const char *names[] = {"big", "tied", "small"};
    uint64_t want[] = {CH, CH, 0};
    for (int k = 0; k < 3; k++) {
        CHECK(wpack_find(ar, names[k], &t) == WPACK_OK, "%s", names[k]);
        CHECK_EQ(wpack_tensor_chunk_size(ar, t.index), want[k]);
    }
    CHECK_EQ(wpack_tensor_chunk_size(ar, 99), 0);
    /* the sums are the XXH3 of each chunk */
    uint8_t *r = rec_of(arc, "big");
    CHECK_EQ(wpk_ld32(r + WPK_E_CODEC_PARAM_OFF), 12);
    uint64_t ioff = wpk_ld64(arc + WPK_H_INDEX_OFFSET_OFF);
    uint8_t *aux = arc + ioff + wpk_ld64(arc + ioff + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_AUX);
    for (uint64_t k = 0; k < 6; k++) {
        size_t n = k < 5 ? CH : 100;
        CHECK_EQ(wpk_ld64(aux + wpk_ld64(r + WPK_E_SUMS_OFF) + 8 * k), XXH3_64bits(big + k * CH, n));
    }
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_close(ar);
    /* without chunk sums: 1.0, as before */
    char path[300];
    snprintf(path, sizeof path, "%s/none.wpack", dir);
    CHECK(write_archive(path, 0) == WPACK_OK, "write");
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "open");
    wpack_get_info(ar, &info);
    CHECK_EQ(info.format_minor, 0);
    CHECK_EQ(info.optional_features, 0);
    wpack_find(ar, "big", &t);
    CHECK_EQ(wpack_tensor_chunk_size(ar, t.index), 0);
    wpack_close(ar);
    /* sizes the format does not take are refused at open of the writer */
    uint64_t bad[] = {3000, 2048, (uint64_t)128 << 20};
    for (int k = 0; k < 3; k++) {
        wpack_writer_options o;
        wpack_writer_options_init(&o);
        o.chunk_sums = bad[k];
        wpack_writer *w;
        CHECK(wpack_writer_open(&w, path, &o) == WPACK_E_INVALID_ARGUMENT, "size %llu",
              (unsigned long long)bad[k]);
        CHECK(strstr(wpack_writer_errmsg(w), "chunk checksum size"), "%s", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
    }
}

/* A part of big, read with verification from a memory image with byte
 * `flip` changed: only the chunks it touches decide. */
static void test_partial_mapped(void)
{
    uint8_t *c = copy_arc();
    wpack_tensor t;
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, arc, arc_len, 0) == WPACK_OK, "open");
    wpack_find(ar, "big", &t);
    uint64_t big_at = t.offset;
    wpack_close(ar);
    c[big_at + 3 * CH + 7] ^= 1; /* chunk 3 */
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "open");
    wpack_find(ar, "big", &t);
    uint8_t out[BIG];
    /* chunks 0..2 and the short last one: fine, and right */
    CHECK(wpack_read(ar, t.index, 10, out, 3 * CH - 10) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, big + 10, 3 * CH - 10) == 0, "bytes");
    CHECK(wpack_read(ar, t.index, 4 * CH + 5, out, CH + 95) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, big + 4 * CH + 5, CH + 95) == 0, "bytes");
    /* one byte of chunk 3: refused, naming the chunk */
    CHECK(wpack_read(ar, t.index, 3 * CH + 4000, out, 1) == WPACK_E_CHECKSUM, "chunk 3");
    CHECK(strstr(wpack_errmsg(ar), "chunk 3 (bytes 12288..16384)"), "%s", wpack_errmsg(ar));
    /* bad bytes are remembered: every later part, the alias too */
    CHECK(wpack_read(ar, t.index, 0, out, 10) == WPACK_E_CHECKSUM, "remembered");
    wpack_tensor tied;
    wpack_find(ar, "tied", &tied);
    CHECK(wpack_read(ar, tied.index, 0, out, 10) == WPACK_E_CHECKSUM, "alias");
    wpack_close(ar);
    /* no verification asked for: the bytes as they are */
    CHECK(wpack_open_memory(&ar, c, arc_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    CHECK(wpack_read(ar, t.index, 3 * CH, out, CH) == WPACK_OK, "unverified");
    wpack_close(ar);
    free(c);
}

/* A view of a part (wpack_tensor_view_range): only its chunks are
 * checked, so rows away from a bad chunk are viewed, zero-copy; a part
 * touching it is refused, and so is every view after; no chunk sums: the
 * whole entry is checked. */
static void test_view_range(void)
{
    uint8_t *c = copy_arc();
    wpack_tensor t, small;
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "open");
    wpack_find(ar, "big", &t);
    wpack_find(ar, "small", &small);
    uint64_t big_at = t.offset, small_at = small.offset;
    wpack_close(ar);
    c[big_at + 3 * CH + 7] ^= 1; /* chunk 3 of big */
    c[small_at + 99] ^= 1;       /* small: one chunk, no sums */
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "open");
    const void *p = (const void *)1;
    CHECK(wpack_tensor_view_range(ar, t.index, 10, 3 * CH - 10, &p) == WPACK_OK, "%s",
          wpack_errmsg(ar));
    CHECK(p == c + big_at + 10, "zero-copy: a pointer into the buffer");
    CHECK(wpack_tensor_view_range(ar, t.index, 4 * CH, CH + 100, &p) == WPACK_OK, "last chunks");
    CHECK(memcmp(p, big + 4 * CH, CH + 100) == 0, "bytes");
    CHECK(wpack_tensor_view_range(ar, t.index, 0, BIG + 1, &p) == WPACK_E_INVALID_ARGUMENT && !p,
          "past the end");
    CHECK(wpack_tensor_view_range(ar, t.index, UINT64_MAX, 2, &p) == WPACK_E_INVALID_ARGUMENT,
          "offset overflow");
    CHECK(wpack_tensor_view_range(ar, t.index, 3 * CH + 4095, 1, &p) == WPACK_E_CHECKSUM && !p,
          "chunk 3");
    CHECK(strstr(wpack_errmsg(ar), "chunk 3 (bytes 12288..16384)"), "%s", wpack_errmsg(ar));
    CHECK(wpack_tensor_view_range(ar, t.index, 0, 8, &p) == WPACK_E_CHECKSUM, "remembered");
    /* no chunk sums: the whole entry, once */
    CHECK(wpack_tensor_view_range(ar, small.index, 0, 8, &p) == WPACK_E_CHECKSUM, "small");
    CHECK(wpack_tensor_view_range(ar, 1u << 20, 0, 8, &p) == WPACK_E_NOT_FOUND, "no entry");
    wpack_close(ar);
    /* verification off: as the bytes are, the bad chunk too */
    CHECK(wpack_open_memory(&ar, c, arc_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    CHECK(wpack_tensor_view_range(ar, t.index, 3 * CH, CH, &p) == WPACK_OK, "unverified");
    CHECK(((const uint8_t *)p)[7] == (uint8_t)(big[3 * CH + 7] ^ 1), "the bytes as they are");
    wpack_close(ar);
    free(c);
}

/* A chunk is hashed once per open (as a whole entry is): bytes changed in
 * the caller's buffer after their chunk was checked go unseen by reads of
 * that handle (row lookups do not hash 1 MiB each), a new open sees them;
 * chunks not checked yet are still hashed. */
static void test_once_per_open(void)
{
    uint8_t *c = copy_arc();
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "open");
    wpack_tensor t;
    wpack_find(ar, "big", &t);
    uint8_t out[64];
    CHECK(wpack_read(ar, t.index, CH + 5, out, 8) == WPACK_OK, "%s", wpack_errmsg(ar));
    c[t.offset + CH + 100] ^= 1; /* chunk 1, checked */
    c[t.offset + 2 * CH + 100] ^= 1; /* chunk 2, not yet */
    CHECK(wpack_read(ar, t.index, CH + 90, out, 20) == WPACK_OK, "checked before: %s",
          wpack_errmsg(ar));
    CHECK(out[10] == (uint8_t)(big[CH + 100] ^ 1), "the bytes as they are now");
    CHECK(wpack_read(ar, t.index, 2 * CH, out, 8) == WPACK_E_CHECKSUM, "chunk 2 hashed");
    wpack_close(ar);
    c[t.offset + 2 * CH + 100] ^= 1;
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "reopen");
    CHECK(wpack_read(ar, t.index, CH + 5, out, 8) == WPACK_E_CHECKSUM, "new open, new check");
    wpack_close(ar);
    free(c);
}

/* A chunk sum that disagrees with bytes whose whole checksum is right:
 * verify reports it; a whole read passes; a part of that chunk does not. */
static void test_wrong_sum(void)
{
    uint8_t *c = copy_arc();
    uint8_t *r = rec_of(c, "big");
    uint64_t ioff = wpk_ld64(c + WPK_H_INDEX_OFFSET_OFF);
    uint8_t *aux = c + ioff + wpk_ld64(c + ioff + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_AUX);
    aux[wpk_ld64(r + WPK_E_SUMS_OFF) + 8 * 5] ^= 0x40; /* the last chunk's */
    reseal(c, arc_len);
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "open %s", wpack_errmsg(ar));
    wpack_tensor t;
    wpack_find(ar, "big", &t);
    CHECK(wpack_verify_entry(ar, t.index) == WPACK_E_CHECKSUM, "verify");
    CHECK(strstr(wpack_errmsg(ar), "chunk 5 (bytes 20480..20580)"), "%s", wpack_errmsg(ar));
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "open");
    uint8_t out[BIG];
    CHECK(wpack_read(ar, t.index, 0, out, BIG) == WPACK_OK, "whole: %s", wpack_errmsg(ar));
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, c, arc_len, 0) == WPACK_OK, "open");
    CHECK(wpack_read(ar, t.index, BIG - 1, out, 1) == WPACK_E_CHECKSUM, "last byte");
    wpack_close(ar);
    free(c);
}

/* Open-time rules (spec 19b): each change re-sealed, so the rule decides. */
static void test_rules(void)
{
    struct {
        const char *what;
        int field; /* 0 codec_param, 1 sums offset, 2 optional bits, 3 minor, 4 alias param */
        uint64_t value;
        int code;
    } cases[] = {
        {"chunk below 4 KiB", 0, 11, WPACK_E_CODEC},
        {"chunk above 64 MiB", 0, 27, WPACK_E_LIMIT},
        {"sums past the aux section", 1, 1u << 30, WPACK_E_BOUNDS},
        {"sums offset overflows", 1, UINT64_MAX - 8, WPACK_E_BOUNDS},
        {"bit not set", 2, 0, WPACK_E_RESERVED},
        {"minor 1 with the bit", 3, 1, WPACK_E_RESERVED},
        {"an alias with a chunk size", 4, 12, WPACK_E_RESERVED},
        {"a newer minor without the bit: ignored", 5, WPACK_FORMAT_MINOR + 1, WPACK_OK},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        uint8_t *c = copy_arc();
        uint8_t *r = rec_of(c, "big");
        uint8_t *hs[2] = {c, c + arc_len - WPK_HEADER_SIZE};
        switch (cases[k].field) {
        case 0: wpk_st32(r + WPK_E_CODEC_PARAM_OFF, (uint32_t)cases[k].value); break;
        case 1: wpk_st64(r + WPK_E_SUMS_OFF, cases[k].value); break;
        case 2: for (int h = 0; h < 2; h++) wpk_st64(hs[h] + WPK_H_OPTIONAL_OFF, 0); break;
        case 3: for (int h = 0; h < 2; h++) wpk_st16(hs[h] + WPK_H_MINOR_OFF, 1); break;
        case 4: wpk_st32(rec_of(c, "tied") + WPK_E_CODEC_PARAM_OFF, 12); break;
        case 5:
            for (int h = 0; h < 2; h++) {
                wpk_st16(hs[h] + WPK_H_MINOR_OFF, (uint16_t)cases[k].value);
                wpk_st64(hs[h] + WPK_H_OPTIONAL_OFF, 0);
            }
            break;
        }
        reseal(c, arc_len);
        wpack_archive *ar;
        int rc = wpack_open_memory(&ar, c, arc_len, 0);
        CHECK(rc == cases[k].code, "%s: %s (%s)", cases[k].what, wpack_error_name(rc),
              wpack_errmsg(ar));
        if (rc == WPACK_OK) { /* ignored: no chunk checks, whole checks still */
            wpack_tensor t;
            wpack_find(ar, "big", &t);
            CHECK_EQ(wpack_tensor_chunk_size(ar, t.index), 0);
            CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "%s", wpack_errmsg(ar));
        } else if (cases[k].field <= 1) {
            CHECK(strstr(wpack_errmsg(ar), "tensor 'big'"), "names it: %s", wpack_errmsg(ar));
        }
        wpack_close(ar);
        free(c);
    }
}

/* ------------------------------------------- through a source (a URL) */

typedef struct {
    const uint8_t *buf;
    size_t len;
    uint64_t bytes, lo, hi;  /* bytes asked for after open; their span */
    int counting;
    uint64_t flip_at;        /* flip this byte in what is served ... */
    int flips;               /* ... this many times (-1: always) */
    int forgets;
} count_src;

static int count_read(void *user, uint64_t off, void *dst, size_t n, char *msg, size_t msglen)
{
    count_src *m = user;
    if (off > m->len || n > m->len - off) {
        snprintf(msg, msglen, "past the end");
        return WPACK_E_TRUNCATED;
    }
    if (m->counting) {
        m->bytes += n;
        m->lo = off < m->lo ? off : m->lo;
        m->hi = off + n > m->hi ? off + n : m->hi;
    }
    memcpy(dst, m->buf + off, n);
    if (m->flips && m->flip_at >= off && m->flip_at < off + n) {
        ((uint8_t *)dst)[m->flip_at - off] ^= 0x10;
        if (m->flips > 0)
            m->flips--;
    }
    return WPACK_OK;
}

static void count_forget(void *user, uint64_t off, uint64_t n)
{
    (void)off, (void)n;
    ((count_src *)user)->forgets++;
}

static wpack_archive *open_counted(count_src *m)
{
    wpack_source s;
    memset(&s, 0, sizeof s);
    s.user = m;
    s.name = "count://test";
    s.size = m->len;
    s.read = count_read;
    s.forget = count_forget;
    wpack_archive *ar;
    int rc = wpack_open_source(&ar, &s, 0);
    CHECK(rc == WPACK_OK, "open source: %s", wpack_errmsg(ar));
    m->counting = 1;
    m->lo = UINT64_MAX;
    return rc == WPACK_OK ? ar : NULL;
}

static void test_partial_fetched(void)
{
    count_src m = {arc, arc_len};
    wpack_archive *ar = open_counted(&m);
    if (!ar)
        return;
    wpack_tensor t;
    wpack_find(ar, "big", &t);
    uint8_t out[BIG];
    /* bytes 2 CH + 10 .. 3 CH + 20: chunks 2 and 3 only */
    CHECK(wpack_read(ar, t.index, 2 * CH + 10, out, CH + 10) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, big + 2 * CH + 10, CH + 10) == 0, "bytes");
    CHECK_EQ(m.bytes, 2 * CH);
    CHECK_EQ(m.lo, t.offset + 2 * CH);
    CHECK_EQ(m.hi, t.offset + 4 * CH);
    /* whole chunks 1..4 and the short end: exactly their bytes */
    m.bytes = 0;
    CHECK(wpack_read(ar, t.index, CH, out, BIG - CH) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, big + CH, BIG - CH) == 0, "bytes");
    CHECK_EQ(m.bytes, BIG - CH);
    /* cut at both ends, two whole chunks between: 4 chunks, no more */
    m.bytes = 0;
    CHECK(wpack_read(ar, t.index, CH + 10, out, 3 * CH) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, big + CH + 10, 3 * CH) == 0, "bytes");
    CHECK_EQ(m.bytes, 4 * CH);
    /* nothing: nothing fetched */
    m.bytes = 0;
    CHECK(wpack_read(ar, t.index, 7, out, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK_EQ(m.bytes, 0);
    /* one wrong serving: forgotten and fetched again, the right bytes */
    m.bytes = 0;
    m.flip_at = t.offset + 4 * CH + 1;
    m.flips = 1;
    CHECK(wpack_read(ar, t.index, 4 * CH, out, 10) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, big + 4 * CH, 10) == 0, "bytes");
    CHECK_EQ(m.forgets, 1);
    CHECK_EQ(m.bytes, 2 * CH);
    /* always wrong: refused naming the chunk, remembered */
    m.flips = -1;
    CHECK(wpack_read(ar, t.index, 4 * CH, out, 10) == WPACK_E_CHECKSUM, "always wrong");
    CHECK(strstr(wpack_errmsg(ar), "chunk 4") && strstr(wpack_errmsg(ar), "fetched twice"), "%s",
          wpack_errmsg(ar));
    m.flips = 0;
    CHECK(wpack_read(ar, t.index, 0, out, 10) == WPACK_E_CHECKSUM, "remembered");
    wpack_close(ar);
    /* the alias reads its target's chunks the same way */
    count_src m2 = {arc, arc_len};
    if (!(ar = open_counted(&m2)))
        return;
    wpack_find(ar, "tied", &t);
    CHECK(wpack_read(ar, t.index, 5 * CH, out, 100) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, big + 5 * CH, 100) == 0, "bytes");
    CHECK_EQ(m2.bytes, 100);
    wpack_close(ar);
}

/* A zstd entry (4 KiB chunks) gets one sum per decoded chunk: a verified
 * part decodes only its chunks and checks each (mapped), or fetches only
 * their stored bytes (a source); a chunk whose sum disagrees is refused,
 * its neighbours are not. */
static uint8_t zdata[5 * CH + 300];

static void test_zstd(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/z.wpack", dir);
    for (size_t k = 0; k < sizeof zdata; k++)
        zdata[k] = (uint8_t)(k / 97);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.alignment = 64;
    o.chunk_sums = CH;
    o.compress_level = 3;
    o.compress_chunk = CH;
    o.compress_min = 0;
    wpack_writer *w;
    uint64_t dz = sizeof zdata;
    char err[600];
    CHECK(wpack_writer_open(&w, path, &o) == WPACK_OK, "open");
    CHECK(wpack_writer_add_tensor(w, "z", WPACK_DTYPE_U8, 1, &dz, zdata, sizeof zdata) == WPACK_OK,
          "%s", wpack_writer_errmsg(w));
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "%s", err);
    size_t len;
    uint8_t *img = slurp_path(path, &len);
    if (!img)
        return;
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, img, len, 0) == WPACK_OK, "open %s", wpack_errmsg(ar));
    wpack_tensor t;
    wpack_find(ar, "z", &t);
    CHECK(t.codec == WPACK_CODEC_ZSTD && t.stored_length < t.nbytes, "compressed");
    CHECK_EQ(wpack_tensor_chunk_size(ar, t.index), CH);
    const void *p = (const void *)1;
    CHECK(wpack_tensor_view_range(ar, t.index, 0, 8, &p) == WPACK_E_NO_VIEW && !p, "no view");
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_close(ar);
    /* the sum of chunk 3 changed (re-sealed): parts of 0..2 and 4..5 read, 3 not */
    uint8_t *r = rec_of(img, "z");
    uint64_t ioff = wpk_ld64(img + WPK_H_INDEX_OFFSET_OFF);
    uint8_t *aux = img + ioff + wpk_ld64(img + ioff + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_AUX);
    CHECK(wpk_ld64(r + WPK_E_SUMS_OFF) != 0, "sums at a non-zero offset");
    for (uint64_t k = 0; k < 6; k++)
        CHECK_EQ(wpk_ld64(aux + wpk_ld64(r + WPK_E_SUMS_OFF) + 8 * k),
                 XXH3_64bits(zdata + k * CH, k < 5 ? CH : 300));
    uint8_t *c = malloc(len);
    memcpy(c, img, len);
    uint8_t *caux = c + ioff + wpk_ld64(c + ioff + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_AUX);
    caux[wpk_ld64(rec_of(c, "z") + WPK_E_SUMS_OFF) + 8 * 3] ^= 1;
    reseal(c, len);
    uint8_t out[3 * CH];
    CHECK(wpack_open_memory(&ar, c, len, 0) == WPACK_OK, "open %s", wpack_errmsg(ar));
    CHECK(wpack_read(ar, t.index, 10, out, 3 * CH - 10) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, zdata + 10, 3 * CH - 10) == 0, "bytes");
    CHECK(wpack_read(ar, t.index, 4 * CH + 7, out, CH) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, zdata + 4 * CH + 7, CH) == 0, "bytes");
    CHECK(wpack_read(ar, t.index, 3 * CH + 5, out, 1) == WPACK_E_CHECKSUM, "chunk 3");
    CHECK(strstr(wpack_errmsg(ar), "chunk 3 (bytes 12288..16384) decodes to bytes hashing to"),
          "%s", wpack_errmsg(ar));
    CHECK(wpack_read(ar, t.index, 0, out, 1) == WPACK_E_CHECKSUM, "remembered");
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, c, len, 0) == WPACK_OK, "open");
    CHECK(wpack_verify_entry(ar, t.index) == WPACK_E_CHECKSUM, "verify finds it");
    wpack_close(ar);
    free(c);
    /* through a source: the stored bytes of the chunks asked for, no more */
    count_src m = {img, len};
    if ((ar = open_counted(&m))) {
        uint64_t s1 = wpk_ld64(aux + wpk_ld64(r + WPK_E_AUX_OFF) + 8 + 8 * 1) & ~WPK_CHUNK_RAW;
        uint64_t s0 = wpk_ld64(aux + wpk_ld64(r + WPK_E_AUX_OFF) + 8) & ~WPK_CHUNK_RAW;
        CHECK(wpack_read(ar, t.index, CH + 1, out, 100) == WPACK_OK, "%s", wpack_errmsg(ar));
        CHECK(memcmp(out, zdata + CH + 1, 100) == 0, "bytes");
        CHECK_EQ(m.bytes, s1 - s0);
        /* a wrong serving: fetched again; always wrong: refused */
        m.bytes = 0;
        m.flip_at = t.offset + s0 + (s1 - s0) / 2;
        m.flips = 1;
        CHECK(wpack_read(ar, t.index, CH, out, CH) == WPACK_OK, "%s", wpack_errmsg(ar));
        CHECK(memcmp(out, zdata + CH, CH) == 0, "bytes");
        CHECK_EQ(m.bytes, 2 * (s1 - s0));
        m.flips = -1;
        int rc = wpack_read(ar, t.index, CH, out, 8);
        CHECK(rc == WPACK_E_CHECKSUM || rc == WPACK_E_DECODE, "always wrong: %s", wpack_error_name(rc));
        CHECK(strstr(wpack_errmsg(ar), "tensor 'z'"), "%s", wpack_errmsg(ar));
        wpack_close(ar);
    }
    free(img);
    /* an in-place update keeps them (after the seek table: never offset 0) */
    wpack_update *u;
    CHECK(wpack_update_begin(&u, path, 0, err, sizeof err) == WPACK_OK, "%s", err);
    CHECK(wpack_update_set_string(u, "note", "x") == WPACK_OK, "set");
    CHECK(wpack_update_commit(u, err, sizeof err) == WPACK_OK, "%s", err);
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_find(ar, "z", &t);
    CHECK_EQ(wpack_tensor_chunk_size(ar, t.index), CH);
    CHECK(wpack_read(ar, t.index, 5 * CH, out, 300) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(memcmp(out, zdata + 5 * CH, 300) == 0, "bytes");
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_close(ar);
}

/* An in-place update rewrites the index: the sums move with it. */
static void test_update_keeps(void)
{
    char path[300], err[600];
    snprintf(path, sizeof path, "%s/upd.wpack", dir);
    CHECK(write_archive(path, CH) == WPACK_OK, "write");
    wpack_update *u;
    CHECK(wpack_update_begin(&u, path, 0, err, sizeof err) == WPACK_OK, "%s", err);
    CHECK(wpack_update_set_string(u, "note", "x") == WPACK_OK, "set");
    CHECK(wpack_update_commit(u, err, sizeof err) == WPACK_OK, "%s", err);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_tensor t;
    wpack_find(ar, "big", &t);
    CHECK_EQ(wpack_tensor_chunk_size(ar, t.index), CH);
    uint8_t out[CH];
    CHECK(wpack_read(ar, t.index, 5 * CH, out, 100) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_close(ar);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/wpack-chunk-sums-XXXXXX");
    if (!mkdtemp(dir))
        return 2;
    for (size_t k = 0; k < BIG; k++)
        big[k] = (uint8_t)(k * 131 + (k >> 9));
    char path[300];
    snprintf(path, sizeof path, "%s/a.wpack", dir);
    if (write_archive(path, CH) || !(arc = slurp_path(path, &arc_len)))
        return 2;
    RUN(test_written);
    RUN(test_partial_mapped);
    RUN(test_view_range);
    RUN(test_once_per_open);
    RUN(test_wrong_sum);
    RUN(test_rules);
    RUN(test_partial_fetched);
    RUN(test_update_keeps);
    RUN(test_zstd);
    free(arc);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", dir);
    return tl_finish();
}
