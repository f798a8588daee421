#!/bin/bash
# test_remote_tls.sh - https from nginx with a certificate of a private CA:
# refused without it, read with CURL_CA_BUNDLE or SSL_CERT_FILE naming it
# (the CLI passes it to the library as ca_file); a redirect from https to
# http is refused, saying so (its Location's query redacted).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

serve_small_archive
TLS_NAMES="DNS:s3.us-east-1.amazonaws.com,DNS:*.s3.us-east-1.amazonaws.com,DNS:*.s3.us-west-2.amazonaws.com"
# the bucket inwest2 is in us-west-2: asked at us-east-1's endpoint, AWS
# answers 301 with x-amz-bucket-region
TLS_EXTRA='location /w2/ {
            if ($host = inwest2.s3.us-east-1.amazonaws.com) {
                add_header x-amz-bucket-region us-west-2;
                return 301;
            }
        }'
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

# remote_server.py as the proxy (requests.log: "CONNECT HOST:PORT 200")
if TUNNEL_PORT=$TLS_PORT start_bad_server "$T/www"; then
    pass connect_proxy_started
    # nginx has a.wpack at /a.wpack (the path of a virtual-hosted request)
    # and b.wpack only at /BUCKET/b.wpack (path style)
    for b in my.models Models old_bucket; do mkdir -p "$T/www/$b" && cp "$T/www/a.wpack" "$T/www/$b/b.wpack"; done
    s3tls() {
        env -u AWS_ACCESS_KEY_ID -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_S3 -u AWS_REGION \
            -u AWS_DEFAULT_REGION https_proxy="http://127.0.0.1:$BAD_PORT" \
            CURL_CA_BUNDLE="$T/tls/ca.pem" "$@"
    }
    # connected NAME HOST: the last CONNECT named HOST:443
    connected() {
        [ "$(grep ^CONNECT "$T/requests.log" | tail -n 1)" = "CONNECT $2:443 200" ] && pass "$1" ||
            fail "$1" "$(grep ^CONNECT "$T/requests.log" | tail -n 1)"
    }
    expect s3_virtual_hosted s3tls "$WPACK" verify s3://models/a.wpack
    connected s3_virtual_hosted_host models.s3.us-east-1.amazonaws.com
    # AWS's wildcard certificate covers one label: "my.models.s3..." fails
    # TLS (AWS: "the SSL wildcard certificate matches only buckets that
    # don't contain periods"); upper case and '_' are no host name's
    for b in my.models Models old_bucket; do
        expect "s3_path_style_$b" s3tls "$WPACK" verify "s3://$b/b.wpack"
        connected "s3_path_style_host_$b" s3.us-east-1.amazonaws.com
    done
    # a public bucket of another region, AWS_REGION unset: asked again at
    # the region S3 names (a 301 was an error)
    mkdir -p "$T/www/w2" && cp "$T/www/a.wpack" "$T/www/w2/"
    expect s3_other_region_unsigned s3tls "$WPACK" verify s3://inwest2/w2/a.wpack
    connected s3_other_region_host inwest2.s3.us-west-2.amazonaws.com
    grep -q "^CONNECT inwest2.s3.us-east-1.amazonaws.com:443 " "$T/requests.log" &&
        pass s3_other_region_asked_first || fail s3_other_region_asked_first "$(cat "$T/requests.log")"
else
    fail connect_proxy_started "$(head -c 300 "$T/bad.err")"
fi
finish
