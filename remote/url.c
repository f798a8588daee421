/* url.c - wpack_open_url: an http(s):// or s3:// object as a wpack_source
 * (the reader validates it as any archive); the open's two requests (the
 * first 64 KiB, the last 256 KiB) are kept so that the superblock, the
 * trailer and usually the whole index cost no further request. */
#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remote.h"

void wpack_remote_options_init(wpack_remote_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->connections = 8;
    opt->chunk_size = 8u << 20;
    opt->retries = 4;
    opt->retry_delay_ms = 250;
    opt->timeout_s = 30;
    opt->follow_redirects = 1;
    opt->cache_max_bytes = 10ull << 30;
}

/* The scheme of s, in any case (RFC 3986 3.1: "HTTPS://" is "https://"):
 * WPK_HTTP, WPK_HTTPS, WPK_S3, or 0 for anything else (a local path). The
 * one rule of what is a URL: wpack_remote_is_url, the CLI and Python call
 * it. */
int wpk_url_scheme(const char *s)
{
    if (!s)
        return 0;
    if (strncasecmp(s, "http://", 7) == 0)
        return WPK_HTTP;
    if (strncasecmp(s, "https://", 8) == 0)
        return WPK_HTTPS;
    if (strncasecmp(s, "s3://", 5) == 0)
        return WPK_S3;
    return 0;
}

int wpack_remote_is_url(const char *s)
{
    return wpk_url_scheme(s) != 0;
}

int wpack_remote_has_scheme(const char *s)
{
    if (!s || !isalpha((unsigned char)*s))
        return 0;
    size_t n = 1;
    while (isalnum((unsigned char)s[n]) || s[n] == '+' || s[n] == '-' || s[n] == '.')
        n++;
    return strncmp(s + n, "://", 3) == 0;
}

/* The scheme of a URL (before "://") in lower case, in place: curl and
 * the checks that follow see one spelling. */
static void lower_scheme(char *url)
{
    for (char *p = url; *p && *p != ':'; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
}

/* libcurl's global setup, once per process (not thread-safe in itself). */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_setup(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static void remote_free(wpk_remote *r)
{
    if (!r)
        return;
    wpk_ra_free(r); /* before the handles: its batches run on them */
    wpk_remote_free_handles(r);
    wpk_cache_close(r);
    pthread_mutex_destroy(&r->lock);
    for (size_t k = 0; k < sizeof r->owned / sizeof r->owned[0]; k++)
        free(r->owned[k]);
    free(r->url);
    free(r->shown);
    free(r->given);
    free(r->host);
    free(r->uri);
    free(r->head);
    free(r->tail);
    free(r);
}

/* Percent-encode s (n bytes) into a new string: unreserved bytes and,
 * with keep_slash, '/' stay (S3's URI encoding of an object key). */
static char *encode(const char *s, size_t n, int keep_slash)
{
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            *o++ = (char)c;
        } else {
            static const char d[] = "0123456789ABCDEF";
            *o++ = '%';
            *o++ = d[c >> 4];
            *o++ = d[c & 15];
        }
    }
    *o = 0;
    return out;
}

/* The URL as messages and outputs show it, so that a credential in it
 * never reaches a terminal, a log, a JSON report or an exception: its user
 * info becomes "***" (***@host), user name and password alike (a token is
 * either: "TOKEN@", "TOKEN:x-oauth-basic@", "oauth2:TOKEN@"); a port that
 * is not a number and all after it (what a password holding a raw '/',
 * '?' or '#' leaves of the URL) ":***", and the host before it too when an
 * '@' follows (that "host" is the user name); each value of
 * its query "***", its names kept (which names carry secrets cannot be
 * known: X-Amz-Signature, sig, token, ...), a bare item "***"; a fragment
 * "#***". Scheme, host, port and path stay as given. An s3:// key is
 * literal ('?' and '#' are part of it) and carries no credential: kept. */
static char *put(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

char *wpack_remote_shown_url(const char *url)
{
    size_t n = strlen(url);
    /* each part redacted grows by at most 2 bytes ("x" to "***"), and
     * parts are at most one per byte, plus the authority's two */
    char *out = n < (SIZE_MAX - 16) / 3 ? malloc(3 * n + 16) : NULL, *o = out;
    if (!out)
        return NULL;
    const char *auth = strstr(url, "://");
    if (!auth) {
        memcpy(out, url, n + 1);
        return out;
    }
    auth += 3;
    o = put(o, url, (size_t)(auth - url));
    const char *aend = auth + strcspn(auth, "/?#"), *at = NULL;
    for (const char *p = auth; p < aend; p++)
        if (*p == '@')
            at = p; /* the last one: a password may hold an '@' */
    const char *host = auth;
    if (at) {
        o = put(o, "***", 3); /* user and password: either may be the token */
        host = at; /* from the '@' */
    }
    /* host[:port]; an IPv6 host is in brackets */
    const char *br = host, *port = NULL;
    for (const char *p = host; p < aend; p++)
        if (*p == ']')
            br = p;
    for (const char *p = br; p < aend; p++)
        if (*p == ':')
            port = p + 1;
    int port_ok = 1;
    for (const char *p = port; p && p < aend; p++)
        port_ok &= *p >= '0' && *p <= '9';
    /* digits (or none) there but an '@' after the authority: a password
     * that starts with digits and holds a raw '/', '?' or '#' ("u:12/34@h",
     * curl takes "u" for the host and 12 for the port): hidden alike */
    if (port && !at && strchr(aend, '@'))
        port_ok = 0;
    if (!port_ok) {
        /* not a URL (curl refuses it): from the port on it may be what a
         * password holding a raw '/', '?' or '#' left, so none is shown;
         * with an '@' after it, what stands for the host is a user name */
        if (!at && strchr(aend, '@'))
            strcpy(o, "***");
        else
            strcpy(put(o, host, (size_t)(port - host)), "***");
        return out;
    }
    o = put(o, host, (size_t)(aend - host));
    const char *p = aend;
    if (wpk_url_scheme(url) == WPK_S3) {
        strcpy(o, p);
        return out;
    }
    size_t path = strcspn(p, "?#");
    o = put(o, p, path);
    p += path;
    if (*p == '?') {
        *o++ = *p++;
        while (*p && *p != '#') {
            size_t item = strcspn(p, "&#");
            const char *eq = memchr(p, '=', item);
            if (eq) {
                o = put(o, p, (size_t)(eq + 1 - p));
                if (eq + 1 < p + item)
                    o = put(o, "***", 3);
            } else if (item) {
                o = put(o, "***", 3);
            }
            p += item;
            if (*p == '&')
                *o++ = *p++;
        }
    }
    if (*p == '#') {
        *o++ = '#';
        if (p[1])
            o = put(o, "***", 3);
    }
    *o = 0;
    return out;
}

/* No control byte nor DEL in s: fit for a request header's value. */
static int header_text(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

/* A bucket name that is one host name label (S3's rule for virtual-hosted
 * requests over https: 3 to 63 lowercase letters, digits and '-', a letter
 * or digit at each end). */
static int virtual_hostable(const char *b, size_t n)
{
    return n >= 3 && n <= 63 && strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789-") >= n &&
           b[0] != '-' && b[n - 1] != '-';
}

/* s3://bucket/key to the URL requested, the Host header and the path
 * signed: path style at an endpoint, else virtual-hosted AWS. */
static int s3_target(wpk_remote *r, const char *url, char *msg, size_t msglen)
{
    const char *b = url + 5, *slash = strchr(b, '/');
    if (!slash || slash == b || !slash[1]) {
        wpk_fmt(msg, msglen, "an S3 URL is s3://BUCKET/KEY");
        return WPACK_E_INVALID_ARGUMENT;
    }
    size_t blen = (size_t)(slash - b);
    /* A bucket name is letters, digits, '.', '-' (and '_' of old ones): it
     * goes raw into the host name or the path. "s3://KEY:SECRET@bucket/k"
     * would send the secret in the Host header or the path (and as HTTP
     * Basic credentials); a '?' or '#' would end the path. Not echoed: it
     * may hold a secret (the name shown hides user info). */
    if (strspn(b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != blen ||
        !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[blen - 1])) {
        /* and starts and ends with a letter or digit (S3's rule): "." and
         * ".." would be dot segments of a path-style request's path */
        wpk_fmt(msg, msglen, "an S3 bucket name holds only letters, digits, '.', '-' and '_', "
                "and starts and ends with a letter or digit "
                "(credentials are options, e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "never part of an s3:// URL)");
        return WPACK_E_INVALID_ARGUMENT;
    }
    /* The region goes into the host name (no endpoint) and the signed
     * Authorization header: "eu-west-3.evil.example/x" sent the signed
     * requests to another host, a CR put a header of its own into each
     * request. AWS's are lowercase letters, digits and '-'; an endpoint's
     * store may name its own ('_', '.', upper case). */
    const char *ep = r->opt.s3_endpoint, *rg = r->opt.s3_region;
    size_t rlen = strlen(rg);
    if (!rlen || rlen > 64 ||
        strspn(rg, ep ? "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
                      : "abcdefghijklmnopqrstuvwxyz0123456789-") != rlen) {
        wpk_fmt(msg, msglen, "S3 region '%s': want %s (at most 64)", rg,
                ep ? "letters, digits, '-', '_' and '.'" : "lowercase letters, digits and '-'");
        return WPACK_E_INVALID_ARGUMENT;
    }
    char *key = encode(slash + 1, strlen(slash + 1), 1);
    if (!key)
        goto nomem;
    /* Without an endpoint, AWS: virtual-hosted when the bucket is one DNS
     * label, else path style at the region's endpoint. AWS's certificate
     * is a wildcard of one label ("*.s3.REGION.amazonaws.com": a bucket
     * "my.models" failed TLS), and a host name has no case nor '_' (a
     * legacy bucket "Models" became "models"), as AWS's SDKs do. */
    char aws[128];
    int vhost = !ep && virtual_hostable(b, blen);
    if (!ep) {
        wpk_fmt(aws, sizeof aws, "https://s3.%s.amazonaws.com", r->opt.s3_region);
        ep = aws;
    }
    const char *hs = strstr(ep, "://");
    int scheme = wpk_url_scheme(ep);
    if (scheme != WPK_HTTP && scheme != WPK_HTTPS) {
        free(key);
        char *shown = wpack_remote_shown_url(ep);
        wpk_fmt(msg, msglen, "S3 endpoint '%s' is not an http:// or https:// URL",
                shown ? shown : "(out of memory)");
        free(shown);
        return WPACK_E_INVALID_ARGUMENT;
    }
    hs += 3;
    const char *pe = strchr(hs, '/');
    size_t hlen = pe ? (size_t)(pe - hs) : strlen(hs);
    size_t plen = pe ? strlen(pe) : 0;
    while (plen && pe[plen - 1] == '/')
        plen--;
    /* Host: "BUCKET.s3.REGION.amazonaws.com" or the endpoint's */
    r->host = malloc((vhost ? blen + 1 : 0) + hlen + 1);
    if (r->host)
        sprintf(r->host, "%.*s%s%.*s", vhost ? (int)blen : 0, b, vhost ? "." : "", (int)hlen, hs);
    /* path: [ENDPOINT_PATH]/BUCKET/KEY, or /KEY virtual-hosted */
    r->uri = malloc(plen + blen + strlen(key) + 3);
    if (r->uri && vhost)
        sprintf(r->uri, "/%s", key);
    else if (r->uri)
        sprintf(r->uri, "%.*s/%.*s/%s", (int)plen, pe ? pe : "", (int)blen, b, key);
    r->url = r->host && r->uri ? malloc((size_t)(hs - ep) + strlen(r->host) + strlen(r->uri) + 1)
                               : NULL;
    if (r->url)
        sprintf(r->url, "%.*s%s%s", (int)(hs - ep), ep, r->host, r->uri);
    free(key);
    if (!r->host || !r->uri || !r->url)
        goto nomem;
    r->s3 = 1;
    lower_scheme(r->url);
    r->https = wpk_url_scheme(r->url) == WPK_HTTPS;
    if (r->opt.access_key && !r->opt.secret_key) {
        wpk_fmt(msg, msglen, "an access key without a secret key");
        return WPACK_E_INVALID_ARGUMENT;
    }
    /* both go into request headers: a control byte (the CR a line of a
     * credentials file edited on Windows ends with) broke or added one;
     * not shown (secrets) */
    const char *ak = r->opt.access_key, *tok = r->opt.session_token;
    const char *bad = ak && (!header_text(ak) || strpbrk(ak, " ,/")) ? "access key"
                      : tok && !header_text(tok)                    ? "session token"
                                                                   : NULL;
    if (bad) {
        wpk_fmt(msg, msglen, "the S3 %s holds a control byte%s (a stray CR?)", bad,
                bad[0] == 'a' ? ", a blank, ',' or '/'" : "");
        return WPACK_E_INVALID_ARGUMENT;
    }
    return WPACK_OK;
nomem:
    wpk_fmt(msg, msglen, "out of memory");
    return WPACK_E_NOMEM;
}

static int copy_str(wpk_remote *r, int k, const char **s)
{
    if (!*s)
        return 1;
    r->owned[k] = strdup(*s);
    *s = r->owned[k];
    return r->owned[k] != NULL;
}

/* ------------------------------------------------ the source's callbacks */

/* S3 said the bucket is in another region than the one asked (AWS_REGION
 * unset is us-east-1): the open asks once more there, as AWS's SDKs do,
 * the host (virtual-hosted AWS) and signature of that region; a set's
 * shards inherit it (r->opt). The region is checked as one given. */
static int move_region(wpk_remote *r, char *msg, size_t msglen)
{
    char *region = strdup(r->region_hint);
    r->region_hint[0] = 0;
    if (!region)
        return WPACK_E_NOMEM;
    free(r->owned[0]);
    r->owned[0] = region;
    r->opt.s3_region = region;
    wpk_remote_free_handles(r);
    free(r->host);
    free(r->uri);
    free(r->url);
    r->host = r->uri = r->url = NULL;
    *msg = 0;
    int rc = s3_target(r, r->given, msg, msglen);
    if (rc == WPACK_OK)
        rc = wpk_remote_init_handles(r, msg, msglen);
    if (rc == WPACK_OK)
        rc = wpk_remote_fetch(r, 0, r->head, WPK_REMOTE_HEAD, 1, &r->head_len, msg, msglen);
    r->region_hint[0] = 0; /* once: no ping-pong between regions */
    size_t k = strlen(msg);
    if (rc != WPACK_OK && k + 1 < msglen) /* the region asked is not the one given */
        wpk_fmt(msg + k, msglen - k, " (in region %s, where S3 said the bucket is)",
                r->opt.s3_region);
    return rc;
}

static int src_open(void *user, uint64_t *size, char *msg, size_t msglen)
{
    wpk_remote *r = user;
    if (r->setup_rc) {
        wpk_fmt(msg, msglen, "%s", r->setup_msg);
        return r->setup_rc;
    }
    pthread_once(&curl_once, curl_setup);
    if (!curl_ok) {
        wpk_fmt(msg, msglen, "libcurl failed to initialise");
        return WPACK_E_IO;
    }
    int rc = wpk_cache_open(r, msg, msglen);
    if (rc == WPACK_OK)
        rc = wpk_remote_init_handles(r, msg, msglen);
    /* Request 1: the start (superblock; size, ETag, Last-Modified pinned). */
    if (rc == WPACK_OK && !(r->head = malloc(WPK_REMOTE_HEAD)))
        rc = WPACK_E_NOMEM;
    if (rc == WPACK_OK)
        rc = wpk_remote_fetch(r, 0, r->head, WPK_REMOTE_HEAD, 1, &r->head_len, msg, msglen);
    if (rc == WPACK_E_IO && r->region_hint[0])
        rc = move_region(r, msg, msglen);
    /* Request 2: the end (trailer, and the index when it fits). */
    if (rc == WPACK_OK && r->size > r->head_len) {
        uint64_t from = r->size > WPK_REMOTE_TAIL ? r->size - WPK_REMOTE_TAIL : 0;
        if (from < r->head_len)
            from = r->head_len;
        r->tail_off = from;
        r->tail_len = r->size - from;
        if (!(r->tail = malloc((size_t)r->tail_len)))
            rc = WPACK_E_NOMEM;
        else
            rc = wpk_remote_fetch(r, from, r->tail, r->tail_len, 0, NULL, msg, msglen);
    }
    if (rc == WPACK_E_NOMEM && !*msg)
        wpk_fmt(msg, msglen, "out of memory");
    *size = r->size;
    return rc;
}

static int src_read(void *user, uint64_t off, void *dst, size_t n, char *msg, size_t msglen)
{
    wpk_remote *r = user;
    if (off + n <= r->head_len) {
        memcpy(dst, r->head + off, n);
        return WPACK_OK;
    }
    if (off >= r->tail_off && off + n <= r->tail_off + r->tail_len && r->tail) {
        memcpy(dst, r->tail + (off - r->tail_off), n);
        return WPACK_OK;
    }
    pthread_mutex_lock(&r->lock);
    char why[500] = "";
    int rc;
    if (r->cache_on)
        rc = wpk_cache_read(r, off, dst, n, why, sizeof why);
    else if (!wpk_ra_read(r, off, dst, n, &rc, why, sizeof why))
        rc = wpk_remote_fetch(r, off, dst, n, 0, NULL, why, sizeof why);
    pthread_mutex_unlock(&r->lock);
    if (rc)
        wpk_fmt(msg, msglen, "%s: %s", r->shown, why);
    return rc;
}

static void src_forget(void *user, uint64_t off, uint64_t n)
{
    wpk_remote *r = user;
    pthread_mutex_lock(&r->lock);
    wpk_cache_forget(r, off, n);
    wpk_ra_forget(r, off, n);
    pthread_mutex_unlock(&r->lock);
}

/* The reader's plan: read-ahead (readahead.c); through the chunk cache,
 * of the chunks it does not hold yet (cache.c). Out of memory: no plan,
 * reads go one by one. */
static void src_plan(void *user, const uint64_t *ranges, size_t n)
{
    wpk_remote *r = user;
    pthread_mutex_lock(&r->lock);
    if (r->cache_on)
        wpk_cache_plan(r, ranges, n);
    else
        wpk_ra_plan(r, ranges, n);
    pthread_mutex_unlock(&r->lock);
}

/* Between pieces the reader hands on: the read-ahead's transfers move on
 * (responses read, finished connections given the next request) while
 * the caller writes, instead of only when it next waits. */
static void src_idle(void *user)
{
    wpk_remote *r = user;
    pthread_mutex_lock(&r->lock);
    if (wpk_ra_busy(r))
        wpk_remote_kick(r);
    pthread_mutex_unlock(&r->lock);
}

static void src_close(void *user)
{
    remote_free(user);
}

/* A shard's URL: the manifest's with its last path segment replaced by
 * name. An http(s) URL is percent-encoded, so the name is encoded into it,
 * and only its path counts: a query ('?', which may hold a '/') is carried
 * to the shard's URL (a token for a whole directory), a fragment dropped
 * (never sent). An s3:// URL holds the raw key ('?' and '#' are part of
 * it; s3_target encodes it), so the name goes in as it is. */
static char *shard_url(const wpk_remote *r, const char *name)
{
    const char *u = r->given, *auth = strstr(u, "://") + 3;
    size_t end = r->s3 ? strlen(u) : strcspn(u, "?#");
    size_t qlen = !r->s3 && u[end] == '?' ? strcspn(u + end, "#") : 0;
    size_t dir = end;
    while (dir > (size_t)(auth - u) && u[dir - 1] != '/')
        dir--;
    int add_slash = dir == (size_t)(auth - u); /* no path: "http://host?q" */
    if (add_slash)
        dir = end;
    char *enc = r->s3 ? strdup(name) : encode(name, strlen(name), 0);
    size_t elen = enc ? strlen(enc) : 0;
    char *url = enc ? malloc(dir + 1 + elen + qlen + 1) : NULL;
    if (url) {
        char *o = url;
        memcpy(o, u, dir);
        o += dir;
        if (add_slash)
            *o++ = '/';
        memcpy(o, enc, elen);
        memcpy(o + elen, u + end, qlen);
        o[elen + qlen] = 0;
    }
    free(enc);
    return url;
}

static int open_url(wpack_archive **out, const char *url, const wpack_remote_options *opt,
                    int64_t clock_skew_s);

static int src_open_shard(void *user, const char *name, unsigned flags, wpack_archive **out)
{
    wpk_remote *r = user;
    char *url = shard_url(r, name);
    if (!url) {
        *out = NULL;
        return WPACK_E_NOMEM;
    }
    wpack_remote_options o = r->opt;
    o.flags = flags;
    /* the clock skew the manifest's requests met: each shard's first
     * request was refused (RequestTimeTooSkewed) to learn it again */
    int rc = open_url(out, url, &o, r->clock_skew_s);
    free(url);
    return rc;
}

int wpack_open_url(wpack_archive **out, const char *url, const wpack_remote_options *opt)
{
    return open_url(out, url, opt, 0);
}

static int open_url(wpack_archive **out, const char *url, const wpack_remote_options *opt,
                    int64_t clock_skew_s)
{
    wpack_remote_options defaults;
    if (!opt) {
        wpack_remote_options_init(&defaults);
        opt = &defaults;
    }
    wpk_remote *r = calloc(1, sizeof *r);
    if (!r) {
        *out = NULL;
        return WPACK_E_NOMEM;
    }
    pthread_mutex_init(&r->lock, NULL);
    r->cache_fd = -1;
    r->clock_skew_s = clock_skew_s;
    r->opt = *opt;
    if (!r->opt.cache_max_bytes)
        r->opt.cache_max_bytes = 10ull << 30;
    if (!r->opt.connections)
        r->opt.connections = 1;
    if (r->opt.connections > 64)
        r->opt.connections = 64;
    if (r->opt.chunk_size < WPK_REMOTE_HEAD)
        r->opt.chunk_size = WPK_REMOTE_HEAD;
    if (r->opt.chunk_size > WPK_REMOTE_CHUNK_MAX)
        r->opt.chunk_size = WPK_REMOTE_CHUNK_MAX;
    if (!r->opt.timeout_s)
        r->opt.timeout_s = 30;
    if (!r->opt.s3_region)
        r->opt.s3_region = "us-east-1";
    char msg[600] = "";
    int rc = WPACK_OK;
    if (!copy_str(r, 0, &r->opt.s3_region) || !copy_str(r, 1, &r->opt.s3_endpoint) ||
        !copy_str(r, 2, &r->opt.access_key) || !copy_str(r, 3, &r->opt.secret_key) ||
        !copy_str(r, 4, &r->opt.session_token) || !copy_str(r, 5, &r->opt.ca_file) || !copy_str(r, 6, &r->opt.cache_dir) ||
        !copy_str(r, 7, &r->opt.proxy) || !copy_str(r, 8, &r->opt.no_proxy) ||
        !(r->given = strdup(url ? url : "")) || !(r->shown = wpack_remote_shown_url(r->given)))
        rc = WPACK_E_NOMEM;
    else if (WPK_RESERVED_CHECK(opt, "wpack_remote_options", "wpack_remote.h", msg, sizeof msg))
        rc = WPACK_E_INVALID_ARGUMENT;
    else if (wpack_remote_has_scheme(url) && !wpack_remote_is_url(url))
        rc = WPACK_E_INVALID_ARGUMENT,
        wpk_fmt(msg, sizeof msg, "unsupported URL scheme '%.*s': wpack reads http://, https:// "
                "and s3:// (a local file whose path starts so is reached as ./%.*s://...)",
                (int)strcspn(url, ":"), url, (int)strcspn(url, ":"), url);
    else if (!wpack_remote_is_url(url))
        rc = WPACK_E_INVALID_ARGUMENT, wpk_fmt(msg, sizeof msg, "not an http://, https:// "
                                                               "or s3:// URL");
    else if (wpk_url_scheme(url) == WPK_S3)
        rc = s3_target(r, url, msg, sizeof msg);
    else if (!(r->url = strdup(url)))
        rc = WPACK_E_NOMEM;
    else
        lower_scheme(r->url), r->https = wpk_url_scheme(url) == WPK_HTTPS;
    if (rc && !*msg)
        wpk_fmt(msg, sizeof msg, "out of memory");
    r->setup_rc = rc; /* a bad URL or options: the open fails with this */
    wpk_fmt(r->setup_msg, sizeof r->setup_msg, "%s", msg);
    wpack_source s;
    memset(&s, 0, sizeof s);
    s.user = r;
    s.name = r->shown;
    s.open = src_open;
    s.read = src_read;
    s.open_shard = src_open_shard;
    s.close = src_close;
    s.forget = src_forget;
    s.plan = src_plan;
    s.idle = src_idle;
    /* stream large entries in windows of half a round over the connections:
     * with the read-ahead's two steps (the other half) memory stays within
     * connections x chunk_size */
    s.stream_window = (uint64_t)r->opt.connections * r->opt.chunk_size / 2;
    int orc = wpack_open_source(out, &s, opt->flags);
    if (orc == WPACK_OK && r->cache_fd >= 0) {
        /* the index is validated: its XXH3 and the URL name this archive's chunks */
        wpack_info in;
        wpack_get_info(*out, &in);
        r->cache_on = wpk_cache_key(r, in.index_checksum, &r->cache_key) == 0;
    }
    return orc;
}
