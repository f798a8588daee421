#!/bin/bash
# test_remote_readahead.sh - `wpack extract URL` reads ahead along its plan
# (wpack_read_plan, remote/readahead.c): requests counted from nginx's
# access log; outputs byte-identical to a local extract; misbehaving
# servers (tests/cli/remote_server.py) still end in the right bytes or a
# clear error with no output; memory stays bounded (/usr/bin/time %M).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W" "$T/small" "$T/mixed" "$T/big"
"$PY" - "$T" <<'PYEOF'
import numpy as np, os, sys
t = sys.argv[1]
r = np.random.default_rng(23)
for k in range(200):  # 200 tensors of 4 KiB
    np.save(f"{t}/small/n{k:03d}.npy", r.standard_normal(1024).astype(np.float32))
for k in range(30):   # small and 3 MiB tensors in turn
    shape = (768, 1024) if k % 5 == 2 else (k + 1,)
    np.save(f"{t}/mixed/m{k:02d}.npy", r.standard_normal(shape).astype(np.float32))
for k in range(4):    # 4 x 16 MiB
    a = np.frombuffer(os.urandom(16 << 20), dtype=np.float32).reshape(4096, 1024)
    np.save(f"{t}/big/b{k}.npy", a)
PYEOF
expect create_small "$WPACK" create -q -o "$W/small.wpack" "$T/small"
expect create_mixed "$WPACK" create -q -o "$W/mixed.wpack" "$T/mixed"
expect create_big "$WPACK" create -q -o "$W/big.wpack" "$T/big"
rm -rf "$T/small" "$T/mixed" "$T/big"
for a in small mixed big; do
    "$WPACK" extract -q -o "$T/local_$a" "$W/$a.wpack" || fail "local_extract_$a"
done

if ! start_nginx "$W"; then
    fail nginx_started "nginx is not installed or did not start (tools/deps.sh installs it)"
    finish
    exit 1
fi
pass nginx_started
U="http://127.0.0.1:$NGINX_PORT"
LOG="$T/nginx/access.log"
# requests NAME: lines nginx logged since the last call (it logs after
# the response: wait for the count to settle)
requests() {
    local n m
    n=$(wc -l <"$LOG")
    for _ in 1 2 3 4 5; do
        sleep 0.2
        m=$(wc -l <"$LOG")
        [ "$m" -eq "$n" ] && break
        n=$m
    done
    echo $((n - ${LAST:-0}))
    LAST=$n
}
LAST=$(wc -l <"$LOG")

# (a) 200 tensors of 4 KiB: merged into a few range requests. Before the
# read-ahead each was one request (200 + the open's 2).
expect extract_small "$WPACK" extract -q -o "$T/out_small" "$U/small.wpack"
n=$(requests)
if [ "$n" -le 8 ]; then
    pass small_merged
    echo "note: 200 tensors of 4 KiB in $n requests"
else
    fail small_merged "$n requests for 200 tensors of 4 KiB (want <= 8)"
fi
diff -r "$T/out_small" "$T/local_small" >/dev/null && pass small_same_bytes || fail small_same_bytes

# (b) small and 3 MiB tensors in turn, with tiny steps (2 connections x
# 1 MiB chunks: 512 KiB steps): tensors spread over several steps, steps
# holding several tensors; same bytes as local
expect extract_mixed env WPACK_REMOTE_CONNECTIONS=2 WPACK_REMOTE_CHUNK=1M \
    "$WPACK" extract -q -o "$T/out_mixed" "$U/mixed.wpack"
n=$(requests)
diff -r "$T/out_mixed" "$T/local_mixed" >/dev/null && pass mixed_same_bytes || fail mixed_same_bytes
# 6 x 3 MiB in 512 KiB steps: 36 requests, the 24 small ones merged into
# the steps around them (one request each before: 24 more)
if [ "$n" -le 50 ]; then pass mixed_requests; echo "note: mixed: $n requests"
else fail mixed_requests "$n requests (want <= 50)"; fi

# (c) a subset, in the order extract reads it (by index), skipping most
expect extract_subset "$WPACK" extract -q -o "$T/out_sub" "$U/mixed.wpack" m03 m07 m12 m29
for f in m03 m07 m12 m29; do
    cmp -s "$T/out_sub/$f.npy" "$T/local_mixed/$f.npy" || fail "subset_same_bytes_$f"
done
[ "$(ls "$T/out_sub" | wc -l)" -eq 4 ] && pass subset_files || fail subset_files
requests >/dev/null

# (d) memory: 4 x 16 MiB with 4 connections x 1 MiB chunks: read-ahead of
# 2 x 1 MiB steps, stream windows of 2 MiB; peak RSS far below one tensor
# plus the read-ahead of the next (it would be > 32 MiB unbounded)
if [ -x /usr/bin/time ]; then
    expect extract_big env WPACK_REMOTE_CONNECTIONS=4 WPACK_REMOTE_CHUNK=1M \
        /usr/bin/time -f %M -o "$T/rss" "$WPACK" extract -q -o "$T/out_big" "$U/big.wpack"
    rss=$(tail -n1 "$T/rss") bound=28000
    if ldd "$WPACK" 2>/dev/null | grep -q 'libasan\|libubsan'; then
        bound=$((bound + 96 * 1024)) # ASan's own memory counts (as in test_remote_stream.sh)
        echo "note: sanitizer build: RSS bound $bound KiB"
    fi
    if [ "$rss" -lt "$bound" ]; then pass big_rss_bounded; echo "note: peak RSS $((rss / 1024)) MiB"
    else fail big_rss_bounded "peak RSS $rss KiB (want < $bound)"; fi
    diff -r "$T/out_big" "$T/local_big" >/dev/null && pass big_same_bytes || fail big_same_bytes
else
    fail big_rss_bounded "/usr/bin/time is not installed (apt-get install time)"
fi
requests >/dev/null

# (e) export and verify read ahead too: the 200 small tensors in few requests
expect verify_small "$WPACK" verify "$U/small.wpack"
n=$(requests)
[ "$n" -le 8 ] && pass verify_merged || fail verify_merged "$n requests (want <= 8)"
expect export_small "$WPACK" export "$U/small.wpack" --to safetensors -o "$T/small.safetensors"
n=$(requests)
[ "$n" -le 8 ] && pass export_merged || fail export_merged "$n requests (want <= 8)"
expect export_local "$WPACK" export "$W/small.wpack" --to safetensors -o "$T/small_local.safetensors"
cmp -s "$T/small.safetensors" "$T/small_local.safetensors" && pass export_same_bytes ||
    fail export_same_bytes

# (g) 2000 tensors of 12 bytes (4 KiB apart: 8 MiB, two steps' budget):
# where a step's budget ends, the step ends; its last bytes were once
# filled with one request per tensor (350 requests: 340 of 12 bytes)
mkdir -p "$T/tiny"
"$PY" - "$T/tiny" <<'PYEOF'
import numpy as np, sys
for k in range(2000):
    np.save(f"{sys.argv[1]}/t{k:04d}.npy", np.full(3, k, dtype=np.float32))
PYEOF
expect create_tiny "$WPACK" create -q -o "$W/tiny.wpack" "$T/tiny"
rm -rf "$T/tiny"
"$WPACK" extract -q -o "$T/local_tiny" "$W/tiny.wpack"
requests >/dev/null
expect extract_tiny "$WPACK" extract -q -o "$T/out_tiny" "$U/tiny.wpack"
n=$(requests)
small=$(tail -n "$n" "$LOG" | awk '$NF < 4096' | wc -l)
if [ "$n" -le 24 ]; then pass tiny_step_ends_at_budget; echo "note: tiny: $n requests"
else fail tiny_step_ends_at_budget "$n requests, $small of them under 4 KiB (want <= 24)"; fi
diff -r "$T/out_tiny" "$T/local_tiny" >/dev/null && pass tiny_same_bytes || fail tiny_same_bytes
# verify reads the padding between the tensors too: planned and merged as
# the tensors are (about twice extract's requests), not one request a gap
# (2000 + extract's before)
expect verify_tiny "$WPACK" verify "$U/tiny.wpack"
n=$(requests)
if [ "$n" -le 48 ]; then pass tiny_verify_padding_merged; echo "note: tiny verify: $n requests"
else fail tiny_verify_padding_merged "$n requests (want <= 48)"; fi
# a non-zero padding byte is still found, through those merged reads
"$PY" - "$W/tiny.wpack" "$W/tinypad.wpack" <<'PYEOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
# the padding after the 1000th tensor (12 bytes of data at a 4 KiB boundary)
off = b.find(bytes(__import__("numpy").full(3, 1000, dtype="<f4")))
assert off > 0 and not any(b[off + 12:off + 4096 - 64])
b[off + 100] = 1
open(sys.argv[2], "wb").write(b)
PYEOF
expect_fail tiny_verify_bad_padding "padding at [0-9]+\.\.[0-9]+ \(before tensor 't1001'\) is not zero" \
    "$WPACK" verify "$U/tinypad.wpack"
requests >/dev/null

# (f) misbehaving servers, with read-ahead in play (every tensor planned)
need_bad_server "$W"
export WPACK_REMOTE_RETRIES=2 WPACK_REMOTE_TIMEOUT=2
same() { # same NAME URL ARCHIVE [ENV...]: extract all, equal to local
    local name=$1 url=$2 a=$3; shift 3
    rm -rf "$T/xo"
    expect "$name" env "$@" "$WPACK" extract -q -o "$T/xo" "$url"
    diff -r "$T/xo" "$T/local_$a" >/dev/null && pass "${name}_same_bytes" ||
        fail "${name}_same_bytes"
}
fails() { # fails NAME REGEX URL [ENV...]: extract fails, no file of the failed tensor
    local name=$1 pat=$2 url=$3; shift 3
    rm -rf "$T/xo"
    expect_fail "$name" "$pat" env "$@" "$WPACK" extract -q -o "$T/xo" "$url"
    [ ! -e "$T/xo" ] || [ "$(ls "$T/xo" | wc -l)" -lt 30 ] && pass "${name}_not_all" ||
        fail "${name}_not_all"
}
same ok_mixed "$B/ok/mixed.wpack" mixed WPACK_REMOTE_CONNECTIONS=2 WPACK_REMOTE_CHUNK=1M
same flaky_mixed "$B/flaky/mixed.wpack" mixed WPACK_REMOTE_CONNECTIONS=2 WPACK_REMOTE_CHUNK=1M
# flipped bytes (default 8 x 8 MiB: every tensor fetched whole, so one
# that fails its check is fetched again, read-ahead dropped and rewound)
cp "$W/mixed.wpack" "$W/mixed2.wpack"
same flipone_mixed "$B/flipone/mixed2.wpack" mixed
fails flip_mixed "tensor 'm[0-9]+': fetched bytes hash to [0-9a-f]+ twice.*\[WPACK_E_CHECKSUM\]" \
    "$B/flip/mixed.wpack"
# streamed in windows (2 x 1 MiB: a 3 MiB tensor is larger than the 1 MiB
# window): checked at its end, not fetched again, no output file
fails flip_streamed "tensor 'm[0-9]+': fetched bytes hash to [0-9a-f]+, the index says" \
    "$B/flip/mixed.wpack" WPACK_REMOTE_CONNECTIONS=2 WPACK_REMOTE_CHUNK=1M
fails changed412_mixed "HTTP 412 \(the object changed since it was opened" \
    "$B/changed412/mixed.wpack" WPACK_REMOTE_CONNECTIONS=2 WPACK_REMOTE_CHUNK=1M
fails truncated_mixed "[Pp]artial|short body" "$B/truncate/mixed.wpack" \
    WPACK_REMOTE_CONNECTIONS=2 WPACK_REMOTE_CHUNK=1M

finish
