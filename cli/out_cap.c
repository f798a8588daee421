/* out_cap.c - refuse an output that is too large for its cap or its disk,
 * before a command writes anything (issue 14: a 700-byte archive can hold a
 * valid 2^62-byte splat, a 90 KB one 1.5 GiB of zstd zeros). */
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cli.h"

uint64_t cli_input_bytes(const wpack_archive *ar)
{
    wpack_info in;
    wpack_get_info(ar, &in);
    uint64_t total = in.file_length;
    for (uint32_t s = 0; s < wpack_shard_count(ar); s++) {
        const char *sp;
        const wpack_archive *sh;
        if (wpack_shard_at(ar, s, &sp, &sh) == WPACK_OK) {
            wpack_get_info(sh, &in);
            total = total > UINT64_MAX - in.file_length ? UINT64_MAX : total + in.file_length;
        }
    }
    return total;
}

uint64_t cli_data_bytes(const wpack_archive *ar)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        wpack_tensor_at(ar, i, &t);
        if (t.kind == WPACK_KIND_DATA || t.kind == WPACK_KIND_EXTERNAL)
            total = total > UINT64_MAX - t.nbytes ? UINT64_MAX : total + t.nbytes;
    }
    return total;
}

int cli_max_output_opt(int argc, char **argv, int *i, uint64_t *cap)
{
    const char *v;
    int r = cli_opt_value(argc, argv, i, "--max-output", &v);
    if (r <= 0)
        return r;
    if (!cli_parse_size(v, cap) || *cap == 0) {
        cli_error("--max-output %s: want a size above 0 in bytes, or with K, M or G", v);
        return -1;
    }
    return 1;
}

int cli_write_opt(int argc, char **argv, int *i, cli_write_opts *o)
{
    const char *a = argv[*i];
    if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
        o->quiet = 1;
        cli_remote_quiet();
        *i += 1;
        return 1;
    }
    if (strcmp(a, "--no-verify") == 0) {
        o->verify = 0;
        *i += 1;
        return 1;
    }
    if (cli_no_sync_opt(argv, i, &o->no_sync))
        return 1;
    return cli_max_output_opt(argc, argv, i, &o->max_output);
}

/* Free bytes for an unprivileged writer on the file system that holds path,
 * or of its nearest existing parent (the output may not exist yet). 0 with
 * *known = 0 when it cannot be told. */
static uint64_t free_bytes(const char *path, int *known)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", *path ? path : ".");
    struct statvfs sv;
    *known = 0;
    while (statvfs(buf, &sv) != 0) {
        if ((errno != ENOENT && errno != ENOTDIR) || strcmp(buf, ".") == 0 ||
            strcmp(buf, "/") == 0)
            return 0;
        size_t n = strlen(buf);
        while (n > 1 && buf[n - 1] == '/') /* "a/b/" -> "a/b" */
            buf[--n] = 0;
        char *slash = strrchr(buf, '/');
        if (!slash)
            snprintf(buf, sizeof buf, ".");
        else
            slash[slash == buf] = 0; /* "/x" -> "/", "a/b" -> "a" */
    }
    if (sv.f_blocks == 0) /* pseudo file systems report nothing useful */
        return 0;
    *known = 1;
    uint64_t unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
    return (uint64_t)sv.f_bavail > UINT64_MAX / unit ? UINT64_MAX : (uint64_t)sv.f_bavail * unit;
}

int cli_check_output(const char *cmd, const char *out, uint64_t need, uint64_t input_bytes,
                     uint64_t user_cap, int check_space)
{
    char n[32], c[32], in[32];
    uint64_t cap = cli_output_cap(input_bytes, user_cap);
    cli_human_size(n, sizeof n, need);
    cli_human_size(c, sizeof c, cap);
    if (need > cap) {
        if (user_cap) {
            cli_error("%s: %s would get %s (%llu bytes), above --max-output %s (%llu bytes): "
                      "nothing written [%s]", cmd, out, n, (unsigned long long)need, c,
                      (unsigned long long)cap, wpack_error_name(WPACK_E_TOO_LARGE));
        } else {
            cli_human_size(in, sizeof in, input_bytes);
            cli_error("%s: %s would get %s (%llu bytes) from %s of input, above the default cap "
                      "of %s (the larger of 1 GiB and 1000 x the input); raise it with "
                      "--max-output SIZE if that is really wanted: nothing written [%s]",
                      cmd, out, n, (unsigned long long)need, in, c,
                      wpack_error_name(WPACK_E_TOO_LARGE));
        }
        return 0;
    }
    int known;
    uint64_t avail = check_space ? free_bytes(out, &known) : 0;
    if (check_space && known && need > avail) {
        char a[32];
        cli_human_size(a, sizeof a, avail);
        cli_error("%s: %s would get %s (%llu bytes) but its file system has only %s free: "
                  "nothing written [%s]", cmd, out, n, (unsigned long long)need, a,
                  wpack_error_name(WPACK_E_TOO_LARGE));
        return 0;
    }
    return 1;
}

void cli_cap_hint(const char *cmd, uint64_t input_bytes, uint64_t user_cap)
{
    char c[32], in[32];
    cli_human_size(c, sizeof c, cli_output_cap(input_bytes, user_cap));
    cli_human_size(in, sizeof in, input_bytes);
    if (user_cap)
        cli_line(stderr, "wpack: %s: the cap is --max-output %s", cmd, c);
    else
        cli_line(stderr, "wpack: %s: the default cap is %s (the larger of 1 GiB and 1000 x the "
                 "input, %s); raise it with --max-output SIZE if that is really wanted", cmd, c, in);
}
