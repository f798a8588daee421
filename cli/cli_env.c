/* cli_env.c - the environment the CLI passes to the libraries, which read
 * none (issue 15): WPACK_ISA (SIMD path of the dense kernel; scalar also
 * forces the writer's portable weight-stats path), WPACK_THREADS and
 * WPACK_SPIN_US (the CLI's thread pool, for Linear layers and for decoding
 * zstd chunks), WPACK_DENSE_MIN_PARALLEL (layers below this many
 * multiply-adds run on one thread), WPACK_NO_COPY_RANGE=1 (the writer,
 * extract and export copy unchanged tensor bytes with read/write, not
 * copy_file_range), WPACK_CACHE (the chunk cache directory of remote
 * archives), WPACK_NO_SYNC=1 (outputs are not fsynced: --no-sync).
 * WPACK_THREADS also gives writers their thread count (cli_writer_jobs). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* WPACK_THREADS: a count >= 1, else 0 (online CPUs). */
static unsigned env_threads(void)
{
    const char *v = env("WPACK_THREADS");
    if (!v)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    return *end == 0 && n >= 1 ? (n > 256 ? 256u : (unsigned)n) : 0;
}

/* WPACK_SPIN_US: 0..1000000 microseconds, else -1 (the default). */
static long env_spin_us(void)
{
    const char *v = env("WPACK_SPIN_US");
    if (!v)
        return -1;
    char *end;
    long us = strtol(v, &end, 10);
    return *end == 0 && us >= 0 && us <= 1000000 ? us : -1;
}

/* Why the dense kernel refused the environment's settings (a bad
 * WPACK_ISA); "" when it took them. */
static char dense_why[300];

const char *cli_env_dense_error(void)
{
    return dense_why;
}

void cli_env_apply(void)
{
    wpack_dense_settings s;
    wpack_dense_settings_init(&s);
    s.isa = env("WPACK_ISA");
    s.threads = env_threads();
    s.spin_us = env_spin_us();
    const char *mp = env("WPACK_DENSE_MIN_PARALLEL");
    if (mp) {
        unsigned long long v = strtoull(mp, NULL, 10);
        s.min_parallel = v > LLONG_MAX ? LLONG_MAX : (long long)v;
    }
    /* a bad WPACK_ISA fails the forward calls, which then say why */
    char why[sizeof dense_why - 16];
    if (wpack_dense_configure_ex(&s, why, sizeof why) == WPACK_E_UNSUPPORTED)
        snprintf(dense_why, sizeof dense_why, "WPACK_ISA: %s", why); /* the one setting it checks */
    else
        snprintf(dense_why, sizeof dense_why, "%s", why);
}

static wpack_pool *pool;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void make_pool(void)
{
    pool = wpack_pool_create(env_threads(), env_spin_us());
}

wpack_pool *cli_pool(void)
{
    pthread_once(&pool_once, make_pool);
    return pool;
}

/* The executor of the archives the CLI reads: the pool, started by the
 * first read that decodes several chunks (or serial without memory). */
static void run_on_pool(void *self, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    (void)self;
    wpack_pool *p = cli_pool();
    if (!p) {
        for (size_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    wpack_executor ex;
    wpack_pool_executor(p, &ex);
    ex.run(ex.self, n, fn, ctx);
}

void cli_attach_pool(wpack_archive *ar)
{
    /* wpack_dense_threads(): the pool's size (cli_env_apply passed WPACK_THREADS) */
    wpack_executor ex = {run_on_pool, NULL, wpack_dense_threads()};
    wpack_set_executor(ar, &ex);
}

/* The writers' pool (weight stats and hashing, -j N / WPACK_THREADS):
 * its own, of exactly the threads asked for, made when a writer asks for
 * more than one; the executor stays valid until exit. */
static wpack_pool *wpool;
static unsigned wpool_asked;
static wpack_executor wex;

void cli_writer_jobs(wpack_writer_options *o, unsigned n)
{
    o->executor = NULL;
    if (n <= 1)
        return;
    if (wpool && wpool_asked != n) {
        wpack_pool_destroy(wpool); /* no writer runs on it between commands' options */
        wpool = NULL;
    }
    if (!wpool) {
        if (!(wpool = wpack_pool_create(n, env_spin_us())))
            return; /* out of memory: one thread, the same bytes */
        wpool_asked = n;
        wpack_pool_executor(wpool, &wex);
    }
    o->executor = &wex;
}

int cli_opt_jobs(int argc, char **argv, int *i, unsigned *jobs)
{
    const char *v, *name = "-j";
    int r = cli_opt_value(argc, argv, i, name, &v);
    if (!r)
        r = cli_opt_value(argc, argv, i, name = "--jobs", &v);
    if (r <= 0)
        return r;
    char *end;
    long n = strtol(v, &end, 10);
    if (end == v || *end || n < 1 || n > 256) {
        cli_error("%s %s: want a thread count from 1 to 256", name, v);
        return -1;
    }
    *jobs = (unsigned)n;
    return 1;
}

/* WPACK_NO_COPY_RANGE=1: read/write instead of copy_file_range. */
static int no_copy_range(void)
{
    const char *ncr = env("WPACK_NO_COPY_RANGE");
    return ncr && strcmp(ncr, "1") == 0;
}

int cli_env_no_sync(void)
{
    const char *v = env("WPACK_NO_SYNC");
    return v && strcmp(v, "1") == 0;
}

int cli_no_sync_opt(char **argv, int *i, int *no_sync)
{
    if (strcmp(argv[*i], "--no-sync") != 0)
        return 0;
    *no_sync = 1;
    *i += 1;
    return 1;
}

void cli_writer_options_init(wpack_writer_options *o)
{
    wpack_writer_options_init(o);
    /* WPACK_THREADS=N: writers compute stats on N threads (unset: one) */
    cli_writer_jobs(o, env("WPACK_THREADS") ? env_threads() : 1);
    const char *isa = env("WPACK_ISA");
    o->portable_stats = isa && strcmp(isa, "scalar") == 0;
    o->no_copy_range = no_copy_range();
    o->no_sync = cli_env_no_sync();
}

unsigned cli_read_to_fd_flags(void)
{
    return no_copy_range() ? WPACK_READ_NO_COPY_RANGE : 0;
}

const char *cli_env_cache(void)
{
    return env("WPACK_CACHE");
}
