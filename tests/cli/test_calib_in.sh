#!/bin/bash
# test_calib_in.sh - other tools' calibration data in and out (issue 18,
# spec appendix A.1): files written by tests/cli/calib_tool.py after the
# published formats (TensorRT cache, ONNX Runtime JSON in its two forms,
# llama.cpp imatrix .dat and GGUF) go through `create --stats-from` and
# `update --stats-from` into the records the spec says, with the values
# checked through `inspect --json`; `export --to trt-calib|ort-calib-json`
# gives back the same bytes for files in our export's form; every bad file
# fails naming the file, the kind, the line or entry and [WPACK_E_STATS],
# leaving no output.
. "$(dirname "$0")/lib.sh"
TOOL="$TESTS_DIR/cli/calib_tool.py"

"$PY" "$TOOL" make "$T" && pass make_files || fail make_files
"$PY" -c "import numpy as np; np.save('$T/w.npy', np.ones((2, 4), np.float32))" \
    && pass make_npy || fail make_npy

# rec ARCHIVE KEY: "min max absmax mean variance count channels" of the
# activation record KEY (over all channels), from inspect --json
rec() {
    "$WPACK" inspect --json "$1" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
for s in d["stats"]:
    if s["key"] == sys.argv[1] and s["kind"] == "activation":
        print(json.dumps(s, sort_keys=True))
' "$2"
}
# check NAME ARCHIVE KEY PYEXPR: PYEXPR over the record r (a dict) is true
check() {
    local j
    j=$(rec "$2" "$3")
    if [ -n "$j" ] && "$PY" -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if ($4) else 1)" "$j"; then
        pass "$1"
    else
        fail "$1" "record '$3': ${j:-none}"
    fi
}

bad() {
    expect_fail "bad_$1" "$2" "$WPACK" create -q -o "$T/b.wpack" "$T/w.npy" --stats-from "$T/$1"
    [ -e "$T/b.wpack" ] && fail "bad_$1_no_output" || pass "bad_$1_no_output"
}

# --- TensorRT: [-scale*127, scale*127], a range-only record (count 0)
expect trt_create "$WPACK" create -q -o "$T/trt.wpack" "$T/w.npy" --stats-from "$T/calib.cache"
check trt_fc "$T/trt.wpack" fc.weight_in 'r["min"] == -190.5 and r["max"] == 190.5 and r["count"] == 0'
check trt_input "$T/trt.wpack" input 'abs(r["absmax"] - 0.9921875) < 1e-12 and r["mean"] == 0 and r["variance"] == 0'
check trt_colon_name "$T/trt.wpack" 'relu/Relu:0' 'abs(r["max"] - 127 * 2.0e-3) < 1e-6'
expect trt_out "$WPACK" export -q "$T/trt.wpack" --to trt-calib -o "$T/out.cache"
cmp -s "$T/out.cache" "$T/calib.cache" && pass trt_round_trip || fail trt_round_trip "$(diff "$T/out.cache" "$T/calib.cache" | head -5)"

# --- ONNX Runtime: both JSON forms, min/max exact, mean the midpoint
for f in calibration calibration_td; do
    expect "ort_create_$f" "$WPACK" create -q -o "$T/$f.wpack" "$T/w.npy" --stats-from "$T/$f.json"
    check "ort_x_$f" "$T/$f.wpack" X 'r["min"] == -1.25 and r["max"] == 3.75 and r["mean"] == 1.25 and r["count"] == 0'
    check "ort_y_$f" "$T/$f.wpack" y 'r["min"] == 0.125 and r["max"] == 7.5'
    expect "ort_out_$f" "$WPACK" export -q "$T/$f.wpack" --to ort-calib-json -o "$T/out_$f.json"
    cmp -s "$T/out_$f.json" "$T/calibration.json" && pass "ort_round_trip_$f" \
        || fail "ort_round_trip_$f" "$(diff "$T/out_$f.json" "$T/calibration.json" | head -5)"
done
"$PY" -c "import json; d = json.load(open('$T/out_calibration.json')); assert d['conv/output_0'] == [-0.5, 0.25]" \
    && pass ort_out_is_json || fail ort_out_is_json

# --- imatrix: variance = mean of squares per input column, range +-RMS
expect imatrix_dat_create "$WPACK" create -q -o "$T/imd.wpack" "$T/w.npy" --stats-from "$T/imatrix.dat"
# sum2 [8, 32, 2, 0.5] over 8 rows: mean of squares [1, 4, 0.25, 0.0625]; pooled 1.328125
check imatrix_dat_q "$T/imd.wpack" blk.0.attn_q.weight 'r["variance"] == [1, 4, 0.25, 0.0625] and r["max"] == [1, 2, 0.5, 0.25] and r["min"] == [-1, -2, -0.5, -0.25] and r["mean"] == [0] * 4 and r["count"] == 2 and r["overall"]["variance"] == 1.328125'
check imatrix_dat_out "$T/imd.wpack" output.weight 'r["variance"] == [1, 4] and r["absmax"] == [1, 2]'
expect imatrix_gguf_create "$WPACK" create -q -o "$T/img.wpack" "$T/w.npy" --stats-from "$T/imatrix.gguf"
check imatrix_gguf_q "$T/img.wpack" blk.0.attn_q.weight 'r["variance"] == [1, 4, 0.25, 0.0625] and r["count"] == 8 and r["axis"] == 0'
# two experts: [4/4, 4/4] and [9/9, 36/9]: channels 4, pooled (1+1+1+4)/4, count 13
check imatrix_gguf_experts "$T/img.wpack" blk.0.ffn_up_exps.weight 'r["variance"] == [1, 1, 1, 4] and r["max"] == [1, 1, 1, 2] and r["count"] == 13'
"$WPACK" inspect "$T/img.wpack" | grep -q "blk.0.ffn_up_exps.weight .*per-channel (4)" \
    && pass imatrix_per_channel || fail imatrix_per_channel "$("$WPACK" inspect "$T/img.wpack" | tail -4)"

# an imatrix GGUF of 60,000 W.in_sum2 / W.counts pairs (6 MB): each pair's
# tensors were found by a scan of all (n^2: 72 s); by a hash set of names now
"$PY" - "$T/many.gguf" <<'PYEOF'
import struct, sys
def s(b): return struct.pack("<Q", len(b)) + b
n, tens, data = 60000, [], []
for i in range(n):
    for suf in (b".in_sum2", b".counts"):
        tens.append(s(b"t%07d" % i + suf) + struct.pack("<IQIQ", 1, 1, 0, 4 * len(data)))
        data.append(struct.pack("<f", 1.0))
out = b"GGUF" + struct.pack("<IQQ", 3, 2 * n, 2) + s(b"general.type") + struct.pack("<I", 8) + \
    s(b"imatrix") + s(b"general.alignment") + struct.pack("<II", 4, 4) + b"".join(tens)
open(sys.argv[1], "wb").write(out + b"\0" * (-len(out) % 4) + b"".join(data))
PYEOF
expect imatrix_many_pairs timeout 30 "$WPACK" create -q -o "$T/many_im.wpack" "$T/w.npy" --stats-from "$T/many.gguf"
check imatrix_many_last "$T/many_im.wpack" t0059999 'r["variance"] == 1'

# --- torch.ao observers in a torch 1.13 checkpoint: min_val/max_val exact
# (f32), HistogramObserver's bins over [min_val, max_val], per-channel as
# channels, an observer that never ran gives nothing, other tensors ignored
if "$PY" "$TOOL" torch "$T" 2>"$T/torch_err"; then
    pass torch_files
    expect torch_create "$WPACK" create -q -o "$T/obs.wpack" "$T/w.npy" --stats-from "$T/obs.pt"
    E="json.load(open('$T/obs.json'))"
    check torch_minmax "$T/obs.wpack" fc "r['min'] == $E['fc.activation_post_process.min_val'] and r['max'] == $E['fc.activation_post_process.max_val'] and r['count'] == 0"
    check torch_hist "$T/obs.wpack" relu "r['histogram']['counts'] == [int(c) for c in $E['relu.activation_post_process.histogram']] and len(r['histogram']['edges']) == 17 and r['count'] == sum(r['histogram']['counts']) and r['max'] == $E['relu.activation_post_process.max_val']"
    # a histogram record's mean and variance come from its bins (they were
    # the range-only placeholders, the midpoint and 0, though count > 0 says
    # they were observed): the bins' own moments over their midpoints, and,
    # as this histogram holds every value (seeded data), within a bin's
    # width of the data's. The data was unseeded and torch.histc can leave
    # out a top value, which made the second check fail one run in three
    check torch_hist_moments "$T/obs.wpack" relu "abs(r['mean'] - $E['relu_hist'][0]) <= 1e-12 + 1e-9 * abs(r['mean']) and abs(r['variance'] - $E['relu_hist'][1]) <= 1e-12 + 1e-9 * r['variance'] and r['variance'] > 0"
    check torch_hist_near_data "$T/obs.wpack" relu "$E['relu_hist'][2] == $E['relu_data'][2] and abs(r['mean'] - $E['relu_data'][0]) <= (r['max'] - r['min']) / 16 and abs(r['variance'] - $E['relu_data'][1]) <= (r['max'] - r['min']) ** 2 / 16"
    check torch_per_channel "$T/obs.wpack" conv "r['channels'] == 2 and r['min'] == $E['conv.activation_post_process.min_val'] and r['max'] == $E['conv.activation_post_process.max_val']"
    [ -z "$(rec "$T/obs.wpack" idle)" ] && pass torch_idle_skipped || fail torch_idle_skipped
    "$WPACK" inspect "$T/obs.wpack" | grep -q "activation_post_process" \
        && fail torch_no_observer_tensors || pass torch_no_observer_tensors
    bad plain.pt "plain.pt: torch checkpoint: a torch checkpoint with no torch.ao observer.*\[WPACK_E_STATS\]"
    # one tensor named by many observers (torch.save keeps it once, the
    # rest are aliases): converted and held once per name, and a record per
    # name: 40 names of two 2^18-value tensors took 160 MB and wrote 400 MB
    # of stats from a 1 MB file (600 names of 2^20: 5 GB, 80 s);
    # values held are bounded by the checkpoint's size. And an observer whose
    # min_val and max_val are one tensor was refused ("min_val but no max_val")
    "$PY" - "$T" <<'PYEOF' && pass torch_shared_files || fail torch_shared_files
import sys, torch
lo, hi = torch.zeros(1 << 18, dtype=torch.float16), torch.ones(1 << 18, dtype=torch.float16)
sd = {}
for i in range(40):
    sd[f"m{i}.activation_post_process.min_val"] = lo
    sd[f"m{i}.activation_post_process.max_val"] = hi
torch.save(sd, sys.argv[1] + "/obs_shared.pt")
c = torch.tensor([0.5])
torch.save({"a.activation_post_process.min_val": c, "a.activation_post_process.max_val": c,
            "b.activation_post_process.min_val": c, "b.activation_post_process.max_val": c},
           sys.argv[1] + "/obs_one.pt")
PYEOF
    bad obs_shared.pt "obs_shared.pt: torch checkpoint: .*would hold more than [0-9]+ values.*\[WPACK_E_LIMIT\]"
    # the same bound when the checkpoint is the input (one parse, observers first)
    expect_fail obs_shared_as_input "would hold more than [0-9]+ values.*\[WPACK_E_LIMIT\]" \
        "$WPACK" create -q -o "$T/shared_in.wpack" "$T/obs_shared.pt"
    expect torch_min_is_max "$WPACK" create -q -o "$T/one.wpack" "$T/w.npy" --stats-from "$T/obs_one.pt"
    check torch_min_is_max_a "$T/one.wpack" a "r['min'] == 0.5 and r['max'] == 0.5"
    check torch_min_is_max_b "$T/one.wpack" b "r['min'] == 0.5 and r['max'] == 0.5"
    # f64 observers over [-1e308, 1e308]: max - min is inf, so a per-channel
    # observer's mean and a histogram's edges were inf and the record refused
    # ("value not finite"); they take the midpoint rule of calib_ranges now
    "$PY" -c "
import torch
f = dict(dtype=torch.float64)
torch.save({'c.activation_post_process.min_val': torch.tensor([-1e308, 0.0], **f),
            'c.activation_post_process.max_val': torch.tensor([1e308, 1.0], **f),
            'h.activation_post_process.min_val': torch.tensor([-1e308], **f),
            'h.activation_post_process.max_val': torch.tensor([1e308], **f),
            'h.activation_post_process.histogram': torch.tensor([1.0, 2.0], **f)}, '$T/obs_wide.pt')
" && pass torch_wide_file || fail torch_wide_file
    expect torch_wide_range "$WPACK" create -q -o "$T/wide.wpack" "$T/w.npy" --stats-from "$T/obs_wide.pt"
    check torch_wide_channels "$T/wide.wpack" c "r['mean'] == [0.0, 0.5] and r['max'] == [1e308, 1.0]"
    check torch_wide_hist "$T/wide.wpack" h "r['histogram']['edges'] == [-1e308, 0.0, 1e308] and r['count'] == 3"
    # 65,536 observers (the most taken) of one-value ranges: each name was
    # looked up by a scan of the observers before it (35 s); by hash now
    "$PY" -c "
import torch
lo, hi = torch.tensor([0.0]), torch.tensor([1.0])
sd = {}
for i in range(65536):
    sd[f'm{i}.activation_post_process.min_val'] = lo
    sd[f'm{i}.activation_post_process.max_val'] = hi
torch.save(sd, '$T/obs_many.pt')" && pass torch_many_file || fail torch_many_file
    expect torch_many_observers timeout 20 "$WPACK" create -q -o "$T/many_obs.wpack" "$T/w.npy" --stats-from "$T/obs_many.pt"
    check torch_many_last "$T/many_obs.wpack" m65535 "r['min'] == 0 and r['max'] == 1"
else
    fail torch_files "$(tail -3 "$T/torch_err")"
fi

# --- update --stats-from: in place, next to what is there
expect update_create "$WPACK" create -q -o "$T/u.wpack" "$T/w.npy" --stats-from "$T/calib.cache"
expect update_from "$WPACK" update "$T/u.wpack" --stats-from "$T/imatrix.gguf" --stats-from "$T/calibration.json"
check update_kept "$T/u.wpack" fc.weight_in 'r["max"] == 190.5'
check update_added "$T/u.wpack" X 'r["max"] == 3.75'
check update_imatrix "$T/u.wpack" blk.0.attn_q.weight 'r["count"] == 8'
# 100,000 records in one file: each was compared with every record before it
# (130 s; create 1 s); the session finds a key by hash now
"$PY" -c "
with open('$T/many.cache', 'w') as f:
    f.write('TRT-8601-EntropyCalibration2\n' + ''.join(f't{i}: 3c010204\n' for i in range(100000)))"
expect update_many_create "$WPACK" create -q -o "$T/many.wpack" "$T/w.npy"
expect update_many_records timeout 30 "$WPACK" update "$T/many.wpack" --stats-from "$T/many.cache"
check update_many_last "$T/many.wpack" t99999 'r["max"] > 0'
# the wpack JSON schema still goes through --stats and --stats-from
printf '{"version": 1, "stats": [{"key": "m", "kind": "activation", "count": 5, "min": -1, "max": 1, "mean": 0}]}' >"$T/s.json"
expect wpack_json_stats_from "$WPACK" update "$T/u.wpack" --stats-from "$T/s.json"
check wpack_json_record "$T/u.wpack" m 'r["max"] == 1'
# a weight-only archive has no ranges to export
"$WPACK" create -q -o "$T/plain.wpack" "$T/w.npy"
expect_fail export_no_activation "no activation stats to export \[WPACK_E_NOT_FOUND\]" \
    "$WPACK" export -q "$T/plain.wpack" --to trt-calib -o "$T/none.cache"
[ -e "$T/none.cache" ] && fail export_no_output || pass export_no_output
expect_fail export_bad_to "trt-calib or ort-calib-json" "$WPACK" export "$T/plain.wpack" --to trt -o "$T/x"

# --- bad files: what, where, the code; no archive appears
bad bad_hex.cache "bad_hex.cache: TensorRT calibration cache: line 2: '3c01zz04' is not 8 hex digits \[WPACK_E_STATS\]"
bad bad_line.cache "TensorRT calibration cache: line 2: want '<tensor name>: <8 hex digits>' \[WPACK_E_STATS\]"
bad neg.cache "line 2: scale is negative or not finite \[WPACK_E_STATS\]"
# imatrix files of fuzz_calib's corpus that were taken before (a NUL cut the
# key; counts past 2^64 wrapped) and a message that miscounted by 8 bytes
for f in seed-gguf-nul-in-name.gguf seed-gguf-counts-past-2-64.gguf seed-dat-trailing-garbage.dat; do
    cp "$TESTS_DIR/../fuzz/corpus/fuzz_calib/$f" "$T/$f"
done
bad seed-gguf-nul-in-name.gguf "imatrix GGUF: tensor 0: a NUL byte in the name \[WPACK_E_STATS\]"
bad seed-gguf-counts-past-2-64.gguf "imatrix GGUF: 'blk.0.attn_q.weight': the counts of matrices 0..18 add up past 2\^64 \[WPACK_E_STATS\]"
bad seed-dat-trailing-garbage.dat "imatrix .dat: 29 bytes after the entries are not last_call \+ dataset name \[WPACK_E_STATS\]"
printf 'TRT-5101\nx: 3c010a14\n' >"$T/no_calibrator.cache" # no -<calibrator> after the version
bad no_calibrator.cache "TensorRT calibration cache: line 1: want TRT-<version>-<calibrator> \[WPACK_E_STATS\]"
# blank lines (and blanks) before the header: detection skipped them, then
# the parser refused the file it had been handed ("line 1: want TRT-...")
printf '\n \r\n\t\n  TRT-8601-EntropyCalibration2\nfc: 3c23d70a\n' >"$T/blank_first.cache"
expect trt_blank_lines_first "$WPACK" create -q -o "$T/bl.wpack" "$T/w.npy" --stats-from "$T/blank_first.cache"
check trt_blank_lines_first_record "$T/bl.wpack" fc 'abs(r["max"] - 1.27) < 1e-6 and r["count"] == 0'
printf '\n\nTRT-5101\nx: 3c010a14\n' >"$T/blank_no_calibrator.cache" # the file's own line number
bad blank_no_calibrator.cache "TensorRT calibration cache: line 3: want TRT-<version>-<calibrator> \[WPACK_E_STATS\]"
# a scale of -0 (bits 80000000) is the range [0, 0], not [+0, -0]
printf 'TRT-8601-EntropyCalibration2\nfc: 80000000\n' >"$T/negzero.cache"
expect negzero_create "$WPACK" create -q -o "$T/nz.wpack" "$T/w.npy" --stats-from "$T/negzero.cache"
expect negzero_export "$WPACK" export -q "$T/nz.wpack" --to ort-calib-json -o "$T/nz.json"
grep -q '"fc": \[0.0, 0.0\]' "$T/nz.json" && pass negzero_range || fail negzero_range "$(cat "$T/nz.json")"
# a key twice for the same kind in one file: refused at its line or entry
# (before: create failed at finish naming no file, update kept the last)
printf 'TRT-8601-EntropyCalibration2\nfc: 3c23d70a\nfc: 3ca3d70a\n' >"$T/dup.cache"
bad dup.cache "dup.cache: TensorRT calibration cache: line 3 'fc': a second record of the same stats in this file .*\[WPACK_E_STATS\]"
cp "$T/u.wpack" "$T/u_before.wpack"
expect_fail update_dup "line 3 'fc': a second record of the same stats" "$WPACK" update "$T/u.wpack" --stats-from "$T/dup.cache"
cmp -s "$T/u.wpack" "$T/u_before.wpack" && pass update_dup_unchanged || fail update_dup_unchanged
"$PY" - "$T/dup.dat" <<'PYEOF' # imatrix .dat: the entry 'w' twice
import struct, sys
e = struct.pack("<i", 1) + b"w" + struct.pack("<ii", 2, 2) + struct.pack("<2f", 2.0, 8.0)  # ncall, nval, values
open(sys.argv[1], "wb").write(struct.pack("<i", 2) + e + e + struct.pack("<i", 10) + struct.pack("<i", 4) + b"data")
PYEOF
bad dup.dat "imatrix .dat: 'w': a second record of the same stats in this file .*\[WPACK_E_STATS\]"
printf '{"fc": [-1.0, 2.0], "fc": [-3.0, 4.0]}' >"$T/dup_ort.json"
bad dup_ort.json "ONNX Runtime calibration table: JSON: duplicate object key near '\"fc\"'.*\[WPACK_E_STATS\]"
# a UTF-8 byte order mark before any kind of file is skipped (was "not calibration data")
printf '\xEF\xBB\xBFTRT-8601-EntropyCalibration2\nfc: 3c23d70a\n' >"$T/bom.cache"
printf '\xEF\xBB\xBF{"fc": [-1.0, 2.0]}' >"$T/bom_ort.json"
printf '\xEF\xBB\xBF{"version": 1, "stats": [{"key": "m", "kind": "activation", "count": 1, "min": -1.0, "max": 1.0, "mean": 0.0, "variance": 0.5}]}' >"$T/bom_wpack.json"
for f in bom.cache bom_ort.json bom_wpack.json; do
    expect "bom_${f%%.*}_${f##*.}" "$WPACK" create -q -o "$T/bom.wpack" "$T/w.npy" --stats-from "$T/$f"
done
check bom_record "$T/bom.wpack" m 'r["max"] == 1'
# Python's json.dump writes NaN: not JSON, and the message says so
printf '{"fc": [NaN, 1.0]}' >"$T/nan_ort.json"
bad nan_ort.json "invalid token near 'NaN'.*JSON has no NaN or Infinity.*\[WPACK_E_STATS\]"
bad bad_ort.json "ONNX Runtime calibration table: 'x': want \[min, max\].*\[WPACK_E_STATS\]"
bad inverted_ort.json "'x': range \[2, 1\] has min above max \[WPACK_E_STATS\]"
bad trunc.dat "imatrix .dat: entry 0: name length out of the file \[WPACK_E_STATS\]"
bad random.bin "random.bin: not calibration data: want .*\[WPACK_E_STATS\]"
bad model_not_imatrix.gguf "imatrix GGUF: a GGUF file without general.type = imatrix.*\[WPACK_E_STATS\]"
expect_fail update_bad "^wpack: [^ ]*/bad_hex.cache: TensorRT calibration cache: .*\[WPACK_E_STATS\]" \
    "$WPACK" update "$T/u.wpack" --stats-from "$T/bad_hex.cache"
# the path once, as create says it
[ "$(grep -o 'bad_hex.cache' "$T/err" | wc -l)" = 1 ] && pass update_bad_path_once ||
    fail update_bad_path_once "$(cat "$T/err")"
check update_bad_unchanged "$T/u.wpack" fc.weight_in 'r["max"] == 190.5'

# create takes --stats / --stats-from more than once: every file's records
# go in (the last one alone did, the others were dropped without a word); a
# key and kind given by two files is an error, not a silent choice
printf '{"version": 1, "stats": [{"key": "extra", "kind": "activation", "count": 2, "min": -1, "max": 3, "mean": 1}]}' \
    >"$T/extra.json"
expect create_two_stats "$WPACK" create -q -o "$T/two.wpack" "$T/w.npy" --stats "$T/extra.json" \
    --stats-from "$T/calib.cache"
check create_two_stats_first "$T/two.wpack" extra 'r["max"] == 3'
check create_two_stats_second "$T/two.wpack" fc.weight_in 'r["max"] == 190.5'
expect_fail create_same_stats_twice "activation stats 'extra' added twice \[WPACK_E_EXISTS\]" \
    "$WPACK" create -q -o "$T/two2.wpack" "$T/w.npy" --stats "$T/extra.json" --stats "$T/extra.json"
nothing_at create_same_stats_twice_nothing "$T/two2.wpack"

# --- a file that holds no entries is refused, naming the file (it added
# nothing and reported success: a TensorRT cache of only its header line)
printf 'TRT-8601-EntropyCalibration2\n' >"$T/header_only.cache"
bad header_only.cache "header_only.cache: TensorRT calibration cache: holds no entries, nothing to add \(a header line and no '<tensor name>: <hex>' line\) \[WPACK_E_STATS\]"
printf 'TRT-8601-EntropyCalibration2\r\n\r\n\n' >"$T/header_blank.cache"
bad header_blank.cache "header_blank.cache: TensorRT calibration cache: holds no entries.*\[WPACK_E_STATS\]"
cp "$T/u.wpack" "$T/u_before.wpack"
expect_fail update_header_only "header_only.cache: TensorRT calibration cache: holds no entries.*\[WPACK_E_STATS\]" \
    "$WPACK" update "$T/u.wpack" --stats-from "$T/header_only.cache"
cmp -s "$T/u.wpack" "$T/u_before.wpack" && pass update_header_only_unchanged || fail update_header_only_unchanged
printf '{"CLS": "TensorsData", "data": {}, "calibration_method": "MinMax"}' >"$T/ort_empty_td.json"
bad ort_empty_td.json "ort_empty_td.json: ONNX Runtime calibration table: holds no entries.*\[WPACK_E_STATS\]"
if "$PY" -c "
import torch
inf = float('inf')   # MinMaxObserver's start: an observer that never ran
torch.save({'fc.activation_post_process.min_val': torch.tensor(inf),
            'fc.activation_post_process.max_val': torch.tensor(-inf),
            'fc.weight': torch.ones(2, 2)}, '$T/obs_idle.pt')" 2>"$T/torch_err"; then
    bad obs_idle.pt "obs_idle.pt: torch checkpoint: holds no entries, nothing to add \(its torch.ao observers never ran.*\[WPACK_E_STATS\]"
else
    fail obs_idle_file "$(tail -2 "$T/torch_err")"
fi

# --- imatrix .dat: an entry with nval 0 is named, with what is wrong (it
# said "entry 1: ncall/nval missing, negative or past the file end")
"$PY" - "$T" <<'PYEOF'
import struct, sys
def ent(name, ncall, vals):
    return struct.pack("<i", len(name)) + name + struct.pack("<ii", ncall, len(vals)) + \
        struct.pack("<%df" % len(vals), *vals)
tail = struct.pack("<i", 10) + struct.pack("<i", 4) + b"data"
empty = struct.pack("<i", 19) + b"blk.0.attn_k.weight" + struct.pack("<ii", 2, 0)
open(sys.argv[1] + "/nval0.dat", "wb").write(struct.pack("<i", 2) + ent(b"blk.0.attn_q.weight", 2, [2.0, 8.0]) + empty + tail)
open(sys.argv[1] + "/ncall_neg.dat", "wb").write(struct.pack("<i", 1) + ent(b"w", -1, [2.0]) + tail)
open(sys.argv[1] + "/ncall0_nan.dat", "wb").write(struct.pack("<i", 1) + ent(b"w", 0, [2.0, float("nan")]) + tail)
open(sys.argv[1] + "/ncall0_neg.dat", "wb").write(struct.pack("<i", 1) + ent(b"w", 0, [-3.0]) + tail)
open(sys.argv[1] + "/nval_past.dat", "wb").write(struct.pack("<i", 1) + struct.pack("<i", 1) + b"w" + struct.pack("<ii", 2, 9) + b"\0" * 8)
PYEOF
bad nval0.dat "nval0.dat: imatrix .dat: entry 1 'blk.0.attn_k.weight': nval is 0: no values \(one per input column\) \[WPACK_E_STATS\]"
bad ncall_neg.dat "ncall_neg.dat: imatrix .dat: entry 0 'w': ncall -1 is negative \[WPACK_E_STATS\]"
# ncall 0 (no rows): the values are still checked (NaN and negative sums
# were stored as a range of 0)
bad ncall0_nan.dat "ncall0_nan.dat: imatrix .dat: 'w': column 1: sum of squares nan is negative or not finite \[WPACK_E_STATS\]"
bad ncall0_neg.dat "ncall0_neg.dat: imatrix .dat: 'w': column 0: sum of squares -3 is negative or not finite \[WPACK_E_STATS\]"
bad nval_past.dat "nval_past.dat: imatrix .dat: entry 0 'w': 9 values \(nval\) run past the file end \[WPACK_E_STATS\]"

# --- a scale of 0: 00000000 comes back byte for byte; -0 (80000000, a
# writer's sign bit of a zero) reads as 0 and comes back as 00000000, the
# normalisation spec A.1 names; a record whose stored range is -0 (wpack
# JSON) exports 00000000 too, never 80000000
printf 'TRT-8601-EntropyCalibration2\nfc: 00000000\nrelu: 3c010204\n' >"$T/zero.cache"
printf 'TRT-8601-EntropyCalibration2\nfc: 80000000\nrelu: 3c010204\n' >"$T/negzero2.cache"
for f in zero negzero2; do
    expect "zero_scale_${f}_in" "$WPACK" create -q -o "$T/$f.wpack" "$T/w.npy" --stats-from "$T/$f.cache"
    expect "zero_scale_${f}_out" "$WPACK" export -q "$T/$f.wpack" --to trt-calib -o "$T/${f}_out.cache"
    cmp -s "$T/${f}_out.cache" "$T/zero.cache" && pass "zero_scale_${f}_round_trip" ||
        fail "zero_scale_${f}_round_trip" "$(cat "$T/${f}_out.cache")"
done
check zero_scale_range "$T/negzero2.wpack" fc 'r["min"] == 0 and r["max"] == 0 and r["count"] == 0'
printf '{"version": 1, "stats": [{"key": "fc", "kind": "activation", "count": 1, "min": -0.0, "max": -0.0, "absmax": -0.0, "mean": -0.0}]}' >"$T/negzero.json"
expect zero_scale_json_in "$WPACK" create -q -o "$T/nzj.wpack" "$T/w.npy" --stats "$T/negzero.json"
expect zero_scale_json_out "$WPACK" export -q "$T/nzj.wpack" --to trt-calib -o "$T/nzj.cache"
[ "$(tail -1 "$T/nzj.cache")" = "fc: 00000000" ] && pass zero_scale_json_positive || fail zero_scale_json_positive "$(cat "$T/nzj.cache")"

finish
