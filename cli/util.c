/* util.c - messages, option parsing, formatting and selection for the CLI. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"

/* prefix + the formatted message + "\n" on f, the message escaped as a
 * whole (cli_text_escape): names and values that messages echo, ours or the
 * library's, reach the terminal as text, never as control sequences. */
static void vline(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    cli_status_clear(); /* a message starts at the line's start, never after progress */
    char small[1024], *msg = small;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)))
        vsnprintf(msg, (size_t)n + 1, fmt, again);
    else if (n >= (int)sizeof small)
        msg = small, n = (int)sizeof small - 1; /* out of memory: the message cut */
    va_end(again);
    fputs(prefix, f);
    cli_text_escape(f, msg, n > 0 ? (size_t)n : 0);
    fputc('\n', f);
    if (msg != small)
        free(msg);
}

size_t cli_text_escape(FILE *f, const char *s, size_t n)
{
    size_t cols = 0, run = 0; /* s[run..i): shown as it is, not written yet */
    for (size_t i = 0; i < n;) {
        char esc[8];
        size_t take, e = wpk_text_step(s + i, n - i, &take, esc);
        if (e && f) {
            fwrite(s + run, 1, i - run, f);
            fwrite(esc, 1, e, f);
        }
        cols += e ? e : 1; /* one column a code point (wide CJK is not measured) */
        i += take;
        if (e)
            run = i;
    }
    if (f)
        fwrite(s + run, 1, n - run, f);
    return cols;
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stderr, "wpack: ", fmt, ap);
    va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stderr, "wpack: warning: ", fmt, ap);
    va_end(ap);
}

void cli_line(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(f, "", fmt, ap);
    va_end(ap);
}

void cli_on_diag(void *quiet, int severity, const char *message)
{
    if (severity == WPACK_DIAG_ERROR)
        cli_error("%s", message);
    else if (severity == WPACK_DIAG_WARNING)
        cli_warn("%s", message);
    else if (!*(const int *)quiet)
        cli_line(stderr, "wpack: note: %s", message);
}

wpack_archive *cli_open(const char *path)
{
    return cli_open_reads(path, 0);
}

wpack_archive *cli_open_reads(const char *path, int verify)
{
    wpack_archive *ar;
    /* WPACK_FOLLOW_LINKS=1: a sharded set's shards may be symlinks. */
    const char *fl = getenv("WPACK_FOLLOW_LINKS");
    unsigned flags = fl && *fl && strcmp(fl, "0") != 0 ? WPACK_OPEN_FOLLOW_LINKS : 0;
    if (!verify)
        flags |= WPACK_OPEN_NO_VERIFY_READS;
    int rc = cli_is_url(path) ? cli_open_url(&ar, path, flags) : wpack_open_file(&ar, path, flags);
    if (rc == WPACK_OK) {
        cli_attach_pool(ar);
        return ar;
    }
    if (rc == WPACK_E_INVALID_ARGUMENT && !ar)
        return NULL; /* cli_open_url said why */
    /* errmsg/errcode of NULL (out of memory) say so */
    cli_error("%s [%s]", wpack_errmsg(ar), wpack_error_name(wpack_errcode(ar)));
    wpack_close(ar);
    return NULL;
}

int cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        *i += 1;
        return 1;
    }
    if (a[n] != 0) {
        /* a one-letter option takes its value attached, as getopt does:
         * -j2, -oOUT (a long option never does: --jobs2 is unknown) */
        if (n != 2 || name[1] == '-')
            return 0;
        *value = a + n;
        *i += 1;
        return 1;
    }
    if (*i + 1 >= argc) {
        cli_error("option %s needs a value", name);
        return -1;
    }
    *value = argv[*i + 1];
    *i += 2;
    return 1;
}

int cli_opt_path(int argc, char **argv, int *i, const char *name, const char **path)
{
    int r = cli_opt_value(argc, argv, i, name, path);
    if (r > 0 && !**path) { /* else all the work is done before the rename to "" fails */
        cli_error("option %s: an empty path names no file [WPACK_E_INVALID_ARGUMENT]", name);
        return -1;
    }
    return r;
}

int cli_opt_output(int argc, char **argv, int *i, const char **out)
{
    int r = cli_opt_path(argc, argv, i, "-o", out);
    if (!r)
        r = cli_opt_path(argc, argv, i, "--output", out);
    /* A URL's credentials are hidden in argv (cli_hide_url_secrets), so
     * the output was the redacted name: extract made the local directories
     * "ftp:" and "***@h" of "ftp://user:pw@h/x" */
    if (r > 0 && cli_is_url(*out)) {
        cli_error("output %s is a URL: outputs are local files (a local path that starts so "
                  "is written as ./PATH) [%s]", *out, wpack_error_name(WPACK_E_INVALID_ARGUMENT));
        return -1;
    }
    return r;
}

uint64_t cli_output_cap(uint64_t input_bytes, uint64_t user_cap)
{
    if (user_cap)
        return user_cap;
    uint64_t scaled = input_bytes > UINT64_MAX / CLI_OUTPUT_RATIO ? UINT64_MAX : input_bytes * CLI_OUTPUT_RATIO;
    return scaled > CLI_OUTPUT_FLOOR ? scaled : CLI_OUTPUT_FLOOR;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    if (!*s)
        return 0;
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
            return 0;
    if (p == s)
        return 0;
    uint64_t mul = 1;
    if (*p == 'K' || *p == 'k')
        mul = 1ull << 10;
    else if (*p == 'M' || *p == 'm')
        mul = 1ull << 20;
    else if (*p == 'G' || *p == 'g')
        mul = 1ull << 30;
    else if (*p)
        return 0;
    if (*p && p[1] && strcmp(p + 1, "iB") != 0 && strcmp(p + 1, "B") != 0)
        return 0;
    if (__builtin_mul_overflow(v, mul, &v))
        return 0;
    *out = v;
    return 1;
}

void cli_human_size(char *buf, size_t len, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
}

void cli_shape(char *buf, size_t len, unsigned rank, const uint64_t *dims)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (unsigned d = 0; d < rank && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, d ? ", %llu" : "%llu", (unsigned long long)dims[d]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
}

void cli_json_string(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, f);
        else {
            /* Valid UTF-8 is copied, except what the text output escapes
             * (C1 controls, bidirectional controls: wpk_text_step's rule),
             * written as a JSON escape of the code point, so that a
             * terminal showing the JSON is safe too and a name cannot
             * reorder what follows it. Archive text is valid UTF-8; other
             * bytes (a path given on the command line) cannot be JSON text
             * and become U+FFFD. */
            char esc[8];
            size_t take, e = wpk_text_step(s + i, n - i, &take, esc);
            if (!e)
                fwrite(p + i, 1, take, f);
            else if (esc[1] == 'u')
                fwrite(esc, 1, e, f);
            else
                fputs("\\ufffd", f);
            i += take - 1;
        }
    }
    fputc('"', f);
}

void cli_json_number(FILE *f, double v)
{
    if (!isfinite(v))
        fputs("null", f);
    else
        fprintf(f, "%.17g", v);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------ the status line
 * One transient line on stderr (a terminal) for every progress display:
 * each redraw clears it first ("\r\033[K"); messages, the end of a
 * progress and the process's exit clear it, so that nothing is written
 * after it or over half of it. */
static int status_open;     /* a status line is drawn, without its newline */
static int progress_owner;  /* a cli_progress draws it (the fetch count goes in it) */

static void status_at_exit(void)
{
    cli_status_clear();
}

void cli_status_draw(const char *fmt, ...)
{
    static int registered;
    if (!registered)
        registered = atexit(status_at_exit) == 0;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    status_open = 1;
}

void cli_status_clear(void)
{
    if (!status_open)
        return;
    status_open = 0;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

int cli_status_owned(void)
{
    return progress_owner;
}

void cli_progress_init(cli_progress *p, uint64_t total_bytes, uint64_t total_items, int quiet)
{
    memset(p, 0, sizeof *p);
    p->enabled = !quiet && isatty(2);
    p->total_bytes = total_bytes;
    p->total_items = total_items;
    p->label = "";
    p->items = "tensors";
    progress_owner = p->enabled;
}

void cli_progress_update(cli_progress *p, int force)
{
    if (!p->enabled)
        return;
    double t = now_seconds();
    if (!force && t - p->last < 0.1)
        return;
    p->last = t;
    char done[32], total[32];
    cli_human_size(done, sizeof done, p->done_bytes);
    cli_human_size(total, sizeof total, p->total_bytes);
    int pct = p->total_bytes ? (int)(100.0 * (double)p->done_bytes / (double)p->total_bytes) : 100;
    char fetched[64];
    cli_remote_fetched(fetched, sizeof fetched);
    cli_status_draw("%3d%%  %s / %s  %llu/%llu %s  %s%s", pct, done, total,
                    (unsigned long long)p->done_items, (unsigned long long)p->total_items, p->items,
                    fetched, *fetched ? "  " : "");
    /* the label is a tensor name: escaped, cut to about 60 bytes on a code point */
    size_t n = strlen(p->label);
    if (n > 60)
        for (n = 60; n > 0 && ((unsigned char)p->label[n] & 0xc0) == 0x80;)
            n--;
    cli_text_escape(stderr, p->label, n);
    fflush(stderr);
}

void cli_progress_done(cli_progress *p)
{
    if (!p->enabled)
        return;
    cli_progress_update(p, 1);
    status_open = 0; /* the final count stays */
    progress_owner = 0;
    fputc('\n', stderr);
}

void cli_progress_tensor(void *user, const wpack_tensor *t)
{
    cli_progress *p = user;
    p->done_items++;
    if (t->kind == WPACK_KIND_DATA || t->kind == WPACK_KIND_EXTERNAL)
        p->done_bytes += t->nbytes;
    p->label = t->name;
    cli_progress_update(p, 0);
}

int64_t cli_select(const wpack_archive *ar, const char *pattern, cli_entry_fn fn, void *user)
{
    wpack_tensor t;
    if (*pattern && wpack_find(ar, pattern, &t) == WPACK_OK)
        return fn(user, ar, &t) ? -1 : 1;
    size_t n = strlen(pattern);
    char *prefix = malloc(n + 2);
    if (!prefix)
        return -1;
    memcpy(prefix, pattern, n + 1);
    if (n && pattern[n - 1] != '.') {
        prefix[n] = '.';
        prefix[n + 1] = 0;
    }
    uint64_t first = 0, count = 0;
    wpack_prefix_range(ar, prefix, &first, &count);
    free(prefix);
    for (uint64_t i = first; i < first + count; i++) {
        wpack_tensor_at(ar, i, &t);
        if (fn(user, ar, &t))
            return -1;
    }
    return (int64_t)count;
}

int cli_under(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);
    if (!n || strcmp(pattern, name) == 0)
        return 1;
    return strncmp(name, pattern, n) == 0 && (pattern[n - 1] == '.' || name[n] == '.');
}

int cli_split_pair(const char *arg, const char *opt, char **key, const char **value)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        cli_error("%s wants KEY=VALUE, got '%s'", opt, arg);
        return 0;
    }
    *key = strndup(arg, (size_t)(eq - arg));
    *value = eq + 1;
    return *key != NULL;
}
