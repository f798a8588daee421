#!/bin/bash
# test_remote_slices.sh - with verification on, a partial read of a remote
# entry is always served from a fetch of the whole entry checked against its
# XXH3 (build/tests/test_remote_slices, a C program on the library): after
# the kept copy of 'a' was replaced by 'big', a slice of 'a' from a server
# that now sends zeros is an error (or the right bytes), never zeros.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

PROG="$(dirname "$WPACK")/tests/test_remote_slices"
mkdir -p "$T/www" "$T/in"
"$PY" - "$T/in" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
r = np.random.default_rng(9)
np.save(f"{d}/a.npy", r.standard_normal((300, 1000)).astype(np.float32))
np.save(f"{d}/big.npy", r.standard_normal((3, 1024, 1024)).astype(np.float32))
PYEOF
expect create "$WPACK" create -q -o "$T/www/m.wpack" "$T/in"
need_bad_server "$T/www"
for mode in whole stream; do
    rm -f "$T/zero.flag"
    if "$PROG" "$B/zeroflag/m.wpack" "$T/www/m.wpack" "$T/zero.flag" $mode >"$T/out" 2>&1; then
        pass "slices_checked_$mode"
    else
        fail "slices_checked_$mode" "$(head -c 600 "$T/out")"
    fi
done
rm -f "$T/zero.flag"
finish
