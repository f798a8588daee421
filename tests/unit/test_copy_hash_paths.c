/*
 * test_copy_hash_paths.c - the cached-step copy paths (issue 19): the writer
 * reading each step with pread into its buffer (data NULL), alone and with
 * weight stats on an executor (bigger steps split across items), gives the
 * archive wpack_writer_write gives, byte for byte; a file shorter than the
 * bytes asked for is an error with a message, on the writer's path and on
 * the importers' (wpk_sink_stream_file: a file truncated after it was
 * mapped is read with pread, never through the mapping, so no SIGBUS); the
 * CRC-32 it computes is the zip one of the bytes.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import.h"
#include "testlib.h"
#include "wpack.h"
#include "zipread.h"

static char dir[] = "/tmp/wpack-copyhash.XXXXXX";
/* floats: 5 MiB + 12 KiB + 4 bytes: more than one 4 MiB executor step and
 * many 256 KiB steps, with a ragged last one */
#define N ((5u << 18) + 3073u)

static float *values;
static int in_fd = -1;
static char in_path[300];

static void serial2(void *self, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    (void)self;
    for (size_t i = 0; i < n; i++)
        fn(ctx, i);
}

/* An archive of one tensor: plain writes (from_fd 0) or write_from_fd with
 * data NULL, from file offset 64 (not page aligned), in two calls. */
static unsigned char *pack(const char *tag, int from_fd, int stats, int on_ex, size_t *len)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s.wpack", dir, tag);
    wpack_executor ex = {serial2, NULL, 2};
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.weight_stats = stats;
    o.executor = on_ex ? &ex : NULL;
    wpack_writer *w = NULL;
    if (wpack_writer_open(&w, path, &o) != WPACK_OK)
        return NULL;
    uint64_t dims[1] = {N};
    int ok = wpack_writer_begin_tensor(w, "t", WPACK_DTYPE_F32, 1, dims) == WPACK_OK;
    size_t cut[3] = {0, 333333, (size_t)N * 4};
    for (int k = 0; k < 2 && ok; k++) {
        size_t off = cut[k], n = cut[k + 1] - cut[k];
        if (from_fd)
            ok = wpack_writer_write_from_fd(w, NULL, in_fd, 64 + off, n) == WPACK_OK;
        else
            ok = wpack_writer_write(w, (const unsigned char *)values + off, n) == WPACK_OK;
    }
    ok = ok && wpack_writer_end_tensor(w) == WPACK_OK;
    char err[600];
    if (!ok) {
        printf("  writer: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return NULL;
    }
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK)
        return NULL;
    int fd = open(path, O_RDONLY);
    off_t n = lseek(fd, 0, SEEK_END);
    unsigned char *b = malloc((size_t)n);
    if (pread(fd, b, (size_t)n, 0) != n) {
        free(b);
        b = NULL;
    }
    close(fd);
    *len = (size_t)n;
    return b;
}

static void test_same_bytes(void)
{
    for (int stats = 0; stats < 2; stats++)
        for (int on_ex = 0; on_ex < 2; on_ex++) {
            char a_tag[40], b_tag[40];
            snprintf(a_tag, sizeof a_tag, "plain-%d-%d", stats, on_ex);
            snprintf(b_tag, sizeof b_tag, "fd-%d-%d", stats, on_ex);
            size_t la = 0, lb = 0;
            unsigned char *a = pack(a_tag, 0, stats, on_ex, &la);
            unsigned char *b = pack(b_tag, 1, stats, on_ex, &lb);
            CHECK(a && b, "stats %d executor %d: packed", stats, on_ex);
            CHECK(a && b && la == lb && !memcmp(a, b, la),
                  "stats %d executor %d: the same archive (%zu vs %zu bytes)", stats, on_ex, la, lb);
            free(a);
            free(b);
        }
}

/* The writer asked for more bytes than the file holds: an error, no crash
 * (on_ex: with weight stats on an executor, in its bigger steps). */
static void writer_short_file(int on_ex)
{
    char path[400];
    snprintf(path, sizeof path, "%s/short.wpack", dir);
    wpack_executor ex = {serial2, NULL, 2};
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.weight_stats = on_ex;
    o.executor = on_ex ? &ex : NULL;
    wpack_writer *w = NULL;
    CHECK_EQ(wpack_writer_open(&w, path, &o), WPACK_OK);
    uint64_t dims[1] = {N};
    CHECK_EQ(wpack_writer_begin_tensor(w, "t", WPACK_DTYPE_F32, 1, dims), WPACK_OK);
    /* the file holds 64 + N*4 bytes: from 1 MiB on, N*4 bytes run past it */
    int rc = wpack_writer_write_from_fd(w, NULL, in_fd, 1u << 20, (size_t)N * 4);
    CHECK_EQ(rc, WPACK_E_SIZE);
    CHECK(strstr(wpack_writer_errmsg(w), "ended early") != NULL, "message: %s",
          wpack_writer_errmsg(w));
    wpack_writer_abort(w);
    CHECK(access(path, F_OK) != 0, "no archive left behind");
}

static void test_writer_short_file(void)
{
    writer_short_file(0);
    writer_short_file(1);
}

/* A file mapped, then truncated: the sink reads it with pread (never the
 * mapping: no SIGBUS), an error saying the file ended early, with a CRC-32
 * or without; and the CRC-32 over what was read is the zip's. */
static void sink_truncated(int with_crc)
{
    char copy[400], out[400], err[600];
    snprintf(copy, sizeof copy, "%s/shrinks.bin", dir);
    snprintf(out, sizeof out, "%s/sink.wpack", dir);
    int fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, values, (size_t)N * 4) == (ssize_t)N * 4, "copy written");
    close(fd);
    wpack_writer *w = NULL;
    CHECK_EQ(wpack_writer_open(&w, out, NULL), WPACK_OK);
    wpk_sink s;
    wpk_sink_init(&s, w, err, sizeof err);
    wpk_import_opts o = {0};
    wpk_sink_input(&s, copy, &o);
    wpk_mapped m;
    CHECK_EQ(wpk_map_file(&s, copy, &m), WPACK_OK);
    uint64_t dims[1] = {N / 2}, half = (uint64_t)N / 2 * 4;
    /* a whole tensor first: its CRC-32 is that of the bytes */
    CHECK_EQ(wpk_sink_begin(&s, "a", WPACK_DTYPE_F32, 1, dims), WPACK_OK);
    uint32_t crc = 0;
    CHECK_EQ(wpk_sink_stream_file(&s, &m, 0, half, with_crc ? &crc : NULL), WPACK_OK);
    CHECK(!with_crc || crc == wpk_crc32(0, values, (size_t)half), "CRC-32 %08x", crc);
    CHECK_EQ(wpk_sink_end(&s), WPACK_OK);
    /* then the file loses its second half under us */
    CHECK(truncate(copy, (off_t)(half + 1000)) == 0, "truncate");
    CHECK_EQ(wpk_sink_begin(&s, "b", WPACK_DTYPE_F32, 1, dims), WPACK_OK);
    int rc = wpk_sink_stream_file(&s, &m, half, half, with_crc ? &crc : NULL);
    CHECK_EQ(rc, WPACK_E_IO);
    CHECK(strstr(err, "ended early") != NULL, "message: %s", err);
    wpk_unmap_file(&m);
    wpk_sink_free(&s);
    wpack_writer_abort(w);
    unlink(copy);
}

static void test_sink_truncated(void)
{
    sink_truncated(1);
    sink_truncated(0);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    values = malloc((size_t)N * 4);
    for (size_t i = 0; i < N; i++)
        values[i] = (float)((i * 2654435761u) % 100003) / 1000.0f - 50.0f;
    snprintf(in_path, sizeof in_path, "%s/in.bin", dir);
    in_fd = open(in_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    static const unsigned char head[64] = {1, 2, 3};
    CHECK(in_fd >= 0 && write(in_fd, head, 64) == 64 &&
              write(in_fd, values, (size_t)N * 4) == (ssize_t)N * 4,
          "input written");
    RUN(test_same_bytes);
    RUN(test_writer_short_file);
    RUN(test_sink_truncated);
    close(in_fd);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("  could not remove %s\n", dir);
    free(values);
    return tl_finish();
}
