#!/bin/bash
# test_remote_bad.sh - servers that misbehave (tests/cli/remote_server.py):
# each is a clear error naming what the server did, or is recovered from
# correctly; never a crash, never a wrong byte (no output file appears on
# an error). Then S3: requests signed with SigV4 are checked by an
# independent Python implementation (hmac, hashlib) that rejects bad ones;
# that implementation itself is checked against AWS's published example.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

mkdir -p "$T/www"
"$PY" - "$T" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
r = np.random.default_rng(3)
for i in range(4):
    np.save(f"{d}/t{i}.npy", r.standard_normal((256, 256)).astype(np.float32))
PYEOF
expect create "$WPACK" create -q -o "$T/www/a.wpack" "$T"/t0.npy "$T"/t1.npy "$T"/t2.npy "$T"/t3.npy
"$WPACK" extract -q -o "$T/local" "$T/www/a.wpack"

if ! start_nginx "$T/www"; then
    fail nginx_started "nginx is not installed or did not start (tools/deps.sh installs it)"
fi
# redirects go to another host name (localhost) and port: nginx
need_bad_server "$T/www" "http://localhost:${NGINX_PORT:-1}"
export WPACK_REMOTE_RETRIES=2 WPACK_REMOTE_TIMEOUT=2

# extract_fails NAME REGEX URL: extract fails with REGEX and writes nothing
extract_fails() {
    local name=$1 pat=$2 url=$3
    rm -rf "$T/xo"
    expect_fail "$name" "$pat" "$WPACK" extract -q -o "$T/xo" "$url" t1
    [ ! -e "$T/xo/t1.npy" ] && pass "${name}_no_output" || fail "${name}_no_output"
}
# extract_same NAME URL [ENV...]: extract t1 works and equals the local bytes
extract_same() {
    local name=$1 url=$2; shift 2
    rm -rf "$T/xo"
    expect "$name" env "$@" "$WPACK" extract -q -o "$T/xo" "$url" t1
    cmp -s "$T/xo/t1.npy" "$T/local/t1.npy" && pass "${name}_same_bytes" || fail "${name}_same_bytes"
}

extract_same ok "$B/ok/a.wpack"
extract_fails ignores_range "ignored the Range request \(HTTP 200.*\[WPACK_E_IO\]" "$B/norange/a.wpack"
extract_fails html_error_page "ignored the Range request \(HTTP 200, text/html" "$B/html200/a.wpack"
extract_fails content_length_too_long "[Pp]artial|short body" "$B/lielong/a.wpack"
extract_fails content_length_too_short "short body: [0-9]+ of [0-9]+ bytes \(after retries\)" "$B/lieshort/a.wpack"
extract_fails truncated_body "[Pp]artial|short body" "$B/truncate/a.wpack"
extract_fails more_bytes_than_range "sent more than the [0-9]+ bytes of range" "$B/more/a.wpack"
# a server that compresses ranges unless told not to: asked for identity
# (curl sends no Accept-Encoding, which allows any: the gzip stream was
# taken for the object's bytes, "short body" and retried)
extract_same gzip_asked_identity "$B/gzip/a.wpack"
# ... and one that compresses anyway: said at once, not retried (the
# open's first request, answered plain, and the one refused)
: >"$T/requests.log"
extract_fails gzip_refused "HTTP 206 with Content-Encoding: gzip for bytes [0-9]+-[0-9]+: wpack reads the object's own bytes" "$B/gzipalways/a.wpack"
[ "$(grep -c '^gzipalways .* 206$' "$T/requests.log")" -eq 2 ] && pass gzip_refused_not_retried ||
    fail gzip_refused_not_retried "$(grep -c '^gzipalways' "$T/requests.log") requests"
# two Content-Encoding lines are one list: "gzip" then "identity" is gzip
# (the last line alone was taken: the gzip body retried as a short one)
extract_fails gzip_then_identity "HTTP 206 with Content-Encoding: gzip for bytes" "$B/gziptwice/a.wpack"
# a header line over libcurl's 100 KiB: curl's "Out of memory" said why
extract_fails big_header "Out of memory \(or a response header line longer than libcurl takes" "$B/bigheader/a.wpack"
# RFC 9110: a range unit is case-insensitive ("Bytes" was refused), and a
# size not known to the server ("bytes A-B/*") does after the open
extract_same content_range_unit_case "$B/crcase/a.wpack"
extract_same content_range_size_unknown "$B/crstar/a.wpack"
# a 416 saying the object's size now ("bytes */100"): said, not retried
extract_fails range_not_satisfiable_size "HTTP 416 \(range not satisfiable: the object is now 100 bytes, was [0-9]+\)" \
    "$B/shrunk/a.wpack"
# ... and at the open's first range, from byte 0: not taken for an empty
# object ("file is 0 bytes")
extract_fails range_not_satisfiable_open "GET bytes 0-65535: HTTP 416 \(range not satisfiable\) for an object of 100 bytes" \
    "$B/lie416/a.wpack"
extract_fails wrong_content_range "asked for bytes [0-9]+-[0-9]+ of the object, the server sent bytes" "$B/wrongrange/a.wpack"
extract_fails not_found "a.wpack: GET bytes 0-65535: HTTP 404 \(not found\)" "$B/ok/missing/a.wpack"
extract_fails flipped_byte "tensor 't1': fetched bytes hash to [0-9a-f]+ twice.*\[WPACK_E_CHECKSUM\]" "$B/flip/a.wpack"
extract_fails changed_etag "changed since it was opened \(ETag \"v2\".*at open \"v1\"" "$B/changed/a.wpack"
extract_fails changed_if_match "HTTP 412 \(the object changed since it was opened" "$B/changed412/a.wpack"
extract_fails changed_last_modified "changed since it was opened \(ETag \"v1\", Last-Modified Fri, 02 Jan.*at open \"v1\", Thu, 01 Jan" "$B/lmchanged/a.wpack"
# ETag and Last-Modified values longer than the client keeps are compared
# whole: cut, an object replaced mid-read passed as the one opened
extract_fails changed_long_etag "changed since it was opened \(they differ past the part shown: ETag \"e+\.\.\., Last" "$B/changedlong/a.wpack"
extract_fails changed_long_last_modified "changed since it was opened \(they differ past the part shown: .*Last-Modified Thu, 01 Jan 2026" "$B/lmlong/a.wpack"
# a strong ETag longer than the 255 bytes kept: If-Match with it cut short
# was refused by the server (412) on every read after the open
extract_same long_etag "$B/longetag/a.wpack"
# an ETag that is not RFC 9110's (a control byte in it) is never sent back
# as If-Match: a bare CR put a header of the server's choice into every
# read's request (and a redirect's, to another host)
extract_same etag_control_not_echoed "$B/etagctl/a.wpack"
extract_fails stalled "[Tt]imeout|timed out" "$B/stall/a.wpack"
# a server trickling 2 bytes a second is timed out (slower than 1 KiB/s for
# WPACK_REMOTE_TIMEOUT=2 s), with its retries, well within 20 s
start=$(date +%s)
expect_fail trickle_timed_out "[Tt]oo slow|[Tt]imeout|timed out" \
    env WPACK_REMOTE_RETRIES=1 timeout 40 "$WPACK" inspect "$B/trickle/a.wpack"
took=$(($(date +%s) - start))
[ "$took" -le 20 ] && pass trickle_bounded_time || fail trickle_bounded_time "$took s"
# a body sent at 4 KiB/s, above the low-speed limit: each request has a
# deadline (the timeout plus its length at 16 KiB/s: 2 s + 4 s for 64 KiB
# chunks), then is retried, then the error names the URL, the range and the
# deadline. Before, each 64 KiB took its 16 s and the read went through (an
# 8 MiB chunk at 1.1 KiB/s: two hours).
start=$SECONDS
expect_fail slow_body_deadline "$B/slowbody/a\.wpack: GET bytes [0-9]+-[0-9]+: the request's deadline passed: [0-9]+ of 65536 bytes in 6000 ms .*\(after retries\)" \
    env WPACK_REMOTE_RETRIES=1 WPACK_REMOTE_CHUNK=64K timeout 60 "$WPACK" extract -q -o "$T/xo" "$B/slowbody/a.wpack" t1
[ $((SECONDS - start)) -le 40 ] && pass slow_body_deadline_bounded || fail slow_body_deadline_bounded "$((SECONDS - start)) s"
# header lines that never end, at 800 bytes a second: header bytes do not
# count for the low-speed limit, so that limit times them out too
start=$(date +%s)
expect_fail header_drip_timed_out "[Tt]oo slow|[Tt]imeout|timed out" \
    env WPACK_REMOTE_RETRIES=1 timeout 60 "$WPACK" extract -q -o "$T/xo" "$B/headerdrip/a.wpack" t1
took=$(($(date +%s) - start))
[ "$took" -le 30 ] && pass header_drip_bounded_time || fail header_drip_bounded_time "$took s"
# a redirect whose body does not end, fast (past the low-speed limit, no
# timeout ever fired) or dripping above it: curl reads a redirect's body
# whole before it follows; the read hung for as long as the server went on.
# Now at most 1 MiB and WPACK_REMOTE_TIMEOUT (2 s) of it, no retry.
for m in redirectflood redirectdrip; do
    start=$SECONDS
    extract_fails "$m" "HTTP 302: a redirect's body that does not end" "$B/$m/a.wpack"
    [ $((SECONDS - start)) -lt 40 ] && pass "${m}_bounded" || fail "${m}_bounded" "$((SECONDS - start)) s"
done
# a redirect's target slow to answer once (past the 2 s timeout) is retried
# as without a redirect: the 302's status stood until the target answered,
# and the wait was taken for a redirect body without end (failed, no retry)
extract_same redirect_target_slow_once "$B/toslow/a.wpack"
# a 3xx without a Location while redirects are followed: said so (it was
# "redirects are not followed", which they are)
extract_fails redirect_without_location "GET bytes 0-65535: HTTP 302 \(a redirect without a Location to follow\)" \
    "$B/noloc/a.wpack"
# a 206 with neither Content-Range nor body: an error at once, not a retry
: >"$T/requests.log"
extract_fails no_content_range "HTTP 206 without a valid Content-Range for bytes [0-9]+-[0-9]+" "$B/nocr/a.wpack"
# (the open's first request, from byte 0, is answered right; no range twice)
[ -s "$T/requests.log" ] && [ -z "$(sort "$T/requests.log" | uniq -d)" ] &&
    pass no_content_range_not_retried || fail no_content_range_not_retried "$(cat "$T/requests.log")"
# an empty object answered "206 bytes 0-0/0": not an archive, said at once
: >"$T/www/empty.wpack"
: >"$T/requests.log"
expect_fail empty_object_206 "empty.wpack.*(empty|0 bytes|too small|not a wpack)" \
    "$WPACK" inspect "$B/zeroes3/empty.wpack"
[ "$(grep -c '^zeroes3 ' "$T/requests.log")" = 1 ] && pass empty_object_206_one_request ||
    fail empty_object_206_one_request "$(cat "$T/requests.log")"
expect_fail empty_object_416 "empty.wpack.*(empty|0 bytes|too small|not a wpack)" \
    "$WPACK" inspect "$B/ok/empty.wpack"
# nginx: 200 with Content-Length 0 for a Range on a 0-byte file
if [ -n "${NGINX_PORT:-}" ]; then
    expect_fail empty_object_nginx_200 "empty.wpack: file is 0 bytes, too short" \
        "$WPACK" inspect "http://127.0.0.1:$NGINX_PORT/empty.wpack"
fi
# verify finds the flipped bytes too, naming the tensor
expect_fail verify_flipped "tensor 't[0-9]': fetched bytes hash" "$WPACK" verify "$B/flip/a.wpack"

# recovered: 503 twice per range, then right; one flipped fetch, refetched
: >"$T/requests.log"
extract_same retry_after_503 "$B/flaky/a.wpack"
[ "$(grep -c '^flaky .* 503$' "$T/requests.log")" -ge 2 ] && pass retry_503_seen || fail retry_503_seen "$(cat "$T/requests.log")"
extract_same refetch_after_bad_bytes "$B/flipone/a.wpack"
cp "$T/www/a.wpack" "$T/www/b.wpack"
cp "$T/www/a.wpack" "$T/www/c.wpack"
WPACK_REMOTE_RETRIES=1 extract_fails retries_run_out "GET bytes 0-65535: HTTP 503: <html>busy</html> \(after retries\)" \
    "$B/flaky/b.wpack"
WPACK_REMOTE_RETRIES=0 extract_fails retries_zero "HTTP 503" "$B/flaky/c.wpack"
# a 429 or 503 that says how long to wait (Retry-After): each range asked
# again no sooner (2 s; a date 3 s ahead, cut to the second: over 2 s),
# not after the backoff (about 1 s here); one asking for an hour fails at
# once, saying so
for m in busy429 busydate; do
    : >"$T/requests.log"
    extract_same "retry_after_$m" "$B/$m/a.wpack"
    "$PY" - "$T/requests.log" "$m" 1.9 <<'PYEOF' && pass "retry_after_${m}_waited" || fail "retry_after_${m}_waited" "$(cat "$T/requests.log")"
import sys
log, mode, least = sys.argv[1], sys.argv[2], float(sys.argv[3])
first, gaps = {}, []
for line in open(log):
    w = line.split()
    if w[0] != mode or len(w) != 4:
        continue
    rng, status, t = w[1], w[2], float(w[3])
    if status != "206":
        first[rng] = t
    elif rng in first:
        gaps.append(t - first.pop(rng))
print(mode, "gaps", gaps)
sys.exit(0 if gaps and not first and min(gaps) >= least else 1)
PYEOF
done
start=$SECONDS
extract_fails retry_after_too_long "HTTP 503: <html>come back tomorrow</html> \(the server asks to retry after 3600 s \(Retry-After\), longer than wpack waits: 60 s\)" \
    "$B/busylong/a.wpack"
[ $((SECONDS - start)) -lt 20 ] && pass retry_after_too_long_at_once || fail retry_after_too_long_at_once "$((SECONDS - start)) s"

# a redirect to another server (nginx): followed, unless turned off
if [ -n "${NGINX_PORT:-}" ]; then
    extract_same redirect_followed "$B/redirect/a.wpack"
    rm -rf "$T/xo"
    expect_fail redirect_refused "HTTP 302, redirect to http://localhost:$NGINX_PORT/a.wpack" \
        env WPACK_REMOTE_REDIRECTS=0 "$WPACK" extract -q -o "$T/xo" "$B/redirect/a.wpack" t1
fi
# a redirect to another host name is looked up on the calling thread, as
# the URL's own (the library starts no thread): libcurl's resolver ran a
# thread for it. "localhost" shows nothing (curl answers it without a
# lookup): the machine's own name, when /etc/hosts gives it 127.x.
# A thread is a clone with CLONE_THREAD (ASan's leak check clones a
# tracer at exit that is none, and fails under strace: off for this run).
h=$(hostname)
if [ -z "${NGINX_PORT:-}" ] || ! getent ahostsv4 "$h" | grep -q '^127\.'; then
    echo "skip redirect_no_thread: no nginx, or $h is not a loopback name"
elif ! command -v strace >/dev/null; then
    echo "skip redirect_no_thread: strace is not installed"
elif start_bad_server "$T/www" "http://$h:$NGINX_PORT"; then
    rm -rf "$T/xo"
    expect redirect_other_name env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -e trace=clone,clone3 -o "$T/strace.log" \
        "$WPACK" extract -q -o "$T/xo" "http://127.0.0.1:$BAD_PORT/redirect/a.wpack" t1
    cmp -s "$T/xo/t1.npy" "$T/local/t1.npy" && pass redirect_other_name_same_bytes ||
        fail redirect_other_name_same_bytes
    ! grep -q CLONE_THREAD "$T/strace.log" && pass redirect_no_thread ||
        fail redirect_no_thread "$(head -c 300 "$T/strace.log")"
    # many requests at once, all redirected to that name before any is
    # pinned: each is made again and finds the one lookup (one request
    # refused as "looked up already" failed the whole read)
    rm -rf "$T/xo"
    expect redirect_other_name_parallel env WPACK_REMOTE_CHUNK=4096 WPACK_REMOTE_CONNECTIONS=8 \
        "$WPACK" extract -q -o "$T/xo" "http://127.0.0.1:$BAD_PORT/redirect/a.wpack"
    for f in "$T"/local/*.npy; do
        cmp -s "$f" "$T/xo/$(basename "$f")" || { fail redirect_other_name_parallel_bytes "$f"; break; }
    done && pass redirect_other_name_parallel_bytes
else
    fail redirect_no_thread "remote_server.py did not start: $(cat "$T/bad.err")"
fi
# ... and one that does not resolve is said so, naming the redirect and host
if start_bad_server "$T/www" "http://no-such-host.invalid:1"; then
    extract_fails redirect_unresolved "GET bytes 0-65535: the redirect to http://no-such-host\.invalid:1/a\.wpack\?k=\*\*\*: cannot resolve host 'no-such-host\.invalid' \(a redirect's target\)" \
        "http://127.0.0.1:$BAD_PORT/redirect/a.wpack?k=secret"
else
    fail redirect_unresolved "remote_server.py did not start: $(cat "$T/bad.err")"
fi

# ---------------------------------------------------------------- S3 SigV4
"$PY" "$TESTS_DIR/cli/remote_server.py" --self-test && pass python_sigv4_matches_aws_example ||
    fail python_sigv4_matches_aws_example
s3() { env AWS_ENDPOINT_URL="$B/s3" AWS_REGION=eu-west-3 "$@"; }
rm -rf "$T/xo"
expect s3_signed s3 AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY='secret/TEST+key' \
    "$WPACK" extract -q -o "$T/xo" s3://bucket/a.wpack t1
cmp -s "$T/xo/t1.npy" "$T/local/t1.npy" && pass s3_same_bytes || fail s3_same_bytes
expect s3_inspect s3 AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY='secret/TEST+key' \
    "$WPACK" verify s3://bucket/a.wpack
expect_fail s3_wrong_secret "HTTP 403 \(access denied.*SignatureDoesNotMatch.*signature mismatch" \
    s3 AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=wrong "$WPACK" inspect s3://bucket/a.wpack
# no key: said so (a key in ~/.aws or an instance role is not read), not
# "check the credentials" of a user who gave none
expect_fail s3_unsigned "HTTP 403 \(access denied: the request was unsigned, no access key given.*no or malformed Authorization" \
    s3 AWS_ACCESS_KEY_ID= "$WPACK" inspect s3://bucket/a.wpack
expect s3_session_token s3 AWS_ACCESS_KEY_ID=AKIDTOKEN AWS_SECRET_ACCESS_KEY=tokensecret \
    AWS_SESSION_TOKEN='tok/en=' "$WPACK" inspect s3://bucket/a.wpack
expect_fail s3_token_missing "HTTP 403.*wrong session token" \
    s3 AWS_ACCESS_KEY_ID=AKIDTOKEN AWS_SECRET_ACCESS_KEY=tokensecret "$WPACK" inspect s3://bucket/a.wpack
expect_fail s3_bad_url "s3://BUCKET/KEY" "$WPACK" inspect s3://bucket-only
# a bucket in another region than AWS_REGION (unset: us-east-1): S3 says
# which (x-amz-bucket-region), and the open asks again there, as AWS's
# SDKs do; the shards of a set go there at once
s3key() { s3 AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY='secret/TEST+key' "$@"; }
mkdir -p "$T/www/set"
"$WPACK" create -q --shard-size 200K -o "$T/www/set/m.wpack" "$T"/t0.npy "$T"/t1.npy "$T"/t2.npy
# refused_once NAME STATUS URL [ENV...]: verify of URL works, the fake S3
# having answered STATUS once (the requests that learnt what to mend)
refused_once() {
    local name=$1 status=$2 url=$3; shift 3
    : >"$T/requests.log"
    expect "$name" s3key "$@" "$WPACK" verify "$url"
    local n; n=$(grep -c "^s3 .* $status\$" "$T/requests.log")
    [ "$n" = 1 ] && pass "${name}_once" || fail "${name}_once" "$n answered $status"
}
refused_once s3_other_region 400 s3://inwest2/a.wpack
refused_once s3_other_region_set 400 s3://inwest2/set/m.wpack
expect s3_other_region_right s3key AWS_REGION=us-west-2 "$WPACK" inspect s3://inwest2/a.wpack
# failing there, the message says in which region it asked
expect_fail s3_other_region_named "HTTP 403 .*SignatureDoesNotMatch.* \(in region us-west-2, where S3 said the bucket is\)" \
    s3 AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=wrong "$WPACK" inspect s3://inwest2/a.wpack
# a host whose clock is an hour behind S3's (a signature is good for 15
# minutes): S3 says RequestTimeTooSkewed with its Date, and the request is
# signed again at S3's time, as AWS's SDKs do; once per handle, not per
# request, and whatever WPACK_REMOTE_RETRIES says; a set's shards are
# signed at the time the manifest's open learnt
refused_once s3_clock_skew 403 s3://skewed/a.wpack WPACK_REMOTE_RETRIES=0
refused_once s3_clock_skew_set 403 s3://skewed/set/m.wpack
# keys as S3 keeps them: a space, '+', '?', '#', '%', UTF-8, a doubled '/'
# (the server finds the file by the key decoded, and signs the canonical
# URI it makes from that key: each byte but unreserved ones and '/' %XX)
k='k ey/a+b?c#d%25 ü.wpack'
mkdir -p "$T/www/k ey"
cp "$T/www/a.wpack" "$T/www/$k"
n=0
for key in "$k" "k ey//a+b?c#d%25 ü.wpack"; do
    n=$((n + 1))
    rm -rf "$T/xo"
    expect "s3_key_chars_$n" s3 AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY='secret/TEST+key' \
        "$WPACK" extract -q -o "$T/xo" "s3://bucket/$key" t1
    cmp -s "$T/xo/t1.npy" "$T/local/t1.npy" && pass "s3_key_chars_${n}_same" || fail "s3_key_chars_${n}_same"
done
finish
