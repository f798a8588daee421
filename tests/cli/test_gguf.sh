#!/bin/bash
# test_gguf.sh - GGUF in and out (issue 18): files written by an independent
# Python writer of the GGUF layout (tests/cli/gguf_tool.py) go through
# `wpack create` and back through `wpack export --to gguf` byte for byte (v3,
# v2 -> v3, general.alignment 64, no tensors); dims come out in PyTorch order,
# every KV type as typed metadata, quantized GGML types as block dtypes; an
# archive of .npy files exports to a GGUF the Python reader reads back; what
# GGUF cannot hold is refused; every file of tests/hostile/gguf/ fails with
# its own code (EXPECT) and leaves no output.
. "$(dirname "$0")/lib.sh"
TOOL="$TESTS_DIR/cli/gguf_tool.py"
H="$TESTS_DIR/hostile/gguf"

"$PY" "$TOOL" make "$T" && pass make_files || fail make_files

# --- in: GGUF v3 -> archive
expect create_v3 "$WPACK" create -q -o "$T/m.wpack" "$T/base.gguf"
"$WPACK" inspect "$T/m.wpack" >"$T/ins" 2>&1
row() { grep -Eq "^$1 +$2 +\\[$3\\]" "$T/ins" && pass "$4" || fail "$4" "$(grep "^$1 " "$T/ins")"; }
row token_embd.weight f32 "4, 6" dims_reversed_f32
row blk.0.attn_q.weight ggml.q4_0 "3, 64" dims_reversed_q4_0
# inspect names block dtypes (text and JSON), with their geometry
grep -Eq '^  128 ggml\.q4_0: 32 elements in 18 bytes, params 67676d6c02000000$' "$T/ins" \
    && pass inspect_block_dtype_text || fail inspect_block_dtype_text "$(grep -A3 '^block dtypes' "$T/ins")"
"$WPACK" inspect --json "$T/m.wpack" >"$T/ins.json" 2>&1
"$PY" - "$T/ins.json" <<'PYEOF' && pass inspect_block_dtype_json || fail inspect_block_dtype_json
import json, sys
d = json.load(open(sys.argv[1]))
bd = {b["name"]: b for b in d["block_dtypes"]}
q = bd["ggml.q4_0"]
assert (q["code"], q["block_elems"], q["block_bytes"], q["params"]) == (128, 32, 18, "67676d6c02000000"), q
assert [b["code"] for b in d["block_dtypes"]] == list(range(128, 128 + len(bd)))
t = {x["name"]: x for x in d["tensors"]}
assert t["blk.0.attn_q.weight"]["dtype"] == "ggml.q4_0", t["blk.0.attn_q.weight"]
assert all(x["dtype"] in bd or not x["dtype"].startswith("ggml.") for x in d["tensors"])
PYEOF
row blk.0.cube i32 "4, 3, 2" dims_reversed_rank3
row blk.0.big f64 "3" f64_tensor
row blk.0.bf bf16 "3, 2" bf16_tensor
row scalar f32 "" rank0_tensor
row empty f32 "4, 0" empty_tensor
meta() { grep -Fq -- "  $1 = $2" "$T/ins" && pass "$3" || fail "$3" "$(grep -F "  $1 " "$T/ins")"; }
meta test.u8 200 kv_u8
meta test.i16 -30000 kv_i16
meta test.u32 4000000000 kv_u32
meta test.u64 -5 kv_u64_bit_pattern
meta test.f32 0.10000000149011612 kv_f32_exact
meta test.bool true kv_bool
meta test.latin1 0x636166e9 kv_non_utf8_string_as_bytes
meta tokenizer.ggml.tokens "[<s>, </s>, hello, été, ]" kv_string_array
meta tokenizer.ggml.token_type "[1, 3, -1]" kv_i32_array
meta test.arr.bytes "[0x6f6b, 0xfffe]" kv_string_array_non_utf8
meta test.arr.empty "[]" kv_empty_array
# the f32 tensor reads back as numpy wrote it, in the PyTorch shape
expect extract_f32 "$WPACK" extract -q "$T/m.wpack" -o "$T/x" token_embd.weight
"$PY" -c "
import numpy as np, sys
a = np.load('$T/x/token_embd.weight.npy')
sys.exit(0 if a.shape == (4, 6) and (a == np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5 - 3).all() else 1)
" && pass f32_values || fail f32_values
# quantized blocks are the file's bytes, unchanged
expect extract_q4 "$WPACK" extract -q "$T/m.wpack" -o "$T/x" blk.0.attn_q.weight
"$PY" -c "
import numpy as np, sys
a = np.load('$T/x/blk.0.attn_q.weight.npy')
want = np.random.RandomState(1).randint(0, 256, 108, dtype=np.uint8)
sys.exit(0 if a.dtype == np.uint8 and (a.ravel() == want).all() else 1)
" && pass q4_0_bytes || fail q4_0_bytes

# a block dtype has no safetensors/npz form: the refusal names it
expect_fail export_block_dtype_named "tensor 'blk\.0\.attn_[a-z]\.weight': block-quantized dtype 'ggml\.q[0-9]_0' has no equivalent.*\[WPACK_E_UNSUPPORTED\]" \
    "$WPACK" export -q "$T/m.wpack" --to safetensors -o "$T/q.safetensors"

# --- out: byte for byte
expect export_v3 "$WPACK" export -q "$T/m.wpack" --to gguf -o "$T/back.gguf"
cmp -s "$T/base.gguf" "$T/back.gguf" && pass roundtrip_v3_identical || fail roundtrip_v3_identical
expect create_v2 "$WPACK" create -q -o "$T/v2.wpack" "$T/base_v2.gguf"
expect export_v2 "$WPACK" export -q "$T/v2.wpack" --to gguf -o "$T/v2.gguf"
cmp -s "$T/base.gguf" "$T/v2.gguf" && pass roundtrip_v2_is_v3 || fail roundtrip_v2_is_v3
expect create_align64 "$WPACK" create -q -o "$T/a.wpack" "$T/align64.gguf"
expect export_align64 "$WPACK" export -q "$T/a.wpack" --to gguf -o "$T/a.gguf"
cmp -s "$T/align64.gguf" "$T/a.gguf" && pass roundtrip_alignment_64 || fail roundtrip_alignment_64
expect create_empty "$WPACK" create -q --allow-empty -o "$T/e.wpack" "$T/empty.gguf"
expect export_empty "$WPACK" export -q "$T/e.wpack" --to gguf -o "$T/e.gguf"
cmp -s "$T/empty.gguf" "$T/e.gguf" && pass roundtrip_empty || fail roundtrip_empty
"$PY" "$TOOL" dump "$T/back.gguf" >"$T/d1" && "$PY" "$TOOL" dump "$T/base.gguf" >"$T/d2" &&
    cmp -s "$T/d1" "$T/d2" && pass python_reads_export || fail python_reads_export
# under --prefix the names move; the file is still one the reader takes
expect create_prefix "$WPACK" create -q -o "$T/p.wpack" --prefix llm "$T/base.gguf"
expect export_prefix "$WPACK" export -q "$T/p.wpack" --to gguf -o "$T/p.gguf"
"$PY" "$TOOL" dump "$T/p.gguf" | grep -q "^tensor llm.token_embd.weight 0 \[6, 4\]" &&
    pass prefix_export_reads || fail prefix_export_reads

# --- out from an archive of .npy files: defaults, read back by the Python reader
"$PY" -c "
import numpy as np
np.save('$T/w.npy', np.arange(6, dtype=np.float32).reshape(2, 3))
np.save('$T/ids.npy', np.array([5, -6], dtype=np.int64))
np.save('$T/h.npy', np.ones((2, 2, 2), dtype=np.float16))
np.save('$T/u.npy', np.zeros(3, dtype=np.uint8))
np.save('$T/r5.npy', np.zeros((1, 1, 1, 1, 2), dtype=np.float32))
"
expect create_npy "$WPACK" create -q -o "$T/n.wpack" --meta model.name=tiny "$T/w.npy" "$T/ids.npy" "$T/h.npy"
expect export_npy "$WPACK" export -q "$T/n.wpack" --to gguf -o "$T/n.gguf"
"$PY" - "$T/n.gguf" "$TOOL" <<'EOF' && pass npy_export_reads_back || fail npy_export_reads_back
import sys, numpy as np, importlib.util
spec = importlib.util.spec_from_file_location("g", sys.argv[2]); g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)
version, kvs, tensors, align = g.read(sys.argv[1])
assert version == 3 and align == 32
assert ("model.name", g.STRING, b"tiny") in kvs, kvs
assert not any(k.startswith("wpack.") for k, _, _ in kvs), kvs
t = {name: (gt, ne, data) for name, gt, ne, data in tensors}
assert [n for n, *_ in tensors] == ["h", "ids", "w"]
assert t["w"][:2] == (0, [3, 2]) and np.frombuffer(t["w"][2], np.float32).tolist() == list(range(6))
assert t["ids"][:2] == (27, [2]) and np.frombuffer(t["ids"][2], np.int64).tolist() == [5, -6]
assert t["h"][:2] == (1, [2, 2, 2])
EOF
expect create_bad "$WPACK" create -q -o "$T/u.wpack" "$T/u.npy"
expect_fail export_u8_refused "tensor 'u': dtype u8 has no GGML type .*\[WPACK_E_UNSUPPORTED\]" \
    "$WPACK" export -q "$T/u.wpack" --to gguf -o "$T/u.gguf"
expect create_r5 "$WPACK" create -q -o "$T/r5.wpack" "$T/r5.npy"
expect_fail export_rank5_refused "rank 5 \(GGUF takes up to 4\).*\[WPACK_E_RANK\]" \
    "$WPACK" export -q "$T/r5.wpack" --to gguf -o "$T/r5.gguf"
L=$(printf 'x%.0s' $(seq 64))
cp "$T/w.npy" "$T/$L.npy"
expect create_long "$WPACK" create -q -o "$T/l.wpack" "$T/$L.npy"
expect_fail export_long_name_refused "GGUF names take up to 63.*\[WPACK_E_NAME\]" \
    "$WPACK" export -q "$T/l.wpack" --to gguf -o "$T/l.gguf"
expect create_badalign "$WPACK" create -q -o "$T/ba.wpack" --meta general.alignment=64 "$T/w.npy"
expect_fail export_string_alignment_refused "general.alignment is not an integer.*\[WPACK_E_ALIGNMENT\]" \
    "$WPACK" export -q "$T/ba.wpack" --to gguf -o "$T/ba.gguf"
ls "$T"/u.gguf* "$T"/r5.gguf* "$T"/l.gguf* "$T"/ba.gguf* >/dev/null 2>&1 &&
    fail refused_exports_leave_nothing || pass refused_exports_leave_nothing
# a name that promises GGUF without the magic gets the GGUF reader's message
printf 'not a gguf' >"$T/fake.gguf"
expect_fail fake_gguf_named "no GGUF magic.*\[WPACK_E_BAD_MAGIC\]" "$WPACK" create -q -o "$T/f.wpack" "$T/fake.gguf"
"$WPACK" export --help | grep -q "gguf  *GGUF v3" && pass export_help || fail export_help
"$WPACK" create --help | grep -q "GGUF v2/v3" && pass create_help || fail create_help

# --- KVs named like wpack's own keys: a GGUF key "wpack.x" or "a.gguf.kv_order"
# is the file's, so it comes back (they vanished from the export before); the
# exact names wpack records the file's keys under are refused clearly
# (before: "already set (by an earlier input?)" with one input)
"$PY" - "$T" "$TOOL" <<'PYEOF' && pass make_named_like_ours || fail make_named_like_ours
import importlib.util, sys
spec = importlib.util.spec_from_file_location("gguf_tool", sys.argv[2])
g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
t = [("t", 0, [4], bytes(16))]
g.write(sys.argv[1] + "/ourkeys.gguf",
        [("wpack.x", g.I32, 1), ("a.gguf.kv_order", g.STRING, "keep me"), ("general.name", g.STRING, "n")], t)
g.write(sys.argv[1] + "/reserved.gguf", [("gguf.kv_order", g.STRING, "x")], t)
# f32 NaNs with payloads, signalling and negative, as a value and in an array:
# written as placeholders, then their bits patched in
g.write(sys.argv[1] + "/nans.gguf", [("s.nan", g.F32, 1.5), ("a.nans", g.ARRAY, (g.F32, [1.25, 1.75, 2.5]))], t)
b = bytearray(open(sys.argv[1] + "/nans.gguf", "rb").read())
import struct
for ph, bits in ((1.5, 0x7f800001), (1.25, 0xffa00005), (1.75, 0x7fc00123)):
    at = b.index(struct.pack("<f", ph))
    b[at:at + 4] = struct.pack("<I", bits)
open(sys.argv[1] + "/nans.gguf", "wb").write(b)
PYEOF
expect create_keys_named_like_ours "$WPACK" create -q -o "$T/ok.wpack" "$T/ourkeys.gguf"
expect export_keys_named_like_ours "$WPACK" export -q "$T/ok.wpack" --to gguf -o "$T/ok.gguf"
cmp -s "$T/ourkeys.gguf" "$T/ok.gguf" && pass roundtrip_keys_named_like_ours ||
    fail roundtrip_keys_named_like_ours "$("$PY" "$TOOL" dump "$T/ok.gguf" | head -5)"
expect create_nan_kvs "$WPACK" create -q -o "$T/nans.wpack" "$T/nans.gguf"
expect export_nan_kvs "$WPACK" export -q "$T/nans.wpack" --to gguf -o "$T/nans_back.gguf"
cmp -s "$T/nans.gguf" "$T/nans_back.gguf" && pass roundtrip_nan_payloads || fail roundtrip_nan_payloads "$(cmp "$T/nans.gguf" "$T/nans_back.gguf")"
expect_fail reserved_key_refused "GGUF key 'gguf.kv_order': wpack records the file's keys.*\[WPACK_E_UNSUPPORTED\]" \
    "$WPACK" create -q -o "$T/r.wpack" "$T/reserved.gguf"

# --- hostile files: each its own code, never a signal, never an output file
expect_hostile_dir "$H" gguf 30
finish
