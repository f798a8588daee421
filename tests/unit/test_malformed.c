/*
 * test_malformed.c - the matrix of malformed archives (spec: Open procedure,
 * Mandatory rejections; /work/notes/rules.md names the code of every rule).
 *
 * A valid archive is written with the real writer (the golden content of
 * tests/tools/golden_content.h: every built-in dtype, a block dtype, a
 * zero-size tensor, a splat, two aliases, metadata of every type, a name map,
 * per-tensor and per-channel stats with histograms and percentiles;
 * alignment 64) and read into a buffer. Each case changes a copy and opens it
 * with wpack_open_memory, expecting one specific code and a message. A case
 * that changes index bytes re-seals the index checksum in the superblock and
 * the trailer and both header checksums; a case that changes superblock
 * fields mirrors them into the trailer (unless the trailer is the point), so
 * every case reaches the rule it is about.
 *
 * Every open is made on a malloc'd copy of exactly the archive's length, so
 * the ASan build reports any read outside the buffer.
 *
 * Build by hand (from the repository root):
 *   make lib && cc -std=c11 -Wall -Wextra -Werror -Wshadow -D_GNU_SOURCE -Iinclude -Iformat \
 *       -Itests tests/unit/test_malformed.c build/libwpack.a -lxxhash -lm -lpthread
 * or `make build/tests/test_malformed && build/tests/test_malformed`.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "tools/golden_content.h"

/* ================================================================ helpers */

/* A minor newer than the reader's: its reserved fields may carry data. */
#define NEWER_MINOR (WPACK_FORMAT_MINOR + 1)
/* The lowest required feature bit this reader does not know. */
#define UNKNOWN_REQUIRED_BIT ((~(uint64_t)WPK_REQUIRED_KNOWN) & ((uint64_t)WPK_REQUIRED_KNOWN + 1))

/* The last entry in name order and without stats: its name can change freely. */
#define G_UNI "unicode.\xc3\xa9"

static uint8_t *base;       /* the valid archive */
static size_t base_len;
#define WORK_EXTRA 65536    /* room for cases that append */

static int ncases;          /* archives opened by the matrix */
static int verbose;         /* WPACK_TEST_VERBOSE=1: print every table case's message */

static const char *ename(int code) { return wpack_error_name(code); }

/* Read every part of an opened archive through the public API, so a sanitizer
 * sees any access a successful open allowed outside the file. */
static void walk_all(wpack_archive *ar)
{
    uint64_t n = wpack_count(ar);
    for (uint64_t i = 0; i < n; i++) {
        wpack_tensor t, f;
        if (wpack_tensor_at(ar, i, &t) != WPACK_OK)
            continue;
        CHECK(wpack_find(ar, t.name, &f) == WPACK_OK && f.index == i, "find '%s'", t.name);
        size_t k = t.nbytes < 4096 ? (size_t)t.nbytes : 4096;
        uint8_t buf[4096];
        CHECK(wpack_read(ar, i, 0, buf, k) == WPACK_OK, "read '%s'", t.name);
        if (t.nbytes >= k && k)
            CHECK(wpack_read(ar, i, t.nbytes - k, buf, k) == WPACK_OK, "read tail '%s'", t.name);
    }
    uint64_t first, count;
    wpack_prefix_range(ar, "", &first, &count);
    for (uint64_t i = 0; i < wpack_meta_count(ar); i++) {
        wpack_meta m, e;
        if (wpack_meta_at(ar, i, &m) != WPACK_OK)
            continue;
        volatile size_t sink = strlen(m.key);
        if (m.type == WPACK_META_STRING)
            sink += strlen(m.str);
        for (uint64_t j = 0; m.type == WPACK_META_ARRAY && j < m.count; j++)
            if (wpack_meta_elem(ar, &m, j, &e) == WPACK_OK && e.type == WPACK_META_STRING)
                sink += strlen(e.str);
        (void)sink;
    }
    for (uint64_t i = 0; i < wpack_namemap_count(ar); i++) {
        const char *other;
        uint64_t e;
        wpack_tensor t;
        if (wpack_namemap_at(ar, i, &other, &e) == WPACK_OK)
            CHECK(wpack_find(ar, other, &t) == WPACK_OK && t.index == e, "map '%s'", other);
    }
    for (uint64_t i = 0; i < wpack_stats_count(ar); i++) {
        wpack_stats s;
        if (wpack_stats_at(ar, i, &s) != WPACK_OK)
            continue;
        volatile double sink = 0;
        for (uint32_t c = 0; c < s.channels; c++)
            for (int w = 0; w <= WPACK_STAT_VARIANCE; w++)
                sink += wpack_stats_value(&s, w, c);
        for (uint32_t b = 0; b < s.hist_bins; b++) {
            double lo, hi;
            uint64_t cnt;
            wpack_stats_bin(&s, b, &lo, &hi, &cnt);
            sink += lo + hi;
        }
        for (uint32_t j = 0; j < s.percentile_count; j++) {
            double q, v;
            wpack_stats_percentile(&s, j, &q, &v);
            sink += q + v;
        }
        (void)sink;
    }
}

/* Called on a successfully opened archive (after walk_all). */
typedef void (*ar_check)(wpack_archive *ar, void *ctx);

/* Open a malloc'd copy of exactly len bytes. Returns the code; msg gets the
 * message, info the info of a successful open. */
static int open_exact(const uint8_t *p, size_t len, unsigned flags, char *msg, size_t msglen,
                      wpack_info *info, ar_check fn, void *ctx)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) {
        snprintf(msg, msglen, "out of memory");
        return WPACK_E_NOMEM;
    }
    if (len)
        memcpy(copy, p, len);
    wpack_archive *ar = NULL;
    int rc = wpack_open_memory(&ar, copy, len, flags);
    snprintf(msg, msglen, "%s", wpack_errmsg(ar));
    CHECK(wpack_errcode(ar) == rc, "errcode %d != return %d", wpack_errcode(ar), rc);
    if (rc == WPACK_OK) {
        if (info)
            wpack_get_info(ar, info);
        walk_all(ar);
        if (fn)
            fn(ar, ctx);
    }
    wpack_close(ar);
    free(copy);
    return rc;
}

/* Check one open: code as expected and, for a failure, a non-empty message. */
static int expect_open(const char *what, const uint8_t *p, size_t len, int want)
{
    char msg[700];
    int rc = open_exact(p, len, 0, msg, sizeof msg, NULL, NULL, NULL);
    ncases++;
    if (verbose)
        printf("  %-70s %s: %s\n", what, ename(rc), msg);
    CHECK(rc == want, "%s: got %s (%s), want %s", what, ename(rc), msg, ename(want));
    if (want != WPACK_OK && rc != WPACK_OK)
        CHECK(msg[0] != 0, "%s: %s with an empty message", what, ename(rc));
    return rc;
}

/* A working copy of the base archive with room to grow. */
static gimg work_copy(void)
{
    gimg m;
    m.p = malloc(base_len + WORK_EXTRA);
    if (!m.p)
        abort();
    memcpy(m.p, base, base_len);
    memset(m.p + base_len, 0, WORK_EXTRA);
    m.len = base_len;
    return m;
}

static uint64_t ld(const uint8_t *p, int width)
{
    switch (width) {
    case 1:
        return p[0];
    case 2:
        return wpk_ld16(p);
    case 4:
        return wpk_ld32(p);
    default:
        return wpk_ld64(p);
    }
}

static void st(uint8_t *p, int width, uint64_t v)
{
    switch (width) {
    case 1:
        p[0] = (uint8_t)v;
        break;
    case 2:
        wpk_st16(p, (uint16_t)v);
        break;
    case 4:
        wpk_st32(p, (uint32_t)v);
        break;
    default:
        wpk_st64(p, v);
    }
}

static uint64_t align8(uint64_t v) { return (v + 7) & ~7ull; }

/* ================================================================= cases */

enum {
    W_SB = 1,    /* superblock field: mirrored into the trailer, both re-sealed */
    W_SBONLY,    /* superblock field, re-sealed but not mirrored */
    W_SBRAW,     /* superblock bytes, nothing re-sealed */
    W_TR,        /* trailer field, re-sealed */
    W_TRRAW,     /* trailer bytes, nothing re-sealed */
    W_IXH,       /* index header byte offset; index re-sealed */
    W_IXRAW,     /* index bytes, nothing re-sealed */
    W_REC,       /* field of a record (sec, rec, kind); index re-sealed */
    W_DIM,       /* bytes from an entry's first dim */
    W_NAMEB,     /* bytes of a record's name string */
    W_MSTRB,     /* bytes of a metadata string value */
    W_MARR,      /* bytes of a metadata array's aux */
    W_SVAL,      /* bytes of a stats record's values (aux) */
    W_SHIST,     /* ... of its histogram */
    W_SPCT,      /* ... of its percentiles */
    W_CUSTOM
};
enum { OP_SET, OP_ADD, OP_XOR, OP_SETF, OP_BYTES };
#define TAIL (-1)   /* OP_BYTES on a string: write at its end */

typedef struct mcase {
    const char *what;
    int expect;
    int where;
    int (*fn)(gimg *m); /* W_CUSTOM: change m, re-seal as needed; 0 or -1 (setup failed) */
    int sec;            /* record section */
    const char *rec;    /* record name, key, map name or stats key; dtype record: NULL */
    int kind;           /* stats kind; dtype record number */
    long long off;      /* byte offset in the target */
    int width;          /* 1, 2, 4, 8 */
    int op;
    uint64_t val;
    double f;
    const char *bytes;
} mcase;

#define HDR(w_, off_, wd_, op_, v_, code_, what_)                                            \
    {.what = what_, .expect = code_, .where = w_, .off = off_, .width = wd_, .op = op_,        \
     .val = v_}
#define SBF(off_, wd_, v_, code_, what_) HDR(W_SB, off_, wd_, OP_SET, v_, code_, what_)
#define IXH(off_, wd_, v_, code_, what_) HDR(W_IXH, off_, wd_, OP_SET, v_, code_, what_)
#define SECF(s_, len_, op_, v_, code_, what_)                                                 \
    HDR(W_IXH, WPK_I_SECTIONS_OFF + 16 * (s_) + 8 * (len_), 8, op_, v_, code_, what_)
#define REC(sec_, rec_, kind_, off_, wd_, op_, v_, code_, what_)                              \
    {.what = what_, .expect = code_, .where = W_REC, .sec = sec_, .rec = rec_, .kind = kind_, \
     .off = off_, .width = wd_, .op = op_, .val = v_}
#define ENT(rec_, off_, wd_, v_, code_, what_)                                               \
    REC(WPK_SEC_ENTRIES, rec_, 0, off_, wd_, OP_SET, v_, code_, what_)
#define ENTX(rec_, off_, wd_, op_, v_, code_, what_)                                         \
    REC(WPK_SEC_ENTRIES, rec_, 0, off_, wd_, op_, v_, code_, what_)
#define META(rec_, off_, wd_, v_, code_, what_)                                              \
    REC(WPK_SEC_METADATA, rec_, 0, off_, wd_, OP_SET, v_, code_, what_)
#define NMAP(rec_, off_, wd_, v_, code_, what_)                                              \
    REC(WPK_SEC_NAMEMAP, rec_, 0, off_, wd_, OP_SET, v_, code_, what_)
#define STAT(rec_, kind_, off_, wd_, v_, code_, what_)                                       \
    REC(WPK_SEC_STATS, rec_, kind_, off_, wd_, OP_SET, v_, code_, what_)
#define DTYP(no_, off_, wd_, v_, code_, what_)                                               \
    REC(WPK_SEC_DTYPES, NULL, no_, off_, wd_, OP_SET, v_, code_, what_)
#define DIM(rec_, d_, v_, code_, what_)                                                      \
    {.what = what_, .expect = code_, .where = W_DIM, .rec = rec_, .off = 8 * (d_), .width = 8, \
     .op = OP_SET, .val = v_}
#define NAMEB(sec_, rec_, kind_, pos_, bytes_, code_, what_)                                  \
    {.what = what_, .expect = code_, .where = W_NAMEB, .sec = sec_, .rec = rec_,             \
     .kind = kind_, .off = pos_, .op = OP_BYTES, .bytes = bytes_}
#define ENAME(rec_, pos_, bytes_, code_, what_)                                              \
    NAMEB(WPK_SEC_ENTRIES, rec_, 0, pos_, bytes_, code_, what_)
#define MSTRB(rec_, pos_, bytes_, code_, what_)                                              \
    {.what = what_, .expect = code_, .where = W_MSTRB, .sec = WPK_SEC_METADATA, .rec = rec_,  \
     .off = pos_, .op = OP_BYTES, .bytes = bytes_}
#define MARR(rec_, off_, wd_, v_, code_, what_)                                              \
    {.what = what_, .expect = code_, .where = W_MARR, .sec = WPK_SEC_METADATA, .rec = rec_,   \
     .off = off_, .width = wd_, .op = OP_SET, .val = v_}
#define SAUX(w_, rec_, kind_, off_, wd_, v_, code_, what_)                                   \
    {.what = what_, .expect = code_, .where = w_, .sec = WPK_SEC_STATS, .rec = rec_,          \
     .kind = kind_, .off = off_, .width = wd_, .op = OP_SET, .val = v_}
#define SAUXF(w_, rec_, kind_, off_, f_, code_, what_)                                       \
    {.what = what_, .expect = code_, .where = w_, .sec = WPK_SEC_STATS, .rec = rec_,          \
     .kind = kind_, .off = off_, .width = 8, .op = OP_SETF, .f = f_}
#define CUSTOM(fn_, code_, what_) {.what = what_, .expect = code_, .where = W_CUSTOM, .fn = fn_}

static uint8_t *find_rec(gimg *m, int sec, const char *rec, int kind)
{
    switch (sec) {
    case WPK_SEC_ENTRIES:
        return gimg_entry(m, rec);
    case WPK_SEC_METADATA:
        return gimg_meta(m, rec);
    case WPK_SEC_NAMEMAP:
        return gimg_nmap(m, rec);
    case WPK_SEC_STATS:
        return gimg_stats(m, rec, kind);
    case WPK_SEC_DTYPES:
        return (uint64_t)kind < gimg_count(m, WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE)
                   ? gimg_rec(m, WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, (uint64_t)kind)
                   : NULL;
    }
    return NULL;
}

/* Where a field case writes; NULL if its record is missing. *n: string length. */
static uint8_t *case_target(gimg *m, const mcase *c, uint64_t *n)
{
    uint8_t *r = NULL;
    *n = 0;
    switch (c->where) {
    case W_SB:
    case W_SBONLY:
    case W_SBRAW:
        return gimg_sb(m) + c->off;
    case W_TR:
    case W_TRRAW:
        return gimg_tr(m) + c->off;
    case W_IXH:
    case W_IXRAW:
        return gimg_ix(m) + c->off;
    case W_REC:
        r = find_rec(m, c->sec, c->rec, c->kind);
        return r ? r + c->off : NULL;
    case W_DIM:
        r = gimg_entry(m, c->rec);
        return r ? gimg_dims(m, r) + c->off : NULL;
    case W_NAMEB:
        r = find_rec(m, c->sec, c->rec, c->kind);
        if (!r)
            return NULL;
        *n = wpk_ld32(r + 8);
        return gimg_name_bytes(m, r);
    case W_MSTRB:
        r = gimg_meta(m, c->rec);
        if (!r || r[WPK_M_TYPE_OFF] != WPACK_META_STRING)
            return NULL;
        *n = wpk_ld64(r + WPK_M_COUNT_OFF);
        return gimg_str(m, wpk_ld64(r + WPK_M_VALUE_OFF));
    case W_MARR:
        r = gimg_meta(m, c->rec);
        return r ? gimg_aux(m, wpk_ld64(r + WPK_M_VALUE_OFF)) + c->off : NULL;
    case W_SVAL:
    case W_SHIST:
    case W_SPCT: {
        r = gimg_stats(m, c->rec, c->kind);
        if (!r)
            return NULL;
        unsigned f = c->where == W_SVAL ? WPK_S_VALUES_OFF
                     : c->where == W_SHIST ? WPK_S_HIST_OFF : WPK_S_PCT_OFF;
        return gimg_aux(m, wpk_ld64(r + f)) + c->off;
    }
    }
    return NULL;
}

static int apply_case(gimg *m, const mcase *c)
{
    if (c->where == W_CUSTOM)
        return c->fn(m);
    uint64_t n;
    uint8_t *p = case_target(m, c, &n);
    if (!p)
        return -1;
    switch (c->op) {
    case OP_SET:
        st(p, c->width, c->val);
        break;
    case OP_ADD:
        st(p, c->width, ld(p, c->width) + c->val);
        break;
    case OP_XOR:
        st(p, c->width, ld(p, c->width) ^ c->val);
        break;
    case OP_SETF:
        wpk_stf64(p, c->f);
        break;
    case OP_BYTES: {
        size_t k = strlen(c->bytes);
        uint64_t at = c->off == TAIL ? n - k : (uint64_t)c->off;
        if (k > n || at + k > n)
            return -1;
        memcpy(p + at, c->bytes, k);
        break;
    }
    }
    switch (c->where) {
    case W_SB:
        gimg_mirror(m);
        break;
    case W_SBONLY:
    case W_TR:
        gimg_seal_headers(m);
        break;
    case W_SBRAW:
    case W_TRRAW:
    case W_IXRAW:
        break;
    default:
        gimg_seal_index(m);
    }
    return 0;
}

static void run_cases(const char *group, const mcase *cases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        gimg m = work_copy();
        char what[256];
        snprintf(what, sizeof what, "%s: %s", group, cases[i].what);
        if (apply_case(&m, &cases[i]) != 0)
            CHECK(0, "%s: could not set the case up (record missing?)", what);
        else
            expect_open(what, m.p, m.len, cases[i].expect);
        free(m.p);
    }
}

#define RUN_CASES(group, arr) run_cases(group, arr, sizeof arr / sizeof arr[0])

/* ---------------------------------------------------- custom mutations */

static uint64_t g_strings_len(gimg *m) { return gimg_sec_len(m, WPK_SEC_STRINGS); }
static uint64_t g_aux_len(gimg *m) { return gimg_sec_len(m, WPK_SEC_AUX); }
static uint64_t g_data_end(gimg *m)
{
    return wpk_ld64(gimg_sb(m) + WPK_H_DATA_OFFSET_OFF) +
           wpk_ld64(gimg_sb(m) + WPK_H_DATA_LENGTH_OFF);
}
static uint8_t *g_entry_no(gimg *m, uint64_t i)
{
    return gimg_rec(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, i);
}
static uint8_t *g_extent(gimg *m, uint64_t k) { return gimg_sec(m, WPK_SEC_EXTENTS) + 4 * k; }

/* Swap (or copy, when copy) the name fields of two records. */
static void swap_names(uint8_t *a, uint8_t *b, int copy)
{
    uint8_t t[12];
    memcpy(t, a, 12);
    memcpy(a, b, 12);
    if (!copy)
        memcpy(b, t, 12);
}

/* -- superblock */
static int c_text_mode_crlf(gimg *m)
{
    /* CR LF -> LF: everything after byte 4 moves down one. */
    memmove(m->p + 4, m->p + 5, m->len - 5);
    m->len--;
    return 0;
}
static int c_text_mode_lf(gimg *m)
{
    /* LF -> CR LF at byte 7. */
    memmove(m->p + 8, m->p + 7, m->len - 7);
    m->p[7] = '\r';
    m->len++;
    return 0;
}
static int c_minor_newer_reserved(gimg *m)
{
    wpk_st16(m->p + WPK_H_MINOR_OFF, NEWER_MINOR);
    memset(m->p + WPK_H_RESERVED_OFF, 0xa5, WPK_H_RESERVED_LEN);
    gimg_mirror(m);
    return 0;
}
static int c_index_before_data_end(gimg *m)
{
    uint8_t *s = gimg_sb(m);
    /* Index starts 8 bytes earlier and is 8 bytes longer: file length unchanged. */
    wpk_st64(s + WPK_H_INDEX_OFFSET_OFF, wpk_ld64(s + WPK_H_INDEX_OFFSET_OFF) - 16);
    wpk_st64(s + WPK_H_INDEX_LENGTH_OFF, wpk_ld64(s + WPK_H_INDEX_LENGTH_OFF) + 16);
    gimg_mirror(m);
    return 0;
}
static int c_index_too_short(gimg *m)
{
    uint8_t *s = gimg_sb(m);
    wpk_st64(s + WPK_H_INDEX_LENGTH_OFF, 248);
    wpk_st64(s + WPK_H_FILE_LENGTH_OFF, wpk_ld64(s + WPK_H_INDEX_OFFSET_OFF) + 248 + 128);
    gimg_mirror(m);
    return 0;
}
static int c_index_offset_overflow(gimg *m)
{
    uint8_t *s = gimg_sb(m);
    wpk_st64(s + WPK_H_INDEX_OFFSET_OFF, UINT64_MAX - 7);
    gimg_mirror(m);
    return 0;
}
static int c_entry_count_huge(gimg *m)
{
    uint64_t n = (1ull << 31) + 1;
    wpk_st64(gimg_ix(m) + WPK_I_ENTRY_COUNT_OFF, n);
    wpk_st64(gimg_sb(m) + WPK_H_ENTRY_COUNT_OFF, n);
    gimg_mirror(m);
    gimg_seal_index(m);
    return 0;
}
/* -- trailer */
static int c_trailer_zeroed(gimg *m)
{
    memset(gimg_tr(m), 0, WPK_HEADER_SIZE);
    return 0;
}
static int c_trailer_is_superblock(gimg *m)
{
    memcpy(gimg_tr(m), gimg_sb(m), WPK_HEADER_SIZE);
    return 0;
}
/* -- index header and sections */
static int c_data_count_short(gimg *m)
{
    uint8_t *ix = gimg_ix(m);
    uint64_t dc = wpk_ld64(ix + WPK_I_DATA_ENTRY_COUNT_OFF);
    wpk_st64(ix + WPK_I_DATA_ENTRY_COUNT_OFF, dc - 1);
    memset(g_extent(m, dc - 1), 0, 4);
    wpk_st64(gimg_sec_field(m, WPK_SEC_EXTENTS) + 8, 4 * (dc - 1));
    gimg_seal_index(m);
    return 0;
}
/* Shorten section s by n bytes, zeroing them (so they are valid padding). */
static int shorten_section(gimg *m, int s, uint64_t n)
{
    uint64_t len = gimg_sec_len(m, s);
    if (len < n)
        return -1;
    memset(gimg_sec(m, s) + len - n, 0, n);
    wpk_st64(gimg_sec_field(m, s) + 8, len - n);
    gimg_seal_index(m);
    return 0;
}
static int c_entries_short(gimg *m) { return shorten_section(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE); }
static int c_extents_short(gimg *m) { return shorten_section(m, WPK_SEC_EXTENTS, 4); }
static int c_dims_ragged(gimg *m) { return shorten_section(m, WPK_SEC_DIMS, 4); }
static int c_dtypes_ragged(gimg *m) { return shorten_section(m, WPK_SEC_DTYPES, 8); }
static int c_meta_ragged(gimg *m) { return shorten_section(m, WPK_SEC_METADATA, 8); }
static int c_nmap_ragged(gimg *m) { return shorten_section(m, WPK_SEC_NAMEMAP, 8); }
static int c_stats_ragged(gimg *m) { return shorten_section(m, WPK_SEC_STATS, 8); }
static int c_stats_drop_last(gimg *m) { return shorten_section(m, WPK_SEC_STATS, WPK_STATS_REC_SIZE); }
static int c_stats_tail_garbage(gimg *m)
{
    /* Drop the last stats record from the table but leave its bytes. */
    wpk_st64(gimg_sec_field(m, WPK_SEC_STATS) + 8,
             gimg_sec_len(m, WPK_SEC_STATS) - WPK_STATS_REC_SIZE);
    gimg_seal_index(m);
    return 0;
}
static int c_section_gap_nonzero(gimg *m)
{
    for (int s = 0; s + 1 < WPK_SECTION_COUNT; s++) {
        uint64_t end = gimg_sec_off(m, s) + gimg_sec_len(m, s);
        if (gimg_sec_off(m, s + 1) > end) {
            gimg_ix(m)[end] = 0x5a;
            gimg_seal_index(m);
            return 0;
        }
    }
    return -1;
}
/* Two faults: a non-zero gap byte (M23) and a stats length that breaks the
 * table (M21). 13.1 checks the lengths (step 5.3) before the gaps (5.4):
 * LAYOUT (the reader checked each gap while placing the sections: PADDING). */
static int c_gap_and_ragged_stats(gimg *m)
{
    return c_section_gap_nonzero(m) ? -1 : shorten_section(m, WPK_SEC_STATS, 8);
}
/* Two faults in the index header: a reserved byte (M9) and an entry count
 * the superblock disagrees with (M18). 13.1 step 5.2 checks the sizes and
 * counts first: LAYOUT (the reader checked the reserved bytes first). */
static int c_ixh_reserved_and_count(gimg *m)
{
    uint8_t *ix = gimg_ix(m);
    ix[WPK_I_RESERVED_OFF] = 1;
    wpk_st64(ix + WPK_I_ENTRY_COUNT_OFF, wpk_ld64(ix + WPK_I_ENTRY_COUNT_OFF) + 1);
    gimg_seal_index(m);
    return 0;
}
static int c_sections_swapped(gimg *m)
{
    /* strings claims to start where dims does: out of order, overlapping. */
    wpk_st64(gimg_sec_field(m, WPK_SEC_STRINGS), gimg_sec_off(m, WPK_SEC_DIMS));
    gimg_seal_index(m);
    return 0;
}
static int c_section_past_index(gimg *m)
{
    wpk_st64(gimg_sec_field(m, WPK_SEC_STATS), gimg_ixlen(m) + 8);
    wpk_st64(gimg_sec_field(m, WPK_SEC_STATS) + 8, 0);
    gimg_seal_index(m);
    return 0;
}
/* -- entries */
static int c_name_past_strings(gimg *m)
{
    wpk_st64(gimg_entry(m, G_F64) + WPK_E_NAME_OFF, g_strings_len(m));
    gimg_seal_index(m);
    return 0;
}
static int c_name_empty(gimg *m)
{
    uint8_t *r = g_entry_no(m, 0);
    wpk_st64(r, wpk_ld64(r) + wpk_ld32(r + 8)); /* at its own NUL, length 0 */
    wpk_st32(r + 8, 0);
    gimg_seal_index(m);
    return 0;
}
static int c_name_nul_inside(gimg *m)
{
    /* Stretch the name over its NUL and the next pooled string, up to that one's NUL. */
    uint8_t *r = gimg_entry(m, G_F64);
    uint64_t off = wpk_ld64(r), len = wpk_ld32(r + 8), slen = g_strings_len(m);
    uint8_t *s = gimg_str(m, 0);
    uint64_t end = off + len + 1;
    while (end < slen && s[end])
        end++;
    if (end >= slen)
        return -1;
    wpk_st32(r + 8, (uint32_t)(end - off));
    gimg_seal_index(m);
    return 0;
}
static int c_names_unsorted(gimg *m)
{
    swap_names(g_entry_no(m, 2), g_entry_no(m, 3), 0);
    gimg_seal_index(m);
    return 0;
}
static int c_names_duplicate(gimg *m)
{
    swap_names(g_entry_no(m, 3), g_entry_no(m, 2), 1);
    gimg_seal_index(m);
    return 0;
}
static int c_dims_index_at_end(gimg *m)
{
    wpk_st64(gimg_entry(m, G_F32) + WPK_E_DIMS_OFF, gimg_sec_len(m, WPK_SEC_DIMS) / 8);
    gimg_seal_index(m);
    return 0;
}
static int c_dims_straddle_end(gimg *m)
{
    wpk_st64(gimg_entry(m, G_F32) + WPK_E_DIMS_OFF, gimg_sec_len(m, WPK_SEC_DIMS) / 8 - 1);
    gimg_seal_index(m);
    return 0;
}
static int c_elem_overflow_2x32(gimg *m)
{
    uint8_t *d = gimg_dims(m, gimg_entry(m, G_F32));
    wpk_st64(d, 1ull << 32);
    wpk_st64(d + 8, 1ull << 32);
    gimg_seal_index(m);
    return 0;
}

static int c_overflow_before_zero(gimg *m)
{
    /* spec section 20 point 7: left to right, every step checked. */
    uint8_t *d = gimg_dims(m, gimg_entry(m, "rank8.u8"));
    wpk_st64(d, 1ull << 40);
    wpk_st64(d + 8, 1ull << 40);
    wpk_st64(d + 16, 0);
    gimg_seal_index(m);
    return 0;
}
static int c_offset_past_data(gimg *m)
{
    uint64_t at = (g_data_end(m) + 63) / 64 * 64 + 64;
    wpk_st64(gimg_entry(m, G_I64) + WPK_E_DATA_OFFSET_OFF, at);
    gimg_seal_index(m);
    return 0;
}
static int c_empty_past_data(gimg *m)
{
    uint64_t at = (g_data_end(m) + 63) / 64 * 64 + 64;
    wpk_st64(gimg_entry(m, G_EMPTY) + WPK_E_DATA_OFFSET_OFF, at);
    gimg_seal_index(m);
    return 0;
}
static int c_length_past_data(gimg *m)
{
    /* Shape and stored length agree (2^60 x u64) but the bytes are not there. */
    uint8_t *r = gimg_entry(m, "int.u64");
    wpk_st64(gimg_dims(m, r), 1ull << 60);
    wpk_st64(r + WPK_E_STORED_LEN_OFF, 1ull << 63);
    gimg_seal_index(m);
    return 0;
}
static int c_offset_wraps(gimg *m)
{
    wpk_st64(gimg_entry(m, G_I64) + WPK_E_DATA_OFFSET_OFF, UINT64_MAX - 63);
    gimg_seal_index(m);
    return 0;
}
static int c_extents_overlap(gimg *m)
{
    wpk_st64(gimg_entry(m, "dense.f16") + WPK_E_DATA_OFFSET_OFF,
             wpk_ld64(gimg_entry(m, G_F32) + WPK_E_DATA_OFFSET_OFF));
    gimg_seal_index(m);
    return 0;
}
static int c_extents_hole(gimg *m)
{
    uint8_t *r = gimg_entry(m, "dense.f16");
    wpk_st64(r + WPK_E_DATA_OFFSET_OFF, wpk_ld64(r + WPK_E_DATA_OFFSET_OFF) + 64);
    gimg_seal_index(m);
    return 0;
}
static int c_last_extent_short(gimg *m)
{
    /* int.u8 [9] -> [8]: consistent entry, but the data region says 9 bytes. */
    uint8_t *r = gimg_entry(m, G_U8);
    wpk_st64(gimg_dims(m, r), 8);
    wpk_st64(r + WPK_E_STORED_LEN_OFF, 8);
    gimg_seal_index(m);
    return 0;
}
/* A block dtype of 1-element, 72-byte blocks and quant.q4 (72 bytes) made
 * rank 0: one element, one block, its size agrees; only the rank is wrong
 * (spec 7.2, M35: a block dtype tensor has rank >= 1; the reader checked
 * it only for blocks of more than one element). */
static uint8_t *q4_of_1_element_blocks(gimg *m)
{
    uint8_t *d = gimg_rec(m, WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, 0);
    wpk_st32(d + WPK_D_BLOCK_ELEMS_OFF, 1);
    wpk_st32(d + WPK_D_BLOCK_BYTES_OFF, 72);
    return gimg_entry(m, G_Q4);
}
static int c_block1_rank0(gimg *m)
{
    q4_of_1_element_blocks(m)[WPK_E_RANK_OFF] = 0;
    gimg_seal_index(m);
    return 0;
}
static int c_block1_rank1(gimg *m)
{
    /* (control) the same dtype at rank 1, dims [1]: valid */
    uint8_t *r = q4_of_1_element_blocks(m);
    r[WPK_E_RANK_OFF] = 1;
    wpk_st64(gimg_dims(m, r), 1);
    gimg_seal_index(m);
    return 0;
}
/* An alias's codec_param is a reserved field with codec 0 (M38, M9): a
 * newer minor may use it, so it is ignored there (the reader refused it
 * with KIND whatever the minor). */
static int c_alias_param_newer_minor(gimg *m)
{
    wpk_st16(m->p + WPK_H_MINOR_OFF, NEWER_MINOR);
    gimg_mirror(m);
    wpk_st32(gimg_entry(m, G_ALIAS) + WPK_E_CODEC_PARAM_OFF, 12);
    gimg_seal_index(m);
    return 0;
}
/* Under a newer minor every reserved field may carry data (spec 4, M9):
 * each one non-zero is accepted there, as at minor 0 it is RESERVED. The
 * gaps between sections stay PADDING; the bytes after the last section
 * are the newer minor's (section 21, point 4). */
static void newer_minor(gimg *m)
{
    wpk_st16(m->p + WPK_H_MINOR_OFF, NEWER_MINOR);
    gimg_mirror(m);
}
#define NEWER_FIELD(fn_, stmt_)                                                                \
    static int fn_(gimg *m)                                                                   \
    {                                                                                         \
        newer_minor(m);                                                                       \
        stmt_;                                                                                \
        gimg_seal_index(m);                                                                   \
        return 0;                                                                             \
    }
NEWER_FIELD(c_newer_ixh_reserved, gimg_ix(m)[WPK_INDEX_HEADER_SIZE - 1] = 1)
NEWER_FIELD(c_newer_entry_reserved, gimg_entry(m, G_F64)[WPK_E_RESERVED_OFF + 3] = 1)
NEWER_FIELD(c_newer_codec_param, wpk_st32(gimg_entry(m, G_F64) + WPK_E_CODEC_PARAM_OFF, 7))
NEWER_FIELD(c_newer_splat_param, wpk_st32(gimg_entry(m, G_SPLAT) + WPK_E_CODEC_PARAM_OFF, 7))
NEWER_FIELD(c_newer_dtype_reserved,
            wpk_st32(gimg_rec(m, WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, 0) + WPK_D_RESERVED_OFF, 1))
NEWER_FIELD(c_newer_meta_reserved, wpk_st16(gimg_meta(m, "model.name") + WPK_M_RESERVED_OFF, 1))
NEWER_FIELD(c_newer_nmap_reserved, wpk_st64(gimg_nmap(m, "p_dense_f32") + WPK_N_RESERVED_OFF, 1))
NEWER_FIELD(c_newer_stats_reserved,
            wpk_st16(gimg_stats(m, G_F32, WPACK_STATS_WEIGHT) + WPK_S_RESERVED_OFF, 1))
static int c_newer_tail(gimg *m)
{
    newer_minor(m);
    return c_stats_tail_garbage(m);
}
static int c_newer_gap(gimg *m)
{
    newer_minor(m);
    return c_section_gap_nonzero(m);
}
/* Two faults in a data entry: a target (KIND) and a stored length its shape
 * disagrees with (SIZE). Rule 36 lists the fields the kind does not take
 * first, as rule 37 does for splats: KIND. */
static int c_data_target_and_size(gimg *m)
{
    uint8_t *r = gimg_entry(m, G_F64);
    wpk_st32(r + WPK_E_TARGET_OFF, 1);
    wpk_st64(r + WPK_E_STORED_LEN_OFF, wpk_ld64(r + WPK_E_STORED_LEN_OFF) + 1);
    gimg_seal_index(m);
    return 0;
}
static int set_extent(gimg *m, uint64_t k, uint32_t v)
{
    wpk_st32(g_extent(m, k), v);
    gimg_seal_index(m);
    return 0;
}
static int c_extent_splat(gimg *m) { return set_extent(m, 3, (uint32_t)gimg_entry_no(m, G_SPLAT)); }
static int c_extent_alias(gimg *m) { return set_extent(m, 3, (uint32_t)gimg_entry_no(m, G_ALIAS)); }
static int c_extent_twice(gimg *m) { return set_extent(m, 1, wpk_ld32(g_extent(m, 0))); }
static int c_extent_range(gimg *m)
{
    return set_extent(m, 0, (uint32_t)gimg_count(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE));
}
static int c_extent_huge(gimg *m) { return set_extent(m, 0, UINT32_MAX); }
/* Two faults: a hole before the third extent (M40) and the sixth naming
 * the first's entry again (M39). 13.1 step 7 checks the numbers first:
 * LAYOUT (the reader checked each number as it walked: OVERLAP). */
static int c_hole_then_twice(gimg *m)
{
    c_extents_hole(m);
    return set_extent(m, 5, wpk_ld32(g_extent(m, 0)));
}
static int c_extents_swapped(gimg *m)
{
    uint32_t a = wpk_ld32(g_extent(m, 0));
    wpk_st32(g_extent(m, 0), wpk_ld32(g_extent(m, 1)));
    return set_extent(m, 1, a);
}
static int c_splat_aux_end(gimg *m)
{
    wpk_st64(gimg_entry(m, G_SPLAT) + WPK_E_AUX_OFF, g_aux_len(m) - 2);
    gimg_seal_index(m);
    return 0;
}
static int c_splat_fill_changed(gimg *m)
{
    uint8_t *r = gimg_entry(m, G_SPLAT);
    gimg_aux(m, wpk_ld64(r + WPK_E_AUX_OFF))[0] ^= 1;
    gimg_seal_index(m);
    return 0;
}
static int set_alias_target(gimg *m, const char *alias, uint32_t t)
{
    wpk_st32(gimg_entry(m, alias) + WPK_E_TARGET_OFF, t);
    gimg_seal_index(m);
    return 0;
}
static int c_alias_self(gimg *m)
{
    return set_alias_target(m, G_ALIAS, (uint32_t)gimg_entry_no(m, G_ALIAS));
}
static int c_alias_to_alias(gimg *m)
{
    return set_alias_target(m, G_ALIAS_SPLAT, (uint32_t)gimg_entry_no(m, G_ALIAS));
}
static int c_alias_range(gimg *m)
{
    return set_alias_target(m, G_ALIAS, (uint32_t)gimg_count(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE));
}
static int c_alias_other_data(gimg *m)
{
    /* Pointing at another data entry: its extent and checksum differ. */
    return set_alias_target(m, G_ALIAS, (uint32_t)gimg_entry_no(m, G_F64));
}
/* -- metadata */
static int c_meta_unsorted(gimg *m)
{
    swap_names(gimg_rec(m, WPK_SEC_METADATA, WPK_META_REC_SIZE, 0),
               gimg_rec(m, WPK_SEC_METADATA, WPK_META_REC_SIZE, 1), 0);
    gimg_seal_index(m);
    return 0;
}
static int c_meta_duplicate(gimg *m)
{
    swap_names(gimg_rec(m, WPK_SEC_METADATA, WPK_META_REC_SIZE, 1),
               gimg_rec(m, WPK_SEC_METADATA, WPK_META_REC_SIZE, 0), 1);
    gimg_seal_index(m);
    return 0;
}
static int c_meta_string_past(gimg *m)
{
    wpk_st64(gimg_meta(m, "model.name") + WPK_M_VALUE_OFF, g_strings_len(m));
    gimg_seal_index(m);
    return 0;
}
static int c_meta_array_str_elem_utf8(gimg *m)
{
    uint8_t *r = gimg_meta(m, "array.str");
    uint8_t *p = gimg_aux(m, wpk_ld64(r + WPK_M_VALUE_OFF)) + 16; /* element 1: "héllo" */
    memcpy(gimg_str(m, wpk_ld64(p)) + 1, "\xc3\x28", 2);
    gimg_seal_index(m);
    return 0;
}
static int c_meta_array_str_elem_nul(gimg *m)
{
    uint8_t *r = gimg_meta(m, "array.str");
    uint8_t *p = gimg_aux(m, wpk_ld64(r + WPK_M_VALUE_OFF));
    gimg_str(m, wpk_ld64(p))[2] = 0; /* "al\0ha" */
    gimg_seal_index(m);
    return 0;
}
static int c_meta_array_past_aux(gimg *m)
{
    uint8_t *r = gimg_meta(m, "array.i64");
    uint64_t room = (g_aux_len(m) - wpk_ld64(r + WPK_M_VALUE_OFF)) / 8;
    wpk_st64(r + WPK_M_COUNT_OFF, room + 1);
    gimg_seal_index(m);
    return 0;
}
static int c_meta_array_off_past(gimg *m)
{
    wpk_st64(gimg_meta(m, "array.f64") + WPK_M_VALUE_OFF, g_aux_len(m));
    gimg_seal_index(m);
    return 0;
}
static int c_meta_bytes_at_end(gimg *m)
{
    /* A zero-length value exactly at the end of aux is in bounds. */
    wpk_st64(gimg_meta(m, "blob.empty") + WPK_M_VALUE_OFF, g_aux_len(m));
    gimg_seal_index(m);
    return 0;
}
static int c_meta_bytes_past_end(gimg *m)
{
    wpk_st64(gimg_meta(m, "blob.empty") + WPK_M_VALUE_OFF, g_aux_len(m) + 1);
    gimg_seal_index(m);
    return 0;
}
static int c_meta_bytes_straddle(gimg *m)
{
    wpk_st64(gimg_meta(m, "blob.raw") + WPK_M_VALUE_OFF, g_aux_len(m) - 2);
    gimg_seal_index(m);
    return 0;
}
/* -- name map */
static int c_nmap_is_entry_name(gimg *m)
{
    uint64_t n = gimg_count(m, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE);
    swap_names(gimg_rec(m, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, n - 1),
               gimg_entry(m, G_SPLAT), 1);
    gimg_seal_index(m);
    return 0;
}
static int c_nmap_unsorted(gimg *m)
{
    swap_names(gimg_rec(m, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, 0),
               gimg_rec(m, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, 1), 0);
    gimg_seal_index(m);
    return 0;
}
static int c_nmap_duplicate(gimg *m)
{
    swap_names(gimg_rec(m, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, 1),
               gimg_rec(m, WPK_SEC_NAMEMAP, WPK_NAMEMAP_REC_SIZE, 0), 1);
    gimg_seal_index(m);
    return 0;
}
static int c_nmap_range(gimg *m)
{
    wpk_st32(gimg_nmap(m, "p_dense_f32") + WPK_N_ENTRY_OFF,
             (uint32_t)gimg_count(m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE));
    gimg_seal_index(m);
    return 0;
}
/* -- stats */
static int c_stats_unsorted(gimg *m)
{
    swap_names(gimg_stats(m, "dense.bf16", WPACK_STATS_WEIGHT),
               gimg_stats(m, "dense.f16", WPACK_STATS_WEIGHT), 0);
    gimg_seal_index(m);
    return 0;
}
/* Two faults in one key: out of order and a control byte. M47 checks the
 * name rule before the order: NAME (the reader checked the order first). */
static int c_stats_unsorted_bad_name(gimg *m)
{
    c_stats_unsorted(m); /* the second of the two records now names dense.bf16 */
    uint8_t *r = gimg_rec(m, WPK_SEC_STATS, WPK_STATS_REC_SIZE,
                          (uint64_t)(gimg_stats(m, "dense.f16", WPACK_STATS_WEIGHT) -
                                     gimg_sec(m, WPK_SEC_STATS)) / WPK_STATS_REC_SIZE + 1);
    gimg_name_bytes(m, r)[5] = 0x01;
    gimg_seal_index(m);
    return 0;
}
static int c_stats_kind_order(gimg *m)
{
    gimg_stats(m, G_F64, WPACK_STATS_ACTIVATION)[WPK_S_KIND_OFF] = 0xfe; /* placeholder */
    gimg_stats(m, G_F64, WPACK_STATS_WEIGHT)[WPK_S_KIND_OFF] = WPACK_STATS_ACTIVATION;
    gimg_stats(m, G_F64, 0xfe)[WPK_S_KIND_OFF] = WPACK_STATS_WEIGHT;
    gimg_seal_index(m);
    return 0;
}
static int c_stats_values_past(gimg *m)
{
    wpk_st64(gimg_stats(m, G_F64, WPACK_STATS_WEIGHT) + WPK_S_VALUES_OFF, g_aux_len(m) - 32);
    gimg_seal_index(m);
    return 0;
}
static int c_stats_hist_past(gimg *m)
{
    wpk_st64(gimg_stats(m, G_F32, WPACK_STATS_WEIGHT) + WPK_S_HIST_OFF, g_aux_len(m) - 8);
    gimg_seal_index(m);
    return 0;
}
static int c_stats_pct_past(gimg *m)
{
    wpk_st64(gimg_stats(m, G_F32, WPACK_STATS_WEIGHT) + WPK_S_PCT_OFF, g_aux_len(m) - 16);
    gimg_seal_index(m);
    return 0;
}

/* --------------------------------------------------------- the tables */

static const mcase superblock_cases[] = {
    HDR(W_SBRAW, 0, 1, OP_SET, 'X', WPACK_E_BAD_MAGIC, "magic byte 0"),
    HDR(W_SBRAW, 0, 8, OP_SET, 0, WPACK_E_BAD_MAGIC, "magic zero"),
    HDR(W_SBRAW, 0, 1, OP_SET, 0x09, WPACK_E_BAD_MAGIC, "magic high bit stripped"),
    CUSTOM(c_text_mode_crlf, WPACK_E_BAD_MAGIC, "magic CRLF -> LF (text mode)"),
    CUSTOM(c_text_mode_lf, WPACK_E_BAD_MAGIC, "magic LF -> CRLF (text mode)"),
    HDR(W_SBRAW, WPK_H_CHECKSUM_OFF, 1, OP_XOR, 1, WPACK_E_HEADER_CHECKSUM, "checksum byte"),
    HDR(W_SBRAW, WPK_H_MAJOR_OFF, 2, OP_SET, 2, WPACK_E_HEADER_CHECKSUM, "field changed, not re-sealed"),
    SBF(WPK_H_MAJOR_OFF, 2, 2, WPACK_E_VERSION, "major 2"),
    SBF(WPK_H_MAJOR_OFF, 2, 0, WPACK_E_VERSION, "major 0"),
    SBF(WPK_H_MAJOR_OFF, 2, 0xffff, WPACK_E_VERSION, "major 65535"),
    SBF(WPK_H_MINOR_OFF, 2, NEWER_MINOR, WPACK_OK, "a newer minor (same major) accepted"),
    SBF(WPK_H_MINOR_OFF, 2, 0xffff, WPACK_OK, "minor 65535 accepted"),
    CUSTOM(c_minor_newer_reserved, WPACK_OK, "a newer minor with non-zero reserved bytes accepted"),
    SBF(WPK_H_RESERVED_OFF, 1, 1, WPACK_E_RESERVED, "reserved byte 104 (minor 0)"),
    SBF(WPK_H_RESERVED_OFF + 15, 1, 0x80, WPACK_E_RESERVED, "reserved byte 119 (minor 0)"),
    SBF(WPK_H_ENDIAN_OFF, 4, 0x04030201u, WPACK_E_ENDIAN, "endian marker byte-swapped"),
    SBF(WPK_H_ENDIAN_OFF, 4, 0, WPACK_E_ENDIAN, "endian marker zero"),
    SBF(WPK_H_HEADER_SIZE_OFF, 4, 256, WPACK_E_LAYOUT, "header size 256"),
    SBF(WPK_H_HEADER_SIZE_OFF, 4, 0, WPACK_E_LAYOUT, "header size 0"),
    SBF(WPK_H_HEADER_SIZE_OFF, 4, 127, WPACK_E_LAYOUT, "header size 127"),
    SBF(WPK_H_REQUIRED_OFF, 8, UNKNOWN_REQUIRED_BIT, WPACK_E_FEATURE, "lowest unknown required feature bit"),
    SBF(WPK_H_REQUIRED_OFF, 8, 1ull << 63, WPACK_E_FEATURE, "unknown required feature bit 63"),
    SBF(WPK_H_OPTIONAL_OFF, 8, 1, WPACK_OK, "unknown optional feature bit 0 ignored"),
    SBF(WPK_H_OPTIONAL_OFF, 8, UINT64_MAX, WPACK_OK, "every optional feature bit ignored"),
    SBF(WPK_H_ALIGNMENT_OFF, 4, 0, WPACK_E_ALIGNMENT, "alignment 0"),
    SBF(WPK_H_ALIGNMENT_OFF, 4, 3, WPACK_E_ALIGNMENT, "alignment 3"),
    SBF(WPK_H_ALIGNMENT_OFF, 4, 32, WPACK_E_ALIGNMENT, "alignment 32 (below 64)"),
    SBF(WPK_H_ALIGNMENT_OFF, 4, 96, WPACK_E_ALIGNMENT, "alignment 96 (not a power of two)"),
    SBF(WPK_H_ALIGNMENT_OFF, 4, 4u << 20, WPACK_E_ALIGNMENT, "alignment 4 MiB"),
    SBF(WPK_H_ALIGNMENT_OFF, 4, 1u << 31, WPACK_E_ALIGNMENT, "alignment 2^31"),
    SBF(WPK_H_ALIGNMENT_OFF, 4, 128, WPACK_E_MISALIGNED, "alignment 128: 64-aligned tensors misaligned"),
    SBF(WPK_H_GENERATION_OFF, 8, 0, WPACK_E_LAYOUT, "generation 0"),
    SBF(WPK_H_DATA_OFFSET_OFF, 8, 192, WPACK_E_LAYOUT, "data offset 192"),
    SBF(WPK_H_DATA_OFFSET_OFF, 8, 0, WPACK_E_LAYOUT, "data offset 0"),
    SBF(WPK_H_DATA_OFFSET_OFF, 8, 64, WPACK_E_LAYOUT, "data offset inside the superblock"),
    HDR(W_SB, WPK_H_DATA_LENGTH_OFF, 8, OP_ADD, 8, WPACK_E_LAYOUT, "data length + 8"),
    HDR(W_SB, WPK_H_DATA_LENGTH_OFF, 8, OP_ADD, (uint64_t)-8, WPACK_E_LAYOUT, "data length - 8"),
    SBF(WPK_H_DATA_LENGTH_OFF, 8, 0, WPACK_E_LAYOUT, "data length 0"),
    SBF(WPK_H_DATA_LENGTH_OFF, 8, UINT64_MAX - 128, WPACK_E_LAYOUT,
        "data region ends at 2^64-1 (its 8-byte padding would overflow)"),
    /* rules.md step 1 names LAYOUT for every region rule; an overflowing sum is one. */
    SBF(WPK_H_DATA_LENGTH_OFF, 8, UINT64_MAX, WPACK_E_LAYOUT, "data offset + length overflows"),
    HDR(W_SB, WPK_H_INDEX_OFFSET_OFF, 8, OP_ADD, 4, WPACK_E_LAYOUT, "index offset not a multiple of 8"),
    HDR(W_SB, WPK_H_INDEX_LENGTH_OFF, 8, OP_ADD, 4, WPACK_E_LAYOUT, "index length not a multiple of 8"),
    HDR(W_SB, WPK_H_INDEX_OFFSET_OFF, 8, OP_ADD, 8, WPACK_E_LAYOUT, "index offset + 8"),
    HDR(W_SB, WPK_H_INDEX_LENGTH_OFF, 8, OP_ADD, (uint64_t)-8, WPACK_E_LAYOUT, "index length - 8"),
    CUSTOM(c_index_before_data_end, WPACK_E_LAYOUT, "index starts before the data region ends"),
    CUSTOM(c_index_too_short, WPACK_E_LAYOUT, "index shorter than its 256-byte header"),
    CUSTOM(c_index_offset_overflow, WPACK_E_LAYOUT, "index offset + length overflows"),
    HDR(W_SB, WPK_H_FILE_LENGTH_OFF, 8, OP_ADD, 8, WPACK_E_LAYOUT, "file length + 8"),
    HDR(W_SB, WPK_H_FILE_LENGTH_OFF, 8, OP_ADD, (uint64_t)-8, WPACK_E_LAYOUT, "file length - 8"),
    SBF(WPK_H_FILE_LENGTH_OFF, 8, UINT64_MAX, WPACK_E_LAYOUT, "file length 2^64-1"),
    HDR(W_SB, WPK_H_ENTRY_COUNT_OFF, 8, OP_ADD, (uint64_t)-1, WPACK_E_LAYOUT, "entry count - 1 (index disagrees)"),
    HDR(W_SB, WPK_H_INDEX_CHECKSUM_OFF, 8, OP_XOR, 1, WPACK_E_INDEX_CHECKSUM, "index checksum field wrong"),
    HDR(W_SB, WPK_H_DATA_OFFSET_OFF, 8, OP_ADD, 0, WPACK_OK, "(control) mirrored and re-sealed, unchanged"),
};

static const mcase trailer_cases[] = {
    HDR(W_TR, 0, 1, OP_SET, 'X', WPACK_E_TRAILER, "trailer magic damaged"),
    CUSTOM(c_trailer_zeroed, WPACK_E_TRAILER, "trailer missing (zeroed)"),
    CUSTOM(c_trailer_is_superblock, WPACK_E_TRAILER, "trailer carries the superblock magic"),
    HDR(W_TR, WPK_H_GENERATION_OFF, 8, OP_ADD, 0, WPACK_OK, "(control) re-sealed, unchanged"),
    HDR(W_TRRAW, WPK_H_CHECKSUM_OFF, 8, OP_XOR, 1, WPACK_E_HEADER_CHECKSUM, "trailer checksum wrong"),
    HDR(W_TRRAW, WPK_H_ENTRY_COUNT_OFF, 8, OP_XOR, 1, WPACK_E_HEADER_CHECKSUM, "trailer field changed, not re-sealed"),
    HDR(W_TR, WPK_H_GENERATION_OFF, 8, OP_SET, 2, WPACK_E_TRAILER, "trailer generation 2"),
    HDR(W_TR, WPK_H_ENTRY_COUNT_OFF, 8, OP_ADD, 1, WPACK_E_TRAILER, "trailer entry count"),
    HDR(W_TR, WPK_H_INDEX_CHECKSUM_OFF, 8, OP_XOR, 1, WPACK_E_TRAILER, "trailer index checksum"),
    HDR(W_TR, WPK_H_MAJOR_OFF, 2, OP_SET, 2, WPACK_E_TRAILER, "trailer major 2"),
    HDR(W_TR, WPK_H_RESERVED_OFF, 1, OP_SET, 1, WPACK_E_TRAILER, "trailer reserved byte"),
    HDR(W_TR, WPK_H_FILE_LENGTH_OFF, 8, OP_ADD, 8, WPACK_E_TRAILER, "trailer file length"),
    HDR(W_SBONLY, WPK_H_MINOR_OFF, 2, OP_SET, 1, WPACK_E_TRAILER, "superblock minor changed, trailer not"),
    HDR(W_SBONLY, WPK_H_OPTIONAL_OFF, 8, OP_SET, 1, WPACK_E_TRAILER, "superblock optional bit, trailer not"),
};

static const mcase index_cases[] = {
    HDR(W_IXRAW, 100, 1, OP_XOR, 1, WPACK_E_INDEX_CHECKSUM, "index byte changed, not re-sealed"),
    IXH(WPK_I_MAGIC_OFF, 1, 'X', WPACK_E_LAYOUT, "index magic"),
    IXH(WPK_I_HEADER_SIZE_OFF, 4, 255, WPACK_E_LAYOUT, "index header size 255"),
    IXH(WPK_I_ENTRY_SIZE_OFF, 4, 81, WPACK_E_LAYOUT, "entry size 81"),
    IXH(WPK_I_ENTRY_SIZE_OFF, 4, 0, WPACK_E_LAYOUT, "entry size 0"),
    HDR(W_IXH, WPK_I_ENTRY_COUNT_OFF, 8, OP_ADD, (uint64_t)-1, WPACK_E_LAYOUT, "entry count - 1 (superblock disagrees)"),
    HDR(W_IXH, WPK_I_ENTRY_COUNT_OFF, 8, OP_ADD, 1, WPACK_E_LAYOUT, "entry count + 1 (superblock disagrees)"),
    CUSTOM(c_entry_count_huge, WPACK_E_LIMIT, "entry count 2^31+1 in index and superblock"),
    HDR(W_IXH, WPK_I_DATA_ENTRY_COUNT_OFF, 8, OP_SET, 24, WPACK_E_LAYOUT, "data entry count > entry count"),
    CUSTOM(c_data_count_short, WPACK_E_LAYOUT, "data entry count below the data entries"),
    IXH(WPK_I_RESERVED_OFF, 1, 1, WPACK_E_RESERVED, "index header reserved byte"),
    IXH(WPK_INDEX_HEADER_SIZE - 1, 1, 1, WPACK_E_RESERVED, "index header last reserved byte"),
    SECF(WPK_SEC_ENTRIES, 0, OP_SET, 248, WPACK_E_LAYOUT, "entries inside the index header"),
    SECF(WPK_SEC_EXTENTS, 0, OP_ADD, 4, WPACK_E_LAYOUT, "extents offset misaligned"),
    SECF(WPK_SEC_EXTENTS, 0, OP_ADD, (uint64_t)-8, WPACK_E_LAYOUT, "extents overlap entries"),
    CUSTOM(c_sections_swapped, WPACK_E_LAYOUT, "strings placed at the dims offset"),
    SECF(WPK_SEC_STATS, 1, OP_ADD, 8, WPACK_E_LAYOUT, "stats past the end of the index"),
    SECF(WPK_SEC_STATS, 1, OP_SET, 1ull << 63, WPACK_E_LAYOUT, "stats length 2^63"),
    SECF(WPK_SEC_STATS, 1, OP_SET, UINT64_MAX - 7, WPACK_E_LAYOUT, "stats offset + length overflows"),
    CUSTOM(c_section_past_index, WPACK_E_LAYOUT, "stats offset past the index"),
    CUSTOM(c_section_gap_nonzero, WPACK_E_PADDING, "non-zero byte between sections"),
    CUSTOM(c_stats_tail_garbage, WPACK_E_PADDING, "non-zero bytes after the last section"),
    CUSTOM(c_ixh_reserved_and_count, WPACK_E_LAYOUT, "index reserved byte and entry count: count first"),
    CUSTOM(c_gap_and_ragged_stats, WPACK_E_LAYOUT, "gap byte and stats length: lengths first"),
    CUSTOM(c_stats_drop_last, WPACK_OK, "(control) last stats record dropped and zeroed"),
    CUSTOM(c_entries_short, WPACK_E_LAYOUT, "entries length != entry count x 80"),
    SECF(WPK_SEC_ENTRIES, 1, OP_ADD, 8, WPACK_E_LAYOUT, "entries length + 8 (runs into extents)"),
    CUSTOM(c_extents_short, WPACK_E_LAYOUT, "extents length != data entry count x 4"),
    CUSTOM(c_dims_ragged, WPACK_E_LAYOUT, "dims length not a multiple of 8"),
    CUSTOM(c_dtypes_ragged, WPACK_E_LAYOUT, "dtypes length not a multiple of 40"),
    CUSTOM(c_meta_ragged, WPACK_E_LAYOUT, "metadata length not a multiple of 32"),
    CUSTOM(c_nmap_ragged, WPACK_E_LAYOUT, "namemap length not a multiple of 24"),
    CUSTOM(c_stats_ragged, WPACK_E_LAYOUT, "stats length not a multiple of 64"),
};

static const mcase entry_cases[] = {
    CUSTOM(c_name_past_strings, WPACK_E_BOUNDS, "name offset at the end of strings"),
    ENT(G_F64, WPK_E_NAME_OFF, 8, UINT64_MAX, WPACK_E_BOUNDS, "name offset 2^64-1"),
    ENT(G_F64, WPK_E_NAME_LEN_OFF, 4, UINT32_MAX, WPACK_E_BOUNDS, "name length 2^32-1"),
    ENTX(G_F64, WPK_E_NAME_LEN_OFF, 4, OP_ADD, 1, WPACK_E_BOUNDS, "name not NUL-terminated"),
    CUSTOM(c_name_empty, WPACK_E_NAME, "empty name"),
    CUSTOM(c_name_nul_inside, WPACK_E_NAME, "NUL inside a name"),
    ENAME(G_F64, 2, "\x01", WPACK_E_NAME, "control byte 0x01 in a name"),
    ENAME(G_F64, 2, "\x1f", WPACK_E_NAME, "control byte 0x1f in a name"),
    ENAME(G_F64, 2, "\x7f", WPACK_E_NAME, "DEL in a name"),
    ENAME(G_F64, 0, "\n", WPACK_E_NAME, "newline in a name"),
    ENAME(G_UNI, TAIL, "\xc0\xae", WPACK_E_NAME, "overlong 2-byte UTF-8"),
    ENAME(G_UNI, TAIL, "\xe0\x80\xae", WPACK_E_NAME, "overlong 3-byte UTF-8"),
    ENAME(G_UNI, TAIL, "\xf0\x80\x80\xae", WPACK_E_NAME, "overlong 4-byte UTF-8"),
    ENAME(G_UNI, TAIL, "\xed\xa0\x80", WPACK_E_NAME, "UTF-16 surrogate U+D800"),
    ENAME(G_UNI, TAIL, "\xed\xbf\xbf", WPACK_E_NAME, "UTF-16 surrogate U+DFFF"),
    ENAME(G_UNI, TAIL, "\xe6\x97", WPACK_E_NAME, "truncated 3-byte sequence at the end"),
    ENAME(G_UNI, TAIL, "\xf0\x9f\x98", WPACK_E_NAME, "truncated 4-byte sequence at the end"),
    ENAME(G_UNI, 2, "\xe6\x97", WPACK_E_NAME, "truncated sequence inside"),
    ENAME(G_UNI, TAIL, "\xf4\x90\x80\x80", WPACK_E_NAME, "code point above U+10FFFF"),
    ENAME(G_UNI, TAIL, "\xf5\x80\x80\x80", WPACK_E_NAME, "lead byte 0xf5"),
    ENAME(G_UNI, 3, "\x80", WPACK_E_NAME, "stray continuation byte"),
    ENAME(G_UNI, TAIL, "\xff", WPACK_E_NAME, "byte 0xff"),
    ENAME(G_UNI, TAIL, "\xc3\xa9", WPACK_OK, "(control) valid 2-byte UTF-8"),
    ENAME(G_UNI, TAIL, "\xf0\x9f\x98\x80", WPACK_OK, "(control) valid 4-byte UTF-8"),
    ENAME(G_UNI, TAIL, "\xf4\x8f\xbf\xbf", WPACK_OK, "(control) U+10FFFF"),
    CUSTOM(c_names_unsorted, WPACK_E_UNSORTED, "names unsorted"),
    CUSTOM(c_names_duplicate, WPACK_E_DUPLICATE, "duplicate names"),
    ENT(G_F64, WPK_E_KIND_OFF, 1, 0, WPACK_E_KIND, "kind 0"),
    ENT(G_F64, WPK_E_KIND_OFF, 1, 4, WPACK_E_KIND, "kind 4"),
    ENT(G_F64, WPK_E_KIND_OFF, 1, 255, WPACK_E_KIND, "kind 255"),
    ENT(G_F64, WPK_E_DTYPE_OFF, 1, 0, WPACK_E_DTYPE, "dtype 0"),
    ENT(G_F64, WPK_E_DTYPE_OFF, 1, 16, WPACK_E_DTYPE, "dtype 16"),
    ENT(G_F64, WPK_E_DTYPE_OFF, 1, 127, WPACK_E_DTYPE, "dtype 127"),
    ENT(G_Q4, WPK_E_DTYPE_OFF, 1, 129, WPACK_E_DTYPE, "block dtype index 1 of 1"),
    ENT(G_F64, WPK_E_DTYPE_OFF, 1, 255, WPACK_E_DTYPE, "dtype 255"),
    ENT(G_F64, WPK_E_DTYPE_OFF, 1, WPACK_DTYPE_F32, WPACK_E_SIZE, "dtype f64 -> f32: size disagrees"),
    ENT(G_F64, WPK_E_DTYPE_OFF, 1, WPACK_DTYPE_I64, WPACK_OK, "(control) dtype f64 -> i64"),
    ENT(G_F64, WPK_E_RANK_OFF, 1, 9, WPACK_E_RANK, "rank 9"),
    ENT(G_F64, WPK_E_RANK_OFF, 1, 255, WPACK_E_RANK, "rank 255"),
#if WPACK_FORMAT_MINOR == 0
    ENT(G_F64, WPK_E_CODEC_OFF, 1, 1, WPACK_E_CODEC, "codec 1"),
#endif
    ENT(G_F64, WPK_E_CODEC_OFF, 1, 2, WPACK_E_CODEC, "codec 2"),
    ENT(G_F64, WPK_E_CODEC_OFF, 1, 255, WPACK_E_CODEC, "codec 255"),
    ENT(G_F64, WPK_E_CODEC_PARAM_OFF, 4, 12, WPACK_E_RESERVED, "codec_param non-zero"),
    ENT(G_F64, WPK_E_RESERVED_OFF, 1, 1, WPACK_E_RESERVED, "reserved byte 72"),
    ENT(G_F64, WPK_E_RESERVED_OFF + 7, 1, 1, WPACK_E_RESERVED, "reserved byte 79"),
    CUSTOM(c_dims_index_at_end, WPACK_E_BOUNDS, "dims start at the end of the dims section"),
    CUSTOM(c_dims_straddle_end, WPACK_E_BOUNDS, "dims run past the dims section"),
    ENT(G_F64, WPK_E_DIMS_OFF, 8, 1ull << 63, WPACK_E_BOUNDS, "dims index 2^63"),
    ENT(G_F64, WPK_E_DIMS_OFF, 8, UINT64_MAX, WPACK_E_BOUNDS, "dims index 2^64-1"),
    ENT(G_UNI, WPK_E_RANK_OFF, 1, 2, WPACK_E_BOUNDS, "last entry's rank + 1 past the dims"),
    CUSTOM(c_elem_overflow_2x32, WPACK_E_OVERFLOW, "element count overflow (2^32 x 2^32)"),
    DIM("dense.f16", 0, 1ull << 63, WPACK_E_OVERFLOW, "byte size overflow (2^63 x 2 bytes)"),
    DIM("rank8.u8", 0, 0, WPACK_E_SIZE, "a zero dim: 0 elements, 4 bytes stored"),
    CUSTOM(c_overflow_before_zero, WPACK_E_OVERFLOW, "[2^40, 2^40, 0, ...]: overflow before the zero"),
    ENTX(G_F64, WPK_E_STORED_LEN_OFF, 8, OP_ADD, 1, WPACK_E_SIZE, "stored length + 1"),
    ENTX(G_F64, WPK_E_STORED_LEN_OFF, 8, OP_ADD, (uint64_t)-1, WPACK_E_SIZE, "stored length - 1"),
    DIM(G_F32, 1, 5, WPACK_E_SIZE, "dims [2,4] -> [2,5]: stored length short"),
    ENT(G_EMPTY, WPK_E_STORED_LEN_OFF, 8, 4, WPACK_E_SIZE, "zero-size tensor with 4 stored bytes"),
    ENTX("dense.f16", WPK_E_DATA_OFFSET_OFF, 8, OP_ADD, 8, WPACK_E_MISALIGNED, "offset misaligned by 8"),
    ENTX("dense.f16", WPK_E_DATA_OFFSET_OFF, 8, OP_ADD, 1, WPACK_E_MISALIGNED, "offset misaligned by 1"),
    CUSTOM(c_offset_past_data, WPACK_E_BOUNDS, "offset past the data region"),
    CUSTOM(c_empty_past_data, WPACK_E_BOUNDS, "zero-size tensor past the data region"),
    CUSTOM(c_length_past_data, WPACK_E_BOUNDS, "length past the data region (shape agrees)"),
    CUSTOM(c_offset_wraps, WPACK_E_BOUNDS, "offset + length overflows"),
    ENT(G_F64, WPK_E_DATA_OFFSET_OFF, 8, 0, WPACK_E_BOUNDS, "offset 0 (before the data region)"),
    ENTX(G_U8, WPK_E_DATA_OFFSET_OFF, 8, OP_ADD, 64, WPACK_E_BOUNDS, "last extent moved past the end"),
    CUSTOM(c_extents_overlap, WPACK_E_OVERLAP, "two extents at one offset"),
    CUSTOM(c_extents_hole, WPACK_E_OVERLAP, "an extent moved up: a hole"),
    CUSTOM(c_extents_swapped, WPACK_E_OVERLAP, "extents list out of offset order"),
    CUSTOM(c_last_extent_short, WPACK_E_LAYOUT, "last extent ends before the data region does"),
    CUSTOM(c_extent_splat, WPACK_E_LAYOUT, "extents list names a splat"),
    CUSTOM(c_extent_alias, WPACK_E_LAYOUT, "extents list names an alias"),
    CUSTOM(c_extent_twice, WPACK_E_LAYOUT, "extents list names one entry twice"),
    CUSTOM(c_extent_range, WPACK_E_LAYOUT, "extents list entry = entry count"),
    CUSTOM(c_extent_huge, WPACK_E_LAYOUT, "extents list entry 2^32-1"),
    CUSTOM(c_hole_then_twice, WPACK_E_LAYOUT, "a hole, then an entry listed twice: numbers first"),
    ENT(G_F64, WPK_E_AUX_OFF, 8, 8, WPACK_E_KIND, "data entry with aux offset"),
    ENT(G_F64, WPK_E_AUX_LEN_OFF, 8, 4, WPACK_E_KIND, "data entry with aux length"),
    ENT(G_F64, WPK_E_TARGET_OFF, 4, 1, WPACK_E_KIND, "data entry with a target"),
    CUSTOM(c_data_target_and_size, WPACK_E_KIND,
           "data entry with a target and a wrong stored length: KIND first"),
    ENT(G_SPLAT, WPK_E_AUX_LEN_OFF, 8, 2, WPACK_E_SIZE, "splat fill 2 bytes for f32"),
    ENT(G_SPLAT, WPK_E_AUX_LEN_OFF, 8, 8, WPACK_E_SIZE, "splat fill 8 bytes for f32"),
    ENT(G_SPLAT, WPK_E_AUX_LEN_OFF, 8, 0, WPACK_E_SIZE, "splat without fill"),
    ENTX(G_SPLAT, WPK_E_CHECKSUM_OFF, 8, OP_XOR, 1, WPACK_E_CHECKSUM, "splat fill checksum"),
    CUSTOM(c_splat_fill_changed, WPACK_E_CHECKSUM, "splat fill bytes changed"),
    ENT(G_SPLAT, WPK_E_DATA_OFFSET_OFF, 8, 128, WPACK_E_KIND, "splat with a data offset"),
    ENT(G_SPLAT, WPK_E_STORED_LEN_OFF, 8, 4, WPACK_E_KIND, "splat with a stored length"),
    ENT(G_SPLAT, WPK_E_TARGET_OFF, 4, 1, WPACK_E_KIND, "splat with a target"),
    CUSTOM(c_splat_aux_end, WPACK_E_BOUNDS, "splat fill runs past aux"),
    ENT(G_SPLAT, WPK_E_AUX_OFF, 8, UINT64_MAX - 1, WPACK_E_BOUNDS, "splat fill offset + length overflows"),
    CUSTOM(c_alias_self, WPACK_E_ALIAS, "alias to itself"),
    CUSTOM(c_alias_to_alias, WPACK_E_ALIAS, "alias to an alias"),
    CUSTOM(c_alias_range, WPACK_E_ALIAS, "alias target = entry count"),
    ENT(G_ALIAS, WPK_E_TARGET_OFF, 4, UINT32_MAX, WPACK_E_ALIAS, "alias target 2^32-1"),
    CUSTOM(c_alias_other_data, WPACK_E_ALIAS, "alias to another tensor (extent differs)"),
    ENT(G_ALIAS, WPK_E_DTYPE_OFF, 1, WPACK_DTYPE_I32, WPACK_E_ALIAS, "alias dtype differs"),
    DIM(G_ALIAS, 0, 4, WPACK_E_ALIAS, "alias dims differ ([4,4])"),
    ENT(G_ALIAS, WPK_E_RANK_OFF, 1, 1, WPACK_E_ALIAS, "alias rank differs"),
    ENTX(G_ALIAS, WPK_E_DATA_OFFSET_OFF, 8, OP_ADD, 64, WPACK_E_ALIAS, "alias offset differs"),
    ENTX(G_ALIAS, WPK_E_STORED_LEN_OFF, 8, OP_ADD, 4, WPACK_E_ALIAS, "alias stored length differs"),
    ENTX(G_ALIAS, WPK_E_CHECKSUM_OFF, 8, OP_XOR, 1, WPACK_E_ALIAS, "alias checksum differs"),
    ENTX(G_ALIAS_SPLAT, WPK_E_CHECKSUM_OFF, 8, OP_XOR, 1, WPACK_E_ALIAS, "alias of a splat, checksum differs"),
    ENT(G_ALIAS, WPK_E_AUX_LEN_OFF, 8, 4, WPACK_E_KIND, "alias with aux"),
    ENT(G_ALIAS, WPK_E_CODEC_PARAM_OFF, 4, 12, WPACK_E_RESERVED, "alias (codec 0) with codec_param"),
    CUSTOM(c_alias_param_newer_minor, WPACK_OK, "alias (codec 0) codec_param under a newer minor"),
    DTYP(0, WPK_D_BLOCK_ELEMS_OFF, 4, 0, WPACK_E_DTYPE, "block dtype with 0 elements per block"),
    DTYP(0, WPK_D_BLOCK_BYTES_OFF, 4, 0, WPACK_E_DTYPE, "block dtype with 0 bytes per block"),
    DTYP(0, WPK_D_RESERVED_OFF, 4, 1, WPACK_E_RESERVED, "block dtype reserved field"),
    DTYP(0, WPK_D_PARAMS_OFF, 8, 1ull << 40, WPACK_E_BOUNDS, "block dtype params past aux"),
    DTYP(0, WPK_D_NAME_LEN_OFF, 4, 0, WPACK_E_BOUNDS, "block dtype name length 0 (not at a NUL)"),
    NAMEB(WPK_SEC_DTYPES, NULL, 0, 1, "\xff", WPACK_E_NAME, "block dtype name invalid UTF-8"),
    DTYP(0, WPK_D_BLOCK_ELEMS_OFF, 4, 48, WPACK_E_SHAPE, "last dim 64 not a multiple of a 48-element block"),
    DTYP(0, WPK_D_BLOCK_ELEMS_OFF, 4, 16, WPACK_E_SIZE, "16-element blocks: stored length disagrees"),
    DTYP(0, WPK_D_BLOCK_BYTES_OFF, 4, 9, WPACK_E_SIZE, "9-byte blocks: stored length disagrees"),
    ENT(G_Q4, WPK_E_RANK_OFF, 1, 0, WPACK_E_SHAPE, "block dtype tensor of rank 0"),
    CUSTOM(c_block1_rank0, WPACK_E_SHAPE, "1-element-block dtype tensor of rank 0"),
    CUSTOM(c_block1_rank1, WPACK_OK, "(control) 1-element-block dtype tensor of rank 1"),
    DIM(G_Q4, 1, 48, WPACK_E_SHAPE, "block dtype tensor with last dim 48"),
};

static const mcase meta_cases[] = {
    CUSTOM(c_meta_unsorted, WPACK_E_UNSORTED, "keys unsorted"),
    CUSTOM(c_meta_duplicate, WPACK_E_DUPLICATE, "duplicate key"),
    NAMEB(WPK_SEC_METADATA, "model.name", 0, 5, "\x01", WPACK_E_NAME, "control byte in a key"),
    META("model.name", WPK_M_KEY_LEN_OFF, 4, 0, WPACK_E_BOUNDS, "key length 0 (not at a NUL)"),
    META("model.name", WPK_M_RESERVED_OFF, 2, 1, WPACK_E_RESERVED, "reserved field"),
    META("model.name", WPK_M_TYPE_OFF, 1, 0, WPACK_E_METADATA, "type 0"),
    META("model.name", WPK_M_TYPE_OFF, 1, 7, WPACK_E_METADATA, "type 7"),
    META("model.name", WPK_M_TYPE_OFF, 1, 255, WPACK_E_METADATA, "type 255"),
    META("array.i64", WPK_M_ELEM_TYPE_OFF, 1, WPACK_META_ARRAY, WPACK_E_METADATA, "array of arrays"),
    META("array.i64", WPK_M_ELEM_TYPE_OFF, 1, 0, WPACK_E_METADATA, "array with element type 0"),
    META("array.i64", WPK_M_ELEM_TYPE_OFF, 1, 7, WPACK_E_METADATA, "array with element type 7"),
    META("array.i64", WPK_M_ELEM_TYPE_OFF, 1, 255, WPACK_E_METADATA, "array with element type 255"),
    META("model.name", WPK_M_ELEM_TYPE_OFF, 1, WPACK_META_STRING, WPACK_E_METADATA, "string with an element type"),
    META("train.converged", WPK_M_VALUE_OFF, 8, 2, WPACK_E_METADATA, "bool value 2"),
    META("train.converged", WPK_M_VALUE_OFF, 8, 1ull << 32, WPACK_E_METADATA, "bool value 2^32"),
    META("train.converged", WPK_M_COUNT_OFF, 8, 1, WPACK_E_METADATA, "bool with count 1"),
    META("train.steps", WPK_M_COUNT_OFF, 8, 1, WPACK_E_METADATA, "i64 with count 1"),
    META("train.lr", WPK_M_COUNT_OFF, 8, 8, WPACK_E_METADATA, "f64 with count 8"),
    CUSTOM(c_meta_string_past, WPACK_E_BOUNDS, "string value at the end of strings"),
    META("model.name", WPK_M_VALUE_OFF, 8, 1ull << 40, WPACK_E_BOUNDS, "string value offset 2^40"),
    META("model.name", WPK_M_COUNT_OFF, 8, 1ull << 40, WPACK_E_BOUNDS, "string length 2^40"),
    META("model.name", WPK_M_COUNT_OFF, 8, UINT64_MAX, WPACK_E_BOUNDS, "string length 2^64-1"),
    REC(WPK_SEC_METADATA, "model.name", 0, WPK_M_COUNT_OFF, 8, OP_ADD, 1, WPACK_E_BOUNDS,
        "string value not NUL-terminated"),
    MSTRB("model.name", 3, "\xc0\xaf", WPACK_E_METADATA, "string value overlong UTF-8"),
    MSTRB("model.name", 3, "\xed\xa0\x80", WPACK_E_METADATA, "string value surrogate"),
    MSTRB("model.name", 3, "\xf4\x90\x80\x80", WPACK_E_METADATA, "string value above U+10FFFF"),
    MSTRB("model.name", TAIL, "\xe6\x97", WPACK_E_METADATA, "string value truncated sequence"),
    MSTRB("model.name", 3, "\xff", WPACK_E_METADATA, "string value byte 0xff"),
    {.what = "NUL inside a string value", .expect = WPACK_E_METADATA, .where = W_MSTRB,
     .sec = WPK_SEC_METADATA, .rec = "model.name", .off = 3, .width = 1, .op = OP_SET, .val = 0},
    MSTRB("model.name", 3, "\x01\x7f", WPACK_OK, "(control) control bytes in a string value"),
    CUSTOM(c_meta_array_str_elem_utf8, WPACK_E_METADATA, "string array element invalid UTF-8"),
    CUSTOM(c_meta_array_str_elem_nul, WPACK_E_METADATA, "string array element with a NUL"),
    MARR("array.str", 16, 8, 1ull << 40, WPACK_E_BOUNDS, "string array element offset 2^40"),
    MARR("array.str", 24, 8, 100000, WPACK_E_BOUNDS, "string array element length past strings"),
    MARR("array.bool", 1, 1, 2, WPACK_E_METADATA, "bool array element 2"),
    MARR("array.bool", 2, 1, 0xff, WPACK_E_METADATA, "bool array element 255"),
    META("array.i64", WPK_M_COUNT_OFF, 8, 1ull << 60, WPACK_E_LIMIT, "array count 2^60"),
    META("array.str", WPK_M_COUNT_OFF, 8, 1ull << 60, WPACK_E_LIMIT, "string array count 2^60 (x16 overflows)"),
    META("array.str", WPK_M_COUNT_OFF, 8, UINT64_MAX, WPACK_E_LIMIT, "string array count 2^64-1"),
    META("array.i64", WPK_M_COUNT_OFF, 8, (1ull << 32) + 1, WPACK_E_LIMIT, "array count 2^32+1"),
    META("array.str", WPK_M_COUNT_OFF, 8, 1ull << 32, WPACK_E_BOUNDS, "array count 2^32 (limit) past aux"),
    CUSTOM(c_meta_array_past_aux, WPACK_E_BOUNDS, "array one element past aux"),
    CUSTOM(c_meta_array_off_past, WPACK_E_BOUNDS, "array offset at the end of aux"),
    META("array.empty", WPK_M_VALUE_OFF, 8, 1ull << 40, WPACK_E_BOUNDS, "empty array offset 2^40"),
    META("blob.raw", WPK_M_COUNT_OFF, 8, 1ull << 40, WPACK_E_BOUNDS, "bytes length 2^40"),
    CUSTOM(c_meta_bytes_straddle, WPACK_E_BOUNDS, "bytes run past aux"),
    CUSTOM(c_meta_bytes_past_end, WPACK_E_BOUNDS, "empty bytes one past the end of aux"),
    CUSTOM(c_meta_bytes_at_end, WPACK_OK, "(control) empty bytes at the end of aux"),
};

static const mcase nmap_cases[] = {
    CUSTOM(c_nmap_range, WPACK_E_NAMEMAP, "entry = entry count"),
    NMAP("p_dense_f32", WPK_N_ENTRY_OFF, 4, UINT32_MAX, WPACK_E_NAMEMAP, "entry 2^32-1"),
    CUSTOM(c_nmap_is_entry_name, WPACK_E_NAMEMAP, "name equal to an entry name"),
    CUSTOM(c_nmap_unsorted, WPACK_E_UNSORTED, "names unsorted"),
    CUSTOM(c_nmap_duplicate, WPACK_E_DUPLICATE, "duplicate names"),
    NMAP("p_dense_f32", WPK_N_RESERVED_OFF, 8, 1, WPACK_E_RESERVED, "reserved field"),
    NAMEB(WPK_SEC_NAMEMAP, "p_dense_f32", 0, 1, "\x7f", WPACK_E_NAME, "DEL in a name"),
    NMAP("p_dense_f32", WPK_N_NAME_LEN_OFF, 4, 1u << 20, WPACK_E_BOUNDS, "name length past strings"),
};

#define WS WPACK_STATS_WEIGHT
#define AS WPACK_STATS_ACTIVATION
static const mcase stats_cases[] = {
    STAT(G_F32, WS, WPK_S_KIND_OFF, 1, 3, WPACK_E_STATS, "kind 3"),
    STAT(G_F32, WS, WPK_S_KIND_OFF, 1, 0, WPACK_E_STATS, "kind 0"),
    STAT(G_F32, WS, WPK_S_GRAN_OFF, 1, 2, WPACK_E_STATS, "granularity 2"),
    STAT(G_F32, WS, WPK_S_RESERVED_OFF, 2, 1, WPACK_E_RESERVED, "reserved field"),
    STAT(G_F64, WS, WPK_S_CHANNELS_OFF, 4, 2, WPACK_E_STATS, "per-tensor with 2 channels"),
    STAT(G_F64, WS, WPK_S_CHANNELS_OFF, 4, 0, WPACK_E_STATS, "per-tensor with 0 channels"),
    STAT(G_F64, WS, WPK_S_AXIS_OFF, 4, 1, WPACK_E_STATS, "per-tensor with axis 1"),
    STAT(G_F32, WS, WPK_S_CHANNELS_OFF, 4, 0, WPACK_E_STATS, "per-channel with 0 channels"),
    STAT("0", AS, WPK_S_CHANNELS_OFF, 4, (1u << 24) + 1, WPACK_E_STATS, "per-channel 2^24+1 channels"),
    STAT("0", AS, WPK_S_AXIS_OFF, 4, 8, WPACK_E_STATS, "per-channel axis 8"),
    STAT("0", AS, WPK_S_AXIS_OFF, 4, 7, WPACK_OK, "(control) activation per-channel axis 7"),
    STAT(G_F32, WS, WPK_S_CHANNELS_OFF, 4, 4, WPACK_E_STATS, "weight per-channel: channels != dims[axis]"),
    STAT(G_F32, WS, WPK_S_AXIS_OFF, 4, 1, WPACK_E_STATS, "weight per-channel: axis 1 has 4, not 2"),
    STAT(G_F32, WS, WPK_S_AXIS_OFF, 4, 2, WPACK_E_STATS, "weight per-channel: axis >= rank"),
    NAMEB(WPK_SEC_STATS, "dense.f16", WS, 8, "7", WPACK_E_STATS, "weight stats for a missing tensor"),
    STAT(G_ACT, AS, WPK_S_KIND_OFF, 1, WS, WPACK_E_STATS, "weight stats keyed by a module path"),
    NAMEB(WPK_SEC_STATS, G_ACT, AS, 0, "\xc0", WPACK_E_NAME, "key invalid UTF-8"),
    CUSTOM(c_stats_unsorted, WPACK_E_UNSORTED, "keys unsorted"),
    CUSTOM(c_stats_kind_order, WPACK_E_UNSORTED, "same key, kinds out of order"),
    CUSTOM(c_stats_unsorted_bad_name, WPACK_E_NAME, "key unsorted and with a control byte: name first"),
    STAT(G_F64, AS, WPK_S_KIND_OFF, 1, WS, WPACK_E_DUPLICATE, "same key and kind twice"),
    SAUXF(W_SVAL, G_F64, WS, 0, 5.0, WPACK_E_STATS, "min > max"),
    SAUXF(W_SVAL, G_F64, WS, 16, 5.0, WPACK_E_STATS, "absmax wrong"),
    SAUXF(W_SVAL, G_F64, WS, 0, NAN, WPACK_E_STATS, "min NaN"),
    SAUXF(W_SVAL, G_F64, WS, 8, INFINITY, WPACK_E_STATS, "max +inf"),
    SAUXF(W_SVAL, G_F64, WS, 24, 10.0, WPACK_E_STATS, "mean above max"),
    SAUXF(W_SVAL, G_F64, WS, 32, -1.0, WPACK_E_STATS, "variance negative"),
    SAUXF(W_SVAL, G_F64, WS, 32, NAN, WPACK_E_STATS, "variance NaN"),
    SAUXF(W_SVAL, G_F32, WS, 8, 0.0, WPACK_E_STATS, "channel 1: min > max"),
    SAUXF(W_SVAL, G_F32, WS, 40, -3.0, WPACK_E_STATS, "channel 1: absmax wrong"),
    SAUX(W_SHIST, G_F32, WS, 40, 8, 3, WPACK_E_STATS, "histogram counts do not sum to count"),
    SAUX(W_SHIST, G_F32, WS, 40, 8, UINT64_MAX, WPACK_E_STATS, "histogram counts overflow"),
    STAT(G_F32, WS, WPK_S_COUNT_OFF, 8, 9, WPACK_E_STATS, "count disagrees with the histogram"),
    SAUXF(W_SHIST, G_F32, WS, 8, -4.0, WPACK_E_STATS, "histogram edges equal"),
    SAUXF(W_SHIST, G_F32, WS, 16, -3.0, WPACK_E_STATS, "histogram edges decreasing"),
    SAUXF(W_SHIST, G_F32, WS, 32, NAN, WPACK_E_STATS, "histogram edge NaN"),
    SAUXF(W_SHIST, G_F32, WS, 0, -INFINITY, WPACK_E_STATS, "histogram edge -inf"),
    SAUXF(W_SPCT, G_F32, WS, 16, 0.0, WPACK_E_STATS, "percentile q not increasing"),
    SAUXF(W_SPCT, G_F32, WS, 32, 100.5, WPACK_E_STATS, "percentile q above 100"),
    SAUXF(W_SPCT, G_F32, WS, 0, -1.0, WPACK_E_STATS, "percentile q below 0"),
    SAUXF(W_SPCT, G_F32, WS, 0, NAN, WPACK_E_STATS, "percentile q NaN"),
    SAUXF(W_SPCT, G_F32, WS, 24, -5.0, WPACK_E_STATS, "percentile values decreasing"),
    SAUXF(W_SPCT, G_F32, WS, 40, INFINITY, WPACK_E_STATS, "percentile value +inf"),
    STAT(G_F32, WS, WPK_S_HIST_BINS_OFF, 4, (1u << 20) + 1, WPACK_E_LIMIT, "histogram bins 2^20+1"),
    STAT(G_F32, WS, WPK_S_HIST_BINS_OFF, 4, UINT32_MAX, WPACK_E_LIMIT, "histogram bins 2^32-1"),
    STAT(G_F32, WS, WPK_S_HIST_BINS_OFF, 4, 1u << 20, WPACK_E_BOUNDS, "histogram bins 2^20 past aux"),
    STAT(G_F32, WS, WPK_S_PCT_COUNT_OFF, 4, 1025, WPACK_E_LIMIT, "1025 percentiles"),
    STAT(G_F32, WS, WPK_S_PCT_COUNT_OFF, 4, 1u << 31, WPACK_E_LIMIT, "2^31 percentiles"),
    STAT(G_F32, WS, WPK_S_PCT_COUNT_OFF, 4, 1024, WPACK_E_BOUNDS, "1024 percentiles past aux"),
    CUSTOM(c_stats_values_past, WPACK_E_BOUNDS, "values run past aux"),
    STAT(G_F64, WS, WPK_S_VALUES_OFF, 8, UINT64_MAX - 7, WPACK_E_BOUNDS, "values offset + length overflows"),
    CUSTOM(c_stats_hist_past, WPACK_E_BOUNDS, "histogram runs past aux"),
    STAT(G_F32, WS, WPK_S_HIST_OFF, 8, 1ull << 62, WPACK_E_BOUNDS, "histogram offset 2^62"),
    CUSTOM(c_stats_pct_past, WPACK_E_BOUNDS, "percentiles run past aux"),
    STAT(G_F32, WS, WPK_S_PCT_OFF, 8, 1ull << 63, WPACK_E_BOUNDS, "percentile offset 2^63"),
    STAT(G_F64, WS, WPK_S_HIST_OFF, 8, 8, WPACK_E_STATS, "histogram offset without bins"),
    STAT(G_F64, WS, WPK_S_PCT_OFF, 8, 8, WPACK_E_STATS, "percentile offset without percentiles"),
};

static const mcase newer_minor_cases[] = {
    CUSTOM(c_newer_ixh_reserved, WPACK_OK, "index header reserved byte"),
    CUSTOM(c_newer_entry_reserved, WPACK_OK, "entry reserved byte"),
    CUSTOM(c_newer_codec_param, WPACK_OK, "codec_param of a codec-0 data entry"),
    CUSTOM(c_newer_splat_param, WPACK_OK, "codec_param of a splat"),
    CUSTOM(c_newer_dtype_reserved, WPACK_OK, "block dtype reserved field"),
    CUSTOM(c_newer_meta_reserved, WPACK_OK, "metadata reserved field"),
    CUSTOM(c_newer_nmap_reserved, WPACK_OK, "name-map reserved field"),
    CUSTOM(c_newer_stats_reserved, WPACK_OK, "stats reserved field"),
    CUSTOM(c_newer_tail, WPACK_OK, "bytes after the last section"),
    CUSTOM(c_newer_gap, WPACK_E_PADDING, "a gap byte between sections (always checked)"),
};

/* ------------------------------------------------- record count limits */

/* Section s grown by n records (copies of its first record, or zeros when
 * it has none), the later sections and the trailer moved up, everything
 * re-sealed: M22's limits are on the record counts. */
static int grow_section(gimg *m, int s, uint32_t size, uint64_t n)
{
    uint64_t add = n * size, ioff = wpk_ld64(gimg_sb(m) + WPK_H_INDEX_OFFSET_OFF);
    uint64_t first = ioff + gimg_sec_off(m, s), len = gimg_sec_len(m, s), at = first + len;
    uint8_t *p = realloc(m->p, m->len + add);
    if (!p)
        return -1;
    m->p = p;
    memmove(p + at + add, p + at, m->len - at);
    for (uint64_t k = 0; k < n; k++) {
        if (len)
            memcpy(p + at + k * size, p + first, size);
        else
            memset(p + at + k * size, 0, size);
    }
    m->len += add;
    wpk_st64(gimg_sec_field(m, s) + 8, len + add);
    for (int t = s + 1; t < WPK_SECTION_COUNT; t++)
        wpk_st64(gimg_sec_field(m, t), gimg_sec_off(m, t) + add);
    uint8_t *sb = gimg_sb(m);
    wpk_st64(sb + WPK_H_INDEX_LENGTH_OFF, wpk_ld64(sb + WPK_H_INDEX_LENGTH_OFF) + add);
    wpk_st64(sb + WPK_H_FILE_LENGTH_OFF, wpk_ld64(sb + WPK_H_FILE_LENGTH_OFF) + add);
    gimg_mirror(m);
    gimg_seal_index(m);
    return 0;
}

/* 128 block dtype records are valid, 129 are LIMIT (limits are inclusive,
 * section 15); 2^20 + 1 metadata records are LIMIT before any is read.
 * (2^31 name-map or stats records would need an index of 48 GiB or more.) */
static void test_record_limits(void)
{
    static const struct {
        int sec;
        uint32_t size;
        uint64_t total;
        int want;
        const char *what;
    } cases[] = {
        {WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, WPK_MAX_BLOCK_DTYPES, WPACK_OK, "128 block dtypes"},
        {WPK_SEC_DTYPES, WPK_DTYPE_REC_SIZE, WPK_MAX_BLOCK_DTYPES + 1, WPACK_E_LIMIT,
         "129 block dtypes"},
        {WPK_SEC_METADATA, WPK_META_REC_SIZE, WPK_LIMIT_META + 1, WPACK_E_LIMIT,
         "2^20 + 1 metadata records"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg m = work_copy();
        uint64_t have = gimg_count(&m, cases[i].sec, cases[i].size);
        if (have > cases[i].total || grow_section(&m, cases[i].sec, cases[i].size,
                                                  cases[i].total - have) != 0)
            CHECK(0, "%s: could not set the case up", cases[i].what);
        else
            expect_open(cases[i].what, m.p, m.len, cases[i].want);
        free(m.p);
    }
}

/* ================================================================= tests */

static void test_base_valid(void)
{
    char msg[700];
    wpack_info in;
    int rc = open_exact(base, base_len, WPACK_OPEN_VERIFY, msg, sizeof msg, &in, NULL, NULL);
    CHECK(rc == WPACK_OK, "base archive: %s (%s)", ename(rc), msg);
    CHECK_EQ(in.alignment, GOLDEN_ALIGNMENT);
    CHECK_EQ(in.recovered, 0);
    CHECK(in.stats_count >= 4 && in.metadata_count >= 10 && in.namemap_count == 3,
          "base content: %llu stats, %llu metadata", (unsigned long long)in.stats_count,
          (unsigned long long)in.metadata_count);
    gimg m = {base, base_len};
    /* The surgery helpers find what the cases need. */
    CHECK(gimg_entry(&m, G_F32) && gimg_entry(&m, G_SPLAT) && gimg_entry(&m, G_ALIAS) &&
              gimg_entry(&m, G_EMPTY) && gimg_meta(&m, "array.str") &&
              gimg_stats(&m, G_F32, WS) && gimg_stats(&m, G_F64, AS) &&
              gimg_nmap(&m, "p_dense_f32"),
          "records missing from the base archive");
}

static void test_superblock(void) { RUN_CASES("superblock", superblock_cases); }

static void test_text_mode_message(void)
{
    gimg m = work_copy();
    c_text_mode_crlf(&m);
    char msg[700];
    int rc = open_exact(m.p, m.len, 0, msg, sizeof msg, NULL, NULL, NULL);
    CHECK(rc == WPACK_E_BAD_MAGIC && strstr(msg, "text-mode"), "%s: %s", ename(rc), msg);
    free(m.p);
}

static void check_minor_newer(wpack_archive *ar, void *ctx)
{
    (void)ctx;
    wpack_info in;
    wpack_get_info(ar, &in);
    CHECK_EQ(in.format_minor, NEWER_MINOR);
}

static void test_minor_reserved(void)
{
    gimg m = work_copy();
    c_minor_newer_reserved(&m);
    char msg[700];
    int rc = open_exact(m.p, m.len, 0, msg, sizeof msg, NULL, check_minor_newer, NULL);
    CHECK(rc == WPACK_OK, "%s: %s", ename(rc), msg);
    free(m.p);
}

static void test_trailer(void) { RUN_CASES("trailer", trailer_cases); }
static void test_index(void) { RUN_CASES("index", index_cases); }

static void test_entries(void) { RUN_CASES("entry", entry_cases); }

static void test_metadata(void) { RUN_CASES("metadata", meta_cases); }
static void test_namemap(void) { RUN_CASES("namemap", nmap_cases); }
static void test_stats(void) { RUN_CASES("stats", stats_cases); }
static void test_newer_minor(void) { RUN_CASES("newer minor", newer_minor_cases); }

/* ------------------------------------------------------------ truncation */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Every section/region/extent boundary (and one byte either side), plus every 8th byte. */
static void truncation_sweep(const char *label, const uint8_t *p, size_t len)
{
    gimg m = {(uint8_t *)p, len};
    size_t cap = len / 8 + 512, n = 0;
    uint64_t *cuts = malloc(cap * sizeof *cuts);
    if (!cuts)
        abort();
#define CUT(v)                                                                                \
    do {                                                                                      \
        uint64_t v_ = (v);                                                                    \
        for (int d_ = -1; d_ <= 1; d_++)                                                      \
            if (v_ + (uint64_t)(int64_t)d_ < len && n < cap)                                  \
                cuts[n++] = v_ + (uint64_t)(int64_t)d_;                                       \
    } while (0)
    for (uint64_t k = 0; k < len; k += 8)
        cuts[n++] = k;
    const uint8_t *s = gimg_sb(&m);
    CUT(WPK_HEADER_SIZE);
    CUT(wpk_ld64(s + WPK_H_DATA_OFFSET_OFF));
    CUT(g_data_end(&m));
    uint64_t ioff = wpk_ld64(s + WPK_H_INDEX_OFFSET_OFF);
    CUT(ioff);
    for (int sec = 0; sec < WPK_SECTION_COUNT; sec++) {
        CUT(ioff + gimg_sec_off(&m, sec));
        CUT(ioff + gimg_sec_off(&m, sec) + gimg_sec_len(&m, sec));
    }
    for (uint64_t i = 0; i < gimg_count(&m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE); i++) {
        const uint8_t *r = gimg_rec(&m, WPK_SEC_ENTRIES, WPK_ENTRY_SIZE, i);
        if (r[WPK_E_KIND_OFF] != WPACK_KIND_DATA)
            continue;
        CUT(wpk_ld64(r + WPK_E_DATA_OFFSET_OFF));
        CUT(wpk_ld64(r + WPK_E_DATA_OFFSET_OFF) + wpk_ld64(r + WPK_E_STORED_LEN_OFF));
    }
    CUT(len - WPK_HEADER_SIZE);
    CUT(len - 1);
#undef CUT
    qsort(cuts, n, sizeof *cuts, cmp_u64);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && cuts[i] == cuts[i - 1])
            continue;
        char msg[700];
        int rc = open_exact(p, (size_t)cuts[i], 0, msg, sizeof msg, NULL, NULL, NULL);
        ncases++;
        /* spec M1 / M13: shorter than 256 bytes, or than file_length: TRUNCATED. */
        int ok = rc == WPACK_E_TRUNCATED;
        if (!ok && bad++ < 10)
            CHECK(0, "%s cut at %llu of %zu: %s (%s), want WPACK_E_TRUNCATED", label,
                  (unsigned long long)cuts[i], len, ename(rc), msg);
        if (rc != WPACK_OK && !msg[0] && bad++ < 10)
            CHECK(0, "%s cut at %llu: empty message", label, (unsigned long long)cuts[i]);
    }
    CHECK(bad == 0, "%s: %d truncations misreported", label, bad);
    free(cuts);
}

static void test_truncation(void) { truncation_sweep("alignment 64", base, base_len); }

/* ------------------------------------------------------- appended bytes */

static void append(gimg *m, const uint8_t *p, size_t n)
{
    memcpy(m->p + m->len, p, n);
    m->len += n;
}

typedef struct {
    uint64_t generation;
    int recovered;
    int64_t steps;         /* train.steps seen */
} open_view;

static void view_of(wpack_archive *ar, void *ctx)
{
    open_view *v = ctx;
    wpack_info in;
    wpack_meta mt;
    wpack_get_info(ar, &in);
    v->generation = in.generation;
    v->recovered = in.recovered;
    v->steps = wpack_meta_find(ar, "train.steps", &mt) == WPACK_OK ? mt.i64 : 0;
}

static int open_view_of(const gimg *m, open_view *v, char *msg, size_t msglen)
{
    memset(v, 0, sizeof *v);
    ncases++;
    return open_exact(m->p, m->len, 0, msg, msglen, NULL, view_of, v);
}

static void test_appended_garbage(void)
{
    static const size_t sizes[] = {1, 7, 8, 64, 127, 128, 129, 255, 4096};
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 131 + 7);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int zero = 0; zero < 2; zero++) {
            gimg m = work_copy();
            uint8_t z[4096] = {0};
            append(&m, zero ? z : junk, sizes[k]);
            open_view v;
            char msg[700];
            int rc = open_view_of(&m, &v, msg, sizeof msg);
            CHECK(rc == WPACK_OK && v.recovered == 1 && v.generation == 1,
                  "%zu %s bytes appended: %s (%s), recovered %d", sizes[k], zero ? "zero" : "junk",
                  ename(rc), msg, v.recovered);
            free(m.p);
        }
    }
    /* A copy of the trailer appended: valid, but not the next generation. */
    gimg m = work_copy();
    append(&m, base + base_len - WPK_HEADER_SIZE, WPK_HEADER_SIZE);
    open_view v;
    char msg[700];
    int rc = open_view_of(&m, &v, msg, sizeof msg);
    CHECK(rc == WPACK_OK && v.recovered == 1 && v.generation == 1, "trailer appended twice: %s (%s)",
          ename(rc), msg);
    free(m.p);
    /* 4c: appended bytes and the old trailer damaged. */
    m = work_copy();
    gimg_tr(&m)[WPK_H_GENERATION_OFF] ^= 1;
    append(&m, junk, 200);
    rc = open_view_of(&m, &v, msg, sizeof msg);
    CHECK(rc == WPACK_E_TRAILER && msg[0], "garbage + damaged trailer: %s (%s)", ename(rc), msg);
    free(m.p);
}

enum {
    NG_OK,          /* a proper generation-2 update, superblock not rewritten (rule 4a) */
    NG_REWRITTEN,   /* ... and the superblock rewritten (rule 3, generation 2) */
    NG_GEN3,        /* trailer says generation 3: not the next one */
    NG_BADSUM,      /* trailer checksum wrong */
    NG_ALIGN,       /* trailer alignment differs */
    NG_FILELEN,     /* trailer file length != file size */
    NG_IXBEFORE,    /* trailer's index starts before the old file end */
    NG_BADINDEX,    /* new index corrupted after sealing */
    NG_DATALEN      /* trailer data length differs */
};

/* Append a generation-2 index (a copy of the old one with train.steps = 2) and trailer. */
static void make_next_generation(gimg *m, int variant)
{
    uint64_t old_len = m->len, ioff = wpk_ld64(m->p + WPK_H_INDEX_OFFSET_OFF);
    uint64_t ilen = gimg_ixlen(m);
    uint64_t new_ioff = align8(old_len);
    memset(m->p + old_len, 0, new_ioff - old_len);
    memcpy(m->p + new_ioff, m->p + ioff, ilen);
    /* Change a metadata value in the new copy so the test can tell which index is used. */
    uint8_t *rec = gimg_meta(m, "train.steps");
    wpk_st64(m->p + new_ioff + (uint64_t)(rec - (m->p + ioff)) + WPK_M_VALUE_OFF, 2);
    uint64_t sum = XXH3_64bits(m->p + new_ioff, (size_t)ilen);
    uint8_t *t = m->p + new_ioff + ilen;
    memcpy(t, gimg_tr(m), WPK_HEADER_SIZE);
    uint64_t new_len = new_ioff + ilen + WPK_HEADER_SIZE;
    wpk_st64(t + WPK_H_GENERATION_OFF, variant == NG_GEN3 ? 3 : 2);
    wpk_st64(t + WPK_H_INDEX_OFFSET_OFF, new_ioff);
    wpk_st64(t + WPK_H_INDEX_CHECKSUM_OFF, sum);
    wpk_st64(t + WPK_H_FILE_LENGTH_OFF, variant == NG_FILELEN ? new_len + 8 : new_len);
    if (variant == NG_ALIGN)
        wpk_st32(t + WPK_H_ALIGNMENT_OFF, 128);
    if (variant == NG_DATALEN)
        wpk_st64(t + WPK_H_DATA_LENGTH_OFF, wpk_ld64(t + WPK_H_DATA_LENGTH_OFF) - 1);
    if (variant == NG_IXBEFORE) {
        /* The index spans the old index, the old trailer and the new index. */
        wpk_st64(t + WPK_H_INDEX_OFFSET_OFF, ioff);
        wpk_st64(t + WPK_H_INDEX_LENGTH_OFF, new_ioff + ilen - ioff);
        wpk_st64(t + WPK_H_INDEX_CHECKSUM_OFF, XXH3_64bits(m->p + ioff, (size_t)(new_ioff + ilen - ioff)));
    }
    wpk_st64(t + WPK_H_CHECKSUM_OFF, XXH3_64bits(t, WPK_H_CHECKSUM_OFF));
    if (variant == NG_BADSUM)
        t[WPK_H_CHECKSUM_OFF] ^= 1;
    if (variant == NG_BADINDEX)
        m->p[new_ioff + 300] ^= 1;
    m->len = (size_t)new_len;
    if (variant == NG_REWRITTEN) {
        memcpy(m->p + 8, t + 8, WPK_H_CHECKSUM_OFF - 8);
        wpk_st64(m->p + WPK_H_CHECKSUM_OFF, XXH3_64bits(m->p, WPK_H_CHECKSUM_OFF));
    }
}

static void test_next_generation(void)
{
    static const struct {
        int variant;
        int code;
        uint64_t generation;
        int recovered;
        int64_t steps;
        const char *what;
    } cases[] = {
        {NG_OK, WPACK_OK, 2, 0, 2, "generation-2 trailer after the old archive (rule 4a)"},
        {NG_REWRITTEN, WPACK_OK, 2, 0, 2, "generation 2 with the superblock rewritten (rule 3)"},
        {NG_GEN3, WPACK_OK, 1, 1, -1234567890123ll, "trailer generation 3: old archive (4b)"},
        {NG_BADSUM, WPACK_OK, 1, 1, -1234567890123ll, "trailer checksum wrong: old archive (4b)"},
        {NG_ALIGN, WPACK_OK, 1, 1, -1234567890123ll, "trailer alignment differs: old archive (4b)"},
        {NG_DATALEN, WPACK_OK, 1, 1, -1234567890123ll, "trailer data length differs: old archive (4b)"},
        {NG_FILELEN, WPACK_OK, 1, 1, -1234567890123ll, "trailer file length wrong: old archive (4b)"},
        {NG_IXBEFORE, WPACK_OK, 1, 1, -1234567890123ll,
         "trailer index before the old file end: old archive (4b)"},
        /* spec 13.1 step 4.1 (and section 20 point 15): a generation whose index does
         * not hash to its checksum is a torn append, so the old archive is used. */
        {NG_BADINDEX, WPACK_OK, 1, 1, -1234567890123ll, "generation-2 index torn: old archive (4b)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg m = work_copy();
        make_next_generation(&m, cases[i].variant);
        open_view v;
        char msg[700];
        int rc = open_view_of(&m, &v, msg, sizeof msg);
        CHECK(rc == cases[i].code, "%s: %s (%s), want %s", cases[i].what, ename(rc), msg,
              ename(cases[i].code));
        if (rc == WPACK_OK && cases[i].code == WPACK_OK)
            CHECK(v.generation == cases[i].generation && v.recovered == cases[i].recovered &&
                      v.steps == cases[i].steps,
                  "%s: generation %llu recovered %d train.steps %lld", cases[i].what,
                  (unsigned long long)v.generation, v.recovered, (long long)v.steps);
        if (cases[i].variant == NG_OK) {
            /* Garbage after a complete generation-2 update: the trailer is not last, so
             * 4a cannot apply, and the old trailer still gives generation 1 (4b). */
            uint8_t junk[24] = {1, 2, 3};
            append(&m, junk, sizeof junk);
            rc = open_view_of(&m, &v, msg, sizeof msg);
            CHECK(rc == WPACK_OK && v.generation == 1 && v.recovered == 1,
                  "generation 2 + junk: %s (%s) generation %llu", ename(rc), msg,
                  (unsigned long long)v.generation);
        }
        if (cases[i].variant == NG_REWRITTEN) {
            /* Truncated back to the old length: superblock says more -> TRUNCATED. */
            expect_open("generation 2 cut back to generation 1's length", m.p, base_len,
                        WPACK_E_TRUNCATED);
        }
        free(m.p);
    }
}

/* -------------------------------------------------------- flipped bytes */

static void test_index_flips(void)
{
    gimg m = work_copy();
    uint64_t ioff = wpk_ld64(m.p + WPK_H_INDEX_OFFSET_OFF), ilen = gimg_ixlen(&m);
    int bad = 0;
    for (uint64_t k = 0; k < ilen; k++) {
        m.p[ioff + k] ^= 1;
        char msg[700];
        int rc = open_exact(m.p, m.len, 0, msg, sizeof msg, NULL, NULL, NULL);
        ncases++;
        if (rc != WPACK_E_INDEX_CHECKSUM && bad++ < 10)
            CHECK(0, "index byte %llu flipped: %s (%s)", (unsigned long long)k, ename(rc), msg);
        m.p[ioff + k] ^= 1;
    }
    CHECK(bad == 0, "%d of %llu index flips misreported", bad, (unsigned long long)ilen);
    free(m.p);
}

typedef struct {
    int calls;
    uint64_t entry;
    int code;
} verify_log;

static void on_bad(void *user, uint64_t entry, int code, const char *message)
{
    verify_log *l = user;
    if (l->calls++ == 0) {
        l->entry = entry;
        l->code = code;
    }
    CHECK(message && message[0], "verify callback without a message");
}

typedef struct {
    uint64_t pos;
    int bad;
} flip_ctx;

static void check_flip(wpack_archive *ar, void *ctx)
{
    flip_ctx *f = ctx;
    /* Which data entry holds the byte (aliases share their target's bytes and are skipped). */
    uint64_t want_entry = UINT64_MAX;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        if (t.kind == WPACK_KIND_DATA && f->pos >= t.offset && f->pos < t.offset + t.stored_length)
            want_entry = i;
    }
    verify_log l = {0, 0, 0};
    int rc = wpack_verify_all(ar, on_bad, &l);
    int want = want_entry == UINT64_MAX ? WPACK_E_PADDING : WPACK_E_CHECKSUM;
    int ok = rc == want && l.calls == 1 && l.code == want &&
             (want == WPACK_E_PADDING || l.entry == want_entry);
    if (want == WPACK_E_CHECKSUM && ok)
        ok = wpack_verify_entry(ar, want_entry) == WPACK_E_CHECKSUM;
    if (!ok && f->bad++ < 10)
        CHECK(0, "data byte %llu flipped: verify %s, %d reports, first entry %llu code %s; "
                 "want %s for entry %llu",
              (unsigned long long)f->pos, ename(rc), l.calls, (unsigned long long)l.entry,
              ename(l.code), ename(want), (unsigned long long)want_entry);
}

static void test_data_flips(void)
{
    gimg m = work_copy();
    uint64_t start = wpk_ld64(m.p + WPK_H_DATA_OFFSET_OFF), end = g_data_end(&m);
    flip_ctx f = {0, 0};
    int n = 0;
    for (uint64_t pos = start; pos < end; pos += 97, n++) {
        m.p[pos] ^= 1;
        f.pos = pos;
        char msg[700];
        /* Without verify on read, so that the walk reads the damaged entry too
         * (test_verify_reads covers the default, which refuses it). */
        int rc = open_exact(m.p, m.len, WPACK_OPEN_NO_VERIFY_READS, msg, sizeof msg, NULL,
                            check_flip, &f);
        ncases++;
        CHECK(rc == WPACK_OK, "data byte %llu flipped: open %s (%s)", (unsigned long long)pos,
              ename(rc), msg);
        /* WPACK_OPEN_VERIFY turns the same damage into an open failure. */
        rc = open_exact(m.p, m.len, WPACK_OPEN_VERIFY, msg, sizeof msg, NULL, NULL, NULL);
        CHECK(rc == WPACK_E_CHECKSUM || rc == WPACK_E_PADDING,
              "data byte %llu flipped, open with verify: %s", (unsigned long long)pos, ename(rc));
        m.p[pos] ^= 1;
    }
    CHECK(n > 5, "only %d data flips", n);
    CHECK(f.bad == 0, "%d data flips misreported", f.bad);
    free(m.p);
}

/* The 7 bytes between the last extent and the index are checked at open. */
static void test_index_padding(void)
{
    gimg m = work_copy();
    uint64_t end = g_data_end(&m), ioff = wpk_ld64(m.p + WPK_H_INDEX_OFFSET_OFF);
    CHECK(ioff > end, "the base archive has no padding before its index");
    if (ioff > end) {
        m.p[ioff - 1] = 1;
        expect_open("non-zero padding before the index", m.p, m.len, WPACK_E_PADDING);
    }
    free(m.p);
}

/* ----------------------------------------- a 4096-aligned archive */

static uint8_t *big;
static size_t big_len;

static int make_aligned_archive(const char *dir)
{
    char path[512], err[700];
    snprintf(path, sizeof path, "%s/a4096.wpack", dir);
    wpack_writer *w;
    int rc = wpack_writer_open(&w, path, NULL); /* defaults: alignment 4096, weight stats */
    uint64_t d[1] = {100};
    uint8_t b[400];
    for (int i = 0; i < 400; i++)
        b[i] = (uint8_t)(i + 1);
    if (rc == WPACK_OK)
        rc = wpack_writer_add_tensor(w, "a", WPACK_DTYPE_U32, 1, d, b, sizeof b);
    if (rc == WPACK_OK)
        rc = wpack_writer_add_tensor(w, "b", WPACK_DTYPE_U8, 1, d, b, 100);
    if (rc) {
        printf("  aligned archive: %s\n", wpack_writer_errmsg(w));
        wpack_writer_abort(w);
        return rc;
    }
    rc = wpack_writer_finish(w, err, sizeof err);
    if (rc) {
        printf("  aligned archive: %s\n", err);
        return rc;
    }
    big = test_slurp(path, &big_len);
    unlink(path);
    return big ? WPACK_OK : WPACK_E_IO;
}

static void test_aligned_padding(void)
{
    CHECK(big != NULL, "no 4096-aligned archive");
    if (!big)
        return;
    gimg m = {malloc(big_len), big_len};
    memcpy(m.p, big, big_len);
    expect_open("4096-aligned archive", m.p, m.len, WPACK_OK);
    m.p[1000] = 1; /* between the superblock and data_offset 4096 */
    expect_open("non-zero padding after the superblock", m.p, m.len, WPACK_E_PADDING);
    m.p[1000] = 0;
    /* Between tensor a (400 bytes at 4096) and b (at 8192): only verify reads it. */
    m.p[4096 + 400 + 5] = 1;
    char msg[700];
    flip_ctx f = {4096 + 400 + 5, 0};
    int rc = open_exact(m.p, m.len, 0, msg, sizeof msg, NULL, check_flip, &f);
    CHECK(rc == WPACK_OK && f.bad == 0, "padding between extents: open %s (%s)", ename(rc), msg);
    free(m.p);
}

/* Truncations that leave less than data_offset (4096) bytes must not read the
 * missing padding: open step 2 (L < file_length -> TRUNCATED) comes first. */
static void test_aligned_truncation(void)
{
    if (big)
        truncation_sweep("alignment 4096", big, big_len);
}

/* --------------------------------------------------------------- main */

int main(void)
{
    verbose = getenv("WPACK_TEST_VERBOSE") && getenv("WPACK_TEST_VERBOSE")[0] == '1';
    char dir[] = "/tmp/wpack-malformed-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[512], err[700];
    snprintf(path, sizeof path, "%s/base.wpack", dir);
    int rc = golden_write(path, err, sizeof err);
    if (rc) {
        printf("FAIL writing the base archive: %s: %s\n", wpack_error_name(rc), err);
        return 1;
    }
    base = test_slurp(path, &base_len);
    unlink(path);
    make_aligned_archive(dir);
    rmdir(dir);
    if (!base) {
        printf("FAIL reading the base archive\n");
        return 1;
    }

    RUN(test_base_valid);
    RUN(test_superblock);
    RUN(test_text_mode_message);
    RUN(test_minor_reserved);
    RUN(test_trailer);
    RUN(test_index);
    RUN(test_entries);
    RUN(test_metadata);
    RUN(test_namemap);
    RUN(test_stats);
    RUN(test_newer_minor);
    RUN(test_record_limits);
    RUN(test_truncation);
    RUN(test_appended_garbage);
    RUN(test_next_generation);
    RUN(test_index_flips);
    RUN(test_data_flips);
    RUN(test_index_padding);
    RUN(test_aligned_padding);
    /* Last: a reader that reads the missing padding dies here under ASan. */
    RUN(test_aligned_truncation);
    printf("# %d malformed archives opened\n", ncases);
    free(base);
    free(big);
    return tl_finish();
}
