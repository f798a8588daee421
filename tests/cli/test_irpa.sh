#!/bin/bash
# test_irpa.sh - IREE parameter archives in and out (issue 18): files written
# by an independent Python writer/reader of IREE's parameter_archive.h layout
# (tests/cli/irpa_tool.py) go through `wpack create`; `wpack export --to
# irpa` writes what that reader reads, byte for byte what the writer makes
# for the same entries; aliases share bytes, splats stay splats; the keys of
# `wpack resolve --emit iree` are the archive's entries, with the sizes the
# IR's types want; every file of tests/hostile/irpa/ fails with its own code.
. "$(dirname "$0")/lib.sh"
TOOL="$TESTS_DIR/cli/irpa_tool.py"
H="$TESTS_DIR/hostile/irpa"
MLIR_OPT=${MLIR_OPT:-mlir-opt-19}

"$PY" "$TOOL" make "$T" && pass make_files || fail make_files

# --- in: a file of IREE's layout with every entry kind
expect create_mixed "$WPACK" create -q -o "$T/m.wpack" "$T/mixed.irpa"
"$WPACK" inspect "$T/m.wpack" >"$T/ins" 2>&1
row() { grep -Eq "^$1 +$2 +\\[$3\\] +.* +$4 " "$T/ins" && pass "$5" || fail "$5" "$(grep "^$1 " "$T/ins")"; }
row model.weight u8 48 "[0-9]+" data_entry_as_bytes
row model.bias u32 300 splat splat_4_as_u32_splat
row u8splat u8 9 splat splat_1_as_u8_splat
row zeros16 u8 64 "[0-9]+" splat_16_written_out
row bytes.odd u8 5 "[0-9]+" odd_length_data
row empty u8 0 "[0-9]+" empty_data
grep -q "^dropped " "$T/ins" && fail skip_entry_dropped || pass skip_entry_dropped
# IREE's testdata/mixed.irpa (generate_irpa_files.sh: iree-create-parameters
# --splat=key2=i8=102 --splat=key3=4096x1024xi64=103): splats of 2, 4 and 8
# bytes become u16/u32/u64 splats, and inspect shows their fill as a number,
# as for i16..i64 (it showed key3's as the bytes in memory order, "fill
# 0x6700000000000000", which reads as 103 << 56)
"$PY" - "$T/iree_mixed.irpa" "$TOOL" <<'PYEOF' || fail iree_mixed_made
import sys, struct, importlib.util
spec = importlib.util.spec_from_file_location("t", sys.argv[2]); t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
t.write(sys.argv[1], [
    {"name": "key0", "kind": "data", "data": struct.pack("<4f", *[100.1] * 4)},
    {"name": "key1", "kind": "data", "data": bytes([101] * 5)},
    {"name": "key2", "kind": "splat", "pattern": b"\x66", "length": 1},
    {"name": "key3", "kind": "splat", "pattern": struct.pack("<q", 103), "length": 4096 * 1024 * 8},
    {"name": "u16", "kind": "splat", "pattern": struct.pack("<H", 65000), "length": 6},
    {"name": "u32", "kind": "splat", "pattern": struct.pack("<I", 4000000000), "length": 8}])
PYEOF
expect create_iree_mixed "$WPACK" create -q -o "$T/im.wpack" "$T/iree_mixed.irpa"
"$WPACK" inspect "$T/im.wpack" >"$T/ins_im" 2>&1
"$WPACK" inspect --json "$T/im.wpack" >"$T/ins_im.json" 2>&1
for want in "key2 +u8 +\\[1\\] .*splat .*fill 102\$" "key3 +u64 +\\[4194304\\] .*splat .*fill 103\$" \
    "u16 +u16 +\\[3\\] .*splat .*fill 65000\$" "u32 +u32 +\\[2\\] .*splat .*fill 4000000000\$"; do
    grep -Eq "^$want" "$T/ins_im" && pass "iree_fill_${want%% *}" || fail "iree_fill_${want%% *}" "$(cat "$T/ins_im")"
done
grep -q '"key3", .*"fill": "103"' "$T/ins_im.json" && pass iree_fill_json || fail iree_fill_json "$(grep -o '"key3".*' "$T/ins_im.json")"
expect extract_splat "$WPACK" extract -q "$T/m.wpack" -o "$T/x" model.bias
"$PY" -c "
import numpy as np, sys
a = np.load('$T/x/model.bias.npy')
sys.exit(0 if a.dtype == np.uint32 and a.shape == (300,) and (a.view(np.float32) == 0.5).all() else 1)
" && pass splat_pattern_kept || fail splat_pattern_kept

# --- out: read back by the Python reader, values as written
expect export_mixed "$WPACK" export -q "$T/m.wpack" --to irpa -o "$T/back.irpa"
"$PY" - "$T/back.irpa" "$TOOL" <<'EOF' && pass python_reads_export || fail python_reads_export
import sys, struct, importlib.util
import numpy as np
spec = importlib.util.spec_from_file_location("t", sys.argv[2]); t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
e = {k: (kind, n, md, p) for k, kind, n, md, p in t.read(sys.argv[1])}
assert sorted(e) == ["bytes.odd", "empty", "model.bias", "model.weight", "u8splat", "zeros16"], e
assert e["model.weight"][:3] == ("data", 48, b"wpack:u8[48]")
assert e["model.weight"][3] == np.arange(12, dtype=np.float32).tobytes()
assert e["model.bias"] == ("splat", 1200, b"wpack:u32[300]", struct.pack("<f", 0.5))
assert e["zeros16"][:2] == ("data", 64) and e["zeros16"][3] == bytes(range(16)) * 4
assert e["u8splat"] == ("splat", 9, b"wpack:u8[9]", b"\x07")
assert e["empty"][:2] == ("data", 0) and e["bytes.odd"][3] == b"abcde"
b = open(sys.argv[1], "rb").read()
assert len(b) % 4096 == 0, "file padded to 4096"
EOF
expect create_back "$WPACK" create -q -o "$T/m2.wpack" "$T/back.irpa"
expect export_back "$WPACK" export -q "$T/m2.wpack" --to irpa -o "$T/back2.irpa"
cmp -s "$T/back.irpa" "$T/back2.irpa" && pass export_stable || fail export_stable
# wpack's own conventions: dtype and dims come back, and the bytes are the writer's
expect create_ref "$WPACK" create -q -o "$T/r.wpack" "$T/ref.irpa"
"$WPACK" inspect "$T/r.wpack" >"$T/ins"
grep -Eq "^a.weight +f32 +\[2, 3\]" "$T/ins" && grep -Eq "^e.half +f16 +\[2, 2\] .*splat" "$T/ins" &&
    grep -Eq "^f.scalar +f64 +\[\]" "$T/ins" && pass typed_metadata_read || fail typed_metadata_read
expect export_ref "$WPACK" export -q "$T/r.wpack" --to irpa -o "$T/r.irpa"
cmp -s "$T/ref.irpa" "$T/r.irpa" && pass ref_layout_identical || fail ref_layout_identical
expect create_empty "$WPACK" create -q --allow-empty -o "$T/e.wpack" "$T/empty.irpa"
expect export_empty "$WPACK" export -q "$T/e.wpack" --to irpa -o "$T/e.irpa"
cmp -s "$T/empty.irpa" "$T/e.irpa" && pass empty_identical || fail empty_identical
# splats only: IREE's builder puts the storage segment right after the
# metadata (aligned to 1: no data entry sets its alignment); wpack wrote it
# 64-aligned, so IREE's own empty.irpa and splat-only files did not come back
# byte for byte (the same holds for empty_identical above)
expect create_splats "$WPACK" create -q -o "$T/s.wpack" "$T/ref_splats.irpa"
expect export_splats "$WPACK" export -q "$T/s.wpack" --to irpa -o "$T/s.irpa"
cmp -s "$T/ref_splats.irpa" "$T/s.irpa" && pass splats_only_identical || fail splats_only_identical

# --- block dtypes travel in the entry metadata: GGUF -> wpack -> irpa -> wpack -> GGUF
"$PY" "$TESTS_DIR/cli/gguf_tool.py" make "$T" && pass gguf_files || fail gguf_files
expect create_gguf "$WPACK" create -q -o "$T/g.wpack" "$T/base.gguf"
expect export_gguf_irpa "$WPACK" export -q "$T/g.wpack" --to irpa -o "$T/g.irpa"
expect create_gguf_irpa "$WPACK" create -q -o "$T/g2.wpack" "$T/g.irpa"
expect export_back_gguf "$WPACK" export -q "$T/g2.wpack" --to gguf -o "$T/g2.gguf"
"$PY" - "$T/base.gguf" "$T/g2.gguf" "$TESTS_DIR/cli/gguf_tool.py" <<'EOF' && pass block_dtypes_through_irpa || fail block_dtypes_through_irpa
import sys, importlib.util
spec = importlib.util.spec_from_file_location("g", sys.argv[3]); g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)
a = {n: (t, ne, d) for n, t, ne, d in g.read(sys.argv[1])[2]}
b = {n: (t, ne, d) for n, t, ne, d in g.read(sys.argv[2])[2]}
assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), [k for k in a if a[k] != b.get(k)]
EOF

# --- aliases and splats from a torch checkpoint (tied weights, an expand view)
"$PY" -c "
import torch
w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
torch.save({'embed.weight': w, 'head.weight': w, 'b': torch.tensor([0.25]).expand(8),
            'h': torch.tensor(2.0, dtype=torch.float64).expand(2, 3)}, '$T/tied.pt')
" 2>/dev/null && pass torch_file || fail torch_file
expect create_tied "$WPACK" create -q -o "$T/t.wpack" "$T/tied.pt"
expect export_tied "$WPACK" export -q "$T/t.wpack" --to irpa -o "$T/t.irpa"
"$PY" - "$T/t.irpa" "$TOOL" <<'EOF' && pass alias_shares_bytes_splat_stays || fail alias_shares_bytes_splat_stays
import sys, struct, importlib.util
spec = importlib.util.spec_from_file_location("t", sys.argv[2]); t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
b = open(sys.argv[1], "rb").read()
e = {k: (kind, n, md, p) for k, kind, n, md, p in t.read(sys.argv[1])}
assert e["b"] == ("splat", 32, b"wpack:f32[8]", struct.pack("<f", 0.25)), e["b"]
assert e["h"][0] == "splat" and e["h"][1] == 48 and e["h"][3] == struct.pack("<d", 2.0), e["h"]
assert e["embed.weight"][0] == "data" and e["embed.weight"][3] == e["head.weight"][3]
# both data entries point at one storage range
hdr = t.HDR.unpack_from(b, 0)
offs = []
at = hdr[7]
for _ in range(hdr[6]):
    size, kind = struct.unpack_from("<QI", b, at)
    if kind == 2:
        offs.append(struct.unpack_from("<QQ", b, at + 60))
    at += t.up(size, 16)
assert len(offs) == 2 and offs[0] == offs[1], offs
EOF

# --- entries naming one storage range (what export writes for aliases, and
# what a hostile file repeats): one tensor and its aliases, not a copy per
# name (300 names of 64 KB were a 19 MB archive from a 94 KB file); the same
# bytes under another dtype are refused
"$PY" - "$T" "$TOOL" <<'EOF' && pass make_shared_range || fail make_shared_range
import sys, struct, importlib.util
spec = importlib.util.spec_from_file_location("t", sys.argv[2]); t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
d, n = sys.argv[1], 300
for name, meta in (("shared", b""), ("shared_retyped", b"wpack:f32[16384]")):
    ents = [{"name": "w0", "kind": "data", "data": bytes(range(256)) * 256}] + \
           [{"name": f"w{i}", "kind": "data", "data": b"", "meta": meta if i == 7 else b""}
            for i in range(1, n)]
    t.write(f"{d}/{name}.irpa", ents)
    b = bytearray(open(f"{d}/{name}.irpa", "rb").read())
    for i in range(1, n):
        struct.pack_into("<QQ", b, 96 + 80 * i + 60, 0, 65536)
    open(f"{d}/{name}.irpa", "wb").write(b)
EOF
expect create_shared "$WPACK" create -q -o "$T/sh.wpack" "$T/shared.irpa"
"$WPACK" inspect "$T/sh.wpack" >"$T/ins" 2>&1
[ "$(grep -Ec '^w[0-9]+ +u8 +\[65536\] .* alias .*= w0$' "$T/ins")" = 299 ] &&
    [ "$(stat -c %s "$T/sh.wpack")" -lt 200000 ] && pass shared_range_aliases ||
    fail shared_range_aliases "$(stat -c %s "$T/sh.wpack") bytes; $(sed -n 5,7p "$T/ins")"
expect verify_shared "$WPACK" verify "$T/sh.wpack"
expect_fail shared_retyped_refused WPACK_E_OVERLAP "$WPACK" create -q -o "$T/sh2.wpack" "$T/shared_retyped.irpa"

# --- resolve --emit iree + export --to irpa: the pair IREE loads with
# --parameters=model=FILE.irpa: every key the IR names is an entry of the
# file, as many bytes as its type
printf 'module {\n  ml_program.global private @embed.weight(#ml_program.extern : tensor<2x3xf32>) : tensor<2x3xf32>\n  ml_program.global private @b(#ml_program.extern : tensor<8xf32>) : tensor<8xf32>\n}\n' >"$T/in.mlir"
expect resolve_iree "$WPACK" resolve -q --emit iree "$T/t.wpack" "$T/in.mlir" -o "$T/out.mlir"
"$PY" - "$T/out.mlir" "$T/t.irpa" "$TOOL" <<'EOF' && pass resolve_keys_in_irpa || fail resolve_keys_in_irpa
import re, sys, importlib.util
spec = importlib.util.spec_from_file_location("t", sys.argv[3]); t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
ir = open(sys.argv[1]).read()
refs = re.findall(r'#flow\.parameter\.named<"([^"]*)"::"([^"]*)"> : tensor<([0-9x]+)xf32>', ir)
assert len(refs) == 2, ir
e = {k: n for k, kind, n, md, p in t.read(sys.argv[2])}
for scope, key, shape in refs:
    assert scope == "model", scope
    n = 4
    for d in shape.split("x"):
        n *= int(d)
    assert e.get(key) == n, (key, e.get(key), n)
EOF
if command -v "$MLIR_OPT" >/dev/null 2>&1; then
    "$MLIR_OPT" --allow-unregistered-dialect "$T/out.mlir" >/dev/null 2>&1 && pass resolved_parses ||
        fail resolved_parses
else
    echo "skip resolved_parses: no $MLIR_OPT"
fi
"$WPACK" export --help | grep -q "irpa  *an IREE parameter archive" && pass export_help || fail export_help

# --- hostile files: each its own code, never a signal, never an output file
expect_hostile_dir "$H" irpa 20
finish
