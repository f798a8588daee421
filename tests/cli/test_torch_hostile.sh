#!/bin/bash
# test_torch_hostile.sh - torch checkpoints that amplify (issue 14 points 2
# and 3) or hold values wpack cannot store (issue 13 point 7). Inputs are
# tests/hostile/round2/torch_* (made by tests/hostile/round2/make_torch.py).
# Each case checks the exit code, the message (ending in [WPACK_E_*]), that a
# refused create leaves no output, and for the amplifiers the peak RSS and
# the size of what was written.
source "$(dirname "$0")/lib.sh"
R=$TESTS_DIR/hostile/round2
RSS_MAX_KB=100000   # 100 MB: these inputs are at most 150 KB

# run_rc NAME WANT_RC PATTERN CMD...: CMD exits WANT_RC, stderr matches
# PATTERN (extended regex; EMPTY: no stderr at all), and the peak RSS stays
# under RSS_MAX_KB.
run_rc() {
    local name=$1 want=$2 pat=$3; shift 3
    /usr/bin/time -f %M -o "$T/rss" "$@" >"$T/out" 2>"$T/err"
    local rc=$? rss
    rss=$(tail -n 1 "$T/rss")
    if [ "$rc" -ne "$want" ]; then fail "$name" "exit $rc, want $want: $(head -c 400 "$T/err")"; return; fi
    if [ "$pat" = EMPTY ] && [ -s "$T/err" ]; then fail "$name" "stderr: $(head -c 400 "$T/err")"; return; fi
    if [ "$pat" != EMPTY ] && ! grep -Eq -- "$pat" "$T/err"; then fail "$name" "stderr lacks /$pat/: $(head -c 400 "$T/err")"; return; fi
    if ! [ "$rss" -lt "$RSS_MAX_KB" ] 2>/dev/null; then fail "$name" "peak RSS ${rss} KB"; return; fi
    pass "$name"
}

# refused NAME PATTERN FILE [OPTIONS...]: create exits 1 with PATTERN and no output.
refused() {
    local name=$1 pat=$2 in=$3; shift 3
    rm -f "$T/o.wpack"
    run_rc "$name" 1 "$pat" "$WPACK" create -q -o "$T/o.wpack" "$@" "$in"
    if ls "$T"/o.wpack* >/dev/null 2>&1; then fail "$name: no output" "$(ls "$T")"; else pass "$name: no output"; fi
}

for f in torch_expand_4tib torch_expand_small torch_expand_partial torch_views_256 \
         torch_memo_paths_16e6 torch_memo_paths_16e5 torch_ordereddict_copies torch_memo_index \
         torch_memo_strings \
         torch_complex torch_quantized torch_quantized_channel torch_ckpt_bytes_bigint \
         torch_ckpt_bytes_p4; do
    [ -s "$R/$f.pt" ] || fail "input $f.pt" "missing (run tests/hostile/round2/make_torch.py)"
done

# ---- issue 14.2: a stride-0 view of one element is a splat, not 4 TiB ----
run_rc "expand 4 TiB: create" 0 EMPTY "$WPACK" create -q -o "$T/e.wpack" "$R/torch_expand_4tib.pt"
size=$(stat -c %s "$T/e.wpack" 2>/dev/null || echo 0)
if [ "$size" -gt 0 ] && [ "$size" -lt 65536 ]; then pass "expand 4 TiB: archive of $size bytes"; else fail "expand 4 TiB: archive size" "$size"; fi
"$WPACK" inspect --json "$T/e.wpack" >"$T/e.json" 2>&1
if grep -q '"name": "w", "kind": "splat", "dtype": "f32", "shape": \[1048576, 1048576\], "nbytes": 4398046511104' "$T/e.json" &&
   grep -q '"fill": "0.5"' "$T/e.json"; then pass "expand 4 TiB: one splat entry, fill 0.5"
else fail "expand 4 TiB: splat entry" "$(head -c 400 "$T/e.json")"; fi
expect "expand 4 TiB: verify" "$WPACK" verify "$T/e.wpack"

# small stride-0 views round trip: extract gives what torch gives
expect "expand small: create" "$WPACK" create -q -o "$T/s.wpack" "$R/torch_expand_small.pt"
"$WPACK" inspect --json "$T/s.wpack" >"$T/s.json" 2>&1
nsplat=$(grep -c '"kind": "splat"' "$T/s.json")
if [ "$nsplat" -eq 5 ] && grep -q '"name": "row_bcast", "kind": "data"' "$T/s.json"; then
    pass "expand small: 5 splats, the (1, 0) view stored as data"
else fail "expand small: entry kinds" "$nsplat splats: $(head -c 600 "$T/s.json")"; fi
expect "expand small: extract" "$WPACK" extract -q "$T/s.wpack" -o "$T/sx"
cat >"$T/cmp.py" <<'EOF'
import sys
import numpy as np
import torch
d = torch.load(sys.argv[1])
bad = []
for k, t in d.items():
    a = np.load("%s/%s.npy" % (sys.argv[2], k))
    if t.dtype == torch.bfloat16:
        want = t.contiguous().view(torch.int16).numpy().view(np.uint16)
    else:
        want = t.contiguous().numpy()
    if a.shape != want.shape or a.dtype != want.dtype or not np.array_equal(a, want):
        bad.append("%s: %s %s vs %s %s" % (k, a.dtype, a.shape, want.dtype, want.shape))
print("; ".join(bad) if bad else "same")
sys.exit(1 if bad else 0)
EOF
if out=$("$PY" "$T/cmp.py" "$R/torch_expand_small.pt" "$T/sx" 2>&1); then pass "expand small: numpy equals torch ($out)"
else fail "expand small: numpy equals torch" "$out"; fi
# --cast bf16 casts the fill like any element
expect "expand small: create --cast bf16" "$WPACK" create -q --cast bf16 -o "$T/sc.wpack" "$R/torch_expand_small.pt"
"$WPACK" inspect --json "$T/sc.wpack" >"$T/sc.json" 2>&1
if grep -q '"name": "splat_f32", "kind": "splat", "dtype": "bf16", "shape": \[3, 5\]' "$T/sc.json" &&
   grep -q '"name": "splat_i64", "kind": "splat", "dtype": "i64"' "$T/sc.json"; then pass "expand small: cast splat is bf16, the int splat stays i64"
else fail "expand small: cast splat" "$(head -c 600 "$T/sc.json")"; fi
expect "expand small --cast: extract" "$WPACK" extract -q "$T/sc.wpack" -o "$T/scx" splat_f32
if "$PY" -c "import numpy as np,sys; a=np.load('$T/scx/splat_f32.npy'); sys.exit(0 if a.dtype==np.uint16 and a.shape==(3,5) and (a==0x4020).all() else 1)"; then
    pass "expand small --cast: every element is bf16 2.5 (0x4020)"
else fail "expand small --cast: values" "$(ls "$T/scx")"; fi

# ---- issue 14.2: the output cap (create --max-output, default 1000 x input, >= 1 GiB) ----
refused "partial stride-0 view, 8 TiB" \
    "tensor 'w': 8796093022208 bytes would bring the tensor data past the output cap of 1073741824 bytes .*--max-output SIZE raises the cap\) \[WPACK_E_TOO_LARGE\]$" \
    "$R/torch_expand_partial.pt"
# 256 overlapping 16 KiB views of one storage: 4 MiB (under the default cap)
expect "256 views: create (default cap)" "$WPACK" create -q -o "$T/v.wpack" "$R/torch_views_256.pt"
if "$PY" - "$T/v.wpack" "$R/torch_views_256.pt" "$T/vx" "$WPACK" <<'EOF'
import subprocess, sys
import numpy as np
import torch
subprocess.run([sys.argv[4], "extract", "-q", sys.argv[1], "-o", sys.argv[3], "v0", "v17", "v255"], check=True)
d = torch.load(sys.argv[2])
sys.exit(0 if all(np.array_equal(np.load("%s/%s.npy" % (sys.argv[3], k)), d[k].numpy())
                  for k in ("v0", "v17", "v255")) else 1)
EOF
then pass "256 views: v0, v17, v255 equal torch's"; else fail "256 views: values"; fi
refused "256 views: --max-output 1M refused before writing" \
    "its 256 tensors together \(the largest 'v0'\): 4194304 bytes would bring the tensor data past the output cap of 1048576 bytes \(0 already written\).*\[WPACK_E_TOO_LARGE\]$" \
    "$R/torch_views_256.pt" --max-output 1M
expect "256 views: --max-output 4M (exactly enough)" "$WPACK" create -q --max-output 4M -o "$T/v4.wpack" "$R/torch_views_256.pt"
# a splat writes no tensor data: even a 1-byte cap takes it
run_rc "expand 4 TiB under --max-output 1" 0 EMPTY "$WPACK" create -q --max-output 1 -o "$T/e1.wpack" "$R/torch_expand_4tib.pt"
expect_fail "--max-output 0 is a usage error" "--max-output 0: want a byte count.*" \
    "$WPACK" create -q --max-output 0 -o "$T/z.wpack" "$R/torch_expand_small.pt"
expect_fail "--max-output junk is a usage error" "--max-output 12Q: want a byte count" \
    "$WPACK" create -q --max-output 12Q -o "$T/z.wpack" "$R/torch_expand_small.pt"
# the cap is the writer's: every importer has it (a .npy, then a second input)
"$PY" -c "import numpy as np; np.save('$T/big.npy', np.zeros(1 << 19, np.float32))"
refused "a 2 MiB .npy under --max-output 1M" \
    "tensor 'big': 2097152 bytes would bring the tensor data past the output cap of 1048576 bytes.*\[WPACK_E_TOO_LARGE\]$" \
    "$T/big.npy" --max-output 1M
refused "cap counts earlier inputs" \
    "tensor 'v0': 16384 bytes would bring the tensor data past the output cap of 2097152 bytes \(2097152 already written\).*\[WPACK_E_TOO_LARGE\]$" \
    "$R/torch_views_256.pt" --max-output 2M "$T/big.npy"

# ---- issue 14.3: work and memory bounded by data.pkl's size ----
refused "16^6 memo paths" \
    "torch: more than [0-9]+ values to name \(2 per byte of the [0-9]+-byte data.pkl, at least 65536.*shared subtrees.*\[WPACK_E_LIMIT\]$" \
    "$R/torch_memo_paths_16e6.pt"
refused "16^5 memo paths (1M aliases before)" \
    "torch: more than [0-9]+ values to name .*\[WPACK_E_LIMIT\]$" "$R/torch_memo_paths_16e5.pt"
refused "OrderedDict copies of one list" \
    "pickle: containers would hold more than [0-9]+ items \(2 per byte of this [0-9]+-byte pickle.*\[WPACK_E_LIMIT\]$" \
    "$R/torch_ordereddict_copies.pt"
refused "memo index 4M in a tiny pickle" \
    "pickle: memo index 4000000 above the [0-9]+ limit \(the pickle's size \+ 256.*\[WPACK_E_LIMIT\]$" \
    "$R/torch_memo_index.pt"
# strings count with the names: one memoised string under 2,000 keys was
# 128 MB of metadata written from an 82 KB checkpoint
refused "one 64 KiB string under 2,000 keys" \
    "torch: the names and strings of this checkpoint's values would take more than [0-9]+ bytes \(32 per byte of the [0-9]+-byte data.pkl.*shared subtrees or strings.*\[WPACK_E_LIMIT\]$" \
    "$R/torch_memo_strings.pt"

# ---- issue 13.7: refusals that say what, skips that say which key ----
refused "complex tensor" \
    "torch: tensor 'w': complex tensors are not supported \(save torch.view_as_real\(t\).*\[WPACK_E_UNSUPPORTED\]$" \
    "$R/torch_complex.pt"
refused "quantized tensor (per tensor)" \
    "torch: tensor 'w': quantized tensors are not supported: dequantize first \(tensor.dequantize\(\)\) \[WPACK_E_UNSUPPORTED\]$" \
    "$R/torch_quantized.pt"
refused "quantized tensor (per channel)" \
    "torch: tensor 'w': quantized tensors are not supported: dequantize first \(tensor.dequantize\(\)\) \[WPACK_E_UNSUPPORTED\]$" \
    "$R/torch_quantized_channel.pt"
for f in torch_ckpt_bytes_bigint torch_ckpt_bytes_p4; do
    run_rc "$f: create keeps the tensors" 0 "skipping 'tokenizer_blob': a bytes value cannot be metadata" \
        "$WPACK" create -q -o "$T/$f.wpack" "$R/$f.pt"
    if grep -q "skipping 'seed': an int outside 64 bits" "$T/err" && grep -q "skipping 'neg_big': an int outside 64 bits" "$T/err" &&
       [ "$(grep -c 'skipping' "$T/err")" -eq 3 ]; then pass "$f: three warnings, one per key"
    else fail "$f: warnings" "$(cat "$T/err")"; fi
    "$WPACK" inspect --json "$T/$f.wpack" >"$T/c.json" 2>&1
    if grep -q '"name": "model.fc.weight", "kind": "data", "dtype": "f32", "shape": \[2, 3\]' "$T/c.json" &&
       grep -q '"name": "model.fc.bias"' "$T/c.json" && grep -q '"epoch": 3' "$T/c.json" &&
       grep -q '"lr": 0.5' "$T/c.json" && ! grep -q '"seed"\|"tokenizer_blob"\|"neg_big"' "$T/c.json"; then
        pass "$f: tensors and epoch/lr kept, skipped keys absent"
    else fail "$f: archive content" "$(head -c 800 "$T/c.json")"; fi
done
run_rc "--key model: no warning for values outside the key" 0 EMPTY \
    "$WPACK" create -q --key model -o "$T/k.wpack" "$R/torch_ckpt_bytes_bigint.pt"
# a str value with a NUL cannot be a metadata string: skipped like a bytes
# value, with the warning (it was dropped without a word)
if torch_ok=$($PY - "$T/nul_str.pt" 2>&1 <<'PYEOF'
import sys, torch
torch.save({"w": torch.ones(2), "note": "a\x00b", "ok": "fine"}, sys.argv[1])
PYEOF
); then
    run_rc "str with a NUL: skipped with a warning" 0 "skipping 'note': a string with a NUL byte cannot be metadata" \
        "$WPACK" create -q -o "$T/nul.wpack" "$T/nul_str.pt"
    "$WPACK" inspect "$T/nul.wpack" >"$T/out" 2>&1
    grep -q '^w ' "$T/out" && grep -q 'ok = fine' "$T/out" && ! grep -q 'note' "$T/out" &&
        pass "str with a NUL: the rest kept" || fail "str with a NUL: the rest kept" "$(cat "$T/out")"
else
    echo "skip str with a NUL: torch cannot save ($torch_ok)"
fi


# Pickle values cost ~50 bytes each and the parse kept every one until the
# end: 8 M empty lists pushed and popped (a 16 MB data.pkl, `]0` again and
# again) peaked at 784 MB. A popped value nothing else holds is now reused,
# and what stays (1 M Nones on the stack, `(NNN...1`) is refused by the
# memory budget (32 bytes per pickle byte + 4 MiB). Made here: too big to
# check in.
$PY - "$T" <<'PYEOF'
import sys, zipfile
def pt(name, pkl):
    with zipfile.ZipFile(f"{sys.argv[1]}/{name}", "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/version", b"3\n")
pt("pickle_pops.pt", b"\x80\x02" + b"]0" * 8000000 + b"}.")
pt("pickle_nones.pt", b"\x80\x02(" + b"N" * 1000000 + b"1}.")
PYEOF
rm -f "$T/o.wpack"
run_rc "pickle: 8 M values pushed and popped stay small" 1 "the inputs hold no tensor" \
    "$WPACK" create -q -o "$T/o.wpack" "$T/pickle_pops.pt"
refused "pickle: 1 M values held past the memory budget" \
    "pickle_nones.pt: torch: data.pkl: pickle: parsing needs more than [0-9]+ bytes of memory .*\[WPACK_E_LIMIT\]" \
    "$T/pickle_nones.pt"
finish
