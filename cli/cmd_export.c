/* cmd_export.c - `wpack export`: an archive as safetensors, npz, tar, GGUF or IREE .irpa. */
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "wpack_import.h"

static const char help[] =
    "usage: wpack export ARCHIVE --to safetensors|npz|tar|gguf|irpa|trt-calib|ort-calib-json\n"
    "                    -o FILE\n"
    "\n"
    "Writes every tensor of ARCHIVE to FILE:\n"
    "  safetensors  what strict safetensors readers (and IREE's\n"
    "               --parameters=scope=FILE) accept; metadata become\n"
    "               __metadata__ strings; aliases and splats are written in full\n"
    "  npz          a zip of NAME.npy files (stored), for numpy.load\n"
    "  tar          a tar of NAME.npy files\n"
    "  gguf         GGUF v3 for llama.cpp/ggml: metadata as typed KVs (a GGUF file\n"
    "               packed by wpack create comes back byte for byte), dims\n"
    "               innermost first, ggml.* block dtypes as their GGML types;\n"
    "               rank <= 4, names <= 63 bytes, no u8..u64/bool/f8 tensors\n"
    "  trt-calib    the activation stats' ranges as a TensorRT calibration cache\n"
    "               (scale = absmax / 127); ort-calib-json: as an ONNX Runtime\n"
    "               calibration table {name: [min, max]} (spec appendix A.1);\n"
    "               both hold one range per tensor: a per-channel record is\n"
    "               written as its range over all channels, with a warning\n"
    "  irpa         an IREE parameter archive, keyed by entry name: load it with\n"
    "               --parameters=model=FILE next to `wpack resolve --emit iree`;\n"
    "               splats stay splats, aliases share bytes, no archive metadata\n"
    "bf16/f8 tensors in npz/tar are raw bits with a '# wpack dtype' comment, as\n"
    "`wpack extract` writes them. FILE appears only when complete (a temporary\n"
    "file FILE.tmp-PID-RANDOM beside it, renamed over it; a killed run's\n"
    "temporary is removed by the next run to FILE). FILE may not be ARCHIVE, one\n"
    "of its shards, or a link to them.\n"
    "\n"
    "Splats and compressed tensors are written in full (in an irpa a splat stays a\n"
    "splat entry and costs nothing): when the total is above the output cap or\n"
    "the free space, nothing is written (WPACK_E_TOO_LARGE).\n"
    "\n"
    "  --to FORMAT         safetensors, npz, tar, gguf, irpa, trt-calib or\n"
    "                      ort-calib-json (required)\n"
    "  -o, --output FILE   where to write (required)\n"
    "  --max-output SIZE   cap on the bytes written (default: the larger of\n"
    "                      1 GiB and 1000 x the archive's size)\n"
    "  --no-verify         do not check each tensor's bytes against its XXH3 as it\n"
    "                      is written (checked by default: a mismatch fails naming\n"
    "                      the tensor, and FILE does not appear)\n"
    "  -q, --quiet         no progress or summary line\n"
    CLI_NO_SYNC_HELP
    "ARCHIVE may be an http://, https:// or s3://BUCKET/KEY URL: only the byte\n"
    "ranges needed are fetched and each tensor is checked against its XXH3\n"
    "(README: Archives on object stores; AWS_* and WPACK_REMOTE_* settings).\n"
    CLI_CACHE_HELP;

static void on_warn(void *user, const char *message)
{
    (void)user;
    cli_warn("export: %s", message);
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
        } else if ((r = cli_opt_output(argc, argv, &i, &out))) {
            if (r < 0)
                return CLI_USAGE;
        } else if ((r = cli_opt_value(argc, argv, &i, "--to", &v))) {
            if (r < 0)
                return CLI_USAGE;
            to = v;
        } else if ((r = cli_write_opt(argc, argv, &i, &wo)) ||
                   (r = cli_remote_opt(argc, argv, &i))) {
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
    int format = wpack_export_format_from_name(to);
    if (!in || !out || !format) {
        cli_error("export: %s (see wpack export --help)",
                  !in ? "no archive" : !out ? "-o FILE is required"
                  : !to ? "--to FORMAT is required" : "--to wants safetensors, npz, tar, gguf, irpa, "
                                            "trt-calib or ort-calib-json");
        return CLI_USAGE;
    }
    cli_files guard = {0};
    cli_files_out(&guard, out);
    wpack_archive *ar = cli_open_checked("export", in, &guard, wo.verify);
    cli_files_free(&guard);
    if (!ar)
        return CLI_FAIL;
    uint64_t need = wpack_export_size_bound(ar, format), count = wpack_count(ar);
    if (!cli_check_output("export", out, need, cli_input_bytes(ar), wo.max_output, 1)) {
        wpack_close(ar);
        return CLI_FAIL;
    }
    char err[1024];
    cli_progress prog;
    cli_progress_init(&prog, cli_data_bytes(ar), count, wo.quiet);
    wpack_export_options eo;
    wpack_export_options_init(&eo);
    eo.progress = cli_progress_tensor;
    eo.progress_user = &prog;
    eo.err = err;
    eo.err_size = sizeof err;
    eo.warn = on_warn;
    if (cli_read_to_fd_flags() & WPACK_READ_NO_COPY_RANGE)
        eo.flags |= WPACK_EXPORT_NO_COPY_RANGE;
    if (wo.no_sync)
        eo.flags |= WPACK_EXPORT_NO_SYNC;
    int rc = wpack_export_file(ar, out, format, &eo);
    if (prog.done_items)
        cli_progress_done(&prog);
    wpack_close(ar);
    if (rc) {
        cli_error("%s [%s]", err, wpack_error_name(rc));
        return CLI_FAIL;
    }
    struct stat sb;
    if (!wo.quiet) {
        char size[32];
        cli_human_size(size, sizeof size, stat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0);
        if (format >= WPACK_EXPORT_TRT_CALIB)
            cli_line(stderr, "exported the activation ranges (%s) to %s as %s", size, out, to);
        else
            cli_line(stderr, "exported %llu tensors (%s) to %s as %s",
                    (unsigned long long)count, size, out, to);
    }
    return CLI_OK;
}
