#!/bin/sh
# run.sh - wpack's benchmarks (issue 2, section 5); not tests, not run by `make check`.
#
# usage: bench/run.sh [all|index|create]   (from the repository root; default all)
# env:   BUILD      a build directory holding libwpack.a and wpack to measure; when unset,
#                   a private optimized build (make OPT='-O2 -g', no sanitizers) is made in
#                   the temporary directory, so that a `make check` running beside us (which
#                   rebuilds build/ with ASan) cannot change what is measured
#        BENCH_DIR  where temporary files go (default /tmp)
#        BENCH_ENTRIES  entries in the index benchmark (default 1000000)
#        CC         compiler for bench_index (default cc)
# Needs: make (libwpack.a, wpack), /usr/bin/time (Debian `time`), /usr/bin/python3 + numpy.
set -eu

cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp}
ENTRIES=${BENCH_ENTRIES:-1000000}
CC=${CC:-cc}
what=${1:-all}
case $what in
all | index | create) ;;
*)
    echo "usage: bench/run.sh [all|index|create]" >&2
    exit 2
    ;;
esac

WORK=$(mktemp -d "$BENCH_DIR/wpack-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

if [ -z "${BUILD:-}" ]; then
    BUILD=$WORK/build
    echo "building libwpack and wpack (-O2) in $BUILD ..." >&2
    targets="$BUILD/libwpack.a"
    [ "$what" = index ] || targets="$targets $BUILD/wpack"
    # shellcheck disable=SC2086
    make -s BUILD="$BUILD" OPT='-O2 -g' SAN= $targets >&2 ||
        { echo "bench: the build failed (pass BUILD=build to measure an existing build)" >&2; exit 1; }
fi
[ -f "$BUILD/libwpack.a" ] || { echo "bench: no $BUILD/libwpack.a: run make first" >&2; exit 1; }
[ "$what" = index ] || [ -x "$BUILD/wpack" ] ||
    { echo "bench: no $BUILD/wpack: run make first" >&2; exit 1; }

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "wpack benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

if [ "$what" != create ]; then
    # The libraries libwpack needs, as the build's modules declare them (WPACK_LIBS).
    # shellcheck disable=SC2016 # $(WPACK_LIBS) is for make, not the shell
    libs=$(printf 'bench-print-libs:\n\t@echo $(WPACK_LIBS)\n' |
        make -s --no-print-directory -f Makefile -f - bench-print-libs)
    # shellcheck disable=SC2086
    $CC -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Iinclude -Iformat bench/bench_index.c \
        "$BUILD/libwpack.a" $libs -o "$WORK/bench_index"
    "$WORK/bench_index" "$WORK/index.wpack" "$ENTRIES"
    echo
fi
if [ "$what" != index ]; then
    BENCH_DIR=$WORK sh bench/bench_create.sh "$BUILD/wpack"
fi
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
