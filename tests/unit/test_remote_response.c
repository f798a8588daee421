/*
 * test_remote_response.c - the Content-Range of a 206 as response.c reads
 * it (wpk_on_header, then wpk_check_response): RFC 9110's grammar, the
 * range unit in any case, blanks, "bytes a-b/STAR" (size unknown) and
 * "bytes STAR/n" (a 416's); no sign, no overflow, nothing after. And
 * which ETags may go back as If-Match (wpk_strong_etag), and ETag and
 * Last-Modified compared whole against those pinned at open. The CLI
 * test test_remote_bad.sh checks the same against a real server.
 */
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "testlib.h"

/* A job asking for bytes [off, off + len) of an object of size bytes (0:
 * the open's probe), given the header line "Content-Range: value". */
static void feed(job *j, wpk_remote *r, uint64_t off, uint64_t len, uint64_t size,
                 const char *value)
{
    memset(r, 0, sizeof *r);
    memset(j, 0, sizeof *j);
    r->size = size;
    j->r = r;
    j->off = off;
    j->len = len;
    j->probe = size == 0;
    char status[] = "HTTP/1.1 206 Partial Content\r\n";
    wpk_on_header(status, 1, strlen(status), j);
    char line[700];
    snprintf(line, sizeof line, "Content-Range: %s\r\n", value);
    wpk_on_header(line, 1, strlen(line), j);
}

/* value, for bytes 10-19 of a 100-byte object: accepted or not */
static void read_is(const char *value, int good)
{
    job j;
    wpk_remote r;
    feed(&j, &r, 10, 10, 100, value);
    int ok = wpk_check_response(&j);
    CHECK(ok == good, "'%s': %s (%s)", value, ok ? "accepted" : "refused", j.fatal);
    if (ok)
        CHECK(j.want == 10, "'%s': want %llu", value, (unsigned long long)j.want);
}

static void test_grammar(void)
{
    read_is("bytes 10-19/100", 1);
    /* a range unit is case-insensitive (RFC 9110 14.1): was refused */
    read_is("Bytes 10-19/100", 1);
    read_is("BYTES 10-19/100", 1);
    read_is("bYtEs 10-19/100", 1);
    /* blanks around the value and after the unit */
    read_is("  bytes 10-19/100  ", 1);
    read_is("bytes\t10-19/100\t", 1);
    read_is("bytes  10-19/100", 1);
    /* the size unknown ("*"): the range asked is enough after the open */
    read_is("bytes 10-19/*", 1);
    /* not the grammar */
    read_is("bytes10-19/100", 0);
    read_is("bytesx 10-19/100", 0);
    read_is("items 10-19/100", 0);
    read_is("bytes +10-19/100", 0);
    read_is("bytes 10-+19/100", 0);
    read_is("bytes 10- 19/100", 0);
    read_is("bytes 10 -19/100", 0);
    read_is("bytes 10-19/ 100", 0);
    read_is("bytes 10-19 /100", 0);
    read_is("bytes 10-19/100x", 0);
    read_is("bytes 10-19/100 x", 0);
    read_is("bytes 10-19", 0);
    read_is("bytes 10-19/", 0);
    read_is("bytes -10-19/100", 0);
    read_is("bytes 0x0a-19/100", 0);
    read_is("bytes */100", 0);
    read_is("bytes 10-19/*/100", 0);
    read_is("bytes 10-19/**", 0);
    read_is("", 0);
    /* numbers that overflow 64 bits wrapped or saturated in sscanf */
    read_is("bytes 10-18446744073709551635/100", 0);
    read_is("bytes 18446744073709551626-19/100", 0);
    read_is("bytes 10-19/18446744073709551716", 0);
    /* longer than the value kept (299 bytes): refused, not read cut
     * ("/000...0" read as a total of 0, an empty object at the open) */
    char lz[400];
    snprintf(lz, sizeof lz, "bytes 10-19/%0350d", 100);
    read_is(lz, 0);
    snprintf(lz, sizeof lz, "bytes 10-19/%0250d", 100); /* leading zeros are the grammar's */
    read_is(lz, 1);
    /* another range or size */
    read_is("bytes 10-19/101", 0);
    read_is("bytes 9-18/100", 0);
    read_is("bytes 19-10/100", 0);
    read_is("bytes 10-100/100", 0);
}

static void test_probe(void)
{
    job j;
    wpk_remote r;
    feed(&j, &r, 0, 65536, 0, "Bytes 0-99/100");
    CHECK(wpk_check_response(&j) && j.cr_total == 100 && j.want == 100, "probe: %s", j.fatal);
    /* the open learns the size from the total: "*" will not do there */
    feed(&j, &r, 0, 65536, 0, "bytes 0-99/*");
    CHECK(!wpk_check_response(&j) && strstr(j.fatal, "without the object's size"), "got '%s'",
          j.fatal);
    /* an empty object, as RFC 9110 and some S3 servers say it */
    feed(&j, &r, 0, 65536, 0, "bytes */0");
    CHECK(j.range_empty && !j.have_range, "*/0");
    feed(&j, &r, 0, 65536, 0, "BYTES 0-0/0");
    CHECK(j.range_empty, "0-0/0");
    /* a 416's "bytes STAR/n" tells the size, not a range */
    char lz[400];
    snprintf(lz, sizeof lz, "bytes 0-99/%0350d", 100);
    feed(&j, &r, 0, 65536, 0, lz);
    CHECK(!j.range_empty && !j.have_range, "cut to a total of 0");
    feed(&j, &r, 0, 65536, 0, "bytes */12345");
    CHECK(j.cr_unsat && j.cr_total == 12345 && !j.have_range && !j.range_empty, "*/12345");
    /* a new status line (a redirect) forgets the last response's */
    char status[] = "HTTP/1.1 206 Partial Content\r\n";
    wpk_on_header(status, 1, strlen(status), &j);
    CHECK(!j.cr_unsat && !j.have_range, "reset");
}

/* what may go back as If-Match */
static void test_strong_etag(void)
{
    CHECK(wpk_strong_etag("\"v1\""), "plain");
    CHECK(wpk_strong_etag("\"\""), "empty");
    CHECK(wpk_strong_etag("\"a!#~\x80\xff\""), "etagc and obs-text");
    CHECK(!wpk_strong_etag("W/\"v1\""), "weak");
    CHECK(!wpk_strong_etag("\"v1"), "cut");
    CHECK(!wpk_strong_etag("v1"), "unquoted");
    CHECK(!wpk_strong_etag("\""), "one quote");
    CHECK(!wpk_strong_etag("\"v1\rX-Injected: 1\""), "CR");
    CHECK(!wpk_strong_etag("\"v 1\""), "blank");
    CHECK(!wpk_strong_etag("\"v\"1\""), "inner quote");
    CHECK(!wpk_strong_etag("\"v\x7f\""), "DEL");
    CHECK(!wpk_strong_etag("\"v\x1b\""), "ESC");
}

/* A later response with these ETag and Last-Modified header lines (NULL:
 * none), for bytes 10-19 of the 100-byte object pinned with pin_etag and
 * pin_lastmod: accepted or not. */
static int same_object(const char *pin_etag, const char *pin_lastmod, const char *etag,
                       const char *lastmod)
{
    static char line[2][1200];
    job j;
    wpk_remote r;
    feed(&j, &r, 0, 65536, 0, "bytes 0-99/100"); /* the open's probe */
    for (int k = 0; k < 2; k++)
        if ((k ? pin_lastmod : pin_etag)) {
            snprintf(line[k], sizeof line[k], "%s: %s\r\n", k ? "Last-Modified" : "ETag",
                     k ? pin_lastmod : pin_etag);
            wpk_on_header(line[k], 1, strlen(line[k]), &j);
        }
    CHECK(wpk_check_response(&j), "probe: %s", j.fatal);
    job later;
    wpk_remote kept = r;
    memcpy(kept.etag, j.etag, sizeof kept.etag); /* as fetch.c's on_done */
    memcpy(kept.lastmod, j.lastmod, sizeof kept.lastmod);
    kept.etag_sum = j.etag_sum;
    kept.lastmod_sum = j.lastmod_sum;
    feed(&later, &r, 10, 10, 100, "bytes 10-19/100");
    later.r = &kept;
    kept.size = 100;
    for (int k = 0; k < 2; k++)
        if ((k ? lastmod : etag)) {
            snprintf(line[k], sizeof line[k], "%s: %s\r\n", k ? "Last-Modified" : "ETag",
                     k ? lastmod : etag);
            wpk_on_header(line[k], 1, strlen(line[k]), &later);
        }
    return wpk_check_response(&later);
}

static void test_pinned_whole(void)
{
    const char *lm = "Thu, 01 Jan 2026 00:00:00 GMT";
    CHECK(same_object("\"v1\"", lm, "\"v1\"", lm), "the same");
    CHECK(same_object("\"v1\"", lm, "  \"v1\"\t", lm), "blanks around");
    CHECK(!same_object("\"v1\"", lm, "\"v2\"", lm), "another ETag");
    CHECK(!same_object("\"v1\"", lm, NULL, lm), "ETag gone");
    CHECK(!same_object(NULL, lm, "\"v1\"", lm), "ETag new");
    CHECK(!same_object("\"v1\"", lm, "\"v1\"", "Fri, 02 Jan 2026 00:00:00 GMT"), "Last-Modified");
    /* alike in all the bytes kept (255 of an ETag, 127 of a Last-Modified):
     * compared as cut, the object replaced mid-read passed as the same */
    char a[400], b[400];
    memset(a, 'e', sizeof a);
    a[0] = '"', a[398] = '"', a[399] = 0;
    memcpy(b, a, sizeof a);
    b[397] = 'f';
    CHECK(same_object(a, lm, a, lm), "a long ETag, the same");
    CHECK(!same_object(a, lm, b, lm), "a long ETag, changed at its end");
    char c[300], d[300];
    snprintf(c, sizeof c, "%s%0250d", lm, 1);
    snprintf(d, sizeof d, "%s%0250d", lm, 2);
    CHECK(same_object("\"v1\"", c, "\"v1\"", c), "a long Last-Modified, the same");
    CHECK(!same_object("\"v1\"", c, "\"v1\"", d), "a long Last-Modified, changed at its end");
}

/* Content-Encoding lines: one list (RFC 9110 5.3), refused unless all
 * identity */
static int coding_ok(const char *first, const char *second)
{
    job j;
    wpk_remote r;
    char line[200];
    feed(&j, &r, 10, 10, 100, "bytes 10-19/100");
    const char *v[2] = {first, second};
    for (int k = 0; k < 2; k++)
        if (v[k]) {
            snprintf(line, sizeof line, "Content-Encoding: %s\r\n", v[k]);
            wpk_on_header(line, 1, strlen(line), &j);
        }
    int ok = wpk_check_response(&j);
    CHECK(ok || strstr(j.fatal, "Content-Encoding"), "'%s' '%s': %s", first, second, j.fatal);
    return ok;
}

static void test_coding(void)
{
    CHECK(coding_ok(NULL, NULL), "none");
    CHECK(coding_ok("identity", NULL), "identity");
    CHECK(coding_ok("IDENTITY", "identity"), "identity twice");
    CHECK(!coding_ok("gzip", NULL), "gzip");
    CHECK(!coding_ok("identity, gzip", NULL), "a list");
    /* the last line alone was kept: gzip passed as identity */
    CHECK(!coding_ok("gzip", "identity"), "gzip, then identity");
    CHECK(!coding_ok("identity", "br"), "identity, then br");
}

int main(void)
{
    RUN(test_coding);
    RUN(test_pinned_whole);
    RUN(test_strong_etag);
    RUN(test_grammar);
    RUN(test_probe);
    return tl_finish();
}
