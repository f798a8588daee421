/* test_large.c - 64-bit offsets: an archive past 4 GiB (a sparse 4 GiB
 * tensor) with a tensor that starts past 4 GiB; open, look up, read,
 * verify the tensor beyond the boundary. */
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static void test_tensor_past_4gib(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/wpack-large-%d.wpack", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    uint64_t big = (4ull << 30) + 12345; /* u8: no stats, written as a hole */
    CHECK(wpack_writer_begin_tensor(w, "a.huge", WPACK_DTYPE_U8, 1, &big) == WPACK_OK, "begin");
    CHECK(wpack_writer_write(w, "\x07", 1) == WPACK_OK, "first byte");
    CHECK(wpack_writer_write_zeros(w, big - 2) == WPACK_OK, "zeros: %s", wpack_writer_errmsg(w));
    CHECK(wpack_writer_write(w, "\x09", 1) == WPACK_OK, "last byte");
    CHECK(wpack_writer_end_tensor(w) == WPACK_OK, "end");
    float f[4] = {1.5f, -2.5f, 3.5f, 4.5f};
    CHECK(wpack_writer_add_tensor(w, "b.after", WPACK_DTYPE_F32, 1, (uint64_t[]){4}, f, sizeof f) ==
              WPACK_OK, "tensor past 4 GiB");
    char err[256];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size > (4ull << 30), "file past 4 GiB");
    CHECK((uint64_t)st.st_blocks * 512 < (64ull << 20), "sparse: %llu bytes allocated",
          (unsigned long long)st.st_blocks * 512);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "reopen: %s", wpack_errmsg(ar));
    wpack_tensor t;
    CHECK(wpack_find(ar, "b.after", &t) == WPACK_OK, "find");
    CHECK(t.offset > (4ull << 30) && t.offset % 4096 == 0, "offset %llu", (unsigned long long)t.offset);
    CHECK(memcmp(t.data, f, sizeof f) == 0, "bytes past 4 GiB");
    CHECK(wpack_verify_entry(ar, t.index) == WPACK_OK, "verify past 4 GiB");
    CHECK(wpack_find(ar, "a.huge", &t) == WPACK_OK && t.nbytes == big, "huge size");
    unsigned char b[3];
    CHECK(wpack_read(ar, t.index, big - 3, b, 3) == WPACK_OK && b[0] == 0 && b[2] == 9, "tail");
    CHECK(((const unsigned char *)t.data)[0] == 7, "head");
    wpack_info in;
    wpack_get_info(ar, &in);
    CHECK(in.data_length > (4ull << 30) && in.index_offset > (4ull << 30), "64-bit regions");
    wpack_close(ar);
    unlink(path);
}

int main(void)
{
    RUN(test_tensor_past_4gib);
    return tl_finish();
}
