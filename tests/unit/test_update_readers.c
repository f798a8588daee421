/* test_update_readers.c - readers against concurrent in-place updates (issue
 * 14 point 1): four reader processes re-open the archive in a loop, and
 * each also keeps one handle open for the whole run, while this process
 * updates it as fast as it can (index sizes that grow and shrink, so that
 * every placement of spec 14 is used; stops between the two steps; junk
 * appended to the tail, as an interrupted update leaves it; and the tail
 * past the archive cut off, as the old updater did). No reader may die
 * (SIGBUS) or see an invalid archive, and no update shrinks the file.
 * WPACK_READERS_SECONDS sets the duration (default 20). */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

#define READERS 4
#define TENSORS 16

static char path[64];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float value_of(int k, int i)
{
    return (float)(k * 1000 + i % 97);
}

static void make_archive(void)
{
    strcpy(path, "/tmp/wpack-readers-XXXXXX");
    int fd = mkstemp(path);
    close(fd);
    wpack_writer *w;
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    CHECK_EQ(wpack_writer_open(&w, path, &opt), WPACK_OK);
    static float a[64 * 64];
    uint64_t d[2] = {64, 64};
    for (int k = 0; k < TENSORS; k++) {
        char name[32];
        snprintf(name, sizeof name, "layer.%02d.weight", k);
        for (int i = 0; i < 64 * 64; i++)
            a[i] = value_of(k, i);
        CHECK_EQ(wpack_writer_add_tensor(w, name, WPACK_DTYPE_F32, 2, d, a, sizeof a), WPACK_OK);
    }
    char err[300];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "%s", err);
}

/* One archive as a reader sees it: valid, every tensor's bytes right. */
static int check(wpack_archive *ar, const char *what)
{
    wpack_info in;
    wpack_get_info(ar, &in);
    if (in.entry_count != TENSORS) {
        fprintf(stderr, "%s: %llu entries\n", what, (unsigned long long)in.entry_count);
        return 0;
    }
    if (wpack_verify_all(ar, NULL, NULL) != WPACK_OK) {
        fprintf(stderr, "%s: verify: %s\n", what, wpack_errmsg(ar));
        return 0;
    }
    for (int k = 0; k < TENSORS; k++) {
        wpack_tensor t;
        if (wpack_tensor_at(ar, (uint64_t)k, &t) != WPACK_OK || !t.data ||
            ((const float *)t.data)[4095] != value_of(k, 4095)) {
            fprintf(stderr, "%s: tensor %d wrong\n", what, k);
            return 0;
        }
    }
    /* the stats the updater writes are all there or not at all */
    wpack_stats st;
    for (uint64_t i = 0; i < in.stats_count; i++)
        if (wpack_stats_at(ar, i, &st) != WPACK_OK) {
            fprintf(stderr, "%s: stats %llu unreadable\n", what, (unsigned long long)i);
            return 0;
        }
    return 1;
}

static int reader(double until)
{
    wpack_archive *held;
    if (wpack_open_file(&held, path, 0) != WPACK_OK) {
        fprintf(stderr, "reader: first open: %s\n", wpack_errmsg(held));
        return 1;
    }
    long opens = 0;
    while (now() < until) {
        wpack_archive *ar;
        int rc = wpack_open_file(&ar, path, 0);
        if (rc != WPACK_OK) {
            fprintf(stderr, "reader: open %ld: %s (%s)\n", opens, wpack_errmsg(ar),
                    wpack_error_name(rc));
            wpack_close(ar);
            return 1;
        }
        int ok = check(ar, "fresh handle") && check(held, "held handle");
        wpack_close(ar);
        if (!ok)
            return 1;
        opens++;
    }
    wpack_close(held);
    fprintf(stderr, "# reader %d: %ld opens\n", (int)getpid(), opens);
    return opens > 0 ? 0 : 1;
}

static off_t file_size(void)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void test_readers_during_updates(void)
{
    make_archive();
    const char *env = getenv("WPACK_READERS_SECONDS");
    double secs = env ? atof(env) : 20;
    double until = now() + secs;
    pid_t pids[READERS];
    for (int r = 0; r < READERS; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(reader(until));
    }
    static uint64_t counts[4096];
    for (int b = 0; b < 4096; b++)
        counts[b] = 1;
    long updates = 0, stops = 0, junk = 0, cuts = 0;
    off_t size = file_size(), shrank = 0;
    while (now() < until) {
        int round = (int)(updates % 7);
        /* index sizes up and down: 0 to 6 records of 1..4096 bins */
        wpack_update *u;
        char err[600];
        unsigned flags = updates % 5 == 4 ? WPACK_UPDATE_STOP_AFTER_APPEND : 0;
        int rc = wpack_update_begin(&u, path, flags, err, sizeof err);
        CHECK(rc == WPACK_OK, "begin: %s", err);
        if (rc) {
            wpack_update_abort(u);
            break;
        }
        for (int k = 0; k < round; k++) {
            char key[32];
            snprintf(key, sizeof key, "layer.%02d", k);
            uint32_t bins = (uint32_t)(1u << ((updates + (long)k) % 13));
            double v[5] = {-1, 1, 1, 0, 0.25};
            /* counts sum to count: the first `bins` ones */
            wpack_stats_in s = {key, WPACK_STATS_ACTIVATION, WPACK_GRAN_TENSOR, 0, 1, bins,
                                &v[0], &v[1], &v[2], &v[3], &v[4], bins, NULL, counts, 0, NULL};
            double *e = malloc((bins + 1) * sizeof *e);
            for (uint32_t b = 0; b <= bins; b++)
                e[b] = -1.0 + 2.0 * b / bins;
            s.hist_edges = e;
            CHECK_EQ(wpack_update_set_stats(u, &s), WPACK_OK);
            free(e);
        }
        /* drop what the previous round had beyond this one's */
        char key[32];
        snprintf(key, sizeof key, "layer.%02d", round);
        wpack_update_drop_stats(u, key, WPACK_STATS_ACTIVATION); /* NOT_FOUND is fine */
        rc = wpack_update_commit(u, err, sizeof err);
        CHECK(rc == (flags ? WPACK_E_IO : WPACK_OK), "update %ld: %s", updates, err);
        stops += flags != 0;
        updates++;
        if (updates % 11 == 0) {
            /* junk after the end, as an interrupted update leaves it */
            int fd = open(path, O_WRONLY | O_APPEND);
            static const char j[300] = "junk";
            CHECK(fd >= 0 && write(fd, j, (size_t)(updates % 300) + 1) > 0, "append junk");
            close(fd);
            junk++;
        }
        off_t now_size = file_size();
        if (now_size < size)
            shrank++;
        if (updates % 13 == 0) {
            /* what an old updater did (issue 14 point 1): cut the tail
             * past the archive's end while readers have the file open */
            wpack_archive *ar;
            if (wpack_open_file(&ar, path, 0) == WPACK_OK) {
                wpack_info in;
                wpack_get_info(ar, &in);
                CHECK(truncate(path, (off_t)in.file_length) == 0, "truncate");
                cuts++;
            }
            wpack_close(ar);
            now_size = file_size();
        }
        size = now_size;
        usleep(500);
    }
    CHECK(shrank == 0, "the file shrank %ld times", (long)shrank);
    int dead = 0;
    for (int r = 0; r < READERS; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (WIFSIGNALED(st)) {
            fprintf(stderr, "reader %d killed by signal %d\n", r, WTERMSIG(st));
            dead++;
        } else if (WEXITSTATUS(st) != 0) {
            fprintf(stderr, "reader %d saw an invalid archive\n", r);
            dead++;
        }
    }
    CHECK(dead == 0, "%d of %d readers failed", dead, READERS);
    CHECK(updates > 10, "only %ld updates", updates);
    fprintf(stderr, "# %ld updates (%ld stopped between the steps, %ld junk tails, %ld tails cut), "
            "file %lld B\n", updates, stops, junk, cuts, (long long)size);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "final: %s", wpack_errmsg(ar));
    wpack_close(ar);
    unlink(path);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN(test_readers_during_updates);
    return tl_finish();
}
