/*
 * test_import_gzip.c - a .tar.gz is inflated once (import/archive_in.c:
 * zlib, checking every gzip member's CRC-32 and length, feeds libarchive
 * the inflated tar), and a damaged member fails the import wherever it is.
 *
 * The count of inflated bytes is deterministic: this program defines
 * zlib's inflate() itself (libarchive's calls and ours bind to it; it
 * forwards to zlib's through dlsym(RTLD_NEXT)) and adds up the bytes each
 * call puts out. One pass over a tar of N bytes is N; the old verify pass
 * followed by libarchive's own gzip filter was 2N.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "testlib.h"
#include "wpack.h"
#include "wpack_import.h"

static uint64_t inflated_total; /* bytes out of every inflate() call */

int inflate(z_streamp z, int flush)
{
    static int (*real)(z_streamp, int);
    if (!real)
        real = (int (*)(z_streamp, int))dlsym(RTLD_NEXT, "inflate");
    if (!real)
        abort(); /* no zlib to forward to: the test cannot run */
    uInt before = z->avail_out;
    int r = real(z, flush);
    inflated_total += before - z->avail_out;
    return r;
}

static char scratch[256];

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* A ustar member: header, data, zero padding to 512. */
static void tar_add(buf *t, const char *name, const void *data, size_t n)
{
    uint8_t h[512] = {0};
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)n);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = '0';
    memcpy(h + 257, "ustar\0" "00", 8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    put(t, h, 512);
    put(t, data, n);
    static const uint8_t zero[512];
    put(t, zero, (512 - n % 512) % 512);
}

static void tar_end(buf *t)
{
    static const uint8_t zero[1024];
    put(t, zero, sizeof zero);
}

/* A .npy of n f32 values (v1 header, 128 bytes). */
static void npy_f32(buf *o, size_t n, uint32_t seed)
{
    char d[128];
    int k = snprintf(d, sizeof d, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }",
                     n);
    memset(d + k, ' ', sizeof d - 10 - (size_t)k);
    d[117] = '\n';
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 118, 0};
    put(o, pre, 10);
    put(o, d, 118);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u; /* LCG: bytes that hardly compress */
        float f = (float)(seed >> 8) / 16777216.0f - 0.5f;
        put(o, &f, 4);
    }
}

/* One gzip member of p[0..n) appended to g; its CRC-32 flipped when bad. */
static void gz_member(buf *g, const void *p, size_t n, int bad)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    uint8_t *out = malloc(cap);
    if (!out)
        abort();
    z.next_in = (Bytef *)p;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    if (bad)
        out[len - 8] ^= 1;
    put(g, out, len);
    free(out);
}

static void save(const char *path, const buf *b)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b->p, 1, b->n, f) == b->n, "write %s", path);
    if (f)
        fclose(f);
}

/* A tar of three .npy members (about 3 MiB). */
static void three_npy(buf *t)
{
    for (int i = 0; i < 3; i++) {
        buf n = {0};
        npy_f32(&n, 256 * 1024, (uint32_t)i + 1);
        char name[32];
        snprintf(name, sizeof name, "dir/w%d.npy", i);
        tar_add(t, name, n.p, n.n);
        free(n.p);
    }
}

/* Import path into a new archive at out: the import's code (the archive is
 * finished on success, aborted on failure); its message in err. */
static int import_to(const char *path, const char *out, uint32_t max_ratio, char *err,
                     size_t errlen)
{
    wpack_writer_options wo;
    wpack_writer_options_init(&wo);
    wo.no_sync = 1;
    wpack_writer *w;
    int rc = wpack_writer_open(&w, out, &wo);
    if (rc)
        return rc;
    wpack_import_options o;
    wpack_import_options_init(&o);
    o.err = err;
    o.err_size = errlen;
    o.max_ratio = max_ratio;
    rc = wpack_import_file(w, path, &o);
    if (rc) {
        wpack_writer_abort(w);
        return rc;
    }
    return wpack_writer_finish(w, err, errlen);
}

static char *at(const char *name)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", scratch, name);
    return p[i];
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    uint8_t *pa = test_slurp(a, &na), *pb = test_slurp(b, &nb);
    int same = pa && pb && na == nb && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

/* The tar is inflated once: exactly its own size comes out of zlib. */
static void test_one_inflate_pass(void)
{
    buf t = {0}, g = {0};
    three_npy(&t);
    tar_end(&t);
    gz_member(&g, t.p, t.n, 0);
    save(at("one.tar.gz"), &g);
    char err[512] = "";
    inflated_total = 0;
    CHECK_EQ(import_to(at("one.tar.gz"), at("one.wpack"), 0, err, sizeof err), WPACK_OK);
    CHECK(inflated_total == t.n, "%llu bytes inflated for a tar of %zu (%s)",
          (unsigned long long)inflated_total, t.n, err);
    free(t.p);
    free(g.p);
}

/* Members split anywhere (inside a header, inside a tensor), an empty
 * member, trailing bytes after the last: the same archive as the plain tar. */
static void test_members_same_as_tar(void)
{
    buf t = {0}, g = {0};
    three_npy(&t);
    tar_end(&t);
    save(at("plain.tar"), &t);
    size_t cut[] = {0, 100, 700 * 1024, 700 * 1024, 2 * 1024 * 1024 + 3, t.n};
    for (size_t i = 0; i + 1 < sizeof cut / sizeof cut[0]; i++)
        gz_member(&g, t.p + cut[i], cut[i + 1] - cut[i], 0);
    put(&g, "trailing junk", 13);
    save(at("multi.tar.gz"), &g);
    char err[512] = "";
    CHECK_EQ(import_to(at("plain.tar"), at("plain.wpack"), 0, err, sizeof err), WPACK_OK);
    CHECK_EQ(import_to(at("multi.tar.gz"), at("multi.wpack"), 0, err, sizeof err), WPACK_OK);
    CHECK(same_file(at("plain.wpack"), at("multi.wpack")), "archives differ (%s)", err);
    free(t.p);
    free(g.p);
}

/* A damaged member is WPACK_E_CHECKSUM wherever it is: in the middle of a
 * tensor, or after the tar's end where libarchive stops reading. The
 * writer is aborted: no archive. */
static void test_bad_crc_anywhere(void)
{
    buf t = {0};
    three_npy(&t);
    tar_end(&t);
    buf junk = {0};
    for (int i = 0; i < 1 << 20; i++)
        put(&junk, "x", 1); /* inflated past libarchive's read-ahead */
    for (int where = 0; where < 2; where++) {
        buf g = {0};
        if (where == 0) { /* the first of two members, cut inside the second tensor */
            gz_member(&g, t.p, 1536 * 1024, 1);
            gz_member(&g, t.p + 1536 * 1024, t.n - 1536 * 1024, 0);
        } else { /* the whole tar, then a damaged member of bytes after it */
            gz_member(&g, t.p, t.n, 0);
            gz_member(&g, junk.p, junk.n, 1);
        }
        save(at("bad.tar.gz"), &g);
        unlink(at("bad.wpack"));
        char err[512] = "";
        CHECK_EQ(import_to(at("bad.tar.gz"), at("bad.wpack"), 0, err, sizeof err),
                 WPACK_E_CHECKSUM);
        CHECK(strstr(err, "incorrect data check (damaged file)") != NULL, "%d: %s", where, err);
        CHECK(access(at("bad.wpack"), F_OK) != 0, "%d: an archive was left", where);
        free(g.p);
    }
    free(junk.p);
    free(t.p);
}

/* The bomb guard counts what zlib inflated, skipped members included. */
static void test_bomb_guard(void)
{
    buf t = {0}, g = {0}, zeros = {0};
    zeros.p = calloc(1, 80u << 20);
    zeros.n = zeros.cap = 80u << 20;
    if (!zeros.p)
        abort();
    tar_add(&t, "junk.bin", zeros.p, zeros.n); /* not a .npy: skipped, but inflated */
    three_npy(&t);
    tar_end(&t);
    gz_member(&g, t.p, t.n, 0);
    save(at("bomb.tar.gz"), &g);
    char err[512] = "";
    CHECK_EQ(import_to(at("bomb.tar.gz"), at("bomb.wpack"), 0, err, sizeof err), WPACK_E_LIMIT);
    CHECK(strstr(err, "gzip stream expands more than 200:1") != NULL, "%s", err);
    err[0] = 0;
    CHECK_EQ(import_to(at("bomb.tar.gz"), at("bomb.wpack"), 100000, err, sizeof err), WPACK_OK);
    free(zeros.p);
    free(t.p);
    free(g.p);
}

int main(void)
{
    snprintf(scratch, sizeof scratch, "%s/wpack-gzip-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(scratch)) {
        printf("FAIL mkdtemp\n# passed 0 failed 1\n");
        return 1;
    }
    RUN(test_one_inflate_pass);
    RUN(test_members_same_as_tar);
    RUN(test_bad_crc_anywhere);
    RUN(test_bomb_guard);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        printf("  could not remove %s\n", scratch);
    return tl_finish();
}
