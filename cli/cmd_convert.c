/* cmd_convert.c - `wpack convert`: rewrite an archive compressed or not. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "copy.h"

static const char help[] =
    "usage: wpack convert ARCHIVE (--compress zstd[:L] | --decompress) (-o OUT | --in-place)\n"
    "                     [options]\n"
    "\n"
    "Writes a new archive with the same tensors, metadata, name map and stats,\n"
    "each tensor stored zstd-compressed (in independent chunks with a seek table,\n"
    "only when it shrinks by --compress-saving percent) or plain. The input may\n"
    "be compressed or not. OUT appears only when complete (a temporary file\n"
    "OUT.tmp-PID-RANDOM beside it, renamed over it; a killed run's temporary is\n"
    "removed by the next run to OUT). OUT may not be ARCHIVE (or a link to it):\n"
    "rewriting ARCHIVE itself is --in-place.\n"
    "\n"
    "  -o, --output FILE     the archive to write (not ARCHIVE itself)\n"
    "  --in-place            replace ARCHIVE (through a symlink: its target) with the\n"
    "                        converted archive, crash-safely; not for a sharded set\n"
    "                        nor one of its shards (its manifest records the\n"
    "                        shard's index: WPACK_E_SHARD); an update of ARCHIVE\n"
    "                        meanwhile waits for it\n"
    "  --compress zstd[:L]   zstd level L (default 3; 1..22, -7..-1 fast)\n"
    "  --decompress          store every tensor uncompressed (zero-copy views again)\n"
    "  --chunk-size BYTES    uncompressed bytes per chunk, power of two to 64M (1M)\n"
    "  --chunk-sums BYTES|off  an XXH3 per chunk of this size for each uncompressed\n"
    "                        tensor larger than it, and per zstd chunk of a zstd\n"
    "                        tensor of several (format 1.2, default 1M): reading\n"
    "                        part of a tensor checks or fetches only its chunks\n"
    "  --compress-min BYTES  leave tensors smaller than this uncompressed (64K)\n"
    "  --compress-saving P   minimum saving in percent (5)\n"
    "  --align N             data alignment (default: the input's)\n"
    "  --max-output SIZE     cap on the tensor bytes decoded and written (default:\n"
    "                        the larger of 1 GiB and 1000 x ARCHIVE's size); with\n"
    "                        --decompress the free space is checked too\n"
    "  --no-verify           do not check each tensor's bytes against its XXH3 as\n"
    "                        it is copied (checked by default: a mismatch fails\n"
    "                        naming the tensor, and OUT does not appear)\n"
    "  -q, --quiet           no progress or summary line\n"
    "  --no-sync             do not fsync OUT (also WPACK_NO_SYNC=1): faster, and\n"
    "                        still all-or-nothing for other processes, but a power\n"
    "                        loss or OS crash may leave it missing, empty or torn\n"
    "                        (README: Durability)\n";

int cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *v;
    wpack_writer_options opt;
    cli_writer_options_init(&opt);
    opt.weight_stats = 0; /* stats records are copied as they are */
    cli_write_opts wo = CLI_WRITE_OPTS_INIT;
    int decompress = 0, compress = 0, in_place = 0, r;
    uint64_t align = 0;
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            fputs(help, stdout);
            return CLI_OK;
        } else if ((r = cli_opt_output(argc, argv, &i, &out))) {
            if (r < 0)
                return CLI_USAGE;
        } else if ((r = cli_opt_value(argc, argv, &i, "--compress", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--compress-min", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--chunk-size", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--chunk-sums", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--compress-saving", &v))) {
            if (r < 0 || !cli_compress_option(a, v, &opt))
                return CLI_USAGE;
            compress |= strncmp(a, "--compress", 10) == 0 && (a[10] == 0 || a[10] == '=');
        } else if ((r = cli_opt_value(argc, argv, &i, "--align", &v))) {
            if (r < 0 || !cli_parse_size(v, &align) || align < 64 || align > (2u << 20) ||
                (align & (align - 1))) {
                cli_error("--align %s: want a power of two from 64 to 2M", r < 0 ? "" : v);
                return CLI_USAGE;
            }
        } else if ((r = cli_write_opt(argc, argv, &i, &wo))) {
            if (r < 0)
                return CLI_USAGE;
        } else if (strcmp(a, "--decompress") == 0) {
            decompress = 1;
            i++;
        } else if (strcmp(a, "--in-place") == 0) {
            in_place = 1;
            i++;
        } else if (a[0] == '-' && a[1]) {
            cli_error("convert: unknown option '%s'", a);
            return CLI_USAGE;
        } else if (!in) {
            in = a;
            i++;
        } else {
            cli_error("convert: one ARCHIVE only");
            return CLI_USAGE;
        }
    }
    if (in_place && out) {
        cli_error("convert: -o and --in-place together: choose one (see wpack convert --help)");
        return CLI_USAGE;
    }
    if (!in || (!out && !in_place) || compress == decompress) {
        cli_error("convert: want ARCHIVE, -o OUT (or --in-place) and one of --compress / "
                  "--decompress (see wpack convert --help)");
        return CLI_USAGE;
    }
    if (decompress)
        opt.compress_level = 0;
    char *target = NULL;
    int lock;
    wpack_archive *ar = cli_open_rewrite("convert", in, out, in_place, wo.verify, &target, &lock);
    if (!ar)
        return CLI_FAIL;
    if (in_place)
        out = target;
    wpack_info info;
    wpack_get_info(ar, &info);
    opt.alignment = align ? (uint32_t)align : info.alignment;
    opt.no_sync = wo.no_sync;
    /* what it decodes, and writes at most (a tensor that does not shrink is
     * stored plain); splats and aliases stay what they are */
    uint64_t data = cli_data_bytes(ar), count = wpack_count(ar);
    if (!cli_check_output("convert", out, data, cli_input_bytes(ar), wo.max_output, decompress)) {
        wpack_close(ar);
        cli_rewrite_unlock(&lock);
        free(target);
        return CLI_FAIL;
    }
    wpack_writer *w;
    char err[1024];
    cli_progress prog;
    cli_progress_init(&prog, data, count, wo.quiet);
    int rc = wpack_writer_open(&w, out, &opt);
    if (rc == WPACK_OK)
        rc = wpk_copy_archive_cb(ar, w, cli_progress_tensor, &prog, err, sizeof err);
    else
        snprintf(err, sizeof err, "%s", wpack_writer_errmsg(w));
    if (rc == WPACK_OK) {
        rc = wpack_writer_finish(w, err, sizeof err);
        w = NULL;
    }
    wpack_writer_abort(w);
    if (prog.done_items)
        cli_progress_done(&prog); /* before close: the label is a name in ar */
    wpack_close(ar);
    cli_rewrite_unlock(&lock); /* after the rename: an update waiting for it opens the new file */
    if (rc) {
        cli_error("%s [%s]", err, wpack_error_name(rc));
        free(target);
        return CLI_FAIL;
    }
    struct stat sb;
    if (!wo.quiet) {
        char logical[32], size[32];
        cli_human_size(logical, sizeof logical, data);
        cli_human_size(size, sizeof size, stat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0);
        cli_line(stderr, "wrote %s: %llu tensors, %s of tensor data in a %s file (%s)", out,
                (unsigned long long)count, logical, size, decompress ? "uncompressed" : "zstd");
    }
    free(target); /* out may point at it (--in-place) */
    return CLI_OK;
}
