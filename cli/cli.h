/* cli.h - what the wpack subcommands share. */
#ifndef WPACK_CLI_H
#define WPACK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "wpack.h"

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

/* In-place updates (cmd_update.c): wpack_update_begin with the kill tests'
 * hook WPACK_UPDATE_STOP_AFTER=append from the environment; and the
 * one-call form calibrate uses (records added or replaced). */
int cli_update_begin(wpack_update **u, const char *archive, char *err, size_t errlen);
int cli_update_stats(const char *archive, const wpack_stats_in *recs, size_t n, char *err,
                     size_t errlen);

/* Open an archive for a command: on failure print "wpack: <what and
 * where> [WPACK_E_CODE]", free the handle and return NULL. */
wpack_archive *cli_open(const char *path);

/* "wpack: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The resolver's diagnostics callback: errors and warnings as above, notes
 * ("wpack: note: ...") unless *(int *)quiet is set. */
void cli_on_diag(void *quiet, int severity, const char *message);

/* Option matching: if argv[*i] is `name` (then the value is the next
 * argument) or `name=value`, set *value, advance *i past what it used and
 * return 1. A missing value is a usage error: returns -1. */
int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value);
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

/* "1.5 GiB", "512 B" */
void cli_human_size(char *buf, size_t len, uint64_t bytes);
/* "[4096, 4096]" */
void cli_shape(char *buf, size_t len, unsigned rank, const uint64_t *dims);

/* JSON string with escapes, quotes included. */
void cli_json_string(FILE *f, const char *s, size_t n);
/* A double as JSON (non-finite becomes null). */
void cli_json_number(FILE *f, double v);

/* Progress line on a terminal (stderr), at most ten updates a second. */
typedef struct {
    int enabled;
    uint64_t total_bytes, done_bytes, base_bytes;
    uint64_t total_items, done_items;
    double last;
    const char *label;
} cli_progress;
void cli_progress_init(cli_progress *p, uint64_t total_bytes, uint64_t total_items, int quiet);
void cli_progress_update(cli_progress *p, int force);
void cli_progress_done(cli_progress *p);

/* Entries that a user-given NAME_OR_PREFIX selects: an exact name (or a
 * name-map name), else every entry under the module prefix ("enc" selects
 * "enc.x" but not "encoder.x"; "enc." the same; "" everything). Calls fn for
 * each, in name order; returns how many matched. */
typedef int (*cli_entry_fn)(void *user, const wpack_archive *ar, const wpack_tensor *t);
int64_t cli_select(const wpack_archive *ar, const char *pattern, cli_entry_fn fn, void *user);

#endif
