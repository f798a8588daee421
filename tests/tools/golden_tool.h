/*
 * golden_tool.h - what the golden-file generators (make_golden.c,
 * make_golden11.c, make_golden12.c) share: stop on an I/O error, write a
 * file, find an entry record to break, write a broken copy, check that a
 * written file opens with the expected code, write an archive with its
 * .expect beside it, and end main. Each generator sets golden_tool_name and counts
 * mismatches in golden_tool_failures (all files are written anyway).
 */
#ifndef WPACK_TESTS_GOLDEN_TOOL_H
#define WPACK_TESTS_GOLDEN_TOOL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/golden_content.h"

static const char *golden_tool_name = "make_golden";
static int golden_tool_failures;

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", golden_tool_name, what, strerror(errno));
    exit(1);
}

static void mkdir_p(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die(path);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0)
        die(path);
}

/* The record of entry name in an archive image; stops if there is none
 * (a fault aimed at a record the base does not have). */
static uint8_t *entry(gimg *m, const char *name)
{
    uint8_t *r = gimg_entry(m, name);
    if (!r) {
        fprintf(stderr, "%s: no entry '%s' in the base\n", golden_tool_name, name);
        exit(1);
    }
    return r;
}

/* Write path: a copy of the len bytes at base, broken by fault. The copy
 * has 4096 zero bytes of room to grow into (m->len bytes are written); a
 * fault may also replace m->p by a longer malloc'd image. */
static void write_fault(const char *path, const uint8_t *base, size_t len, void (*fault)(gimg *m))
{
    gimg m = {malloc(len + 4096), len};
    if (!m.p)
        die("malloc");
    memcpy(m.p, base, len);
    memset(m.p + len, 0, 4096);
    fault(&m);
    write_file(path, m.p, m.len);
    free(m.p);
}

/* Open path and check its code; report a mismatch. */
static void check_file(const char *path, int want, unsigned flags)
{
    wpack_archive *ar;
    int rc = wpack_open_file(&ar, path, flags);
    if (rc != want) {
        fprintf(stderr, "%s: %s: %s (%s), want %s\n", golden_tool_name, path,
                wpack_error_name(rc), wpack_errmsg(ar), wpack_error_name(want));
        golden_tool_failures++;
    }
    wpack_close(ar);
}

/* Check the fault file at path (named file in its directory) and add its
 * EXPECT row "file CODE [verify] # rule" (the v11/v12 form; inline: not
 * every generator uses it). */
static inline void expect_row(gstr *expect, const char *path, const char *file, int code, int verify,
                       const char *rule)
{
    check_file(path, code, verify ? WPACK_OPEN_VERIFY : 0);
    gstr_add(expect, "%s %s%s # %s\n", file, wpack_error_name(code), verify ? " verify" : "", rule);
}

/* Write dir/EXPECT from expect, and free it. */
static void write_expect(const char *dir, gstr *expect)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/EXPECT", dir);
    write_file(path, expect->p, expect->len);
    free(expect->p);
    expect->p = NULL;
}

/* Write DIR/BASE.wpack with writer fn, check that it opens and verifies,
 * then write golden_describe() of it to DIR/BASE.expect. Stops on failure. */
static void write_with_expect(const char *dir, const char *base,
                              int (*fn)(const char *path, char *err, size_t errlen))
{
    char path[700], err[700];
    snprintf(path, sizeof path, "%s/%s.wpack", dir, base);
    int rc = fn(path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: %s: %s: %s\n", golden_tool_name, path, wpack_error_name(rc), err);
        exit(1);
    }
    wpack_archive *ar;
    rc = wpack_open_file(&ar, path, WPACK_OPEN_VERIFY);
    if (rc) {
        fprintf(stderr, "%s: %s does not open: %s\n", golden_tool_name, path, wpack_errmsg(ar));
        exit(1);
    }
    char *text = golden_describe(ar);
    wpack_close(ar);
    if (!text) {
        fprintf(stderr, "%s: describing %s failed\n", golden_tool_name, path);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s.expect", dir, base);
    write_file(path, text, strlen(text));
    free(text);
}

/* main's end: 1 if a file did not give its expected code (all are written
 * anyway: an expectation follows the spec, and test_golden keeps failing
 * until the library meets it), else 0 after saying what was written. */
static int golden_tool_exit(const char *wrote)
{
    if (golden_tool_failures) {
        fprintf(stderr, "%s: %d files do not give their expected code "
                        "(a library bug, or a wrong fault); all files were written\n",
                golden_tool_name, golden_tool_failures);
        return 1;
    }
    printf("%s: wrote %s\n", golden_tool_name, wrote);
    return 0;
}

#endif
