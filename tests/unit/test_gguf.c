/*
 * test_gguf.c - the GGUF reader and importer below the CLI: quantized GGML
 * types become block dtypes described in the archive (name ggml.NAME, block
 * geometry, params "ggml" + type id), shared by every input of one archive;
 * every truncation and every single-byte change of a valid file is refused
 * or accepted without reading outside it (run under ASan); the GGML table
 * and the .irpa entry metadata parser.
 */
#include <stdint.h>
#include <unistd.h>

#include "bytes.h"
#include "gguf.h"
#include "import.h"
#include "irpa.h"
#include "testlib.h"
#include "wpack_import.h"

typedef struct {
    uint8_t b[4096];
    size_t n;
} buf;

static void put(buf *o, const void *p, size_t n)
{
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void p32(buf *o, uint32_t v) { uint8_t x[4]; wpk_st32(x, v); put(o, x, 4); }
static void p64(buf *o, uint64_t v) { uint8_t x[8]; wpk_st64(x, v); put(o, x, 8); }
static void pstr(buf *o, const char *s) { p64(o, strlen(s)); put(o, s, strlen(s)); }

/* A GGUF v3 file: one string KV, a Q4_0 tensor ne [64, 2] and an f32 [3]. */
static void make(buf *o)
{
    memset(o, 0, sizeof *o);
    put(o, "GGUF", 4);
    p32(o, 3);
    p64(o, 2);
    p64(o, 1);
    pstr(o, "general.name");
    p32(o, GGUF_T_STRING);
    pstr(o, "t");
    pstr(o, "q");
    p32(o, 2);
    p64(o, 64);
    p64(o, 2);
    p32(o, 2);
    p64(o, 0);
    pstr(o, "f");
    p32(o, 1);
    p64(o, 3);
    p32(o, 0);
    p64(o, 96); /* 4 blocks of 18 = 72 bytes, padded to 96 */
    o->n = (o->n + 31) / 32 * 32;
    for (int i = 0; i < 72; i++)
        o->b[o->n + (size_t)i] = (uint8_t)(i * 7);
    o->n += 96;
    float f[3] = {1, 2, 3};
    put(o, f, sizeof f);
    o->n = (o->n + 31) / 32 * 32;
}

static void test_parse_valid(void)
{
    buf o;
    make(&o);
    gguf_file g;
    char err[300];
    int rc = gguf_parse(o.b, o.n, &g, err, sizeof err);
    CHECK(rc == WPACK_OK, "%s", err);
    if (rc)
        return;
    CHECK_EQ(g.n_tensors, 2);
    CHECK_EQ(g.t[0].nbytes, 72);
    CHECK_EQ(g.t[1].nbytes, 12);
    CHECK_EQ(g.alignment, 32);
    gguf_free(&g);
}

/* Every prefix is refused with a message; every one-byte change either
 * parses or is refused: ASan checks that nothing outside is read. */
static void test_truncations_and_flips(void)
{
    buf o;
    make(&o);
    char err[300];
    gguf_file g;
    for (size_t n = 0; n < o.n - 32; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, o.b, n);
        err[0] = 0;
        int rc = gguf_parse(copy, n, &g, err, sizeof err);
        CHECK(rc != WPACK_OK && err[0], "prefix of %zu bytes accepted", n);
        if (!rc)
            gguf_free(&g);
        free(copy);
    }
    size_t accepted = 0;
    for (size_t i = 0; i < o.n; i++)
        for (int v = 0; v < 256; v += 51) {
            uint8_t *copy = malloc(o.n);
            memcpy(copy, o.b, o.n);
            copy[i] = (uint8_t)(copy[i] ^ (v | 1));
            if (gguf_parse(copy, o.n, &g, err, sizeof err) == WPACK_OK) {
                accepted++;
                for (uint64_t k = 0; k < g.n_tensors; k++)
                    CHECK(g.data_start + g.t[k].offset + g.t[k].nbytes <= o.n, "tensor outside");
                gguf_free(&g);
            }
            free(copy);
        }
    CHECK(accepted > 0, "no change accepted at all (data bytes are free)");
}

static void test_types(void)
{
    CHECK(ggml_type_get(4) == NULL, "Q4_2 was removed");
    CHECK(ggml_type_get(2)->block_elems == 32 && ggml_type_get(2)->block_bytes == 18, "q4_0");
    CHECK(ggml_type_get(12)->block_bytes == 144, "q4_k");
    CHECK_EQ(ggml_type_of_dtype(WPACK_DTYPE_BF16), 30);
    CHECK_EQ(ggml_type_of_dtype(WPACK_DTYPE_U8), -1);
}

static void test_import_block_dtypes(void)
{
    buf o;
    make(&o);
    char dir[] = "/tmp/wpack-gguf-XXXXXX", in[300], out[300], err[600];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(in, sizeof in, "%s/m.gguf", dir);
    snprintf(out, sizeof out, "%s/m.wpack", dir);
    FILE *f = fopen(in, "wb");
    fwrite(o.b, 1, o.n, f);
    fclose(f);
    int dcode = 0;
    CHECK_EQ(wpk_import_detect(in, &dcode, err, sizeof err), WPK_IN_GGUF);
    wpack_writer *w = NULL;
    CHECK_EQ(wpack_writer_open(&w, out, NULL), WPACK_OK);
    wpk_sink s;
    wpk_sink_init(&s, w, err, sizeof err);
    wpk_import_opts o1 = {.prefix = "a"}, o2 = {.prefix = "b"};
    wpk_sink_input(&s, in, &o1);
    int rc = wpk_import_file(&s, in, WPK_IN_GGUF);
    CHECK(rc == WPACK_OK, "%s", err);
    wpk_sink_input(&s, in, &o2); /* the same file again: one block dtype for both */
    rc = wpk_import_file(&s, in, WPK_IN_GGUF);
    CHECK(rc == WPACK_OK, "%s", err);
    wpk_sink_free(&s);
    CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_OK);
    wpack_archive *ar = NULL;
    CHECK_EQ(wpack_open_file(&ar, out, WPACK_OPEN_VERIFY), WPACK_OK);
    wpack_info info;
    wpack_get_info(ar, &info);
    CHECK_EQ(info.block_dtype_count, 1);
    const char *name;
    uint32_t be, bb;
    const void *params;
    uint64_t plen;
    CHECK_EQ(wpack_block_dtype_at(ar, 0, &name, &be, &bb, &params, &plen), WPACK_OK);
    CHECK(strcmp(name, "ggml.q4_0") == 0, "%s", name);
    CHECK(be == 32 && bb == 18 && plen == 8 && memcmp(params, "ggml\2\0\0\0", 8) == 0,
          "geometry %u/%u params %llu", be, bb, (unsigned long long)plen);
    wpack_tensor t;
    CHECK_EQ(wpack_find(ar, "b.q", &t), WPACK_OK);
    CHECK(t.rank == 2 && t.dims[0] == 2 && t.dims[1] == 64 && t.nbytes == 72, "dims reversed");
    CHECK_EQ(t.dtype, WPACK_DTYPE_BLOCK_BASE);
    CHECK(((const uint8_t *)t.data)[71] == (uint8_t)(71 * 7), "bytes");
    wpack_close(ar);
    unlink(in);
    unlink(out);
    rmdir(dir);
}

static void test_irpa_meta(void)
{
    irpa_meta m;
#define M(s) (const uint8_t *)(s), sizeof(s) - 1
    CHECK(irpa_meta_parse(M("wpack:f32[2,3]"), &m) && m.dtype == WPACK_DTYPE_F32 &&
              m.rank == 2 && m.dims[1] == 3 && irpa_meta_nbytes(&m) == 24, "f32[2,3]");
    CHECK(irpa_meta_parse(M("wpack:i8[]"), &m) && m.rank == 0 && irpa_meta_nbytes(&m) == 1,
          "rank 0");
    CHECK(irpa_meta_parse(M("wpack:ggml.q4_0/32/18/67676d6c02000000[3,64]"), &m) && !m.dtype &&
              strcmp(m.block, "ggml.q4_0") == 0 && m.block_elems == 32 && m.block_bytes == 18 &&
              m.params_len == 8 && m.params[4] == 2 && irpa_meta_nbytes(&m) == 3 * 2 * 18,
          "block dtype");
    CHECK(irpa_meta_parse(M("wpack:ggml.q4_0/32/18/[3,33]"), &m) &&
              irpa_meta_nbytes(&m) == UINT64_MAX, "last dim not a multiple of the block");
    CHECK(!irpa_meta_parse(M("wpack:q/0/18/[2]"), &m), "zero block");
    CHECK(!irpa_meta_parse(M("wpack:q/1/1/abc[2]"), &m), "odd hex");
    CHECK(!irpa_meta_parse(M("wpack:/1/1/[2]"), &m), "no name");
    CHECK(!irpa_meta_parse(M("wpack:f32[2,]"), &m), "trailing comma");
    CHECK(!irpa_meta_parse(M("wpack:q4[2]"), &m), "unknown dtype");
    CHECK(!irpa_meta_parse(M("wpack:f32[1,1,1,1,1,1,1,1,1]"), &m), "rank 9");
    CHECK(!irpa_meta_parse(M("wpack:f32[99999999999999999999]"), &m), "overflow");
    CHECK(!irpa_meta_parse(M("wpack:f32[2]x"), &m), "trailing bytes");
    CHECK(irpa_meta_parse(M("wpack:f64[4294967296,4294967296]"), &m) &&
              irpa_meta_nbytes(&m) == UINT64_MAX, "size overflow");
#undef M
}

/* Nearly the longest dtype-and-dims metadata an entry can need (a 63-byte
 * block dtype name, geometry 2^32-1, 32 bytes of params, rank 8: 0 and
 * seven 20-digit dims, 306 bytes) is written whole and parsed back; it overflowed a 256-byte
 * buffer before (found by an audit: a crash of `export --to irpa`). */
static void test_irpa_meta_longest(void)
{
    char dir[] = "/tmp/wpack-irpa-XXXXXX", out[300], irpa[300], err[600] = "";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(out, sizeof out, "%s/b.wpack", dir);
    snprintf(irpa, sizeof irpa, "%s/b.irpa", dir);
    char name[64];
    memset(name, 'q', 63);
    name[63] = 0;
    uint8_t params[32];
    memset(params, 0xab, sizeof params);
    wpack_writer *w = NULL;
    int code = 0;
    CHECK_EQ(wpack_writer_open(&w, out, NULL), WPACK_OK);
    CHECK_EQ(wpack_writer_add_block_dtype(w, name, UINT32_MAX, UINT32_MAX, params, 32, &code),
             WPACK_OK);
    uint64_t big = UINT64_MAX, dims[8] = {0, big, big, big, big, big, big, big};
    CHECK_EQ(wpack_writer_add_tensor(w, "t", code, 8, dims, "", 0), WPACK_OK);
    CHECK(wpack_writer_finish(w, err, sizeof err) == WPACK_OK, "%s", err);
    wpack_archive *ar = NULL;
    CHECK_EQ(wpack_open_file(&ar, out, WPACK_OPEN_VERIFY), WPACK_OK);
    FILE *f = fopen(irpa, "w+b");
    CHECK(f != NULL, "open %s", irpa);
    CHECK(irpa_export(ar, fileno(f), 0, NULL, NULL, err, sizeof err) == WPACK_OK, "%s", err);
    static uint8_t b[1 << 16];
    rewind(f);
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    irpa_file ir = {0};
    irpa_meta m;
    CHECK(irpa_parse(b, n, &ir, err, sizeof err) == WPACK_OK && ir.n == 1, "%s", err);
    CHECK(ir.e && ir.e[0].meta_len == 306, "metadata of %llu bytes",
          ir.e ? (unsigned long long)ir.e[0].meta_len : 0ull);
    CHECK(ir.e && irpa_meta_parse(ir.e[0].meta, ir.e[0].meta_len, &m) && m.rank == 8 &&
              m.dims[7] == UINT64_MAX && m.dims[1] == big && strcmp(m.block, name) == 0 &&
              m.block_elems == UINT32_MAX && m.params_len == 32 && m.params[31] == 0xab,
          "parsed back");
    irpa_free(&ir);
    wpack_close(ar);
    unlink(out);
    unlink(irpa);
    rmdir(dir);
}

/* A block dtype the entry metadata "wpack:NAME/ELEMS/BYTES/HEX[DIMS]" cannot
 * name ('/' or '[' in its name, 64 bytes or more, params over 32 bytes) is
 * refused naming the entry and the dtype: the irpa was written without
 * metadata for it, and `wpack create` read it back as u8 [36]. */
static void test_irpa_export_unnamed_block_dtype(void)
{
    static const struct {
        const char *name;
        size_t plen;
        int ok;
    } cases[] = {{"q/x", 0, 0},  {"q[x", 0, 0},  {"q_ok", 32, 1}, {"q_big", 33, 0},
                 {"qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", 0, 1},
                 {"qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", 0, 0}};
    char dir[] = "/tmp/wpack-irpa-XXXXXX", in[300], out[300], err[1024];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(in, sizeof in, "%s/b.wpack", dir);
    snprintf(out, sizeof out, "%s/b.irpa", dir);
    uint8_t data[36] = {1, 2, 3}, params[33] = {7};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        wpack_writer *w = NULL;
        int q = 0;
        CHECK_EQ(wpack_writer_open(&w, in, NULL), WPACK_OK);
        CHECK_EQ(wpack_writer_add_block_dtype(w, cases[k].name, 32, 18, params, cases[k].plen, &q),
                 WPACK_OK);
        CHECK_EQ(wpack_writer_add_tensor(w, "w", q, 2, (uint64_t[]){2, 32}, data, sizeof data),
                 WPACK_OK);
        CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_OK);
        wpack_archive *ar = NULL;
        CHECK_EQ(wpack_open_file(&ar, in, 0), WPACK_OK);
        wpack_export_options o;
        wpack_export_options_init(&o);
        o.flags = WPACK_EXPORT_NO_SYNC;
        o.err = err;
        o.err_size = sizeof err;
        err[0] = 0;
        unlink(out);
        int rc = wpack_export_file(ar, out, WPACK_EXPORT_IRPA, &o);
        if (cases[k].ok) {
            CHECK(rc == WPACK_OK, "%s: %s", cases[k].name, err);
        } else {
            CHECK(rc == WPACK_E_UNSUPPORTED && strstr(err, "entry 'w'") &&
                      strstr(err, cases[k].name) && access(out, F_OK) != 0,
                  "%s: rc %d: %s", cases[k].name, rc, err);
        }
        wpack_close(ar);
        unlink(in);
    }
    unlink(out);
    rmdir(dir);
}

int main(void)
{
    RUN(test_parse_valid);
    RUN(test_truncations_and_flips);
    RUN(test_types);
    RUN(test_import_block_dtypes);
    RUN(test_irpa_meta);
    RUN(test_irpa_meta_longest);
    RUN(test_irpa_export_unnamed_block_dtype);
    return tl_finish();
}
