#!/bin/sh
# run-tests.sh BUILD - run every unit test binary, CLI test script and fuzz
# corpus replay of one build; print each result and end with
# "# totals PASSED FAILED". A program that dies before its own summary line
# counts as one failure.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
export WPACK="$ROOT/$BUILD/wpack" PY=/usr/bin/python3 WPACK_TESTS_DIR="$ROOT/tests"
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# add_up LABEL: read the output in $log, print it, add its summary lines.
add_up() {
    sed "s|^|[$1] |" "$log"
    sums=$(grep -E '^# passed [0-9]+ failed [0-9]+' "$log")
    if [ -z "$sums" ]; then
        echo "FAIL $1: no summary line (crashed or did not finish)"
        failed=$((failed + 1))
        return
    fi
    p=$(echo "$sums" | awk '{s += $3} END {print s}')
    f=$(echo "$sums" | awk '{s += $5} END {print s}')
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $1: exit status $2 with no failed test"
        failed=$((failed + 1))
    fi
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    "$t" >"$log" 2>&1
    add_up "$name" $?
done

for t in tests/cli/test_*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    bash "$t" >"$log" 2>&1
    add_up "$name" $?
done

# The Python package (python/wpack) over this build's shared libraries.
# A sanitized build's libraries need the ASan runtime loaded first in the
# interpreter; Python's own allocations are not leak-checked.
py_preload=
case "$SAN" in *address*)
    py_preload=$(${CC:-cc} -print-file-name=libasan.so) ;;
esac
for t in tests/python/test_*.py; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .py)
    WPACK_LIBRARY_PATH="$ROOT/$BUILD" PYTHONPATH="$ROOT/python" \
        LD_PRELOAD="$py_preload" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        /usr/bin/python3 "$t" >"$log" 2>&1
    add_up "$name" $?
done

if [ -f fuzz/fuzz.mk ]; then
    make --no-print-directory -s fuzz-replay BUILD="$BUILD" OPT="$OPT" SAN="$SAN" >"$log" 2>&1
    add_up fuzz-replay $?
fi

echo "# totals $passed $failed"
[ "$failed" -eq 0 ]
