/* test_resolve_strict.c - issue 13 point 4 through the C API: the
 * wpack_resolve_options fields strict, allow_none, strip_prefixes and
 * module_map_*, the archive's wpack.module_names (wpack_writer_add_name to
 * a module path with activation stats only), the result counters, and the
 * [WPACK_E_*] name at the end of every error diagnostic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"
#include "wpack_mlir.h"

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

/* The diagnostics, one per line, and how many errors lack a code. */
typedef struct {
    char text[8192];
    size_t n;
    int uncoded_errors;
} diags;

static void on_diag(void *user, int severity, const char *msg)
{
    diags *d = user;
    if (severity == WPACK_DIAG_ERROR) {
        size_t k = strlen(msg);
        if (k == 0 || msg[k - 1] != ']' || !strstr(msg, " [WPACK_E_"))
            d->uncoded_errors++;
    }
    int w = snprintf(d->text + d->n, sizeof d->text - d->n, "%d %s\n", severity, msg);
    if (w > 0 && (size_t)w < sizeof d->text - d->n)
        d->n += (size_t)w;
}

static void add_act(wpack_writer *w, const char *key, double mn, double mx)
{
    double ab = mx > -mn ? mx : -mn, mean = 0, var = 0;
    wpack_stats_in s = {.key = key, .kind = WPACK_STATS_ACTIVATION, .granularity = WPACK_GRAN_TENSOR,
                        .channels = 1, .count = 10, .min = &mn, .max = &mx, .absmax = &ab,
                        .mean = &mean, .variance = &var};
    CHECK_EQ(wpack_writer_add_stats(w, &s), WPACK_OK);
}

static const char ir[] =
    "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = arith.negf %a : tensor<4xf32> loc(\"model.0\"(\"t.py\":2:1))\n"
    "  %1 = arith.addf %0, %a : tensor<4xf32> loc(\"model.1.inner\"(\"t.py\":3:1))\n"
    "  return %1 : tensor<4xf32> loc(\"t.py\":4:1)\n"
    "}\n";

static int run(const wpack_archive *ar, const wpack_resolve_options *base, membuf *out, diags *d,
               wpack_resolve_result *res)
{
    wpack_resolve_options o = *base;
    o.diag = on_diag;
    o.diag_user = d;
    memset(d, 0, sizeof *d);
    free(out->p);
    out->p = NULL;
    out->n = 0;
    return wpack_resolve_buffer(ar, ir, sizeof ir - 1, &o, mem_write, out, res);
}

static void test_options(void)
{
    char path[] = "/tmp/wpk-strict-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, path, NULL), WPACK_OK);
    add_act(w, "0", -2, 1);
    add_act(w, "1", 0, 3);
    char err[256];
    CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_OK);
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, path, 0), WPACK_OK);

    wpack_resolve_options opt;
    wpack_resolve_options_init(&opt);
    CHECK(opt.strict == 0 && opt.allow_none == 0 && opt.strip_count == 0 && opt.module_map_count == 0,
          "defaults");
    opt.annotate = 1;
    membuf out = {0};
    diags d;
    wpack_resolve_result res;

    /* nothing matches: WPACK_E_EMPTY, nothing written */
    CHECK_EQ(run(ar, &opt, &out, &d, &res), WPACK_E_EMPTY);
    CHECK(out.n == 0, "nothing written on error");
    CHECK(strstr(d.text, "'model.0'") != NULL, "the IR's path is named: %s", d.text);
    CHECK_EQ(res.annotated_ops, 0);
    CHECK_EQ(res.unmatched_ops, 2);
    CHECK_EQ(d.uncoded_errors, 0);
    opt.allow_none = 1;
    CHECK_EQ(run(ar, &opt, &out, &d, &res), WPACK_OK);
    CHECK(out.n == sizeof ir - 1 && memcmp(out.p, ir, out.n) == 0, "unchanged");

    /* strip prefix: both ops */
    const char *strips[] = {"model"};
    opt.allow_none = 0;
    opt.strict = 1;
    opt.strip_prefixes = strips;
    opt.strip_count = 1;
    CHECK_EQ(run(ar, &opt, &out, &d, &res), WPACK_OK);
    CHECK_EQ(res.annotated_ops, 2);
    CHECK_EQ(res.unmatched_ops, 0);
    CHECK(out.p && strstr(out.p, "%0 = arith.negf %a {wpack.min = -2.0 : f32") != NULL, "%s", out.p);

    /* module map: model.1 only; strict names record "0" and the op at 2:3 */
    const char *from[] = {"model.1"}, *to[] = {"1"};
    opt.strip_prefixes = NULL;
    opt.strip_count = 0;
    opt.module_map_ir = from;
    opt.module_map_keys = to;
    opt.module_map_count = 1;
    CHECK_EQ(run(ar, &opt, &out, &d, &res), WPACK_E_NOT_FOUND);
    CHECK(strstr(d.text, "1 of 2 activation stats records are named by no op's location") &&
              strstr(d.text, "'0' [WPACK_E_NOT_FOUND]"), "%s", d.text);
    CHECK(strstr(d.text, "2:3 'model.0'") != NULL, "%s", d.text);
    CHECK_EQ(d.uncoded_errors, 0);
    opt.strict = 0;
    CHECK_EQ(run(ar, &opt, &out, &d, &res), WPACK_OK);
    CHECK_EQ(res.annotated_ops, 1);
    CHECK_EQ(res.unplaced_stats, 1);
    CHECK_EQ(res.unmatched_ops, 1);
    free(out.p);
    wpack_close(ar);
    unlink(path);
}

/* wpack_writer_add_name to a module path: stored as wpack.module_names */
static void test_module_names(void)
{
    char path[] = "/tmp/wpk-strict-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, path, NULL), WPACK_OK);
    float v[4] = {1, 2, 3, 4};
    uint64_t dims[1] = {4};
    CHECK_EQ(wpack_writer_add_tensor(w, "t", WPACK_DTYPE_F32, 1, dims, v, sizeof v), WPACK_OK);
    CHECK_EQ(wpack_writer_add_name(w, "model.1", "1"), WPACK_OK); /* before its stats */
    add_act(w, "0", -2, 1);
    add_act(w, "1", 0, 3);
    CHECK_EQ(wpack_writer_add_name(w, "model.0", "0"), WPACK_OK);
    CHECK_EQ(wpack_writer_add_name(w, "other", "t"), WPACK_OK);
    char err[256];
    CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_OK);
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, path, 0), WPACK_OK);
    CHECK_EQ(wpack_namemap_count(ar), 1);
    wpack_meta m, e;
    CHECK_EQ(wpack_meta_find(ar, "wpack.module_names", &m), WPACK_OK);
    CHECK(m.type == WPACK_META_ARRAY && m.elem_type == WPACK_META_STRING && m.count == 4, "array");
    const char *want[] = {"model.0", "0", "model.1", "1"};
    for (uint64_t j = 0; j < 4 && m.count == 4; j++) {
        CHECK_EQ(wpack_meta_elem(ar, &m, j, &e), WPACK_OK);
        CHECK(strcmp(e.str, want[j]) == 0, "element %llu is %s", (unsigned long long)j, e.str);
    }
    wpack_resolve_options opt;
    wpack_resolve_options_init(&opt);
    opt.annotate = 1;
    opt.strict = 1;
    membuf out = {0};
    diags d;
    wpack_resolve_result res;
    CHECK_EQ(run(ar, &opt, &out, &d, &res), WPACK_OK);
    CHECK_EQ(res.annotated_ops, 2);
    free(out.p);
    wpack_close(ar);

    /* a target that is neither a tensor nor an activation key still fails */
    CHECK_EQ(wpack_writer_open(&w, path, NULL), WPACK_OK);
    add_act(w, "0", -2, 1);
    CHECK_EQ(wpack_writer_add_name(w, "model.9", "9"), WPACK_OK);
    CHECK_EQ(wpack_writer_finish(w, err, sizeof err), WPACK_E_NAMEMAP);
    CHECK(strstr(err, "no tensor '9'") != NULL, "%s", err);
    unlink(path);
}

int main(void)
{
    RUN(test_options);
    RUN(test_module_names);
    return tl_finish();
}
