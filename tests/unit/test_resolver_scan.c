/* test_resolver_scan.c - the MLIR scanner: the forms of weight globals,
 * aliases, resources, strings, and errors with line:column; the one-line
 * fast path against the general parser (same records, same errors); plus
 * the tensor-type matching rules, wpack: URI encoding and duplicate
 * symbols (few globals, and many: through the entry index). */
#include <unistd.h>

#include "bytes.h"
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
    CHECK(span_eq(d, d->globals[0].value_type, "tensor<2xf32>"), "extern type");
    const wpk_global *b = &d->globals[1];
    CHECK(strcmp(b->name, "b.c") == 0, "%s", b->name);
    CHECK_EQ(b->is_mutable, 1);
    CHECK_EQ(b->value_kind, WPK_VAL_EXTERN);
    CHECK(span_eq(d, b->value, "#ext"), "value as written");
    CHECK(span_eq(d, b->value_type, "tensor<4x3xf32>"), "alias followed");
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


/* Blob errors: the 16-bytes-a-step digit check must report the exact
 * byte, escapes and line breaks go through the general string rules. */
static void test_blob_errors(void)
{
    char src[512];
    /* 'g' after 72 hex digits: past the 64-digit vector loop */
    char digits[73];
    memset(digits, 'a', 72);
    digits[72] = 0;
    snprintf(src, sizeof src, "{-#\n dialect_resources: { builtin: { k: \"0x04000000%sg0\" } }\n#-}",
             digits);
    char want[64];
    /* line 2: ` dialect_resources: { builtin: { k: "0x` is 39 bytes; then 8 + 72 digits */
    snprintf(want, sizeof want, "2:%d: resource 'k': 'g' is not a hex digit", 39 + 1 + 8 + 72);
    expect_error(src, want);
    /* a non-hex byte exactly at digit 64 and at digit 16 */
    snprintf(src, sizeof src, "{-# dialect_resources: { builtin: { k: \"0x%.56s04000000Z\" } } #-}", digits);
    snprintf(want, sizeof want, "1:%d: resource 'k': 'Z' is not a hex digit", 42 + 1 + 64);
    expect_error(src, want);
    /* an escape inside the blob: a valid string, but '\\' is not a digit */
    expect_error("{-# dialect_resources: { builtin: { k: \"0x04000000\\22ab\" } } #-}",
                 "1:51: resource 'k': '\\' is not a hex digit");
    /* a bad escape inside the blob is a string error */
    expect_error("{-# dialect_resources: { builtin: { k: \"0x04000000\\q\" } } #-}",
                 "1:51: bad escape in string");
    /* a newline inside the blob, and a blob that is never closed */
    expect_error("{-#\n dialect_resources: { builtin: { k: \"0x0400\n0000\" } }\n#-}",
                 "2:37: unterminated string (newline before the closing quote)");
    expect_error("{-#\n dialect_resources: { builtin: { k: \"0x04000000abcd", "2:37: unterminated string");
    /* an unclosed blob of more than 64 digits (the vector loop runs off the end) */
    snprintf(src, sizeof src, "{-# dialect_resources: { builtin: { k: \"0x04000000%s", digits);
    expect_error(src, "1:40: unterminated string");
}

/* Every field of two scans of the same text agrees. */
static int same_global(const wpk_mlir_doc *a, const wpk_mlir_doc *b, size_t i)
{
    const wpk_global *x = &a->globals[i], *y = &b->globals[i];
#define SP(f) (x->f.off == y->f.off && x->f.len == y->f.len)
    return x->form == y->form && SP(op) && SP(sym) && strcmp(x->name, y->name) == 0 &&
           x->name_len == y->name_len && x->is_mutable == y->is_mutable &&
           x->value_kind == y->value_kind && SP(value) && SP(value_body) && SP(value_type) &&
           SP(type) && SP(type_body) && SP(attrs) && SP(props) && SP(uri_value) &&
           x->attrs_insert == y->attrs_insert && x->value_insert == y->value_insert &&
           x->line == y->line && x->col == y->col && x->scope == y->scope;
#undef SP
}

/* Scan src with and without the fast path: same result, same error.
 * Returns how many globals the fast path took. */
static size_t fast_vs_general(const char *src)
{
    char e1[256] = "", e2[256] = "";
    wpk_mlir_doc *a = NULL, *b = NULL;
    size_t n = strlen(src), fast = 0;
    int r1 = wpk_mlir_scan_buffer(src, n, WPK_SCAN_OPS, &a, e1, sizeof e1);
    int r2 = wpk_mlir_scan_buffer(src, n, WPK_SCAN_OPS | WPK_SCAN_NO_FAST, &b, e2, sizeof e2);
    CHECK(r1 == r2 && strcmp(e1, e2) == 0, "fast %d '%s' vs general %d '%s' for:\n%s", r1, e1, r2,
          e2, src);
    if (a && b) {
        CHECK(a->nglobals == b->nglobals, "%zu vs %zu globals for:\n%s", a->nglobals, b->nglobals, src);
        for (size_t i = 0; i < a->nglobals && i < b->nglobals; i++) {
            CHECK(same_global(a, b, i), "global %zu differs for:\n%s", i, src);
            /* the line numbers counted during the scan, against a count from the start */
            unsigned l, c;
            wpk_mlir_line_col(src, n, a->globals[i].op.off, &l, &c);
            CHECK(a->globals[i].line == l && a->globals[i].col == c,
                  "global %zu at %u:%u, not %u:%u, for:\n%s", i, a->globals[i].line,
                  a->globals[i].col, l, c, src);
            fast += a->globals[i].classified;
            CHECK(!b->globals[i].classified, "WPK_SCAN_NO_FAST took the fast path");
        }
        CHECK(a->nops == b->nops, "ops differ for:\n%s", src);
        for (size_t i = 0; i < a->nops && i < b->nops; i++)
            CHECK(a->ops[i].op_start == b->ops[i].op_start &&
                      a->ops[i].attr_insert == b->ops[i].attr_insert &&
                      a->ops[i].loc.off == b->ops[i].loc.off && a->ops[i].depth == b->ops[i].depth,
                  "op %zu differs for:\n%s", i, src);
    }
    wpk_mlir_doc_free(a);
    wpk_mlir_doc_free(b);
    return fast;
}

static void test_fast_path(void)
{
    static const char *const lines[] = {
        /* the fast path's forms */
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>",
        "ml_program.global public @a.b-c$d(#ml_program.extern : tensor<2x3xbf16>) : tensor<2x3xbf16>",
        "ml_program.global nested mutable @m(#ml_program.extern : tensor<1xi8>) : tensor<1xi8>",
        "ml_program.global @n(#ml_program.extern : f32) : f32",
        "ml_program.global mutable @n(#ml_program.extern : tensor<3xf32>) : tensor<4xf32>",
        "ml_program.global private @t(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>x",
        "ml_program.global private @t(#ml_program.extern : f32) : f32<4>",
        "util.global private @u : tensor<4xf32>",
        "util.global mutable @u2 : tensor<4x4xf16>",
        /* look alike, but the general parser's */
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {x}",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n{x}",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> loc(\"f\":1:2)",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n  loc(\"f\")",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> // c\n{x}",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>{x}",
        "ml_program.global private  @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>",
        "ml_program.global\tprivate @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>",
        "ml_program.global private @\"q.r\"(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>",
        "ml_program.global private @a(#ext) : tensor<4xf32>",
        "ml_program.global private @a(#ml_program.extern : !t) : !t",
        "ml_program.global private @a(#ml_program.extern:tensor<4xf32>) : tensor<4xf32>",
        "ml_program.global private @a(#ml_program.extern : tensor<?x4xf32>) : tensor<?x4xf32>",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32, #enc>) : tensor<4xf32>",
        "ml_program.global private @a(dense<1.0> : tensor<4xf32>) : tensor<4xf32>",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) :tensor<4xf32>",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>>",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>(",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : tensor<>",
        "ml_program.global private @(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : ",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>) : \"s",
        "ml_program.global private @a(#ml_program.extern : tensor<4xf32>",
        "ml_program.global privatex @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>",
        "ml_program.globalx private @a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>",
        "util.global private @u {noinline} : tensor<4xf32>",
        "util.global private @u = #flow.parameter.named<\"m\"::\"k\"> : tensor<4xf32>",
        "util.global private @u : tensor<4xf32> loc(\"x\")",
        "util.global private @u : tensor<4xf32>\n{y}",
        "util.global private @u: tensor<4xf32>",
        "util.global private @u : !t",
    };
    static const char *const contexts[][2] = {
        {"module {\n  ", "\n}\n"},
        {"#ext = #ml_program.extern : tensor<4xf32>\n!t = tensor<4xf32>\nmodule {\n  ", "\n  %0 = foo.bar : i32 loc(\"l\")\n}\n"},
        {"", ""},
        {"module {\n  func.func @f() {\n    ", "\n  }\n}"},
        {"module {\n  %x = \"a.b\"() {k = ", "} : () -> ()\n}\n"}, /* not in a region */
    };
    size_t nl = sizeof lines / sizeof lines[0], taken = 0;
    char src[1024];
    for (size_t c = 0; c < sizeof contexts / sizeof contexts[0]; c++) {
        for (size_t i = 0; i < nl; i++) {
            snprintf(src, sizeof src, "%s%s%s", contexts[c][0], lines[i], contexts[c][1]);
            size_t f = fast_vs_general(src);
            if (c == 0 && i < 9)
                CHECK(f == 1, "the fast path did not take:\n%s", src);
            taken += f;
            /* runs of lines: the fast path chains them */
            for (size_t j = 0; j < nl; j += 7) {
                snprintf(src, sizeof src, "%s%s\n  %s\n\n  %s%s", contexts[c][0], lines[i], lines[j],
                         lines[(i + j) % nl], contexts[c][1]);
                taken += fast_vs_general(src);
            }
        }
    }
    CHECK(taken > 50, "fast path taken %zu times", taken);
    /* a file of simple lines with one odd line in the middle */
    char big[8192] = "module {\n";
    for (int k = 0; k < 40; k++) {
        char one[160];
        snprintf(one, sizeof one, k == 17 ? "  ml_program.global private @g%d(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {a}\n"
                 : k % 5 == 0 ? "  util.global private @g%d : tensor<4xf32>\n"
                 : "  ml_program.global private @g%d(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n", k);
        strcat(big, one);
    }
    strcat(big, "}\n");
    CHECK_EQ(fast_vs_general(big), 39);
}

static void on_diag(void *user, int severity, const char *msg)
{
    if (severity != WPACK_DIAG_ERROR)
        return;
    char *all = user;
    size_t n = strlen(all);
    snprintf(all + n, 2048 - n, "%s\n", msg);
}

static int drop_output(void *user, const void *data, size_t n)
{
    (void)user;
    (void)data;
    (void)n;
    return 0;
}

/* An archive at path (a mkstemp template) of f32 [4] zero tensors with
 * these names, opened. */
static wpack_archive *f32x4_archive(char *path, const char *const *names, size_t n)
{
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, path, NULL), WPACK_OK);
    float v[4] = {0};
    uint64_t dims[1] = {4};
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(wpack_writer_add_tensor(w, names[i], WPACK_DTYPE_F32, 1, dims, v, sizeof v), WPACK_OK);
    char err[256];
    CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_OK);
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, path, 0), WPACK_OK);
    return ar;
}

/* wpk_same_bytes (format/bytes.h), the short compare of the scanner's
 * fast path and the entry lookups: every length up to 40, equal, and
 * differing at each position (the 8-byte steps and the overlapping last
 * step must each see it). */
static void test_same_bytes(void)
{
    char a[41], b[41];
    for (size_t n = 0; n <= 40; n++) {
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = (char)('a' + i % 26);
        CHECK(wpk_same_bytes(a, b, n), "equal, length %zu", n);
        for (size_t k = 0; k < n; k++) {
            b[k] ^= 0x40;
            CHECK(!wpk_same_bytes(a, b, n), "length %zu, byte %zu differs", n, k);
            b[k] ^= 0x40;
        }
    }
}

/* A symbol defined 3 times: two errors, both naming it and its first place. */
static void test_duplicate_symbols(void)
{
    char path[] = "/tmp/wpk-dup-XXXXXX";
    static const char *const x[1] = {"x"};
    wpack_archive *ar = f32x4_archive(path, x, 1);
    const char *src = "module {\n"
                      "  ml_program.global private @x(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n"
                      "  ml_program.global private @y(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n"
                      "  ml_program.global private @x(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n"
                      "  util.global private @x : tensor<4xf32>\n"
                      "}\n";
    char all[2048] = "";
    wpack_resolve_options opt;
    wpack_resolve_options_init(&opt);
    opt.diag = on_diag;
    opt.diag_user = all;
    opt.source_name = "in.mlir";
    opt.allow_missing = 1;
    int rc = wpack_resolve_buffer(ar, src, strlen(src), &opt, drop_output, NULL, NULL);
    CHECK_EQ(rc, WPACK_E_DUPLICATE);
    CHECK(strstr(all, "in.mlir:4:3: global @x: symbol defined twice (first at 2:3)") != NULL, "%s", all);
    CHECK(strstr(all, "in.mlir:5:3: global @x: symbol defined 3 times (first at 2:3)") != NULL, "%s", all);
    CHECK(strstr(all, "@y") == NULL, "%s", all);
    wpack_close(ar);
    unlink(path);
}

typedef struct {
    char *p;
    size_t n;
} out_buf;

static int keep_output(void *user, const void *data, size_t n)
{
    out_buf *o = user;
    char *q = realloc(o->p, o->n + n + 1);
    if (!q)
        return 1;
    memcpy(q + o->n, data, n);
    o->n += n;
    q[o->n] = 0;
    o->p = q;
    return 0;
}

/* Many globals (the entry index, the next-entry guess, the duplicate check
 * through entry names): 100 entries w.0 .. w.99 (bytewise order w.0 w.1
 * w.10 ...), globals in numeric order. */
static void test_many_globals(void)
{
    char path[] = "/tmp/wpk-many-XXXXXX";
    static char names[100][16];
    const char *np[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "w.%d", i);
        np[i] = names[i];
    }
    wpack_archive *ar = f32x4_archive(path, np, 100);
    static char src[64 << 10];
    size_t o = (size_t)snprintf(src, sizeof src, "module {\n");
    for (int i = 0; i < 100; i++)
        o += (size_t)snprintf(src + o, sizeof src - o,
                              "  ml_program.global private @w.%d(#ml_program.extern : tensor<4xf32>) : "
                              "tensor<4xf32>\n", i);
    size_t body = o;
    o += (size_t)snprintf(src + o, sizeof src - o, "}\n");
    wpack_resolve_options opt;
    wpack_resolve_options_init(&opt);
    char all[2048] = "";
    opt.diag = on_diag;
    opt.diag_user = all;
    opt.source_name = "in.mlir";
    out_buf out = {NULL, 0};
    wpack_info info;
    wpack_get_info(ar, &info);
    CHECK_EQ(wpack_resolve_buffer(ar, src, o, &opt, keep_output, &out, NULL), WPACK_OK);
    for (int i = 0; i < 100 && out.p; i++) {
        char want[200];
        snprintf(want, sizeof want, "@w.%d(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> "
                 "{wpack.uri = \"wpack:%016llx/w.%d\"}\n", i, (unsigned long long)info.index_checksum, i);
        CHECK(strstr(out.p, want) != NULL, "no %s", want);
    }
    free(out.p);
    /* duplicates: of an entry's name (found through the entry), and of a
     * name no entry has (the hash set); non-weight and missing globals */
    o = body;
    o += (size_t)snprintf(src + o, sizeof src - o,
                          "  ml_program.global private @w.57(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n"
                          "  ml_program.global private @c(dense<1.0> : tensor<4xf32>) : tensor<4xf32>\n"
                          "  ml_program.global private @gone(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n"
                          "  ml_program.global private @c(dense<2.0> : tensor<4xf32>) : tensor<4xf32>\n"
                          "}\n");
    opt.allow_missing = 1;
    CHECK_EQ(wpack_resolve_buffer(ar, src, o, &opt, drop_output, NULL, NULL), WPACK_E_DUPLICATE);
    CHECK(strstr(all, "in.mlir:102:3: global @w.57: symbol defined twice (first at 59:3)") != NULL, "%s", all);
    CHECK(strstr(all, "in.mlir:105:3: global @c: symbol defined twice (first at 103:3)") != NULL, "%s", all);
    CHECK(strstr(all, "@gone") == NULL && strstr(all, "@w.56") == NULL, "%s", all);
    /* in reverse order every next-entry guess misses: the hash table */
    size_t r = (size_t)snprintf(src, sizeof src, "module {\n");
    for (int i = 99; i >= 0; i--)
        r += (size_t)snprintf(src + r, sizeof src - r,
                              "  util.global private @w.%d : tensor<4xf32>\n", i);
    r += (size_t)snprintf(src + r, sizeof src - r, "}\n");
    out = (out_buf){NULL, 0};
    CHECK_EQ(wpack_resolve_buffer(ar, src, r, &opt, keep_output, &out, NULL), WPACK_OK);
    for (int i = 0; i < 100 && out.p; i++) {
        char want[200];
        snprintf(want, sizeof want, "@w.%d {wpack.uri = \"wpack:%016llx/w.%d\"} : tensor<4xf32>\n", i,
                 (unsigned long long)info.index_checksum, i);
        CHECK(strstr(out.p, want) != NULL, "no %s", want);
    }
    free(out.p);
    wpack_close(ar);
    unlink(path);
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
    /* the emitter's unchecked form gives the same bytes */
    static const char *const names[] = {"a.b_c-d~e", "x y/%\"\xc3\xa9", "layers.0.w", "%", "~z\x7f"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[64], got[64];
        size_t n = strlen(names[i]), k = wpk_uri_encode(names[i], n, want, sizeof want);
        char *end = wpk_uri_put(got, names[i], n);
        CHECK((size_t)(end - got) == k && memcmp(got, want, k) == 0, "%s", names[i]);
    }
}

int main(void)
{
    RUN(test_pretty_forms);
    RUN(test_generic_and_strings);
    RUN(test_resources);
    RUN(test_errors);
    RUN(test_blob_errors);
    RUN(test_fast_path);
    RUN(test_duplicate_symbols);
    RUN(test_many_globals);
    RUN(test_same_bytes);
    RUN(test_types);
    RUN(test_uri_encode);
    return tl_finish();
}
