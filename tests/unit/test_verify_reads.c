/*
 * test_verify_reads.c - verify on read (issue 13 point 2) through the API:
 * WPACK_OPEN_VERIFY_READS on and off, WPACK_READ_VERIFY per call, partial
 * reads, views, wpack_verify_once, wpack_read_stream, wpack_linear_bind,
 * each tensor hashed once per open, threads; and the zstd rules of issue 14
 * (chunks decoded once, the 64 MiB chunk limit, one frame per chunk, codec 1
 * on a splat) with the committed files of tests/hostile/round2/zstd_*.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../fuzz/fix_checksums.h"
#include "testlib.h"
#include "wpack.h"
#include "wpack_dense.h"

static char dir[256];

/* "a" f32 plain, "al" alias of "a", "b" bool, "s" splat, "z" u8 zstd in
 * 64 KiB chunks (chunk 0 random: stored raw; the rest compresses),
 * "zal" alias of "z", "l.weight" / "l.bias" a Linear layer. */
enum { NA = 300000, NZ = 5 * 65536 + 1000 };
static float a[NA];
static uint8_t z[NZ], bools[4096];
static float lw[4 * 8], lb[4];

static void make_data(void)
{
    uint64_t s = 99;
    for (size_t i = 0; i < NA; i++) { /* noise: does not compress, stays plain */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)(int32_t)(s >> 32) / 1e6f;
    }
    for (size_t i = 0; i < NZ; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        z[i] = i < 65536 ? (uint8_t)(s >> 56) : (uint8_t)(i / 300);
    }
    for (size_t i = 0; i < sizeof bools; i++)
        bools[i] = (uint8_t)(i % 3 == 0);
    for (size_t i = 0; i < 32; i++)
        lw[i] = (float)i / 8;
    for (size_t i = 0; i < 4; i++)
        lb[i] = 1;
}

/* The test archive, in memory. */
static unsigned char *good;
static size_t good_len;

static int write_archive(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/g.wpack", dir);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.compress_level = 3;
    o.compress_chunk = 65536;
    o.compress_min = 200000;     /* z and a, but a (noise) */
    o.compress_min_saving = 30; /* does not shrink that much: plain */
    /* no chunk checksums: these tests are about whole-entry checks, which
     * a part of an entry without them gets (with them: test_chunk_sums) */
    o.chunk_sums = 0;
    wpack_writer *w;
    uint64_t da = NA, dz = NZ, db = sizeof bools, ds = 7, dl[2] = {4, 8}, dlb = 4;
    float fill = 3;
    int rc = wpack_writer_open(&w, path, &o);
    if (!rc)
        rc = wpack_writer_add_tensor(w, "a", WPACK_DTYPE_F32, 1, &da, a, sizeof a);
    if (!rc)
        rc = wpack_writer_add_alias(w, "al", "a");
    if (!rc)
        rc = wpack_writer_add_tensor(w, "b", WPACK_DTYPE_BOOL, 1, &db, bools, sizeof bools);
    if (!rc)
        rc = wpack_writer_add_splat(w, "s", WPACK_DTYPE_F32, 1, &ds, &fill, 4);
    if (!rc)
        rc = wpack_writer_add_tensor(w, "z", WPACK_DTYPE_U8, 1, &dz, z, sizeof z);
    if (!rc)
        rc = wpack_writer_add_alias(w, "zal", "z");
    if (!rc)
        rc = wpack_writer_add_tensor(w, "l.weight", WPACK_DTYPE_F32, 2, dl, lw, sizeof lw);
    if (!rc)
        rc = wpack_writer_add_tensor(w, "l.bias", WPACK_DTYPE_F32, 1, &dlb, lb, sizeof lb);
    char err[600];
    if (rc) {
        printf("writer: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return rc;
    }
    if ((rc = wpack_writer_finish(w, err, sizeof err))) {
        printf("finish: %s\n", err);
        return rc;
    }
    good = test_slurp(path, &good_len);
    return good ? 0 : 1;
}

static wpack_tensor find(const wpack_archive *ar, const char *name)
{
    wpack_tensor t;
    memset(&t, 0, sizeof t);
    CHECK(wpack_find(ar, name, &t) == WPACK_OK, "no '%s'", name);
    return t;
}

/* A copy of the archive with byte k of entry name's stored bytes flipped. */
static unsigned char *flipped(const char *name, uint64_t k)
{
    unsigned char *b = malloc(good_len);
    memcpy(b, good, good_len);
    wpack_archive *ar;
    wpack_open_memory(&ar, good, good_len, 0);
    wpack_tensor t = find(ar, name);
    b[t.offset + k] ^= 0x5a;
    wpack_close(ar);
    return b;
}

static void test_layout(void)
{
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, good, good_len, WPACK_OPEN_VERIFY | WPACK_OPEN_VERIFY_READS) == WPACK_OK,
          "%s", wpack_errmsg(ar));
    CHECK(find(ar, "a").codec == WPACK_CODEC_NONE, "a plain");
    wpack_tensor t = find(ar, "z");
    CHECK(t.codec == WPACK_CODEC_ZSTD && t.chunk_size == 65536, "z compressed");
    wpack_close(ar);
}

static void test_flag_off_and_on(void)
{
    unsigned char *b = flipped("a", 1000);
    wpack_archive *ar;
    float buf[256];
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    wpack_tensor t = find(ar, "a");
    CHECK(wpack_read(ar, t.index, 0, buf, sizeof buf) == WPACK_OK, "flag off: handed out");
    CHECK(wpack_read_ex(ar, t.index, 0, buf, sizeof buf, 0) == WPACK_OK, "read_ex without flag");
    const void *p;
    uint64_t n;
    CHECK(wpack_tensor_view(ar, t.index, &p, &n) == WPACK_OK && p == t.data, "view without flag");
    CHECK(wpack_read_ex(ar, t.index, 0, buf, sizeof buf, WPACK_READ_VERIFY) == WPACK_E_CHECKSUM,
          "per-call verify");
    CHECK(strstr(wpack_errmsg(ar), "tensor 'a'") != NULL, "message names it: %s", wpack_errmsg(ar));
    CHECK(wpack_verify_once(ar, t.index) == WPACK_E_CHECKSUM, "verify_once always checks");
    wpack_close(ar);

    /* verify on read is the default: flags 0 */
    CHECK(wpack_open_memory(&ar, b, good_len, 0) == WPACK_OK, "open, default flags");
    t = find(ar, "a");
    /* a partial read far from the flipped byte still checks the whole tensor */
    CHECK(wpack_read(ar, t.index, 4 * (NA - 256), buf, sizeof buf) == WPACK_E_CHECKSUM, "partial");
    CHECK(strstr(wpack_errmsg(ar), "tensor 'a'") != NULL, "%s", wpack_errmsg(ar));
    CHECK(wpack_read(ar, t.index, 0, buf, sizeof buf) == WPACK_E_CHECKSUM, "remembered");
    CHECK(wpack_read(ar, find(ar, "al").index, 0, buf, sizeof buf) == WPACK_E_CHECKSUM, "alias");
    CHECK(wpack_tensor_view(ar, t.index, &p, &n) == WPACK_E_CHECKSUM, "view checked");
    CHECK(p == t.data && n == t.nbytes, "view still set");
    float *all = malloc(sizeof a);
    CHECK(wpack_read(ar, t.index, 0, all, sizeof a) == WPACK_E_CHECKSUM, "whole");
    free(all);
    /* the other entries are fine */
    CHECK(wpack_read(ar, find(ar, "s").index, 0, buf, 28) == WPACK_OK, "splat");
    CHECK(buf[6] == 3.0f, "splat value");
    uint8_t zb[100];
    CHECK(wpack_read(ar, find(ar, "z").index, 70000, zb, sizeof zb) == WPACK_OK, "z");
    CHECK(memcmp(zb, z + 70000, sizeof zb) == 0, "z bytes");
    CHECK(wpack_read(ar, find(ar, "b").index, 0, zb, 10) == WPACK_OK, "b");
    wpack_close(ar);
    free(b);
}

static void test_zstd_flip(void)
{
    /* chunk 0 of z is stored raw: a flip there decodes to wrong bytes */
    unsigned char *b = flipped("z", 500);
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_VERIFY_READS) == WPACK_OK, "open");
    uint8_t buf[64];
    CHECK(wpack_read(ar, find(ar, "z").index, NZ - 64, buf, 64) == WPACK_E_CHECKSUM, "partial z");
    CHECK(strstr(wpack_errmsg(ar), "tensor 'z'") != NULL, "%s", wpack_errmsg(ar));
    CHECK(wpack_read(ar, find(ar, "zal").index, 0, buf, 64) == WPACK_E_CHECKSUM, "alias of z");
    CHECK(wpack_read(ar, find(ar, "a").index, 0, buf, 64) == WPACK_OK, "a fine");
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    uint8_t *all = malloc(NZ);
    CHECK(wpack_read(ar, find(ar, "z").index, 0, all, NZ) == WPACK_OK, "no flag: handed out");
    CHECK(wpack_read_ex(ar, find(ar, "z").index, 0, all, NZ, WPACK_READ_VERIFY) == WPACK_E_CHECKSUM,
          "whole z, one pass");
    free(all);
    wpack_close(ar);
    free(b);
}

/* Hashed once per open: bytes changed under an open handle after the first
 * check go unseen by reads (they trust the mark), while an explicit
 * wpack_verify_entry always hashes again. A new open checks afresh. */
static void test_once_per_open(void)
{
    unsigned char *b = malloc(good_len);
    memcpy(b, good, good_len);
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_VERIFY_READS) == WPACK_OK, "open");
    wpack_tensor t = find(ar, "a");
    float buf[16];
    CHECK(wpack_read(ar, t.index, 40, buf, sizeof buf) == WPACK_OK, "first read checks");
    CHECK(memcmp(buf, a + 10, sizeof buf) == 0, "bytes");
    b[t.offset + 7] ^= 1;
    CHECK(wpack_read(ar, t.index, 80, buf, sizeof buf) == WPACK_OK, "not hashed again");
    CHECK(wpack_verify_once(ar, t.index) == WPACK_OK, "remembered pass");
    CHECK(wpack_verify_entry(ar, t.index) == WPACK_E_CHECKSUM, "verify_entry hashes");
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_VERIFY_READS) == WPACK_OK, "reopen");
    CHECK(wpack_read(ar, t.index, 80, buf, sizeof buf) == WPACK_E_CHECKSUM, "new open, new check");
    wpack_close(ar);
    free(b);
}

typedef struct {
    uint8_t *dst;
    size_t got, pieces, max_piece, stop_after;
} sink;

static int collect(void *user, const void *p, size_t n)
{
    sink *s = user;
    memcpy(s->dst + s->got, p, n);
    s->got += n;
    s->pieces++;
    if (n > s->max_piece)
        s->max_piece = n;
    return s->stop_after && s->pieces == s->stop_after ? WPACK_E_IO : 0;
}

/* Bytes found bad are refused by every call that hands them out, with or
 * without verification asked for: before, a read with flags 0 returned the
 * bytes verify_once had just reported as corrupt. */
static void test_known_bad_refused(void)
{
    unsigned char *b = flipped("a", 1000);
    wpack_archive *ar;
    float buf[256];
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    wpack_tensor t = find(ar, "a");
    CHECK(wpack_verify_once(ar, t.index) == WPACK_E_CHECKSUM, "found bad");
    CHECK(wpack_read(ar, t.index, 0, buf, sizeof buf) == WPACK_E_CHECKSUM, "read refused");
    CHECK(strstr(wpack_errmsg(ar), "tensor 'a'") && strstr(wpack_errmsg(ar), "earlier check"),
          "message: %s", wpack_errmsg(ar));
    CHECK(wpack_read(ar, find(ar, "al").index, 0, buf, sizeof buf) == WPACK_E_CHECKSUM,
          "its alias refused");
    const void *p;
    uint64_t n;
    CHECK(wpack_tensor_view(ar, t.index, &p, &n) == WPACK_E_CHECKSUM, "view refused");
    uint8_t *dst = malloc(sizeof a);
    sink s = {dst, 0, 0, 0, 0};
    CHECK(wpack_read_stream(ar, t.index, collect, &s, 0) == WPACK_E_CHECKSUM && s.got == 0,
          "stream refused, nothing handed out");
    char path[300];
    snprintf(path, sizeof path, "%s/known_bad.out", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && wpack_read_to_fd(ar, t.index, fd, 0) == WPACK_E_CHECKSUM, "read_to_fd refused");
    CHECK(fd >= 0 && lseek(fd, 0, SEEK_END) == 0, "nothing written");
    if (fd >= 0)
        close(fd);
    unlink(path);
    /* the others are still handed out */
    CHECK(wpack_read(ar, find(ar, "b").index, 0, dst, 10) == WPACK_OK, "b");
    free(dst);
    wpack_close(ar);
    free(b);
}

static void test_stream(void)
{
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, good, good_len, 0) == WPACK_OK, "open");
    uint8_t *out = malloc(sizeof a);
    sink s = {out, 0, 0, 0, 0};
    CHECK(wpack_read_stream(ar, find(ar, "z").index, collect, &s, WPACK_READ_VERIFY) == WPACK_OK,
          "%s", wpack_errmsg(ar));
    CHECK(s.got == NZ && memcmp(out, z, NZ) == 0, "z streamed: %zu", s.got);
    CHECK(s.max_piece <= (1u << 20), "pieces <= 1 MiB");
    s = (sink){out, 0, 0, 0, 0};
    CHECK(wpack_read_stream(ar, find(ar, "a").index, collect, &s, 0) == WPACK_OK, "a");
    CHECK(s.got == sizeof a && memcmp(out, a, sizeof a) == 0 && s.pieces == 2, "a: %zu pieces", s.pieces);
    s = (sink){out, 0, 0, 0, 0};
    CHECK(wpack_read_stream(ar, find(ar, "s").index, collect, &s, WPACK_READ_VERIFY) == WPACK_OK, "s");
    float f[7];
    memcpy(f, out, sizeof f);
    CHECK(s.got == 28 && f[0] == 3 && f[6] == 3, "splat expanded");
    s = (sink){out, 0, 0, 0, 1};
    CHECK(wpack_read_stream(ar, find(ar, "a").index, collect, &s, WPACK_READ_VERIFY) == WPACK_E_IO,
          "fn's own code");
    CHECK(s.pieces == 1, "stopped after one piece");
    CHECK(wpack_read_stream(ar, 999, collect, &s, 0) == WPACK_E_NOT_FOUND, "bad index");
    CHECK(wpack_read_stream(ar, 0, NULL, NULL, 0) == WPACK_E_INVALID_ARGUMENT, "no fn");
    wpack_close(ar);

    /* a bad tensor: every byte goes out, then the mismatch, naming it */
    unsigned char *b = flipped("z", 20);
    CHECK(wpack_open_memory(&ar, b, good_len, 0) == WPACK_OK, "open, default flags");
    s = (sink){out, 0, 0, 0, 0};
    CHECK(wpack_read_stream(ar, find(ar, "z").index, collect, &s, 0) == WPACK_E_CHECKSUM, "bad z");
    CHECK(s.got == NZ, "all handed out first (%zu)", s.got);
    CHECK(strstr(wpack_errmsg(ar), "tensor 'z'") != NULL, "%s", wpack_errmsg(ar));
    s = (sink){out, 0, 0, 0, 0};
    CHECK(wpack_read_stream(ar, find(ar, "z").index, collect, &s, 0) == WPACK_E_CHECKSUM &&
              s.got == 0, "remembered: nothing handed out the second time");
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    s = (sink){out, 0, 0, 0, 0};
    CHECK(wpack_read_stream(ar, find(ar, "z").index, collect, &s, 0) == WPACK_OK, "no verify");
    wpack_close(ar);
    free(b);
    free(out);
}

/* Small reads through a compressed tensor, across chunk ends: the kept
 * chunk must never hand out another chunk's or another tensor's bytes. */
static void test_partial_zstd_reads(void)
{
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, good, good_len, 0) == WPACK_OK, "open");
    uint64_t zi = find(ar, "z").index, zal = find(ar, "zal").index;
    uint8_t buf[5000];
    int bad = 0;
    for (uint64_t off = 0; off < NZ; off += 4999) {
        size_t n = NZ - off < sizeof buf ? (size_t)(NZ - off) : sizeof buf;
        uint64_t e = (off / 4999) % 2 ? zi : zal;
        if (wpack_read(ar, e, off, buf, n) != WPACK_OK || memcmp(buf, z + off, n) != 0)
            bad++;
    }
    CHECK(bad == 0, "%d bad reads", bad);
    /* backwards too */
    for (uint64_t off = NZ - 3000; off >= 7001; off -= 7001)
        if (wpack_read(ar, zi, off, buf, 3000) != WPACK_OK || memcmp(buf, z + off, 3000) != 0)
            bad++;
    CHECK(bad == 0, "%d bad backward reads", bad);
    wpack_close(ar);
}

typedef struct {
    wpack_archive *ar;
    uint64_t a, z;
    int errors;
    int expect;
} reader_job;

static void *reader_thread(void *p)
{
    reader_job *j = p;
    uint8_t buf[4096];
    for (int k = 0; k < 40; k++) {
        uint64_t off = (uint64_t)(k * 7919) % (NZ - sizeof buf);
        int rc = wpack_read(j->ar, j->z, off, buf, sizeof buf);
        if (rc != j->expect || (rc == WPACK_OK && memcmp(buf, z + off, sizeof buf) != 0))
            j->errors++;
        off = (uint64_t)(k * 104729) % (sizeof a - sizeof buf);
        rc = wpack_read(j->ar, j->a, off, buf, sizeof buf);
        if (rc != WPACK_OK || memcmp(buf, (uint8_t *)a + off, sizeof buf) != 0)
            j->errors++;
    }
    return NULL;
}

static void test_threads(void)
{
    for (int bad = 0; bad < 2; bad++) {
        unsigned char *b = bad ? flipped("z", 3) : good;
        wpack_archive *ar;
        CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_VERIFY_READS) == WPACK_OK, "open");
        reader_job j[4];
        pthread_t th[4];
        for (int k = 0; k < 4; k++) {
            j[k] = (reader_job){.ar = ar, .a = find(ar, "a").index, .z = find(ar, "z").index,
                                .expect = bad ? WPACK_E_CHECKSUM : WPACK_OK};
            pthread_create(&th[k], NULL, reader_thread, &j[k]);
        }
        for (int k = 0; k < 4; k++) {
            pthread_join(th[k], NULL);
            CHECK(j[k].errors == 0, "thread %d (bad %d): %d errors", k, bad, j[k].errors);
        }
        wpack_close(ar);
        if (bad)
            free(b);
    }
}

/* Threads failing on one handle with different errors while another reads
 * the last error: wpack_errmsg_copy() gives a code and message that belong
 * together, whole (wpack_errmsg() points at the one buffer they rewrite). */
typedef struct {
    wpack_archive *ar;
    uint64_t i;
    int kind; /* 0: a checksum failure, 1: a bad fd, 2: reads the error */
    int stop, mismatches;
} errmsg_job;

static void *errmsg_thread(void *p)
{
    errmsg_job *j = p;
    uint8_t buf[64];
    char msg[600];
    if (j->kind == 2) {
        for (int k = 0; k < 200000; k++) {
            int code = wpack_errmsg_copy(j->ar, msg, sizeof msg);
            int ok = (code == WPACK_E_CHECKSUM && strncmp(msg, "tensor 'z': ", 12) == 0 &&
                      strstr(msg, "(found by an earlier check)")) ||
                     (code == WPACK_E_INVALID_ARGUMENT && strstr(msg, "fd -1"));
            j->mismatches += !ok;
        }
        return NULL;
    }
    while (!__atomic_load_n(&j->stop, __ATOMIC_RELAXED)) {
        if (j->kind == 0)
            wpack_read_ex(j->ar, j->i, 0, buf, sizeof buf, WPACK_READ_VERIFY);
        else
            wpack_read_to_fd(j->ar, j->i, -1, 0);
    }
    return NULL;
}

static void test_errmsg_copy_threads(void)
{
    unsigned char *b = flipped("z", 3);
    wpack_archive *ar;
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    uint64_t zi = find(ar, "z").index;
    CHECK(wpack_verify_once(ar, zi) == WPACK_E_CHECKSUM, "z is bad");
    /* the pair the reader may meet before either failing thread has run
     * (the first check's own message has no "found by an earlier check") */
    uint8_t one[64];
    CHECK(wpack_read_ex(ar, zi, 0, one, sizeof one, WPACK_READ_VERIFY) == WPACK_E_CHECKSUM,
          "z refused again");
    errmsg_job j[3];
    pthread_t th[3];
    for (int k = 0; k < 3; k++) {
        j[k] = (errmsg_job){.ar = ar, .i = zi, .kind = k};
        pthread_create(&th[k], NULL, errmsg_thread, &j[k]);
    }
    pthread_join(th[2], NULL);
    for (int k = 0; k < 2; k++) {
        __atomic_store_n(&j[k].stop, 1, __ATOMIC_RELAXED);
        pthread_join(th[k], NULL);
    }
    CHECK(j[2].mismatches == 0, "%d of 200000 code/message pairs did not belong together",
          j[2].mismatches);
    char small[8];
    CHECK(wpack_errmsg_copy(ar, small, sizeof small) != WPACK_OK && strlen(small) == 7, "cut: %s",
          small);
    CHECK(wpack_errmsg_copy(ar, NULL, 0) != WPACK_OK, "len 0");
    CHECK(wpack_errmsg_copy(NULL, small, sizeof small) == WPACK_E_NOMEM, "NULL handle");
    wpack_close(ar);
    free(b);
}

static void test_linear_bind(void)
{
    unsigned char *b = flipped("l.weight", 5);
    wpack_archive *ar;
    wpack_linear l;
    char err[600];
    CHECK(wpack_open_memory(&ar, b, good_len, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open");
    CHECK(wpack_linear_bind(ar, "l", &l, err, sizeof err) == WPACK_OK, "no flag: bound");
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, b, good_len, 0) == WPACK_OK, "open, default flags");
    CHECK(wpack_linear_bind(ar, "l", &l, err, sizeof err) == WPACK_E_CHECKSUM, "bind checks");
    CHECK(strstr(err, "l.weight") != NULL, "names it: %s", err);
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, good, good_len, WPACK_OPEN_VERIFY_READS) == WPACK_OK, "open");
    CHECK(wpack_linear_bind(ar, "l", &l, err, sizeof err) == WPACK_OK, "%s", err);
    wpack_close(ar);
    free(b);
}

/* codec 1 on a splat: KIND, as spec 19 rule 1 says (the codec is known;
 * the kind takes none). */
static void test_splat_codec_is_kind(void)
{
    unsigned char *b = malloc(good_len);
    memcpy(b, good, good_len);
    wpack_archive *ar;
    wpack_open_memory(&ar, good, good_len, 0);
    wpack_tensor t = find(ar, "s");
    wpack_close(ar);
    uint8_t *ix = b + wpk_ld64(b + WPK_H_INDEX_OFFSET_OFF);
    uint8_t *r = ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_ENTRIES) + t.index * WPK_ENTRY_SIZE;
    r[WPK_E_CODEC_OFF] = WPACK_CODEC_ZSTD;
    fix_checksums(b, good_len, 0);
    CHECK(wpack_open_memory(&ar, b, good_len, 0) == WPACK_E_KIND, "%s", wpack_errmsg(ar));
    wpack_close(ar);
    free(b);
}

static void test_chunk_limit_writer(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/c.wpack", dir);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.compress_level = 3;
    wpack_writer *w;
    o.compress_chunk = WPACK_MAX_CHUNK;
    CHECK(wpack_writer_open(&w, path, &o) == WPACK_OK, "64 MiB taken");
    wpack_writer_abort(w);
    o.compress_chunk = 2 * WPACK_MAX_CHUNK;
    CHECK(wpack_writer_open(&w, path, &o) == WPACK_E_LIMIT, "128 MiB refused");
    CHECK(strstr(wpack_writer_errmsg(w), "limit") != NULL, "%s", wpack_writer_errmsg(w));
    wpack_writer_abort(w);
    o.compress_chunk = 1u << 30;
    CHECK(wpack_writer_open(&w, path, &o) == WPACK_E_LIMIT, "1 GiB refused");
    wpack_writer_abort(w);
}

/* The committed hostile files and what each gives: at open, or (open OK)
 * reading the tensor and verifying it. */
static const struct {
    const char *file;
    int open, read, verify;
} hostile_files[] = {
    {"zstd_trailing_skippable.wpack", WPACK_OK, WPACK_E_DECODE, WPACK_E_DECODE},
    {"zstd_trailing_frame.wpack", WPACK_OK, WPACK_E_DECODE, WPACK_E_DECODE},
    {"zstd_chunk_over_limit.wpack", WPACK_E_LIMIT, 0, 0},
    {"zstd_chunk_1g.wpack", WPACK_E_LIMIT, 0, 0},
    {"zstd_splat_codec.wpack", WPACK_E_KIND, 0, 0},
    {"zstd_limit_chunks.wpack", WPACK_OK, WPACK_OK, WPACK_OK},
};

static void test_hostile_round2(void)
{
    const char *env = getenv("WPACK_TESTS_DIR");
    char path[4096];
    for (size_t k = 0; k < sizeof hostile_files / sizeof hostile_files[0]; k++) {
        snprintf(path, sizeof path, "%s/hostile/round2/%s", env ? env : "tests", hostile_files[k].file);
        wpack_archive *ar;
        int rc = wpack_open_file(&ar, path, 0);
        CHECK(rc == hostile_files[k].open, "%s: open %s: %s", hostile_files[k].file,
              wpack_error_name(rc), wpack_errmsg(ar));
        if (rc == WPACK_OK) {
            wpack_tensor t;
            int rr = WPACK_OK, rv = WPACK_OK;
            uint8_t *buf = malloc(1 << 20);
            for (uint64_t i = 0; i < wpack_count(ar); i++) {
                wpack_tensor_at(ar, i, &t);
                /* 1 MiB reads, as extract did: each chunk decoded once */
                for (uint64_t off = 0; rr == WPACK_OK && off < t.nbytes; off += 1 << 20)
                    rr = wpack_read(ar, i, off, buf,
                                    t.nbytes - off < (1 << 20) ? (size_t)(t.nbytes - off) : 1 << 20);
                if (!rv)
                    rv = wpack_verify_entry(ar, i);
            }
            free(buf);
            CHECK(rr == hostile_files[k].read, "%s: read %s", hostile_files[k].file, wpack_error_name(rr));
            CHECK(rv == hostile_files[k].verify, "%s: verify %s", hostile_files[k].file,
                  wpack_error_name(rv));
        }
        wpack_close(ar);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/wpack-vr-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    make_data();
    if (write_archive()) {
        printf("FAIL setup\n# passed 0 failed 1\n");
        return 1;
    }
    RUN(test_layout);
    RUN(test_flag_off_and_on);
    RUN(test_known_bad_refused);
    RUN(test_zstd_flip);
    RUN(test_once_per_open);
    RUN(test_stream);
    RUN(test_partial_zstd_reads);
    RUN(test_threads);
    RUN(test_errmsg_copy_threads);
    RUN(test_linear_bind);
    RUN(test_splat_codec_is_kind);
    RUN(test_chunk_limit_writer);
    RUN(test_hostile_round2);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
    free(good);
    return tl_finish();
}
