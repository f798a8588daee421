#!/bin/bash
# test_stats_detect.sh - which JSON is wpack's stats schema (spec appendix A,
# A.1): a top-level member named "stats" is not enough. ONNX Runtime tables
# (written by calib_formats_tool.py's copies of ORT's writers) with a tensor
# named "stats" are read as ONNX Runtime tables; unrelated JSON with a
# "stats" member (or none) is refused naming the file, both kinds wanted and
# what the file lacks, with [WPACK_E_STATS] and no output; the schema itself
# (with or without "version") is still read, and so is the example the
# spec's appendix A shows (taken from the spec's text); with an empty list
# it is recognised and refused as holding no entries.
. "$(dirname "$0")/lib.sh"

"$PY" - "$T" "$TESTS_DIR/cli" 2>"$T/tool_err" <<'PYEOF' && pass make_files || { fail make_files "$(tail -3 "$T/tool_err")"; finish; exit; }
import json, sys
import numpy as np
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from calib_formats_tool import (CalibrationMethod, MyEncoder, TensorData, TensorsData)
def put(name, obj, **kw):
    with open(f"{d}/{name}", "w") as f:
        f.write(json.dumps(obj, **kw))
f32 = lambda x: np.array(x, dtype=np.float32)
r = {"stats": (-1.5, 2.5), "input": (-0.25, 0.75)}
# ORT write_calibration_table, its three generations, a tensor named "stats"
put("ort_v1.json", r)
put("ort_v2.json", {k: (f32(a), f32(b)) for k, (a, b) in r.items()}, cls=MyEncoder)
put("ort_td.json", TensorsData(CalibrationMethod.MinMax,
    {k: TensorData(lowest=f32(a), highest=f32(b)) for k, (a, b) in r.items()}), cls=MyEncoder)
put("ort_only_stats.json", {"stats": [-3.0, 3.0]})
# not calibration data, with a top-level "stats"
put("run_stats.json", {"model": "resnet50", "stats": {"mean": 0.1, "std": 0.2}})
put("version_list.json", {"version": "2.3.1", "stats": [1, 2, 3]})
put("stats_numbers.json", {"stats": [1, 2, 3], "name": "x"})
# a wpack file whose record lost its "key"
put("no_key.json", {"version": 1, "stats": [{"kind": "activation", "count": 1, "min": 0, "max": 1, "mean": 0.5}]})
put("plain.json", {"name": "x", "count": 3})
put("empty.json", {})
# the schema
rec = {"key": "m", "kind": "activation", "count": 5, "min": -1, "max": 1, "mean": 0}
put("wpack.json", {"version": 1, "stats": [rec]})
put("wpack_nover.json", {"stats": [rec]})
put("wpack_empty.json", {"version": 1, "stats": []})
put("wpack_v2.json", {"version": 2, "stats": [rec]})
put("wpack_bad_rec.json", {"version": 1, "stats": [dict(rec, max=[1, 2])]})
np.save(f"{d}/w.npy", np.ones(3, np.float32))
PYEOF

# ranges NAME FILE PYDICT: create --stats-from FILE gives exactly these
# activation ranges {key: [min, max]}
ranges() {
    local name=$1 file=$2 want=$3
    rm -f "$T/c.wpack"
    if ! "$WPACK" create -q -o "$T/c.wpack" "$T/w.npy" --stats-from "$T/$file" 2>"$T/err"; then
        fail "$name" "create: $(head -c 300 "$T/err")"; return
    fi
    "$WPACK" inspect --json "$T/c.wpack" | "$PY" -c '
import json, sys
a = json.load(sys.stdin)
got = {s["key"]: [s["min"], s["max"]] for s in a.get("stats", []) if s["kind"] == "activation"}
want = eval(sys.argv[1])
sys.exit(0 if got == want else print(got) or 1)' "$want" >"$T/py_out" 2>&1 \
        && pass "$name" || fail "$name" "$(head -c 300 "$T/py_out")"
}

ranges ort_v1_tensor_named_stats ort_v1.json '{"stats": [-1.5, 2.5], "input": [-0.25, 0.75]}'
ranges ort_v2_tensor_named_stats ort_v2.json '{"stats": [-1.5, 2.5], "input": [-0.25, 0.75]}'
ranges ort_td_tensor_named_stats ort_td.json '{"stats": [-1.5, 2.5], "input": [-0.25, 0.75]}'
ranges ort_only_stats ort_only_stats.json '{"stats": [-3.0, 3.0]}'
ranges wpack_schema wpack.json '{"m": [-1, 1]}'
ranges wpack_schema_no_version wpack_nover.json '{"m": [-1, 1]}'
# the schema with an empty list is still the schema, and like every
# calibration file that holds no entries it is refused (spec A.1; it added
# nothing and said nothing), by --stats-from and --stats, leaving nothing
for opt in --stats-from --stats; do
    n=wpack_schema_empty_${opt#--}
    n=${n//-/_}
    expect_fail "$n" "$T/wpack_empty.json: wpack stats JSON: holds no entries, nothing to add \(\"stats\" is an empty list\) \[WPACK_E_STATS\]" \
        "$WPACK" create -q -o "$T/e.wpack" "$T/w.npy" "$opt" "$T/wpack_empty.json"
    nothing_at "${n}_no_output" "$T/e.wpack"
done

NEITHER='neither wpack stats \(\{"version": 1, "stats": \[\{"key": \.\.\}, \.\.\]\}\) nor an ONNX Runtime calibration table \(\{tensor name: \[min, max\], \.\.\} or TensorsData\)'
# refused NAME FILE REGEX: create --stats-from and --stats both fail with
# "FILE: JSON that is neither ...: REGEX [WPACK_E_STATS]", leaving nothing
refused() {
    local name=$1 file=$2 pat=$3 opt n
    for opt in --stats-from --stats; do
        n=${opt#--}
        n=${name}_${n//-/_}
        rm -f "$T/b.wpack"
        expect_fail "$n" "$T/$file: JSON that is $NEITHER: $pat \[WPACK_E_STATS\]" \
            "$WPACK" create -q -o "$T/b.wpack" "$T/w.npy" "$opt" "$T/$file"
        [ -e "$T/b.wpack" ] && fail "${n}_no_output" || pass "${n}_no_output"
    done
}
refused run_stats run_stats.json "its \"stats\" is not a list of records that each have a \"key\""
refused version_list version_list.json "its \"stats\" is not a list of records that each have a \"key\""
refused stats_numbers stats_numbers.json "its \"stats\" is not a list of records that each have a \"key\""
refused no_key no_key.json "its \"stats\" is not a list of records that each have a \"key\""
refused plain plain.json "member 'name' is not a tensor's range"
refused empty empty.json "an empty object"

# update --stats-from: refused the same way, the archive unchanged
"$WPACK" create -q -o "$T/u.wpack" "$T/w.npy" --stats-from "$T/wpack.json" 2>/dev/null
cp "$T/u.wpack" "$T/u0.wpack"
expect_fail update_run_stats "run_stats.json: JSON that is $NEITHER.*\[WPACK_E_STATS\]" \
    "$WPACK" update "$T/u.wpack" --stats-from "$T/run_stats.json"
cmp -s "$T/u.wpack" "$T/u0.wpack" && pass update_unchanged || fail update_unchanged
# an ONNX Runtime entry that is not a range still gets its own message
echo '{"stats": [1.0], "x": [0, 1]}' >"$T/ort_bad.json"
expect_fail ort_bad_entry "ONNX Runtime calibration table: 'stats': want \[min, max\].*\[WPACK_E_STATS\]" \
    "$WPACK" create -q -o "$T/b.wpack" "$T/w.npy" --stats-from "$T/ort_bad.json"
# the schema's own errors name the file and the kind too
expect_fail wpack_version "wpack_v2.json: wpack stats JSON: stats: version must be 1 \[WPACK_E_STATS\]" \
    "$WPACK" create -q -o "$T/b.wpack" "$T/w.npy" --stats "$T/wpack_v2.json"
expect_fail wpack_bad_record "wpack_bad_rec.json: wpack stats JSON: stats\[0\] 'm': \"max\" must be a number" \
    "$WPACK" create -q -o "$T/b.wpack" "$T/w.npy" --stats-from "$T/wpack_bad_rec.json"
# JSON that does not parse: the wpack loader says where (as before)
printf '{"version": 1, "stats": [' >"$T/cut.json"
expect_fail cut_json "cut.json.*line 1.*\[WPACK_E_STATS\]" \
    "$WPACK" create -q -o "$T/b.wpack" "$T/w.npy" --stats-from "$T/cut.json"

# a histogram over the bin limit says so (it said "wants counts[N] and edges[N+1]")
$PY -c "
import json
n = (1 << 20) + 1
print(json.dumps({'version': 1, 'stats': [{'key': 'h', 'kind': 'activation', 'count': 1, 'min': 0.0,
      'max': 1.0, 'mean': 0.5, 'variance': 0.1, 'histogram': {'edges': [0.0] * (n + 1), 'counts': [0] * n}}]}))" >"$T/hist.json"
expect_fail hist_over_limit "histogram of 1048577 bins, limit 1048576 \[WPACK_E_LIMIT\]" \
    "$WPACK" create -q -o "$T/h.wpack" "$T/w.npy" --stats-from "$T/hist.json"

# the example of spec appendix A, as the spec shows it: both records go in
SPEC="$TESTS_DIR/../spec/wpack-format.md"
"$PY" - "$SPEC" "$T" <<'PYEOF' 2>"$T/err" && pass appendix_a_example_extracted || fail appendix_a_example_extracted "$(tail -2 "$T/err")"
import sys
import numpy as np
s = open(sys.argv[1]).read()
i = s.index("## Appendix A"); j = s.index("```json", i) + 7; k = s.index("```", j)
open(sys.argv[2] + "/appendix_a.json", "w").write(s[j:k])
np.save(sys.argv[2] + "/encoder.layers.0.attn.q_proj.weight.npy", np.zeros((2, 8), np.float32))
PYEOF
if "$WPACK" create -q -o "$T/appa.wpack" --stats "$T/appendix_a.json" \
        "$T/encoder.layers.0.attn.q_proj.weight.npy" 2>"$T/err" &&
   "$WPACK" inspect --json "$T/appa.wpack" >"$T/appa.json" 2>>"$T/err" &&
   "$PY" -c "
import json, sys
d = json.load(open(sys.argv[1]))
got = sorted((s['key'], s['kind'], s['count']) for s in d['stats'])
assert got == [('encoder.layers.0.attn', 'activation', 1048576),
               ('encoder.layers.0.attn.q_proj.weight', 'weight', 4096)], got" "$T/appa.json" 2>>"$T/err"
then pass appendix_a_example_reads
else fail appendix_a_example_reads "$(tail -3 "$T/err")"
fi

# a JSON input is parsed from one mapping, not read a byte per system call
# (jansson's json_loadfd: 11 M reads for a 6 MB file); a 300 KB stats file
if command -v strace >/dev/null 2>&1; then
    $PY -c "
import json
print(json.dumps({'version': 1, 'stats': [{'key': 'm%d' % i, 'kind': 'activation', 'count': 1,
      'min': -1.0, 'max': 1.0, 'mean': 0.0, 'variance': 0.5} for i in range(2000)]}))" >"$T/big.json"
    strace -f -e trace=read -o "$T/trace" "$WPACK" create -q -o "$T/bj.wpack" "$T/w.npy" --stats-from "$T/big.json" 2>"$T/err"
    n=$(grep -c '^[0-9]* *read(' "$T/trace")
    [ -s "$T/bj.wpack" ] && [ "$n" -lt 200 ] && pass json_not_read_bytewise ||
        fail json_not_read_bytewise "$n read calls for $(stat -c %s "$T/big.json") bytes: $(head -c 200 "$T/err")"
else
    fail json_not_read_bytewise "no strace (tools/deps.sh installs it): cannot check"
fi

finish
