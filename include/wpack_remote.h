/*
 * wpack_remote.h - libwpack-remote: open archives on HTTP(S) servers and S3
 * object stores, reading only the byte ranges a reader needs.
 *
 * A separate library over libcurl, so that libwpack itself keeps no network
 * (and no TLS) dependency: it reads through wpack_open_source(), which this
 * library feeds with range GETs. Everything wpack.h does on a handle works
 * on a remote one, except zero-copy views (there is no mapping): an entry
 * fetched whole is checked against its XXH3 before any byte of it is
 * handed out. A partial wpack_read without verification (opened with
 * WPACK_OPEN_NO_VERIFY_READS) fetches only the
 * bytes asked for (unchecked); with verification (the default, or
 * WPACK_READ_VERIFY under WPACK_OPEN_NO_VERIFY_READS) the entry is fetched whole once and checked, and
 * the handle keeps that fetch (one entry, up to 128 MiB) for the partial
 * reads that follow; a partial read of an entry no longer kept fetches it
 * whole again and checks it (or reads it from the cache): with
 * verification, no byte comes from a ranged fetch nothing checked. An
 * entry larger than connections x chunk_size / 2 is streamed whole for
 * each such read, hashed, the bytes asked for copied out.
 *
 * Opening reads the first 64 KiB (superblock; the response gives the size,
 * ETag and Last-Modified, which are then pinned: an object replaced while
 * the handle is open is an error, never a mix of two files) and the last
 * 256 KiB (trailer and, for most archives, the whole index): two GETs, one
 * more when the index is larger. Reads are split into chunks fetched over
 * several connections at once (curl multi interface, no threads; a read
 * smaller than connections x chunk_size goes as up to `connections` pieces
 * of at least 1 MiB (or chunk_size if smaller); idle connections stay open
 * between reads), each
 * retried with exponential backoff on 5xx, 429, timeouts, resets and short
 * bodies (a 429 or 503 with Retry-After: no sooner than it says, up to
 * 60 s or timeout_s if longer; a longer one fails the request at once).
 * A server that ignores Range (HTTP 200), answers with another range,
 * another ETag, more or fewer bytes than asked, or an error page is
 * an error naming the URL and what it did. wpack_read_stream() and
 * wpack_read_to_fd() of a tensor larger than connections x chunk_size / 2
 * fetch it in windows of that size, hashed as they arrive (memory stays
 * bounded; the whole tensor's XXH3 decides the call's result at its end).
 *
 * Read-ahead: after wpack_read_plan() (extract, export and verify call it)
 * reads that follow the plan are served from steps of up to connections x
 * chunk_size / 16 bytes of the planned entries, fetched ahead: neighbours
 * less than 64 KiB apart go as one request (200 tensors of 4 KiB: one to
 * four requests, not 200), and eight steps are in flight, so the next
 * requests are out while the caller hashes and writes the current entry.
 * Memory: the steps (connections x chunk_size / 2 in all), the window or
 * entry being read and the last entry read (kept for partial reads; its
 * block is reused for the next fetch), each up to connections x
 * chunk_size / 2: ~96 MiB by default.
 * With a cache_dir the plan is the chunks the cache does not hold yet
 * (a first read fetches ahead as one without a cache). Every entry is still checked against its XXH3
 * before any byte of it is handed out; one that fails drops the steps, so
 * that its refetch goes to the server.
 *
 * The library reads no environment variable: credentials, region,
 * endpoint and proxy come from the options (the wpack CLI reads
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION /
 * AWS_DEFAULT_REGION, AWS_ENDPOINT_URL and the proxy variables and passes
 * them); libcurl's reading of the proxy variables is turned off. Its TLS
 * library may still read SSL_CERT_FILE / SSL_CERT_DIR when ca_file is
 * not given. Handles may be used from several
 * threads; their network reads are serialized per handle. The first open
 * calls curl_global_init() once for the process. No thread is started,
 * libcurl's threaded resolver's neither: host names (the URL's at the
 * open, or the proxy's; a redirect's target when met, at most 8 per
 * handle) are looked up on the caller's thread with getaddrinfo() and
 * handed to libcurl. That lookup is bounded by the system resolver's own
 * timeouts (resolv.conf), not by timeout_s.
 */
#ifndef WPACK_REMOTE_H
#define WPACK_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "wpack.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wpack_remote_options {
    unsigned flags;             /* WPACK_OPEN_* for the archive */
    unsigned connections;       /* transfers at once per read (default 8, 1..64) */
    uint64_t chunk_size;        /* bytes per range request (default 8 MiB; 64 KiB to 1 GiB,
                                 * a value outside taken as the nearest) */
    unsigned retries;           /* attempts after the first, per request (default 4) */
    unsigned retry_delay_ms;    /* first backoff, doubled per attempt (default 250) */
    unsigned timeout_s;         /* a request slower than 1 KiB/s for this long fails (and is
                                 * retried; default 30). With max_bytes_per_s, the floor is at
                                 * most half a connection's share of it. Each request also
                                 * has a deadline: timeout_s plus its length at 16 KiB/s (or
                                 * at that half share when lower), 30 s + 512 s for an 8 MiB
                                 * chunk; past it the request fails and is retried like a
                                 * timeout, the error naming the range and the deadline. */
    uint64_t max_bytes_per_s;   /* receive rate cap for all connections together (one
                                 * token bucket per handle; 0: none) */
    int follow_redirects;       /* follow 3xx (default 1; never https -> http; not for s3://) */
    /* s3://bucket/key: signed with AWS Signature Version 4 when a key is given */
    const char *s3_region;      /* default "us-east-1"; a bucket S3 says is in another
                                 * region (x-amz-bucket-region) is opened there */
    const char *s3_endpoint;    /* "http://host:port": path-style bucket/key there; NULL:
                                 * https://BUCKET.s3.REGION.amazonaws.com/KEY, or
                                 * https://s3.REGION.amazonaws.com/BUCKET/KEY for a bucket
                                 * with '.', '_' or upper case (no host name label) */
    const char *access_key;     /* NULL: unsigned requests (a public bucket) */
    const char *secret_key;
    const char *session_token;  /* optional (x-amz-security-token) */
    const char *ca_file;        /* optional CA bundle for https */
    /* Optional: called after each completed request with the bytes it
     * brought (progress displays). */
    void (*on_bytes)(void *user, uint64_t bytes);
    void *on_bytes_user;
    /* Optional local chunk cache (NULL: none). Chunks fetched after the open
     * (chunk_size-aligned ranges of the object) are kept in this directory
     * (created 0700 if missing; refused when it is a symlink, written
     * "LINK/" too, another user's, or writable by group or others), one
     * file per chunk (created 0600, whatever the umask) named by
     * the XXH3 of the index's XXH3 and of the URL's scheme, host, port and
     * path, the object size, the chunk's offset and length: a replaced
     * object (another index), or the same index served at another URL
     * (a copy over other bytes), never meets old files. Each file
     * carries the XXH3 of its bytes, checked on every reuse; a bad,
     * truncated or foreign file is removed and the chunk fetched again.
     * Files are written to a temporary and renamed (atomic for concurrent
     * processes sharing the directory), opened with O_NOFOLLOW, regular
     * files only. When the directory's chunk files pass cache_max_bytes,
     * the least recently used (oldest mtime; a reuse refreshes it) are
     * removed: only files named as the cache names them
     * ("KEY-SIZE-OFF-LEN.chunk", hex) and owned by this user. Cache write failures (a full disk) only skip caching. */
    const char *cache_dir;
    uint64_t cache_max_bytes;   /* default 10 GiB */
    /* An HTTP(S) proxy for every request ("http://host:port", user:password@
     * allowed; no port: curl's 1080), NULL or "": none. libcurl's own
     * reading of http_proxy / https_proxy / all_proxy is turned off: the
     * caller decides (the wpack CLI and the Python package read those
     * variables and pass the one for the URL's scheme). With a proxy the
     * open looks up the proxy's host name, not the URL's (the proxy
     * resolves that: a host only the proxy's network knows works). */
    const char *proxy;
    /* Hosts reached without the proxy: curl's no_proxy list ("a.com,
     * .b.org,127.0.0.1", "*" for all); NULL: none. */
    const char *no_proxy;
    /* Zero (set by wpack_remote_options_init; wpack.h, "Structs never
     * change size"): wpack_open_url refuses any other value
     * (WPACK_E_INVALID_ARGUMENT, the message naming the field). */
    void *reserved_ptr[2];
    uint64_t reserved[4];
} wpack_remote_options;

/* The defaults above, reserved fields zero. */
void wpack_remote_options_init(wpack_remote_options *opt);

/* 1 when s names a remote archive this library opens: it starts with
 * http://, https:// or s3://, the scheme in any case (RFC 3986 3.1:
 * "HTTPS://", "S3://" too); anything else is a local path (a file whose
 * path starts so is reached as "./HTTPS://..."). The wpack CLI and the
 * Python package ask this function. */
int wpack_remote_is_url(const char *s);

/* 1 when s starts with a URL's scheme and "://", any scheme (RFC 3986 3.1:
 * a letter, then letters, digits, '+', '-' or '.'): "ftp://", "file://",
 * "gs://" too. The wpack CLI and the Python package take such a name for
 * a URL, never for a local path: wpack_open_url refuses a scheme it does
 * not read, the URL shown redacted (wpack_remote_shown_url), where a local
 * open's "No such file" error quoted "ftp://user:password@host/m" whole.
 * A local file whose path starts so is reached as "./ftp://...". */
int wpack_remote_has_scheme(const char *s);

/* url as wpack shows it (messages, the archive's name, shard paths, a
 * redirect's Location), so that no credential a URL carries is ever shown:
 * its user info becomes "***" ("http://" "***@host/..."), user name and
 * password alike (either may be the token: "TOKEN:x-oauth-basic@",
 * "oauth2:TOKEN@"); a port that is not a number and all after it (what a
 * password with a raw '/', '?' or '#' leaves: no URL) ":***", the host
 * before it too when an '@' follows (it is then a user name); every query value becomes "***" and its names stay
 * (?X-Amz-Credential=***&X-Amz-Signature=***, ?sv=***&sig=***: which
 * names carry secrets cannot be known), a query item without '=' "***",
 * a fragment "#***". Scheme, host, port and path stay as given; an
 * s3:// key is literal ('?' and '#' are part of it) and is kept whole.
 * A new string to free(), or NULL when out of memory. Requests still use
 * the URL as given. */
char *wpack_remote_shown_url(const char *url);

/*
 * Open the archive at url (http://, https:// or s3://bucket/key, the scheme
 * in any case; shown as given); opt may
 * be NULL (the defaults). Like wpack_open_file(): *out always receives a
 * handle unless memory runs out; on failure wpack_errmsg() says what (the
 * URL, the HTTP status or the curl error; the URL shown with its
 * credentials redacted, see wpack_remote_shown_url). A sharded set's manifest opens
 * its shards at URLs relative to its own path (same directory); an
 * http(s) URL's query string is carried to its shards' URLs (a token
 * valid for the whole directory works), its fragment dropped. A presigned
 * URL's query signs that one object only: presigned shards are not
 * supported (open the shards' own presigned URLs one by one).
 */
int wpack_open_url(wpack_archive **out, const char *url, const wpack_remote_options *opt);

#ifdef __cplusplus
}
#endif

#endif
