/*
 * test_remote_shown_url.c - a URL as wpack shows it (wpack_remote_shown_url):
 * no credential it carries (a password, a token as user name, any query
 * value, a fragment) is shown; scheme, host, port, path and the query's
 * names are; an s3:// key is literal. And wpk_remote_scrub: what a server
 * or curl repeats of the URL's secrets becomes "***". The CLI and Python
 * tests (test_remote_urls.sh, test_py_remote.py) check every output.
 */
#include <stdlib.h>
#include <string.h>

#include "remote.h"
#include "testlib.h"

static void shown_is(const char *url, const char *want)
{
    char *got = wpack_remote_shown_url(url);
    CHECK(got && strcmp(got, want) == 0, "%s: got %s, want %s", url, got ? got : "NULL", want);
    free(got);
}

static void test_shown(void)
{
    /* nothing to hide */
    shown_is("https://host/b/k.wpack", "https://host/b/k.wpack");
    shown_is("http://127.0.0.1:8080/a.wpack", "http://127.0.0.1:8080/a.wpack");
    shown_is("http://[::1]:8080/a", "http://[::1]:8080/a");
    shown_is("http://host:/a", "http://host:/a");
    shown_is("not a url", "not a url");
    shown_is("", "");
    /* user info */
    shown_is("https://user:pa55@host/m", "https://***@host/m");
    shown_is("https://user:p@ss@host/m", "https://***@host/m");
    shown_is("https://user:@host/m", "https://***@host/m");
    /* the user name may be the token: hidden too */
    shown_is("https://ghp_TOKEN:x-oauth-basic@host/m", "https://***@host/m");
    shown_is("https://oauth2:glpat-TOKEN@host/m", "https://***@host/m");
    shown_is("https://ghp_token@host/m", "https://***@host/m");
    shown_is("https://u:p@[::1]:9/m", "https://***@[::1]:9/m");
    /* a password with a raw '/', '?' or '#': no URL, nothing after shown */
    shown_is("http://user:pa/ss@host/m", "http://***");
    shown_is("http://user:pa?ss@host/m", "http://***");
    shown_is("http://user:pa#ss@host/m", "http://***");
    /* ... one that starts with digits (a port to curl), or is empty */
    shown_is("http://user:1234/5678@host/m", "http://***");
    shown_is("http://user:12?34@host/m", "http://***");
    shown_is("http://user:12#34@host/m", "http://***");
    shown_is("http://user:/pass@host/m", "http://***");
    shown_is("http://host:8080/m?to=a@b", "http://***"); /* hidden too: cannot tell */
    shown_is("http://host:x/m", "http://host:***");
    shown_is("http://host/users/a@b/m", "http://host/users/a@b/m");
    /* the query: every value, names kept; bare items; empty values */
    shown_is("https://h/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F2026&"
             "X-Amz-Signature=abcdef",
             "https://h/b/k?X-Amz-Algorithm=***&X-Amz-Credential=***&X-Amz-Signature=***");
    shown_is("https://acct.blob.core.windows.net/c/m?sv=2022&sig=a%2Bb%3D&se=x",
             "https://acct.blob.core.windows.net/c/m?sv=***&sig=***&se=***");
    shown_is("http://h/m?token=a/b=c", "http://h/m?token=***");
    shown_is("http://h/m?secret&a=&&b=1", "http://h/m?***&a=&&b=***");
    shown_is("http://h/m?", "http://h/m?");
    shown_is("http://h?t=1", "http://h?t=***");
    /* the fragment */
    shown_is("http://h/m#frag", "http://h/m#***");
    shown_is("http://h/m#", "http://h/m#");
    shown_is("http://h/m?t=1#a?b=c&d", "http://h/m?t=***#***");
    shown_is("http://u:p@h:1/m?t=1&u=2#f", "http://***@h:1/m?t=***&u=***#***");
    /* s3: a literal key ('?' and '#' part of it) */
    shown_is("s3://bucket/dir/k?x=1#y", "s3://bucket/dir/k?x=1#y");
    /* the scheme in any case: hidden alike, shown as given */
    shown_is("HTTPS://user:secret@h/m?t=1#f", "HTTPS://***@h/m?t=***#***");
    shown_is("Http://tok@h/m", "Http://***@h/m");
    shown_is("S3://bucket/dir/k?x=1#y", "S3://bucket/dir/k?x=1#y");
    /* growth: every part redacted at once, one byte each */
    shown_is("http://@h:x", "http://***@h:***");
    shown_is("http://h/?a&b&c&d&e#f", "http://h/?***&***&***&***&***#***");
}

/* fn(v[i]) is want for each of the n strings */
static void each_is(int (*fn)(const char *), const char *const *v, size_t n, int want,
                    const char *fname)
{
    for (size_t i = 0; i < n; i++)
        CHECK(fn(v[i]) == want, "%s('%s') is not %d", fname, v[i], want);
    CHECK(fn(NULL) == 0, "%s(NULL)", fname);
}
#define EACH_IS(fn, v, want) each_is(fn, v, sizeof v / sizeof *v, want, #fn)

/* What is a URL: http, https, s3 in any case (RFC 3986 3.1), nothing else;
 * any scheme (RFC 3986 3.1) is a URL's shape, never a local path. */
static void test_is_url(void)
{
    const char *yes[] = {"http://h/m", "https://h/m", "s3://b/k", "HTTP://h/m", "HTTPS://u:p@h/m",
                         "Https://h", "S3://b/k", "hTtPs://h/m"};
    const char *no[] = {"", "http", "http:/h/m", "./HTTPS://h/m", "ftp://h/m", "file:///m",
                        "s4://b/k", "httpss://h", " http://h/m", "h/http://m"};
    EACH_IS(wpack_remote_is_url, yes, 1);
    EACH_IS(wpack_remote_is_url, no, 0);
    const char *shaped[] = {"ftp://h/m", "file:///m", "gs://b/k", "s4://b/k", "HTTP://h",
                            "a+b-c.d://x", "x1://"};
    const char *not_shaped[] = {"", "ftp:/h/m", "./ftp://h/m", "1ftp://h", "+a://h", "f_p://h",
                                " ftp://h", "ftp", "ftp:", "h/ftp://m"};
    EACH_IS(wpack_remote_has_scheme, shaped, 1);
    EACH_IS(wpack_remote_has_scheme, not_shaped, 0);
}

static void scrubbed_is(const char *url, const char *text, const char *want)
{
    wpk_remote r;
    memset(&r, 0, sizeof r);
    r.url = (char *)url;
    char buf[600];
    strcpy(buf, text);
    wpk_remote_scrub(&r, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0, "%s in %s: got %s, want %s", url, text, buf, want);
}

static void test_scrub(void)
{
    const char *u = "https://user:pa55word@h/m?X-Amz-Signature=deadbeef&sig=a%2Fb%2Bc&x=1";
    scrubbed_is(u, "denied: /m?X-Amz-Signature=deadbeef&sig=a%2Fb%2Bc",
                "denied: /m?X-Amz-Signature=***&sig=***");
    scrubbed_is(u, "sig a/b+c for user pa55word", "sig *** for *** ***");
    scrubbed_is(u, "deadbeefdeadbeef", "******");
    /* a short query value: hidden after its name only (the URL echoed),
     * not every "1" of the text */
    scrubbed_is(u, "1 stays, x=1 is hidden, x=10 stays", "1 stays, x=*** is hidden, x=10 stays");
    scrubbed_is("http://h/m?t=ab&x=1&dl&e=",
                "denied /m?t=ab&x=1&dl&e=: t ab 1 dl HTTP/1.1 127.0.0.1",
                "denied /m?t=***&x=***&***&e=: t ab 1 dl HTTP/1.1 127.0.0.1");
    scrubbed_is("http://h/m?t=a%2Fb", "t=a/b and t=a%2Fb", "t=*** and t=***");
    /* a short password or user token: wherever it stands alone (it was
     * shown: 3 bytes passed the 4-byte floor) */
    scrubbed_is("https://u:abc@h/m", "user u password abc rejected; abcdef, xabc, abc1 stay",
                "user *** password *** rejected; abcdef, xabc, abc1 stay");
    scrubbed_is("https://u:abc@h/m", "abc", "***");
    scrubbed_is("https://u:7@h/m", "for 7: 17 and 7a stay, u:7@h", "for ***: 17 and 7a stay, ***:***@h");
    scrubbed_is("https://tk@h/m", "token tk refused", "token *** refused");
    scrubbed_is("https://u:a%40@h/m", "bad a@ and a%40", "bad *** and ***");
    scrubbed_is("https://h/m", "nothing", "nothing");
    /* a user name is hidden as a password is: it may be the token */
    scrubbed_is("https://ghp_T0KEN:x-oauth-basic@h/m", "bad ghp_T0KEN (x-oauth-basic)", "bad *** (***)");
    /* repeated re-encoded: lower-case hex, escapes where the URL had raw
     * bytes and raw bytes where it had escapes, '+' for a space (only the
     * start of the secret was matched and shown, "a%2fb" as "a%2f***") */
    const char *q = "https://h/m?sig=SEKRIT%2Bx%3D&token=SEKR/a/b&t=a%2Fb";
    scrubbed_is(q, "sig=SEKRIT%2bx%3d", "sig=***");
    scrubbed_is(q, "sig=SEKRIT%2Bx=", "sig=***");
    scrubbed_is(q, "token=SEKR%2fa%2Fb", "token=***");
    scrubbed_is(q, "t=a%2fb t=a/b t=a%2Fb t=a%252Fb", "t=*** t=*** t=*** t=***");
    scrubbed_is("https://h/m?k=a+b%20c", "k=a b c, k=a%20b+c, k=a+b+c", "k=***, k=***, k=***");
    scrubbed_is("https://u:p%40ss%2Fw0rd@h/m", "p%40SS p%40ss%2fw0rd p@ss/w0rd", "p%40SS *** ***");
    /* HTTP Basic credentials echoed (base64 of the decoded "user:password",
     * "user:" for a user alone), with or without their padding */
    scrubbed_is("https://user:pa55word@h/m", "Authorization: Basic dXNlcjpwYTU1d29yZA==",
                "Authorization: Basic ***==");
    scrubbed_is("https://a%40b:c@h/m", "Basic YUBiOmM= YUBiOmM", "Basic ***= ***");
    scrubbed_is("https://tok3n@h/m", "Basic dG9rM246", "Basic ***");
}

/* S3: the session token and secret key (sent or signed with in headers)
 * and an echoed Authorization's signature; an endpoint's user info */
static void test_scrub_s3(void)
{
    wpk_remote r;
    memset(&r, 0, sizeof r);
    r.s3 = 1;
    r.url = (char *)"http://me:pw0rd@127.0.0.1:9000/b/a%3Fb.wpack";
    r.opt.session_token = "IQoJSEKRIT/tok+en==";
    r.opt.secret_key = "wJalSEKRIT/K7MDENG";
    char buf[600] = "x-amz-security-token: IQoJSEKRIT/tok+en== | secret wJalSEKRIT/K7MDENG | "
                    "Authorization: AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/"
                    "aws4_request, SignedHeaders=host;range, Signature=5e6bdeadbeef0123 | "
                    "Basic bWU6cHcwcmQ= | pw0rd | a%3Fb.wpack";
    wpk_remote_scrub(&r, buf, sizeof buf);
    const char *want = "x-amz-security-token: *** | secret *** | Authorization: AWS4-HMAC-SHA256 "
                       "Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;"
                       "range, Signature=*** | Basic ***= | *** | a%3Fb.wpack";
    CHECK(strcmp(buf, want) == 0, "got %s", buf);
}

/* "***" is longer than a 1-byte secret: the text grows, cut to its buffer */
static void test_scrub_grows(void)
{
    wpk_remote r;
    memset(&r, 0, sizeof r);
    r.url = (char *)"https://u:x@h/m";
    char buf[16] = "x x x x x x x x";
    wpk_remote_scrub(&r, buf, sizeof buf);
    CHECK(strcmp(buf, "*** *** *** ***") == 0, "got %s", buf);
    char one[4] = "x x";
    wpk_remote_scrub(&r, one, sizeof one);
    CHECK(strcmp(one, "***") == 0, "got %s", one);
}

int main(void)
{
    RUN(test_shown);
    RUN(test_is_url);
    RUN(test_scrub);
    RUN(test_scrub_grows);
    RUN(test_scrub_s3);
    return tl_finish();
}
