#!/bin/bash -eu
# build.sh - OSS-Fuzz build script for wpack: compiles the library and each
# fuzz target with $CC $CFLAGS, links with $CXX $CXXFLAGS $LIB_FUZZING_ENGINE
# and puts into $OUT each target with <target>_seed_corpus.zip, <target>.dict
# and <target>.options. The source lists come from the Makefile
# (`make fuzz-oss-vars`), so they never go stale.
#
# Needs: CC CXX CFLAGS CXXFLAGS LIB_FUZZING_ENGINE SRC OUT (WORK optional).
# fuzz/oss-fuzz/local-check.sh sets them by hand to try this outside Docker.
#
# The third-party libraries are linked statically (OSS-Fuzz's runner image
# does not have them). They are not instrumented, so MemorySanitizer may
# report their writes as uninitialized; building them from source under
# MSan would remove that (see fuzz/README.md).

cd "$SRC/wpack"
WORK=${WORK:-$(mktemp -d)}
OBJ="$WORK/wpack-obj"
mkdir -p "$OBJ"

eval "$(make -s --no-print-directory fuzz-oss-vars)"
FLAGS="-std=c11 -D_GNU_SOURCE $INCLUDES -Ifuzz $LIMITS"

# compile SRC.c once into $OBJ; prints the object's path
compile() {
    local o="$OBJ/${1%.c}.o"
    if [ ! -f "$o" ]; then
        mkdir -p "$(dirname "$o")"
        $CC $CFLAGS $FLAGS -c "$1" -o "$o"
    fi
    echo "$o"
}

lib_objs=()
for s in $LIB_SRCS; do
    lib_objs+=("$(compile "$s")")
done
rm -f "$WORK/libwpack-fuzz.a"
ar rcs "$WORK/libwpack-fuzz.a" "${lib_objs[@]}"

# Static third-party libraries where the image has them (shared otherwise).
LIBS="-Wl,-Bstatic -lxxhash -lzstd -ljansson -Wl,-Bdynamic -lpthread -lm"

for t in $FUZZ_TARGETS; do
    extra_var="EXTRA_$t"
    objs=("$(compile "fuzz/$t.c")")
    for s in ${!extra_var}; do
        objs+=("$(compile "$s")")
    done
    $CXX $CXXFLAGS "${objs[@]}" "$WORK/libwpack-fuzz.a" $LIB_FUZZING_ENGINE $LIBS -o "$OUT/$t"
    cp "fuzz/$t.dict" "fuzz/$t.options" "$OUT/"
    # the seed corpus without the crash-* regression files (they would stop
    # a run at once while the bug they show is open)
    rm -f "$OUT/${t}_seed_corpus.zip"
    (cd "fuzz/corpus/$t" && ls | grep -v -E '^(crash|leak|timeout|oom)-' |
        zip -q -j "$OUT/${t}_seed_corpus.zip" -@)
done
