/* test_resolver_annotate.c - --annotate through the C API: an archive with
 * activation stats written by wpack_writer_add_stats(WPACK_STATS_ACTIVATION),
 * the op choice rule, the names a location carries (aliases, fused,
 * callsite, torch_xla JSON), idempotence; and the dense literal decoder
 * (f16/bf16 rounding, integer ranges, i1 packing, splats). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mlir_literal.h"
#include "mlir_scan.h"
#include "resolve_int.h"
#include "testlib.h"

typedef struct {
    char *p;
    size_t n;
} membuf;

static int mem_write(void *user, const void *data, size_t n)
{
    membuf *m = user;
    char *q = realloc(m->p, m->n + n + 1);
    if (!q)
        return 1;
    memcpy(q + m->n, data, n);
    m->n += n;
    q[m->n] = 0;
    m->p = q;
    return 0;
}

static void add_act(wpack_writer *w, const char *key, double mn, double mx)
{
    double ab = mx > -mn ? mx : -mn, mean = 0, var = 0;
    wpack_stats_in s = {.key = key, .kind = WPACK_STATS_ACTIVATION, .granularity = WPACK_GRAN_TENSOR,
                        .channels = 1, .count = 10, .min = &mn, .max = &mx, .absmax = &ab,
                        .mean = &mean, .variance = &var};
    CHECK_EQ(wpack_writer_add_stats(w, &s), WPACK_OK);
}

static void test_annotate_api(void)
{
    char path[] = "/tmp/wpk-annot-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, path, NULL), WPACK_OK);
    add_act(w, "0", -23.5, 18.9);
    add_act(w, "blk.1", -1, 0.25);
    double mn[3] = {-1, -2, -3}, mx[3] = {1, 2, 3}, ab[3] = {1, 2, 3}, z[3] = {0, 0, 0};
    wpack_stats_in pc = {.key = "pc", .kind = WPACK_STATS_ACTIVATION, .granularity = WPACK_GRAN_CHANNEL,
                         .axis = 0, .channels = 3, .count = 3, .min = mn, .max = mx, .absmax = ab,
                         .mean = z, .variance = z};
    CHECK_EQ(wpack_writer_add_stats(w, &pc), WPACK_OK);
    char err[256];
    CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_OK);
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, path, 0), WPACK_OK);

    const char *src =
        "module {\n"
        "  func.func @f(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
        "    %0 = arith.negf %a : tensor<3xf32> loc(#l0)\n"
        "    %1 = arith.addf %0, %a : tensor<3xf32> loc(callsite(#l0 at \"x.py\":1:1))\n"
        "    %2 = arith.mulf %1, %1 : tensor<3xf32> loc(fused[\"blk.1.sub\", unknown])\n"
        "    %3 = arith.subf %2, %2 : tensor<3xf32> loc(\"pc\")\n"
        "    return %3 : tensor<3xf32> loc(\"0\")\n"
        "  }\n"
        "}\n"
        "#l0 = loc(\"0\")\n";
    wpack_resolve_options o;
    wpack_resolve_options_init(&o);
    o.annotate = 1;
    membuf out = {0};
    wpack_resolve_result res;
    CHECK_EQ(wpack_resolve_buffer(ar, src, strlen(src), &o, mem_write, &out, &res), WPACK_OK);
    CHECK_EQ(res.annotated_ops, 3);
    CHECK(out.p && strstr(out.p, "%1 = arith.addf %0, %a {wpack.min = -23.5 : f32, wpack.max = 18.9 : f32, "
                                 "wpack.absmax = 23.5 : f32} : tensor<3xf32>"),
          "stats for '0' on the last op naming it (not on return): %s", out.p);
    CHECK(out.p && strstr(out.p, "%2 = arith.mulf %1, %1 {wpack.min = -1.0 : f32, wpack.max = 0.25 : f32"),
          "'blk.1' through a path under it");
    CHECK(out.p && strstr(out.p, "{wpack.axis = 0 : i64, wpack.min = dense<[-1.0, -2.0, -3.0]> : tensor<3xf32>"),
          "per-channel");
    /* idempotent */
    membuf again = {0};
    CHECK_EQ(wpack_resolve_buffer(ar, out.p, out.n, &o, mem_write, &again, NULL), WPACK_OK);
    CHECK(again.n == out.n && memcmp(again.p, out.p, out.n) == 0, "second run changed the text");
    /* another prefix adds its own next to the first */
    o.attr_prefix = "q";
    membuf other = {0};
    CHECK_EQ(wpack_resolve_buffer(ar, out.p, out.n, &o, mem_write, &other, NULL), WPACK_OK);
    CHECK(other.p && strstr(other.p, "{q.min = -23.5 : f32, q.max = 18.9 : f32, q.absmax = 23.5 : f32, "
                                     "wpack.min = -23.5 : f32"), "prefix q merged: %s", other.p);
    free(out.p);
    free(again.p);
    free(other.p);
    wpack_close(ar);
    unlink(path);
}

typedef struct {
    char names[16][128];
    int n;
} names;

static void collect(void *user, const char *s, size_t n)
{
    names *c = user;
    if (c->n < 16 && n < 128) {
        memcpy(c->names[c->n], s, n);
        c->names[c->n][n] = 0;
        c->n++;
    }
}

static void test_loc_names(void)
{
    const char *src =
        "module {\n"
        "  %0 = x.y loc(#a2)\n"
        "  %1 = x.y loc(\"{\\22nn_module_stack\\22: \\22k,layers.0,T;k2,layers.0.mlp,a,b.T\\22, \\22x\\22: [1, {\\22y\\22: \\22]\\22}]}\")\n"
        "}\n"
        "#a1 = loc(\"inner\"(\"f.py\":3:4))\n"
        "#a2 = loc(fused<\"m\">[callsite(#a1 at \"outer\"), \"f.py\":1:2, unknown])\n";
    wpk_mlir_doc *d;
    char err[200];
    CHECK_EQ(wpk_mlir_scan_buffer(src, strlen(src), WPK_SCAN_OPS, &d, err, sizeof err), 0);
    if (!d)
        return;
    CHECK_EQ(d->nops, 2);
    names c = {0};
    wpk_loc_walk w;
    CHECK_EQ(wpk_loc_walk_init(&w, d), 0);
    wpk_loc_names(&w, d->ops[0].loc, collect, &c);
    CHECK_EQ(c.n, 2);
    CHECK(c.n == 2 && strcmp(c.names[0], "inner") == 0 && strcmp(c.names[1], "outer") == 0, "fused/callsite/alias");
    names j = {0};
    wpk_loc_names(&w, d->ops[1].loc, collect, &j);
    CHECK_EQ(j.n, 2);
    CHECK(j.n == 2 && strcmp(j.names[0], "layers.0") == 0 && strcmp(j.names[1], "layers.0.mlp,a") == 0,
          "nn_module_stack paths: %s %s", j.names[0], j.names[1]);
    wpk_loc_walk_free(&w);
    wpk_mlir_doc_free(d);
}

static int collect_bytes(void *user, const void *p, size_t n)
{
    return mem_write(user, p, n);
}

/* decode `value` for type `ty`; returns rc, bytes into out */
static int decode(const char *value, const char *ty, membuf *out, char *why)
{
    wpk_mlir_tensor t;
    char w2[200];
    if (wpk_mlir_parse_tensor(ty, strlen(ty), &t, w2, sizeof w2))
        return -1;
    size_t where;
    out->n = 0;
    return wpk_literal_decode(value, (wpk_span){0, strlen(value)}, &t, collect_bytes, out, why, 200, &where);
}

static void test_dense_decode(void)
{
    membuf b = {0};
    char why[200];
    /* f16: 1.0, -2.0, 65504 (max), 1e-7 (subnormal), 65520 (rounds to inf), 1+2^-11 (tie -> even) */
    CHECK_EQ(decode("dense<[1.0, -2.0, 65504.0, 1.0e-7, 65520.0, 1.00048828125]>", "tensor<6xf16>", &b, why), 0);
    uint16_t h[6];
    memcpy(h, b.p, 12);
    CHECK(h[0] == 0x3C00 && h[1] == 0xC000 && h[2] == 0x7BFF && h[3] == 0x0002 && h[4] == 0x7C00 &&
              h[5] == 0x3C00, "f16 %04x %04x %04x %04x %04x %04x", h[0], h[1], h[2], h[3], h[4], h[5]);
    /* bf16: 1.01171875 is a tie between 0x3F81 and 0x3F82 -> even 0x3F82 */
    CHECK_EQ(decode("dense<[1.01171875, -0.0]>", "tensor<2xbf16>", &b, why), 0);
    memcpy(h, b.p, 4);
    CHECK(h[0] == 0x3F82 && h[1] == 0x8000, "bf16 %04x %04x", h[0], h[1]);
    CHECK_EQ(decode("dense<[-128, 255]>", "tensor<2xi8>", &b, why), 0);
    CHECK(b.n == 2 && (unsigned char)b.p[0] == 0x80 && (unsigned char)b.p[1] == 0xFF, "i8 range");
    CHECK_EQ(decode("dense<[-129, 1]>", "tensor<2xi8>", &b, why), WPACK_E_INPUT);
    CHECK_EQ(decode("dense<[128, 1]>", "tensor<2xsi8>", &b, why), WPACK_E_INPUT);
    CHECK_EQ(decode("dense<[-1]>", "tensor<1xui32>", &b, why), WPACK_E_INPUT);
    CHECK_EQ(decode("dense<\"0x0D01\">", "tensor<9xi1>", &b, why), 0);
    CHECK(b.n == 9 && b.p[0] == 1 && b.p[1] == 0 && b.p[2] == 1 && b.p[3] == 1 && b.p[4] == 0 && b.p[8] == 1,
          "i1 bits LSB first");
    CHECK_EQ(decode("dense<\"0x0D\">", "tensor<9xi1>", &b, why), WPACK_E_INPUT);
    CHECK_EQ(decode("dense<7>", "tensor<2x3xi16>", &b, why), 0);
    CHECK(b.n == 12 && b.p[10] == 7 && b.p[11] == 0, "splat");
    CHECK_EQ(decode("dense<[[1, 2], [3]]>", "tensor<2x2xi32>", &b, why), WPACK_E_INPUT);
    CHECK_EQ(decode("dense<[(1.0, 2.0)]>", "tensor<1xf32>", &b, why), WPACK_E_UNSUPPORTED);
    CHECK_EQ(decode("dense<\"0xABC\">", "tensor<2xi8>", &b, why), WPACK_E_INPUT);
    free(b.p);
}

/* splat(value, type): 1 splat (element into e), 0 not, -rc on error */
static int splat(const char *value, const char *ty, unsigned char e[8])
{
    wpk_mlir_tensor t;
    char why[200];
    size_t where;
    int is = -1;
    if (wpk_mlir_parse_tensor(ty, strlen(ty), &t, why, sizeof why))
        return -100;
    memset(e, 0xAA, 8);
    int rc = wpk_literal_splat(value, (wpk_span){0, strlen(value)}, &t, e, &is, why, sizeof why, &where);
    return rc ? -rc : is;
}

/* externalize makes a splat entry of exactly what wpk_literal_decode repeats */
static void test_literal_splat(void)
{
    unsigned char e[8];
    CHECK_EQ(splat("dense<1.0>", "tensor<1048576x1048576xf32>", e), 1);
    CHECK(e[0] == 0 && e[1] == 0 && e[2] == 0x80 && e[3] == 0x3F, "f32 1.0");
    CHECK_EQ(splat("dense< \"0x0000C03F\" >", "tensor<4x4xf32>", e), 1);
    CHECK(e[2] == 0xC0 && e[3] == 0x3F, "hex splat");
    CHECK_EQ(splat("dense<\"0xFF\">", "tensor<9xi1>", e), 1);
    CHECK_EQ(e[0], 1);
    CHECK_EQ(splat("dense<\"0x00\">", "tensor<64xi1>", e), 1);
    CHECK_EQ(e[0], 0);
    CHECK_EQ(splat("dense<\"0xFF\">", "tensor<8xi1>", e), 0);   /* bit-packed */
    CHECK_EQ(splat("dense<\"0x0D\">", "tensor<64xi1>", e), 0);  /* neither: decode says */
    CHECK_EQ(splat("dense<true>", "tensor<3xi1>", e), 1);
    CHECK_EQ(e[0], 1);
    CHECK_EQ(splat("dense<-3>", "tensor<7xi64>", e), 1);
    CHECK(e[0] == 0xFD && e[7] == 0xFF, "i64 -3");
    CHECK_EQ(splat("dense<[1.0, 2.0]>", "tensor<2xf32>", e), 0);
    CHECK_EQ(splat("dense<[1.0]>", "tensor<1xf32>", e), 0);
    CHECK_EQ(splat("dense<\"0x0000803F00000040\">", "tensor<2xf32>", e), 0);
    CHECK_EQ(splat("dense<\"0x0000803F\">", "tensor<1xf32>", e), 0); /* all its data */
    CHECK_EQ(splat("dense<1.5x>", "tensor<4xf32>", e), -WPACK_E_INPUT);
    CHECK_EQ(splat("dense<300>", "tensor<4xi8>", e), -WPACK_E_INPUT);
    CHECK_EQ(splat("dense 1.0", "tensor<4xf32>", e), -WPACK_E_INPUT);
    /* decode repeats the same element */
    membuf b = {0};
    char why[200];
    CHECK_EQ(decode("dense<\"0x0000C03F\">", "tensor<3xf32>", &b, why), 0);
    CHECK(b.n == 12 && (unsigned char)b.p[10] == 0xC0 && (unsigned char)b.p[11] == 0x3F, "repeat");
    CHECK_EQ(decode("dense<\"0xFF\">", "tensor<9xi1>", &b, why), 0);
    CHECK(b.n == 9 && b.p[0] == 1 && b.p[8] == 1, "i1 splat");
    free(b.p);
}

int main(void)
{
    RUN(test_annotate_api);
    RUN(test_loc_names);
    RUN(test_dense_decode);
    RUN(test_literal_splat);
    return tl_finish();
}
