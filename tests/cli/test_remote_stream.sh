#!/bin/bash
# test_remote_stream.sh - how `wpack extract URL` uses the network and
# memory (issue 17, bench/remote/README.md), counted from nginx's logs:
# idle connections are kept between reads (no more TCP connections than
# WPACK_REMOTE_CONNECTIONS); one 8 MiB tensor is fetched as one range
# request per connection, not one request; a 200 MiB tensor is streamed
# through bounded windows (peak RSS well under its size) and hashed as it
# arrives; a corrupted byte in it leaves no output file and an error
# naming the tensor.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W" "$T/many" "$T/one" "$T/big"
"$PY" - "$T" <<'PYEOF'
import numpy as np, os, sys
t = sys.argv[1]
r = np.random.default_rng(17)
for k in range(12):   # 12 reads of 4 MiB: 16 pieces each
    np.save(f"{t}/many/t{k:02d}.npy", r.standard_normal((1024, 1024)).astype(np.float32))
np.save(f"{t}/one/w.npy", r.standard_normal((1024, 2048)).astype(np.float32))  # 8 MiB
big = np.frombuffer(os.urandom(200 << 20), dtype=np.float32).reshape(51200, 1024)
np.save(f"{t}/big/huge.npy", big)  # 200 MiB
np.save(f"{t}/big/small.npy", r.standard_normal((4, 4)).astype(np.float32))
PYEOF
expect create_many "$WPACK" create -q -o "$W/many.wpack" "$T/many"
expect create_one "$WPACK" create -q -o "$W/one.wpack" "$T/one"
expect create_big "$WPACK" create -q -o "$W/big.wpack" "$T/big"
rm -rf "$T/many" "$T/one"

need_nginx "$W"
U="http://127.0.0.1:$NGINX_PORT"
LOG="$T/nginx/conn.log"
clear_log() { sleep 0.3; : >"$LOG"; }

# (a) 12 tensors with 16 connections: every request on one of at most 16
# TCP connections (libcurl's default cache closed most between reads).
clear_log
expect extract_many env WPACK_REMOTE_CONNECTIONS=16 WPACK_REMOTE_CHUNK=256K \
    "$WPACK" extract -q -o "$T/out_many" "$U/many.wpack"
sleep 0.3
conns=$(awk '{print $1}' "$LOG" | sort -u | wc -l)
reqs=$(wc -l <"$LOG")
if [ "$reqs" -ge 150 ] && [ "$conns" -le 16 ]; then
    pass connections_reused
    echo "note: $reqs requests over $conns TCP connections"
else
    fail connections_reused "$reqs requests over $conns TCP connections (want >= 150 over <= 16)"
fi
n=$(ls "$T/out_many" | wc -l)
[ "$n" -eq 12 ] && pass extract_many_files || fail extract_many_files "$n files, want 12"

# (b) one 8 MiB tensor, 8 connections x 8 MiB chunks: >= 8 range requests
# of at most 1 MiB each cover it (before: one 8 MiB request, one connection).
clear_log
expect extract_one env WPACK_REMOTE_CONNECTIONS=8 WPACK_REMOTE_CHUNK=8M \
    "$WPACK" extract -q -o "$T/out_one" "$U/one.wpack"
sleep 0.3
pieces=$(awk '$4 == 206 && $5 >= 262144 && $5 <= 1048576 {n++; b += $5} END {print n + 0, b + 0}' "$LOG")
if [ "${pieces% *}" -ge 8 ] && [ "${pieces#* }" -ge 8388608 ]; then
    pass tensor_split_over_connections
else
    fail tensor_split_over_connections "requests of 256 KiB-1 MiB: '$pieces' (count bytes); log: $(cat "$LOG")"
fi
expect_py_equal() { # NAME NPY_A NPY_B
    if "$PY" -c 'import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); sys.exit(0 if a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes() else 1)' "$2" "$3"; then
        pass "$1"
    else
        fail "$1" "$2 differs from $3"
    fi
}

# (c) the 200 MiB tensor streamed: peak RSS bounded by connections x chunk
# (64 MiB by default) plus the process, not by the tensor's 200 MiB.
bound=$((64 + 48))
if ldd "$WPACK" 2>/dev/null | grep -q 'libasan\|libubsan'; then
    bound=$((bound + 96))
    echo "note: sanitizer build: RSS bound $bound MiB (ASan's own memory counts)"
fi
clear_log
if /usr/bin/time -f %M -o "$T/rss" "$WPACK" extract -q -o "$T/out_big" "$U/big.wpack" \
    >/dev/null 2>"$T/err"; then
    pass extract_big
    kib=$(tail -n 1 "$T/rss")
    if [ "$kib" -lt $((bound * 1024)) ]; then
        pass big_rss_bounded
        echo "note: peak RSS $((kib / 1024)) MiB for a 200 MiB tensor (bound $bound MiB)"
    else
        fail big_rss_bounded "peak RSS $((kib / 1024)) MiB, bound $bound MiB"
    fi
else
    fail extract_big "$(cat "$T/err")"
fi
expect_py_equal big_equal "$T/out_big/huge.npy" "$T/big/huge.npy"
expect_py_equal small_equal "$T/out_big/small.npy" "$T/big/small.npy"

# A corrupted byte deep in the streamed tensor (after windows were written
# to the temporary file): extract fails naming it, and leaves no huge.npy
# and no temporary.
"$PY" - "$W/big.wpack" <<'PYEOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(0, 2)
    n = f.tell()
    f.seek(n * 3 // 4)   # inside huge: it is ~all of the file
    b = f.read(1)
    f.seek(n * 3 // 4)
    f.write(bytes([b[0] ^ 0x40]))
PYEOF
expect_fail corrupt_streamed "tensor 'huge'.*WPACK_E_CHECKSUM" \
    "$WPACK" extract -q -o "$T/out_bad" "$U/big.wpack"
left=$(ls -A "$T/out_bad" 2>/dev/null | grep -c huge)
[ "$left" -eq 0 ] && pass corrupt_leaves_nothing || fail corrupt_leaves_nothing "$(ls -A "$T/out_bad")"
finish
