/* cmd_verify.c - `wpack verify`: every checksum, every bad entry named. */
#include <inttypes.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: wpack verify [--cache DIR] ARCHIVE\n"
    "\n"
    "Validates the archive's structure, then checks the XXH3-64 checksum of\n"
    "every tensor, that compressed tensors decode, that bool tensors hold\n"
    "only 0 and 1, and that all padding is zero. Exit status 0 only when all\n"
    "match; otherwise every bad entry is named on stderr. On a terminal, a\n"
    "progress line (stderr) shows the bytes and tensors checked.\n"
    "ARCHIVE may be an http://, https:// or s3://BUCKET/KEY URL: only the byte\n"
    "ranges needed are fetched and each tensor is checked against its XXH3\n"
    "(README: Archives on object stores; AWS_* and WPACK_REMOTE_* settings).\n"
    CLI_CACHE_HELP;

typedef struct {
    uint64_t bad;
    const wpack_archive *ar;
    cli_progress prog; /* a progress line on a terminal */
} verify_state;

static void on_bad(void *user, uint64_t entry, int code, const char *message)
{
    (void)entry;
    verify_state *st = user;
    st->bad++;
    if (st->prog.enabled) /* the error on a line of its own */
        fputs("\r\033[K", stderr);
    cli_error("%s [%s]", message, wpack_error_name(code));
}

static void on_entry(void *user, uint64_t entry)
{
    verify_state *st = user;
    wpack_tensor t;
    if (wpack_tensor_at(st->ar, entry, &t) == WPACK_OK)
        cli_progress_tensor(&st->prog, &t);
}

int cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        } else if ((r = cli_remote_opt(argc, argv, &i)) != 0) {
            if (r < 0)
                return CLI_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("verify: unknown option '%s'", argv[i]);
            return CLI_USAGE;
        } else if (!path) {
            path = argv[i++];
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
    verify_state st = {0, ar, {0}};
    uint64_t items = 0;
    for (uint64_t i = 0; i < in.entry_count; i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        items += t.kind == WPACK_KIND_DATA || t.kind == WPACK_KIND_EXTERNAL;
    }
    cli_progress_init(&st.prog, cli_data_bytes(ar), items, 0);
    wpack_verify_all_progress(ar, on_bad, on_entry, &st);
    if (items)
        cli_progress_done(&st.prog);
    uint64_t bad = st.bad;
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
