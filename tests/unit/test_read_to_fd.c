/*
 * test_read_to_fd.c - wpack_read_to_fd (issue 19): every kind of output fd
 * gets the entry's exact bytes (a regular file read-write, write-only,
 * O_APPEND, a pipe), at offsets that line up in a page with the archive's
 * data and that do not, with copy_file_range and without it, from a file, a
 * memory buffer, an alias and a splat; the file offset advances by nbytes;
 * a damaged stored tensor is WPACK_E_CHECKSUM on every path; an archive
 * file replaced after open is served from the mapping; bad arguments are
 * refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static char dir[] = "/tmp/wpack-readtofd.XXXXXX";
#define N (200000u) /* floats: 800 KB, above the 64 KiB cut */
static float *values;
static char apath[300];

static int make_archive(const char *path)
{
    wpack_writer *w = NULL;
    if (wpack_writer_open(&w, path, NULL) != WPACK_OK)
        return 0;
    uint64_t dims[1] = {N}, small[1] = {10};
    float fill = 2.5f;
    int ok = wpack_writer_begin_tensor(w, "big", WPACK_DTYPE_F32, 1, dims) == WPACK_OK &&
             wpack_writer_write(w, values, N * 4) == WPACK_OK &&
             wpack_writer_end_tensor(w) == WPACK_OK &&
             wpack_writer_begin_tensor(w, "small", WPACK_DTYPE_F32, 1, small) == WPACK_OK &&
             wpack_writer_write(w, values, 40) == WPACK_OK &&
             wpack_writer_end_tensor(w) == WPACK_OK &&
             wpack_writer_add_alias(w, "same", "big") == WPACK_OK &&
             wpack_writer_add_splat(w, "splat", WPACK_DTYPE_F32, 1, dims, &fill, 4) == WPACK_OK;
    char err[600];
    if (!ok) {
        wpack_writer_abort(w);
        return 0;
    }
    return wpack_writer_finish(w, err, sizeof err) == WPACK_OK;
}

/* What an output file holds (at most N * 4 + 64 bytes); its length in *n. */
/* The expected bytes of entry name. */
static int expected(const wpack_archive *ar, const char *name, unsigned char *out, size_t *n)
{
    wpack_tensor t;
    if (wpack_find(ar, name, &t) != WPACK_OK)
        return 0;
    *n = (size_t)t.nbytes;
    return wpack_read(ar, t.index, 0, out, *n) == WPACK_OK;
}

/* Entry name to a file opened with oflags after a prefix of pre bytes
 * (3: the offsets do not line up in a page, pread/write; 4096 or 0: they
 * do, copy_file_range), flags. */
static void one_at(const wpack_archive *ar, const char *name, int oflags, unsigned flags,
                   size_t pre)
{
    char out[300];
    snprintf(out, sizeof out, "%s/out", dir);
    unlink(out);
    int fd = open(out, O_CREAT | O_TRUNC | oflags, 0644);
    CHECK(fd >= 0, "open %s", out);
    if (fd < 0)
        return;
    unsigned char prefix[4096];
    for (size_t i = 0; i < sizeof prefix; i++)
        prefix[i] = (unsigned char)("abc"[i % 3]);
    CHECK(write(fd, prefix, pre) == (ssize_t)pre, "prefix");
    wpack_tensor t;
    CHECK_EQ(wpack_find(ar, name, &t), WPACK_OK);
    int rc = wpack_read_to_fd(ar, t.index, fd, flags);
    CHECK(rc == WPACK_OK, "%s oflags %#x flags %u prefix %zu: %s", name, oflags, flags, pre,
          wpack_errmsg(ar));
    CHECK_EQ(lseek(fd, 0, SEEK_CUR), (long long)pre + (long long)t.nbytes);
    close(fd);
    size_t n = 0, m = 0;
    unsigned char *got = test_slurp(out, &n), *want = malloc(N * 4 + 64);
    CHECK(got && want && expected(ar, name, want, &m), "read back");
    if (got && want) {
        CHECK_EQ(n, pre + m);
        CHECK(memcmp(got, prefix, pre) == 0 && memcmp(got + pre, want, m) == 0,
              "%s prefix %zu: bytes differ", name, pre);
    }
    free(got);
    free(want);
}

static void one(const wpack_archive *ar, const char *name, int oflags, unsigned flags)
{
    one_at(ar, name, oflags, flags, 3);
}

static void test_outputs(void)
{
    const char *names[] = {"big", "small", "same", "splat"};
    int oflags[] = {O_RDWR, O_WRONLY, O_RDWR | O_APPEND};
    for (unsigned v = 0; v < 2; v++) {
        wpack_archive *ar;
        CHECK_EQ(wpack_open_file(&ar, apath, v ? WPACK_OPEN_VERIFY_READS : 0), WPACK_OK);
        for (int k = 0; k < 4; k++)
            for (int o = 0; o < 3; o++)
                for (unsigned f = 0; f < 2; f++)
                    for (size_t p = 0; p < 3; p++) /* off the page line, on it, at 0 */
                        one_at(ar, names[k], oflags[o],
                               f ? WPACK_READ_NO_COPY_RANGE : WPACK_READ_VERIFY,
                               (size_t[]){3, 4096, 0}[p]);
        wpack_close(ar);
    }
}

/* The archive's bytes (malloc'd), its stat in *st. */
static unsigned char *whole_archive(struct stat *st)
{
    stat(apath, st);
    unsigned char *buf = malloc((size_t)st->st_size);
    FILE *f = fopen(apath, "rb");
    CHECK(buf && f && fread(buf, 1, (size_t)st->st_size, f) == (size_t)st->st_size, "read");
    if (f)
        fclose(f);
    return buf;
}

static void test_pipe_and_memory(void)
{
    wpack_archive *mem = NULL, *ar = NULL;
    struct stat st;
    unsigned char *buf = whole_archive(&st);
    CHECK_EQ(wpack_open_memory(&mem, buf, (size_t)st.st_size, 0), WPACK_OK);
    CHECK_EQ(wpack_open_file(&ar, apath, 0), WPACK_OK);
    const wpack_archive *both[2] = {mem, ar};
    for (int a = 0; a < 2; a++) {
        int p[2];
        CHECK(pipe(p) == 0, "pipe");
        wpack_tensor t;
        wpack_find(both[a], "small", &t); /* 40 bytes: fits the pipe's buffer */
        CHECK_EQ(wpack_read_to_fd(both[a], t.index, p[1], WPACK_READ_VERIFY), WPACK_OK);
        unsigned char got[64];
        CHECK_EQ(read(p[0], got, sizeof got), 40);
        CHECK(memcmp(got, values, 40) == 0, "pipe bytes");
        close(p[0]);
        close(p[1]);
        one(both[a], "big", O_RDWR, WPACK_READ_VERIFY);
    }
    CHECK_EQ(wpack_read_to_fd(ar, 0, -1, 0), WPACK_E_INVALID_ARGUMENT);
    CHECK_EQ(wpack_read_to_fd(ar, 0, 1, 8), WPACK_E_INVALID_ARGUMENT);
    CHECK_EQ(wpack_read_to_fd(ar, 99, 1, 0), WPACK_E_NOT_FOUND);
    wpack_close(mem);
    wpack_close(ar);
    free(buf);
}

/* A flipped byte in "big": every path says WPACK_E_CHECKSUM; the archive
 * replaced by another file after open is read from the mapping. */
static void test_damaged_and_replaced(void)
{
    char bad[320], out[300];
    snprintf(bad, sizeof bad, "%s/bad.wpack", dir);
    snprintf(out, sizeof out, "%s/o", dir);
    struct stat st;
    unsigned char *buf = whole_archive(&st);
    FILE *f;
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, apath, 0), WPACK_OK);
    wpack_tensor t;
    wpack_find(ar, "big", &t);
    wpack_close(ar);
    buf[t.offset + 12345] ^= 0x20;
    f = fopen(bad, "wb");
    CHECK(f && fwrite(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size, "write");
    if (f)
        fclose(f);
    for (unsigned flags = 0; flags < 3; flags++) { /* copy_file_range, read/write, off the line */
        CHECK_EQ(wpack_open_file(&ar, bad, 0), WPACK_OK);
        int fd = open(out, O_CREAT | O_TRUNC | O_RDWR, 0644);
        if (flags == 2)
            CHECK(write(fd, "abc", 3) == 3, "prefix");
        unsigned rf = WPACK_READ_VERIFY | (flags == 1 ? WPACK_READ_NO_COPY_RANGE : 0);
        CHECK_EQ(wpack_read_to_fd(ar, t.index, fd, rf), WPACK_E_CHECKSUM);
        CHECK(strstr(wpack_errmsg(ar), "'big'") != NULL, "message: %s", wpack_errmsg(ar));
        /* remembered: the alias fails too, before writing anything */
        wpack_tensor s;
        wpack_find(ar, "same", &s);
        CHECK_EQ(wpack_read_to_fd(ar, s.index, fd, rf), WPACK_E_CHECKSUM);
        close(fd);
        wpack_close(ar);
    }
    /* open the damaged file, then put the good bytes at its path: the
     * reopen sees another inode and the mapping (damaged) serves */
    CHECK_EQ(wpack_open_file(&ar, bad, 0), WPACK_OK);
    char tmp[340];
    snprintf(tmp, sizeof tmp, "%s.new", bad);
    buf[t.offset + 12345] ^= 0x20;
    f = fopen(tmp, "wb");
    CHECK(f && fwrite(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size, "write");
    if (f)
        fclose(f);
    CHECK(rename(tmp, bad) == 0, "rename");
    int fd = open(out, O_CREAT | O_TRUNC | O_RDWR, 0644);
    CHECK_EQ(wpack_read_to_fd(ar, t.index, fd, WPACK_READ_VERIFY), WPACK_E_CHECKSUM);
    close(fd);
    wpack_close(ar);
    unlink(out);
    unlink(bad);
    free(buf);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    values = malloc(N * 4);
    for (unsigned i = 0; i < N; i++)
        values[i] = (float)i * 0.25f - 7.0f;
    snprintf(apath, sizeof apath, "%s/a.wpack", dir);
    if (!make_archive(apath)) {
        printf("FAIL make_archive\n");
        return 1;
    }
    RUN(test_outputs);
    RUN(test_pipe_and_memory);
    RUN(test_damaged_and_replaced);
    unlink(apath);
    char out[300];
    snprintf(out, sizeof out, "%s/out", dir);
    unlink(out);
    rmdir(dir);
    free(values);
    return tl_finish();
}
