#!/bin/bash
# msan.sh - the fuzz targets under MemorySanitizer, into build-fuzz-msan/.
#
#   sh fuzz/msan.sh [SECONDS]
#
# MSan needs every byte-writing library instrumented, or it reports their
# output as uninitialized. So:
#   - xxhash is compiled in, header-only (-DXXH_INLINE_ALL: format/checksum.c
#     and fuzz/fix_checksums.h include <xxhash.h>, nothing links libxxhash);
#   - zstd and jansson are built from Debian's source packages with
#     clang-14 -fsanitize=memory (zstd without its assembly decoder, which
#     MSan cannot see into), as static libraries;
#   - libarchive is not linked: no target reaches import/archive_in.c (its
#     header, from libarchive-dev, is needed to compile it).
# The sources come from `apt-get source` with a private deb-src list (the
# machine's apt lists and sources are not touched), or from $MSAN_SRC if it
# holds the .orig tarballs already.
#
# Then every target's replay driver (fuzz/replay.c, no libFuzzer) runs its
# whole corpus, each file in its own process (-k), and, when SECONDS is
# given (default 0), each libFuzzer binary fuzzes that long on a copy of its
# corpus. Exit status 0 when nothing was reported.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
B=$ROOT/build-fuzz-msan
SECS=${1:-0}
CC=${MSAN_CC:-clang-14}
MSAN="-fsanitize=memory -fsanitize-memory-track-origins=2 -fno-omit-frame-pointer -g -O1"
mkdir -p "$B/src" "$B/deps/lib" "$B/deps/include" "$B/obj" "$B/bin"
export MSAN_OPTIONS=${MSAN_OPTIONS:-exit_code=86:print_stats=0}

# ---------------------------------------------------------------- sources
fetch() {
    local src=${MSAN_SRC:-$B/src}
    if ! ls "$src"/libzstd_*.orig.tar.* >/dev/null 2>&1 || ! ls "$src"/jansson_*.orig.tar.* >/dev/null 2>&1; then
        local apt=$B/apt
        mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts"
        : >"$apt/none.list"
        # the machine's own sources, as deb-src
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] && sed 's/^Types: *deb$/Types: deb-src/' "$f" >"$apt/parts/${f##*/}"
        done
        [ -f /etc/apt/sources.list ] && sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$apt/none.list"
        local o="-o Dir::Etc::SourceList=$apt/none.list -o Dir::Etc::SourceParts=$apt/parts -o Dir::State::Lists=$apt/lists -o Dir::Cache=$apt/cache"
        # shellcheck disable=SC2086
        apt-get $o -qq update && (cd "$src" && apt-get $o -qq source --download-only libzstd jansson) ||
            { echo "msan.sh: cannot get the zstd and jansson sources (apt-get source with deb-src)"; exit 1; }
    fi
    rm -rf "$B/src/zstd" "$B/src/jansson"
    mkdir -p "$B/src/zstd" "$B/src/jansson"
    tar xf "$(ls "$src"/libzstd_*.orig.tar.* | grep -v '\.asc$' | head -1)" -C "$B/src/zstd" --strip-components=1 &&
    tar xf "$(ls "$src"/jansson_*.orig.tar.* | grep -v '\.asc$' | head -1)" -C "$B/src/jansson" --strip-components=1 ||
        { echo "msan.sh: cannot unpack the sources"; exit 1; }
}

deps() {
    [ -f "$B/deps/lib/libzstd.a" ] && [ -f "$B/deps/lib/libjansson.a" ] && return
    fetch
    echo "msan.sh: zstd with MSan"
    make -s -C "$B/src/zstd/lib" CC="$CC" CFLAGS="$MSAN -DZSTD_DISABLE_ASM" \
        ZSTD_LIB_DEPRECATED=0 ZSTD_LEGACY_SUPPORT=0 libzstd.a >/dev/null || exit 1
    cp "$B/src/zstd/lib/libzstd.a" "$B/deps/lib/"
    cp "$B/src/zstd/lib/zstd.h" "$B/src/zstd/lib/zstd_errors.h" "$B/src/zstd/lib/zdict.h" "$B/deps/include/"
    echo "msan.sh: jansson with MSan"
    cmake -S "$B/src/jansson" -B "$B/src/jansson/build" -DCMAKE_C_COMPILER="$CC" \
        -DCMAKE_C_FLAGS="$MSAN" -DJANSSON_BUILD_DOCS=OFF -DJANSSON_EXAMPLES=OFF \
        -DJANSSON_WITHOUT_TESTS=ON -DJANSSON_BUILD_SHARED_LIBS=OFF >/dev/null || exit 1
    cmake --build "$B/src/jansson/build" -j2 >/dev/null || exit 1
    cp "$B/src/jansson/build/lib/libjansson.a" "$B/deps/lib/"
    cp "$B/src/jansson/build/include/"*.h "$B/deps/include/"
}

# ---------------------------------------------------------------- wpack
deps
eval "$(make -s --no-print-directory fuzz-oss-vars)"
FLAGS="$MSAN -std=c11 -D_GNU_SOURCE -DXXH_INLINE_ALL -I$B/deps/include $INCLUDES -Ifuzz $LIMITS"
# libdeflate (CRC-32 of zip members) links uninstrumented: it only reads its input.
LIBS="$B/deps/lib/libjansson.a $B/deps/lib/libzstd.a -ldeflate -lpthread -lm"

compile() { # SRC.c [extra flags]: the object's path; rebuilt when the source is newer
    local o="$B/obj/${1%.c}.o"
    if [ ! -f "$o" ] || [ "$1" -nt "$o" ]; then
        mkdir -p "$(dirname "$o")"
        $CC $FLAGS ${2:-} -c "$1" -o "$o" || return 1
    fi
    echo "$o"
}

lib_objs=()
for s in $LIB_SRCS; do
    o=$(compile "$s" -fsanitize=fuzzer-no-link) || exit 1
    lib_objs+=("$o")
done
rm -f "$B/libwpack-msan.a"
ar rcs "$B/libwpack-msan.a" "${lib_objs[@]}"
replay_o=$(compile fuzz/replay.c) || exit 1

st=0
for t in $FUZZ_TARGETS; do
    objs=("$(compile "fuzz/$t.c" -fsanitize=fuzzer-no-link)") || exit 1
    $CC $MSAN "${objs[@]}" "$replay_o" "$B/libwpack-msan.a" $LIBS -o "$B/bin/replay_$t" || exit 1
    $CC $MSAN -fsanitize=fuzzer "${objs[@]}" "$B/libwpack-msan.a" $LIBS -o "$B/bin/$t" || exit 1
    out=$("$B/bin/replay_$t" -k -t 120 "fuzz/corpus/$t" 2>&1)
    line=$(echo "$out" | tail -1)
    echo "$t (MSan, corpus): $line"
    case $line in *"failed 0"*) ;; *) st=1; echo "$out" | grep -E '^FAIL|WARNING: MemorySanitizer|#[0-9]+ 0x.* in ' | head -20 ;; esac
    if [ "$SECS" -gt 0 ]; then
        corpus=$B/corpus-$t
        mkdir -p "$corpus" "$B/crashes-$t"
        for f in fuzz/corpus/$t/*; do
            case ${f##*/} in crash-*|leak-*|timeout-*|oom-*) ;; *) cp "$f" "$corpus/" ;; esac
        done
        opts=$(sed -n '/^\[libfuzzer\]/,/^\[/s/^ *\([a-z_]*\) *= *\([^ ]*\).*$/-\1=\2/p' "fuzz/$t.options" | grep -v '^-dict=')
        # shellcheck disable=SC2086
        "$B/bin/$t" $opts -dict="fuzz/$t.dict" -max_total_time="$SECS" -print_final_stats=1 \
            -artifact_prefix="$B/crashes-$t/" "$corpus" >"$B/$t.log" 2>&1
        rc=$?
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/$t.log" | tail -1)
        echo "$t (MSan, ${SECS} s fuzzing): exit $rc, ${runs:-?} executions"
        [ $rc -eq 0 ] || { st=1; grep -E 'WARNING: MemorySanitizer|#[0-9]+ 0x.* in |SUMMARY' "$B/$t.log" | head -12; }
    fi
done
exit $st
