/* test_safetensors.c - st_scan_buffer: a good file, each rule broken once,
 * and every truncation of a good file refused before anything is visited. */
#include <stdint.h>

#include "bytes.h"
#include "safetensors.h"
#include "testlib.h"

static uint8_t file[4096];

static size_t make(const char *header, size_t data_len)
{
    size_t n = strlen(header);
    wpk_st64(file, n);
    memcpy(file + 8, header, n);
    memset(file + 8 + n, 0x3c, data_len);
    return 8 + n + data_len;
}

static int count_cb(void *user, const st_item *it)
{
    int *c = user;
    c[it->is_meta]++;
    return WPACK_OK;
}

static int scan(size_t len, char *err, size_t errlen, int *counts)
{
    return st_scan_buffer(file, len, count_cb, counts, err, errlen);
}

static void test_good(void)
{
    size_t n = make("{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,1],\"data_offsets\":[0,8]},"
                    "\"e\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[12,12]}}   ",
                    12);
    int c[2] = {0, 0};
    char err[300];
    int rc = scan(n, err, sizeof err, c);
    CHECK(rc == WPACK_OK, "rc %d: %s", rc, err);
    CHECK_EQ(c[0], 3);
    CHECK_EQ(c[1], 1);
    for (size_t k = 0; k < n; k++) {
        int z[2] = {0, 0};
        CHECK(scan(k, err, sizeof err, z) != WPACK_OK && z[0] + z[1] == 0, "length %zu", k);
    }
}

static void test_rules(void)
{
    static const struct {
        const char *h;
        size_t data;
        int code;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, WPACK_E_OVERLAP},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, WPACK_E_OVERLAP},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, WPACK_E_INPUT},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, WPACK_E_SIZE},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
         WPACK_E_OVERFLOW},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,8]}}", 8, WPACK_E_INPUT},
        {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, WPACK_E_UNSUPPORTED},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
         WPACK_E_RANK},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, WPACK_E_DUPLICATE},
        {"{\"__metadata__\":{\"k\":1}}", 0, WPACK_E_INPUT},
        {"[1]", 0, WPACK_E_INPUT},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 4, WPACK_E_BOUNDS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = make(cases[i].h, cases[i].data);
        int c[2] = {0, 0};
        char err[300];
        int rc = scan(n, err, sizeof err, c);
        CHECK(rc == cases[i].code && c[0] + c[1] == 0, "case %zu: rc %d (%s)", i, rc, err);
    }
    wpk_st64(file, 200000000);
    char err[300];
    int c[2] = {0, 0};
    CHECK_EQ(st_scan_buffer(file, 16, count_cb, c, err, sizeof err), WPACK_E_LIMIT);
}

int main(void)
{
    RUN(test_good);
    RUN(test_rules);
    return tl_finish();
}
