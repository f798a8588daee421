#!/bin/bash
# test_shards_commit.sh - writing a sharded set over an existing one: when
# the manifest cannot be written (here: a file-size limit, as a full disk
# would do), the old set stays whole - its shards are not replaced before
# the new manifest is complete and synced.
. "$(dirname "$0")/lib.sh"
"$PY" - "$T" <<'PYEOF'
import sys, numpy as np
d = sys.argv[1]
import os
os.makedirs(f"{d}/old"); os.makedirs(f"{d}/new")
for i in range(3):
    np.save(f"{d}/old/t{i}.npy", np.full((64, 64), i, np.float32))
    np.save(f"{d}/new/t{i}.npy", np.full((64, 64), 10 + i, np.float32))
PYEOF
expect create_old_set "$WPACK" create -q --shard-size 20K -o "$T/set.wpack" "$T/old"
ls "$T"/set-*.wpack >/dev/null 2>&1 && pass old_set_has_shards || fail old_set_has_shards "$(ls "$T")"
"$WPACK" extract -q "$T/set.wpack" -o "$T/x_before" 2>"$T/err" || fail extract_before "$(cat "$T/err")"
big=$(head -c 100000 /dev/zero | tr '\0' a)
# Each shard is ~16 KiB, the new manifest over 300 KB: a 64 KiB file-size
# limit lets every shard be written and stops the manifest's index.
(
    trap '' XFSZ
    ulimit -f 64
    "$WPACK" create -q --shard-size 20K -o "$T/set.wpack" "$T/new" \
        --meta "a=$big" --meta "b=$big" --meta "c=$big"
) >"$T/out" 2>"$T/err"
rc=$?
[ $rc -ne 0 ] && grep -q 'WPACK_E_' "$T/err" && pass new_set_fails || fail new_set_fails "exit $rc: $(cat "$T/err")"
if "$WPACK" verify "$T/set.wpack" >/dev/null 2>"$T/err"; then pass old_set_still_verifies; else fail old_set_still_verifies "$(cat "$T/err")"; fi
"$WPACK" extract -q "$T/set.wpack" -o "$T/x_after" 2>"$T/err"
if diff -r "$T/x_before" "$T/x_after" >/dev/null; then pass old_set_same_tensors; else fail old_set_same_tensors "$(cat "$T/err")"; fi
left=$(ls "$T" | grep -c 'tmp-') || true
[ "$left" -eq 0 ] && pass no_temporaries_left || fail no_temporaries_left "$(ls "$T")"
# and without the limit the new set replaces the old one
expect create_new_set "$WPACK" create -q --shard-size 20K -o "$T/set.wpack" "$T/new"
"$WPACK" extract -q "$T/set.wpack" -o "$T/x_new" 2>"$T/err"
v=$("$PY" -c "import numpy as np, sys; print(int(np.load(sys.argv[1])[0, 0]))" "$T/x_new/t1.npy" 2>&1)
[ "$v" = 11 ] && pass new_set_in_place || fail new_set_in_place "$v"
finish
