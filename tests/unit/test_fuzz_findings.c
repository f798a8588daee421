/* test_fuzz_findings.c - bugs fuzz_shards found in the reader, each as a
 * test (their inputs are also in fuzz/corpus/fuzz_shards/crash-*):
 *   - a manifest naming itself (or two naming each other) as a shard:
 *     wpack_open_file recursed until the stack overflowed; now SHARD;
 *   - an empty file: the header check gave memcmp a NULL mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static char dir[256];

static void path_of(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

/* A manifest `name` with one external entry that claims to live in shard
 * `shard` (a file name), and the shard list naming it. */
static int make_manifest(const char *name, const char *shard)
{
    char path[512];
    path_of(path, sizeof path, name);
    wpack_writer *w;
    if (wpack_writer_open(&w, path, NULL))
        return 1;
    wpack_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "w";
    t.name_len = 1;
    t.kind = WPACK_KIND_DATA;
    t.dtype = WPACK_DTYPE_F32;
    t.rank = 1;
    t.dims[0] = 2;
    t.nelems = 2;
    t.nbytes = t.stored_length = 8;
    t.offset = 4096;
    uint64_t len = 8192, sum = 0;
    int rc = wpack_writer_add_external(w, "w", 0, &t);
    if (!rc)
        rc = wpack_writer_set_shards(w, 1, &shard, &len, &sum);
    char err[256];
    if (rc) {
        wpack_writer_abort(w);
        return rc;
    }
    return wpack_writer_finish(w, err, sizeof err);
}

static void test_manifest_is_its_own_shard(void)
{
    char path[512];
    CHECK_EQ(make_manifest("self.wpack", "self.wpack"), WPACK_OK);
    path_of(path, sizeof path, "self.wpack");
    wpack_archive *ar;
    int rc = wpack_open_file(&ar, path, 0);
    CHECK_EQ(rc, WPACK_E_SHARD);
    CHECK(strstr(wpack_errmsg(ar), "is itself a sharded set") != NULL, "message '%s'",
          wpack_errmsg(ar));
    wpack_close(ar);
    unlink(path);
}

static void test_manifests_naming_each_other(void)
{
    char a[512], b[512];
    CHECK_EQ(make_manifest("a.wpack", "b.wpack"), WPACK_OK);
    CHECK_EQ(make_manifest("b.wpack", "a.wpack"), WPACK_OK);
    path_of(a, sizeof a, "a.wpack");
    path_of(b, sizeof b, "b.wpack");
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, a, 0), WPACK_E_SHARD);
    CHECK(strstr(wpack_errmsg(ar), "b.wpack is itself a sharded set") != NULL, "message '%s'",
          wpack_errmsg(ar));
    wpack_close(ar);
    unlink(a);
    unlink(b);
}

static void test_empty_file(void)
{
    char path[512];
    path_of(path, sizeof path, "empty.wpack");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fclose(f) == 0, "cannot make %s", path);
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, path, 0), WPACK_E_TRUNCATED);
    wpack_close(ar);
    CHECK_EQ(wpack_open_memory(&ar, NULL, 0, 0), WPACK_E_TRUNCATED);
    wpack_close(ar);
    unlink(path);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/wpack-test-fuzz-findings-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_manifest_is_its_own_shard);
    RUN(test_manifests_naming_each_other);
    RUN(test_empty_file);
    rmdir(dir);
    return tl_finish();
}
