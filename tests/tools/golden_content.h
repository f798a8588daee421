/*
 * golden_content.h - shared by tests/tools/make_golden.c, tests/unit/test_golden.c
 * and tests/unit/test_malformed.c:
 *
 *   1. golden_write(): the writer calls that produce tests/golden/v1_basic.wpack.
 *      Deterministic: fixed content, explicit "wpack.producer" (so a library
 *      version bump does not change the bytes), alignment 64, and float values
 *      whose automatic weight statistics are exact in any summation order.
 *      Changing this function changes the committed golden bytes: regenerate
 *      with make_golden and say why in the commit.
 *   2. golden_describe(): the text of tests/golden/v1_basic.expect, made from an
 *      opened archive through the public API only.
 *   3. Archive surgery (gimg_*): find records in an archive image, change them
 *      and re-seal the checksums, so a malformed case reaches the rule it
 *      is about instead of failing at a checksum.
 *
 * Everything is static inline so each includer uses only what it needs.
 */
#ifndef WPACK_TESTS_GOLDEN_CONTENT_H
#define WPACK_TESTS_GOLDEN_CONTENT_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "bytes.h"
#include "slurp.h"
#include "layout.h"
#include "wpack.h"

/* ================================================================ content */

#define GOLDEN_ALIGNMENT 64u
#define GOLDEN_PRODUCER "wpack golden"

/* Names the malformed matrix and the hostile generator pick records by. */
#define G_F64 "dense.f64"
#define G_F32 "dense.f32"          /* [2,4] f32, per-channel weight stats, aliased */
#define G_ALIAS "alias.tied"       /* -> dense.f32 */
#define G_ALIAS_SPLAT "alias.splat" /* -> splat.ones */
#define G_SPLAT "splat.ones"       /* f32 [16,16] fill 1.0 */
#define G_EMPTY "empty.f32"        /* [0,3]: zero bytes */
#define G_I64 "int.i64"            /* [3] */
#define G_U8 "int.u8"              /* [9], the last extent: 7 bytes of padding follow */
#define G_Q4 "quant.q4"            /* block dtype 128 */
#define G_SCALAR "scalar.i32"      /* rank 0 */
#define G_ACT "encoder.layers.0"   /* activation stats, per-tensor, histogram + percentiles */

/* Run one writer call; on failure copy the writer's message and stop. */
#define G_TRY(call)                                                                      \
    do {                                                                                 \
        int g_rc_ = (call);                                                              \
        if (g_rc_ != WPACK_OK) {                                                         \
            if (err && errlen)                                                           \
                snprintf(err, errlen, "%s: %s", #call, wpack_writer_errmsg(w));          \
            wpack_writer_abort(w);                                                       \
            return g_rc_;                                                                \
        }                                                                                \
    } while (0)

static inline int golden_add_f32(wpack_writer *w, const char *name, unsigned rank,
                                 const uint64_t *dims, const float *v, size_t n)
{
    uint8_t b[64 * 4];
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        wpk_st32(b + 4 * i, u);
    }
    return wpack_writer_add_tensor(w, name, WPACK_DTYPE_F32, rank, dims, b, 4 * n);
}

/* Open a writer at path; on failure the message goes to err ("open PATH:
 * ...", the path cut at 256 bytes) and *w is freed and NULL. What every
 * golden writer starts with. */
static inline int golden_writer_open(wpack_writer **w, const char *path,
                                     const wpack_writer_options *opt, char *err, size_t errlen)
{
    *w = NULL;
    int rc = wpack_writer_open(w, path, opt);
    if (rc) {
        if (err && errlen)
            snprintf(err, errlen, "open %.256s: %s", path, wpack_writer_errmsg(*w));
        wpack_writer_abort(*w);
        *w = NULL;
    }
    return rc;
}

/* Finish w; on failure the message goes to err ("finish: ..."). */
static inline int golden_writer_finish(wpack_writer *w, char *err, size_t errlen)
{
    char buf[600];
    int rc = wpack_writer_finish(w, buf, sizeof buf);
    if (rc && err && errlen)
        snprintf(err, errlen, "finish: %s", buf);
    return rc;
}

/* Write the golden archive to path. 0 or a wpack error code (message in err). */
static inline int golden_write(const char *path, char *err, size_t errlen)
{
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    opt.alignment = GOLDEN_ALIGNMENT;
    opt.weight_stats = 1;   /* automatic per-tensor stats of the float tensors */
    opt.histogram_bins = 0;
    wpack_writer *w;
    int rc = golden_writer_open(&w, path, &opt, err, errlen);
    if (rc)
        return rc;
    /* Data entries, in this order in the data region (arrival = offset order). */
    {
        uint64_t d[2] = {2, 2};
        uint8_t b[32];
        const double v[4] = {1.0, -2.0, 0.5, 4.0};
        for (int i = 0; i < 4; i++)
            wpk_stf64(b + 8 * i, v[i]);
        G_TRY(wpack_writer_add_tensor(w, G_F64, WPACK_DTYPE_F64, 2, d, b, sizeof b));
    }
    {
        uint64_t d[2] = {2, 4};
        const float v[8] = {1, 2, 3, 4, -1, -2, -3, -4};
        G_TRY(golden_add_f32(w, G_F32, 2, d, v, 8));
    }
    {
        uint64_t d[1] = {4};
        uint8_t b[8];
        const uint16_t v[4] = {0x3c00, 0xc000, 0x3800, 0x3400}; /* 1 -2 0.5 0.25 */
        for (int i = 0; i < 4; i++)
            wpk_st16(b + 2 * i, v[i]);
        G_TRY(wpack_writer_add_tensor(w, "dense.f16", WPACK_DTYPE_F16, 1, d, b, sizeof b));
    }
    {
        uint64_t d[2] = {2, 2};
        uint8_t b[8];
        const uint16_t v[4] = {0x3f80, 0xbf00, 0x4000, 0x0000}; /* 1 -0.5 2 0 */
        for (int i = 0; i < 4; i++)
            wpk_st16(b + 2 * i, v[i]);
        G_TRY(wpack_writer_add_tensor(w, "dense.bf16", WPACK_DTYPE_BF16, 2, d, b, sizeof b));
    }
    {
        uint64_t d[1] = {4};
        const uint8_t e4[4] = {0x38, 0x40, 0xb8, 0x30}; /* 1 2 -1 0.5 */
        const uint8_t e5[4] = {0x3c, 0xc0, 0x38, 0x44}; /* 1 -2 0.5 4 */
        G_TRY(wpack_writer_add_tensor(w, "dense.f8e4m3fn", WPACK_DTYPE_F8E4M3FN, 1, d, e4, 4));
        G_TRY(wpack_writer_add_tensor(w, "dense.f8e5m2", WPACK_DTYPE_F8E5M2, 1, d, e5, 4));
    }
    {
        uint64_t d[1] = {3};
        uint8_t b[24];
        const int64_t v[3] = {-1, INT64_MAX, INT64_MIN};
        for (int i = 0; i < 3; i++)
            wpk_st64(b + 8 * i, (uint64_t)v[i]);
        G_TRY(wpack_writer_add_tensor(w, G_I64, WPACK_DTYPE_I64, 1, d, b, sizeof b));
    }
    {
        uint64_t d[2] = {2, 3};
        uint8_t b[24];
        for (int i = 0; i < 6; i++)
            wpk_st32(b + 4 * i, (uint32_t)(int32_t)(i * 1000 - 2500));
        G_TRY(wpack_writer_add_tensor(w, "int.i32", WPACK_DTYPE_I32, 2, d, b, sizeof b));
    }
    {
        uint64_t d[1] = {5};
        uint8_t b[10];
        for (int i = 0; i < 5; i++)
            wpk_st16(b + 2 * i, (uint16_t)(int16_t)(i * 300 - 32768 + i));
        G_TRY(wpack_writer_add_tensor(w, "int.i16", WPACK_DTYPE_I16, 1, d, b, sizeof b));
    }
    {
        uint64_t d[1] = {7};
        const uint8_t b[7] = {0x80, 0xff, 0x00, 0x01, 0x7f, 0x10, 0xf0};
        G_TRY(wpack_writer_add_tensor(w, "int.i8", WPACK_DTYPE_I8, 1, d, b, sizeof b));
    }
    {
        uint64_t d[1] = {2};
        uint8_t b[16];
        wpk_st64(b, UINT64_MAX);
        wpk_st64(b + 8, 0x0123456789abcdefull);
        G_TRY(wpack_writer_add_tensor(w, "int.u64", WPACK_DTYPE_U64, 1, d, b, sizeof b));
    }
    {
        uint64_t d[1] = {3};
        uint8_t b[12];
        wpk_st32(b, 0);
        wpk_st32(b + 4, 0xdeadbeefu);
        wpk_st32(b + 8, 7);
        G_TRY(wpack_writer_add_tensor(w, "int.u32", WPACK_DTYPE_U32, 1, d, b, sizeof b));
    }
    {
        uint64_t d[3] = {1, 2, 2};
        uint8_t b[8];
        for (int i = 0; i < 4; i++)
            wpk_st16(b + 2 * i, (uint16_t)(0xfff0 + i));
        G_TRY(wpack_writer_add_tensor(w, "int.u16", WPACK_DTYPE_U16, 3, d, b, sizeof b));
    }
    {
        int code = 0;
        G_TRY(wpack_writer_add_block_dtype(w, "q4_0", 32, 18, "scale:f16,nibbles", 17, &code));
        uint64_t d[2] = {2, 64};
        uint8_t b[72];
        for (int i = 0; i < 72; i++)
            b[i] = (uint8_t)(i * 37 + 11);
        G_TRY(wpack_writer_add_tensor(w, G_Q4, code, 2, d, b, sizeof b));
    }
    {
        uint64_t d[8] = {1, 2, 1, 1, 1, 1, 1, 2};
        const uint8_t b[4] = {1, 2, 3, 4};
        G_TRY(wpack_writer_add_tensor(w, "rank8.u8", WPACK_DTYPE_U8, 8, d, b, sizeof b));
    }
    {
        uint8_t b[4];
        wpk_st32(b, 42);
        G_TRY(wpack_writer_add_tensor(w, G_SCALAR, WPACK_DTYPE_I32, 0, NULL, b, sizeof b));
    }
    {
        uint64_t d[2] = {0, 3};
        G_TRY(wpack_writer_add_tensor(w, G_EMPTY, WPACK_DTYPE_F32, 2, d, "", 0));
    }
    {
        uint64_t d[1] = {6};
        const uint8_t b[6] = {1, 0, 0, 1, 1, 0};
        G_TRY(wpack_writer_add_tensor(w, "int.bool", WPACK_DTYPE_BOOL, 1, d, b, sizeof b));
    }
    {
        uint64_t d[1] = {3};
        const uint8_t b[3] = {0xc3, 0xa9, 0x21};
        G_TRY(wpack_writer_add_tensor(w, "unicode.\xc3\xa9", WPACK_DTYPE_U8, 1, d, b, sizeof b));
    }
    {
        /* Streamed in uneven pieces; 9 bytes so the index follows 7 bytes of padding. */
        uint64_t d[1] = {9};
        const uint8_t b[9] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
        G_TRY(wpack_writer_begin_tensor(w, G_U8, WPACK_DTYPE_U8, 1, d));
        G_TRY(wpack_writer_write(w, b, 2));
        G_TRY(wpack_writer_write(w, b + 2, 0));
        G_TRY(wpack_writer_write(w, b + 2, 7));
        G_TRY(wpack_writer_end_tensor(w));
    }
    /* Splat and aliases (no bytes in the data region). */
    {
        uint64_t d[2] = {16, 16};
        uint8_t one[4];
        wpk_st32(one, 0x3f800000u);
        G_TRY(wpack_writer_add_splat(w, G_SPLAT, WPACK_DTYPE_F32, 2, d, one, 4));
        G_TRY(wpack_writer_add_alias(w, G_ALIAS, G_F32));
        G_TRY(wpack_writer_add_alias(w, G_ALIAS_SPLAT, G_SPLAT));
    }
    /* Metadata of every type. */
    G_TRY(wpack_writer_set_string(w, "wpack.producer", GOLDEN_PRODUCER));
    G_TRY(wpack_writer_set_string(w, "model.name", "golden-mlp"));
    G_TRY(wpack_writer_set_string(w, "model.source", "tests/tools/golden_content.h"));
    G_TRY(wpack_writer_set_string(w, "text.multiline", "line one\nline two\ttab \xe2\x9c\x93"));
    G_TRY(wpack_writer_set_i64(w, "train.steps", -1234567890123ll));
    G_TRY(wpack_writer_set_f64(w, "train.lr", 0.00025));
    G_TRY(wpack_writer_set_bool(w, "train.converged", 1));
    G_TRY(wpack_writer_set_bool(w, "train.frozen", 0));
    {
        const uint8_t raw[4] = {0x00, 0x01, 0xfe, 0xff};
        G_TRY(wpack_writer_set_bytes(w, "blob.raw", raw, sizeof raw));
        G_TRY(wpack_writer_set_bytes(w, "blob.empty", raw, 0));
    }
    {
        const int64_t ai[4] = {1, -2, INT64_MAX, INT64_MIN};
        const double af[3] = {0.5, -1.25, 1e300};
        const int ab[3] = {1, 0, 1};
        const char *as[4] = {"alpha", "h\xc3\xa9llo", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", ""};
        G_TRY(wpack_writer_set_array(w, "array.i64", WPACK_META_I64, 4, ai));
        G_TRY(wpack_writer_set_array(w, "array.f64", WPACK_META_F64, 3, af));
        G_TRY(wpack_writer_set_array(w, "array.bool", WPACK_META_BOOL, 3, ab));
        G_TRY(wpack_writer_set_array(w, "array.str", WPACK_META_STRING, 4, as));
        G_TRY(wpack_writer_set_array(w, "array.empty", WPACK_META_I64, 0, NULL));
    }
    /* Name map. */
    G_TRY(wpack_writer_add_name(w, "p_dense_f32", G_F32));
    G_TRY(wpack_writer_add_name(w, "_param_constant0", G_I64));
    G_TRY(wpack_writer_add_name(w, "const.\xe2\x82\xac", G_SPLAT));
    /* Stats: per-channel weight stats (replacing the automatic ones of dense.f32),
     * per-tensor and per-channel activation stats. */
    {
        const double mn[2] = {1, -4}, mx[2] = {4, -1}, am[2] = {4, 4}, me[2] = {2.5, -2.5},
                     va[2] = {1.25, 1.25};
        const double edges[5] = {-4, -2, 0, 2, 4};
        const uint64_t counts[4] = {2, 2, 1, 3};
        const double pct[6] = {0, -4, 50, 0, 100, 4};
        wpack_stats_in s = {
            .key = G_F32, .kind = WPACK_STATS_WEIGHT, .granularity = WPACK_GRAN_CHANNEL,
            .axis = 0, .channels = 2, .count = 8, .min = mn, .max = mx, .absmax = am,
            .mean = me, .variance = va, .hist_bins = 4, .hist_edges = edges,
            .hist_counts = counts, .percentile_count = 3, .percentiles = pct,
        };
        G_TRY(wpack_writer_add_stats(w, &s));
    }
    {
        const double mn = -1.5, mx = 3, am = 3, me = 0.25, va = 0.5625;
        const double edges[3] = {-1.5, 0.75, 3};
        const uint64_t counts[2] = {60, 40};
        const double pct[4] = {1, -1.25, 99, 2.75};
        wpack_stats_in s = {
            .key = G_ACT, .kind = WPACK_STATS_ACTIVATION, .granularity = WPACK_GRAN_TENSOR,
            .axis = 0, .channels = 1, .count = 100, .min = &mn, .max = &mx, .absmax = &am,
            .mean = &me, .variance = &va, .hist_bins = 2, .hist_edges = edges,
            .hist_counts = counts, .percentile_count = 2, .percentiles = pct,
        };
        G_TRY(wpack_writer_add_stats(w, &s));
    }
    {
        const double mn[3] = {-1, 0, 2}, mx[3] = {1, 0.5, 2}, am[3] = {1, 0.5, 2},
                     me[3] = {0, 0.25, 2}, va[3] = {0.5, 0.0625, 0};
        wpack_stats_in s = {
            .key = "0", .kind = WPACK_STATS_ACTIVATION, .granularity = WPACK_GRAN_CHANNEL,
            .axis = 1, .channels = 3, .count = 12, .min = mn, .max = mx, .absmax = am,
            .mean = me, .variance = va,
        };
        G_TRY(wpack_writer_add_stats(w, &s));
    }
    {
        /* Activation stats under a key that also has (automatic) weight stats. */
        const double mn = -8, mx = 8, am = 8, me = 0, va = 16;
        wpack_stats_in s = {
            .key = G_F64, .kind = WPACK_STATS_ACTIVATION, .granularity = WPACK_GRAN_TENSOR,
            .channels = 1, .count = 64, .min = &mn, .max = &mx, .absmax = &am, .mean = &me,
            .variance = &va,
        };
        G_TRY(wpack_writer_add_stats(w, &s));
    }
    return golden_writer_finish(w, err, errlen);
}

/* ============================================================ description */

typedef struct {
    char *p;
    size_t len, cap;
} gstr;

static inline void gstr_add(gstr *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void gstr_add(gstr *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (s->len + (size_t)n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p)
            abort();
        s->p = p;
        s->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(s->p + s->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->len += (size_t)n;
}

/* A string value: quoted, with \n \t \\ \" and \xNN for other control bytes. */
static inline void gstr_quoted(gstr *s, const char *v, size_t n)
{
    gstr_add(s, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '\n')
            gstr_add(s, "\\n");
        else if (c == '\t')
            gstr_add(s, "\\t");
        else if (c == '\\' || c == '"')
            gstr_add(s, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            gstr_add(s, "\\x%02x", c);
        else
            gstr_add(s, "%c", c);
    }
    gstr_add(s, "\"");
}

static inline const char *golden_kind_name(int kind)
{
    return kind == WPACK_KIND_DATA       ? "data"
           : kind == WPACK_KIND_SPLAT    ? "splat"
           : kind == WPACK_KIND_ALIAS    ? "alias"
           : kind == WPACK_KIND_EXTERNAL ? "external"
                                         : "?";
}

static inline void golden_dtype_name(char *buf, size_t n, int dtype)
{
    const char *name = wpack_dtype_name(dtype);
    if (name)
        snprintf(buf, n, "%s", name);
    else
        snprintf(buf, n, "block%d", dtype - WPACK_DTYPE_BLOCK_BASE);
}

static inline void golden_meta_value(gstr *s, const wpack_meta *m)
{
    switch (m->type) {
    case WPACK_META_STRING:
        gstr_quoted(s, m->str, (size_t)m->count);
        break;
    case WPACK_META_I64:
        gstr_add(s, "%lld", (long long)m->i64);
        break;
    case WPACK_META_F64:
        gstr_add(s, "%.17g", m->f64);
        break;
    case WPACK_META_BOOL:
        gstr_add(s, "%s", m->boolean ? "true" : "false");
        break;
    case WPACK_META_BYTES:
        gstr_add(s, "0x");
        for (uint64_t i = 0; i < m->count; i++)
            gstr_add(s, "%02x", ((const uint8_t *)m->bytes)[i]);
        break;
    default:
        gstr_add(s, "?");
    }
}

static inline const char *golden_meta_type(int t)
{
    static const char *const names[] = {"?", "string", "i64", "f64", "bool", "bytes", "array"};
    return t >= 1 && t <= 6 ? names[t] : "?";
}

/*
 * The .expect text of an opened archive: info, then one line per entry
 * ("entry NAME KIND DTYPE DIMS nbytes=N xxh3=X" where X hashes the logical bytes,
 * a splat expanded), per metadata key, per name-map record and per stats record.
 * Returns a malloc'd string; NULL if a reader call failed (which is a bug).
 */
static inline char *golden_describe(wpack_archive *ar)
{
    gstr s = {0};
    wpack_info in;
    wpack_get_info(ar, &in);
    gstr_add(&s, "# wpack golden expectations, written by tests/tools/make_golden.c; "
                 "test_golden compares them line by line\n");
    gstr_add(&s,
             "info format=%u.%u alignment=%u generation=%llu file_length=%llu data=%llu+%llu "
             "index=%llu+%llu index_xxh3=%016llx entries=%llu metadata=%llu namemap=%llu "
             "stats=%llu block_dtypes=%llu\n",
             in.format_major, in.format_minor, in.alignment, (unsigned long long)in.generation,
             (unsigned long long)in.file_length, (unsigned long long)in.data_offset,
             (unsigned long long)in.data_length, (unsigned long long)in.index_offset,
             (unsigned long long)in.index_length, (unsigned long long)in.index_checksum,
             (unsigned long long)in.entry_count, (unsigned long long)in.metadata_count,
             (unsigned long long)in.namemap_count, (unsigned long long)in.stats_count,
             (unsigned long long)in.block_dtype_count);
    int ok = 1;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        if (wpack_tensor_at(ar, i, &t)) {
            ok = 0;
            break;
        }
        char dt[32];
        golden_dtype_name(dt, sizeof dt, t.dtype);
        gstr_add(&s, "entry %s %s %s [", t.name, golden_kind_name(t.kind), dt);
        for (unsigned d = 0; d < t.rank; d++)
            gstr_add(&s, "%s%llu", d ? "," : "", (unsigned long long)t.dims[d]);
        uint8_t *bytes = malloc(t.nbytes ? (size_t)t.nbytes : 1);
        if (!bytes || wpack_read(ar, i, 0, bytes, (size_t)t.nbytes)) {
            free(bytes);
            ok = 0;
            break;
        }
        gstr_add(&s, "] nbytes=%llu xxh3=%016llx", (unsigned long long)t.nbytes,
                 (unsigned long long)XXH3_64bits(bytes, (size_t)t.nbytes));
        free(bytes);
        /* 1.1 fields, printed only where they apply (v1_basic has none) */
        if (t.codec != WPACK_CODEC_NONE)
            gstr_add(&s, " codec=%d chunk=%u stored=%llu offset=%llu stored_xxh3=%016llx", t.codec,
                     t.chunk_size, (unsigned long long)t.stored_length,
                     (unsigned long long)t.offset, (unsigned long long)t.checksum);
        /* 1.2: the size of its checksummed chunks, where it has them */
        if (wpack_tensor_chunk_size(ar, i))
            gstr_add(&s, " chunk_sums=%llu", (unsigned long long)wpack_tensor_chunk_size(ar, i));
        if (t.kind == WPACK_KIND_EXTERNAL)
            gstr_add(&s, " shard=%llu offset=%llu", (unsigned long long)t.alias_target,
                     (unsigned long long)t.offset);
        if (t.kind == WPACK_KIND_ALIAS) {
            wpack_tensor tt;
            if (wpack_tensor_at(ar, t.alias_target, &tt)) {
                ok = 0;
                break;
            }
            gstr_add(&s, " target=%s", tt.name);
        }
        gstr_add(&s, "\n");
    }
    for (uint64_t i = 0; ok && i < wpack_meta_count(ar); i++) {
        wpack_meta m;
        if (wpack_meta_at(ar, i, &m)) {
            ok = 0;
            break;
        }
        if (m.type == WPACK_META_ARRAY) {
            gstr_add(&s, "meta %s array<%s> [", m.key, golden_meta_type(m.elem_type));
            for (uint64_t j = 0; j < m.count; j++) {
                wpack_meta e;
                if (wpack_meta_elem(ar, &m, j, &e)) {
                    ok = 0;
                    break;
                }
                if (j)
                    gstr_add(&s, ", ");
                golden_meta_value(&s, &e);
            }
            gstr_add(&s, "]\n");
        } else {
            gstr_add(&s, "meta %s %s ", m.key, golden_meta_type(m.type));
            golden_meta_value(&s, &m);
            gstr_add(&s, "\n");
        }
    }
    for (uint64_t i = 0; ok && i < wpack_namemap_count(ar); i++) {
        const char *other;
        uint64_t e;
        wpack_tensor t;
        if (wpack_namemap_at(ar, i, &other, &e) || wpack_tensor_at(ar, e, &t)) {
            ok = 0;
            break;
        }
        gstr_add(&s, "namemap %s -> %s\n", other, t.name);
    }
    static const char *const which[5] = {"min", "max", "absmax", "mean", "variance"};
    for (uint64_t i = 0; ok && i < wpack_stats_count(ar); i++) {
        wpack_stats st;
        if (wpack_stats_at(ar, i, &st)) {
            ok = 0;
            break;
        }
        gstr_add(&s, "stats %s %s %s axis=%u channels=%u count=%llu", st.key,
                 st.kind == WPACK_STATS_WEIGHT ? "weight" : "activation",
                 st.granularity == WPACK_GRAN_TENSOR ? "tensor" : "channel", st.axis,
                 st.channels, (unsigned long long)st.count);
        for (int k = 0; k < 5; k++) {
            gstr_add(&s, " %s=[", which[k]);
            for (uint32_t c = 0; c < st.channels; c++)
                gstr_add(&s, "%s%.17g", c ? "," : "", wpack_stats_value(&st, k, c));
            gstr_add(&s, "]");
        }
        if (st.hist_bins) {
            gstr_add(&s, " hist=[");
            for (uint32_t b = 0; b < st.hist_bins; b++) {
                double lo, hi;
                uint64_t n;
                wpack_stats_bin(&st, b, &lo, &hi, &n);
                gstr_add(&s, "%s%.17g..%.17g:%llu", b ? "," : "", lo, hi, (unsigned long long)n);
            }
            gstr_add(&s, "]");
        }
        if (st.percentile_count) {
            gstr_add(&s, " pct=[");
            for (uint32_t j = 0; j < st.percentile_count; j++) {
                double q, v;
                wpack_stats_percentile(&st, j, &q, &v);
                gstr_add(&s, "%s%.17g:%.17g", j ? "," : "", q, v);
            }
            gstr_add(&s, "]");
        }
        gstr_add(&s, "\n");
    }
    if (!ok) {
        free(s.p);
        return NULL;
    }
    return s.p;
}

/* ================================================================ surgery */

/* An archive image in memory. The trailer is taken to be the last 128 bytes. */
typedef struct {
    uint8_t *p;
    size_t len;
} gimg;

static inline uint8_t *gimg_sb(const gimg *m) { return m->p; }
static inline uint8_t *gimg_tr(const gimg *m) { return m->p + m->len - WPK_HEADER_SIZE; }
static inline uint64_t gimg_u64(const uint8_t *p, unsigned off) { return wpk_ld64(p + off); }
static inline uint8_t *gimg_ix(const gimg *m)
{
    return m->p + wpk_ld64(m->p + WPK_H_INDEX_OFFSET_OFF);
}
static inline uint64_t gimg_ixlen(const gimg *m)
{
    return wpk_ld64(m->p + WPK_H_INDEX_LENGTH_OFF);
}
/* The section table entry: where its {offset, length} pair is stored. */
static inline uint8_t *gimg_sec_field(const gimg *m, int s)
{
    return gimg_ix(m) + WPK_I_SECTIONS_OFF + 16 * s;
}
static inline uint64_t gimg_sec_off(const gimg *m, int s) { return wpk_ld64(gimg_sec_field(m, s)); }
static inline uint64_t gimg_sec_len(const gimg *m, int s)
{
    return wpk_ld64(gimg_sec_field(m, s) + 8);
}
static inline uint8_t *gimg_sec(const gimg *m, int s) { return gimg_ix(m) + gimg_sec_off(m, s); }
static inline uint64_t gimg_count(const gimg *m, int s, uint32_t rec)
{
    return gimg_sec_len(m, s) / rec;
}
static inline uint8_t *gimg_rec(const gimg *m, int s, uint32_t rec, uint64_t i)
{
    return gimg_sec(m, s) + i * rec;
}
static inline uint8_t *gimg_str(const gimg *m, uint64_t off)
{
    return gimg_sec(m, WPK_SEC_STRINGS) + off;
}

/* Record of section s whose name field (u64 off at 0, u32 len at 8) equals name. */
static inline uint8_t *gimg_find_named(const gimg *m, int s, uint32_t rec, const char *name,
                                       int kind_off, int kind)
{
    size_t n = strlen(name);
    for (uint64_t i = 0; i < gimg_count(m, s, rec); i++) {
        uint8_t *r = gimg_rec(m, s, rec, i);
        if (wpk_ld32(r + 8) == n && memcmp(gimg_str(m, wpk_ld64(r)), name, n) == 0 &&
            (kind_off < 0 || r[kind_off] == kind))
            return r;
    }
    return NULL;
}
static inline uint8_t *gimg_entry(const gimg *m, const char *name)
{
    return gimg_find_named(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, name, -1, 0);
}
static inline long gimg_entry_no(const gimg *m, const char *name)
{
    uint8_t *r = gimg_entry(m, name);
    return r ? (long)((r - gimg_sec(m, WPK_SEC_ENTRIES)) / WPK_ENTRY_SIZE) : -1;
}
static inline uint8_t *gimg_meta(const gimg *m, const char *key)
{
    return gimg_find_named(m, WPK_SEC_METADATA, WPK_META_REC_SIZE, key, -1, 0);
}
static inline uint8_t *gimg_nmap(const gimg *m, const char *name)
{
    return gimg_find_named(m, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, name, -1, 0);
}
static inline uint8_t *gimg_stats(const gimg *m, const char *key, int kind)
{
    return gimg_find_named(m, WPK_SEC_STATS, WPK_STATS_REC_SIZE, key, WPK_S_KIND_OFF, kind);
}
/* The first dim of an entry in the dims section. */
static inline uint8_t *gimg_dims(const gimg *m, const uint8_t *entry)
{
    return gimg_sec(m, WPK_SEC_DIMS) + 8 * wpk_ld64(entry + WPK_E_DIMS_OFF);
}
/* The bytes of a name field. */
static inline uint8_t *gimg_name_bytes(const gimg *m, const uint8_t *rec)
{
    return gimg_str(m, wpk_ld64(rec));
}
static inline uint8_t *gimg_aux(const gimg *m, uint64_t off)
{
    return gimg_sec(m, WPK_SEC_AUX) + off;
}

/* Re-seal the superblock's and the trailer's own checksums (bytes 0..119). */
static inline void gimg_seal_headers(gimg *m)
{
    uint8_t *h[2] = {gimg_sb(m), gimg_tr(m)};
    for (int k = 0; k < 2; k++)
        wpk_st64(h[k] + WPK_H_CHECKSUM_OFF, XXH3_64bits(h[k], WPK_H_CHECKSUM_OFF));
}
/* After changing superblock fields: the trailer repeats bytes 8..119. */
static inline void gimg_mirror(gimg *m)
{
    memcpy(gimg_tr(m) + 8, gimg_sb(m) + 8, WPK_H_CHECKSUM_OFF - 8);
    gimg_seal_headers(m);
}
/* After changing index bytes: new index checksum in both headers, both re-sealed. */
static inline void gimg_seal_index(gimg *m)
{
    uint64_t sum = XXH3_64bits(gimg_ix(m), (size_t)gimg_ixlen(m));
    wpk_st64(gimg_sb(m) + WPK_H_INDEX_CHECKSUM_OFF, sum);
    wpk_st64(gimg_tr(m) + WPK_H_INDEX_CHECKSUM_OFF, sum);
    gimg_seal_headers(m);
}

#endif
