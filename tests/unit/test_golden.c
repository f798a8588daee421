/*
 * test_golden.c - the committed archives in tests/golden and tests/hostile.
 *
 *   - golden/v1_basic.wpack opens (mmap and memory), verifies, and reads back
 *     exactly what golden/v1_basic.expect says (every entry, metadata value,
 *     name-map record and stats record), plus spot checks of the values that
 *     golden_content.h wrote;
 *   - today's writer, given the same calls (golden_write() in
 *     tests/tools/golden_content.h), produces the committed bytes exactly.
 *     FORMAT STABILITY: if this fails because the byte layout changed, that
 *     is a format change and must bump the format version (WPACK_FORMAT_MAJOR
 *     or _MINOR, spec change log) before the golden file is regenerated with
 *     tests/tools/make_golden.c. A writer-only change (different but still
 *     valid bytes) must say why in its commit;
 *   - each golden/errors/NAME.wpack gives the code in golden/errors/EXPECT;
 *   - each hostile/NAME.wpack gives the code in hostile/EXPECT (and is listed
 *     in hostile/README.md).
 *
 * Run from the repository root; the tests directory is argv[1], else
 * $WPACK_TESTS_DIR, else "tests".
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "tools/golden_content.h"

static const char *dir = "tests";

static char *path_of(const char *rel)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
    return buf[k];
}

/* A whole text file, NUL-terminated; NULL if missing. */
static char *slurp_text(const char *path)
{
    size_t n;
    uint8_t *p = golden_slurp(path, &n);
    if (!p)
        return NULL;
    char *s = realloc(p, n + 1);
    if (!s) {
        free(p);
        return NULL;
    }
    s[n] = 0;
    return s;
}

/* Open a malloc'd copy of exactly the bytes (for ASan) and give the code. */
static int open_copy(const uint8_t *p, size_t n, unsigned flags, char *msg, size_t msglen)
{
    uint8_t *c = malloc(n ? n : 1);
    if (!c)
        return WPACK_E_NOMEM;
    memcpy(c, p, n);
    wpack_archive *ar;
    int rc = wpack_open_memory(&ar, c, n, flags);
    snprintf(msg, msglen, "%s", wpack_errmsg(ar));
    wpack_close(ar);
    free(c);
    return rc;
}

/* ------------------------------------------------------------ v1_basic */

static void test_basic_expect(void)
{
    char *want = slurp_text(path_of("golden/v1_basic.expect"));
    CHECK(want != NULL, "%s missing", path_of("golden/v1_basic.expect"));
    wpack_archive *ar;
    int rc = wpack_open_file(&ar, path_of("golden/v1_basic.wpack"), WPACK_OPEN_VERIFY);
    CHECK(rc == WPACK_OK, "open: %s (%s)", wpack_error_name(rc), wpack_errmsg(ar));
    if (rc == WPACK_OK && want) {
        char *got = golden_describe(ar);
        CHECK(got != NULL, "a reader call failed while describing the archive");
        /* Line by line, so a failure says which entry, key or record moved. */
        const char *a = want, *b = got ? got : "";
        int line = 1, diffs = 0;
        while (*a || *b) {
            size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
            if ((la != lb || memcmp(a, b, la) != 0) && diffs++ < 10)
                CHECK(0, "v1_basic.expect line %d:\n    want: %.*s\n    got:  %.*s", line, (int)la,
                      a, (int)lb, b);
            a += la + (a[la] == '\n');
            b += lb + (b[lb] == '\n');
            line++;
        }
        CHECK(diffs == 0, "%d lines differ from v1_basic.expect", diffs);
        free(got);
    }
    wpack_close(ar);
    free(want);
}

static void test_basic_values(void)
{
    size_t n;
    uint8_t *p = golden_slurp(path_of("golden/v1_basic.wpack"), &n);
    CHECK(p != NULL, "v1_basic.wpack missing");
    if (!p)
        return;
    wpack_archive *ar;
    int rc = wpack_open_memory(&ar, p, n, 0);
    CHECK(rc == WPACK_OK, "open: %s (%s)", wpack_error_name(rc), wpack_errmsg(ar));
    if (rc) {
        wpack_close(ar);
        free(p);
        return;
    }
    wpack_info in;
    wpack_get_info(ar, &in);
    CHECK(in.format_major == 1 && in.format_minor == 0, "format %u.%u", in.format_major,
          in.format_minor);
    CHECK_EQ(in.alignment, GOLDEN_ALIGNMENT);
    CHECK_EQ(in.generation, 1);
    CHECK_EQ(in.data_offset, 128);
    CHECK_EQ(in.recovered, 0);
    CHECK_EQ(in.block_dtype_count, 1);
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify_all: %s", wpack_errmsg(ar));

    /* Every built-in dtype is present. */
    int seen[16] = {0};
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        if (t.dtype > 0 && t.dtype < 16)
            seen[t.dtype] = 1;
        CHECK(t.kind != WPACK_KIND_DATA || t.offset % GOLDEN_ALIGNMENT == 0, "'%s' at %llu",
              t.name, (unsigned long long)t.offset);
    }
    for (int d = 1; d <= 15; d++)
        CHECK(seen[d], "no tensor of dtype %s", wpack_dtype_name(d));

    wpack_tensor t;
    CHECK(wpack_find(ar, G_F32, &t) == WPACK_OK && t.rank == 2 && t.dims[0] == 2 &&
              t.dims[1] == 4 && t.nbytes == 32 && t.data,
          "dense.f32");
    if (t.data) {
        const uint8_t *d = t.data;
        CHECK(wpk_ld32(d) == 0x3f800000u && wpk_ld32(d + 12) == 0x40800000u &&
                  wpk_ld32(d + 16) == 0xbf800000u && wpk_ld32(d + 28) == 0xc0800000u,
              "dense.f32 values");
    }
    wpack_tensor a;
    CHECK(wpack_find(ar, G_ALIAS, &a) == WPACK_OK && a.kind == WPACK_KIND_ALIAS &&
              a.alias_target == t.index && a.data == t.data,
          "alias.tied");
    CHECK(wpack_find(ar, "p_dense_f32", &a) == WPACK_OK && a.index == t.index, "name map");
    CHECK(wpack_find(ar, "_param_constant0", &a) == WPACK_OK && strcmp(a.name, G_I64) == 0,
          "name map _param_constant0");
    wpack_tensor s;
    CHECK(wpack_find(ar, G_SPLAT, &s) == WPACK_OK && s.kind == WPACK_KIND_SPLAT && !s.data &&
              s.fill_size == 4 && s.nbytes == 1024,
          "splat");
    uint8_t tail[8] = {0};
    CHECK(wpack_read(ar, s.index, 1016, tail, 8) == WPACK_OK && wpk_ld32(tail) == 0x3f800000u &&
              wpk_ld32(tail + 4) == 0x3f800000u,
          "splat read");
    CHECK(wpack_find(ar, G_EMPTY, &s) == WPACK_OK && s.nbytes == 0 && s.nelems == 0, "empty");
    CHECK(wpack_find(ar, G_SCALAR, &s) == WPACK_OK && s.rank == 0 && s.nelems == 1, "scalar");
    CHECK(wpack_find(ar, "rank8.u8", &s) == WPACK_OK && s.rank == 8, "rank 8");
    CHECK(wpack_find(ar, G_Q4, &s) == WPACK_OK && s.dtype == WPACK_DTYPE_BLOCK_BASE &&
              s.nbytes == 72,
          "block dtype tensor");

    wpack_meta m, e;
    CHECK(wpack_meta_find(ar, "wpack.producer", &m) == WPACK_OK &&
              strcmp(m.str, GOLDEN_PRODUCER) == 0,
          "producer");
    CHECK(wpack_meta_find(ar, "train.steps", &m) == WPACK_OK && m.type == WPACK_META_I64 &&
              m.i64 == -1234567890123ll,
          "i64");
    CHECK(wpack_meta_find(ar, "train.lr", &m) == WPACK_OK && m.f64 == 0.00025, "f64");
    CHECK(wpack_meta_find(ar, "train.converged", &m) == WPACK_OK && m.boolean == 1, "bool");
    CHECK(wpack_meta_find(ar, "blob.raw", &m) == WPACK_OK && m.count == 4 &&
              memcmp(m.bytes, "\x00\x01\xfe\xff", 4) == 0,
          "bytes");
    CHECK(wpack_meta_find(ar, "array.str", &m) == WPACK_OK && m.count == 4 &&
              wpack_meta_elem(ar, &m, 2, &e) == WPACK_OK &&
              strcmp(e.str, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e") == 0,
          "string array");
    CHECK(wpack_meta_find(ar, "array.i64", &m) == WPACK_OK &&
              wpack_meta_elem(ar, &m, 3, &e) == WPACK_OK && e.i64 == INT64_MIN,
          "i64 array");

    wpack_stats st;
    CHECK(wpack_stats_find(ar, G_F32, WPACK_STATS_WEIGHT, &st) == WPACK_OK &&
              st.granularity == WPACK_GRAN_CHANNEL && st.channels == 2 && st.count == 8 &&
              wpack_stats_value(&st, WPACK_STAT_MIN, 1) == -4 && st.hist_bins == 4 &&
              st.percentile_count == 3,
          "per-channel weight stats");
    double lo, hi, q, v;
    uint64_t c;
    wpack_stats_bin(&st, 3, &lo, &hi, &c);
    CHECK(lo == 2 && hi == 4 && c == 3, "histogram bin 3: %g..%g %llu", lo, hi,
          (unsigned long long)c);
    wpack_stats_percentile(&st, 1, &q, &v);
    CHECK(q == 50 && v == 0, "percentile 1: %g %g", q, v);
    CHECK(wpack_stats_find(ar, G_F64, WPACK_STATS_WEIGHT, &st) == WPACK_OK && st.mean == 0.875 &&
              st.variance == 4.546875,
          "automatic weight stats of dense.f64");
    CHECK(wpack_stats_find(ar, G_F64, WPACK_STATS_ACTIVATION, &st) == WPACK_OK && st.count == 64,
          "activation stats under a weight key");
    CHECK(wpack_stats_find(ar, G_ACT, WPACK_STATS_ACTIVATION, &st) == WPACK_OK &&
              st.hist_bins == 2,
          "activation stats");
    wpack_close(ar);
    free(p);
}

/* The writer still produces the committed bytes (see the header comment). */
static void test_basic_regenerate(void)
{
    size_t n_old, n_new = 0;
    uint8_t *old = golden_slurp(path_of("golden/v1_basic.wpack"), &n_old);
    CHECK(old != NULL, "v1_basic.wpack missing");
    char tmp[] = "/tmp/wpack-golden-XXXXXX";
    if (!old || !mkdtemp(tmp)) {
        free(old);
        return;
    }
    char path[512], err[700];
    snprintf(path, sizeof path, "%s/v1_basic.wpack", tmp);
    int rc = golden_write(path, err, sizeof err);
    CHECK(rc == WPACK_OK, "golden_write: %s: %s", wpack_error_name(rc), err);
    uint8_t *now = rc == WPACK_OK ? golden_slurp(path, &n_new) : NULL;
    unlink(path);
    rmdir(tmp);
    if (now) {
        size_t k = 0;
        while (k < n_old && k < n_new && old[k] == now[k])
            k++;
        CHECK(n_old == n_new && k == n_old,
              "the writer's bytes differ from tests/golden/v1_basic.wpack at offset %zu "
              "(committed %zu bytes, now %zu): a format change must bump the format version; "
              "then regenerate with tests/tools/make_golden.c",
              k, n_old, n_new);
    }
    free(old);
    free(now);
}

/* ------------------------------------------------------- EXPECT lists */

typedef struct {
    char file[256];
    char code[64];
    int verify;
} expect_row;

/* Parse "file CODE [verify]" lines ('#' comments). Returns the row count, -1 if missing. */
static int read_expect(const char *path, expect_row *rows, int max)
{
    char *text = slurp_text(path);
    if (!text)
        return -1;
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == 0)
            continue;
        char flag[32] = "";
        rows[n].verify = 0;
        if (sscanf(line, "%255s %63s %31s", rows[n].file, rows[n].code, flag) >= 2) {
            rows[n].verify = strcmp(flag, "verify") == 0;
            n++;
        }
    }
    free(text);
    return n;
}

static int code_of(const char *name)
{
    for (int c = 0; c < 100; c++)
        if (strcmp(wpack_error_name(c), name) == 0)
            return c;
    return -1;
}

static int listed(const expect_row *rows, int n, const char *file)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].file, file) == 0)
            return 1;
    return 0;
}

/* Every row's file gives its code (as a file and as an exact-size buffer), and
 * every .wpack file in the directory has a row. */
static int check_listed_dir(const char *sub, const char *readme)
{
    static expect_row rows[512];
    char rel[512];
    snprintf(rel, sizeof rel, "%s/EXPECT", sub);
    int n = read_expect(path_of(rel), rows, 512);
    CHECK(n > 0, "%s: missing or empty", path_of(rel));
    char *doc = readme ? slurp_text(path_of(readme)) : NULL;
    CHECK(!readme || doc, "%s missing", readme ? path_of(readme) : "");
    for (int i = 0; i < n; i++) {
        int want = code_of(rows[i].code);
        CHECK(want >= 0, "%s: unknown code name %s", rows[i].file, rows[i].code);
        snprintf(rel, sizeof rel, "%s/%s", sub, rows[i].file);
        const char *path = path_of(rel);
        unsigned flags = rows[i].verify ? WPACK_OPEN_VERIFY : 0;
        wpack_archive *ar;
        int rc = wpack_open_file(&ar, path, flags);
        CHECK(rc == want, "%s: %s (%s), want %s", path, wpack_error_name(rc), wpack_errmsg(ar),
              rows[i].code);
        CHECK(rc == WPACK_OK || wpack_errmsg(ar)[0], "%s: %s with no message", path,
              wpack_error_name(rc));
        wpack_close(ar);
        size_t len;
        uint8_t *p = golden_slurp(path, &len);
        CHECK(p != NULL, "%s missing", path);
        if (p) {
            char msg[700];
            rc = open_copy(p, len, flags, msg, sizeof msg);
            CHECK(rc == want, "%s from memory: %s (%s), want %s", path, wpack_error_name(rc), msg,
                  rows[i].code);
            free(p);
        }
        if (doc) {
            char needle[300];
            snprintf(needle, sizeof needle, "`%s`", rows[i].file);
            CHECK(strstr(doc, needle) && strstr(doc, rows[i].code), "%s: not in %s", rows[i].file,
                  readme);
        }
    }
    free(doc);
    DIR *d = opendir(path_of(sub));
    CHECK(d != NULL, "%s: cannot list", path_of(sub));
    int files = 0;
    for (struct dirent *de = d ? readdir(d) : NULL; de; de = readdir(d)) {
        size_t l = strlen(de->d_name);
        if (l > 6 && strcmp(de->d_name + l - 6, ".wpack") == 0) {
            files++;
            CHECK(listed(rows, n, de->d_name), "%s/%s has no line in EXPECT", sub, de->d_name);
        }
    }
    if (d)
        closedir(d);
    return files;
}

static void test_golden_errors(void)
{
    int files = check_listed_dir("golden/errors", NULL);
    CHECK(files >= 5, "only %d golden error files", files);
}

static void test_hostile(void)
{
    int files = check_listed_dir("hostile", "hostile/README.md");
    CHECK(files >= 30, "only %d hostile files", files);
}

int main(int argc, char **argv)
{
    const char *env = getenv("WPACK_TESTS_DIR");
    if (argc > 1)
        dir = argv[1];
    else if (env && env[0])
        dir = env;
    RUN(test_basic_expect);
    RUN(test_basic_values);
    RUN(test_basic_regenerate);
    RUN(test_golden_errors);
    RUN(test_hostile);
    return tl_finish();
}
