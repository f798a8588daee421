#!/bin/bash
# test_build.sh - what the build promises: exported symbols, soname, install
# with pkg-config, a program linked against the installed library, clang.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS_DIR/.." && pwd)
BUILD_DIR=$(dirname "$WPACK")
SO=$(ls "$BUILD_DIR"/libwpack.so.*.*.* 2>/dev/null | head -1)

# Four libraries (sources.mk): each exports only wpack_ calls, has a
# versioned soname and links (-z defs) against the ones below it.
for lib in wpack wpack-import wpack-dense wpack-mlir wpack-remote; do
    so=$(ls "$BUILD_DIR"/lib$lib.so.*.*.* 2>/dev/null | head -1)
    [ -n "$so" ] && pass "shared_library_built_$lib" || { fail "shared_library_built_$lib"; continue; }
    others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^wpack_' | grep -v '^_')
    [ -z "$others" ] && pass "only_wpack_symbols_exported_$lib" || fail "only_wpack_symbols_exported_$lib" "$others"
    objdump -p "$so" | grep -q "SONAME *lib$lib.so.0$" && pass "soname_$lib" || fail "soname_$lib" "$(objdump -p "$so" | grep SONAME)"
    # Every call its header declares is exported (a version script that
    # leaves one out breaks only programs linking the shared library: the
    # CLI and the unit tests link the static ones), and nothing else.
    header=$ROOT/include/$(echo "$lib" | tr - _).h
    declared=$(grep -v -E '^ *(\*|/\*|#)' "$header" | grep -oE '\bwpack_[a-z0-9_]+ *\(' | tr -d ' (' | sort -u)
    exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sort -u)
    missing=$(comm -23 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')
    extra=$(comm -13 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')
    [ -n "$declared" ] && [ -z "$missing$extra" ] && pass "exports_match_header_$lib" ||
        fail "exports_match_header_$lib" "declared, not exported: ${missing:-none}; exported, not declared: ${extra:-none}"
    # What a library may not call (the caller owns the process): the
    # environment, the umask, the process's exit, signals and locale, the
    # standard streams (messages go to the caller), assert, and threads
    # outside libwpack-dense's pool (wpack_pool_create, the default pool of
    # wpack_linear_forward: wpack_dense.h).
    forbidden='(secure_)?getenv|umask|abort|exit|_exit|_Exit|quick_exit|atexit|at_quick_exit'
    forbidden="$forbidden|(__)?(v?printf|vprintf)(_chk)?|puts|putchar|perror|stdout|stderr|stdin"
    forbidden="$forbidden|__assert_fail|__assert_perror_fail|signal|sigaction|raise|setlocale"
    forbidden="$forbidden|(set|put|unset|clear)env|environ|__environ|system|popen|fork|chdir|s?rand|strtok"
    forbidden="$forbidden|localtime|gmtime|ctime|asctime"
    [ "$lib" = wpack-dense ] || forbidden="$forbidden|pthread_create"
    bad=$(nm -D --undefined-only "$so" | awk '{print $2}' | sed 's/@.*//' | grep -x -E "$forbidden" | tr '\n' ' ')
    [ -z "$bad" ] && pass "imports_allowed_$lib" || fail "imports_allowed_$lib" "$bad"
    # Mutable state that outlives a call (.data, .bss, thread-local; not
    # .data.rel.ro, read-only once relocated; not the toolchain's and
    # ASan's own): only what is listed here, each
    # with its reason. libwpack: opening_shard, a thread-local flag set only
    # while a sharded manifest opens its shards (a manifest naming itself
    # would recurse), cleared before the open returns. libwpack-dense: the
    # process settings of wpack_dense_configure() and the default pool
    # (documented in wpack_dense.h), the CPU features detected once.
    # libwpack-remote: curl_global_init() once per process (libcurl's rule).
    case $lib in
    wpack) allowed='opening_shard' ;;
    wpack-dense) allowed='lock|default_pool|pool_threads|pool_spin_us|min_parallel|once|supported|selected' ;;
    wpack-remote) allowed='curl_once|curl_ok' ;;
    *) allowed='' ;;
    esac
    state=$(objdump -t "$so" | awk '{s = ""; for (i = 2; i <= 4; i++) if ($i ~ /^\./) s = $i}
        s ~ /^\.(data|data\.rel|data\.rel\.local|bss|tbss|tdata)$/ && $NF !~ /^(\.|__dso_handle$|__TMC_END__$|completed\.[0-9]+$|__odr_asan)/ {print $NF}' |
        grep -v -x -E "${allowed:-^$}" | tr '\n' ' ')
    [ -z "$state" ] && pass "no_hidden_state_$lib" || fail "no_hidden_state_$lib" "mutable statics: $state"
done
nm -D --defined-only "$SO" | grep -q ' wpack_open_file$' && pass api_exported || fail api_exported
nm -D --defined-only "$BUILD_DIR/libwpack-dense.so" | grep -q ' wpack_linear_forward$' && pass dense_api_exported || fail dense_api_exported
nm -D --defined-only "$BUILD_DIR/libwpack-mlir.so" | grep -q ' wpack_resolve_buffer$' && pass mlir_api_exported || fail mlir_api_exported
# The core is a leaf: it needs none of the other three.
ldd "$SO" | grep -q 'libwpack-' && fail core_needs_no_other_wpack "$(ldd "$SO" | grep libwpack-)" || pass core_needs_no_other_wpack
# Only libwpack-remote links libcurl (issue 17): the core has no network code.
ldd "$SO" | grep -q 'libcurl' && fail core_needs_no_libcurl || pass core_needs_no_libcurl
ldd "$BUILD_DIR/libwpack-remote.so" 2>/dev/null | grep -q 'libcurl' && pass remote_links_libcurl || fail remote_links_libcurl
nm -D --defined-only "$BUILD_DIR/libwpack-remote.so" | grep -q ' wpack_open_url$' && pass remote_api_exported || fail remote_api_exported

# Each public header compiles alone, as strict C11 and C99 and as C++
# (extern "C": a C++ program links against the C library).
for h in wpack wpack_import wpack_dense wpack_mlir wpack_remote; do
    printf '#include "%s.h"\nint main(void) { return wpack_version_number() == 0; }\n' "$h" >"$T/h_$h.c"
    for std in c11 c99; do
        cc -std=$std -Wall -Wextra -pedantic -Werror -I"$ROOT/include" -c "$T/h_$h.c" -o "$T/h.o" 2>"$T/h.err" &&
            pass "header_alone_${std}_$h" || fail "header_alone_${std}_$h" "$(head -3 "$T/h.err")"
    done
    if command -v c++ >/dev/null; then
        cp "$T/h_$h.c" "$T/h_$h.cpp"
        c++ ${SAN:-} -std=c++11 -Wall -Wextra -pedantic -Werror -I"$ROOT/include" -o "$T/h_cxx" "$T/h_$h.cpp" \
            -L"$BUILD_DIR" -lwpack 2>"$T/h.err" && pass "header_cxx_links_$h" || fail "header_cxx_links_$h" "$(head -3 "$T/h.err")"
    fi
done

# Structs never change size (wpack.h, Conventions): every options, settings
# and result struct of the public headers, the source, the stats record and
# the reader's output structs end with reserved fields a later field takes the place of
# (a struct added without them fails here).
no_reserved=$(awk '
/^typedef struct [a-z_]+ \{/ { name = $3; body = ""; inside = 1; next }
inside { body = body $0 "\n" }
inside && /^\} [a-z_]+;/ {
    inside = 0
    if (name ~ /_(options|settings|result)$/ || name ~ /^wpack_(source|stats_in|tensor|info|meta|stats)$/) {
        seen++
        if (body !~ /reserved_ptr\[[0-9]+\];/ || body !~ /uint64_t reserved\[[0-9]+\];/)
            print name
    }
}
END { if (seen < 15) print "only " seen + 0 " structs seen" }' "$ROOT"/include/*.h | tr '\n' ' ')
[ -z "$no_reserved" ] && pass public_structs_have_reserved_fields ||
    fail public_structs_have_reserved_fields "$no_reserved"

P="$T/prefix"
if make -s -C "$ROOT" install BUILD="$(basename "$BUILD_DIR")" PREFIX="$P" OPT="${OPT:--O2 -g}" SAN="${SAN:-}" >"$T/inst.log" 2>&1; then
    pass make_install
else
    fail make_install "$(tail -5 "$T/inst.log")"
fi
for f in include/wpack.h include/wpack_dense.h include/wpack_mlir.h \
    lib/libwpack.a lib/libwpack.so lib/libwpack.so.0 lib/pkgconfig/wpack.pc \
    lib/libwpack-import.a lib/libwpack-import.so.0 lib/pkgconfig/wpack-import.pc \
    lib/libwpack-dense.a lib/libwpack-dense.so.0 lib/pkgconfig/wpack-dense.pc \
    lib/libwpack-mlir.a lib/libwpack-mlir.so.0 lib/pkgconfig/wpack-mlir.pc \
    include/wpack_remote.h lib/libwpack-remote.so.0 lib/pkgconfig/wpack-remote.pc bin/wpack; do
    [ -e "$P/$f" ] && pass "installed_$(basename "$f")" || fail "installed_$f"
done
cat >"$T/user.c" <<'CEOF'
#include <stdio.h>
#include <wpack.h>
int main(int argc, char **argv) {
    wpack_archive *ar;
    if (argc < 2) return 2;
    if (wpack_open_file(&ar, argv[1], 0) != WPACK_OK) { fprintf(stderr, "%s\n", wpack_errmsg(ar)); return 1; }
    printf("%s %llu\n", wpack_version_string(), (unsigned long long)wpack_count(ar));
    wpack_close(ar);
    return 0;
}
CEOF
flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs wpack 2>/dev/null)
if cc ${SAN:-} -o "$T/user" "$T/user.c" $flags -Wl,-rpath,"$P/lib" 2>"$T/cc.err"; then
    pass link_against_installed_so
    "$P/bin/wpack" create -q -o "$T/u.wpack" "$ROOT/examples/mlp" 2>/dev/null
    out=$("$T/user" "$T/u.wpack")
    [ "$out" = "0.1.0 4" ] && pass run_against_installed_so || fail run_against_installed_so "$out"
    ldd "$T/user" | grep -q "$P/lib/libwpack.so.0" && pass uses_shared_library || fail uses_shared_library
else
    fail link_against_installed_so "$(head -5 "$T/cc.err")"
fi

# the README's API example, against the installed library
if cc ${SAN:-} -Wall -Wextra -Werror -o "$T/api_example" "$ROOT/examples/api_example.c" $flags -Wl,-rpath,"$P/lib" 2>"$T/cc2.err"; then
    out=$("$T/api_example" "$T/example.wpack")
    expected="0.weight: f32 [2, 3], v[5] = 6
min 1 max 6 mean 3.5
checksum: ok"
    [ "$out" = "$expected" ] && pass readme_api_example || fail readme_api_example "$out"
else
    fail readme_api_example_builds "$(head -5 "$T/cc2.err")"
fi

# clang, -Werror: only in the plain configuration (the sanitizer run repeats it otherwise)
if [ -z "${SAN:-}" ] && command -v clang >/dev/null; then
    if make -s -C "$ROOT" all BUILD=build-clang CC=clang >"$T/clang.log" 2>&1; then
        pass clang_werror_build
    else
        fail clang_werror_build "$(grep -m3 error "$T/clang.log")"
    fi
fi
finish
