#!/bin/bash
# test_no_hooks.sh - test hooks (WPACK_TEST_HOOKS: the update stop of the
# kill tests) are compiled into the test builds only: the released wpack and
# libwpack hold neither the hook's code nor its environment variable, and
# ignore both; the test CLI (tests/wpack-hooks) has them, which shows that
# the search below finds a hook where there is one.
. "$(dirname "$0")/lib.sh"
BUILD_DIR=$(dirname "$WPACK")
HOOK='WPACK_UPDATE_STOP_AFTER|stopped after the append|test hook'

# has_hook FILE: the file's strings or symbols name a hook
has_hook() {
    { strings -a "$1"; nm -a "$1" 2>/dev/null; } | grep -q -E "$HOOK"
}
for f in "$WPACK" "$BUILD_DIR"/libwpack.so "$BUILD_DIR"/libwpack.a; do
    name=no_hook_in_$(basename "$f" | tr '.-' '__')
    if [ ! -e "$f" ]; then
        fail "$name" "$f missing"
    elif has_hook "$f"; then
        fail "$name" "$({ strings -a "$f"; nm -a "$f" 2>/dev/null; } | grep -E "$HOOK" | head -3)"
    else
        pass "$name"
    fi
done
if [ -x "$WPACK_HOOKS" ] && has_hook "$WPACK_HOOKS"; then
    pass test_cli_has_hook
else
    fail test_cli_has_hook "$WPACK_HOOKS: missing or without the hook"
fi

# The released CLI ignores the variable: the update is committed whole.
"$PY" -c 'import numpy as np; np.save("'"$T"'/a.npy", np.arange(6, dtype=np.float32))'
expect create "$WPACK" create -o "$T/a.wpack" "$T/a.npy"
expect update_ignores_hook env WPACK_UPDATE_STOP_AFTER=append "$WPACK" update "$T/a.wpack" --meta k=v
"$WPACK" inspect --json "$T/a.wpack" | grep -q '"generation": 2' && pass update_committed \
    || fail update_committed "$("$WPACK" inspect --json "$T/a.wpack" | grep generation)"
# and the test CLI stops where the hook says
cp "$T/a.wpack" "$T/b.wpack"
expect_fail hook_stops "stopped after the append" env WPACK_UPDATE_STOP_AFTER=append \
    "$WPACK_HOOKS" update "$T/b.wpack" --meta k2=v
finish
