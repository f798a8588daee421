/* cmd_create.c - `wpack create`: argument parsing over wpack_import.h
 * (every input is listed first, for the output cap and the same-file
 * guard, then imported item by item through one importer). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "wpack_import.h"

static const char help[] =
    "usage: wpack create -o OUT.wpack [options] INPUT...\n"
    "\n"
    "INPUT is a .npy file (tensor name: the file name without .npy) or a\n"
    "directory of them (name: the relative path with '/' turned into '.', e.g.\n"
    "enc/layers/0/w.npy -> enc.layers.0.w); then the escapes extract and export\n"
    "write are undone: %2F %25 %5C %2E (either case) -> / % \\ . (a%2Fb.npy -> a/b;\n"
    "any other '%' stays). .npy 1.0/2.0/3.0, little- or\n"
    "big-endian, C or Fortran order (stored C order), bool and every integer\n"
    "and float dtype up to 64 bits (complex, long double: refused).\n"
    "Float tensors get weight statistics (min, max, absmax, mean, variance).\n"
    "The archive appears at OUT only when complete and durable (temp file\n"
    "OUT.tmp-PID-RANDOM, fsync, rename, fsync of the directory; --no-sync skips\n"
    "the fsyncs); on any error an existing OUT is left untouched, and a killed\n"
    "run's temp file is removed by the next run to OUT. OUT may not be one of\n"
    "the inputs (or a link to one): that is refused before anything is read.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE     the archive to write (required)\n"
    "  --align N             data alignment, a power of two 64..2M (default 4096)\n"
    "  --histogram N         also store an N-bin histogram per float tensor\n"
    "  --no-stats            do not compute weight statistics\n"
    "  -j, --jobs N          weight statistics and hashing of large tensors on N\n"
    "                        threads (default 1, or WPACK_THREADS); the same bytes\n"
    "  --shard-size SIZE     write a sharded set: shards of about SIZE bytes of data\n"
    "                        (K/M/G) named OUT-0000k-of-0000n.wpack (.2.wpack, ...\n"
    "                        where a file has that name), and OUT as the manifest\n"
    "                        that opens them all as one archive; written in one\n"
    "                        pass; a set replaced at OUT stays whole until the new\n"
    "                        one is in place, then its shards are removed (also\n"
    "                        when OUT becomes a single archive)\n"
    "  --compress zstd[:L]   store tensors as zstd chunks (level L, default 3), each\n"
    "                        only if it shrinks by --compress-saving percent (5)\n"
    "  --compress-min BYTES  leave tensors smaller than this uncompressed (64K)\n"
    "  --chunk-size BYTES    uncompressed bytes per chunk, power of two to 64M (1M)\n"
    "  --chunk-sums BYTES|off  an XXH3 per chunk of this size for each uncompressed\n"
    "                        tensor larger than it, and per zstd chunk of a zstd\n"
    "                        tensor of several (format 1.2, default 1M): reading\n"
    "                        part of a tensor checks or fetches only its chunks\n"
    "  --compress-saving P   minimum saving in percent for a tensor to stay compressed\n"
    "  --meta KEY=VALUE      a string metadata entry (repeatable), e.g. model.name=mlp\n"
    "  --layers SPEC         the default module chain of wpack run / calibrate\n"
    "  --name OTHER=ENTRY    record that a consumer calls ENTRY by OTHER (repeatable);\n"
    "                        ENTRY may be a module path with activation stats only\n"
    "                        (--name model.0=0: resolve --annotate maps IR path model.0\n"
    "                        to key 0; kept in metadata wpack.module_names)\n"
    "  -q, --quiet           no progress line\n"
    "  --no-sync             do not fsync OUT (also WPACK_NO_SYNC=1): faster, and\n"
    "                        still all-or-nothing for other processes, but a power\n"
    "                        loss or OS crash may leave it missing, empty or torn,\n"
    "                        and an OUT it replaced lost (README: Durability)\n"
    "\n"
    "Other inputs, recognised by their content (import/README.md):\n"
    "  torch.save checkpoints (.pt/.pth/.bin, zip format), read without running any\n"
    "  pickle code; safetensors, and Hugging Face sharded safetensors given by their\n"
    "  model.safetensors.index.json; .npz and zip/tar/tar.gz/tar.zst bundles of .npy;\n"
    "  a JSON manifest of raw binary files; GGUF v2/v3 (typed metadata, dims\n"
    "  reversed to PyTorch order, quantized GGML types as block dtypes ggml.NAME);\n"
    "  IREE .irpa parameter archives (entries as u8 bytes unless written by wpack;\n"
    "  splats stay splats). Nested dicts become dotted names,\n"
    "  scalars become metadata, a tensor saved twice (tied weights) an alias.\n"
    "  --prefix P            put the inputs that follow under module path P\n"
    "  --key K               torch: take only sub-dict K of the inputs that follow\n"
    "                        (e.g. --key model for {'model': ..., 'epoch': 3})\n"
    "  --cast bf16|f16       store float tensors as bf16/f16 (round to nearest even;\n"
    "                        weight statistics are of the values before the cast;\n"
    "                        values beyond the range become +-inf, with a warning)\n"
    "  --only GLOB           with --cast: only names matching GLOB (repeatable)\n"
    "  --stats FILE          calibration statistics: wpack stats JSON, or (kind by\n"
    "  --stats-from FILE     content) a TensorRT calibration cache, an ONNX Runtime\n"
    "                        calibration table (JSON), a llama.cpp imatrix (.dat or\n"
    "                        GGUF) or a torch checkpoint's torch.ao observers; what\n"
    "                        each becomes: spec appendix A.1; repeatable (a key and\n"
    "                        kind given by two files is an error, WPACK_E_EXISTS);\n"
    "                        a file that gives no record is refused (WPACK_E_STATS)\n"
    "  --keep-observers      torch: also store torch.ao observer / fake-quant buffers\n"
    "                        as tensors (by default they become activation stats of\n"
    "                        the observed module and are left out: spec appendix A.1)\n"
    "  --max-ratio N         bundles: refuse members expanding more than N:1 (200)\n"
    "  --max-output SIZE     the most tensor bytes the archive may hold (default: 1000 x\n"
    "                        the inputs' size, at least 1G); a tensor past it is refused\n"
    "                        before it is written (TOO_LARGE). A torch view whose strides\n"
    "                        are all 0 (t.expand(...)) is stored as one repeated element.\n"
    "  --follow-links        follow symbolic links among the files an input names\n"
    "                        (directory entries, a manifest's data files, safetensors\n"
    "                        shards); refused by default, as they may lead out of the\n"
    "                        input's directory. FIFOs and devices are always refused\n"
    "  --allow-empty         write an archive even when the inputs hold no tensor\n"
    "                        (refused by default: WPACK_E_EMPTY)\n";

/* One file to import: an input, or a .npy under an input directory. */
typedef struct {
    char *path;
    char *name;  /* .npy: tensor name; else NULL */
    uint64_t size;
    const wpack_import_options *opts;
    const char *within; /* listed under this directory input: opened under it */
} input_file;

typedef struct {
    input_file *v;
    size_t n, cap;
    uint64_t bytes;
    const wpack_import_options *cur; /* options of the input being listed */
    const char *cur_input;           /* and its path */
} input_list;

static int push(void *user, const wpack_import_item *it)
{
    input_list *l = user;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        input_file *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return WPACK_E_NOMEM;
        l->v = v;
        l->cap = cap;
    }
    input_file *f = &l->v[l->n];
    f->path = strdup(it->path);
    f->name = it->name ? strdup(it->name) : NULL;
    f->size = it->bytes;
    f->opts = l->cur;
    f->within = strcmp(it->path, l->cur_input) != 0 ? l->cur_input : NULL;
    if (!f->path || (it->name && !f->name)) {
        free(f->path);
        free(f->name);
        return WPACK_E_NOMEM;
    }
    l->n++;
    l->bytes += it->bytes;
    return WPACK_OK;
}

static void on_warn(void *user, const char *message)
{
    (void)user;
    cli_warn("%s", message);
}

static void on_progress(void *user, uint64_t done)
{
    cli_progress *p = user;
    p->done_bytes = p->base_bytes + done;
    cli_progress_update(p, 0);
}

int cmd_create(int argc, char **argv)
{
    uint64_t shard_size = 0;
    const char *out = NULL, *v;
    const char *layers = NULL; /* --layers: metadata wpack.layers */
    wpack_writer_options opt;
    cli_writer_options_init(&opt);
    int quiet = 0, r;
    unsigned jobs = 0; /* -j: 0 keeps WPACK_THREADS or one thread */
    int follow_links = 0, allow_empty = 0; /* --follow-links, --allow-empty */
    int keep_observers = 0;                /* --keep-observers */
    const char **metas = NULL, **maps = NULL, **inputs = NULL;
    size_t nmeta = 0, nmap = 0, ninputs = 0;
    metas = calloc((size_t)argc, sizeof *metas);
    maps = calloc((size_t)argc, sizeof *maps);
    inputs = calloc((size_t)argc, sizeof *inputs);
    /* Importer options: --prefix/--key start a new set for the inputs after them. */
    wpack_import_options *optv = calloc((size_t)argc + 1, sizeof *optv);
    const wpack_import_options **inopts = calloc((size_t)argc, sizeof *inopts);
    const char **only = calloc((size_t)argc, sizeof *only);
    const char **stats_files = calloc((size_t)argc, sizeof *stats_files); /* --stats, in order */
    size_t nopt = 1, nonly = 0, nstats = 0;
    int cast = 0;
    uint64_t max_ratio = 0, max_output = 0;
    int rc = CLI_USAGE;
    input_list l = {0};
    cli_files guard = {0};
    wpack_writer *w = NULL;
    wpack_importer *imp = NULL;
    char err[1024];
    if (!metas || !maps || !inputs || !optv || !inopts || !only || !stats_files)
        goto done;
    wpack_import_options_init(&optv[0]);
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        uint64_t n;
        if (cli_is_help(a)) {
            fputs(help, stdout);
            rc = CLI_OK;
            goto done;
        } else if ((r = cli_opt_output(argc, argv, &i, &out))) {
            if (r < 0)
                goto done;
        } else if ((r = cli_opt_jobs(argc, argv, &i, &jobs))) {
            if (r < 0)
                goto done;
        } else if ((r = cli_opt_value(argc, argv, &i, "--align", &v))) {
            if (r < 0)
                goto done;
            if (!cli_parse_size(v, &n) || n > UINT32_MAX || n < WPACK_MIN_ALIGNMENT ||
                n > WPACK_MAX_ALIGNMENT || (n & (n - 1))) {
                cli_error("--align %s: want a power of two from 64 to 2M", v);
                goto done;
            }
            opt.alignment = (uint32_t)n;
        } else if ((r = cli_opt_value(argc, argv, &i, "--histogram", &v))) {
            if (r < 0)
                goto done;
            if (!cli_parse_size(v, &n) || n < 1 || n > (1u << 20)) {
                cli_error("--histogram %s: want 1 to 1048576 bins", v);
                goto done;
            }
            opt.histogram_bins = (uint32_t)n;
        } else if ((r = cli_opt_value(argc, argv, &i, "--shard-size", &v))) {
            if (r < 0 || !cli_parse_size(v, &shard_size) || !shard_size) {
                cli_error("--shard-size %s: want a byte count (K/M/G suffixes)", r < 0 ? "" : v);
                goto done;
            }
        } else if ((r = cli_opt_value(argc, argv, &i, "--compress", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--compress-min", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--chunk-size", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--chunk-sums", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--compress-saving", &v))) {
            if (r < 0 || !cli_compress_option(a, v, &opt))
                goto done;
        } else if ((r = cli_opt_value(argc, argv, &i, "--layers", &v))) {
            if (r < 0)
                goto done;
            layers = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--meta", &v))) {
            if (r < 0)
                goto done;
            metas[nmeta++] = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--name", &v))) {
            if (r < 0)
                goto done;
            maps[nmap++] = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--prefix", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--key", &v))) {
            if (r < 0)
                goto done;
            optv[nopt] = optv[nopt - 1];
            if (strncmp(a, "--prefix", 8) == 0)
                optv[nopt].prefix = *v ? v : NULL;
            else
                optv[nopt].key = *v ? v : NULL;
            nopt++;
        } else if ((r = cli_opt_value(argc, argv, &i, "--cast", &v))) {
            if (r < 0)
                goto done;
            cast = strcmp(v, "bf16") == 0 ? WPACK_DTYPE_BF16
                   : strcmp(v, "f16") == 0 ? WPACK_DTYPE_F16 : 0;
            if (!cast) {
                cli_error("--cast %s: want bf16 or f16", v);
                goto done;
            }
        } else if ((r = cli_opt_value(argc, argv, &i, "--only", &v))) {
            if (r < 0)
                goto done;
            only[nonly++] = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--stats", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--stats-from", &v))) {
            if (r < 0)
                goto done;
            stats_files[nstats++] = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--max-ratio", &v))) {
            if (r < 0)
                goto done;
            if (!cli_parse_size(v, &max_ratio) || max_ratio < 1 || max_ratio > UINT32_MAX) {
                cli_error("--max-ratio %s: want a positive integer", v);
                goto done;
            }
        } else if ((r = cli_opt_value(argc, argv, &i, "--max-output", &v))) {
            if (r < 0 || !cli_parse_size(v, &max_output) || !max_output) {
                cli_error("--max-output %s: want a byte count (K/M/G suffixes)", r < 0 ? "" : v);
                goto done;
            }
        } else if (strcmp(a, "--follow-links") == 0) {
            follow_links = 1;
            i++;
        } else if (strcmp(a, "--keep-observers") == 0) {
            keep_observers = 1;
            i++;
        } else if (strcmp(a, "--allow-empty") == 0) {
            allow_empty = 1;
            i++;
        } else if (strcmp(a, "--no-stats") == 0) {
            opt.weight_stats = 0;
            i++;
        } else if (cli_no_sync_opt(argv, &i, &opt.no_sync)) {
            /* set; WPACK_NO_SYNC=1 sets it too (cli_writer_options_init) */
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
            i++;
        } else if (strcmp(a, "--") == 0) {
            for (i++; i < argc; i++) {
                inopts[ninputs] = &optv[nopt - 1];
                inputs[ninputs++] = argv[i];
            }
        } else if (a[0] == '-' && a[1]) {
            cli_error("create: unknown option '%s' (see wpack create --help)", a);
            goto done;
        } else {
            inopts[ninputs] = &optv[nopt - 1];
            inputs[ninputs++] = a;
            i++;
        }
    }
    if (nonly && !cast) {
        cli_error("create: --only needs --cast");
        goto done;
    }
    if (jobs)
        cli_writer_jobs(&opt, jobs);
    const char *tmpdir = getenv("TMPDIR"); /* the library reads no environment */
    for (size_t k = 0; k < nopt; k++) {
        optv[k].cast = cast;
        optv[k].only = nonly ? only : NULL;
        optv[k].only_count = nonly;
        optv[k].weight_stats = opt.weight_stats;
        optv[k].executor = opt.executor; /* -j: the stats before a cast too */
        optv[k].portable_stats = opt.portable_stats; /* WPACK_ISA=scalar: theirs too */
        optv[k].max_ratio = (uint32_t)max_ratio;
        optv[k].follow_links = follow_links;
        optv[k].keep_observers = keep_observers;
        optv[k].temp_dir = tmpdir;
        optv[k].warn = on_warn;
        optv[k].err = err;
        optv[k].err_size = sizeof err;
    }
    if (opt.histogram_bins && !opt.weight_stats) {
        cli_error("create: --histogram needs weight statistics (drop --no-stats)");
        goto done;
    }
    if (!out || !ninputs) {
        cli_error("create: %s (see wpack create --help)", !out ? "-o OUT is required" : "no inputs");
        goto done;
    }
    rc = CLI_FAIL;
    /* The same-file guard: the inputs as given before anything is read,
     * then every file found under input directories. */
    cli_files_out_archive(&guard, out);
    for (size_t k = 0; k < nstats; k++)
        cli_files_in(&guard, stats_files[k]);
    for (size_t k = 0; k < ninputs; k++)
        cli_files_in(&guard, inputs[k]);
    if (!cli_files_check("create", &guard))
        goto done;
    for (size_t k = 0; k < ninputs; k++) {
        l.cur = inopts[k];
        l.cur_input = inputs[k];
        int e = wpack_import_list(inputs[k], inopts[k], push, &l);
        if (e) {
            cli_error("%s [%s]", e == WPACK_E_NOMEM && !*err ? "out of memory" : err,
                      wpack_error_name(e));
            goto done;
        }
    }
    if (!l.n && !allow_empty) {
        cli_error("create: no input files found (no .npy in the directories given): nothing "
                  "written; --allow-empty writes an empty archive [%s]",
                  wpack_error_name(WPACK_E_EMPTY));
        goto done;
    }
    /* Only files the inputs led to (a directory's .npy, an index's shards:
     * `within` set) are new: with none, the guard's list is the one just
     * checked, and checking it again opened an old set at OUT once more. */
    size_t found = 0;
    for (size_t k = 0; k < l.n; k++)
        if (l.v[k].within) {
            cli_files_in(&guard, l.v[k].path);
            found++;
        }
    if (found && !cli_files_check("create", &guard))
        goto done;
    if (!l.n)
        cli_warn("no inputs found: writing an empty archive");

    if (shard_size && opt.compress_level) {
        cli_error("create: --shard-size stores shards uncompressed; drop --compress");
        rc = CLI_USAGE;
        goto done;
    }
    opt.shard_size = shard_size; /* the writer streams the shards itself */
    opt.max_data_bytes = cli_output_cap(l.bytes, max_output);
    if (wpack_writer_open(&w, out, &opt) != WPACK_OK) {
        cli_error("%s [%s]", wpack_writer_errmsg(w), wpack_error_name(wpack_writer_errcode(w)));
        goto done;
    }
    for (size_t k = 0; k < nmeta; k++) {
        char *key;
        if (!cli_split_pair(metas[k], "--meta", &key, &v))
            goto done;
        int e = wpack_writer_set_string(w, key, v);
        free(key);
        if (e) {
            cli_error("--meta %s: %s [%s]", metas[k], wpack_writer_errmsg(w), wpack_error_name(e));
            goto done;
        }
    }
    if (layers && wpack_writer_set_string(w, "wpack.layers", layers) != WPACK_OK) {
        cli_error("--layers %s: %s [%s]", layers, wpack_writer_errmsg(w),
                  wpack_error_name(wpack_writer_errcode(w)));
        goto done;
    }
    if (wpack_import_open(&imp, w) != WPACK_OK) {
        cli_error("create: out of memory [%s]", wpack_error_name(WPACK_E_NOMEM));
        goto done;
    }
    cli_progress prog;
    cli_progress_init(&prog, l.bytes, l.n, quiet);
    prog.items = "files"; /* inputs, each of one tensor or of many */
    for (size_t k = 0; k < l.n; k++) {
        prog.label = l.v[k].name ? l.v[k].name : l.v[k].path;
        prog.base_bytes = prog.done_bytes;
        wpack_import_options io = *l.v[k].opts;
        io.name = l.v[k].name;
        io.within = l.v[k].within;
        io.progress = on_progress;
        io.progress_user = &prog;
        int e = wpack_import_add(imp, l.v[k].path, &io);
        if (e) {
            cli_progress_done(&prog);
            cli_error("%s%s [%s]", err,
                      e == WPACK_E_TOO_LARGE ? " (--max-output SIZE raises the cap)" : "",
                      wpack_error_name(e));
            goto done;
        }
        prog.done_items++;
        prog.done_bytes = prog.base_bytes + l.v[k].size;
    }
    cli_progress_done(&prog);
    for (size_t k = 0; k < nstats; k++) {
        wpack_import_options so;
        wpack_import_options_init(&so);
        so.stats_file = stats_files[k];
        so.err = err;
        so.err_size = sizeof err;
        int se = wpack_import_add(imp, NULL, &so);
        if (se != WPACK_OK) {
            cli_error("%s [%s]", err, wpack_error_name(se));
            goto done;
        }
    }
    for (size_t k = 0; k < nmap; k++) {
        char *other;
        if (!cli_split_pair(maps[k], "--name", &other, &v))
            goto done;
        int e = wpack_writer_add_name(w, other, v);
        free(other);
        if (e) {
            cli_error("--name %s: %s [%s]", maps[k], wpack_writer_errmsg(w), wpack_error_name(e));
            goto done;
        }
    }
    uint64_t count = wpack_writer_count(w);
    if (!count && !allow_empty) {
        cli_error("create: the inputs hold no tensor: nothing written; --allow-empty writes an "
                  "empty archive [%s]", wpack_error_name(WPACK_E_EMPTY));
        goto done;
    }
    int e = wpack_writer_finish(w, err, sizeof err);
    w = NULL;
    if (e) {
        cli_error("%s [%s]", err, wpack_error_name(e));
        goto done;
    }
    if (!quiet) {
        char size[32];
        cli_human_size(size, sizeof size, l.bytes);
        cli_line(stderr, "wrote %s: %llu tensors from %s of input", out,
                 (unsigned long long)count, size);
    }
    rc = CLI_OK;
done:
    wpack_import_close(imp);
    wpack_writer_abort(w);
    cli_files_free(&guard);
    free(optv);
    free(inopts);
    free(only);
    free(stats_files);
    for (size_t k = 0; k < l.n; k++) {
        free(l.v[k].path);
        free(l.v[k].name);
    }
    free(l.v);
    free(metas);
    free(maps);
    free(inputs);
    return rc;
}
