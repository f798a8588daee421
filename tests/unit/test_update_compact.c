/* test_update_compact.c - an in-place update rebuilds the index from the live
 * records (issue 13 point 3): everything it re-homes (names, splat fills,
 * zstd seek tables, block dtype params, metadata of every type and array
 * element type, the name map, stats with histograms and percentiles) reads
 * back the same, and replaced records leave nothing behind. */
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"

static char path[64];

static void make_archive(void)
{
    strcpy(path, "/tmp/wpack-compact-XXXXXX");
    int fd = mkstemp(path);
    close(fd);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.compress_level = 3;
    opt.compress_min = 0;
    opt.compress_chunk = 4096;
    opt.histogram_bins = 8;
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, path, &opt), WPACK_OK);
    static float a[256 * 64];
    for (int i = 0; i < 256 * 64; i++)
        a[i] = (float)(i % 50) * 0.25f;
    uint64_t da[2] = {256, 64}, ds[1] = {10}, dq[2] = {2, 64};
    float fill = 1.5f;
    uint8_t q[72], params[4] = {1, 2, 3, 4};
    for (int i = 0; i < 72; i++)
        q[i] = (uint8_t)(i * 7);
    int code;
    CHECK_EQ(wpack_writer_add_tensor(w, "a", WPACK_DTYPE_F32, 2, da, a, sizeof a), WPACK_OK);
    CHECK_EQ(wpack_writer_add_splat(w, "s", WPACK_DTYPE_F32, 1, ds, &fill, 4), WPACK_OK);
    CHECK_EQ(wpack_writer_add_alias(w, "a2", "a"), WPACK_OK);
    CHECK_EQ(wpack_writer_add_block_dtype(w, "q4", 32, 18, params, sizeof params, &code), WPACK_OK);
    CHECK_EQ(wpack_writer_add_tensor(w, "qb", code, 2, dq, q, sizeof q), WPACK_OK);
    CHECK_EQ(wpack_writer_set_string(w, "m.str", "héllo"), WPACK_OK);
    CHECK_EQ(wpack_writer_set_i64(w, "m.i64", -42), WPACK_OK);
    CHECK_EQ(wpack_writer_set_f64(w, "m.f64", 2.5), WPACK_OK);
    CHECK_EQ(wpack_writer_set_bool(w, "m.bool", 1), WPACK_OK);
    CHECK_EQ(wpack_writer_set_bytes(w, "m.bytes", "\x01\x02\x03", 3), WPACK_OK);
    const char *strs[3] = {"x", "", "zz"};
    int64_t ints[2] = {7, -8};
    double dbls[2] = {0.5, -1e300};
    int bools[3] = {1, 0, 1};
    wpack_bytes bys[2] = {{"ab", 2}, {"cde", 3}};
    CHECK_EQ(wpack_writer_set_array(w, "m.as", WPACK_META_STRING, 3, strs), WPACK_OK);
    CHECK_EQ(wpack_writer_set_array(w, "m.ai", WPACK_META_I64, 2, ints), WPACK_OK);
    CHECK_EQ(wpack_writer_set_array(w, "m.af", WPACK_META_F64, 2, dbls), WPACK_OK);
    CHECK_EQ(wpack_writer_set_array(w, "m.ab", WPACK_META_BOOL, 3, bools), WPACK_OK);
    CHECK_EQ(wpack_writer_set_array(w, "m.ay", WPACK_META_BYTES, 2, bys), WPACK_OK);
    CHECK_EQ(wpack_writer_add_name(w, "p_a", "a"), WPACK_OK);
    double v[5] = {-1, 2, 2, 0.5, 0.25}, edges[3] = {-1, 0.5, 2}, pct[4] = {50, 0.4, 99, 1.9};
    uint64_t counts[2] = {3, 7};
    wpack_stats_in s = {"0", WPACK_STATS_ACTIVATION, WPACK_GRAN_TENSOR, 0, 1, 10,
                        &v[0], &v[1], &v[2], &v[3], &v[4], 2, edges, counts, 2, pct};
    CHECK_EQ(wpack_writer_add_stats(w, &s), WPACK_OK);
    char err[300];
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "%s", err);
}

/* Everything a reader can see, as text (locations left out). */
static char *dump(uint64_t *index_length)
{
    wpack_archive *ar;
    int rc = wpack_open_file(&ar, path, WPACK_OPEN_VERIFY);
    CHECK(rc == WPACK_OK, "open: %s", wpack_errmsg(ar));
    if (rc) {
        wpack_close(ar);
        return strdup("");
    }
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    wpack_info in;
    wpack_get_info(ar, &in);
    *index_length = in.index_length;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        fprintf(f, "T %s kind %d dtype %d codec %d rank %u nbytes %llu sum %016llx dsum %016llx\n",
                t.name, t.kind, t.dtype, t.codec, t.rank, (unsigned long long)t.nbytes,
                (unsigned long long)t.checksum, (unsigned long long)t.decoded_checksum);
        uint8_t *b = malloc(t.nbytes + 1);
        CHECK_EQ(wpack_read(ar, i, 0, b, (size_t)t.nbytes), WPACK_OK);
        for (uint64_t k = 0; k < t.nbytes; k += 97)
            fprintf(f, "%02x", b[k]);
        fprintf(f, "\n");
        free(b);
    }
    for (uint64_t i = 0; i < wpack_meta_count(ar); i++) {
        wpack_meta m;
        wpack_meta_at(ar, i, &m);
        fprintf(f, "M %s type %d elem %d count %llu i %lld f %g b %d", m.key, m.type, m.elem_type,
                (unsigned long long)m.count, (long long)m.i64, m.f64, m.boolean);
        if (m.type == WPACK_META_STRING)
            fprintf(f, " '%s'", m.str);
        if (m.type == WPACK_META_BYTES)
            fprintf(f, " %.*s", (int)m.count, (const char *)m.bytes);
        for (uint64_t j = 0; m.type == WPACK_META_ARRAY && j < m.count; j++) {
            wpack_meta e;
            CHECK_EQ(wpack_meta_elem(ar, &m, j, &e), WPACK_OK);
            fprintf(f, " [%lld %g %d %s %.*s]", (long long)e.i64, e.f64, e.boolean,
                    e.type == WPACK_META_STRING ? e.str : "-",
                    e.type == WPACK_META_BYTES ? (int)e.count : 0,
                    e.type == WPACK_META_BYTES ? (const char *)e.bytes : "");
        }
        fprintf(f, "\n");
    }
    for (uint64_t i = 0; i < wpack_namemap_count(ar); i++) {
        const char *o;
        uint64_t e;
        wpack_tensor t;
        wpack_namemap_at(ar, i, &o, &e);
        wpack_tensor_at(ar, e, &t);
        fprintf(f, "N %s -> %s\n", o, t.name);
    }
    for (uint64_t i = 0; i < in.stats_count; i++) {
        wpack_stats st;
        wpack_stats_at(ar, i, &st);
        fprintf(f, "S %s %d count %llu min %g max %g bins %u pcts %u", st.key, st.kind,
                (unsigned long long)st.count, st.min, st.max, st.hist_bins, st.percentile_count);
        for (uint32_t b = 0; b < st.hist_bins; b++) {
            double lo, hi;
            uint64_t c;
            wpack_stats_bin(&st, b, &lo, &hi, &c);
            fprintf(f, " [%g %g %llu]", lo, hi, (unsigned long long)c);
        }
        for (uint32_t j = 0; j < st.percentile_count; j++) {
            double q, val;
            wpack_stats_percentile(&st, j, &q, &val);
            fprintf(f, " (%g %g)", q, val);
        }
        fprintf(f, "\n");
    }
    fclose(f);
    wpack_close(ar);
    return buf;
}

static void test_rebuild_keeps_everything(void)
{
    make_archive();
    uint64_t len0, len1, len2;
    char *before = dump(&len0);
    /* no change at all: the index is rebuilt from its live records */
    wpack_update *u;
    char err[600];
    CHECK_EQ(wpack_update_begin(&u, path, 0, err, sizeof err), WPACK_OK);
    CHECK(wpack_update_commit(u, err, sizeof err) == WPACK_OK, "%s", err);
    char *after = dump(&len1);
    CHECK(strcmp(before, after) == 0, "rebuilt index differs:\n%s\n---\n%s", before, after);
    CHECK(len1 <= len0 + 64, "index %llu -> %llu", (unsigned long long)len0,
          (unsigned long long)len1);
    /* replacing records many times leaves the index size where it was */
    double v[5] = {-3, 3, 3, 0, 1}, edges[1001];
    static uint64_t counts[1000];
    for (int b = 0; b <= 1000; b++)
        edges[b] = -3 + 6.0 * b / 1000;
    for (int b = 0; b < 1000; b++)
        counts[b] = b < 10;
    for (int r = 0; r < 5; r++) {
        wpack_stats_in s = {"0", WPACK_STATS_ACTIVATION, WPACK_GRAN_TENSOR, 0, 1, 10,
                            &v[0], &v[1], &v[2], &v[3], &v[4], 1000, edges, counts, 0, NULL};
        CHECK_EQ(wpack_update_begin(&u, path, 0, err, sizeof err), WPACK_OK);
        CHECK_EQ(wpack_update_set_stats(u, &s), WPACK_OK);
        CHECK_EQ(wpack_update_set_string(u, "m.str", r % 2 ? "odd" : "even"), WPACK_OK);
        CHECK(wpack_update_commit(u, err, sizeof err) == WPACK_OK, "%s", err);
        free(dump(r ? &len2 : &len1));
    }
    CHECK(len2 == len1, "index grew from %llu to %llu over 5 replacements",
          (unsigned long long)len1, (unsigned long long)len2);
    /* drop both kinds; set-then-drop of the same key in one session keeps the set */
    CHECK_EQ(wpack_update_begin(&u, path, 0, err, sizeof err), WPACK_OK);
    CHECK_EQ(wpack_update_drop_stats(u, "a", 0), WPACK_OK);
    CHECK_EQ(wpack_update_drop_stats(u, "nope", 0), WPACK_E_NOT_FOUND);
    CHECK(strstr(wpack_update_errmsg(u), "weight or activation") != NULL, "%s",
          wpack_update_errmsg(u));
    CHECK_EQ(wpack_update_add_name(u, "a", "s"), WPACK_E_EXISTS);
    CHECK_EQ(wpack_update_add_name(u, "p_s", "missing"), WPACK_E_NOT_FOUND);
    CHECK_EQ(wpack_update_add_name(u, "p_a", "s"), WPACK_OK);
    CHECK(wpack_update_commit(u, err, sizeof err) == WPACK_OK, "%s", err);
    char *last = dump(&len2);
    CHECK(strstr(last, "S a ") == NULL && strstr(last, "N p_a -> s") != NULL &&
              strstr(last, "M m.str type 1 elem 0 count 4") != NULL,
          "after drop and re-point:\n%s", last);
    /* a failed commit writes nothing */
    wpack_stats_in bad = {"no.such.tensor", WPACK_STATS_WEIGHT, WPACK_GRAN_TENSOR, 0, 1, 10,
                          &v[0], &v[1], &v[2], &v[3], &v[4], 0, NULL, NULL, 0, NULL};
    CHECK_EQ(wpack_update_begin(&u, path, 0, err, sizeof err), WPACK_OK);
    CHECK_EQ(wpack_update_set_stats(u, &bad), WPACK_OK);
    CHECK_EQ(wpack_update_commit(u, err, sizeof err), WPACK_E_STATS);
    CHECK(strstr(err, "no tensor of that name") != NULL, "%s", err);
    char *same = dump(&len1);
    CHECK(strcmp(same, last) == 0, "a failed commit changed the archive");
    free(before);
    free(after);
    free(last);
    free(same);
    unlink(path);
}

int main(void)
{
    RUN(test_rebuild_keeps_everything);
    return tl_finish();
}
