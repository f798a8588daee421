/* test_dense_update.c - wpack_update_add_stats: the in-place index update
 * adds and replaces stats, never touches data, and is crash-safe: stopped
 * after the append the file opens as the new generation; a torn append
 * opens as the old one. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wpack.h"
#include "testlib.h"
#include "wpack.h"

static char path[64];

static void make_archive(void)
{
    strcpy(path, "/tmp/wpack-upd-XXXXXX");
    int fd = mkstemp(path);
    close(fd);
    wpack_writer *w;
    wpack_writer_open(&w, path, NULL);
    float a[6] = {1, -2, 3, -4, 5, -6};
    uint64_t d[2] = {2, 3};
    wpack_writer_add_tensor(w, "0.weight", WPACK_DTYPE_F32, 2, d, a, sizeof a);
    wpack_writer_add_tensor(w, "0.bias", WPACK_DTYPE_F32, 1, d, a, 8);
    wpack_writer_set_string(w, "model.name", "tiny");
    char err[300];
    int rc = wpack_writer_finish(w, err, sizeof err);
    CHECK_EQ(rc, WPACK_OK);
}

static wpack_stats_in act_stats(const char *key, double *v, double *edges, uint64_t *counts)
{
    /* v: min, max, absmax, mean, variance */
    wpack_stats_in s = {key, WPACK_STATS_ACTIVATION, WPACK_GRAN_TENSOR, 0, 1, 10,
                        &v[0], &v[1], &v[2], &v[3], &v[4], 2, edges, counts, 0, NULL};
    return s;
}

static uint64_t generation(int *recovered, uint64_t *nstats)
{
    wpack_archive *ar;
    int rc = wpack_open_file(&ar, path, WPACK_OPEN_VERIFY);
    CHECK(rc == WPACK_OK, "open: %s", wpack_errmsg(ar));
    wpack_info info;
    wpack_get_info(ar, &info);
    *recovered = info.recovered;
    *nstats = info.stats_count;
    wpack_close(ar);
    return rc ? 0 : info.generation;
}

static void test_add_and_replace(void)
{
    make_archive();
    size_t len0;
    unsigned char *before = test_slurp(path, &len0);
    double v[5] = {-1.5, 2.5, 2.5, 0.25, 1.0}, edges[3] = {-1.5, 0.5, 2.5};
    uint64_t counts[2] = {4, 6};
    wpack_stats_in s[2] = {act_stats("1", v, edges, counts), act_stats("0", v, edges, counts)};
    char err[400];
    int rc = wpack_update_add_stats(path, s, 2, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    int rec;
    uint64_t ns, ns0 = 0;
    CHECK_EQ(generation(&rec, &ns), 2);
    ns0 = ns;
    wpack_archive *ar;
    wpack_open_file(&ar, path, 0);
    wpack_stats st;
    CHECK_EQ(wpack_stats_find(ar, "1", WPACK_STATS_ACTIVATION, &st), WPACK_OK);
    CHECK(st.min == -1.5 && st.max == 2.5 && st.mean == 0.25 && st.count == 10 && st.hist_bins == 2,
          "values");
    double lo, hi;
    uint64_t c;
    wpack_stats_bin(&st, 1, &lo, &hi, &c);
    CHECK(lo == 0.5 && hi == 2.5 && c == 6, "bin");
    /* the weight stats and metadata the writer made are still there */
    CHECK_EQ(wpack_stats_find(ar, "0.weight", WPACK_STATS_WEIGHT, &st), WPACK_OK);
    wpack_meta m;
    CHECK_EQ(wpack_meta_find(ar, "model.name", &m), WPACK_OK);
    wpack_close(ar);
    /* data bytes untouched: everything after the superblock up to the old end */
    size_t len1;
    unsigned char *after = test_slurp(path, &len1);
    CHECK(len1 > len0 && memcmp(before + 128, after + 128, len0 - 128) == 0, "old bytes changed");
    /* replace "1" */
    v[0] = -3;
    v[2] = 3;
    edges[0] = -3;
    s[0] = act_stats("1", v, edges, counts);
    CHECK_EQ(wpack_update_add_stats(path, s, 1, err, sizeof err), WPACK_OK);
    CHECK_EQ(generation(&rec, &ns), 3);
    CHECK_EQ(ns, ns0);
    wpack_open_file(&ar, path, 0);
    CHECK_EQ(wpack_stats_find(ar, "1", WPACK_STATS_ACTIVATION, &st), WPACK_OK);
    CHECK(st.min == -3, "replaced min %g", st.min);
    wpack_close(ar);
    free(before);
    free(after);
    unlink(path);
}

static void test_rejects_leave_file(void)
{
    make_archive();
    size_t len0, len1;
    unsigned char *before = test_slurp(path, &len0);
    double v[5] = {1, 0, 1, 0.5, 0}; /* min > max */
    wpack_stats_in s = act_stats("0", v, NULL, NULL);
    s.hist_bins = 0;
    char err[400];
    CHECK_EQ(wpack_update_add_stats(path, &s, 1, err, sizeof err), WPACK_E_STATS);
    CHECK(strstr(err, "'0'") != NULL, "%s", err);
    double ok[5] = {0, 1, 1, 0.5, 0};
    s = act_stats("nope.weight", ok, NULL, NULL);
    s.hist_bins = 0;
    s.kind = WPACK_STATS_WEIGHT;
    CHECK_EQ(wpack_update_add_stats(path, &s, 1, err, sizeof err), WPACK_E_STATS);
    s.kind = WPACK_STATS_ACTIVATION;
    wpack_stats_in twice[2] = {s, s};
    CHECK_EQ(wpack_update_add_stats(path, twice, 2, err, sizeof err), WPACK_E_EXISTS);
    unsigned char *after = test_slurp(path, &len1);
    CHECK(len0 == len1 && memcmp(before, after, len0) == 0, "rejected update changed the file");
    CHECK_EQ(wpack_update_add_stats("/nonexistent/x.wpack", &s, 1, err, sizeof err), WPACK_E_IO);
    free(before);
    free(after);
    unlink(path);
}

static void test_crash_between_steps(void)
{
    make_archive();
    double v[5] = {0, 1, 1, 0.5, 0.1}, edges[3] = {0, 0.5, 1};
    uint64_t counts[2] = {5, 5};
    wpack_stats_in s = act_stats("0", v, edges, counts);
    char err[400];
    wpack_update *u;
    CHECK_EQ(wpack_update_begin(&u, path, WPACK_UPDATE_STOP_AFTER_APPEND, err, sizeof err), WPACK_OK);
    CHECK_EQ(wpack_update_set_stats(u, &s), WPACK_OK);
    CHECK_EQ(wpack_update_commit(u, err, sizeof err), WPACK_E_IO);
    int rec;
    uint64_t ns;
    /* superblock still says generation 1; the appended trailer makes it 2 */
    CHECK_EQ(generation(&rec, &ns), 2);
    wpack_archive *ar;
    wpack_open_file(&ar, path, 0);
    wpack_stats st;
    CHECK_EQ(wpack_stats_find(ar, "0", WPACK_STATS_ACTIVATION, &st), WPACK_OK);
    wpack_close(ar);
    /* the next update goes on from there */
    s.key = "2";
    CHECK_EQ(wpack_update_add_stats(path, &s, 1, err, sizeof err), WPACK_OK);
    CHECK_EQ(generation(&rec, &ns), 3);
    unlink(path);
}

static void test_torn_append(void)
{
    make_archive();
    size_t len0;
    unsigned char *before = test_slurp(path, &len0);
    double v[5] = {0, 1, 1, 0.5, 0.1}, edges[3] = {0, 0.5, 1};
    uint64_t counts[2] = {5, 5};
    wpack_stats_in s = act_stats("0", v, edges, counts);
    char err[400];
    CHECK_EQ(wpack_update_add_stats(path, &s, 1, err, sizeof err), WPACK_OK);
    size_t len1;
    unsigned char *full = test_slurp(path, &len1);
    /* killed during step 1: the old superblock and part of the append */
    for (size_t cut = len0 + 1; cut < len1; cut += (len1 - len0) / 7 + 1) {
        FILE *f = fopen(path, "wb");
        fwrite(before, 1, len0, f);
        fwrite(full + len0, 1, cut - len0, f);
        fclose(f);
        int rec;
        uint64_t ns;
        CHECK_EQ(generation(&rec, &ns), 1);
        CHECK_EQ(rec, 1);
        /* and an update on the recovered archive works */
        if (cut == len0 + 1) {
            CHECK_EQ(wpack_update_add_stats(path, &s, 1, err, sizeof err), WPACK_OK);
            CHECK_EQ(generation(&rec, &ns), 2);
            CHECK_EQ(rec, 0);
        }
    }
    /* all of step 1 but the superblock: the new archive */
    FILE *f = fopen(path, "wb");
    fwrite(before, 1, 128, f);
    fwrite(full + 128, 1, len1 - 128, f);
    fclose(f);
    int rec;
    uint64_t ns;
    CHECK_EQ(generation(&rec, &ns), 2);
    free(before);
    free(full);
    unlink(path);
}

int main(void)
{
    RUN(test_add_and_replace);
    RUN(test_rejects_leave_file);
    RUN(test_crash_between_steps);
    RUN(test_torn_append);
    return tl_finish();
}
