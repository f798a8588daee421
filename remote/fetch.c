/* fetch.c - range GETs of one remote object: a read is split into chunks
 * fetched over several connections at once (curl multi interface: no
 * threads), each checked as it arrives (response.c: status 206, the
 * Content-Range asked for, the size, ETag and Last-Modified pinned at
 * open, never more bytes than the range) and retried with exponential backoff when the failure may
 * pass (5xx, 429, 408, timeouts, resets, short bodies). Anything else is an
 * error naming the URL and what the server did: nothing unchecked reaches
 * the buffer's owner as good. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "request.h"

#define SHOWN 200 /* of an error body in a message */
/* The longest Retry-After waited for (or timeout_s, if longer): a server
 * asking for more fails the request at once. */
#define RETRY_AFTER_MOST_S 60u

/* Requests started together (one read, or one read-ahead step): they run
 * on the handle's connections with every other live batch's, the batch
 * waited for first. */
struct wpk_batch {
    job *jobs;
    uint64_t njobs, done;
    uint64_t first_waiting;     /* no job before it waits to be started */
    int probe;
    int rc;                     /* a job failed for good: this code, msg */
    char msg[600];
    struct wpk_batch *next;     /* the handle's live batches, oldest first */
};
/* The slowest a transfer may go (bytes/s) for timeout_s before it is
 * given up: 1 KiB/s, or a connection's share of the rate cap when lower. */
#define LOW_SPEED 1024
static long low_speed(const wpk_remote *r)
{
    uint64_t cap = r->opt.max_bytes_per_s;
    uint64_t share = cap ? cap / r->opt.connections / 2 : LOW_SPEED;
    return share >= LOW_SPEED ? LOW_SPEED : share ? (long)share : 1L;
}

/* The whole of a request, however its bytes come: timeout_s plus its
 * length at MIN_AVG_RATE (16 KiB/s), or at half a connection's share of
 * the rate cap when that is lower. The low-speed limit alone let a server
 * sending just above 1 KiB/s hold an 8 MiB request for over two hours;
 * now 30 s + 512 s at most (and a retry). In ms, at most ~24 days. */
#define MIN_AVG_RATE (16 * 1024)
static uint64_t avg_rate(const wpk_remote *r)
{
    uint64_t cap = r->opt.max_bytes_per_s;
    uint64_t share = cap ? cap / r->opt.connections / 2 : MIN_AVG_RATE;
    return share >= MIN_AVG_RATE ? MIN_AVG_RATE : share ? share : 1;
}
static int64_t deadline_ms(const wpk_remote *r, uint64_t len)
{
    uint64_t rate = avg_rate(r), ms = (uint64_t)r->opt.timeout_s * 1000, max = INT32_MAX;
    uint64_t body = len / rate < max / 1000 ? len * 1000 / rate : max;
    return (int64_t)(ms + body < max ? ms + body : max);
}

/* Append "Name: value" to *l: 0 when out of memory. Sized from the value
 * (a session token runs to several KiB): a header is never cut short. */
static int add_header(struct curl_slist **l, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *h = vl < SIZE_MAX - nl - 3 ? malloc(nl + vl + 3) : NULL;
    if (!h)
        return 0;
    memcpy(h, name, nl);
    memcpy(h + nl, ": ", 2);
    memcpy(h + nl + 2, value, vl + 1);
    struct curl_slist *t = curl_slist_append(*l, h);
    free(h);
    if (!t)
        return 0;
    *l = t;
    return 1;
}

/* libcurl is about to look a host name up, on a thread of its own (a
 * redirect's target: the URL's host was handed to it at the open). A
 * numeric host needs no thread; a name is refused, looked up by finish
 * on this thread, and the request made again. */
static int on_resolve(void *resolver, void *reserved, void *user)
{
    job *j = user;
    char *url = NULL;
    (void)resolver, (void)reserved;
    if (curl_easy_getinfo((CURL *)j->easy, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url &&
        wpk_remote_numeric_lookup(j->r, url))
        return 0;
    j->unpinned = 1;
    return 1;
}

static int setup(job *j, void *easy, char *msg, size_t msglen)
{
    wpk_remote *r = j->r;
    CURL *e = easy;
    curl_easy_reset(e);
    j->status = 0;
    j->got = 0;
    j->checked = 0;
    j->have_range = j->range_empty = j->cr_unsat = 0;
    j->fatal[0] = j->errbuf[0] = 0;
    j->snippet_len = 0;
    j->paused = 0;
    j->unpinned = 0;
    j->easy = easy;
    j->want = j->len;
    struct curl_slist *l = NULL;
    char range[80];
    wpk_fmt(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)j->off,
            (unsigned long long)(j->off + j->len - 1));
    int ok = add_header(&l, "Range", range) && add_header(&l, "Accept-Encoding", "identity");
    /* A strong ETag lets the server refuse a changed object (412) itself;
     * not one cut to fit r->etag (no closing quote): sent cut short, it
     * failed every read after the open with a 412; nor one outside RFC
     * 9110's grammar (a bare CR in it injected a header) */
    if (ok && !j->probe && wpk_strong_etag(r->etag))
        ok = add_header(&l, "If-Match", r->etag);
    if (ok && r->s3 && r->opt.access_key) {
        char date[20];
        time_t now = time(NULL) + (time_t)r->clock_skew_s;
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
        wpk_sigv4_req q = {r->host, r->uri, range, date, r->opt.s3_region, r->opt.access_key,
                           r->opt.secret_key, r->opt.session_token};
        /* the Authorization value: ~200 bytes besides the key and region */
        size_t alen = strlen(r->opt.access_key) + strlen(r->opt.s3_region) + 256;
        char *auth = malloc(alen);
        if (!auth || wpk_sigv4_get(&q, auth, alen) != 0) {
            free(auth);
            curl_slist_free_all(l);
            wpk_fmt(msg, msglen, "cannot sign the request (out of memory, or a region "
                    "longer than 200 bytes)");
            return WPACK_E_INVALID_ARGUMENT;
        }
        ok = add_header(&l, "Host", r->host) && add_header(&l, "x-amz-date", date) &&
             add_header(&l, "x-amz-content-sha256", wpk_sigv4_empty_hash()) &&
             (!r->opt.session_token || add_header(&l, "x-amz-security-token", r->opt.session_token)) &&
             add_header(&l, "Authorization", auth);
        free(auth);
    }
    if (!ok)
        goto nomem;
    j->hdrs = l;
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    /* An S3 key is literal: "a/../b" names an object of its own, and the
     * path signed keeps its dot segments, so curl must send it as it is.
     * An http(s) URL has them removed, as curl and browsers do. */
    if (r->s3)
        curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    if (r->resolve) /* resolve.c: no resolver thread */
        curl_easy_setopt(e, CURLOPT_RESOLVE, r->resolve);
    curl_easy_setopt(e, CURLOPT_RESOLVER_START_FUNCTION, on_resolve);
    curl_easy_setopt(e, CURLOPT_RESOLVER_START_DATA, j);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    /* never from https down to http */
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, r->https ? "https" : "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, (long)(r->opt.follow_redirects && !r->s3));
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)r->opt.timeout_s);
    /* Slower than LOW_SPEED bytes/s for timeout_s: give up (and retry). A
     * floor of 1 byte/s let a server trickling 2 bytes/s hold a read for
     * ever; below the rate cap's share per connection the floor is that. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, low_speed(r));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)r->opt.timeout_s);
    j->deadline_ms = deadline_ms(r, j->len);
    j->started_at = wpk_now_ms();
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)j->deadline_ms);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, wpk_on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, j);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, wpk_on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, wpk_on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, j);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, j->errbuf);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "wpack-remote/0.1");
    /* 256 KiB a receive, not 16 KiB: a sixteenth of the recv and poll calls
     * on a fast path; with a rate cap the default, so that pauses stay fine */
    if (!r->opt.max_bytes_per_s)
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L << 10);
    if (r->opt.ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, r->opt.ca_file);
    /* "" is no proxy, and keeps libcurl from reading http_proxy & co.
     * itself (the library reads no environment; the caller passes them) */
    curl_easy_setopt(e, CURLOPT_PROXY, r->opt.proxy ? r->opt.proxy : "");
    if (r->opt.proxy && *r->opt.proxy)
        curl_easy_setopt(e, CURLOPT_NOPROXY, r->opt.no_proxy ? r->opt.no_proxy : "");
    return WPACK_OK;
nomem:
    curl_slist_free_all(l);
    wpk_fmt(msg, msglen, "out of memory");
    return WPACK_E_NOMEM;
}

static int retryable_curl(CURLcode c)
{
    return c == CURLE_OPERATION_TIMEDOUT || c == CURLE_PARTIAL_FILE || c == CURLE_RECV_ERROR ||
           c == CURLE_SEND_ERROR || c == CURLE_COULDNT_CONNECT || c == CURLE_GOT_NOTHING ||
           c == CURLE_HTTP2 || c == CURLE_HTTP2_STREAM;
}

/* Text for a message that may repeat secrets: those of the URL asked for
 * (wpk_remote_scrub), and those of the URL a redirect led to or names: a
 * CDN's presigned URL, its signature in the query, was shown redacted as
 * "redirect to", then whole in the error page or the 302's own "moved
 * here" link that followed it. */
static void scrub(job *j, void *easy, char *text, size_t size)
{
    char *u = NULL;
    wpk_remote_scrub(j->r, text, size);
    if (curl_easy_getinfo((CURL *)easy, CURLINFO_EFFECTIVE_URL, &u) == CURLE_OK && u)
        wpk_remote_scrub_url(text, size, u);
    u = NULL;
    if (curl_easy_getinfo((CURL *)easy, CURLINFO_REDIRECT_URL, &u) == CURLE_OK && u)
        wpk_remote_scrub_url(text, size, u);
}

/* A finished transfer: 0 done, -1 to be retried, else an error code (msg). */
static int finish(job *j, void *easy, CURLcode c, char *msg, size_t msglen)
{
    wpk_remote *r = j->r;
    char why[600], body[SNIPPET + 1];
    if (j->fatal[0]) { /* it may quote a header (an ETag, a Content-Type) */
        wpk_fmt(msg, msglen, "%s", j->fatal);
        scrub(j, easy, msg, msglen);
        return WPACK_E_IO;
    }
    if (c == CURLE_OK && j->status == 206 && j->checked && j->got == j->want)
        return 0;
    if (c == CURLE_COULDNT_RESOLVE_HOST && j->unpinned) {
        /* a redirect's host name: looked up here, then the request again
         * (not counted as an attempt: the hosts a handle pins are bounded) */
        char *url = NULL;
        curl_easy_getinfo((CURL *)easy, CURLINFO_EFFECTIVE_URL, &url);
        int rc = url ? wpk_remote_pin_redirect(r, url, why, sizeof why) : WPACK_E_IO;
        /* pinned (by this request or by another redirected meanwhile), yet
         * refused again: libcurl would look it up on its own thread */
        if (rc == WPACK_OK && ++j->repins > 2) {
            wpk_fmt(why, sizeof why, "its host was looked up, but libcurl would look it up "
                    "again on a thread of its own");
            rc = WPACK_E_IO;
        }
        if (rc == WPACK_OK) {
            j->attempts--;
            j->not_before = 0;
            return -1;
        }
        char *to = url ? wpack_remote_shown_url(url) : NULL;
        wpk_fmt(msg, msglen, "GET bytes %llu-%llu: the redirect to %s: %s",
                (unsigned long long)j->off, (unsigned long long)(j->off + j->len - 1),
                to ? to : "(unknown)", url ? why : "no URL");
        free(to);
        scrub(j, easy, msg, msglen);
        return rc;
    }
    /* an empty object: nothing to range over (the reader says what it is);
     * a 416 that says the object has bytes ("bytes STAR/N") is no answer to
     * a range from byte 0 */
    if (c == CURLE_OK && j->probe && j->status == 416 && j->cr_unsat && j->cr_total) {
        wpk_fmt(msg, msglen, "GET bytes %llu-%llu: HTTP 416 (range not satisfiable) for an "
                "object of %llu bytes (Content-Range: bytes */%llu)", (unsigned long long)j->off,
                (unsigned long long)(j->off + j->len - 1), (unsigned long long)j->cr_total,
                (unsigned long long)j->cr_total);
        return WPACK_E_IO;
    }
    if (c == CURLE_OK && j->probe && (j->status == 416 || (j->status == 206 && j->range_empty && !j->got)))
        return 0;
    /* nginx answers a Range request on a 0-byte file with 200 and no body */
    curl_off_t clen = -1;
    if (c == CURLE_OK && j->probe && j->status == 200 && !j->got &&
        curl_easy_getinfo((CURL *)easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &clen) == CURLE_OK &&
        clen == 0)
        return 0;
    /* a 206 with no body never reached on_body's check: a bad Content-Range
     * is the server's answer, not a transfer to retry */
    if (c == CURLE_OK && j->status == 206 && !j->checked && !j->got && !wpk_check_response(j)) {
        wpk_fmt(msg, msglen, "%s", j->fatal);
        scrub(j, easy, msg, msglen); /* it may quote the server's headers */
        return WPACK_E_IO;
    }
    int retry, http_retry = 0;
    char *loc = NULL;
    if (c == CURLE_UNSUPPORTED_PROTOCOL && r->https && j->status >= 300 && j->status < 400 &&
        j->location[0]) {
        /* curl's own words ("Protocol "http" not supported or disabled")
         * would say nothing of the redirect */
        retry = 0;
        char *to = wpack_remote_shown_url(j->location); /* a presigned URL's signature */
        wpk_fmt(why, sizeof why, "HTTP %ld: the redirect to %s was refused: an https URL is "
                "never followed to a non-https one", j->status, to ? to : "(out of memory)");
        free(to);
    } else if (c != CURLE_OK && !(c == CURLE_WRITE_ERROR && j->status != 206 && j->status)) {
        retry = retryable_curl(c);
        /* curl's clock is not ours (nor rounded as ours): 100 ms of slack */
        if (c == CURLE_OPERATION_TIMEDOUT && wpk_now_ms() - j->started_at + 100 >= j->deadline_ms)
            wpk_fmt(why, sizeof why, "the request's deadline passed: %llu of %llu bytes in "
                    "%lld ms (a request may take the timeout, %u s, plus its length at %llu "
                    "bytes/s)", (unsigned long long)j->got, (unsigned long long)j->len,
                    (long long)j->deadline_ms, r->opt.timeout_s, (unsigned long long)avg_rate(r));
        else /* curl says "Out of memory" of a header line over its 100 KiB cap */
            wpk_fmt(why, sizeof why, "%s%s%s%s", curl_easy_strerror(c), *j->errbuf ? ": " : "",
                    j->errbuf, c == CURLE_OUT_OF_MEMORY ? " (or a response header line longer "
                    "than libcurl takes, 100 KiB)" : "");
    } else if (j->status == 206) {
        retry = 1;
        wpk_fmt(why, sizeof why, "short body: %llu of %llu bytes", (unsigned long long)j->got,
                (unsigned long long)j->want);
    } else {
        long s = j->status;
        retry = s >= 500 || s == 429 || s == 408;
        http_retry = retry;
        wpk_snippet_text(j, body, sizeof body);
        /* S3 refuses a request dated more than 15 minutes off its clock (a
         * host whose clock drifted): signed again at its time, from its
         * Date, as AWS's SDKs do; once per request, and not an attempt */
        if (r->s3 && s == 403 && j->server_date &&
            strncmp(body, "RequestTimeTooSkewed", 20) == 0 && j->reskewed++ == 0) {
            r->clock_skew_s = (int64_t)j->server_date - (int64_t)time(NULL);
            j->attempts--;
            j->not_before = 0;
            return -1;
        }
        scrub(j, easy, body, sizeof body); /* whole, then cut: no secret's start shown */
        if (strlen(body) > SHOWN)
            body[SHOWN] = 0;
        const char *hint = s == 404 ? " (not found)"
                           : (s == 403 || s == 401) && r->s3 && !r->opt.access_key
                               ? " (access denied: the request was unsigned, no access key given: "
                                 "e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
                           : s == 403 || s == 401 ? " (access denied: check the credentials)"
                           : s == 412 ? " (the object changed since it was opened: ETag differs)"
                           : s == 416 ? " (range not satisfiable: the object is shorter than at open)"
                           : "";
        char now[120] = "";
        if (s == 416 && j->cr_unsat) /* "bytes STAR/N": what it is now */
            wpk_fmt(now, sizeof now, " (range not satisfiable: the object is now %llu bytes, "
                    "was %llu)", (unsigned long long)j->cr_total, (unsigned long long)r->size);
        if (*now)
            hint = now;
        if (s >= 300 && s < 400)
            curl_easy_getinfo((CURL *)easy, CURLINFO_REDIRECT_URL, &loc);
        char *to = loc ? wpack_remote_shown_url(loc) : NULL; /* a presigned URL's signature */
        /* S3 names the bucket's region when asked in another (a 301, or a
         * 400 AuthorizationHeaderMalformed): the open asks there (url.c) */
        char region[120] = "";
        if (r->s3 && *j->bucket_region && strcmp(j->bucket_region, r->opt.s3_region) != 0) {
            wpk_fmt(r->region_hint, sizeof r->region_hint, "%s", j->bucket_region);
            wpk_fmt(region, sizeof region, " (the bucket is in region %s, not %s)",
                    j->bucket_region, r->opt.s3_region);
        }
        wpk_fmt(why, sizeof why, "HTTP %ld%s%s%s%s%s%s", s, hint, region,
                loc ? ", redirect to " : "", to ? to : loc ? "(out of memory)" : "",
                *body ? ": " : "", body);
        free(to);
        /* with redirects followed, a 3xx still here had no Location */
        if (s >= 300 && s < 400 && !loc)
            wpk_fmt(why, sizeof why, "HTTP %ld (%s)%s", s, r->opt.follow_redirects && !r->s3
                    ? "a redirect without a Location to follow" : "redirects are not followed",
                    region);
    }
    if (retry && j->attempts <= j->r->opt.retries) {
        uint64_t d = (uint64_t)r->opt.retry_delay_ms << (j->attempts - 1 < 6 ? j->attempts - 1 : 6);
        d = d < 10000 ? d : 10000;
        /* a 429 or 503 may say how long to wait (Retry-After: seconds or a
         * date; curl reads both): waited for, up to a bound, or the request
         * fails now rather than sooner again (a throttled store would
         * only refuse it again) */
        curl_off_t after = 0;
        uint64_t most = r->opt.timeout_s > RETRY_AFTER_MOST_S ? r->opt.timeout_s : RETRY_AFTER_MOST_S;
        if (http_retry && curl_easy_getinfo((CURL *)easy, CURLINFO_RETRY_AFTER, &after) == CURLE_OK &&
            after > 0) {
            if ((uint64_t)after > most) {
                size_t k = strlen(why);
                wpk_fmt(why + k, sizeof why - k, " (the server asks to retry after %lld s "
                        "(Retry-After), longer than wpack waits: %llu s)", (long long)after,
                        (unsigned long long)most);
                retry = 0;
            } else if ((uint64_t)after * 1000 > d) {
                d = (uint64_t)after * 1000;
            }
        }
        if (retry) {
            j->not_before = wpk_now_ms() + (int64_t)d;
            return -1;
        }
    }
    scrub(j, easy, why, sizeof why); /* a body or curl's words repeating the URL's secrets */
    wpk_fmt(msg, msglen, "GET bytes %llu-%llu: %s%s", (unsigned long long)j->off,
            (unsigned long long)(j->off + j->len - 1), why,
            j->attempts > 1 ? " (after retries)" : "");
    return WPACK_E_IO;
}

int wpk_remote_init_handles(wpk_remote *r, char *msg, size_t msglen)
{
    int rc = wpk_remote_pin_host(r, msg, msglen);
    if (rc)
        return rc;
    r->multi = curl_multi_init();
    r->easy = calloc(r->opt.connections, sizeof *r->easy);
    r->slot = calloc(r->opt.connections, sizeof *r->slot);
    if (!r->multi || !r->easy || !r->slot) {
        wpk_fmt(msg, msglen, "out of memory");
        return WPACK_E_NOMEM;
    }
    for (unsigned s = 0; s < r->opt.connections; s++)
        if (!(r->easy[s] = curl_easy_init())) {
            wpk_fmt(msg, msglen, "cannot start libcurl");
            return WPACK_E_NOMEM;
        }
    curl_multi_setopt(r->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)r->opt.connections);
    /* Keep every connection open between reads: the default cache size
     * (4x the handles added at the time) shrinks once a read's handles are
     * removed, and each reopened connection pays its handshake again. */
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)r->opt.connections);
    return WPACK_OK;
}

void wpk_remote_free_handles(wpk_remote *r)
{
    while (r->batches && r->slot)
        wpk_batch_free(r, r->batches);
    if (r->easy)
        for (unsigned s = 0; s < r->opt.connections; s++)
            if (r->easy[s])
                curl_easy_cleanup(r->easy[s]);
    free(r->easy);
    free(r->slot);
    r->easy = NULL;
    r->slot = NULL;
    if (r->multi)
        curl_multi_cleanup(r->multi);
    r->multi = NULL;
    wpk_remote_unpin_host(r); /* after the handles that point at it */
}


/* ------------------------------------------------------ batches */

/* Smallest piece a read is split into below chunk_size. */
#define MIN_PIECE ((uint64_t)1 << 20)

uint64_t wpk_remote_piece(const wpk_remote *r, uint64_t total)
{
    uint64_t chunk = r->opt.chunk_size, c = r->opt.connections;
    uint64_t p = (total + c - 1) / c;
    if (p < MIN_PIECE)
        p = MIN_PIECE;
    return p < chunk ? p : chunk;
}

/* Take job j off its connection (s), if it is on one. */
static void unslot(wpk_remote *r, unsigned s)
{
    job *j = r->slot[s];
    curl_multi_remove_handle(r->multi, r->easy[s]);
    curl_slist_free_all(j->hdrs);
    j->hdrs = NULL;
    r->slot[s] = NULL;
}

int wpk_batch_start(wpk_remote *r, const wpk_range *v, size_t nv, uint64_t piece, int probe,
                    wpk_batch **out, char *msg, size_t msglen)
{
    *out = NULL;
    uint64_t njobs = 0;
    for (size_t i = 0; i < nv; i++)
        njobs += v[i].len ? (v[i].len - 1) / piece + 1 : 0;
    wpk_batch *b = calloc(1, sizeof *b);
    job *jobs = njobs && njobs <= SIZE_MAX / sizeof *jobs ? calloc((size_t)njobs, sizeof *jobs)
                                                           : NULL;
    if (!b || (njobs && !jobs)) {
        free(b);
        free(jobs);
        wpk_fmt(msg, msglen, "out of memory for %llu requests", (unsigned long long)njobs);
        return WPACK_E_NOMEM;
    }
    uint64_t k = 0;
    for (size_t i = 0; i < nv; i++)
        for (uint64_t done = 0; done < v[i].len; done += piece, k++) {
            jobs[k].r = r;
            jobs[k].off = v[i].off + done;
            jobs[k].len = v[i].len - done < piece ? v[i].len - done : piece;
            jobs[k].dst = v[i].dst + done;
            jobs[k].probe = probe;
            jobs[k].batch = b;
        }
    b->jobs = jobs;
    b->njobs = njobs;
    b->probe = probe;
    wpk_batch **tail = &r->batches; /* appended: started after the older ones */
    while (*tail)
        tail = &(*tail)->next;
    *tail = b;
    *out = b;
    return WPACK_OK;
}

void wpk_batch_free(wpk_remote *r, wpk_batch *b)
{
    if (!b)
        return;
    for (unsigned s = 0; s < r->opt.connections; s++)
        if (r->slot[s] && ((job *)r->slot[s])->batch == b)
            unslot(r, s); /* a cancelled read-ahead: its connection may close */
    for (wpk_batch **p = &r->batches; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    free(b->jobs);
    free(b);
}

/* The first of x's jobs due to start; *next_at: the earliest retry of
 * those not due yet. */
static job *first_due(wpk_batch *x, int64_t now, int64_t *next_at)
{
    if (x->rc)
        return NULL;
    while (x->first_waiting < x->njobs && x->jobs[x->first_waiting].state != 0)
        x->first_waiting++;
    for (uint64_t k = x->first_waiting; k < x->njobs; k++) {
        job *j = &x->jobs[k];
        if (j->state != 0)
            continue;
        if (j->not_before <= now)
            return j;
        if (j->not_before < *next_at)
            *next_at = j->not_before;
    }
    return NULL;
}

/* The next job for an idle connection: b's first, then the other live
 * batches' in their order (read-ahead behind the read waited for). */
static job *next_job(wpk_remote *r, wpk_batch *b, int64_t now, int64_t *next_at)
{
    job *j = b ? first_due(b, now, next_at) : NULL;
    for (wpk_batch *x = r->batches; !j && x; x = x->next)
        if (x != b)
            j = first_due(x, now, next_at);
    return j;
}

/* 1 when every job of b holding a byte of [off, off + n) is done (n 0: all
 * of b). */
static int covered(const wpk_batch *b, uint64_t off, uint64_t n)
{
    if (!n)
        return b->done == b->njobs;
    for (uint64_t k = 0; k < b->njobs; k++) {
        const job *j = &b->jobs[k];
        if (j->state != 2 && j->off < off + n && off < j->off + j->len)
            return 0;
    }
    return 1;
}

/* A finished transfer on connection s. */
static void on_done(wpk_remote *r, unsigned s, CURLcode c, uint64_t *got)
{
    job *j = r->slot[s];
    wpk_batch *b = j->batch;
    int f = finish(j, r->easy[s], c, b->msg, sizeof b->msg);
    unslot(r, s);
    if (f == 0) {
        j->state = 2;
        b->done++;
        if (r->opt.on_bytes)
            r->opt.on_bytes(r->opt.on_bytes_user, j->got);
        if (b->probe) {
            if (got)
                *got = j->got;
            r->size = j->checked ? j->cr_total : 0;
            memcpy(r->etag, j->etag, sizeof r->etag);
            memcpy(r->lastmod, j->lastmod, sizeof r->lastmod);
            r->etag_sum = j->etag_sum;
            r->lastmod_sum = j->lastmod_sum;
        }
    } else if (f == -1) {
        j->state = 0; /* again after its backoff */
        if ((uint64_t)(j - b->jobs) < b->first_waiting)
            b->first_waiting = (uint64_t)(j - b->jobs);
    } else {
        b->rc = f; /* the batch has failed: its other transfers stop */
        for (unsigned t = 0; t < r->opt.connections; t++)
            if (r->slot[t] && ((job *)r->slot[t])->batch == b)
                unslot(r, t);
    }
}

/* One round over the connections: idle ones get the next due requests
 * (b's first; b may be NULL), transfers move, finished ones are handled.
 * *running: transfers under way; *next_at: the earliest retry not due yet.
 * WPACK_OK, or a request that could not be set up (b's error). */
static int pump(wpk_remote *r, wpk_batch *b, uint64_t *got, int *running, int64_t *next_at,
                char *msg, size_t msglen)
{
    unsigned nslots = r->opt.connections;
    int64_t now = wpk_now_ms();
    *next_at = INT64_MAX;
    *running = 0;
    for (unsigned s = 0; s < nslots; s++) {
        if (!r->slot[s]) {
            job *j = next_job(r, b, now, next_at);
            if (!j)
                continue;
            int rc = setup(j, r->easy[s], msg, msglen);
            if (rc) {
                j->batch->rc = rc;
                wpk_fmt(j->batch->msg, sizeof j->batch->msg, "%s", msg);
                return rc;
            }
            j->attempts++;
            j->state = 1;
            curl_multi_add_handle(r->multi, r->easy[s]);
            r->slot[s] = j;
        }
        (*running)++;
    }
    int still = 0;
    curl_multi_perform(r->multi, &still);
    CURLMsg *cm;
    int q;
    while ((cm = curl_multi_info_read(r->multi, &q))) {
        if (cm->msg != CURLMSG_DONE)
            continue;
        unsigned s = 0;
        while (s < nslots && r->easy[s] != cm->easy_handle)
            s++;
        if (s < nslots && r->slot[s])
            on_done(r, s, cm->data.result, got);
    }
    return WPACK_OK;
}

void wpk_remote_kick(wpk_remote *r)
{
    int running;
    int64_t next_at;
    char msg[600];
    pump(r, NULL, NULL, &running, &next_at, msg, sizeof msg); /* errors: at the wait */
}

int wpk_batch_wait(wpk_remote *r, wpk_batch *b, uint64_t off, uint64_t n, uint64_t *got,
                   char *msg, size_t msglen)
{
    unsigned nslots = r->opt.connections;
    for (;;) {
        if (b->rc) {
            wpk_fmt(msg, msglen, "%s", b->msg);
            return b->rc;
        }
        if (covered(b, off, n))
            return WPACK_OK;
        int running;
        int64_t next_at;
        if (pump(r, b, got, &running, &next_at, msg, msglen) || b->rc || covered(b, off, n))
            continue;
        int64_t wait = running ? 1000 : next_at == INT64_MAX ? 10 : next_at - wpk_now_ms();
        if (r->opt.max_bytes_per_s) { /* resume paused transfers, or wait for tokens */
            int64_t rw = wpk_rate_wait_ms(r);
            for (unsigned s = 0; s < nslots && rw == 0; s++)
                if (r->slot[s] && ((job *)r->slot[s])->paused) {
                    ((job *)r->slot[s])->paused = 0;
                    curl_easy_pause(r->easy[s], CURLPAUSE_CONT);
                    rw = wpk_rate_wait_ms(r);
                }
            for (unsigned s = 0; s < nslots; s++)
                if (r->slot[s] && ((job *)r->slot[s])->paused && rw < wait)
                    wait = rw;
        }
        if (wait > 0)
            curl_multi_poll(r->multi, NULL, 0, (int)(wait < 1000 ? wait : 1000), NULL);
    }
}

/* Start the ranges as a batch, wait for all of it, drop it. */
static int fetch_now(wpk_remote *r, const wpk_range *v, size_t nv, uint64_t piece, int probe,
                     uint64_t *got, char *msg, size_t msglen)
{
    wpk_batch *b;
    int rc = wpk_batch_start(r, v, nv, piece, probe, &b, msg, msglen);
    if (rc == WPACK_OK)
        rc = wpk_batch_wait(r, b, 0, 0, got, msg, msglen);
    wpk_batch_free(r, b);
    return rc;
}

int wpk_remote_fetch(wpk_remote *r, uint64_t off, uint8_t *dst, uint64_t n, int probe,
                     uint64_t *got, char *msg, size_t msglen)
{
    if (!n)
        return WPACK_OK;
    wpk_range v = {off, n, dst};
    return fetch_now(r, &v, 1, probe ? n : wpk_remote_piece(r, n), probe, got, msg, msglen);
}

int wpk_remote_fetch_ranges(wpk_remote *r, const wpk_range *v, size_t nv, char *msg,
                            size_t msglen)
{
    uint64_t total = 0;
    for (size_t i = 0; i < nv; i++)
        total += v[i].len;
    if (!total)
        return WPACK_OK;
    return fetch_now(r, v, nv, wpk_remote_piece(r, total), 0, NULL, msg, msglen);
}
