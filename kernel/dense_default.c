/* dense_default.c - the kernel's process-wide settings and the default pool
 * of wpack_linear_forward: made on its first call that is worth threads,
 * joined by wpack_dense_shutdown(). Until the caller asks for threads
 * (wpack_dense_configure with threads != 1) that pool is the calling thread
 * alone: a library starts no thread of its own accord. Nothing here reads
 * the environment:
 * the CLI reads WPACK_ISA, WPACK_THREADS, WPACK_SPIN_US and
 * WPACK_DENSE_MIN_PARALLEL and passes them to wpack_dense_configure(). */
#include <pthread.h>
#include <stdatomic.h>

#include "dense.h"

/* Multiply-adds below which the calling thread does everything: waking the
 * pool costs about as much as this much work (measured with bench/dense,
 * see bench/dense/README.md). */
#define WPK_DENSE_MIN_PARALLEL_DEFAULT (1u << 17)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(wpack_pool *) default_pool;
static unsigned pool_threads = 1;       /* 1: no worker thread; 0: online CPUs */
static long pool_spin_us = -1;          /* <0: the pool's default */
static atomic_ullong min_parallel = WPK_DENSE_MIN_PARALLEL_DEFAULT;

void wpack_dense_settings_init(wpack_dense_settings *s)
{
    memset(s, 0, sizeof *s); /* isa NULL, the reserved fields */
    s->threads = 1;          /* the calling thread alone until the caller asks for more */
    s->spin_us = -1;
    s->min_parallel = -1;
}

int wpack_dense_configure(const wpack_dense_settings *s)
{
    return wpack_dense_configure_ex(s, NULL, 0);
}

int wpack_dense_configure_ex(const wpack_dense_settings *s, char *err, size_t errlen)
{
    wpack_dense_settings d;
    if (!s) {
        wpack_dense_settings_init(&d);
        s = &d;
    }
    if (err && errlen)
        err[0] = 0;
    else
        errlen = 0; /* no message asked for */
    int rc = WPK_RESERVED_CHECK(s, "wpack_dense_settings", "wpack_dense.h", err, errlen);
    if (rc)
        return rc;
    pthread_mutex_lock(&lock);
    pool_threads = s->threads;
    pool_spin_us = s->spin_us;
    pthread_mutex_unlock(&lock);
    atomic_store(&min_parallel, s->min_parallel < 0 ? WPK_DENSE_MIN_PARALLEL_DEFAULT
                                                    : (unsigned long long)s->min_parallel);
    return wpk_isa_select(s->isa, err, errlen);
}

uint64_t wpk_min_parallel(void)
{
    return atomic_load_explicit(&min_parallel, memory_order_relaxed);
}

int wpk_default_pool(wpack_pool **pool)
{
    wpack_pool *p = atomic_load_explicit(&default_pool, memory_order_acquire);
    int rc = WPACK_OK;
    if (!p) {
        pthread_mutex_lock(&lock);
        /* one thread: no pool object, which would keep that count until
         * wpack_dense_shutdown() and ignore a later configure */
        if (!(p = atomic_load(&default_pool)) && wpk_pool_size(pool_threads) > 1) {
            if ((p = wpack_pool_create(pool_threads, pool_spin_us)))
                atomic_store_explicit(&default_pool, p, memory_order_release);
            else
                rc = WPACK_E_NOMEM;
        }
        pthread_mutex_unlock(&lock);
    }
    *pool = p;
    return rc;
}

unsigned wpack_dense_threads(void)
{
    wpack_pool *p = atomic_load_explicit(&default_pool, memory_order_acquire);
    if (p)
        return wpack_pool_threads(p);
    pthread_mutex_lock(&lock);
    unsigned n = wpk_pool_size(pool_threads);
    pthread_mutex_unlock(&lock);
    return n;
}

void wpack_dense_shutdown(void)
{
    pthread_mutex_lock(&lock);
    wpack_pool *p = atomic_exchange(&default_pool, NULL);
    pthread_mutex_unlock(&lock);
    wpack_pool_destroy(p);
}
