/*
 * golden_tool.h - what the golden-file generators (make_golden.c,
 * make_golden11.c, make_golden12.c) share: stop on an I/O error, write a
 * file, check that a written file opens with the expected code, and write
 * an archive with its .expect beside it. Each generator sets golden_tool_name and counts
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

#endif
