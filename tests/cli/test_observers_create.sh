#!/bin/bash
# test_observers_create.sh - torch.ao observers in a checkpoint given to
# `wpack create` as an input (issue 18, spec appendix A.1): real torch 1.13
# state_dicts after prepare() / prepare_qat() (tests/cli/observers_tool.py)
# become activation stats of the observed modules, equal to the observers'
# min_val / max_val (and HistogramObserver's bins, rounded), and no
# observer or fake-quant buffer stays a tensor, unless --keep-observers
# (then every state_dict entry is a tensor too); `--stats-from` of the same
# file gives the same records; one summary line on stderr.
. "$(dirname "$0")/lib.sh"

if "$PY" "$TESTS_DIR/cli/observers_tool.py" "$T" 2>"$T/tool_err"; then
    pass make_checkpoints
else
    fail make_checkpoints "$(tail -3 "$T/tool_err")"
    finish
    exit
fi

# py NAME ARCHIVE CKPT PYCODE: PYCODE runs with a (inspect --json of
# ARCHIVE), sd (CKPT.json: the state_dict as float lists), acts (activation
# records by key), tensors (the set of tensor names) and must not raise.
py() {
    local name=$1 ar=$2 ck=$3 code=$4
    "$WPACK" inspect --json "$ar" >"$T/insp.json" 2>"$T/insp_err" || { fail "$name" "inspect: $(head -c 300 "$T/insp_err")"; return; }
    if "$PY" - "$T/insp.json" "$T/$ck.json" "$code" >"$T/py_out" 2>&1 <<'PYEOF'
import json, math, sys
a = json.load(open(sys.argv[1]))
sd = json.load(open(sys.argv[2]))
acts = {s["key"]: s for s in a.get("stats", []) if s["kind"] == "activation"}
tensors = {t["name"] for t in a["tensors"]}
OBS = ("activation_post_process", "weight_fake_quant")
def observer_names():
    return {k for k in sd if any(p in k.split(".") for p in OBS)}
def same_range(key, prefix=""):
    base = key + ".activation_post_process"
    if base + ".activation_post_process.min_val" in sd:   # FakeQuantize: its inner observer
        base += ".activation_post_process"
    r = acts[prefix + key]
    mn, mx = sd[base + ".min_val"], sd[base + ".max_val"]
    assert r["min"] == (mn[0] if len(mn) == 1 else mn), (r["min"], mn)
    assert r["max"] == (mx[0] if len(mx) == 1 else mx), (r["max"], mx)
    if base + ".histogram" in sd:
        h = [math.floor(x + 0.5) for x in sd[base + ".histogram"]]
        assert r["histogram"]["counts"] == h, "histogram counts"
        e = r["histogram"]["edges"]
        assert len(e) == len(h) + 1 and e[0] == mn[0] and e[-1] == mx[0], "edges"
        assert r["count"] == sum(h), (r["count"], sum(h))
    else:
        assert r["count"] == 0 and "histogram" not in r
    return r
exec(sys.argv[3])
PYEOF
    then pass "$name"; else fail "$name" "$(tail -c 400 "$T/py_out")"; fi
}

for ck in ptq hist minmax qat lsq; do
    "$WPACK" create -o "$T/$ck.wpack" "$T/$ck.pt" >"$T/out" 2>"$T/$ck.err" \
        && pass "create_$ck" || fail "create_$ck" "$(head -c 400 "$T/$ck.err")"
done

# --- prepare(): HistogramObserver (default fbgemm qconfig, 2048 bins; 64 bins)
for ck in ptq hist; do
    py "${ck}_ranges" "$T/$ck.wpack" $ck 'for k in ("quant", "conv", "fc"): same_range(k)'
    py "${ck}_no_observer_tensor" "$T/$ck.wpack" $ck '
assert not [t for t in tensors if "activation_post_process" in t], tensors
assert tensors == set(sd) - observer_names(), tensors ^ (set(sd) - observer_names())'
    py "${ck}_idle_no_record" "$T/$ck.wpack" $ck 'assert "idle" not in acts and set(acts) == {"quant", "conv", "fc"}, set(acts)'
done
py hist_64_bins "$T/hist.wpack" hist 'assert len(acts["conv"]["histogram"]["counts"]) == 64'
# torch re-bins fractional counts after the first batch: rounding is what the spec says
py ptq_fractional_counts_rounded "$T/ptq.wpack" ptq '
assert any(x != math.floor(x) for x in sd["conv.activation_post_process.histogram"]), "no fraction to round"'
grep -q "^wpack: warning: .*ptq.pt: 3 torch.ao observers became activation stats (quant, conv, fc); 16 observer buffers not stored as tensors (--keep-observers keeps them)$" "$T/ptq.err" \
    && pass ptq_summary_line || fail ptq_summary_line "$(cat "$T/ptq.err")"

# --- MinMaxObserver: range-only records; the one that never ran (+inf/-inf) gives none
py minmax_ranges "$T/minmax.wpack" minmax '
for k in ("quant", "conv", "fc"):
    r = same_range(k); assert r["mean"] == r["min"] + (r["max"] - r["min"]) / 2 and r["variance"] == 0
assert "idle" not in acts and "idle.activation_post_process.min_val" in sd and sd["idle.activation_post_process.min_val"] == [math.inf]'
py minmax_no_observer_tensor "$T/minmax.wpack" minmax 'assert tensors == set(sd) - observer_names()'

# --- prepare_qat(): the FakeQuantize's inner observer is the range; its
# scale, zero_point, flags and eps, and every weight_fake_quant buffer, are
# left out; the per-channel weight observers give no record
py qat_ranges "$T/qat.wpack" qat 'for k in ("quant", "conv", "fc"): same_range(k)'
py qat_no_observer_tensor "$T/qat.wpack" qat '
assert not [t for t in tensors if "fake_quant" in t or "activation_post_process" in t], tensors
assert tensors == {k for k in sd if k.split(".")[-1] in ("weight", "bias")}, tensors'
py qat_no_weight_record "$T/qat.wpack" qat '
assert set(acts) == {"quant", "conv", "fc"}, set(acts)
assert len(sd["conv.weight_fake_quant.activation_post_process.min_val"]) == 4  # per channel, dropped'
grep -q "3 torch.ao observers became activation stats (quant, conv, fc); [0-9]* observer buffers not stored as tensors (--keep-observers keeps them); 3 weight_fake_quant observers left out" "$T/qat.err" \
    && pass qat_summary_line || fail qat_summary_line "$(cat "$T/qat.err")"

# --- _LearnableFakeQuantize: learned scale / zero_point stay tensors
py lsq_learned_kept "$T/lsq.wpack" lsq '
for k in ("quant", "conv", "fc", "idle"):
    assert k + ".activation_post_process.scale" in tensors and k + ".activation_post_process.zero_point" in tensors, k
assert not [t for t in tensors if t.endswith(("min_val", "max_val", "learning_enabled", "eps"))]
assert "conv.weight_fake_quant.scale" not in tensors
for k in ("quant", "conv", "fc"): same_range(k)'

# --- --keep-observers: the same stats, and every state_dict entry as a tensor
for ck in ptq qat; do
    "$WPACK" create -o "$T/${ck}_keep.wpack" --keep-observers "$T/$ck.pt" >"$T/out" 2>"$T/keep.err" \
        && pass "keep_create_$ck" || fail "keep_create_$ck" "$(head -c 300 "$T/keep.err")"
    py "keep_${ck}" "$T/${ck}_keep.wpack" $ck '
assert tensors == set(sd), set(sd) ^ tensors
for k in ("quant", "conv", "fc"): same_range(k)'
    grep -q "observer buffers kept as tensors too (--keep-observers)" "$T/keep.err" \
        && pass "keep_summary_$ck" || fail "keep_summary_$ck" "$(cat "$T/keep.err")"
done
"$WPACK" extract "$T/qat_keep.wpack" -o "$T/x" >/dev/null 2>&1
"$PY" -c "
import numpy as np, json, sys
sd = json.load(open('$T/qat.json'))
v = np.load('$T/x/conv.activation_post_process.activation_post_process.min_val.npy')
assert v.dtype == np.float32 and float(v) == sd['conv.activation_post_process.activation_post_process.min_val'][0]
" 2>"$T/np_err" && pass keep_values_exact || fail keep_values_exact "$(tail -2 "$T/np_err")"

# --- --prefix puts the module paths under it; --stats-from gives the same records
"$WPACK" create -q -o "$T/pre.wpack" --prefix model "$T/qat.pt" 2>"$T/pre.err" \
    && pass prefix_create || fail prefix_create "$(cat "$T/pre.err")"
py prefix_keys "$T/pre.wpack" qat '
assert set(acts) == {"model.quant", "model.conv", "model.fc"}, set(acts)
for k in ("quant", "conv", "fc"): same_range(k, "model.")'
"$PY" -c "import numpy as np; np.save('$T/w.npy', np.ones(3, np.float32))"
expect stats_from_qat "$WPACK" create -q -o "$T/sf.wpack" "$T/w.npy" --stats-from "$T/qat.pt"
py stats_from_same "$T/sf.wpack" qat 'assert set(acts) == {"quant", "conv", "fc"}, set(acts)
for k in acts: same_range(k)'

# --- a checkpoint without observers: no summary line, tensors as before
"$PY" -c "import torch; torch.save({'w': torch.ones(2)}, '$T/plain.pt')"
"$WPACK" create -o "$T/plain.wpack" "$T/plain.pt" >"$T/out" 2>"$T/plain.err" \
    && ! grep -q "observer" "$T/plain.err" && pass plain_no_summary || fail plain_no_summary "$(cat "$T/plain.err")"

# --- a damaged observer buffer fails the create before anything is written
cp "$T/minmax.pt" "$T/bad.pt"
"$PY" - "$T/bad.pt" <<'PYEOF'
# flip one byte of the storage of conv's min_val (its zip CRC-32 then fails)
import sys, torch
sd = torch.load(sys.argv[1])
import struct
raw = open(sys.argv[1], "rb").read()
target = struct.pack("<f", float(sd["conv.activation_post_process.min_val"]))
if raw.count(target) != 1:
    sys.exit("min_val storage not found once")
b = bytearray(raw)
b[raw.find(target)] ^= 1
open(sys.argv[1], "wb").write(b)
PYEOF
expect_fail damaged_observer "bad.pt: .*conv.activation_post_process.min_val.*CRC-32.*\[WPACK_E_CHECKSUM\]" \
    "$WPACK" create -q -o "$T/bad.wpack" "$T/bad.pt"
[ -e "$T/bad.wpack" ] && fail damaged_no_output || pass damaged_no_output

# --- Python: wpack.pack(..., keep_observers=True)
py_wpack - "$T" <<'PYEOF' >"$T/py_err" 2>&1 && pass python_pack || fail python_pack "$(tail -c 400 "$T/py_err")"
import json, sys, wpack
t = sys.argv[1]
sd = json.load(open(t + "/ptq.json"))
notes = []
wpack.pack(t + "/ptq.pt", t + "/py.wpack", warn=notes.append)
wpack.pack(t + "/ptq.pt", t + "/py_keep.wpack", keep_observers=True, warn=notes.append)
a, b = wpack.load_file(t + "/py.wpack"), wpack.load_file(t + "/py_keep.wpack")
assert "conv.activation_post_process.min_val" not in a and "conv.weight" in a, set(a)
assert set(b) == set(sd), set(b) ^ set(sd)
assert len(notes) == 2 and "3 torch.ao observers became activation stats" in notes[0], notes
PYEOF
finish
