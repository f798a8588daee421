/* test_pool.c - the explicit thread pool of libwpack-dense and the core's
 * executor seam (issue 15): pools created and destroyed leave no thread
 * behind; a forward call gives the same bits on an explicit pool, on the
 * default pool, on one thread and on a pool of one; zstd decoding on a pool
 * executor (ranges, streams, verification, several reading threads) gives
 * the bytes of serial decoding, in batches no larger than promised; the
 * core alone starts no thread. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "testlib.h"
#include "thread_count.h"
#include "wpack.h"
#include "wpack_dense.h"

static void test_create_destroy_joins(void)
{
    CHECK_EQ(thread_count(), 1);
    int bad = 0;
    for (int i = 0; i < 50; i++) {
        unsigned n = 1 + (unsigned)i % 4;
        wpack_pool *p = wpack_pool_create(n, i % 3 == 0 ? 0 : -1);
        if (!p || wpack_pool_threads(p) != n) {
            bad++;
            wpack_pool_destroy(p);
            continue;
        }
        /* half of them destroyed right away (workers maybe not yet waiting) */
        if (i % 2 && thread_count() != (int)n)
            bad++;
        wpack_pool_destroy(p);
    }
    CHECK(bad == 0, "%d of 50 pools had the wrong thread count", bad);
    wpack_pool *all = wpack_pool_create(0, -1);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(all && wpack_pool_threads(all) == (unsigned)(cpus > 256 ? 256 : cpus), "0: online CPUs");
    wpack_pool_destroy(all);
    CHECK_EQ(thread_count(), 1);
}

/* --- a layer --------------------------------------------------------------- */

enum { OUT = 301, IN = 517, BATCH = 9 };
static float W[OUT * IN], X[BATCH * IN], B[OUT];
static wpack_linear L;

static void make_layer(void)
{
    uint32_t r = 12345;
    for (size_t i = 0; i < (size_t)OUT * IN; i++) {
        r = r * 1664525u + 1013904223u;
        W[i] = (float)((r >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    for (size_t i = 0; i < (size_t)BATCH * IN; i++)
        X[i] = (float)(i % 23) * 0.0625f - 0.7f;
    for (size_t i = 0; i < OUT; i++)
        B[i] = (float)i * 0.01f - 1.0f;
    wpack_linear l = {IN, OUT, WPACK_DTYPE_F32, W, NULL, WPACK_DTYPE_F32, B};
    L = l;
}

static void test_forward_same_bits(void)
{
    static float y1[BATCH * OUT], yp[BATCH * OUT], yd[BATCH * OUT], yo[BATCH * OUT];
    CHECK_EQ(wpack_linear_forward_pool(NULL, &L, X, y1, BATCH, WPACK_ACT_RELU), WPACK_OK);
    wpack_pool *p3 = wpack_pool_create(3, -1), *p1 = wpack_pool_create(1, -1);
    CHECK(p3 && p1, "pools");
    CHECK_EQ(wpack_pool_threads(p1), 1u);
    CHECK_EQ(thread_count(), 3); /* the pool of 3 started 2 workers, the pool of 1 none */
    for (int rep = 0; rep < 20; rep++) {
        CHECK_EQ(wpack_linear_forward_pool(p3, &L, X, yp, BATCH, WPACK_ACT_RELU), WPACK_OK);
        CHECK_EQ(wpack_linear_forward_pool(p1, &L, X, yo, BATCH, WPACK_ACT_RELU), WPACK_OK);
        CHECK_EQ(wpack_linear_forward(&L, X, yd, BATCH, WPACK_ACT_RELU), WPACK_OK);
        CHECK(memcmp(y1, yp, sizeof y1) == 0, "explicit pool of 3 differs from one thread");
        CHECK(memcmp(y1, yo, sizeof y1) == 0, "pool of 1 differs from one thread");
        CHECK(memcmp(y1, yd, sizeof y1) == 0, "default pool differs from one thread");
    }
    /* every path this machine has, on the explicit pool */
    const char *isas[] = {"scalar", "avx2", "avx512"};
    wpack_dense_settings set;
    wpack_dense_settings_init(&set);
    set.min_parallel = 0;
    for (int i = 0; i < 3; i++) {
        set.isa = isas[i];
        if (wpack_dense_configure(&set) != WPACK_OK) {
            CHECK(wpack_dense_isa() == NULL, "%s unusable: no path", isas[i]);
            CHECK_EQ(wpack_linear_forward_pool(p3, &L, X, yp, BATCH, 0), WPACK_E_UNSUPPORTED);
            continue;
        }
        CHECK_EQ(wpack_linear_forward_pool(NULL, &L, X, y1, BATCH, 0), WPACK_OK);
        CHECK_EQ(wpack_linear_forward_pool(p3, &L, X, yp, BATCH, 0), WPACK_OK);
        CHECK(memcmp(y1, yp, sizeof y1) == 0, "%s: pool differs from one thread", isas[i]);
    }
    set.isa = "sse9";
    CHECK_EQ(wpack_dense_configure(&set), WPACK_E_UNSUPPORTED);
    CHECK_EQ(wpack_linear_forward(&L, X, yd, BATCH, 0), WPACK_E_UNSUPPORTED);
    set.isa = NULL;
    CHECK_EQ(wpack_dense_configure(&set), WPACK_OK);
    CHECK(wpack_dense_isa() != NULL, "the best path again");
    wpack_pool_destroy(p3);
    wpack_pool_destroy(p1);
    wpack_dense_shutdown();
    CHECK_EQ(thread_count(), 1);
    /* the default pool comes back after a shutdown */
    CHECK_EQ(wpack_linear_forward(&L, X, yd, BATCH, WPACK_ACT_RELU), WPACK_OK);
    CHECK_EQ(thread_count(), (int)wpack_dense_threads());
    wpack_dense_shutdown();
    CHECK_EQ(thread_count(), 1);
}

/* --- decoding on an executor ---------------------------------------------- */

enum { NVAL = 300007 };
static float vals[NVAL];
static char path[256];

static int write_compressed(void)
{
    uint32_t r = 7;
    for (size_t i = 0; i < NVAL; i++) {
        r = r * 1664525u + 1013904223u;
        vals[i] = (float)((r >> 24) & 7) * 0.5f; /* compressible, not constant */
    }
    snprintf(path, sizeof path, "%s/wpack-pool-%d.wpack", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.compress_level = 1;
    opt.compress_chunk = 4096; /* ~293 chunks */
    opt.compress_min = 1024;
    wpack_writer *w;
    if (wpack_writer_open(&w, path, &opt) != WPACK_OK)
        return 1;
    int rc = wpack_writer_add_tensor(w, "v", WPACK_DTYPE_F32, 1, (uint64_t[]){NVAL}, vals, sizeof vals);
    char err[256];
    if (rc) {
        wpack_writer_abort(w);
        return 1;
    }
    return wpack_writer_finish(w, err, sizeof err) != WPACK_OK;
}

/* An executor over a pool that counts its jobs and their largest n. */
typedef struct {
    wpack_executor inner;
    atomic_int jobs;
    atomic_size_t most;
} counting;

static void counting_run(void *self, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    counting *c = self;
    atomic_fetch_add(&c->jobs, 1);
    size_t m = atomic_load(&c->most);
    while (n > m && !atomic_compare_exchange_weak(&c->most, &m, n))
        ;
    c->inner.run(c->inner.self, n, fn, ctx);
}

typedef struct {
    uint8_t *buf;
    size_t at, cap;
} sink;

static int collect(void *user, const void *data, size_t n)
{
    sink *s = user;
    if (s->at + n > s->cap)
        return -1;
    memcpy(s->buf + s->at, data, n);
    s->at += n;
    return 0;
}

/* Ranges (whole, across chunk edges, inside one chunk), the stream and
 * verification of entry "v": 1 when every byte is right. */
static int reads_right_into(wpack_archive *ar, float *got);
static int reads_right(wpack_archive *ar)
{
    float *got = malloc(sizeof vals);
    int ok = got && reads_right_into(ar, got);
    free(got);
    return ok;
}

static int reads_right_into(wpack_archive *ar, float *got)
{
    wpack_tensor t;
    if (wpack_find(ar, "v", &t) != WPACK_OK)
        return 0;
    static const size_t ranges[][2] = {{0, NVAL * 4}, {1, NVAL * 4 - 2}, {4095, 2}, {8192, 4096},
                                       {12345, 700001}, {NVAL * 4 - 3, 3}, {100, 50}};
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
        size_t off = ranges[k][0], n = ranges[k][1];
        memset(got, 0xa5, sizeof vals);
        if (wpack_read(ar, t.index, off, got, n) != WPACK_OK ||
            memcmp(got, (const uint8_t *)vals + off, n) != 0)
            return 0;
    }
    sink s = {(uint8_t *)got, 0, sizeof vals};
    memset(got, 0, sizeof vals);
    if (wpack_read_stream(ar, t.index, collect, &s, WPACK_READ_VERIFY) != WPACK_OK ||
        s.at != sizeof vals || memcmp(got, vals, sizeof vals) != 0)
        return 0;
    return wpack_verify_all(ar, NULL, NULL) == WPACK_OK;
}

static void *reader_thread(void *arg)
{
    wpack_archive *ar = arg;
    for (int i = 0; i < 5; i++)
        if (!reads_right(ar))
            return (void *)1;
    return NULL;
}

static void test_parallel_decode(void)
{
    CHECK(write_compressed() == 0, "write %s", path);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    wpack_tensor t;
    CHECK(wpack_find(ar, "v", &t) == WPACK_OK && t.codec == WPACK_CODEC_ZSTD && t.chunk_size == 4096,
          "compressed in 4 KiB chunks");
    /* serial: the core alone starts no thread */
    CHECK(reads_right(ar), "serial reads");
    CHECK_EQ(thread_count(), 1);

    wpack_pool *pool = wpack_pool_create(4, -1);
    counting c = {{0}, 0, 0};
    wpack_pool_executor(pool, &c.inner);
    CHECK_EQ(c.inner.threads, 4u);
    wpack_executor ex = {counting_run, &c, c.inner.threads};
    wpack_executor bad = {NULL, NULL, 1};
    CHECK_EQ(wpack_set_executor(ar, &bad), WPACK_E_INVALID_ARGUMENT);
    CHECK_EQ(wpack_set_executor(NULL, &ex), WPACK_E_INVALID_ARGUMENT);
    CHECK_EQ(wpack_set_executor(ar, &ex), WPACK_OK);
    CHECK(reads_right(ar), "reads on a pool of 4");
    CHECK(atomic_load(&c.jobs) > 0, "the executor ran");
    /* a whole read is one job of all its chunks; a stream step 4 chunks (one per thread) */
    CHECK(atomic_load(&c.most) == (NVAL * 4 + 4095) / 4096, "largest job %zu",
          atomic_load(&c.most));
    atomic_store(&c.most, 0);
    {
        static float got[NVAL];
        sink s = {(uint8_t *)got, 0, sizeof got};
        CHECK_EQ(wpack_read_stream(ar, t.index, collect, &s, 0), WPACK_OK);
        CHECK(atomic_load(&c.most) == 4, "a stream step decodes %zu chunks, want 4",
              atomic_load(&c.most));
    }
    /* several threads reading at once share the pool and the archive's contexts */
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, reader_thread, ar), 0);
    int wrong = 0;
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(th[i], &r);
        wrong += r != NULL;
    }
    CHECK(wrong == 0, "%d reading threads saw wrong bytes", wrong);

    /* a pool of 1: the executor runs every item on the caller */
    wpack_pool *one = wpack_pool_create(1, -1);
    wpack_executor ex1;
    wpack_pool_executor(one, &ex1);
    CHECK_EQ(wpack_set_executor(ar, &ex1), WPACK_OK);
    CHECK(reads_right(ar), "reads on a pool of 1");
    CHECK_EQ(wpack_set_executor(ar, NULL), WPACK_OK);
    CHECK(reads_right(ar), "serial again");
    wpack_close(ar);
    wpack_pool_destroy(one);
    wpack_pool_destroy(pool);
    CHECK_EQ(thread_count(), 1);
    unlink(path);
}

int main(void)
{
    wpack_dense_settings set;
    wpack_dense_settings_init(&set);
    set.min_parallel = 0; /* pools on small layers too */
    set.threads = 2;
    wpack_dense_configure(&set);
    RUN(test_create_destroy_joins);
    make_layer();
    RUN(test_forward_same_bits);
    RUN(test_parallel_decode);
    return tl_finish();
}
