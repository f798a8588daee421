#!/bin/bash
# test_remote_urls.sh - what goes into a request and what is shown of it,
# against remote_server.py's fake S3 (its own SigV4 check) and nginx:
# long STS session tokens and long keys are sent and signed whole; an
# s3:// key is literal (its "." and ".." segments are part of the name);
# a password, a query's values, a fragment or a token as user name in a URL
# never appear in a message or an output; a sharded set's shards are found
# next to the manifest's path, with its query.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W/set" "$T/in"
"$PY" - "$T/in" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
r = np.random.default_rng(41)
for i in range(3):
    np.save(f"{d}/t{i}.npy", r.standard_normal((256, 256)).astype(np.float32))
PYEOF
expect create "$WPACK" create -q -o "$W/a.wpack" "$T/in"
expect create_set "$WPACK" create -q --shard-size 300K -o "$W/set/sh.wpack" "$T/in"
mkdir -p "$W/rootset" # remote_server.py's set at a URL with no path
expect create_root_set "$WPACK" create -q --shard-size 300K -o "$W/rootset/m.wpack" "$T/in"
"$WPACK" extract -q -o "$T/local" "$W/a.wpack"
need_nginx "$W"
need_bad_server "$W" "http://127.0.0.1:$NGINX_PORT"
export WPACK_REMOTE_RETRIES=0 WPACK_REMOTE_TIMEOUT=5

# ------------------------------------------------ D1: long tokens and keys
s3long() {
    env AWS_ENDPOINT_URL="$B/s3" AWS_REGION=eu-west-3 AWS_ACCESS_KEY_ID=AKIDLONG \
        AWS_SECRET_ACCESS_KEY=longsecret "$@"
}
# token N: N characters of base64-like text, then ".H" (the server's check)
token() {
    "$PY" -c 'import hashlib, sys
n = int(sys.argv[1])
b = ("IQoJb3JpZ2luX2VjE/+" * (n // 19 + 1))[:n]
print(b + "." + hashlib.sha256(b.encode()).hexdigest()[:16])' "$1"
}
for n in 1500 4000; do
    rm -rf "$T/xo"
    expect "s3_token_$n" s3long AWS_SESSION_TOKEN="$(token $n)" \
        "$WPACK" extract -q -o "$T/xo" s3://bucket/a.wpack t1
    cmp -s "$T/xo/t1.npy" "$T/local/t1.npy" && pass "s3_token_${n}_same_bytes" ||
        fail "s3_token_${n}_same_bytes"
done
# a long key that needs encoding (each é is 6 bytes encoded), with the token
seg=$("$PY" -c 'print("é" * 120)')
mkdir -p "$W/$seg/$seg/$seg"
cp "$W/a.wpack" "$W/$seg/$seg/$seg/a.wpack"
expect s3_long_key_and_token s3long AWS_SESSION_TOKEN="$(token 4000)" \
    "$WPACK" verify "s3://bucket/$seg/$seg/$seg/a.wpack"

# ------------------------------------------- D8: an s3:// key is literal
s3() {
    env AWS_ENDPOINT_URL="$B/s3" AWS_REGION=eu-west-3 AWS_ACCESS_KEY_ID=AKIDTEST \
        AWS_SECRET_ACCESS_KEY='secret/TEST+key' "$@"
}
# the fake S3 has no key with a "." or ".." segment: not found (404), never
# another object (a.wpack), never a signature that does not match (403)
expect_fail s3_dotdot_key_literal "HTTP 404 \(not found\).*NoSuchKey" s3 "$WPACK" inspect s3://bucket/sub/../a.wpack
expect_fail s3_dot_key_literal "HTTP 404 \(not found\).*NoSuchKey" s3 "$WPACK" inspect s3://bucket/./a.wpack
expect s3_plain_key s3 "$WPACK" inspect s3://bucket/set/sh.wpack
# credentials in the bucket's place are refused before any request (they
# went into the request's path or Host header, and as Basic credentials)
: >"$T/requests.log"
expect_fail s3_userinfo_refused "an S3 bucket name holds only letters" \
    s3 "$WPACK" inspect "s3://AKID:SEKRIT0@bucket/a.wpack"
grep -q SEKRIT0 "$T/err" && fail s3_userinfo_not_shown "$(cat "$T/err")" || pass s3_userinfo_not_shown
expect_fail s3_bucket_query_refused "an S3 bucket name holds only" s3 "$WPACK" inspect "s3://b?x=1/a.wpack"
# a bucket "." or ".." would be a dot segment of the path-style path (/../KEY: another bucket)
expect_fail s3_bucket_dotdot_refused "starts and ends with a letter or digit" s3 "$WPACK" inspect "s3://../a.wpack"
expect_fail s3_bucket_dot_refused "starts and ends with a letter or digit" s3 "$WPACK" inspect "s3://./a.wpack"
[ -s "$T/requests.log" ] && fail s3_bad_bucket_no_request "$(cat "$T/requests.log")" || pass s3_bad_bucket_no_request

# ------------------------------------------- D2: a password is never shown
# /auth/ wants Basic "user:pa55:word": the request still carries it
A="http://user:pa55:word@127.0.0.1:$BAD_PORT/auth"
nopass() { # NAME: neither stdout nor stderr of the last command shows it (nor the user name)
    if grep -Eq "pa55|//user:" "$T/out" "$T/err"; then fail "$1" "$(grep -Eh 'pa55|//user:' "$T/out" "$T/err" | head -c 300)"
    elif grep -q '//\*\*\*@' "$T/out" "$T/err"; then pass "$1"
    else fail "$1" "the URL is not shown at all: $(head -c 300 "$T/out" "$T/err")"; fi
}
expect auth_verify "$WPACK" verify "$A/a.wpack"
nopass auth_verify_ok_line_redacted
expect auth_inspect "$WPACK" inspect "$A/a.wpack"
nopass auth_inspect_redacted
expect auth_inspect_json "$WPACK" inspect --json "$A/a.wpack"
nopass auth_inspect_json_redacted
expect auth_inspect_set "$WPACK" inspect "$A/set/sh.wpack"
nopass auth_shard_paths_redacted
expect_fail auth_wrong_password "HTTP 401" "$WPACK" inspect "http://user:pa55:wrong@127.0.0.1:$BAD_PORT/auth/a.wpack"
grep -q "pa55" "$T/err" && fail auth_wrong_password_redacted "$(cat "$T/err")" || pass auth_wrong_password_redacted
expect_fail auth_not_found "HTTP 404" "$WPACK" extract -q -o "$T/xa" "$A/nope.wpack"
nopass auth_not_found_redacted
rm -rf "$T/xa"
expect auth_extract "$WPACK" extract -o "$T/xa" "$A/a.wpack" t1
# a redirect to another origin (a second remote_server.py sending /auth/
# requests on to the first) does not carry the password: 401, not the archive
rm -f "$T/bad2.port"
$PY "$TESTS_DIR/cli/remote_server.py" "$W" "$T/bad2.port" "http://127.0.0.1:$BAD_PORT/auth" 2>"$T/bad2.err" &
SERVER_PIDS="$SERVER_PIDS $!"
for _ in $(seq 300); do [ -s "$T/bad2.port" ] && break; sleep 0.1; done
expect_fail redirect_other_origin_no_password "HTTP 401" \
    "$WPACK" inspect "http://user:pa55:word@127.0.0.1:$(cat "$T/bad2.port")/redirect/a.wpack"
nopass redirect_other_origin_redacted
cmp -s "$T/xa/t1.npy" "$T/local/t1.npy" && pass auth_extract_same_bytes || fail auth_extract_same_bytes

# ------------- a query's values, a fragment, a token as user are never shown
# A presigned-S3-like query, SAS-like and token values, a '/' in one, a
# fragment: every secret holds SEKRIT; the host, the path and the query's
# names are still shown. Requests carry the URL as given (nginx ignores
# the query; the archives read right).
N="http://127.0.0.1:$NGINX_PORT"
Q='?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIASEKRIT1%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Signature=5e6b1SEKRIT2c0ffee&sig=SEKRIT3%2Bx%3D&token=SEKRIT4/a/b&bare_SEKRIT5#SEKRIT6'
head -c 3000 "$W/a.wpack" >"$W/trunc.wpack"
noleak() { # NAME SHOWN: no SEKRIT on stdout or stderr of the last command, SHOWN (fixed text) there
    if grep -q SEKRIT "$T/out" "$T/err"; then fail "$1" "$(grep -ho '.\{0,60\}SEKRIT.\{0,20\}' "$T/out" "$T/err" | head -3)"
    elif grep -qF -- "$2" "$T/out" "$T/err"; then pass "$1"
    else fail "$1" "'$2' not shown: $(head -c 300 "$T/out" "$T/err")"; fi
}
QS='?X-Amz-Algorithm=***&X-Amz-Credential=***&X-Amz-Date=***&X-Amz-Signature=***&sig=***&token=***&***#***'
expect_fail query_not_found "HTTP 404" "$WPACK" inspect "$N/nope.wpack$Q"
noleak query_not_found_redacted "127.0.0.1:$NGINX_PORT/nope.wpack$QS: GET"
expect_fail query_truncated "WPACK_E_TRUNCATED" "$WPACK" verify "$N/trunc.wpack$Q"
noleak query_truncated_redacted "127.0.0.1:$NGINX_PORT/trunc.wpack$QS"
dead=$(free_port)
expect_fail query_refused "onnect" "$WPACK" extract -q -o "$T/xq" "http://127.0.0.1:$dead/a.wpack$Q"
noleak query_refused_redacted "127.0.0.1:$dead/a.wpack$QS"
# a redirect carrying the query (remote_server.py to nginx): followed, and
# when not followed its Location is shown redacted too
expect query_redirect_followed "$WPACK" verify "$B/redirect/a.wpack$Q"
noleak query_redirect_ok_line_redacted "$B/redirect/a.wpack$QS: OK"
expect_fail query_redirect_refused "HTTP 302, redirect to" \
    env WPACK_REMOTE_REDIRECTS=0 "$WPACK" inspect "$B/redirect/a.wpack$Q"
noleak query_redirect_location_redacted "redirect to $N/a.wpack?X-Amz-Algorithm=***&"
# a server whose error page repeats the request (percent-decoded)
expect_fail query_echoed "HTTP 403" "$WPACK" inspect "$B/echo/a.wpack$Q"
noleak query_echoed_body_scrubbed "denied: /echo/a.wpack?X-Amz-Algorithm="
# ... or the query of a URL the server redirected to (a presigned URL):
# shown redacted as the redirect's target, then whole in the page that
# followed, the 302's own "moved here" link or the target's error page
expect_fail presigned_not_followed "HTTP 302, redirect to .*/echo/a.wpack[?]X-Amz-Signature=[*][*][*]&token=[*][*][*]" \
    env WPACK_REMOTE_REDIRECTS=0 "$WPACK" inspect "$B/presigned/a.wpack"
noleak presigned_not_followed_body_scrubbed "moved here"
expect_fail presigned_followed "HTTP 403" "$WPACK" inspect "$B/presigned/a.wpack"
noleak presigned_followed_body_scrubbed "denied: /echo/a.wpack?X-Amz-Signature=***&token=***"
# ... or re-encoded, its escapes in lower case: the secrets given with
# escapes (sig=SEKRIT3%2Bx%3D, the credential's %2F) matched neither as
# given nor decoded, and their start (SEKRIT3, AKIASEKRIT1) was shown
expect_fail query_echoed_lower "HTTP 403" "$WPACK" inspect "$B/echolower/a.wpack$Q"
noleak query_echoed_lower_scrubbed "denied: /echolower/a.wpack?X-Amz-Algorithm=***&X-Amz-Credential=***&"
# a gateway echoing the request's headers: an S3 session token (the scrub
# skipped s3 altogether) and HTTP Basic credentials (base64 of user:password)
expect_fail s3_headers_echoed "HTTP 400" env AWS_ENDPOINT_URL="$B/echoheaders" AWS_ACCESS_KEY_ID=AKIDTEST \
    AWS_SECRET_ACCESS_KEY=secret AWS_SESSION_TOKEN=IQoJSEKRIT21tok "$WPACK" inspect s3://bucket/a.wpack
noleak s3_headers_echoed_scrubbed "x-amz-security-token: *** |"
expect_fail basic_echoed "HTTP 400" "$WPACK" inspect "http://user:SEKRIT22@127.0.0.1:$BAD_PORT/echoheaders/a.wpack"
b64=$(printf 'user:SEKRIT22' | base64)
grep -qF "${b64%%=*}" "$T/err" && fail basic_echoed_scrubbed "$(cat "$T/err")" ||
    noleak basic_echoed_scrubbed "Authorization: Basic ***"
# ... short values too (3 bytes and less were shown), after their names
expect_fail query_short_echoed "HTTP 403" "$WPACK" inspect "$B/echo/a.wpack?t=Zq9&k=7"
grep -q "Zq9" "$T/err" && fail query_short_echoed_scrubbed "$(cat "$T/err")" ||
    { grep -qF "denied: /echo/a.wpack?t=***&k=***" "$T/err" && pass query_short_echoed_scrubbed ||
        fail query_short_echoed_scrubbed "$(cat "$T/err")"; }
# ... and one the message's cut of the page goes through: its start was
# shown ('...?t=SEKRITTO'), the page cut to 200 bytes before the scrub
long=$("$PY" -c 'print("n" * 172)')
expect_fail query_cut_echoed "HTTP 403" "$WPACK" inspect "$B/echo/$long?t=SEKRITTOKEN1234567890"
grep -q "SEKRIT" "$T/err" && fail query_cut_echoed_scrubbed "$(cat "$T/err")" ||
    { grep -qF "denied: /echo/$long?t=**" "$T/err" && pass query_cut_echoed_scrubbed ||
        fail query_cut_echoed_scrubbed "$(cat "$T/err")"; }
# reads that succeed: every output naming the archive
expect query_inspect "$WPACK" inspect "$N/a.wpack$Q"
noleak query_inspect_redacted "$N/a.wpack$QS"
expect query_inspect_json "$WPACK" inspect --json "$N/a.wpack$Q"
noleak query_inspect_json_redacted "\"path\": \"$N/a.wpack$QS\""
expect query_verify "$WPACK" verify "$N/set/sh.wpack$Q"
noleak query_verify_set_redacted "$N/set/sh.wpack$QS: OK"
expect query_inspect_set "$WPACK" inspect "$N/set/sh.wpack$Q"
noleak query_shard_paths_redacted "shard 0: $N/set/sh-00001-of-0000"
rm -rf "$T/xq"
expect query_extract "$WPACK" extract -o "$T/xq" "$N/a.wpack$Q" t1
cmp -s "$T/xq/t1.npy" "$T/local/t1.npy" && pass query_extract_same_bytes || fail query_extract_same_bytes
# a URL in an option's value, echoed by the usage error
expect_fail query_option_value "unknown option" "$WPACK" inspect "--nope=$N/a.wpack$Q"
noleak query_option_value_redacted "--nope=$N/a.wpack$QS"
# a token as the user name, a password in a port's place, an S3 endpoint
expect_fail user_token_not_found "HTTP 404" "$WPACK" inspect "http://SEKRIT7tok@127.0.0.1:$NGINX_PORT/nope.wpack"
noleak user_token_redacted "http://***@127.0.0.1:$NGINX_PORT/nope.wpack"
expect_fail password_raw_slash "not a URL libcurl can parse" \
    "$WPACK" inspect "http://user:pa/SEKRIT8@127.0.0.1:$NGINX_PORT/a.wpack"
noleak password_raw_slash_redacted "http://***: not a URL"
expect_fail s3_endpoint_redacted_fails "is not an http:// or https:// URL" \
    env AWS_ENDPOINT_URL="ftp://me:SEKRIT9@minio:9000/?k=SEKRIT9" "$WPACK" inspect s3://b/k
noleak s3_endpoint_redacted "'ftp://***@minio:9000/?k=***'"
# a scheme wpack does not read: refused as one, shown redacted (it was
# taken for a local path, its "No such file" error quoting the password,
# a token as user name, a query's signature whole), wherever a URL goes
for cmd in inspect verify "extract -o $T/xf" "export --to safetensors -o $T/xf.st"; do
    n=${cmd%% *}
    expect_fail "ftp_refused_$n" "unsupported URL scheme 'ftp'" "$WPACK" $cmd "ftp://user:SEKRIT15@127.0.0.1/m.wpack$Q"
    noleak "ftp_redacted_$n" "ftp://***@127.0.0.1/m.wpack$QS: unsupported URL scheme"
done
expect_fail gs_token_refused "unsupported URL scheme 'gs'" "$WPACK" inspect "gs://SEKRIT16tok@bucket/m.wpack"
noleak gs_token_redacted "gs://***@bucket/m.wpack: unsupported"
expect_fail file_scheme_refused "unsupported URL scheme 'file'" "$WPACK" verify "file://localhost$W/a.wpack?sig=SEKRIT17"
noleak file_scheme_redacted "?sig=***: unsupported"
expect_fail ftp_update_refused "read only" "$WPACK" update "ftp://u:SEKRIT18@h/m.wpack" --meta k=v
noleak ftp_update_redacted "ftp://***@h/m.wpack"
expect_fail ftp_input_redacted_fails "" "$WPACK" create -q -o "$T/xf.wpack" "ftp://u:SEKRIT19@h/in.npy"
noleak ftp_input_redacted "ftp://***@h/in.npy"
# a URL as an output is refused: argv holds it redacted, and extract wrote
# the tensors under local directories "ftp:" and "***@h" (create, under
# "http:" when it existed); any scheme, either form of the option
for o in "-o ftp://u:SEKRIT20@h/x" "--output=https://u:SEKRIT20@h/x" "-o s3://b/x"; do
    n=${o#*[ =]}; n=${n%%:*}
    expect_fail "output_url_refused_extract_$n" "is a URL: outputs are local files" \
        env -C "$T" "$WPACK" extract -q $o "$W/a.wpack"
    noleak "output_url_redacted_extract_$n" "is a URL"
    expect_fail "output_url_refused_create_$n" "is a URL: outputs are local files" \
        env -C "$T" "$WPACK" create -q $o "$T/in"
done
ls -d "$T"/ftp: "$T"/https: "$T"/s3: 2>/dev/null && fail output_url_nothing_written "$(find "$T"/*: | head -3)" ||
    pass output_url_nothing_written
# ... and a local path that starts so is still reached as ./SCHEME://
mkdir -p "$T/ftp:/h"
cp "$W/a.wpack" "$T/ftp:/h/m.wpack"
expect scheme_ftp_local_dot_slash env -C "$T" "$WPACK" verify ./ftp://h/m.wpack

# on a terminal (a pty: the progress line drawn), success and failure
if command -v script >/dev/null 2>&1 && script -qec true /dev/null >/dev/null 2>&1; then
    rm -rf "$T/xp"
    script -qec "$WPACK extract -o '$T/xp' '$N/a.wpack$Q'; $WPACK inspect '$N/nope.wpack$Q'" \
        /dev/null >"$T/out" 2>"$T/err" </dev/null
    tr '\r' '\n' <"$T/out" | grep -Eq '^.\[K100%  .* tensors  fetched' && pass query_progress_drawn ||
        fail query_progress_drawn "$(cat -v "$T/out" | head -c 300)"
    noleak query_progress_redacted "$N/nope.wpack$QS: GET"
else
    fail query_progress_redacted "no 'script' (util-linux) to give a pty: cannot check"
fi

# ---------------- the scheme in any case (RFC 3986 3.1) is a URL, hidden alike
# (it was taken for a local path: "No such file", the password quoted raw)
expect scheme_upper_verify "$WPACK" verify "HTTP://127.0.0.1:$NGINX_PORT/a.wpack"
grep -q "^HTTP://127.0.0.1:$NGINX_PORT/a.wpack: OK" "$T/out" && pass scheme_upper_shown_as_given ||
    fail scheme_upper_shown_as_given "$(head -c 300 "$T/out")"
expect scheme_mixed_set "$WPACK" verify "hTtP://127.0.0.1:$NGINX_PORT/set/sh.wpack$Q"
noleak scheme_mixed_set_redacted "hTtP://127.0.0.1:$NGINX_PORT/set/sh.wpack$QS: OK"
expect scheme_upper_auth "$WPACK" extract -o "$T/xs" "HTTP://user:pa55:word@127.0.0.1:$BAD_PORT/auth/a.wpack" t1
cmp -s "$T/xs/t1.npy" "$T/local/t1.npy" && pass scheme_upper_same_bytes || fail scheme_upper_same_bytes
expect_fail scheme_upper_not_found "HTTP 404" "$WPACK" inspect "Http://user:pa55:word@127.0.0.1:$BAD_PORT/auth/nope.wpack"
nopass scheme_upper_not_found_redacted
expect_fail scheme_https_upper_redacted "HTTPS://\*\*\*@127.0.0.1:$dead/m.wpack: GET" \
    "$WPACK" inspect "HTTPS://user:pa55@127.0.0.1:$dead/m.wpack"
grep -q pa55 "$T/err" && fail scheme_https_upper_no_password "$(cat "$T/err")" || pass scheme_https_upper_no_password
expect scheme_s3_upper s3 "$WPACK" inspect S3://bucket/set/sh.wpack
expect scheme_s3_endpoint_upper env AWS_ENDPOINT_URL="HTTP://127.0.0.1:$BAD_PORT/s3" AWS_REGION=eu-west-3 \
    AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY='secret/TEST+key' "$WPACK" verify s3://bucket/a.wpack
# a local file whose path starts so is reached as ./HTTPS://... (README)
mkdir -p "$T/HTTPS:/h"
cp "$W/a.wpack" "$T/HTTPS:/h/m.wpack"
expect scheme_local_dot_slash env -C "$T" "$WPACK" verify ./HTTPS://h/m.wpack
expect_fail scheme_update_refused "a URL is read only" "$WPACK" update "HTTPS://h/m.wpack" --meta k=v

# ------------------------------------ D3: shards next to the manifest's path
# /query/ wants "?token=a/b" on every request: a '/' in the query is not a
# path separator, and the query goes to the shards too; a fragment is dropped
: >"$T/requests.log"
expect shard_query_slash "$WPACK" verify "$B/query/set/sh.wpack?token=a/b"
expect shard_query_fragment "$WPACK" verify "$B/query/set/sh.wpack?token=a/b#x/y"
grep -q ' 403$' "$T/requests.log" && fail shard_query_every_request "$(grep -c ' 403$' "$T/requests.log") refused" ||
    pass shard_query_every_request
expect_fail shard_query_wrong "HTTP 403" "$WPACK" verify "$B/query/set/sh.wpack?token=abc"
# a shard is shown as its URL is requested, hidden alike: with the query,
# beside a manifest URL with no path (it was "http://m-00001-of-00003.wpack":
# the manifest's shown name up to its last '/', the scheme's), or with a
# '/' in a query name (it was "...sh.wpack?a/sh-00001-...")
expect shard_no_path "$WPACK" inspect "http://u:SEKRIT10@127.0.0.1:$BAD_PORT?sig=SEKRIT11&a/b=SEKRIT12"
noleak shard_no_path_shown "shard 0: http://***@127.0.0.1:$BAD_PORT/m-00001-of-00003.wpack?sig=***&a/b=***, "
expect shard_query_slash_name "$WPACK" inspect "$N/set/sh.wpack?a/b=SEKRIT13#SEKRIT14"
noleak shard_query_slash_name_shown "shard 2: $N/set/sh-00003-of-00003.wpack?a/b=***, "

# ------------------------------------- D11e: an open error names the URL once
once() { # NAME URL REGEX [ENV...]: the open fails with REGEX, the URL named once
    local name=$1 url=$2 pat=$3; shift 3
    expect_fail "$name" "$pat" env "$@" "$WPACK" inspect "$url"
    [ "$(grep -oF -- "$url" "$T/err" | wc -l)" -eq 1 ] && pass "${name}_url_once" ||
        fail "${name}_url_once" "$(cat "$T/err")"
}
once s3_no_key s3://models/ "s3://models/: an S3 URL is s3://BUCKET/KEY"
once s3_no_secret s3://b/k "s3://b/k: an access key without a secret key" AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=
once unparsable "http://[zz/a" "not a URL libcurl can parse"
# an S3 region is checked: it goes into the host name (the signed requests
# went to b.s3.eu-west-3.evil.example) and the Authorization header (a CR)
once s3_region_host s3://b/k "s3://b/k: S3 region 'eu-west-3.evil.example/x': want lowercase letters" \
    AWS_REGION=eu-west-3.evil.example/x AWS_ENDPOINT_URL= AWS_ENDPOINT_URL_S3=
once s3_region_header s3://b/k 's3://b/k: S3 region .eu-west-3\\x0dX-Injected: 1.: want letters' \
    AWS_REGION="$(printf 'eu-west-3\rX-Injected: 1')" AWS_ENDPOINT_URL="$B/s3" AWS_ACCESS_KEY_ID=AKIDTEST \
    AWS_SECRET_ACCESS_KEY='secret/TEST+key'
# ... and so are the access key and session token (not shown: secrets)
once s3_access_key_cr s3://b/k "s3://b/k: the S3 access key holds a control byte, a blank" \
    AWS_ACCESS_KEY_ID="$(printf 'AKIDTEST\r')" AWS_ENDPOINT_URL="$B/s3" AWS_SECRET_ACCESS_KEY='secret/TEST+key'
once s3_session_token_cr s3://b/k "s3://b/k: the S3 session token holds a control byte \(a stray CR\?\)" \
    AWS_ACCESS_KEY_ID=AKIDTOKEN AWS_SESSION_TOKEN="$(printf 'tok/en=\r')" AWS_ENDPOINT_URL="$B/s3" \
    AWS_SECRET_ACCESS_KEY=tokensecret

# ------------------- D11f: WPACK_REMOTE_RETRIES is checked as the others are
expect_fail retries_not_a_number "WPACK_REMOTE_RETRIES=abc: want a number of 0 or more" \
    env WPACK_REMOTE_RETRIES=abc "$WPACK" inspect "$B/ok/a.wpack"
expect retries_zero_allowed env WPACK_REMOTE_RETRIES=0 "$WPACK" inspect "$B/ok/a.wpack"
expect_fail timeout_zero_refused "WPACK_REMOTE_TIMEOUT=0: want a number above 0" \
    env WPACK_REMOTE_TIMEOUT=0 "$WPACK" inspect "$B/ok/a.wpack"
# a chunk past 1G is refused by name (the library takes it as 1 GiB: 2^61
# and more wrapped connections x chunk around to 0, 64 KiB read-ahead steps)
expect_fail chunk_huge_refused "WPACK_REMOTE_CHUNK=2G: at most 1G" \
    env WPACK_REMOTE_CHUNK=2G "$WPACK" inspect "$B/ok/a.wpack"
expect chunk_1g_allowed env WPACK_REMOTE_CHUNK=1G "$WPACK" verify "$B/ok/a.wpack"

finish
