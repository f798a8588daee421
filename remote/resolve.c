/* resolve.c - the URL's host name looked up on the caller's thread.
 *
 * libcurl's resolver (the threaded one in Debian's libcurl) runs every name
 * lookup on a thread it starts, and a library of this project starts no
 * thread. So the open looks the name up itself (getaddrinfo, blocking, as
 * any read of the library blocks) and hands curl the addresses with
 * CURLOPT_RESOLVE: curl finds them in its cache and never starts its
 * resolver. A numeric host needs no lookup (curl parses it itself). A
 * redirect to another host name (followed unless turned off) is the one
 * lookup left to curl. Through a proxy (opt.proxy, the URL's host not in
 * opt.no_proxy) the proxy's host is the one looked up: the proxy resolves
 * the URL's, which this machine may not know at all. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "remote.h"

/* A numeric IPv4 or IPv6 host ("[...]" as curl_url gives it). */
static int numeric(const char *host)
{
    unsigned char a[16];
    if (host[0] == '[')
        return 1;
    return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

/* host is one of no_proxy's comma- or blank-separated names, as curl
 * matches them: "*" all, "name" the name and its subdomains (".name" the
 * same), case aside. A miss only costs the lookup curl then makes itself:
 * a wrong answer here never misroutes a request (curl decides). */
static int no_proxy_for(const char *list, const char *host)
{
    size_t hl = strlen(host);
    for (const char *p = list ? list : ""; *p;) {
        p += strspn(p, ", \t");
        size_t n = strcspn(p, ", \t");
        const char *name = p;
        p += n;
        if (n == 1 && *name == '*')
            return 1;
        if (n && *name == '.')
            name++, n--;
        if (n && n <= hl && strncasecmp(host + hl - n, name, n) == 0 &&
            (n == hl || host[hl - n - 1] == '.'))
            return 1;
    }
    return 0;
}

int wpk_remote_pin_host(wpk_remote *r, char *msg, size_t msglen)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    int rc = WPACK_OK;
    if (!u) {
        wpk_fmt(msg, msglen, "out of memory");
        return WPACK_E_NOMEM;
    }
    if (curl_url_set(u, CURLUPART_URL, r->url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        wpk_fmt(msg, msglen, "not a URL libcurl can parse");
        rc = WPACK_E_INVALID_ARGUMENT;
        goto out;
    }
    if (r->opt.proxy && *r->opt.proxy && !no_proxy_for(r->opt.no_proxy, host)) {
        /* the proxy's host instead; no port given: curl's default, 1080 */
        curl_free(host);
        curl_free(port);
        host = port = NULL;
        curl_url_cleanup(u); /* a new handle: set on the old, a scheme-less proxy is a relative URL */
        if (!(u = curl_url())) {
            wpk_fmt(msg, msglen, "out of memory");
            return WPACK_E_NOMEM;
        }
        if (curl_url_set(u, CURLUPART_URL, r->opt.proxy, CURLU_GUESS_SCHEME) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
            wpk_fmt(msg, msglen, "the proxy is not a URL libcurl can parse");
            rc = WPACK_E_INVALID_ARGUMENT;
            goto out;
        }
        if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
            port = NULL;
    }
    const char *at_port = port ? port : "1080";
    if (numeric(host))
        goto out;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, at_port, &hints, &res);
    if (g != 0) {
        wpk_fmt(msg, msglen, "cannot resolve host '%s': %s", host, gai_strerror(g));
        rc = WPACK_E_IO;
        goto out;
    }
    /* "HOST:PORT:ADDR[,ADDR]...", IPv6 addresses in brackets */
    char entry[2048];
    size_t len = (size_t)snprintf(entry, sizeof entry, "%s:%s:", host, at_port), n = 0;
    for (struct addrinfo *a = res; a && len < sizeof entry; a = a->ai_next) {
        char ip[INET6_ADDRSTRLEN];
        const void *src = a->ai_family == AF_INET
                              ? (const void *)&((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr
                              : (const void *)&((struct sockaddr_in6 *)(void *)a->ai_addr)->sin6_addr;
        if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
            !inet_ntop(a->ai_family, src, ip, sizeof ip) || strstr(entry + len - n, ip))
            continue;
        int k = snprintf(entry + len, sizeof entry - len, a->ai_family == AF_INET6 ? "%s[%s]" : "%s%s",
                         n ? "," : "", ip);
        if (k < 0 || (size_t)k >= sizeof entry - len)
            break; /* the addresses that fit are enough */
        len += (size_t)k;
        n += (size_t)k;
    }
    freeaddrinfo(res);
    if (!n) {
        wpk_fmt(msg, msglen, "host '%s' has no IPv4 or IPv6 address", host);
        rc = WPACK_E_IO;
        goto out;
    }
    if (!(r->resolve = curl_slist_append(NULL, entry))) {
        wpk_fmt(msg, msglen, "out of memory");
        rc = WPACK_E_NOMEM;
    }
out:
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

void wpk_remote_unpin_host(wpk_remote *r)
{
    curl_slist_free_all(r->resolve);
    r->resolve = NULL;
}
