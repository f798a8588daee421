#!/bin/sh
# check.sh - `make check`: the whole suite on a normal build, then again
# under ASan + UBSan (-fno-sanitize-recover), then each libFuzzer target for
# FUZZ_SECONDS (default 30; one test per target, passed when it found no
# crash). Prints failures as they are found, per-configuration totals, and
# last the plain line "N passed, N failed". Full logs: build.check.log,
# build-asan.check.log, build-fuzz.check.log (and build-fuzz/<target>.log).
MAKE=${MAKE:-make}
status=0
total_p=0
total_f=0
run_config() { # BUILD LABEL make-args...
    build=$1 label=$2
    shift 2
    log=$build.check.log
    $MAKE --no-print-directory check-one BUILD="$build" "$@" >"$log" 2>&1 || status=1
    grep -E 'FAIL|runtime error|ERROR: AddressSanitizer|ERROR: LeakSanitizer|: error:' "$log" | sed "s|^|[$label] |"
    t=$(grep '^# totals' "$log" | tail -1)
    if [ -z "$t" ]; then
        echo "[$label] the suite did not run to the end; last lines of $log:"
        tail -25 "$log" | sed "s|^|[$label] |"
        total_f=$((total_f + 1))
        status=1
        return
    fi
    p=$(echo "$t" | cut -d' ' -f3)
    f=$(echo "$t" | cut -d' ' -f4)
    echo "[$label] $p passed, $f failed"
    total_p=$((total_p + p))
    total_f=$((total_f + f))
}
run_config build gcc
run_config build-asan asan OPT="-O1 -g" \
    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# Each fuzz target for FUZZ_SECONDS (fuzz/fuzz.mk: clang-14 + libfuzzer-14-dev).
run_fuzz() {
    log=build-fuzz.check.log
    secs=${FUZZ_SECONDS:-30}
    if ! command -v clang-14 >/dev/null 2>&1; then
        echo "[fuzz] FAIL: clang-14 not found (tools/deps.sh installs clang-14 and libfuzzer-14-dev)"
        total_f=$((total_f + 1))
        status=1
        return
    fi
    $MAKE --no-print-directory fuzz-run FUZZ_SECONDS="$secs" >"$log" 2>&1 || status=1
    p=$(grep -c '^ok fuzz_' "$log")
    f=$(grep -c '^FAIL fuzz_' "$log")
    # each FAIL line with the stack summary and crash file lines under it
    awk '/^FAIL fuzz_/ {on = 1} /^(fuzzing|ok) fuzz_/ {on = 0} on' "$log" | sed 's|^|[fuzz] |'
    if [ $((p + f)) -eq 0 ]; then
        echo "[fuzz] the fuzzers did not run; last lines of $log:"
        tail -25 "$log" | sed 's|^|[fuzz] |'
        f=1
        status=1
    fi
    echo "[fuzz] $p passed, $f failed (${secs} s per target)"
    total_p=$((total_p + p))
    total_f=$((total_f + f))
}
run_fuzz
echo "$total_p passed, $total_f failed"
[ $status -eq 0 ] && [ $total_f -eq 0 ]
