#!/bin/bash
# run.sh - remote extract against curl and aria2c (issue 17, Benchmark): a
# wpack archive of SIZE_MB of Llama-shaped f16/f32 tensors (make_model.py,
# packed with `wpack create`) served by nginx on 127.0.0.1 (started as
# tests/cli/remote_lib.sh starts it for the tests), fetched whole by
#   curl -o FILE URL                   the peer: one stream
#   aria2c -x16 -s16 URL               16 connections (when installed)
#   wpack extract -o DIR URL           every tensor fetched, checked against
#                                      its XXH3 and written out as .npy, once
#                                      per WPACK_VARIANTS setting (each .npy
#                                      is fsynced: extract is durable)
#   wpack export URL --to safetensors  one output file, like curl's (fsynced)
#   wpack extract --no-sync -o DIR URL the first variant without fsync: like
#                                      for like with curl -o
#   wpack extract --cache DIR ...      the first variant through an empty
#                                      chunk cache (a first run: all fetched
#                                      and stored)
# and on loopback also `curl -o && sync FILE` (the durable peer) and
# `wpack verify URL` (fetch + XXH3 of every byte, nothing written),
# in three settings: straight to nginx on loopback; through delay_proxy.py
# adding DELAY_MS before each request with a per-connection window of
# WINDOW_KIB per DELAY_MS (a TCP stream on a path with that round-trip
# time); and through it with the delay only (no window). Interleaved (each
# repetition runs every command once, in turn), median of RUNS. Printed as
# ratios "curl time / other time" (1.00x: as fast as curl, higher: faster),
# wpack's median peak RSS (/usr/bin/time %M) against connections x chunk,
# and the requests nginx logged for one wpack run.
# Benchmarks are not tests: this never fails on a slow figure.
#
# usage: bench/remote/run.sh [path/to/wpack]   (default: a private -O2 build)
# env:   SIZE_MB (2048), RUNS (5), DELAY_MS (20), WINDOW_KIB (1024),
#        WPACK_VARIANTS ("8x8M 16x2M": CONNECTIONSxCHUNK, the first is
#        wpack's default), BENCH_DIR (default /tmp; needs ~3x SIZE_MB).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3
SIZE_MB=${SIZE_MB:-2048}
RUNS=${RUNS:-5}
DELAY_MS=${DELAY_MS:-20}
WINDOW_KIB=${WINDOW_KIB:-1024}
VARIANTS=${WPACK_VARIANTS:-8x8M 16x2M}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "run.sh: $TIME missing (apt-get install time)" >&2; exit 1; }

WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/wpack-bench-remote.XXXXXX")
# remote_lib.sh's start_nginx / free_port, with its EXIT trap (stop the
# servers, remove $T)
T=$WORK TESTS_DIR=$ROOT/tests
. "$ROOT/tests/cli/remote_lib.sh"
trap 'exit 130' INT TERM

if [ $# -ge 1 ]; then
    WPACK=$(realpath "$1")
else
    echo "== building wpack (-O2) in $WORK/build" >&2
    make -s -C "$ROOT" BUILD="$WORK/build" OPT='-O2 -g' SAN= "$WORK/build/wpack" >&2
    WPACK=$WORK/build/wpack
fi
[ -x "$WPACK" ] || { echo "run.sh: no wpack at $WPACK (run make)" >&2; exit 1; }
ARIA=$(command -v aria2c || true)

echo "== making ${SIZE_MB} MiB of tensors in $WORK"
mkdir -p "$WORK/www"
"$PY" "$HERE/make_model.py" "$WORK/in" $((SIZE_MB << 20))
"$WPACK" create -q -o "$WORK/www/model.wpack" "$WORK/in"
rm -rf "$WORK/in"
ARCHIVE_BYTES=$(stat -c %s "$WORK/www/model.wpack")
NTENSORS=$("$WPACK" inspect "$WORK/www/model.wpack" | sed -n 2p | awk '{print $1}')
sync
cat "$WORK/www/model.wpack" >/dev/null # in the page cache

start_nginx "$WORK/www" || { echo "run.sh: nginx did not start" >&2; exit 1; }
LOG=$WORK/nginx/access.log
# start_proxy WINDOW_KIB: delay_proxy.py in front of nginx; sets PROXY_PORT
start_proxy() {
    rm -f "$WORK/proxy.port"
    "$PY" "$HERE/delay_proxy.py" "$NGINX_PORT" "$WORK/proxy.port" "$DELAY_MS" "$1" 2>"$WORK/proxy.err" &
    SERVER_PIDS="$SERVER_PIDS $!"
    for _ in $(seq 50); do
        [ -s "$WORK/proxy.port" ] && PROXY_PORT=$(cat "$WORK/proxy.port") && return 0
        sleep 0.1
    done
    cat "$WORK/proxy.err" >&2
    exit 1
}
SETTINGS="loopback"
DIRECT="http://127.0.0.1:$NGINX_PORT/model.wpack"
URL_loopback=$DIRECT
if [ "$DELAY_MS" -gt 0 ]; then
    start_proxy "$WINDOW_KIB"
    URL_window="http://127.0.0.1:$PROXY_PORT/model.wpack"
    start_proxy 0
    URL_delay="http://127.0.0.1:$PROXY_PORT/model.wpack"
    SETTINGS="loopback window delay"
fi

. "$HERE/../lib.sh" # timed, secs, rss_mib, ratio
bench_before() { rm -rf "$WORK/out"; mkdir "$WORK/out"; }
mibs() { awk -v t="$(secs "$1")" -v n="$ARCHIVE_BYTES" 'BEGIN {printf "%.0f", n / 1048576 / (t / 1e6)}'; }

echo "== $RUNS interleaved repetitions: $SETTINGS"
for rep in $(seq "$RUNS"); do
    echo "== repetition $rep of $RUNS ($(cut -d' ' -f1-3 /proc/loadavg))"
    for s in $SETTINGS; do
        url=$(eval echo "\$URL_$s")
        timed "curl.$s" curl -sS -f -o "$WORK/out/model.wpack" "$url"
        [ "$rep" -gt 1 ] || cmp -s "$WORK/out/model.wpack" "$WORK/www/model.wpack" ||
            { echo "run.sh: curl ($s) fetched other bytes" >&2; exit 1; }
        if [ -n "$ARIA" ]; then
            timed "aria.$s" "$ARIA" -q -x16 -s16 --file-allocation=none --allow-overwrite=true \
                --auto-file-renaming=false -d "$WORK/out" -o model.wpack "$url"
            [ "$rep" -gt 1 ] || cmp -s "$WORK/out/model.wpack" "$WORK/www/model.wpack" ||
                { echo "run.sh: aria2c ($s) fetched other bytes" >&2; exit 1; }
        fi
        for v in $VARIANTS; do
            before=$(wc -l <"$LOG")
            timed "wpack.$v.$s" env WPACK_REMOTE_CONNECTIONS="${v%x*}" WPACK_REMOTE_CHUNK="${v#*x}" \
                "$WPACK" extract -q -o "$WORK/out/x" "$url"
            got=$(find "$WORK/out/x" -name '*.npy' | wc -l)
            [ "$got" -eq "$NTENSORS" ] ||
                { echo "run.sh: wpack extract ($s) wrote $got of $NTENSORS tensors" >&2; exit 1; }
            [ "$rep" -gt 1 ] || echo "$(( $(wc -l <"$LOG") - before ))" >"$WORK/req.$v.$s"
        done
        first=${VARIANTS%% *}
        timed "export.$s" env WPACK_REMOTE_CONNECTIONS="${first%x*}" WPACK_REMOTE_CHUNK="${first#*x}" \
            "$WPACK" export "$url" --to safetensors -o "$WORK/out/model.safetensors"
        # a first run through an empty chunk cache (--cache DIR): it reads
        # ahead too, and stores every chunk it fetched
        timed "cache.$s" env WPACK_REMOTE_CONNECTIONS="${first%x*}" WPACK_REMOTE_CHUNK="${first#*x}" \
            "$WPACK" extract -q --cache "$WORK/out/cache" -o "$WORK/out/x" "$url"
        # like for like with curl -o, which does not fsync either
        timed "nosync.$s" env WPACK_REMOTE_CONNECTIONS="${first%x*}" WPACK_REMOTE_CHUNK="${first#*x}" \
            "$WPACK" extract -q --no-sync -o "$WORK/out/x" "$url"
        if [ "$s" = loopback ]; then
            timed "curlsync.$s" sh -c 'curl -sS -f -o "$1" "$2" && sync "$1"' sh "$WORK/out/model.wpack" "$url"
            timed "verify.$s" "$WPACK" verify "$url"
        fi
    done
done

label() {
    case $1 in
    loopback) echo "loopback" ;;
    window) echo "+${DELAY_MS} ms, ${WINDOW_KIB} KiB window" ;;
    delay) echo "+${DELAY_MS} ms, no window" ;;
    esac
}
echo
echo "CPU:         $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs online)"
echo "file system: $(stat -f -c %T "$WORK") ($WORK)"
echo "load:        $(uptime | sed 's/.*load/load/')"
echo "archive:     $ARCHIVE_BYTES bytes, $NTENSORS tensors; median of $RUNS, interleaved"
echo "wpack:       extract -q -o DIR URL (fetch, XXH3 check, one .npy per tensor, fsynced together);"
echo "             export URL --to safetensors -o FILE (one file, fsynced); variants CONNECTIONSxCHUNK"
echo "ratios:      curl time / other time (higher is faster; goal wpack >= 1.0x on loopback,"
echo "             >= 4x with ${DELAY_MS} ms added latency); curl MiB/s for scale"
echo
hdr="| setting | curl MiB/s | aria2c -x16 / curl"
sep="|---|---|---"
for v in $VARIANTS; do hdr="$hdr | wpack extract $v / curl"; sep="$sep|---"; done
hdr="$hdr | wpack export ${VARIANTS%% *} / curl | wpack extract ${VARIANTS%% *} --no-sync / curl | first extract --cache / curl"; sep="$sep|---|---|---"
echo "$hdr |"
echo "$sep|"
for s in $SETTINGS; do
    row="| $(label "$s") | $(mibs "curl.$s")"
    if [ -n "$ARIA" ]; then row="$row | $(ratio "curl.$s" "aria.$s")"; else row="$row | skipped"; fi
    for v in $VARIANTS; do row="$row | $(ratio "curl.$s" "wpack.$v.$s")"; done
    echo "$row | $(ratio "curl.$s" "export.$s") | $(ratio "curl.$s" "nosync.$s") | $(ratio "curl.$s" "cache.$s") |"
done
echo
echo "| loopback, against other peers | ratio |"
echo "|---|---|"
echo "| wpack extract ${VARIANTS%% *} / (curl -o && sync FILE) | $(ratio curlsync.loopback "wpack.${VARIANTS%% *}.loopback") |"
echo "| wpack export ${VARIANTS%% *} / (curl -o && sync FILE) | $(ratio curlsync.loopback export.loopback) |"
echo "| wpack verify URL (fetch + XXH3, nothing written) / curl -o | $(ratio curl.loopback verify.loopback) |"
[ -n "$ARIA" ] || echo "aria2c: not installed, skipped"
echo
echo "| wpack variant | connections x chunk MiB | peak RSS MiB (loopback) | requests in one run (loopback) |"
echo "|---|---|---|---|"
for v in $VARIANTS; do
    budget=$(awk -v c="${v%x*}" -v k="${v#*x}" 'BEGIN {m = k + 0; if (k ~ /K$/) m /= 1024; if (k ~ /G$/) m *= 1024; printf "%g", c * m}')
    echo "| $v | $budget | $(rss_mib "wpack.$v.loopback" 0) | $(cat "$WORK/req.$v.loopback") |"
done
echo "(curl peak RSS $(rss_mib curl.loopback 0) MiB$([ -n "$ARIA" ] && echo ", aria2c $(rss_mib aria.loopback 0) MiB"))"
