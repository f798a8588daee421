/* test_shards.c - sharded sets: shards + a manifest of external entries,
 * opened as one archive; every way a shard can go missing or change. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"
#include "tools/golden_content.h"
#include "wpack.h"

static char dir[256];

static int make_shard(const char *name, int first, int count)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    wpack_writer *w;
    if (wpack_writer_open(&w, path, NULL))
        return 1;
    int rc = 0;
    for (int i = first; i < first + count && !rc; i++) {
        char n[64];
        float v[3] = {(float)i, (float)i + 0.5f, -(float)i};
        snprintf(n, sizeof n, "layers.%d.weight", i);
        rc = wpack_writer_add_tensor(w, n, WPACK_DTYPE_F32, 1, (uint64_t[]){3}, v, sizeof v);
    }
    char err[256];
    return rc || wpack_writer_finish(w, err, sizeof err);
}

/* The manifest: an external entry for every data entry of every shard. */
static int make_manifest(const char *name, const char *const *shards, int n, const char *override)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    wpack_writer *w;
    if (wpack_writer_open(&w, path, NULL))
        return 1;
    uint64_t lengths[8], sums[8];
    int rc = 0;
    for (int s = 0; s < n && !rc; s++) {
        char sp[512];
        snprintf(sp, sizeof sp, "%s/%s", dir, shards[s]);
        wpack_archive *ar;
        if (wpack_open_file(&ar, sp, 0)) {
            wpack_close(ar);
            wpack_writer_abort(w);
            return 1;
        }
        wpack_info in;
        wpack_get_info(ar, &in);
        lengths[s] = in.file_length;
        sums[s] = in.index_checksum;
        for (uint64_t i = 0; i < wpack_count(ar) && !rc; i++) {
            wpack_tensor t;
            wpack_tensor_at(ar, i, &t);
            rc = wpack_writer_add_external(w, t.name, (uint32_t)s, &t);
        }
        wpack_close(ar);
    }
    /* An override (a name the writer refuses, for the reader's checks) is
     * written as a placeholder of its length and patched in afterwards. */
    char placeholder[256] = "";
    const char *names[8];
    for (int s = 0; s < n; s++)
        names[s] = shards[s];
    if (override) {
        size_t k = strlen(override);
        memset(placeholder, 'Q', k < sizeof placeholder ? k : sizeof placeholder - 1);
        names[0] = placeholder;
    }
    rc = rc || wpack_writer_set_shards(w, (uint32_t)n, names, lengths, sums) ||
         wpack_writer_add_alias(w, "head.weight", "layers.0.weight") ||
         wpack_writer_add_name(w, "_param_constant7", "layers.7.weight") ||
         wpack_writer_set_string(w, "model.name", "sharded");
    if (rc) {
        printf("  manifest: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return 1;
    }
    char err[256];
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc)
        printf("  finish: %s\n", err);
    if (!rc && override) {
        size_t len, k = strlen(placeholder);
        uint8_t *f = test_slurp(path, &len);
        uint8_t *at = f ? memmem(f, len, placeholder, k) : NULL;
        if (at) {
            memcpy(at, override, k);
            gimg m = {f, len};
            gimg_seal_index(&m);
        }
        FILE *o = at ? fopen(path, "wb") : NULL;
        rc = !o || fwrite(f, 1, len, o) != len;
        if (o)
            rc |= fclose(o) != 0;
        free(f);
    }
    return rc;
}

static int open_manifest(const char *name, wpack_archive **ar)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return wpack_open_file(ar, path, 0);
}

static void test_set_opens_as_one(void)
{
    const char *shards[] = {"m-00001.wpack", "m-00002.wpack"};
    CHECK(make_shard(shards[0], 0, 6) == 0 && make_shard(shards[1], 6, 6) == 0, "shards");
    CHECK(make_manifest("m.wpack", shards, 2, NULL) == 0, "manifest");
    wpack_archive *ar;
    CHECK(open_manifest("m.wpack", &ar) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    CHECK_EQ(wpack_shard_count(ar), 2);
    CHECK_EQ(wpack_count(ar), 13);
    wpack_tensor t;
    CHECK(wpack_find(ar, "layers.9.weight", &t) == WPACK_OK && t.kind == WPACK_KIND_EXTERNAL &&
              t.alias_target == 1 && t.data && ((const float *)t.data)[1] == 9.5f, "entry in shard 2");
    CHECK(wpack_find(ar, "_param_constant7", &t) == WPACK_OK && ((const float *)t.data)[0] == 7,
          "name map across shards");
    CHECK(wpack_find(ar, "head.weight", &t) == WPACK_OK && t.kind == WPACK_KIND_ALIAS &&
              ((const float *)t.data)[2] == 0, "alias to an external entry");
    uint64_t first, count;
    CHECK(wpack_prefix_range(ar, "layers.1", &first, &count) == WPACK_OK && count == 3,
          "prefix across shards: %llu", (unsigned long long)count);
    float v[3];
    CHECK(wpack_find(ar, "layers.11.weight", &t) == WPACK_OK &&
              wpack_read(ar, t.index, 0, v, 12) == WPACK_OK && v[2] == -11, "read");
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify through the manifest");
    wpack_stats s;
    CHECK(wpack_stats_find(ar, "layers.3.weight", WPACK_STATS_WEIGHT, &s) == WPACK_E_NOT_FOUND,
          "manifest stats are its own");
    wpack_close(ar);
}

/* Verify on read covers bytes that come from a shard, and opting out at the
 * manifest opts out for its shards too. */
static void test_set_verifies_reads(void)
{
    const char *shards[] = {"v-00001.wpack", "v-00002.wpack"};
    CHECK(make_shard(shards[0], 0, 6) == 0 && make_shard(shards[1], 6, 6) == 0, "shards");
    CHECK(make_manifest("v.wpack", shards, 2, NULL) == 0, "manifest");
    char sp[512];
    snprintf(sp, sizeof sp, "%s/%s", dir, shards[1]);
    wpack_archive *ar;
    wpack_tensor t;
    CHECK(wpack_open_file(&ar, sp, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK &&
              wpack_find(ar, "layers.9.weight", &t) == WPACK_OK, "shard: %s", wpack_errmsg(ar));
    uint64_t at = t.offset + 5; /* inside element 1 (9.5f) */
    wpack_close(ar);
    int fd = open(sp, O_RDWR);
    unsigned char byte;
    CHECK(fd >= 0 && pread(fd, &byte, 1, (off_t)at) == 1, "read %s", sp);
    byte ^= 0x40;
    CHECK(pwrite(fd, &byte, 1, (off_t)at) == 1, "flip a data byte of %s", sp);
    close(fd);

    float v[3];
    const void *p;
    uint64_t n;
    CHECK(open_manifest("v.wpack", &ar) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    CHECK(wpack_find(ar, "layers.9.weight", &t) == WPACK_OK, "find");
    CHECK(wpack_read(ar, t.index, 0, v, sizeof v) == WPACK_E_CHECKSUM, "default: read refused");
    CHECK(strstr(wpack_errmsg(ar), "layers.9.weight") != NULL, "names it: %s", wpack_errmsg(ar));
    CHECK(wpack_tensor_view(ar, t.index, &p, &n) == WPACK_E_CHECKSUM, "default: view refused");
    CHECK(wpack_find(ar, "layers.8.weight", &t) == WPACK_OK &&
              wpack_read(ar, t.index, 0, v, sizeof v) == WPACK_OK && v[1] == 8.5f, "others fine");
    wpack_close(ar);

    snprintf(sp, sizeof sp, "%s/v.wpack", dir);
    CHECK(wpack_open_file(&ar, sp, WPACK_OPEN_NO_VERIFY_READS) == WPACK_OK, "open: %s",
          wpack_errmsg(ar));
    CHECK(wpack_find(ar, "layers.9.weight", &t) == WPACK_OK, "find");
    CHECK(wpack_read(ar, t.index, 0, v, sizeof v) == WPACK_OK && v[1] != 9.5f,
          "opted out: the damaged bytes handed out (%s)", wpack_errmsg(ar));
    CHECK(wpack_tensor_view(ar, t.index, &p, &n) == WPACK_OK && n == 12,
          "opted out: the shard's view too (%s)", wpack_errmsg(ar));
    CHECK(wpack_read_ex(ar, t.index, 0, v, sizeof v, WPACK_READ_VERIFY) == WPACK_E_CHECKSUM,
          "asked per call: refused");
    wpack_close(ar);
}

static void test_shard_problems(void)
{
    const char *shards[] = {"p-00001.wpack", "p-00002.wpack"};
    char a[512];
    wpack_archive *ar;
    CHECK(make_shard(shards[0], 0, 6) == 0 && make_shard(shards[1], 6, 6) == 0, "shards");
    CHECK(make_manifest("p.wpack", shards, 2, NULL) == 0, "manifest");
    /* a shard rewritten after the manifest was made */
    CHECK(make_shard(shards[1], 6, 5) == 0, "rewrite shard 2");
    CHECK(open_manifest("p.wpack", &ar) == WPACK_E_SHARD && strstr(wpack_errmsg(ar), "changed"),
          "changed shard: %s", wpack_errmsg(ar));
    wpack_close(ar);
    /* a shard gone */
    snprintf(a, sizeof a, "%s/%s", dir, shards[1]);
    unlink(a);
    CHECK(open_manifest("p.wpack", &ar) == WPACK_E_SHARD && strstr(wpack_errmsg(ar), "p-00002"),
          "missing shard: %s", wpack_errmsg(ar));
    wpack_close(ar);
    /* a shard name that leaves the directory */
    CHECK(make_shard(shards[1], 6, 6) == 0, "shard 2 again");
    CHECK(make_manifest("q.wpack", shards, 2, "../p-00001.wpack") == 0, "manifest with a path");
    CHECK(open_manifest("q.wpack", &ar) == WPACK_E_SHARD && strstr(wpack_errmsg(ar), "plain file name"),
          "traversal: %s", wpack_errmsg(ar));
    wpack_close(ar);
    /* a shard name with control bytes: refused, escaped in the message */
    CHECK(make_manifest("e.wpack", shards, 2, "p\x1b]0;x\x07-00001.wpack") == 0, "manifest e");
    CHECK(open_manifest("e.wpack", &ar) == WPACK_E_SHARD && strstr(wpack_errmsg(ar), "plain file name") &&
              !strchr(wpack_errmsg(ar), 0x1b) && !strchr(wpack_errmsg(ar), 0x07),
          "control bytes: %s", wpack_errmsg(ar));
    wpack_close(ar);
    CHECK(make_manifest("r.wpack", shards, 2, NULL) == 0, "manifest r");
    CHECK(open_manifest("r.wpack", &ar) == WPACK_OK, "r opens");
    wpack_close(ar);
    /* a manifest from memory cannot find its shards */
    snprintf(a, sizeof a, "%s/r.wpack", dir);
    FILE *f = fopen(a, "rb");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    CHECK(wpack_open_memory(&ar, buf, n, 0) == WPACK_E_SHARD, "memory: %s", wpack_errmsg(ar));
    wpack_close(ar);
    /* the writer refuses externals without a shard list */
    wpack_writer *w;
    snprintf(a, sizeof a, "%s/bad.wpack", dir);
    CHECK(wpack_writer_open(&w, a, NULL) == WPACK_OK, "writer");
    wpack_tensor t = {.kind = WPACK_KIND_DATA, .dtype = WPACK_DTYPE_F32, .rank = 1, .dims = {3},
                      .stored_length = 12, .offset = 4096};
    CHECK(wpack_writer_add_external(w, "x", 0, &t) == WPACK_OK, "external");
    char err[256];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_SHARD, "no shard list: %s", err);
    /* nor a shard list or shard number a reader refuses before it opens a
     * shard (spec 19a): the writer wrote such manifests */
    static const struct {
        const char *n0, *n1;
        uint32_t shard;
        const char *why;
    } bad[] = {
        {"x/s.wpack", "b.wpack", 0, "a '/'"},
        {"..", "b.wpack", 0, "'..'"},
        {"a.wpack", "a\x01.wpack", 0, "control byte"},
        {"a.wpack", "a.wpack", 0, "listed twice"},
        {"a.wpack", "b.wpack", 2, "shard 2, the list has 2"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *names[2] = {bad[k].n0, bad[k].n1};
        uint64_t lens[2] = {512, 512}, sums[2] = {1, 2};
        CHECK(wpack_writer_open(&w, a, NULL) == WPACK_OK, "writer %zu", k);
        CHECK_EQ(wpack_writer_set_shards(w, 2, names, lens, sums), WPACK_OK);
        CHECK_EQ(wpack_writer_add_external(w, "x", bad[k].shard, &t), WPACK_OK);
        CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_SHARD && strstr(err, bad[k].why),
              "%s: %s", bad[k].why, err);
        CHECK(access(a, F_OK) != 0, "%s: nothing written", bad[k].why);
    }
    /* the arrays set one by one: their lengths must agree */
    CHECK(wpack_writer_open(&w, a, NULL) == WPACK_OK, "writer (arrays)");
    const char *one[1] = {"a.wpack"};
    int64_t two[2] = {512, 512};
    CHECK_EQ(wpack_writer_set_array(w, "wpack.shards", WPACK_META_STRING, 1, one), WPACK_OK);
    CHECK_EQ(wpack_writer_set_array(w, "wpack.shard_lengths", WPACK_META_I64, 2, two), WPACK_OK);
    CHECK_EQ(wpack_writer_set_array(w, "wpack.shard_index_xxh3", WPACK_META_I64, 1, two), WPACK_OK);
    CHECK_EQ(wpack_writer_add_external(w, "x", 0, &t), WPACK_OK);
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_SHARD && strstr(err, "shard_lengths"),
          "unequal arrays: %s", err);
    /* (control) a good list */
    const char *good[2] = {"a.wpack", "b.wpack"};
    uint64_t lens[2] = {512, 512}, sums[2] = {1, 2};
    CHECK(wpack_writer_open(&w, a, NULL) == WPACK_OK, "writer (good)");
    CHECK_EQ(wpack_writer_set_shards(w, 2, good, lens, sums), WPACK_OK);
    CHECK_EQ(wpack_writer_add_external(w, "x", 1, &t), WPACK_OK);
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "good list: %s", err);
    unlink(a);
}

static int count_files(const char *suffix)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c -- '%s' > %s/.count", dir, suffix, dir);
    if (system(cmd) < 0)
        return -1;
    snprintf(cmd, sizeof cmd, "%s/.count", dir);
    FILE *f = fopen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1)
        n = -1;
    if (f)
        fclose(f);
    return n;
}

/* A streamed bool write with a byte other than 0/1 is refused in a set as
 * in one archive, naming the byte's offset in the tensor, and the writer
 * goes on. */
/* An external entry's own fields (spec 19a), checked with the entry's
 * other fields: an aux range or a codec is KIND, a stored length its
 * shape disagrees with is SIZE, a shard number past the list is SHARD. */
static void test_external_fields(void)
{
    const char *shards[] = {"x-00001.wpack", "x-00002.wpack"};
    CHECK(make_shard(shards[0], 0, 6) == 0 && make_shard(shards[1], 6, 6) == 0, "shards");
    static const struct {
        size_t off;
        int width;
        uint64_t value;
        int want;
        const char *what;
    } cases[] = {
        {WPK_E_AUX_LEN_OFF, 8, 4, WPACK_E_KIND, "aux range"},
        {WPK_E_CODEC_OFF, 1, WPACK_CODEC_ZSTD, WPACK_E_CODEC, "codec 1 without its feature bit"},
        {WPK_E_STORED_LEN_OFF, 8, 16, WPACK_E_SIZE, "stored length"},
        {WPK_E_TARGET_OFF, 4, 7, WPACK_E_SHARD, "shard 7 of 2"},
        {WPK_E_TARGET_OFF, 4, 1, WPACK_E_SHARD, "the other shard (no such entry there)"},
        {WPK_E_TARGET_OFF, 4, 0, WPACK_OK, "(control) unchanged"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[512];
        CHECK(make_manifest("x.wpack", shards, 2, NULL) == 0, "manifest");
        snprintf(path, sizeof path, "%s/x.wpack", dir);
        size_t len;
        uint8_t *f = test_slurp(path, &len);
        gimg m = {f, len};
        uint8_t *r = f ? gimg_entry(&m, "layers.2.weight") : NULL;
        CHECK(r && r[WPK_E_KIND_OFF] == WPACK_KIND_EXTERNAL, "%s: the external entry", cases[k].what);
        if (!r) {
            free(f);
            continue;
        }
        if (cases[k].width == 1)
            r[cases[k].off] = (uint8_t)cases[k].value;
        else if (cases[k].width == 4)
            wpk_st32(r + cases[k].off, (uint32_t)cases[k].value);
        else
            wpk_st64(r + cases[k].off, cases[k].value);
        gimg_seal_index(&m);
        FILE *o = fopen(path, "wb");
        CHECK(o && fwrite(f, 1, len, o) == len && fclose(o) == 0, "rewrite");
        free(f);
        wpack_archive *ar;
        int rc = open_manifest("x.wpack", &ar);
        CHECK(rc == cases[k].want, "external %s: %s (%s), want %s", cases[k].what,
              wpack_error_name(rc), wpack_errmsg(ar), wpack_error_name(cases[k].want));
        wpack_close(ar);
    }
}

static void test_writer_set_bool_values(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bools.wpack", dir);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.shard_size = 64;
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_OK, "open: %s", wpack_writer_errmsg(w));
    uint8_t good[19], bad[19];
    for (int i = 0; i < 19; i++)
        good[i] = bad[i] = (uint8_t)(i % 2);
    bad[17] = 3;
    uint64_t d[1] = {19};
    CHECK_EQ(wpack_writer_begin_tensor(w, "s", WPACK_DTYPE_BOOL, 1, d), WPACK_OK);
    CHECK_EQ(wpack_writer_write_zeros(w, 4), WPACK_OK);
    CHECK_EQ(wpack_writer_write(w, good + 4, 6), WPACK_OK);
    CHECK_EQ(wpack_writer_write(w, bad + 10, 9), WPACK_E_INVALID_ARGUMENT);
    CHECK(strstr(wpack_writer_errmsg(w), "'s'") && strstr(wpack_writer_errmsg(w), "byte 17 of the tensor"),
          "message names the tensor and the byte: %s", wpack_writer_errmsg(w));
    CHECK_EQ(wpack_writer_write(w, good + 10, 9), WPACK_OK);
    CHECK_EQ(wpack_writer_end_tensor(w), WPACK_OK);
    char err[512];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    wpack_tensor t;
    uint8_t want[19];
    memcpy(want, good, 19);
    memset(want, 0, 4);
    CHECK(wpack_find(ar, "s", &t) == WPACK_OK && t.data && memcmp(t.data, want, 19) == 0,
          "streamed bools read back from the shard");
    wpack_close(ar);
}

/* wpack_writer_options.shard_size: the writer streams a whole set in one
 * pass, rolling to a new shard when the next tensor would overflow. */
static void test_writer_streams_a_set(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/s.wpack", dir);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    opt.shard_size = 1000; /* 250 floats */
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_OK, "open: %s", wpack_writer_errmsg(w));
    static float v[400];
    for (int i = 0; i < 400; i++)
        v[i] = (float)i - 100;
    int code = 0, rc = 0;
    uint8_t params[2] = {1, 2};
    rc |= wpack_writer_add_block_dtype(w, "q4_pair", 2, 1, params, 2, &code);
    /* 5 x 400 B: shards {0, 1} {2, 3} {4}; then big (1600 B) alone; then
     * packed, which would overflow big's shard */
    for (int i = 0; i < 5 && !rc; i++) {
        char n[32];
        snprintf(n, sizeof n, "layers.%d.weight", i);
        rc |= wpack_writer_add_tensor(w, n, WPACK_DTYPE_F32, 2, (uint64_t[]){10, 10}, v, 400);
    }
    rc |= wpack_writer_add_tensor(w, "big", WPACK_DTYPE_F32, 1, (uint64_t[]){400}, v, 1600);
    rc |= wpack_writer_begin_tensor(w, "packed", code, 1, (uint64_t[]){8});
    rc |= wpack_writer_write(w, "\x01\x02", 2);
    rc |= wpack_writer_write(w, "\x03\x04", 2);
    rc |= wpack_writer_end_tensor(w);
    rc |= wpack_writer_add_alias(w, "head.weight", "layers.0.weight");
    rc |= wpack_writer_add_splat(w, "ones", WPACK_DTYPE_F32, 1, (uint64_t[]){4}, &(float){1}, 4);
    rc |= wpack_writer_add_name(w, "_param_constant5", "big");
    CHECK(rc == 0, "adding: %s", wpack_writer_errmsg(w));
    CHECK(wpack_writer_add_tensor(w, "big", WPACK_DTYPE_F32, 1, (uint64_t[]){1}, v, 4) == WPACK_E_EXISTS,
          "a name taken in an earlier shard is still taken");
    char err[300];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    CHECK_EQ(count_files("s-0000[1-9]-of-00005.wpack"), 5);
    CHECK_EQ(count_files("part\\|tmp-"), 0);
    wpack_archive *ar;
    CHECK(open_manifest("s.wpack", &ar) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    CHECK_EQ(wpack_shard_count(ar), 5);
    wpack_tensor t;
    CHECK(wpack_find(ar, "layers.4.weight", &t) == WPACK_OK && t.kind == WPACK_KIND_EXTERNAL &&
              t.alias_target == 2 && t.data && ((const float *)t.data)[99] == -1, "layers.4 in shard 3");
    CHECK(wpack_find(ar, "_param_constant5", &t) == WPACK_OK && t.alias_target == 3 &&
              ((const float *)t.data)[399] == 299, "big alone in shard 4, found by its map name");
    CHECK(wpack_find(ar, "packed", &t) == WPACK_OK && t.dtype == code && t.alias_target == 4 &&
              t.nbytes == 4 && ((const uint8_t *)t.data)[3] == 4, "block dtype in shard 5");
    CHECK(wpack_find(ar, "head.weight", &t) == WPACK_OK && t.kind == WPACK_KIND_ALIAS &&
              ((const float *)t.data)[1] == -99, "alias in the manifest");
    CHECK(wpack_find(ar, "ones", &t) == WPACK_OK && t.kind == WPACK_KIND_SPLAT, "splat in the manifest");
    wpack_stats st;
    CHECK(wpack_stats_find(ar, "big", WPACK_STATS_WEIGHT, &st) == WPACK_OK &&
              wpack_stats_value(&st, 0, 0) == -100 && wpack_stats_value(&st, 1, 0) == 299,
          "weight stats copied from the shards");
    CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify the set");
    wpack_close(ar);
}

/* An aborted sharded writer leaves no shard, finished or not. */
static void test_aborted_set_leaves_nothing(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gone.wpack", dir);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.shard_size = 64;
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_OK, "open");
    static float v[64];
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        char n[32];
        snprintf(n, sizeof n, "t%d", i);
        rc = wpack_writer_add_tensor(w, n, WPACK_DTYPE_F32, 1, (uint64_t[]){16}, v, 64);
    }
    CHECK(rc == 0 && count_files("^gone.wpack.tmp-[0-9]*-[0-9a-f]*.shard-0000[12]$") == 2,
          "two shards finished, under the manifest's temporary name");
    CHECK(wpack_writer_begin_tensor(w, "t3", WPACK_DTYPE_F32, 1, (uint64_t[]){16}) == 0 &&
              wpack_writer_write(w, v, 8) == 0 &&
              wpack_writer_end_tensor(w) == WPACK_E_SIZE, "short tensor fails");
    char err[300];
    CHECK(wpack_writer_finish(w, err, sizeof err) != WPACK_OK, "finish refuses");
    CHECK_EQ(count_files("gone"), 0);

    opt.compress_level = 3;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_E_INVALID_ARGUMENT, "no compression with shards");
    wpack_writer_abort(w);
}

/* A set of three one-tensor shards at dir/name whose floats are all v,
 * committed (prepare_only 0) or placed and left unswitched, as a crash
 * after wpack_writer_prepare leaves it (prepare_only 1). */
static int write_set(const char *name, float v, int prepare_only)
{
    if (prepare_only) { /* in a child that dies after wpack_writer_prepare */
        pid_t pid = fork();
        int st = 0;
        if (pid < 0)
            return WPACK_E_IO;
        if (pid > 0)
            return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : WPACK_E_IO;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.shard_size = 64;
    wpack_writer *w;
    int rc = wpack_writer_open(&w, path, &opt);
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = v;
    for (int i = 0; i < 3 && !rc; i++) {
        char n[32];
        snprintf(n, sizeof n, "t%d", i);
        rc = wpack_writer_add_tensor(w, n, WPACK_DTYPE_F32, 1, (uint64_t[]){16}, x, 64);
    }
    char err[300] = "";
    if (rc) {
        printf("# write_set: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return rc;
    }
    if (prepare_only) /* dies between the shards' renames and the manifest's */
        _exit(wpack_writer_prepare(w));
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc)
        printf("# write_set: %s\n", err);
    return rc;
}

/* The set at dir/name opens, and all its floats are v. */
static int set_is(const char *name, float v)
{
    wpack_archive *ar;
    int ok = open_manifest(name, &ar) == WPACK_OK && wpack_shard_count(ar) == 3 &&
             wpack_verify_all(ar, NULL, NULL) == WPACK_OK;
    for (int i = 0; ok && i < 3; i++) {
        char n[32];
        wpack_tensor t;
        snprintf(n, sizeof n, "t%d", i);
        ok = wpack_find(ar, n, &t) == WPACK_OK && t.data && ((const float *)t.data)[15] == v;
    }
    if (!ok)
        printf("# %s: %s\n", name, wpack_errmsg(ar));
    wpack_close(ar);
    return ok;
}

/* Replacing a set never renames a shard over an existing file: the new
 * shards take free names (NAME-0000k-of-0000N.wpack, else .2, .3, ...),
 * the old set stays whole until the new manifest's rename, and only then
 * are the old shards removed. A crash after the shards were placed leaves
 * the old set whole, and the next writer cleans up after it; a user's file
 * at a shard name is never touched. */
static void test_replacing_a_set(void)
{
    CHECK(write_set("r.wpack", 1, 0) == WPACK_OK, "first set");
    CHECK_EQ(count_files("^r-0000[123]-of-00003.wpack$"), 3);
    CHECK(write_set("r.wpack", 2, 0) == WPACK_OK, "second set");
    CHECK(set_is("r.wpack", 2), "the second set");
    CHECK_EQ(count_files("^r-0000[123]-of-00003.2.wpack$"), 3);
    CHECK_EQ(count_files("^r"), 4); /* the first set's shards are gone */
    CHECK(write_set("r.wpack", 3, 0) == WPACK_OK, "third set");
    CHECK(set_is("r.wpack", 3), "the third set");
    CHECK_EQ(count_files("^r-0000[123]-of-00003.wpack$"), 3);
    CHECK_EQ(count_files("^r"), 4);

    /* a crash after the new shards were placed: the old set is whole, and
     * the next writer of the path removes the dead one's shards (tied to
     * its manifest's temporary) and the links to the old ones */
    CHECK(write_set("r.wpack", 4, 1) == WPACK_OK, "fourth set, prepared only");
    CHECK(set_is("r.wpack", 3), "the third set survives the crash");
    CHECK_EQ(count_files("^r-0000[123]-of-00003.2.wpack$"), 3); /* unreferenced */
    CHECK_EQ(count_files("^r.wpack.tmp-[0-9]*-[0-9a-f]*.new-r-0000[123]-of-00003.2.wpack$"), 3);
    CHECK_EQ(count_files("^r.wpack.tmp-[0-9]*-[0-9a-f]*.gone-r-0000[123]-of-00003.wpack$"), 3);
    CHECK(write_set("r.wpack", 5, 0) == WPACK_OK, "fifth set after the crash");
    CHECK(set_is("r.wpack", 5), "the fifth set");
    CHECK_EQ(count_files("^r-0000[123]-of-00003.2.wpack$"), 3); /* the free names again */
    CHECK_EQ(count_files("^r-0000[123]-of-00003.wpack$"), 0); /* the third set's, removed */
    CHECK_EQ(count_files("^r"), 4); /* and nothing of the crashed writer's is left */

    /* a file of the user's at a shard's name */
    char path[512];
    snprintf(path, sizeof path, "%s/u-00002-of-00003.wpack", dir);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("mine", f) >= 0 && fclose(f) == 0, "user's file");
    CHECK(write_set("u.wpack", 6, 0) == WPACK_OK, "set beside the user's file");
    CHECK(set_is("u.wpack", 6), "that set");
    size_t n;
    uint8_t *mine = test_slurp(path, &n);
    CHECK(mine && n == 4 && memcmp(mine, "mine", 4) == 0, "the user's file is untouched");
    free(mine);
    CHECK_EQ(count_files("^u-00002-of-00003.2.wpack$"), 1);
}

/* One archive (not a set) written where a set's manifest is: once it is
 * in place the set's shards are gone (they were 500 GB of files no
 * manifest named); a crash before that leaves the set whole; a manifest
 * rewritten over the same shards keeps them. */
static void test_archive_replacing_a_set(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/s.wpack", dir);
    CHECK(write_set("s.wpack", 1, 0) == WPACK_OK, "a set");
    char **old;
    uint32_t nold;
    CHECK(wpack_replaced_shards(path, &old, &nold) == WPACK_OK && nold == 3, "its 3 shards listed");
    for (uint32_t k = 0; k < nold; k++)
        CHECK(strstr(old[k], "/s-0000") != NULL, "shard path %s", old[k]);
    /* which of some files the archive would remove: by inode, any name */
    char s1[600], other_name[600], missing[600];
    snprintf(s1, sizeof s1, "%s", nold == 3 ? old[0] : "");
    snprintf(other_name, sizeof other_name, "%s/another-name.wpack", dir);
    snprintf(missing, sizeof missing, "%s/not-there.npy", dir);
    CHECK(nold == 3 && link(old[1], other_name) == 0, "a hard link to a shard");
    wpack_paths_free(old, nold);
    size_t hit = 9;
    const char *link_name = other_name, *other = missing;
    const char *none[] = {other, NULL, path};
    CHECK(wpack_replaced_among(path, none, 3, &hit) == WPACK_OK && hit == 3,
          "none of a missing file, NULL and the manifest itself: %zu", hit);
    const char *some[] = {other, link_name, s1};
    CHECK(wpack_replaced_among(path, some, 3, &hit) == WPACK_OK && hit == 1,
          "a shard under another name is found first: %zu", hit);
    CHECK(wpack_replaced_among(other, some, 3, &hit) == WPACK_OK && hit == 3,
          "nothing at the path: nothing removed");
    CHECK(wpack_replaced_among(path, NULL, 0, &hit) == WPACK_OK && hit == 0, "no files");
    CHECK(wpack_replaced_among(path, NULL, 1, &hit) == WPACK_E_INVALID_ARGUMENT, "NULL files");
    CHECK(wpack_replaced_among(NULL, some, 3, &hit) == WPACK_E_INVALID_ARGUMENT, "NULL path");
    CHECK(wpack_replaced_among(path, some, 3, NULL) == WPACK_E_INVALID_ARGUMENT, "NULL hit");
    /* a second name of the manifest (a hard link, as a copy would be): its
     * shards name s.wpack, so an archive written there removes none */
    unlink(other_name);
    CHECK(link(path, other_name) == 0, "a hard link to the manifest");
    CHECK(wpack_replaced_shards(other_name, &old, &nold) == WPACK_OK && nold == 0,
          "a second name of the manifest lists none of the set's shards: %u", nold);
    wpack_paths_free(old, nold);
    unlink(other_name);

    /* killed after prepare: the set is whole */
    pid_t pid = fork();
    if (pid == 0) {
        wpack_writer *w;
        int rc = wpack_writer_open(&w, path, NULL) ||
                 wpack_writer_add_tensor(w, "x", WPACK_DTYPE_F32, 1, (uint64_t[]){1}, &(float){2},
                                         4) ||
                 wpack_writer_prepare(w);
        _exit(rc);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "prepared in a child");
    CHECK(set_is("s.wpack", 1), "the set survives a crash before the commit");

    /* committed: one archive, no shards left */
    wpack_writer *w;
    char err[300];
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK &&
              wpack_writer_add_tensor(w, "x", WPACK_DTYPE_F32, 1, (uint64_t[]){1}, &(float){2}, 4) ==
                  WPACK_OK &&
              wpack_writer_finish(w, err, sizeof err) == WPACK_OK,
          "single archive over the set");
    CHECK_EQ(count_files("^s-"), 0);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK && wpack_shard_count(ar) == 0 &&
              wpack_count(ar) == 1,
          "the single archive");
    wpack_close(ar);
    CHECK(wpack_replaced_shards(path, &old, &nold) == WPACK_OK && nold == 0 && !old,
          "a single archive replaces no shards");

    /* a manifest rewritten over the same shards keeps them */
    CHECK(make_shard("m-a.wpack", 0, 4) == 0 && make_shard("m-b.wpack", 4, 4) == 0, "shards");
    const char *shards[] = {"m-a.wpack", "m-b.wpack"};
    CHECK(make_manifest("m.wpack", shards, 2, NULL) == 0, "manifest");
    CHECK(make_manifest("m.wpack", shards, 2, NULL) == 0, "the manifest again, same shards");
    CHECK_EQ(count_files("^m-[ab].wpack$"), 2);
    CHECK(open_manifest("m.wpack", &ar) == WPACK_OK && wpack_shard_count(ar) == 2,
          "the rewritten manifest opens");
    wpack_close(ar);
    CHECK(wpack_replaced_shards(NULL, &old, &nold) == WPACK_E_INVALID_ARGUMENT, "NULL path");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/wpack-shards-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN(test_set_opens_as_one);
    RUN(test_shard_problems);
    RUN(test_external_fields);
    RUN(test_set_verifies_reads);
    RUN(test_writer_streams_a_set);
    RUN(test_writer_set_bool_values);
    RUN(test_aborted_set_leaves_nothing);
    RUN(test_replacing_a_set);
    RUN(test_archive_replacing_a_set);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd))
        return 1;
    return tl_finish();
}
