#!/bin/bash
# run.sh - pack and unpack against cp (issue 19): the same f32 + bf16
# tensors (~400) as a torch checkpoint, a safetensors file, a stored npz and
# a directory of .npy; for each input
#   cp -r IN COPY             the peer (page cache only)
#   cp -r IN COPY && sync     the durable peer (wpack fsyncs its archive)
#   wpack create -q           weight stats on (the default)
#   wpack create -q -j 2      the same, stats and hashing on 2 threads
#   wpack create -q --no-stats
#   the same with WPACK_NO_COPY_RANGE=1 (read/write: what copy_file_range saves)
# and once, from the archive packed from the checkpoint,
#   cp ARCHIVE COPY           the peer
#   wpack extract             (a directory of .npy)
#   wpack export --to safetensors
#   the same two with WPACK_NO_COPY_RANGE=1 (pread/write: what copy_file_range saves)
# Interleaved (each repetition runs every command once, in turn), median of
# BENCH_REPS; printed as ratios "peer time / wpack time" (1.00: as fast as
# cp, higher: faster) with the peak RSS of wpack (/usr/bin/time %M).
# Benchmarks are not tests: this never fails on a slow figure.
#
# usage: bench/pack/run.sh [path/to/wpack]       (default build/wpack)
# env:   BENCH_SIZE  bytes of tensor data (default 4 GiB); BENCH_REPS (5);
#        BENCH_DIR   where the data goes (default /tmp; needs ~7x BENCH_SIZE);
#        BENCH_TENSORS (400); BENCH_KINDS (the inputs, default all four)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
WPACK=$(realpath "${1:-build/wpack}")
PY=/usr/bin/python3
SIZE=${BENCH_SIZE:-$((4 << 30))}
REPS=${BENCH_REPS:-5}
TENSORS=${BENCH_TENSORS:-400}
TIME=/usr/bin/time
[ -x "$WPACK" ] || { echo "run.sh: no wpack at $WPACK (run make)" >&2; exit 1; }
[ -x "$TIME" ] || { echo "run.sh: $TIME missing (apt-get install time)" >&2; exit 1; }

WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/wpack-bench-pack.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
echo "== making $SIZE bytes in $TENSORS tensors in $WORK"
"$PY" "$HERE/make_inputs.py" "$WORK/in" "$SIZE" "$TENSORS"
"$WPACK" create -q -o "$WORK/ref.wpack" "$WORK/in/model.pt"
sync
cat "$WORK"/in/model.* "$WORK"/in/npy/* "$WORK/ref.wpack" >/dev/null # all in the page cache

# timed NAME CMD...: one run; appends "microseconds rss_kib" to $WORK/t.NAME
timed() {
    local name=$1; shift
    rm -rf "$WORK/out"
    local t0 t1
    t0=$(date +%s%N)
    "$TIME" -f "%M" -o "$WORK/one" "$@" >/dev/null 2>"$WORK/err" ||
        { echo "run.sh: $* failed: $(cat "$WORK/err")" >&2; exit 1; }
    t1=$(date +%s%N)
    echo "$(( (t1 - t0) / 1000 )) $(tail -n1 "$WORK/one")" >>"$WORK/t.$name"
    rm -rf "$WORK/out"
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
secs() { awk '{print $1}' "$WORK/t.$1" | median; }
rss() { awk '{print $2}' "$WORK/t.$1" | median; }
ratio() { awk -v a="$(secs "$1")" -v b="$(secs "$2")" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }

KINDS=${BENCH_KINDS:-model.pt model.safetensors model.npz npy}
for rep in $(seq "$REPS"); do
    echo "== repetition $rep of $REPS"
    for k in $KINDS; do
        timed "cp.$k" cp -r "$WORK/in/$k" "$WORK/out"
        timed "cpsync.$k" sh -c 'cp -r "$1" "$2" && sync "$2"' sh "$WORK/in/$k" "$WORK/out"
        timed "create.$k" "$WPACK" create -q -o "$WORK/out" "$WORK/in/$k"
        timed "j2.$k" "$WPACK" create -q -j 2 -o "$WORK/out" "$WORK/in/$k"
        timed "nostats.$k" "$WPACK" create -q --no-stats -o "$WORK/out" "$WORK/in/$k"
        timed "plain.$k" env WPACK_NO_COPY_RANGE=1 "$WPACK" create -q --no-stats -o "$WORK/out" "$WORK/in/$k"
    done
    timed cp.archive cp "$WORK/ref.wpack" "$WORK/out"
    timed extract "$WPACK" extract "$WORK/ref.wpack" -o "$WORK/out"
    timed export "$WPACK" export "$WORK/ref.wpack" --to safetensors -o "$WORK/out"
    timed extract_plain env WPACK_NO_COPY_RANGE=1 "$WPACK" extract "$WORK/ref.wpack" -o "$WORK/out"
    timed export_plain env WPACK_NO_COPY_RANGE=1 "$WPACK" export "$WORK/ref.wpack" --to safetensors -o "$WORK/out"
done

echo
echo "CPU:         $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs online)"
echo "file system: $(stat -f -c %T "$WORK") ($WORK)"
echo "data:        $SIZE bytes, $TENSORS tensors (f32 and bf16); median of $REPS, interleaved"
echo "ratios: cp time / wpack time (higher is faster; goal create >= 0.8, --no-stats >= 0.95, extract/export >= 0.9)"
echo "'no copy_range, no stats': --no-stats under WPACK_NO_COPY_RANGE=1 against cp; RSS MiB: create's (median)"
echo
printf '| %-18s | %-11s | %-16s | %-16s | %-15s | %-21s | %-23s | %-7s |\n' input "create / cp" "create / cp+sync" "create -j 2 / cp" "--no-stats / cp" "--no-stats / cp+sync" "no copy_range, no stats" "RSS MiB"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' -------------------- ------------- ------------------ ------------------ ----------------- ----------------------- ------------------------- ---------
for k in $KINDS; do
    printf '| %-18s | %-11s | %-16s | %-16s | %-15s | %-21s | %-23s | %-7s |\n' "$k" "$(ratio "cp.$k" "create.$k")" \
        "$(ratio "cpsync.$k" "create.$k")" "$(ratio "cp.$k" "j2.$k")" "$(ratio "cp.$k" "nostats.$k")" \
        "$(ratio "cpsync.$k" "nostats.$k")" "$(ratio "cp.$k" "plain.$k")" "$(awk -v a="$(rss "create.$k")" 'BEGIN {printf "%.1f", a / 1024}')"
done
echo
printf '| %-34s | %-9s | %-7s |\n' "from the archive" "x cp" "RSS MiB"
printf '|%s|%s|%s|\n' ------------------------------------ ----------- ---------
for k in extract export extract_plain export_plain; do
    printf '| %-34s | %-9s | %-7s |\n' "wpack ${k%_plain}$(case $k in export*) echo ' --to safetensors' ;; esac)$(case $k in *_plain) echo ' (no copy_range)' ;; esac)" \
        "$(ratio cp.archive $k)" "$(awk -v a="$(rss $k)" 'BEGIN {printf "%.1f", a / 1024}')"
done
