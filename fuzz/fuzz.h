/*
 * fuzz.h - shared by the fuzz targets: the libFuzzer entry point and two
 * helpers. Each target is one .c file that defines LLVMFuzzerTestOneInput;
 * it links either with libFuzzer (make fuzz) or with replay.c (make
 * fuzz-replay), which runs it over the checked-in corpus.
 */
#ifndef WPACK_FUZZ_H
#define WPACK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_shards: the input is a manifest, then each shard after this line
 * (make_corpus.c writes its seeds so). */
#define FUZZ_SHARD_SEP "\n--wpack-shard--\n"

/* The input in a heap block of exactly its size, so that ASan reports a
 * read one byte past its end (libFuzzer's own buffer is not guaranteed to
 * be, and replay's certainly is not). Free it with free(). */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    if (!p)
        abort();
    if (size)
        memcpy(p, data, size);
    else
        p[0] = 0;
    return p;
}

/* Where a target writes its files: $TMPDIR when set, else /dev/shm (memory,
 * so no disk traffic per input), else /tmp. */
static inline const char *fuzz_tmpdir(void)
{
    const char *dir = getenv("TMPDIR");
    if (dir && *dir)
        return dir;
    return access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
}

/* Targets that read compressed tensors call this from LLVMFuzzerInitialize.
 * The core decodes zstd chunks on the calling thread unless an executor is
 * attached (wpack_set_executor), and no target attaches one: decoding is
 * single-threaded already (a pool's spinning workers once took half the CPU
 * and made coverage unrepeatable). Kept as the place that says so. */
static inline void fuzz_single_threaded(void)
{
}

/* Called (when set) before FUZZ_ASSERT aborts: a target that makes files
 * removes them here. */
static void (*fuzz_cleanup)(void) __attribute__((unused));

/* A broken invariant: say which and abort, so that libFuzzer keeps the
 * input as a crash file and replay reports the file as failed. */
#define FUZZ_ASSERT(cond, ...)                                                  \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, \
                    #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            if (fuzz_cleanup)                                                   \
                fuzz_cleanup();                                                 \
            abort();                                                            \
        }                                                                       \
    } while (0)

/* A call's message buffer after it returned rc: NUL-terminated within
 * errlen, not empty on a failure, and rc a named code. what: the call. */
static inline void fuzz_check_message(const char *what, const char *err, size_t errlen, int rc)
{
    size_t n = strnlen(err, errlen);
    FUZZ_ASSERT(n < errlen, "%s: message not terminated", what);
    FUZZ_ASSERT(rc == WPACK_OK || n > 0, "%s: rc %d without a message", what, rc);
    FUZZ_ASSERT(strcmp(wpack_error_name(rc), "WPACK_E_UNKNOWN") != 0, "%s: rc %d has no name",
                what, rc);
}

/* A writer to feed and then abort (fuzz_stats_json, fuzz_calib): opened at
 * a fresh name under fuzz_tmpdir(), which a failed FUZZ_ASSERT removes;
 * the writer's own temporary goes with wpack_writer_abort. */
static char fuzz_scratch_path[4096] __attribute__((unused));

static inline void fuzz_scratch_remove(void)
{
    if (fuzz_scratch_path[0])
        unlink(fuzz_scratch_path);
}

static inline wpack_writer *fuzz_scratch_writer(const char *tag)
{
    snprintf(fuzz_scratch_path, sizeof fuzz_scratch_path, "%s/wpack-fuzz-%s-XXXXXX",
             fuzz_tmpdir(), tag);
    int fd = mkstemp(fuzz_scratch_path);
    FUZZ_ASSERT(fd >= 0, "mkstemp in %s failed", fuzz_scratch_path);
    close(fd);
    unlink(fuzz_scratch_path); /* the writer makes its own temp file beside it */
    fuzz_cleanup = fuzz_scratch_remove;
    wpack_writer *w = NULL;
    int rc = wpack_writer_open(&w, fuzz_scratch_path, NULL);
    FUZZ_ASSERT(rc == WPACK_OK, "writer_open: rc %d", rc);
    return w;
}

static inline void fuzz_scratch_abort(wpack_writer *w)
{
    wpack_writer_abort(w);
    fuzz_scratch_path[0] = 0;
    fuzz_cleanup = NULL;
}

/* wpack_verify_all on an open archive: every report must name an entry of
 * it (or none, UINT64_MAX) with an error code and a message, and the
 * result must agree with whether anything was reported. Returns its rc
 * (fuzz_archive and fuzz_shards then check that an open with
 * WPACK_OPEN_VERIFY agrees). */
typedef struct {
    uint64_t entries, reports;
} fuzz_verify_ctx;

static inline void fuzz_on_bad(void *user, uint64_t entry, int code, const char *message)
{
    fuzz_verify_ctx *v = user;
    v->reports++;
    FUZZ_ASSERT((entry < v->entries || entry == UINT64_MAX) && code != WPACK_OK && message &&
                    strlen(message) > 0,
                "verify reported entry %llu code %d", (unsigned long long)entry, code);
}

static inline int fuzz_verify_all(wpack_archive *ar)
{
    fuzz_verify_ctx v = {wpack_count(ar), 0};
    int vrc = wpack_verify_all(ar, fuzz_on_bad, &v);
    FUZZ_ASSERT((vrc == WPACK_OK) == (v.reports == 0), "verify rc %d after %llu reports", vrc,
                (unsigned long long)v.reports);
    return vrc;
}

#endif
