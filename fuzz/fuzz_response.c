/*
 * fuzz_response.c - what an HTTP server sends, as libwpack-remote checks it
 * (remote/response.c): status and header lines as libcurl hands them to
 * wpk_on_header, the Content-Range / Content-Encoding / ETag checks of
 * wpk_check_response, the body through wpk_on_body (a 206's into the range
 * asked, another status's kept as the message snippet) and the snippet's
 * text (wpk_snippet_text). The server is the untrusted party here.
 *
 * Input: 16 bytes of request, then header lines (each ending in "\n", as
 * curl passes them, CR kept), an empty line, then the body:
 *   byte 0        bit 0: the open's probe (the object's size unknown yet)
 *   bytes 1..8    the range's first byte (LE, cut to 40 bits)
 *   bytes 9..10   its length - 1 (LE)
 *   bytes 11..15  the object's size past the range's end (LE, 40 bits)
 * The body goes in pieces of at most 1000 bytes until wpk_on_body stops.
 *
 * Checked: a 206 body fills at most the range asked, never past dst; what
 * wpk_check_response accepts is the range asked (the probe: from byte 0,
 * at most the length asked, the size known); every message is a C string
 * of its buffer; the snippet's text is printable ASCII.
 */
#include "bytes.h"
#include "fuzz.h"
#include "request.h"

#define REQUEST_BYTES 16

static void feed_headers(job *j, char *p, size_t n, size_t *used)
{
    size_t at = 0;
    while (at < n) {
        char *nl = memchr(p + at, '\n', n - at);
        size_t len = nl ? (size_t)(nl - (p + at)) + 1 : n - at;
        int blank = len == 1 || (len == 2 && p[at] == '\r');
        size_t took = wpk_on_header(p + at, 1, len, j);
        FUZZ_ASSERT(took == len, "header line of %zu bytes: took %zu", len, took);
        at += len;
        if (blank)
            break;
    }
    *used = at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < REQUEST_BYTES)
        return 0;
    wpk_remote r;
    job j;
    memset(&r, 0, sizeof r);
    memset(&j, 0, sizeof j);
    j.r = &r;
    j.probe = data[0] & 1;
    j.off = j.probe ? 0 : wpk_ld64(data + 1) & ((1ull << 40) - 1);
    j.len = (uint64_t)wpk_ld16(data + 9) + 1;
    r.size = j.probe ? 0 : j.off + j.len + (wpk_ld32(data + 11) | (uint64_t)data[15] << 32);
    j.want = j.len;
    j.dst = malloc((size_t)j.len);
    if (!j.dst)
        return 0;

    /* curl's buffers are writable, and exact: a copy of the input's rest */
    size_t n = size - REQUEST_BYTES;
    char *p = (char *)fuzz_copy(data + REQUEST_BYTES, n);
    size_t used = 0;
    feed_headers(&j, p, n, &used);
    int ok = wpk_check_response(&j);
    FUZZ_ASSERT(memchr(j.fatal, 0, sizeof j.fatal), "message not terminated");
    if (ok) {
        if (j.probe)
            FUZZ_ASSERT(j.cr_known && j.cr_first == 0 && j.want <= j.len,
                        "probe accepted bytes %llu-%llu (asked %llu)",
                        (unsigned long long)j.cr_first, (unsigned long long)j.cr_last,
                        (unsigned long long)j.len);
        else
            FUZZ_ASSERT(j.cr_first == j.off && j.want == j.len,
                        "accepted bytes %llu-%llu for %llu+%llu", (unsigned long long)j.cr_first,
                        (unsigned long long)j.cr_last, (unsigned long long)j.off,
                        (unsigned long long)j.len);
    }
    /* the check again, as wpk_on_body makes it, on a fresh job state */
    j.checked = 0;
    j.want = j.len;
    j.fatal[0] = 0;
    for (size_t at = used; at < n;) {
        size_t piece = n - at < 1000 ? n - at : 1000;
        size_t took = wpk_on_body(p + at, 1, piece, &j);
        FUZZ_ASSERT(j.got <= j.len && j.snippet_len <= SNIPPET, "got %llu of %llu, snippet %zu",
                    (unsigned long long)j.got, (unsigned long long)j.len, j.snippet_len);
        if (took != piece)
            break;
        at += piece;
    }
    FUZZ_ASSERT(memchr(j.fatal, 0, sizeof j.fatal), "message not terminated");
    char text[200];
    wpk_snippet_text(&j, text, sizeof text);
    for (const char *c = text; *c; c++)
        FUZZ_ASSERT(*c >= 0x20 && *c < 0x7f, "snippet text byte %#x", (unsigned char)*c);
    if (*j.etag)
        (void)wpk_strong_etag(j.etag);
    free(p);
    free(j.dst);
    return 0;
}
