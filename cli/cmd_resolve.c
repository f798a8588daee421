/* cmd_resolve.c - `wpack resolve`: point an MLIR module's weight globals
 * at archive entries (resolver/README.md). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "map_json.h"
#include "wpack.h"
#include "wpack_mlir.h"

static const char help[] =
    "usage: wpack resolve ARCHIVE IN.mlir -o OUT.mlir [options]\n"
    "\n"
    "Finds every weight global of IN.mlir (ml_program.global with an\n"
    "#ml_program.extern value, pretty or generic, through aliases; IREE\n"
    "util.global without a value; globals already resolved by --emit iree)\n"
    "and points it at an archive entry: by its symbol name, then the\n"
    "archive's name map, then --map. The global's tensor type must match the\n"
    "entry's dtype and every dim. Everything else is copied byte for byte;\n"
    "resolving the output again changes nothing. Nothing is written on error;\n"
    "OUT.mlir appears only when complete (a temporary file OUT.mlir.tmp-PID-RANDOM\n"
    "beside it, renamed over it; a killed run's temporary is removed by the next\n"
    "run to OUT.mlir). OUT.mlir may not be ARCHIVE, one of its shards, IN.mlir,\n"
    "the --map file or a link to them.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE   where the resolved MLIR goes\n"
    "  --emit MODE         uri (default): keep #ml_program.extern, add\n"
    "                        {wpack.uri = \"wpack:<index-xxh3>/<entry>\"}\n"
    "                      iree: value #flow.parameter.named<\"SCOPE\"::\"ENTRY\">\n"
    "                      inline: value dense_resource<KEY> + the archive's bytes\n"
    "  --scope NAME        parameter scope for --emit iree (default model)\n"
    "  --map FILE.json     {\"global\": \"entry\", ...} for names nothing else maps\n"
    "  --allow-missing     leave unresolved globals as they are (warn)\n"
    "  --annotate          put the archive's calibration stats on the IR: the op that\n"
    "                        produces each module's output gets P.min, P.max, P.absmax\n"
    "                        (activation stats), resolved globals their weight stats\n"
    "  --form FORM         annotate: attrs (default): P.min, P.max, P.absmax = F : f32\n"
    "                        (and P.axis per-channel); quant: one typed attribute\n"
    "                        P.range = !quant.calibrated<f32<MIN:MAX>> (MLIR's quant\n"
    "                        dialect; the archive's f64 values exact); per-channel and\n"
    "                        min == max records keep the attrs form (a note says so)\n"
    "  --attr-prefix P     prefix of those attributes (default wpack)\n"
    "  --strip-prefix P    annotate: also try each location's module path without\n"
    "                        the leading P (P or P. : 'model' takes model.0 to 0,\n"
    "                        \"L['self']\" takes L['self'].0 to 0); repeatable\n"
    "  --module-map FILE.json  annotate: {\"IR module path\": \"archive key\", ...};\n"
    "                        a path and the paths under it become the key's (after\n"
    "                        the archive's own, from `wpack create --name IR=KEY`)\n"
    "  --strict            fail if an activation stats record is named by no op or an\n"
    "                        op names only paths without stats (say which), or if a\n"
    "                        wpack.uri names another archive (else warnings, notes)\n"
    "  --allow-none        annotate: succeed even when no op got activation stats\n"
    "                        (by default that is an error, WPACK_E_EMPTY)\n"
    "  --max-output SIZE   cap on the bytes of OUT.mlir, counted before anything\n"
    "                        is written (default: the larger of 1 GiB and 1000 x\n"
    "                        ARCHIVE's and IN.mlir's sizes; K/M/G suffixes); above\n"
    "                        it nothing is written [WPACK_E_TOO_LARGE]. --emit inline\n"
    "                        writes each entry as hex, 2 bytes a byte; a splat entry\n"
    "                        costs a few bytes: its value is the splat dense<\"0xFILL\">\n"
    "  -q, --quiet         no notes (unused entries, summary)\n"
    "  --no-verify         --emit inline: do not check each entry's bytes against\n"
    "                        its XXH3 as they are copied in (checked by default: a\n"
    "                        mismatch fails naming the entry, nothing is written)\n"
    CLI_NO_SYNC_HELP
    "\n"
    "A global that has a wpack.uri attribute (an earlier --emit uri output) keeps\n"
    "the entry its URI names, unless --map names one; a URI of another archive\n"
    "(its id changes with every calibrate) is a note, an error with --strict.\n"
    "Errors end with their code, e.g. [WPACK_E_NOT_FOUND]; exit status 1.\n"
    "ARCHIVE may be an http://, https:// or s3://BUCKET/KEY URL: only the byte\n"
    "ranges needed are fetched and each tensor is checked against its XXH3\n"
    "(README: Archives on object stores; AWS_* and WPACK_REMOTE_* settings).\n"
    CLI_CACHE_HELP;

/* Attribute names are bare identifiers: [A-Za-z_][A-Za-z0-9_$.]* */
static int cli_attr_prefix_ok(const char *p)
{
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
        return 0;
    for (; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '$' || *p == '.'))
            return 0;
    return 1;
}

/* usage errors end with their code like every other failure */
#define USAGE_CODE " [WPACK_E_INVALID_ARGUMENT]"

/* --module-map FILE.json into opt; 0 or a CLI exit code (message printed). */
static int load_module_map(const char *path, wpk_name_map *mm, wpack_resolve_options *opt)
{
    char err[600];
    if (wpk_name_map_load(path, mm, err, sizeof err)) {
        cli_error("--module-map %s [WPACK_E_INPUT]", err);
        return CLI_FAIL;
    }
    for (size_t i = 0; i < mm->n; i++) {
        if (!mm->globals[i][0] || !mm->entries[i][0]) {
            cli_error("--module-map %s: an empty module path (\"%s\": \"%s\"); use --strip-prefix "
                      "to drop a leading path [WPACK_E_INPUT]", path, mm->globals[i], mm->entries[i]);
            return CLI_FAIL;
        }
    }
    opt->module_map_ir = (const char *const *)mm->globals;
    opt->module_map_keys = (const char *const *)mm->entries;
    opt->module_map_count = mm->n;
    return CLI_OK;
}

/* Parse, open, resolve; strips has room for argc prefixes. */
static int run(int argc, char **argv, const char **strips)
{
    const char *out = NULL, *emit = "uri", *scope = NULL, *map_path = NULL, *prefix = NULL;
    const char *module_map = NULL, *strip, *form = NULL;
    const char *pos[2];
    int npos = 0, allow_missing = 0, quiet = 0, annotate = 0, strict = 0, allow_none = 0;
    int no_sync = cli_env_no_sync();
    int verify = 1;
    uint64_t max_output = 0;
    size_t nstrips = 0;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        }
        if ((r = cli_opt_output(argc, argv, &i, &out)) ||
            (r = cli_opt_value(argc, argv, &i, "--emit", &emit)) ||
            (r = cli_opt_value(argc, argv, &i, "--scope", &scope)) ||
            (r = cli_opt_value(argc, argv, &i, "--map", &map_path)) ||
            (r = cli_opt_value(argc, argv, &i, "--module-map", &module_map)) ||
            (r = cli_opt_value(argc, argv, &i, "--form", &form)) ||
            (r = cli_opt_value(argc, argv, &i, "--attr-prefix", &prefix)) ||
            (r = cli_max_output_opt(argc, argv, &i, &max_output)) ||
            (r = cli_remote_opt(argc, argv, &i))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if ((r = cli_opt_value(argc, argv, &i, "--strip-prefix", &strip))) {
            if (r < 0)
                return CLI_USAGE;
            if (!*strip) {
                cli_error("resolve: --strip-prefix needs a non-empty path" USAGE_CODE);
                return CLI_USAGE;
            }
            strips[nstrips++] = strip;
            continue;
        }
        if (strcmp(argv[i], "--allow-missing") == 0) {
            allow_missing = 1;
        } else if (strcmp(argv[i], "--annotate") == 0) {
            annotate = 1;
        } else if (strcmp(argv[i], "--strict") == 0) {
            strict = 1;
        } else if (strcmp(argv[i], "--allow-none") == 0) {
            allow_none = 1;
        } else if (strcmp(argv[i], "--no-verify") == 0) {
            verify = 0;
        } else if (strcmp(argv[i], "--no-sync") == 0) {
            no_sync = 1;
        } else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
            cli_remote_quiet();
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("resolve: unknown option '%s' (see wpack resolve --help)" USAGE_CODE, argv[i]);
            return CLI_USAGE;
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            cli_error("resolve: too many arguments (see wpack resolve --help)" USAGE_CODE);
            return CLI_USAGE;
        }
        i++;
    }
    if (npos != 2 || !out) {
        cli_error("resolve: needs ARCHIVE IN.mlir -o OUT.mlir (see wpack resolve --help)" USAGE_CODE);
        return CLI_USAGE;
    }
    wpack_resolve_options opt;
    wpack_resolve_options_init(&opt);
    opt.emit = wpack_emit_from_name(emit);
    if (opt.emit < 0) {
        cli_error("resolve: --emit must be uri, iree or inline, not '%s'" USAGE_CODE, emit);
        return CLI_USAGE;
    }
    if (scope && !(wpack_emit_flags(opt.emit) & WPACK_EMIT_HAS_SCOPE))
        cli_warn("--scope only matters with --emit iree");
    opt.scope = scope;
    opt.allow_missing = allow_missing;
    if (!annotate && (prefix || nstrips || module_map || allow_none || form))
        cli_warn("%s only matters with --annotate",
                 prefix ? "--attr-prefix" : nstrips ? "--strip-prefix" : module_map ? "--module-map"
                 : form ? "--form" : "--allow-none");
    opt.annotate_form = wpack_annotate_form_from_name(form ? form : "attrs");
    if (opt.annotate_form < 0) {
        cli_error("resolve: --form must be attrs or quant, not '%s'" USAGE_CODE, form);
        return CLI_USAGE;
    }
    if (prefix && !cli_attr_prefix_ok(prefix)) {
        cli_error("resolve: --attr-prefix '%s' is not a bare MLIR identifier ([A-Za-z_][A-Za-z0-9_$.]*)" USAGE_CODE,
                  prefix);
        return CLI_USAGE;
    }
    opt.annotate = annotate;
    opt.attr_prefix = prefix;
    opt.strict = strict;
    opt.allow_none = allow_none;
    opt.no_sync = no_sync;
    opt.strip_prefixes = strips;
    opt.strip_count = nstrips;
    opt.diag = cli_on_diag;
    opt.diag_user = &quiet;
    cli_files guard = {0}; /* before anything is read; the shards once ARCHIVE is open */
    cli_files_in(&guard, pos[0]);
    cli_files_in(&guard, pos[1]);
    cli_files_in(&guard, map_path);
    cli_files_in(&guard, module_map);
    cli_files_out(&guard, out);
    if (!cli_files_check("resolve", &guard)) {
        cli_files_free(&guard);
        return CLI_FAIL;
    }
    wpk_name_map map = {0}, mmap_ = {0};
    int rc = CLI_OK;
    if (map_path) {
        char err[600];
        if (wpk_name_map_load(map_path, &map, err, sizeof err)) {
            cli_error("--map %s [WPACK_E_INPUT]", err);
            cli_files_free(&guard);
            return CLI_FAIL;
        }
        opt.map_globals = (const char *const *)map.globals;
        opt.map_entries = (const char *const *)map.entries;
        opt.map_count = map.n;
    }
    if (module_map && (rc = load_module_map(module_map, &mmap_, &opt)) != CLI_OK) {
        wpk_name_map_free(&map);
        wpk_name_map_free(&mmap_);
        cli_files_free(&guard);
        return rc;
    }
    /* only a mode that hands the archive's bytes out (inline) verifies them */
    wpack_archive *ar =
        cli_open_reads(pos[0], verify && (wpack_emit_flags(opt.emit) & WPACK_EMIT_READS_BYTES));
    if (ar) {
        cli_files_archive_shards(&guard, ar);
        if (!cli_files_check("resolve", &guard)) {
            wpack_close(ar);
            ar = NULL;
        }
    }
    cli_files_free(&guard);
    wpack_resolve_result res;
    uint64_t input_bytes = 0;
    if (ar) { /* the output cap: the rule of extract and export, on both inputs */
        struct stat st;
        uint64_t mlir = stat(pos[1], &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
        input_bytes = cli_input_bytes(ar);
        input_bytes = input_bytes > UINT64_MAX - mlir ? UINT64_MAX : input_bytes + mlir;
        opt.max_output = cli_output_cap(input_bytes, max_output);
    }
    int e = ar ? wpack_resolve_file(ar, pos[1], out, &opt, &res) : WPACK_E_IO;
    if (e)
        rc = CLI_FAIL;
    if (e == WPACK_E_TOO_LARGE)
        cli_cap_hint("resolve", input_bytes, max_output);
    wpack_close(ar);
    wpk_name_map_free(&map);
    wpk_name_map_free(&mmap_);
    if (rc)
        return rc;
    if (!quiet)
        fprintf(stderr, "wpack: resolved %llu of %llu weight globals, %llu left unresolved\n",
                (unsigned long long)res.resolved, (unsigned long long)res.globals,
                (unsigned long long)res.missing);
    if (!quiet && annotate)
        fprintf(stderr, "wpack: annotated %llu ops with activation stats and %llu globals with weight stats\n",
                (unsigned long long)res.annotated_ops, (unsigned long long)res.annotated_globals);
    return CLI_OK;
}

int cmd_resolve(int argc, char **argv)
{
    const char **strips = calloc((size_t)argc + 1, sizeof *strips);
    if (!strips) {
        cli_error("resolve: out of memory [WPACK_E_NOMEM]");
        return CLI_FAIL;
    }
    int rc = run(argc, argv, strips);
    free(strips);
    return rc;
}
