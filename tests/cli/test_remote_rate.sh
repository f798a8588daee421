#!/bin/bash
# test_remote_rate.sh - WPACK_REMOTE_MAX_RATE (max_bytes_per_s) is one cap
# for all connections together (issue 17), timed against nginx on loopback
# with generous bounds: 2 MiB of tensor data (plus the open's 320 KiB) at
# 1 MiB/s takes at least 1.5 s whether it travels as one request or as 32
# chunks over 8 connections; and one request is not held to a share of the
# cap (the old per-connection split ran it at 1/8 of it: over 16 s).
# Uncapped, 16 MiB (at least 15 s at the cap) comes in well under 8 s: a
# bound loose enough for an ASan build on a loaded machine (about 1.5 s);
# the 2 MiB archive's bound of 1.4 s was not (0.8-1 s seen there).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W" "$T/in" "$T/in16"
"$PY" - "$T/in" "$T/in16" <<'PYEOF'
import numpy as np, sys
r = np.random.default_rng(173)
np.save(f"{sys.argv[1]}/big.npy", r.standard_normal((512, 1024)).astype(np.float32))  # 2 MiB
np.save(f"{sys.argv[1]}/small.npy", r.standard_normal((4, 4)).astype(np.float32))
np.save(f"{sys.argv[2]}/huge.npy", r.standard_normal((4096, 1024)).astype(np.float32))  # 16 MiB
PYEOF
expect create "$WPACK" create -q -o "$W/a.wpack" "$T/in"
expect extract_local "$WPACK" extract -q -o "$T/xl" "$W/a.wpack"
expect create_huge "$WPACK" create -q -o "$W/h.wpack" "$T/in16"
expect extract_local_huge "$WPACK" extract -q -o "$T/xl16" "$W/h.wpack"
need_nginx "$W"

# timed NAME MIN_S MAX_S ARCHIVE LOCAL_DIR [ENV=V...]: extract ARCHIVE from
# nginx at 1 MiB/s, the output equal to LOCAL_DIR, in MIN_S..MAX_S seconds.
timed() {
    local name=$1 lo=$2 hi=$3 URL="http://127.0.0.1:$NGINX_PORT/$4" xl=$5; shift 5
    rm -rf "$T/xu"
    local t0 t1
    t0=$(date +%s.%N)
    if ! env WPACK_REMOTE_MAX_RATE=1M "$@" "$WPACK" extract -q -o "$T/xu" "$URL" 2>"$T/err"; then
        fail "$name" "$(head -c 300 "$T/err")"; return
    fi
    t1=$(date +%s.%N)
    diff -r "$T/xu" "$xl" >/dev/null || { fail "$name" "output differs"; return; }
    if awk -v a="$t0" -v b="$t1" -v lo="$lo" -v hi="$hi" 'BEGIN { d = b - a; exit !(d >= lo && d <= hi) }'; then
        pass "$name"
    else
        fail "$name" "took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s, want $lo..$hi s"
    fi
}
timed rate_one_request 1.5 12 a.wpack "$T/xl"
timed rate_many_connections 1.5 30 a.wpack "$T/xl" WPACK_REMOTE_CHUNK=64K WPACK_REMOTE_CONNECTIONS=8
timed rate_uncapped_fast 0 8 h.wpack "$T/xl16" WPACK_REMOTE_MAX_RATE=
finish
