/*
 * test_options_reserved.c - wpack.h, "Structs never change size": every
 * struct a caller fills ends with reserved fields that its *_init() call
 * zeroes and that every call taking it refuses when not zero
 * (WPACK_E_INVALID_ARGUMENT, the message naming the struct and the field),
 * before doing anything else; the structs the library fills get theirs
 * set to zero.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "wpack.h"
#include "wpack_dense.h"
#include "wpack_import.h"
#include "wpack_mlir.h"
#include "wpack_remote.h"

static char dir[] = "/tmp/wpk-reserved-XXXXXX";
static char archive[600];

static char *p(char *buf, const char *name)
{
    snprintf(buf, 600, "%s/%s", dir, name);
    return buf;
}

static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Every reserved field of *o zero. */
#define RESERVED_ZERO(o) reserved_zero((o)->reserved_ptr, NELEM((o)->reserved_ptr), (o)->reserved, \
                                       NELEM((o)->reserved))
static int reserved_zero(void *const *ptr, size_t np, const uint64_t *u, size_t nu)
{
    for (size_t k = 0; k < np; k++)
        if (ptr[k])
            return 0;
    for (size_t k = 0; k < nu; k++)
        if (u[k])
            return 0;
    return 1;
}

/* The message a refusal must carry: "STRUCT: FIELD[K] is not zero". */
static const char *expected(char *buf, const char *strct, const char *field, size_t k)
{
    snprintf(buf, 200, "%s: %s[%zu] is not zero", strct, field, k);
    return buf;
}

/* Reserved field k of *bad (the u64s, then the pointers; k < NRES) set
 * non-zero, and in want the message its refusal must carry. */
#define NRES(o) (NELEM((o)->reserved) + NELEM((o)->reserved_ptr))
#define SET_RESERVED(bad, k, strct, want) \
    set_reserved((bad)->reserved, NELEM((bad)->reserved), (bad)->reserved_ptr, k, strct, want)
static void set_reserved(uint64_t *u, size_t nu, void **ptr, size_t k, const char *strct,
                         char *want)
{
    if (k < nu) {
        u[k] = 1ull << (k % 64);
        expected(want, strct, "reserved", k);
    } else {
        ptr[k - nu] = want;
        expected(want, strct, "reserved_ptr", k - nu);
    }
}

static char last[4096];
static void on_diag(void *user, int severity, const char *message)
{
    (void)user;
    if (severity == WPACK_DIAG_ERROR && !last[0])
        snprintf(last, sizeof last, "%s", message);
}

static int writes;
static int count_write(void *user, const void *data, size_t n)
{
    (void)user;
    (void)data;
    (void)n;
    writes++;
    return 0;
}

/* ------------------------------------------------------------ the writer */

static void test_writer_options(void)
{
    wpack_writer_options o;
    memset(&o, 0xa5, sizeof o);
    wpack_writer_options_init(&o);
    CHECK(RESERVED_ZERO(&o), "init left reserved fields set");
    char path[600], want[200];
    p(path, "w.wpack");
    int before = entries();
    for (size_t k = 0; k < NRES(&o); k++) {
        wpack_writer_options bad = o;
        SET_RESERVED(&bad, k, "wpack_writer_options", want);
        wpack_writer *w;
        CHECK_EQ(wpack_writer_open(&w, path, &bad), WPACK_E_INVALID_ARGUMENT);
        CHECK(w && strstr(wpack_writer_errmsg(w), want), "want '%s': '%s'", want,
              w ? wpack_writer_errmsg(w) : "(no writer)");
        wpack_writer_abort(w);
    }
    CHECK_EQ(entries(), before);
    /* init'd: works */
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, path, &o), WPACK_OK);
    float v[4] = {1, -2, 3, 4};
    uint64_t dims[1] = {4};
    int64_t arr[2] = {7, 8};
    CHECK_EQ(wpack_writer_add_tensor(w, "w", WPACK_DTYPE_F32, 1, dims, v, sizeof v), WPACK_OK);
    CHECK_EQ(wpack_writer_set_array(w, "arr", WPACK_META_I64, 2, arr), WPACK_OK);
    CHECK_EQ(wpack_writer_set_string(w, "s", "x"), WPACK_OK);
    char err[300];
    int frc = wpack_writer_finish(w, err, sizeof err); /* once: CHECK_EQ evaluates twice */
    CHECK(frc == WPACK_OK, "finish: %s", err);
    snprintf(archive, sizeof archive, "%s", path);
}

/* --------------------------------------------- the reader's output structs */

static void test_outputs_zeroed(void)
{
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, archive, 0), WPACK_OK);
    wpack_tensor t;
    memset(&t, 0xa5, sizeof t);
    CHECK_EQ(wpack_tensor_at(ar, 0, &t), WPACK_OK);
    CHECK(RESERVED_ZERO(&t), "wpack_tensor_at");
    memset(&t, 0xa5, sizeof t);
    CHECK_EQ(wpack_find(ar, "w", &t), WPACK_OK);
    CHECK(RESERVED_ZERO(&t), "wpack_find");
    wpack_info in;
    memset(&in, 0xa5, sizeof in);
    wpack_get_info(ar, &in);
    CHECK(RESERVED_ZERO(&in), "wpack_get_info");
    wpack_meta m, e;
    memset(&m, 0xa5, sizeof m);
    CHECK_EQ(wpack_meta_find(ar, "arr", &m), WPACK_OK);
    CHECK(RESERVED_ZERO(&m), "wpack_meta_find");
    memset(&e, 0xa5, sizeof e);
    CHECK_EQ(wpack_meta_elem(ar, &m, 1, &e), WPACK_OK);
    CHECK(RESERVED_ZERO(&e) && e.i64 == 8, "wpack_meta_elem");
    memset(&m, 0xa5, sizeof m);
    CHECK_EQ(wpack_meta_at(ar, 0, &m), WPACK_OK);
    CHECK(RESERVED_ZERO(&m), "wpack_meta_at");
    wpack_stats s;
    memset(&s, 0xa5, sizeof s);
    CHECK_EQ(wpack_stats_find(ar, "w", WPACK_STATS_WEIGHT, &s), WPACK_OK);
    CHECK(RESERVED_ZERO(&s), "wpack_stats_find");
    memset(&s, 0xa5, sizeof s);
    CHECK_EQ(wpack_stats_at(ar, 0, &s), WPACK_OK);
    CHECK(RESERVED_ZERO(&s), "wpack_stats_at");
    wpack_close(ar);
}

/* ------------------------------------------------------------ wpack_source */

typedef struct {
    const uint8_t *p;
    size_t n;
    int closed;
} mem;

static int mem_read(void *user, uint64_t off, void *dst, size_t n, char *msg, size_t len)
{
    mem *m = user;
    (void)msg;
    (void)len;
    memcpy(dst, m->p + off, n);
    return WPACK_OK;
}

static void mem_close(void *user)
{
    ((mem *)user)->closed++;
}

static void test_source(void)
{
    size_t n;
    uint8_t *bytes = test_slurp(archive, &n);
    CHECK(bytes != NULL, "read %s", archive);
    if (!bytes)
        return;
    mem m = {bytes, n, 0};
    wpack_source s;
    memset(&s, 0, sizeof s);
    s.user = &m;
    s.name = "mem://x";
    s.size = n;
    s.read = mem_read;
    s.close = mem_close;
    char want[200];
    for (size_t k = 0; k < NRES(&s); k++) {
        wpack_source bad = s;
        SET_RESERVED(&bad, k, "wpack_source", want);
        wpack_archive *ar;
        m.closed = 0;
        CHECK_EQ(wpack_open_source(&ar, &bad, 0), WPACK_E_INVALID_ARGUMENT);
        CHECK(ar && strstr(wpack_errmsg(ar), want), "want '%s': '%s'", want,
              ar ? wpack_errmsg(ar) : "(no handle)");
        wpack_close(ar);
        CHECK_EQ(m.closed, 1); /* its last use, as for any failed open */
    }
    wpack_archive *ar;
    m.closed = 0;
    CHECK_EQ(wpack_open_source(&ar, &s, 0), WPACK_OK);
    CHECK_EQ(wpack_count(ar), 1);
    wpack_close(ar);
    CHECK_EQ(m.closed, 1);
    free(bytes);
}

/* ---------------------------------------------------------- wpack_stats_in */

static void test_stats_in(void)
{
    double v[5] = {-1, 2, 2, 0.5, 1}; /* min max absmax mean variance */
    wpack_stats_in s;
    memset(&s, 0, sizeof s);
    s.key = "m";
    s.kind = WPACK_STATS_ACTIVATION;
    s.channels = 1;
    s.count = 4;
    s.min = &v[0];
    s.max = &v[1];
    s.absmax = &v[2];
    s.mean = &v[3];
    s.variance = &v[4];
    char want[200], err[1024], path[600];
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, p(path, "st.wpack"), NULL), WPACK_OK);
    for (size_t k = 0; k < NRES(&s); k++) {
        wpack_stats_in bad = s;
        SET_RESERVED(&bad, k, "wpack_stats_in", want);
        CHECK_EQ(wpack_writer_add_stats(w, &bad), WPACK_E_INVALID_ARGUMENT);
        CHECK(strstr(wpack_writer_errmsg(w), want), "writer: want '%s': '%s'", want,
              wpack_writer_errmsg(w));
        err[0] = 0;
        CHECK_EQ(wpack_update_add_stats(archive, &bad, 1, err, sizeof err),
                 WPACK_E_INVALID_ARGUMENT);
        CHECK(strstr(err, want), "update: want '%s': '%s'", want, err);
    }
    CHECK_EQ(wpack_writer_add_stats(w, &s), WPACK_OK); /* refused: the writer goes on */
    int frc = wpack_writer_finish(w, err, sizeof err); /* once: CHECK_EQ evaluates twice */
    CHECK(frc == WPACK_OK, "finish: %s", err);
    unlink(path);
    CHECK_EQ(wpack_update_add_stats(archive, &s, 1, err, sizeof err), WPACK_OK);
    wpack_archive *ar;
    wpack_stats got;
    CHECK_EQ(wpack_open_file(&ar, archive, 0), WPACK_OK);
    CHECK_EQ(wpack_stats_find(ar, "m", WPACK_STATS_ACTIVATION, &got), WPACK_OK);
    wpack_close(ar);
}

/* ------------------------------------------------------------ the resolver */

static const char extern_ir[] =
    "ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n";
static const char inline_ir[] =
    "ml_program.global private @big(dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : "
    "tensor<8xf32>) : tensor<8xf32>\n";

static void test_resolve_options(void)
{
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, archive, 0), WPACK_OK);
    wpack_resolve_options o;
    memset(&o, 0xa5, sizeof o);
    wpack_resolve_options_init(&o);
    CHECK(RESERVED_ZERO(&o), "init left reserved fields set");
    o.diag = on_diag;
    char in[600], out[600], want[200];
    FILE *f = fopen(p(in, "in.mlir"), "w");
    if (f) {
        fputs(extern_ir, f);
        fclose(f);
    }
    p(out, "out.mlir");
    int before = entries();
    for (size_t k = 0; k < NRES(&o); k++) {
        wpack_resolve_options bad = o;
        SET_RESERVED(&bad, k, "wpack_resolve_options", want);
        last[0] = 0;
        writes = 0;
        CHECK_EQ(wpack_resolve_buffer(ar, extern_ir, strlen(extern_ir), &bad, count_write, NULL,
                                      NULL),
                 WPACK_E_INVALID_ARGUMENT);
        CHECK(strstr(last, want) && writes == 0, "buffer: want '%s': '%s' (%d writes)", want, last,
              writes);
        last[0] = 0;
        CHECK_EQ(wpack_resolve_file(ar, in, out, &bad, NULL), WPACK_E_INVALID_ARGUMENT);
        CHECK(strstr(last, want), "file: want '%s': '%s'", want, last);
    }
    CHECK_EQ(entries(), before);
    /* init'd: works, and the result's reserved fields come back zero */
    wpack_resolve_result res;
    memset(&res, 0xa5, sizeof res);
    last[0] = 0;
    CHECK_EQ(wpack_resolve_buffer(ar, extern_ir, strlen(extern_ir), &o, count_write, NULL, &res),
             WPACK_OK);
    CHECK(RESERVED_ZERO(&res) && res.resolved == 1, "buffer result (%s)", last);
    memset(&res, 0xa5, sizeof res);
    CHECK_EQ(wpack_resolve_file(ar, in, out, &o, &res), WPACK_OK);
    CHECK(RESERVED_ZERO(&res) && res.resolved == 1 && access(out, F_OK) == 0, "file result (%s)",
          last);
    unlink(out);
    unlink(in);
    wpack_close(ar);
}

static void test_externalize_options(void)
{
    wpack_externalize_options o;
    memset(&o, 0xa5, sizeof o);
    wpack_externalize_options_init(&o);
    CHECK(RESERVED_ZERO(&o), "init left reserved fields set");
    o.diag = on_diag;
    o.min_bytes = 1;
    char in[600], out[600], arp[600], want[200];
    FILE *f = fopen(p(in, "big.mlir"), "w");
    if (f) {
        fputs(inline_ir, f);
        fclose(f);
    }
    p(out, "ext.mlir");
    p(arp, "ext.wpack");
    int before = entries();
    for (size_t k = 0; k < NRES(&o); k++) {
        wpack_externalize_options bad = o;
        SET_RESERVED(&bad, k, "wpack_externalize_options", want);
        last[0] = 0;
        CHECK_EQ(wpack_externalize_file(in, out, arp, &bad, NULL), WPACK_E_INVALID_ARGUMENT);
        CHECK(strstr(last, want), "want '%s': '%s'", want, last);
    }
    /* the new archive's writer options are checked too, before anything */
    wpack_writer_options wo;
    wpack_writer_options_init(&wo);
    wo.reserved_ptr[1] = &wo;
    wpack_externalize_options bad = o;
    bad.writer = &wo;
    last[0] = 0;
    CHECK_EQ(wpack_externalize_file(in, out, arp, &bad, NULL), WPACK_E_INVALID_ARGUMENT);
    CHECK(strstr(last, "writer: reserved_ptr[1] is not zero"), "writer: '%s'", last);
    CHECK_EQ(entries(), before);
    /* init'd: works */
    wpack_writer_options_init(&wo);
    o.writer = &wo;
    wpack_externalize_result res;
    memset(&res, 0xa5, sizeof res);
    last[0] = 0;
    CHECK_EQ(wpack_externalize_file(in, out, arp, &o, &res), WPACK_OK);
    CHECK(RESERVED_ZERO(&res) && res.moved == 1, "result (%s)", last);
    unlink(out);
    unlink(arp);
    unlink(in);
}

/* ------------------------------------------------------ import and export */

static void test_import_export_options(void)
{
    char err[1024], want[200], path[600];
    wpack_writer *w;
    CHECK_EQ(wpack_writer_open(&w, p(path, "imp.wpack"), NULL), WPACK_OK);
    wpack_import_options io;
    wpack_import_options_init(&io);
    io.err = err;
    io.err_size = sizeof err;
    io.reserved_ptr[1] = &io;
    CHECK_EQ(wpack_import_file(w, NULL, &io), WPACK_E_INVALID_ARGUMENT);
    CHECK(strstr(err, expected(want, "wpack_import_options", "reserved_ptr", 1)), "'%s'", err);
    io.reserved_ptr[1] = NULL;
    io.reserved[0] = 5;
    CHECK_EQ(wpack_import_file(w, NULL, &io), WPACK_E_INVALID_ARGUMENT);
    CHECK(strstr(err, expected(want, "wpack_import_options", "reserved", 0)), "'%s'", err);
    io.reserved[0] = 0;
    CHECK_EQ(wpack_import_file(w, NULL, &io), WPACK_OK);
    wpack_writer_abort(w);

    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, archive, 0), WPACK_OK);
    wpack_export_options eo;
    wpack_export_options_init(&eo);
    eo.err = err;
    eo.err_size = sizeof err;
    eo.reserved[2] = 1;
    CHECK_EQ(wpack_export_file(ar, p(path, "x.npz"), WPACK_EXPORT_NPZ, &eo),
             WPACK_E_INVALID_ARGUMENT);
    CHECK(strstr(err, expected(want, "wpack_export_options", "reserved", 2)), "'%s'", err);
    CHECK(access(path, F_OK) != 0, "%s written", path);
    eo.reserved[2] = 0;
    CHECK_EQ(wpack_export_file(ar, path, WPACK_EXPORT_NPZ, &eo), WPACK_OK);
    unlink(path);
    wpack_close(ar);
}

/* ------------------------------------------------------------------ remote */

static void test_remote_options(void)
{
    wpack_remote_options o;
    memset(&o, 0xa5, sizeof o);
    wpack_remote_options_init(&o);
    CHECK(RESERVED_ZERO(&o), "init left reserved fields set");
    o.retries = 0;
    char want[200];
    /* port 1 of the loopback: nothing listens, nothing leaves the host */
    const char *url = "http://127.0.0.1:1/x.wpack";
    for (size_t k = 0; k < NRES(&o); k++) {
        wpack_remote_options bad = o;
        SET_RESERVED(&bad, k, "wpack_remote_options", want);
        wpack_archive *ar;
        CHECK_EQ(wpack_open_url(&ar, url, &bad), WPACK_E_INVALID_ARGUMENT);
        CHECK(ar && strstr(wpack_errmsg(ar), want), "want '%s': '%s'", want,
              ar ? wpack_errmsg(ar) : "(no handle)");
        wpack_close(ar);
    }
    /* init'd: the options pass, the open goes on to the network (and fails there) */
    wpack_archive *ar;
    int rc = wpack_open_url(&ar, url, &o);
    CHECK(rc != WPACK_OK && rc != WPACK_E_INVALID_ARGUMENT, "init'd options: %s (%s)",
          wpack_error_name(rc), ar ? wpack_errmsg(ar) : "");
    wpack_close(ar);
}

/* ------------------------------------------------------------------- dense */

static void test_dense_settings(void)
{
    wpack_dense_settings s;
    memset(&s, 0xa5, sizeof s);
    wpack_dense_settings_init(&s);
    CHECK(RESERVED_ZERO(&s), "init left reserved fields set");
    CHECK(!s.isa && s.threads == 1 && s.spin_us < 0 && s.min_parallel < 0, "defaults");
    s.threads = 3;
    CHECK_EQ(wpack_dense_configure(&s), WPACK_OK);
    CHECK_EQ(wpack_dense_threads(), 3);
    char want[200], err[300];
    for (size_t k = 0; k < NRES(&s); k++) {
        wpack_dense_settings bad = s;
        bad.threads = 5;
        SET_RESERVED(&bad, k, "wpack_dense_settings", want);
        CHECK_EQ(wpack_dense_configure(&bad), WPACK_E_INVALID_ARGUMENT);
        CHECK_EQ(wpack_dense_threads(), 3); /* refused: nothing changed */
        /* the _ex call says why */
        strcpy(err, "junk");
        CHECK_EQ(wpack_dense_configure_ex(&bad, err, sizeof err), WPACK_E_INVALID_ARGUMENT);
        CHECK(strstr(err, want), "want '%s': '%s'", want, err);
        CHECK_EQ(wpack_dense_threads(), 3);
    }
    /* an isa that is no path, with a control character: named, escaped */
    wpack_dense_settings isa = s;
    isa.isa = "sse\n9";
    CHECK_EQ(wpack_dense_configure_ex(&isa, err, sizeof err), WPACK_E_UNSUPPORTED);
    CHECK(strstr(err, "wpack_dense_settings: isa 'sse\\x0a9': unknown SIMD path"), "'%s'", err);
    CHECK(!wpack_dense_isa(), "an unknown isa selects none");
    CHECK_EQ(wpack_dense_configure_ex(&isa, NULL, 0), WPACK_E_UNSUPPORTED); /* no message asked */
    isa.isa = "scalar";
    strcpy(err, "junk");
    CHECK_EQ(wpack_dense_configure_ex(&isa, err, sizeof err), WPACK_OK);
    CHECK(err[0] == 0, "success leaves no message: '%s'", err);
    CHECK_EQ(wpack_dense_configure(NULL), WPACK_OK);
    wpack_dense_shutdown();
}

/* wpack_executor: wpack_set_executor and wpack_writer_open (its
 * options' executor) refuse a reserved field set; wpack_pool_executor
 * fills them with zeros. */
static void serial_run(void *self, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    (void)self;
    for (size_t i = 0; i < n; i++)
        fn(ctx, i);
}

static void test_executor(void)
{
    wpack_executor ex;
    memset(&ex, 0xa5, sizeof ex);
    wpack_pool_executor(NULL, &ex);
    CHECK(RESERVED_ZERO(&ex), "wpack_pool_executor left reserved fields set");
    wpack_executor good = {serial_run, NULL, 1};
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, archive, 0), WPACK_OK);
    char want[200], path[600];
    for (size_t k = 0; k < NRES(&good); k++) {
        wpack_executor bad = good;
        SET_RESERVED(&bad, k, "wpack_executor", want);
        CHECK_EQ(wpack_set_executor(ar, &bad), WPACK_E_INVALID_ARGUMENT);
        CHECK(strstr(wpack_errmsg(ar), want), "want '%s': '%s'", want, wpack_errmsg(ar));
        wpack_writer_options o;
        wpack_writer_options_init(&o);
        o.executor = &bad;
        wpack_writer *w;
        char wwant[260];
        snprintf(wwant, sizeof wwant, "wpack_writer_options.executor: %s",
                 want + strlen("wpack_executor: "));
        CHECK_EQ(wpack_writer_open(&w, p(path, "ex.wpack"), &o), WPACK_E_INVALID_ARGUMENT);
        CHECK(w && strstr(wpack_writer_errmsg(w), wwant), "want '%s': '%s'", wwant,
              w ? wpack_writer_errmsg(w) : "(no writer)");
        wpack_writer_abort(w);
    }
    CHECK_EQ(wpack_set_executor(ar, &good), WPACK_OK);
    CHECK_EQ(wpack_set_executor(ar, &ex), WPACK_OK);
    CHECK_EQ(wpack_set_executor(ar, NULL), WPACK_OK);
    wpack_close(ar);
    CHECK(access(path, F_OK) != 0, "a refused writer left %s", path);
}

/* wpack_linear: the bind calls zero the reserved fields (a newer
 * library's fields), and the forward calls refuse a layer with one set as
 * not filled by them. */
static void test_linear(void)
{
    float wv[4] = {1, 2, 3, 4}, x[2] = {1, 1}, y[2];
    wpack_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "lin.weight";
    t.kind = WPACK_KIND_DATA;
    t.dtype = WPACK_DTYPE_F32;
    t.codec = WPACK_CODEC_NONE;
    t.rank = 2;
    t.dims[0] = t.dims[1] = 2;
    t.nelems = 4;
    t.nbytes = sizeof wv;
    t.data = wv;
    wpack_linear l;
    memset(&l, 0xa5, sizeof l);
    char err[300] = "", want[200];
    CHECK_EQ(wpack_linear_from_tensors(&t, NULL, NULL, &l, err, sizeof err), WPACK_OK);
    CHECK(RESERVED_ZERO(&l), "from_tensors left reserved fields set");
    CHECK_EQ(wpack_linear_forward(&l, x, y, 1, WPACK_ACT_NONE), WPACK_OK);
    CHECK(y[0] == 3 && y[1] == 7, "y = %g %g", y[0], y[1]);
    for (size_t k = 0; k < NRES(&l); k++) {
        wpack_linear bad = l;
        SET_RESERVED(&bad, k, "wpack_linear", want);
        CHECK_EQ(wpack_linear_forward(&bad, x, y, 1, WPACK_ACT_NONE), WPACK_E_DTYPE);
        CHECK_EQ(wpack_linear_forward_pool(NULL, &bad, x, y, 1, WPACK_ACT_NONE), WPACK_E_DTYPE);
    }
    wpack_archive *ar;
    CHECK_EQ(wpack_open_file(&ar, archive, 0), WPACK_OK);
    memset(&l, 0xa5, sizeof l);
    CHECK(wpack_linear_bind(ar, "nothing", &l, err, sizeof err) == WPACK_E_NOT_FOUND, "%s", err);
    CHECK(RESERVED_ZERO(&l), "a failed bind left reserved fields set");
    wpack_close(ar);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_writer_options);
    RUN(test_outputs_zeroed);
    RUN(test_source);
    RUN(test_stats_in);
    RUN(test_resolve_options);
    RUN(test_externalize_options);
    RUN(test_import_export_options);
    RUN(test_remote_options);
    RUN(test_dense_settings);
    RUN(test_executor);
    RUN(test_linear);
    char path[600];
    unlink(archive);
    unlink(p(path, "imp.wpack"));
    unlink(p(path, "ex.wpack"));
    rmdir(dir);
    return tl_finish();
}
