/*
 * test_import_walk_swap.c - wpack_import_list walks a directory by
 * directory fds (import/import_walk.c): a directory swapped for a symlink
 * while the walk runs does not take the walk out of the tree. The item
 * callback does the swap, so the race is deterministic: after the first
 * item under top/b/c, top/b becomes a link to a tree outside holding
 * c/d/evil.npy; the walk, already inside the real c, goes on in the real
 * c/d and lists inside.npy, never evil.npy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack_import.h"

static char base[256];

typedef struct {
    char names[16][64];
    int n;
    const char *swap_after; /* item name after which the swap happens */
    const char *from, *moved, *link_to;
} seen;

static int on_item(void *user, const wpack_import_item *it)
{
    seen *s = user;
    if (s->n < 16)
        snprintf(s->names[s->n++], 64, "%s", it->name ? it->name : "?");
    if (s->swap_after && it->name && strcmp(it->name, s->swap_after) == 0) {
        CHECK(rename(s->from, s->moved) == 0, "rename %s", s->from);
        CHECK(symlink(s->link_to, s->from) == 0, "symlink %s", s->from);
    }
    return WPACK_OK;
}

static void touch(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL, "create %s", p);
    if (f)
        fclose(f);
}

static void mkd(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    CHECK(mkdir(p, 0755) == 0, "mkdir %s", p);
}

static int listed(const seen *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return 1;
    return 0;
}

/* wpack_import_list of top (under base) into s; the return code */
static int list(const char *top_rel, seen *s, char *err, size_t errlen)
{
    char top[512];
    snprintf(top, sizeof top, "%s/%s", base, top_rel);
    wpack_import_options o;
    wpack_import_options_init(&o);
    o.err = err;
    o.err_size = errlen;
    return wpack_import_list(top, &o, on_item, s);
}

/* top/b swapped for a link while the walk is in top/b/c: it stays in the real tree */
static void test_parent_swapped_mid_walk(void)
{
    mkd("t1");
    mkd("t1/top");
    mkd("t1/top/b");
    mkd("t1/top/b/c");
    mkd("t1/top/b/c/d");
    touch("t1/top/b/c/a.npy");
    touch("t1/top/b/c/d/inside.npy");
    mkd("t1/out");
    mkd("t1/out/c");
    mkd("t1/out/c/d");
    touch("t1/out/c/d/evil.npy");
    char from[512], moved[512], err[1024] = "";
    snprintf(from, sizeof from, "%s/t1/top/b", base);
    snprintf(moved, sizeof moved, "%s/t1/top/b_moved", base);
    seen s = {.swap_after = "b.c.a", .from = from, .moved = moved, .link_to = "../out"};
    int rc = list("t1/top", &s, err, sizeof err);
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK(listed(&s, "b.c.a"), "b.c.a not listed");
    CHECK(listed(&s, "b.c.d.inside"), "the real b/c/d was not walked (%d items)", s.n);
    CHECK(!listed(&s, "b.c.d.evil"), "the walk followed the swapped-in link out of the tree");
    CHECK_EQ(s.n, 2);
}

/* a directory swapped for a link before the walk reaches it is not walked */
static void test_dir_swapped_before_visit(void)
{
    mkd("t2");
    mkd("t2/top");
    mkd("t2/top/z");
    touch("t2/top/a.npy");
    touch("t2/top/z/fine.npy");
    mkd("t2/out");
    touch("t2/out/evil.npy");
    char from[512], moved[512], err[1024] = "";
    snprintf(from, sizeof from, "%s/t2/top/z", base);
    snprintf(moved, sizeof moved, "%s/t2/top/z_moved", base);
    seen s = {.swap_after = "a", .from = from, .moved = moved, .link_to = "../out"};
    int rc = list("t2/top", &s, err, sizeof err);
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK(!listed(&s, "z.evil"), "walked into the swapped-in link");
    CHECK_EQ(s.n, 1);
}

/* no swap: the same walk lists the same names as before */
static void test_plain_walk(void)
{
    mkd("t3");
    mkd("t3/top");
    mkd("t3/top/m");
    mkd("t3/top/m/n");
    touch("t3/top/m/n/w.npy");
    touch("t3/top/m/v.npy");
    touch("t3/top/u.npy");
    touch("t3/top/.hidden.npy");
    seen s = {0};
    char err[1024] = "";
    int rc = list("t3/top/", &s, err, sizeof err); /* a trailing slash too */
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK_EQ(s.n, 3);
    CHECK(s.n == 3 && strcmp(s.names[0], "m.n.w") == 0 && strcmp(s.names[1], "m.v") == 0 &&
              strcmp(s.names[2], "u") == 0,
          "order: %s %s %s", s.names[0], s.names[1], s.names[2]);
}

/* A valid .npy of two f32 values v under base. */
static void write_npy(const char *rel, float v)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    char hdr[128]; /* preamble + dict padded with spaces to a multiple of 64 */
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    memset(hdr, ' ', sizeof hdr);
    memcpy(hdr, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(hdr + 10, dict, strlen(dict));
    hdr[127] = '\n';
    float d[2] = {v, v};
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(hdr, 1, 128, f) == 128 && fwrite(d, 4, 2, f) == 2, "write %s", p);
    if (f)
        fclose(f);
}

typedef struct {
    char path[8][512], name[8][64];
    int n;
} items;

static int keep_item(void *user, const wpack_import_item *it)
{
    items *v = user;
    if (v->n < 8) {
        snprintf(v->path[v->n], 512, "%s", it->path);
        snprintf(v->name[v->n], 64, "%s", it->name ? it->name : "?");
        v->n++;
    }
    return WPACK_OK;
}

/* Listing first and importing later (what `wpack create` does): a
 * directory swapped for a link in between is refused at the import
 * (within: opened under the listed directory, no link followed), never
 * followed out of the tree; unswapped, the same calls import the tensor. */
static void test_swap_between_list_and_import(void)
{
    mkd("t4");
    mkd("t4/top");
    mkd("t4/top/b");
    write_npy("t4/top/b/x.npy", 1);
    mkd("t4/out");
    write_npy("t4/out/x.npy", 666);
    char top[512], err[1024] = "";
    snprintf(top, sizeof top, "%s/t4/top", base);
    wpack_import_options o;
    wpack_import_options_init(&o);
    o.err = err;
    o.err_size = sizeof err;
    items v = {0};
    CHECK(wpack_import_list(top, &o, keep_item, &v) == WPACK_OK && v.n == 1, "list: %s", err);
    for (int swapped = 0; swapped < 2 && v.n == 1; swapped++) {
        if (swapped) {
            char from[512], moved[512];
            snprintf(from, sizeof from, "%s/t4/top/b", base);
            snprintf(moved, sizeof moved, "%s/t4/top/b_moved", base);
            CHECK(rename(from, moved) == 0 && symlink("../out", from) == 0, "swap");
        }
        char out[512];
        snprintf(out, sizeof out, "%s/t4/a%d.wpack", base, swapped);
        wpack_writer *w;
        wpack_importer *imp;
        CHECK(wpack_writer_open(&w, out, NULL) == WPACK_OK && wpack_import_open(&imp, w) == WPACK_OK,
              "open");
        wpack_import_options io = o;
        io.name = v.name[0];
        io.within = top;
        int rc = wpack_import_add(imp, v.path[0], &io);
        if (!swapped) {
            CHECK(rc == WPACK_OK, "unswapped import: %s", err);
            char e2[300];
            CHECK(wpack_writer_finish(w, e2, sizeof e2) == WPACK_OK, "finish: %s", e2);
            wpack_archive *ar;
            wpack_tensor t;
            CHECK(wpack_open_file(&ar, out, WPACK_OPEN_VERIFY) == WPACK_OK &&
                      wpack_find(ar, "b.x", &t) == WPACK_OK && t.data &&
                      ((const float *)t.data)[1] == 1,
                  "b.x read back");
            wpack_close(ar);
        } else {
            CHECK(rc == WPACK_E_FILE_TYPE, "swapped: rc %d: %s", rc, err);
            CHECK(strstr(err, "symbolic link") != NULL, "message: %s", err);
            wpack_writer_abort(w);
        }
        wpack_import_close(imp);
    }
}

int main(void)
{
    snprintf(base, sizeof base, "%s/wpack-walk-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(base)) {
        printf("FAIL mkdtemp\n# passed 0 failed 1\n");
        return 1;
    }
    RUN(test_parent_swapped_mid_walk);
    RUN(test_dir_swapped_before_visit);
    RUN(test_plain_walk);
    RUN(test_swap_between_list_and_import);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", base);
    return tl_finish();
}
