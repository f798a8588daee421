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
#   create, extract and export with --no-sync (no fsync: the like-for-like
#   peer of plain cp; the durable ones against cp && sync)
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

BENCH_RATIO_SUFFIX=""
. "$HERE/../lib.sh" # timed, secs, rss, ratio
bench_before() { rm -rf "$WORK/out"; }
bench_after() { rm -rf "$WORK/out"; }

KINDS=${BENCH_KINDS:-model.pt model.safetensors model.npz npy}
for rep in $(seq "$REPS"); do
    echo "== repetition $rep of $REPS"
    for k in $KINDS; do
        timed "cp.$k" cp -r "$WORK/in/$k" "$WORK/out"
        # `sync DIR` fsyncs the directory alone, not the files in it: a
        # directory's copy syncs each file too (what create's fsync gives)
        timed "cpsync.$k" sh -c 'cp -r "$1" "$2" && if [ -d "$2" ]; then sync "$2"/* "$2"; else sync "$2"; fi' \
            sh "$WORK/in/$k" "$WORK/out"
        timed "create.$k" "$WPACK" create -q -o "$WORK/out" "$WORK/in/$k"
        timed "j2.$k" "$WPACK" create -q -j 2 -o "$WORK/out" "$WORK/in/$k"
        timed "nostats.$k" "$WPACK" create -q --no-stats -o "$WORK/out" "$WORK/in/$k"
        timed "plain.$k" env WPACK_NO_COPY_RANGE=1 "$WPACK" create -q --no-stats -o "$WORK/out" "$WORK/in/$k"
        timed "nosync.$k" "$WPACK" create -q --no-sync -o "$WORK/out" "$WORK/in/$k"
        timed "nostats_nosync.$k" "$WPACK" create -q --no-stats --no-sync -o "$WORK/out" "$WORK/in/$k"
    done
    timed cp.archive cp "$WORK/ref.wpack" "$WORK/out"
    timed cpsync.archive sh -c 'cp "$1" "$2" && sync "$2"' sh "$WORK/ref.wpack" "$WORK/out"
    timed extract_nosync "$WPACK" extract --no-sync "$WORK/ref.wpack" -o "$WORK/out"
    timed export_nosync "$WPACK" export --no-sync "$WORK/ref.wpack" --to safetensors -o "$WORK/out"
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
echo "durable (fsync, the default) against cp && sync; --no-sync (no fsync) against plain cp:"
printf '| %-18s | %-16s | %-20s | %-21s | %-25s |\n' input "create / cp+sync" "--no-stats / cp+sync" "create --no-sync / cp" "--no-stats --no-sync / cp"
printf '|%s|%s|%s|%s|%s|\n' -------------------- ------------------ ---------------------- ----------------------- ---------------------------
for k in $KINDS; do
    printf '| %-18s | %-16s | %-20s | %-21s | %-25s |\n' "$k" "$(ratio "cpsync.$k" "create.$k")" \
        "$(ratio "cpsync.$k" "nostats.$k")" "$(ratio "cp.$k" "nosync.$k")" "$(ratio "cp.$k" "nostats_nosync.$k")"
done
echo
printf '| %-34s | %-9s | %-11s | %-7s |\n' "from the archive" "x cp" "x cp+sync" "RSS MiB"
printf '|%s|%s|%s|%s|\n' ------------------------------------ ----------- ------------- ---------
for k in extract export extract_plain export_plain extract_nosync export_nosync; do
    printf '| %-34s | %-9s | %-11s | %-7s |\n' "wpack ${k%_*}$(case $k in export*) echo ' --to safetensors' ;; esac)$(case $k in *_plain) echo ' (no copy_range)' ;; *_nosync) echo ' --no-sync' ;; esac)" \
        "$(ratio cp.archive $k)" "$(ratio cpsync.archive $k)" "$(awk -v a="$(rss $k)" 'BEGIN {printf "%.1f", a / 1024}')"
done
