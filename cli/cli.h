/* cli.h - what the wpack subcommands share. */
#ifndef WPACK_CLI_H
#define WPACK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "wpack.h"
#include "wpack_dense.h"
#include "wpack_mlir.h"

/* Exit codes: 0 success, 1 failure (bad input, bad archive, I/O), 2 usage. */
#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

int cmd_create(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_resolve(int argc, char **argv);
int cmd_externalize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_cast(int argc, char **argv);
int cmd_update(int argc, char **argv);

/* "KEY=VALUE" of option opt: *key (allocated) and *value (inside arg); a
 * missing '=' or key prints the error and returns 0. */
int cli_split_pair(const char *arg, const char *opt, char **key, const char **value);

/* In-place updates (cmd_update.c): wpack_update_begin (in test builds with
 * the kill tests' hook WPACK_UPDATE_STOP_AFTER=append); and the
 * one-call form calibrate uses (records added or replaced). */
int cli_update_begin(wpack_update **u, const char *archive, char *err, size_t errlen);
int cli_update_stats(const char *archive, const wpack_stats_in *recs, size_t n, char *err,
                     size_t errlen);

/* The environment, passed to the libraries (cli_env.c): WPACK_ISA,
 * WPACK_THREADS, WPACK_SPIN_US, WPACK_DENSE_MIN_PARALLEL into the dense
 * kernel's settings (main, before any command). */
void cli_env_apply(void);
/* Why the dense kernel refused the settings cli_env_apply passed (a bad
 * WPACK_ISA: "WPACK_ISA: wpack_dense_settings: isa ...: reason"); "" when
 * it took them. */
const char *cli_env_dense_error(void);
/* The CLI's thread pool (WPACK_THREADS, WPACK_SPIN_US), made on first use;
 * NULL when out of memory (then everything runs on one thread). */
wpack_pool *cli_pool(void);
/* Decode ar's zstd chunks in parallel on cli_pool() (cli_open does it). */
void cli_attach_pool(wpack_archive *ar);
/* wpack_writer_options_init, the portable weight-stats path under
 * WPACK_ISA=scalar, the writer's threads under WPACK_THREADS, no_sync
 * under WPACK_NO_SYNC=1. */
void cli_writer_options_init(wpack_writer_options *o);
/* 1 under WPACK_NO_SYNC=1: outputs are not fsynced (README: Durability). */
int cli_env_no_sync(void);
/* "--no-sync" at argv[*i]: 1 (used, *no_sync set), else 0. */
int cli_no_sync_opt(char **argv, int *i, int *no_sync);
/* The help line of --no-sync, for every command that writes an output. */
#define CLI_NO_SYNC_HELP                                                                   \
    "  --no-sync           do not fsync the output (also WPACK_NO_SYNC=1): faster,\n"     \
    "                      and still all-or-nothing for other processes, but a power\n"  \
    "                      loss or OS crash may leave it missing, empty or torn\n"      \
    "                      (README: Durability)\n"

/* The writer's weight stats and hashing on n threads (n <= 1: the calling
 * thread alone); cli_writer_options_init does it with WPACK_THREADS. */
void cli_writer_jobs(wpack_writer_options *o, unsigned n);
/* "-j N" or "--jobs N" at argv[*i]: as cli_opt_value(), N (1..256) into
 * *jobs; -1 (message printed) for a bad count. */
int cli_opt_jobs(int argc, char **argv, int *i, unsigned *jobs);
/* Flags for wpack_read_to_fd (extract) and export: WPACK_READ_NO_COPY_RANGE
 * under WPACK_NO_COPY_RANGE=1. */
unsigned cli_read_to_fd_flags(void);

/* Open an archive for a command: on failure print "wpack: <what and
 * where> [WPACK_E_CODE]", free the handle and return NULL. */
wpack_archive *cli_open(const char *path);
/* The same for a command that hands tensor bytes out: with verify (unless
 * the user gave --no-verify) every entry's bytes are checked against their
 * XXH3 as they are read (WPACK_OPEN_VERIFY_READS): a bad tensor fails the
 * command with [WPACK_E_CHECKSUM] naming it. */
wpack_archive *cli_open_reads(const char *path, int verify);
/* A URL (http://, https://, s3://) where an archive path goes, opened with
 * libwpack-remote and options from the environment (open_url.c). Any
 * "SCHEME://" is taken for a URL (wpack_remote_has_scheme): one wpack does
 * not read is refused there, shown redacted, never opened as a path. */
int cli_open_url(wpack_archive **ar, const char *url, unsigned flags);
int cli_is_url(const char *path);
/* Replace each URL argument (or --option=URL) holding a credential by its
 * redacted form (wpack_remote_shown_url: ***@host, ?name=***, #***),
 * so that no message or output shows it; cli_open_url() still requests
 * the URL as given. main() calls it once. */
void cli_hide_url_secrets(int argc, char **argv);
/* -q/--quiet: no fetch progress for the URLs opened after (the option
 * parsers that take -q call it). */
void cli_remote_quiet(void);
/* "fetched 13.5 MiB (138.4 MiB/s)" when a URL's reads fetched bytes, else "". */
void cli_remote_fetched(char *out, size_t outlen);
/* --cache DIR or --cache-max SIZE at argv[*i] (every command taking a URL):
 * as cli_opt_value() (-1: a usage error, printed); kept for cli_open_url. */
int cli_remote_opt(int argc, char **argv, int *i);
/* WPACK_CACHE: the cache directory when --cache is not given (cli_env.c). */
const char *cli_env_cache(void);
/* The help lines of those options, after each command's URL paragraph. */
#define CLI_CACHE_HELP                                                                     \
    "  --cache DIR        (a URL) keep fetched chunks in DIR (created 0700), keyed\n"       \
    "                     by the archive's index XXH3 and checked on every reuse;\n"      \
    "                     a second run reads them instead of the network\n"            \
    "                     (default: $WPACK_CACHE if set, else no cache)\n"               \
    "  --cache-max SIZE   bound on DIR's chunk files (K/M/G; default 10G): the\n"       \
    "                     least recently used go first\n"

/* "wpack: <message>" on stderr, the message escaped (cli_text_escape). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One line of text output holding untrusted text (names, paths, values):
 * the formatted text escaped as a whole (cli_text_escape), then "\n". */
void cli_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The resolver's diagnostics callback: errors and warnings as above, notes
 * ("wpack: note: ...") unless *(int *)quiet is set. */
void cli_on_diag(void *quiet, int severity, const char *message);

/* Option matching: if argv[*i] is `name` (then the value is the next
 * argument) or `name=value` (or, for a one-letter name, `-xVALUE`), set *value, advance *i past what it used and
 * return 1. A missing value is a usage error: returns -1. */
int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value);
/* A path option (an output): as cli_opt_value(); an empty path is a usage
 * error (-1, printed). */
int cli_opt_path(int argc, char **argv, int *i, const char *name, const char **path);
/* "-o OUT" or "--output OUT" at argv[*i]: as cli_opt_path(), into *out. */
int cli_opt_output(int argc, char **argv, int *i, const char **out);
int cli_is_help(const char *arg);

/* Parse a non-negative decimal integer, optionally with a K/M/G (1024-based)
 * suffix; 0 on junk or overflow. */
int cli_parse_size(const char *s, uint64_t *out);

/* One of --compress zstd[:L], --compress-min N, --chunk-size N,
 * --compress-saving P (opt is the option as typed, value its value) into
 * writer options; prints the error and returns 0 on a bad value. */
int cli_compress_option(const char *opt, const char *value, wpack_writer_options *o);

/* The output cap of a command (issue 14: tiny input, huge output): what
 * --max-output SIZE gave (user_cap != 0), else the default of
 * max(CLI_OUTPUT_FLOOR, CLI_OUTPUT_RATIO x input_bytes), saturating. Every
 * command that writes bytes derived from an input uses this one rule. */
#define CLI_OUTPUT_FLOOR (1ull << 30)
#define CLI_OUTPUT_RATIO 1000ull
uint64_t cli_output_cap(uint64_t input_bytes, uint64_t user_cap);

/* cli/out_cap.c. The bytes of an opened archive on disk (its shards too):
 * the input_bytes of cli_output_cap(). */
uint64_t cli_input_bytes(const wpack_archive *ar);
/* The logical bytes of the entries with bytes of their own (data, external;
 * not splats or aliases), saturating: what a full read decodes. */
uint64_t cli_data_bytes(const wpack_archive *ar);
/* "--max-output SIZE" at argv[*i]: as cli_opt_value(), the size into *cap
 * (a bad or zero size prints the error and gives -1). */
int cli_max_output_opt(int argc, char **argv, int *i, uint64_t *cap);
/* The options every command that writes tensor bytes out takes (extract,
 * export, convert, cast): --max-output SIZE, -q/--quiet, --no-verify,
 * --no-sync. */
typedef struct {
    uint64_t max_output; /* 0: the default cap (cli_output_cap) */
    int quiet;
    int verify;          /* 1 unless --no-verify */
    int no_sync;         /* --no-sync or WPACK_NO_SYNC=1 */
} cli_write_opts;
#define CLI_WRITE_OPTS_INIT {0, 0, 1, cli_env_no_sync()}
/* One of them at argv[*i]: as cli_opt_value() (1 used, 0 not one of them,
 * -1 a bad --max-output, printed). */
int cli_write_opt(int argc, char **argv, int *i, cli_write_opts *o);
/* Before writing: 1 when `need` bytes for `out` (a file or a directory,
 * existing or not) are within cli_output_cap(input_bytes, user_cap) and,
 * with check_space, within the free space of out's file system; else print
 * "CMD: OUT would get N bytes ... [WPACK_E_TOO_LARGE]", saying the cap and
 * how to raise it, and return 0. */
int cli_check_output(const char *cmd, const char *out, uint64_t need, uint64_t input_bytes,
                     uint64_t user_cap, int check_space);
/* After a library refused an output over the cap (resolve, externalize:
 * their message gives the sizes): one line saying which cap applied and
 * how to raise it, in cli_check_output's words. */
void cli_cap_hint(const char *cmd, uint64_t input_bytes, uint64_t user_cap);
/* The same-file guard (outputs.c, over the library's rule in
 * format/same_files.h): list what a command reads and writes, then
 * cli_files_check() before anything is read or written. It refuses,
 * with "[WPACK_E_SAME_FILE]" naming both paths, an output that is the same
 * file as an input (device + inode: symlinks, hard links, "./x" vs "x") or
 * as another output (also when neither exists yet: resolved directory +
 * file name). An output added with cli_files_out_archive() is a wpack
 * archive: an input that is a shard of a set whose manifest is at that
 * path now (removed once the new archive is in place, wpack_writer_open)
 * is refused too. */
typedef struct {
    struct wpk_file_ref *v; /* format/same_files.h */
    size_t n, cap;
    int nomem;
    int outputs_distinct; /* the caller knows its outputs differ: skip that check */
    const char *hint;     /* added to the message of an output-is-input refusal */
} cli_files;
void cli_files_in(cli_files *f, const char *path);
void cli_files_out(cli_files *f, const char *path);
void cli_files_out_archive(cli_files *f, const char *path);
/* The shard files of an opened sharded archive, as inputs (none if not sharded). */
void cli_files_archive_shards(cli_files *f, const wpack_archive *ar);
/* 1 when fine; else the error is printed and the result is 0. */
int cli_files_check(const char *cmd, cli_files *f);
void cli_files_free(cli_files *f);

/* Add the archive at path to g's inputs, check, open it (cli_open_reads:
 * verify on read when verify is set), add its shard files and check again.
 * NULL on failure (printed). g is the caller's to free. */
wpack_archive *cli_open_checked(const char *cmd, const char *path, cli_files *g, int verify);
/* For a command that rewrites ARCHIVE in into out (convert, cast): the
 * guard (in and its shards vs out), then cli_open. With in_place, out is
 * not used and *target (free it) is the file to replace: in with symlinks
 * resolved, so a link keeps pointing at the new archive; a sharded set is
 * refused. In place, *lock holds the updaters' lock on that file (as
 * `wpack update` takes it) from before the open: release it with
 * cli_rewrite_unlock after the new file replaced it (or on failure), so
 * that no update committed in between is lost. NULL on failure, with the
 * error printed (*target NULL, no lock held). */
wpack_archive *cli_open_rewrite(const char *cmd, const char *in, const char *out, int in_place,
                                int verify, char **target, int *lock);
void cli_rewrite_unlock(int *lock);

/* "1.5 GiB", "512 B" */
void cli_human_size(char *buf, size_t len, uint64_t bytes);
/* "[4096, 4096]" */
void cli_shape(char *buf, size_t len, unsigned rank, const uint64_t *dims);

/* Untrusted text for a terminal: writes s[0..n) to f with every control
 * character escaped by the libraries' rule (wpk_text_step in
 * format/text_escape.c: C0 and DEL as \x1b, C1 U+0080..U+009F and the
 * bidirectional controls as \u009b, bytes that are not valid UTF-8 as
 * \xff; a backslash stays, so a library message, escaped already, is not
 * escaped twice), so a name or value cannot move the cursor, retitle the
 * window or clear the screen. f == NULL
 * only measures. Returns the columns written (one per code point or escape
 * character). Used for every name, key, value and message in text output;
 * --json output uses cli_json_string instead. */
size_t cli_text_escape(FILE *f, const char *s, size_t n);

/* JSON string with escapes, quotes included: '"', '\\', C0, DEL and C1
 * as JSON escapes; a byte that is not valid UTF-8 becomes U+FFFD. */
void cli_json_string(FILE *f, const char *s, size_t n);
/* A double as JSON (non-finite becomes null). */
void cli_json_number(FILE *f, double v);

/* The status line on a terminal (stderr) that progress displays share:
 * cli_status_draw() replaces it; cli_status_clear() removes it (every
 * message and the process's exit do); cli_status_owned(): a cli_progress
 * draws it now (the remote fetch count then goes into that line). */
void cli_status_draw(const char *fmt, ...);
void cli_status_clear(void);
int cli_status_owned(void);

/* Progress line on a terminal (stderr), at most ten updates a second. */
typedef struct {
    int enabled;
    uint64_t total_bytes, done_bytes, base_bytes;
    uint64_t total_items, done_items;
    double last;
    const char *label;
    const char *items; /* what total_items counts: "tensors" unless set */
} cli_progress;
void cli_progress_init(cli_progress *p, uint64_t total_bytes, uint64_t total_items, int quiet);
void cli_progress_update(cli_progress *p, int force);
void cli_progress_done(cli_progress *p);
/* One more tensor done (user: a cli_progress): its name as the label, its
 * bytes if it has its own (see cli_data_bytes). For the per-tensor
 * callbacks of export, convert and verify. */
void cli_progress_tensor(void *user, const wpack_tensor *t);

/* cli_select's rule (below) as a test on one name (entry, stats key, metadata key,
 * name-map name): pattern "" or equal to name, or name under the module
 * path pattern. */
int cli_under(const char *pattern, const char *name);

/* Natural display order (natural_order.c): digit runs compare as numbers,
 * "layers.2" before "layers.10"; the rest bytewise. For showing lists to
 * people only: the index order and every lookup stay bytewise. */
int cli_natural_cmp(const char *a, const char *b);

/* Entries that a user-given NAME_OR_PREFIX selects: an exact name (or a
 * name-map name), else every entry under the module prefix ("enc" selects
 * "enc.x" but not "encoder.x"; "enc." the same; "" everything). Calls fn for
 * each, in name order; returns how many matched. */
typedef int (*cli_entry_fn)(void *user, const wpack_archive *ar, const wpack_tensor *t);
int64_t cli_select(const wpack_archive *ar, const char *pattern, cli_entry_fn fn, void *user);

#endif
