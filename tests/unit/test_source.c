/*
 * test_source.c - wpack_open_source (issue 17 point 1): an archive read
 * through a caller's byte source with no mapping gives the same entries,
 * bytes, validation errors and verification results as the same bytes
 * opened from memory; no view; every fetched entry is checked against its
 * XXH3 (a bad fetch is refetched once, then WPACK_E_CHECKSUM naming the
 * tensor); a failing source's message reaches the caller; a sharded set
 * opens its shards through open_shard.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static char dir[256];

enum { NA = 70000, NZ = 3 * 65536 + 100 };
static float a[NA];
static uint8_t z[NZ], bools[999];

/* "a" f32 noise (plain), "al" its alias, "b" bool, "s" splat, "z" u8 zstd
 * in 64 KiB chunks, "zal" its alias. shard_size > 0: a sharded set. */
static int write_archive(const char *name, uint64_t shard_size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    if (!shard_size) {
        o.compress_level = 3;
        o.compress_chunk = 65536;
        o.compress_min = 100000;
        o.compress_min_saving = 30;
    }
    o.shard_size = shard_size;
    wpack_writer *w;
    uint64_t da = NA, dz = NZ, db = sizeof bools, ds = 7;
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

/* A source over a buffer that counts its reads and can misbehave. */
typedef struct {
    const unsigned char *buf;
    size_t len;
    int reads;
    uint64_t bytes;
    uint64_t flip_at;   /* flip this byte in what is read ... */
    int flips;          /* ... this many more times (-1: always) */
    int fail;           /* >0: reads fail with WPACK_E_IO */
    int closed;
    int shard_fd_dir;   /* open_shard: files in dir */
} mem_src;

static int mem_read(void *user, uint64_t off, void *dst, size_t n, char *msg, size_t msglen)
{
    mem_src *m = user;
    m->reads++;
    m->bytes += n;
    if (m->fail) {
        snprintf(msg, msglen, "connection reset (test)");
        return WPACK_E_IO;
    }
    if (off > m->len || n > m->len - off) {
        snprintf(msg, msglen, "read past the end");
        return WPACK_E_TRUNCATED;
    }
    memcpy(dst, m->buf + off, n);
    if (m->flips && m->flip_at >= off && m->flip_at < off + n) {
        ((unsigned char *)dst)[m->flip_at - off] ^= 0x21;
        if (m->flips > 0)
            m->flips--;
    }
    return WPACK_OK;
}

static void mem_close(void *user)
{
    ((mem_src *)user)->closed++;
}

static wpack_source source_of(mem_src *m)
{
    wpack_source s;
    memset(&s, 0, sizeof s);
    s.user = m;
    s.name = "mem://test";
    s.size = m->len;
    s.read = mem_read;
    s.close = mem_close;
    return s;
}

static unsigned char *good;
static size_t good_len;

static void test_same_as_memory(void)
{
    mem_src m = {good, good_len};
    wpack_source s = source_of(&m);
    wpack_archive *ar, *mem;
    CHECK(wpack_open_source(&ar, &s, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(wpack_open_memory(&mem, good, good_len, 0) == WPACK_OK, "memory");
    int open_reads = m.reads;
    uint64_t open_bytes = m.bytes;
    CHECK(open_bytes < 64 * 1024, "open read %llu bytes", (unsigned long long)open_bytes);
    CHECK_EQ(wpack_count(ar), wpack_count(mem));
    wpack_tensor tz;
    CHECK(wpack_find(ar, "z", &tz) == WPACK_OK && tz.codec == WPACK_CODEC_ZSTD, "z compressed");
    for (uint64_t i = 0; i < wpack_count(mem); i++) {
        wpack_tensor t, u;
        wpack_tensor_at(ar, i, &t);
        wpack_tensor_at(mem, i, &u);
        CHECK(strcmp(t.name, u.name) == 0 && t.nbytes == u.nbytes, "entry %llu", (unsigned long long)i);
        CHECK(t.data == NULL, "no view for '%s'", t.name);
        const void *p;
        uint64_t n;
        if (!t.fill)
            CHECK(wpack_tensor_view(ar, i, &p, &n) == WPACK_E_NO_VIEW, "view of '%s'", t.name);
        unsigned char *x = malloc(t.nbytes + 1), *y = malloc(t.nbytes + 1);
        CHECK(wpack_read(ar, i, 0, x, t.nbytes) == WPACK_OK, "read '%s': %s", t.name, wpack_errmsg(ar));
        CHECK(wpack_read(mem, i, 0, y, u.nbytes) == WPACK_OK, "memory read");
        CHECK(memcmp(x, y, t.nbytes) == 0, "bytes of '%s'", t.name);
        if (t.nbytes > 10) { /* a part, verified or not */
            memset(x, 0, t.nbytes);
            CHECK(wpack_read_ex(ar, i, 5, x, t.nbytes - 10, WPACK_READ_VERIFY) == WPACK_OK, "part");
            CHECK(memcmp(x, y + 5, t.nbytes - 10) == 0, "part of '%s'", t.name);
        }
        free(x);
        free(y);
    }
    CHECK(m.reads > open_reads, "reads fetched");
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify: %s", wpack_errmsg(ar));
    wpack_close(mem);
    wpack_close(ar);
    CHECK_EQ(m.closed, 1);
}

typedef struct {
    unsigned char *p;
    size_t n;
} sink;

static int to_sink(void *user, const void *d, size_t n)
{
    sink *s = user;
    memcpy(s->p + s->n, d, n);
    s->n += n;
    return 0;
}

static void test_stream(void)
{
    mem_src m = {good, good_len};
    wpack_source s = source_of(&m);
    wpack_archive *ar;
    CHECK(wpack_open_source(&ar, &s, WPACK_OPEN_VERIFY_READS) == WPACK_OK, "%s", wpack_errmsg(ar));
    const char *names[] = {"a", "z", "zal", "b", "s"};
    for (int k = 0; k < 5; k++) {
        wpack_tensor t;
        CHECK(wpack_find(ar, names[k], &t) == WPACK_OK, "find");
        sink sk = {malloc(t.nbytes + 1), 0};
        unsigned char *y = malloc(t.nbytes + 1);
        CHECK(wpack_read_stream(ar, t.index, to_sink, &sk, WPACK_READ_VERIFY) == WPACK_OK, "stream %s: %s",
              names[k], wpack_errmsg(ar));
        CHECK(wpack_read(ar, t.index, 0, y, t.nbytes) == WPACK_OK, "read");
        CHECK(sk.n == t.nbytes && memcmp(sk.p, y, t.nbytes) == 0, "stream bytes of %s", names[k]);
        free(sk.p);
        free(y);
    }
    wpack_close(ar);
}

/* The source's idle hook runs after every piece handed to the caller, whole
 * entries and windowed ones alike (a remote source drives its transfers
 * there while the caller writes). */
static int idles, pieces;
static void count_idle(void *user)
{
    (void)user;
    idles++;
}
static int count_piece(void *user, const void *d, size_t n)
{
    (void)user;
    (void)d;
    (void)n;
    pieces++;
    return 0;
}

static void test_idle_between_pieces(void)
{
    for (int windowed = 0; windowed < 2; windowed++) {
        mem_src m = {good, good_len};
        wpack_source s = source_of(&m);
        s.idle = count_idle;
        s.stream_window = windowed ? 65536 : 0;
        wpack_archive *ar;
        CHECK(wpack_open_source(&ar, &s, WPACK_OPEN_VERIFY_READS) == WPACK_OK, "%s",
              wpack_errmsg(ar));
        wpack_tensor t;
        idles = pieces = 0;
        CHECK(wpack_find(ar, "a", &t) == WPACK_OK &&
                  wpack_read_stream(ar, t.index, count_piece, NULL, WPACK_READ_VERIFY) == WPACK_OK,
              "stream: %s", wpack_errmsg(ar));
        CHECK(pieces == (windowed ? 5 : 1) && idles == pieces, "windowed %d: %d pieces, %d idles",
              windowed, pieces, idles);
        wpack_close(ar);
    }
}

/* Bytes that change on the way: once (refetched, right bytes), always
 * (WPACK_E_CHECKSUM naming the tensor, whatever the flags). */
static void test_bad_fetch(void)
{
    wpack_archive *mem;
    wpack_open_memory(&mem, good, good_len, 0);
    wpack_tensor ta, tz;
    wpack_find(mem, "a", &ta);
    wpack_find(mem, "z", &tz);
    float *x = malloc(sizeof a);
    for (int always = 0; always < 2; always++) {
        mem_src m = {good, good_len};
        m.flip_at = ta.offset + 123;
        m.flips = always ? -1 : 1;
        wpack_source s = source_of(&m);
        wpack_archive *ar;
        CHECK(wpack_open_source(&ar, &s, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
        int rc = wpack_read(ar, ta.index, 0, x, sizeof a);
        if (always) {
            CHECK(rc == WPACK_E_CHECKSUM, "rc %d", rc);
            CHECK(strstr(wpack_errmsg(ar), "tensor 'a'") && strstr(wpack_errmsg(ar), "twice"), "%s",
                  wpack_errmsg(ar));
            CHECK(wpack_read(ar, ta.index, 4, x, 8) != WPACK_OK, "part not handed out");
        } else {
            CHECK(rc == WPACK_OK && memcmp(x, a, sizeof a) == 0, "refetched: %s", wpack_errmsg(ar));
        }
        wpack_close(ar);
    }
    /* a compressed tensor's stored bytes, always wrong: never decoded */
    mem_src m = {good, good_len};
    m.flip_at = tz.offset + tz.stored_length / 2;
    m.flips = -1;
    wpack_source s = source_of(&m);
    wpack_archive *ar;
    CHECK(wpack_open_source(&ar, &s, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    uint8_t *y = malloc(NZ);
    CHECK(wpack_read(ar, tz.index, 0, y, NZ) == WPACK_E_CHECKSUM, "zstd flip");
    CHECK(strstr(wpack_errmsg(ar), "tensor 'z'") != NULL, "%s", wpack_errmsg(ar));
    sink sk = {y, 0};
    CHECK(wpack_read_stream(ar, tz.index, to_sink, &sk, 0) == WPACK_E_CHECKSUM, "stream: nothing");
    CHECK_EQ(sk.n, 0);
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_E_CHECKSUM, "verify finds it");
    wpack_close(ar);
    free(y);
    free(x);
    wpack_close(mem);
}

static void test_failing_source(void)
{
    mem_src m = {good, good_len};
    m.fail = 1;
    wpack_source s = source_of(&m);
    wpack_archive *ar;
    CHECK(wpack_open_source(&ar, &s, 0) == WPACK_E_IO, "open fails with the source's code");
    CHECK(strstr(wpack_errmsg(ar), "mem://test") && strstr(wpack_errmsg(ar), "connection reset"),
          "%s", wpack_errmsg(ar));
    wpack_close(ar);
    CHECK_EQ(m.closed, 1);
    /* failing after open: the read names the tensor and the reason */
    mem_src m2 = {good, good_len};
    s = source_of(&m2);
    CHECK(wpack_open_source(&ar, &s, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_tensor t;
    wpack_find(ar, "a", &t);
    m2.fail = 1;
    float x[4];
    CHECK(wpack_read_ex(ar, t.index, 0, x, sizeof x, WPACK_READ_VERIFY) == WPACK_E_IO, "io");
    CHECK(strstr(wpack_errmsg(ar), "tensor 'a'") && strstr(wpack_errmsg(ar), "connection reset"),
          "%s", wpack_errmsg(ar));
    m2.fail = 0; /* an I/O error is not remembered as a verdict on the bytes */
    CHECK(wpack_read_ex(ar, t.index, 0, x, sizeof x, WPACK_READ_VERIFY) == WPACK_OK, "%s",
          wpack_errmsg(ar));
    wpack_close(ar);
}

/* An open() that learns the size, or fails: its code and message, the
 * source's name in front, and close() called once. */
static int size_open(void *user, uint64_t *size, char *msg, size_t msglen)
{
    mem_src *m = user;
    if (m->fail) {
        snprintf(msg, msglen, "HTTP 404 (test)");
        return WPACK_E_IO;
    }
    *size = m->len;
    return WPACK_OK;
}

static void test_source_open(void)
{
    for (int failing = 0; failing < 2; failing++) {
        mem_src m = {good, good_len};
        m.fail = failing;
        wpack_source s = source_of(&m);
        s.size = 0; /* open() says */
        s.open = size_open;
        wpack_archive *ar;
        int rc = wpack_open_source(&ar, &s, 0);
        if (failing)
            CHECK(rc == WPACK_E_IO && strcmp(wpack_errmsg(ar), "mem://test: HTTP 404 (test)") == 0 &&
                      m.reads == 0,
                  "%s", wpack_errmsg(ar));
        else
            CHECK(rc == WPACK_OK && wpack_count(ar) == 6, "%s", wpack_errmsg(ar));
        wpack_close(ar);
        CHECK_EQ(m.closed, 1);
    }
    wpack_archive *ar;
    CHECK(wpack_open_source(&ar, NULL, 0) == WPACK_E_INVALID_ARGUMENT, "no source");
    wpack_close(ar);
}

/* Every validation rule applies: damaged or cut copies fail with the code
 * a memory open gives. */
static void test_same_errors(void)
{
    unsigned char *b = malloc(good_len);
    size_t cuts[] = {0, 7, 200, good_len / 2, good_len - 1};
    uint64_t flips[] = {3, 40, 127, good_len - 60, good_len - 300};
    for (int k = 0; k < 10; k++) {
        memcpy(b, good, good_len);
        size_t len = good_len;
        if (k < 5)
            len = cuts[k];
        else
            b[flips[k - 5]] ^= 0x10;
        wpack_archive *x, *y;
        int r1 = wpack_open_memory(&x, b, len, 0);
        mem_src m = {b, len};
        wpack_source s = source_of(&m);
        int r2 = wpack_open_source(&y, &s, 0);
        CHECK(r1 != WPACK_OK && r1 == r2, "case %d: memory %s, source %s (%s)", k,
              wpack_error_name(r1), wpack_error_name(r2), wpack_errmsg(y));
        wpack_close(x);
        wpack_close(y);
    }
    free(b);
}

/* A source with a mapping gives views, as a memory open does. */
static void test_mapped_source(void)
{
    mem_src m = {good, good_len};
    wpack_source s = source_of(&m);
    s.base = good;
    wpack_archive *ar;
    CHECK(wpack_open_source(&ar, &s, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    wpack_tensor t;
    wpack_find(ar, "a", &t);
    const void *p;
    uint64_t n;
    CHECK(wpack_tensor_view(ar, t.index, &p, &n) == WPACK_OK && memcmp(p, a, sizeof a) == 0, "view");
    wpack_close(ar);
}

/* Sharded set: shards through open_shard (files read with pread here). */
typedef struct {
    int fd;
    uint64_t size;
} file_src;

static int file_read(void *user, uint64_t off, void *dst, size_t n, char *msg, size_t msglen)
{
    file_src *f = user;
    ssize_t got = pread(f->fd, dst, n, (off_t)off);
    if (got != (ssize_t)n) {
        snprintf(msg, msglen, "short read");
        return WPACK_E_IO;
    }
    return WPACK_OK;
}

static void file_close(void *user)
{
    file_src *f = user;
    close(f->fd);
    free(f);
}

static int shard_opens;

static int file_open_shard(void *user, const char *name, unsigned flags, wpack_archive **out);

static int open_file_source(const char *name, unsigned flags, wpack_archive **out, int shards)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    file_src *f = calloc(1, sizeof *f);
    f->fd = open(path, O_RDONLY);
    f->size = f->fd >= 0 ? (uint64_t)lseek(f->fd, 0, SEEK_END) : 0;
    wpack_source s;
    memset(&s, 0, sizeof s);
    s.user = f;
    s.name = path;
    s.size = f->size;
    s.read = file_read;
    s.close = file_close;
    if (shards)
        s.open_shard = file_open_shard;
    return wpack_open_source(out, &s, flags);
}

static int file_open_shard(void *user, const char *name, unsigned flags, wpack_archive **out)
{
    (void)user;
    shard_opens++;
    return open_file_source(name, flags, out, 1);
}

static void test_sharded(void)
{
    wpack_archive *ar, *loc;
    char path[512];
    snprintf(path, sizeof path, "%s/set.wpack", dir);
    CHECK(wpack_open_file(&loc, path, 0) == WPACK_OK, "%s", wpack_errmsg(loc));
    CHECK(open_file_source("set.wpack", 0, &ar, 1) == WPACK_OK, "%s", wpack_errmsg(ar));
    CHECK(shard_opens >= 2 && (uint32_t)shard_opens == wpack_shard_count(loc), "%d shards", shard_opens);
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify: %s", wpack_errmsg(ar));
    for (uint64_t i = 0; i < wpack_count(loc); i++) {
        wpack_tensor t;
        wpack_tensor_at(loc, i, &t);
        unsigned char *x = malloc(t.nbytes + 1), *y = malloc(t.nbytes + 1);
        CHECK(wpack_read(ar, i, 0, x, t.nbytes) == WPACK_OK, "%s", wpack_errmsg(ar));
        CHECK(wpack_read(loc, i, 0, y, t.nbytes) == WPACK_OK, "local");
        CHECK(memcmp(x, y, t.nbytes) == 0, "bytes of %s", t.name);
        free(x);
        free(y);
    }
    wpack_close(ar);
    wpack_close(loc);
    /* without open_shard: refused */
    CHECK(open_file_source("set.wpack", 0, &ar, 0) == WPACK_E_SHARD, "no open_shard");
    CHECK(strstr(wpack_errmsg(ar), "open_shard") != NULL, "%s", wpack_errmsg(ar));
    wpack_close(ar);
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static int count_only(void *user, const void *d, size_t n)
{
    (void)d;
    *(uint64_t *)user += n;
    return 0;
}

/* Streaming entries of mixed sizes through a source reuses the handle's
 * blocks: after a warm-up round no new pages are faulted in per entry (a
 * fresh malloc per entry faulted in every page: 10240 faults for each
 * 40 MiB entry, which cost more than the copy itself on a VM). */
static void test_reuses_blocks(void)
{
    static const uint64_t mib[] = {6, 2, 40};
    char path[512];
    snprintf(path, sizeof path, "%s/mixed.wpack", dir);
    wpack_writer *w;
    int rc = wpack_writer_open(&w, path, NULL);
    uint8_t *fill = calloc(40u << 20, 1);
    for (int k = 0; !rc && fill && k < 3; k++) {
        char name[16];
        uint64_t n = mib[k] << 20;
        snprintf(name, sizeof name, "t%d", k);
        memset(fill, k + 1, (size_t)n);
        rc = wpack_writer_add_tensor(w, name, WPACK_DTYPE_U8, 1, &n, fill, n);
    }
    free(fill);
    char err[600];
    CHECK(!rc && wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "write mixed.wpack");
    size_t len;
    unsigned char *bytes = test_slurp(path, &len);
    CHECK(bytes != NULL, "read mixed.wpack");
    if (!bytes)
        return;
    mem_src m = {bytes, len};
    wpack_source s = source_of(&m);
    wpack_archive *ar;
    CHECK(wpack_open_source(&ar, &s, 0) == WPACK_OK, "%s", wpack_errmsg(ar));
    long faults = 0;
    uint64_t got = 0;
    for (int round = 0; round < 5; round++) {
        long before = minor_faults();
        for (uint64_t i = 0; i < 3; i++)
            CHECK(wpack_read_stream(ar, i, count_only, &got, WPACK_READ_VERIFY) == WPACK_OK,
                  "stream %llu: %s", (unsigned long long)i, wpack_errmsg(ar));
        if (round >= 3)
            faults += minor_faults() - before;
    }
    CHECK_EQ(got, 5 * (48u << 20));
    CHECK(faults < 2048, "%ld pages faulted in by the last two rounds (48 MiB each)", faults);
    wpack_close(ar);
    free(bytes);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/wpack-src-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    uint64_t st = 7;
    for (size_t i = 0; i < NA; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)(int32_t)(st >> 32) / 1e6f;
    }
    for (size_t i = 0; i < NZ; i++)
        z[i] = (uint8_t)(i / 500);
    for (size_t i = 0; i < sizeof bools; i++)
        bools[i] = (uint8_t)(i % 2);
    char path[512];
    snprintf(path, sizeof path, "%s/g.wpack", dir);
    if (write_archive("g.wpack", 0) || write_archive("set.wpack", 100000) ||
        !(good = test_slurp(path, &good_len))) {
        printf("FAIL setup\n# passed 0 failed 1\n");
        return 1;
    }
    RUN(test_same_as_memory);
    RUN(test_idle_between_pieces);
    RUN(test_stream);
    RUN(test_bad_fetch);
    RUN(test_failing_source);
    RUN(test_source_open);
    RUN(test_same_errors);
    RUN(test_mapped_source);
    RUN(test_sharded);
    RUN(test_reuses_blocks);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
    free(good);
    return tl_finish();
}
