/*
 * dense_pool.c - a small persistent thread pool for the dense kernel.
 *
 * Workers sleep on a condition variable; a job is published with a
 * generation number, and everyone (the caller too) claims row chunks from
 * an atomic counter until none are left, then the caller waits for the
 * workers to check out. One job runs at a time (callers queue on a mutex).
 * The pool starts on first use and lives until the process exits.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "dense.h"

#define WPK_POOL_MAX 256
/* Pause-loop iterations a thread spins before sleeping (about 50-100 us):
 * back-to-back layers then start without a futex wake-up. */
#define WPK_POOL_SPIN 20000

static struct {
    pthread_mutex_t run_lock;    /* one job at a time */
    pthread_mutex_t lock;        /* with wake/done: for sleeping only */
    pthread_cond_t wake, done;
    unsigned nthreads;           /* including the caller */
    unsigned started;            /* worker threads actually running */
    /* the job, published by the release store of generation */
    unsigned active;             /* workers 1..active-1 take part */
    const wpk_dense_job *job;
    wpk_dense_rows_fn fn;
    size_t n, chunk;
    atomic_ullong generation;
    atomic_uint busy;            /* workers still inside the job */
    atomic_size_t next;          /* next row chunk to claim */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 1, 0, 0, NULL, NULL, 0, 0, 0, 0, 0};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void work(const wpk_dense_job *j, wpk_dense_rows_fn fn, size_t n, size_t chunk)
{
    for (;;) {
        size_t o0 = atomic_fetch_add_explicit(&pool.next, chunk, memory_order_relaxed);
        if (o0 >= n)
            return;
        size_t o1 = n - o0 < chunk ? n : o0 + chunk;
        fn(j, o0, o1);
    }
}

/* Wait until generation moves past seen: spin a while, then sleep. */
static unsigned long long wait_generation(unsigned long long seen)
{
    unsigned long long g;
    for (int i = 0; i < WPK_POOL_SPIN; i++) {
        g = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (g != seen)
            return g;
        cpu_relax();
    }
    pthread_mutex_lock(&pool.lock);
    while ((g = atomic_load_explicit(&pool.generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&pool.wake, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    return g;
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg; /* 1..nthreads-1 */
    unsigned long long seen = 0;
    for (;;) {
        seen = wait_generation(seen);
        if (id >= pool.active)
            continue;
        work(pool.job, pool.fn, pool.n, pool.chunk);
        if (atomic_fetch_sub_explicit(&pool.busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
    return NULL;
}

static void start(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = cpus > 0 ? (unsigned)cpus : 1;
    const char *env = getenv("WPACK_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == 0 && v >= 1)
            n = (unsigned)v;
    }
    if (n > WPK_POOL_MAX)
        n = WPK_POOL_MAX;
    pool.nthreads = n;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (unsigned i = 1; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker, (void *)(uintptr_t)i) != 0)
            break; /* fewer threads is still correct */
        pool.started++;
    }
    pthread_attr_destroy(&attr);
}

unsigned wpk_pool_threads(void)
{
    pthread_once(&pool_once, start);
    return pool.nthreads;
}

unsigned wpack_dense_threads(void)
{
    return wpk_pool_threads();
}

void wpk_pool_run(const wpk_dense_job *j, wpk_dense_rows_fn fn, size_t n, size_t chunk,
                  unsigned threads)
{
    pthread_once(&pool_once, start);
    unsigned helpers = threads > 0 ? threads - 1 : 0;
    if (helpers > pool.started)
        helpers = pool.started;
    if (helpers == 0 || n <= chunk) {
        fn(j, 0, n);
        return;
    }
    pthread_mutex_lock(&pool.run_lock);
    pool.job = j;
    pool.fn = fn;
    pool.n = n;
    pool.chunk = chunk;
    pool.active = helpers + 1;
    atomic_store_explicit(&pool.next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.busy, helpers, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.wake); /* sleepers; spinners already saw it */
    pthread_mutex_unlock(&pool.lock);
    work(j, fn, n, chunk);
    for (int i = 0; i < WPK_POOL_SPIN && atomic_load_explicit(&pool.busy, memory_order_acquire); i++)
        cpu_relax();
    if (atomic_load_explicit(&pool.busy, memory_order_acquire)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load_explicit(&pool.busy, memory_order_acquire))
            pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    pthread_mutex_unlock(&pool.run_lock);
}
