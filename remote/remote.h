/* remote.h - libwpack-remote internals: one remote object (an archive or a
 * shard) and the calls that fetch its byte ranges. */
#ifndef WPACK_REMOTE_INTERNAL_H
#define WPACK_REMOTE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "wpack_remote.h"

/* sha256.c */
void wpk_sha256(const void *p, size_t n, uint8_t out[32]);
void wpk_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n, uint8_t out[32]);
void wpk_hex(const uint8_t *p, size_t n, char *out); /* out: 2n + 1 bytes */

/* sigv4.c: the Authorization header of a signed S3 GET. */
typedef struct {
    const char *host;           /* as sent in Host: ("bucket.s3.amazonaws.com", "127.0.0.1:9000") */
    const char *uri;            /* the encoded path, "/test.txt" */
    const char *range;          /* "bytes=0-9", or NULL */
    const char *amz_date;       /* "20130524T000000Z" */
    const char *region, *access_key, *secret_key;
    const char *token;          /* or NULL */
} wpk_sigv4_req;
int wpk_sigv4_get(const wpk_sigv4_req *r, char *auth, size_t authlen);
const char *wpk_sigv4_empty_hash(void);

/* Bytes kept from the two requests of an open. */
#define WPK_REMOTE_HEAD (64u * 1024)
#define WPK_REMOTE_TAIL (256u * 1024)
/* The largest chunk_size taken (a larger one is this): 64 connections x
 * 1 GiB stays far from wrapping 64 bits (2^61 x 8 wrapped to 0: read-ahead
 * in 64 KiB steps, no streaming windows). */
#define WPK_REMOTE_CHUNK_MAX ((uint64_t)1 << 30)

/* One remote object. */
typedef struct wpk_remote {
    char *url;                  /* the http(s) URL requested */
    char *given;                /* the URL as the caller gave it (shards' URLs) */
    char *shown;                /* given, its password redacted (messages, the name) */
    int https;
    int s3;                     /* sign requests (SigV4) */
    char *host;                 /* s3: the Host header value signed */
    char *uri;                  /* s3: the encoded path signed */
    wpack_remote_options opt;   /* its strings point into owned copies */
    char *owned[9];
    uint64_t size;
    char etag[256];             /* pinned at open ("" when the server sent none) */
    char lastmod[128];
    uint64_t etag_sum, lastmod_sum; /* of the whole values: compared (response.c) */
    pthread_mutex_t lock;       /* one read at a time per object */
    void *multi;                /* CURLM */
    void **easy;                /* opt.connections CURL handles, kept for their connections */
    void **slot;                /* the request running on each (fetch.c's job), or NULL */
    struct wpk_batch *batches;  /* live batches of requests, oldest first (fetch.c) */
    struct wpk_ra *ra;          /* the read-ahead plan (readahead.c), or NULL */
    uint8_t *head;              /* bytes [0, head_len) */
    uint64_t head_len;
    uint8_t *tail;              /* bytes [tail_off, tail_off + tail_len) */
    uint64_t tail_off, tail_len;
    /* cache.c: the chunk cache (opt.cache_dir), used once the open has
     * validated the index, whose XXH3 and the URL key the chunks (cache_key) */
    int cache_fd;               /* the cache directory, or -1 */
    char cache_via[32];         /* "/proc/self/fd/N" naming it for path calls, or "" */
    int cache_on;
    uint64_t cache_key;
    int cache_scanned;          /* the directory was scanned (evict) at least once */
    uint64_t cache_bytes;       /* its chunk bytes then, plus what this handle put since */
    uint64_t cache_put;         /* bytes this handle put since that scan */
    uint8_t *kept;              /* the chunk the last cached read ended inside (the next
                                 * read starts there), or NULL */
    uint64_t kept_off, kept_len;
    double rate_tokens;         /* fetch.c: the max_bytes_per_s bucket, in bytes */
    int64_t rate_at_us;         /* its last refill (monotonic; 0: never) */
    struct curl_slist *resolve; /* resolve.c: the host's addresses for CURLOPT_RESOLVE, or NULL */
    int setup_rc;               /* a bad URL or options, reported by the open */
    int64_t clock_skew_s;       /* s3: the server's clock minus ours, learnt from a
                                 * RequestTimeTooSkewed (fetch.c), added to x-amz-date */
    char region_hint[72];       /* s3: the bucket's region, as S3 said when asked in another
                                 * (x-amz-bucket-region), or "" */
    char setup_msg[600];
} wpk_remote;

/* url.c: the scheme of s in any case (what wpack_remote_is_url tells). */
enum { WPK_HTTP = 1, WPK_HTTPS, WPK_S3 };
int wpk_url_scheme(const char *s);

/* scrub.c: each secret of r's URL in text (size bytes) becomes "***", as
 * given, percent-decoded or re-encoded (any case of hex): for what a
 * server's error page or curl's own words repeat of it. Its user name,
 * password and each query value:
 * of 4 bytes or more wherever they occur; shorter, only standing alone
 * (no letter or digit beside it), a query value only after its "NAME="
 * (a short value is not every such word of the text). And the
 * credentials of its headers: HTTP Basic (base64 of "user:password"), an
 * S3 session token and secret key, what follows "Signature=". */
void wpk_remote_scrub(const wpk_remote *r, char *text, size_t size);
/* scrub.c: the same for the user info and query values of url, an
 * http(s) URL or a relative one (a redirect's target: a CDN's presigned
 * URL, its signature in the query); NULL: nothing. */
void wpk_remote_scrub_url(char *text, size_t size, const char *url);

/* fetch.c: bytes [off, off + n) of the object into dst, in chunks over
 * several connections, retried; checked against the pinned size, ETag and
 * Last-Modified. probe: the open's first request (bytes [0, n) or fewer,
 * learning size, ETag and Last-Modified). WPACK_OK or an error code with a
 * message saying what the server did (not naming the URL). */
int wpk_remote_fetch(wpk_remote *r, uint64_t off, uint8_t *dst, uint64_t n, int probe,
                     uint64_t *got, char *msg, size_t msglen);
/* Several ranges at once (over the connections together). */
typedef struct {
    uint64_t off, len;
    uint8_t *dst;
} wpk_range;
int wpk_remote_fetch_ranges(wpk_remote *r, const wpk_range *v, size_t nv, char *msg,
                            size_t msglen);
/* A batch: ranges whose requests (pieces of at most piece bytes) are
 * started together and run, with every other live batch's, while any
 * batch is waited for: read-ahead keeps a batch in flight while the
 * caller works on what an earlier one brought. wpk_batch_wait returns once
 * the requests holding [off, off + n) (n 0: all) are in, or the error that
 * ended the batch (its other requests stopped). wpk_batch_free cancels
 * what still runs. The dst buffers must outlive the batch. */
typedef struct wpk_batch wpk_batch;
int wpk_batch_start(wpk_remote *r, const wpk_range *v, size_t nv, uint64_t piece, int probe,
                    wpk_batch **out, char *msg, size_t msglen);
int wpk_batch_wait(wpk_remote *r, wpk_batch *b, uint64_t off, uint64_t n, uint64_t *got,
                   char *msg, size_t msglen);
void wpk_batch_free(wpk_remote *r, wpk_batch *b);
/* Start due requests on idle connections and move transfers once, without
 * waiting: read-ahead sends its requests before the caller goes off to
 * work on what it got (their errors surface when waited for). */
void wpk_remote_kick(wpk_remote *r);
/* The request size for a read of total bytes: chunk_size, but a read
 * smaller than connections x chunk_size goes as (at least) `connections`
 * pieces of 1 MiB or more, so that one 8 MiB tensor uses every
 * connection rather than one. */
uint64_t wpk_remote_piece(const wpk_remote *r, uint64_t total);
/* The rate cap (rate.c): one token bucket for all of r's connections,
 * refilled at max_bytes_per_s; the ms until it is positive again (0: it
 * is). */
void wpk_rate_refill(wpk_remote *r);
int64_t wpk_rate_wait_ms(wpk_remote *r);
int wpk_remote_init_handles(wpk_remote *r, char *msg, size_t msglen);
void wpk_remote_free_handles(wpk_remote *r);

/* resolve.c: look the URL's host name up on this thread (getaddrinfo) and
 * keep its addresses for CURLOPT_RESOLVE, so that libcurl starts no
 * resolver thread; nothing for a numeric host. WPACK_OK, or a message. */
int wpk_remote_pin_host(wpk_remote *r, char *msg, size_t msglen);
void wpk_remote_unpin_host(wpk_remote *r);
/* 1 when libcurl's lookup for url (a redirect's target) is of a numeric
 * host, its own or its proxy's: no thread; else 0 (it must not run). */
int wpk_remote_numeric_lookup(const wpk_remote *r, const char *url);
/* Look up url's host (a redirect's target libcurl was refused to look up
 * itself) and add it to r->resolve, so that the request made again finds
 * it in curl's cache (a host already there, pinned for another request
 * redirected meanwhile: nothing to do). An error (msg) past 8 such hosts,
 * or for a name that does not resolve; fetch.c gives up on a request
 * refused twice after that. */
int wpk_remote_pin_redirect(wpk_remote *r, const char *url, char *msg, size_t msglen);

/* readahead.c: the plan wpack_read_plan() passes (n pairs off, len: the
 * ranges the reader will read next, in order) replaces the last one.
 * Reads that follow it are served from steps of up to connections x
 * chunk_size / 16 bytes of planned ranges (at least 1 MiB where that
 * leaves two; neighbours less than 64 KiB apart merged into one request),
 * up to eight steps in flight: memory connections x chunk_size / 2. wpk_ra_read: 1 when it served (part of)
 * the read (*rc its result), 0 when [off, off + n) is not planned. */
int wpk_ra_plan(wpk_remote *r, const uint64_t *ranges, size_t n);
/* 1 when steps are in flight (their transfers want driving). */
int wpk_ra_busy(const wpk_remote *r);
int wpk_ra_read(wpk_remote *r, uint64_t off, uint8_t *dst, uint64_t n, int *rc, char *msg,
                size_t msglen);
/* Bytes of [off, off + n) failed a check: the steps holding them are
 * dropped, the plan rewound to the oldest, so a re-read fetches afresh. */
void wpk_ra_forget(wpk_remote *r, uint64_t off, uint64_t n);
void wpk_ra_free(wpk_remote *r);

/* cache.c. Open (creating it 0700 if missing) opt.cache_dir: WPACK_OK or
 * an error with msg (not a directory, a symlink, another user's, writable
 * by others). */
int wpk_cache_open(wpk_remote *r, char *msg, size_t msglen);
void wpk_cache_close(wpk_remote *r);
/* *key: the name of r's chunk files, the XXH3 of the index's XXH3 and of
 * the URL's scheme, host, port and path (never another object's chunks).
 * 0, or -1 when out of memory (the cache is then not used). */
int wpk_cache_key(const wpk_remote *r, uint64_t index_xxh3, uint64_t *key);
/* Bytes [off, off + n) through the cache: the chunk_size-aligned chunks
 * that hold them come from valid cache files or are fetched (and stored). */
int wpk_cache_read(wpk_remote *r, uint64_t off, uint8_t *dst, uint64_t n, char *msg,
                   size_t msglen);
/* The reader's plan through the cache: the chunks the ranges touch that
 * have no cache file yet, in order, become the read-ahead's plan
 * (wpk_ra_plan), so a first read through a cache fetches ahead as one
 * without; wpk_cache_read takes its misses from it. */
int wpk_cache_plan(wpk_remote *r, const uint64_t *ranges, size_t n);
/* Drop the cache files of the chunks holding [off, off + n). */
void wpk_cache_forget(wpk_remote *r, uint64_t off, uint64_t n);

#endif
