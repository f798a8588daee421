/* cmd_create.c - `wpack create`: pack .npy files and directories of them. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cli.h"
#include "import.h"
#include "internal.h"
#include "manifest_stats.h"
#include "copy.h"
#include "npy.h"

static const char help[] =
    "usage: wpack create -o OUT.wpack [options] INPUT...\n"
    "\n"
    "INPUT is a .npy file (tensor name: the file name without .npy) or a\n"
    "directory of them (name: the relative path with '/' turned into '.', e.g.\n"
    "enc/layers/0/w.npy -> enc.layers.0.w). .npy 1.0/2.0/3.0, little- or\n"
    "big-endian, C or Fortran order (stored C order), every numeric dtype.\n"
    "Float tensors get weight statistics (min, max, absmax, mean, variance).\n"
    "The archive appears at OUT only when complete (temp file OUT.tmp-PID-RANDOM,\n"
    "fsync, rename); on any error an existing OUT is left untouched, and a killed\n"
    "run's temp file is removed by the next run to OUT. OUT may not be one of\n"
    "the inputs (or a link to one): that is refused before anything is read.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE     the archive to write (required)\n"
    "  --align N             data alignment, a power of two 64..2M (default 4096)\n"
    "  --histogram N         also store an N-bin histogram per float tensor\n"
    "  --no-stats            do not compute weight statistics\n"
    "  --shard-size SIZE     write a sharded set: shards of about SIZE bytes of data\n"
    "                        (K/M/G) named OUT-0000k-of-0000n.wpack, and OUT as the\n"
    "                        manifest that opens them all as one archive; written\n"
    "                        in one pass, no temporary copy of the whole set\n"
    "  --compress zstd[:L]   store tensors as zstd chunks (level L, default 3), each\n"
    "                        only if it shrinks by --compress-saving percent (5)\n"
    "  --compress-min BYTES  leave tensors smaller than this uncompressed (64K)\n"
    "  --chunk-size BYTES    uncompressed bytes per chunk, power of two to 64M (1M)\n"
    "  --compress-saving P   minimum saving in percent for a tensor to stay compressed\n"
    "  --meta KEY=VALUE      a string metadata entry (repeatable), e.g. model.name=mlp\n"
    "  --layers SPEC         the default module chain of wpack run / calibrate\n"
    "  --name OTHER=ENTRY    record that a consumer calls ENTRY by OTHER (repeatable);\n"
    "                        ENTRY may be a module path with activation stats only\n"
    "                        (--name model.0=0: resolve --annotate maps IR path model.0\n"
    "                        to key 0; kept in metadata wpack.module_names)\n"
    "  -q, --quiet           no progress line\n"
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
    "                        weight statistics are of the values before the cast)\n"
    "  --only GLOB           with --cast: only names matching GLOB (repeatable)\n"
    "  --stats FILE          calibration statistics from a JSON file\n"
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

typedef struct {
    char *path;  /* file on disk */
    char *name;  /* tensor name */
    uint64_t size;
    int kind;    /* wpk_input_kind */
    const wpk_import_opts *opts;
} input_file;

typedef struct {
    input_file *v;
    size_t n, cap;
    uint64_t bytes;
    const wpk_import_opts *cur; /* options of the input being collected */
} input_list;

static int push(input_list *l, const char *path, const char *name, uint64_t size)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        input_file *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return 0;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].path = strdup(path);
    l->v[l->n].name = strdup(name);
    l->v[l->n].size = size;
    l->v[l->n].kind = WPK_IN_NPY;
    l->v[l->n].opts = l->cur;
    if (!l->v[l->n].path || !l->v[l->n].name)
        return 0;
    l->n++;
    l->bytes += size;
    return 1;
}

static int ends_with_npy(const char *s)
{
    size_t n = strlen(s);
    return n > 4 && strcmp(s + n - 4, ".npy") == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Walk dir in sorted order; rel is the name prefix so far ("" at the top).
 * A symlink is refused unless follow (--follow-links): it may lead out of the
 * directory; a FIFO or device is skipped with a warning, never opened. */
static int walk(input_list *l, const char *dir, const char *rel, int depth, int follow)
{
    if (depth > 64) {
        cli_error("%s: directories nested deeper than 64 levels", dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) {
        cli_error("%s: cannot open directory: %s", dir, strerror(errno));
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int ok = 1;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and hidden files */
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **v = realloc(names, cap * sizeof *v);
            if (!v) {
                ok = 0;
                break;
            }
            names = v;
        }
        if (!(names[n] = strdup(de->d_name))) {
            ok = 0;
            break;
        }
        n++;
    }
    closedir(d);
    if (!ok)
        cli_error("out of memory listing %s", dir);
    if (n) /* an empty directory has no array at all */
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && ok; i++) {
        size_t plen = strlen(dir) + strlen(names[i]) + 2;
        size_t rlen = strlen(rel) + strlen(names[i]) + 2;
        char *path = malloc(plen), *name = malloc(rlen);
        if (!path || !name) {
            free(path);
            free(name);
            ok = 0;
            break;
        }
        snprintf(path, plen, "%s/%s", dir, names[i]);
        snprintf(name, rlen, "%s%s%s", rel, *rel ? "." : "", names[i]);
        struct stat st;
        /* lstat: a symlinked directory could loop; symlinked files are followed below. */
        if (lstat(path, &st) != 0) {
            cli_error("%s: %s", path, strerror(errno));
            ok = 0;
        } else if (S_ISDIR(st.st_mode)) {
            ok = walk(l, path, name, depth + 1, follow);
        } else if (ends_with_npy(names[i])) {
            if (S_ISLNK(st.st_mode) && !follow) {
                cli_error("%s: a symbolic link: refused, as it may lead out of the directory "
                          "(--follow-links allows it) [%s]",
                          path, wpack_error_name(WPACK_E_FILE_TYPE));
                ok = 0;
            } else if (S_ISLNK(st.st_mode) && stat(path, &st) != 0) {
                cli_error("%s: broken symlink", path);
                ok = 0;
            } else if (!S_ISREG(st.st_mode)) {
                cli_warn("skipping %s: %s, not a regular file", path,
                         wpk_file_type_name(st.st_mode));
            } else {
                name[strlen(name) - 4] = 0;
                ok = push(l, path, name, (uint64_t)st.st_size);
            }
        } else {
            cli_warn("skipping %s: not a .npy file", path);
        }
        free(path);
        free(name);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return ok;
}

static int collect(input_list *l, const char *input)
{
    struct stat st;
    if (stat(input, &st) != 0) {
        cli_error("%s: %s", input, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        /* A FIFO would block the first read forever. */
        cli_error("%s: %s, not a regular file or a directory (refused) [%s]", input,
                  wpk_file_type_name(st.st_mode), wpack_error_name(WPACK_E_FILE_TYPE));
        return 0;
    }
    if (S_ISDIR(st.st_mode)) {
        size_t n = strlen(input);
        char *dir = strdup(input);
        if (!dir)
            return 0;
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = 0;
        int ok = walk(l, dir, "", 0, l->cur && l->cur->follow_links);
        free(dir);
        return ok;
    }
    char derr[600];
    int kind = wpk_import_detect(input, derr, sizeof derr);
    if (kind == WPK_IN_UNKNOWN) {
        cli_error("%s", derr);
        return 0;
    }
    if (kind != WPK_IN_NPY) {
        /* a manifest or HF index counts the files it names too */
        uint64_t bytes = wpk_import_bytes(input, kind, l->cur && l->cur->follow_links);
        if (!push(l, input, input, bytes))
            return 0;
        l->v[l->n - 1].kind = kind;
        return 1;
    }
    if (!ends_with_npy(input)) {
        cli_error("%s: a .npy file must be named NAME.npy", input);
        return 0;
    }
    const char *base = strrchr(input, '/');
    base = base ? base + 1 : input;
    char *name = strdup(base);
    if (!name)
        return 0;
    name[strlen(name) - 4] = 0;
    int ok = push(l, input, name, (uint64_t)st.st_size);
    free(name);
    return ok;
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

/* Find which input first produced a tensor name, for a duplicate message. */
static const char *first_path_of(const input_list *l, size_t upto, const char *name)
{
    for (size_t i = 0; i < upto; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return l->v[i].path;
    return NULL;
}

int cmd_create(int argc, char **argv)
{
    uint64_t shard_size = 0;
    const char *out = NULL, *v;
    const char *layers = NULL; /* --layers: metadata wpack.layers */
    wpack_writer_options opt;
    wpack_writer_options_init(&opt);
    int quiet = 0, r;
    int follow_links = 0, allow_empty = 0; /* --follow-links, --allow-empty */
    const char **metas = NULL, **maps = NULL, **inputs = NULL;
    size_t nmeta = 0, nmap = 0, ninputs = 0;
    metas = calloc((size_t)argc, sizeof *metas);
    maps = calloc((size_t)argc, sizeof *maps);
    inputs = calloc((size_t)argc, sizeof *inputs);
    /* Importer options: --prefix/--key start a new set for the inputs after them. */
    wpk_import_opts *optv = calloc((size_t)argc + 1, sizeof *optv);
    const wpk_import_opts **inopts = calloc((size_t)argc, sizeof *inopts);
    const char **only = calloc((size_t)argc, sizeof *only), *stats_file = NULL;
    size_t nopt = 1, nonly = 0;
    int cast = 0;
    uint64_t max_ratio = 0, max_output = 0;
    int rc = CLI_USAGE;
    input_list l = {0};
    cli_files guard = {0};
    wpack_writer *w = NULL;
    wpk_sink sink;
    wpk_sink_init(&sink, NULL, NULL, 0);
    if (!metas || !maps || !inputs || !optv || !inopts || !only)
        goto done;
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        uint64_t n;
        if (cli_is_help(a)) {
            fputs(help, stdout);
            rc = CLI_OK;
            goto done;
        } else if ((r = cli_opt_value(argc, argv, &i, "-o", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--output", &v))) {
            if (r < 0)
                goto done;
            out = v;
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
        } else if ((r = cli_opt_value(argc, argv, &i, "--stats", &v))) {
            if (r < 0)
                goto done;
            stats_file = v;
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
        } else if (strcmp(a, "--allow-empty") == 0) {
            allow_empty = 1;
            i++;
        } else if (strcmp(a, "--no-stats") == 0) {
            opt.weight_stats = 0;
            i++;
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
    for (size_t k = 0; k < nopt; k++) {
        optv[k].cast = cast;
        optv[k].only = nonly ? only : NULL;
        optv[k].nonly = nonly;
        optv[k].weight_stats = opt.weight_stats;
        optv[k].max_ratio = (uint32_t)max_ratio;
        optv[k].follow_links = follow_links;
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
    if (shard_size)
        cli_files_out_manifest(&guard, out);
    else
        cli_files_out(&guard, out);
    cli_files_in(&guard, stats_file);
    for (size_t k = 0; k < ninputs; k++)
        cli_files_in(&guard, inputs[k]);
    if (!cli_files_check("create", &guard))
        goto done;
    for (size_t k = 0; k < ninputs; k++) {
        l.cur = inopts[k];
        if (!collect(&l, inputs[k]))
            goto done;
    }
    if (!l.n && !allow_empty) {
        cli_error("create: no input files found (no .npy in the directories given): nothing "
                  "written; --allow-empty writes an empty archive [%s]",
                  wpack_error_name(WPACK_E_EMPTY));
        goto done;
    }
    for (size_t k = 0; k < l.n; k++)
        cli_files_in(&guard, l.v[k].path);
    if (!cli_files_check("create", &guard))
        goto done;
    if (!l.n)
        cli_warn("no inputs found: writing an empty archive");

    char err[1024];
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
    wpk_sink_init(&sink, w, err, sizeof err);
    cli_progress prog;
    cli_progress_init(&prog, l.bytes, l.n, quiet);
    sink.progress = on_progress;
    sink.user = &prog;
    sink.warn = on_warn;
    for (size_t k = 0; k < l.n; k++) {
        prog.label = l.v[k].name;
        prog.base_bytes = prog.done_bytes;
        const wpk_import_opts *io = l.v[k].opts;
        wpk_sink_input(&sink, l.v[k].path, io);
        int e;
        if (l.v[k].kind != WPK_IN_NPY)
            e = wpk_import_file(&sink, l.v[k].path, l.v[k].kind);
        else if (io && io->cast)
            e = npy_sink_pack_file(&sink, l.v[k].name, l.v[k].path);
        else if (io && io->prefix) {
            char *full = malloc(strlen(io->prefix) + strlen(l.v[k].name) + 2);
            if (!full)
                goto done;
            sprintf(full, "%s.%s", io->prefix, l.v[k].name);
            e = npy_pack_file(w, full, l.v[k].path, on_progress, &prog, err, sizeof err);
            if (!e)
                wpk_sink_claim(&sink, full);
            free(full);
        } else {
            e = npy_pack_file(w, l.v[k].name, l.v[k].path, on_progress, &prog, err, sizeof err);
            if (!e)
                wpk_sink_claim(&sink, l.v[k].name);
        }
        if (e && (l.v[k].kind != WPK_IN_NPY || (io && io->cast))) {
            cli_progress_done(&prog);
            cli_error("%s%s [%s]", err,
                      e == WPACK_E_TOO_LARGE ? " (--max-output SIZE raises the cap)" : "",
                      wpack_error_name(e));
            goto done;
        }
        if (e) {
            cli_progress_done(&prog);
            const char *prev = e == WPACK_E_EXISTS ? first_path_of(&l, k, l.v[k].name) : NULL;
            if (!prev && e == WPACK_E_EXISTS)
                prev = wpk_sink_owner(&sink, l.v[k].name);
            if (prev)
                cli_error("%s: tensor '%s' is already taken by %s", l.v[k].path, l.v[k].name, prev);
            else
                cli_error("%s%s [%s]", err,
                          e == WPACK_E_TOO_LARGE ? " (--max-output SIZE raises the cap)" : "",
                          wpack_error_name(e));
            goto done;
        }
        prog.done_items++;
        prog.done_bytes = prog.base_bytes + l.v[k].size;
    }
    cli_progress_done(&prog);
    int se = stats_file ? stats_load_file(w, stats_file, err, sizeof err) : WPACK_OK;
    if (se != WPACK_OK) {
        cli_error("%s [%s]", err, wpack_error_name(se));
        goto done;
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
    wpack_writer_abort(w);
    cli_files_free(&guard);
    wpk_sink_free(&sink);
    free(optv);
    free(inopts);
    free(only);
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
