/*
 * test_same_file_lib.c - the same-file rule in the library, not only the
 * CLI: wpack_externalize_file and wpack_resolve_file refuse an output that
 * is the same file as an input (the same path, a hard link, a symlink, a
 * /proc/self/fd path) or two outputs that are one file, with
 * WPACK_E_SAME_FILE naming both paths, before anything is written: the
 * inputs keep their bytes and no temporary is left.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"
#include "wpack_mlir.h"

static char dir[] = "/tmp/wpk-samefile-XXXXXX";
static char last[2048]; /* the last error diagnostic */

static void on_diag(void *user, int severity, const char *msg)
{
    (void)user;
    if (severity == WPACK_DIAG_ERROR)
        snprintf(last, sizeof last, "%s", msg);
}

static const char *p(char *buf, const char *name)
{
    snprintf(buf, 512, "%s/%s", dir, name);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int holds(const char *path, const char *text)
{
    char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strcmp(buf, text) == 0;
}

/* The names in dir, for "nothing was written". */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static const char inline_ir[] =
    "ml_program.global private @w(dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>) : "
    "tensor<8xf32>\n";

/* externalize with in, out, archive: WPACK_E_SAME_FILE naming a and b,
 * the input unchanged and dir holding n names as before. */
static void ext_refused(const char *in, const char *out, const char *ar, const char *a, const char *b)
{
    wpack_externalize_options opt;
    wpack_externalize_options_init(&opt);
    opt.min_bytes = 1;
    opt.diag = on_diag;
    char tin[512];
    int before = entries();
    last[0] = 0;
    CHECK_EQ(wpack_externalize_file(in, out, ar, &opt, NULL), WPACK_E_SAME_FILE);
    CHECK(strstr(last, a) && strstr(last, b) && strstr(last, "[WPACK_E_SAME_FILE]"),
          "message names %s and %s: %s", a, b, last);
    CHECK(holds(p(tin, "in.mlir"), inline_ir), "input unchanged (%s %s %s)", in, out, ar);
    CHECK_EQ(entries(), before);
}

static void test_externalize(void)
{
    char in[512], out[512], ar[512], hl[512], sl[512], fdp[64], dot[512];
    put(p(in, "in.mlir"), inline_ir);
    p(out, "out.mlir");
    p(ar, "new.wpack");
    ext_refused(in, out, out, out, out);   /* OUT and ARCHIVE: one path, neither there */
    ext_refused(in, out, in, in, in);      /* ARCHIVE is IN */
    ext_refused(in, in, ar, in, in);       /* OUT is IN */
    CHECK_EQ(link(in, p(hl, "hard.mlir")), 0);
    ext_refused(in, out, hl, "hard.mlir", "in.mlir"); /* a hard link of IN */
    ext_refused(in, hl, ar, "hard.mlir", "in.mlir");
    unlink(hl);
    CHECK_EQ(symlink("in.mlir", p(sl, "link.mlir")), 0);
    ext_refused(in, out, sl, "link.mlir", "in.mlir"); /* a symlink to IN */
    ext_refused(sl, sl, ar, "link.mlir", "link.mlir");
    unlink(sl);
    snprintf(dot, sizeof dot, "%s/./out.mlir", dir); /* two spellings of one new file */
    ext_refused(in, out, dot, "/./out.mlir", "/out.mlir");
    int fd = open(in, O_RDONLY);
    snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
    if (access(fdp, F_OK) == 0)
        ext_refused(in, out, fdp, fdp, "in.mlir");
    close(fd);
    /* three different files: written */
    wpack_externalize_options opt;
    wpack_externalize_options_init(&opt);
    opt.min_bytes = 1;
    CHECK_EQ(wpack_externalize_file(in, out, ar, &opt, NULL), WPACK_OK);
    CHECK(access(out, F_OK) == 0 && access(ar, F_OK) == 0, "both written");
    unlink(out);
    unlink(ar);
}

static const char extern_ir[] =
    "ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n";

static void res_refused(const wpack_archive *a, const char *in, const char *out, const char *n1,
                        const char *n2, const char *arpath, const char *arbytes, size_t arlen)
{
    wpack_resolve_options opt;
    wpack_resolve_options_init(&opt);
    opt.diag = on_diag;
    char tin[512];
    int before = entries();
    last[0] = 0;
    CHECK_EQ(wpack_resolve_file(a, in, out, &opt, NULL), WPACK_E_SAME_FILE);
    CHECK(strstr(last, n1) && strstr(last, n2) && strstr(last, "[WPACK_E_SAME_FILE]"),
          "message names %s and %s: %s", n1, n2, last);
    CHECK(holds(p(tin, "r.mlir"), extern_ir), "input unchanged (%s %s)", in, out);
    FILE *f = fopen(arpath, "rb");
    char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    CHECK(n == arlen && memcmp(buf, arbytes, n) == 0, "archive unchanged (%s)", out);
    CHECK_EQ(entries(), before);
}

static void test_resolve(void)
{
    char in[512], out[512], arp[512], hl[512], sl[512];
    put(p(in, "r.mlir"), extern_ir);
    p(arp, "r.wpack");
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, arp, NULL), WPACK_OK);
    float v[4] = {1, 2, 3, 4};
    uint64_t dims[1] = {4};
    CHECK_EQ(wpack_writer_add_tensor(w, "w", WPACK_DTYPE_F32, 1, dims, v, sizeof v), WPACK_OK);
    char err[256];
    CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_OK);
    static char bytes[8192];
    FILE *f = fopen(arp, "rb");
    size_t len = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f)
        fclose(f);
    CHECK(len > 0 && len < sizeof bytes, "archive read back");
    wpack_archive *a;
    CHECK_EQ(wpack_open_file(&a, arp, 0), WPACK_OK);
    res_refused(a, in, in, "r.mlir", "r.mlir", arp, bytes, len);   /* OUT is IN */
    res_refused(a, in, arp, "r.wpack", "r.wpack", arp, bytes, len); /* OUT is the archive */
    CHECK_EQ(link(arp, p(hl, "hard.wpack")), 0);
    res_refused(a, in, hl, "hard.wpack", "r.wpack", arp, bytes, len);
    unlink(hl);
    CHECK_EQ(symlink("r.wpack", p(sl, "link.wpack")), 0);
    res_refused(a, in, sl, "link.wpack", "r.wpack", arp, bytes, len);
    unlink(sl);
    CHECK_EQ(symlink("r.mlir", p(sl, "link.mlir")), 0);
    res_refused(a, in, sl, "link.mlir", "r.mlir", arp, bytes, len);
    unlink(sl);
    CHECK_EQ(wpack_resolve_file(a, in, p(out, "o.mlir"), NULL, NULL), WPACK_OK);
    CHECK(access(out, F_OK) == 0, "written");
    unlink(out);
    wpack_close(a);
    unlink(arp);
    unlink(in);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_externalize);
    RUN(test_resolve);
    char x[512];
    unlink(p(x, "in.mlir"));
    rmdir(dir);
    return tl_finish();
}
