/* resolve.c - host names looked up on the caller's thread.
 *
 * libcurl's resolver (the threaded one in Debian's libcurl) runs every name
 * lookup on a thread it starts, and a library of this project starts no
 * thread. So the open looks the name up itself (getaddrinfo, blocking, as
 * any read of the library blocks) and hands curl the addresses with
 * CURLOPT_RESOLVE: curl finds them in its cache and never starts its
 * resolver. A numeric host needs no lookup (curl parses it itself). A
 * redirect to another host name is looked up here too: libcurl calls the
 * resolver-start callback (fetch.c) before it would start its thread; the
 * callback refuses any name (the request fails "could not resolve"), the
 * name is then looked up here (wpk_remote_pin_redirect) and the request
 * made again, which finds it in curl's cache. The lookup itself is the
 * system's getaddrinfo: blocking, bounded by the system resolver's own
 * timeouts (resolv.conf's timeout and attempts), not by timeout_s, which
 * only a thread or an asynchronous resolver could give. Through a proxy
 * (opt.proxy, the URL's host not in opt.no_proxy) the proxy's host is the
 * one looked up: the proxy resolves the URL's, which this machine may not
 * know at all. */
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

/* Look host up (getaddrinfo, on this thread) and add "HOST:PORT:ADDR,..."
 * to r->resolve. what: "" or words saying whose host it is, for the
 * message. */
static int pin(wpk_remote *r, const char *host, const char *port, const char *what, char *msg,
               size_t msglen)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        wpk_fmt(msg, msglen, "cannot resolve host '%s'%s: %s", host, what, gai_strerror(g));
        return WPACK_E_IO;
    }
    /* "HOST:PORT:ADDR[,ADDR]...", IPv6 addresses in brackets */
    char entry[2048];
    size_t len = (size_t)snprintf(entry, sizeof entry, "%s:%s:", host, port), n = 0;
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
        wpk_fmt(msg, msglen, "host '%s'%s has no IPv4 or IPv6 address", host, what);
        return WPACK_E_IO;
    }
    struct curl_slist *l = curl_slist_append(r->resolve, entry);
    if (!l) {
        wpk_fmt(msg, msglen, "out of memory");
        return WPACK_E_NOMEM;
    }
    r->resolve = l;
    return WPACK_OK;
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
    if (!numeric(host))
        rc = pin(r, host, port ? port : "1080", "", msg, msglen);
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

/* The host and port of url (curl_free them): 0, or -1. */
static int host_port(const char *url, char **host, char **port)
{
    CURLU *u = curl_url();
    *host = *port = NULL;
    int ok = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_HOST, host, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_PORT, port, CURLU_DEFAULT_PORT) == CURLUE_OK;
    curl_url_cleanup(u);
    if (!ok) {
        curl_free(*host);
        curl_free(*port);
        *host = *port = NULL;
    }
    return ok ? 0 : -1;
}

int wpk_remote_numeric_lookup(const wpk_remote *r, const char *url)
{
    char *host, *port, *phost = NULL;
    if (host_port(url, &host, &port) != 0)
        return 0;
    int yes = numeric(host);
    if (!yes && r->opt.proxy && *r->opt.proxy && !no_proxy_for(r->opt.no_proxy, host)) {
        /* through the proxy: its host is the one looked up (pinned at the
         * open unless numeric) */
        CURLU *u = curl_url();
        if (u && curl_url_set(u, CURLUPART_URL, r->opt.proxy, CURLU_GUESS_SCHEME) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_HOST, &phost, 0) == CURLUE_OK)
            yes = numeric(phost);
        curl_url_cleanup(u);
    }
    curl_free(phost);
    curl_free(host);
    curl_free(port);
    return yes;
}

/* Host names a handle looks up for redirects, at most (each costs a lookup
 * and a retry of the request: a server redirecting to ever new names is
 * stopped here). */
#define MAX_REDIRECT_HOSTS 8

int wpk_remote_pin_redirect(wpk_remote *r, const char *url, char *msg, size_t msglen)
{
    char *host, *port;
    if (host_port(url, &host, &port) != 0) {
        wpk_fmt(msg, msglen, "not a URL libcurl can parse");
        return WPACK_E_IO;
    }
    size_t hl = strlen(host), pl = strlen(port), n = 0;
    int rc = WPACK_OK, known = 0;
    /* already pinned (by another request redirected at the same time): the
     * request is made again and finds it (fetch.c bounds the tries) */
    for (struct curl_slist *l = r->resolve; l; l = l->next, n++)
        known |= strncasecmp(l->data, host, hl) == 0 && l->data[hl] == ':' &&
                 strncmp(l->data + hl + 1, port, pl) == 0 && l->data[hl + 1 + pl] == ':';
    if (known) {
        /* nothing to add */
    } else if (n >= MAX_REDIRECT_HOSTS + 1) {
        wpk_fmt(msg, msglen, "more than %d host names in redirects", MAX_REDIRECT_HOSTS);
        rc = WPACK_E_IO;
    } else {
        rc = pin(r, host, port, " (a redirect's target)", msg, msglen);
    }
    curl_free(host);
    curl_free(port);
    return rc;
}
