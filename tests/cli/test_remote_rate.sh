#!/bin/bash
# test_remote_rate.sh - WPACK_REMOTE_MAX_RATE (max_bytes_per_s) is one cap
# for all connections together (issue 17), timed against nginx on loopback
# with generous bounds: 2 MiB of tensor data (plus the open's 320 KiB) at
# 1 MiB/s takes at least 1.5 s whether it travels as one request or as 32
# chunks over 8 connections; and one request is not held to a share of the
# cap (the old per-connection split ran it at 1/8 of it: over 16 s).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W" "$T/in"
"$PY" - "$T/in" <<'PYEOF'
import numpy as np, sys
r = np.random.default_rng(173)
np.save(f"{sys.argv[1]}/big.npy", r.standard_normal((512, 1024)).astype(np.float32))  # 2 MiB
np.save(f"{sys.argv[1]}/small.npy", r.standard_normal((4, 4)).astype(np.float32))
PYEOF
expect create "$WPACK" create -q -o "$W/a.wpack" "$T/in"
expect extract_local "$WPACK" extract -q -o "$T/xl" "$W/a.wpack"
need_nginx "$W"
URL="http://127.0.0.1:$NGINX_PORT/a.wpack"

# timed NAME MIN_S MAX_S [ENV=V...]: extract the URL at 1 MiB/s, the
# output equal to the local one, in MIN_S..MAX_S seconds.
timed() {
    local name=$1 lo=$2 hi=$3; shift 3
    rm -rf "$T/xu"
    local t0 t1
    t0=$(date +%s.%N)
    if ! env WPACK_REMOTE_MAX_RATE=1M "$@" "$WPACK" extract -q -o "$T/xu" "$URL" 2>"$T/err"; then
        fail "$name" "$(head -c 300 "$T/err")"; return
    fi
    t1=$(date +%s.%N)
    diff -r "$T/xu" "$T/xl" >/dev/null || { fail "$name" "output differs"; return; }
    if awk -v a="$t0" -v b="$t1" -v lo="$lo" -v hi="$hi" 'BEGIN { d = b - a; exit !(d >= lo && d <= hi) }'; then
        pass "$name"
    else
        fail "$name" "took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s, want $lo..$hi s"
    fi
}
timed rate_one_request 1.5 12
timed rate_many_connections 1.5 30 WPACK_REMOTE_CHUNK=64K WPACK_REMOTE_CONNECTIONS=8
timed rate_uncapped_fast 0 1.4 WPACK_REMOTE_MAX_RATE=
finish
