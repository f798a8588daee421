/*
 * test_export_bound.c - wpack_export_size_bound(ar, format) is a true upper
 * bound of what wpack_export_file writes: every archive under the tests
 * directory that opens, and archives made here to stress each exporter's
 * overhead (names full of '/', '%', '"' and non-ASCII, rank-8 shapes,
 * metadata of every type, activation stats with long keys), is exported to
 * every format whose bound is at most 64 MiB, and each output is at most
 * its bound. And the bound follows the format: a 16 GiB splat costs nothing
 * in an irpa (it stays a splat entry), its 16 GiB everywhere else.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack_import.h"

static char scratch[256];
static const char *tests_dir = "tests";
static int exported, measured_archives, verbose;

/* Export ar in every format; each output at most its bound. */
static void check_all_formats(const wpack_archive *ar, const char *what)
{
    char out[512];
    snprintf(out, sizeof out, "%s/out", scratch);
    int any = 0;
    for (int f = WPACK_EXPORT_SAFETENSORS; f <= WPACK_EXPORT_ORT_CALIB_JSON; f++) {
        uint64_t bound = wpack_export_size_bound(ar, f);
        CHECK(bound <= wpack_export_size_bound(ar, 0), "%s: format %d above the any-format bound",
              what, f);
        if (bound > (64u << 20))
            continue;
        wpack_export_options o;
        wpack_export_options_init(&o);
        char err[1024] = "";
        o.flags = WPACK_EXPORT_NO_SYNC;
        o.err = err;
        o.err_size = sizeof err;
        unlink(out);
        if (wpack_export_file(ar, out, f, &o) != WPACK_OK) {
            if (verbose)
                printf("  %s: format %d: %.200s\n", what, f, err);
            continue; /* e.g. a block dtype to npz: nothing written */
        }
        struct stat st;
        CHECK(stat(out, &st) == 0, "%s: format %d: no output", what, f);
        CHECK((uint64_t)st.st_size <= bound, "%s: format %d wrote %lld bytes, bound %llu", what,
              f, (long long)st.st_size, (unsigned long long)bound);
        exported++;
        any = 1;
    }
    measured_archives += any;
    unlink(out);
}

static void walk(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        size_t n = strlen(e->d_name);
        if (S_ISDIR(st.st_mode)) {
            walk(p);
        } else if (S_ISREG(st.st_mode) && n > 6 && strcmp(e->d_name + n - 6, ".wpack") == 0) {
            wpack_archive *ar = NULL;
            if (wpack_open_file(&ar, p, WPACK_OPEN_VERIFY_READS) == WPACK_OK)
                check_all_formats(ar, p);
            wpack_close(ar);
        }
    }
    closedir(d);
}

static void test_every_test_archive(void)
{
    exported = measured_archives = 0;
    walk(tests_dir);
    CHECK(measured_archives >= 5, "only %d archives of %s exported", measured_archives, tests_dir);
    printf("  %d exports of %d archives under %s\n", exported, measured_archives, tests_dir);
}

static int finish(wpack_writer *w, int rc)
{
    char err[512] = "";
    if (rc) {
        printf("  writer: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return rc;
    }
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc)
        printf("  finish: %s\n", err);
    return rc;
}

static wpack_writer *open_writer(const char *path)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.no_sync = 1;
    wpack_writer *w;
    return wpack_writer_open(&w, path, &opt) == WPACK_OK ? w : NULL;
}

/* A name of n bytes repeating unit (whose length divides n), then suffix. */
static char *name_of(const char *unit, size_t n, const char *suffix)
{
    size_t u = strlen(unit), s = strlen(suffix);
    char *p = malloc(n + s + 1);
    for (size_t i = 0; p && i < n; i += u)
        memcpy(p + i, unit, u);
    if (p)
        memcpy(p + n, suffix, s + 1);
    return p;
}

/* Exporters' worst cases, one archive each so that no other slack hides
 * them. STRESS_NAMES: names that escape to 3 bytes a byte (tar, npz: twice)
 * or 2 (JSON), up to WPACK_MAX_NAME, many small rank-8 tensors and splats
 * (STRESS_SHORT: names GGUF takes, at most 60 bytes). STRESS_META: one
 * tensor, metadata of every type (strings of quotes, backslashes and
 * control bytes, the longest numbers in arrays). STRESS_STATS: one tensor
 * and activation stats with keys of quotes and backslashes. STRESS_EMPTY:
 * nothing. */
enum { STRESS_NAMES, STRESS_SHORT, STRESS_META, STRESS_STATS, STRESS_EMPTY };

static int make_stress(const char *path, int what)
{
    wpack_writer *w = open_writer(path);
    if (!w)
        return 1;
    int rc = 0;
    const char *units[] = {"/", "%", "\"", "\\", "\xc3\xa9", "a"};
    uint64_t d8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float one = 1.0f;
    for (size_t u = 0; u < sizeof units / sizeof *units && what <= STRESS_SHORT; u++) {
        char sfx[16];
        for (int k = 0; k < 24 && !rc; k++) {
            snprintf(sfx, sizeof sfx, ".%02zu%02d", u, k);
            size_t n = what == STRESS_SHORT ? 48 : k < 6 ? WPACK_MAX_NAME - 16 : (size_t)k * 2;
            unsigned rank = what == STRESS_SHORT ? 4 : 8; /* GGUF: up to 4 */
            char *nm = name_of(units[u], n, sfx);
            rc |= !nm || wpack_writer_add_tensor(w, nm, WPACK_DTYPE_F32, rank, d8, &one, 4);
            if (nm)
                nm[strlen(nm) - 5] = 's';
            rc |= !nm || wpack_writer_add_splat(w, nm, WPACK_DTYPE_F32, rank, d8, &one, 4);
            free(nm);
        }
    }
    if (what == STRESS_NAMES || what == STRESS_SHORT || what == STRESS_EMPTY)
        return finish(w, rc);
    rc |= wpack_writer_add_tensor(w, "t", WPACK_DTYPE_F32, 0, NULL, &one, 4);
    if (what == STRESS_STATS)
        goto stats;
    enum { N = 4096 };
    static int64_t big[N];
    static double dbl[N];
    const char *strs[64];
    char *quotes = name_of("\"\\", 4096, ""), *ctl = name_of("\x01\x1f\x7f", 3000, "");
    for (int i = 0; i < N; i++)
        big[i] = INT64_MIN + i, dbl[i] = -1.2345678901234567e-300 * (i + 1);
    for (int i = 0; i < 64; i++)
        strs[i] = i & 1 ? quotes : ctl;
    rc |= !quotes || !ctl;
    rc |= rc || wpack_writer_set_array(w, "ints", WPACK_META_I64, N, big);
    rc |= rc || wpack_writer_set_array(w, "floats", WPACK_META_F64, N, dbl);
    rc |= rc || wpack_writer_set_array(w, "strings", WPACK_META_STRING, 64, strs);
    rc |= rc || wpack_writer_set_array(w, "bools", WPACK_META_BOOL, N, (int[N]){0});
    rc |= rc || wpack_writer_set_string(w, "quotes", quotes);
    rc |= rc || wpack_writer_set_string(w, "control", ctl);
    rc |= rc || wpack_writer_set_bytes(w, "bytes", quotes, 4096);
    for (int k = 0; k < 200 && !rc; k++) {
        char key[32];
        snprintf(key, sizeof key, "f%03d", k);
        rc |= wpack_writer_set_f64(w, key, -1.2345678901234567e-300);
        key[0] = 'i';
        rc |= wpack_writer_set_i64(w, key, INT64_MIN);
        key[0] = 'b';
        rc |= wpack_writer_set_bool(w, key, 0);
    }
    free(quotes);
    free(ctl);
    return finish(w, rc);
stats:;
    double mn = -1.2345678901234567e-300, mx = 1.2345678901234567e-300, am = mx, me = 0, va = 0;
    for (int k = 0; k < 200 && !rc; k++) {
        char sfx[16];
        snprintf(sfx, sizeof sfx, "%03d", k);
        char *key = name_of(k & 1 ? "\"" : "\\", k == 0 ? WPACK_MAX_NAME - 16 : (size_t)k * 8, sfx);
        wpack_stats_in s = {.key = key, .kind = WPACK_STATS_ACTIVATION, .channels = 1,
                            .count = 10, .min = &mn, .max = &mx, .absmax = &am, .mean = &me,
                            .variance = &va};
        rc |= !key || wpack_writer_add_stats(w, &s);
        free(key);
    }
    return finish(w, rc);
}

/* A 16 GiB splat, its alias, a block-dtype splat (34-byte element: written
 * out in an irpa) and a little data. */
static int make_splats(const char *path)
{
    wpack_writer *w = open_writer(path);
    if (!w)
        return 1;
    float one = 1.0f, v[4] = {1, 2, 3, 4};
    uint8_t block[34] = {1, 2, 3};
    int q = 0, rc = 0;
    rc |= wpack_writer_add_splat(w, "big", WPACK_DTYPE_F32, 1, (uint64_t[]){1ull << 32}, &one, 4);
    rc |= wpack_writer_add_alias(w, "big.tied", "big");
    rc |= wpack_writer_add_tensor(w, "small", WPACK_DTYPE_F32, 1, (uint64_t[]){4}, v, sizeof v);
    rc |= wpack_writer_add_alias(w, "small.tied", "small");
    rc |= wpack_writer_add_block_dtype(w, "q8_test", 32, 34, NULL, 0, &q);
    rc |= wpack_writer_add_splat(w, "qsplat", q, 2, (uint64_t[]){4, 64}, block, sizeof block);
    return finish(w, rc);
}

static void stress(int what, int formats)
{
    char p[512];
    snprintf(p, sizeof p, "%s/stress%d.wpack", scratch, what);
    CHECK(make_stress(p, what) == 0, "make %s", p);
    wpack_archive *ar = NULL;
    CHECK(wpack_open_file(&ar, p, 0) == WPACK_OK, "open %s", p);
    exported = 0;
    verbose = 1;
    if (ar)
        check_all_formats(ar, p);
    verbose = 0;
    CHECK(exported == formats, "%d of %d formats exported", exported, formats);
    wpack_close(ar);
}

static void test_stress_names(void)
{
    stress(STRESS_NAMES, 4); /* GGUF takes no such names; no stats for the calib formats */
}

static void test_stress_short_names(void)
{
    stress(STRESS_SHORT, 5);
}

static void test_stress_meta(void)
{
    stress(STRESS_META, 5);
}

static void test_stress_stats(void)
{
    stress(STRESS_STATS, 7);
}

static void test_stress_empty(void)
{
    stress(STRESS_EMPTY, 5);
}

static void test_bound_follows_format(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/splats.wpack", scratch);
    CHECK(make_splats(p) == 0, "make %s", p);
    wpack_archive *ar = NULL;
    CHECK(wpack_open_file(&ar, p, 0) == WPACK_OK, "open %s", p);
    if (!ar)
        return;
    uint64_t irpa = wpack_export_size_bound(ar, WPACK_EXPORT_IRPA);
    CHECK(irpa < (64u << 10), "irpa bound %llu: the splat counted expanded",
          (unsigned long long)irpa);
    CHECK(irpa >= 4 * 64 * 34 / 32, "irpa bound %llu: the block splat is written out",
          (unsigned long long)irpa);
    int formats[] = {WPACK_EXPORT_SAFETENSORS, WPACK_EXPORT_NPZ, WPACK_EXPORT_TAR,
                     WPACK_EXPORT_GGUF, 0, -1, 99};
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        CHECK(wpack_export_size_bound(ar, formats[i]) >= (32ull << 30),
              "format %d: bound %llu below the splat and its alias written out", formats[i],
              (unsigned long long)wpack_export_size_bound(ar, formats[i]));
    exported = 0;
    check_all_formats(ar, "splats"); /* only the irpa is small enough */
    CHECK(exported == 1, "%d exports", exported);
    wpack_close(ar);
}

int main(int argc, char **argv)
{
    const char *env = getenv("WPACK_TESTS_DIR");
    if (argc > 1)
        tests_dir = argv[1];
    else if (env && env[0])
        tests_dir = env;
    snprintf(scratch, sizeof scratch, "%s/wpack-bound-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(scratch)) {
        printf("FAIL mkdtemp\n# passed 0 failed 1\n");
        return 1;
    }
    RUN(test_bound_follows_format);
    RUN(test_stress_names);
    RUN(test_stress_short_names);
    RUN(test_stress_meta);
    RUN(test_stress_stats);
    RUN(test_stress_empty);
    RUN(test_every_test_archive);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        printf("  could not remove %s\n", scratch);
    return tl_finish();
}
