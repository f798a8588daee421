#!/bin/bash
# test_calib_export_channels.sh - `export --to ort-calib-json|trt-calib` of
# per-channel activation records (spec appendix A.1): both tables hold one
# range per tensor (ONNX Runtime's write_calibration_table reads one float
# of each TensorData's lowest/highest), so each such record is written as
# its range over all channels and named in one warning on stderr; per-tensor
# records are written as before, without a warning.
. "$(dirname "$0")/lib.sh"

# a per-channel ONNX Runtime TensorsData (MinMax per_channel keeps axis 1),
# laid out by calib_formats_tool.py's copy of ORT's writer, and a wpack stats
# JSON with a per-channel record on axis 0
"$PY" - "$T" "$TESTS_DIR/cli" 2>"$T/tool_err" <<'PYEOF' && pass make_files || { fail make_files "$(tail -3 "$T/tool_err")"; finish; exit; }
import json, sys
import numpy as np
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from calib_formats_tool import CalibrationMethod, MyEncoder, TensorData, TensorsData
f32 = lambda x: np.array(x, dtype=np.float32)
td = TensorsData(CalibrationMethod.MinMax, {
    "/conv1/Conv_output_0": TensorData(lowest=f32([-1.5, -0.25, 0.0]), highest=f32([2.0, 0.75, 0.125])),
    "input": TensorData(lowest=f32(-0.5), highest=f32(0.25))})
with open(f"{d}/td.json", "w") as f:
    f.write(json.dumps(td, cls=MyEncoder))
with open(f"{d}/wp.json", "w") as f:
    json.dump({"version": 1, "stats": [
        {"key": "blk", "kind": "activation", "granularity": "channel", "axis": 0, "count": 4,
         "min": [-3.0, 1.0], "max": [-1.0, 2.5], "mean": [-2.0, 1.5]}]}, f)
np.save(f"{d}/w.npy", np.ones(3, np.float32))
PYEOF
expect create_td "$WPACK" create -q -o "$T/a.wpack" "$T/w.npy" --stats-from "$T/td.json"
expect create_wp "$WPACK" create -q -o "$T/b.wpack" "$T/w.npy" --stats "$T/wp.json"

# warned NAME ERRFILE COUNT REGEX: ERRFILE has COUNT warning lines, each matching REGEX
warned() {
    local n
    n=$(grep -c "warning" "$2")
    if [ "$n" -ne "$3" ]; then fail "$1" "$n warnings, want $3: $(head -c 400 "$2")"; return; fi
    if [ "$3" -gt 0 ] && ! grep "warning" "$2" | grep -Eq -- "$4"; then
        fail "$1" "$(head -c 400 "$2")"; return
    fi
    pass "$1"
}

"$WPACK" export -q "$T/a.wpack" --to ort-calib-json -o "$T/a.json" 2>"$T/e1" && pass ort_export || fail ort_export "$(cat "$T/e1")"
warned ort_warns_per_channel "$T/e1" 1 \
    "^wpack: warning: export: stats '/conv1/Conv_output_0': 3 per-channel ranges \(axis 1\) written as one range over all channels \[-1\.5, 2\.0\]: an ONNX Runtime calibration table holds one range per tensor$"
"$PY" - "$T/a.json" >"$T/py" 2>&1 <<'PYEOF' && pass ort_values || fail ort_values "$(cat "$T/py")"
import json, sys
got = json.load(open(sys.argv[1]))
want = {"/conv1/Conv_output_0": [-1.5, 2.0], "input": [-0.5, 0.25]}
assert got == want, got
PYEOF

"$WPACK" export -q "$T/a.wpack" --to trt-calib -o "$T/a.cache" 2>"$T/e2" && pass trt_export || fail trt_export "$(cat "$T/e2")"
warned trt_warns_per_channel "$T/e2" 1 \
    "stats '/conv1/Conv_output_0': 3 per-channel ranges \(axis 1\) written as one scale, the absmax over all channels / 127 \(2\.0 / 127\): a TensorRT calibration cache holds one scale per tensor$"
want=$("$PY" -c 'import struct; print(struct.pack(">f", 2.0 / 127).hex())')
grep -qx "/conv1/Conv_output_0: $want" "$T/a.cache" && pass trt_scale || fail trt_scale "$(cat "$T/a.cache")"

# a per-channel record from the wpack schema, axis 0
"$WPACK" export -q "$T/b.wpack" --to ort-calib-json -o "$T/b.json" 2>"$T/e3" && pass ort_export_axis0 || fail ort_export_axis0 "$(cat "$T/e3")"
warned ort_warns_axis0 "$T/e3" 1 "stats 'blk': 2 per-channel ranges \(axis 0\) written as one range over all channels \[-3\.0, 2\.5\]"
grep -q '"blk": \[-3.0, 2.5\]' "$T/b.json" && pass ort_axis0_values || fail ort_axis0_values "$(cat "$T/b.json")"

# per-tensor only: no warning; the output reads back as the same ranges
"$WPACK" export -q "$T/a.wpack" --to ort-calib-json -o "$T/a.json" 2>/dev/null
expect create_back "$WPACK" create -q -o "$T/c.wpack" "$T/w.npy" --stats-from "$T/a.json"
"$WPACK" export -q "$T/c.wpack" --to ort-calib-json -o "$T/c.json" 2>"$T/e4" && pass ort_export_per_tensor || fail ort_export_per_tensor "$(cat "$T/e4")"
warned per_tensor_no_warning "$T/e4" 0 ""
cmp -s "$T/a.json" "$T/c.json" && pass per_tensor_same_bytes || fail per_tensor_same_bytes

finish
