/*
 * testlib.h - the unit-test harness: a test is a function; it passes when
 * none of its CHECKs fails. Each binary prints "ok NAME" or "FAIL NAME" per
 * test and ends with "# passed N failed M", which tests/run-tests.sh adds up.
 */
#ifndef WPACK_TESTLIB_H
#define WPACK_TESTLIB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slurp.h"

static int tl_passed, tl_failed, tl_current_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            tl_current_failed++;                                                \
            printf("  check failed %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
        }                                                                       \
    } while (0)

/* CHECK_EQ for integer-like values, printing both. Each argument is
 * evaluated once: a failing CHECK_EQ(wpack_writer_finish(w, ...), ...) must
 * not call it a second time to print it. */
#define CHECK_EQ(a, b)                                                          \
    do {                                                                        \
        long long tl_a_ = (long long)(a), tl_b_ = (long long)(b);               \
        CHECK(tl_a_ == tl_b_, "%s == %s: %lld != %lld", #a, #b, tl_a_, tl_b_);  \
    } while (0)

#define RUN(fn)                                                                 \
    do {                                                                        \
        tl_current_failed = 0;                                                  \
        fn();                                                                   \
        if (tl_current_failed) {                                                \
            tl_failed++;                                                        \
            printf("FAIL %s\n", #fn);                                           \
        } else {                                                                \
            tl_passed++;                                                        \
            printf("ok %s\n", #fn);                                             \
        }                                                                       \
        fflush(stdout);                                                         \
    } while (0)

static inline int tl_finish(void)
{
    printf("# passed %d failed %d\n", tl_passed, tl_failed);
    return tl_failed ? 1 : 0;
}

#endif
