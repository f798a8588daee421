/*
 * replay.c - a main() for a fuzz target without libFuzzer: runs
 * LLVMFuzzerTestOneInput over every file named on the command line or found
 * (recursively, in name order) under a named directory, then prints
 * "# passed N failed M" like tests/testlib.h.
 *
 *   replay_<target> [-v] [-k] [-t SECONDS] PATH...
 *     -v  print each file name to stderr before running it (to find the
 *         input that crashes a run)
 *     -k  keep going: run each file in a child process, so that a crash,
 *         abort or sanitizer report fails that file ("FAIL path: ...") and
 *         the other files still run; without -k a crash ends the run, and
 *         a run that reaches the end has passed every file
 *     -t  with -k: a file taking longer than SECONDS fails (a hang)
 *
 * A file passes when the call returns. Exit status 0 when none failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

/* Optional, as in libFuzzer. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int verbose, keep_going;
static unsigned timeout_s;
static unsigned passed, failed;

/* The whole file in a block of exactly its size; NULL on error. */
static uint8_t *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) != 0 || st.st_size < 0) {
        close(fd);
        return NULL;
    }
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(n ? n : 1);
    while (buf && got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            free(buf);
            buf = NULL;
            break;
        }
        got += (size_t)k;
    }
    close(fd);
    *len = n;
    return buf;
}

/* 0 when the target returned. */
static int run_here(const char *path)
{
    size_t len = 0;
    uint8_t *buf = read_file(path, &len);
    if (!buf) {
        printf("FAIL %s: cannot read: %s\n", path, strerror(errno));
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static void run_file(const char *path)
{
    if (verbose) {
        fprintf(stderr, "running %s\n", path);
        fflush(stderr);
    }
    fflush(stdout);
    if (!keep_going) {
        if (run_here(path) == 0)
            passed++;
        else
            failed++;
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        printf("FAIL %s: fork: %s\n", path, strerror(errno));
        failed++;
        return;
    }
    if (pid == 0) {
        if (timeout_s)
            alarm(timeout_s);
        /* exit(), not _exit(): LeakSanitizer and gcov run at exit. */
        exit(run_here(path) == 0 ? 0 : 3); /* 3: could not read, already reported */
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            printf("FAIL %s: waitpid: %s\n", path, strerror(errno));
            failed++;
            return;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        passed++;
        return;
    }
    failed++;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        printf("FAIL %s: took longer than %u s\n", path, timeout_s);
    else if (WIFSIGNALED(status))
        printf("FAIL %s: killed by signal %d (%s)\n", path, WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    else if (WEXITSTATUS(status) != 3)
        printf("FAIL %s: exit status %d (a sanitizer report?)\n", path, WEXITSTATUS(status));
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("FAIL %s: %s\n", path, strerror(errno));
        failed++;
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        run_file(path);
        return;
    }
    struct dirent **names;
    int n = scandir(path, &names, NULL, by_name);
    if (n < 0) {
        printf("FAIL %s: cannot list: %s\n", path, strerror(errno));
        failed++;
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
            size_t len = strlen(path) + strlen(name) + 2;
            char *child = malloc(len);
            if (!child)
                abort();
            snprintf(child, len, "%s/%s", path, name);
            run_path(child);
            free(child);
        }
        free(names[i]);
    }
    free(names);
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-v] [-k] [-t SECONDS] PATH...\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "vkt:")) != -1) {
        switch (opt) {
        case 'v':
            verbose = 1;
            break;
        case 'k':
            keep_going = 1;
            break;
        case 't':
            timeout_s = (unsigned)strtoul(optarg, NULL, 10);
            break;
        default:
            usage(argv[0]);
        }
    }
    if (optind >= argc)
        usage(argv[0]);
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = optind; i < argc; i++)
        run_path(argv[i]);
    printf("# passed %u failed %u\n", passed, failed);
    return failed ? 1 : 0;
}
