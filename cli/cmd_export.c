/* cmd_export.c - `wpack export`: an archive as safetensors, npz or tar. */
#include <string.h>
#include <sys/stat.h>

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
    "`wpack extract` writes them. FILE appears only when complete (a temporary\n"
    "file FILE.tmp-PID-RANDOM beside it, renamed over it; a killed run's\n"
    "temporary is removed by the next run to FILE). FILE may not be ARCHIVE, one\n"
    "of its shards, or a link to them.\n"
    "\n"
    "Splats and compressed tensors are written in full: when the total is above\n"
    "the output cap or the free space, nothing is written (WPACK_E_TOO_LARGE).\n"
    "\n"
    "  --to FORMAT         safetensors, npz or tar (required)\n"
    "  -o, --output FILE   where to write (required)\n"
    "  --max-output SIZE   cap on the bytes written (default: the larger of\n"
    "                      1 GiB and 1000 x the archive's size)\n"
    "  --no-verify         do not check each tensor's bytes against its XXH3 as it\n"
    "                      is written (checked by default: a mismatch fails naming\n"
    "                      the tensor, and FILE does not appear)\n"
    "  -q, --quiet         no progress or summary line\n"
    "ARCHIVE may be an http://, https:// or s3://BUCKET/KEY URL: only the byte\n"
    "ranges needed are fetched and each tensor is checked against its XXH3\n"
    "(README: Archives on object stores; AWS_* and WPACK_REMOTE_* settings).\n";

/* An upper bound on what wpk_export writes: every tensor's bytes plus room
 * for its header record (JSON entry, .npy header, tar/zip headers). */
static uint64_t export_size(const wpack_archive *ar)
{
    uint64_t total = 8192;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        uint64_t add = t.nbytes + 2048 + 2 * (uint64_t)t.name_len;
        total = total > UINT64_MAX - add ? UINT64_MAX : total + add;
    }
    return total;
}

int cmd_export(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *to = NULL, *v;
    cli_write_opts wo = CLI_WRITE_OPTS_INIT;
    int r;
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
        } else if ((r = cli_write_opt(argc, argv, &i, &wo))) {
            if (r < 0)
                return CLI_USAGE;
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
    cli_files guard = {0};
    cli_files_out(&guard, out);
    wpack_archive *ar = cli_open_checked("export", in, &guard, wo.verify);
    cli_files_free(&guard);
    if (!ar)
        return CLI_FAIL;
    uint64_t need = export_size(ar), count = wpack_count(ar);
    if (!cli_check_output("export", out, need, cli_input_bytes(ar), wo.max_output, 1)) {
        wpack_close(ar);
        return CLI_FAIL;
    }
    char err[1024];
    cli_progress prog;
    cli_progress_init(&prog, cli_data_bytes(ar), count, wo.quiet);
    int rc = wpk_export(ar, format, out, cli_progress_tensor, &prog, err, sizeof err);
    if (prog.done_items)
        cli_progress_done(&prog);
    wpack_close(ar);
    if (rc) {
        cli_error("%s: %s [%s]", out, err, wpack_error_name(rc));
        return CLI_FAIL;
    }
    struct stat sb;
    if (!wo.quiet) {
        char size[32];
        cli_human_size(size, sizeof size, stat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0);
        fprintf(stderr, "exported %llu tensors (%s) to %s as %s\n", (unsigned long long)count,
                size, out, to);
    }
    return CLI_OK;
}
