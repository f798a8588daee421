/* scrub.c - the secrets of a remote object's URL and credentials taken
 * out of text that repeats them (a server's error page, curl's own words)
 * before it reaches a message: wpk_remote_scrub (remote.h). wpack shows a
 * URL itself through wpack_remote_shown_url (url.c); this is for what
 * others say. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"

/* A letter or a digit (ASCII): what a secret shorter than 4 bytes must
 * not touch on either side to be taken for it. */
static int word_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Bytes a and b are the same byte of a URL: equal, or a space and a '+'
 * (a query's form encoding). */
static int same_byte(unsigned char a, unsigned char b)
{
    return a == b || ((a == ' ' || a == '+') && (b == ' ' || b == '+'));
}

/* The length of text at t (up to e) that spells f (n bytes), each of its
 * bytes raw or as a "%XX" escape in either case ("%2F", "%2f"), or 0: a
 * server or curl may repeat a secret re-encoded, "a%2Fb" as "a/b" or
 * "a%2fb", and only its start matched as given (a leak of its first
 * bytes). */
static size_t spelled(const char *t, const char *e, const char *f, size_t n)
{
    const char *p = t;
    for (size_t i = 0; i < n; i++) {
        if (p >= e)
            return 0;
        int hi = e - p >= 3 && *p == '%' ? hex_digit(p[1]) : -1;
        int lo = hi >= 0 ? hex_digit(p[2]) : -1;
        if (lo >= 0 && same_byte((unsigned char)(hi << 4 | lo), (unsigned char)f[i]))
            p += 3;
        else if (same_byte((unsigned char)*p, (unsigned char)f[i]))
            p++;
        else
            return 0;
    }
    return (size_t)(p - t);
}

/* The occurrences of f (n bytes) in text that are the secret become "***",
 * scanning forward once, each byte raw or escaped (spelled): every one
 * when n >= 4 (a signature, a token, a password of any use); a shorter one
 * only standing alone (no letter or digit on either side) and, with ctx,
 * right after ctx ("NAME=" of its query item: a value "1" is not every "1"
 * of the text). Cut to size bytes ("***" is longer than a 1- or 2-byte
 * secret); out of memory, the whole text becomes "***". */
static void scrub_form(char *text, size_t size, const char *f, size_t n, const char *ctx,
                       size_t ctxlen)
{
    size_t len = strlen(text);
    if (!n)
        return;
    char *out = malloc(3 * len + 1);
    if (!out) {
        wpk_fmt(text, size, "***");
        return;
    }
    const char *p = text, *end = text + len;
    size_t o = 0;
    while (p < end) {
        /* m: where the secret would start; k: its length in the text */
        size_t c = n < 4 && ctx ? spelled(p, end, ctx, ctxlen) : 0;
        const char *m = p + c;
        size_t k = (n >= 4 || !ctx || c) ? spelled(m, end, f, n) : 0;
        if (k && n < 4 && ((m > text && word_byte(m[-1])) || word_byte(m[k])))
            k = 0;
        if (!k) {
            out[o++] = *p++;
            continue;
        }
        memcpy(out + o, p, c);
        o += c;
        memcpy(out + o, "***", 3);
        o += 3;
        p = m + k;
    }
    if (o >= size)
        o = size - 1;
    memcpy(text, out, o);
    text[o] = 0;
    free(out);
}

/* s (n bytes) percent-decoded into out ('+' as a space, as a query's
 * form encoding has it): its length. */
static size_t decode(const char *s, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned hi, lo;
        if (s[i] == '%' && i + 2 < n && sscanf(s + i + 1, "%1x%1x", &hi, &lo) == 2) {
            out[k++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[k++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    return k;
}

/* The secret s (n bytes) in text becomes "***", as given and
 * percent-decoded (scrub_form). ctx (ctxlen bytes, or NULL): what precedes
 * it in the URL, required before a short one ("NAME=", or the '?' or '&'
 * of a bare item); a password's or a user token's short form is hidden
 * wherever it stands alone. */
static void scrub_one(char *text, size_t size, const char *s, size_t n, const char *ctx,
                      size_t ctxlen)
{
    char *dec = malloc(n + ctxlen + 2), *dctx = dec ? dec + n + 1 : NULL;
    if (!dec) {
        wpk_fmt(text, size, "***");
        return;
    }
    size_t k = decode(s, n, dec), kc = ctx ? decode(ctx, ctxlen, dctx) : 0;
    scrub_form(text, size, s, n, ctx, ctxlen);
    scrub_form(text, size, dec, k, ctx ? dctx : NULL, kc);
    free(dec);
}

/* s (n bytes) in base64 (RFC 4648, padded) into out (4 * ((n + 2) / 3) + 1
 * bytes): its length. */
static size_t base64(const unsigned char *s, size_t n, char *out)
{
    static const char d[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        out[k++] = d[v >> 18 & 63];
        out[k++] = d[v >> 12 & 63];
        out[k++] = i + 1 < n ? d[v >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? d[v & 63] : '=';
    }
    out[k] = 0;
    return k;
}

/* The user info (n bytes, "user[:password]") as curl sends it: HTTP Basic
 * credentials, base64 of the decoded "user:password" (a server echoing the
 * Authorization header showed them, encoded only). */
static void scrub_basic(char *text, size_t size, const char *ui, size_t n)
{
    const char *colon = memchr(ui, ':', n);
    size_t un = colon ? (size_t)(colon - ui) : n;
    char *plain = malloc(n + 2), *b64 = malloc(4 * ((n + 4) / 3) + 1);
    if (plain && b64) {
        size_t k = decode(ui, un, plain);
        plain[k++] = ':';
        if (colon)
            k += decode(colon + 1, n - un - 1, plain + k);
        size_t m = base64((const unsigned char *)plain, k, b64);
        while (m > 4 && b64[m - 1] == '=') /* also where the padding was cut */
            m--;
        scrub_form(text, size, b64, m, NULL, 0);
    } else {
        wpk_fmt(text, size, "***");
    }
    free(plain);
    free(b64);
}

/* What follows "Signature=" (an S3 Authorization header echoed: the
 * signature lets its request be replayed for 15 minutes): hex digits. */
static void scrub_signature(char *text)
{
    for (char *p = strstr(text, "Signature="); p; p = strstr(p, "Signature=")) {
        p += 10;
        size_t n = strspn(p, "0123456789abcdefABCDEF");
        if (n >= 3) {
            memcpy(p, "***", 3);
            memmove(p + 3, p + n, strlen(p + n) + 1);
        }
    }
}

/* The user info of url ("scheme://user:password@host...", or a proxy's
 * "user:password@host:port"; NULL or none: nothing), in every form a
 * message may carry it; returns where the authority ends (NULL: no url). */
static const char *scrub_userinfo(char *text, size_t size, const char *url)
{
    if (!url)
        return NULL;
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    const char *aend = auth + strcspn(auth, "/?#"), *at = NULL;
    for (const char *p = auth; p < aend; p++)
        if (*p == '@')
            at = p;
    if (at) { /* the user name too: "TOKEN:x-oauth-basic@", "oauth2:TOKEN@" */
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        scrub_basic(text, size, auth, (size_t)(at - auth));
        if (colon)
            scrub_one(text, size, colon + 1, (size_t)(at - colon - 1), NULL, 0);
        scrub_one(text, size, auth, (size_t)((colon ? colon : at) - auth), NULL, 0);
    }
    return aend;
}

void wpk_remote_scrub(const wpk_remote *r, char *text, size_t size)
{
    if (!size)
        return;
    if (r->s3) { /* the credentials sent in headers (the secret key is never sent) */
        const char *sec[] = {r->opt.session_token, r->opt.secret_key};
        for (int i = 0; i < 2; i++)
            if (sec[i])
                scrub_one(text, size, sec[i], strlen(sec[i]), NULL, 0);
        scrub_signature(text);
    }
    scrub_userinfo(text, size, r->opt.proxy); /* a proxy's own credentials */
    if (r->s3) /* the path is the key, encoded: no query of the caller's */
        scrub_userinfo(text, size, r->url);
    else
        wpk_remote_scrub_url(text, size, r->url);
}

void wpk_remote_scrub_url(char *text, size_t size, const char *url)
{
    const char *aend = scrub_userinfo(text, size, url);
    if (!aend || !size)
        return;
    const char *q = strchr(aend, '?');
    for (const char *p = q ? q + 1 : ""; *p && *p != '#';) {
        size_t item = strcspn(p, "&#");
        const char *eq = memchr(p, '=', item);
        const char *v = eq ? eq + 1 : p, *ctx = eq ? p : p - 1;
        scrub_one(text, size, v, (size_t)(p + item - v), ctx, (size_t)(v - ctx));
        p += item + (p[item] == '&');
    }
}
