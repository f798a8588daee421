/* cmd_externalize.c - `wpack externalize`: move an MLIR module's inline
 * weights into a new archive and leave references (resolver/README.md). */
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "wpack.h"
#include "wpack_mlir.h"

static const char help[] =
    "usage: wpack externalize IN.mlir -o OUT.mlir --archive NEW.wpack [options]\n"
    "\n"
    "Moves the weights of IN.mlir that are inline - globals (ml_program.global,\n"
    "util.global) whose initial value is a dense<...> literal, hex\n"
    "dense<\"0x...\">, or a dense_resource blob - and torch-mlir's\n"
    "torch.vtensor.literal (dense_resource<KEY> or dense<...>), arith.constant,\n"
    "stablehlo.constant and mhlo.constant (dense_resource<KEY> or dense<...>; a\n"
    "constant op's splat stays) into a new archive, one entry per global named\n"
    "by its symbol (by MODULE/.../SYMBOL for a symbol in several nested\n"
    "modules; an op by KEY; a torch literal of dense<...> by\n"
    "torch_literal_<XXH3 of its text>, a constant of dense<...> by\n"
    "dense_literal_<XXH3 of its text>), and writes OUT.mlir with a reference in\n"
    "their place: a torch literal becomes torch.vtensor.external.literal(@KEY)\n"
    "(--emit uri); a constant, and with --emit iree a torch literal, loads a\n"
    "global @KEY put before its function (ml_program.global_load_const, then\n"
    "torch_c.from_builtin_tensor for torch; @KEY_N, with a note, when the file\n"
    "has a symbol @KEY already). Globals of one type naming one blob or one\n"
    "attribute alias (#w = dense<...>) share an entry: the later ones are its\n"
    "aliases. Moved blobs leave the resources section when nothing else uses\n"
    "them. The bytes stream from the mapped\n"
    "input: memory does not grow with the weights. Nothing is written on error:\n"
    "both files appear only when complete (temporary files FILE.tmp-PID-RANDOM\n"
    "beside them, renamed over them; a killed run's temporaries are removed by\n"
    "the next run to the same files). OUT.mlir, NEW.wpack and IN.mlir must be\n"
    "three different files.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE   the rewritten MLIR\n"
    "  --archive FILE      the new archive (replaced if it exists)\n"
    "  --min-bytes N       tensors smaller than N bytes stay inline (default 256;\n"
    "                        K/M/G suffixes)\n"
    "  --emit MODE         uri (default): #ml_program.extern : T and\n"
    "                        {wpack.uri = \"wpack:<index-xxh3>/<entry>\"}\n"
    "                      iree: #flow.parameter.named<\"SCOPE\"::\"SYMBOL\"> : T\n"
    "  --scope NAME        parameter scope for --emit iree (default model)\n"
    "  --max-output SIZE   cap on the tensor bytes of NEW.wpack, checked before\n"
    "                        anything is written (default: the larger of 1 GiB and\n"
    "                        1000 x IN.mlir's size; K/M/G suffixes); above it nothing\n"
    "                        is written [WPACK_E_TOO_LARGE]. A splat literal\n"
    "                        (dense<1.0>, one-element hex) becomes a splat entry:\n"
    "                        one element, nothing against the cap\n"
    "  --no-stats          no automatic weight stats in the archive\n"
    "  -q, --quiet         no notes or summary\n"
    CLI_NO_SYNC_HELP;

/* cmd_resolve.c: after WPACK_E_TOO_LARGE, the cap's origin and --max-output */

int cmd_externalize(int argc, char **argv)
{
    const char *out = NULL, *archive = NULL, *emit = "uri", *scope = NULL, *min = NULL, *in = NULL;
    int quiet = 0, no_stats = 0, no_sync = 0;
    uint64_t max_output = 0;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        }
        if ((r = cli_opt_output(argc, argv, &i, &out)) ||
            (r = cli_opt_path(argc, argv, &i, "--archive", &archive)) ||
            (r = cli_opt_value(argc, argv, &i, "--emit", &emit)) ||
            (r = cli_opt_value(argc, argv, &i, "--scope", &scope)) ||
            (r = cli_opt_value(argc, argv, &i, "--min-bytes", &min)) ||
            (r = cli_max_output_opt(argc, argv, &i, &max_output))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(argv[i], "--no-stats") == 0) {
            no_stats = 1;
        } else if (strcmp(argv[i], "--no-sync") == 0) {
            no_sync = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("externalize: unknown option '%s' (see wpack externalize --help) "
                      "[WPACK_E_INVALID_ARGUMENT]", argv[i]);
            return CLI_USAGE;
        } else if (!in) {
            in = argv[i];
        } else {
            cli_error("externalize: too many arguments (see wpack externalize --help) [WPACK_E_INVALID_ARGUMENT]");
            return CLI_USAGE;
        }
        i++;
    }
    if (!in || !out || !archive) {
        cli_error("externalize: needs IN.mlir -o OUT.mlir --archive NEW.wpack (see wpack externalize "
                  "--help) [WPACK_E_INVALID_ARGUMENT]");
        return CLI_USAGE;
    }
    wpack_externalize_options opt;
    wpack_externalize_options_init(&opt);
    opt.emit = wpack_emit_from_name(emit);
    if (!(wpack_emit_flags(opt.emit) & WPACK_EMIT_CAN_EXTERNALIZE)) {
        cli_error("externalize: --emit must be uri or iree, not '%s' [WPACK_E_INVALID_ARGUMENT]", emit);
        return CLI_USAGE;
    }
    if (min && !cli_parse_size(min, &opt.min_bytes)) {
        cli_error("externalize: --min-bytes '%s' is not a size [WPACK_E_INVALID_ARGUMENT]", min);
        return CLI_USAGE;
    }
    if (scope && !(wpack_emit_flags(opt.emit) & WPACK_EMIT_HAS_SCOPE))
        cli_warn("--scope only matters with --emit iree");
    opt.scope = scope;
    wpack_writer_options wo;
    cli_writer_options_init(&wo);
    wo.weight_stats = !no_stats;
    wo.no_sync |= no_sync; /* WPACK_NO_SYNC=1 set it already */
    opt.writer = &wo;
    opt.diag = cli_on_diag;
    opt.diag_user = &quiet;
    cli_files guard = {0};
    cli_files_in(&guard, in);
    cli_files_out(&guard, out);
    cli_files_out_archive(&guard, archive);
    int same = !cli_files_check("externalize", &guard);
    cli_files_free(&guard);
    if (same)
        return CLI_FAIL;
    /* the output cap of extract and export, on IN.mlir's size: the writer's */
    struct stat st;
    uint64_t in_bytes = stat(in, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
    wo.max_data_bytes = cli_output_cap(in_bytes, max_output);
    wpack_externalize_result res;
    int e = wpack_externalize_file(in, out, archive, &opt, &res);
    if (e == WPACK_E_TOO_LARGE)
        cli_cap_hint("externalize", in_bytes, max_output);
    if (e)
        return CLI_FAIL;
    if (!quiet) {
        char size[64];
        cli_human_size(size, sizeof size, res.bytes_moved);
        cli_line(stderr,
                 "wpack: moved %llu of %llu inline globals (%s) into %s; %llu kept inline, "
                 "%llu resource blobs dropped",
                 (unsigned long long)res.moved, (unsigned long long)res.globals, size, archive,
                 (unsigned long long)res.kept, (unsigned long long)res.resources_dropped);
    }
    return CLI_OK;
}
