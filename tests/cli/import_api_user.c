/*
 * import_api_user.c - a program that knows wpack only through its installed
 * public headers (wpack.h, wpack_import.h) and pkg-config wpack-import:
 * tests/cli/test_import_api.sh builds it against `make install` and
 * compares what it writes with what `wpack create` / `wpack export` write.
 *
 *   import_api_user create OUT [-1] [-p PREFIX] [-k KEY] [-c bf16|f16]
 *                          [-O GLOB]... [-s STATS] [-m OTHER=ENTRY]... INPUT...
 *       -p/-k apply to the inputs after them (as create's --prefix/--key);
 *       -1: one wpack_import_file call per input instead of an importer.
 *       Failure: the message on stderr, exit status = the wpack_error code.
 *   import_api_user export ARCHIVE safetensors|npz|tar OUT
 *   import_api_user detect PATH...     one "PATH KIND" line each
 *   import_api_user list PATH          one "NAME KIND BYTES" line per item
 *   import_api_user defaults           the option defaults and argument checks
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wpack.h>
#include <wpack_import.h>

static void warn(void *user, const char *message)
{
    (void)user;
    fprintf(stderr, "warning: %s\n", message);
}

static int create(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *out = argv[2];
    static char err[1024];
    static const char *only[64], *other[64], *entry[64];
    size_t nonly = 0, nmap = 0;
    int per_file = 0, cast = 0;
    const char *prefix = NULL, *key = NULL, *stats = NULL;
    /* first pass: options that hold for every input */
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "-1"))
            per_file = 1;
        else if (!strcmp(argv[i], "-c") && i + 1 < argc)
            cast = !strcmp(argv[++i], "bf16") ? WPACK_DTYPE_BF16 : WPACK_DTYPE_F16;
        else if (!strcmp(argv[i], "-O") && i + 1 < argc && nonly < 64)
            only[nonly++] = argv[++i];
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            stats = argv[++i];
        else if (!strcmp(argv[i], "-m") && i + 1 < argc && nmap < 64) {
            char *eq = strchr(argv[++i], '=');
            if (!eq)
                return 2;
            *eq = 0;
            other[nmap] = argv[i];
            entry[nmap++] = eq + 1;
        } else if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "-k")) && i + 1 < argc)
            i++;
    }
    wpack_writer *w;
    if (wpack_writer_open(&w, out, NULL) != WPACK_OK) {
        fprintf(stderr, "%s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return 1;
    }
    wpack_importer *imp = NULL;
    if (!per_file && wpack_import_open(&imp, w) != WPACK_OK)
        return 1;
    int rc = WPACK_OK;
    for (int i = 3; i < argc && !rc; i++) {
        if (!strcmp(argv[i], "-p")) {
            prefix = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "-k")) {
            key = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "-O") || !strcmp(argv[i], "-s") ||
            !strcmp(argv[i], "-m")) {
            i++;
            continue;
        }
        if (!strcmp(argv[i], "-1"))
            continue;
        wpack_import_options o;
        wpack_import_options_init(&o);
        o.prefix = prefix;
        o.key = key;
        o.cast = cast;
        o.only = only;
        o.only_count = nonly;
        o.warn = warn;
        o.err = err;
        o.err_size = sizeof err;
        rc = per_file ? wpack_import_file(w, argv[i], &o) : wpack_import_add(imp, argv[i], &o);
        if (rc && imp && strcmp(wpack_import_errmsg(imp), err) != 0) {
            fprintf(stderr, "errmsg differs from the err buffer: '%s' / '%s'\n",
                    wpack_import_errmsg(imp), err);
            rc = WPACK_E_STATE;
        }
    }
    if (!rc && (stats || nmap)) {
        /* after every input, as create does: path NULL */
        wpack_import_options o;
        wpack_import_options_init(&o);
        o.stats_file = stats;
        o.name_map_other = other;
        o.name_map_entry = entry;
        o.name_map_count = nmap;
        o.err = err;
        o.err_size = sizeof err;
        rc = per_file ? wpack_import_file(w, NULL, &o) : wpack_import_add(imp, NULL, &o);
    }
    wpack_import_close(imp);
    if (rc) {
        fprintf(stderr, "%s [%s]\n", err, wpack_error_name(rc));
        wpack_writer_abort(w);
        return rc;
    }
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s [%s]\n", err, wpack_error_name(rc));
    return rc;
}

static void progress(void *user, const wpack_tensor *t)
{
    (void)t;
    ++*(int *)user;
}

static int export(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    wpack_archive *ar;
    if (wpack_open_file(&ar, argv[2], 0) != WPACK_OK) {
        fprintf(stderr, "%s\n", wpack_errmsg(ar));
        wpack_close(ar);
        return 1;
    }
    char err[1024];
    int done = 0;
    wpack_export_options o;
    wpack_export_options_init(&o);
    o.progress = progress;
    o.progress_user = &done;
    o.err = err;
    o.err_size = sizeof err;
    int rc = wpack_export_file(ar, argv[4], wpack_export_format_from_name(argv[3]), &o);
    if (rc)
        fprintf(stderr, "%s [%s]\n", err, wpack_error_name(rc));
    else if ((uint64_t)done != wpack_count(ar))
        fprintf(stderr, "progress called %d times for %llu tensors\n", done,
                (unsigned long long)wpack_count(ar)), rc = 1;
    else if (wpack_export_size_bound(ar, wpack_export_format_from_name(argv[3])) < 8192)
        fprintf(stderr, "size bound below its floor\n"), rc = 1;
    wpack_close(ar);
    return rc;
}

static int print_item(void *user, const wpack_import_item *it)
{
    (void)user;
    printf("%s %s %llu\n", it->name ? it->name : it->path, wpack_import_kind_name(it->kind),
           (unsigned long long)it->bytes);
    return WPACK_OK;
}

static int list(int argc, char **argv)
{
    char err[1024];
    wpack_import_options o;
    wpack_import_options_init(&o);
    o.warn = warn;
    o.err = err;
    o.err_size = sizeof err;
    int rc = argc == 3 ? wpack_import_list(argv[2], &o, print_item, NULL) : 2;
    if (rc)
        fprintf(stderr, "%s [%s]\n", err, wpack_error_name(rc));
    return rc;
}

#define CHECK(c)                                                          \
    do {                                                                  \
        if (c)                                                            \
            printf("ok %s\n", #c);                                        \
        else {                                                            \
            printf("FAIL %s\n", #c);                                      \
            bad++;                                                        \
        }                                                                 \
    } while (0)

/* The defaults wpack_import.h promises, and the arguments it refuses. */
static int defaults(void)
{
    int bad = 0;
    wpack_import_options o;
    memset(&o, 0xa5, sizeof o);
    wpack_import_options_init(&o);
    CHECK(!o.prefix && !o.key && !o.name && o.cast == 0 && !o.only && o.only_count == 0);
    CHECK(o.weight_stats == 1 && o.follow_links == 0);
    CHECK(o.max_ratio == 200 && o.max_total == (1ull << 40));
    CHECK(!o.stats_file && !o.name_map_other && !o.name_map_entry && o.name_map_count == 0);
    CHECK(!o.progress && !o.progress_user && !o.warn && !o.warn_user);
    CHECK(!o.err && o.err_size == 0 && !o.temp_dir);
    CHECK(!o.executor && o.keep_observers == 0 && o.portable_stats == 0);
    int zero = 1;
    for (size_t k = 0; k < sizeof o.reserved / sizeof o.reserved[0]; k++)
        zero &= !o.reserved[k];
    for (size_t k = 0; k < sizeof o.reserved_ptr / sizeof o.reserved_ptr[0]; k++)
        zero &= !o.reserved_ptr[k];
    CHECK(zero);
    wpack_export_options e;
    memset(&e, 0xa5, sizeof e);
    wpack_export_options_init(&e);
    CHECK(!e.progress && !e.progress_user && !e.err && e.err_size == 0 && e.flags == 0 && !e.reserved[2] &&
          !e.warn && !e.warn_user && !e.reserved_ptr[1]);
    /* Options structs never change size ("Options structs", wpack_import.h):
     * what follows reserved_ptr stays within the bytes it had (three u64 for
     * the import options, flags and three u64 for the export ones); a new
     * field takes a reserved slot's place instead of growing the struct. */
    CHECK(sizeof o == offsetof(wpack_import_options, reserved_ptr) + 2 * sizeof(void *) +
                          3 * sizeof(uint64_t));
    CHECK(sizeof e == offsetof(wpack_export_options, reserved_ptr) + 2 * sizeof(void *) +
                          4 * sizeof(uint64_t));

    /* refused arguments, each with a message and the writer untouched */
    wpack_writer *w;
    if (wpack_writer_open(&w, "defaults.wpack", NULL) != WPACK_OK)
        return 1;
    char err[512];
    o.err = err;
    o.err_size = sizeof err;
    o.reserved[1] = 1;
    CHECK(wpack_import_file(w, NULL, &o) == WPACK_E_INVALID_ARGUMENT && strstr(err, "reserved"));
    o.reserved[1] = 0;
    o.cast = WPACK_DTYPE_F32;
    CHECK(wpack_import_file(w, NULL, &o) == WPACK_E_INVALID_ARGUMENT && strstr(err, "cast"));
    o.cast = 0;
    o.only_count = 1;
    CHECK(wpack_import_file(w, NULL, &o) == WPACK_E_INVALID_ARGUMENT);
    o.only_count = 0;
    CHECK(wpack_import_file(w, NULL, &o) == WPACK_OK && err[0] == 0);
    CHECK(wpack_import_file(w, NULL, NULL) == WPACK_OK);
    CHECK(wpack_import_file(NULL, "x", &o) == WPACK_E_INVALID_ARGUMENT);
    wpack_importer *imp;
    CHECK(wpack_import_open(&imp, NULL) == WPACK_E_INVALID_ARGUMENT && imp == NULL);
    CHECK(wpack_import_add(NULL, "x", NULL) == WPACK_E_INVALID_ARGUMENT);
    wpack_import_close(NULL);
    CHECK(wpack_import_file(w, "no/such/file.pt", &o) == WPACK_E_IO &&
          strstr(err, "no/such/file.pt"));
    CHECK(wpack_writer_count(w) == 0);
    wpack_writer_abort(w);
    CHECK(wpack_export_format_from_name("safetensors") == WPACK_EXPORT_SAFETENSORS &&
          wpack_export_format_from_name("npz") == WPACK_EXPORT_NPZ &&
          wpack_export_format_from_name("tar") == WPACK_EXPORT_TAR &&
          wpack_export_format_from_name("gguf") == WPACK_EXPORT_GGUF &&
          wpack_export_format_from_name("irpa") == WPACK_EXPORT_IRPA &&
          wpack_export_format_from_name("trt-calib") == WPACK_EXPORT_TRT_CALIB &&
          wpack_export_format_from_name("ort-calib-json") == WPACK_EXPORT_ORT_CALIB_JSON &&
          wpack_export_format_from_name("onnx") == 0 && wpack_export_format_from_name(NULL) == 0);
    CHECK(!strcmp(wpack_import_kind_name(WPACK_INPUT_TORCH), "torch") &&
          !strcmp(wpack_import_kind_name(WPACK_INPUT_DIRECTORY), "directory") &&
          !strcmp(wpack_import_kind_name(99), "unknown"));
    e.err = err;
    e.err_size = sizeof err;
    CHECK(wpack_export_file(NULL, "x", WPACK_EXPORT_NPZ, &e) == WPACK_E_INVALID_ARGUMENT);
    printf("%d failed\n", bad);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (!strcmp(argv[1], "create"))
        return create(argc, argv);
    if (!strcmp(argv[1], "export"))
        return export(argc, argv);
    if (!strcmp(argv[1], "list"))
        return list(argc, argv);
    if (!strcmp(argv[1], "defaults"))
        return defaults();
    if (!strcmp(argv[1], "detect")) {
        for (int i = 2; i < argc; i++) {
            char err[512] = "";
            int kind = wpack_import_detect(argv[i], err, sizeof err);
            printf("%s %s%s%s\n", argv[i], wpack_import_kind_name(kind), *err ? " " : "", err);
        }
        return 0;
    }
    return 2;
}
