/* test_resolver_scan.c - the MLIR scanner: the forms of weight globals,
 * aliases, resources, strings, and errors with line:column; plus the
 * tensor-type matching rules and wpack: URI encoding. */
#include "mlir_scan.h"
#include "mlir_type.h"
#include "resolve_int.h"
#include "testlib.h"

static wpk_mlir_doc *scan(const char *s, char *err, size_t errlen)
{
    wpk_mlir_doc *d = NULL;
    int rc = wpk_mlir_scan_buffer(s, strlen(s), WPK_SCAN_OPS, &d, err, errlen);
    return rc ? NULL : d;
}

static int span_eq(const wpk_mlir_doc *d, wpk_span s, const char *w)
{
    return wpk_span_is(d->buf, s, w);
}

static void test_pretty_forms(void)
{
    char err[256];
    const char *src =
        "#ext = #ml_program.extern : tensor<4x3xf32>\n"
        "module {\n"
        "  ml_program.global public @a(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n"
        "  ml_program.global private mutable @\"b.c\"(#ext) : tensor<4x3xf32> {x, wpack.uri = \"old\"} loc(\"f\":1:2)\n"
        "  ml_program.global_load_const @a : tensor<2xf32>\n"
        "  ml_program.global private @d(dense<\"0x0102\"> : tensor<2xi8>) : tensor<2xi8>\n"
        "  util.global private @u {noinline} : tensor<4xf32>\n"
        "}\n";
    wpk_mlir_doc *d = scan(src, err, sizeof err);
    CHECK(d != NULL, "scan failed: %s", err);
    if (!d)
        return;
    CHECK_EQ(d->nglobals, 4);
    CHECK(strcmp(d->globals[0].name, "a") == 0, "%s", d->globals[0].name);
    CHECK_EQ(d->globals[0].value_kind, WPK_VAL_EXTERN);
    CHECK(span_eq(d, d->globals[0].extern_type, "tensor<2xf32>"), "extern type");
    const wpk_global *b = &d->globals[1];
    CHECK(strcmp(b->name, "b.c") == 0, "%s", b->name);
    CHECK_EQ(b->is_mutable, 1);
    CHECK_EQ(b->value_kind, WPK_VAL_EXTERN);
    CHECK(span_eq(d, b->value, "#ext"), "value as written");
    CHECK(span_eq(d, b->extern_type, "tensor<4x3xf32>"), "alias followed");
    CHECK(span_eq(d, b->uri_value, "\"old\""), "existing wpack.uri");
    CHECK(span_eq(d, b->attrs, "{x, wpack.uri = \"old\"}"), "attrs");
    CHECK(b->op.off + b->op.len == (size_t)(strstr(src, ":1:2)") - src) + 5, "op ends after loc");
    CHECK_EQ(b->line, 4);
    CHECK_EQ(b->col, 3);
    CHECK_EQ(d->globals[2].value_kind, WPK_VAL_DENSE);
    CHECK_EQ(d->globals[3].form, WPK_FORM_UTIL_PRETTY);
    CHECK_EQ(d->globals[3].value_kind, WPK_VAL_NONE);
    CHECK(span_eq(d, d->globals[3].attrs, "{noinline}"), "util attrs");
    wpk_mlir_doc_free(d);
}

static void test_generic_and_strings(void)
{
    char err[256];
    const char *src =
        "// a comment with \"ml_program.global\"( and { unbalanced\n"
        "\"builtin.module\"() ({\n"
        "  \"ml_program.global\"() <{sym_name = \"w\\22x\\5C\", type = tensor<2xi1>, value = #ml_program.extern : tensor<2xi1>}> {k} : () -> ()\n"
        "  \"util.global\"() {sym_name = \"u\", type = tensor<f32>} : () -> ()\n"
        "  %0 = \"foo.op\"() {s = \"ml_program.global\", m = affine_map<(d0) -> (d0)>} : () -> i32 loc(\"layers.0\")\n"
        "}) : () -> ()\n";
    wpk_mlir_doc *d = scan(src, err, sizeof err);
    CHECK(d != NULL, "scan failed: %s", err);
    if (!d)
        return;
    CHECK_EQ(d->nglobals, 2);
    CHECK(d->nglobals == 2 && strcmp(d->globals[0].name, "w\"x\\") == 0, "escapes decoded");
    CHECK_EQ(d->globals[0].form, WPK_FORM_ML_GENERIC);
    CHECK_EQ(d->globals[0].value_kind, WPK_VAL_EXTERN);
    CHECK(span_eq(d, d->globals[0].attrs, "{k}"), "discardable attrs");
    CHECK_EQ(d->globals[1].form, WPK_FORM_UTIL_GENERIC);
    CHECK(span_eq(d, d->globals[1].type, "tensor<f32>"), "type");
    CHECK_EQ(d->nops, 1);
    if (d->nops == 1)
        CHECK(span_eq(d, d->ops[0].loc, "\"layers.0\""), "loc");
    wpk_mlir_doc_free(d);
}

static void test_resources(void)
{
    char err[256];
    const char *src = "module {}\n{-#\n  dialect_resources: {\n    builtin: {\n      a.b: \"0x0400000001020304\",\n"
                      "      c: \"0x01000000\"\n    },\n    other: { z: \"whatever\" }\n  },\n"
                      "  external_resources: { x: { y: 1 } }\n#-}\n";
    wpk_mlir_doc *d = scan(src, err, sizeof err);
    CHECK(d != NULL, "scan failed: %s", err);
    if (!d)
        return;
    CHECK_EQ(d->nresources, 2);
    CHECK(span_eq(d, d->resources[0].key, "a.b"), "key");
    CHECK(span_eq(d, d->resources[0].blob, "0400000001020304"), "blob");
    CHECK_EQ(d->resources[0].alignment, 4);
    CHECK_EQ(d->resources[1].blob.len, 8);
    wpk_mlir_doc_free(d);
}

static void expect_error(const char *src, const char *want)
{
    char err[256] = "";
    wpk_mlir_doc *d = NULL;
    int rc = wpk_mlir_scan_buffer(src, strlen(src), 0, &d, err, sizeof err);
    CHECK(rc == WPACK_E_INPUT && d == NULL, "no error for %s", src);
    CHECK(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
}

static void test_errors(void)
{
    expect_error("module {\n  \"abc\n}", "2:3: unterminated string");
    expect_error("x = \"a\\", "1:5: unterminated string");
    expect_error("module {\n  (]\n}", "2:4: unbalanced brackets: ']' closes the '(' opened at 2:3");
    expect_error("module {", "1:8: unbalanced '{'");
    expect_error("a = tensor<4x", "1:11: unbalanced '<'");
    expect_error("{-#\n dialect_resources: { builtin: { k: \"0x010\" } }\n#-}", "2:37: resource 'k': odd number");
    expect_error("{-# dialect_resources: { builtin: { k: \"0x0102\" } } #-}", "truncated blob");
    expect_error("{-# dialect_resources: { builtin: { k: 12 } } #-}", "expected a \"0x...\" blob");
    expect_error("module { ml_program.global @ (x) : f32 }", "'@' not followed by a symbol name");
    /* buffers without a NUL terminator: the scanner must stop at len */
    char raw[3] = {'"', 'a', 'b'};
    wpk_mlir_doc *d = NULL;
    char err[128];
    CHECK_EQ(wpk_mlir_scan_buffer(raw, 3, 0, &d, err, sizeof err), WPACK_E_INPUT);
    CHECK_EQ(wpk_mlir_scan_buffer("a\0b", 3, 0, &d, err, sizeof err), WPACK_E_INPUT);
    CHECK(strstr(err, "1:2: NUL byte") != NULL, "%s", err);
    CHECK_EQ(wpk_mlir_scan_buffer("", 0, 0, &d, err, sizeof err), 0);
    wpk_mlir_doc_free(d);
}

static void test_types(void)
{
    wpk_mlir_tensor t;
    char why[128];
    CHECK_EQ(wpk_mlir_parse_tensor("tensor<250880x4096xf32>", 23, &t, why, sizeof why), 0);
    CHECK_EQ(t.rank, 2);
    CHECK_EQ(t.dims[0], 250880);
    CHECK(strcmp(t.elem, "f32") == 0, "%s", t.elem);
    CHECK_EQ(wpk_mlir_parse_tensor("tensor<f8E4M3FN>", 16, &t, why, sizeof why), 0);
    CHECK_EQ(t.rank, 0);
    CHECK(wpk_mlir_parse_tensor("tensor<?x4xf32>", 15, &t, why, sizeof why) != 0, "dynamic");
    CHECK(wpk_mlir_parse_tensor("tensor<*xf32>", 13, &t, why, sizeof why) != 0, "unranked");
    CHECK(wpk_mlir_parse_tensor("tensor<4xf32, #enc>", 19, &t, why, sizeof why) != 0, "encoding");
    CHECK(wpk_mlir_parse_tensor("memref<4xf32>", 13, &t, why, sizeof why) != 0, "memref");
    CHECK(wpk_mlir_parse_tensor("tensor<99999999999999999999xf32>", 32, &t, why, sizeof why) != 0, "overflow");
    CHECK(wpk_mlir_parse_tensor("tensor<1x1x1x1x1x1x1x1x1xf32>", 29, &t, why, sizeof why) != 0, "rank 9");
    CHECK(wpk_mlir_elem_matches("i8", WPACK_DTYPE_I8) && wpk_mlir_elem_matches("i8", WPACK_DTYPE_U8), "i8");
    CHECK(wpk_mlir_elem_matches("si8", WPACK_DTYPE_I8) && !wpk_mlir_elem_matches("si8", WPACK_DTYPE_U8), "si8");
    CHECK(wpk_mlir_elem_matches("ui8", WPACK_DTYPE_U8) && !wpk_mlir_elem_matches("ui8", WPACK_DTYPE_I8), "ui8");
    CHECK(wpk_mlir_elem_matches("i1", WPACK_DTYPE_BOOL) && !wpk_mlir_elem_matches("i8", WPACK_DTYPE_BOOL), "i1");
    CHECK(wpk_mlir_elem_matches("bf16", WPACK_DTYPE_BF16) && !wpk_mlir_elem_matches("f16", WPACK_DTYPE_BF16), "bf16");
    CHECK(wpk_mlir_elem_matches("i64", WPACK_DTYPE_U64) && !wpk_mlir_elem_matches("si64", WPACK_DTYPE_U64), "i64");
    char buf[64];
    uint64_t dims[2] = {3, 4};
    wpk_mlir_format_tensor(buf, sizeof buf, WPACK_DTYPE_U8, 2, dims);
    CHECK(strcmp(buf, "tensor<3x4xui8>") == 0, "%s", buf);
}

static void test_uri_encode(void)
{
    char buf[64];
    CHECK_EQ(wpk_uri_encode("a.b_c-d~e", 9, buf, sizeof buf), 9);
    CHECK(strcmp(buf, "a.b_c-d~e") == 0, "%s", buf);
    wpk_uri_encode("x y/%\"\xc3\xa9", 8, buf, sizeof buf);
    CHECK(strcmp(buf, "x%20y%2F%25%22%C3%A9") == 0, "%s", buf);
    CHECK_EQ(wpk_uri_encode("abc", 3, buf, 3), 0);
}

int main(void)
{
    RUN(test_pretty_forms);
    RUN(test_generic_and_strings);
    RUN(test_resources);
    RUN(test_errors);
    RUN(test_types);
    RUN(test_uri_encode);
    return tl_finish();
}
