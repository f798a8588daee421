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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

#endif
