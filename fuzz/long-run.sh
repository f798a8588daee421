#!/bin/sh
# long-run.sh - the long runs behind the figures in fuzz/README.md: each
# target named (default: all) for RUNS executions (default 10 million), one
# after another, one process at a time (the machine is shared).
#
#   sh fuzz/long-run.sh [-r RUNS] [-o DIR] [TARGET...]
#
# Uses a copy of each binary of build-fuzz/ (`make fuzz` first; rebuilding
# during a run does not change the binary that runs), the target's .options
# and .dict, and DIR/corpus-<target> (default DIR /tmp/fuzzlogs), seeded from
# fuzz/corpus/<target> without its crash-* files; what the run finds stays
# there (merge the few worth keeping into fuzz/corpus with -merge=1).
# Crash files go to DIR/crashes-<target>/; the log is DIR/<target>.log.
# Prints one line per target: executions, seconds, exec/s, new crash files.
set -u
cd "$(dirname "$0")/.." || exit 1
RUNS=10000000
DIR=/tmp/fuzzlogs
while [ $# -gt 0 ]; do
    case $1 in
        -r) RUNS=$2; shift 2 ;;
        -o) DIR=$2; shift 2 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || set -- $(make -s --no-print-directory fuzz-oss-vars |
    sed -n "s/^FUZZ_TARGETS='\(.*\)'$/\1/p")
mkdir -p "$DIR/bin"
st=0
for t in "$@"; do
    cp "build-fuzz/$t" "$DIR/bin/$t" || { st=1; continue; }
    corpus=$DIR/corpus-$t; crashes=$DIR/crashes-$t; log=$DIR/$t.log
    mkdir -p "$corpus" "$crashes"
    for f in fuzz/corpus/$t/*; do
        case ${f##*/} in crash-*|leak-*|timeout-*|oom-*) ;; *) cp "$f" "$corpus/" ;; esac
    done
    opts=$(sed -n '/^\[libfuzzer\]/,/^\[/s/^ *\([a-z_]*\) *= *\([^ ]*\).*$/-\1=\2/p' \
        "fuzz/$t.options" | grep -v '^-dict=')
    touch "$DIR/.start-$t"
    start=$(date +%s)
    # shellcheck disable=SC2086
    UBSAN_OPTIONS=print_stacktrace=1 "$DIR/bin/$t" $opts -dict="fuzz/$t.dict" \
        -runs="$RUNS" -print_final_stats=1 -artifact_prefix="$crashes/" \
        "$corpus" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    # slow-unit-* files are not findings (a unit paused by SIGSTOP is "slow" too)
    new=$(find "$crashes" -type f -newer "$DIR/.start-$t" ! -name 'slow-unit-*' | wc -l)
    [ "$rc" -eq 0 ] && [ "$new" -eq 0 ] || st=1
    echo "$t: exit $rc, ${runs:-?} executions in $secs s ($(( ${runs:-0} / (secs > 0 ? secs : 1) )) exec/s), $new new crash files, corpus $(ls "$corpus" | wc -l)"
done
exit $st
