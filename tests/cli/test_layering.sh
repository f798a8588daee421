#!/bin/bash
# test_layering.sh - the promises of "one library per folder" (issue 15),
# checked on the tree and on the built objects:
#  - a file includes only its own library's headers and libwpack's public or
#    format/ ones; the upper libraries (import, dense, mlir, remote) do not
#    include each other's or the core's reader/ and packer/ internals;
#  - each upper library's objects need no wpk_ symbol that only reader/ or
#    packer/ defines (what they share with the core is format/);
#  - no library folder reads the environment, starts a thread outside the
#    explicit pool, or calls umask;
#  - no library file is over 800 lines without saying why in its opening
#    comment ("over 800 lines:");
#  - wpack.h includes none of the other public headers.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS_DIR/.." && pwd)
BUILD_DIR=$(dirname "$WPACK")
cd "$ROOT" || exit 1

upper="import kernel resolver remote"
core_private_headers=$(ls reader/*.h packer/*.h 2>/dev/null | xargs -n1 basename | sort -u)
headers_of() { ls "$1"/*.h 2>/dev/null | xargs -rn1 basename; }

# 1. includes
for lib in $upper; do
    [ -d "$lib" ] || continue
    bad=""
    others=""
    for o in $upper; do
        [ "$o" = "$lib" ] || others="$others $(headers_of "$o")"
    done
    for f in "$lib"/*.c "$lib"/*.h; do
        [ -f "$f" ] || continue
        for inc in $(grep -ho '^#include "[^"]*"' "$f" | sed 's/#include "\(.*\)"/\1/'); do
            [ -f "$lib/$inc" ] && continue          # its own header
            if echo "$core_private_headers $others" | tr ' ' '\n' | grep -qx "$inc"; then
                bad="$bad $f:$inc"
            fi
        done
    done
    [ -z "$bad" ] && pass "includes_$lib" || fail "includes_$lib" "$bad"
done
# the core does not include the upper libraries' headers
bad=""
for f in format/*.[ch] reader/*.[ch] packer/*.[ch]; do
    for inc in $(grep -ho '^#include "[^"]*"' "$f" | sed 's/#include "\(.*\)"/\1/'); do
        for o in $upper; do
            headers_of "$o" | grep -qx "$inc" && bad="$bad $f:$inc"
        done
        case $inc in wpack_*.h) bad="$bad $f:$inc" ;; esac
    done
done
[ -z "$bad" ] && pass includes_core || fail includes_core "$bad"

# 2. symbols: what an upper library's objects need from the core's private
# parts (defined by reader/ or packer/ objects but not exported)
objs_of() { for c in "$@"; do echo "$BUILD_DIR/obj/${c%.c}.o"; done; }
core_private_syms=$(nm --defined-only $(objs_of reader/*.c packer/*.c) 2>/dev/null |
    awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^wpack_' | sort -u)
if [ -z "$core_private_syms" ]; then
    fail symbols_core_built "no objects in $BUILD_DIR/obj"
else
    for lib in $upper; do
        [ -d "$lib" ] || continue
        need=$(nm -u $(objs_of "$lib"/*.c) | awk '{print $2}' | sort -u)
        bad=$(comm -12 <(echo "$need") <(echo "$core_private_syms") | tr '\n' ' ')
        [ -z "$bad" ] && pass "symbols_$lib" || fail "symbols_$lib" "uses core internals: $bad"
    done
fi

# 3. environment, threads, umask in library folders
bad=$(grep -n -E '\b(getenv|secure_getenv|umask)\s*\(' format/*.c reader/*.c packer/*.c \
    $(for l in $upper; do ls $l/*.c 2>/dev/null; done) | tr '\n' ' ')
[ -z "$bad" ] && pass library_reads_no_env || fail library_reads_no_env "$bad"
bad=$(grep -ln 'pthread_create' format/*.c reader/*.c packer/*.c import/*.c resolver/*.c 2>/dev/null | tr '\n' ' ')
[ -z "$bad" ] && pass threads_only_in_pool || fail threads_only_in_pool "$bad"

# 4. file sizes
bad=""
for f in format/*.[ch] reader/*.[ch] packer/*.[ch] $(for l in $upper; do ls $l/*.[ch] 2>/dev/null; done); do
    n=$(wc -l <"$f")
    if [ "$n" -gt 800 ] && ! head -20 "$f" | grep -q 'over 800 lines:'; then
        bad="$bad $f($n)"
    fi
done
[ -z "$bad" ] && pass files_under_800_lines || fail files_under_800_lines "$bad"

# 5. the core header stands alone
grep -q '#include "wpack_' include/wpack.h && fail core_header_alone "wpack.h includes another wpack header" ||
    pass core_header_alone
finish
