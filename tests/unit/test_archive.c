/* test_archive.c - the library API end to end: write, open, look up, verify. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"
#include "../../fuzz/fix_checksums.h"

static char dir[256];

static void path_in_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static int count_tmp_files(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp- ", dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* A model-like archive used by several tests. */
static int write_model(const char *path, uint32_t alignment, uint32_t bins)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = alignment;
    opt.histogram_bins = bins;
    wpack_writer *w;
    if (wpack_writer_open(&w, path, &opt))
        return 1;
    float wq[6] = {-1.5f, 0.25f, 2.0f, -3.0f, 4.5f, 0.0f};
    uint64_t d23[2] = {2, 3}, d2[1] = {2}, d0[1] = {0};
    uint16_t bf[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 */
    int8_t i8[4] = {-128, -1, 0, 127};
    int rc = 0;
    rc |= wpack_writer_add_tensor(w, "encoder.layers.0.attn.q_proj.weight", WPACK_DTYPE_F32, 2, d23,
                                  wq, sizeof wq);
    rc |= wpack_writer_add_tensor(w, "encoder.layers.0.attn.q_proj.bias", WPACK_DTYPE_BF16, 1, d2, bf,
                                  sizeof bf);
    rc |= wpack_writer_add_tensor(w, "encoder.layers.01.x", WPACK_DTYPE_I8, 1, (uint64_t[]){4}, i8, 4);
    rc |= wpack_writer_add_tensor(w, "encoder.empty", WPACK_DTYPE_F32, 1, d0, NULL, 0);
    float one = 1.0f;
    rc |= wpack_writer_add_splat(w, "encoder.norm.weight", WPACK_DTYPE_F32, 1, (uint64_t[]){1000},
                                 &one, 4);
    rc |= wpack_writer_add_alias(w, "head.weight", "encoder.layers.0.attn.q_proj.weight");
    rc |= wpack_writer_add_name(w, "p_encoder_layers_0_attn_q_proj_weight",
                                "encoder.layers.0.attn.q_proj.weight");
    rc |= wpack_writer_add_name(w, "_param_constant0", "encoder.layers.0.attn.q_proj.bias");
    rc |= wpack_writer_set_string(w, "model.name", "tiny-encoder");
    rc |= wpack_writer_set_i64(w, "epoch", -3);
    rc |= wpack_writer_set_f64(w, "lr", 0.125);
    rc |= wpack_writer_set_bool(w, "trained", 1);
    rc |= wpack_writer_set_bytes(w, "blob", "\x00\x01\x02", 3);
    const char *names[] = {"a", "bé"};
    rc |= wpack_writer_set_array(w, "tags", WPACK_META_STRING, 2, names);
    rc |= wpack_writer_set_array(w, "dims", WPACK_META_I64, 3, (int64_t[]){1, 2, 3});
    double mn = -23.5, mx = 18.9, am = 23.5, mean = 0.5, var = 4.0;
    double edges[3] = {-23.5, 0, 18.9};
    uint64_t counts[2] = {40, 60};
    double pct[4] = {1, -20, 99, 17};
    wpack_stats_in act = {.key = "0", .kind = WPACK_STATS_ACTIVATION, .channels = 1, .count = 100,
                          .min = &mn, .max = &mx, .absmax = &am, .mean = &mean, .variance = &var,
                          .hist_bins = 2, .hist_edges = edges, .hist_counts = counts,
                          .percentile_count = 2, .percentiles = pct};
    rc |= wpack_writer_add_stats(w, &act);
    double cmn[2] = {-3, -1.5}, cmx[2] = {2, 4.5}, cam[2] = {3, 4.5}, cme[2] = {0, 1}, cva[2] = {1, 2};
    wpack_stats_in ch = {.key = "encoder.layers.0.attn.q_proj.weight", .kind = WPACK_STATS_WEIGHT,
                         .granularity = WPACK_GRAN_CHANNEL, .axis = 0, .channels = 2, .count = 6,
                         .min = cmn, .max = cmx, .absmax = cam, .mean = cme, .variance = cva};
    rc |= wpack_writer_add_stats(w, &ch);
    if (rc) {
        printf("  writer: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return 1;
    }
    char err[512];
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc)
        printf("  finish: %s\n", err);
    return rc;
}

static void test_roundtrip_file_and_memory(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "model.wpack");
    CHECK(write_model(path, 64, 0) == 0, "write");
    size_t len;
    unsigned char *buf = test_slurp(path, &len);
    CHECK(buf != NULL, "read back");
    for (int mode = 0; mode < 2 && buf; mode++) {
        wpack_archive *ar;
        int rc = mode ? wpack_open_memory(&ar, buf, len, WPACK_OPEN_VERIFY)
                      : wpack_open_file(&ar, path, WPACK_OPEN_VERIFY);
        CHECK(rc == WPACK_OK, "open (%s): %s", mode ? "memory" : "file", wpack_errmsg(ar));
        if (rc) {
            wpack_close(ar);
            continue;
        }
        CHECK_EQ(wpack_count(ar), 6);
        wpack_tensor t;
        CHECK(wpack_find(ar, "encoder.layers.0.attn.q_proj.weight", &t) == WPACK_OK, "find");
        CHECK_EQ(t.kind, WPACK_KIND_DATA);
        CHECK_EQ(t.dtype, WPACK_DTYPE_F32);
        CHECK_EQ(t.rank, 2);
        CHECK_EQ(t.dims[1], 3);
        CHECK_EQ(t.nbytes, 24);
        CHECK_EQ(t.offset % 64, 0);
        CHECK(t.name[t.name_len] == 0, "names are C strings");
        CHECK(((const float *)t.data)[4] == 4.5f, "view bytes");
        /* zero-copy: the view points into the buffer */
        if (mode)
            CHECK((const unsigned char *)t.data >= buf && (const unsigned char *)t.data < buf + len,
                  "view inside the caller's buffer");
        wpack_tensor a;
        CHECK(wpack_find(ar, "head.weight", &a) == WPACK_OK, "alias found");
        CHECK_EQ(a.kind, WPACK_KIND_ALIAS);
        CHECK(a.data == t.data, "alias shares the bytes");
        CHECK_EQ(a.alias_target, t.index);
        CHECK(wpack_find(ar, "p_encoder_layers_0_attn_q_proj_weight", &a) == WPACK_OK &&
                  a.index == t.index, "name map lookup");
        CHECK(wpack_find(ar, "_param_constant0", &a) == WPACK_OK &&
                  strcmp(a.name, "encoder.layers.0.attn.q_proj.bias") == 0, "torch-mlir name");
        CHECK(wpack_find(ar, "nope", &a) == WPACK_E_NOT_FOUND, "missing");
        wpack_tensor s;
        CHECK(wpack_find(ar, "encoder.norm.weight", &s) == WPACK_OK && s.kind == WPACK_KIND_SPLAT &&
                  s.data == NULL && s.nbytes == 4000, "splat");
        float fl[3];
        CHECK(wpack_read(ar, s.index, 3996 - 8, fl, 12) == WPACK_OK && fl[0] == 1 && fl[2] == 1,
              "splat read expands the fill");
        CHECK(wpack_read(ar, s.index, 3996, fl, 8) == WPACK_E_INVALID_ARGUMENT, "read past end");
        CHECK(wpack_find(ar, "encoder.empty", &s) == WPACK_OK && s.nbytes == 0, "empty tensor");
        uint64_t first, count;
        CHECK(wpack_prefix_range(ar, "encoder.layers.0.", &first, &count) == WPACK_OK, "prefix");
        CHECK_EQ(count, 2);
        CHECK(wpack_prefix_range(ar, "encoder.", &first, &count) == WPACK_OK && count == 5, "prefix 5");
        CHECK(wpack_prefix_range(ar, "", &first, &count) == WPACK_OK && count == 6, "all");
        CHECK(wpack_prefix_range(ar, "zzz", &first, &count) == WPACK_E_NOT_FOUND && count == 0, "none");
        /* sorted order */
        for (uint64_t i = 1; i < wpack_count(ar); i++) {
            wpack_tensor p, q;
            wpack_tensor_at(ar, i - 1, &p);
            wpack_tensor_at(ar, i, &q);
            CHECK(strcmp(p.name, q.name) < 0, "sorted %s < %s", p.name, q.name);
        }
        wpack_meta m;
        CHECK(wpack_meta_find(ar, "model.name", &m) == WPACK_OK && m.type == WPACK_META_STRING &&
                  strcmp(m.str, "tiny-encoder") == 0, "string meta");
        CHECK(wpack_meta_find(ar, "epoch", &m) == WPACK_OK && m.i64 == -3, "i64 meta");
        CHECK(wpack_meta_find(ar, "lr", &m) == WPACK_OK && m.f64 == 0.125, "f64 meta");
        CHECK(wpack_meta_find(ar, "trained", &m) == WPACK_OK && m.boolean == 1, "bool meta");
        CHECK(wpack_meta_find(ar, "blob", &m) == WPACK_OK && m.count == 3 &&
                  memcmp(m.bytes, "\x00\x01\x02", 3) == 0, "bytes meta");
        CHECK(wpack_meta_find(ar, "wpack.producer", &m) == WPACK_OK &&
                  strncmp(m.str, "wpack ", 6) == 0, "producer");
        wpack_meta e;
        CHECK(wpack_meta_find(ar, "tags", &m) == WPACK_OK && m.count == 2 &&
                  wpack_meta_elem(ar, &m, 1, &e) == WPACK_OK && strcmp(e.str, "bé") == 0, "str array");
        CHECK(wpack_meta_elem(ar, &m, 2, &e) == WPACK_E_INVALID_ARGUMENT, "array bound");
        CHECK(wpack_meta_find(ar, "dims", &m) == WPACK_OK && wpack_meta_elem(ar, &m, 2, &e) == 0 &&
                  e.i64 == 3, "i64 array");
        wpack_stats st;
        CHECK(wpack_stats_find(ar, "0", WPACK_STATS_ACTIVATION, &st) == WPACK_OK, "activation");
        CHECK(st.min == -23.5 && st.max == 18.9 && st.count == 100 && st.hist_bins == 2, "act values");
        double lo, hi, q, v;
        uint64_t n;
        wpack_stats_bin(&st, 1, &lo, &hi, &n);
        CHECK(lo == 0 && hi == 18.9 && n == 60, "bin");
        wpack_stats_percentile(&st, 1, &q, &v);
        CHECK(q == 99 && v == 17, "percentile");
        CHECK(wpack_stats_find(ar, "encoder.layers.0.attn.q_proj.weight", WPACK_STATS_WEIGHT, &st) ==
                  WPACK_OK && st.granularity == WPACK_GRAN_CHANNEL && st.channels == 2 &&
                  wpack_stats_value(&st, WPACK_STAT_MAX, 1) == 4.5, "user per-channel stats win");
        CHECK(wpack_stats_find(ar, "encoder.layers.0.attn.q_proj.bias", WPACK_STATS_WEIGHT, &st) ==
                  WPACK_OK && st.min == -2 && st.max == 1 && st.absmax == 2 && st.count == 2,
              "auto bf16 weight stats");
        CHECK(wpack_stats_find(ar, "encoder.layers.01.x", WPACK_STATS_WEIGHT, &st) == WPACK_E_NOT_FOUND,
              "no stats for int tensors");
        CHECK(wpack_verify_all(ar, NULL, NULL) == WPACK_OK, "verify");
        wpack_info in;
        wpack_get_info(ar, &in);
        CHECK(in.generation == 1 && in.alignment == 64 && in.file_length == len && !in.recovered,
              "info");
        wpack_close(ar);
    }
    free(buf);
}

static void test_auto_stats_and_histogram(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "stats.wpack");
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.histogram_bins = 10;
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_OK, "open");
    enum { N = 100003 };
    float *x = malloc(N * sizeof *x);
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < N; i++) {
        x[i] = (float)sin(i * 0.37) * 3 + 1;
        if (i == 77)
            x[i] = NAN; /* ignored by stats */
        if (i == 78)
            x[i] = INFINITY;
        if (i != 77 && i != 78) {
            sum += x[i];
            mn = fmin(mn, x[i]);
            mx = fmax(mx, x[i]);
        }
    }
    double mean = sum / (N - 2), m2 = 0;
    for (int i = 0; i < N; i++)
        if (i != 77 && i != 78)
            m2 += (x[i] - mean) * (x[i] - mean);
    /* stream it in odd-sized pieces that split elements */
    CHECK(wpack_writer_begin_tensor(w, "w", WPACK_DTYPE_F32, 1, (uint64_t[]){N}) == WPACK_OK, "begin");
    const unsigned char *p = (const unsigned char *)x;
    size_t left = N * sizeof *x, step = 4093;
    while (left) {
        size_t k = left < step ? left : step;
        CHECK(wpack_writer_write(w, p, k) == WPACK_OK, "write");
        p += k;
        left -= k;
    }
    CHECK(wpack_writer_end_tensor(w) == WPACK_OK, "end");
    char err[512];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "reopen %s", wpack_errmsg(ar));
    wpack_stats s;
    CHECK(wpack_stats_find(ar, "w", WPACK_STATS_WEIGHT, &s) == WPACK_OK, "stats");
    CHECK(s.count == N - 2, "count %llu", (unsigned long long)s.count);
    CHECK(s.min == mn && s.max == mx, "min/max");
    CHECK(fabs(s.mean - mean) < 1e-9, "mean %.17g vs %.17g", s.mean, mean);
    CHECK(fabs(s.variance - m2 / (N - 2)) < 1e-9, "variance %.17g vs %.17g", s.variance, m2 / (N - 2));
    CHECK(s.hist_bins == 10, "bins");
    uint64_t total = 0;
    for (uint32_t b = 0; b < s.hist_bins; b++) {
        double lo, hi;
        uint64_t n;
        wpack_stats_bin(&s, b, &lo, &hi, &n);
        total += n;
        if (b == 0)
            CHECK(lo == mn, "first edge");
        if (b == 9)
            CHECK(hi == mx, "last edge");
    }
    CHECK_EQ(total, N - 2);
    wpack_close(ar);
    free(x);
}

static void test_writer_rejects(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "rejects.wpack");
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    float f[2] = {1, 2};
    uint64_t d[1] = {2};
    CHECK(wpack_writer_add_tensor(w, "a", WPACK_DTYPE_F32, 1, d, f, 8) == WPACK_OK, "a");
    CHECK(wpack_writer_add_tensor(w, "a", WPACK_DTYPE_F32, 1, d, f, 8) == WPACK_E_EXISTS, "dup");
    CHECK(strstr(wpack_writer_errmsg(w), "'a'") != NULL, "message names it: %s", wpack_writer_errmsg(w));
    CHECK(wpack_writer_add_tensor(w, "b", WPACK_DTYPE_F32, 1, d, f, 7) == WPACK_E_SIZE, "size");
    CHECK(wpack_writer_add_tensor(w, "", WPACK_DTYPE_F32, 1, d, f, 8) == WPACK_E_NAME, "empty");
    CHECK(wpack_writer_add_tensor(w, "x\x01y", WPACK_DTYPE_F32, 1, d, f, 8) == WPACK_E_NAME, "ctrl");
    CHECK(wpack_writer_add_tensor(w, "\xc0\xaf", WPACK_DTYPE_F32, 1, d, f, 8) == WPACK_E_NAME, "utf8");
    CHECK(wpack_writer_add_tensor(w, "c", 99, 1, d, f, 8) == WPACK_E_DTYPE, "dtype");
    uint64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(wpack_writer_add_tensor(w, "c", WPACK_DTYPE_F32, 9, d9, f, 4) == WPACK_E_RANK, "rank");
    uint64_t big[2] = {1ull << 40, 1ull << 40};
    CHECK(wpack_writer_add_tensor(w, "c", WPACK_DTYPE_F32, 2, big, f, 8) == WPACK_E_OVERFLOW, "ovf");
    CHECK(wpack_writer_write(w, f, 4) == WPACK_E_STATE, "write outside");
    CHECK(wpack_writer_add_splat(w, "s", WPACK_DTYPE_F32, 1, d, f, 2) == WPACK_E_SIZE, "fill size");
    /* a block dtype tensor has rank >= 1, even with 1-element blocks (spec 7.2) */
    int one;
    CHECK_EQ(wpack_writer_add_block_dtype(w, "one", 1, 4, NULL, 0, &one), WPACK_OK);
    CHECK_EQ(wpack_writer_add_tensor(w, "b0", one, 0, NULL, f, 4), WPACK_E_SHAPE);
    CHECK_EQ(wpack_writer_add_splat(w, "b0", one, 0, NULL, f, 4), WPACK_E_SHAPE);
    CHECK_EQ(wpack_writer_add_tensor(w, "b1", one, 1, d, f, 8), WPACK_OK);
    CHECK(wpack_writer_set_i64(w, "k", 1) == WPACK_OK, "meta");
    CHECK(wpack_writer_set_i64(w, "k", 2) == WPACK_E_EXISTS, "meta twice");
    CHECK(wpack_writer_add_name(w, "a", "a") == WPACK_E_EXISTS, "map name = entry name");
    CHECK(wpack_writer_begin_tensor(w, "long", WPACK_DTYPE_F32, 1, d) == WPACK_OK, "begin");
    CHECK(wpack_writer_add_tensor(w, "z", WPACK_DTYPE_F32, 1, d, f, 8) == WPACK_E_STATE, "nested");
    CHECK(wpack_writer_write(w, f, 12) == WPACK_E_SIZE, "too many bytes");
    CHECK(wpack_writer_write(w, f, 4) == WPACK_OK, "partial");
    CHECK(wpack_writer_end_tensor(w) == WPACK_E_SIZE, "short tensor");
    char err[512];
    CHECK(wpack_writer_finish(w, err, sizeof err) != WPACK_OK, "cannot finish after a short tensor");
    CHECK(access(path, F_OK) != 0, "nothing appeared at the path");
    CHECK_EQ(count_tmp_files(), 0);

    /* references checked at finish */
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open 2");
    CHECK(wpack_writer_add_alias(w, "t", "missing") == WPACK_OK, "alias accepted until finish");
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_ALIAS && strstr(err, "missing"),
          "dangling alias: %s", err);
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open 3");
    CHECK(wpack_writer_add_name(w, "p_x", "x") == WPACK_OK, "map");
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_NAMEMAP, "dangling map: %s", err);
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open 4");
    double v = 1, zero = 0;
    wpack_stats_in s = {.key = "ghost", .kind = WPACK_STATS_WEIGHT, .channels = 1, .count = 1,
                        .min = &v, .max = &v, .absmax = &v, .mean = &v, .variance = &zero};
    CHECK(wpack_writer_add_stats(w, &s) == WPACK_OK, "stats accepted until finish");
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_STATS, "stats for no tensor: %s", err);
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open 5");
    double bad = -1;
    s.key = "act";
    s.kind = WPACK_STATS_ACTIVATION;
    s.absmax = &bad;
    CHECK(wpack_writer_add_stats(w, &s) == WPACK_E_STATS, "inconsistent absmax");
    wpack_writer_abort(w);
    CHECK(access(path, F_OK) != 0, "still nothing at the path");
    CHECK_EQ(count_tmp_files(), 0);
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.alignment = 100;
    CHECK(wpack_writer_open(&w, path, &o) == WPACK_E_ALIGNMENT, "alignment");
    wpack_writer_abort(w);
}

/* A refused metadata value leaves nothing in the archive: the bytes of a
 * set_bytes whose key was refused (set twice, or breaking the name rule)
 * stayed in aux, unreferenced bytes between aux items (spec 17 rule 3)
 * that the caller had been told were not taken. */
static void test_writer_refused_bytes_leave_nothing(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "refused.wpack");
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    CHECK_EQ(wpack_writer_set_bytes(w, "k", "kept", 4), WPACK_OK);
    CHECK_EQ(wpack_writer_set_bytes(w, "k", "SECRET-ONE", 10), WPACK_E_EXISTS);
    CHECK_EQ(wpack_writer_set_bytes(w, "bad\x01key", "SECRET-TWO", 10), WPACK_E_NAME);
    CHECK_EQ(wpack_writer_set_bytes(w, "k2", "also", 4), WPACK_OK);
    char err[256];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    size_t len;
    unsigned char *f = test_slurp(path, &len);
    CHECK(f != NULL, "read back");
    for (size_t i = 0; f && i + 6 <= len; i++)
        CHECK(memcmp(f + i, "SECRET", 6) != 0, "refused bytes at offset %zu", i);
    wpack_archive *ar;
    wpack_meta m;
    CHECK_EQ(wpack_open_memory(&ar, f, len, 0), WPACK_OK);
    CHECK(wpack_meta_find(ar, "k2", &m) == WPACK_OK && m.count == 4 && !memcmp(m.bytes, "also", 4),
          "the next value is intact");
    wpack_close(ar);
    free(f);
}

/* A writer that failed keeps saying why: a failed open refuses every call
 * with the open's error (it used to take tensors, returning WPACK_OK, and
 * crashed when the open failed before its buffers existed), and after a
 * failure that breaks the file (a short tensor) a later refused call
 * (a NULL string) neither hides the cause nor changes finish's result.
 * NULL path and NULL dims are refused, not dereferenced. */
static void test_writer_failed_stays_failed(void)
{
    char path[512], bad[600], err[600] = "";
    path_in_dir(path, sizeof path, "failed.wpack");
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.wpack", dir);
    uint64_t dims[1] = {4};
    float f[4] = {1, 2, 3, 4};
    wpack_writer *w;
    wpack_writer_options o;
    wpack_writer_options_init(&o);
    o.alignment = 3; /* refused before the writer has buffers */
    CHECK(wpack_writer_open(&w, path, &o) == WPACK_E_ALIGNMENT, "bad alignment");
    CHECK(wpack_writer_add_tensor(w, "x", WPACK_DTYPE_F32, 1, dims, f, sizeof f) ==
              WPACK_E_ALIGNMENT, "add_tensor after a failed open");
    CHECK(wpack_writer_set_string(w, "k", "v") == WPACK_E_ALIGNMENT, "set_string after it");
    CHECK(strstr(wpack_writer_errmsg(w), "alignment 3"), "%s", wpack_writer_errmsg(w));
    wpack_writer_abort(w);
    CHECK(wpack_writer_open(&w, bad, NULL) == WPACK_E_IO, "no directory");
    CHECK(wpack_writer_add_tensor(w, "x", WPACK_DTYPE_F32, 1, dims, f, sizeof f) == WPACK_E_IO,
          "add_tensor after a failed open");
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_IO && strstr(err, "no/such"), "%s",
          err);
    CHECK(wpack_writer_open(&w, NULL, NULL) == WPACK_E_INVALID_ARGUMENT, "NULL path");
    wpack_writer_abort(w);

    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    CHECK(wpack_writer_add_tensor(w, "n", WPACK_DTYPE_F32, 1, NULL, f, sizeof f) ==
              WPACK_E_INVALID_ARGUMENT, "NULL dims");
    CHECK(wpack_writer_add_splat(w, "s", WPACK_DTYPE_F32, 1, NULL, f, sizeof *f) ==
              WPACK_E_INVALID_ARGUMENT, "NULL dims for a splat");
    CHECK(wpack_writer_begin_tensor(w, "z", WPACK_DTYPE_F32, 1, dims) == WPACK_OK, "begin");
    CHECK(wpack_writer_write(w, f, 4) == WPACK_OK, "a quarter");
    CHECK(wpack_writer_end_tensor(w) == WPACK_E_SIZE, "short tensor");
    CHECK(wpack_writer_set_string(w, "k", NULL) == WPACK_E_SIZE, "a later refused call");
    CHECK(strstr(wpack_writer_errmsg(w), "'z'"), "message still names the short tensor: %s",
          wpack_writer_errmsg(w));
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_E_SIZE && strstr(err, "'z'"), "%s", err);
    CHECK(access(path, F_OK) != 0, "nothing at the path");
    CHECK_EQ(count_tmp_files(), 0);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, NULL, 0) == WPACK_E_INVALID_ARGUMENT, "reader: NULL path");
    wpack_close(ar);
}

static int has_control_byte(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* A name the format refuses is refused first, escaped in the message: the
 * other checks' messages (a rank, a NULL value, a bad array or stats
 * record) quote names as they are and never see one with control bytes. */
static void test_writer_messages_escape_names(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "esc.wpack");
    const char *bad = "a\x1b]0;pwned\x07\x1b[31m";
    uint64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float f = 1;
    double v = 1;
    wpack_stats_in st = {.key = bad, .kind = 99, .channels = 1, .min = &v, .max = &v,
                         .absmax = &v, .mean = &v, .variance = &v};
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    struct {
        const char *what;
        int rc;
    } calls[6];
    calls[0].what = "add_tensor, rank 9";
    calls[0].rc = wpack_writer_add_tensor(w, bad, WPACK_DTYPE_F32, 9, dims, &f, 4);
    const char *m0 = wpack_writer_errmsg(w);
    CHECK(!has_control_byte(m0) && strstr(m0, "\\x1b"), "%s escaped: %s", calls[0].what, m0);
    calls[1].what = "add_splat, NULL fill";
    calls[1].rc = wpack_writer_add_splat(w, bad, WPACK_DTYPE_F32, 1, dims, NULL, 4);
    CHECK(!has_control_byte(wpack_writer_errmsg(w)), "%s", calls[1].what);
    calls[2].what = "set_string, NULL value";
    calls[2].rc = wpack_writer_set_string(w, bad, NULL);
    CHECK(!has_control_byte(wpack_writer_errmsg(w)), "%s", calls[2].what);
    calls[3].what = "set_array, bad type";
    calls[3].rc = wpack_writer_set_array(w, bad, 99, 1, &v);
    CHECK(!has_control_byte(wpack_writer_errmsg(w)), "%s", calls[3].what);
    calls[4].what = "add_stats, bad kind";
    calls[4].rc = wpack_writer_add_stats(w, &st);
    CHECK(!has_control_byte(wpack_writer_errmsg(w)), "%s", calls[4].what);
    calls[5].what = "add_external, no entry";
    calls[5].rc = wpack_writer_add_external(w, bad, 0, NULL);
    CHECK(!has_control_byte(wpack_writer_errmsg(w)), "%s", calls[5].what);
    for (int i = 0; i < 6; i++)
        CHECK(calls[i].rc == WPACK_E_NAME, "%s: %s", calls[i].what, wpack_error_name(calls[i].rc));
    wpack_writer_abort(w);
}

/* Bools are 0 or 1 (spec, dtypes): the writer refuses other bytes in a
 * whole tensor (no entry is left behind), in a streamed write (the write
 * changes nothing and the tensor can go on), and as a splat fill; 0/1 data
 * round-trips. */
static void test_writer_bool_values(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "bools.wpack");
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    uint8_t good[19], bad[19];
    for (int i = 0; i < 19; i++)
        good[i] = bad[i] = (uint8_t)(i % 2);
    bad[17] = 2;
    uint64_t d[1] = {19};
    CHECK_EQ(wpack_writer_add_tensor(w, "b", WPACK_DTYPE_BOOL, 1, d, bad, 19), WPACK_E_INVALID_ARGUMENT);
    CHECK(strstr(wpack_writer_errmsg(w), "'b'") && strstr(wpack_writer_errmsg(w), "byte 17"),
          "message names the tensor and the byte: %s", wpack_writer_errmsg(w));
    CHECK_EQ(wpack_writer_add_tensor(w, "b", WPACK_DTYPE_BOOL, 1, d, good, 19), WPACK_OK);
    CHECK_EQ(wpack_writer_begin_tensor(w, "s", WPACK_DTYPE_BOOL, 1, d), WPACK_OK);
    CHECK_EQ(wpack_writer_write(w, good, 10), WPACK_OK);
    CHECK_EQ(wpack_writer_write(w, bad + 10, 9), WPACK_E_INVALID_ARGUMENT);
    CHECK(strstr(wpack_writer_errmsg(w), "byte 17 of the tensor"),
          "a streamed write names the byte's offset in the tensor: %s", wpack_writer_errmsg(w));
    CHECK_EQ(wpack_writer_write(w, good + 10, 9), WPACK_OK);
    CHECK_EQ(wpack_writer_end_tensor(w), WPACK_OK);
    uint8_t two = 2, one = 1;
    CHECK_EQ(wpack_writer_add_splat(w, "f", WPACK_DTYPE_BOOL, 1, d, &two, 1), WPACK_E_INVALID_ARGUMENT);
    CHECK_EQ(wpack_writer_add_splat(w, "f", WPACK_DTYPE_BOOL, 1, d, &one, 1), WPACK_OK);
    char err[512];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    CHECK_EQ(wpack_count(ar), 3u);
    wpack_tensor t;
    CHECK_EQ(wpack_find(ar, "s", &t), WPACK_OK);
    CHECK(t.data && memcmp(t.data, good, 19) == 0, "streamed bools read back");
    wpack_close(ar);
}

static int count_bytes(void *user, const void *p, size_t n)
{
    (void)p;
    *(size_t *)user += n;
    return 0;
}

/* A checked read hands out bools only as 0 and 1: whole, in part, streamed,
 * as a view, a second time (the hash passed, the values did not); a part
 * read without chunk checksums checks the whole tensor, so any part is
 * refused; an unchecked read hands out the bytes as they are (spec 21.17).
 * b.mask's byte 257 is 0x80 in buf. */
static void check_reads_refuse_bad_bools(const unsigned char *buf, size_t len)
{
    wpack_archive *ar;
    wpack_tensor t;
    uint8_t out[300];
    CHECK_EQ(wpack_open_memory(&ar, buf, len, WPACK_OPEN_NO_VERIFY_READS), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "b.mask", &t), WPACK_OK);
    for (int pass = 0; pass < 2; pass++) {
        CHECK_EQ(wpack_read_ex(ar, t.index, 0, out, 300, WPACK_READ_VERIFY), WPACK_E_VALUE);
        CHECK(strstr(wpack_errmsg(ar), "'b.mask'") && strstr(wpack_errmsg(ar), "bool byte 257 is 128"),
              "whole read, pass %d: %s", pass, wpack_errmsg(ar));
    }
    CHECK_EQ(wpack_read_ex(ar, t.index, 250, out, 10, WPACK_READ_VERIFY), WPACK_E_VALUE);
    CHECK(strstr(wpack_errmsg(ar), "bool byte 257 is 128"), "part: %s", wpack_errmsg(ar));
    CHECK_EQ(wpack_read_ex(ar, t.index, 0, out, 250, WPACK_READ_VERIFY), WPACK_E_VALUE);
    size_t seen = 0;
    CHECK_EQ(wpack_read_stream(ar, t.index, count_bytes, &seen, WPACK_READ_VERIFY), WPACK_E_VALUE);
    FILE *f = tmpfile();
    CHECK(f != NULL, "tmpfile");
    if (f) {
        CHECK_EQ(wpack_read_to_fd(ar, t.index, fileno(f), WPACK_READ_VERIFY), WPACK_E_VALUE);
        fclose(f);
    }
    CHECK_EQ(wpack_read_ex(ar, t.index, 0, out, 300, 0), WPACK_OK);
    CHECK(out[257] == 0x80, "a plain read: the bytes as stored");
    wpack_close(ar);
    CHECK_EQ(wpack_open_memory(&ar, buf, len, 0), WPACK_OK); /* reads checked by default */
    CHECK_EQ(wpack_find(ar, "b.mask", &t), WPACK_OK);
    const void *view;
    CHECK_EQ(wpack_tensor_view_range(ar, t.index, 200, 100, &view), WPACK_E_VALUE);
    CHECK(view == NULL, "no view of a bad bool");
    CHECK_EQ(wpack_read_ex(ar, t.index, 0, out, 300, 0), WPACK_E_VALUE);
    wpack_close(ar);
}

/* Another writer's archive may hold bool bytes other than 0/1 (checksums
 * right): a plain open takes it, verification names the byte (VALUE). */
static void test_verify_bool_values(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "badbools.wpack");
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    uint8_t v[300] = {0};
    for (int i = 0; i < 300; i++)
        v[i] = (uint8_t)(i % 3 == 0);
    uint64_t d[1] = {300};
    CHECK_EQ(wpack_writer_add_tensor(w, "a.mask", WPACK_DTYPE_BOOL, 1, d, v, 300), WPACK_OK);
    CHECK_EQ(wpack_writer_add_tensor(w, "b.mask", WPACK_DTYPE_BOOL, 1, d, v, 300), WPACK_OK);
    char err[512];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "good bools verify");
    wpack_tensor t;
    CHECK_EQ(wpack_find(ar, "b.mask", &t), WPACK_OK);
    uint64_t at = t.offset + 257;
    wpack_close(ar);
    size_t len;
    unsigned char *buf = test_slurp(path, &len);
    CHECK(buf && at < len, "read back");
    buf[at] = 0x80;
    fix_checksums(buf, len, 1);
    CHECK_EQ(wpack_open_memory(&ar, buf, len, 0), WPACK_OK);
    CHECK_EQ(wpack_verify_all(ar, NULL, NULL), WPACK_E_VALUE);
    CHECK(strstr(wpack_errmsg(ar), "'b.mask'") && strstr(wpack_errmsg(ar), "bool byte 257 is 128"),
          "message names the tensor, the byte and its value: %s", wpack_errmsg(ar));
    CHECK_EQ(wpack_find(ar, "a.mask", &t), WPACK_OK);
    CHECK_EQ(wpack_verify_entry(ar, t.index), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "b.mask", &t), WPACK_OK);
    CHECK_EQ(wpack_verify_entry(ar, t.index), WPACK_E_VALUE);
    wpack_close(ar);
    wpack_archive *ar2;
    CHECK_EQ(wpack_open_memory(&ar2, buf, len, WPACK_OPEN_VERIFY), WPACK_E_VALUE);
    wpack_close(ar2);
    check_reads_refuse_bad_bools(buf, len);
    free(buf);
}

/* A bool tensor big enough for wpack_read_to_fd to copy inside the kernel
 * (64 KiB and more) is streamed instead when checked, so its bytes are
 * checked to be 0 or 1: copied, the 2 went out. */
static void test_read_to_fd_checks_big_bools(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "bigbools.wpack");
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "open");
    static uint8_t v[100000];
    uint64_t d[1] = {sizeof v};
    CHECK_EQ(wpack_writer_add_tensor(w, "m", WPACK_DTYPE_BOOL, 1, d, v, sizeof v), WPACK_OK);
    char err[512];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    wpack_archive *ar;
    wpack_tensor t;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK && wpack_find(ar, "m", &t) == WPACK_OK,
          "find m");
    uint64_t at = t.offset + 77777;
    wpack_close(ar);
    size_t len;
    unsigned char *buf = test_slurp(path, &len);
    CHECK(buf && at < len, "read back");
    if (!buf || at >= len)
        return;
    buf[at] = 2;
    fix_checksums(buf, len, 1);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "write back");
    free(buf);
    CHECK_EQ(wpack_open_file(&ar, path, 0), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "m", &t), WPACK_OK);
    FILE *out = tmpfile();
    CHECK(out != NULL, "tmpfile");
    if (out) {
        CHECK_EQ(wpack_read_to_fd(ar, t.index, fileno(out), 0), WPACK_E_VALUE);
        CHECK(strstr(wpack_errmsg(ar), "bool byte 77777 is 2"), "message: %s", wpack_errmsg(ar));
        fclose(out);
    }
    wpack_close(ar);
}

/* Set entry `name`'s dtype code in the raw archive buf, checksums refreshed. */
static void retype_entry(unsigned char *buf, size_t len, const char *name, int dtype)
{
    wpack_archive *ar;
    wpack_tensor t;
    CHECK(wpack_open_memory(&ar, buf, len, 0) == WPACK_OK && wpack_find(ar, name, &t) == WPACK_OK,
          "find %s", name);
    wpack_close(ar);
    const unsigned char *ix = buf + wpk_ld64(buf + WPK_H_INDEX_OFFSET_OFF);
    uint64_t entries = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_ENTRIES);
    unsigned char *rec = buf + (ix - buf) + entries + t.index * WPK_ENTRY_SIZE;
    rec[WPK_E_DTYPE_OFF] = (unsigned char)dtype;
    fix_checksums(buf, len, 1);
}

/* wpack_verify_all's reports: how many, and each code. */
typedef struct {
    int n;
    int code[4];
    uint64_t entry[4];
} bad_log;

static void log_bad(void *user, uint64_t entry, int code, const char *message)
{
    bad_log *l = user;
    (void)message;
    if (l->n < 4) {
        l->code[l->n] = code;
        l->entry[l->n] = entry;
    }
    l->n++;
}

/* A compressed bool tensor is checked in the decoding pass, a bool splat by
 * its fill: u8 entries written with other values, then retyped to bool
 * (the data and its decoded checksum stay as they were). */
static void test_verify_bool_compressed_and_splat(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "badbools_z.wpack");
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.compress_level = 3;
    opt.compress_min = 0;
    opt.compress_chunk = 4096;
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_OK, "open");
    static uint8_t v[20000];
    v[12345] = 9;
    uint64_t d[1] = {20000};
    CHECK_EQ(wpack_writer_add_tensor(w, "z.mask", WPACK_DTYPE_U8, 1, d, v, sizeof v), WPACK_OK);
    uint8_t three = 3;
    CHECK_EQ(wpack_writer_add_splat(w, "s.mask", WPACK_DTYPE_U8, 1, d, &three, 1), WPACK_OK);
    char err[512];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    size_t len;
    unsigned char *buf = test_slurp(path, &len);
    CHECK(buf != NULL, "read back");
    retype_entry(buf, len, "z.mask", WPACK_DTYPE_BOOL);
    retype_entry(buf, len, "s.mask", WPACK_DTYPE_BOOL);
    wpack_archive *ar;
    wpack_tensor t;
    CHECK_EQ(wpack_open_memory(&ar, buf, len, 0), WPACK_OK);
    CHECK_EQ(wpack_find(ar, "z.mask", &t), WPACK_OK);
    CHECK(t.dtype == WPACK_DTYPE_BOOL && t.codec == WPACK_CODEC_ZSTD, "a compressed bool tensor");
    CHECK_EQ(wpack_verify_entry(ar, t.index), WPACK_E_VALUE);
    CHECK(strstr(wpack_errmsg(ar), "'z.mask'") && strstr(wpack_errmsg(ar), "bool byte 12345 is 9"),
          "message: %s", wpack_errmsg(ar));
    CHECK_EQ(wpack_find(ar, "s.mask", &t), WPACK_OK);
    CHECK(t.dtype == WPACK_DTYPE_BOOL && t.fill, "a bool splat");
    CHECK_EQ(wpack_verify_entry(ar, t.index), WPACK_E_VALUE);
    CHECK(strstr(wpack_errmsg(ar), "'s.mask'") && strstr(wpack_errmsg(ar), "bool fill is 3"),
          "message: %s", wpack_errmsg(ar));
    /* wpack_verify_all (wpack verify, WPACK_OPEN_VERIFY) finds both (M51):
     * it skipped splats, so the bad fill passed every whole-archive check */
    bad_log bl = {0, {0}, {0}};
    CHECK_EQ(wpack_verify_all(ar, log_bad, &bl), WPACK_E_VALUE);
    CHECK(bl.n == 2 && bl.code[0] == WPACK_E_VALUE && bl.code[1] == WPACK_E_VALUE,
          "%d reports", bl.n);
    wpack_close(ar);
    CHECK_EQ(wpack_open_memory(&ar, buf, len, WPACK_OPEN_VERIFY | WPACK_OPEN_NO_VERIFY_READS),
             WPACK_E_VALUE);
    wpack_close(ar);
    free(buf);
}

static void test_atomic_replace(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "keep.wpack");
    CHECK(write_model(path, 4096, 0) == 0, "first version");
    size_t len1;
    unsigned char *v1 = test_slurp(path, &len1);
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "second writer");
    float f = 1;
    wpack_writer_add_tensor(w, "x", WPACK_DTYPE_F32, 0, NULL, &f, 4);
    /* while the writer runs, the old file is intact */
    size_t len2;
    unsigned char *mid = test_slurp(path, &len2);
    CHECK(mid && len2 == len1 && memcmp(mid, v1, len1) == 0, "old file untouched mid-write");
    wpack_writer_abort(w);
    free(mid);
    mid = test_slurp(path, &len2);
    CHECK(mid && len2 == len1 && memcmp(mid, v1, len1) == 0, "old file untouched after abort");
    free(mid);
    /* a writer that finishes replaces it */
    CHECK(wpack_writer_open(&w, path, NULL) == WPACK_OK, "third writer");
    wpack_writer_add_tensor(w, "x", WPACK_DTYPE_F32, 0, NULL, &f, 4);
    char err[256];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish");
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK && wpack_count(ar) == 1, "replaced");
    wpack_close(ar);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == (0666 & ~(mode_t)022), "mode %o",
          st.st_mode & 0777);
    free(v1);
    CHECK_EQ(count_tmp_files(), 0);
    /* a directory that does not exist: clear error */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.wpack", dir);
    CHECK(wpack_writer_open(&w, bad, NULL) == WPACK_E_IO && strstr(wpack_writer_errmsg(w), "no/such"),
          "message names the path: %s", wpack_writer_errmsg(w));
    wpack_writer_abort(w);
}

static void test_open_errors_name_the_file(void)
{
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, "/nonexistent/x.wpack", 0) == WPACK_E_IO, "missing file");
    CHECK(strstr(wpack_errmsg(ar), "/nonexistent/x.wpack") != NULL, "%s", wpack_errmsg(ar));
    wpack_close(ar);
    CHECK(wpack_open_memory(&ar, "hello", 5, 0) == WPACK_E_BAD_MAGIC, "short garbage");
    wpack_close(ar);
    CHECK(wpack_open_file(&ar, dir, 0) == WPACK_E_FILE_TYPE, "a directory: not a regular file");
    wpack_close(ar);
    CHECK(strcmp(wpack_error_name(WPACK_E_TRUNCATED), "WPACK_E_TRUNCATED") == 0, "names");
    CHECK(strcmp(wpack_error_name(12345), "WPACK_E_UNKNOWN") == 0, "unknown");
    CHECK(wpack_version_number() == WPACK_VERSION_NUMBER, "version");
    wpack_close(NULL);
    wpack_writer_abort(NULL);
}

static int count_piece(void *user, const void *data, size_t n)
{
    (void)data;
    *(size_t *)user += n;
    return 0;
}

static void count_close(void *user)
{
    (*(int *)user)++;
}

/* A flag this library does not know is refused, not ignored (a newer
 * header's flag may ask for a check); so is a NULL destination, and a
 * source that cannot be read still gets its close call. */
static void test_unknown_flags_refused(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "model.wpack");
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0x100) == WPACK_E_INVALID_ARGUMENT &&
              strstr(wpack_errmsg(ar), "0x100") && strstr(wpack_errmsg(ar), path),
          "open_file: %s", wpack_errmsg(ar));
    wpack_close(ar);
    size_t len = 0;
    uint8_t *buf = test_slurp(path, &len);
    CHECK(buf != NULL, "read %s", path);
    CHECK(wpack_open_memory(&ar, buf, len, 0x10) == WPACK_E_INVALID_ARGUMENT, "open_memory");
    wpack_close(ar);
    /* asking for verify on read and opting out of it at once is refused */
    CHECK(wpack_open_memory(&ar, buf, len, WPACK_OPEN_VERIFY_READS | WPACK_OPEN_NO_VERIFY_READS) ==
                  WPACK_E_INVALID_ARGUMENT &&
              strstr(wpack_errmsg(ar), "WPACK_OPEN_NO_VERIFY_READS"),
          "both verify flags: %s", wpack_errmsg(ar));
    wpack_close(ar);
    int closed = 0;
    wpack_source src = {.user = &closed, .close = count_close};
    CHECK(wpack_open_source(&ar, &src, 0) == WPACK_E_INVALID_ARGUMENT, "no read, no base");
    wpack_close(ar);
    CHECK_EQ(closed, 1);
    src.base = buf;
    src.size = len;
    CHECK(wpack_open_source(&ar, &src, 1u << 31) == WPACK_E_INVALID_ARGUMENT, "open_source");
    wpack_close(ar);
    CHECK_EQ(closed, 2);
    CHECK(wpack_open_memory(&ar, buf, len, WPACK_OPEN_VERIFY | WPACK_OPEN_VERIFY_READS) ==
              WPACK_OK, "known flags");
    wpack_tensor t;
    CHECK(wpack_find(ar, "encoder.layers.0.attn.q_proj.weight", &t) == WPACK_OK, "find");
    char out[8];
    size_t seen = 0;
    CHECK(wpack_read_ex(ar, t.index, 0, out, sizeof out, 0x80) == WPACK_E_INVALID_ARGUMENT,
          "read_ex");
    CHECK(wpack_read_ex(ar, t.index, 0, NULL, sizeof out, 0) == WPACK_E_INVALID_ARGUMENT,
          "NULL dst");
    CHECK(wpack_read(ar, t.index, 0, NULL, 0) == WPACK_OK, "NULL dst, 0 bytes");
    CHECK(wpack_read_stream(ar, t.index, count_piece, &seen, 0x80) == WPACK_E_INVALID_ARGUMENT &&
              seen == 0, "read_stream");
    CHECK(wpack_read_stream(ar, t.index, count_piece, &seen, WPACK_READ_VERIFY) == WPACK_OK &&
              seen == t.nbytes, "read_stream verify");
    /* NULL names in lookups: refused, not dereferenced */
    uint64_t first, count;
    wpack_meta m;
    wpack_stats st;
    CHECK(wpack_find(ar, NULL, &t) == WPACK_E_INVALID_ARGUMENT, "find NULL");
    CHECK(wpack_prefix_range(ar, NULL, &first, &count) == WPACK_E_INVALID_ARGUMENT, "prefix NULL");
    CHECK(wpack_meta_find(ar, NULL, &m) == WPACK_E_INVALID_ARGUMENT, "meta_find NULL");
    CHECK(wpack_stats_find(ar, NULL, WPACK_STATS_WEIGHT, &st) == WPACK_E_INVALID_ARGUMENT,
          "stats_find NULL");
    CHECK(wpack_dtype_from_name(NULL) == 0, "dtype_from_name NULL");
    wpack_close(ar);
    free(buf);
}

typedef struct {
    wpack_archive *ar;
    int bad;
} thread_arg;

static void *reader_thread(void *p)
{
    thread_arg *a = p;
    for (int it = 0; it < 2000; it++) {
        wpack_tensor t;
        if (wpack_find(a->ar, "encoder.layers.0.attn.q_proj.weight", &t) != WPACK_OK ||
            ((const float *)t.data)[2] != 2.0f)
            a->bad++;
        if (wpack_verify_entry(a->ar, t.index) != WPACK_OK)
            a->bad++;
        wpack_stats s;
        if (wpack_stats_find(a->ar, "0", WPACK_STATS_ACTIVATION, &s) != WPACK_OK)
            a->bad++;
    }
    return NULL;
}

static void test_concurrent_readers(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "model.wpack");
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, 0) == WPACK_OK, "open");
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].ar = ar;
        args[i].bad = 0;
        pthread_create(&th[i], NULL, reader_thread, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(args[i].bad, 0);
    }
    wpack_close(ar);
}

static void test_many_entries_and_long_names(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "many.wpack");
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    wpack_writer *w;
    CHECK(wpack_writer_open(&w, path, &opt) == WPACK_OK, "open");
    char name[WPACK_MAX_NAME + 2];
    int rc = 0;
    /* inserted in reverse order: the writer sorts */
    for (int i = 19999; i >= 0 && !rc; i--) {
        snprintf(name, sizeof name, "layers.%d.w", i);
        int8_t v = (int8_t)i;
        rc = wpack_writer_add_tensor(w, name, WPACK_DTYPE_I8, 1, (uint64_t[]){1}, &v, 1);
    }
    CHECK(rc == 0, "adds: %s", wpack_writer_errmsg(w));
    memset(name, 'n', WPACK_MAX_NAME);
    name[WPACK_MAX_NAME] = 0;
    CHECK(wpack_writer_add_splat(w, name, WPACK_DTYPE_U8, 0, NULL, "\x07", 1) == WPACK_OK, "16 KiB name");
    name[WPACK_MAX_NAME] = 'n';
    name[WPACK_MAX_NAME + 1] = 0;
    CHECK(wpack_writer_add_splat(w, name, WPACK_DTYPE_U8, 0, NULL, "\x07", 1) == WPACK_E_NAME, "too long");
    char err[256];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "finish: %s", err);
    wpack_archive *ar;
    CHECK(wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) == WPACK_OK, "open: %s", wpack_errmsg(ar));
    CHECK_EQ(wpack_count(ar), 20001);
    wpack_tensor t;
    CHECK(wpack_find(ar, "layers.12345.w", &t) == WPACK_OK && *(const int8_t *)t.data == (int8_t)12345,
          "lookup among 20000");
    uint64_t first, count;
    CHECK(wpack_prefix_range(ar, "layers.1", &first, &count) == WPACK_OK && count == 11111, "prefix %llu",
          (unsigned long long)count);
    CHECK(wpack_prefix_range(ar, "layers.1.", &first, &count) == WPACK_OK && count == 1, "module");
    wpack_close(ar);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/wpack-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    umask(022);
    RUN(test_roundtrip_file_and_memory);
    RUN(test_auto_stats_and_histogram);
    RUN(test_writer_rejects);
    RUN(test_writer_failed_stays_failed);
    RUN(test_writer_refused_bytes_leave_nothing);
    RUN(test_writer_messages_escape_names);
    RUN(test_writer_bool_values);
    RUN(test_verify_bool_values);
    RUN(test_verify_bool_compressed_and_splat);
    RUN(test_read_to_fd_checks_big_bools);
    RUN(test_atomic_replace);
    RUN(test_open_errors_name_the_file);
    RUN(test_unknown_flags_refused);
    RUN(test_concurrent_readers);
    RUN(test_many_entries_and_long_names);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", dir);
    return tl_finish();
}
