/*
 * test_copy_range.c - wpack_writer_write_from_fd (issue 19): the archive is
 * byte for byte the one wpack_writer_write makes, with the bytes given
 * (mapped) or read by the writer (data NULL), with copy_file_range or
 * without it (no_copy_range), with weight stats and compression, pieces
 * split anywhere; a write past the tensor's shape is refused.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static char dir[] = "/tmp/wpack-copyrange.XXXXXX";
#define N (300000u) /* floats per tensor: 1.2 MB, above the writer's 64 KiB cut */

static float *values;
static int in_fd = -1;

enum { PLAIN, FROM_MAPPED, FROM_FD };

/* An archive of two tensors written `how`; returns its bytes (len in *len). */
static unsigned char *pack(int how, int no_copy, int compress, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/a-%d-%d-%d.wpack", dir, how, no_copy, compress);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.no_copy_range = no_copy;
    o.compress_level = compress;
    wpack_writer *w = NULL;
    if (wpack_writer_open(&w, path, &o) != WPACK_OK)
        return NULL;
    uint64_t dims[1] = {N};
    const char *names[2] = {"a", "b"};
    int ok = 1;
    for (int t = 0; t < 2 && ok; t++) {
        ok = wpack_writer_begin_tensor(w, names[t], WPACK_DTYPE_F32, 1, dims) == WPACK_OK;
        /* uneven pieces: small (ordinary path), odd-sized, the rest */
        size_t cut[4] = {0, 1001, 1001 + 700001, (size_t)N * 4};
        for (int k = 0; k < 3 && ok; k++) {
            size_t off = cut[k], n = cut[k + 1] - cut[k];
            const unsigned char *src = (const unsigned char *)values + off;
            if (how == PLAIN)
                ok = wpack_writer_write(w, src, n) == WPACK_OK;
            else
                ok = wpack_writer_write_from_fd(w, how == FROM_MAPPED ? src : NULL, in_fd,
                                                off, n) == WPACK_OK;
        }
        ok = ok && wpack_writer_end_tensor(w) == WPACK_OK;
    }
    char err[600];
    if (!ok) {
        printf("  writer: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return NULL;
    }
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK)
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*len);
    if (b && fread(b, 1, *len, f) != *len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void same_as_plain(int compress)
{
    size_t ref_len = 0, len = 0;
    unsigned char *ref = pack(PLAIN, 0, compress, &ref_len);
    CHECK(ref != NULL, "plain archive");
    for (int how = FROM_MAPPED; how <= FROM_FD; how++)
        for (int no_copy = 0; no_copy <= 1; no_copy++) {
            unsigned char *b = pack(how, no_copy, compress, &len);
            CHECK(b && ref && len == ref_len && memcmp(b, ref, len) == 0,
                  "how %d no_copy %d compress %d: archive differs", how, no_copy, compress);
            free(b);
        }
    free(ref);
}

static void test_identical_raw(void) { same_as_plain(0); }
static void test_identical_compressed(void) { same_as_plain(1); }

static void test_too_many_bytes(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/over.wpack", dir);
    wpack_writer *w = NULL;
    CHECK_EQ(wpack_writer_open(&w, path, NULL), WPACK_OK);
    uint64_t dims[1] = {1000};
    CHECK_EQ(wpack_writer_begin_tensor(w, "t", WPACK_DTYPE_F32, 1, dims), WPACK_OK);
    CHECK_EQ(wpack_writer_write_from_fd(w, NULL, in_fd, 0, (size_t)N * 4), WPACK_E_SIZE);
    CHECK(strstr(wpack_writer_errmsg(w), "its shape holds") != NULL, "%s", wpack_writer_errmsg(w));
    wpack_writer_abort(w);
    /* past the input's end: an error, not a short tensor */
    CHECK_EQ(wpack_writer_open(&w, path, NULL), WPACK_OK);
    uint64_t big[1] = {N + 100000};
    CHECK_EQ(wpack_writer_begin_tensor(w, "t", WPACK_DTYPE_F32, 1, big), WPACK_OK);
    int rc = wpack_writer_write_from_fd(w, NULL, in_fd, 0, (size_t)(N + 100000) * 4);
    CHECK(rc != WPACK_OK, "a read past the end succeeded");
    wpack_writer_abort(w);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    values = malloc((size_t)N * 4);
    for (unsigned i = 0; i < N; i++)
        values[i] = (float)((i * 2654435761u) % 10007) / 97.0f - 50.0f;
    char in[256];
    snprintf(in, sizeof in, "%s/in.bin", dir);
    int fd = open(in, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, values, (size_t)N * 4) != (ssize_t)N * 4)
        return 1;
    close(fd);
    in_fd = open(in, O_RDONLY);
    RUN(test_identical_raw);
    RUN(test_identical_compressed);
    RUN(test_too_many_bytes);
    close(in_fd);
    free(values);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("  could not remove %s\n", dir);
    return tl_finish();
}
