/*
 * test_npy.c - the .npy header parser and formatter, and npy_pack_file.
 *
 * Builds:
 *   parse/format only:
 *     gcc -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Iformat -Ipacker -Iimport \
 *         tests/unit/test_npy.c import/npy.c format/fmt.c format/text_escape.c \
 *         format/names.c -o /tmp/test_npy
 *   + npy_pack_file against a recording mock writer defined below:
 *     ... -DNPY_TEST_MOCK_WRITER tests/unit/test_npy.c import/npy.c import/npy_pack.c \
 *         format/fmt.c format/text_escape.c format/names.c format/errors.c
 *   + npy_pack_file against the real writer and reader (link libwpack):
 *     ... -DWPACK_HAVE_WRITER tests/unit/test_npy.c import/npy.c import/npy_pack.c <libwpack>
 *
 * The numpy cross-checks run when /usr/bin/python3 can import numpy and
 * are skipped (reported as passing, with a note) otherwise.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bytes.h"
#include "npy.h"
#include "../testlib.h"

#if defined(NPY_TEST_MOCK_WRITER) || defined(WPACK_HAVE_WRITER)
#define TEST_PACK 1
#endif

/* ---------------------------------------------------------------- helpers */

static uint8_t img[1 << 16];

/* A .npy image in img: preamble for major, dict, space padding and '\n' up
 * to a multiple of 64, then dlen bytes of data. Returns the total length. */
static size_t mk(int major, const char *dict, const void *data, size_t dlen)
{
    size_t pre = major == 1 ? 10 : 12, n = strlen(dict);
    size_t hdr = (pre + n + 1 + 63) / 64 * 64;
    if (hdr + dlen > sizeof img) {
        printf("  mk: image too big\n");
        return 0;
    }
    memcpy(img, "\x93NUMPY", 6);
    img[6] = (uint8_t)major;
    img[7] = 0;
    if (major == 1)
        wpk_st16(img + 8, (uint16_t)(hdr - pre));
    else
        wpk_st32(img + 8, (uint32_t)(hdr - pre));
    memcpy(img + pre, dict, n);
    memset(img + pre + n, ' ', hdr - pre - n - 1);
    img[hdr - 1] = '\n';
    if (dlen)
        memcpy(img + hdr, data, dlen);
    return hdr + dlen;
}

/* Parse a copy of exactly len bytes, so a sanitizer sees any overread. */
static int parse(const void *p, size_t len, npy_header *h, char *err, size_t errlen)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    if (len)
        memcpy(copy, p, len);
    int rc = npy_parse_header(copy, len, h, err, errlen);
    free(copy);
    return rc;
}

static int parse_dict(int major, const char *dict, npy_header *h, char *err, size_t errlen)
{
    size_t n = mk(major, dict, NULL, 0);
    return parse(img, n, h, err, errlen);
}

/* ----------------------------------------------------------- valid input */

static void test_versions(void)
{
    for (int major = 1; major <= 3; major++) {
        npy_header h;
        char err[256];
        size_t n = mk(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
                      NULL, 0);
        int rc = parse(img, n, &h, err, sizeof err);
        CHECK(rc == WPACK_OK, "v%d: %s", major, err);
        CHECK_EQ(h.major, major);
        CHECK_EQ(h.minor, 0);
        CHECK_EQ(h.dtype, WPACK_DTYPE_F32);
        CHECK_EQ(h.elem_size, 4);
        CHECK_EQ(h.byteswap, 0);
        CHECK_EQ(h.fortran_order, 0);
        CHECK_EQ(h.rank, 2);
        CHECK_EQ(h.dims[0], 3);
        CHECK_EQ(h.dims[1], 4);
        CHECK_EQ(h.nelems, 12);
        CHECK_EQ(h.nbytes, 48);
        CHECK_EQ(h.data_offset, n);
        CHECK_EQ(n % 64, 0);
    }
}

static void test_dtypes(void)
{
    static const struct {
        const char *descr;
        int dtype;
        size_t size;
        int swap;
    } rows[] = {
        {"<f8", WPACK_DTYPE_F64, 8, 0}, {">f8", WPACK_DTYPE_F64, 8, 1},
        {"<f4", WPACK_DTYPE_F32, 4, 0}, {">f4", WPACK_DTYPE_F32, 4, 1},
        {"<f2", WPACK_DTYPE_F16, 2, 0}, {">f2", WPACK_DTYPE_F16, 2, 1},
        {"<i8", WPACK_DTYPE_I64, 8, 0}, {">i8", WPACK_DTYPE_I64, 8, 1},
        {"<i4", WPACK_DTYPE_I32, 4, 0}, {">i4", WPACK_DTYPE_I32, 4, 1},
        {"<i2", WPACK_DTYPE_I16, 2, 0}, {">i2", WPACK_DTYPE_I16, 2, 1},
        {"|i1", WPACK_DTYPE_I8, 1, 0},  {">i1", WPACK_DTYPE_I8, 1, 0},
        {"<u8", WPACK_DTYPE_U64, 8, 0}, {">u8", WPACK_DTYPE_U64, 8, 1},
        {"<u4", WPACK_DTYPE_U32, 4, 0}, {">u4", WPACK_DTYPE_U32, 4, 1},
        {"<u2", WPACK_DTYPE_U16, 2, 0}, {">u2", WPACK_DTYPE_U16, 2, 1},
        {"|u1", WPACK_DTYPE_U8, 1, 0},  {"<u1", WPACK_DTYPE_U8, 1, 0},
        {"|b1", WPACK_DTYPE_BOOL, 1, 0}, {"|?", WPACK_DTYPE_BOOL, 1, 0},
        {"|b", WPACK_DTYPE_I8, 1, 0},   {"|B", WPACK_DTYPE_U8, 1, 0},
        {"=f4", WPACK_DTYPE_F32, 4, 0}, {"f8", WPACK_DTYPE_F64, 8, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char dict[128], err[256];
        npy_header h;
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }",
                 rows[i].descr);
        int rc = parse_dict(1, dict, &h, err, sizeof err);
        CHECK(rc == WPACK_OK, "%s: %s", rows[i].descr, err);
        CHECK(h.dtype == rows[i].dtype, "%s: dtype %d", rows[i].descr, h.dtype);
        CHECK(h.elem_size == rows[i].size, "%s: size %zu", rows[i].descr, h.elem_size);
        CHECK(h.byteswap == rows[i].swap, "%s: byteswap %d", rows[i].descr, h.byteswap);
        CHECK(h.nbytes == 2 * rows[i].size, "%s: nbytes", rows[i].descr);
    }
}

static void test_shapes_and_syntax(void)
{
    npy_header h;
    char err[256];
    int rc;

    rc = parse_dict(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (), }", &h, err,
                    sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.rank, 0);
    CHECK_EQ(h.nelems, 1);
    CHECK_EQ(h.nbytes, 8);
    CHECK_EQ(h.fortran_order, 1);

    rc = parse_dict(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (5,)}", &h, err,
                    sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.rank, 1);
    CHECK_EQ(h.dims[0], 5);

    /* Any key order, double quotes, whitespace everywhere, trailing commas. */
    rc = parse_dict(1, " {\n \"shape\" : ( 2 ,\n 3 , ) ,\t'descr':\"<i2\",'fortran_order':True ,\r\n}",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.rank, 2);
    CHECK_EQ(h.dims[0], 2);
    CHECK_EQ(h.dims[1], 3);
    CHECK_EQ(h.dtype, WPACK_DTYPE_I16);
    CHECK_EQ(h.fortran_order, 1);

    /* A zero dim: no elements, but the others are still kept. */
    rc = parse_dict(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0, 5), }", &h, err,
                    sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.rank, 3);
    CHECK_EQ(h.dims[2], 5);
    CHECK_EQ(h.nelems, 0);
    CHECK_EQ(h.nbytes, 0);

    rc = parse_dict(3, "{'descr': '<u1', 'fortran_order': False, 'shape': (1, 2, 3, 4, 5, 6, 7, 8), }",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.rank, 8);
    CHECK_EQ(h.dims[7], 8);
    CHECK_EQ(h.nelems, 40320);

    /* Python 2 longs in 1.0/2.0 files; the largest dims that fit. */
    rc = parse_dict(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 4L), }", &h, err,
                    sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.nelems, 12);
    rc = parse_dict(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (18446744073709551615,), }",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK(h.nbytes == UINT64_MAX, "nbytes %llu", (unsigned long long)h.nbytes);

    /* A comment after the dict (numpy ignores it) with our dtype marker. */
    rc = parse_dict(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }  # wpack dtype bf16 (raw bits)",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.dtype, WPACK_DTYPE_BF16);
    CHECK_EQ(h.dtype_from_comment, 1);
    rc = parse_dict(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }  # wpack dtype f8e5m2",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.dtype, WPACK_DTYPE_F8E5M2);
    /* The marker only applies to the raw type it is written as. */
    rc = parse_dict(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }  # wpack dtype bf16",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.dtype, WPACK_DTYPE_F32);
    CHECK_EQ(h.dtype_from_comment, 0);
    rc = parse_dict(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), } # any text\n# more\n",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.dtype, WPACK_DTYPE_U16);

    /* A header exactly as numpy 1.24 writes it, data after it. */
    static const char np124[] =
        "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
        "                                                          \n";
    CHECK_EQ(sizeof np124 - 1, 128);
    rc = parse(np124, sizeof np124 - 1, &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    CHECK_EQ(h.data_offset, 128);
}

/* ------------------------------------------------------------- rejections */

static void test_rejects_dict(void)
{
    static const struct {
        int major;
        const char *dict;
        int code;
        const char *needle;
    } rows[] = {
        {1, "{'descr': '<f4', 'fortran_order': False, }", WPACK_E_INPUT, "no 'shape' key"},
        {1, "{'fortran_order': False, 'shape': (1,), }", WPACK_E_INPUT, "no 'descr' key"},
        {1, "{'descr': '<f4', 'shape': (1,), }", WPACK_E_INPUT, "no 'fortran_order' key"},
        {1, "{}", WPACK_E_INPUT, "no 'descr' key"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'descr': '<f4', }",
         WPACK_E_INPUT, "'descr' appears twice"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1, }",
         WPACK_E_INPUT, "unknown key 'extra'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, -3), }", WPACK_E_INPUT,
         "shape dim -3 is negative"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
         WPACK_E_UNSUPPORTED, "rank 9"},
        {1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "descr '|O' (object arrays) not supported"},
        {1, "{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "'<U5' (unicode strings)"},
        {1, "{'descr': '|S3', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "byte strings"},
        {1, "{'descr': '|V8', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "void"},
        {1, "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "datetime64"},
        {1, "{'descr': '<m8[s]', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "timedelta64"},
        {1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "complex"},
        {1, "{'descr': '<f16', 'fortran_order': False, 'shape': (3,), }", WPACK_E_UNSUPPORTED,
         "extended-precision"},
        {1, "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (3,), }",
         WPACK_E_UNSUPPORTED, "structured"},
        {1, "{'descr': '<f3', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "'<f3' is not a dtype"},
        {1, "{'descr': '<f04', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "not a dtype"},
        {1, "{'descr': '<', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT, "no type"},
        {1, "{'descr': '', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT, "empty"},
        {1, "{'descr': '|f4', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "only valid for 1-byte"},
        {1, "{'descr': 3, 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "quoted string for 'descr'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,), }",
         WPACK_E_INPUT, "does not fit in 64 bits"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999,), }",
         WPACK_E_INPUT, "does not fit in 64 bits"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
         WPACK_E_INPUT, "shape overflows"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }",
         WPACK_E_INPUT, "shape overflows"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0), }",
         WPACK_E_INPUT, "shape overflows"},
        {1, "{'descr': '<f4", WPACK_E_INPUT, "unterminated string"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x", WPACK_E_INPUT,
         "after the header dict"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }}", WPACK_E_INPUT,
         "after the header dict"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", WPACK_E_INPUT,
         "expected ',' or '}'"},
        {1, "{'descr': '<f4' 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "expected ',' or '}'"},
        {1, "{'descr' '<f4', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "expected ':'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5), }", WPACK_E_INPUT,
         "trailing comma"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4], }", WPACK_E_INPUT,
         "list"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': 3, }", WPACK_E_INPUT,
         "tuple for 'shape'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", WPACK_E_INPUT,
         "non-negative integer"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,,), }", WPACK_E_INPUT,
         "non-negative integer"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3 4), }", WPACK_E_INPUT,
         "',' or ')'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (03,), }", WPACK_E_INPUT,
         "leading zero"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,), }", WPACK_E_INPUT,
         "',' or ')'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0x10,), }", WPACK_E_INPUT,
         "',' or ')'"},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,), }", WPACK_E_INPUT,
         "',' or ')'"},
        {1, "{'descr': '<f4', 'fortran_order': 1, 'shape': (3,), }", WPACK_E_INPUT,
         "True or False"},
        {1, "{'descr': '<f4', 'fortran_order': true, 'shape': (3,), }", WPACK_E_INPUT,
         "True or False"},
        {1, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "escape"},
        {1, "{descr: '<f4', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "quoted key"},
        {1, "{, 'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "quoted key"},
        {1, "('descr', '<f4')", WPACK_E_INPUT, "'{'"},
        {1, "", WPACK_E_INPUT, "'{'"},
        {1, "{'descr': '<f4', # c\n 'fortran_order': False, 'shape': (3,), }", WPACK_E_INPUT,
         "quoted key"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } # a\001b", WPACK_E_INPUT,
         "control byte 0x01 in a comment"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\t\v", WPACK_E_INPUT,
         "after the header dict"},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } # \xff", WPACK_E_INPUT,
         "not valid UTF-8"},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } # \xc0\xaf", WPACK_E_INPUT,
         "not valid UTF-8"},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } # \xed\xa0\x80",
         WPACK_E_INPUT, "not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        npy_header h;
        char err[256] = "";
        int rc = parse_dict(rows[i].major, rows[i].dict, &h, err, sizeof err);
        CHECK(rc == rows[i].code, "case %zu %s: rc %d (%s)", i, rows[i].dict, rc, err);
        CHECK(strstr(err, rows[i].needle) != NULL, "case %zu %s: message \"%s\" lacks \"%s\"", i,
              rows[i].dict, err, rows[i].needle);
        /* Every dict-level message says where. */
        CHECK(strstr(err, "header byte ") != NULL, "case %zu: no position in \"%s\"", i, err);
    }

    /* A latin-1 byte in a 1.0 comment is fine (only 3.0 is UTF-8). */
    npy_header h;
    char err[256];
    int rc = parse_dict(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } # \xff", &h,
                        err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    rc = parse_dict(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } # \xc3\xa9\xe2\x82\xac",
                    &h, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);

    /* A NUL in the padding. */
    size_t n = mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", NULL, 0);
    img[n - 3] = 0;
    rc = parse(img, n, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    CHECK(strstr(err, "\\x00") != NULL, "%s", err);

    /* The message points at the right byte: 10 + offset of the '-'. */
    rc = parse_dict(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", &h, err,
                    sizeof err);
    CHECK(strstr(err, "header byte 61:") != NULL, "%s", err);
}

static void test_rejects_preamble(void)
{
    npy_header h;
    char err[256];
    int rc;

    rc = parse("\x93NUM", 4, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    CHECK(strstr(err, "truncated") != NULL, "%s", err);
    rc = parse("", 0, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    rc = parse("PK\x03\x04\x14\x00\x00\x00\x08\x00\x00\x00", 12, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    CHECK(strstr(err, "not an npy file: starts with bytes 50 4b 03 04 14 00") != NULL, "%s", err);
    rc = parse("\x93NUMPX\x01\x00", 8, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);

    size_t n = mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", NULL, 0);
    img[6] = 4;
    rc = parse(img, n, &h, err, sizeof err);
    CHECK(rc == WPACK_E_UNSUPPORTED, "rc %d", rc);
    CHECK(strstr(err, "version 4.0") != NULL, "%s", err);
    img[6] = 1;
    img[7] = 1;
    rc = parse(img, n, &h, err, sizeof err);
    CHECK(rc == WPACK_E_UNSUPPORTED, "rc %d", rc);
    img[7] = 0;

    /* Truncated inside the length field, and a length past the buffer. */
    rc = parse(img, 9, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    CHECK(strstr(err, "header length field") != NULL, "%s", err);
    wpk_st16(img + 8, 200);
    rc = parse(img, n, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    CHECK(strstr(err, "header length 200 runs past the end") != NULL, "%s", err);

    n = mk(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", NULL, 0);
    wpk_st32(img + 8, 0xffffffffu);
    rc = parse(img, n, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    CHECK(strstr(err, "header length 4294967295 above the 1048576-byte limit") != NULL, "%s", err);
    wpk_st32(img + 8, NPY_MAX_HEADER_LEN + 1);
    rc = parse(img, n, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);

    /* The header length 0: nothing to parse. */
    n = mk(1, "{}", NULL, 0);
    wpk_st16(img + 8, 0);
    rc = parse(img, 10, &h, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT, "rc %d", rc);
    CHECK(strstr(err, "'{'") != NULL, "%s", err);

    /* A valid file cut at every length fails cleanly. */
    n = mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", NULL, 0);
    for (size_t k = 0; k < n; k++) {
        rc = parse(img, k, &h, err, sizeof err);
        CHECK(rc == WPACK_E_INPUT, "cut at %zu: rc %d", k, rc);
    }
    n = mk(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", NULL, 0);
    for (size_t k = 0; k < n; k++) {
        rc = parse(img, k, &h, err, sizeof err);
        CHECK(rc == WPACK_E_INPUT, "v3 cut at %zu: rc %d", k, rc);
    }
    /* A tiny errlen is honoured. */
    char tiny[8];
    rc = npy_parse_header("xx", 2, &h, tiny, sizeof tiny);
    CHECK(rc == WPACK_E_INPUT && strlen(tiny) < sizeof tiny, "rc %d", rc);
}

/* Random byte damage to valid headers: no crash, a known code, and sane
 * fields whenever a damaged header still parses. */
static void test_mutations(void)
{
    static const char *dicts[] = {
        "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4, 5), }",
        "{'descr': '>i8', 'fortran_order': False, 'shape': (), }",
        "{\"shape\": (7,), \"fortran_order\": False, \"descr\": \"|b1\"}",
    };
    uint64_t seed = 12345;
    int ok = 0;
    for (int iter = 0; iter < 30000; iter++) {
        const char *d = dicts[iter % 3];
        size_t n = mk(1 + iter % 3, d, NULL, 0);
        int flips = 1 + iter % 4;
        for (int f = 0; f < flips; f++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)(seed >> 33) % n;
            uint8_t val = (uint8_t)(seed >> 17);
            static const char interesting[] = "(),:'\"{}-0123456789 #\nLTF";
            if ((seed >> 8) & 1)
                val = (uint8_t)interesting[(seed >> 40) % (sizeof interesting - 1)];
            img[pos] = val;
        }
        size_t len = n - (size_t)((seed >> 50) % 3);
        npy_header h;
        char err[256];
        int rc = parse(img, len, &h, err, sizeof err);
        CHECK(rc == WPACK_OK || rc == WPACK_E_INPUT || rc == WPACK_E_UNSUPPORTED, "rc %d", rc);
        if (rc == WPACK_OK) {
            ok++;
            CHECK(h.rank <= WPACK_MAX_RANK, "rank %u", h.rank);
            CHECK(h.data_offset <= len, "offset %llu", (unsigned long long)h.data_offset);
            CHECK(h.elem_size >= 1 && h.elem_size <= 8, "size %zu", h.elem_size);
        } else {
            CHECK(err[0] != 0, "empty message for rc %d", rc);
        }
    }
    CHECK(ok > 0, "no mutation parsed at all");
}

/* ------------------------------------------------------------ formatter */

static void test_format_roundtrip(void)
{
    static const uint64_t dims[WPACK_MAX_RANK] = {2, 3, 1, 0, 5, 6, 7, 1000000007};
    char buf[512], err[256];
    for (int dt = WPACK_DTYPE_F64; dt <= WPACK_DTYPE_BOOL; dt++) {
        for (unsigned rank = 0; rank <= WPACK_MAX_RANK; rank++) {
            size_t n = npy_format_header(buf, sizeof buf, dt, rank, rank ? dims : NULL);
            CHECK(n > 0 && n % 64 == 0, "dtype %d rank %u: %zu", dt, rank, n);
            if (!n)
                continue;
            CHECK(buf[n - 1] == '\n', "dtype %d rank %u: no newline", dt, rank);
            npy_header h;
            int rc = parse(buf, n, &h, err, sizeof err);
            CHECK(rc == WPACK_OK, "dtype %d rank %u: %s", dt, rank, err);
            if (rc)
                continue;
            CHECK(h.dtype == dt, "dtype %d read back as %d", dt, h.dtype);
            CHECK_EQ(h.major, 1);
            CHECK_EQ(h.rank, rank);
            CHECK_EQ(h.fortran_order, 0);
            CHECK_EQ(h.byteswap, 0);
            CHECK_EQ(h.data_offset, n);
            for (unsigned k = 0; k < rank; k++)
                CHECK(h.dims[k] == dims[k], "dtype %d rank %u dim %u", dt, rank, k);
        }
    }
    size_t n = npy_format_header(buf, sizeof buf, WPACK_DTYPE_BF16, 2, (const uint64_t[]){3, 4});
    buf[n] = 0;
    CHECK(strncmp(buf + 10, "{'descr': '<u2', 'fortran_order': False, 'shape': (3, 4), }  # wpack "
                            "dtype bf16 (raw bits) ", 91) == 0, "%s", buf + 10);
    n = npy_format_header(buf, sizeof buf, WPACK_DTYPE_F32, 1, (const uint64_t[]){5});
    buf[n] = 0;
    CHECK(strncmp(buf + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), } ", 58) == 0,
          "%s", buf + 10);
    CHECK_EQ(n, 128);
    CHECK_EQ(wpk_ld16(buf + 8), 118);
    /* numpy's own header for the same array is byte-identical. */
    n = npy_format_header(buf, sizeof buf, WPACK_DTYPE_F32, 2, (const uint64_t[]){3, 4});
    CHECK(n == 128 && memcmp(buf, "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': "
                             "False, 'shape': (3, 4), }   ", 72) == 0, "%s", buf + 10);
    n = npy_format_header(buf, sizeof buf, WPACK_DTYPE_BOOL, 0, NULL);
    buf[n] = 0;
    CHECK(strstr(buf + 10, "'|b1'") && !strchr(buf + 10, '#'), "%s", buf + 10);
    n = npy_format_header(buf, sizeof buf, WPACK_DTYPE_F8E4M3FN, 0, NULL);
    buf[n] = 0;
    CHECK(strstr(buf + 10, "'|u1'") && strstr(buf + 10, "# wpack dtype f8e4m3fn (raw bits)"), "%s",
          buf + 10);

    /* Too small, unknown dtype, rank above the limit. */
    CHECK_EQ(npy_format_header(buf, 127, WPACK_DTYPE_F32, 1, (const uint64_t[]){5}), 0);
    CHECK_EQ(npy_format_header(buf, 128, WPACK_DTYPE_F32, 1, (const uint64_t[]){5}), 128);
    CHECK_EQ(npy_format_header(buf, sizeof buf, 0, 1, dims), 0);
    CHECK_EQ(npy_format_header(buf, sizeof buf, WPACK_DTYPE_BLOCK_BASE, 1, dims), 0);
    CHECK_EQ(npy_format_header(buf, sizeof buf, WPACK_DTYPE_F32, WPACK_MAX_RANK + 1, dims), 0);
    CHECK_EQ(npy_format_header(buf, sizeof buf, WPACK_DTYPE_F32, 2, NULL), 0);
    CHECK(npy_descr_for(WPACK_DTYPE_I8) && strcmp(npy_descr_for(WPACK_DTYPE_I8), "|i1") == 0,
          "i8 descr");
}

/* ----------------------------------------------------------------- files */

static char tmpdir[256];

static void make_tmpdir(void)
{
    if (tmpdir[0])
        return;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_npy.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir))
        tmpdir[0] = 0;
}

static void tmp_path(char *buf, size_t len, const char *name)
{
    make_tmpdir();
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static int write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    uint8_t *p = malloc(cap);
    for (;;) {
        if (!p)
            break;
        len += fread(p + len, 1, cap - len, f);
        if (len < cap)
            break;
        uint8_t *q = realloc(p, cap * 2);
        if (!q) {
            free(p);
            p = NULL;
            break;
        }
        p = q;
        cap *= 2;
    }
    fclose(f);
    *n = len;
    return p;
}

static int have_numpy(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
    return cached;
}

/* Headers we format are loaded by numpy (the comment too); files numpy
 * writes parse here. */
static const char numpy_script[] =
    "import sys, os, numpy as np\n"
    "from numpy.lib import format as F\n"
    "d = sys.argv[1]\n"
    "def chk(name, dtype, shape, values):\n"
    "    a = np.load(os.path.join(d, name))\n"
    "    assert a.dtype == np.dtype(dtype), (name, a.dtype)\n"
    "    assert a.shape == shape, (name, a.shape)\n"
    "    want = np.array(values, dtype=dtype).reshape(shape)\n"
    "    assert np.array_equal(a, want), (name, a)\n"
    "chk('bf16.npy', '<u2', (3, 4), list(range(12)))\n"
    "chk('f8.npy', '|u1', (2, 3), list(range(6)))\n"
    "chk('bool.npy', '?', (5,), [True, False, False, True, False])\n"
    "chk('scalar.npy', '<f8', (), 1.5)\n"
    "chk('rank8.npy', '<i4', (1, 2, 1, 2, 1, 2, 1, 2), list(range(16)))\n"
    "chk('empty.npy', '<f4', (2, 0), [])\n"
    "np.save(os.path.join(d, 'np_v1.npy'), np.arange(12, dtype='<f4').reshape(3, 4))\n"
    "with open(os.path.join(d, 'np_v2.npy'), 'wb') as f:\n"
    "    F.write_array(f, np.asfortranarray(np.arange(6, dtype='>i2').reshape(2, 3)),\n"
    "                  version=(2, 0))\n"
    "with open(os.path.join(d, 'np_v3.npy'), 'wb') as f:\n"
    "    F.write_array(f, np.zeros((0, 5), dtype='?'), version=(3, 0))\n"
    "np.save(os.path.join(d, 'np_obj.npy'), np.array([1, 'a', None], dtype=object),\n"
    "        allow_pickle=True)\n";

static int write_npy(const char *name, int dtype, unsigned rank, const uint64_t *dims,
                     const void *data, size_t dlen)
{
    char path[512], hdr[512];
    size_t n = npy_format_header(hdr, sizeof hdr, dtype, rank, dims);
    uint8_t *p = malloc(n + dlen + 1);
    if (!n || !p) {
        free(p);
        return -1;
    }
    memcpy(p, hdr, n);
    if (dlen)
        memcpy(p + n, data, dlen);
    tmp_path(path, sizeof path, name);
    int rc = write_file(path, p, n + dlen);
    free(p);
    return rc;
}

static void test_numpy_interop(void)
{
    if (!have_numpy()) {
        printf("  skip: /usr/bin/python3 cannot import numpy\n");
        return;
    }
    uint8_t bf16[24], f8[6], bools[5] = {1, 0, 0, 1, 0}, rank8[64], scalar[8];
    for (int i = 0; i < 12; i++)
        wpk_st16(bf16 + 2 * i, (uint16_t)i);
    for (int i = 0; i < 6; i++)
        f8[i] = (uint8_t)i;
    for (int i = 0; i < 16; i++)
        wpk_st32(rank8 + 4 * i, (uint32_t)i);
    wpk_stf64(scalar, 1.5);
    CHECK(write_npy("bf16.npy", WPACK_DTYPE_BF16, 2, (const uint64_t[]){3, 4}, bf16, 24) == 0,
          "write");
    CHECK(write_npy("f8.npy", WPACK_DTYPE_F8E4M3FN, 2, (const uint64_t[]){2, 3}, f8, 6) == 0,
          "write");
    CHECK(write_npy("bool.npy", WPACK_DTYPE_BOOL, 1, (const uint64_t[]){5}, bools, 5) == 0,
          "write");
    CHECK(write_npy("scalar.npy", WPACK_DTYPE_F64, 0, NULL, scalar, 8) == 0, "write");
    CHECK(write_npy("rank8.npy", WPACK_DTYPE_I32, 8, (const uint64_t[]){1, 2, 1, 2, 1, 2, 1, 2},
                    rank8, 64) == 0, "write");
    CHECK(write_npy("empty.npy", WPACK_DTYPE_F32, 2, (const uint64_t[]){2, 0}, NULL, 0) == 0,
          "write");

    char script[512], cmd[1200];
    tmp_path(script, sizeof script, "check.py");
    CHECK(write_file(script, numpy_script, sizeof numpy_script - 1) == 0, "write script");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", script, tmpdir);
    CHECK(system(cmd) == 0, "numpy check failed: %s", cmd);

    static const struct {
        const char *name;
        int rc, major, dtype, fortran, swap;
        unsigned rank;
        uint64_t d0, d1;
    } rows[] = {
        {"np_v1.npy", WPACK_OK, 1, WPACK_DTYPE_F32, 0, 0, 2, 3, 4},
        {"np_v2.npy", WPACK_OK, 2, WPACK_DTYPE_I16, 1, 1, 2, 2, 3},
        {"np_v3.npy", WPACK_OK, 3, WPACK_DTYPE_BOOL, 0, 0, 2, 0, 5},
        {"np_obj.npy", WPACK_E_UNSUPPORTED, 1, 0, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char path[512], err[256];
        size_t n = 0;
        tmp_path(path, sizeof path, rows[i].name);
        uint8_t *p = read_file(path, &n);
        CHECK(p != NULL, "%s not written", rows[i].name);
        if (!p)
            continue;
        npy_header h;
        int rc = parse(p, n, &h, err, sizeof err);
        free(p);
        CHECK(rc == rows[i].rc, "%s: rc %d %s", rows[i].name, rc, err);
        if (rc)
            continue;
        CHECK_EQ(h.major, rows[i].major);
        CHECK_EQ(h.dtype, rows[i].dtype);
        CHECK_EQ(h.fortran_order, rows[i].fortran);
        CHECK_EQ(h.byteswap, rows[i].swap);
        CHECK_EQ(h.rank, rows[i].rank);
        CHECK_EQ(h.dims[0], rows[i].d0);
        CHECK_EQ(h.dims[1], rows[i].d1);
        CHECK_EQ(h.data_offset + h.nbytes, n);
    }
}

/* ------------------------------------------------------- npy_pack_file */

#ifdef TEST_PACK

#ifdef NPY_TEST_MOCK_WRITER
/* A writer that records one tensor, checking the call order. */
struct wpack_writer {
    int begun, ended, writes, fail_write, last_rc;
    char name[128];
    int dtype;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint8_t *data;
    size_t len, cap, max_write;
    char msg[128];
};

int wpack_writer_begin_tensor(wpack_writer *w, const char *name, int dtype, unsigned rank,
                              const uint64_t *dims)
{
    if (w->begun) {
        snprintf(w->msg, sizeof w->msg, "mock: begin twice");
        return w->last_rc = WPACK_E_STATE;
    }
    w->begun = 1;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->dtype = dtype;
    w->rank = rank;
    for (unsigned k = 0; k < rank; k++)
        w->dims[k] = dims[k];
    return WPACK_OK;
}

int wpack_writer_write(wpack_writer *w, const void *data, size_t nbytes)
{
    if (!w->begun || w->ended) {
        snprintf(w->msg, sizeof w->msg, "mock: write outside a tensor");
        return w->last_rc = WPACK_E_STATE;
    }
    if (++w->writes == w->fail_write) {
        snprintf(w->msg, sizeof w->msg, "mock: disk full at write %d", w->writes);
        return w->last_rc = WPACK_E_IO;
    }
    if (w->len + nbytes > w->cap) {
        size_t cap = (w->len + nbytes) * 2;
        uint8_t *p = realloc(w->data, cap);
        if (!p)
            return w->last_rc = WPACK_E_NOMEM;
        w->data = p;
        w->cap = cap;
    }
    memcpy(w->data + w->len, data, nbytes);
    w->len += nbytes;
    if (nbytes > w->max_write)
        w->max_write = nbytes;
    return WPACK_OK;
}

int wpack_writer_end_tensor(wpack_writer *w)
{
    if (!w->begun || w->ended) {
        snprintf(w->msg, sizeof w->msg, "mock: end outside a tensor");
        return w->last_rc = WPACK_E_STATE;
    }
    w->ended = 1;
    return WPACK_OK;
}

const char *wpack_writer_errmsg(const wpack_writer *w)
{
    return w->msg;
}

int wpack_writer_errcode(const wpack_writer *w)
{
    return w->last_rc;
}
#endif

typedef struct packed {
    int rc;
    char err[600];
    int dtype;
    unsigned rank;
    uint64_t dims[WPACK_MAX_RANK];
    uint8_t *data;
    size_t len;
    int began;              /* -1: unknown (real writer) */
    int progress_calls, progress_backwards;
    uint64_t progress_last;
} packed;

static void on_progress(void *user, uint64_t done)
{
    packed *p = user;
    if (p->progress_calls && done < p->progress_last)
        p->progress_backwards = 1;
    p->progress_calls++;
    p->progress_last = done;
}

static void packed_free(packed *p)
{
    free(p->data);
    p->data = NULL;
}

/* Pack the .npy at path as tensor "t" (buffer 0: npy_pack_file's default)
 * and read back what the writer stored. */
static void pack_one(const char *path, size_t buffer, int fail_write, packed *out)
{
    memset(out, 0, sizeof *out);
#ifdef NPY_TEST_MOCK_WRITER
    wpack_writer mw = {0};
    mw.fail_write = fail_write;
    if (buffer)
        out->rc = npy_pack_file_buffered(&mw, "t", path, on_progress, out, buffer, out->err,
                                         sizeof out->err);
    else
        out->rc = npy_pack_file(&mw, "t", path, on_progress, out, out->err, sizeof out->err);
    out->began = mw.begun;
    if (out->rc == WPACK_OK) {
        CHECK(mw.ended, "%s: tensor not ended", path);
        CHECK(strcmp(mw.name, "t") == 0, "name %s", mw.name);
        CHECK(mw.max_write <= (buffer ? buffer : 4u << 20), "write of %zu bytes", mw.max_write);
    }
    out->dtype = mw.dtype;
    out->rank = mw.rank;
    memcpy(out->dims, mw.dims, sizeof out->dims);
    out->data = mw.data;
    out->len = mw.len;
#else
    (void)fail_write;
    char apath[600];
    snprintf(apath, sizeof apath, "%s.wpack", path);
    wpack_writer *w = NULL;
    out->began = -1;
    out->rc = wpack_writer_open(&w, apath, NULL);
    if (out->rc) {
        snprintf(out->err, sizeof out->err, "writer_open: %s", w ? wpack_writer_errmsg(w) : "");
        wpack_writer_abort(w);
        return;
    }
    if (buffer)
        out->rc = npy_pack_file_buffered(w, "t", path, on_progress, out, buffer, out->err,
                                         sizeof out->err);
    else
        out->rc = npy_pack_file(w, "t", path, on_progress, out, out->err, sizeof out->err);
    if (out->rc) {
        wpack_writer_abort(w);
        return;
    }
    char ferr[256] = "";
    int rc = wpack_writer_finish(w, ferr, sizeof ferr);
    CHECK(rc == WPACK_OK, "finish: %s", ferr);
    if (rc)
        return;
    size_t n = 0;
    uint8_t *file = read_file(apath, &n);
    unlink(apath);
    CHECK(file != NULL, "cannot read %s", apath);
    if (!file)
        return;
    wpack_archive *ar = NULL;
    rc = wpack_open_memory(&ar, file, n, WPACK_OPEN_VERIFY);
    CHECK(rc == WPACK_OK, "open: %s", ar ? wpack_errmsg(ar) : "");
    wpack_tensor t;
    if (rc == WPACK_OK) {
        CHECK_EQ(wpack_count(ar), 1);
        rc = wpack_tensor_at(ar, 0, &t);
        CHECK(rc == WPACK_OK, "tensor_at: %s", wpack_errmsg(ar));
    }
    if (rc == WPACK_OK) {
        CHECK(strcmp(t.name, "t") == 0, "name %s", t.name);
        out->dtype = t.dtype;
        out->rank = t.rank;
        memcpy(out->dims, t.dims, sizeof out->dims);
        out->len = (size_t)t.nbytes;
        out->data = malloc(out->len ? out->len : 1);
        if (out->data && out->len)
            CHECK(wpack_read(ar, 0, 0, out->data, out->len) == WPACK_OK, "read: %s",
                  wpack_errmsg(ar));
    }
    wpack_close(ar);
    free(file);
#endif
}

/* Element n (C order) of a test array, little-endian: floats get real
 * values (the real writer computes stats), other types a byte pattern. */
static void elem_le(int dtype, size_t es, uint64_t n, uint8_t *out)
{
    if (dtype == WPACK_DTYPE_F32) {
        float v = (float)n * 0.5f - 3.0f;
        uint32_t u;
        memcpy(&u, &v, 4);
        wpk_st32(out, u);
    } else if (dtype == WPACK_DTYPE_F64) {
        wpk_stf64(out, (double)n * 0.25 - 1.0);
    } else if (dtype == WPACK_DTYPE_BOOL) {
        out[0] = n % 3 == 0;
    } else {
        for (size_t k = 0; k < es; k++)
            out[k] = (uint8_t)(n * 7 + k * 31 + 1);
    }
}

/* Write a .npy file of shape dims in the given order and byte order, built
 * element by element; *expect gets the C-order little-endian bytes. */
static int make_array_file(const char *name, char *path, size_t plen, const char *descr,
                           int dtype, size_t es, int fortran, int big, unsigned rank,
                           const uint64_t *dims, uint8_t **expect, size_t *elen)
{
    char dict[300], shape[200] = "(";
    size_t o = 1;
    uint64_t ne = 1;
    for (unsigned k = 0; k < rank; k++) {
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%llu", k ? ", " : "",
                              (unsigned long long)dims[k]);
        ne *= dims[k];
    }
    snprintf(shape + o, sizeof shape - o, rank == 1 ? ",)" : ")");
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
             fortran ? "True" : "False", shape);
    size_t nb = (size_t)ne * es;
    uint8_t *data = malloc(nb + 1), *want = malloc(nb + 1);
    if (!data || !want) {
        free(data);
        free(want);
        return -1;
    }
    uint64_t idx[WPACK_MAX_RANK] = {0};
    for (uint64_t n = 0; n < ne; n++) {
        uint64_t rem = n, pos = 0, stride = 1;
        for (unsigned k = rank; k-- > 0;) {
            idx[k] = rem % dims[k];
            rem /= dims[k];
        }
        if (fortran) {
            for (unsigned k = 0; k < rank; k++) {
                pos += idx[k] * stride;
                stride *= dims[k];
            }
        } else {
            pos = n;
        }
        uint8_t e[8];
        elem_le(dtype, es, n, e);
        memcpy(want + n * es, e, es);
        for (size_t k = 0; k < es; k++)
            data[pos * es + k] = big ? e[es - 1 - k] : e[k];
    }
    size_t hlen = mk(1, dict, NULL, 0);
    tmp_path(path, plen, name);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(img, 1, hlen, f) != hlen || fwrite(data, 1, nb, f) != nb;
    if (f && fclose(f) != 0)
        bad = 1;
    free(data);
    if (bad) {
        free(want);
        return -1;
    }
    *expect = want;
    *elen = nb;
    return 0;
}

static void check_packed(const packed *p, const char *what, int dtype, unsigned rank,
                         const uint64_t *dims, const uint8_t *want, size_t wlen)
{
    CHECK(p->rc == WPACK_OK, "%s: rc %d %s", what, p->rc, p->err);
    if (p->rc)
        return;
    CHECK(p->dtype == dtype, "%s: dtype %d", what, p->dtype);
    CHECK(p->rank == rank, "%s: rank %u", what, p->rank);
    for (unsigned k = 0; k < rank && k < p->rank; k++)
        CHECK(p->dims[k] == dims[k], "%s: dim %u", what, k);
    CHECK(p->len == wlen, "%s: %zu bytes, want %zu", what, p->len, wlen);
    if (p->len == wlen && wlen) {
        size_t bad = 0;
        while (bad < wlen && p->data[bad] == want[bad])
            bad++;
        CHECK(bad == wlen, "%s: byte %zu differs", what, bad);
    }
    CHECK(!p->progress_backwards, "%s: progress went backwards", what);
    if (wlen)
        CHECK(p->progress_last == wlen, "%s: last progress %llu", what,
              (unsigned long long)p->progress_last);
}

static void test_pack_fortran_big_endian_f4(void)
{
    static const uint64_t dims[3] = {5, 7, 3};
    char path[512];
    uint8_t *want;
    size_t wlen;
    int rc = make_array_file("f_be_f4.npy", path, sizeof path, ">f4", WPACK_DTYPE_F32, 4, 1, 1,
                             3, dims, &want, &wlen);
    CHECK(rc == 0, "make file");
    if (rc)
        return;
    /* Buffers from one element to several bands and the default. */
    static const size_t buffers[] = {0, 8, 12, 20, 28, 60, 64, 140, 144, 300, 420, 4096};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) {
        packed p;
        char what[64];
        snprintf(what, sizeof what, "buffer %zu", buffers[i]);
        pack_one(path, buffers[i], 0, &p);
        check_packed(&p, what, WPACK_DTYPE_F32, 3, dims, want, wlen);
        packed_free(&p);
    }
    free(want);
}

static void test_pack_matrix(void)
{
    static const struct {
        const char *descr;
        int dtype;
        size_t es;
        int big;
    } types[] = {
        {"<f8", WPACK_DTYPE_F64, 8, 0}, {">f8", WPACK_DTYPE_F64, 8, 1},
        {">i2", WPACK_DTYPE_I16, 2, 1}, {"<u2", WPACK_DTYPE_U16, 2, 0},
        {">u4", WPACK_DTYPE_U32, 4, 1}, {">i8", WPACK_DTYPE_I64, 8, 1},
        {"|u1", WPACK_DTYPE_U8, 1, 0},  {"|b1", WPACK_DTYPE_BOOL, 1, 0},
        {">f2", WPACK_DTYPE_F16, 2, 1},
    };
    static const struct {
        unsigned rank;
        uint64_t dims[WPACK_MAX_RANK];
    } shapes[] = {
        {0, {0}}, {1, {7}}, {2, {4, 6}}, {2, {1, 6}}, {2, {6, 1}}, {4, {2, 3, 4, 5}},
        {3, {3, 1, 4}}, {8, {2, 1, 2, 3, 1, 2, 2, 1}}, {2, {3, 0}}, {3, {0, 2, 2}},
    };
    static const size_t buffers[] = {0, 8, 24, 40};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (int fortran = 0; fortran < 2; fortran++) {
                char path[512], name[64];
                uint8_t *want;
                size_t wlen;
                snprintf(name, sizeof name, "m_%zu_%zu_%d.npy", t, s, fortran);
                if (make_array_file(name, path, sizeof path, types[t].descr, types[t].dtype,
                                    types[t].es, fortran, types[t].big, shapes[s].rank,
                                    shapes[s].dims, &want, &wlen) != 0) {
                    CHECK(0, "make %s", name);
                    continue;
                }
                for (size_t b = 0; b < sizeof buffers / sizeof buffers[0]; b++) {
                    packed p;
                    char what[128];
                    snprintf(what, sizeof what, "%s shape %zu %s buffer %zu", types[t].descr, s,
                             fortran ? "F" : "C", buffers[b]);
                    pack_one(path, buffers[b], 0, &p);
                    check_packed(&p, what, types[t].dtype, shapes[s].rank, shapes[s].dims, want,
                                 wlen);
                    packed_free(&p);
                }
                unlink(path);
                free(want);
            }
        }
    }
}

/* A bigger Fortran array through the default 4 MiB buffer: several bands,
 * and a row longer than a small buffer. */
static void test_pack_large_fortran(void)
{
    static const uint64_t dims[2] = {1500, 800};
    char path[512];
    uint8_t *want;
    size_t wlen;
    int rc = make_array_file("large_f.npy", path, sizeof path, ">f4", WPACK_DTYPE_F32, 4, 1, 1,
                             2, dims, &want, &wlen);
    CHECK(rc == 0, "make file");
    if (rc)
        return;
    static const size_t buffers[] = {0, 1000, 3200, 1 << 20};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) {
        packed p;
        char what[64];
        snprintf(what, sizeof what, "large buffer %zu", buffers[i]);
        pack_one(path, buffers[i], 0, &p);
        check_packed(&p, what, WPACK_DTYPE_F32, 2, dims, want, wlen);
        if (buffers[i] == 1000)
            CHECK(p.progress_calls >= 2 && p.progress_calls < 10, "progress calls %d",
                  p.progress_calls);
        packed_free(&p);
    }
    unlink(path);
    free(want);
}

static void test_pack_numpy_fortran(void)
{
    if (!have_numpy()) {
        printf("  skip: no numpy\n");
        return;
    }
    /* np_v2.npy from test_numpy_interop: arange(6) as (2, 3), Fortran, '>i2'. */
    char path[512];
    tmp_path(path, sizeof path, "np_v2.npy");
    packed p;
    pack_one(path, 0, 0, &p);
    uint8_t want[12];
    for (int i = 0; i < 6; i++)
        wpk_st16(want + 2 * i, (uint16_t)i);
    check_packed(&p, "numpy v2 fortran", WPACK_DTYPE_I16, 2, (const uint64_t[]){2, 3}, want, 12);
    packed_free(&p);

    tmp_path(path, sizeof path, "np_obj.npy");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_UNSUPPORTED, "rc %d %s", p.rc, p.err);
    CHECK(strstr(p.err, "np_obj.npy: ") && strstr(p.err, "'|O' (object arrays)"), "%s", p.err);
    packed_free(&p);
}

static void test_pack_bad_files(void)
{
    char path[512];
    packed p;
    uint8_t data[48] = {0};
    size_t n = mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", data, 48);

    /* Truncated data. */
    tmp_path(path, sizeof path, "trunc.npy");
    CHECK(write_file(path, img, n - 5) == 0, "write");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_INPUT, "rc %d %s", p.rc, p.err);
    CHECK(strstr(p.err, "trunc.npy: file is 171 bytes, header needs 176") != NULL, "%s", p.err);
    CHECK(p.began <= 0, "writer was begun");
    packed_free(&p);

    /* Trailing garbage. */
    uint8_t more[200];
    memcpy(more, img, n);
    memset(more + n, 0xaa, 3);
    tmp_path(path, sizeof path, "trail.npy");
    CHECK(write_file(path, more, n + 3) == 0, "write");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_INPUT, "rc %d %s", p.rc, p.err);
    CHECK(strstr(p.err, "trail.npy: file is 179 bytes, header needs 176") &&
          strstr(p.err, "3 bytes of trailing"), "%s", p.err);
    CHECK(p.began <= 0, "writer was begun");
    packed_free(&p);

    /* Cut inside the header. */
    tmp_path(path, sizeof path, "hdrcut.npy");
    CHECK(write_file(path, img, 40) == 0, "write");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_INPUT, "rc %d %s", p.rc, p.err);
    CHECK(strstr(p.err, "hdrcut.npy: file is 40 bytes, header needs 128") != NULL, "%s", p.err);
    packed_free(&p);

    /* Too short for the preamble; empty; not npy at all. */
    tmp_path(path, sizeof path, "short.npy");
    CHECK(write_file(path, img, 9) == 0, "write");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_INPUT && strstr(p.err, "short.npy: truncated"), "rc %d %s", p.rc,
          p.err);
    packed_free(&p);
    CHECK(write_file(path, img, 0) == 0, "write");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_INPUT && strstr(p.err, "short.npy: "), "rc %d %s", p.rc, p.err);
    packed_free(&p);
    CHECK(write_file(path, "hello, world\n", 13) == 0, "write");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_INPUT && strstr(p.err, "not an npy file"), "rc %d %s", p.rc, p.err);
    packed_free(&p);

    /* Bad header: the parser's message after the path. */
    n = mk(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, -4), }", NULL, 0);
    tmp_path(path, sizeof path, "neg.npy");
    CHECK(write_file(path, img, n) == 0, "write");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_INPUT && strstr(p.err, "neg.npy: header byte ") &&
          strstr(p.err, "shape dim -4 is negative"), "rc %d %s", p.rc, p.err);
    packed_free(&p);

    /* Missing file, a directory. */
    tmp_path(path, sizeof path, "missing.npy");
    pack_one(path, 0, 0, &p);
    CHECK(p.rc == WPACK_E_IO && strstr(p.err, "missing.npy: cannot open"), "rc %d %s", p.rc,
          p.err);
    packed_free(&p);
    pack_one(tmpdir, 0, 0, &p);
    CHECK(p.rc == WPACK_E_FILE_TYPE && strstr(p.err, "not a regular file"), "rc %d %s", p.rc,
          p.err);
    packed_free(&p);
}

#ifdef NPY_TEST_MOCK_WRITER
static void test_pack_writer_error(void)
{
    static const uint64_t dims[2] = {20, 30};
    char path[512];
    uint8_t *want;
    size_t wlen;
    for (int fortran = 0; fortran < 2; fortran++) {
        if (make_array_file("werr.npy", path, sizeof path, "<i4", WPACK_DTYPE_I32, 4, fortran, 0,
                            2, dims, &want, &wlen) != 0) {
            CHECK(0, "make file");
            return;
        }
        free(want);
        packed p;
        pack_one(path, 400, 2, &p);
        CHECK(p.rc == WPACK_E_IO, "rc %d", p.rc);
        CHECK(strstr(p.err, "werr.npy: mock: disk full at write 2") != NULL, "%s", p.err);
        packed_free(&p);
    }
}
#endif

#endif /* TEST_PACK */

static void cleanup(void)
{
    if (!tmpdir[0])
        return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("  note: could not remove %s\n", tmpdir);
}

int main(void)
{
    RUN(test_versions);
    RUN(test_dtypes);
    RUN(test_shapes_and_syntax);
    RUN(test_rejects_dict);
    RUN(test_rejects_preamble);
    RUN(test_mutations);
    RUN(test_format_roundtrip);
    RUN(test_numpy_interop);
#ifdef TEST_PACK
    RUN(test_pack_fortran_big_endian_f4);
    RUN(test_pack_matrix);
    RUN(test_pack_large_fortran);
    RUN(test_pack_numpy_fortran);
    RUN(test_pack_bad_files);
#ifdef NPY_TEST_MOCK_WRITER
    RUN(test_pack_writer_error);
#endif
#endif
    cleanup();
    return tl_finish();
}
