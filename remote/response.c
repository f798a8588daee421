/* response.c - what a range request's response is checked against as it
 * arrives (libcurl's callbacks of fetch.c's jobs): the status, the
 * Content-Range against the range asked for, the size, ETag and
 * Last-Modified pinned at open, never more bytes than the range, a
 * redirect's body bounded; and the text of an error body for messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "request.h"

int64_t wpk_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A header value without surrounding blanks and the CRLF. */
static void trim(const char **v, size_t *n)
{
    while (*n && (**v == ' ' || **v == '\t')) {
        (*v)++;
        (*n)--;
    }
    while (*n && ((*v)[*n - 1] == '\r' || (*v)[*n - 1] == '\n' || (*v)[*n - 1] == ' ' ||
                  (*v)[*n - 1] == '\t'))
        (*n)--;
}

/* A header value: copied without surrounding blanks and the CRLF; cut to
 * fit out. 1 when whole, 0 when cut. */
static int header_value(const char *v, size_t n, char *out, size_t outlen)
{
    int whole = 1;
    trim(&v, &n);
    if (n >= outlen) {
        n = outlen - 1;
        whole = 0;
    }
    memcpy(out, v, n);
    out[n] = 0;
    return whole;
}

/* A value pinned at open (ETag, Last-Modified): its text, cut to fit out,
 * for messages and If-Match, and the XXH3 of all of it, which is what is
 * compared: compared as cut, two ETags alike in their first 255 bytes let
 * an object replaced mid-read pass as the one opened. */
static void pinned_value(const char *v, size_t n, char *out, size_t outlen, uint64_t *sum)
{
    header_value(v, n, out, outlen);
    trim(&v, &n);
    *sum = wpk_xxh3(v, n) | 1; /* 0: no such header */
}

static int is_header(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return 0;
    *val = line + k + 1;
    *vlen = n - k - 1;
    return 1;
}

/* 1*DIGIT at *p into *out (no sign, no blank, no overflow): 1, else 0. */
static int digits(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (s == *p)
        return 0;
    *p = s;
    *out = v;
    return 1;
}

/* A Content-Range value (RFC 9110 14.4), exactly its grammar:
 *   range-unit SP ( first-pos "-" last-pos "/" ( complete-length / "*" )
 *                 / "*" "/" complete-length )
 * with the range unit "bytes" in any case ("Bytes 0-9/100" was refused: a
 * range unit is case-insensitive) and blanks (SP, HTAB) between. sscanf
 * took a sign ("bytes -1-...") and no blank at all ("bytes0-9/100"). */
static void content_range(job *j, const char *s)
{
    uint64_t a = 0, b = 0, t = 0;
    int unsat = 0, known = 1;
    j->have_range = j->range_empty = j->cr_unsat = 0;
    j->cr_known = 1;
    if (strncasecmp(s, "bytes", 5) != 0 || (s[5] != ' ' && s[5] != '\t'))
        return;
    for (s += 5; *s == ' ' || *s == '\t'; s++)
        ;
    if (*s == '*')
        unsat = 1, s++;
    else if (!digits(&s, &a) || *s++ != '-' || !digits(&s, &b))
        return;
    if (*s++ != '/')
        return;
    if (*s == '*' && !unsat)
        known = 0, s++;
    else if (!digits(&s, &t))
        return;
    if (*s)
        return;
    j->cr_first = a;
    j->cr_last = b;
    j->cr_total = t;
    j->cr_known = known;
    j->cr_unsat = unsat;
    j->have_range = !unsat && a <= b && (!known || b < t);
    /* an empty object: total 0 ("bytes STAR/0", or "bytes 0-0/0" from some S3 servers) */
    j->range_empty = known && t == 0;
}

/* How many redirects the job's transfer has followed (0 without a handle:
 * the unit tests). */
static long redirects_followed(const job *j)
{
    long n = 0;
    if (!j->easy || curl_easy_getinfo((CURL *)j->easy, CURLINFO_REDIRECT_COUNT, &n) != CURLE_OK)
        return 0;
    return n;
}

size_t wpk_on_header(char *p, size_t sz, size_t nm, void *u)
{
    job *j = u;
    size_t n = sz * nm;
    const char *v;
    size_t vn;
    char tmp[300];
    if (n > 5 && strncmp(p, "HTTP/", 5) == 0) { /* a new response (after a redirect, a 100) */
        /* the line is not NUL-terminated (curl's header callback): the
         * status's digits are read within it (strtol ran past its end) */
        const char *sp = memchr(p, ' ', n), *end = p + n;
        j->status = 0;
        for (const char *d = sp ? sp + 1 : end; d < end && *d >= '0' && *d <= '9' &&
                                               j->status < 1000; d++)
            j->status = j->status * 10 + (*d - '0');
        j->resp_at = wpk_now_ms();
        j->resp_dl0 = -1;
        j->resp_redirects = redirects_followed(j);
        j->have_range = j->range_empty = j->cr_unsat = 0;
        j->etag[0] = j->lastmod[0] = j->ctype[0] = j->location[0] = j->coding[0] = 0;
        j->bucket_region[0] = 0;
        j->server_date = 0;
        j->etag_sum = j->lastmod_sum = 0;
        j->snippet_len = 0;
    } else if (is_header(p, n, "content-range", &v, &vn)) {
        /* cut, "bytes 0-9/000...0100" would read as another total: none */
        content_range(j, header_value(v, vn, tmp, sizeof tmp) ? tmp : "");
    } else if (is_header(p, n, "etag", &v, &vn)) {
        pinned_value(v, vn, j->etag, sizeof j->etag, &j->etag_sum);
    } else if (is_header(p, n, "last-modified", &v, &vn)) {
        pinned_value(v, vn, j->lastmod, sizeof j->lastmod, &j->lastmod_sum);
    } else if (is_header(p, n, "content-type", &v, &vn)) {
        header_value(v, vn, j->ctype, sizeof j->ctype);
    } else if (is_header(p, n, "content-encoding", &v, &vn)) {
        /* header lines of one name make one list (RFC 9110 5.3): kept as
         * the last alone, "gzip" then "identity" passed as identity and
         * the gzip body was retried as a short one */
        size_t k = strlen(j->coding);
        header_value(v, vn, tmp, sizeof tmp);
        if (!k)
            wpk_fmt(j->coding, sizeof j->coding, "%s", tmp);
        else if (*tmp && strcasecmp(tmp, "identity") != 0)
            wpk_fmt(j->coding + k, sizeof j->coding - k, ", %s", tmp);
    } else if (is_header(p, n, "location", &v, &vn)) {
        header_value(v, vn, j->location, sizeof j->location);
    } else if (is_header(p, n, "date", &v, &vn)) {
        time_t t = header_value(v, vn, tmp, sizeof tmp) ? curl_getdate(tmp, NULL) : -1;
        j->server_date = t > 0 ? t : 0;
    } else if (is_header(p, n, "x-amz-bucket-region", &v, &vn)) {
        /* longer than any region, or holding what no region holds (a
         * control byte for a message): none */
        if (!header_value(v, vn, j->bucket_region, sizeof j->bucket_region) ||
            strspn(j->bucket_region, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789-_.") != strlen(j->bucket_region))
            j->bucket_region[0] = 0;
    }
    return n;
}

/* request.h; RFC 9110 8.8.3: DQUOTE *etagc DQUOTE, etagc = %x21 /
 * %x23-7E / obs-text. */
int wpk_strong_etag(const char *e)
{
    size_t n = strlen(e);
    if (n < 2 || e[0] != '"' || e[n - 1] != '"')
        return 0;
    for (size_t i = 1; i + 1 < n; i++) {
        unsigned char c = (unsigned char)e[i];
        if (c < 0x21 || c == '"' || c == 0x7f)
            return 0;
    }
    return 1;
}

/* The most of a pinned value a message shows. */
#define SHOWN_PIN 64

/* request.h */
int wpk_check_response(job *j)
{
    wpk_remote *r = j->r;
    /* Requests say "Accept-Encoding: identity"; a range of a gzip (or
     * other) encoding is a slice of the compressed stream, not the
     * object's bytes: taken as they came, a short or garbled body, retried
     * as if it might pass */
    if (*j->coding && strcasecmp(j->coding, "identity") != 0) {
        wpk_fmt(j->fatal, sizeof j->fatal, "HTTP 206 with Content-Encoding: %s for bytes "
                "%llu-%llu: wpack reads the object's own bytes (it asks for identity)", j->coding,
                (unsigned long long)j->off, (unsigned long long)(j->off + j->len - 1));
        return 0;
    }
    if (!j->have_range) {
        wpk_fmt(j->fatal, sizeof j->fatal, "HTTP 206 without a valid Content-Range for bytes %llu-%llu",
                (unsigned long long)j->off, (unsigned long long)(j->off + j->len - 1));
        return 0;
    }
    /* the open learns the object's size from the total: "bytes 0-N/STAR"
     * (unknown) will not do there; later, the range asked is enough */
    if (j->probe && !j->cr_known) {
        wpk_fmt(j->fatal, sizeof j->fatal, "HTTP 206 for bytes %llu-%llu without the object's "
                "size (Content-Range: bytes %llu-%llu/*): wpack needs it", (unsigned long long)j->off,
                (unsigned long long)(j->off + j->len - 1), (unsigned long long)j->cr_first,
                (unsigned long long)j->cr_last);
        return 0;
    }
    int ok = j->probe ? j->cr_first == 0 && j->cr_last == (j->cr_total < j->len ? j->cr_total : j->len) - 1
                      : j->cr_first == j->off && j->cr_last == j->off + j->len - 1 &&
                            (!j->cr_known || j->cr_total == r->size);
    if (!ok) {
        wpk_fmt(j->fatal, sizeof j->fatal,
                "asked for bytes %llu-%llu%s, the server sent bytes %llu-%llu of %llu",
                (unsigned long long)j->off, (unsigned long long)(j->off + j->len - 1),
                j->probe ? "" : " of the object", (unsigned long long)j->cr_first,
                (unsigned long long)j->cr_last, (unsigned long long)j->cr_total);
        if (!j->cr_known) /* "of 0" would be a lie */
            wpk_fmt(j->fatal, sizeof j->fatal, "asked for bytes %llu-%llu of the object, the "
                    "server sent bytes %llu-%llu", (unsigned long long)j->off,
                    (unsigned long long)(j->off + j->len - 1), (unsigned long long)j->cr_first,
                    (unsigned long long)j->cr_last);
        else if (!j->probe && j->cr_total != r->size)
            wpk_fmt(j->fatal, sizeof j->fatal,
                    "the object changed since it was opened: now %llu bytes, was %llu",
                    (unsigned long long)j->cr_total, (unsigned long long)r->size);
        return 0;
    }
    if (!j->probe && (j->etag_sum != r->etag_sum || j->lastmod_sum != r->lastmod_sum)) {
        /* each value shown up to SHOWN_PIN bytes: a long one hid the rest */
        const char *v[4] = {j->etag, j->lastmod, r->etag, r->lastmod};
        char shown[4][SHOWN_PIN + 4];
        for (int i = 0; i < 4; i++)
            wpk_fmt(shown[i], sizeof shown[i], !*v[i] ? "none" : strlen(v[i]) > SHOWN_PIN
                    ? "%.*s..." : "%.*s", SHOWN_PIN, v[i]);
        int alike = strcmp(shown[0], shown[2]) == 0 && strcmp(shown[1], shown[3]) == 0;
        wpk_fmt(j->fatal, sizeof j->fatal,
                "the object changed since it was opened (%sETag %s, Last-Modified %s; at open "
                "%s, %s)", alike ? "they differ past the part shown: " : "", shown[0], shown[1],
                shown[2], shown[3]);
        return 0;
    }
    j->want = j->cr_last - j->cr_first + 1;
    return 1;
}

size_t wpk_on_body(char *p, size_t sz, size_t nm, void *u)
{
    job *j = u;
    size_t n = sz * nm;
    if (j->status != 206) {
        if (j->status == 200) { /* the whole object, or an error page: stop at once */
            wpk_fmt(j->fatal, sizeof j->fatal,
                    "the server ignored the Range request (HTTP 200%s%s for bytes %llu-%llu); "
                    "wpack needs range requests (HTTP 206)",
                    *j->ctype ? ", " : "", j->ctype, (unsigned long long)j->off,
                    (unsigned long long)(j->off + j->len - 1));
            return 0;
        }
        size_t k = SNIPPET - j->snippet_len < n ? SNIPPET - j->snippet_len : n;
        memcpy(j->snippet + j->snippet_len, p, k);
        j->snippet_len += k;
        return j->snippet_len < SNIPPET ? n : 0; /* enough to say what it was */
    }
    if (j->r->opt.max_bytes_per_s) {
        wpk_rate_refill(j->r);
        if (j->r->rate_tokens <= 0) {
            j->paused = 1;
            return CURL_WRITEFUNC_PAUSE;
        }
        j->r->rate_tokens -= (double)n;
    }
    if (!j->checked && !(j->checked = wpk_check_response(j)))
        return 0;
    if (n > j->want - j->got) {
        wpk_fmt(j->fatal, sizeof j->fatal,
                "the server sent more than the %llu bytes of range %llu-%llu",
                (unsigned long long)j->want, (unsigned long long)j->cr_first,
                (unsigned long long)j->cr_last);
        return 0;
    }
    memcpy(j->dst + j->got, p, n);
    j->got += n;
    return n;
}

/* A redirect's body: curl reads it whole before it follows (to keep the
 * connection) and never hands it to on_body; one without end, fast enough
 * for the low-speed limit, held the read for ever. At most REDIR_BODY
 * bytes and timeout_s seconds, then the request fails (no retry). */
#define REDIR_BODY ((curl_off_t)1 << 20)
int wpk_on_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                    curl_off_t ulnow)
{
    job *j = u;
    (void)dltotal, (void)ultotal, (void)ulnow;
    if (j->status < 300 || j->status >= 400)
        return 0;
    /* followed: the status is the 3xx's until the target answers, and a
     * target slow to answer was taken for a redirect body without end,
     * failed at once and never retried; the request's own limits (the
     * connect timeout, the low-speed limit, the deadline) apply to it */
    if (redirects_followed(j) > j->resp_redirects)
        return 0;
    if (j->resp_dl0 < 0 || dlnow < j->resp_dl0)
        j->resp_dl0 = dlnow;
    int64_t ms = wpk_now_ms() - j->resp_at;
    if (dlnow - j->resp_dl0 <= REDIR_BODY && ms <= (int64_t)j->r->opt.timeout_s * 1000)
        return 0;
    wpk_fmt(j->fatal, sizeof j->fatal, "HTTP %ld: a redirect's body that does not end "
            "(%lld bytes in %lld ms; at most %lld bytes and the timeout, %u s, are read)",
            j->status, (long long)(dlnow - j->resp_dl0), (long long)ms, (long long)REDIR_BODY,
            j->r->opt.timeout_s);
    return 1;
}

/* The text between <tag> and </tag> in the snippet, or NULL. */
static const char *xml_field(const job *j, const char *tag, size_t *len)
{
    char open[24], close[24];
    wpk_fmt(open, sizeof open, "<%s>", tag);
    wpk_fmt(close, sizeof close, "</%s>", tag);
    const char *a = memmem(j->snippet, j->snippet_len, open, strlen(open));
    if (!a)
        return NULL;
    a += strlen(open);
    const char *end = (const char *)j->snippet + j->snippet_len;
    const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
    *len = (size_t)((b ? b : end) - a);
    return a;
}

/* request.h; all the snippet holds. */
void wpk_snippet_text(const job *j, char *out, size_t outlen)
{
    size_t code_len = 0, msg_len = 0, k = 0;
    const char *code = xml_field(j, "Code", &code_len);
    const char *text = code ? xml_field(j, "Message", &msg_len) : NULL;
    const char *parts[3] = {code, text ? ": " : NULL, text};
    size_t lens[3] = {code_len, 2, msg_len};
    if (!code) {
        parts[0] = (const char *)j->snippet;
        lens[0] = j->snippet_len;
    }
    for (int p = 0; p < 3; p++)
        for (size_t i = 0; parts[p] && i < lens[p] && k + 1 < outlen; i++) {
            char c = parts[p][i];
            c = c >= 0x20 && c < 0x7f ? c : ' ';
            if (c != ' ' || (k && out[k - 1] != ' '))
                out[k++] = c;
        }
    out[k] = 0;
}
