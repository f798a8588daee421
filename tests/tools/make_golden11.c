/*
 * make_golden11.c - writes the format-1.1 golden files (golden11_content.h):
 *
 *   tests/golden/v11/compressed.wpack + .expect
 *   tests/golden/v11/sharded.wpack, sharded-0000k-of-00003.wpack + .expect
 *   tests/golden/v11/errors/NAME.wpack   one 1.1 rule broken each, and EXPECT
 *                                        ("file code [verify]"); the shards are
 *                                        copied there so manifest faults meet
 *                                        the shard checks, and listed as OK
 *
 * Built and run by `make golden` (writes into tests/); re-run it only on
 * purpose, as for make_golden.c: test_golden regenerates these files and
 * compares them byte for byte. Every file written is opened again, and the
 * program fails if one does not give its expected code.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "tools/golden11_content.h"
#include "tools/golden_tool.h"

static const char *tests_dir = "tests";
/* ------------------------------------------------------------ surgery */

static uint8_t *meta_array(gimg *m, const char *key)
{
    uint8_t *r = gimg_meta(m, key);
    if (!r) {
        fprintf(stderr, "make_golden11: no metadata %s\n", key);
        exit(1);
    }
    return r;
}

/* The seek table of a codec-1 entry: aux u64s (decoded xxh3, then ends). */
static uint8_t *seek(gimg *m, const char *name)
{
    return gimg_aux(m, wpk_ld64(entry(m, name) + WPK_E_AUX_OFF));
}

static void c_no_feature(gimg *m)
{
    wpk_st64(m->p + WPK_H_REQUIRED_OFF, 0);
    gimg_mirror(m);
}
static void c_param_11(gimg *m)
{
    wpk_st32(entry(m, G11_RAMP) + WPK_E_CODEC_PARAM_OFF, 11);
    gimg_seal_index(m);
}
static void c_aux_len(gimg *m)
{
    uint8_t *e = entry(m, G11_RAMP);
    wpk_st64(e + WPK_E_AUX_LEN_OFF, wpk_ld64(e + WPK_E_AUX_LEN_OFF) - 8);
    gimg_seal_index(m);
}
static void c_chunk_empty(gimg *m)
{
    wpk_st64(seek(m, G11_RAMP) + 8, 0);
    gimg_seal_index(m);
}
static void c_last_end(gimg *m)
{
    uint8_t *last = seek(m, G11_RAMP) + 8 * 3;
    wpk_st64(last, wpk_ld64(last) - 1);
    gimg_seal_index(m);
}
static void c_raw_bit(gimg *m)
{
    uint8_t *end0 = seek(m, G11_RAMP) + 8;
    wpk_st64(end0, wpk_ld64(end0) | WPK_CHUNK_RAW);
    gimg_seal_index(m);
}
static void c_decoded_sum(gimg *m)
{
    uint8_t *sum = seek(m, G11_RAMP);
    wpk_st64(sum, wpk_ld64(sum) ^ 1);
    /* the alias repeats nothing of the seek table; only the index changes */
    gimg_seal_index(m);
}
/* Chunk 0's frame declares one byte less than the chunk; the stored
 * checksum is re-sealed (entry and its alias) so the decode check is what
 * fails. */
static void c_frame_size(gimg *m)
{
    uint8_t *e = entry(m, G11_RAMP);
    uint8_t *f = m->p + wpk_ld64(e + WPK_E_DATA_OFFSET_OFF);
    if (wpk_ld32(f) != 0xFD2FB528u) {
        fprintf(stderr, "make_golden11: chunk 0 is not a zstd frame\n");
        exit(1);
    }
    uint8_t fhd = f[4];
    unsigned fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, did = fhd & 3;
    static const unsigned did_size[4] = {0, 1, 2, 4};
    uint8_t *fcs = f + 5 + (single ? 0 : 1) + did_size[did];
    if (fcs_flag == 1) {
        wpk_st16(fcs, (uint16_t)(wpk_ld16(fcs) - 1)); /* value + 256 */
    } else if (fcs_flag == 2) {
        wpk_st32(fcs, wpk_ld32(fcs) - 1);
    } else {
        fprintf(stderr, "make_golden11: unexpected frame content size field (flag %u)\n", fcs_flag);
        exit(1);
    }
    uint64_t stored = wpk_ld64(e + WPK_E_STORED_LEN_OFF);
    uint64_t sum = XXH3_64bits(m->p + wpk_ld64(e + WPK_E_DATA_OFFSET_OFF), (size_t)stored);
    wpk_st64(e + WPK_E_CHECKSUM_OFF, sum);
    wpk_st64(entry(m, "alias.ramp") + WPK_E_CHECKSUM_OFF, sum);
    gimg_seal_index(m);
}
static void c_kind4(gimg *m)
{
    entry(m, G11_SMALL)[WPK_E_KIND_OFF] = WPACK_KIND_EXTERNAL;
    gimg_seal_index(m);
}

/* Spec and code agree (issue 15 point 4): each of these three files
 * holds what once made the text and the reader disagree, so that changing
 * either (or the writer and the reader together) fails test_golden. */

/* Two faults on purpose: an unknown dtype and rank 9. 13.1 step 5.6 checks
 * the dtype (M30) before the rank (M31): DTYPE, not RANK. */
static void c_dtype_rank(gimg *m)
{
    uint8_t *e = entry(m, G11_SMALL);
    e[WPK_E_DTYPE_OFF] = 16;
    e[WPK_E_RANK_OFF] = WPACK_MAX_RANK + 1;
    gimg_seal_index(m);
}
/* A generation-2 trailer appended after the file (an update not yet named
 * by the superblock, 13.1 step 4.1) that is whole - valid checksum, index
 * hashing right - but has a reserved byte set: RESERVED, as in the
 * superblock, not a silent fall-back to generation 1. */
static void t_reserved(gimg *m)
{
    uint64_t old_len = m->len, ixlen = gimg_ixlen(m);
    const uint8_t *ix = gimg_ix(m);
    size_t len = (size_t)(old_len + ixlen + WPK_HEADER_SIZE);
    uint8_t *p = malloc(len);
    if (!p)
        die("malloc");
    memcpy(p, m->p, (size_t)old_len);
    memcpy(p + old_len, ix, (size_t)ixlen);
    uint8_t *t = p + old_len + ixlen;
    memcpy(t, p, WPK_HEADER_SIZE);
    memcpy(t, WPK_TRAILER_MAGIC, 8);
    wpk_st64(t + WPK_H_GENERATION_OFF, wpk_ld64(p + WPK_H_GENERATION_OFF) + 1);
    wpk_st64(t + WPK_H_INDEX_OFFSET_OFF, old_len);
    wpk_st64(t + WPK_H_FILE_LENGTH_OFF, len);
    t[WPK_H_RESERVED_OFF] = 1;
    wpk_st64(t + WPK_H_CHECKSUM_OFF, XXH3_64bits(t, WPK_H_CHECKSUM_OFF));
    free(m->p);
    m->p = p;
    m->len = len;
}
/* In generation 1 the bytes between the data region's end and the index
 * (here 5: the last tensor is 3 bytes) are checked at a plain open
 * (13.2 rule 12), not only by verification. The base is padding_base(). */
static void p_before_index(gimg *m)
{
    m->p[wpk_ld64(m->p + WPK_H_DATA_OFFSET_OFF) + wpk_ld64(m->p + WPK_H_DATA_LENGTH_OFF)] = 0xa5;
}

/* The base of p_before_index: a 1.1 archive (one zstd tensor) whose data
 * region does not end on a multiple of 8. */
static int padding_base(const char *path, char *err, size_t errlen)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = GOLDEN_ALIGNMENT;
    opt.weight_stats = 0;
    opt.compress_level = 3;
    opt.compress_chunk = 4096;
    opt.compress_min = 1024;
    wpack_writer *w;
    int rc = golden_writer_open(&w, path, &opt, err, errlen);
    if (rc)
        return rc;
    static const uint8_t zeros[4096], tail[3] = {1, 2, 3};
    uint64_t d0[1] = {sizeof zeros}, d1[1] = {sizeof tail};
    G_TRY(wpack_writer_add_tensor(w, "comp.zeros", WPACK_DTYPE_U8, 1, d0, zeros, sizeof zeros));
    G_TRY(wpack_writer_add_tensor(w, "tail", WPACK_DTYPE_U8, 1, d1, tail, sizeof tail));
    G_TRY(wpack_writer_set_string(w, "wpack.producer", GOLDEN_PRODUCER));
    return golden_writer_finish(w, err, errlen);
}

static void s_length(gimg *m)
{
    uint8_t *v = gimg_aux(m, wpk_ld64(meta_array(m, "wpack.shard_lengths") + WPK_M_VALUE_OFF));
    wpk_st64(v + 8, wpk_ld64(v + 8) + 64);
    gimg_seal_index(m);
}
static void s_xxh3(gimg *m)
{
    uint8_t *v = gimg_aux(m, wpk_ld64(meta_array(m, "wpack.shard_index_xxh3") + WPK_M_VALUE_OFF));
    wpk_st64(v, wpk_ld64(v) ^ 1);
    gimg_seal_index(m);
}
static void s_unequal(gimg *m)
{
    uint8_t *r = meta_array(m, "wpack.shard_lengths");
    wpk_st64(r + WPK_M_COUNT_OFF, 2);
    gimg_seal_index(m);
}
static void s_external_offset(gimg *m)
{
    uint8_t *e = entry(m, "layers.10.weight");
    wpk_st64(e + WPK_E_DATA_OFFSET_OFF, wpk_ld64(e + WPK_E_DATA_OFFSET_OFF) + GOLDEN_ALIGNMENT);
    gimg_seal_index(m);
}
/* First shard name "sharded-00001-..." becomes "/harded-00001-...". */
static void s_name_slash(gimg *m)
{
    uint8_t *refs = gimg_aux(m, wpk_ld64(meta_array(m, "wpack.shards") + WPK_M_VALUE_OFF));
    gimg_str(m, wpk_ld64(refs))[0] = '/';
    gimg_seal_index(m);
}
static void s_shard_missing(gimg *m)
{
    uint8_t *refs = gimg_aux(m, wpk_ld64(meta_array(m, "wpack.shards") + WPK_M_VALUE_OFF));
    memcpy(gimg_str(m, wpk_ld64(refs + 16)), "missing", 7); /* "missing-00002-of-00003.wpack" */
    gimg_seal_index(m);
}

typedef struct {
    const char *file;
    int code;
    int verify;
    int sharded; /* 0: a fault in compressed.wpack, 1: in the sharded manifest,
                  * 2: in padding_base() */
    void (*fault)(gimg *m);
    const char *rule;
} fault11;

static const fault11 faults[] = {
    {"codec1_without_feature.wpack", WPACK_E_CODEC, 0, 0, c_no_feature, "19 rule 1"},
    {"codec_param_11.wpack", WPACK_E_CODEC, 0, 0, c_param_11, "19 rule 2"},
    {"seek_aux_len.wpack", WPACK_E_CODEC, 0, 0, c_aux_len, "19 rule 3"},
    {"seek_chunk_empty.wpack", WPACK_E_CODEC, 0, 0, c_chunk_empty, "19 rule 4"},
    {"seek_raw_size.wpack", WPACK_E_CODEC, 0, 0, c_raw_bit, "19 rule 4 (raw bit)"},
    {"seek_last_end.wpack", WPACK_E_SIZE, 0, 0, c_last_end, "19 rule 5"},
    {"decoded_checksum.wpack", WPACK_E_CHECKSUM, 1, 0, c_decoded_sum, "19 verification"},
    {"frame_size_lie.wpack", WPACK_E_DECODE, 1, 0, c_frame_size, "19 decoding"},
    {"kind4_without_shards.wpack", WPACK_E_KIND, 0, 0, c_kind4, "13.2 rule 29"},
    {"dtype_before_rank.wpack", WPACK_E_DTYPE, 0, 0, c_dtype_rank, "13.1 step 5.6: rule 30 before 31"},
    {"trailer_reserved.wpack", WPACK_E_RESERVED, 0, 0, t_reserved, "13.1 step 4.1: rule 9 on the new trailer"},
    {"padding_before_index.wpack", WPACK_E_PADDING, 0, 2, p_before_index, "13.2 rule 12, at open"},
    {"manifest_shard_length.wpack", WPACK_E_SHARD, 0, 1, s_length, "19a step 3"},
    {"manifest_shard_xxh3.wpack", WPACK_E_SHARD, 0, 1, s_xxh3, "19a step 3"},
    {"manifest_arrays_unequal.wpack", WPACK_E_SHARD, 0, 1, s_unequal, "19a step 1"},
    {"manifest_external_offset.wpack", WPACK_E_SHARD, 0, 1, s_external_offset, "19a step 4"},
    {"manifest_shard_name_slash.wpack", WPACK_E_SHARD, 0, 1, s_name_slash, "19a shard names"},
    {"manifest_shard_missing.wpack", WPACK_E_SHARD, 0, 1, s_shard_missing, "19a step 2"},
};

static void make_errors(const char *v11)
{
    char dir[700], path[900];
    snprintf(dir, sizeof dir, "%s/errors", v11);
    mkdir_p(dir);
    size_t len[3];
    uint8_t *base[3];
    snprintf(path, sizeof path, "%s/compressed.wpack", v11);
    base[0] = test_slurp(path, &len[0]);
    snprintf(path, sizeof path, "%s/sharded.wpack", v11);
    base[1] = test_slurp(path, &len[1]);
    if (!base[0] || !base[1])
        die(path);
    char err[700];
    snprintf(path, sizeof path, "%s/padding_base.tmp", dir);
    if (padding_base(path, err, sizeof err)) {
        fprintf(stderr, "make_golden11: %s\n", err);
        exit(1);
    }
    base[2] = test_slurp(path, &len[2]);
    if (!base[2] || unlink(path) != 0)
        die(path);
    gstr expect = {0};
    gstr_add(&expect, "# file code [verify] - format-1.1 faults (rule of spec section); written by "
                      "tests/tools/make_golden11.c\n");
    for (int k = 1; k <= 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "sharded-%05d-of-00003.wpack", k);
        snprintf(path, sizeof path, "%s/%s", v11, name);
        size_t n;
        uint8_t *p = test_slurp(path, &n);
        if (!p)
            die(path);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        write_file(path, p, n);
        free(p);
        gstr_add(&expect, "%s WPACK_OK\n", name);
    }
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        const fault11 *f = &faults[i];
        snprintf(path, sizeof path, "%s/%s", dir, f->file);
        write_fault(path, base[f->sharded], len[f->sharded], f->fault);
        expect_row(&expect, path, f->file, f->code, f->verify, f->rule);
    }
    write_expect(dir, &expect);
    for (int k = 0; k < 3; k++)
        free(base[k]);
}

/* The writer never puts a shard where a file exists (an old set's shards
 * stay whole until the new manifest replaces theirs, then go): written over
 * the committed set, the shards would come out as sharded-0000k-of-00003.2.wpack
 * and the committed names be deleted. Remove the old set first. */
static void remove_sharded_set(const char *v11)
{
    char path[700];
    for (int k = 0; k <= 3; k++) {
        if (k == 0)
            snprintf(path, sizeof path, "%s/sharded.wpack", v11);
        else
            snprintf(path, sizeof path, "%s/sharded-%05d-of-00003.wpack", v11, k);
        if (unlink(path) != 0 && errno != ENOENT)
            die(path);
    }
}

int main(int argc, char **argv)
{
    golden_tool_name = "make_golden11";
    if (argc > 1)
        tests_dir = argv[1];
    if (ZSTD_versionNumber() != GOLDEN11_ZSTD_VERSION)
        fprintf(stderr, "make_golden11: note: libzstd %u, the committed files say %u: update "
                        "GOLDEN11_ZSTD_VERSION in golden11_content.h if you commit these\n",
                ZSTD_versionNumber(), GOLDEN11_ZSTD_VERSION);
    char v11[512];
    snprintf(v11, sizeof v11, "%s/golden/v11", tests_dir);
    mkdir_p(v11);
    write_with_expect(v11, "compressed", golden11_compressed_write);
    remove_sharded_set(v11);
    write_with_expect(v11, "sharded", golden11_sharded_write);
    make_errors(v11);
    return golden_tool_exit(v11);
}
