/*
 * fuzz_stats_json.c - the calibration-stats JSON reader
 * (import/manifest_stats.c, `wpack create --stats FILE`): stats_load_buffer
 * on the input, first only checking (no writer), then, when that accepts
 * it, into a real writer (whose own checks may still refuse a record, but
 * must say why). The writer is aborted, so no file is left behind.
 */
#include "fuzz.h"
#include "manifest_stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = (char *)fuzz_copy(data, size);
    char err[512];
    err[0] = 0;
    int rc = stats_load_buffer(NULL, buf, size, err, sizeof err);
    fuzz_check_message("stats_load_buffer", err, sizeof err, rc);
    FUZZ_ASSERT(rc == WPACK_OK || rc == WPACK_E_STATS || rc == WPACK_E_NOMEM ||
                    rc == WPACK_E_NAME || rc == WPACK_E_LIMIT,
                "rc %d (%s)", rc, err);

    char tiny[4] = {0};
    int rc2 = stats_load_buffer(NULL, buf, size, tiny, sizeof tiny);
    FUZZ_ASSERT(rc2 == rc && strnlen(tiny, sizeof tiny) < sizeof tiny,
                "rc %d with a small message buffer, %d with a large one", rc2, rc);

    if (rc == WPACK_OK) {
        wpack_writer *w = fuzz_scratch_writer("stats");
        err[0] = 0;
        rc = stats_load_buffer(w, buf, size, err, sizeof err);
        fuzz_check_message("stats_load_buffer", err, sizeof err, rc);
        fuzz_scratch_abort(w);
    }
    free(buf);
    return 0;
}
