/*
 * make_corpus.c - writes the generated part of the seed corpora:
 *   DIR/fuzz_archive/seed-*.wpk    small valid archives made with the writer
 *                                  (alignment 64 unless the name says 4096)
 *   DIR/fuzz_npy/seed-fmt-*.npy    headers from npy_format_header, all dtypes
 *   DIR/fuzz_roundtrip/seed-*      writer programs (see fuzz_roundtrip.c)
 *   DIR/fuzz_shards/seed-*         sharded sets: the manifest, then each shard
 *                                  after FUZZ_SHARD_SEP (see fuzz_shards.c)
 * fuzz/make_corpus.py adds numpy-made .npy files and copies of test files.
 *
 *   make_corpus DIR
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "bytes.h"
#include "fix_checksums.h"
#include "fuzz.h"
#include "layout.h"
#include "npy.h"
#include "wpack.h"

static const char *out_dir;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "make_corpus: %s: %s\n", what, msg);
    exit(1);
}

/* Finish w into path, then open it with verification: a seed the reader
 * rejects would be useless. The open archive is returned. */
static wpack_archive *finish_and_open(wpack_writer *w, const char *path)
{
    char err[600];
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK)
        die(path, err);
    wpack_archive *ar;
    if (wpack_open_file(&ar, path, WPACK_OPEN_VERIFY) != WPACK_OK)
        die(path, wpack_errmsg(ar));
    return ar;
}

/* Every writer call must succeed here. */
#define W(call)                                                                 \
    do {                                                                        \
        if ((call) != WPACK_OK)                                                 \
            die(#call, wpack_writer_errmsg(w));                                 \
    } while (0)

static void write_file(const char *target, const char *name, const void *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        die(path, strerror(errno));
}

/* xorshift64*: fixed seeds, so the corpus is the same on every run. */
static uint64_t rng_state;
static uint8_t rng8(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint8_t)((rng_state * 0x2545f4914f6cdd1dull) >> 56);
}

/* ------------------------------------------------------------ archives */

static const float f32s[6] = {1.5f, -2.25f, 0.0f, 3.0f, -0.5f, 100.0f};

static void one_tensor(wpack_writer *w)
{
    W(wpack_writer_add_tensor(w, "weight", WPACK_DTYPE_F32, 2, (uint64_t[]){2, 3}, f32s,
                              sizeof f32s));
}

static void every_dtype(wpack_writer *w)
{
    uint8_t bytes[64];
    for (size_t k = 0; k < sizeof bytes; k++)
        bytes[k] = (uint8_t)(k * 37 + 11);
    for (int d = WPACK_DTYPE_F64; d <= WPACK_DTYPE_BOOL; d++) {
        char name[32];
        snprintf(name, sizeof name, "t.%s", wpack_dtype_name(d));
        size_t size = wpack_dtype_size(d);
        if (d == WPACK_DTYPE_BOOL)
            for (size_t k = 0; k < 4; k++)
                bytes[k] = k & 1;
        W(wpack_writer_add_tensor(w, name, d, 2, (uint64_t[]){2, 2}, bytes, 4 * size));
    }
    /* Floats with the values stats must skip. */
    float odd[4] = {NAN, INFINITY, -INFINITY, 1.0f};
    W(wpack_writer_add_tensor(w, "t.f32.nonfinite", WPACK_DTYPE_F32, 1, (uint64_t[]){4}, odd,
                              sizeof odd));
}

static void splats(wpack_writer *w)
{
    float one = 1.0f;
    uint8_t yes = 1;
    int64_t big = -7;
    uint16_t bf = 0x3f80;
    W(wpack_writer_add_splat(w, "ones", WPACK_DTYPE_F32, 2, (uint64_t[]){4, 4}, &one, 4));
    W(wpack_writer_add_splat(w, "mask", WPACK_DTYPE_BOOL, 1, (uint64_t[]){3}, &yes, 1));
    W(wpack_writer_add_splat(w, "scalar", WPACK_DTYPE_I64, 0, NULL, &big, 8));
    /* Logically 2 GiB: far larger than the file. */
    W(wpack_writer_add_splat(w, "huge", WPACK_DTYPE_BF16, 2, (uint64_t[]){1u << 20, 1u << 10},
                             &bf, 2));
    W(wpack_writer_add_splat(w, "empty", WPACK_DTYPE_F16, 2, (uint64_t[]){0, 5}, &bf, 2));
}

static void aliases(wpack_writer *w)
{
    float zero = 0;
    one_tensor(w);
    W(wpack_writer_add_splat(w, "zeros", WPACK_DTYPE_F32, 1, (uint64_t[]){8}, &zero, 4));
    W(wpack_writer_add_alias(w, "lm_head.weight", "weight"));
    W(wpack_writer_add_alias(w, "tied.zeros", "zeros"));
    /* An alias may name an entry added after it. */
    W(wpack_writer_add_alias(w, "a.late", "z.target"));
    W(wpack_writer_add_tensor(w, "z.target", WPACK_DTYPE_I8, 1, (uint64_t[]){3}, "abc", 3));
}

static void metadata(wpack_writer *w)
{
    static const int64_t ints[4] = {0, -1, INT64_MAX, INT64_MIN};
    static const double dbls[3] = {0.5, -1e300, 3.0};
    static const int bools[3] = {1, 0, 1};
    static const char *const strs[3] = {"alpha", "", "\xc3\xa9t\xc3\xa9"};
    W(wpack_writer_set_string(w, "model.name", "tiny-llama"));
    W(wpack_writer_set_string(w, "model.license", "line one\nline two\t\xe2\x9c\x93"));
    W(wpack_writer_set_string(w, "model.empty", ""));
    W(wpack_writer_set_i64(w, "model.layers", 2));
    W(wpack_writer_set_i64(w, "model.min", INT64_MIN));
    W(wpack_writer_set_f64(w, "model.eps", 1e-5));
    W(wpack_writer_set_f64(w, "model.nan", NAN));
    W(wpack_writer_set_bool(w, "model.tied", 1));
    W(wpack_writer_set_bool(w, "model.moe", 0));
    W(wpack_writer_set_bytes(w, "model.blob", "\x00\x01\x02\xff", 4));
    W(wpack_writer_set_bytes(w, "model.noblob", "", 0));
    W(wpack_writer_set_array(w, "arr.i64", WPACK_META_I64, 4, ints));
    W(wpack_writer_set_array(w, "arr.f64", WPACK_META_F64, 3, dbls));
    W(wpack_writer_set_array(w, "arr.bool", WPACK_META_BOOL, 3, bools));
    W(wpack_writer_set_array(w, "arr.str", WPACK_META_STRING, 3, strs));
    W(wpack_writer_set_array(w, "arr.empty", WPACK_META_I64, 0, ints));
}

static void name_map(wpack_writer *w)
{
    one_tensor(w);
    W(wpack_writer_add_tensor(w, "encoder.bias", WPACK_DTYPE_F32, 1, (uint64_t[]){2}, f32s, 8));
    W(wpack_writer_add_name(w, "p_weight", "weight"));
    W(wpack_writer_add_name(w, "_param_constant0", "weight"));
    W(wpack_writer_add_name(w, "p_encoder_bias", "encoder.bias"));
}

static void user_stats(wpack_writer *w)
{
    uint16_t half[8] = {0x3c00, 0xbc00, 0x4000, 0x0000, 0x7c00, 0x3800, 0xb800, 0x4200};
    W(wpack_writer_add_tensor(w, "w.f16", WPACK_DTYPE_F16, 2, (uint64_t[]){2, 4}, half, sizeof half));
    W(wpack_writer_add_tensor(w, "w.f32", WPACK_DTYPE_F32, 2, (uint64_t[]){2, 3}, f32s, sizeof f32s));
    W(wpack_writer_add_tensor(w, "w.chan", WPACK_DTYPE_F32, 2, (uint64_t[]){2, 3}, f32s, sizeof f32s));
    double mn[2] = {-2.25, -0.5}, mx[2] = {1.5, 100}, am[2] = {2.25, 100}, mean[2] = {-0.25, 34.1},
           var[2] = {2.3, 2200};
    double edges[4] = {-3, 0, 50, 100};
    uint64_t counts[3] = {2, 3, 1};
    double pcts[6] = {1, -2.2, 50, 0.5, 99, 99};
    wpack_stats_in s = {
        .key = "w.chan", .kind = WPACK_STATS_WEIGHT, .granularity = WPACK_GRAN_CHANNEL,
        .axis = 0, .channels = 2, .count = 6, .min = mn, .max = mx, .absmax = am, .mean = mean,
        .variance = var, .hist_bins = 3, .hist_edges = edges, .hist_counts = counts,
        .percentile_count = 3, .percentiles = pcts,
    };
    W(wpack_writer_add_stats(w, &s));
    wpack_stats_in a = {
        .key = "encoder.layers.0.mlp", .kind = WPACK_STATS_ACTIVATION,
        .granularity = WPACK_GRAN_TENSOR, .channels = 1, .count = 1000, .min = mn, .max = mx,
        .absmax = am, .mean = mean, .variance = var, .percentile_count = 2, .percentiles = pcts,
    };
    W(wpack_writer_add_stats(w, &a));
    a.key = "w.chan"; /* the same key as a weight record, another kind */
    a.percentile_count = 0;
    W(wpack_writer_add_stats(w, &a));
}

static void block_dtype(wpack_writer *w)
{
    int q4, q8;
    uint8_t block[2 * 18 * 2];
    for (size_t k = 0; k < sizeof block; k++)
        block[k] = (uint8_t)(k * 13);
    W(wpack_writer_add_block_dtype(w, "q4_0", 32, 18, "scale:f16", 9, &q4));
    W(wpack_writer_add_block_dtype(w, "q8_0", 32, 34, NULL, 0, &q8));
    W(wpack_writer_add_tensor(w, "q.weight", q4, 2, (uint64_t[]){2, 64}, block, sizeof block));
    W(wpack_writer_add_splat(w, "q.zero", q8, 1, (uint64_t[]){32}, block, 34));
}

static void shapes(wpack_writer *w)
{
    uint8_t bytes[64] = {1, 2, 3, 4, 5, 6, 7, 8};
    W(wpack_writer_add_tensor(w, "rank8", WPACK_DTYPE_U8, 8,
                              (uint64_t[]){1, 2, 1, 2, 1, 2, 1, 2}, bytes, 16));
    W(wpack_writer_add_tensor(w, "scalar.f64", WPACK_DTYPE_F64, 0, NULL, bytes, 8));
    W(wpack_writer_add_tensor(w, "zero.rows", WPACK_DTYPE_F32, 2, (uint64_t[]){0, 3}, bytes, 0));
    W(wpack_writer_add_tensor(w, "zero.i8", WPACK_DTYPE_I8, 1, (uint64_t[]){0}, bytes, 0));
    W(wpack_writer_add_tensor(w, "after.zero", WPACK_DTYPE_I16, 1, (uint64_t[]){3}, bytes, 6));
}

static void prefixes(wpack_writer *w)
{
    static const char *const names[] = {
        "encoder.layers.0.attn.q_proj.weight", "encoder.layers.0.attn.k_proj.weight",
        "encoder.layers.01.mlp.weight", "encoder.layers.1.mlp.weight", "encoder.layers.10.x",
        "encoder.layers.", "decoder.\xc3\xa9t\xc3\xa9", "decoder.\xe2\x82\xac", "decoder.\xf0\x9f\x98\x80",
        "A", "a", "~", " space",
    };
    uint8_t b[4] = {9, 8, 7, 6};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        W(wpack_writer_add_tensor(w, names[k], WPACK_DTYPE_I8, 1, (uint64_t[]){4}, b, 4));
    char longname[301];
    memset(longname, 'n', 300);
    longname[300] = 0;
    memcpy(longname, "long.", 5);
    W(wpack_writer_add_tensor(w, longname, WPACK_DTYPE_I8, 1, (uint64_t[]){4}, b, 4));
}

static void streamed(wpack_writer *w)
{
    uint8_t bytes[200];
    for (size_t k = 0; k < sizeof bytes; k++)
        bytes[k] = (uint8_t)k;
    W(wpack_writer_begin_tensor(w, "streamed", WPACK_DTYPE_BF16, 2, (uint64_t[]){10, 10}));
    W(wpack_writer_write(w, bytes, 1));
    W(wpack_writer_write(w, bytes + 1, 0));
    W(wpack_writer_write(w, bytes + 1, 98));
    W(wpack_writer_write(w, bytes + 99, 101));
    W(wpack_writer_end_tensor(w));
}

static void everything(wpack_writer *w)
{
    every_dtype(w);
    splats(w);
    metadata(w);
    block_dtype(w);
    shapes(w);
    streamed(w);
    W(wpack_writer_add_alias(w, "alias.ones", "ones"));
    W(wpack_writer_add_alias(w, "alias.rank8", "rank8"));
    W(wpack_writer_add_name(w, "p_rank8", "rank8"));
}

/* Compressed tensors (with compress_level 1, 4 KiB chunks, no minimum). */
static void zstd(wpack_writer *w)
{
    static float smooth[4096];
    static uint8_t noise[5000];
    for (size_t k = 0; k < 4096; k++)
        smooth[k] = (float)(k / 64) * 0.25f;
    rng_state = 42;
    for (size_t k = 0; k < sizeof noise; k++)
        noise[k] = rng8();
    W(wpack_writer_add_tensor(w, "z.smooth", WPACK_DTYPE_F32, 2, (uint64_t[]){64, 64}, smooth,
                              sizeof smooth));
    W(wpack_writer_add_tensor(w, "z.noise", WPACK_DTYPE_U8, 1, (uint64_t[]){5000}, noise,
                              sizeof noise));
    W(wpack_writer_add_tensor(w, "z.small", WPACK_DTYPE_F32, 2, (uint64_t[]){2, 3}, f32s,
                              sizeof f32s));
    W(wpack_writer_add_alias(w, "z.alias", "z.smooth"));
}

/* Chunk checksums (format 1.2) with 4 KiB chunks: a tensor of three whole
 * chunks and a short one, its alias, and one of a single chunk (none). */
static void chunked(wpack_writer *w)
{
    static uint8_t bytes[3 * 4096 + 100];
    rng_state = 7;
    for (size_t k = 0; k < sizeof bytes; k++)
        bytes[k] = rng8();
    W(wpack_writer_add_tensor(w, "c.big", WPACK_DTYPE_U8, 1, (uint64_t[]){sizeof bytes}, bytes,
                              sizeof bytes));
    W(wpack_writer_add_tensor(w, "c.small", WPACK_DTYPE_U8, 1, (uint64_t[]){4096}, bytes, 4096));
    W(wpack_writer_add_alias(w, "c.tied", "c.big"));
}

static void nothing(wpack_writer *w)
{
    (void)w;
}

typedef struct {
    const char *name;
    void (*fill)(wpack_writer *);
    uint32_t alignment, bins;
    int weight_stats, zstd_level;
    uint64_t chunk_sums; /* 0: the default */
} archive_seed;

static const archive_seed archives[] = {
    {"seed-empty.wpk", nothing, 64, 0, 1},
    {"seed-one-tensor.wpk", one_tensor, 64, 0, 1},
    {"seed-one-tensor-nostats.wpk", one_tensor, 64, 0, 0},
    {"seed-every-dtype.wpk", every_dtype, 64, 4, 1},
    {"seed-splat.wpk", splats, 64, 0, 1},
    {"seed-alias.wpk", aliases, 64, 0, 1},
    {"seed-metadata.wpk", metadata, 64, 0, 1},
    {"seed-namemap.wpk", name_map, 64, 0, 1},
    {"seed-stats-histograms.wpk", user_stats, 64, 8, 1},
    {"seed-block-dtype.wpk", block_dtype, 64, 0, 1},
    {"seed-shapes.wpk", shapes, 64, 0, 1},
    {"seed-prefixes.wpk", prefixes, 64, 0, 0},
    {"seed-streamed.wpk", streamed, 128, 2, 1},
    {"seed-everything.wpk", everything, 64, 3, 1},
    {"seed-one-tensor-4096.wpk", one_tensor, 4096, 0, 1},
    {"seed-aliases-4096.wpk", aliases, 4096, 0, 1},
    {"seed-zstd.wpk", zstd, 64, 0, 1, 1},
    {"seed-zstd-stats.wpk", zstd, 64, 4, 1, 3},
    {"seed-chunk-sums.wpk", chunked, 64, 0, 1, 0, 4096},
    {"seed-chunk-sums-zstd.wpk", zstd, 64, 0, 1, 1, 4096},
};

static void write_archive(const archive_seed *a)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz_archive/%s", out_dir, a->name);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = a->alignment;
    opt.histogram_bins = a->bins;
    opt.weight_stats = a->weight_stats;
    opt.compress_level = a->zstd_level;
    opt.compress_chunk = 4096;
    opt.compress_min = 0;
    opt.compress_min_saving = 0;
    if (a->chunk_sums)
        opt.chunk_sums = a->chunk_sums;
    wpack_writer *w;
    if (wpack_writer_open(&w, path, &opt) != WPACK_OK)
        die(path, wpack_writer_errmsg(w));
    a->fill(w);
    wpack_close(finish_and_open(w, path));
}

/* -------------------------------------------------------- sharded sets */

/* The whole file at path in a malloc'd block. */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        die(path, strerror(errno));
    long len = ftell(f);
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    rewind(f);
    if (len < 0 || !p || fread(p, 1, (size_t)len, f) != (size_t)len)
        die(path, "cannot read");
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Append the separator and the file at path to out[0..*total) (a seed of
 * fuzz_shards: the manifest, then each shard after FUZZ_SHARD_SEP). */
static uint8_t *append_part(uint8_t *out, size_t *total, const char *path)
{
    size_t n, seplen = strlen(FUZZ_SHARD_SEP);
    uint8_t *part = slurp(path, &n);
    out = realloc(out, *total + seplen + n);
    if (!out)
        die(path, "out of memory");
    memcpy(out + *total, FUZZ_SHARD_SEP, seplen);
    memcpy(out + *total + seplen, part, n);
    *total += seplen + n;
    free(part);
    return out;
}

typedef struct {
    const char *name;
    void (*fill)(wpack_writer *);
    uint64_t shard_size;
    int keep_shards;    /* how many shards go into the seed (-1: all) */
} shard_seed;

static void three_tensors(wpack_writer *w)
{
    one_tensor(w);
    W(wpack_writer_add_tensor(w, "bias", WPACK_DTYPE_F32, 1, (uint64_t[]){6}, f32s, sizeof f32s));
    W(wpack_writer_add_tensor(w, "embed", WPACK_DTYPE_U8, 2, (uint64_t[]){4, 8},
                              "0123456789abcdefghijklmnopqrstuv", 32));
    W(wpack_writer_set_string(w, "model", "three"));
}

static const shard_seed shard_seeds[] = {
    {"seed-one-shard.set", three_tensors, 1u << 20, -1},
    {"seed-three-shards.set", three_tensors, 16, -1},
    {"seed-every-dtype.set", every_dtype, 64, -1},
    {"seed-metadata-aliases.set", aliases, 16, -1},
    {"seed-shard-missing.set", three_tensors, 16, 2},
};

/* A sharded set written with opt.shard_size into a temp directory, as
 * one fuzz_shards input. */
static void write_shard_seed(const shard_seed *s)
{
    char tmp[] = "/tmp/wpack-make-corpus-XXXXXX", path[1200];
    if (!mkdtemp(tmp))
        die("mkdtemp", strerror(errno));
    snprintf(path, sizeof path, "%s/m.wpack", tmp);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    opt.shard_size = s->shard_size;
    wpack_writer *w;
    if (wpack_writer_open(&w, path, &opt) != WPACK_OK)
        die(path, wpack_writer_errmsg(w));
    s->fill(w);
    wpack_archive *ar = finish_and_open(w, path);
    size_t total;
    uint8_t *out = slurp(path, &total);
    uint32_t ns = wpack_shard_count(ar);
    for (uint32_t k = 0; k < ns && (s->keep_shards < 0 || k < (uint32_t)s->keep_shards); k++) {
        const char *sp;
        const wpack_archive *sh;
        wpack_shard_at(ar, k, &sp, &sh);
        out = append_part(out, &total, sp);
    }
    for (uint32_t k = 0; k < ns; k++) {
        const char *sp;
        const wpack_archive *sh;
        wpack_shard_at(ar, k, &sp, &sh);
        unlink(sp);
    }
    wpack_close(ar);
    unlink(path);
    rmdir(tmp);
    write_file("fuzz_shards", s->name, out, total);
    free(out);
}

/* Hand-made sets, each broken in one way the reader must refuse (the
 * harness forges lengths, index checksums and entry checksums, so those
 * are right): a manifest from wpack_writer_add_external and set_shards (or
 * set_array) over shard s.wpack (three_tensors, plus a splat). A fault the
 * writer refuses to write (a shard list or shard number a reader refuses,
 * spec 19a) is written as a valid stand-in and patched in (forge_list). */
enum {
    H_ITSELF,        /* the shard is named like the manifest: a set as its own shard */
    H_SLASH,         /* a shard name with a '/' */
    H_TARGET,        /* an external entry's shard number past the list */
    H_NOT_IN_SHARD,  /* an external entry named like no data entry of the shard */
    H_SPLAT,         /* an external entry for the shard's splat */
    H_DIMS,          /* an external entry with other dims than the shard's */
    H_CHANGED,       /* two names for one file, written from two different parts */
    H_NO_LENGTHS,    /* "wpack.shard_lengths" missing */
    H_COUNTS,        /* "wpack.shard_lengths" one element short */
};
static const char *const hostile_names[] = {
    "hostile-itself.set", "hostile-slash.set", "hostile-target.set", "hostile-not-in-shard.set",
    "hostile-splat.set", "hostile-dims.set", "hostile-changed.set", "hostile-no-lengths.set",
    "hostile-counts.set",
};

/* Replace the n bytes `from` in the manifest image m[0..len) with `to`
 * (the first place they occur), or die. */
static void patch_bytes(uint8_t *m, size_t len, const void *from, const void *to, size_t n)
{
    uint8_t *at = memmem(m, len, from, n);
    if (!at)
        die("forge", "stand-in bytes not found");
    memcpy(at, to, n);
}

/* The faults of the shard list the writer refuses, patched into the
 * manifest m[0..len) (its checksums re-sealed by the caller). */
static void forge_list(uint8_t *m, size_t len, int how)
{
    if (how == H_SLASH)
        patch_bytes(m, len, "x_s.wpack", "x/s.wpack", 10);
    if (how == H_CHANGED) /* one name twice */
        patch_bytes(m, len, "s.wpack\0t.wpack", "s.wpack\0s.wpack", 16);
    if (how == H_NO_LENGTHS) /* the lengths array under another key */
        patch_bytes(m, len, "wpack.shard_lengths", "wpack.shard_lengthz", 20);
    if (how == H_COUNTS || how == H_TARGET) {
        /* the lengths array one element long (the checksums follow it in
         * aux), or the external "bias" in shard 1 of 1 */
        const uint8_t *ix = m + wpk_ld64(m + WPK_H_INDEX_OFFSET_OFF);
        int sec = how == H_COUNTS ? WPK_SEC_METADATA : WPK_SEC_ENTRIES;
        uint32_t size = how == H_COUNTS ? WPK_META_REC_SIZE : WPK_ENTRY_SIZE;
        const char *name = how == H_COUNTS ? "wpack.shard_lengths" : "bias";
        uint64_t off = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * sec);
        uint64_t n = wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * sec + 8) / size;
        const char *strs = (const char *)ix + wpk_ld64(ix + WPK_I_SECTIONS_OFF + 16 * WPK_SEC_STRINGS);
        uint64_t k = 0;
        while (k < n && strcmp(strs + wpk_ld64(ix + off + k * size), name) != 0)
            k++;
        if (k == n)
            die("forge", name);
        uint8_t *r = m + (ix - m) + off + k * size;
        if (how == H_COUNTS)
            wpk_st64(r + WPK_M_COUNT_OFF, 2);
        else
            wpk_st32(r + WPK_E_TARGET_OFF, 1);
    }
}

static void write_hostile_set(int how)
{
    char tmp[] = "/tmp/wpack-make-corpus-XXXXXX", spath[1200], mpath[1200];
    if (!mkdtemp(tmp))
        die("mkdtemp", strerror(errno));
    snprintf(spath, sizeof spath, "%s/s.wpack", tmp);
    snprintf(mpath, sizeof mpath, "%s/set.wpack", tmp);
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = 64;
    wpack_writer *w;
    if (wpack_writer_open(&w, spath, &opt) != WPACK_OK)
        die(spath, wpack_writer_errmsg(w));
    three_tensors(w);
    W(wpack_writer_add_splat(w, "ones", WPACK_DTYPE_F32, 1, (uint64_t[]){4}, f32s, 4));
    char err[600];
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK)
        die(spath, err);
    wpack_archive *sh;
    if (wpack_open_file(&sh, spath, 0) != WPACK_OK)
        die(spath, wpack_errmsg(sh));
    wpack_info info;
    wpack_get_info(sh, &info);

    opt.weight_stats = 0;
    if (wpack_writer_open(&w, mpath, &opt) != WPACK_OK)
        die(mpath, wpack_writer_errmsg(w));
    wpack_tensor t;
    const char *const names[] = {"weight", "bias", "embed"};
    for (int k = 0; k < 3; k++) {
        if (wpack_find(sh, names[k], &t) != WPACK_OK)
            die(spath, names[k]);
        if (how == H_DIMS && k == 0)
            t.dims[0] = 3, t.dims[1] = 2;
        const char *as = how == H_NOT_IN_SHARD && k == 2 ? "embedding" : names[k];
        W(wpack_writer_add_external(w, as, 0, &t));
    }
    if (how == H_SPLAT) {
        wpack_tensor ones;
        wpack_find(sh, "ones", &ones);
        t.dims[0] = 4; /* t is embed: place it like data, shape it like ones */
        t.rank = 1;
        t.dtype = WPACK_DTYPE_F32;
        t.nelems = 4;
        t.nbytes = t.stored_length = 16;
        W(wpack_writer_add_external(w, "ones", 0, &t));
    }
    const char *shard_names[2] = {how == H_ITSELF ? "set.wpack" : how == H_SLASH ? "x_s.wpack" : "s.wpack",
                                  "t.wpack"};
    uint64_t lengths[2] = {info.file_length, info.file_length};
    uint64_t sums[2] = {info.index_checksum, info.index_checksum};
    uint32_t n = how == H_CHANGED ? 2 : 1;
    if (how == H_COUNTS) {
        /* the lengths before the checksums in aux (forge_list lengthens it) */
        int64_t l[1] = {(int64_t)info.file_length}, x[1] = {(int64_t)info.index_checksum};
        W(wpack_writer_set_array(w, "wpack.shards", WPACK_META_STRING, 1, shard_names));
        W(wpack_writer_set_array(w, "wpack.shard_lengths", WPACK_META_I64, 1, l));
        W(wpack_writer_set_array(w, "wpack.shard_index_xxh3", WPACK_META_I64, 1, x));
    } else {
        W(wpack_writer_set_shards(w, n, shard_names, lengths, sums));
    }
    if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK)
        die(mpath, err);
    wpack_close(sh);

    size_t total;
    uint8_t *out = slurp(mpath, &total);
    forge_list(out, total, how);
    fix_checksums(out, total, 0);
    out = append_part(out, &total, spath);
    if (how == H_CHANGED) {
        /* the second part: another archive, written over the first */
        if (wpack_writer_open(&w, spath, &opt) != WPACK_OK)
            die(spath, wpack_writer_errmsg(w));
        three_tensors(w);
        W(wpack_writer_set_string(w, "changed", "yes"));
        if (wpack_writer_finish(w, err, sizeof err) != WPACK_OK)
            die(spath, err);
        out = append_part(out, &total, spath);
    }
    write_file("fuzz_shards", hostile_names[how], out, total);
    free(out);
    unlink(spath);
    unlink(mpath);
    rmdir(tmp);
}

/* ----------------------------------------------------------------- npy */

static void npy_seeds(void)
{
    for (int d = WPACK_DTYPE_F64; d <= WPACK_DTYPE_BOOL; d++) {
        char buf[4096], name[64];
        uint64_t dims[3] = {2, 3, (uint64_t)d};
        size_t n = npy_format_header(buf, sizeof buf, d, (unsigned)(d % 4), dims);
        if (!n)
            die("npy_format_header", wpack_dtype_name(d));
        size_t data = 2 * wpack_dtype_size(d); /* a little data after the header */
        memset(buf + n, 0x3c, data);
        snprintf(name, sizeof name, "seed-fmt-%s.npy", wpack_dtype_name(d));
        write_file("fuzz_npy", name, buf, n + data);
    }
}

/* -------------------------------------------------------- round trip */

/* Programs for fuzz_roundtrip: an options byte, then bytes it reads as
 * operations. Byte values are kept small so that most choices are valid
 * (short names from the alphabet, small dims). */
static void roundtrip_seeds(void)
{
    /* options byte, then the compression byte: level 1 or 3 with 4 KiB
     * chunks and no minimum size for half of them */
    static const uint8_t opts[8] = {0x08, 0x09, 0x3a, 0x0b, 0x0c, 0x05, 0x68, 0x00};
    static const uint8_t comp[8] = {0x00, 0x23, 0x00, 0x24, 0x2b, 0x00, 0x23, 0x00};
    uint8_t buf[1024];
    for (int s = 0; s < 8; s++) {
        rng_state = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
        size_t n = 128u << (s % 3);
        buf[0] = opts[s];
        buf[1] = comp[s];
        for (size_t k = 2; k < n; k++) {
            uint8_t b = rng8();
            buf[k] = s % 2 ? b : (uint8_t)(b % 24); /* half of them with small bytes only */
        }
        char name[32];
        snprintf(name, sizeof name, "seed-program-%d", s);
        write_file("fuzz_roundtrip", name, buf, n);
    }
    /* One operation of each kind, repeated: op byte k (mod 10) then
     * small bytes; the same shapes help the alias/name/stats ops find
     * earlier entries. */
    for (int op = 0; op < 10; op++) {
        rng_state = 0x1234567ull + (uint64_t)op;
        size_t n = 0;
        buf[n++] = 0x08;
        buf[n++] = op % 2 ? 0x23 : 0x00;
        for (int rep = 0; rep < 6; rep++) {
            buf[n++] = (uint8_t)(rep % 2 ? op : rep % 3 == 0 ? 0 : 3); /* mix in tensors and splats */
            for (int k = 0; k < 24; k++)
                buf[n++] = (uint8_t)(rng8() % 12);
        }
        char name[32];
        snprintf(name, sizeof name, "seed-op-%d", op);
        write_file("fuzz_roundtrip", name, buf, n);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (with DIR/fuzz_archive, DIR/fuzz_npy, DIR/fuzz_roundtrip)\n",
                argv[0]);
        return 2;
    }
    out_dir = argv[1];
    for (size_t k = 0; k < sizeof archives / sizeof archives[0]; k++)
        write_archive(&archives[k]);
    for (size_t k = 0; k < sizeof shard_seeds / sizeof shard_seeds[0]; k++)
        write_shard_seed(&shard_seeds[k]);
    for (int how = H_ITSELF; how <= H_COUNTS; how++)
        write_hostile_set(how);
    npy_seeds();
    roundtrip_seeds();
    return 0;
}
