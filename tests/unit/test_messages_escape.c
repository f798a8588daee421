/*
 * test_messages_escape.c - no library message carries a raw control
 * character: paths a caller gives and names an input holds (archive
 * entries, tar / zip members, safetensors keys, MLIR file names, a dense
 * prefix, a URL) may hold ESC, newline or CR, and every message quoting
 * them - wpack_errmsg, the writer's and updater's, the err buffers of
 * libwpack-import, warnings, MLIR diagnostics - shows them escaped
 * (wpack_text_escape), still recognisable.
 */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"
#include "wpack_dense.h"
#include "wpack_import.h"
#include "wpack_mlir.h"
#include "wpack_remote.h"

static char dir[256];
#define BAD "e\x1b[31m\n\rX"            /* a name holding ESC [31m, LF and CR */
#define SHOWN "e\\x1b[31m\\x0a\\x0dX"   /* how messages show it */

/* No C0 control, DEL or C1 (UTF-8 C2 80..C2 9F) anywhere in s. */
static int clean(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
            return 0;
    return 1;
}

/* The message is clean and shows the name escaped. */
static int escaped(const char *msg)
{
    return clean(msg) && strstr(msg, SHOWN) != NULL;
}

static void path_in_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static void write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, p, n) == (ssize_t)n, "write %s", path);
    if (fd >= 0)
        close(fd);
}

/* A tar (zip 0) or a stored zip (zip 1) of one member. */
static void write_bundle(const char *path, int zip, const char *member, const void *p, size_t n)
{
    struct archive *a = archive_write_new();
    if (zip) {
        archive_write_set_format_zip(a);
        archive_write_set_options(a, "zip:compression=store");
    } else {
        archive_write_set_format_ustar(a);
    }
    CHECK(archive_write_open_filename(a, path) == ARCHIVE_OK, "%s", archive_error_string(a));
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, member);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)n);
    CHECK(archive_write_header(a, e) == ARCHIVE_OK, "%s", archive_error_string(a));
    CHECK(archive_write_data(a, p, n) == (la_ssize_t)n, "%s", archive_error_string(a));
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
}

static int write_small_archive(const char *path)
{
    wpack_writer *w;
    float f[2] = {1, 2};
    int rc = wpack_writer_open(&w, path, NULL);
    if (!rc)
        rc = wpack_writer_add_tensor(w, "w", WPACK_DTYPE_F32, 1, (uint64_t[]){2}, f, sizeof f);
    if (!rc)
        return wpack_writer_finish(w, NULL, 0);
    wpack_writer_abort(w);
    return rc;
}

/* The rule itself, and what the CLI and the libraries share of it. */
static void test_text_escape_rule(void)
{
    static const struct {
        const char *in, *out;
    } rows[] = {
        {BAD, SHOWN},
        {"tab\there\x7f", "tab\\x09here\\x7f"},
        {"caf\xc3\xa9 \xe6\x97\xa5", "caf\xc3\xa9 \xe6\x97\xa5"}, /* UTF-8 kept */
        {"c1 \xc2\x9b" "31m", "c1 \\u009b31m"},                     /* CSI */
        {"bidi \xe2\x80\xae", "bidi \\u202e"},                      /* RLO */
        {"bad \xff \xc3", "bad \\xff \\xc3"},                       /* not UTF-8 */
        {"over \xc0\xaf", "over \\xc0\\xaf"},                       /* overlong '/' */
        {"back\\slash \\x1b", "back\\slash \\x1b"},                 /* kept as it is */
    };
    char out[128], again[128];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        size_t n = wpack_text_escape(out, sizeof out, rows[i].in, strlen(rows[i].in));
        CHECK(strcmp(out, rows[i].out) == 0 && n == strlen(out), "row %zu: %s", i, out);
        wpack_text_escape(again, sizeof again, out, strlen(out));
        CHECK(strcmp(again, out) == 0, "row %zu escaped twice: %s", i, again);
    }
    /* cut before an escape or a code point, never inside */
    CHECK(wpack_text_escape(out, 6, "\x1b\x1b", 2) == 4 && strcmp(out, "\\x1b") == 0, "%s", out);
    CHECK(wpack_text_escape(out, 5, "ab\xc3\xa9", 4) == 4 && strcmp(out, "ab\xc3\xa9") == 0, "%s",
          out);
    CHECK(wpack_text_escape(out, 4, "ab\xc3\xa9", 4) == 2 && strcmp(out, "ab") == 0, "%s", out);
    CHECK(wpack_text_escape(out, 3, "a\nb", 3) == 1 && strcmp(out, "a") == 0, "%s", out);
    strcpy(out, "keep");
    CHECK(wpack_text_escape(out, 0, "x", 1) == 0 && strcmp(out, "keep") == 0, "len 0: nothing");
    /* 4 x n + 1 bytes always suffice */
    char worst[4 * 3 + 1];
    CHECK(wpack_text_escape(worst, sizeof worst, "\x01\xff\x7f", 3) == 12, "%s", worst);
}

/* wpack_errmsg names the file: a missing one, a corrupt real one. */
static void test_reader_messages(void)
{
    char path[512], copy[1024];
    wpack_archive *ar;
    path_in_dir(path, sizeof path, "missing" BAD ".wpack");
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_E_IO, "missing");
    CHECK(escaped(wpack_errmsg(ar)), "%s", wpack_errmsg(ar));
    CHECK(wpack_errmsg_copy(ar, copy, sizeof copy) == WPACK_E_IO && escaped(copy), "%s", copy);
    wpack_close(ar);

    path_in_dir(path, sizeof path, "corrupt" BAD ".wpack");
    char junk[300];
    memset(junk, 'j', sizeof junk);
    write_file(path, junk, sizeof junk);
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_E_BAD_MAGIC, "corrupt");
    CHECK(escaped(wpack_errmsg(ar)) && strstr(wpack_errmsg(ar), "corrupt"), "%s", wpack_errmsg(ar));
    wpack_close(ar);

    /* a copy too small for the message is cut before a character, never
     * inside one (the caller gets valid UTF-8) */
    path_in_dir(path, sizeof path, "caf\xc3\xa9" BAD ".wpack");
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_E_IO, "missing");
    const char *m = wpack_errmsg(ar), *at = strstr(m, "\xc3\xa9");
    CHECK(at != NULL, "%s", m);
    if (at) {
        size_t cut = (size_t)(at - m) + 2; /* room for the bytes before it and a half */
        CHECK(wpack_errmsg_copy(ar, copy, cut) == WPACK_E_IO && strlen(copy) == cut - 2 &&
                  strncmp(copy, m, cut - 2) == 0,
              "cut: %s", copy);
    }
    wpack_close(ar);
}

/* The writer's and the updater's messages. */
static void test_writer_update_messages(void)
{
    char path[512], err[1024];
    path_in_dir(path, sizeof path, "nodir" BAD "/out.wpack");
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) != WPACK_OK, "no such directory");
    CHECK(escaped(wpack_writer_errmsg(w)), "%s", wpack_writer_errmsg(w));
    wpack_writer_abort(w);

    path_in_dir(path, sizeof path, "missing" BAD ".wpack");
    wpack_update *u = NULL;
    CHECK(wpack_update_begin(&u, path, 0, err, sizeof err) != WPACK_OK, "update of a missing file");
    CHECK(escaped(err), "%s", err);
    if (u)
        CHECK(escaped(wpack_update_errmsg(u)), "%s", wpack_update_errmsg(u));
    wpack_update_abort(u);
    double v = 1;
    wpack_stats_in st = {.key = "k", .kind = WPACK_STATS_ACTIVATION, .channels = 1, .count = 1,
                         .min = &v, .max = &v, .absmax = &v, .mean = &v};
    CHECK(wpack_update_add_stats(path, &st, 1, err, sizeof err) != WPACK_OK, "add_stats");
    CHECK(escaped(err), "%s", err);
}

static void warned(void *user, const char *message)
{
    char *seen = user;
    if (!*seen)
        snprintf(seen, 1024, "%s", message);
}

/* libwpack-import: detect, import (a missing path; tar, zip and
 * safetensors inputs whose members and keys hold the name), the
 * importer's message, a directory's warning, export. */
static void test_import_messages(void)
{
    char path[512], err[1024], seen[1024] = "";
    path_in_dir(path, sizeof path, "missing" BAD ".npy");
    CHECK(wpack_import_detect(path, err, sizeof err) == WPACK_INPUT_UNKNOWN && escaped(err), "%s",
          err);

    char out[512];
    path_in_dir(out, sizeof out, "out.wpack");
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, out, NULL) == WPACK_OK, "writer");
    wpack_import_options o;
    wpack_import_options_init(&o);
    o.err = err;
    o.err_size = sizeof err;
    CHECK(wpack_import_file(w, path, &o) != WPACK_OK && escaped(err), "missing: %s", err);

    static const char junk[] = "not an npy file at all";
    path_in_dir(path, sizeof path, "m.tar");
    write_bundle(path, 0, "w" BAD ".npy", junk, sizeof junk);
    CHECK(wpack_import_file(w, path, &o) == WPACK_E_INPUT && escaped(err), "tar member: %s", err);
    path_in_dir(path, sizeof path, "z" BAD ".npz");
    write_bundle(path, 1, "a" BAD ".npy", junk, sizeof junk);
    CHECK(wpack_import_file(w, path, &o) == WPACK_E_INPUT && escaped(err) && strstr(err, "z" SHOWN),
          "zip member: %s", err);

    /* safetensors: a key holding the name (JSON escapes), 4 bytes for 2 floats */
    static const char hdr[] = "{\"k\\u001b[31m\\n\\rX\":{\"dtype\":\"F32\",\"shape\":[2],"
                              "\"data_offsets\":[0,4]}}";
    uint8_t st[8 + sizeof hdr - 1 + 4] = {0};
    st[0] = (uint8_t)(sizeof hdr - 1);
    memcpy(st + 8, hdr, sizeof hdr - 1);
    path_in_dir(path, sizeof path, "s" BAD ".safetensors");
    write_file(path, st, sizeof st);
    CHECK(wpack_import_file(w, path, &o) == WPACK_E_SIZE && escaped(err) &&
              strstr(err, "'k\\x1b[31m"),
          "safetensors key: %s", err);

    wpack_importer *imp;
    CHECK(wpack_import_open(&imp, w) == WPACK_OK, "importer");
    path_in_dir(path, sizeof path, "missing" BAD ".npy");
    CHECK(wpack_import_add(imp, path, NULL) != WPACK_OK, "importer add");
    CHECK(escaped(wpack_import_errmsg(imp)), "%s", wpack_import_errmsg(imp));
    wpack_import_close(imp);

    path_in_dir(path, sizeof path, "d");
    mkdir(path, 0755);
    path_in_dir(path, sizeof path, "d/evil" BAD ".txt");
    write_file(path, "hi", 2);
    path_in_dir(path, sizeof path, "d");
    o.warn = warned;
    o.warn_user = seen;
    CHECK(wpack_import_file(w, path, &o) == WPACK_OK, "directory: %s", err);
    CHECK(escaped(seen) && strstr(seen, "skipping"), "warning: %s", seen);
    wpack_writer_abort(w);

    path_in_dir(path, sizeof path, "a.wpack");
    CHECK(write_small_archive(path) == WPACK_OK, "archive");
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "open");
    wpack_export_options eo;
    wpack_export_options_init(&eo);
    eo.err = err;
    eo.err_size = sizeof err;
    path_in_dir(path, sizeof path, "nodir" BAD "/out.npz");
    CHECK(wpack_export_file(ar, path, WPACK_EXPORT_NPZ, &eo) != WPACK_OK && escaped(err),
          "export: %s", err);
    wpack_close(ar);
}

static void diag_keep(void *user, int severity, const char *message)
{
    char *seen = user;
    if (severity == WPACK_DIAG_ERROR && !*seen)
        snprintf(seen, 1024, "%s", message);
}

static int discard(void *user, const void *data, size_t n)
{
    (void)user, (void)data, (void)n;
    return 0;
}

/* libwpack-mlir: a diagnostic names the MLIR file; libwpack-dense: a
 * binding error names the prefix; libwpack-remote: an open names the URL. */
static void test_mlir_dense_remote_messages(void)
{
    char path[512], seen[1024] = "", err[1024];
    path_in_dir(path, sizeof path, "a.wpack");
    CHECK(write_small_archive(path) == WPACK_OK, "archive");
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "open");

    static const char mlir[] = "module {\n  ml_program.global private @nope(#ml_program.extern : "
                               "tensor<2xf32>) : tensor<2xf32>\n}\n";
    wpack_resolve_options ro;
    wpack_resolve_options_init(&ro);
    ro.source_name = "m" BAD ".mlir";
    ro.diag = diag_keep;
    ro.diag_user = seen;
    CHECK(wpack_resolve_buffer(ar, mlir, sizeof mlir - 1, &ro, discard, NULL, NULL) ==
              WPACK_E_NOT_FOUND,
          "resolve");
    CHECK(escaped(seen) && strstr(seen, "@nope"), "diagnostic: %s", seen);

    wpack_linear lin;
    CHECK(wpack_linear_bind(ar, "p" BAD, &lin, err, sizeof err) == WPACK_E_NOT_FOUND &&
              escaped(err),
          "dense: %s", err);
    wpack_close(ar);

    wpack_archive *r;
    CHECK(wpack_open_url(&r, "http://127.0.0.1:1/" BAD ".wpack", NULL) != WPACK_OK, "remote");
    CHECK(escaped(wpack_errmsg(r)), "remote: %s", wpack_errmsg(r));
    wpack_close(r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/wpack-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_text_escape_rule);
    RUN(test_reader_messages);
    RUN(test_writer_update_messages);
    RUN(test_import_messages);
    RUN(test_mlir_dense_remote_messages);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", dir);
    return tl_finish();
}
