#!/bin/sh
# fuzz-run.sh - `make fuzz-run`: each target named for SECONDS seconds on
# FUZZ_BUILD/corpus-<target> (a copy of fuzz/corpus/<target> that keeps what
# the fuzzer finds; known crash-* files are left out, fuzz-replay covers them).
#
#   sh fuzz/fuzz-run.sh FUZZ_BUILD SECONDS "EXTRA LIBFUZZER FLAGS" TARGET...
#
# Options come from fuzz/<target>.options ([libfuzzer] section) and
# -dict=fuzz/<target>.dict. Crash, leak, timeout and OOM files go to
# FUZZ_BUILD/crashes-<target>/ and any new one fails the target.
#
# A slow-unit-* file (one input took over libFuzzer's -report_slow_units, 10 s)
# is timed again, alone, up to three times: it fails the target only if every
# run is still over SLOW_LIMIT seconds (default 5). On a shared 2-core CI
# machine a unit can be "slow" only because the process was not scheduled;
# hangs that are real fail through -timeout (fuzz/<target>.options) anyway.
# Prints one line per target and exits 1 if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1
[ $# -ge 3 ] || { echo "usage: fuzz-run.sh FUZZ_BUILD SECONDS FLAGS TARGET..." >&2; exit 2; }
fb=$1 secs=$2 flags=$3
shift 3
SLOW_LIMIT=${SLOW_LIMIT:-5}

# Milliseconds the fastest of three runs of target $1 on file $2 took.
fastest_ms() {
    best=
    for _ in 1 2 3; do
        s=$(date +%s%N)
        "$fb/$1" "$2" >/dev/null 2>&1
        ms=$(( ($(date +%s%N) - s) / 1000000 ))
        [ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
        [ "$best" -le $((SLOW_LIMIT * 1000)) ] && break
    done
    echo "$best"
}

st=0
for t in "$@"; do
    corpus=$fb/corpus-$t crashes=$fb/crashes-$t log=$fb/$t.log
    mkdir -p "$corpus" "$crashes"
    for f in fuzz/corpus/"$t"/*; do
        case ${f##*/} in crash-*|leak-*|timeout-*|oom-*) ;; *) [ -f "$f" ] && cp "$f" "$corpus/" ;; esac
    done
    touch "$fb/.start-$t"
    opts=$(sed -n '/^\[libfuzzer\]/,/^\[/s/^ *\([a-z_]*\) *= *\([^ ]*\).*$/-\1=\2/p' \
        "fuzz/$t.options" | grep -v '^-dict=')
    echo "fuzzing $t for $secs s (log $log)"
    # shellcheck disable=SC2086
    UBSAN_OPTIONS=print_stacktrace=1 "$fb/$t" $opts -dict="fuzz/$t.dict" \
        -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$crashes/" \
        $flags "$corpus" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    new=$(find "$crashes" -type f -newer "$fb/.start-$t" ! -name 'slow-unit-*')
    slow_note= slow_fail=
    for f in $(find "$crashes" -type f -newer "$fb/.start-$t" -name 'slow-unit-*'); do
        ms=$(fastest_ms "$t" "$f")
        if [ "$ms" -gt $((SLOW_LIMIT * 1000)) ]; then
            new="$new $f"
            slow_fail="$slow_fail  slow unit still takes $ms ms alone: $f
"
        else
            slow_note="$slow_note; a slow unit took $ms ms alone (not a failure: $f)"
        fi
    done
    if [ "$rc" -ne 0 ] || [ -n "$new" ]; then
        st=1
        echo "FAIL $t: exit $rc after ${runs:-?} runs"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*invariant failed|    #[0-9]+ )' "$log" |
            grep -v -E 'fuzzer::|__sanitizer|libc\.so|libc_start|/nptl/|/stdlib/|signal/|in _start|in main \(/' |
            head -12 | sed 's/^/  /'
        printf '%s' "$slow_fail"
        for f in $new; do echo "  crash file: $f  (reproduce: $fb/$t $f)"; done
    else
        echo "ok $t: $runs runs, $rate exec/s, corpus $(ls "$corpus" | wc -l) files$slow_note"
    fi
done
exit $st
