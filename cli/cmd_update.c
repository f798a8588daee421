/* cmd_update.c - `wpack update`: add, replace or drop stats, metadata and
 * name-map names of an archive in place (spec 14), over wpack_update_*. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "manifest_stats.h"

static const char help[] =
    "usage: wpack update ARCHIVE [--stats FILE.json]... [--meta KEY=VALUE]...\n"
    "                            [--name OTHER=ENTRY]... [--drop-stats KEY[:KIND]]...\n"
    "\n"
    "Changes the index of ARCHIVE in place; tensor data is never rewritten.\n"
    "  --stats FILE.json      calibration statistics (the schema of create --stats,\n"
    "  --stats-from FILE      or any kind create --stats-from takes);\n"
    "                         a record replaces the archive's record of the same key\n"
    "                         and kind, given again the later one wins; a file that\n"
    "                         gives no record is refused (WPACK_E_STATS)\n"
    "  --meta KEY=VALUE       set a string metadata value (added or replaced)\n"
    "  --name OTHER=ENTRY     record that a consumer calls ENTRY by OTHER (added,\n"
    "                         or replacing what OTHER named)\n"
    "  --drop-stats KEY[:KIND]  remove the stats of KEY, of KIND weight or\n"
    "                         activation (default: both); the archive must have them\n"
    "Every change is checked as a reader checks the archive (weight stats keys must\n"
    "name tensors, values must be consistent, ...); on any error nothing is written.\n"
    "Crash-safe: the new index generation holds only the live records and is\n"
    "written where it overlaps nothing in use (the space of superseded generations\n"
    "is reused; the file never shrinks), then the superblock is rewritten. Killed\n"
    "at any moment, the archive opens as the old or the new one. Open readers keep\n"
    "working; one update runs at a time (others wait for its lock). Its fsyncs\n"
    "order that crash safety, so update always fsyncs: it has no --no-sync, and\n"
    "WPACK_NO_SYNC=1 does not apply to it. A shard of a sharded set is refused\n"
    "(WPACK_E_SHARD: its manifest records the shard's length and index XXH3, so\n"
    "a changed shard would make the whole set fail to open); update the set\n"
    "through its manifest, whose stats, metadata and names are the set's.\n";

int cli_update_begin(wpack_update **u, const char *archive, char *err, size_t errlen)
{
    unsigned flags = 0;
#ifdef WPACK_TEST_HOOKS
    /* Test builds only (tests/wpack-hooks, never the released wpack):
     * WPACK_UPDATE_STOP_AFTER=append stops a commit where a kill between its
     * two steps would. */
    const char *stop = getenv("WPACK_UPDATE_STOP_AFTER");
    if (stop && strcmp(stop, "append") == 0)
        flags |= WPACK_UPDATE_STOP_AFTER_APPEND;
#endif
    if (cli_is_url(archive)) { /* updates are in place: a local file only */
        *u = NULL;
        snprintf(err, errlen, "%s: a URL is read only; update a local copy", archive);
        return WPACK_E_UNSUPPORTED;
    }
    return wpack_update_begin(u, archive, flags, err, errlen);
}

static int to_update(void *ctx, const wpack_stats_in *s, const char **why)
{
    int rc = wpack_update_set_stats(ctx, s);
    *why = wpack_update_errmsg(ctx);
    return rc;
}

/* "KEY", "KEY:weight" or "KEY:activation" -> key (allocated) and kind (0: both). */
static char *split_kind(const char *arg, int *kind)
{
    static const struct {
        const char *suffix;
        int kind;
    } kinds[] = {{":weight", WPACK_STATS_WEIGHT}, {":activation", WPACK_STATS_ACTIVATION}};
    size_t n = strlen(arg);
    *kind = 0;
    for (size_t k = 0; k < 2; k++) {
        size_t m = strlen(kinds[k].suffix);
        if (n > m && strcmp(arg + n - m, kinds[k].suffix) == 0) {
            *kind = kinds[k].kind;
            return strndup(arg, n - m);
        }
    }
    return strdup(arg);
}

typedef enum { OPT_STATS, OPT_META, OPT_NAME, OPT_DROP } opt_kind;

typedef struct {
    opt_kind kind;
    const char *value;
} change;

/* Apply one change to the session; prints the error. */
static int apply(wpack_update *u, const change *c)
{
    char err[1024], *key = NULL;
    const char *v;
    int rc = WPACK_OK, kind;
    switch (c->kind) {
    case OPT_STATS:
        rc = stats_load_file_to(c->value, to_update, u, err, sizeof err);
        if (rc)
            cli_error("%s [%s]", err, wpack_error_name(rc)); /* err starts with the path */
        return rc;
    case OPT_META:
        if (!cli_split_pair(c->value, "--meta", &key, &v))
            return WPACK_E_INVALID_ARGUMENT;
        rc = wpack_update_set_string(u, key, v);
        break;
    case OPT_NAME:
        if (!cli_split_pair(c->value, "--name", &key, &v))
            return WPACK_E_INVALID_ARGUMENT;
        rc = wpack_update_add_name(u, key, v);
        break;
    case OPT_DROP:
        if (!(key = split_kind(c->value, &kind)))
            return WPACK_E_NOMEM;
        rc = wpack_update_drop_stats(u, key, kind);
        break;
    }
    free(key);
    if (rc) {
        static const char *names[] = {"--stats", "--meta", "--name", "--drop-stats"};
        cli_error("%s %s: %s [%s]", names[c->kind], c->value, wpack_update_errmsg(u),
                  wpack_error_name(rc));
    }
    return rc;
}

int cmd_update(int argc, char **argv)
{
    const char *archive = NULL, *v;
    change *changes = calloc((size_t)argc, sizeof *changes);
    size_t n = 0;
    int r, status = CLI_USAGE;
    if (!changes) {
        cli_error("out of memory [WPACK_E_NOMEM]");
        return CLI_FAIL;
    }
    static const struct {
        const char *name;
        opt_kind kind;
    } opts[] = {{"--stats", OPT_STATS}, {"--stats-from", OPT_STATS}, {"--meta", OPT_META},
                {"--name", OPT_NAME}, {"--drop-stats", OPT_DROP}};
    for (int i = 1; i < argc;) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            status = CLI_OK;
            goto done;
        }
        int matched = 0;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !matched; k++)
            if ((r = cli_opt_value(argc, argv, &i, opts[k].name, &v))) {
                if (r < 0)
                    goto done;
                changes[n++] = (change){opts[k].kind, v};
                matched = 1;
            }
        if (matched)
            continue;
        if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("update: unknown option '%s' (see wpack update --help)", argv[i]);
            goto done;
        } else if (!archive) {
            archive = argv[i++];
        } else {
            cli_error("update: one ARCHIVE only ('%s')", argv[i]);
            goto done;
        }
    }
    if (!archive) {
        cli_error("update: no ARCHIVE given (see wpack update --help)");
        goto done;
    }
    if (!n) {
        cli_error("update %s: nothing to change (give --stats, --stats-from, --meta, --name or "
                  "--drop-stats) [WPACK_E_EMPTY]", archive);
        goto done;
    }
    status = CLI_FAIL;
    char err[1024];
    wpack_update *u;
    int rc = cli_update_begin(&u, archive, err, sizeof err);
    if (rc) {
        cli_error("%s [%s]", err, wpack_error_name(rc));
        wpack_update_abort(u);
        goto done;
    }
    /* drops first: they remove the archive's records, the other changes add */
    for (int pass = 0; pass < 2 && rc == WPACK_OK; pass++)
        for (size_t k = 0; k < n && rc == WPACK_OK; k++)
            if ((changes[k].kind == OPT_DROP) == (pass == 0))
                rc = apply(u, &changes[k]);
    if (rc) {
        wpack_update_abort(u);
        goto done;
    }
    if ((rc = wpack_update_commit(u, err, sizeof err))) {
        cli_error("%s [%s]", err, wpack_error_name(rc));
        goto done;
    }
    wpack_archive *ar = cli_open(archive);
    if (!ar)
        goto done;
    wpack_info in;
    wpack_get_info(ar, &in);
    char size[32];
    cli_human_size(size, sizeof size, in.index_length);
    cli_line(stdout, "%s: generation %llu: %zu option%s applied; %llu stats, %llu metadata, %llu names; index %s",
           archive, (unsigned long long)in.generation, n, n == 1 ? "" : "s",
           (unsigned long long)in.stats_count, (unsigned long long)in.metadata_count,
           (unsigned long long)in.namemap_count, size);
    wpack_close(ar);
    status = CLI_OK;
done:
    free(changes);
    return status;
}

int cli_update_stats(const char *archive, const wpack_stats_in *recs, size_t n, char *err,
                     size_t errlen)
{
    wpack_update *u;
    int rc = cli_update_begin(&u, archive, err, errlen);
    for (size_t s = 0; rc == WPACK_OK && s < n; s++)
        if ((rc = wpack_update_set_stats(u, &recs[s])))
            snprintf(err, errlen, "%s", wpack_update_errmsg(u));
    if (rc) {
        wpack_update_abort(u);
        return rc;
    }
    return wpack_update_commit(u, err, errlen);
}
