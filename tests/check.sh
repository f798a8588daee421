#!/bin/sh
# check.sh - `make check`: the whole suite on a normal build, then again
# under ASan + UBSan (-fno-sanitize-recover). Prints failures as they are
# found, per-configuration totals, and last the plain line
# "N passed, N failed". Full logs: build.check.log, build-asan.check.log.
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
echo "$total_p passed, $total_f failed"
[ $status -eq 0 ] && [ $total_f -eq 0 ]
