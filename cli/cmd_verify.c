/* cmd_verify.c - `wpack verify`: every checksum, every bad entry named. */
#include <inttypes.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: wpack verify ARCHIVE\n"
    "\n"
    "Validates the archive's structure, then checks the XXH3-64 checksum of\n"
    "every tensor, that compressed tensors decode, that bool tensors hold\n"
    "only 0 and 1, and that all padding is zero. Exit status 0 only when all\n"
    "match; otherwise every bad entry is named on stderr.\n";

static void on_bad(void *user, uint64_t entry, int code, const char *message)
{
    (void)entry;
    uint64_t *bad = user;
    (*bad)++;
    cli_error("%s [%s]", message, wpack_error_name(code));
}

int cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("verify: unknown option '%s'", argv[i]);
            return CLI_USAGE;
        } else if (!path) {
            path = argv[i];
        } else {
            cli_error("verify: one ARCHIVE only");
            return CLI_USAGE;
        }
    }
    if (!path) {
        cli_error("verify: no ARCHIVE given (see wpack verify --help)");
        return CLI_USAGE;
    }
    wpack_archive *ar;
    if (!(ar = cli_open(path))) {
        return CLI_FAIL;
    }
    wpack_info in;
    wpack_get_info(ar, &in);
    if (in.recovered)
        cli_warn("%s: bytes after the archive's end (an interrupted update) were ignored", path);
    uint64_t bad = 0;
    wpack_verify_all(ar, on_bad, &bad);
    /* A sharded set's manifest holds no data itself: count its shards'. */
    uint64_t data = in.data_length;
    for (uint32_t s = 0; s < wpack_shard_count(ar); s++) {
        const char *sp;
        const wpack_archive *sh;
        wpack_info si;
        if (wpack_shard_at(ar, s, &sp, &sh) == WPACK_OK) {
            wpack_get_info(sh, &si);
            data += si.data_length;
        }
    }
    char size[32];
    cli_human_size(size, sizeof size, data);
    if (bad) {
        cli_error("%s: FAILED: %" PRIu64 " problem%s in %" PRIu64 " tensors", path, bad,
                  bad == 1 ? "" : "s", in.entry_count);
    } else {
        uint32_t ns = wpack_shard_count(ar);
        char shards[48] = "";
        if (ns)
            snprintf(shards, sizeof shards, " in %u shard%s", ns, ns == 1 ? "" : "s");
        cli_line(stdout, "%s: OK: %" PRIu64 " tensors, %s of data%s, index xxh3 %016" PRIx64, path,
                 in.entry_count, size, shards, in.index_checksum);
    }
    wpack_close(ar);
    return bad ? CLI_FAIL : CLI_OK;
}
