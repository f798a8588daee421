#!/bin/bash
# slices.sh - tensor-parallel loading over HTTP (issue 17 and the chunk
# checksums of format 1.2, spec 19b): each of HOSTS "hosts" reads its
# 1/HOSTS of the rows of one EMB_MB embedding with verification, the way
# wpack.safe_open(url).get_slice(name)[a:b] does (Python over
# libwpack-remote, one process per host, one after another). Compared in
# one run, interleaved, median of RUNS:
#   curl -r A-B URL         the peer: the host's rows' bytes, one stream,
#                           nothing checked
#   wpack, chunk checksums  the archive as `wpack create` writes it (1.2):
#                           the chunks holding the rows are fetched, each
#                           checked against its XXH3
#   wpack, --chunk-sums off the same tensor without them (1.0): the whole
#                           tensor is fetched and checked before any row
# wpack's time is the open and the read, timed inside Python (not the
# interpreter's start and imports); curl's is its whole run.
# Printed: each as a ratio "curl time / its time" (higher: faster) and the
# body bytes nginx logged per host against the rows' bytes, with the CPU.
# Add latency with DELAY_MS (delay_proxy.py, as run.sh does; 0: loopback).
# Benchmarks are not tests: this never fails on a slow figure.
#
# usage: bench/remote/slices.sh [path/to/wpack]   (default: build/wpack)
# env:   EMB_MB (1024), HOSTS (8), RUNS (3), DELAY_MS (0), WINDOW_KIB (1024),
#        BENCH_DIR (/tmp; needs ~2x EMB_MB)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3
EMB_MB=${EMB_MB:-1024}
HOSTS=${HOSTS:-8}
RUNS=${RUNS:-3}
DELAY_MS=${DELAY_MS:-0}
WINDOW_KIB=${WINDOW_KIB:-1024}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "slices.sh: $TIME missing (apt-get install time)" >&2; exit 1; }
WPACK=$(realpath "${1:-$ROOT/build/wpack}")
[ -x "$WPACK" ] || { echo "slices.sh: no wpack at $WPACK (run make)" >&2; exit 1; }
LIBDIR=$(dirname "$WPACK")
# a sanitizer build's libraries (test_bench_scripts under ASan) load into
# Python only after the ASan runtime, as tests/cli/lib.sh's py_wpack does
PRELOAD=
if ldd "$WPACK" 2>/dev/null | grep -q libasan; then
    PRELOAD=$(${CC:-cc} -print-file-name=libasan.so)
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/wpack-bench-slices.XXXXXX")
T=$WORK TESTS_DIR=$ROOT/tests
. "$ROOT/tests/cli/remote_lib.sh" # start_nginx; its EXIT trap stops it, removes $T
trap 'exit 130' INT TERM

COLS=1024
ROWS=$(( EMB_MB * 1048576 / (COLS * 4) ))
echo "== an f32 embedding [$ROWS, $COLS] ($EMB_MB MiB) in $WORK"
mkdir -p "$WORK/www"
"$PY" -c "import numpy as np, sys
a = np.lib.format.open_memmap(sys.argv[1], mode='w+', dtype=np.float32, shape=($ROWS, $COLS))
for i in range(0, $ROWS, 65536): a[i:i + 65536] = np.arange(i, min(i + 65536, $ROWS), dtype=np.float32)[:, None]
a.flush()" "$WORK/embed.npy"
"$WPACK" create -q -o "$WORK/www/sums.wpack" "$WORK/embed.npy"
"$WPACK" create -q --chunk-sums off -o "$WORK/www/whole.wpack" "$WORK/embed.npy"
rm -f "$WORK/embed.npy"
OFF=$("$WPACK" inspect --json "$WORK/www/sums.wpack" | grep -o '"offset": [0-9]*' | head -1 | grep -o '[0-9]*$')
cat "$WORK/www/"*.wpack >/dev/null # in the page cache

start_nginx "$WORK/www" || { echo "slices.sh: nginx did not start" >&2; exit 1; }
LOG=$WORK/nginx/access.log
BASE="http://127.0.0.1:$NGINX_PORT"
if [ "$DELAY_MS" -gt 0 ]; then
    "$PY" "$HERE/delay_proxy.py" "$NGINX_PORT" "$WORK/proxy.port" "$DELAY_MS" "$WINDOW_KIB" \
        2>"$WORK/proxy.err" &
    SERVER_PIDS="$SERVER_PIDS $!"
    for _ in $(seq 50); do [ -s "$WORK/proxy.port" ] && break; sleep 0.1; done
    BASE="http://127.0.0.1:$(cat "$WORK/proxy.port")"
fi

. "$HERE/../lib.sh" # timed, secs, ratio
per=$(( ROWS / HOSTS ))
rowbytes=$(( COLS * 4 ))
# host K's rows, as a Python reader would ask for them
# (timed inside: the open and the read, not Python's start and imports)
cat >"$WORK/host.py" <<'PYEOF'
import sys, time, numpy as np, wpack
url, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
with wpack.safe_open(url) as f:
    part = f.get_slice("embed")[lo:hi]
t1 = time.perf_counter()
assert part[0, 0] == lo and part[-1, -1] == hi - 1, (part[0, 0], part[-1, -1])
print(int((t1 - t0) * 1e6), 0)
PYEOF
logged() { awk '$1 == "GET" {b += $NF} END {print b + 0}' "$LOG"; }
echo "== $RUNS interleaved repetitions, $HOSTS hosts of $per rows ($(( per * rowbytes >> 20 )) MiB) each"
for rep in $(seq "$RUNS"); do
    echo "== repetition $rep of $RUNS ($(cut -d' ' -f1-3 /proc/loadavg))"
    for k in $(seq 0 $(( HOSTS - 1 ))); do
        lo=$(( k * per )) hi=$(( (k + 1) * per ))
        a=$(( OFF + lo * rowbytes )) b=$(( OFF + hi * rowbytes - 1 ))
        timed curl curl -sS -f -r "$a-$b" -o /dev/null "$BASE/sums.wpack"
        for v in sums whole; do
            : >"$LOG"
            WPACK_LIBRARY_PATH="$LIBDIR" PYTHONPATH="$ROOT/python" LD_PRELOAD="$PRELOAD" \
                "$PY" "$WORK/host.py" "$BASE/$v.wpack" "$lo" "$hi" >>"$WORK/t.$v"
            sleep 0.2 # nginx logs a request just after its response
            [ "$rep" -gt 1 ] || echo "$(logged)" >>"$WORK/bytes.$v"
        done
    done
done
rows_mib=$(awk -v n=$(( per * rowbytes )) 'BEGIN {printf "%.1f", n / 1048576}')
avg_mib() { awk '{s += $1} END {printf "%.1f", s / NR / 1048576}' "$WORK/bytes.$1"; }
echo
echo "CPU:      $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs online)"
echo "setting:  $([ "$DELAY_MS" -gt 0 ] && echo "+$DELAY_MS ms, ${WINDOW_KIB} KiB window" || echo loopback)"
echo "per host: rows $rows_mib MiB; fetched (nginx body bytes, opens included):" \
     "chunk checksums $(avg_mib sums) MiB, without $(avg_mib whole) MiB"
echo "speed vs curl -r of the rows (median of $(( RUNS * HOSTS )) host reads):" \
     "chunk checksums $(ratio curl sums), without $(ratio curl whole)"
