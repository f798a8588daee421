/* test_torch.c - torch_scan_buffer on checkpoints built here byte by byte (a
 * stored zip around a hand-written data.pkl), the zip reader's refusals,
 * views streamed in C order, byte order, aliases, --key, and every
 * truncation of a good file failing cleanly. Also the bf16/f16 casts. */
#include <dlfcn.h>
#include <libdeflate.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "bytes.h"
#include "import.h"
#include "internal.h"
#include "testlib.h"
#include "torch_scan.h"
#include "zipread.h"
#include "wpack_import.h"

/* libdeflate's CRC-32 (wpk_crc32's), defined here to count the times
 * data.pkl is checked: once per scan of a checkpoint. It forwards to
 * libdeflate's through dlsym(RTLD_NEXT) (main calls libdeflate_adler32 so
 * that the library stays linked). */
static const void *count_of;   /* bytes to count (NULL: none) */
static size_t count_len;
static int counted;

uint32_t libdeflate_crc32(uint32_t crc, const void *p, size_t n)
{
    static uint32_t (*real)(uint32_t, const void *, size_t);
    if (!real)
        real = (uint32_t(*)(uint32_t, const void *, size_t))dlsym(RTLD_NEXT, "libdeflate_crc32");
    if (!real)
        abort(); /* no libdeflate to forward to: the test cannot run */
    if (count_of && n == count_len && memcmp(p, count_of, n) == 0)
        counted++;
    return real(crc, p, n);
}

typedef struct {
    const char *name;
    const void *data;
    size_t len;
} member;

/* A stored zip of the members; returns its length. */
static size_t build_zip(uint8_t *out, const member *m, size_t n)
{
    size_t p = 0, offs[16];
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(m[i].name);
        offs[i] = p;
        memset(out + p, 0, 30);
        wpk_st32(out + p, 0x04034b50);
        wpk_st16(out + p + 4, 20);
        wpk_st32(out + p + 14, wpk_crc32(0, m[i].data, m[i].len));
        wpk_st32(out + p + 18, (uint32_t)m[i].len);
        wpk_st32(out + p + 22, (uint32_t)m[i].len);
        wpk_st16(out + p + 26, (uint16_t)nl);
        memcpy(out + p + 30, m[i].name, nl);
        memcpy(out + p + 30 + nl, m[i].data, m[i].len);
        p += 30 + nl + m[i].len;
    }
    size_t cd = p;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(m[i].name);
        memset(out + p, 0, 46);
        wpk_st32(out + p, 0x02014b50);
        wpk_st16(out + p + 4, 20);
        wpk_st16(out + p + 6, 20);
        wpk_st32(out + p + 16, wpk_crc32(0, m[i].data, m[i].len));
        wpk_st32(out + p + 20, (uint32_t)m[i].len);
        wpk_st32(out + p + 24, (uint32_t)m[i].len);
        wpk_st16(out + p + 28, (uint16_t)nl);
        wpk_st32(out + p + 42, (uint32_t)offs[i]);
        memcpy(out + p + 46, m[i].name, nl);
        p += 46 + nl;
    }
    memset(out + p, 0, 22);
    wpk_st32(out + p, 0x06054b50);
    wpk_st16(out + p + 8, (uint16_t)n);
    wpk_st16(out + p + 10, (uint16_t)n);
    wpk_st32(out + p + 12, (uint32_t)(p - cd));
    wpk_st32(out + p + 16, (uint32_t)cd);
    return p + 22;
}

/* {'w': t (2x3 f32 over storage 0), 'wt': t.t(), 'w2': same view as w, 'n': 7}
 * wrapped as {'model': ..., 'epoch': 3} */
#define STORAGE "(X\x07\x00\x00\x00storage" "ctorch\nFloatStorage\n" "X\x01\x00\x00\x00" "0" \
                "X\x03\x00\x00\x00" "cpu" "K\x06tQ"
#define HOOKS "\x89" "ccollections\nOrderedDict\n)R"
static const char pkl[] =
    "\x80\x02}(X\x05\x00\x00\x00model}("
    "X\x01\x00\x00\x00w" "ctorch._utils\n_rebuild_tensor_v2\n(" STORAGE "q\x00"
    "K\x00K\x02K\x03\x86K\x03K\x01\x86" HOOKS "tR"
    "X\x02\x00\x00\x00wt" "ctorch._utils\n_rebuild_tensor_v2\n(h\x00"
    "K\x00K\x03K\x02\x86K\x01K\x03\x86" HOOKS "tR"
    "X\x02\x00\x00\x00w2" "ctorch._utils\n_rebuild_tensor_v2\n(h\x00"
    "K\x00K\x02K\x03\x86K\x03K\x01\x86" HOOKS "tR"
    "X\x01\x00\x00\x00nK\x07u"
    "X\x05\x00\x00\x00" "epochK\x03u.";

static const float vals[6] = {0, 1, 2, 3, 4, 5};

typedef struct {
    int tensors, aliases, ints;
    float wt[6];
    char alias_target[32];
} seen;

static int collect(void *user, const void *data, size_t n)
{
    seen *s = user;
    memcpy(s->wt, data, n < sizeof s->wt ? n : sizeof s->wt);
    return WPACK_OK;
}

static int visit(void *user, const torch_item *it)
{
    seen *s = user;
    uint8_t buf[64];
    if (it->kind == TORCH_TENSOR) {
        s->tensors++;
        if (strcmp(it->name, "model.wt") == 0 || strcmp(it->name, "wt") == 0)
            torch_stream_tensor(it, buf, sizeof buf, collect, s);
    } else if (it->kind == TORCH_ALIAS) {
        s->aliases++;
        snprintf(s->alias_target, sizeof s->alias_target, "%s", it->target);
    } else if (it->kind == TORCH_INT) {
        s->ints++;
    }
    return WPACK_OK;
}

static uint8_t zipbuf[1 << 14];

static size_t good_zip(const char *byteorder, const void *data)
{
    member m[4] = {{"archive/data.pkl", pkl, sizeof pkl - 1},
                   {"archive/data/0", data, sizeof vals},
                   {"archive/version", "3\n", 2},
                   {"archive/byteorder", byteorder, byteorder ? strlen(byteorder) : 0}};
    return build_zip(zipbuf, m, byteorder ? 4 : 3);
}

static void test_scan_views_aliases_scalars(void)
{
    size_t n = good_zip(NULL, vals);
    seen s = {0};
    char err[512];
    int rc = torch_scan_buffer(zipbuf, n, NULL, visit, &s, err, sizeof err);
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK_EQ(s.tensors, 2);
    CHECK_EQ(s.aliases, 1);
    CHECK(strcmp(s.alias_target, "model.w") == 0, "alias of '%s'", s.alias_target);
    CHECK_EQ(s.ints, 2);
    static const float want[6] = {0, 3, 1, 4, 2, 5}; /* the transpose, in C order */
    CHECK(memcmp(s.wt, want, sizeof want) == 0, "transposed view streamed wrong");
}

static void test_key_and_byteorder(void)
{
    float be[6];
    for (int i = 0; i < 6; i++) {
        uint32_t u;
        memcpy(&u, &vals[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&be[i], &u, 4);
    }
    size_t n = good_zip("big", be);
    seen s = {0};
    char err[512];
    int rc = torch_scan_buffer(zipbuf, n, "model", visit, &s, err, sizeof err);
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK_EQ(s.ints, 1); /* 'epoch' is outside the key */
    static const float want[6] = {0, 3, 1, 4, 2, 5};
    CHECK(memcmp(s.wt, want, sizeof want) == 0, "big-endian storage not swapped");
    rc = torch_scan_buffer(zipbuf, n, "nope", visit, &s, err, sizeof err);
    CHECK_EQ(rc, WPACK_E_NOT_FOUND);
    CHECK(strstr(err, "'model'") != NULL, "%s", err);
}

static int never(void *user, const torch_item *it)
{
    (void)user;
    (void)it;
    return WPACK_E_STATE;
}

static void test_every_truncation_fails_before_visiting(void)
{
    size_t n = good_zip(NULL, vals);
    static uint8_t copy[sizeof zipbuf];
    char err[512];
    for (size_t k = 0; k < n; k++) {
        memcpy(copy, zipbuf, k);
        int rc = torch_scan_buffer(copy, k, NULL, never, NULL, err, sizeof err);
        CHECK(rc != WPACK_OK && rc != WPACK_E_STATE && err[0], "length %zu: rc %d", k, rc);
    }
}

static void test_damaged_pickle_crc(void)
{
    size_t n = good_zip(NULL, vals);
    zipbuf[30 + 16 + 5] ^= 1; /* a byte inside data.pkl */
    char err[512];
    int rc = torch_scan_buffer(zipbuf, n, NULL, never, NULL, err, sizeof err);
    CHECK_EQ(rc, WPACK_E_CHECKSUM);
}

static void test_zip_names_refused(void)
{
    static const char *bad[] = {"../x", "a/../../x", "/abs", "a\\b", "c:/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        member m[1] = {{bad[i], "x", 1}};
        size_t n = build_zip(zipbuf, m, 1);
        wpk_zip z;
        char err[300];
        CHECK(wpk_zip_open(&z, zipbuf, n, err, sizeof err) == WPACK_E_INPUT, "%s accepted", bad[i]);
    }
    member dup[2] = {{"a", "x", 1}, {"a", "y", 1}};
    wpk_zip z;
    char err[300];
    size_t n = build_zip(zipbuf, dup, 2);
    CHECK(wpk_zip_open(&z, zipbuf, n, err, sizeof err) == WPACK_E_INPUT && strstr(err, "twice"),
          "duplicate names: %s", err);
}

/* n empty stored entries "%04x" with an end record saying count (and, with
 * zip64, a zip64 end record and locator before it, holding the real count);
 * returns the length of the malloc'ed zip in *out. */
static size_t many_entries_zip(uint8_t **out, size_t n, uint16_t count, int zip64)
{
    size_t cap = n * (30 + 4 + 46 + 4) + 56 + 20 + 22, p = 0;
    uint8_t *z = calloc(1, cap);
    if (!z)
        abort();
    for (size_t i = 0; i < n; i++, p += 34) {
        wpk_st32(z + p, 0x04034b50);
        wpk_st16(z + p + 26, 4);
        for (int d = 0; d < 4; d++) /* i in 4 hex digits (entries past 65,535 repeat names) */
            z[p + 30 + (size_t)d] = (uint8_t)"0123456789abcdef"[(i >> (12 - 4 * d)) & 15];
    }
    size_t cd = p;
    for (size_t i = 0; i < n; i++, p += 50) {
        wpk_st32(z + p, 0x02014b50);
        wpk_st16(z + p + 28, 4);
        wpk_st32(z + p + 42, (uint32_t)(i * 34));
        memcpy(z + p + 46, z + i * 34 + 30, 4);
    }
    size_t cd_size = p - cd;
    if (zip64) {
        size_t e64 = p;
        wpk_st32(z + p, 0x06064b50);
        wpk_st64(z + p + 4, 44);
        wpk_st64(z + p + 24, n);
        wpk_st64(z + p + 32, n);
        wpk_st64(z + p + 40, cd_size);
        wpk_st64(z + p + 48, cd);
        p += 56;
        wpk_st32(z + p, 0x07064b50);
        wpk_st64(z + p + 8, e64);
        wpk_st32(z + p + 16, 1);
        p += 20;
    }
    wpk_st32(z + p, 0x06054b50);
    wpk_st16(z + p + 8, count);
    wpk_st16(z + p + 10, count);
    wpk_st32(z + p + 12, (uint32_t)cd_size);
    wpk_st32(z + p + 16, (uint32_t)cd);
    *out = z;
    return p + 22;
}

/* 65,535 entries: Python's zipfile (numpy.savez) writes the count as 0xffff
 * with no zip64 record (it adds one only past 65,535) and reads that back;
 * the reader took 0xffff for "see zip64" and refused the file. */
static void test_zip_65535_entries(void)
{
    uint8_t *z;
    char err[300];
    wpk_zip zip;
    size_t n = many_entries_zip(&z, 65535, 0xffff, 0);
    CHECK(wpk_zip_open(&zip, z, n, err, sizeof err) == WPACK_OK, "65535 entries: %s", err);
    CHECK(zip.n == 65535 && wpk_zip_find(&zip, "fffe", 4), "%zu entries", zip.n);
    wpk_zip_close(&zip);
    free(z);
    n = many_entries_zip(&z, 65536, 0xffff, 1); /* past it, the zip64 record counts */
    CHECK(wpk_zip_open(&zip, z, n, err, sizeof err) == WPACK_OK, "65536 entries: %s", err);
    CHECK(zip.n == 65536 && wpk_zip_find(&zip, "ffff", 4), "%zu entries", zip.n);
    wpk_zip_close(&zip);
    free(z);
    /* no record, and a count that wrapped: entry 65536 was left out, silently */
    n = many_entries_zip(&z, 65536, 0xffff, 0);
    CHECK(wpk_zip_open(&zip, z, n, err, sizeof err) == WPACK_E_INPUT &&
              strstr(err, "holds 50 bytes after its 65535 entries"),
          "65536 entries counted 65535: %s", err);
    free(z);
    n = many_entries_zip(&z, 65537, 1, 0);
    CHECK(wpk_zip_open(&zip, z, n, err, sizeof err) == WPACK_E_INPUT &&
              strstr(err, "after its 1 entries"),
          "count 1 of 65537: %s", err);
    free(z);
}

static void test_legacy_detected(void)
{
    static const uint8_t legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                     0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
    char err[512];
    int rc = torch_scan_buffer(legacy, sizeof legacy, NULL, never, NULL, err, sizeof err);
    CHECK_EQ(rc, WPACK_E_UNSUPPORTED);
    CHECK(strstr(err, "_use_new_zipfile_serialization=True") != NULL, "%s", err);
}

/* ---- casts: the generic RNE rounding agrees with the bf16 bit trick, and edges */

static void test_cast_edges(void)
{
    CHECK_EQ(wpk_to_f16(1.0), 0x3c00);
    CHECK_EQ(wpk_to_f16(65504.0), 0x7bff);
    CHECK_EQ(wpk_to_f16(65519.99), 0x7bff);
    CHECK_EQ(wpk_to_f16(65520.0), 0x7c00);         /* ties away to inf (even) */
    CHECK_EQ(wpk_to_f16(ldexp(1, -24)), 0x0001);   /* least subnormal */
    CHECK_EQ(wpk_to_f16(ldexp(1, -25)), 0x0000);   /* tie to even: 0 */
    CHECK_EQ(wpk_to_f16(ldexp(3, -25)), 0x0002);   /* 1.5 ulp: tie to even 2 */
    CHECK_EQ(wpk_to_f16(ldexp(1023, -24) + ldexp(1, -25)), 0x0400); /* rounds up to normal */
    CHECK_EQ(wpk_to_f16(-0.0), 0x8000);
    CHECK_EQ(wpk_to_f16(1.0 + ldexp(1, -11)), 0x3c00); /* tie: even */
    CHECK_EQ(wpk_to_f16(1.0 + ldexp(3, -11)), 0x3c02);
    CHECK_EQ(wpk_to_f16(INFINITY), 0x7c00);
    CHECK((wpk_to_f16(NAN) & 0x7fff) > 0x7c00, "NaN stays NaN");
    CHECK_EQ(wpk_to_bf16(1.0 + ldexp(1, -8)), 0x3f80);
    CHECK_EQ(wpk_to_bf16(1.0 + ldexp(3, -8)), 0x3f82);
    CHECK_EQ(wpk_to_bf16(3.4028234663852886e38), 0x7f80);
    CHECK_EQ(wpk_to_bf16(ldexp(1, -133)), 0x0001);
}

static void test_cast_generic_equals_bit_trick(void)
{
    uint32_t x = 12345;
    int bad = 0;
    for (int i = 0; i < 2000000 && bad < 5; i++) {
        x = x * 1664525u + 1013904223u;
        uint32_t u = x;
        if (((u >> 23) & 0xff) == 0xff)
            continue; /* NaN/inf handled separately */
        float f;
        memcpy(&f, &u, 4);
        uint8_t b[4];
        wpk_st32(b, u);
        uint16_t trick;
        wpk_cast_block(WPACK_DTYPE_F32, b, WPACK_DTYPE_BF16, &trick, 1);
        if (trick != wpk_to_bf16(f)) {
            bad++;
            printf("  %08x: trick %04x generic %04x\n", u, trick, wpk_to_bf16(f));
        }
    }
    CHECK_EQ(bad, 0);
}

/* torch_scan_buffer_pre: pre sees the plan and every item before fn sees
 * any; a failing pre stops the scan before fn. */
static int order_n;
static int pre_visit(void *user, const torch_item *it)
{
    (void)it;
    int *fail_at = user;
    order_n++;
    return *fail_at && order_n == *fail_at ? WPACK_E_STATS : WPACK_OK;
}

static int main_visit(void *user, const torch_item *it)
{
    (void)it;
    int *first = user;
    if (!*first)
        *first = order_n;
    return WPACK_OK;
}

static void test_pre_visits_first(void)
{
    size_t n = good_zip(NULL, vals);
    char err[512];
    int fail_at = 0, first = 0;
    order_n = 0;
    int rc = torch_scan_buffer_pre(zipbuf, n, NULL, pre_visit, &fail_at, main_visit, &first,
                                   NULL, NULL, err, sizeof err);
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK_EQ(order_n, 6); /* the plan, model.w, .wt, .w2 (an alias), .n, epoch */
    CHECK_EQ(first, order_n);
    fail_at = 2;
    first = 0;
    order_n = 0;
    rc = torch_scan_buffer_pre(zipbuf, n, NULL, pre_visit, &fail_at, main_visit, &first, NULL,
                               NULL, err, sizeof err);
    CHECK_EQ(rc, WPACK_E_STATS);
    CHECK_EQ(first, 0);
}

/* wpack_import_file of a checkpoint unpickles it once: data.pkl's CRC-32
 * (checked just before) is computed once, not once for the observers and
 * again for the tensors. */
static void test_import_scans_once(void)
{
    size_t n = good_zip(NULL, vals);
    char dir[] = "/tmp/wpack-torch-XXXXXX", pt[64], out[64], err[512] = "";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(pt, sizeof pt, "%s/m.pt", dir);
    snprintf(out, sizeof out, "%s/m.wpack", dir);
    FILE *f = fopen(pt, "wb");
    CHECK(f && fwrite(zipbuf, 1, n, f) == n, "write %s", pt);
    if (f)
        fclose(f);
    wpack_writer_options wo;
    wpack_writer_options_init(&wo);
    wo.no_sync = 1;
    wpack_writer *w = NULL;
    CHECK_EQ(wpack_writer_open(&w, out, &wo), WPACK_OK);
    wpack_import_options o;
    wpack_import_options_init(&o);
    o.err = err;
    o.err_size = sizeof err;
    count_of = pkl;
    count_len = sizeof pkl - 1;
    counted = 0;
    int rc = w ? wpack_import_file(w, pt, &o) : WPACK_E_IO;
    count_of = NULL;
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK_EQ(counted, 1);
    if (w)
        wpack_writer_abort(w);
    unlink(pt);
    rmdir(dir);
}

int main(void)
{
    (void)libdeflate_adler32(1, "", 0);
    RUN(test_scan_views_aliases_scalars);
    RUN(test_key_and_byteorder);
    RUN(test_every_truncation_fails_before_visiting);
    RUN(test_damaged_pickle_crc);
    RUN(test_zip_names_refused);
    RUN(test_zip_65535_entries);
    RUN(test_legacy_detected);
    RUN(test_cast_edges);
    RUN(test_cast_generic_equals_bit_trick);
    RUN(test_pre_visits_first);
    RUN(test_import_scans_once);
    return tl_finish();
}
