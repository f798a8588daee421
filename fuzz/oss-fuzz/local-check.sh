#!/bin/sh
# local-check.sh - `make oss-fuzz-check`: run fuzz/oss-fuzz/build.sh outside
# Docker with the variables OSS-Fuzz sets (address sanitizer + libFuzzer,
# clang-14 here), then each binary it produced for FUZZ_SECONDS (default 5)
# on its seed corpus, the way OSS-Fuzz's runner would (dict and options from
# $OUT). Prints "ok"/"FAIL" per target and exits 1 if any failed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${FUZZ_SECONDS:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/src" "$TMP/out" "$TMP/work"
# $SRC/wpack is the source tree, as in the Dockerfile (a link, not a copy)
ln -s "$ROOT" "$TMP/src/wpack"

export CC=clang-14 CXX=clang++-14
export CFLAGS="-fsanitize=address,fuzzer-no-link -g -O1"
export CXXFLAGS="-fsanitize=address,fuzzer-no-link -g -O1"
export LIB_FUZZING_ENGINE=-fsanitize=fuzzer
export SRC="$TMP/src" OUT="$TMP/out" WORK="$TMP/work"

echo "build.sh (CC=$CC CFLAGS=$CFLAGS LIB_FUZZING_ENGINE=$LIB_FUZZING_ENGINE)"
if ! bash "$ROOT/fuzz/oss-fuzz/build.sh" >"$TMP/build.log" 2>&1; then
    echo "FAIL build.sh:"
    tail -20 "$TMP/build.log"
    exit 1
fi
echo "\$OUT: $(ls "$OUT" | tr '\n' ' ')"
st=0
for bin in "$OUT"/fuzz_*; do
    case $bin in *.dict|*.options|*.zip) continue ;; esac
    t=$(basename "$bin")
    for f in "$t.dict" "$t.options" "${t}_seed_corpus.zip"; do
        [ -f "$OUT/$f" ] || { echo "FAIL $t: $f missing in \$OUT"; st=1; }
    done
    mkdir -p "$TMP/corpus-$t"
    (cd "$TMP/corpus-$t" && unzip -q "$OUT/${t}_seed_corpus.zip")
    seeds=$(ls "$TMP/corpus-$t" | wc -l)
    opts=$(sed -n '/^\[libfuzzer\]/,/^\[/s/^ *\([a-z_]*\) *= *\([^ ]*\).*$/-\1=\2/p' "$OUT/$t.options" |
        sed "s|^-dict=|-dict=$OUT/|")
    # shellcheck disable=SC2086
    "$bin" $opts -max_total_time="$SECS" -print_final_stats=1 -artifact_prefix="$TMP/" \
        "$TMP/corpus-$t" >"$TMP/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP/$t.log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "ok $t: $runs runs in $SECS s, $seeds seed files"
    else
        st=1
        echo "FAIL $t: exit $rc"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*invariant failed)' "$TMP/$t.log" |
            head -5 | sed 's/^/  /'
    fi
done
exit $st
