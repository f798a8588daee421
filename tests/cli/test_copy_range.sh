#!/bin/bash
# test_copy_range.sh - tensor bytes that go to the archive unchanged move with
# copy_file_range (wpack_writer_write_from_fd, issue 19): every input kind
# and option gives the same archive, byte for byte, with the fast path and
# without it (WPACK_NO_COPY_RANGE=1), across file systems (the kernel refuses
# with EXDEV: read/write instead), and a damaged torch checkpoint is still
# caught by its zip CRC-32.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

if ! "$PY" "$SRC/bench/pack/make_inputs.py" "$T/in" 3000000 12 2>"$T/err"; then
    fail make_inputs "$(head -c 300 "$T/err")"
    finish
    exit
fi
# plus a bool tensor and a tiny one (both take the ordinary path)
"$PY" - "$T/in" <<'PY'
import sys, numpy as np
np.save(sys.argv[1] + "/npy/mask.npy", np.array([True, False] * 70000))
np.save(sys.argv[1] + "/npy/tiny.npy", np.arange(5, dtype=np.float32))
PY

for kind in model.pt model.safetensors model.npz npy; do
    same_with_copy_range "same_${kind}" "$T/in/$kind"
    same_with_copy_range "same_${kind}_no_stats" --no-stats "$T/in/$kind"
done
same_with_copy_range same_pt_compressed --compress zstd:1 --compress-min 4096 "$T/in/model.pt"
same_with_copy_range same_pt_cast --cast bf16 "$T/in/model.pt"
same_with_copy_range same_two_inputs "$T/in/model.pt" --prefix x "$T/in/model.safetensors"
# a sharded set: the shards' names follow the manifest's, so two directories
mkdir -p "$T/sa" "$T/sb"
if "$WPACK" create -q --shard-size 1000000 -o "$T/sa/m.wpack" "$T/in/model.safetensors" 2>"$T/err" &&
    WPACK_NO_COPY_RANGE=1 "$WPACK" create -q --shard-size 1000000 -o "$T/sb/m.wpack" "$T/in/model.safetensors" 2>>"$T/err" &&
    [ "$(ls "$T/sa" | wc -l)" -gt 2 ] && diff -r "$T/sa" "$T/sb" >/dev/null; then
    pass same_st_sharded
else
    fail same_st_sharded "$(head -c 300 "$T/err")"
fi

# page.npy: its data starts at byte 4096, as the archive's first tensor
# does: copy_file_range moves it (the kernel can share or move whole
# pages). The other inputs' tensors sit elsewhere in a page than in the
# archive: they are written from the step read to hash them (cheaper than
# the kernel's copy of split pages). Not at all under WPACK_NO_COPY_RANGE=1.
"$PY" - "$T/page.npy" <<'PY'
import sys, numpy as np
a = np.random.default_rng(24).standard_normal(300000).astype(np.float32)
d = "{'descr': '<f4', 'fortran_order': False, 'shape': (300000,), }"
head = d + " " * (4096 - 10 - len(d) - 1) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + a.tobytes())
assert (np.load(sys.argv[1]) == a).all()
PY
same_with_copy_range same_page_npy "$T/page.npy"
copy_range_used fast_path_taken yes "$T/page.npy"
copy_range_used misaligned_written no "$T/in/model.safetensors"
copy_range_used misaligned_written_npy no "$T/in/npy"
WPACK_NO_COPY_RANGE=1 copy_range_used no_copy_range_option no "$T/page.npy"

# Across file systems (input on /dev/shm, archive under $T): EXDEV, then
# read/write; the same bytes.
if [ -d /dev/shm ] && [ "$(stat -c %d /dev/shm)" != "$(stat -c %d "$T")" ]; then
    S=$(mktemp -d /dev/shm/wpack-cr.XXXXXX)
    cp "$T/in/model.pt" "$T/in/model.safetensors" "$S/"
    for kind in model.pt model.safetensors; do
        "$WPACK" create -q -o "$T/x.wpack" "$S/$kind" 2>"$T/err" &&
            WPACK_NO_COPY_RANGE=1 "$WPACK" create -q -o "$T/y.wpack" "$T/in/$kind" 2>>"$T/err" &&
            cmp -s "$T/x.wpack" "$T/y.wpack" && pass "cross_fs_$kind" || fail "cross_fs_$kind" "$(head -c 300 "$T/err")"
    done
    rm -rf "$S"
else
    echo "skip cross_fs: /dev/shm is missing or on the same file system as $T"
fi

# A flipped byte inside a torch storage: refused on both paths, no output.
"$PY" - "$T/in/model.pt" "$T/bad.pt" <<'PY'
import shutil, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
shutil.copy(src, dst)
with zipfile.ZipFile(src) as z:
    info = next(i for i in z.infolist() if "/data/" in i.filename)
with open(dst, "r+b") as f:
    f.seek(info.header_offset + 26)
    n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
    at = info.header_offset + 30 + n + m + 1000
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x40]))
PY
expect_fail crc_caught_fast "CRC-32.*\[WPACK_E_CHECKSUM\]" "$WPACK" create -q -o "$T/bad.wpack" "$T/bad.pt"
[ -e "$T/bad.wpack" ] && fail crc_no_output_fast || pass crc_no_output_fast
WPACK_NO_COPY_RANGE=1 expect_fail crc_caught_plain "CRC-32.*\[WPACK_E_CHECKSUM\]" "$WPACK" create -q -o "$T/bad.wpack" "$T/bad.pt"

finish
