#!/bin/bash
# test_inspect2.sh - `wpack inspect` says what the archive holds (issue 13
# point 6) and nothing reaches the terminal as a control sequence (issue 14
# point 8); a metadata fan-out opens fast (issue 14 point 4).
#   per-channel stats: the overall range, marked per-channel (N); --json has
#     the overall values (checked against numpy over the raw values)
#   NaN/Inf: "K of N finite"; activation records "n K finite"
#   PREFIX filters tensors, activation stats, metadata and the name map, in
#     text and --json; "layers.1" does not select "layers.10"
#   NAME column sized to the names; a name over 80 columns on its own line
#   natural display order (layers.2 before layers.10), JSON in index order
#   ESC / BEL / C1 / invalid UTF-8 escaped in names, keys, values, paths and
#     error messages (ours and the library's, escaped once); --json exact
#   tests/hostile/round2/inspect_*: expected results below
. "$(dirname "$0")/lib.sh"
H="$TESTS_DIR/hostile/round2"
ESC=$'\033'

# --- an archive made by numpy files, a stats JSON and --meta/--name
mkdir -p "$T/m"
$PY - "$T" <<'PYEOF'
import json, sys
import numpy as np
t = sys.argv[1]
np.save(f"{t}/m/layers.1.w.npy", np.array([1, np.nan, np.inf, 2, -np.inf], dtype=np.float32))
np.save(f"{t}/m/layers.2.w.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
w10 = np.array([[-5, 1, 2], [3, 4, 9]], dtype=np.float64)
np.save(f"{t}/m/layers.10.w.npy", w10.astype(np.float32))
np.save(f"{t}/m/" + "encoder.block." * 6 + "attention.output.dense.weight.npy", np.ones(3, np.float32))
np.save(f"{t}/m/" + "mid." * 14 + "w.npy", np.ones(2, np.float32))  # 60 columns
np.save(f"{t}/m/x\u009b2J.npy", np.ones(2, np.float32))            # C1 CSI in a name
recs = [
    {"key": "layers.10.w", "kind": "weight", "granularity": "channel", "axis": 0, "count": 6,
     "min": list(w10.min(1)), "max": list(w10.max(1)), "mean": list(w10.mean(1)),
     "variance": list(w10.var(1))},
    {"key": "layers.2", "kind": "activation", "count": 10, "min": -1, "max": 1, "mean": 0},
    {"key": "layers.10", "kind": "activation", "count": 10, "min": -2, "max": 2, "mean": 0},
    {"key": "head\u0085", "kind": "activation", "granularity": "channel", "axis": 1, "count": 4,
     "min": [-1, -7], "max": [1, 3], "mean": [0, 0]},
]
json.dump({"version": 1, "stats": recs}, open(f"{t}/stats.json", "w"))
# the overall values of layers.10.w, by numpy over the raw values
json.dump({"mean": w10.mean(), "variance": w10.var(), "std": w10.std()}, open(f"{t}/w10.json", "w"))
PYEOF
TITLE="x${ESC}]0;pwned"$'\a'"y${ESC}[2J"$'\xc2\x9b'"31m"$'\xe2\x80\xae'"z"
expect create "$WPACK" create -q -o "$T/a.wpack" --stats "$T/stats.json" --meta "title=$TITLE" \
    --meta "layers.2.note=two" --meta $'k\xc2\x9d=v' --name p_l2=layers.2.w --name $'p\xc2\x9b=layers.10.w' "$T/m"

# --- per-channel: overall range, marked; overall values in --json
expect inspect_text "$WPACK" inspect "$T/a.wpack"
cp "$T/out" "$T/all.txt"
grep -Eq '^layers\.10\.w +f32 .*min -5 max 9 .*per-channel \(2\)' "$T/all.txt" &&
    pass per_channel_overall_range || fail per_channel_overall_range "$(grep '^layers.10.w' "$T/all.txt")"
grep -q '^layers\.10\.w .*max 2 ' "$T/all.txt" && fail per_channel_not_channel0 || pass per_channel_not_channel0
std=$($PY -c "import json,sys; print('%.4g' % json.load(open(sys.argv[1]))['std'])" "$T/w10.json")
grep -Eq "^layers\\.10\\.w .*std $std per-channel" "$T/all.txt" && pass per_channel_pooled_std ||
    fail per_channel_pooled_std "want std $std: $(grep '^layers.10.w' "$T/all.txt")"
"$WPACK" inspect --json "$T/a.wpack" >"$T/a.json" 2>"$T/err" && pass inspect_json || fail inspect_json "$(cat "$T/err")"
$PY - "$T/a.json" "$T/w10.json" <<'PYEOF' && pass json_overall_values || fail json_overall_values
import json, sys
d = json.load(open(sys.argv[1])); ref = json.load(open(sys.argv[2]))
t = [t for t in d["tensors"] if t["name"] == "layers.10.w"][0]["stats"]
o = t["overall"]
assert t["granularity"] == "channel" and t["min"] == [-5, 3] and t["max"] == [2, 9], t
assert o["min"] == -5 and o["max"] == 9 and o["absmax"] == 9, o
assert abs(o["mean"] - ref["mean"]) < 1e-12 and abs(o["variance"] - ref["variance"]) < 1e-9, (o, ref)
PYEOF

# --- NaN / Inf counts
grep -Eq '^layers\.1\.w .*min 1 max 2 .*, 2 of 5 finite' "$T/all.txt" && pass finite_count_text ||
    fail finite_count_text "$(grep '^layers.1.w' "$T/all.txt")"
grep -q '^layers\.2\.w .*finite' "$T/all.txt" && fail all_finite_says_nothing || pass all_finite_says_nothing
grep -Eq '^  layers\.2 +min -1 max 1 .*, n 10 finite' "$T/all.txt" && pass activation_finite_count ||
    fail activation_finite_count "$(grep -A5 'activation stats' "$T/all.txt")"
$PY - "$T/a.json" <<'PYEOF' && pass finite_count_json || fail finite_count_json
import json, sys
d = json.load(open(sys.argv[1]))
s = [t for t in d["tensors"] if t["name"] == "layers.1.w"][0]["stats"]
assert s["count"] == 2 and s["elements"] == 5 and s["nonfinite"] == 3, s
a = [s for s in d["stats"] if s["key"] == "layers.2"][0]
assert a["count"] == 10 and "elements" not in a, a
PYEOF

# --- natural order for display, bytewise in JSON
$PY - "$T/all.txt" "$T/a.json" <<'PYEOF' && pass natural_order || fail natural_order
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
rows = [l.split()[0] for l in lines if l.startswith("layers.")]
assert rows == ["layers.1.w", "layers.2.w", "layers.10.w"], rows
act = [l.split()[0] for l in lines[lines.index("activation stats:"):] if l.startswith("  layers.")]
assert act == ["layers.2", "layers.10"], act
d = json.load(open(sys.argv[2]))
names = [t["name"] for t in d["tensors"]]
assert names == sorted(names, key=lambda s: s.encode()), names
PYEOF

# --- NAME column sized to the names; a name over 80 columns on its own line
$PY - "$T/all.txt" <<'PYEOF' && pass columns_aligned || fail columns_aligned "$(sed -n 4,14p "$T/all.txt")"
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
head = [l for l in lines if l.startswith("NAME ")][0]
col = head.index("DTYPE")
mid = "mid." * 14 + "w"
assert col == len(mid) + 1, (col, len(mid))        # as wide as the widest name up to 80
table = lines[lines.index(head) + 1:]
table = table[:table.index("")]
long = "encoder.block." * 6 + "attention.output.dense.weight"
for i, l in enumerate(table):
    if l == long:                                  # own line, its columns on the next
        assert table[i + 1][:col] == " " * col and table[i + 1][col:col + 4] == "f32 ", table[i + 1]
        continue
    if l.startswith(" "):
        continue
    assert l[col:col + 4] == "f32 " and l[col - 1] == " ", l
PYEOF

# --- PREFIX filters every section (text)
expect prefix_text "$WPACK" inspect "$T/a.wpack" layers.2
$PY - "$T/out" <<'PYEOF' && pass prefix_filters_text || fail prefix_filters_text "$(cat "$T/out")"
import sys
out = open(sys.argv[1], encoding="utf-8").read()
assert "\nlayers.2.w " in out and "layers.10.w" not in out and "layers.1.w" not in out
assert "  layers.2.note = two" in out and "title" not in out and "wpack.producer" not in out
assert "  p_l2 -> layers.2.w" in out and "p\\u009b" not in out
assert "  layers.2 " in out and "layers.10" not in out and "head" not in out
PYEOF
expect prefix_not_sibling "$WPACK" inspect "$T/a.wpack" layers.1
grep -q 'layers\.10' "$T/out" && fail prefix_module_boundary "$(cat "$T/out")" || pass prefix_module_boundary
expect prefix_only_activation "$WPACK" inspect "$T/a.wpack" $'head\xc2\x85'
grep -q '(no tensor named or under' "$T/out" && grep -q '^  head\\u0085 .*per-channel (2)' "$T/out" &&
    pass prefix_activation_only_shown || fail prefix_activation_only_shown "$(cat "$T/out")"
grep -Eq '^  head\\u0085 +min -7 max 3 absmax 7' "$T/out" && pass activation_overall_range ||
    fail activation_overall_range "$(cat "$T/out")"
expect prefix_namemap_name "$WPACK" inspect "$T/a.wpack" p_l2
grep -q '^layers\.2\.w ' "$T/out" && grep -q '  p_l2 -> layers.2.w' "$T/out" && pass prefix_namemap_row ||
    fail prefix_namemap_row "$(cat "$T/out")"
expect_fail prefix_nothing "no tensor named or under 'nope' .*\[WPACK_E_NOT_FOUND\]" "$WPACK" inspect "$T/a.wpack" nope

# --- PREFIX filters every section (JSON)
"$WPACK" inspect --json "$T/a.wpack" layers.2 >"$T/p.json" 2>"$T/err"
$PY - "$T/p.json" <<'PYEOF' && pass prefix_filters_json || fail prefix_filters_json "$(cat "$T/p.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert [t["name"] for t in d["tensors"]] == ["layers.2.w"], d["tensors"]
assert d["metadata"] == {"layers.2.note": "two"}, d["metadata"]
assert d["name_map"] == {"p_l2": "layers.2.w"}, d["name_map"]
assert sorted((s["key"], s["kind"]) for s in d["stats"]) == [("layers.2", "activation"), ("layers.2.w", "weight")], d["stats"]
PYEOF

# --- escapes in text output: no raw ESC, BEL or C1 anywhere
raw_controls() { # FILE: exit 0 if it holds ESC, BEL, DEL or a C1 code point
    $PY -c "
import re, sys
b = open(sys.argv[1], 'rb').read()
sys.exit(0 if re.search(rb'[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]', b) else 1)" "$1"
}
raw_controls "$T/all.txt" && fail text_has_no_controls "$(grep -a title "$T/all.txt" | od -c | head -3)" || pass text_has_no_controls
grep -qF 'title = x\x1b]0;pwned\x07y\x1b[2J\u009b31m\u202ez' "$T/all.txt" && pass meta_value_escaped ||
    fail meta_value_escaped "$(grep -a title "$T/all.txt")"
grep -q '^x\\u009b2J ' "$T/all.txt" && pass name_c1_escaped || fail name_c1_escaped
grep -qF '  k\u009d = v' "$T/all.txt" && pass meta_key_c1_escaped || fail meta_key_c1_escaped
grep -qF '  p\u009b -> layers.10.w' "$T/all.txt" && pass namemap_c1_escaped || fail namemap_c1_escaped
grep -qF '  head\u0085 ' "$T/all.txt" && pass stats_key_c1_escaped || fail stats_key_c1_escaped

# --- --json stays exact (C1, bidirectional and other controls as JSON
# escapes; a raw U+202E in a name reordered a terminal's view of the JSON)
raw_controls "$T/a.json" && fail json_has_no_controls || pass json_has_no_controls
grep -qF '"title": "x\u001b]0;pwned\u0007y\u001b[2J\u009b31m\u202ez"' "$T/a.json" && pass json_escapes ||
    fail json_escapes "$(grep title "$T/a.json")"
$PY - "$T/a.json" "$TITLE" <<'PYEOF' && pass json_exact || fail json_exact
import json, sys, os
d = json.load(open(sys.argv[1]))
title = os.fsencode(sys.argv[2]).decode("utf-8")
assert d["metadata"]["title"] == title, (d["metadata"]["title"], title)
assert "x\u009b2J" in [t["name"] for t in d["tensors"]]
assert d["name_map"]["p\u009b"] == "layers.10.w" and d["metadata"]["k\u009d"] == "v"
assert "head\u0085" in [s["key"] for s in d["stats"]]
PYEOF

# --- error messages are escaped: ours, the library's, warnings
expect_fail err_prefix_escaped "no tensor named or under '\\\\x1b\[2J\\\\u009b\\\\xff'" \
    "$WPACK" inspect "$T/a.wpack" "${ESC}[2J"$'\xc2\x9b\xff'
raw_controls "$T/err" && fail err_prefix_no_controls || pass err_prefix_no_controls
expect_fail err_library_path_escaped 'nope\\x1b\]0;t\\x07\.wpack' "$WPACK" inspect "$T/nope${ESC}]0;t"$'\a'".wpack"
raw_controls "$T/err" && fail err_library_no_controls "$(od -c "$T/err" | head)" || pass err_library_no_controls
expect_fail err_extract_escaped "no tensor named or under 'q\\\\u009b'" "$WPACK" extract -q "$T/a.wpack" -o "$T/x" $'q\xc2\x9b'
mkdir -p "$T/w"
$PY -c "import numpy as np, sys; np.save(sys.argv[1] + '/ok.npy', np.ones(2, np.float32))" "$T/w"
echo hi >"$T/w/evil${ESC}[2J.txt"
expect warn_create "$WPACK" create -q -o "$T/w.wpack" "$T/w"
grep -q 'evil\\x1b\[2J\.txt' "$T/err" && ! raw_controls "$T/err" && pass warning_escaped ||
    fail warning_escaped "$(od -c "$T/err" | head -5)"
cp "$T/a.wpack" "$T/v${ESC}[2J.wpack"
expect verify_ok "$WPACK" verify "$T/v${ESC}[2J.wpack"
grep -q 'v\\x1b\[2J\.wpack: OK' "$T/out" && ! raw_controls "$T/out" && pass verify_line_escaped ||
    fail verify_line_escaped "$(od -c "$T/out" | head -5)"
printf 'module {\n  ml_program.global private @"e\\1B[2J\\C2\\9B"(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n}\n' >"$T/d.mlir"
expect_fail resolve_diag_escaped 'global @e\\x1b\[2J\\u009b: no archive entry' "$WPACK" resolve "$T/a.wpack" "$T/d.mlir" -o "$T/d.out"
grep -qF "'x\\u009b2J'" "$T/err" && ! raw_controls "$T/err" && pass resolve_diag_no_controls ||
    fail resolve_diag_no_controls "$(od -c "$T/err" | head -5)"

# --- paths and input names holding ESC, LF and CR: the library's messages
# escape them (the CLI's pass changes nothing: a backslash stays one, \x1b
# is never \\x1b), and so do the CLI's own "wrote" / "exported" lines
BAD="${ESC}[31m"$'\n\r'
SHOWN='\\x1b\[31m\\x0a\\x0d'
$PY - "$T" <<'PYEOF'
import io, json, struct, sys, tarfile
t, bad = sys.argv[1], "\x1b[31m\n\r"
open(t + "/corrupt" + bad + ".wpack", "wb").write(b"junk" * 40)
with tarfile.open(t + "/m.tar", "w") as tf:
    data = b"not an npy file"
    ti = tarfile.TarInfo("w" + bad + ".npy")
    ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data))
hdr = json.dumps({"k\\q" + bad: {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode()
open(t + "/s.safetensors", "wb").write(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 4)
PYEOF
escaped_once() { # NAME: $T/err holds no raw control and no escaped escape
    if ! raw_controls "$T/err" && ! grep -qF '\\x' "$T/err"; then pass "$1"; else fail "$1" "$(od -c "$T/err" | head -5)"; fi
}
expect_fail err_corrupt_path_escaped "corrupt${SHOWN}\.wpack: not a wpack archive" "$WPACK" inspect "$T/corrupt${BAD}.wpack"
escaped_once err_corrupt_path_once
expect_fail err_missing_path_escaped "nope${SHOWN}\.wpack: " "$WPACK" verify "$T/nope${BAD}.wpack"
escaped_once err_missing_path_once
expect_fail err_tar_member_escaped "m\.tar: member 'w${SHOWN}\.npy': not an npy file" "$WPACK" create -q -o "$T/o.wpack" "$T/m.tar"
escaped_once err_tar_member_once
expect_fail err_st_key_escaped "tensor 'k\\\\q${SHOWN}'" "$WPACK" create -q -o "$T/o.wpack" "$T/s.safetensors"
escaped_once err_st_key_once
expect convert_ok "$WPACK" convert "$T/a.wpack" --compress zstd -o "$T/c${BAD}.wpack"
grep -q "^wrote .*/c${SHOWN}\.wpack: " "$T/err" && ! raw_controls "$T/err" && pass convert_wrote_escaped ||
    fail convert_wrote_escaped "$(od -c "$T/err" | head -5)"
expect cast_ok "$WPACK" cast "$T/a.wpack" --to bf16 -o "$T/k${BAD}.wpack"
grep -q "^wrote .*/k${SHOWN}\.wpack: " "$T/err" && ! raw_controls "$T/err" && pass cast_wrote_escaped ||
    fail cast_wrote_escaped "$(od -c "$T/err" | head -5)"
expect export_ok "$WPACK" export "$T/a.wpack" --to npz -o "$T/x${BAD}.npz"
grep -q "^exported .* to .*/x${SHOWN}\.npz as npz" "$T/err" && ! raw_controls "$T/err" &&
    pass export_line_escaped || fail export_line_escaped "$(od -c "$T/err" | head -5)"
cp "$T/a.wpack" "$T/u${BAD}.wpack"
expect update_ok "$WPACK" update "$T/u${BAD}.wpack" --meta k2=v
grep -q "/u${SHOWN}\.wpack: generation 2: " "$T/out" && ! raw_controls "$T/out" && pass update_line_escaped ||
    fail update_line_escaped "$(od -c "$T/out" | head -5)"

# --- tests/hostile/round2/inspect_escape.wpack: names and values holding
# ESC/C1 sequences (title change, screen clear); opens, prints none raw
expect hostile_escape_text "$WPACK" inspect "$H/inspect_escape.wpack"
raw_controls "$T/out" && fail hostile_escape_no_controls || pass hostile_escape_no_controls
grep -qF '\x1b]0;' "$T/out" && grep -qF '\u009b' "$T/out" && pass hostile_escape_shown || fail hostile_escape_shown "$(cat "$T/out")"
expect hostile_escape_json "$WPACK" inspect --json "$H/inspect_escape.wpack"
$PY -c "import json,sys; json.load(open(sys.argv[1]))" "$T/out" && ! raw_controls "$T/out" &&
    pass hostile_escape_json_clean || fail hostile_escape_json_clean

# --- tests/hostile/round2/inspect_meta_fanout.wpack.gz: 65,536 references
# to one 2 MiB string (128 GiB of UTF-8 checks before the fix, ~1 minute):
# opens in well under a second; --json refuses 128 GiB of output
gunzip -c "$H/inspect_meta_fanout.wpack.gz" >"$T/fan.wpack"
TIMEFORMAT=%U
cpu=$( { time timeout 10 "$WPACK" inspect "$T/fan.wpack" >"$T/out" 2>"$T/err"; } 2>&1 ); rc=$?
[ $rc -eq 0 ] && pass fanout_opens || fail fanout_opens "rc $rc $(head -c 300 "$T/err")"
$PY -c "import sys; sys.exit(0 if float(sys.argv[1]) < 2.0 else 1)" "$cpu" && pass fanout_cpu_bounded ||
    fail fanout_cpu_bounded "user CPU ${cpu}s"
grep -q '^  fanout = \[a*\.\.\. (2097152 bytes), .*\.\.\. 65520 more\]' "$T/out" && pass fanout_text_cut ||
    fail fanout_text_cut "$(grep -a fanout "$T/out" | head -c 300)"
expect fanout_verify timeout 10 "$WPACK" verify "$T/fan.wpack"
expect_fail fanout_json_capped 'would print over 128.0 GiB of JSON.*--max-output.*\[WPACK_E_TOO_LARGE\]' \
    timeout 10 "$WPACK" inspect --json "$T/fan.wpack"
expect_fail max_output_bad "--max-output 'lots' is not a size" "$WPACK" inspect --max-output lots "$T/a.wpack"

# --- bidirectional controls reorder the rest of a terminal line (CVE-2021-42574):
# shown escaped in names, name-map names and metadata, never raw
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros(2, np.float32))" "$T/bidi.npy"
"$WPACK" create -q -o "$T/bidi.wpack" "$T/bidi.npy" --name $'evil\u202egnp.exe=bidi' \
    --meta $'k=x\u2066y\u200fz\u061c'
"$WPACK" inspect "$T/bidi.wpack" >"$T/out" 2>&1
if grep -q 'evil\\u202egnp.exe -> bidi' "$T/out" && grep -q 'x\\u2066y\\u200fz\\u061c' "$T/out" &&
    ! grep -q $'\u202e\|\u2066\|\u200f\|\u061c' "$T/out"; then
    pass bidi_controls_escaped
else
    fail bidi_controls_escaped "$(cat -A "$T/out" | head -20)"
fi

# --- help says it
expect help "$WPACK" inspect --help
grep -q 'per-channel (N)' "$T/out" && grep -q 'finite' "$T/out" && grep -q 'natural order' "$T/out" &&
    grep -q 'escaped' "$T/out" && grep -q 'max-output' "$T/out" && pass help_text || fail help_text
finish
