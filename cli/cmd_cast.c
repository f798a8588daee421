/* cmd_cast.c - `wpack cast`: a copy of an archive whose weights are bf16,
 * f16 or int8 (symmetric per output channel), for the dense kernel's fast
 * paths. Everything else is copied as it is. */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "copy.h"
#include "internal.h"

static const char help[] =
    "usage: wpack cast ARCHIVE --to bf16|f16|int8 [--only GLOB]... (-o OUT | --in-place)\n"
    "\n"
    "Writes a copy of ARCHIVE whose selected float tensors are stored as bf16\n"
    "or f16 (round to nearest even; a finite value beyond the target's range\n"
    "becomes +-inf, and a warning says how many per tensor), or int8:\n"
    "symmetric per output channel (dim 0), q = round_even(w / scale) in\n"
    "[-127, 127], scale = absmax(row) / 127 (1 for an all-zero row), written as\n"
    "the f32 entry NAME_scale of shape [dims[0]] (kernel/README.md: Scaled\n"
    "weights). Default selection: every float tensor of rank 2 (Linear\n"
    "weights); --only GLOB (fnmatch, repeatable) selects by name instead (int8:\n"
    "rank >= 2 only). Metadata, name map, aliases and stats are copied; weight\n"
    "stats of a cast tensor are recomputed from the stored values (bf16, f16;\n"
    "an int8 tensor has none: weight stats are of float tensors only).\n"
    "\n"
    "  -o, --output FILE   the archive to write (required)\n"
    "  --in-place          replace ARCHIVE (through a symlink: its target) with the\n"
    "                      cast copy, crash-safely; not for a sharded set nor\n"
    "                      one of its shards (WPACK_E_SHARD); an update of\n"
    "                      ARCHIVE meanwhile waits for it\n"
    "  --max-output SIZE   cap on the tensor bytes written (default: the larger\n"
    "                      of 1 GiB and 1000 x ARCHIVE's size); the free space\n"
    "                      is checked too (WPACK_E_TOO_LARGE, nothing written)\n"
    "  --no-verify         do not check each tensor's bytes against its XXH3 as it\n"
    "                      is read (checked by default: a mismatch fails naming the\n"
    "                      tensor, and OUT does not appear)\n"
    "  -q, --quiet         no progress or summary line\n"
    CLI_NO_SYNC_HELP
    "  -j, --jobs N        weight statistics and hashing of large tensors on N\n"
    "                      threads (default 1, or WPACK_THREADS); the same bytes\n"
    "\n"
    "OUT appears only when complete (a temporary file OUT.tmp-PID-RANDOM beside\n"
    "it, renamed over it; a killed run's temporary is removed by the next run to\n"
    "OUT). OUT may not be ARCHIVE (or a link to it): use --in-place.\n";

/* Elements per read: memory stays a few MiB whatever the tensor's size. */
enum { CAST_BLOCK = 1 << 20 };

static float elem(const uint8_t *p, int dt, size_t i)
{
    return (float)wpk_load_float(dt, p + wpack_dtype_size(dt) * i);
}

typedef struct {
    int to;
    const char **only;
    int nonly;
} cast_opts;

static int selected(const cast_opts *o, const wpack_tensor *t)
{
    int dt = t->dtype;
    if ((t->kind != WPACK_KIND_DATA && t->kind != WPACK_KIND_EXTERNAL) || t->nelems == 0 ||
        (dt != WPACK_DTYPE_F32 && dt != WPACK_DTYPE_F64 && dt != WPACK_DTYPE_F16 && dt != WPACK_DTYPE_BF16))
        return 0;
    if (o->to == WPACK_DTYPE_I8 && t->rank < 2)
        return 0;
    if (!o->nonly)
        return t->rank == 2;
    for (int k = 0; k < o->nonly; k++)
        if (fnmatch(o->only[k], t->name, 0) == 0)
            return 1;
    return 0;
}

/* The tensor bytes the copy will hold: cast tensors at their new size (and
 * int8 scales), other data entries as they are; splats and aliases none. */
static uint64_t cast_size(const wpack_archive *ar, const cast_opts *o)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        uint64_t add = 0;
        if (selected(o, &t)) /* nelems < 2^62 and dims[0] <= nelems: no overflow */
            add = o->to == WPACK_DTYPE_I8 ? t.nelems + 4 * t.dims[0] : 2 * t.nelems;
        else if (t.kind == WPACK_KIND_DATA)
            add = t.nbytes;
        total = total > UINT64_MAX - add ? UINT64_MAX : total + add;
    }
    return total;
}

/* What a failed read of t says: the reader's message names the entry for a
 * checksum or decode failure. */
static void read_error(const wpack_archive *ar, const wpack_tensor *t, int rc, char *err,
                       size_t errlen)
{
    if (rc == WPACK_E_CHECKSUM || rc == WPACK_E_DECODE)
        wpk_fmt(err, errlen, "%s", wpack_errmsg(ar));
    else
        wpk_fmt(err, errlen, "%s: reading: %s", t->name, wpack_error_describe(rc));
}

/* Elements [first, first + n) of t into buf (n <= CAST_BLOCK). */
static int read_elems(const wpack_archive *ar, const wpack_tensor *t, uint64_t first, size_t n,
                      uint8_t *buf, char *err, size_t errlen)
{
    size_t es = wpack_dtype_size(t->dtype);
    int rc = wpack_read(ar, t->index, first * es, buf, n * es);
    if (rc)
        read_error(ar, t, rc, err, errlen);
    return rc;
}

/* bf16 / f16: block by block through format/float_cast.c, streamed into the
 * writer (one rounding from the exact value, also from f64). */
static int cast_float(const wpack_archive *ar, wpack_writer *w, const wpack_tensor *t, int to,
                      uint8_t *src, uint8_t *dst, char *err, size_t errlen)
{
    int rc = wpack_writer_begin_tensor(w, t->name, to, t->rank, t->dims);
    uint64_t over = 0;
    for (uint64_t i = 0; rc == WPACK_OK && i < t->nelems;) {
        size_t k = t->nelems - i < CAST_BLOCK ? (size_t)(t->nelems - i) : CAST_BLOCK;
        if ((rc = read_elems(ar, t, i, k, src, err, errlen)))
            return rc;
        over += wpk_cast_block(t->dtype, src, to, (uint16_t *)(void *)dst, k);
        rc = wpack_writer_write(w, dst, k * 2);
        i += k;
    }
    if (rc == WPACK_OK)
        rc = wpack_writer_end_tensor(w);
    if (rc)
        wpk_fmt(err, errlen, "%s: %s", t->name, wpack_writer_errmsg(w));
    if (rc == WPACK_OK && over) { /* a cast that loses values says so */
        char why[200];
        wpk_cast_overflow_text(why, sizeof why, over, t->nelems, to);
        cli_warn("tensor '%s': %s", t->name, why); /* cli_warn escapes */
    }
    return rc;
}

/* int8, symmetric per row (dim 0): each row is read twice, once for its
 * absmax and once to quantize, so only the row scales (4 bytes a row) grow
 * with the tensor. */
static int cast_int8(const wpack_archive *ar, wpack_writer *w, const wpack_tensor *t,
                     uint8_t *src, uint8_t *dst, char *err, size_t errlen)
{
    uint64_t rows = t->dims[0], cols = t->nelems / rows;
    float *scale = malloc((size_t)rows * 4);
    if (!scale)
        return WPACK_E_NOMEM;
    int rc = wpack_writer_begin_tensor(w, t->name, WPACK_DTYPE_I8, t->rank, t->dims);
    if (rc)
        wpk_fmt(err, errlen, "%s: %s", t->name, wpack_writer_errmsg(w));
    for (uint64_t r = 0; rc == WPACK_OK && r < rows; r++) {
        float am = 0;
        for (uint64_t k = 0; rc == WPACK_OK && k < cols;) {
            size_t n = cols - k < CAST_BLOCK ? (size_t)(cols - k) : CAST_BLOCK;
            if ((rc = read_elems(ar, t, r * cols + k, n, src, err, errlen)))
                break;
            for (size_t j = 0; j < n; j++) {
                float v = elem(src, t->dtype, j);
                if (!isfinite(v)) {
                    wpk_fmt(err, errlen, "%s: element [%llu, %llu] is not finite: cannot quantize",
                            t->name, (unsigned long long)r, (unsigned long long)(k + j));
                    rc = WPACK_E_INPUT;
                    break;
                }
                am = fmaxf(am, fabsf(v));
            }
            k += n;
        }
        scale[r] = am > 0 ? am / 127.0f : 1.0f;
        for (uint64_t k = 0; rc == WPACK_OK && k < cols;) {
            size_t n = cols - k < CAST_BLOCK ? (size_t)(cols - k) : CAST_BLOCK;
            if ((rc = read_elems(ar, t, r * cols + k, n, src, err, errlen)))
                break;
            for (size_t j = 0; j < n; j++) {
                float q = nearbyintf(elem(src, t->dtype, j) / scale[r]);
                dst[j] = (uint8_t)(int8_t)fmaxf(-127.0f, fminf(127.0f, q));
            }
            if ((rc = wpack_writer_write(w, dst, n)))
                wpk_fmt(err, errlen, "%s: %s", t->name, wpack_writer_errmsg(w));
            k += n;
        }
    }
    if (rc == WPACK_OK && (rc = wpack_writer_end_tensor(w)))
        wpk_fmt(err, errlen, "%s: %s", t->name, wpack_writer_errmsg(w));
    char sname[WPACK_MAX_NAME + 16];
    snprintf(sname, sizeof sname, "%s_scale", t->name);
    uint64_t d0 = rows;
    if (rc == WPACK_OK) {
        rc = wpack_writer_add_tensor(w, sname, WPACK_DTYPE_F32, 1, &d0, scale, (size_t)rows * 4);
        if (rc == WPACK_E_EXISTS)
            wpk_fmt(err, errlen, "%s: the archive already has '%s'", t->name, sname);
        else if (rc)
            wpk_fmt(err, errlen, "%s: %s", t->name, wpack_writer_errmsg(w));
    }
    free(scale);
    return rc;
}

/* Cast one tensor into the writer (and its scale entry for int8). */
static int cast_one(const wpack_archive *ar, wpack_writer *w, const wpack_tensor *t, int to,
                    char *err, size_t errlen)
{
    uint8_t *src = malloc((size_t)CAST_BLOCK * 8), *dst = malloc((size_t)CAST_BLOCK * 2);
    int rc = src && dst ? WPACK_OK : WPACK_E_NOMEM;
    if (rc == WPACK_OK)
        rc = to == WPACK_DTYPE_I8 ? cast_int8(ar, w, t, src, dst, err, errlen)
                                  : cast_float(ar, w, t, to, src, dst, err, errlen);
    free(src);
    free(dst);
    return rc;
}

int cmd_cast(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *v;
    char *in_place_path = NULL; /* --in-place: the file to replace */
    cast_opts o = {0, calloc((size_t)argc + 1, sizeof(char *)), 0};
    cli_write_opts wo = CLI_WRITE_OPTS_INIT;
    int r, rc = CLI_USAGE, in_place = 0, lock = -1;
    unsigned jobs = 0; /* -j: 0 keeps WPACK_THREADS or one thread */
    wpack_archive *ar = NULL;
    wpack_writer *w = NULL;
    char err[1200] = "";
    for (int i = 1; i < argc;) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            rc = CLI_OK;
            goto done;
        } else if ((r = cli_opt_value(argc, argv, &i, "--to", &v))) {
            if (r < 0)
                goto done;
            o.to = strcmp(v, "int8") == 0 ? WPACK_DTYPE_I8 : wpack_dtype_from_name(v);
            if (o.to != WPACK_DTYPE_BF16 && o.to != WPACK_DTYPE_F16 && o.to != WPACK_DTYPE_I8) {
                cli_error("--to %s: want bf16, f16 or int8", v);
                goto done;
            }
        } else if ((r = cli_opt_value(argc, argv, &i, "--only", &v))) {
            if (r < 0)
                goto done;
            o.only[o.nonly++] = v;
        } else if ((r = cli_opt_jobs(argc, argv, &i, &jobs))) {
            if (r < 0)
                goto done;
        } else if ((r = cli_opt_output(argc, argv, &i, &out))) {
            if (r < 0)
                goto done;
        } else if ((r = cli_write_opt(argc, argv, &i, &wo))) {
            if (r < 0)
                goto done;
        } else if (strcmp(argv[i], "--in-place") == 0) {
            in_place = 1;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("cast: unknown option %s", argv[i]);
            goto done;
        } else if (!in) {
            in = argv[i++];
        } else {
            cli_error("cast: one archive only ('%s')", argv[i]);
            goto done;
        }
    }
    if (in_place && out) {
        cli_error("cast: -o and --in-place together: choose one (see wpack cast --help)");
        goto done;
    }
    if (!in || (!out && !in_place) || !o.to) {
        fputs(help, stderr);
        goto done;
    }
    rc = CLI_FAIL;
    if (!(ar = cli_open_rewrite("cast", in, out, in_place, wo.verify, &in_place_path, &lock)))
        goto done;
    if (in_place)
        out = in_place_path;
    uint64_t need = cast_size(ar, &o);
    if (!cli_check_output("cast", out, need, cli_input_bytes(ar), wo.max_output, 1))
        goto done;
    cli_progress prog;
    cli_progress_init(&prog, need, wpack_count(ar), wo.quiet);
    wpack_info info;
    wpack_get_info(ar, &info);
    wpack_writer_options opt;
    cli_writer_options_init(&opt);
    if (jobs)
        cli_writer_jobs(&opt, jobs);
    opt.alignment = info.alignment;
    opt.no_sync = wo.no_sync;
    if ((r = wpack_writer_open(&w, out, &opt)) != WPACK_OK) {
        cli_error("%s [%s]", wpack_writer_errmsg(w), wpack_error_name(r));
        goto done;
    }
    uint64_t cast = 0;
    int e = WPACK_OK;
    for (uint64_t i = 0; e == WPACK_OK && i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        prog.label = t.name;
        cli_progress_update(&prog, 0);
        prog.done_items++;
        if (selected(&o, &t)) {
            e = cast_one(ar, w, &t, o.to, err, sizeof err);
            cast++;
            prog.done_bytes += o.to == WPACK_DTYPE_I8 ? t.nelems + 4 * t.dims[0] : 2 * t.nelems;
        } else if (t.kind == WPACK_KIND_DATA || t.kind == WPACK_KIND_EXTERNAL) {
            e = wpk_copy_data(ar, w, &t, err, sizeof err);
            prog.done_bytes += t.nbytes;
        } else if (t.kind == WPACK_KIND_SPLAT) {
            if ((e = wpack_writer_add_splat(w, t.name, t.dtype, t.rank, t.dims, t.fill, t.fill_size)))
                wpk_fmt(err, sizeof err, "%s: %s", t.name, wpack_writer_errmsg(w));
        } else if (t.kind != WPACK_KIND_ALIAS) {
            wpk_fmt(err, sizeof err, "%s: entry kind %d is not one cast can copy", t.name, t.kind);
            e = WPACK_E_KIND;
        } else {
            wpack_tensor target;
            wpack_tensor_at(ar, t.alias_target, &target);
            if (selected(&o, &target)) {
                wpk_fmt(err, sizeof err, "%s: an alias of cast tensor '%s' is not supported", t.name, target.name);
                e = WPACK_E_UNSUPPORTED;
            } else if ((e = wpack_writer_add_alias(w, t.name, target.name))) {
                wpk_fmt(err, sizeof err, "%s: %s", t.name, wpack_writer_errmsg(w));
            }
        }
    }
    for (uint64_t i = 0; e == WPACK_OK && i < wpack_meta_count(ar); i++) {
        wpack_meta m;
        wpack_meta_at(ar, i, &m);
        if (strcmp(m.key, "wpack.producer") == 0)
            continue; /* the writer sets its own */
        if ((e = wpk_copy_meta(ar, w, &m)))
            wpk_fmt(err, sizeof err, "metadata '%s': %s", m.key, wpack_writer_errmsg(w));
    }
    if (e == WPACK_OK)
        e = wpk_copy_names(ar, w, err, sizeof err);
    for (uint64_t i = 0; e == WPACK_OK && i < wpack_stats_count(ar); i++) {
        wpack_stats s;
        wpack_tensor t;
        wpack_stats_at(ar, i, &s);
        /* a cast tensor's weight stats describe the old values: recomputed */
        if (s.kind == WPACK_STATS_WEIGHT && wpack_find(ar, s.key, &t) == WPACK_OK && selected(&o, &t))
            continue;
        if ((e = wpk_copy_stats(w, &s)))
            wpk_fmt(err, sizeof err, "stats '%s': %s", s.key, wpack_writer_errmsg(w));
    }
    cli_progress_done(&prog);
    if (e) {
        cli_error("%s [%s]", err, wpack_error_name(e));
        wpack_writer_abort(w);
        w = NULL;
        goto done;
    }
    if (!cast)
        cli_warn("no tensor selected: the copy has no cast tensors");
    uint64_t count = wpack_writer_count(w);
    e = wpack_writer_finish(w, err, sizeof err);
    w = NULL;
    if (e) {
        cli_error("%s [%s]", err, wpack_error_name(e));
        goto done;
    }
    struct stat sb;
    if (!wo.quiet) {
        char size[32];
        cli_human_size(size, sizeof size, stat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0);
        cli_line(stderr, "wrote %s: %llu tensors, %llu cast to %s, %s", out,
                (unsigned long long)count, (unsigned long long)cast,
                o.to == WPACK_DTYPE_I8 ? "int8" : wpack_dtype_name(o.to), size);
    }
    rc = CLI_OK;
done:
    if (w)
        wpack_writer_abort(w);
    wpack_close(ar);
    cli_rewrite_unlock(&lock); /* after the rename: an update waiting for it opens the new file */
    free(o.only);
    free(in_place_path);
    return rc;
}
