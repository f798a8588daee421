/* thread_count.h - the threads of this test process, for tests of who
 * starts threads (test_pool, test_dense_no_threads). */
#ifndef WPACK_TESTS_THREAD_COUNT_H
#define WPACK_TESTS_THREAD_COUNT_H

#include <dirent.h>

/* Entries in /proc/self/task: the threads of this process (-1: unknown). */
static inline int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

#endif
