/*
 * fuzz_stats_json.c - the calibration-stats JSON reader
 * (import/manifest_stats.c, `wpack create --stats FILE`): stats_load_buffer
 * on the input, first only checking (no writer), then, when that accepts
 * it, into a real writer (whose own checks may still refuse a record, but
 * must say why). The writer is aborted, so no file is left behind.
 */
#include <unistd.h>

#include "fuzz.h"
#include "manifest_stats.h"

static char path[4096];

static void remove_files(void)
{
    if (path[0])
        unlink(path);
}

static void check_message(const char *err, size_t errlen, int rc)
{
    size_t n = strnlen(err, errlen);
    FUZZ_ASSERT(n < errlen, "message not terminated");
    FUZZ_ASSERT(rc == WPACK_OK || n > 0, "rc %d without a message", rc);
    FUZZ_ASSERT(wpack_error_name(rc) != NULL, "rc %d has no name", rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = (char *)fuzz_copy(data, size);
    char err[512];
    err[0] = 0;
    int rc = stats_load_buffer(NULL, buf, size, err, sizeof err);
    check_message(err, sizeof err, rc);
    FUZZ_ASSERT(rc == WPACK_OK || rc == WPACK_E_STATS || rc == WPACK_E_NOMEM ||
                    rc == WPACK_E_NAME || rc == WPACK_E_LIMIT,
                "rc %d (%s)", rc, err);

    char tiny[4] = {0};
    int rc2 = stats_load_buffer(NULL, buf, size, tiny, sizeof tiny);
    FUZZ_ASSERT(rc2 == rc && strnlen(tiny, sizeof tiny) < sizeof tiny,
                "rc %d with a small message buffer, %d with a large one", rc2, rc);

    if (rc == WPACK_OK) {
        snprintf(path, sizeof path, "%s/wpack-fuzz-stats-XXXXXX", fuzz_tmpdir());
        int fd = mkstemp(path);
        FUZZ_ASSERT(fd >= 0, "mkstemp in %s failed", path);
        close(fd);
        unlink(path); /* the writer makes its own temp file beside it */
        fuzz_cleanup = remove_files;
        wpack_writer *w = NULL;
        rc = wpack_writer_open(&w, path, NULL);
        FUZZ_ASSERT(rc == WPACK_OK, "writer_open: rc %d", rc);
        err[0] = 0;
        rc = stats_load_buffer(w, buf, size, err, sizeof err);
        check_message(err, sizeof err, rc);
        wpack_writer_abort(w);
        path[0] = 0;
    }
    free(buf);
    return 0;
}
