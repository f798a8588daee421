/*
 * test_read_plan.c - wpack_read_plan (issue 17, read-ahead): the source's
 * plan() gets the stored extents of the entries named, in the caller's
 * order, without splats, empty entries or an alias right after its
 * target; an index out of range is WPACK_E_NOT_FOUND with no plan given;
 * a mapped archive takes the call as a no-op; the reads that follow still
 * return checked bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static unsigned char *buf;
static size_t len;
static int plans;
static uint64_t got[64];
static size_t ngot;

static int mem_read(void *user, uint64_t off, void *dst, size_t n, char *msg, size_t msglen)
{
    (void)user;
    if (off > len || n > len - off) {
        snprintf(msg, msglen, "read past the end");
        return WPACK_E_TRUNCATED;
    }
    memcpy(dst, buf + off, n);
    return WPACK_OK;
}

static void mem_plan(void *user, const uint64_t *ranges, size_t n)
{
    (void)user;
    plans++;
    ngot = n < 32 ? n : 32;
    memcpy(got, ranges, 2 * ngot * sizeof *got);
}

static wpack_archive *open_src(void)
{
    wpack_source s;
    memset(&s, 0, sizeof s);
    s.name = "mem://plan";
    s.size = len;
    s.read = mem_read;
    s.plan = mem_plan;
    wpack_archive *ar;
    return wpack_open_source(&ar, &s, 0) == WPACK_OK ? ar : NULL;
}

static float x[3][5000];
static char path[256];

static void test_plan(void);

int main(void)
{
    snprintf(path, sizeof path, "%s/wpack-plan-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    close(fd);
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 5000; i++)
            x[t][i] = (float)(t * 5000 + i);
    wpack_writer *w;
    uint64_t d = 5000, d7 = 7;
    float one = 1;
    int rc = wpack_writer_open(&w, path, NULL);
    if (!rc)
        rc = wpack_writer_add_tensor(w, "a", WPACK_DTYPE_F32, 1, &d, x[0], sizeof x[0]);
    if (!rc)
        rc = wpack_writer_add_alias(w, "a_alias", "a");
    if (!rc)
        rc = wpack_writer_add_tensor(w, "b", WPACK_DTYPE_F32, 1, &d, x[1], sizeof x[1]);
    if (!rc)
        rc = wpack_writer_add_splat(w, "s", WPACK_DTYPE_F32, 1, &d7, &one, 4);
    if (!rc)
        rc = wpack_writer_add_tensor(w, "c", WPACK_DTYPE_F32, 1, &d, x[2], sizeof x[2]);
    char err[600];
    if (rc || wpack_writer_finish(w, err, sizeof err)) {
        printf("FAIL setup\n# passed 0 failed 1\n");
        return 1;
    }
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(len);
    if (!buf || fread(buf, 1, len, f) != len) {
        printf("FAIL setup: read back\n# passed 0 failed 1\n");
        return 1;
    }
    fclose(f);
    RUN(test_plan);
    free(buf);
    unlink(path);
    return tl_finish();
}

static void test_plan(void)
{
    wpack_archive *ar = open_src();
    CHECK(ar != NULL, "open through a source");
    if (!ar)
        return;
    wpack_tensor ta, tal, tb, ts, tc;
    CHECK_EQ(wpack_find(ar, "a", &ta), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "a_alias", &tal), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "b", &tb), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "s", &ts), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "c", &tc), WPACK_OK);
    uint64_t ia = ta.index, ial = tal.index, ib = tb.index, is = ts.index, ic = tc.index;

    /* c, a, its alias (skipped: the same extent again), the splat (no
     * stored bytes), b: three ranges in that order */
    uint64_t order[] = {ic, ia, ial, is, ib};
    CHECK_EQ(wpack_read_plan(ar, order, 5), WPACK_OK);
    CHECK_EQ(plans, 1);
    CHECK_EQ(ngot, (size_t)3);
    CHECK(got[0] == tc.offset && got[1] == tc.stored_length, "c first: %llu+%llu",
          (unsigned long long)got[0], (unsigned long long)got[1]);
    CHECK(got[2] == ta.offset && got[3] == ta.stored_length, "a second");
    CHECK(got[4] == tb.offset && got[5] == tb.stored_length, "b third");

    /* an index out of range: an error naming it, no plan */
    uint64_t bad[] = {ia, 99};
    CHECK_EQ(wpack_read_plan(ar, bad, 2), WPACK_E_NOT_FOUND);
    CHECK(strstr(wpack_errmsg(ar), "entry 99") != NULL, "message: %s", wpack_errmsg(ar));
    CHECK_EQ(plans, 1);
    CHECK_EQ(wpack_read_plan(ar, NULL, 1), WPACK_E_INVALID_ARGUMENT);

    /* n 0 drops the plan (the source hears of it) */
    CHECK_EQ(wpack_read_plan(ar, NULL, 0), WPACK_OK);
    CHECK_EQ(plans, 2);
    CHECK_EQ(ngot, (size_t)0);

    /* reads after a plan: the same checked bytes */
    CHECK_EQ(wpack_read_plan(ar, order, 5), WPACK_OK);
    float out[5000];
    CHECK_EQ(wpack_read(ar, ic, 0, out, sizeof out), WPACK_OK);
    CHECK(memcmp(out, x[2], sizeof out) == 0, "c's bytes");
    CHECK_EQ(wpack_read(ar, ia, 0, out, sizeof out), WPACK_OK);
    CHECK(memcmp(out, x[0], sizeof out) == 0, "a's bytes");
    wpack_close(ar);

    /* a mapped archive: nothing to plan, no error */
    wpack_archive *m;
    CHECK_EQ(wpack_open_memory(&m, buf, len, 0), WPACK_OK);
    CHECK_EQ(wpack_read_plan(m, order, 5), WPACK_OK);
    CHECK_EQ(wpack_read_plan(m, bad, 2), WPACK_E_NOT_FOUND);
    wpack_close(m);
}
