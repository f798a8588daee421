/* request.h - libwpack-remote internals: one range request (a job) of a
 * batch (fetch.c) and the checks of its response (response.c). */
#ifndef WPACK_REMOTE_REQUEST_H
#define WPACK_REMOTE_REQUEST_H

#include <curl/curl.h>
#include <time.h>

#include "remote.h"

/* A body of an error response kept for the message (an HTML page, an S3
 * XML error); longer ones are cut off (the transfer is stopped). An S3
 * error's XML declaration and indentation take ~100 bytes before <Code>. */
#define SNIPPET 1024

typedef struct {
    wpk_remote *r;
    uint64_t off, len;          /* the range asked for */
    uint8_t *dst;
    uint64_t want;              /* bytes expected (probe: as the server announced) */
    uint64_t got;
    unsigned attempts;
    int64_t not_before;         /* ms (monotonic) before which it is not retried */
    int64_t started_at;         /* ms (monotonic) the current attempt was started */
    int64_t deadline_ms;        /* the most an attempt may take (fetch.c: deadline_ms) */
    int state;                  /* 0 waiting, 1 running, 2 done */
    int paused;                 /* receiving paused by the rate cap */
    int probe;
    /* the response being received (reset at each status line: redirects) */
    long status;
    int have_range, range_empty, checked; /* range_empty: Content-Range total 0 */
    int cr_known, cr_unsat;     /* total given (not "*"); "bytes STAR/total" (a 416's) */
    uint64_t cr_first, cr_last, cr_total;
    char etag[256], lastmod[128], ctype[64];
    uint64_t etag_sum, lastmod_sum; /* XXH3 of the whole values (0: none; response.c) */
    char coding[64];            /* its Content-Encoding ("": none) */
    char location[512];         /* a redirect's Location (cut: for messages only) */
    char bucket_region[72];     /* S3's x-amz-bucket-region ("": none; cut: not a region) */
    time_t server_date;         /* its Date (0: none or not a date) */
    unsigned reskewed;          /* requests signed again at the server's time (fetch.c) */
    int64_t resp_at;            /* ms (monotonic) its status line came */
    long resp_redirects;        /* redirects followed then (CURLINFO_REDIRECT_COUNT) */
    curl_off_t resp_dl0;        /* the download count then (-1: not seen yet) */
    char snippet[SNIPPET + 1];
    size_t snippet_len;
    char fatal[400];            /* set by a callback: stop, no retry */
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
    struct wpk_batch *batch;    /* the batch it belongs to */
    void *easy;                 /* the CURL handle it runs on */
    int unpinned;               /* libcurl was refused a host name lookup (fetch.c) */
    unsigned repins;            /* requests made again after such a refusal */
} job;

/* Milliseconds of the monotonic clock. */
int64_t wpk_now_ms(void);

/* libcurl's header, write and progress callbacks of a job (user data: the
 * job). A response's status line resets what the last one set (a
 * redirect, a 100); the body of a 206 is checked against the range asked
 * and the object pinned at open before a byte of it is kept; another
 * status keeps SNIPPET bytes of its body for the message. A failure that
 * no retry mends sets j->fatal and stops the transfer. */
size_t wpk_on_header(char *p, size_t sz, size_t nm, void *u);
size_t wpk_on_body(char *p, size_t sz, size_t nm, void *u);
int wpk_on_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                    curl_off_t ulnow);
/* The 206 response's headers against what was asked and pinned: 1 good
 * (j->want set), else 0 and j->fatal says why. */
int wpk_check_response(job *j);
/* 1 when e is a strong entity-tag by RFC 9110's grammar (quoted, no
 * control byte, blank or inner quote), which may be sent as If-Match;
 * else 0: one cut to fit, a weak one, or one holding a CR (sent back, it
 * put a header of the server's choice into each request). */
int wpk_strong_etag(const char *e);
/* Printable text of an error body (the snippet): an S3 XML error's Code
 * and Message, else the body's start; control bytes and runs of blanks
 * become one space. The caller scrubs it, then cuts it: cut first, a
 * secret the cut went through would show its start. */
void wpk_snippet_text(const job *j, char *out, size_t outlen);

#endif
