#!/bin/bash
# test_export.sh - `wpack export` to safetensors (checked by a strict reader
# written here from the format's rules, then read by numpy), npz (numpy.load)
# and tar; and safetensors back in through `wpack create`.
. "$(dirname "$0")/lib.sh"

$PY - "$T" <<'PYEOF' || fail made_inputs
import numpy as np, sys
t = sys.argv[1]
rng = np.random.default_rng(5)
np.save(f"{t}/a.w.npy", rng.standard_normal((3, 5)).astype(np.float32))
np.save(f"{t}/a.b.npy", rng.standard_normal(5).astype(np.float16))
np.save(f"{t}/c.npy", np.arange(6, dtype=np.int32).reshape(1, 2, 3))
np.save(f"{t}/m.npy", np.array([True, False, True]))
np.save(f"{t}/s.npy", np.array(7.25, dtype=np.float64))
np.save(f"{t}/e.npy", np.zeros((0, 4), dtype=np.int8))
PYEOF
expect make_archive "$WPACK" create -q -o "$T/a.wpack" --meta model.name=tiny --meta note=x "$T"/a.w.npy "$T"/a.b.npy "$T"/c.npy "$T"/m.npy "$T"/s.npy "$T"/e.npy
expect export_safetensors "$WPACK" export "$T/a.wpack" --to safetensors -o "$T/a.safetensors"
$PY - "$T/a.safetensors" "$T" <<'PYEOF' && pass safetensors_strict_and_equal || fail safetensors_strict_and_equal
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
assert n <= 100_000_000 and 8 + n <= len(b) and n % 8 == 0
h = json.loads(b[8:8 + n])
meta = h.pop("__metadata__")
assert all(isinstance(v, str) for v in meta.values()) and meta["model.name"] == "tiny", meta
np_of = {"F32": "<f4", "F16": "<f2", "I32": "<i4", "BOOL": "|b1", "F64": "<f8", "I8": "|i1"}
spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in h.items())
at = 0
for s, e, k in spans:  # sorted, contiguous, no holes, no overlaps
    assert s == at, (k, s, at)
    at = e
assert at == len(b) - 8 - n, "trailing bytes"
for k, v in h.items():
    dt = np.dtype(np_of[v["dtype"]])
    s, e = v["data_offsets"]
    assert e - s == int(np.prod(v["shape"], dtype=np.int64)) * dt.itemsize
    got = np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).reshape(v["shape"])
    want = np.load(f"{sys.argv[2]}/{k}.npy")
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes(), k
assert set(h) == {"a.w", "a.b", "c", "m", "s", "e"}, set(h)
PYEOF
# back in: the strict importer accepts what the exporter wrote, same tensors
expect safetensors_reimport "$WPACK" create -q -o "$T/b.wpack" "$T/a.safetensors"
"$WPACK" inspect "$T/b.wpack" | grep -q 'model.name = tiny' && pass reimport_metadata || fail reimport_metadata
rm -rf "$T/x1" "$T/x2"
"$WPACK" extract -q "$T/a.wpack" -o "$T/x1" && "$WPACK" extract -q "$T/b.wpack" -o "$T/x2" && diff -r "$T/x1" "$T/x2" >/dev/null &&
    pass reimport_same_tensors || fail reimport_same_tensors

for fmt in npz tar; do
    expect "export_$fmt" "$WPACK" export "$T/a.wpack" --to $fmt -o "$T/a.$fmt"
    $PY - "$T/a.$fmt" "$T" "$fmt" <<'PYEOF' && pass "${fmt}_equal" || fail "${fmt}_equal"
import io, sys, tarfile
import numpy as np
path, d, fmt = sys.argv[1:]
if fmt == "npz":
    z = np.load(path)
    got = {k: z[k] for k in z.files}
else:
    with tarfile.open(path) as t:
        got = {m.name[:-4]: np.load(io.BytesIO(t.extractfile(m).read())) for m in t.getmembers()}
assert set(got) == {"a.w", "a.b", "c", "m", "s", "e"}, set(got)
for k, g in got.items():
    w = np.load(f"{d}/{k}.npy")
    assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), k
PYEOF
    expect "${fmt}_reimport" "$WPACK" create -q -o "$T/r.$fmt.wpack" "$T/a.$fmt"
done

# usage and failures
"$WPACK" export "$T/a.wpack" -o "$T/x.st" >/dev/null 2>&1; [ $? -eq 2 ] && pass export_needs_to || fail export_needs_to
"$WPACK" export "$T/a.wpack" --to onnx -o "$T/x.st" >/dev/null 2>&1; [ $? -eq 2 ] && pass export_bad_format || fail export_bad_format
expect help_export "$WPACK" export --help
expect_fail export_not_archive "" "$WPACK" export "$T/c.npy" --to npz -o "$T/bad.npz"
[ ! -e "$T/bad.npz" ] && ! ls "$T"/bad.npz.tmp-* >/dev/null 2>&1 && pass export_failure_leaves_nothing || fail export_failure_leaves_nothing
expect_fail export_missing_dir "cannot create" "$WPACK" export "$T/a.wpack" --to safetensors -o "$T/no/such/dir/a.safetensors"
named_once export_missing_dir_named_once "no/such/dir/a.safetensors"
# through a symlink to a file that cannot be replaced (chattr +i: the rename
# fails, even for root): the message names the user's path and the link's
# target, each once
echo old >"$T/imm.safetensors"
ln -s imm.safetensors "$T/link.safetensors"
if chattr +i "$T/imm.safetensors" 2>/dev/null; then
    expect_fail export_rename_fails_link 'link\.safetensors -> [^ ]*/imm\.safetensors: cannot rename into place' \
        "$WPACK" export "$T/a.wpack" --to safetensors -o "$T/link.safetensors"
    named_once export_rename_fails_link_once "link.safetensors"
    named_once export_rename_fails_target_once "imm.safetensors"
    chattr -i "$T/imm.safetensors"
else
    fail export_rename_fails_link "chattr +i is not supported under $T: cannot make a rename fail"
fi
rm -f "$T/imm.safetensors" "$T/link.safetensors"
# non-ASCII names (UTF-8 by the format's rule) in and out of npz and tar, in
# the CLI's "C" locale: the tar export failed ("Can't translate pathname"),
# the npz's names were not marked UTF-8 (numpy.load gave 'caf├⌐' for 'café'), and
# create skipped a numpy.savez member of such a name without a word
"$PY" - "$T" <<'PYEOF' || fail utf8_inputs
import sys, numpy as np
t = sys.argv[1]
arrs = {"caf\u00e9": np.ones(2, np.float32), "\u65e5\u672c": np.arange(3, dtype=np.float32), "plain": np.zeros(1, np.float32)}
np.savez(f"{t}/u8.npz", **arrs)
import os
os.mkdir(f"{t}/u8")
for k, v in arrs.items():
    np.save(f"{t}/u8/{k}.npy", v)
PYEOF
names() { "$WPACK" inspect --json "$1" | "$PY" -c "import json,sys; print(sorted(t['name'] for t in json.load(sys.stdin)['tensors']))"; }
want="['caf\u00e9', 'plain', '\u65e5\u672c']"
expect utf8_create_from_numpy_npz env LC_ALL=C "$WPACK" create -q -o "$T/u8npz.wpack" "$T/u8.npz"
got=$(names "$T/u8npz.wpack" 2>&1)
[ "$got" = "$("$PY" -c "print($want)")" ] && pass utf8_npz_members_all_read || fail utf8_npz_members_all_read "$got"
expect utf8_create env LC_ALL=C "$WPACK" create -q -o "$T/u8.wpack" "$T/u8"
for fmt in npz tar; do
    expect "utf8_export_$fmt" env LC_ALL=C "$WPACK" export -q "$T/u8.wpack" --to $fmt -o "$T/u8out.$fmt"
    got=$("$PY" - "$T/u8out.$fmt" <<'PYEOF' 2>&1
import sys, tarfile, numpy as np
p = sys.argv[1]
if p.endswith(".npz"):
    print(sorted(np.load(p).keys()))
else:
    print(sorted(n[:-4] for n in tarfile.open(p).getnames()))
PYEOF
)
    [ "$got" = "$("$PY" -c "print($want)")" ] && pass "utf8_${fmt}_names_exact" || fail "utf8_${fmt}_names_exact" "$got"
    rm -f "$T/u8back.wpack"
    expect "utf8_${fmt}_back" env LC_ALL=C "$WPACK" create -q -o "$T/u8back.wpack" "$T/u8out.$fmt"
    got=$(names "$T/u8back.wpack" 2>&1)
    [ "$got" = "$("$PY" -c "print($want)")" ] && pass "utf8_${fmt}_round_trip" || fail "utf8_${fmt}_round_trip" "$got"
done
if command -v tar >/dev/null; then
    tar tf "$T/u8out.tar" >/dev/null 2>"$T/err" && [ ! -s "$T/err" ] && pass utf8_tar_clean_for_gnu_tar \
        || fail utf8_tar_clean_for_gnu_tar "$(head -c 300 "$T/err")"
fi

# every metadata value reaches __metadata__: an array of bytes was written
# '[null,null]' and the nan / inf elements of an array of reals were dropped
# ('[1.5]' for [1.5, nan, inf]); now bytes elements are hex like a bytes
# value and a real JSON cannot hold is the string a real value becomes
py_wpack - "$T/md.wpack" <<'PYEOF' || fail md_arrays_input
import sys, numpy as np, wpack
wpack.save_file({"w": np.arange(3, dtype=np.float32)}, sys.argv[1], metadata={
    "bytes_arr": [b"\x00\x01", b"\xff"], "f_arr": [1.5, float("nan"), float("inf"), -0.25],
    "ctl": "a\x01\"b\\\u00e9", "b": b"\x00\xff", "f": float("-inf")})
PYEOF
expect md_arrays_export "$WPACK" export -q "$T/md.wpack" --to safetensors -o "$T/md.safetensors"
got=$("$PY" - "$T/md.safetensors" <<'PYEOF' 2>&1
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
m = json.loads(b[8:8 + n])["__metadata__"]
assert json.loads(m["bytes_arr"]) == ["0001", "ff"], m
assert json.loads(m["f_arr"]) == [1.5, "nan", "inf", -0.25], m
assert m["ctl"] == "a\x01\"b\\\u00e9" and m["b"] == "00ff" and m["f"] == "-inf", m
print("same")
PYEOF
)
[ "$got" = same ] && pass md_arrays_every_element || fail md_arrays_every_element "$got"

# a header past safetensors' 100 MB limit is refused: 17 MiB of control
# characters in one metadata value, each escaped to 6 bytes, made a 107 MB
# header that strict readers and `wpack create` refuse, written with exit 0
py_wpack - "$T/bighdr.wpack" <<'PYEOF' || fail big_header_input
import sys, numpy as np, wpack
wpack.save_file({"w": np.arange(3, dtype=np.float32)}, sys.argv[1], metadata={"blob": "\x01" * (17 << 20)},
                durable=False)
PYEOF
expect_fail big_header_refused "header .* above the 100000000 .*'blob'.*WPACK_E_LIMIT" \
    "$WPACK" export -q "$T/bighdr.wpack" --to safetensors -o "$T/bighdr.safetensors" --no-sync
nothing_at big_header_nothing_written "$T/bighdr.safetensors"
rm -f "$T/bighdr.wpack"


# a large metadata array is written without a JSON tree of its elements: a
# GGUF u8 array of 8 Mi elements (an i64 array of 64 MiB in the archive, 30
# MB of JSON text) took 460 MB of RSS, a jansson value per element, through
# --to safetensors; now its text is put straight into the header, so the
# peak is the archive's mapping plus the header (bound 200 MiB)
"$PY" - "$T/arr.gguf" <<'PYEOF' || fail big_array_input
import struct, sys, numpy as np
def gstr(s): return struct.pack("<Q", len(s)) + s.encode()
n = 8 << 20
out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 1, 1))
out += gstr("big.arr") + struct.pack("<IIQ", 9, 0, n) + (np.arange(n) % 251).astype(np.uint8).tobytes()
out += gstr("w") + struct.pack("<IQIQ", 1, 8, 0, 0)
out += b"\0" * (-len(out) % 32) + np.arange(8, dtype=np.float32).tobytes()
open(sys.argv[1], "wb").write(out)
PYEOF
expect big_array_create "$WPACK" create -q --no-sync -o "$T/arr.wpack" "$T/arr.gguf"
if [ ! -x /usr/bin/time ]; then
    fail big_array_rss "/usr/bin/time is missing (apt-get install time)"
elif ! /usr/bin/time -f %M -o "$T/rss" "$WPACK" export -q --no-sync "$T/arr.wpack" --to safetensors \
        -o "$T/arr.safetensors" 2>"$T/err"; then
    fail big_array_export "$(head -c 300 "$T/err")"
else
    kib=$(tail -n1 "$T/rss")
    if ldd "$WPACK" 2>/dev/null | grep -q 'libasan\|libubsan'; then
        echo "skip big_array_rss: sanitizer build (peak RSS $kib KiB)"
    elif [ "$kib" -lt $((200 << 10)) ]; then
        pass big_array_rss
    else
        fail big_array_rss "peak RSS $kib KiB (bound $((200 << 10)))"
    fi
    got=$("$PY" - "$T/arr.safetensors" <<'PYEOF' 2>&1
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
a = json.loads(h["__metadata__"]["big.arr"])
assert len(a) == 8 << 20 and a[:3] == [0, 1, 2] and a[-1] == ((8 << 20) - 1) % 251, a[:3]
assert h["w"] == {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}, h["w"]
print("same")
PYEOF
)
    [ "$got" = same ] && pass big_array_values || fail big_array_values "$got"
fi
rm -f "$T/arr.gguf" "$T/arr.wpack" "$T/arr.safetensors"

finish
