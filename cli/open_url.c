/* open_url.c - the CLI's remote archives: a URL where an archive path goes
 * (inspect, verify, extract, export, run, resolve, ...) opens through
 * libwpack-remote with options from the environment (the library reads
 * none itself): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 * AWS_REGION (or AWS_DEFAULT_REGION), AWS_ENDPOINT_URL_S3 (or
 * AWS_ENDPOINT_URL) for s3://, CURL_CA_BUNDLE (or SSL_CERT_FILE): the CA
 * bundle for https, the proxy variables as curl reads them (proxy_for;
 * no_proxy / NO_PROXY), and WPACK_REMOTE_CONNECTIONS,
 * WPACK_REMOTE_CHUNK, WPACK_REMOTE_RETRIES, WPACK_REMOTE_TIMEOUT,
 * WPACK_REMOTE_MAX_RATE, WPACK_REMOTE_REDIRECTS=0 for every URL; and the
 * chunk cache of --cache DIR / --cache-max SIZE (or WPACK_CACHE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "wpack_remote.h"

static const char *env(const char *a, const char *b)
{
    const char *v = getenv(a);
    if ((!v || !*v) && b)
        v = getenv(b);
    return v && *v ? v : NULL;
}

/* A size or count from the environment (above 0, or 0 too with
 * zero_ok); 0 and a message when malformed. */
static int env_number(const char *name, uint64_t *out, int zero_ok)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 1;
    if (!cli_parse_size(v, out) || (*out == 0 && !zero_ok)) {
        cli_error("%s=%s: want a number %s (K, M or G allowed) [%s]", name, v,
                  zero_ok ? "of 0 or more" : "above 0", wpack_error_name(WPACK_E_INVALID_ARGUMENT));
        return 0;
    }
    return 1;
}

static int env_size(const char *name, uint64_t *out)
{
    return env_number(name, out, 0);
}

/* Progress on a terminal: bytes fetched and the rate, on the status line
 * (util.c) it shares with the commands' own progress. */
typedef struct {
    uint64_t bytes;
    struct timespec t0;
    double last;                /* seconds since t0 of the last redraw */
} progress;

static progress prog;
static int quiet;

void cli_remote_quiet(void)
{
    quiet = 1;
}

static double since_t0(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - prog.t0.tv_sec) + (double)(t.tv_nsec - prog.t0.tv_nsec) / 1e9;
}

void cli_remote_fetched(char *out, size_t outlen)
{
    double s = since_t0();
    if (!prog.bytes) {
        *out = 0;
        return;
    }
    snprintf(out, outlen, "fetched %.1f MiB (%.1f MiB/s)", (double)prog.bytes / 1048576.0,
             s > 0 ? (double)prog.bytes / 1048576.0 / s : 0.0);
}

static void on_bytes(void *user, uint64_t n)
{
    progress *p = user;
    p->bytes += n;
    double s = since_t0();
    if (cli_status_owned() || s - p->last < 0.1)
        return; /* a command's progress line shows the count; ten redraws a second */
    p->last = s;
    char text[64];
    cli_remote_fetched(text, sizeof text);
    cli_status_draw("wpack: %s", text);
}

/* --cache DIR, --cache-max SIZE (one command per process: static). */
static const char *cache_dir;
static uint64_t cache_max;

int cli_remote_opt(int argc, char **argv, int *i)
{
    const char *v;
    int r = cli_opt_value(argc, argv, i, "--cache", &v);
    if (r > 0)
        cache_dir = v;
    if (r)
        return r;
    if ((r = cli_opt_value(argc, argv, i, "--cache-max", &v)) <= 0)
        return r;
    if (!cli_parse_size(v, &cache_max) || !cache_max) {
        cli_error("--cache-max '%s' is not a size above 0 (e.g. 20G) [%s]", v,
                  wpack_error_name(WPACK_E_INVALID_ARGUMENT));
        return -1;
    }
    return 1;
}

/* URLs of the command line holding a credential (a password, a query, a
 * fragment): argv shows them redacted (every message and output that
 * echoes an argument), the real one kept here for the open. An argument
 * "--option=URL" has its value redacted too. One command per process:
 * static, as many as there are arguments. */
static struct hidden_url {
    const char *shown;
    char *real;
} *hidden;
static size_t nhidden;

void cli_hide_url_secrets(int argc, char **argv)
{
    hidden = calloc((size_t)argc, sizeof *hidden);
    for (int i = 1; i < argc; i++) {
        const char *eq = argv[i][0] == '-' ? strchr(argv[i], '=') : NULL;
        const char *url = eq ? eq + 1 : argv[i];
        if (!wpack_remote_has_scheme(url)) /* ftp://user:pw@h too: never shown */
            continue;
        size_t head = (size_t)(url - argv[i]);
        char *shown = wpack_remote_shown_url(url), *arg = shown ? malloc(head + strlen(shown) + 1) : NULL;
        if (arg) {
            memcpy(arg, argv[i], head);
            strcpy(arg + head, shown);
        }
        free(shown);
        if (!arg || !hidden) {
            /* out of memory: the command stops before any URL is shown */
            cli_error("out of memory [%s]", wpack_error_name(WPACK_E_NOMEM));
            exit(CLI_FAIL);
        }
        if (strcmp(arg, argv[i]) == 0) {
            free(arg);
            continue;
        }
        hidden[nhidden].real = argv[i] + head;
        hidden[nhidden++].shown = arg + head;
        argv[i] = arg;
    }
}

/* The proxy for url's scheme, from the variables curl reads (the library
 * reads none): https_proxy / HTTPS_PROXY for https (and s3:// unless its
 * endpoint is http://), http_proxy for http (lower case only, as curl: a
 * CGI program's HTTP_PROXY is the client's "Proxy:" header), then
 * all_proxy / ALL_PROXY; NULL: none. */
static const char *proxy_for(const char *url, const char *s3_endpoint)
{
    const char *target = url;
    if (strncasecmp(url, "s3://", 5) == 0)
        target = s3_endpoint ? s3_endpoint : "https://";
    const char *p = strncasecmp(target, "http://", 7) == 0 ? env("http_proxy", NULL)
                                                             : env("https_proxy", "HTTPS_PROXY");
    return p ? p : env("all_proxy", "ALL_PROXY");
}

/* The URL to request for one a command was given (argv, redacted; a copy
 * of it matches when no other argument is redacted alike). */
static const char *real_url(const char *url)
{
    const char *real = url;
    size_t same = 0;
    for (size_t k = 0; k < nhidden; k++)
        if (hidden[k].shown == url)
            return hidden[k].real;
    for (size_t k = 0; k < nhidden; k++)
        if (strcmp(hidden[k].shown, url) == 0)
            real = hidden[k].real, same++;
    return same == 1 ? real : url;
}

int cli_open_url(wpack_archive **ar, const char *url, unsigned flags)
{
    wpack_remote_options o;
    wpack_remote_options_init(&o);
    o.flags = flags;
    o.access_key = env("AWS_ACCESS_KEY_ID", NULL);
    o.secret_key = env("AWS_SECRET_ACCESS_KEY", NULL);
    o.session_token = env("AWS_SESSION_TOKEN", NULL);
    o.s3_region = env("AWS_REGION", "AWS_DEFAULT_REGION");
    o.s3_endpoint = env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
    /* a private CA for https, named as curl and OpenSSL name it */
    o.ca_file = env("CURL_CA_BUNDLE", "SSL_CERT_FILE");
    o.proxy = proxy_for(real_url(url), o.s3_endpoint);
    o.no_proxy = env("no_proxy", "NO_PROXY");
    uint64_t conns = o.connections, retries = o.retries, timeout = o.timeout_s;
    if (!env_size("WPACK_REMOTE_CONNECTIONS", &conns) || !env_size("WPACK_REMOTE_CHUNK", &o.chunk_size) ||
        !env_size("WPACK_REMOTE_TIMEOUT", &timeout) || !env_size("WPACK_REMOTE_MAX_RATE", &o.max_bytes_per_s) ||
        !env_number("WPACK_REMOTE_RETRIES", &retries, 1)) {
        *ar = NULL;
        return WPACK_E_INVALID_ARGUMENT;
    }
    /* the library takes a larger chunk as 1 GiB: said here, not silently */
    if (o.chunk_size > (1ull << 30)) {
        cli_error("WPACK_REMOTE_CHUNK=%s: at most 1G [%s]", getenv("WPACK_REMOTE_CHUNK"),
                  wpack_error_name(WPACK_E_INVALID_ARGUMENT));
        *ar = NULL;
        return WPACK_E_INVALID_ARGUMENT;
    }
    const char *redir = getenv("WPACK_REMOTE_REDIRECTS");
    o.follow_redirects = !(redir && strcmp(redir, "0") == 0);
    o.connections = conns > 64 ? 64 : (unsigned)conns;
    o.retries = retries > 20 ? 20 : (unsigned)retries;
    o.timeout_s = timeout > 3600 ? 3600 : (unsigned)timeout;
    o.cache_dir = cache_dir ? cache_dir : cli_env_cache();
    if (cache_max)
        o.cache_max_bytes = cache_max;
    if (!quiet && isatty(2)) {
        if (!prog.t0.tv_sec && !prog.t0.tv_nsec)
            clock_gettime(CLOCK_MONOTONIC, &prog.t0);
        o.on_bytes = on_bytes;
        o.on_bytes_user = &prog;
    }
    int rc = wpack_open_url(ar, real_url(url), &o);
    cli_status_clear(); /* what the command prints next starts the line */
    return rc;
}

/* Any scheme: wpack_open_url refuses one it does not read, naming the URL
 * redacted (a local open's error quoted it whole). */
int cli_is_url(const char *path)
{
    return wpack_remote_has_scheme(path);
}
