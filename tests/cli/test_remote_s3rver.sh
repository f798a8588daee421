#!/bin/bash
# test_remote_s3rver.sh - s3:// archives from a real S3-compatible server
# (issue 17): s3rver (npm @20minutes/s3rver, pinned in tools/s3rver/ and
# installed by tools/deps.sh) on 127.0.0.1, which checks every request's
# SigV4 signature itself (tools/s3rver/serve.js also refuses unsigned
# ones). The archives are uploaded by an independent client (curl's own
# SigV4, --aws-sigv4), never by wpack; then inspect, verify, extract,
# export, run and resolve of s3://BUCKET/KEY equal byte for byte the
# local result, for a plain, a compressed and a sharded archive, and
# Python's safe_open("s3://...") returns the same arrays. A wrong secret
# or key is a 403 naming the URL, a missing key or bucket a 404, and
# neither leaves an output file.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

S3DIR="$TESTS_DIR/../tools/s3rver"
KEY=AKIDWPACKTEST
SECRET='wpack/Secret+Key=1'
REGION=eu-west-3

W="$T/www"
mkdir -p "$W/set" "$T/in"
"$PY" - "$T/in" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
r = np.random.default_rng(29)
for i in range(3):                      # 256 KiB each: outside both open requests
    np.save(f"{d}/t{i}.npy", r.standard_normal((256, 256)).astype(np.float32))
np.save(f"{d}/0.weight.npy", r.standard_normal((8, 4)).astype(np.float32))
np.save(f"{d}/0.bias.npy", r.standard_normal(8).astype(np.float32))
np.save(f"{d}/2.weight.npy", r.standard_normal((3, 8)).astype(np.float32))
np.save(f"{d}/2.bias.npy", r.standard_normal(3).astype(np.float32))
np.save(f"{d}/zeros.npy", np.zeros((512, 512), dtype=np.float32))      # compresses
np.save(f"{d}/x.npy", r.standard_normal((2, 4)).astype(np.float32))
PYEOF
mv "$T/in/x.npy" "$T/x.npy"
expect create_plain "$WPACK" create -q -o "$W/a.wpack" "$T/in" --layers 0,1=relu,2
expect create_zstd "$WPACK" create -q --compress zstd:3 -o "$W/z.wpack" "$T/in"
expect create_set "$WPACK" create -q --shard-size 300K -o "$W/set/m.wpack" "$T/in"
[ "$(ls "$W/set" | wc -l)" -ge 3 ] && pass set_has_shards || fail set_has_shards "$(ls "$W/set")"
# a set whose key needs percent-encoding (space, plus, UTF-8): its shards'
# names carry the manifest's
SP="dir one/modèle+1.wpack"
mkdir -p "$W/dir one"
expect create_set_odd_name "$WPACK" create -q --shard-size 300K -o "$W/$SP" "$T/in"

# ------------------------------------------------------------ the server
if ! command -v node >/dev/null || [ ! -f "$S3DIR/node_modules/@20minutes/s3rver/package.json" ]; then
    fail s3rver_installed "s3rver is not installed in $S3DIR/node_modules (tools/deps.sh runs npm ci there; needs node and npm)"
    finish
    exit 1
fi
pass s3rver_installed
LOGF="$T/s3.log"
mkdir -p "$T/s3data"
node "$S3DIR/serve.js" "$T/s3data" "$T/s3.port" "$KEY" "$SECRET" "$LOGF" >"$T/s3.out" 2>&1 &
s3pid=$!
SERVER_PIDS="$SERVER_PIDS $s3pid"
for _ in $(seq 600); do # node and s3rver load slowly on a busy machine
    [ -s "$T/s3.port" ] && break
    kill -0 "$s3pid" 2>/dev/null || break
    sleep 0.1
done
if [ ! -s "$T/s3.port" ]; then
    fail s3rver_started "$(head -c 600 "$T/s3.out")"
    finish
    exit 1
fi
pass s3rver_started
EP="http://127.0.0.1:$(cat "$T/s3.port")"

# s3curl METHOD PATH [FILE]: curl signs with its own SigV4 code (not
# wpack's); prints the HTTP status. The payload hash goes in
# x-amz-content-sha256, which S3 (and s3rver) require.
s3curl() {
    local method=$1 path=$2 file=${3:-} hash
    local args=(-sS -o "$T/curl.body" -w '%{http_code}' --aws-sigv4 "aws:amz:$REGION:s3" --user "$KEY:$SECRET")
    if [ -n "$file" ]; then
        hash=$(sha256sum "$file" | cut -d' ' -f1)
        args+=(-T "$file")
    else
        hash=$(printf '' | sha256sum | cut -d' ' -f1)
        args+=(-X "$method")
    fi
    curl "${args[@]}" -H "x-amz-content-sha256: $hash" "$EP$path"
}
[ "$(s3curl PUT /models)" = 200 ] && pass bucket_created || fail bucket_created "$(cat "$T/curl.body")"
# every file under $W as the object of the same key, the path
# percent-encoded as S3 signs it (curl signs the path as given)
up_ok=0
while IFS= read -r -d '' f; do
    up_ok=$((up_ok + 1))
    enc=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/"))' "$f")
    st=$(s3curl PUT "/models/$enc" "$W/$f")
    [ "$st" = 200 ] || { up_ok=-1000; fail "upload_$f" "HTTP $st: $(cat "$T/curl.body")"; }
done < <(cd "$W" && find . -type f -printf '%P\0')
[ $up_ok -ge 9 ] && pass uploads_by_curl || fail uploads_by_curl "$up_ok files"
# the server checks signatures: curl with a wrong secret is refused
st=$(curl -sS -o "$T/curl.body" -w '%{http_code}' --aws-sigv4 "aws:amz:$REGION:s3" --user "$KEY:wrong" \
    -H "x-amz-content-sha256: $(printf '' | sha256sum | cut -d' ' -f1)" "$EP/models/a.wpack")
[ "$st" = 403 ] && grep -q SignatureDoesNotMatch "$T/curl.body" && pass server_checks_signatures ||
    fail server_checks_signatures "HTTP $st: $(head -c 300 "$T/curl.body")"

export AWS_ENDPOINT_URL="$EP" AWS_REGION="$REGION" AWS_ACCESS_KEY_ID="$KEY" AWS_SECRET_ACCESS_KEY="$SECRET"
unset AWS_ENDPOINT_URL_S3 AWS_DEFAULT_REGION AWS_SESSION_TOKEN

S="s3://models"
for a in a.wpack z.wpack set/m.wpack; do
    n=${a%%.wpack}
    reads_equal "${n//\//_}" "$W/$a" "$S/$a"
done
# the odd-named set: its shards' keys are encoded once, not twice
reads_equal odd_name "$W/$SP" "$S/$SP"
# a session token is sent and signed (x-amz-security-token)
expect session_token_signed env AWS_SESSION_TOKEN='tok/en=' "$WPACK" verify "$S/z.wpack"

# run: a Linear/ReLU stack from the bucket's weights, as from the file
expect run_s3 "$WPACK" run "$S/a.wpack" --input "$T/x.npy" -o "$T/yu.npy"
"$WPACK" run "$W/a.wpack" --input "$T/x.npy" -o "$T/yl.npy"
cmp -s "$T/yu.npy" "$T/yl.npy" && pass run_same_bytes || fail run_same_bytes

# resolve: inline blobs come from the fetched (checked) bytes
cat >"$T/m.mlir" <<'MLIR'
module {
  ml_program.global private @"0.weight"(#ml_program.extern : tensor<8x4xf32>) : tensor<8x4xf32>
  ml_program.global private @"2.bias"(#ml_program.extern : tensor<3xf32>) : tensor<3xf32>
}
MLIR
expect resolve_s3 "$WPACK" resolve -q "$S/a.wpack" "$T/m.mlir" -o "$T/u.mlir" --emit inline
"$WPACK" resolve -q "$W/a.wpack" "$T/m.mlir" -o "$T/l.mlir" --emit inline
cmp -s "$T/u.mlir" "$T/l.mlir" && pass resolve_same_bytes || fail resolve_same_bytes

# What S3 saw: path-style GETs, each a signed range request answered 206;
# inspect is the two range GETs of the open (first 64 KiB, last 256 KiB).
: >"$LOGF"
"$WPACK" inspect "$S/a.wpack" >/dev/null 2>&1
size=$(stat -c %s "$W/a.wpack")
want="GET /models/a.wpack \"bytes=0-65535\" 206
GET /models/a.wpack \"bytes=$((size - 262144))-$((size - 1))\" 206"
[ "$(cat "$LOGF")" = "$want" ] && pass inspect_two_range_gets || fail inspect_two_range_gets "$(cat "$LOGF")"
# a sharded set: one tensor fetches the manifest and only the shards opened
: >"$LOGF"
rm -rf "$T/s1"
expect extract_from_set "$WPACK" extract -q -o "$T/s1" "$S/set/m.wpack" t2
cmp -s "$T/s1/t2.npy" "$T/xl/t2.npy" && pass set_tensor_same_bytes || fail set_tensor_same_bytes
bad=$(grep -v '^GET /models/set/[^ ]* "bytes=[0-9]*-[0-9]*" 206$' "$LOGF")
[ -s "$LOGF" ] && [ -z "$bad" ] && pass set_only_ranged_gets || fail set_only_ranged_gets "$bad"

# ------------------------------------------------------------ errors
# no_output NAME: the failed extract left nothing
no_output() { [ ! -e "$T/xo" ] && pass "${1}_no_output" || fail "${1}_no_output" "$(ls -R "$T/xo")"; }
rm -rf "$T/xo"
expect_fail wrong_secret "s3://models/a.wpack: GET bytes 0-65535: HTTP 403 \(access denied: check the credentials\): SignatureDoesNotMatch: The request signature we calculated does not match.*\[WPACK_E_IO\]" \
    env AWS_SECRET_ACCESS_KEY=wrong "$WPACK" extract -q -o "$T/xo" "$S/a.wpack" t1
no_output wrong_secret
expect_fail wrong_key "s3://models/a.wpack: .*HTTP 403.*InvalidAccessKeyId" \
    env AWS_ACCESS_KEY_ID=AKIDNOBODY "$WPACK" extract -q -o "$T/xo" "$S/a.wpack" t1
no_output wrong_key
expect_fail unsigned "s3://models/a.wpack: .*HTTP 403.*AccessDenied" \
    env AWS_ACCESS_KEY_ID= AWS_SECRET_ACCESS_KEY= "$WPACK" inspect "$S/a.wpack"
expect_fail missing_key "s3://models/nope.wpack: GET bytes 0-65535: HTTP 404 \(not found\): NoSuchKey: The specified key does not exist.*\[WPACK_E_IO\]" \
    "$WPACK" extract -q -o "$T/xo" "$S/nope.wpack"
no_output missing_key
expect_fail missing_bucket "s3://nobucket/a.wpack: .*HTTP 404.*NoSuchBucket" "$WPACK" inspect s3://nobucket/a.wpack

# ------------------------------------------------------------ Python
if py_wpack - "$T/xl" <<'PYEOF' >"$T/py.out" 2>&1; then pass python_safe_open_s3; else fail python_safe_open_s3 "$(tail -5 "$T/py.out")"; fi
import os, sys
import numpy as np
import wpack
local = sys.argv[1]
for url in ("s3://models/a.wpack", "s3://models/z.wpack", "s3://models/set/m.wpack"):
    with wpack.safe_open(url) as f:          # endpoint, region, keys from AWS_*
        names = sorted(f.keys())
        assert names == sorted(n[:-4] for n in os.listdir(local)), (url, names)
        for n in names:
            want = np.load(os.path.join(local, n + ".npy"))
            got = f.get_tensor(n)
            assert got.dtype == want.dtype and got.shape == want.shape, (url, n)
            assert got.tobytes() == want.tobytes(), (url, n)
try:
    wpack.safe_open("s3://models/a.wpack", secret_key="wrong")
except wpack.Error as e:
    assert "HTTP 403" in str(e) and "s3://models/a.wpack" in str(e), str(e)
else:
    raise AssertionError("a wrong secret opened")
print("ok")
PYEOF

finish
