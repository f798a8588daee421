/* test_reserved_meta.c - the metadata keys the spec defines (section 9,
 * 19a) written by a caller: refused where readers would refuse or misread
 * them (the writer wrote `wpack.shards` = "x" as it came), kept where they
 * are well formed, and unknown `wpack.*` keys kept (a later revision's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static char dir[256];

typedef int (*set_fn)(wpack_writer *w);

/* Write a one-tensor archive after set(w); the finish's code, its message in msg. */
static int write_with(set_fn set, char *msg, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/m.wpack", dir);
    wpack_writer *w;
    if (wpack_writer_open(&w, path, NULL) != WPACK_OK) {
        snprintf(msg, len, "open: %s", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return -1;
    }
    float v[2] = {1, 2};
    int rc = wpack_writer_add_tensor(w, "a", WPACK_DTYPE_F32, 1, (uint64_t[]){2}, v, sizeof v);
    if (rc == WPACK_OK)
        rc = set(w);
    if (rc != WPACK_OK) {
        snprintf(msg, len, "%s", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return rc;
    }
    *msg = 0;
    rc = wpack_writer_finish(w, msg, len);
    int left = access(path, F_OK) == 0;
    unlink(path);
    return rc == WPACK_OK || !left ? rc : -2; /* a refused archive leaves no file */
}

static int shards_string(wpack_writer *w) { return wpack_writer_set_string(w, "wpack.shards", "x"); }
static int lengths_only(wpack_writer *w)
{
    return wpack_writer_set_array(w, "wpack.shard_lengths", WPACK_META_I64, 1, (int64_t[]){64});
}
static int manifest_i64(wpack_writer *w) { return wpack_writer_set_i64(w, "wpack.manifest", 3); }
static int manifest_path(wpack_writer *w) { return wpack_writer_set_string(w, "wpack.manifest", "../m.wpack"); }
static int producer_bool(wpack_writer *w) { return wpack_writer_set_bool(w, "wpack.producer", 1); }
static int layers_f64(wpack_writer *w) { return wpack_writer_set_f64(w, "wpack.layers", 1.5); }
static int module_names_str(wpack_writer *w) { return wpack_writer_set_string(w, "wpack.module_names", "junk"); }
static int module_names_odd(wpack_writer *w)
{
    const char *v[3] = {"p_relu", "relu", "q"};
    return wpack_writer_set_array(w, "wpack.module_names", WPACK_META_STRING, 3, v);
}
static int module_names_unsorted(wpack_writer *w)
{
    const char *v[4] = {"z", "relu", "a", "relu"};
    return wpack_writer_set_array(w, "wpack.module_names", WPACK_META_STRING, 4, v);
}
static int module_names_bad_name(wpack_writer *w)
{
    const char *v[2] = {"a\nb", "relu"};
    return wpack_writer_set_array(w, "wpack.module_names", WPACK_META_STRING, 2, v);
}
static int good_keys(wpack_writer *w)
{
    const char *v[4] = {"a_relu", "relu", "b_relu", "relu"};
    int rc = wpack_writer_set_array(w, "wpack.module_names", WPACK_META_STRING, 4, v);
    if (rc == WPACK_OK)
        rc = wpack_writer_set_string(w, "wpack.producer", "my tool 2.0");
    if (rc == WPACK_OK)
        rc = wpack_writer_set_string(w, "wpack.layers", "linear:a");
    if (rc == WPACK_OK)
        rc = wpack_writer_set_string(w, "wpack.manifest", "set.wpack");
    if (rc == WPACK_OK)
        rc = wpack_writer_set_i64(w, "wpack.from_a_later_revision", 7);
    return rc;
}

static void test_malformed_reserved_keys_refused(void)
{
    struct {
        const char *what;
        set_fn set;
        int code;
        const char *msg;
    } cases[] = {
        {"wpack.shards a string", shards_string, WPACK_E_SHARD, "'wpack.shards' missing, not a string array"},
        {"a shard list's lengths alone", lengths_only, WPACK_E_SHARD, "'wpack.shards' missing"},
        {"wpack.manifest an i64", manifest_i64, WPACK_E_METADATA, "'wpack.manifest' is reserved"},
        {"wpack.manifest a path", manifest_path, WPACK_E_METADATA, "'wpack.manifest' '../m.wpack'"},
        {"wpack.producer a bool", producer_bool, WPACK_E_METADATA, "'wpack.producer' is reserved"},
        {"wpack.layers an f64", layers_f64, WPACK_E_METADATA, "'wpack.layers' is reserved"},
        {"wpack.module_names a string", module_names_str, WPACK_E_METADATA, "an even number"},
        {"wpack.module_names odd", module_names_odd, WPACK_E_METADATA, "an even number"},
        {"wpack.module_names unsorted", module_names_unsorted, WPACK_E_METADATA, "element 2 'a': other names must be sorted"},
        {"wpack.module_names a bad name", module_names_bad_name, WPACK_E_METADATA, "element 0 'a\\x0ab': control byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char msg[600];
        int rc = write_with(cases[i].set, msg, sizeof msg);
        CHECK(rc == cases[i].code, "%s: code %d (%s), want %d", cases[i].what, rc, msg, cases[i].code);
        CHECK(strstr(msg, cases[i].msg) != NULL, "%s: message '%s' lacks '%s'", cases[i].what, msg,
              cases[i].msg);
    }
}

static void test_well_formed_reserved_keys_kept(void)
{
    char msg[600], path[512];
    snprintf(path, sizeof path, "%s/m.wpack", dir);
    /* written, then read back before write_with removes it: write it again by hand */
    CHECK(write_with(good_keys, msg, sizeof msg) == WPACK_OK, "well-formed keys: %s", msg);
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open: %s", wpack_writer_errmsg(w));
    float v[2] = {1, 2};
    CHECK_EQ(wpack_writer_add_tensor(w, "a", WPACK_DTYPE_F32, 1, (uint64_t[]){2}, v, sizeof v), WPACK_OK);
    CHECK_EQ(good_keys(w), WPACK_OK);
    CHECK(wpack_writer_finish(w, msg, sizeof msg) == WPACK_OK, "finish: %s", msg);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    wpack_meta m;
    CHECK(wpack_meta_find(ar, "wpack.producer", &m) == WPACK_OK && !strcmp(m.str, "my tool 2.0"),
          "the caller's producer kept");
    CHECK(wpack_meta_find(ar, "wpack.from_a_later_revision", &m) == WPACK_OK && m.i64 == 7,
          "an unknown wpack.* key kept");
    CHECK(wpack_meta_find(ar, "wpack.module_names", &m) == WPACK_OK && m.count == 4, "module names kept");
    wpack_close(ar);
    unlink(path);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/wpack-reserved-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN(test_malformed_reserved_keys_refused);
    RUN(test_well_formed_reserved_keys_kept);
    rmdir(dir);
    return tl_finish();
}
