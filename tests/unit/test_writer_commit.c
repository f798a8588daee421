/*
 * test_writer_commit.c - the writer's two-phase finish (wpack.h:
 * wpack_writer_prepare, wpack_writer_prepared_path, wpack_writer_commit):
 * after prepare the archive is complete in its temporary file and readable
 * there, nothing is at the path yet and an old file there is untouched;
 * further changes are refused; commit puts it in place, abort removes it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static char dir[] = "/tmp/wpack-wcommit.XXXXXX";

static void path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static wpack_writer *one_tensor(const char *path, float v)
{
    wpack_writer *w = NULL;
    if (wpack_writer_open(&w, path, NULL) != WPACK_OK)
        return w;
    float data[4] = {v, v + 1, v + 2, v + 3};
    uint64_t dims[1] = {4};
    wpack_writer_add_tensor(w, "t", WPACK_DTYPE_F32, 1, dims, data, sizeof data);
    return w;
}

static float first_value(const char *path)
{
    wpack_archive *ar = NULL;
    float v[4] = {-1, -1, -1, -1};
    if (wpack_open_file(&ar, path, 0) == WPACK_OK)
        wpack_read(ar, 0, 0, v, sizeof v);
    wpack_close(ar);
    return v[0];
}

static void test_prepare_then_commit(void)
{
    char p[256];
    path_of(p, sizeof p, "a.wpack");
    wpack_writer *w = one_tensor(p, 1.0f);
    CHECK(w != NULL, "open");
    CHECK(wpack_writer_prepared_path(w) == NULL, "no prepared path before prepare");
    CHECK_EQ(wpack_writer_prepare(w), WPACK_OK);
    const char *tmp = wpack_writer_prepared_path(w);
    CHECK(tmp && exists(tmp), "temporary exists");
    CHECK(!exists(p), "nothing at the path before commit");
    CHECK(first_value(tmp) == 1.0f, "the prepared file reads back");
    /* changes after prepare are refused */
    uint64_t dims[1] = {1};
    float x = 0;
    CHECK_EQ(wpack_writer_add_tensor(w, "u", WPACK_DTYPE_F32, 1, dims, &x, sizeof x), WPACK_E_STATE);
    CHECK_EQ(wpack_writer_prepare(w), WPACK_E_STATE);
    char keep[512];
    snprintf(keep, sizeof keep, "%s", tmp ? tmp : "");
    char err[256] = "x";
    CHECK_EQ(wpack_writer_commit(w, err, sizeof err), WPACK_OK);
    CHECK(err[0] == 0, "no message: %s", err);
    CHECK(exists(p) && !exists(keep), "renamed into place");
    CHECK(first_value(p) == 1.0f, "committed archive reads back");
}

static void test_prepare_then_abort_keeps_old(void)
{
    char p[256];
    path_of(p, sizeof p, "a.wpack"); /* holds 1.0 from the test before */
    wpack_writer *w = one_tensor(p, 7.0f);
    CHECK_EQ(wpack_writer_prepare(w), WPACK_OK);
    char keep[512];
    snprintf(keep, sizeof keep, "%s", wpack_writer_prepared_path(w));
    CHECK(first_value(p) == 1.0f, "old archive untouched while prepared");
    wpack_writer_abort(w);
    CHECK(!exists(keep), "abort removes the temporary");
    CHECK(first_value(p) == 1.0f, "old archive untouched after abort");
}

static void test_commit_without_prepare_is_finish(void)
{
    char p[256];
    path_of(p, sizeof p, "b.wpack");
    wpack_writer *w = one_tensor(p, 3.0f);
    CHECK_EQ(wpack_writer_commit(w, NULL, 0), WPACK_OK);
    CHECK(first_value(p) == 3.0f, "finished");
    CHECK_EQ(wpack_writer_prepare(NULL), WPACK_E_INVALID_ARGUMENT);
    CHECK_EQ(wpack_writer_commit(NULL, NULL, 0), WPACK_E_INVALID_ARGUMENT);
    CHECK(wpack_writer_prepared_path(NULL) == NULL, "NULL");
}

static void test_commit_rename_fails(void)
{
    char p[256];
    path_of(p, sizeof p, "d.wpack");
    wpack_writer *w = one_tensor(p, 5.0f);
    CHECK_EQ(wpack_writer_prepare(w), WPACK_OK);
    /* then a directory with something in it appears at the path: the
     * commit fails (a non-regular target is never replaced) */
    mkdir(p, 0755);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/x", p);
    mkdir(sub, 0755);
    char keep[512];
    snprintf(keep, sizeof keep, "%s", wpack_writer_prepared_path(w));
    char err[512] = "";
    CHECK(wpack_writer_commit(w, err, sizeof err) == WPACK_E_FILE_TYPE, "commit fails");
    CHECK(strstr(err, "d.wpack") != NULL, "message names the path: %s", err);
    CHECK(!exists(keep), "temporary removed");
    rmdir(sub);
    rmdir(p);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("FAIL mkdtemp\n");
        return 1;
    }
    RUN(test_prepare_then_commit);
    RUN(test_prepare_then_abort_keeps_old);
    RUN(test_commit_without_prepare_is_finish);
    RUN(test_commit_rename_fails);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
    return tl_finish();
}
