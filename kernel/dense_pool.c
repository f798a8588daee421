/*
 * dense_pool->c - a small persistent thread pool for the dense kernel.
 *
 * A job is n items cut into chunks; the chunks are claimed one at a time
 * from one atomic word `state` = generation (high 32 bits) : lo : hi (16
 * bits each; chunks [lo, hi) are unclaimed). The caller claims from the
 * front (lo), workers from the back (hi): with two threads each gets about
 * the same rows on every call, so a layer that fits in the L2 caches stays
 * in the right one (claimed in one order by whoever came first, rows moved
 * between cores from call to call). The caller publishes a job by storing
 * a new generation, then claims chunks itself like any worker; a worker
 * that wakes late finds no chunk left (or a newer generation) and claims
 * nothing. The caller then waits only for chunks that were claimed and not
 * yet finished - never for a worker that has not started - so a worker
 * descheduled by another process costs nothing: the caller does its share.
 * Waiting is a short spin, then a sleep on a condition variable (the
 * sleeping caller frees its core for the worker it waits on); the
 * pool's spin_us sets how long (below).
 *
 * A worker that finds itself on the caller's CPU moves off it (Linux): the
 * scheduler often wakes a worker on the CPU of the thread that woke it, and
 * a worker spinning there only halves the caller's speed until the load
 * balancer moves one of them, milliseconds later. Measured on the 2-core
 * Zen 3 VM of bench/dense/README.md (rounds of 400 batch-1 512x784 int8
 * calls after 0.1 s idle, 4 runs each): 30-39 us a call without, 21-30
 * with; single-threaded ~18-40. The move is a change of the thread's CPU
 * mask that leaves out that CPU, then back to the old mask; the worker is
 * never pinned.
 *
 * Job fields are plain: a thread reads them only after it claimed a chunk
 * (compare-and-swap on `state` for that generation), and the caller writes
 * the next job's fields only after every claimed chunk has finished.
 * One job runs at a time (callers queue on run_lock). A pool is an object
 * the caller makes and destroys (wpack_pool_create/destroy): its workers are
 * joinable and destroy joins them all, so no thread outlives it (safe before
 * dlclose). The default pool of wpack_linear_forward is one of these,
 * created on first use (dense_default.c).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dense.h"

/* How long a thread spins before it sleeps: a worker ~5 ms for the next
 * job, the caller ~1 ms for claimed chunks. Waking a sleeping thread costs
 * ~50 us on bare metal but took 1-5 ms on the VM of bench/dense/README.md
 * (its idle vCPU must be woken by the host), so a worker that slept
 * between layers separated by a little host work joined late or not at
 * all. Rounds of 100 batch-1 512x784 int8 calls 3 ms apart: 19-24 us a
 * call with 60 us / 20 us spins (no better than one thread, ~21), 11-13 us
 * with these; never slower on the large shapes. OpenBLAS spins ~0.1 s,
 * LLVM's OpenMP 0.2 s. A spinning worker keeps a core busy, so a pool's
 * spin_us = N sets the worker's spin to N microseconds (0: sleep at once)
 * and the caller's to N or 1 ms, whichever is less (the CLI passes
 * WPACK_SPIN_US). */
#define WPK_POOL_WORKER_SPIN_NS 5000000ull
#define WPK_POOL_CALLER_SPIN_NS 1000000ull
#define WPK_POOL_SPIN_US_MAX 1000000l /* 1 s */

struct wpack_pool {
    pthread_mutex_t run_lock;    /* one job at a time */
    pthread_mutex_t lock;        /* with wake/done: for sleeping only */
    pthread_cond_t wake, done;
    unsigned nthreads;           /* including the caller */
    unsigned started;            /* worker threads actually running */
    pthread_t *tids;             /* the started workers, joined by destroy */
    /* the job: written by the caller before it publishes the generation */
    const wpk_dense_job *job;
    wpk_dense_rows_fn fn;
    size_t n, chunk;
    uint32_t nchunks;
    atomic_ullong state;         /* generation << 32 | chunks unclaimed */
    atomic_uint finished;        /* chunks done in this job */
    atomic_uint sleepers;        /* workers asleep on wake */
    atomic_uint caller_asleep;   /* the caller sleeps on done */
    atomic_int caller_cpu;       /* where the last job was published; -1 unknown */
    atomic_int stop;             /* destroy: workers return */
    unsigned long long worker_spin_ns, caller_spin_ns;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Nanoseconds on the monotonic clock, for spin limits (vDSO: ~20 ns). */
static unsigned long long spin_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static inline uint32_t gen_of(unsigned long long s)
{
    return (uint32_t)(s >> 32);
}

#define WPK_POOL_MAX_CHUNKS 0xffffu
#define LO_OF(s) ((uint32_t)((s) >> 16) & 0xffffu)
#define HI_OF(s) ((uint32_t)(s) & 0xffffu)

/* Claim one chunk of generation gen, the first unclaimed one (front) or the
 * last; its index, or -1 when none is left. */
static long claim(wpack_pool *pool, uint32_t gen, int front)
{
    unsigned long long s = atomic_load_explicit(&pool->state, memory_order_acquire);
    for (;;) {
        uint32_t lo = LO_OF(s), hi = HI_OF(s);
        if (gen_of(s) != gen || lo >= hi)
            return -1;
        unsigned long long t = front ? s + (1ull << 16) : s - 1;
        if (atomic_compare_exchange_weak_explicit(&pool->state, &s, t, memory_order_acq_rel,
                                                  memory_order_acquire))
            return (long)(front ? lo : hi - 1);
    }
}

/* Claim and run chunks of generation gen until none is left; how many ran. */
static unsigned run_chunks(wpack_pool *pool, uint32_t gen, int front)
{
    unsigned ran = 0;
    long c;
    while ((c = claim(pool, gen, front)) >= 0) {
        size_t o0 = (size_t)c * pool->chunk;
        size_t o1 = pool->n - o0 < pool->chunk ? pool->n : o0 + pool->chunk;
        pool->fn(pool->job, o0, o1);
        ran++;
    }
    return ran;
}

/* The CPU this thread runs on, or -1 where that is not known. */
static int current_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

/* A worker on the caller's CPU moves to another CPU it may run on (see the
 * top of this file); it keeps its CPU mask as it was. */
static void leave_caller_cpu(wpack_pool *pool)
{
#ifdef __linux__
    int c = atomic_load_explicit(&pool->caller_cpu, memory_order_relaxed);
    if (c < 0 || c >= CPU_SETSIZE || current_cpu() != c)
        return;
    cpu_set_t mask, others;
    pthread_t self = pthread_self();
    if (pthread_getaffinity_np(self, sizeof mask, &mask) != 0 || !CPU_ISSET(c, &mask) ||
        CPU_COUNT(&mask) < 2)
        return;
    others = mask;
    CPU_CLR(c, &others);
    if (pthread_setaffinity_np(self, sizeof others, &others) == 0) /* moves this thread now */
        pthread_setaffinity_np(self, sizeof mask, &mask);
#endif
}

/* A worker: wait until the generation moves past seen (spin, then sleep). */
static unsigned long long wait_job(wpack_pool *pool, uint32_t seen)
{
    unsigned long long s, t0 = spin_clock();
    unsigned spins = 0;
    while (gen_of(s = atomic_load_explicit(&pool->state, memory_order_acquire)) == seen) {
        if (spin_clock() - t0 >= pool->worker_spin_ns) {
            atomic_fetch_add(&pool->sleepers, 1); /* seq_cst: see wpk_pool_run */
            pthread_mutex_lock(&pool->lock);
            while (gen_of(s = atomic_load(&pool->state)) == seen)
                pthread_cond_wait(&pool->wake, &pool->lock);
            pthread_mutex_unlock(&pool->lock);
            atomic_fetch_sub(&pool->sleepers, 1);
            break;
        }
        if (++spins % 1024 == 0) /* every few tens of microseconds */
            leave_caller_cpu(pool);
        cpu_relax();
    }
    leave_caller_cpu(pool);
    return s;
}

static void *worker(void *arg)
{
    wpack_pool *pool = arg;
    uint32_t seen = 0;
    for (;;) {
        seen = gen_of(wait_job(pool, seen));
        if (atomic_load(&pool->stop))
            return NULL;
        unsigned ran = run_chunks(pool, seen, 0);
        if (ran == 0)
            continue;
        /* Chunks of this generation cannot be reused before they all
         * finished, so nchunks is still this job's. */
        uint32_t total = pool->nchunks;
        /* seq_cst add then load: pairs with the caller's store of
         * caller_asleep then load of finished (one of the two sees the other) */
        if (atomic_fetch_add(&pool->finished, ran) + ran == total &&
            atomic_load(&pool->caller_asleep)) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    return NULL;
}

/* Only 0 ("the online CPUs") asks the system: sysconf reads
 * /sys/devices/system/cpu/online on every call, and with the one-thread
 * default every wpack_linear_forward asks for this size. */
unsigned wpk_pool_size(unsigned threads)
{
    unsigned n = threads;
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 0 ? (unsigned)cpus : 1;
    }
    return n < WPK_POOL_MAX ? n : WPK_POOL_MAX;
}

wpack_pool *wpack_pool_create(unsigned threads, long spin_us)
{
    wpack_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    unsigned n = wpk_pool_size(threads);
    if (n > 1 && !(pool->tids = calloc(n - 1, sizeof *pool->tids))) {
        free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->run_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->caller_cpu, -1);
    pool->nthreads = n;
    pool->worker_spin_ns = WPK_POOL_WORKER_SPIN_NS;
    pool->caller_spin_ns = WPK_POOL_CALLER_SPIN_NS;
    if (spin_us >= 0) {
        if (spin_us > WPK_POOL_SPIN_US_MAX)
            spin_us = WPK_POOL_SPIN_US_MAX;
        pool->worker_spin_ns = (unsigned long long)spin_us * 1000ull;
        if (pool->caller_spin_ns > pool->worker_spin_ns)
            pool->caller_spin_ns = pool->worker_spin_ns;
    }
    for (unsigned i = 1; i < n; i++) {
        if (pthread_create(&pool->tids[pool->started], NULL, worker, pool) != 0)
            break; /* fewer threads is still correct */
        pool->started++;
    }
    return pool;
}

void wpack_pool_destroy(wpack_pool *pool)
{
    if (!pool)
        return;
    /* No job runs while run_lock is held: publish an empty generation with
     * stop set; spinning workers see it, sleeping ones get the broadcast. */
    pthread_mutex_lock(&pool->run_lock);
    atomic_store(&pool->stop, 1);
    uint32_t gen = gen_of(atomic_load(&pool->state)) + 1;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->state, (unsigned long long)gen << 32);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->run_lock);
    for (unsigned i = 0; i < pool->started; i++)
        pthread_join(pool->tids[i], NULL);
    pthread_mutex_destroy(&pool->run_lock);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    free(pool->tids);
    free(pool);
}

unsigned wpack_pool_threads(const wpack_pool *pool)
{
    return pool ? pool->nthreads : 1;
}

/* The core's executor (wpack.h) on a pool: item i of a job is one call of
 * fn(ctx, i), items claimed one at a time like rows. */
typedef struct {
    void (*fn)(void *ctx, size_t i);
    void *ctx;
} exec_job;

static void exec_items(const wpk_dense_job *j, size_t i0, size_t i1)
{
    const exec_job *e = j->ctx;
    for (size_t i = i0; i < i1; i++)
        e->fn(e->ctx, i);
}

static void exec_run(void *self, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    wpack_pool *pool = self;
    exec_job e = {fn, ctx};
    wpk_dense_job j = {.ctx = &e};
    wpk_pool_run(pool, &j, exec_items, n, 1, wpack_pool_threads(pool));
}

void wpack_pool_executor(wpack_pool *pool, wpack_executor *ex)
{
    memset(ex, 0, sizeof *ex); /* the reserved fields too */
    ex->run = exec_run;
    ex->self = pool;
    ex->threads = wpack_pool_threads(pool);
}

void wpk_pool_run(wpack_pool *pool, const wpk_dense_job *j, wpk_dense_rows_fn fn, size_t n,
                  size_t chunk, unsigned threads)
{
    if (chunk == 0)
        chunk = 1;
    size_t nchunks = n / chunk + (n % chunk != 0);
    if (nchunks > WPK_POOL_MAX_CHUNKS) { /* fewer chunks, still multiples of chunk */
        chunk *= nchunks / WPK_POOL_MAX_CHUNKS + 1;
        nchunks = n / chunk + (n % chunk != 0);
    }
    if (!pool || threads <= 1 || pool->started == 0 || nchunks <= 1) {
        fn(j, 0, n);
        return;
    }
    /* `threads` below the pool size is not enforced: any idle worker may
     * claim a chunk; the split only decides how many chunks there are. */
    pthread_mutex_lock(&pool->run_lock);
    pool->job = j;
    pool->fn = fn;
    pool->n = n;
    pool->chunk = chunk;
    pool->nchunks = (uint32_t)nchunks;
    atomic_store_explicit(&pool->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->caller_cpu, current_cpu(), memory_order_relaxed);
    uint32_t gen = gen_of(atomic_load_explicit(&pool->state, memory_order_relaxed)) + 1;
    /* seq_cst store then load of sleepers: a worker going to sleep either
     * sees this generation or is counted and gets the broadcast. */
    atomic_store(&pool->state, (unsigned long long)gen << 32 | (uint32_t)nchunks); /* lo 0, hi nchunks */
    if (atomic_load(&pool->sleepers)) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
    }
    unsigned ran = run_chunks(pool, gen, 1);
    if (atomic_fetch_add_explicit(&pool->finished, ran, memory_order_acq_rel) + ran != nchunks) {
        /* Only chunks a running thread claimed are left: wait for them. */
        unsigned long long t0 = spin_clock();
        while (atomic_load_explicit(&pool->finished, memory_order_acquire) != nchunks &&
               spin_clock() - t0 < pool->caller_spin_ns)
            cpu_relax();
        if (atomic_load_explicit(&pool->finished, memory_order_acquire) != nchunks) {
            pthread_mutex_lock(&pool->lock);
            atomic_store(&pool->caller_asleep, 1);
            while (atomic_load(&pool->finished) != nchunks)
                pthread_cond_wait(&pool->done, &pool->lock);
            atomic_store(&pool->caller_asleep, 0);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    pthread_mutex_unlock(&pool->run_lock);
}
