#!/bin/bash
# test_gguf_copy.sh - GGUF and IREE .irpa tensor bytes move to the archive
# with copy_file_range (wpk_sink_stream_mapped -> wpack_writer_write_from_fd,
# issues 18 and 19), and the input's mapping is released piece by piece:
# - the archive is byte for byte the same with the fast path and without it
#   (WPACK_NO_COPY_RANGE=1: the ordinary write path, as before this change),
#   with stats, without, and with --cast; it verifies, and exports back to
#   the input's bytes (GGUF: the whole file; irpa: every entry);
# - strace sees copy_file_range where the tensors sit at page offsets, as
#   in the archive, and write() elsewhere (where strace exists);
# - a GGUF with one 200 MiB f16 tensor imports in < 64 MiB peak RSS, with
#   and without copy_file_range (before: 200 MiB + the process);
# - a GGUF or irpa file cut short fails cleanly and leaves no archive.
. "$(dirname "$0")/lib.sh"
TOOLS="$TESTS_DIR/cli"

# mix.gguf: f32 over several 4 MiB pieces at an offset that is no page
# multiple, f16, bf16, Q4_0, Q8_0, a tensor below the fast path's minimum;
# mix.irpa: typed and raw data entries (one over several pieces), splats.
if ! "$PY" - "$T" "$TOOLS" <<'PY' 2>"$T/err"; then
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np
import gguf_tool as g
import irpa_tool as ir
d = sys.argv[1]
r = np.random.RandomState(19)
f32 = (r.standard_normal(1000 * 2601) * 3).astype(np.float32)
f16 = r.standard_normal(300 * 1001).astype(np.float16)
kvs = [("general.architecture", g.STRING, "llama"), ("general.name", g.STRING, "copy test")]
tensors = [
    ("tiny", 0, [7], np.arange(7, dtype=np.float32).tobytes()),
    ("big.f32", 0, [1000, 2601], f32.tobytes()),
    ("embd.f16", 1, [300, 1001], f16.tobytes()),
    ("q4", 2, [4096, 100], g.rnd(100 * 128 * 18, 1)),
    ("q8", 8, [224, 500], g.rnd(500 * 7 * 34, 2)),
    ("bf", 30, [512, 300], g.rnd(512 * 300 * 2, 3)),
]
g.write(f"{d}/mix.gguf", kvs, tensors)
ir.write(f"{d}/mix.irpa", [
    {"name": "w.f32", "kind": "data", "meta": b"wpack:f32[1000,2601]", "data": f32.tobytes()},
    {"name": "w.f16", "kind": "data", "meta": b"wpack:f16[300,1001]", "data": f16.tobytes()},
    {"name": "raw", "kind": "data", "data": g.rnd(300001, 4)},
    {"name": "small", "kind": "data", "data": b"abcde"},
    {"name": "bias", "kind": "splat", "pattern": np.float32(0.5).tobytes(), "length": 4 << 20},
    {"name": "pat16", "kind": "splat", "pattern": bytes(range(16)), "length": 1 << 20},
])
PY
    fail make_inputs "$(head -c 400 "$T/err")"
    finish
    exit
fi
pass make_inputs

for in in mix.gguf mix.irpa; do
    same_with_copy_range "same_${in%.*}_${in#*.}" "$T/$in"
    same_with_copy_range "same_${in%.*}_${in#*.}_no_stats" --no-stats "$T/$in"
    same_with_copy_range "same_${in%.*}_${in#*.}_cast" --cast bf16 "$T/$in"
done
same_with_copy_range same_gguf_and_irpa "$T/mix.gguf" --prefix i "$T/mix.irpa"

# back out: the GGUF file byte for byte; every irpa entry's kind and bytes
expect create_gguf "$WPACK" create -q -o "$T/g.wpack" "$T/mix.gguf"
expect export_gguf "$WPACK" export -q "$T/g.wpack" --to gguf -o "$T/back.gguf"
cmp -s "$T/mix.gguf" "$T/back.gguf" && pass gguf_roundtrip_identical || fail gguf_roundtrip_identical
expect create_irpa "$WPACK" create -q -o "$T/i.wpack" "$T/mix.irpa"
expect export_irpa "$WPACK" export -q "$T/i.wpack" --to irpa -o "$T/back.irpa"
"$PY" - "$T/mix.irpa" "$T/back.irpa" "$TOOLS" <<'PY' && pass irpa_roundtrip_entries || fail irpa_roundtrip_entries
import sys
sys.path.insert(0, sys.argv[3])
import irpa_tool as ir
a = {k: (kind, n, p) for k, kind, n, md, p in ir.read(sys.argv[1])}
b = {k: (kind, n, p) for k, kind, n, md, p in ir.read(sys.argv[2])}
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
for k in a:
    if k == "pat16":  # a 16-byte splat is written out in full (no dtype that wide)
        assert b[k] == ("data", 1 << 20, bytes(range(16)) * (1 << 16)), k
    else:
        assert a[k] == b[k], k
PY

# copy_file_range where the tensors sit at page offsets (a GGUF aligned to
# 4096, as the archive is); where they do not (alignment 32, irpa's 64),
# each step read to hash it is written instead, and never with the option.
make_page_gguf "$T/page.gguf" 24
same_with_copy_range same_page_gguf "$T/page.gguf"
copy_range_used fast_path_gguf yes "$T/page.gguf"
copy_range_used misaligned_written_gguf no "$T/mix.gguf"
copy_range_used misaligned_written_irpa no "$T/mix.irpa"
WPACK_NO_COPY_RANGE=1 copy_range_used no_copy_range_gguf no "$T/page.gguf"

# cut short (inside the tensor data): refused before anything is written
head -c $(( $(stat -c %s "$T/mix.gguf") - 5000000 )) "$T/mix.gguf" >"$T/cut.gguf"
expect_fail truncated_gguf "\[WPACK_E_[A-Z_]+\]" "$WPACK" create -q -o "$T/cut.wpack" "$T/cut.gguf"
ls "$T"/cut.wpack* >/dev/null 2>&1 && fail truncated_gguf_no_output || pass truncated_gguf_no_output
head -c 6000000 "$T/mix.irpa" >"$T/cut.irpa"
expect_fail truncated_irpa "\[WPACK_E_[A-Z_]+\]" "$WPACK" create -q -o "$T/cut.wpack" "$T/cut.irpa"
ls "$T"/cut.wpack* >/dev/null 2>&1 && fail truncated_irpa_no_output || pass truncated_irpa_no_output
rm -f "$T"/mix.* "$T"/back.* "$T"/*.wpack "$T"/cut.*

# Peak RSS: one 200 MiB f16 tensor (written in pieces, never whole in memory)
if ! "$PY" - "$T/big.gguf" "$TOOLS" <<'PY' 2>"$T/err"; then
import struct, sys
sys.path.insert(0, sys.argv[2])
import numpy as np
from gguf_tool import STRING, gstr, value
ne = [4096, 25600]                       # 200 MiB of f16
with open(sys.argv[1], "wb") as f:
    out = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
    out += gstr("general.architecture") + struct.pack("<I", STRING) + value(STRING, "llama")
    out += gstr("token_embd.weight") + struct.pack("<I", 2) + struct.pack("<QQ", *ne)
    out += struct.pack("<IQ", 1, 0)
    f.write(out + b"\0" * (-len(out) % 32))
    r = np.random.RandomState(7)
    for _ in range(25):
        f.write(r.standard_normal(4096 * 1024).astype(np.float16).tobytes())
PY
    fail make_big "$(head -c 400 "$T/err")"
    finish
    exit
fi
LIMIT=65536
SANITIZED=
ldd "$WPACK" 2>/dev/null | grep -q 'libasan\|libubsan' && SANITIZED=1
rss_case() { # NAME CMD...
    local name=$1; shift
    if ! /usr/bin/time -f %M -o "$T/rss" "$@" >/dev/null 2>"$T/err"; then
        fail "$name" "$(head -c 300 "$T/err")"
        return
    fi
    local kib; kib=$(tail -n1 "$T/rss")
    if [ -n "$SANITIZED" ]; then
        echo "skip $name: sanitizer build (peak RSS $kib KiB, mostly ASan's shadow and quarantine)"
    elif [ "$kib" -lt $LIMIT ]; then
        pass "$name"
    else
        fail "$name" "peak RSS $kib KiB (bound $LIMIT)"
    fi
}
if [ -x /usr/bin/time ]; then
    rss_case rss_gguf_200mib_tensor "$WPACK" create -q -o "$T/big.wpack" "$T/big.gguf"
    rss_case rss_gguf_200mib_tensor_plain env WPACK_NO_COPY_RANGE=1 "$WPACK" create -q -o "$T/big2.wpack" "$T/big.gguf"
    cmp -s "$T/big.wpack" "$T/big2.wpack" && pass big_same || fail big_same
    rm -f "$T/big2.wpack"
    expect export_big "$WPACK" export -q "$T/big.wpack" --to gguf -o "$T/big2.gguf"
    cmp -s "$T/big.gguf" "$T/big2.gguf" && pass big_roundtrip_identical || fail big_roundtrip_identical
else
    fail rss "/usr/bin/time is missing (apt-get install time)"
fi

finish
