#!/bin/bash
# test_remote_urls.sh - what goes into a request and what is shown of it,
# against remote_server.py's fake S3 (its own SigV4 check) and nginx:
# long STS session tokens and long keys are sent and signed whole; an
# s3:// key is literal (its "." and ".." segments are part of the name);
# a password in a URL never appears in a message or an output; a sharded
# set's shards are found next to the manifest's path, with its query.
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
"$WPACK" extract -q -o "$T/local" "$W/a.wpack"
need_bad_server "$W"
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

# ------------------------------------------- D2: a password is never shown
# /auth/ wants Basic "user:pa55:word": the request still carries it
A="http://user:pa55:word@127.0.0.1:$BAD_PORT/auth"
nopass() { # NAME: neither stdout nor stderr of the last command shows it
    if grep -q "pa55" "$T/out" "$T/err"; then fail "$1" "$(grep -h pa55 "$T/out" "$T/err" | head -c 300)"
    elif grep -q 'user:\*\*\*@' "$T/out" "$T/err"; then pass "$1"
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
cmp -s "$T/xa/t1.npy" "$T/local/t1.npy" && pass auth_extract_same_bytes || fail auth_extract_same_bytes

# ------------------------------------ D3: shards next to the manifest's path
# /query/ wants "?token=a/b" on every request: a '/' in the query is not a
# path separator, and the query goes to the shards too; a fragment is dropped
: >"$T/requests.log"
expect shard_query_slash "$WPACK" verify "$B/query/set/sh.wpack?token=a/b"
expect shard_query_fragment "$WPACK" verify "$B/query/set/sh.wpack?token=a/b#x/y"
grep -q ' 403$' "$T/requests.log" && fail shard_query_every_request "$(grep -c ' 403$' "$T/requests.log") refused" ||
    pass shard_query_every_request
expect_fail shard_query_wrong "HTTP 403" "$WPACK" verify "$B/query/set/sh.wpack?token=abc"

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

# ------------------- D11f: WPACK_REMOTE_RETRIES is checked as the others are
expect_fail retries_not_a_number "WPACK_REMOTE_RETRIES=abc: want a number of 0 or more" \
    env WPACK_REMOTE_RETRIES=abc "$WPACK" inspect "$B/ok/a.wpack"
expect retries_zero_allowed env WPACK_REMOTE_RETRIES=0 "$WPACK" inspect "$B/ok/a.wpack"
expect_fail timeout_zero_refused "WPACK_REMOTE_TIMEOUT=0: want a number above 0" \
    env WPACK_REMOTE_TIMEOUT=0 "$WPACK" inspect "$B/ok/a.wpack"

finish
