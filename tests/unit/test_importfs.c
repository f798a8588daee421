/* test_importfs.c - issue 14 points 3, 6 and 7 for sharded sets
 * (reader/shards.c) and the open rule they share with the importers
 * (format/open_input.c): a set naming one shard file in 65,536 slots is
 * refused before any shard is mapped, with bounded memory and time; two
 * names that are one file (hard link) are refused; a shard that is a FIFO
 * is refused at once; a shard that is a symlink is refused unless
 * WPACK_OPEN_FOLLOW_LINKS. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "testlib.h"
#include "tools/golden_content.h"
#include "wpack.h"

static char dir[200];

static void at(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* A one-tensor shard archive at dir/name; its length and index xxh3. */
static int make_shard(const char *name, uint64_t *len, uint64_t *sum, wpack_tensor *t)
{
    char path[512];
    at(path, sizeof path, name);
    wpack_writer *w;
    if (wpack_writer_open(&w, path, NULL))
        return 1;
    float v[4] = {1, 2, 3, 4};
    char err[256];
    if (wpack_writer_add_tensor(w, "t", WPACK_DTYPE_F32, 1, (uint64_t[]){4}, v, sizeof v) ||
        wpack_writer_finish(w, err, sizeof err))
        return 1;
    wpack_archive *ar;
    if (wpack_open_file(&ar, path, 0)) {
        wpack_close(ar);
        return 1;
    }
    wpack_info in;
    wpack_get_info(ar, &in);
    *len = in.file_length;
    *sum = in.index_checksum;
    wpack_find(ar, "t", t);
    t->name = "t"; /* outlives the handle */
    wpack_close(ar);
    return 0;
}

/* A manifest dir/set.wpack of n slots named names[k], all with shard 0's
 * length and checksum, and tensor t external in the last slot. */
static int make_set(uint32_t n, const char *const *names, uint64_t len, uint64_t sum,
                    const wpack_tensor *t)
{
    char path[512];
    at(path, sizeof path, "set.wpack");
    uint64_t *lens = malloc(n * sizeof *lens), *sums = malloc(n * sizeof *sums);
    wpack_writer *w = NULL;
    int rc = !lens || !sums || wpack_writer_open(&w, path, NULL);
    for (uint32_t k = 0; k < n && !rc; k++) {
        lens[k] = len;
        sums[k] = sum;
    }
    char err[256];
    if (!rc)
        rc = wpack_writer_set_shards(w, n, names, lens, sums) ||
             wpack_writer_add_external(w, "t", n - 1, t) || wpack_writer_finish(w, err, sizeof err);
    else
        wpack_writer_abort(w);
    free(lens);
    free(sums);
    return rc;
}

/* The writer refuses a list naming one file twice (spec 19a), so the
 * 65,536-slot set is written with distinct 7-byte names q000000,
 * q000001, ... (pooled one after another, each with its NUL) and each
 * is then made "s.wpack" in the file, the index checksum re-sealed. */
static int forge_same_names(uint32_t n)
{
    char path[512];
    at(path, sizeof path, "set.wpack");
    size_t len;
    uint8_t *f = test_slurp(path, &len);
    uint8_t *p = f ? memmem(f, len, "q000000", 8) : NULL;
    int rc = !p || (size_t)(p - f) + 8 * (size_t)n > len;
    for (uint32_t k = 0; k < n && !rc; k++) {
        char want[16];
        snprintf(want, sizeof want, "q%06u", k);
        rc = memcmp(p + 8 * k, want, 8) != 0;
        memcpy(p + 8 * k, "s.wpack", 7);
    }
    if (!rc) {
        gimg m = {f, len};
        gimg_seal_index(&m);
        FILE *o = fopen(path, "wb");
        rc = !o || fwrite(f, 1, len, o) != len;
        if (o)
            rc |= fclose(o) != 0;
    }
    free(f);
    return rc;
}

static long maxrss_kb(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_maxrss;
}

static int open_set(unsigned flags, wpack_archive **ar)
{
    char path[512];
    at(path, sizeof path, "set.wpack");
    return wpack_open_file(ar, path, flags);
}

static void test_one_file_many_slots(void)
{
    uint64_t len, sum;
    wpack_tensor t;
    CHECK(make_shard("s.wpack", &len, &sum, &t) == 0, "shard written");
    enum { N = 65536 };
    const char **names = malloc(N * sizeof *names);
    CHECK(names != NULL, "memory");
    if (!names)
        return;
    static char distinct[N][16];
    for (int k = 0; k < N; k++) {
        snprintf(distinct[k], sizeof distinct[k], "q%06d", k);
        names[k] = distinct[k];
    }
    CHECK(make_set(N, names, len, sum, &t) == 0 && forge_same_names(N) == 0,
          "65,536-slot manifest written, every slot 's.wpack'");
    free(names);
    long before = maxrss_kb();
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    wpack_archive *ar;
    int rc = open_set(0, &ar);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    CHECK(rc == WPACK_E_SHARD && strstr(wpack_errmsg(ar), "'s.wpack' is listed twice"), "rc %d %s",
          rc, wpack_errmsg(ar));
    wpack_close(ar);
    /* Before: 65,536 maps of the file, 600 MB to 1.65 GB and vm.max_map_count. */
    long grew = maxrss_kb() - before;
    CHECK(grew < 64 * 1024, "open grew the RSS by %ld KB", grew);
    CHECK(secs < 5, "open took %.2f s", secs);
}

static void test_hard_link_is_the_same_shard(void)
{
    uint64_t len, sum;
    wpack_tensor t;
    CHECK(make_shard("h1.wpack", &len, &sum, &t) == 0, "shard written");
    char p1[512], p2[512];
    at(p1, sizeof p1, "h1.wpack");
    at(p2, sizeof p2, "h2.wpack");
    CHECK(link(p1, p2) == 0, "link: %s", strerror(errno));
    const char *names[2] = {"h1.wpack", "h2.wpack"};
    CHECK(make_set(2, names, len, sum, &t) == 0, "manifest written");
    wpack_archive *ar;
    int rc = open_set(0, &ar);
    CHECK(rc == WPACK_E_SHARD && strstr(wpack_errmsg(ar), "are the same file"), "rc %d %s", rc,
          wpack_errmsg(ar));
    wpack_close(ar);
}

static void test_fifo_and_symlink_shards(void)
{
    uint64_t len, sum;
    wpack_tensor t;
    /* the real shard lives outside the set's directory */
    char sub[300], real[512], inset[512];
    at(sub, sizeof sub, "set");
    CHECK(mkdir(sub, 0700) == 0, "mkdir");
    CHECK(make_shard("outside.wpack", &len, &sum, &t) == 0, "shard written");
    at(real, sizeof real, "outside.wpack");
    at(inset, sizeof inset, "set/l.wpack");
    CHECK(symlink(real, inset) == 0, "symlink");
    char saved[200];
    memcpy(saved, dir, sizeof saved);
    CHECK(strlen(sub) < sizeof dir, "path length");
    memcpy(dir, sub, strlen(sub) + 1 < sizeof dir ? strlen(sub) + 1 : sizeof dir);
    dir[sizeof dir - 1] = 0;
    const char *names[1] = {"l.wpack"};
    CHECK(make_set(1, names, len, sum, &t) == 0, "manifest written");
    wpack_archive *ar;
    int rc = open_set(0, &ar);
    CHECK(rc == WPACK_E_FILE_TYPE && strstr(wpack_errmsg(ar), "symbolic link"), "rc %d %s", rc,
          wpack_errmsg(ar));
    wpack_close(ar);
    rc = open_set(WPACK_OPEN_FOLLOW_LINKS, &ar);
    CHECK(rc == WPACK_OK && wpack_shard_count(ar) == 1, "followed on request: rc %d %s", rc,
          wpack_errmsg(ar));
    wpack_close(ar);

    /* a FIFO: refused at once, not a hang */
    unlink(inset);
    CHECK(mkfifo(inset, 0600) == 0, "mkfifo");
    rc = open_set(WPACK_OPEN_FOLLOW_LINKS, &ar);
    CHECK(rc == WPACK_E_FILE_TYPE && strstr(wpack_errmsg(ar), "a FIFO"), "rc %d %s", rc,
          wpack_errmsg(ar));
    wpack_close(ar);
    memcpy(dir, saved, sizeof saved);
}

/* The open rule itself: components, links, types. */
static void test_open_input(void)
{
    char sub[300], file[512], lnk[512];
    at(sub, sizeof sub, "oi");
    CHECK(mkdir(sub, 0700) == 0, "mkdir");
    at(file, sizeof file, "oi/f.bin");
    int fd = open(file, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && write(fd, "abc", 3) == 3, "write");
    close(fd);
    at(lnk, sizeof lnk, "oi/l.bin");
    CHECK(symlink("f.bin", lnk) == 0, "symlink");
    int dfd = open(sub, O_RDONLY | O_DIRECTORY);
    struct stat st;
    char msg[300];
    int code = 0;
    fd = wpk_open_input(dfd, "f.bin", WPK_INPUT_NOFOLLOW, &st, &code, msg, sizeof msg);
    CHECK(fd >= 0 && st.st_size == 3, "a plain file opens: %s", msg);
    if (fd >= 0)
        close(fd);
    static const char *const bad[] = {"l.bin", "./f.bin", "x/../f.bin", "a//b", "/etc/passwd", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fd = wpk_open_input(dfd, bad[i], WPK_INPUT_NOFOLLOW, &st, &code, msg, sizeof msg);
        CHECK(fd < 0 && code == WPACK_E_FILE_TYPE, "'%s' refused: %d %s", bad[i], code, msg);
    }
    fd = wpk_open_input(dfd, "l.bin", 0, &st, &code, msg, sizeof msg);
    CHECK(fd >= 0, "a link opens when following: %s", msg);
    if (fd >= 0)
        close(fd);
    fd = wpk_open_input(dfd, ".", 0, &st, &code, msg, sizeof msg);
    CHECK(fd < 0 && code == WPACK_E_FILE_TYPE && strstr(msg, "a directory"), "%s", msg);
    fd = wpk_open_input(dfd, "missing", WPK_INPUT_NOFOLLOW, &st, &code, msg, sizeof msg);
    CHECK(fd < 0 && code == WPACK_E_IO, "missing: %d %s", code, msg);
    close(dfd);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/wpack-importfs-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN(test_one_file_many_slots);
    RUN(test_hard_link_is_the_same_shard);
    RUN(test_fifo_and_symlink_shards);
    RUN(test_open_input);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd))
        return 1;
    return tl_finish();
}
