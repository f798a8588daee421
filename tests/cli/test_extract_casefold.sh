#!/bin/bash
# test_extract_casefold.sh - extract into a case-insensitive directory (a
# FUSE file system that folds names to lower case, tests/cli/casefold_fs.py,
# as ext4 casefold, vfat, exfat, APFS and NTFS do): tensors 'A.x' and 'a.x'
# have two file names there that are one file. The second is refused
# (WPACK_E_SAME_FILE, naming both tensors and both paths), the first file
# stays whole, the exit status says it; before, the second rename replaced
# the first file and extract said it extracted both. Also when the two fall
# in different commit batches (a small open-file limit), and one alone is
# extracted as ever. The same for externalize's two outputs: OUT.X and
# out.x not there yet are not one path by name, but one file here: the MLIR
# is not renamed over the new archive (before: the archive was lost, exit
# 0). Needs /dev/fuse (a kernel device: a machine without it skips this
# test visibly, "skip ...", counted neither passed nor failed; the same
# rule has unit tests in test_atomic_batch) and fuse3 + python3-fusepy
# (tools/deps.sh): with /dev/fuse there, a mount that fails FAILS.
. "$(dirname "$0")/lib.sh"

if [ ! -c /dev/fuse ]; then
    echo "skip extract_casefold_*, externalize_casefold_*: no /dev/fuse on this machine" \
        "(test_atomic_batch test_run_refuses_folded_names checks the rule)"
    finish
    exit 0
fi

MNT="$T/mnt"
mkdir -p "$T/back" "$MNT" "$T/src"
fuse_pid=
unmount() {
    if grep -q " $MNT fuse" /proc/mounts 2>/dev/null; then
        fusermount3 -u "$MNT" 2>/dev/null || fusermount -u "$MNT" 2>/dev/null || umount "$MNT"
    fi
    [ -n "$fuse_pid" ] && wait "$fuse_pid" 2>/dev/null
}
trap 'unmount; rm -rf "$T"' EXIT

"$PY" "$TESTS_DIR/cli/casefold_fs.py" "$T/back" "$MNT" 2>"$T/fuse.err" &
fuse_pid=$!
for _ in $(seq 300); do
    grep -q " $MNT fuse" /proc/mounts && break
    kill -0 "$fuse_pid" 2>/dev/null || break
    sleep 0.1
done
if ! grep -q " $MNT fuse" /proc/mounts; then
    fail mount_casefold "cannot mount the case-insensitive FUSE file system (needs /dev/fuse," \
        "fuse3 and python3-fusepy: tools/deps.sh): $(head -c 300 "$T/fuse.err")"
    finish
    exit 1
fi
echo x >"$MNT/Case"
[ "$(cat "$MNT/cASE" 2>/dev/null)" = x ] && pass mount_is_case_insensitive ||
    fail mount_is_case_insensitive "Case and cASE are not one file"
rm -f "$MNT/case"

# A.x first, then 20 others (N00..N19: entries are in name order), then a.x: different batches when the
# batch is 16 files
"$PY" - "$T/src" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
np.save(d + "/A.x.npy", np.arange(4, dtype=np.float32))
for k in range(20):
    np.save(d + "/N%02d.npy" % k, np.full(2, k, dtype=np.int32))
np.save(d + "/a.x.npy", np.arange(4, dtype=np.float32) * 10)
PY
"$WPACK" create -q -o "$T/cf.wpack" "$T/src/A.x.npy" "$T/src"/N*.npy "$T/src/a.x.npy" ||
    fail create_archive

# holds NAME VALUES: MNT/out/NAME.npy is the float32 array VALUES
holds() {
    "$PY" -c 'import sys, numpy as np; a = np.load(sys.argv[1]); sys.exit(0 if a.tolist() == eval(sys.argv[2]) else 1)' \
        "$MNT/out/$1.npy" "$2" 2>/dev/null
}

pat="tensors 'A\.x' and 'a\.x' would both be written to one file: this file system takes $MNT/out/A\.x\.npy and $MNT/out/a\.x\.npy for one name.*the file of 'A\.x' is kept.*\[WPACK_E_SAME_FILE\]"
for batch in one two; do
    rm -rf "$MNT/out"
    if [ $batch = one ]; then
        expect_fail "extract_casefold_refused_$batch" "$pat" "$WPACK" extract -q "$T/cf.wpack" -o "$MNT/out"
    else
        expect_fail "extract_casefold_refused_$batch" "$pat" bash -c 'ulimit -n 64 && exec "$@"' _ \
            "$WPACK" extract -q "$T/cf.wpack" -o "$MNT/out"
    fi
    holds a.x "[0, 1, 2, 3]" && pass "extract_casefold_first_kept_$batch" ||
        fail "extract_casefold_first_kept_$batch" "a.x.npy is not A.x's data"
    left=$(ls -a "$MNT/out" | grep -c '\.tmp-')
    [ "$left" -eq 0 ] && pass "extract_casefold_no_temporary_$batch" ||
        fail "extract_casefold_no_temporary_$batch" "$left temporaries left"
done
# the files before the refused one are in place (with 16 a batch: A.x and
# N00..N14 committed by the first batch, N15..N19 by the second)
[ "$(ls "$MNT/out" | grep -c '^n.*\.npy$')" -eq 20 ] && pass extract_casefold_before_kept ||
    fail extract_casefold_before_kept "$(ls "$MNT/out" | tr '\n' ' ')"

# one of the two alone, and the others, extract as ever
rm -rf "$MNT/out"
expect extract_casefold_one_side "$WPACK" extract -q "$T/cf.wpack" -o "$MNT/out" a.x N00
holds a.x "[0, 10, 20, 30]" && pass extract_casefold_one_side_data ||
    fail extract_casefold_one_side_data "a.x.npy is not a.x's data"
# a second run replaces the first run's file, as any extract does
expect extract_casefold_again "$WPACK" extract -q "$T/cf.wpack" -o "$MNT/out" A.x
holds a.x "[0, 1, 2, 3]" && pass extract_casefold_again_data ||
    fail extract_casefold_again_data "a.x.npy is not A.x's data"

# --- externalize: -o OUT.X --archive out.x -----------------------------------
cat >"$MNT/in.mlir" <<'MLIR'
module {
  ml_program.global private @w(dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>) : tensor<8xf32>
}
MLIR
cd "$MNT" || exit 1
expect_fail externalize_casefold_refused \
    "OUT\.X and out\.x are one file on this file system.*nothing written, both paths as before.*\[WPACK_E_SAME_FILE\]" \
    "$WPACK" externalize in.mlir -o OUT.X --archive out.x --min-bytes 1
[ -z "$(ls -a | grep -v -e '^\.\.\?$' -e '^in\.mlir$' -e '^out$')" ] && pass externalize_casefold_nothing_left ||
    fail externalize_casefold_nothing_left "$(ls -a | tr '\n' ' ')"
echo old >"$MNT/out.x"
expect_fail externalize_casefold_existing "\[WPACK_E_SAME_FILE\]" \
    "$WPACK" externalize in.mlir -o OUT.X --archive out.x --min-bytes 1
[ "$(cat "$MNT/out.x")" = old ] && pass externalize_casefold_existing_kept ||
    fail externalize_casefold_existing_kept "out.x was replaced"
expect externalize_casefold_apart "$WPACK" externalize -q in.mlir -o OUT.mlir --archive out.x --min-bytes 1
"$WPACK" verify out.x >/dev/null 2>&1 && grep -q "wpack:" OUT.mlir && pass externalize_casefold_apart_outputs ||
    fail externalize_casefold_apart_outputs "$(ls | tr '\n' ' ')"
cd "$T" || exit 1

finish
