/* cli_chain.c - the --layers chain: parse, bind, run, and f32 .npy I/O. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "bytes.h"
#include "cli.h"
#include "cli_chain.h"
#include "internal.h"
#include "nameset.h"
#include "npy.h"

static int cfail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int cfail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

void chain_free(chain *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->steps[i].path);
        for (int k = 0; k < 3; k++)
            free(c->steps[i].fetched[k]);
    }
    free(c->steps);
    c->steps = NULL;
    c->n = 0;
}

/* a + b, saturating */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The bytes step s reads per input row of width w: the Linear's weight,
 * scale and bias, or the ReLU's row of f32. */
static uint64_t step_work(const chain_step *s, uint64_t w)
{
    if (s->relu)
        return w > UINT64_MAX / 4 ? UINT64_MAX : 4 * w;
    const wpack_linear *l = &s->lin;
    uint64_t weight = l->in_features * l->out_features * wpack_dtype_size(l->weight_dtype);
    return sat_add(weight, l->out_features > UINT64_MAX / 8 ? UINT64_MAX : 8 * l->out_features);
}

/* A step's module path, for the set of layers bound so far. */
static const uint8_t *step_path(void *ctx, uint64_t item, uint64_t *len)
{
    const chain *c = ctx;
    *len = strlen(c->steps[item].path);
    return (const uint8_t *)c->steps[item].path;
}

static int build_steps(const wpack_archive *ar, const char *spec, size_t in_width,
                       uint64_t work_ratio, chain *c, wpk_nameset *bound, char *err,
                       size_t errlen);

int chain_build(const wpack_archive *ar, const char *spec, size_t in_width, uint64_t work_ratio,
                chain *c, char *err, size_t errlen)
{
    wpk_nameset bound = {0};
    int rc = build_steps(ar, spec, in_width, work_ratio, c, &bound, err, errlen);
    wpk_nameset_free(&bound);
    return rc;
}

/* A layer named again (shared weights) reuses the first binding: bound
 * once, and fetched once from a URL (memory: each distinct layer once). */
static int build_steps(const wpack_archive *ar, const char *spec, size_t in_width,
                       uint64_t work_ratio, chain *c, wpk_nameset *bound, char *err,
                       size_t errlen)
{
    memset(c, 0, sizeof *c);
    wpack_meta m;
    if (!spec) {
        if (wpack_meta_find(ar, "wpack.layers", &m) != WPACK_OK || m.type != WPACK_META_STRING)
            return cfail(err, errlen, WPACK_E_NOT_FOUND,
                         "no --layers given and the archive has no 'wpack.layers' string metadata");
        spec = m.str;
    }
    size_t items = 1;
    for (const char *p = spec; *p; p++)
        items += *p == ',';
    c->steps = calloc(items, sizeof *c->steps);
    if (!c->steps)
        return cfail(err, errlen, WPACK_E_NOMEM, "out of memory");
    uint64_t row = in_width > UINT64_MAX / 4 ? UINT64_MAX : 4 * (uint64_t)in_width;
    uint64_t base = sat_add(cli_input_bytes(ar), row), work = 0, width = in_width;
    uint64_t limit = base > UINT64_MAX / work_ratio ? UINT64_MAX : base * work_ratio;
    const char *p = spec;
    for (size_t i = 0; i < items; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t plen = eq ? (size_t)(eq - p) : len;
        chain_step *s = &c->steps[c->n];
        s->path = strndup(p, plen);
        c->n++;
        if (!s->path)
            return cfail(err, errlen, WPACK_E_NOMEM, "out of memory");
        if (plen == 0)
            return cfail(err, errlen, WPACK_E_INVALID_ARGUMENT,
                         "layers '%s': item %zu has an empty module path", spec, i + 1);
        const char *kind = eq ? eq + 1 : "linear";
        size_t klen = eq ? len - plen - 1 : 6;
        if (klen == 4 && strncmp(kind, "relu", 4) == 0) {
            s->relu = 1;
        } else if (klen == 6 && strncmp(kind, "linear", 6) == 0) {
            uint64_t first;
            if (wpk_nameset_find(bound, step_path, c, (const uint8_t *)s->path, plen, &first)) {
                s->lin = c->steps[first].lin; /* its fetched[] stay with the first */
            } else {
                char berr[600];
                int rc = chain_bind(ar, s, berr, sizeof berr);
                if (rc)
                    return cfail(err, errlen, rc, "layers item '%s': %s", s->path, berr);
                if (!wpk_nameset_insert(bound, step_path, c, (const uint8_t *)s->path, plen,
                                        c->n - 1))
                    return cfail(err, errlen, WPACK_E_NOMEM, "out of memory");
            }
        } else {
            return cfail(err, errlen, WPACK_E_INVALID_ARGUMENT,
                         "layers item '%.*s': unknown module kind '%.*s' (linear or relu)",
                         (int)len, p, (int)klen, kind);
        }
        work = sat_add(work, step_work(s, width));
        if (!s->relu)
            width = s->lin.out_features;
        if (work > limit)
            return cfail(err, errlen, WPACK_E_LIMIT,
                         "layers: by item %zu of %zu ('%s') the chain reads %llu bytes per input "
                         "row, above %llu x (the archive's %llu bytes + a %llu-byte input row) = "
                         "%llu: refused before running (a layer repeated that often; raise the "
                         "limit with --max-work-ratio N)", i + 1, items, s->path,
                         (unsigned long long)work, (unsigned long long)work_ratio,
                         (unsigned long long)cli_input_bytes(ar), (unsigned long long)row,
                         (unsigned long long)limit);
        p = end ? end + 1 : p + len;
    }
    return WPACK_OK;
}

int chain_run(const chain *c, const float *x, size_t batch, size_t width, float **out,
              size_t *out_width, chain_observe_fn observe, void *user, char *err, size_t errlen)
{
    *out = NULL;
    float *cur = malloc(batch * width * sizeof *cur + 1);
    if (!cur)
        return cfail(err, errlen, WPACK_E_NOMEM, "out of memory");
    memcpy(cur, x, batch * width * sizeof *cur);
    for (size_t i = 0; i < c->n; i++) {
        const chain_step *s = &c->steps[i];
        if (s->relu) {
            for (size_t k = 0; k < batch * width; k++)
                if (cur[k] < 0)
                    cur[k] = 0;
        } else {
            if (s->lin.in_features != width) {
                free(cur);
                return cfail(err, errlen, WPACK_E_SHAPE,
                             "layer '%s' takes %llu inputs, its input has %zu", s->path,
                             (unsigned long long)s->lin.in_features, width);
            }
            size_t ow = (size_t)s->lin.out_features;
            float *y = malloc(batch * ow * sizeof *y + 1);
            if (!y) {
                free(cur);
                return cfail(err, errlen, WPACK_E_NOMEM, "out of memory");
            }
            /* fuse a following ReLU unless someone watches each module */
            int fuse = !observe && i + 1 < c->n && c->steps[i + 1].relu;
            int rc = wpack_linear_forward_pool(cli_pool(), &s->lin, cur, y, batch,
                                               fuse ? WPACK_ACT_RELU : WPACK_ACT_NONE);
            free(cur);
            cur = y;
            width = ow;
            if (rc) {
                free(cur);
                const char *why = rc == WPACK_E_UNSUPPORTED ? cli_env_dense_error() : "";
                return cfail(err, errlen, rc, "layer '%s': %s%s%s", s->path, wpack_error_describe(rc),
                             *why ? ": " : "", why);
            }
            if (fuse) {
                i++;
                continue;
            }
        }
        if (observe)
            observe(user, i, cur, batch, width);
    }
    *out = cur;
    *out_width = width;
    return WPACK_OK;
}

int chain_read_npy(const char *path, float **x, size_t *batch, size_t *width, char *err,
                   size_t errlen)
{
    /* never blocks on a FIFO; regular files only (format/open_input.c) */
    struct stat st;
    char msg[400];
    int code, fd = wpk_open_input(AT_FDCWD, path, 0, &st, &code, msg, sizeof msg);
    if (fd < 0)
        return cfail(err, errlen, code, "%s: %s", path, msg);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return cfail(err, errlen, WPACK_E_IO, "%s: %s", path, strerror(errno));
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return cfail(err, errlen, WPACK_E_IO, "%s: cannot read", path);
    }
    fclose(f);
    npy_header h;
    char perr[400];
    int rc = npy_parse_header(buf, (size_t)n, &h, perr, sizeof perr);
    if (rc) {
        free(buf);
        return cfail(err, errlen, rc, "%s: %s", path, perr);
    }
    if ((h.dtype != WPACK_DTYPE_F32 && h.dtype != WPACK_DTYPE_F64) || h.rank < 1 || h.rank > 2 ||
        h.nelems == 0 || h.data_offset + h.nbytes != (uint64_t)n) {
        free(buf);
        return cfail(err, errlen, WPACK_E_INPUT,
                     "%s: want a non-empty f32 or f64 array of rank 1 or 2 (and nothing after it)",
                     path);
    }
    size_t rows = h.rank == 2 ? (size_t)h.dims[0] : 1, cols = (size_t)h.dims[h.rank - 1];
    float *v = malloc(rows * cols * sizeof *v);
    if (!v) {
        free(buf);
        return cfail(err, errlen, WPACK_E_NOMEM, "out of memory");
    }
    const uint8_t *d = buf + h.data_offset;
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < cols; k++) {
            /* stored index of element (r, k) */
            size_t i = h.fortran_order ? k * rows + r : r * cols + k;
            uint8_t t[8];
            memcpy(t, d + i * h.elem_size, h.elem_size);
            if (h.byteswap)
                for (size_t a = 0; a < h.elem_size / 2; a++) {
                    uint8_t s = t[a];
                    t[a] = t[h.elem_size - 1 - a];
                    t[h.elem_size - 1 - a] = s;
                }
            if (h.dtype == WPACK_DTYPE_F32)
                memcpy(&v[r * cols + k], t, 4);
            else
                v[r * cols + k] = (float)wpk_ldf64(t);
        }
    free(buf);
    *x = v;
    *batch = rows;
    *width = cols;
    return WPACK_OK;
}

int chain_write_npy(const char *path, const float *y, size_t batch, size_t width, int no_sync,
                    char *err, size_t errlen)
{
    char hdr[256];
    uint64_t dims[2] = {batch, width};
    size_t hl = npy_format_header(hdr, sizeof hdr, WPACK_DTYPE_F32, 2, dims);
    if (!hl)
        return cfail(err, errlen, WPACK_E_IO, "%s: cannot make a .npy header", path);
    wpk_atomic a; /* the .npy appears whole or not at all */
    int rc = wpk_atomic_open(&a, path, WPK_ATOMIC_FOLLOW_LINK | (no_sync ? WPK_ATOMIC_NO_SYNC : 0), err, errlen), e = 0;
    if (rc == WPACK_OK && ((e = wpk_write_all(a.fd, hdr, hl)) ||
                           (e = wpk_write_all(a.fd, y, batch * width * sizeof *y))))
        rc = cfail(err, errlen, WPACK_E_IO, "%s: write failed: %s", path, strerror(e));
    if (rc == WPACK_OK)
        rc = wpk_atomic_commit(&a, err, errlen);
    wpk_atomic_abort(&a);
    return rc;
}

int chain_arg(int argc, char **argv, int *i, const char *cmd, chain_args *a)
{
    int r;
    if ((r = cli_opt_value(argc, argv, i, "--layers", &a->spec)) ||
        (r = cli_opt_value(argc, argv, i, "--input", &a->input)))
        return r;
    if (strcmp(argv[*i], "--no-verify") == 0) {
        a->verify = 0;
        *i += 1;
        return 1;
    }
    const char *v;
    if ((r = cli_opt_value(argc, argv, i, "--max-work-ratio", &v))) {
        if (r > 0 && (!cli_parse_size(v, &a->work_ratio) || a->work_ratio < 1)) {
            cli_error("%s: --max-work-ratio %s: want a positive integer", cmd, v);
            return -1;
        }
        return r;
    }
    if (argv[*i][0] == '-' && argv[*i][1]) {
        cli_error("%s: unknown option %s", cmd, argv[*i]);
        return -1;
    }
    if (a->archive) {
        cli_error("%s: one archive only ('%s')", cmd, argv[*i]);
        return -1;
    }
    a->archive = argv[(*i)++];
    return 1;
}
