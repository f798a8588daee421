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
# does not have them). For SANITIZER=memory every library must be
# instrumented, or MSan reports their output as uninitialized: xxhash is
# then compiled in header-only (-DXXH_INLINE_ALL), and zstd and jansson are
# built from the sources the Dockerfile checks out ($SRC/zstd, $SRC/jansson)
# with $CC $CFLAGS. fuzz/msan.sh does the same locally.

cd "$SRC/wpack"
WORK=${WORK:-$(mktemp -d)}
OBJ="$WORK/wpack-obj"
mkdir -p "$OBJ"

eval "$(make -s --no-print-directory fuzz-oss-vars)"
FLAGS="-std=c11 -D_GNU_SOURCE $INCLUDES -Ifuzz $LIMITS"

# MemorySanitizer: instrumented zstd and jansson, xxhash inline (see above).
if [ "${SANITIZER:-}" = memory ]; then
    DEPS="$WORK/deps"
    mkdir -p "$DEPS/lib" "$DEPS/include"
    make -C "$SRC/zstd/lib" clean >/dev/null
    make -C "$SRC/zstd/lib" -j"$(nproc)" CC="$CC" CFLAGS="$CFLAGS -DZSTD_DISABLE_ASM" \
        ZSTD_LEGACY_SUPPORT=0 libzstd.a
    cp "$SRC/zstd/lib/libzstd.a" "$DEPS/lib/"
    cp "$SRC/zstd/lib/zstd.h" "$SRC/zstd/lib/zstd_errors.h" "$DEPS/include/"
    cmake -S "$SRC/jansson" -B "$WORK/jansson-build" -DCMAKE_C_COMPILER="$CC" \
        -DCMAKE_C_FLAGS="$CFLAGS" -DJANSSON_BUILD_DOCS=OFF -DJANSSON_EXAMPLES=OFF \
        -DJANSSON_WITHOUT_TESTS=ON -DJANSSON_BUILD_SHARED_LIBS=OFF
    cmake --build "$WORK/jansson-build" -j"$(nproc)"
    cp "$WORK/jansson-build/lib/libjansson.a" "$DEPS/lib/"
    cp "$WORK/jansson-build/include/"*.h "$DEPS/include/"
    FLAGS="$FLAGS -DXXH_INLINE_ALL -I$DEPS/include"
fi

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
LIBS="-Wl,-Bstatic -lxxhash -lzstd -ljansson -ldeflate -Wl,-Bdynamic -lpthread -lm"
if [ "${SANITIZER:-}" = memory ]; then
    LIBS="$DEPS/lib/libjansson.a $DEPS/lib/libzstd.a -lpthread -lm"
fi

for t in $FUZZ_TARGETS; do
    objs=("$(compile "fuzz/$t.c")")
    $CXX $CXXFLAGS "${objs[@]}" "$WORK/libwpack-fuzz.a" $LIB_FUZZING_ENGINE $LIBS -o "$OUT/$t"
    cp "fuzz/$t.dict" "fuzz/$t.options" "$OUT/"
    # the seed corpus without the crash-* regression files (they would stop
    # a run at once while the bug they show is open)
    rm -f "$OUT/${t}_seed_corpus.zip"
    (cd "fuzz/corpus/$t" && ls | grep -v -E '^(crash|leak|timeout|oom)-' |
        zip -q -j "$OUT/${t}_seed_corpus.zip" -@)
done
