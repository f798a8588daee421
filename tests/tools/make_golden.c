/*
 * make_golden.c - writes the committed test archives:
 *
 *   tests/golden/v1_basic.wpack     golden_write() of golden_content.h
 *   tests/golden/v1_basic.expect    golden_describe() of it
 *   tests/golden/errors/NAME.wpack v1_basic with one fault each, and EXPECT ("file code")
 *   tests/hostile/NAME.wpack       one archive per parser bug class seen in peers, and
 *   tests/hostile/EXPECT            "file code [verify]", and README.md (the table)
 *
 * Built by hand, from the repository root:
 *   make lib
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude -Iformat -Itests tests/tools/make_golden.c \
 *       build/libwpack.a -lxxhash -lm -lpthread -o build/make_golden
 *   build/make_golden [tests-dir]        (default: tests)
 *
 * Re-run it only on purpose: tests/unit/test_golden.c checks that today's
 * writer still produces the committed v1_basic bytes, and a change there is
 * a format change (bump the format version) or a writer change (say why).
 * Every file written here is opened again before the program ends, and the
 * program fails if one does not give its expected code.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/golden_tool.h"

static const char *tests_dir = "tests";
/* ------------------------------------------------------- golden basic */

static uint8_t *golden;
static size_t golden_len;

static void make_basic(void)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/golden", tests_dir);
    mkdir_p(dir);
    write_with_expect(dir, "v1_basic", golden_write);
    snprintf(path, sizeof path, "%s/v1_basic.wpack", dir);
    golden = test_slurp(path, &golden_len);
    if (!golden)
        die(path);
}

/* ------------------------------------------------------ fault helpers */

static void set_entry64(gimg *m, const char *name, unsigned off, uint64_t v)
{
    wpk_st64(entry(m, name) + off, v);
    gimg_seal_index(m);
}

static void set_dims(gimg *m, const char *name, const uint64_t *dims, unsigned rank)
{
    uint8_t *d = gimg_dims(m, entry(m, name));
    for (unsigned k = 0; k < rank; k++)
        wpk_st64(d + 8 * k, dims[k]);
    gimg_seal_index(m);
}

static uint8_t *meta(gimg *m, const char *key)
{
    uint8_t *r = gimg_meta(m, key);
    if (!r) {
        fprintf(stderr, "make_golden: no metadata '%s' in the base\n", key);
        exit(1);
    }
    return r;
}

static uint8_t *stats(gimg *m, const char *key, int kind)
{
    uint8_t *r = gimg_stats(m, key, kind);
    if (!r) {
        fprintf(stderr, "make_golden: no stats '%s' in the base\n", key);
        exit(1);
    }
    return r;
}

/* ---------------------------------------------------------- hostile base */

/* The small archive the hostile files are made from: a, b, c f32 [4], d f32 [2,2]
 * (all 16 bytes), e u8 [3] (the last extent), q of block dtype "q8" [2,8], a
 * splat s, an alias t -> a, a few metadata values, a name map and stats on a
 * with a histogram and percentiles. with_path adds a tensor named like a path. */
static int hostile_write(const char *path, int with_path, char *err, size_t errlen)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    opt.weight_stats = 0;
    wpack_writer *w = NULL;
    int rc = wpack_writer_open(&w, path, &opt);
    if (rc) { /* path is long here (up to err's size): the message alone */
        snprintf(err, errlen, "%s", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return rc;
    }
    uint64_t d4[1] = {4}, d22[2] = {2, 2}, d3[1] = {3}, d28[2] = {2, 8};
    const float fa[4] = {1, 2, 3, 4}, fb[4] = {5, 6, 7, 8}, fc[4] = {-1, -2, -3, -4},
                fd[4] = {0.5f, 0.25f, 0.125f, 0};
    G_TRY(golden_add_f32(w, "a", 1, d4, fa, 4));
    G_TRY(golden_add_f32(w, "b", 1, d4, fb, 4));
    G_TRY(golden_add_f32(w, "c", 1, d4, fc, 4));
    G_TRY(golden_add_f32(w, "d", 2, d22, fd, 4));
    int code = 0;
    G_TRY(wpack_writer_add_block_dtype(w, "q8", 4, 5, NULL, 0, &code));
    uint8_t qb[20];
    for (int i = 0; i < 20; i++)
        qb[i] = (uint8_t)(i * 13 + 1);
    G_TRY(wpack_writer_add_tensor(w, "q", code, 2, d28, qb, sizeof qb));
    if (with_path)
        G_TRY(wpack_writer_add_tensor(w, "../../etc/passwd", WPACK_DTYPE_U8, 1, d3, "x\ny", 3));
    G_TRY(wpack_writer_add_tensor(w, "e", WPACK_DTYPE_U8, 1, d3, "\x01\x02\x03", 3));
    uint8_t two[4];
    wpk_st32(two, 0x40000000u);
    G_TRY(wpack_writer_add_splat(w, "s", WPACK_DTYPE_F32, 1, d4, two, 4));
    G_TRY(wpack_writer_add_alias(w, "t", "a"));
    G_TRY(wpack_writer_set_string(w, "wpack.producer", "wpack hostile"));
    G_TRY(wpack_writer_set_string(w, "model.name", "hostile"));
    G_TRY(wpack_writer_set_i64(w, "n", 7));
    G_TRY(wpack_writer_set_bool(w, "on", 1));
    const char *list[2] = {"x", "yz"};
    const int flags[2] = {1, 0};
    G_TRY(wpack_writer_set_array(w, "list", WPACK_META_STRING, 2, list));
    G_TRY(wpack_writer_set_array(w, "flags", WPACK_META_BOOL, 2, flags));
    G_TRY(wpack_writer_add_name(w, "p_a", "a"));
    const double mn = 1, mx = 4, am = 4, me = 2.5, va = 1.25;
    const double edges[3] = {1, 2.5, 4};
    const uint64_t counts[2] = {2, 2};
    const double pct[4] = {0, 1, 100, 4};
    wpack_stats_in s = {
        .key = "a", .kind = WPACK_STATS_WEIGHT, .granularity = WPACK_GRAN_TENSOR,
        .channels = 1, .count = 4, .min = &mn, .max = &mx, .absmax = &am, .mean = &me,
        .variance = &va, .hist_bins = 2, .hist_edges = edges, .hist_counts = counts,
        .percentile_count = 2, .percentiles = pct,
    };
    G_TRY(wpack_writer_add_stats(w, &s));
    return golden_writer_finish(w, err, errlen);
}

/* ------------------------------------------------------ hostile faults */

static void h_elem_count(gimg *m)
{
    const uint64_t d[2] = {1ull << 32, 1ull << 32};
    set_dims(m, "d", d, 2);
}
static void h_byte_size(gimg *m)
{
    const uint64_t d[1] = {1ull << 62};
    set_dims(m, "a", d, 1);
}
static void h_align_padding_entry(gimg *m)
{
    /* e's end and its padding to 64 would wrap past 2^64. */
    set_entry64(m, "e", WPK_E_DATA_OFFSET_OFF, UINT64_MAX - 63);
}
static void h_align_padding_region(gimg *m)
{
    /* data region ends at 2^64 - 1: rounding it up to 8 for the index overflows. */
    wpk_st64(gimg_sb(m) + WPK_H_DATA_LENGTH_OFF, UINT64_MAX - 128);
    gimg_mirror(m);
}
static void h_offset_past_end(gimg *m)
{
    set_entry64(m, "b", WPK_E_DATA_OFFSET_OFF, (m->len + 63) / 64 * 64 + 6400);
}
static void h_length_past_end(gimg *m)
{
    const uint64_t d[1] = {1ull << 40};
    set_dims(m, "e", d, 1);
    set_entry64(m, "e", WPK_E_STORED_LEN_OFF, 1ull << 40);
}
static void h_overlap(gimg *m)
{
    set_entry64(m, "b", WPK_E_DATA_OFFSET_OFF, wpk_ld64(entry(m, "a") + WPK_E_DATA_OFFSET_OFF));
}
static void h_alias_range(gimg *m)
{
    /* b, c and d claim a's 16 bytes (same offset, length, checksum): aliasing
     * must use alias entries, so the extents walk rejects the second one. */
    const uint8_t *a = entry(m, "a");
    const char *others[3] = {"b", "c", "d"};
    for (int k = 0; k < 3; k++) {
        uint8_t *r = entry(m, others[k]);
        wpk_st64(r + WPK_E_DATA_OFFSET_OFF, wpk_ld64(a + WPK_E_DATA_OFFSET_OFF));
        wpk_st64(r + WPK_E_CHECKSUM_OFF, wpk_ld64(a + WPK_E_CHECKSUM_OFF));
    }
    gimg_seal_index(m);
}
static void h_hole(gimg *m)
{
    uint8_t *r = entry(m, "b");
    wpk_st64(r + WPK_E_DATA_OFFSET_OFF, wpk_ld64(r + WPK_E_DATA_OFFSET_OFF) + 64);
    gimg_seal_index(m);
}
static void h_rank9(gimg *m)
{
    entry(m, "a")[WPK_E_RANK_OFF] = 9;
    gimg_seal_index(m);
}
static void h_rank255(gimg *m)
{
    entry(m, "a")[WPK_E_RANK_OFF] = 255;
    gimg_seal_index(m);
}
static void h_dim_negative(gimg *m)
{
    const uint64_t d[1] = {UINT64_MAX}; /* -1 as a u64 */
    set_dims(m, "e", d, 1);
}
static void h_block_rank0(gimg *m)
{
    entry(m, "q")[WPK_E_RANK_OFF] = 0;
    gimg_seal_index(m);
}
static void h_block_zero(gimg *m)
{
    wpk_st32(gimg_rec(m, WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, 0) + WPK_D_BLOCK_ELEMS_OFF, 0);
    gimg_seal_index(m);
}
static void h_unsorted(gimg *m)
{
    uint8_t *a = entry(m, "a"), *b = entry(m, "b"), t[12];
    memcpy(t, a, 12);
    memcpy(a, b, 12);
    memcpy(b, t, 12);
    gimg_seal_index(m);
}
static void h_duplicate(gimg *m)
{
    memcpy(entry(m, "b"), entry(m, "a"), 12);
    gimg_seal_index(m);
}
static void h_name_nul(gimg *m)
{
    /* "e" stretched over its NUL into the next pooled string, up to that one's NUL. */
    uint8_t *r = entry(m, "e");
    uint64_t off = wpk_ld64(r), end = off + 2, slen = gimg_sec_len(m, WPK_SEC_STRINGS);
    while (end < slen && gimg_str(m, 0)[end])
        end++;
    wpk_st32(r + WPK_E_NAME_LEN_OFF, (uint32_t)(end - off));
    gimg_seal_index(m);
}
static void h_name_empty(gimg *m)
{
    wpk_st32(entry(m, "c") + WPK_E_NAME_LEN_OFF, 0); /* at 'c', not at a NUL */
    gimg_seal_index(m);
}
static void h_name_unterminated(gimg *m)
{
    uint8_t *r = entry(m, "c");
    wpk_st32(r + WPK_E_NAME_LEN_OFF, 2); /* "c" + its NUL: the byte after is not NUL */
    gimg_seal_index(m);
}
static void utf8_name(gimg *m, const char *bytes)
{
    /* The one-byte name "d" cannot grow in place: point d's name at the 10-byte
     * string of the metadata key "model.name" and rewrite that as "d" + bytes.
     * Entries are checked before metadata, so d's name is the fault found. */
    uint8_t *mr = meta(m, "model.name");
    uint8_t *r = entry(m, "d");
    size_t n = strlen(bytes);
    uint8_t *s = gimg_name_bytes(m, mr);
    s[0] = 'd';
    memcpy(s + 1, bytes, n);
    s[1 + n] = 0;
    wpk_st64(r + WPK_E_NAME_OFF, wpk_ld64(mr));
    wpk_st32(r + WPK_E_NAME_LEN_OFF, (uint32_t)(1 + n));
    gimg_seal_index(m);
}
static void h_name_overlong_utf8(gimg *m) { utf8_name(m, "\xc0\xae"); }
static void h_name_surrogate(gimg *m) { utf8_name(m, "\xed\xa0\x80"); }
static void h_name_above_max(gimg *m) { utf8_name(m, "\xf4\x90\x80\x80"); }
static void h_name_truncated_utf8(gimg *m) { utf8_name(m, "\xe6\x97"); }
static void h_huge_entry_count(gimg *m)
{
    wpk_st64(gimg_ix(m) + WPK_I_ENTRY_COUNT_OFF, 1ull << 40);
    wpk_st64(gimg_sb(m) + WPK_H_ENTRY_COUNT_OFF, 1ull << 40);
    gimg_mirror(m);
    gimg_seal_index(m);
}
static void h_huge_array(gimg *m)
{
    wpk_st64(meta(m, "list") + WPK_M_COUNT_OFF, 1ull << 60);
    gimg_seal_index(m);
}
static void h_huge_array_at_limit(gimg *m)
{
    wpk_st64(meta(m, "list") + WPK_M_COUNT_OFF, 1ull << 32);
    gimg_seal_index(m);
}
static void h_huge_string(gimg *m)
{
    wpk_st64(meta(m, "model.name") + WPK_M_COUNT_OFF, 1ull << 63);
    gimg_seal_index(m);
}
static void h_huge_name(gimg *m) { set_entry64(m, "a", WPK_E_NAME_LEN_OFF, UINT32_MAX); }
static void h_huge_section(gimg *m)
{
    /* aux claims 2^62 bytes: the index is a few hundred. */
    wpk_st64(gimg_sec_field(m, WPK_SEC_AUX) + 8, 1ull << 62);
    gimg_seal_index(m);
}
static void h_huge_bins(gimg *m)
{
    wpk_st32(stats(m, "a", WPACK_STATS_WEIGHT) + WPK_S_HIST_BINS_OFF, UINT32_MAX);
    gimg_seal_index(m);
}
static void h_huge_pcts(gimg *m)
{
    wpk_st32(stats(m, "a", WPACK_STATS_WEIGHT) + WPK_S_PCT_COUNT_OFF, 1u << 30);
    gimg_seal_index(m);
}
static void h_feature(gimg *m)
{
    wpk_st64(gimg_sb(m) + WPK_H_REQUIRED_OFF, 1ull << 63);
    gimg_mirror(m);
}
static void h_trailer_disagrees(gimg *m)
{
    wpk_st64(gimg_tr(m) + WPK_H_ENTRY_COUNT_OFF, wpk_ld64(gimg_tr(m) + WPK_H_ENTRY_COUNT_OFF) + 1);
    gimg_seal_headers(m);
}
static void h_trailer_missing(gimg *m) { memset(gimg_tr(m), 0, WPK_HEADER_SIZE); }
static void h_trunc_index(gimg *m) { m->len = (size_t)wpk_ld64(m->p + WPK_H_INDEX_OFFSET_OFF) + 100; }
static void h_trunc_header(gimg *m) { m->len = 100; }
static void h_trunc_trailer(gimg *m) { m->len -= 64; }
static void h_sum_superblock(gimg *m) { m->p[WPK_H_GENERATION_OFF] ^= 2; }
static void h_sum_index(gimg *m) { gimg_ix(m)[300] ^= 1; }
static void h_sum_splat(gimg *m)
{
    uint8_t *r = entry(m, "s");
    wpk_st64(r + WPK_E_CHECKSUM_OFF, wpk_ld64(r + WPK_E_CHECKSUM_OFF) ^ 1);
    gimg_seal_index(m);
}
static void h_sum_data(gimg *m) { m->p[wpk_ld64(entry(m, "b") + WPK_E_DATA_OFFSET_OFF) + 3] ^= 0x10; }
static void meta_elem(gimg *m, const char *key, uint8_t elem)
{
    meta(m, key)[WPK_M_ELEM_TYPE_OFF] = elem;
    gimg_seal_index(m);
}
static void h_meta_array_array(gimg *m) { meta_elem(m, "list", WPACK_META_ARRAY); }
static void h_meta_array_zero(gimg *m) { meta_elem(m, "list", 0); }
static void h_meta_array_unknown(gimg *m) { meta_elem(m, "flags", 200); }
static void h_meta_bool2(gimg *m)
{
    gimg_aux(m, wpk_ld64(meta(m, "flags") + WPK_M_VALUE_OFF))[1] = 2;
    gimg_seal_index(m);
}
static uint8_t *hist(gimg *m)
{
    return gimg_aux(m, wpk_ld64(stats(m, "a", WPACK_STATS_WEIGHT) + WPK_S_HIST_OFF));
}
static void h_hist_counts(gimg *m)
{
    wpk_st64(hist(m) + 8 * 3, 3); /* counts {3, 2}: 5, but count is 4 */
    gimg_seal_index(m);
}
static void h_hist_edges(gimg *m)
{
    wpk_stf64(hist(m) + 8, 0.5); /* edges {1, 0.5, 4} */
    gimg_seal_index(m);
}
static void h_endian(gimg *m)
{
    wpk_st32(gimg_sb(m) + WPK_H_ENDIAN_OFF, 0x04030201u);
    gimg_mirror(m);
}
static void h_major2(gimg *m)
{
    wpk_st16(gimg_sb(m) + WPK_H_MAJOR_OFF, 2);
    gimg_mirror(m);
}
static void h_text_mode(gimg *m)
{
    memmove(m->p + 4, m->p + 5, m->len - 5); /* CR LF -> LF */
    m->len--;
}
static void h_padding(gimg *m)
{
    /* 4 bytes smuggled into the zero padding after a (16 bytes in a 64-byte slot). */
    memcpy(m->p + wpk_ld64(entry(m, "a") + WPK_E_DATA_OFFSET_OFF) + 40, "evil", 4);
}
static void h_none(gimg *m) { (void)m; }

typedef struct {
    const char *file;
    int code;
    int verify;             /* 1: the fault shows with WPACK_OPEN_VERIFY */
    int base;               /* 1: the base with the path-like tensor name */
    void (*fault)(gimg *m);
    const char *bug;        /* the class, as in issue 5 */
    const char *peer;       /* the peer bug it mirrors (shared/ANCHORS.md) */
} hostile;

#define GGUF_OVF "GGUF: ggml PR #709, GHSA-vgg9-87g3-85w8, GHSA-96jg-mvhq-q7q7"
#define BLEED "Ollama \"Bleeding Llama\"; gguf `no_alloc` path"
#define UNBOUNDED "ollama #17042, llama.cpp PR #27188"

static const hostile hostiles[] = {
    {"overflow_elem_count.wpack", WPACK_E_OVERFLOW, 0, 0, h_elem_count,
     "element count overflow: dims 2^32 x 2^32", GGUF_OVF},
    {"overflow_byte_size.wpack", WPACK_E_OVERFLOW, 0, 0, h_byte_size,
     "element count x dtype size overflow: 2^62 f32 elements", GGUF_OVF ", ggml issue #27203"},
    {"overflow_align_padding.wpack", WPACK_E_BOUNDS, 0, 0, h_align_padding_entry,
     "padding-to-alignment overflow: extent at 2^64-64, its end and padding wrap", GGUF_OVF},
    {"overflow_align_region.wpack", WPACK_E_LAYOUT, 0, 0, h_align_padding_region,
     "padding-to-alignment overflow: data region ends at 2^64-1, index offset would wrap", GGUF_OVF},
    {"offset_past_end.wpack", WPACK_E_BOUNDS, 0, 0, h_offset_past_end,
     "tensor offset past the end of the file", BLEED},
    {"length_past_end.wpack", WPACK_E_BOUNDS, 0, 0, h_length_past_end,
     "offset + length past the end (shape agrees with the length)", BLEED},
    {"overlap_extents.wpack", WPACK_E_OVERLAP, 0, 0, h_overlap,
     "two tensors overlapping one range", "safetensors attacks/README (overlapping tensors)"},
    {"alias_many_one_range.wpack", WPACK_E_OVERLAP, 0, 0, h_alias_range,
     "many entries aliasing one byte range through overlapping extents (aliases must be alias entries)",
     "Many entries aliasing one byte range (safetensors attacks/README)"},
    {"extent_hole.wpack", WPACK_E_OVERLAP, 0, 0, h_hole, "a hole between extents",
     "safetensors: no holes, no overlaps"},
    {"rank_above_limit.wpack", WPACK_E_RANK, 0, 0, h_rank9, "rank 9 (limit 8)",
     "gguf-tools #25 (assert as the only guard, rank > 8)"},
    {"rank_255.wpack", WPACK_E_RANK, 0, 0, h_rank255, "rank 255", "gguf-tools #25"},
    {"dim_negative.wpack", WPACK_E_SIZE, 0, 0, h_dim_negative,
     "a \"negative\" dim (2^64-1): shape x dtype disagrees with the stored length",
     "issue 5: negative or zero-sized dims; ggml PR #709"},
    {"block_rank0.wpack", WPACK_E_SHAPE, 0, 0, h_block_rank0,
     "block-quantized tensor of rank 0 (no last dim to block)", "issue 5: dims not allowed for the dtype"},
    {"block_zero_size.wpack", WPACK_E_DTYPE, 0, 0, h_block_zero,
     "block dtype with 0 elements per block (division by zero)", "GGUF: block size from the file"},
    {"names_unsorted.wpack", WPACK_E_UNSORTED, 0, 0, h_unsorted, "entry names not sorted",
     "IREE runtime takes the first of duplicate keys (ANCHORS: MLIR)"},
    {"names_duplicate.wpack", WPACK_E_DUPLICATE, 0, 0, h_duplicate, "two entries with one name",
     "GGUF duplicate-name rejection; IREE takes the first duplicate"},
    {"name_nul.wpack", WPACK_E_NAME, 0, 0, h_name_nul, "a name with a NUL inside",
     "C-string truncation of names"},
    {"name_overlong_utf8.wpack", WPACK_E_NAME, 0, 0, h_name_overlong_utf8,
     "a name with overlong UTF-8 (C0 AE, a disguised '.')", "invalid UTF-8 names"},
    {"name_surrogate.wpack", WPACK_E_NAME, 0, 0, h_name_surrogate,
     "a name with a UTF-16 surrogate (ED A0 80)", "invalid UTF-8 names"},
    {"name_above_10ffff.wpack", WPACK_E_NAME, 0, 0, h_name_above_max,
     "a name with a code point above U+10FFFF", "invalid UTF-8 names"},
    {"name_truncated_utf8.wpack", WPACK_E_NAME, 0, 0, h_name_truncated_utf8,
     "a name ending inside a UTF-8 sequence", "invalid UTF-8 names"},
    {"name_unterminated.wpack", WPACK_E_BOUNDS, 0, 0, h_name_unterminated,
     "a name not followed by NUL", "readers handing out unterminated C strings"},
    {"name_empty.wpack", WPACK_E_BOUNDS, 0, 0, h_name_empty,
     "a 0-byte name reference that is not at a NUL", "unchecked string references"},
    {"huge_entry_count.wpack", WPACK_E_LIMIT, 0, 0, h_huge_entry_count,
     "entry count 2^40 (memory exhaustion)", UNBOUNDED},
    {"huge_array_count.wpack", WPACK_E_LIMIT, 0, 0, h_huge_array,
     "metadata array of 2^60 strings (count x 16 overflows)", UNBOUNDED},
    {"huge_array_at_limit.wpack", WPACK_E_BOUNDS, 0, 0, h_huge_array_at_limit,
     "metadata array of 2^32 strings (at the limit, past aux)", UNBOUNDED},
    {"huge_string_length.wpack", WPACK_E_BOUNDS, 0, 0, h_huge_string,
     "metadata string of 2^63 bytes", UNBOUNDED},
    {"huge_name_length.wpack", WPACK_E_BOUNDS, 0, 0, h_huge_name, "name length 2^32-1", UNBOUNDED},
    {"huge_section_length.wpack", WPACK_E_LAYOUT, 0, 0, h_huge_section,
     "aux section of 2^62 bytes in a small index", UNBOUNDED},
    {"huge_hist_bins.wpack", WPACK_E_LIMIT, 0, 0, h_huge_bins, "2^32-1 histogram bins", UNBOUNDED},
    {"huge_percentiles.wpack", WPACK_E_LIMIT, 0, 0, h_huge_pcts, "2^30 percentiles", UNBOUNDED},
    {"feature_required_unknown.wpack", WPACK_E_FEATURE, 0, 0, h_feature,
     "unknown required feature bit 63", "issue 5: unknown required feature bits"},
    {"trailer_disagrees.wpack", WPACK_E_TRAILER, 0, 0, h_trailer_disagrees,
     "trailer entry count disagrees with the superblock", "issue 5: trailer disagreeing with superblock"},
    {"trailer_missing.wpack", WPACK_E_TRAILER, 0, 0, h_trailer_missing, "trailer zeroed",
     "issue 5: torn writes"},
    {"truncated_index.wpack", WPACK_E_TRUNCATED, 0, 0, h_trunc_index, "cut inside the index",
     "issue 5: truncation"},
    {"truncated_header.wpack", WPACK_E_TRUNCATED, 0, 0, h_trunc_header,
     "cut inside the superblock (100 bytes)", "issue 5: truncation"},
    {"truncated_trailer.wpack", WPACK_E_TRUNCATED, 0, 0, h_trunc_trailer, "cut inside the trailer",
     "issue 5: truncation"},
    {"checksum_superblock.wpack", WPACK_E_HEADER_CHECKSUM, 0, 0, h_sum_superblock,
     "superblock byte changed", "issue 5: checksum mismatches (peers have none: safetensors #220)"},
    {"checksum_index.wpack", WPACK_E_INDEX_CHECKSUM, 0, 0, h_sum_index, "index byte changed",
     "issue 5: checksum mismatches"},
    {"checksum_splat.wpack", WPACK_E_CHECKSUM, 0, 0, h_sum_splat, "splat fill checksum wrong",
     "issue 5: checksum mismatches"},
    {"checksum_data.wpack", WPACK_E_CHECKSUM, 1, 0, h_sum_data,
     "tensor byte changed (found by verification)", "issue 5: checksum mismatches; llama.cpp #8645"},
    {"padding_smuggled.wpack", WPACK_E_PADDING, 1, 0, h_padding,
     "data hidden in the zero padding between extents (found by verification)",
     "safetensors: no holes; hidden payloads in slack space"},
    {"meta_array_of_arrays.wpack", WPACK_E_METADATA, 0, 0, h_meta_array_array,
     "metadata array whose element type is array", "llama.cpp PR #26690 (array element types)"},
    {"meta_array_elem_zero.wpack", WPACK_E_METADATA, 0, 0, h_meta_array_zero,
     "metadata array with element type 0", "llama.cpp PR #26690"},
    {"meta_array_elem_unknown.wpack", WPACK_E_METADATA, 0, 0, h_meta_array_unknown,
     "metadata array with element type 200", "llama.cpp PR #26690"},
    {"meta_bool_element_2.wpack", WPACK_E_METADATA, 0, 0, h_meta_bool2,
     "bool array element 2", "llama.cpp PR #26690"},
    {"stats_hist_counts.wpack", WPACK_E_STATS, 0, 0, h_hist_counts,
     "histogram counts sum to 5, count is 4", "issue 5: histogram counts and edges disagree"},
    {"stats_hist_edges.wpack", WPACK_E_STATS, 0, 0, h_hist_edges, "histogram edges decreasing",
     "issue 5: histogram counts and edges disagree"},
    {"endian_swapped.wpack", WPACK_E_ENDIAN, 0, 0, h_endian, "byte-swapped endianness marker",
     "llama.cpp #3957 (big-endian GGUF undetectable)"},
    {"version_major_2.wpack", WPACK_E_VERSION, 0, 0, h_major2, "format major 2",
     "IRPA/GGUF version fields"},
    {"magic_text_mode.wpack", WPACK_E_BAD_MAGIC, 0, 0, h_text_mode,
     "CR LF turned into LF by a text-mode transfer", "PNG-style magic"},
    {"name_path_traversal.wpack", WPACK_OK, 0, 1, h_none,
     "a tensor named ../../etc/passwd: valid, names are never paths (consumers must not use them as paths)",
     "ONNX CVE-2024-5187, CVE-2025-51480 (external data paths)"},
};

static void make_hostile(void)
{
    char dir[512], path[700], err[700];
    snprintf(dir, sizeof dir, "%s/hostile", tests_dir);
    mkdir_p(dir);
    uint8_t *bases[2];
    size_t lens[2];
    for (int b = 0; b < 2; b++) {
        snprintf(path, sizeof path, "%s/.base%d.tmp", dir, b);
        int rc = hostile_write(path, b, err, sizeof err);
        if (rc) {
            fprintf(stderr, "make_golden: hostile base: %s: %s\n", wpack_error_name(rc), err);
            exit(1);
        }
        bases[b] = test_slurp(path, &lens[b]);
        unlink(path);
        if (!bases[b])
            die(path);
    }
    gstr readme = {0}, expect = {0};
    gstr_add(&expect, "# file code [verify] - written by tests/tools/make_golden.c; "
                      "checked by tests/unit/test_golden.c\n");
    gstr_add(&readme,
             "# Hostile archives\n\n"
             "One small archive per parser bug class seen in other formats' readers\n"
             "(`shared/ANCHORS.md`, \"Parser bugs to never repeat\", and issue 5). Each is\n"
             "a valid %zu-byte archive (alignment 64) with one fault, re-sealed so that the\n"
             "fault is what the reader meets. Opening each must give the code below: no crash,\n"
             "no read outside the file, bounded memory.\n\n"
             "Generated by `tests/tools/make_golden.c` (do not edit by hand); the same list\n"
             "is in `EXPECT`, which `tests/unit/test_golden.c` checks (every file here must be\n"
             "listed there, and every listed file must exist). \"verify\" means the fault is\n"
             "in tensor bytes and shows when the archive is opened with `WPACK_OPEN_VERIFY`.\n\n"
             "| file | bug class | peer bug it mirrors | expected |\n"
             "|---|---|---|---|\n",
             lens[0]);
    for (size_t i = 0; i < sizeof hostiles / sizeof hostiles[0]; i++) {
        const hostile *h = &hostiles[i];
        snprintf(path, sizeof path, "%s/%s", dir, h->file);
        write_fault(path, bases[h->base], lens[h->base], h->fault);
        check_file(path, h->code, h->verify ? WPACK_OPEN_VERIFY : 0);
        gstr_add(&expect, "%s %s%s\n", h->file, wpack_error_name(h->code),
                 h->verify ? " verify" : "");
        gstr_add(&readme, "| `%s` | %s | %s | `%s`%s |\n", h->file, h->bug, h->peer,
                 wpack_error_name(h->code), h->verify ? " (verify)" : "");
    }
    gstr_add(&readme,
             "\nNot archive attacks, so not in this table: pickle code execution (PyTorch\n"
             "CVE-2025-32434), zip entries with `../` names or symlinks (ONNX PR #7686) and zip\n"
             "bombs (npz) are the importers' corpus, in `importers/` with its own README.\n");
    write_expect(dir, &expect);
    snprintf(path, sizeof path, "%s/README.md", dir);
    write_file(path, readme.p, readme.len);
    free(readme.p);
    free(bases[0]);
    free(bases[1]);
}

/* ------------------------------------------------------- golden errors */

static void e_bad_magic(gimg *m) { memcpy(m->p, "GGUF\x03\0\0\0", 8); }
static void e_truncated(gimg *m) { m->len = m->len / 2; }
static void e_unsorted(gimg *m)
{
    uint8_t *a = gimg_rec(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, 2);
    uint8_t *b = gimg_rec(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, 3), t[12];
    memcpy(t, a, 12);
    memcpy(a, b, 12);
    memcpy(b, t, 12);
    gimg_seal_index(m);
}
static void e_alias_to_alias(gimg *m)
{
    wpk_st32(entry(m, G_ALIAS_SPLAT) + WPK_E_TARGET_OFF, (uint32_t)gimg_entry_no(m, G_ALIAS));
    gimg_seal_index(m);
}
static void e_hist_sum(gimg *m)
{
    uint8_t *h = gimg_aux(m, wpk_ld64(stats(m, G_F32, WPACK_STATS_WEIGHT) + WPK_S_HIST_OFF));
    wpk_st64(h + 8 * 5, wpk_ld64(h + 8 * 5) + 1); /* counts[0] */
    gimg_seal_index(m);
}
static void e_misaligned(gimg *m)
{
    uint8_t *r = entry(m, G_U8);
    wpk_st64(r + WPK_E_DATA_OFFSET_OFF, wpk_ld64(r + WPK_E_DATA_OFFSET_OFF) + 8);
    gimg_seal_index(m);
}
static void e_namemap(gimg *m)
{
    wpk_st32(gimg_nmap(m, "p_dense_f32") + WPK_N_ENTRY_OFF, 1000);
    gimg_seal_index(m);
}

static const struct {
    const char *file;
    int code;
    void (*fault)(gimg *m);
} errors[] = {
    {"bad_magic.wpack", WPACK_E_BAD_MAGIC, e_bad_magic},
    {"magic_text_mode.wpack", WPACK_E_BAD_MAGIC, h_text_mode},
    {"endian_swapped.wpack", WPACK_E_ENDIAN, h_endian},
    {"version_major_2.wpack", WPACK_E_VERSION, h_major2},
    {"feature_unknown.wpack", WPACK_E_FEATURE, h_feature},
    {"truncated_half.wpack", WPACK_E_TRUNCATED, e_truncated},
    {"trailer_disagrees.wpack", WPACK_E_TRAILER, h_trailer_disagrees},
    {"superblock_checksum.wpack", WPACK_E_HEADER_CHECKSUM, h_sum_superblock},
    {"index_checksum.wpack", WPACK_E_INDEX_CHECKSUM, h_sum_index},
    {"unsorted_names.wpack", WPACK_E_UNSORTED, e_unsorted},
    {"misaligned_tensor.wpack", WPACK_E_MISALIGNED, e_misaligned},
    {"alias_to_alias.wpack", WPACK_E_ALIAS, e_alias_to_alias},
    {"namemap_entry_range.wpack", WPACK_E_NAMEMAP, e_namemap},
    {"stats_histogram_sum.wpack", WPACK_E_STATS, e_hist_sum},
};

static void make_errors(void)
{
    char dir[512], path[700];
    snprintf(dir, sizeof dir, "%s/golden/errors", tests_dir);
    mkdir_p(dir);
    gstr expect = {0};
    gstr_add(&expect, "# file code - v1_basic.wpack with one fault each; written by "
                      "tests/tools/make_golden.c\n");
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, errors[i].file);
        write_fault(path, golden, golden_len, errors[i].fault);
        check_file(path, errors[i].code, 0);
        gstr_add(&expect, "%s %s\n", errors[i].file, wpack_error_name(errors[i].code));
    }
    write_expect(dir, &expect);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        tests_dir = argv[1];
    make_basic();
    make_errors();
    make_hostile();
    free(golden);
    char wrote[1100];
    snprintf(wrote, sizeof wrote, "%s/golden and %s/hostile", tests_dir, tests_dir);
    return golden_tool_exit(wrote);
}
