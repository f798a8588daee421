#!/bin/bash
# run.sh - GGUF import against cp (issue 18, Benchmark): a GGUF v3 file of
# SIZE_MB (make_gguf.py: f16, f32, Q8_0 and Q4_0 tensors of a Llama-shaped
# model) imported with `wpack create`, against copying the same file:
#   cp FILE COPY                  the peer the goal names (page cache only)
#   cp FILE COPY && sync COPY     the durable peer (wpack fsyncs its archive)
#   wpack create -q -o OUT FILE   XXH3 + weight stats of the float tensors
#   wpack create -q --no-stats    XXH3 only
#   the same two with --no-sync   no fsync: the like-for-like peer of plain cp
# Interleaved (each repetition runs every command once, in turn), median of
# RUNS; printed as ratios "cp time / wpack time" (1.00x: as fast as cp,
# higher: faster) and wpack's median peak RSS (/usr/bin/time %M).
# Goals: >= 0.8x cp, peak RSS < 64 MiB. Never fails on a slow figure.
#
# usage: bench/gguf/run.sh [path/to/wpack]     (default: a private -O2 build)
# env:   SIZE_MB (4096), RUNS (5), BENCH_DIR (default /tmp; needs ~2x SIZE_MB)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3
SIZE_MB=${SIZE_MB:-4096}
RUNS=${RUNS:-5}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "run.sh: $TIME missing (apt-get install time)" >&2; exit 1; }

WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/wpack-bench-gguf.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
if [ $# -ge 1 ]; then
    WPACK=$(realpath "$1")
else
    echo "== building wpack (-O2) in $WORK/build" >&2
    make -s -C "$ROOT" BUILD="$WORK/build" OPT='-O2 -g' SAN= "$WORK/build/wpack" >&2
    WPACK=$WORK/build/wpack
fi
[ -x "$WPACK" ] || { echo "run.sh: no wpack at $WPACK (run make)" >&2; exit 1; }

echo "== making a ${SIZE_MB} MiB GGUF file in $WORK"
"$PY" "$HERE/make_gguf.py" "$WORK/model.gguf" $((SIZE_MB << 20))
GGUF_BYTES=$(stat -c %s "$WORK/model.gguf")
# once, outside the timing: the import is right (exported back, the same
# bytes: make_gguf.py lays files out as wpack's GGUF exporter does)
"$WPACK" create -q -o "$WORK/check.wpack" "$WORK/model.gguf"
"$WPACK" export "$WORK/check.wpack" --to gguf -o "$WORK/back.gguf" >/dev/null 2>"$WORK/err" ||
    { cat "$WORK/err" >&2; exit 1; }
cmp "$WORK/model.gguf" "$WORK/back.gguf" >&2 ||
    { echo "run.sh: the GGUF file does not round-trip through wpack" >&2; exit 1; }
rm -f "$WORK/check.wpack" "$WORK/back.gguf"
sync
cat "$WORK/model.gguf" >/dev/null # in the page cache

. "$HERE/../lib.sh" # timed, secs, rss_mib, ratio, all
bench_after() {
    rm -f "$WORK/out"
    sync "$WORK" # the next command does not pay for this one's writeback
}

for rep in $(seq "$RUNS"); do
    echo "== repetition $rep of $RUNS ($(cut -d' ' -f1-3 /proc/loadavg))"
    timed cp cp "$WORK/model.gguf" "$WORK/out"
    timed cpsync sh -c 'cp "$1" "$2" && sync "$2"' sh "$WORK/model.gguf" "$WORK/out"
    timed create "$WPACK" create -q -o "$WORK/out" "$WORK/model.gguf"
    timed nostats "$WPACK" create -q --no-stats -o "$WORK/out" "$WORK/model.gguf"
    timed nosync "$WPACK" create -q --no-sync -o "$WORK/out" "$WORK/model.gguf"
    timed nostats_nosync "$WPACK" create -q --no-stats --no-sync -o "$WORK/out" "$WORK/model.gguf"
done

echo
echo "CPU:         $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs online)"
echo "file system: $(stat -f -c %T "$WORK") ($WORK)"
echo "load:        $(uptime | sed 's/.*load/load/')"
echo "input:       $GGUF_BYTES bytes of GGUF v3 (f16, f32, Q8_0, Q4_0); median of $RUNS, interleaved"
echo "ratios:      cp time / wpack time (higher is faster; goal >= 0.8x cp, peak RSS < 64 MiB)"
echo
echo "| wpack create | / cp | / (cp && sync) | peak RSS MiB | runs (s) |"
echo "|---|---|---|---|---|"
echo "| stats on (default) | $(ratio cp create) | $(ratio cpsync create) | $(rss_mib create) | $(all create) |"
echo "| --no-stats | $(ratio cp nostats) | $(ratio cpsync nostats) | $(rss_mib nostats) | $(all nostats) |"
echo "| --no-sync (no fsync, as cp) | $(ratio cp nosync) | $(ratio cpsync nosync) | $(rss_mib nosync) | $(all nosync) |"
echo "| --no-stats --no-sync | $(ratio cp nostats_nosync) | $(ratio cpsync nostats_nosync) | $(rss_mib nostats_nosync) | $(all nostats_nosync) |"
echo "(peers' runs (s): cp $(all cp); cp && sync $(all cpsync); cp peak RSS $(rss_mib cp) MiB)"
