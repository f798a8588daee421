#!/bin/bash
# test_cli.sh - the wpack command as a user runs it: help, errors, create,
# inspect, verify, extract, on real .npy files made by numpy.
. "$(dirname "$0")/lib.sh"

# --- help, version, usage errors
expect help_top "$WPACK" --help
grep -q "create" "$T/out" && pass help_lists_commands || fail help_lists_commands
for c in create inspect verify extract; do
    expect "help_$c" "$WPACK" "$c" --help
    grep -q "usage: wpack $c" "$T/out" && pass "help_${c}_usage" || fail "help_${c}_usage"
    expect "help_cmd_$c" "$WPACK" help "$c"
done
expect version "$WPACK" --version
grep -Eq '^wpack [0-9]+\.[0-9]+\.[0-9]+ \(library .*, format 1\.[0-9]+\)' "$T/out" && pass version_text || fail version_text "$(cat "$T/out")"
"$WPACK" >/dev/null 2>&1; [ $? -eq 2 ] && pass no_args_exit_2 || fail no_args_exit_2
"$WPACK" frobnicate >/dev/null 2>"$T/err"; [ $? -eq 2 ] && grep -q "unknown command 'frobnicate'" "$T/err" && pass unknown_cmd || fail unknown_cmd
"$WPACK" create x.npy >/dev/null 2>"$T/err"; [ $? -eq 2 ] && grep -q -- "-o OUT is required" "$T/err" && pass create_needs_o || fail create_needs_o
"$WPACK" create -o "$T/x.wpack" --align 100 x.npy >/dev/null 2>"$T/err"; [ $? -eq 2 ] && pass bad_align_usage || fail bad_align_usage
"$WPACK" inspect --bogus a >/dev/null 2>&1; [ $? -eq 2 ] && pass inspect_bad_option || fail inspect_bad_option

# --- inputs made by numpy
mkdir -p "$T/m/encoder/layers/0" "$T/m/encoder/layers/01" "$T/other"
$PY - "$T" <<'PYEOF'
import numpy as np, sys
t = sys.argv[1]
rng = np.random.default_rng(1)
np.save(f"{t}/m/encoder/layers/0/w.npy", rng.standard_normal((8, 4)).astype(np.float32))
np.save(f"{t}/m/encoder/layers/0/b.npy", rng.standard_normal(8).astype(np.float32))
np.save(f"{t}/m/encoder/layers/01/w.npy", rng.standard_normal((2, 2)).astype(np.float64))
np.save(f"{t}/m/head.weight.npy", rng.standard_normal((3, 8)).astype(np.float16))
np.save(f"{t}/other/w.npy", np.arange(6, dtype=np.int32))
np.save(f"{t}/objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
open(f"{t}/m/README.txt", "w").write("not a tensor\n")
PYEOF

expect create_dir "$WPACK" create -q -o "$T/m.wpack" "$T/m"
grep -q "skipping .*README.txt: not a .npy file" "$T/err" && pass create_warns_on_other_files || fail create_warns_on_other_files "$(cat "$T/err")"
expect inspect_table "$WPACK" inspect "$T/m.wpack"
for n in encoder.layers.0.w encoder.layers.0.b encoder.layers.01.w head.weight; do
    grep -q "^$n " "$T/out" && pass "inspect_lists_$n" || fail "inspect_lists_$n"
done
grep -q "wpack format 1.0, alignment 4096" "$T/out" && pass inspect_header || fail inspect_header

# module prefix: encoder.layers.0 is not encoder.layers.01
expect inspect_prefix "$WPACK" inspect "$T/m.wpack" encoder.layers.0
n=$(grep -c '^encoder\.' "$T/out")
[ "$n" -eq 2 ] && pass prefix_is_a_module_path || fail prefix_is_a_module_path "got $n lines"
expect_fail inspect_missing_prefix "no tensor named or under 'nope'" "$WPACK" inspect "$T/m.wpack" nope

# --json parses and carries offsets and stats
"$WPACK" inspect --json "$T/m.wpack" >"$T/m.json" 2>"$T/err" && pass inspect_json || fail inspect_json
$PY - "$T/m.json" <<'PYEOF' && pass json_content || fail json_content
import json, sys
d = json.load(open(sys.argv[1]))
names = [t["name"] for t in d["tensors"]]
assert names == sorted(names, key=lambda s: s.encode()), names
w = [t for t in d["tensors"] if t["name"] == "encoder.layers.0.w"][0]
assert w["dtype"] == "f32" and w["shape"] == [8, 4] and w["nbytes"] == 128
assert w["offset"] % 4096 == 0 and w["stored_length"] == 128
assert w["stats"]["kind"] == "weight" and w["stats"]["min"] <= w["stats"]["max"]
assert d["metadata"]["wpack.producer"].startswith("wpack ")
assert d["format"] == "1.0" and d["alignment"] == 4096
PYEOF

# --- verify: OK, then a flipped data byte is named
expect verify_ok "$WPACK" verify "$T/m.wpack"
grep -q "OK: 4 tensors" "$T/out" && pass verify_ok_text || fail verify_ok_text "$(cat "$T/out")"
cp "$T/m.wpack" "$T/bad.wpack"
off=$($PY -c "import json;d=json.load(open('$T/m.json'));print([t for t in d['tensors'] if t['name']=='head.weight'][0]['offset']+5)")
printf '\x55' | dd of="$T/bad.wpack" bs=1 seek="$off" conv=notrunc 2>/dev/null
expect_fail verify_names_bad_entry "tensor 'head.weight': checksum mismatch" "$WPACK" verify "$T/bad.wpack"
grep -q "FAILED: 1 problem" "$T/err" && pass verify_counts || fail verify_counts "$(cat "$T/err")"
# a flipped index byte fails at open with the index checksum
idx=$($PY -c "import json;d=json.load(open('$T/m.json'));print(d['index_offset']+300)")
cp "$T/m.wpack" "$T/badidx.wpack"
printf '\x01' | dd of="$T/badidx.wpack" bs=1 seek="$idx" conv=notrunc 2>/dev/null
expect_fail verify_index_checksum "index checksum mismatch" "$WPACK" verify "$T/badidx.wpack"
head -c 5000 "$T/m.wpack" >"$T/trunc.wpack"
expect_fail verify_truncated "WPACK_E_TRUNCATED" "$WPACK" verify "$T/trunc.wpack"
echo "hello" >"$T/text.wpack"
expect_fail not_an_archive "not a wpack archive" "$WPACK" inspect "$T/text.wpack"
expect_fail missing_file "No such file" "$WPACK" verify "$T/none.wpack"

# --- extract: everything, one name, a module, bit-identical through numpy
expect extract_all "$WPACK" extract -q "$T/m.wpack" -o "$T/x/all"
$PY - "$T" <<'PYEOF' && pass extract_bit_identical || fail extract_bit_identical
import numpy as np, sys
t = sys.argv[1]
pairs = {"encoder.layers.0.w": "m/encoder/layers/0/w.npy", "encoder.layers.0.b": "m/encoder/layers/0/b.npy",
         "encoder.layers.01.w": "m/encoder/layers/01/w.npy", "head.weight": "m/head.weight.npy"}
for name, src in pairs.items():
    a = np.load(f"{t}/x/all/{name}.npy"); b = np.load(f"{t}/{src}")
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
PYEOF
expect extract_module "$WPACK" extract -q "$T/m.wpack" -o "$T/x/mod" encoder.layers.0
[ "$(ls "$T/x/mod" | wc -l)" -eq 2 ] && pass extract_module_count || fail extract_module_count "$(ls "$T/x/mod")"
expect_fail extract_missing "no tensor named or under 'zzz'" "$WPACK" extract -q "$T/m.wpack" -o "$T/x/none" zzz
# extract then create gives the same tensors back
expect recreate "$WPACK" create -q -o "$T/again.wpack" "$T/x/all"
"$WPACK" inspect --json "$T/again.wpack" >"$T/again.json"
$PY - "$T/m.json" "$T/again.json" <<'PYEOF' && pass roundtrip_same_checksums || fail roundtrip_same_checksums
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
key = lambda d: sorted((t["name"], t["dtype"], t["shape"], t["checksum"]) for t in d["tensors"])
assert key(a) == key(b), (key(a), key(b))
PYEOF

# --- create: errors leave no file and keep an existing one
expect_fail object_array_rejected "object" "$WPACK" create -q -o "$T/obj.wpack" "$T/objects.npy"
[ ! -e "$T/obj.wpack" ] && pass object_no_output || fail object_no_output
cp "$T/m.wpack" "$T/keep.wpack"
expect_fail duplicate_names "tensor 'w' is already taken" "$WPACK" create -q -o "$T/keep.wpack" "$T/other/w.npy" "$T/other"
cmp -s "$T/m.wpack" "$T/keep.wpack" && pass failed_create_keeps_old_file || fail failed_create_keeps_old_file
ls "$T" | grep -q 'tmp-' && fail no_temp_files_left "$(ls "$T")" || pass no_temp_files_left
head -c 100 "$T/m/encoder/layers/0/w.npy" >"$T/short.npy"
expect_fail truncated_npy "short.npy" "$WPACK" create -q -o "$T/short.wpack" "$T/short.npy"
expect_fail missing_input "nothere.npy" "$WPACK" create -q -o "$T/n.wpack" "$T/nothere.npy"

# --- options: alignment, histogram, metadata, name map
expect create_options "$WPACK" create -q -o "$T/o.wpack" --align 64 --histogram 8 \
    --meta model.name=tiny --name p_head_weight=head.weight "$T/m"
"$WPACK" inspect --json "$T/o.wpack" >"$T/o.json"
$PY - "$T/o.json" <<'PYEOF' && pass options_applied || fail options_applied
import json, sys
d = json.load(open(sys.argv[1]))
assert d["alignment"] == 64
assert d["metadata"]["model.name"] == "tiny"
assert d["name_map"] == {"p_head_weight": "head.weight"}
h = [t for t in d["tensors"] if t["name"] == "head.weight"][0]["stats"]["histogram"]
assert len(h["counts"]) == 8 and sum(h["counts"]) == 24 and len(h["edges"]) == 9
assert all(t["offset"] % 64 == 0 for t in d["tensors"])
PYEOF
expect extract_by_map_name "$WPACK" extract -q "$T/o.wpack" -o "$T/x/map" p_head_weight
[ -f "$T/x/map/head.weight.npy" ] && pass map_name_extracts_entry || fail map_name_extracts_entry
expect_fail bad_name_map "no tensor 'nothing'" "$WPACK" create -q -o "$T/nm.wpack" --name a=nothing "$T/m"
expect_fail bad_meta "KEY=VALUE" "$WPACK" create -q -o "$T/nm.wpack" --meta novalue "$T/m"

# --- bools other than 0/1 (a .npy written by hand: numpy itself only makes
# 0 and 1): create refuses them and leaves an existing OUT as it was
"$PY" - "$T/bools" <<'PYEOF'
import numpy as np, os, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
np.save(f"{d}/mask.npy", np.array([True, False, True, True]))
raw = bytearray(open(f"{d}/mask.npy", "rb").read())
raw[-2] = 7
open(f"{d}/bad.npy", "wb").write(bytes(raw))
PYEOF
expect bool_npy_packs "$WPACK" create -q -o "$T/bools.wpack" "$T/bools/mask.npy"
cp "$T/bools.wpack" "$T/bools.before"
expect_fail bool_npy_byte_7 "tensor 'bad': bool byte 2 .* is 7; bools are 0 or 1" \
    "$WPACK" create -q -o "$T/bools.wpack" "$T/bools/bad.npy"
cmp -s "$T/bools.wpack" "$T/bools.before" && pass bool_refusal_keeps_out || fail bool_refusal_keeps_out

# --- a failure at finish (a shard list, whole only once every key is in)
# names the output it was writing, as every other failure does; a reserved
# key of the wrong form is refused as it is set, naming the option
expect_fail finish_error_names_output "^wpack: $T/rsv\.wpack: sharded set: metadata 'wpack\.shards'" \
    "$WPACK" create -q -o "$T/rsv.wpack" --meta wpack.shards=x "$T/bools/mask.npy"
nothing_at finish_error_writes_nothing "$T/rsv.wpack"
expect_fail reserved_meta_refused_as_set "^wpack: --meta wpack\.manifest=\.\./x: metadata 'wpack\.manifest' '\.\./x': a '/'" \
    "$WPACK" create -q -o "$T/rsv.wpack" --meta wpack.manifest=../x "$T/bools/mask.npy"
nothing_at reserved_meta_writes_nothing "$T/rsv.wpack"

# --- progress: shown on a terminal, not in a pipe
# (create counts its input files: "1/1 tensors" for a checkpoint of 200 was wrong)
if command -v script >/dev/null; then
    script -qec "$WPACK create -o $T/tty.wpack $T/m" /dev/null >"$T/tty.out" 2>&1
    nfiles=$(find "$T/m" -type f -name "*.npy" | wc -l)
    tr '\r' '\n' <"$T/tty.out" | grep -Eq "100%  .* / .*  $nfiles/$nfiles files  " && pass progress_on_tty ||
        fail progress_on_tty "$(cat -v "$T/tty.out" | head -5)"
else
    fail progress_on_tty "no 'script' (util-linux) to give a pty: cannot check"
fi
"$WPACK" create -o "$T/pipe.wpack" "$T/m" 2>"$T/pipe.err"
grep -q "%" "$T/pipe.err" && fail no_progress_in_pipe "$(cat "$T/pipe.err")" || pass no_progress_in_pipe

finish
