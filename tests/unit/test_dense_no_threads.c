/* test_dense_no_threads.c - the dense library starts no thread unless its
 * caller asks (the brief's library rule): wpack_linear_forward() on a
 * layer far above the parallel threshold runs on the calling thread alone
 * until wpack_dense_configure() sets threads; then the default pool's
 * workers exist, and wpack_dense_shutdown() joins them. Its own process:
 * nothing may configure the kernel before the first check. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "thread_count.h"
#include "wpack.h"
#include "wpack_dense.h"

enum { OUT = 512, IN = 1024 }; /* 512 Ki multiply-adds: 4x the default threshold */

static float W[OUT * IN], X[IN], Y[OUT], Y1[OUT];

static void layer(wpack_linear *l)
{
    for (size_t i = 0; i < (size_t)OUT * IN; i++)
        W[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < IN; i++)
        X[i] = (float)i / IN;
    wpack_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "w";
    t.kind = WPACK_KIND_DATA;
    t.dtype = WPACK_DTYPE_F32;
    t.rank = 2;
    t.dims[0] = OUT;
    t.dims[1] = IN;
    t.nelems = (uint64_t)OUT * IN;
    t.nbytes = sizeof W;
    t.stored_length = sizeof W;
    t.data = W;
    char err[300];
    CHECK(wpack_linear_from_tensors(&t, NULL, NULL, l, err, sizeof err) == WPACK_OK, "%s", err);
}

static void test_no_thread_by_default(void)
{
    wpack_linear l;
    layer(&l);
    int before = thread_count();
    CHECK(before == 1, "%d threads before any call", before);
    CHECK_EQ(wpack_dense_threads(), 1u);
    for (int k = 0; k < 5; k++)
        CHECK(wpack_linear_forward(&l, X, Y1, 1, WPACK_ACT_NONE) == WPACK_OK, "forward");
    CHECK(thread_count() == 1, "%d threads after forward calls nobody asked threads for",
          thread_count());
    /* configure(NULL) keeps the default */
    CHECK(wpack_dense_configure(NULL) == WPACK_OK, "configure(NULL)");
    CHECK(wpack_linear_forward(&l, X, Y, 1, WPACK_ACT_NONE) == WPACK_OK, "forward");
    CHECK(thread_count() == 1, "%d threads after configure(NULL)", thread_count());
    wpack_dense_shutdown();
}

static void test_threads_when_asked(void)
{
    wpack_linear l;
    layer(&l);
    wpack_dense_settings s;
    wpack_dense_settings_init(&s);
    CHECK_EQ(s.threads, 1u);
    s.threads = 3;
    s.spin_us = 0;
    CHECK(wpack_dense_configure(&s) == WPACK_OK, "configure threads 3");
    CHECK_EQ(wpack_dense_threads(), 3u);
    CHECK(wpack_linear_forward(&l, X, Y, 1, WPACK_ACT_NONE) == WPACK_OK, "forward");
    CHECK(thread_count() == 3, "%d threads with 3 asked for", thread_count());
    CHECK(memcmp(Y, Y1, sizeof Y) == 0, "same bits on the pool as alone");
    wpack_dense_shutdown();
    CHECK(thread_count() == 1, "%d threads after shutdown", thread_count());
    CHECK(wpack_dense_configure(NULL) == WPACK_OK, "back to the default");
}

/* Forward calls first, threads asked for after: a default that made a
 * one-thread pool object on the first call kept it (threads applied only
 * when the pool is made), so the threads asked for never came until a
 * wpack_dense_shutdown() nobody had reason to call. */
static void test_threads_asked_after_calls(void)
{
    wpack_linear l;
    layer(&l);
    CHECK(wpack_linear_forward(&l, X, Y1, 1, WPACK_ACT_NONE) == WPACK_OK, "forward");
    CHECK(thread_count() == 1, "%d threads before any were asked for", thread_count());
    wpack_dense_settings s;
    wpack_dense_settings_init(&s);
    s.threads = 3;
    s.spin_us = 0;
    CHECK(wpack_dense_configure(&s) == WPACK_OK, "configure threads 3");
    CHECK_EQ(wpack_dense_threads(), 3u);
    CHECK(wpack_linear_forward(&l, X, Y, 1, WPACK_ACT_NONE) == WPACK_OK, "forward");
    CHECK(thread_count() == 3, "%d threads with 3 asked for after a forward call",
          thread_count());
    CHECK(memcmp(Y, Y1, sizeof Y) == 0, "same bits on the pool as alone");
    wpack_dense_shutdown();
    CHECK(wpack_dense_configure(NULL) == WPACK_OK, "back to the default");
}

/* Read system calls this process has made so far (/proc/self/io), or -1. */
static long long read_syscalls(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return -1;
    char line[128];
    long long n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "syscr: %lld", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* With the one-thread default, a forward call asks the system nothing:
 * the pool size came from sysconf(_SC_NPROCESSORS_ONLN) on every call,
 * which opens and reads /sys/devices/system/cpu/online (a few
 * microseconds, in a call whose small layers take about as long). */
static void test_forward_reads_nothing(void)
{
    wpack_linear l;
    layer(&l);
    long long before = read_syscalls();
    CHECK(before >= 0, "/proc/self/io has no syscr line (kernel without task I/O accounting)");
    for (int k = 0; k < 200; k++)
        CHECK(wpack_linear_forward(&l, X, Y, 1, WPACK_ACT_NONE) == WPACK_OK, "forward");
    long long after = read_syscalls();
    /* reading /proc/self/io itself takes a few */
    CHECK(after - before < 20, "%lld read system calls in 200 forward calls", after - before);
}

int main(void)
{
    RUN(test_forward_reads_nothing);
    RUN(test_no_thread_by_default);
    RUN(test_threads_asked_after_calls);
    RUN(test_threads_when_asked);
    return tl_finish();
}
