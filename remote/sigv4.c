/* sigv4.c - AWS Signature Version 4 for an S3 GET (the Authorization
 * header of a request whose Host, Range, x-amz-content-sha256, x-amz-date
 * and x-amz-security-token headers are signed). Our own signing rather
 * than CURLOPT_AWS_SIGV4: libcurl 7.88 (Debian 12) cannot be given the
 * request time (curl issue #11738), so its signatures could not be checked
 * against AWS's published example. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"

/* The hash of an empty payload: a GET sends none. */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

const char *wpk_sigv4_empty_hash(void)
{
    return EMPTY_SHA256;
}

/* The canonical request (RFC-like text AWS hashes): its length grows with
 * the key and the session token (an STS token runs to several KiB), so it
 * is sized from them, never cut. NULL when out of memory. */
static char *canonical_request(const wpk_sigv4_req *r, const char *names, size_t *len)
{
    const char *fmt = "GET\n%s\n\nhost:%s\n%s%s%sx-amz-content-sha256:%s\nx-amz-date:%s\n%s%s%s\n%s\n%s";
#define CREQ_ARGS                                                                              \
    r->uri, r->host, r->range ? "range:" : "", r->range ? r->range : "", r->range ? "\n" : "", \
        EMPTY_SHA256, r->amz_date, r->token ? "x-amz-security-token:" : "",                    \
        r->token ? r->token : "", r->token ? "\n" : "", names, EMPTY_SHA256
    int n = snprintf(NULL, 0, fmt, CREQ_ARGS);
    char *c = n < 0 ? NULL : malloc((size_t)n + 1);
    if (c && snprintf(c, (size_t)n + 1, fmt, CREQ_ARGS) != n) {
        free(c);
        c = NULL;
    }
#undef CREQ_ARGS
    *len = c ? (size_t)n : 0;
    return c;
}

int wpk_sigv4_get(const wpk_sigv4_req *r, char *auth, size_t authlen)
{
    char sts[512], hex[65], names[160], date[9];
    uint8_t h[32], k[32];
    if (strlen(r->amz_date) != 16)
        return -1;
    memcpy(date, r->amz_date, 8);
    date[8] = 0;
    /* Signed headers in name order, lower case. */
    snprintf(names, sizeof names, "host;%sx-amz-content-sha256;x-amz-date%s",
             r->range ? "range;" : "", r->token ? ";x-amz-security-token" : "");
    size_t clen;
    char *creq = canonical_request(r, names, &clen);
    if (!creq)
        return -1;
    wpk_sha256(creq, clen, h);
    free(creq);
    wpk_hex(h, 32, hex);
    int n = snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", r->amz_date,
                     date, r->region, hex);
    if (n < 0 || (size_t)n >= sizeof sts)
        return -1;
    /* The signing key: HMAC chain from "AWS4" + secret over date, region,
     * service and the request type. */
    size_t slen = strlen(r->secret_key);
    char *key0 = slen < SIZE_MAX - 5 ? malloc(slen + 5) : NULL;
    if (!key0)
        return -1;
    memcpy(key0, "AWS4", 4);
    memcpy(key0 + 4, r->secret_key, slen + 1);
    wpk_hmac_sha256(key0, slen + 4, date, 8, k);
    free(key0);
    wpk_hmac_sha256(k, 32, r->region, strlen(r->region), k);
    wpk_hmac_sha256(k, 32, "s3", 2, k);
    wpk_hmac_sha256(k, 32, "aws4_request", 12, k);
    wpk_hmac_sha256(k, 32, sts, (size_t)n, h);
    wpk_hex(h, 32, hex);
    n = snprintf(auth, authlen,
                 "AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request,SignedHeaders=%s,Signature=%s",
                 r->access_key, date, r->region, names, hex);
    return n < 0 || (size_t)n >= authlen ? -1 : 0;
}
