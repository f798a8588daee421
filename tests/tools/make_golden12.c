/*
 * make_golden12.c - writes the format-1.2 golden files (golden12_content.h):
 *
 *   tests/golden/v12/chunk_sums.wpack + .expect
 *   tests/golden/v12/errors/NAME.wpack   one 1.2 rule (spec 19b, 13.2 rules
 *                                        52-53) broken each, checksums
 *                                        re-sealed so the rule is what
 *                                        fails, and EXPECT ("file code
 *                                        [verify]")
 *
 * Built and run by `make golden` (writes into tests/); re-run it only on
 * purpose, as for make_golden.c: test_golden regenerates chunk_sums.wpack
 * and compares it byte for byte. Every file written is opened again, and
 * the program fails if one does not give its expected code.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/golden12_content.h"
#include "tools/golden_tool.h"

static const char *tests_dir = "tests";

/* ------------------------------------------------------------ surgery */

static void set_param(gimg *m, const char *name, uint32_t v)
{
    wpk_st32(entry(m, name) + WPK_E_CODEC_PARAM_OFF, v);
    gimg_seal_index(m);
}
static void c_param_11(gimg *m) { set_param(m, G12_CHUNKED, 11); }
static void c_param_27(gimg *m) { set_param(m, G12_CHUNKED, 27); }
/* codec_param of a codec 0 alias is reserved, 19b rule 4 */
static void c_alias_param(gimg *m) { set_param(m, G12_ALIAS, 12); }

/* The five sums start one u64 before the aux section's end: the last four
 * are past it. */
static void c_sums_past_aux(gimg *m)
{
    uint64_t aux_len = gimg_sec_len(m, WPK_SEC_AUX);
    wpk_st64(entry(m, G12_CHUNKED) + WPK_E_SUMS_OFF, aux_len - 8);
    gimg_seal_index(m);
}

static void set_header(gimg *m, uint16_t minor, uint64_t optional)
{
    wpk_st16(gimg_sb(m) + WPK_H_MINOR_OFF, minor);
    wpk_st64(gimg_sb(m) + WPK_H_OPTIONAL_OFF, optional);
    gimg_mirror(m);
}
/* minor 2 without bit 0: the fields are reserved and not zero (19b rule 1) */
static void h_no_bit(gimg *m) { set_header(m, 2, 0); }
/* bit 0 at minor 1: a 1.1 archive, the fields are reserved (19b rule 1) */
static void h_minor1(gimg *m) { set_header(m, 1, WPK_OPT_CHUNK_SUMS); }
/* minor 3 without the bit: reserved fields of a newer minor are ignored
 * (section 4). Once WPACK_FORMAT_MINOR reaches 3 this file's expectation
 * is RESERVED: regenerate it with a minor above the new one. */
static void h_minor3(gimg *m) { set_header(m, 3, 0); }

/* Chunk 2's sum is wrong, the entry checksum (all bytes) still right: a
 * plain open accepts it (rule 53 is a verification rule), verification
 * refuses it. */
static void c_wrong_sum(gimg *m)
{
    uint8_t *sum = gimg_aux(m, wpk_ld64(entry(m, G12_CHUNKED) + WPK_E_SUMS_OFF)) + 8 * 2;
    wpk_st64(sum, wpk_ld64(sum) ^ 1);
    gimg_seal_index(m);
}

typedef struct {
    const char *file;
    int code;
    int verify; /* 1: the code is at verification; the file opens plainly (WPACK_OK) */
    void (*fault)(gimg *m);
    const char *rule;
} fault12;

static const fault12 faults[] = {
    {"chunk_param_11.wpack", WPACK_E_CODEC, 0, c_param_11, "19b rule 2, 13.2 rule 52"},
    {"chunk_param_27.wpack", WPACK_E_LIMIT, 0, c_param_27, "19b rule 2, 13.2 rule 52"},
    {"sums_past_aux.wpack", WPACK_E_BOUNDS, 0, c_sums_past_aux, "19b rule 3, 13.2 rule 52"},
    {"sums_without_bit.wpack", WPACK_E_RESERVED, 0, h_no_bit, "19b rule 1: minor 2, bit 0 clear"},
    {"minor1_with_bit.wpack", WPACK_E_RESERVED, 0, h_minor1, "19b rule 1: bit 0 at minor 1"},
    {"alias_chunk_param.wpack", WPACK_E_RESERVED, 0, c_alias_param, "19b rule 4"},
    {"chunk_sum_wrong.wpack", WPACK_E_CHECKSUM, 1, c_wrong_sum, "19b reading, 13.2 rule 53"},
    {"minor3_without_bit.wpack", WPACK_OK, 0, h_minor3, "section 4: a newer minor's reserved fields are ignored"},
};

static void make_errors(const char *v12)
{
    char dir[700], path[900];
    snprintf(dir, sizeof dir, "%s/errors", v12);
    mkdir_p(dir);
    size_t len;
    snprintf(path, sizeof path, "%s/chunk_sums.wpack", v12);
    uint8_t *base = test_slurp(path, &len);
    if (!base)
        die(path);
    gstr expect = {0};
    gstr_add(&expect, "# file code [verify] - format-1.2 faults (rule of spec section); written by "
                      "tests/tools/make_golden12.c\n");
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        const fault12 *f = &faults[i];
        snprintf(path, sizeof path, "%s/%s", dir, f->file);
        write_fault(path, base, len, f->fault);
        if (f->verify) {
            char why[200];
            snprintf(why, sizeof why, "opens: %s is checked on verification",
                     wpack_error_name(f->code));
            expect_row(&expect, path, f->file, WPACK_OK, 0, why);
        }
        expect_row(&expect, path, f->file, f->code, f->verify, f->rule);
    }
    write_expect(dir, &expect);
    free(base);
}

int main(int argc, char **argv)
{
    golden_tool_name = "make_golden12";
    if (argc > 1)
        tests_dir = argv[1];
    char v12[512];
    snprintf(v12, sizeof v12, "%s/golden/v12", tests_dir);
    mkdir_p(v12);
    write_with_expect(v12, "chunk_sums", golden12_chunk_sums_write);
    make_errors(v12);
    return golden_tool_exit(v12);
}
