#!/bin/bash
# test_bench_stats.sh - bench/stats/bench_stats.c still builds against the
# core library of this build and runs at a tiny size (1 MiB, one repetition,
# no timing judged): every dtype/buffer/kind row printed with a rate and a
# ratio, so an API change in format/weightstats.h cannot leave it broken.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS_DIR/.." && pwd)
BUILD_DIR=$(dirname "$WPACK")
LIB=$BUILD_DIR/libwpack.a
if [ ! -f "$LIB" ]; then
    fail bench_stats_lib "no $LIB beside $WPACK"
    finish
fi
# The libraries libwpack needs, as the build's modules declare them (WPACK_LIBS).
# shellcheck disable=SC2016 # $(WPACK_LIBS) is for make, not the shell
libs=$(cd "$ROOT" && printf 'bench-print-libs:\n\t@echo $(WPACK_LIBS)\n' |
    make -s --no-print-directory -f Makefile -f - bench-print-libs)
san=
nm "$LIB" 2>/dev/null | grep -q __asan_ && san="-fsanitize=address,undefined"
# shellcheck disable=SC2086
expect bench_stats_builds ${CC:-cc} -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $san \
    -I"$ROOT/include" -I"$ROOT/format" "$ROOT/bench/stats/bench_stats.c" "$LIB" $libs -lm \
    -o "$T/bench_stats"
if [ -x "$T/bench_stats" ]; then
    if "$T/bench_stats" 1 1 >"$T/bench.out" 2>&1; then pass bench_stats_runs; else
        fail bench_stats_runs "exit $?: $(tail -c 400 "$T/bench.out")"; fi
    n=$(grep -Ec '^(f32|bf16|f16) +(in-cache|out-of-cache) +(peer-sum|memcpy|stats|portable|hist) +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+$' "$T/bench.out")
    [ "$n" -eq 30 ] && pass bench_stats_rows || fail bench_stats_rows "$n of 30 rows: $(head -c 600 "$T/bench.out")"
    grep -q '^weight stats benchmark: .*load' "$T/bench.out" && pass bench_stats_header ||
        fail bench_stats_header "$(head -2 "$T/bench.out")"
else
    fail bench_stats_runs "not built"
fi
finish
