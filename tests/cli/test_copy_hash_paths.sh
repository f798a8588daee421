#!/bin/bash
# test_copy_hash_paths.sh - the cached-step copy paths (issue 19): inputs are
# read a 256 KiB step at a time with pread, CRC-32 / XXH3 / stats computed
# there, and copied with copy_file_range. Every input kind (torch, safetensors,
# stored npz, .npy, GGUF, .irpa), with stats or not, with -j 2 or not, gives
# the archive of the plain path (WPACK_NO_COPY_RANGE=1) byte for byte;
# extract and export give the same files both ways; a byte flipped late in
# a torch storage or a stored npz member (past the first steps) is caught
# by the zip CRC-32; a byte flipped in an archive is caught by extract's
# read-back check.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

# 6 tensors of ~1.3 MB: several steps each, a ragged last one
if ! "$PY" "$SRC/bench/pack/make_inputs.py" "$T/in" 8000000 6 2>"$T/err" ||
    ! "$PY" "$SRC/bench/gguf/make_gguf.py" "$T/in/model.gguf" 8000000 >/dev/null 2>"$T/err"; then
    fail inputs "$(head -c 300 "$T/err")"
    finish
    exit
fi
"$WPACK" create -q --no-stats -o "$T/st.wpack" "$T/in/model.safetensors" 2>"$T/err" &&
    "$WPACK" export "$T/st.wpack" --to irpa -o "$T/in/model.irpa" >/dev/null 2>>"$T/err" ||
    fail irpa_input "$(head -c 300 "$T/err")"

for kind in model.pt model.safetensors model.npz npy model.gguf model.irpa; do
    same_with_copy_range "same_${kind}" "$T/in/$kind"
    same_with_copy_range "same_${kind}_no_stats" --no-stats "$T/in/$kind"
    same_with_copy_range "same_${kind}_j2" -j 2 "$T/in/$kind"
    same_with_copy_range "same_${kind}_j2_no_stats" -j 2 --no-stats "$T/in/$kind"
done

# extract and export: the same files with copy_file_range + read-back and
# with pread/write
"$WPACK" create -q -o "$T/m.wpack" "$T/in/model.pt" 2>"$T/err" || fail pack_pt "$(head -c 300 "$T/err")"
if "$WPACK" extract -q "$T/m.wpack" -o "$T/xa" 2>"$T/err" &&
    WPACK_NO_COPY_RANGE=1 "$WPACK" extract -q "$T/m.wpack" -o "$T/xb" 2>>"$T/err" &&
    [ "$(ls "$T/xa" | wc -l)" -ge 6 ] && diff -r "$T/xa" "$T/xb" >/dev/null; then
    pass extract_same
else
    fail extract_same "$(head -c 300 "$T/err")"
fi
if "$WPACK" export "$T/m.wpack" --to safetensors -o "$T/a.st" >/dev/null 2>"$T/err" &&
    WPACK_NO_COPY_RANGE=1 "$WPACK" export "$T/m.wpack" --to safetensors -o "$T/b.st" >/dev/null 2>>"$T/err" &&
    cmp -s "$T/a.st" "$T/b.st"; then
    pass export_same
else
    fail export_same "$(head -c 300 "$T/err")"
fi

# A byte flipped 1 MB into a zip member's data (torch storage, npz member):
# refused by its CRC-32 on both paths, no archive left.
flip_member() { # IN OUT MEMBER_SUFFIX
    "$PY" - "$1" "$2" "$3" <<'PY'
import shutil, sys, zipfile
src, dst, suffix = sys.argv[1:4]
shutil.copy(src, dst)
z = zipfile.ZipFile(src)
info = [i for i in z.infolist() if i.filename.endswith(suffix)][0]
with open(dst, "r+b") as f:
    f.seek(info.header_offset + 26)
    n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
    at = info.header_offset + 30 + n + m + 1000000
    assert info.file_size > 1000001
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0x40]))
PY
}
flip_member "$T/in/model.pt" "$T/bad.pt" "data/0"
flip_member "$T/in/model.npz" "$T/bad.npz" "layers.0.weight.npy"
for bad in bad.pt bad.npz; do
    expect_fail "crc_${bad}_fast" 'CRC-32.*\[WPACK_E_CHECKSUM\]' "$WPACK" create -q -o "$T/c.wpack" "$T/$bad"
    [ ! -e "$T/c.wpack" ] && pass "crc_${bad}_no_output" || fail "crc_${bad}_no_output" "archive left"
    WPACK_NO_COPY_RANGE=1 expect_fail "crc_${bad}_plain" 'CRC-32.*\[WPACK_E_CHECKSUM\]' "$WPACK" create -q -o "$T/c.wpack" "$T/$bad"
done

# A byte flipped in an archive's tensor data: extract's read-back check
# (copy_file_range, then the output re-read and hashed) refuses it.
cp "$T/m.wpack" "$T/badarc.wpack"
OFF=$("$WPACK" inspect --json "$T/m.wpack" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
t = max(d["tensors"], key=lambda t: t["nbytes"])
print(t["offset"] + t["nbytes"] - 100)' 2>"$T/err")
if [ -n "$OFF" ]; then
    printf '\x55' | dd of="$T/badarc.wpack" bs=1 seek="$OFF" conv=notrunc status=none
    expect_fail extract_bad_checksum 'WPACK_E_CHECKSUM' "$WPACK" extract -q "$T/badarc.wpack" -o "$T/xc"
else
    fail extract_bad_checksum "no offset from inspect --json: $(head -c 300 "$T/err")"
fi
finish
