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
finish
