/* cmd_resolve.c - `wpack resolve`: point an MLIR module's weight globals
 * at archive entries (resolver/README.md). */
#include <string.h>

#include "cli.h"
#include "map_json.h"
#include "wpack.h"

static const char help[] =
    "usage: wpack resolve ARCHIVE IN.mlir -o OUT.mlir [options]\n"
    "\n"
    "Finds every weight global of IN.mlir (ml_program.global with an\n"
    "#ml_program.extern value, pretty or generic, through aliases; IREE\n"
    "util.global without a value; globals already resolved by --emit iree)\n"
    "and points it at an archive entry: by its symbol name, then the\n"
    "archive's name map, then --map. The global's tensor type must match the\n"
    "entry's dtype and every dim. Everything else is copied byte for byte;\n"
    "resolving the output again changes nothing. Nothing is written on error.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE   where the resolved MLIR goes (may be IN.mlir)\n"
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
    "  --attr-prefix P     prefix of those attributes (default wpack)\n"
    "  -q, --quiet         no notes (unused entries, summary)\n"
    "  --no-verify         --emit inline: do not check each entry's bytes against\n"
    "                        its XXH3 as they are copied in (checked by default: a\n"
    "                        mismatch fails naming the entry, nothing is written)\n";

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

int cmd_resolve(int argc, char **argv)
{
    const char *out = NULL, *emit = "uri", *scope = NULL, *map_path = NULL, *prefix = NULL;
    const char *pos[2];
    int npos = 0, allow_missing = 0, quiet = 0, annotate = 0, verify = 1;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        }
        if ((r = cli_opt_value(argc, argv, &i, "-o", &out)) || (r = cli_opt_value(argc, argv, &i, "--output", &out)) ||
            (r = cli_opt_value(argc, argv, &i, "--emit", &emit)) ||
            (r = cli_opt_value(argc, argv, &i, "--scope", &scope)) ||
            (r = cli_opt_value(argc, argv, &i, "--map", &map_path)) ||
            (r = cli_opt_value(argc, argv, &i, "--attr-prefix", &prefix))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (strcmp(argv[i], "--allow-missing") == 0) {
            allow_missing = 1;
        } else if (strcmp(argv[i], "--annotate") == 0) {
            annotate = 1;
        } else if (strcmp(argv[i], "--no-verify") == 0) {
            verify = 0;
        } else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("resolve: unknown option '%s' (see wpack resolve --help)", argv[i]);
            return CLI_USAGE;
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            cli_error("resolve: too many arguments (see wpack resolve --help)");
            return CLI_USAGE;
        }
        i++;
    }
    if (npos != 2 || !out) {
        cli_error("resolve: needs ARCHIVE IN.mlir -o OUT.mlir (see wpack resolve --help)");
        return CLI_USAGE;
    }
    wpack_resolve_options opt;
    wpack_resolve_options_init(&opt);
    if (strcmp(emit, "uri") == 0)
        opt.emit = WPACK_EMIT_URI;
    else if (strcmp(emit, "iree") == 0)
        opt.emit = WPACK_EMIT_IREE;
    else if (strcmp(emit, "inline") == 0)
        opt.emit = WPACK_EMIT_INLINE;
    else {
        cli_error("resolve: --emit must be uri, iree or inline, not '%s'", emit);
        return CLI_USAGE;
    }
    if (scope && opt.emit != WPACK_EMIT_IREE)
        cli_warn("--scope only matters with --emit iree");
    opt.scope = scope;
    opt.allow_missing = allow_missing;
    if (prefix && !annotate)
        cli_warn("--attr-prefix only matters with --annotate");
    if (prefix && !cli_attr_prefix_ok(prefix)) {
        cli_error("resolve: --attr-prefix '%s' is not a bare MLIR identifier ([A-Za-z_][A-Za-z0-9_$.]*)", prefix);
        return CLI_USAGE;
    }
    opt.annotate = annotate;
    opt.attr_prefix = prefix;
    opt.diag = cli_on_diag;
    opt.diag_user = &quiet;
    wpk_name_map map = {0};
    if (map_path) {
        char err[600];
        if (wpk_name_map_load(map_path, &map, err, sizeof err)) {
            cli_error("%s", err);
            return CLI_FAIL;
        }
        opt.map_globals = (const char *const *)map.globals;
        opt.map_entries = (const char *const *)map.entries;
        opt.map_count = map.n;
    }
    wpack_archive *ar;
    /* only --emit inline hands the archive's bytes out */
    int rc = wpack_open_file(&ar, pos[0],
                             verify && opt.emit == WPACK_EMIT_INLINE ? WPACK_OPEN_VERIFY_READS : 0);
    if (rc) {
        cli_error("%s", ar ? wpack_errmsg(ar) : "out of memory");
        wpack_close(ar);
        wpk_name_map_free(&map);
        return CLI_FAIL;
    }
    wpack_resolve_result res;
    rc = wpack_resolve_file(ar, pos[1], out, &opt, &res);
    wpack_close(ar);
    wpk_name_map_free(&map);
    if (rc)
        return CLI_FAIL;
    if (!quiet)
        fprintf(stderr, "wpack: resolved %llu of %llu weight globals%s%llu left unresolved\n",
                (unsigned long long)res.resolved, (unsigned long long)res.globals,
                res.missing ? ", " : ", ", (unsigned long long)res.missing);
    if (!quiet && annotate)
        fprintf(stderr, "wpack: annotated %llu ops with activation stats and %llu globals with weight stats\n",
                (unsigned long long)res.annotated_ops, (unsigned long long)res.annotated_globals);
    return CLI_OK;
}
