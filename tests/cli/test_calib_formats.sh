#!/bin/bash
# test_calib_formats.sh - calibration files laid out exactly as the peers'
# own writers do (tests/cli/calib_formats_tool.py cites the code each follows:
# a TensorRT 5.1 cache, ONNX Runtime write_calibration_table in its three
# JSON generations incl. per-channel and Entropy tables, llama.cpp
# save_imatrix_legacy and save_imatrix with in_sum) go through
# `create --stats-from` into the records spec appendix A.1 says, value for
# value; the exporters' output reads back the same.
. "$(dirname "$0")/lib.sh"

"$PY" "$TESTS_DIR/cli/calib_formats_tool.py" "$T" 2>"$T/tool_err" && pass make_files \
    || { fail make_files "$(tail -3 "$T/tool_err")"; finish; exit; }
"$PY" -c "import numpy as np; np.save('$T/w.npy', np.ones(3, np.float32))"

# check NAME FILE PYCODE: create with --stats-from FILE, then PYCODE runs with
# acts (activation records by key) and e (expected.json) and must not raise
check() {
    local name=$1 file=$2 code=$3
    rm -f "$T/c.wpack"
    if ! "$WPACK" create -q -o "$T/c.wpack" "$T/w.npy" --stats-from "$T/$file" 2>"$T/c_err"; then
        fail "$name" "create: $(head -c 300 "$T/c_err")"; return
    fi
    "$WPACK" inspect --json "$T/c.wpack" >"$T/c.json"
    if "$PY" - "$T/c.json" "$T/expected.json" "$code" >"$T/py_out" 2>&1 <<'PYEOF'
import json, sys
a = json.load(open(sys.argv[1]))
e = json.load(open(sys.argv[2]))
acts = {s["key"]: s for s in a.get("stats", []) if s["kind"] == "activation"}
def ranges(exp):
    assert set(acts) == set(exp), (set(acts), set(exp))
    for k, (mn, mx) in exp.items():
        r = acts[k]
        assert r["min"] == mn and r["max"] == mx, (k, r["min"], r["max"], mn, mx)
        assert r["count"] == 0 and r["variance"] == ([0] * len(mn) if isinstance(mn, list) else 0)
exec(sys.argv[3])
PYEOF
    then pass "$name"; else fail "$name" "$(tail -c 500 "$T/py_out")"; fi
}

# --- TensorRT 5.1 cache: names with spaces, '*', brackets; file order kept
# out of the key; a tiny scale (leading zero hex digits) and "0"
check trt5101 trt5101.cache 'ranges(e["trt"])'
check trt5101_layer_name trt5101.cache 'assert acts["(Unnamed Layer* 0) [Convolution]_output"]["absmax"] == e["trt"]["(Unnamed Layer* 0) [Convolution]_output"][1]'
"$WPACK" create -q -o "$T/t.wpack" "$T/w.npy" --stats-from "$T/trt5101.cache" 2>/dev/null
expect trt_export "$WPACK" export -q "$T/t.wpack" --to trt-calib -o "$T/t.cache"
grep -qx "zero: 00000000" "$T/t.cache" && grep -qx "tiny: 006ce3ee" "$T/t.cache" \
    && head -1 "$T/t.cache" | grep -qx "TRT-8601-EntropyCalibration2" \
    && pass trt_export_form || fail trt_export_form "$(head -3 "$T/t.cache")"
check trt_export_reads_back t.cache 'ranges(e["trt"])'

# --- ONNX Runtime: {name: (min, max)}; the same through MyEncoder (numpy
# arrays as objects); TensorsData MinMax, per channel (axis 1), Entropy
check ort_v1 ort_v1.json 'ranges(e["ort_v1"])'
check ort_v2 ort_v2.json 'ranges(e["ort_v2"])'
check ort_td_minmax ort_td_minmax.json 'ranges(e["ort_td_minmax"])'
check ort_td_channel ort_td_channel.json '
ranges(e["ort_td_channel"])
r = acts["/conv1/Conv_output_0"]
assert r["granularity"] == "channel" and r["axis"] == 1 and r["channels"] == 3, r'
check ort_td_entropy ort_td_entropy.json 'ranges(e["ort_td_entropy"]); assert "histogram" not in acts["input"]'
"$WPACK" create -q -o "$T/o.wpack" "$T/w.npy" --stats-from "$T/ort_v1.json" 2>/dev/null
expect ort_export "$WPACK" export -q "$T/o.wpack" --to ort-calib-json -o "$T/o.json"
check ort_export_reads_back o.json 'ranges(e["ort_v1"])'

# --- llama.cpp imatrix: the legacy .dat of save_imatrix_legacy (ncall a
# chunk count, an unexercised expert as 1), the GGUF of save_imatrix with
# in_sum (true mean, variance about it)
check imatrix_dat imatrix_llama.dat '
assert set(acts) == set(e["dat"]), set(acts)
for k, x in e["dat"].items():
    r = acts[k]
    assert r["variance"] == x["variance"] and r["mean"] == x["mean"] and r["count"] == x["count"], (k, r, x)
    assert r["max"] == x["max"] and r["min"] == [-v for v in x["max"]] and r["axis"] == 0
assert acts["blk.0.ffn_up_exps.weight"]["variance"][4:] == [1.0, 1.0]  # no rows: 1 * ncall / ncall'
check imatrix_gguf imatrix_llama.gguf '
assert set(acts) == set(e["gguf"]), set(acts)
for k, x in e["gguf"].items():
    r = acts[k]
    assert r["variance"] == x["variance"] and r["mean"] == x["mean"] and r["count"] == x["count"], (k, r["variance"], r["mean"], x)
    assert r["max"] == x["max"] and r["channels"] == len(x["max"])'
check imatrix_gguf_mean_nonzero imatrix_llama.gguf 'assert acts["blk.0.attn_q.weight"]["mean"][:2] == [0.5, -0.25]'
finish
