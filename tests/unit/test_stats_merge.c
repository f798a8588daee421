/* test_stats_merge.c - weight stats on an executor give the serial bits
 * (issue 19): block summaries computed in any order and folded in block
 * order equal wpk_acc_feed_path bit for bit, and a writer with an executor
 * (one that runs its items backwards, and a real pool) writes the very
 * bytes of a writer without one, histograms included, whatever the sizes
 * of the pieces it is given. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "testlib.h"
#include "weightstats.h"
#include "wpack.h"
#include "wpack_dense.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* n elements of dtype in buf: mode 0 random, 1 with NaN and infinities,
 * 2 all equal, 3 (f64) values whose block sums overflow. */
static void fill(uint8_t *buf, int dtype, size_t n, int mode)
{
    for (size_t i = 0; i < n; i++) {
        double x = ((double)(next() >> 11) / 9007199254740992.0 - 0.5) * 8;
        if (mode == 1 && next() % 997 == 0)
            x = next() % 3 == 0 ? NAN : next() % 2 ? INFINITY : -INFINITY;
        if (mode == 2)
            x = 0.375;
        if (mode == 3)
            x = x * 1e307;
        if (dtype == WPACK_DTYPE_F64) {
            memcpy(buf + 8 * i, &x, 8);
        } else if (dtype == WPACK_DTYPE_F32) {
            float f = (float)x;
            memcpy(buf + 4 * i, &f, 4);
        } else {
            float f = (float)x;
            uint32_t u;
            memcpy(&u, &f, 4);
            uint16_t h = (uint16_t)(u >> 16); /* bf16 by truncation; f16: random bits */
            if (dtype == WPACK_DTYPE_F16)
                h = (uint16_t)(next() & 0xffff);
            memcpy(buf + 2 * i, &h, 2);
        }
    }
}

/* An executor on this thread that runs items last to first, and counts. */
static size_t backwards_calls;
static void backwards(void *self, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    (void)self;
    backwards_calls++;
    while (n--)
        fn(ctx, n);
}

/* wpk_acc_feed_on's side item: the bytes in order, each once. */
static size_t side_seen;
static int side_ok;
static const uint8_t *side_base;
static void side(void *user, const void *p, size_t n)
{
    (void)user;
    side_ok &= (const uint8_t *)p == side_base + side_seen;
    side_seen += n;
}

/* Serial feed vs summaries computed in reverse in uneven groups and
 * folded in order: the same bits. */
static void one_merge(int dtype, size_t n, int mode, int portable)
{
    size_t size = wpack_dtype_size(dtype);
    uint8_t *buf = malloc(n * size);
    size_t nb = (n + WPK_STATS_BLOCK - 1) / WPK_STATS_BLOCK;
    wpk_bsum *sums = malloc(nb * sizeof *sums);
    CHECK(buf && sums, "memory");
    if (!buf || !sums)
        goto out;
    fill(buf, dtype, n, mode);
    wpk_acc a, b;
    wpk_acc_init(&a);
    wpk_acc_init(&b);
    wpk_acc_feed_path(&a, dtype, buf, n, portable);
    for (size_t end = nb; end;) {
        size_t g = 1 + next() % 7, first = end > g ? end - g : 0;
        wpk_acc_blocks(dtype, buf, n, first, end - first, portable, sums + first);
        end = first;
    }
    wpk_acc_fold(&b, dtype, buf, n, 0, nb / 2, sums); /* in two folds: the order counts, not the calls */
    wpk_acc_fold(&b, dtype, buf, n, nb / 2, nb - nb / 2, sums + nb / 2);
    wpk_acc_clamp(&b);
    CHECK(memcmp(&a, &b, sizeof a) == 0,
          "dtype %d n %zu mode %d portable %d: n %llu/%llu mean %.17g/%.17g m2 %.17g/%.17g", dtype,
          n, mode, portable, (unsigned long long)a.n, (unsigned long long)b.n, a.mean, b.mean, a.m2,
          b.m2);
    /* on an executor that runs items backwards, with a side item that sees every byte in order */
    wpack_executor ex = {backwards, NULL, 3};
    side_seen = 0;
    side_ok = 1;
    side_base = buf;
    wpk_acc c;
    wpk_acc_init(&c);
    wpk_acc_feed_on(&c, dtype, buf, n, portable, &ex, side, NULL);
    CHECK(memcmp(&a, &c, sizeof a) == 0, "feed_on: dtype %d n %zu mode %d", dtype, n, mode);
    CHECK(side_ok && side_seen == n * size, "side saw %zu of %zu bytes in order", side_seen,
          n * size);
out:
    free(buf);
    free(sums);
}

static void test_merge_matches_serial(void)
{
    static const size_t sizes[] = {1, 4095, 4096, 4097, 1000003, 2 * 4096 * 7 + 13};
    static const int dtypes[] = {WPACK_DTYPE_F32, WPACK_DTYPE_BF16, WPACK_DTYPE_F16,
                                 WPACK_DTYPE_F64};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
            for (int mode = 0; mode < 3; mode++)
                for (int portable = 0; portable < 2; portable++)
                    one_merge(dtypes[d], sizes[s], mode, portable);
    one_merge(WPACK_DTYPE_F64, 300007, 3, 0); /* sums overflow: the fold redoes blocks */
    one_merge(WPACK_DTYPE_F32, 5000011, 1, 0); /* several steps */
}

static char dir[] = "/tmp/wpack-statsmerge.XXXXXX";

/* Write the same tensors in pieces of odd sizes; the file's bytes. */
static uint8_t *write_set(const char *name, const wpack_executor *ex, size_t *len)
{
    static const int dtypes[] = {WPACK_DTYPE_F32, WPACK_DTYPE_BF16, WPACK_DTYPE_F16,
                                 WPACK_DTYPE_F32, WPACK_DTYPE_F64};
    static const size_t counts[] = {5000011, 3000017, 1048583, 2000003, 600011};
    static const int modes[] = {1, 0, 0, 2, 3};
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.histogram_bins = 37;
    o.executor = ex;
    wpack_writer *w;
    uint8_t *buf = NULL, *out = NULL;
    CHECK(wpack_writer_open(&w, path, &o) == WPACK_OK, "open %s", path);
    rng = 12345; /* the same values for every writer */
    for (int t = 0; t < 5; t++) {
        size_t n = counts[t], size = wpack_dtype_size(dtypes[t]);
        free(buf);
        buf = malloc(n * size);
        if (!buf)
            break;
        fill(buf, dtypes[t], n, modes[t]);
        uint64_t dims[1] = {n};
        char tname[16];
        snprintf(tname, sizeof tname, "t%d", t);
        CHECK(wpack_writer_begin_tensor(w, tname, dtypes[t], 1, dims) == WPACK_OK, "begin");
        /* pieces: a split element first, then big odd pieces, then the rest */
        size_t piece[] = {3, (3u << 20) + 1, (5u << 20) + 7, 1, (9u << 20) + 5};
        size_t at = 0;
        for (int k = 0; at < n * size; k = (k + 1) % 5) {
            size_t m = n * size - at < piece[k] ? n * size - at : piece[k];
            CHECK(wpack_writer_write(w, buf + at, m) == WPACK_OK, "write");
            at += m;
        }
        CHECK(wpack_writer_end_tensor(w) == WPACK_OK, "end");
    }
    char err[256] = "";
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    FILE *f = fopen(path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        *len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        out = malloc(*len);
        if (out && fread(out, 1, *len, f) != *len) {
            free(out);
            out = NULL;
        }
        fclose(f);
    }
    unlink(path);
    free(buf);
    CHECK(out != NULL, "read back %s", path);
    return out;
}

static void test_writer_same_bytes(void)
{
    size_t n0 = 0, n1 = 0, n2 = 0;
    uint8_t *serial = write_set("serial.wpack", NULL, &n0);
    wpack_executor back = {backwards, NULL, 4};
    backwards_calls = 0;
    uint8_t *rev = write_set("back.wpack", &back, &n1);
    CHECK(backwards_calls > 10, "the executor ran %zu jobs", backwards_calls);
    wpack_pool *pool = wpack_pool_create(3, 0);
    CHECK(pool != NULL, "pool");
    wpack_executor ex;
    wpack_pool_executor(pool, &ex);
    uint8_t *par = write_set("pool.wpack", &ex, &n2);
    wpack_pool_destroy(pool);
    CHECK(serial && rev && par, "three archives");
    if (serial && rev && par) {
        CHECK(n0 == n1 && memcmp(serial, rev, n0) == 0, "backwards executor: other bytes");
        CHECK(n0 == n2 && memcmp(serial, par, n0) == 0, "pool: other bytes");
    }
    /* a one-thread executor is not used */
    wpack_executor one = {backwards, NULL, 1};
    backwards_calls = 0;
    size_t n3 = 0;
    uint8_t *o1 = write_set("one.wpack", &one, &n3);
    CHECK_EQ(backwards_calls, 0);
    CHECK(o1 && n3 == n0 && memcmp(serial, o1, n0) == 0, "one thread: other bytes");
    free(serial);
    free(rev);
    free(par);
    free(o1);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("FAIL mkdtemp\n");
        return 1;
    }
    RUN(test_merge_matches_serial);
    RUN(test_writer_same_bytes);
    rmdir(dir);
    return tl_finish();
}
