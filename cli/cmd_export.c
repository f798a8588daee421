/* cmd_export.c - `wpack export`: an archive as safetensors, npz or tar. */
#include <string.h>

#include "cli.h"
#include "export.h"

static const char help[] =
    "usage: wpack export ARCHIVE --to safetensors|npz|tar -o FILE\n"
    "\n"
    "Writes every tensor of ARCHIVE to FILE:\n"
    "  safetensors  what strict safetensors readers (and IREE's\n"
    "               --parameters=scope=FILE) accept; metadata become\n"
    "               __metadata__ strings; aliases and splats are written in full\n"
    "  npz          a zip of NAME.npy files (stored), for numpy.load\n"
    "  tar          a tar of NAME.npy files\n"
    "bf16/f8 tensors in npz/tar are raw bits with a '# wpack dtype' comment, as\n"
    "`wpack extract` writes them. FILE appears only when complete.\n"
    "\n"
    "  --to FORMAT        safetensors, npz or tar (required)\n"
    "  -o, --output FILE  where to write (required)\n"
    "  --no-verify        do not check each tensor's bytes against its XXH3 as it\n"
    "                     is written (checked by default: a mismatch fails naming\n"
    "                     the tensor, and FILE does not appear)\n";

int cmd_export(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *to = NULL, *v;
    int r, verify = 1;
    for (int i = 1; i < argc;) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        } else if ((r = cli_opt_value(argc, argv, &i, "-o", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--output", &v))) {
            if (r < 0)
                return CLI_USAGE;
            out = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--to", &v))) {
            if (r < 0)
                return CLI_USAGE;
            to = v;
        } else if (strcmp(argv[i], "--no-verify") == 0) {
            verify = 0;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("export: unknown option '%s' (see wpack export --help)", argv[i]);
            return CLI_USAGE;
        } else if (!in) {
            in = argv[i++];
        } else {
            cli_error("export: one archive at a time");
            return CLI_USAGE;
        }
    }
    int format = !to ? 0
                 : strcmp(to, "safetensors") == 0 ? WPK_EXPORT_SAFETENSORS
                 : strcmp(to, "npz") == 0         ? WPK_EXPORT_NPZ
                 : strcmp(to, "tar") == 0         ? WPK_EXPORT_TAR
                                                  : -1;
    if (!in || !out || format <= 0) {
        cli_error("export: %s (see wpack export --help)",
                  !in ? "no archive" : !out ? "-o FILE is required"
                  : !to ? "--to FORMAT is required" : "--to wants safetensors, npz or tar");
        return CLI_USAGE;
    }
    wpack_archive *ar;
    if (!(ar = cli_open_reads(in, verify))) {
        return CLI_FAIL;
    }
    char err[1024];
    int rc = wpk_export(ar, format, out, err, sizeof err);
    wpack_close(ar);
    if (rc) {
        cli_error("%s: %s [%s]", out, err, wpack_error_name(rc));
        return CLI_FAIL;
    }
    return CLI_OK;
}
