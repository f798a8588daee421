#!/bin/bash
# test_bench_scripts.sh - the issue 17/18 benchmark scripts still run: each
# at a tiny size (8 MiB, one repetition, no timing judged) must exit 0 and
# print its ratio lines (a number followed by x in every row), so that a
# change to the CLI, nginx's helper or the GGUF writer cannot leave them
# broken until the next full run.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS_DIR/.." && pwd)

# rows NAME FILE REGEX: at least one line matches REGEX; every one ends in ratios
rows() {
    local n
    n=$(grep -Ec "$3" "$2")
    if [ "$n" -eq 0 ]; then fail "$1" "no line matching /$3/: $(tail -c 600 "$2")"; return; fi
    if grep -E "$3" "$2" | grep -Evq '\| [0-9]+\.[0-9]+x \|'; then
        fail "$1" "a row without a ratio: $(grep -E "$3" "$2" | grep -Ev '\| [0-9]+\.[0-9]+x \|' | head -1)"
    else
        pass "$1"
    fi
}

if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    if SIZE_MB=8 RUNS=1 BENCH_DIR=$T bash "$ROOT/bench/remote/run.sh" "$WPACK" >"$T/remote.out" 2>&1; then
        pass remote_runs
    else
        fail remote_runs "exit $?: $(tail -c 600 "$T/remote.out")"
    fi
    rows remote_loopback_row "$T/remote.out" '^\| loopback \|'
    rows remote_delay_rows "$T/remote.out" '^\| \+20 ms'
    [ "$(grep -Ec '^\| \+20 ms' "$T/remote.out")" -eq 2 ] && pass remote_two_delay_rows ||
        fail remote_two_delay_rows
    grep -Eq '^\| 8x8M \| 64 \| [0-9]+ \| [0-9]+ \|' "$T/remote.out" && pass remote_rss_row ||
        fail remote_rss_row "$(grep -E '^\| 8x8M' "$T/remote.out")"
    if command -v aria2c >/dev/null 2>&1; then
        grep -q 'aria2c: not installed' "$T/remote.out" && fail remote_aria2c "installed, but skipped" ||
            pass remote_aria2c
    else
        grep -q 'aria2c: not installed, skipped' "$T/remote.out" && pass remote_aria2c_skip_said ||
            fail remote_aria2c_skip_said
    fi
    # slices.sh: a tensor-parallel read of 16 MiB by 4 hosts; 16 MiB per
    # ratio line, and 4 MiB rows fetched as 4 MiB of chunks (plus the opens)
    if EMB_MB=16 HOSTS=4 RUNS=1 BENCH_DIR=$T bash "$ROOT/bench/remote/slices.sh" "$WPACK" \
        >"$T/slices.out" 2>&1; then
        pass slices_runs
    else
        fail slices_runs "exit $?: $(tail -c 600 "$T/slices.out")"
    fi
    grep -Eq '^speed vs curl .*: chunk checksums [0-9]+\.[0-9]+x, without [0-9]+\.[0-9]+x$' \
        "$T/slices.out" && pass slices_ratios || fail slices_ratios "$(tail -3 "$T/slices.out")"
    grep -Eq '^per host: rows 4\.0 MiB; .*chunk checksums 4\.[0-9] MiB, without 16\.[0-9] MiB$' \
        "$T/slices.out" && pass slices_bytes || fail slices_bytes "$(tail -3 "$T/slices.out")"
else
    fail remote_runs "nginx is not installed (tools/deps.sh installs it)"
fi

if SIZE_MB=8 RUNS=1 BENCH_DIR=$T bash "$ROOT/bench/gguf/run.sh" "$WPACK" >"$T/gguf.out" 2>&1; then
    pass gguf_runs
else
    fail gguf_runs "exit $?: $(tail -c 600 "$T/gguf.out")"
fi
rows gguf_stats_row "$T/gguf.out" '^\| stats on \(default\) \|'
rows gguf_nostats_row "$T/gguf.out" '^\| --no-stats \|'
ls -d "$T"/wpack-bench-* >/dev/null 2>&1 && fail bench_cleaned_up "$(ls -d "$T"/wpack-bench-*)" ||
    pass bench_cleaned_up
finish
