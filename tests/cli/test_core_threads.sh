#!/bin/bash
# test_core_threads.sh - issue 15 "Done when": a program that links
# libwpack.so ALONE (wpack.h only) reads and verifies every tensor of a
# zstd-compressed archive and its process still has one thread; the core
# never reads the environment or starts a thread. The CLI still decodes on
# its pool (WPACK_THREADS) with the same bytes, and WPACK_ISA=scalar (the
# portable weight-stats path) writes the same archive.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS_DIR/.." && pwd)
BUILD_DIR=$(cd "$(dirname "$WPACK")" && pwd)

"$PY" - "$T/in" <<'PYEOF' || fail make_inputs
import os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d)
rng = np.random.default_rng(5)
# compressible (few distinct values), several MiB: many 64 KiB chunks
np.save(os.path.join(d, "big.npy"), (rng.integers(0, 8, size=(1024, 1500)) * 0.25).astype(np.float32))
np.save(os.path.join(d, "mid.npy"), (rng.integers(0, 4, size=(300, 301)) * 0.5).astype(np.float16))
np.save(os.path.join(d, "small.npy"), np.arange(10, dtype=np.float32))
PYEOF
expect create_zstd "$WPACK" create -q --compress zstd --chunk-size 64K --compress-min 1K -o "$T/z.wpack" "$T/in"
"$WPACK" inspect "$T/z.wpack" >"$T/inspect" 2>&1
grep -q zstd "$T/inspect" && pass archive_is_compressed || fail archive_is_compressed "$(head -5 "$T/inspect")"

cat >"$T/reader.c" <<'CEOF'
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include "wpack.h"
static int threads(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}
int main(int argc, char **argv) {
    wpack_archive *ar;
    if (argc < 2) return 2;
    if (wpack_open_file(&ar, argv[1], 0) != WPACK_OK) { fprintf(stderr, "%s\n", wpack_errmsg(ar)); return 1; }
    unsigned long long compressed = 0, bytes = 0;
    for (uint64_t i = 0; i < wpack_count(ar); i++) {
        wpack_tensor t;
        if (wpack_tensor_at(ar, i, &t) != WPACK_OK) return 1;
        void *buf = malloc(t.nbytes + 1);
        if (!buf) return 1;
        int rc = wpack_read_ex(ar, i, 0, buf, (size_t)t.nbytes, WPACK_READ_VERIFY);
        if (rc != WPACK_OK) { fprintf(stderr, "read %s: %s\n", t.name, wpack_error_name(rc)); return 1; }
        compressed += t.codec == WPACK_CODEC_ZSTD;
        bytes += t.nbytes;
        free(buf);
    }
    if (wpack_verify_all(ar, NULL, NULL) != WPACK_OK) { fprintf(stderr, "verify: %s\n", wpack_errmsg(ar)); return 1; }
    printf("compressed %llu bytes %llu threads %d\n", compressed, bytes, threads());
    wpack_close(ar);
    return 0;
}
CEOF
# include only wpack.h (a copy of include/ with nothing else), link libwpack alone
mkdir -p "$T/inc" && cp "$ROOT/include/wpack.h" "$T/inc/"
if cc ${SAN:-} -std=c11 -Wall -Werror -I"$T/inc" -o "$T/reader" "$T/reader.c" -L"$BUILD_DIR" -lwpack \
    -Wl,-rpath,"$BUILD_DIR" 2>"$T/cc.err"; then
    pass reader_builds_with_libwpack_alone
    ldd "$T/reader" | grep -q 'libwpack-' && fail reader_needs_only_libwpack "$(ldd "$T/reader" | grep libwpack-)" ||
        pass reader_needs_only_libwpack
    # WPACK_THREADS is the CLI's: the core must not act on it
    out=$(WPACK_THREADS=8 "$T/reader" "$T/z.wpack" 2>&1)
    case "$out" in
    "compressed 2 bytes 6324640 threads 1") pass one_thread_after_reading_all ;;
    *) fail one_thread_after_reading_all "$out" ;;
    esac
else
    fail reader_builds_with_libwpack_alone "$(head -5 "$T/cc.err")"
fi
bad=$(nm -D --undefined-only "$BUILD_DIR/libwpack.so" | awk '{print $2}' | sed 's/@.*//' |
    grep -x -E 'getenv|secure_getenv|pthread_create|umask')
[ -z "$bad" ] && pass core_imports_no_getenv_thread_umask || fail core_imports_no_getenv_thread_umask "$bad"
# no library folder reads the environment (the CLI, tests, tools and benches do)
hits=$(cd "$ROOT" && grep -n -E '\b(secure_)?getenv *\(' format/*.c reader/*.c packer/*.c kernel/*.c 2>/dev/null)
[ -z "$hits" ] && pass no_getenv_in_core_or_kernel || fail no_getenv_in_core_or_kernel "$hits"

# the CLI decodes on its pool: the same bytes on 1 thread and on 4
for n in 1 4; do
    expect "extract_threads_$n" env WPACK_THREADS=$n "$WPACK" extract -q "$T/z.wpack" -o "$T/x$n"
done
diff -r "$T/x1" "$T/x4" >/dev/null && [ -n "$(ls "$T/x1")" ] && pass extract_same_bytes_any_threads ||
    fail extract_same_bytes_any_threads "$(diff -rq "$T/x1" "$T/x4" | head -3)"
for n in 1 3; do
    expect "convert_threads_$n" env WPACK_THREADS=$n "$WPACK" convert -q "$T/z.wpack" --decompress -o "$T/d$n.wpack"
done
cmp -s "$T/d1.wpack" "$T/d3.wpack" && pass convert_same_bytes_any_threads || fail convert_same_bytes_any_threads
expect verify_threads_2 env WPACK_THREADS=2 WPACK_SPIN_US=0 "$WPACK" verify "$T/z.wpack"
# the CLI's pool starts when a read decodes several chunks, with WPACK_THREADS
# threads; a command that decodes nothing starts none
if strace -f -e trace=none true >/dev/null 2>&1; then
    # clones N ARGS...: threads `wpack ARGS` starts with WPACK_THREADS=N
    clones() {
        WPACK_THREADS=$1 strace -f -e trace=clone,clone3 "$WPACK" "${@:2}" 2>&1 >/dev/null | grep -c 'clone'
    }
    c3=$(clones 3 verify "$T/z.wpack")
    c1=$(clones 1 verify "$T/z.wpack")
    ci=$(clones 3 inspect "$T/z.wpack")
    # relative to WPACK_THREADS=1 (a sanitizer's leak check clones once at exit)
    [ $((c3 - c1)) = 2 ] && [ "$ci" = "$c1" ] && [ "$c1" -le 1 ] && pass cli_pool_threads ||
        fail cli_pool_threads "threads started: $c3 with 3, $c1 with 1, $ci by inspect"
else
    echo "# skip cli_pool_threads: strace cannot trace here"
fi

# WPACK_ISA=scalar: the writer's portable weight-stats path, the same archive
expect create_plain "$WPACK" create -q -o "$T/p.wpack" "$T/in"
expect create_plain_scalar env WPACK_ISA=scalar "$WPACK" create -q -o "$T/ps.wpack" "$T/in"
cmp -s "$T/p.wpack" "$T/ps.wpack" && pass scalar_stats_same_archive || fail scalar_stats_same_archive
finish
