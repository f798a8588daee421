/*
 * test_source_sigv4.c - libwpack-remote's own crypto for S3 (issue 17):
 * SHA-256 (FIPS 180-2 examples), HMAC-SHA256 (RFC 4231 cases 1, 2 and 6)
 * and AWS Signature Version 4 against AWS's published GetObject example
 * (S3 API reference, "Example: GET Object": bytes 0-9 of test.txt in
 * examplebucket, 2013-05-24, us-east-1). The live signing is also checked
 * by an independent Python implementation in tests/cli/test_remote_bad.sh.
 */
#include <string.h>

#include "remote.h"
#include "testlib.h"

static void hex_of_sha(const char *in, size_t n, char out[65])
{
    uint8_t h[32];
    wpk_sha256(in, n, h);
    wpk_hex(h, 32, out);
}

static void test_sha256(void)
{
    char h[65];
    hex_of_sha("abc", 3, h);
    CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "%s", h);
    hex_of_sha("", 0, h);
    CHECK(strcmp(h, wpk_sigv4_empty_hash()) == 0, "%s", h);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits */
    hex_of_sha(two, strlen(two), h);
    CHECK(strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "%s", h);
    static char mil[1000000];
    memset(mil, 'a', sizeof mil);
    hex_of_sha(mil, sizeof mil, h);
    CHECK(strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0, "%s", h);
}

static void test_hmac(void)
{
    uint8_t k[131], out[32];
    char h[65];
    memset(k, 0x0b, 20);
    wpk_hmac_sha256(k, 20, "Hi There", 8, out);
    wpk_hex(out, 32, h);
    CHECK(strcmp(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7") == 0, "case 1 %s", h);
    wpk_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, out);
    wpk_hex(out, 32, h);
    CHECK(strcmp(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") == 0, "case 2 %s", h);
    memset(k, 0xaa, sizeof k); /* a key longer than the block: hashed first */
    const char *m = "Test Using Larger Than Block-Size Key - Hash Key First";
    wpk_hmac_sha256(k, sizeof k, m, strlen(m), out);
    wpk_hex(out, 32, h);
    CHECK(strcmp(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54") == 0, "case 6 %s", h);
}

static void test_aws_example(void)
{
    wpk_sigv4_req q = {"examplebucket.s3.amazonaws.com", "/test.txt", "bytes=0-9", "20130524T000000Z",
                       "us-east-1", "AKIAIOSFODNN7EXAMPLE",
                       "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL};
    char auth[600];
    CHECK(wpk_sigv4_get(&q, auth, sizeof auth) == 0, "signed");
    CHECK(strcmp(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                       "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                       "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41") == 0,
          "%s", auth);
    /* a session token is signed too: the signature changes */
    q.token = "tok";
    CHECK(wpk_sigv4_get(&q, auth, sizeof auth) == 0 && strstr(auth, ";x-amz-security-token,") &&
              !strstr(auth, "f0e8bdb87c964420"),
          "%s", auth);
    /* too long to sign: an error, never a cut signature */
    q.token = NULL;
    CHECK(wpk_sigv4_get(&q, auth, 40) != 0, "short buffer");
    q.amz_date = "2013";
    CHECK(wpk_sigv4_get(&q, auth, sizeof auth) != 0, "bad date");
}

int main(void)
{
    RUN(test_sha256);
    RUN(test_hmac);
    RUN(test_aws_example);
    return tl_finish();
}
