#!/bin/bash
# test_remote_tls.sh - https from nginx with a certificate of a private CA:
# refused without it, read with CURL_CA_BUNDLE or SSL_CERT_FILE naming it
# (the CLI passes it to the library as ca_file); a redirect from https to
# http is refused, saying so (its Location's query redacted).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

serve_small_archive
if ! start_nginx_tls "$T/www" "$NGINX_PORT"; then
    fail tls_started "nginx with TLS or openssl missing: $(cat "$T/tls/error.log" 2>/dev/null | head -c 300)"
    finish
    exit 1
fi
pass tls_started
S="https://127.0.0.1:$TLS_PORT"
export WPACK_REMOTE_RETRIES=0
unset CURL_CA_BUNDLE SSL_CERT_FILE

expect_fail tls_unknown_ca "[Cc]ertificate|SSL" "$WPACK" inspect "$S/a.wpack"
expect tls_curl_ca_bundle env CURL_CA_BUNDLE="$T/tls/ca.pem" "$WPACK" verify "$S/a.wpack"
expect tls_ssl_cert_file env SSL_CERT_FILE="$T/tls/ca.pem" "$WPACK" verify "$S/a.wpack"
expect_fail tls_bad_bundle_path "CA|certificate|SSL" \
    env CURL_CA_BUNDLE="$T/nope.pem" "$WPACK" inspect "$S/a.wpack"
expect_fail tls_redirect_to_http_refused \
    "HTTP 302: the redirect to http://127.0.0.1:$NGINX_PORT/a.wpack was refused: an https URL is never followed to a non-https one" \
    env CURL_CA_BUNDLE="$T/tls/ca.pem" "$WPACK" inspect "$S/tohttp/a.wpack"
# nginx's rewrite carries the query to the Location: shown redacted there
# as in the URL given
expect_fail tls_redirect_query_redacted \
    "^wpack: $S/tohttp/a.wpack\?sig=\*\*\*: .*redirect to http://127.0.0.1:$NGINX_PORT/a.wpack\?sig=\*\*\* was refused" \
    env CURL_CA_BUNDLE="$T/tls/ca.pem" "$WPACK" inspect "$S/tohttp/a.wpack?sig=SEKRIT"
grep -q SEKRIT "$T/out" "$T/err" && fail tls_redirect_query_not_shown "$(cat "$T/err")" ||
    pass tls_redirect_query_not_shown
finish
