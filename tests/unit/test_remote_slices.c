/*
 * test_remote_slices.c - partial reads of a remote archive with
 * verification on (WPACK_OPEN_VERIFY_READS) always come from a fetch of the
 * whole entry checked against its XXH3: a slice of 'a', one of 'big' (which
 * replaces the kept copy of 'a'), then another slice of 'a' from a server
 * that zeroes its bodies from then on must be the archive's bytes or an
 * error, never zeros handed out as good. Needs a server:
 * tests/cli/test_remote_slices.sh runs it as
 *   test_remote_slices URL LOCAL_ARCHIVE FLAG_FILE [stream]
 * with URL at remote_server.py's /zeroflag/ (zeros while FLAG_FILE exists:
 * created here before the third slice)
 * (stream: tiny windows, so 'a' is larger than the source's stream window
 * and is streamed whole, hashed, the slice copied out). Without arguments
 * it only says so and passes.
 */
#include "testlib.h"
#include "wpack.h"
#include "wpack_remote.h"

static const char *url, *local, *flag;
static int stream_mode;

/* rows [r0, r0 + nr) of a 2-D f32 entry (or the first elements of one of
 * higher rank) through wpack_read: rc, bytes into out */
static int slice(wpack_archive *ar, const char *name, uint64_t first, uint64_t n, float *out)
{
    wpack_tensor t;
    int rc = wpack_find(ar, name, &t);
    if (rc)
        return rc;
    return wpack_read(ar, t.index, first * sizeof(float), out, (size_t)n * sizeof(float));
}

static void test_slices_checked(void)
{
    wpack_remote_options o;
    wpack_remote_options_init(&o);
    o.flags = WPACK_OPEN_VERIFY_READS;
    o.retries = 0;
    if (stream_mode) { /* stream window 32 KiB: 'a' (1.2 MB) streams */
        o.connections = 1;
        o.chunk_size = 64 * 1024;
    }
    wpack_archive *r = NULL, *l = NULL;
    int rc = wpack_open_url(&r, url, &o);
    CHECK(rc == WPACK_OK, "open %s: %s", url, wpack_errmsg(r));
    rc = wpack_open_file(&l, local, 0);
    CHECK(rc == WPACK_OK, "open %s: %s", local, wpack_errmsg(l));
    if (tl_current_failed) {
        wpack_close(r);
        wpack_close(l);
        return;
    }
    static float got[10000], want[10000];
    /* 1: rows 0-9 of a (1000 f32 a row): the server still answers right */
    CHECK_EQ(slice(r, "a", 0, 10000, got), WPACK_OK);
    slice(l, "a", 0, 10000, want);
    CHECK(memcmp(got, want, sizeof got) == 0, "first slice of a differs");
    /* 2: another entry read (replaces what the handle keeps) */
    rc = slice(r, "big", 0, 1024, got);
    CHECK(rc == WPACK_OK || rc == WPACK_E_CHECKSUM, "big: %s", wpack_errmsg(r));
    FILE *f = fopen(flag, "w");
    CHECK(f != NULL, "cannot create %s", flag);
    if (f)
        fclose(f);
    /* 3: rows 100-109 of a, once the server sends zeros: refetched whole
     * and found bad, or right; never zeros returned as good */
    rc = slice(r, "a", 100 * 1000, 10000, got);
    slice(l, "a", 100 * 1000, 10000, want);
    if (rc == WPACK_OK)
        CHECK(memcmp(got, want, sizeof got) == 0, "third slice of a: wrong bytes, no error");
    else
        CHECK(rc == WPACK_E_CHECKSUM, "third slice: %s", wpack_errmsg(r));
    printf("  third slice: %s\n", rc ? wpack_errmsg(r) : "right bytes");
    wpack_close(r);
    wpack_close(l);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        printf("# test_remote_slices needs a server: tests/cli/test_remote_slices.sh runs it\n");
        printf("# passed 0 failed 0\n");
        return 0;
    }
    url = argv[1];
    local = argv[2];
    flag = argv[3];
    stream_mode = argc > 4 && strcmp(argv[4], "stream") == 0;
    RUN(test_slices_checked);
    return tl_finish();
}
