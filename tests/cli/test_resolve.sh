#!/bin/bash
# test_resolve.sh - `wpack resolve` on the fixtures of tests/mlir, every
# output parsed by the real mlir-opt-19 and checked by what it printed
# (tests/mlir/check_printed.py): the right entry on each global, the
# archive's bytes in inline blobs. Then the error cases.
. "$(dirname "$0")/lib.sh"
FIX="$TESTS_DIR/mlir"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}

# Weights made by numpy; the archive records torch-mlir / IREE names in its name map.
"$PY" - "$T" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
r = np.random.default_rng(0)
np.save(f"{d}/0.weight.npy", r.standard_normal((4, 3)).astype(np.float32))
np.save(f"{d}/0.bias.npy", r.standard_normal(4).astype(np.float32))
np.save(f"{d}/fc2.weight.npy", r.standard_normal((2, 4)).astype(np.float32))
np.save(f"{d}/fc2.bias.npy", r.standard_normal(2).astype(np.float32))
np.save(f"{d}/codes.npy", np.array([5, 250], dtype=np.uint8))
np.save(f"{d}/flags.npy", np.array([True, False, True]))
np.save(f"{d}/half.npy", r.standard_normal((3, 2)).astype(np.float16))
np.save(f"{d}/weird name+1.npy", np.arange(6, dtype=np.int32))
PYEOF
A="$T/m.wpack"
expect create_archive "$WPACK" create -q -o "$A" "$T"/0.weight.npy "$T"/0.bias.npy "$T"/fc2.weight.npy \
    "$T"/fc2.bias.npy "$T"/codes.npy "$T"/flags.npy "$T"/half.npy "$T/weird name+1.npy" \
    --name _param_constant0=0.weight --name _param_constant1=0.bias \
    --name fc1.weight=0.weight --name fc1.bias=0.bias

cat >"$T/torch_extern.json" <<'J'
{"_param_constant0": "0.weight", "_param_constant1": "0.bias", "fc2.weight": "fc2.weight", "fc2.bias": "fc2.bias"}
J
cat >"$T/generic_alias.json" <<'J'
{"_param_constant0": "0.weight", "codes": "codes", "fc2.bias": "fc2.bias", "flags": "flags"}
J
cat >"$T/util_generic.json" <<'J'
{"fc1.weight": "0.weight", "fc1.bias": "0.bias"}
J

# resolve_and_check FIXTURE MODE [extra resolve args]
resolve_and_check() {
    local f=$1 mode=$2 flags=""
    shift 2
    [ "$mode" = iree ] && flags=--allow-unregistered-dialect
    local out="$T/${f}_$mode.mlir"
    if ! "$WPACK" resolve -q "$A" "$FIX/$f.mlir" -o "$out" --emit "$mode" "$@" 2>"$T/err"; then
        fail "${f}_$mode" "resolve failed: $(head -c 300 "$T/err")"; return
    fi
    if ! "$MLIR_OPT" $flags "$out" >"$T/printed.mlir" 2>"$T/err"; then
        fail "${f}_$mode" "mlir-opt rejected the output: $(head -c 300 "$T/err")"; return
    fi
    if ! "$PY" "$FIX/check_printed.py" "$mode" "$T/printed.mlir" "$T/$f.json" "$T" ${SCOPE:-model} >"$T/err" 2>&1; then
        fail "${f}_$mode" "$(head -c 400 "$T/err")"; return
    fi
    # idempotent: its own output resolves to the same bytes
    if ! "$WPACK" resolve -q "$A" "$out" -o "$out.again" --emit "$mode" "$@" 2>"$T/err" ||
        ! cmp -s "$out" "$out.again"; then
        fail "${f}_$mode" "resolving the output again changed it"; return
    fi
    pass "${f}_$mode"
}

for f in torch_extern generic_alias util_generic; do
    for mode in uri iree inline; do
        [ "$f" = util_generic ] && [ "$mode" != iree ] && continue
        resolve_and_check "$f" "$mode"
    done
done

# Everything outside the edits is copied byte for byte: undo the edit and compare.
"$WPACK" resolve -q "$A" "$FIX/torch_extern.mlir" -o "$T/u.mlir" 2>/dev/null
if sed -E 's/ \{wpack\.uri = "[^"]*"\}//; s/wpack\.uri = "[^"]*", //' "$T/u.mlir" | cmp -s - "$FIX/torch_extern.mlir"; then
    pass copy_through
else
    fail copy_through "bytes other than the wpack.uri attribute changed"
fi

# The URI names the archive by the XXH3 of its index (what inspect --json reports).
idx=$(grep -o 'wpack:[0-9a-f]*' "$T/u.mlir" | head -1 | cut -d: -f2)
if "$WPACK" inspect --json "$A" 2>/dev/null | "$PY" -c "
import json,sys; j=json.load(sys.stdin)
def find(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == 'index_checksum': yield v
            yield from find(v)
    elif isinstance(o, list):
        for v in o: yield from find(v)
vals = [str(v).lower().replace('0x','') for v in find(j)]
sys.exit(0 if any(v.zfill(16) == '$idx' or (v.isdigit() and '%016x' % int(v) == '$idx') for v in vals) else 1)"; then
    pass uri_index_checksum
else
    fail uri_index_checksum "URI archive id $idx is not the archive's index checksum"
fi

# --scope
SCOPE=weights resolve_and_check util_generic iree --scope weights

# percent-encoding of an entry name with a space and '+'
printf 'module {\n  ml_program.global private @w(#ml_program.extern : tensor<6xi32>) : tensor<6xi32>\n}\n' >"$T/w.mlir"
printf '{"w": "weird name+1"}' >"$T/w.json"
expect map_json "$WPACK" resolve -q "$A" "$T/w.mlir" -o "$T/w.out.mlir" --map "$T/w.json"
grep -q 'wpack.uri = "wpack:[0-9a-f]\{16\}/weird%20name%2B1"' "$T/w.out.mlir" && pass uri_percent_encoding ||
    fail uri_percent_encoding "$(grep global "$T/w.out.mlir")"
"$MLIR_OPT" "$T/w.out.mlir" >"$T/printed.mlir" 2>/dev/null &&
    "$PY" "$FIX/check_printed.py" uri "$T/printed.mlir" "$T/w.json" "$T" >/dev/null &&
    pass map_json_printed || fail map_json_printed "mlir-opt/printed check failed"
"$WPACK" resolve -q "$A" "$T/w.mlir" -o "$T/w.in.mlir" --emit inline --map "$T/w.json" &&
    "$MLIR_OPT" "$T/w.in.mlir" >"$T/printed.mlir" 2>/dev/null &&
    "$PY" "$FIX/check_printed.py" inline "$T/printed.mlir" "$T/w.json" "$T" >/dev/null &&
    pass inline_sanitized_key || fail inline_sanitized_key "$(grep -A1 builtin "$T/w.in.mlir" | head -c 300)"

# f16 and a quoted symbol with escapes
printf 'module {\n  ml_program.global private @"h\\22\\5Cx"(#ml_program.extern : tensor<3x2xf16>) : tensor<3x2xf16>\n}\n' >"$T/h.mlir"
printf '{"h\\"\\\\x": "half"}' >"$T/h.json"
expect quoted_symbol_map "$WPACK" resolve -q "$A" "$T/h.mlir" -o "$T/h.out.mlir" --emit inline --map "$T/h.json"
"$MLIR_OPT" "$T/h.out.mlir" >"$T/printed.mlir" 2>"$T/err" &&
    "$PY" "$FIX/check_printed.py" inline "$T/printed.mlir" "$T/h.json" "$T" >"$T/err" 2>&1 &&
    pass quoted_symbol_printed || fail quoted_symbol_printed "$(head -c 300 "$T/err")"

# ---------------------------------------------------------------- errors
m() { printf "$1" >"$T/e.mlir"; }
m 'module {\n  ml_program.global private @fc2.wieght(#ml_program.extern : tensor<2x4xf32>) : tensor<2x4xf32>\n}\n'
expect_fail unresolved_suggests "e.mlir:2:3: global @fc2.wieght: no archive entry.*closest entries: 'fc2.weight'" \
    "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
[ -e "$T/e.out" ] && fail nothing_written_on_error "output exists" || pass nothing_written_on_error
# suggestions cost work linear in the archive: 50 missing 250-byte names
# against 8,000 entries of 250 random bytes (no two close, so no distance
# stops early) took minutes of edit-distance rows (7 for 20,000 entries)
$PY - "$T" <<'PYEOF'
import json, random, struct, sys
t = sys.argv[1]
def nm(i):
    r = random.Random(i)
    return "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(250))
h = json.dumps({nm(i): {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(8000)}).encode()
open(f"{t}/far.safetensors", "wb").write(struct.pack("<Q", len(h)) + h)
with open(f"{t}/far.mlir", "w") as f:
    f.write("module {\n")
    for j in range(50):
        f.write(f"  ml_program.global private @{nm(10**7 + j)}(#ml_program.extern : tensor<0xf32>) : tensor<0xf32>\n")
    f.write("}\n")
PYEOF
"$WPACK" create -q -o "$T/far.wpack" "$T/far.safetensors" || fail far_names_made
expect_fail suggestions_bounded "far.mlir:51:3: global @.*: no archive entry" \
    cpu_limit 30 "$WPACK" resolve "$T/far.wpack" "$T/far.mlir" -o "$T/far.out.mlir"
rm -f "$T/far.safetensors" "$T/far.wpack"
expect allow_missing "$WPACK" resolve -q --allow-missing "$A" "$T/e.mlir" -o "$T/e.out"
cmp -s "$T/e.mlir" "$T/e.out" && grep -q "left unresolved" "$T/err" && pass allow_missing_untouched ||
    fail allow_missing_untouched "output differs or no warning"

m 'module {\n  ml_program.global private @fc2.bias(#ml_program.extern : tensor<3xf32>) : tensor<3xf32>\n}\n'
expect_fail dim_mismatch "global @fc2.bias: type tensor<3xf32> does not match entry 'fc2.bias' \(f32 \[2\].*tensor<2xf32>\): dims differ" \
    "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf16>) : tensor<2xf16>\n}\n'
expect_fail dtype_mismatch "tensor<2xf16> does not match entry 'fc2.bias'.*element types differ" \
    "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @codes(#ml_program.extern : tensor<2xsi8>) : tensor<2xsi8>\n}\n'
expect_fail si8_is_not_u8 "tensor<2xsi8> does not match entry 'codes' \(u8" "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @codes(#ml_program.extern : tensor<2xui8>) : tensor<2xui8>\n}\n'
expect ui8_is_u8 "$WPACK" resolve -q "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @flags(#ml_program.extern : tensor<3xi8>) : tensor<3xi8>\n}\n'
expect_fail i8_is_not_bool "element types differ" "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @fc2.bias(#ml_program.extern : tensor<?xf32>) : tensor<?xf32>\n}\n'
expect_fail dynamic_dims "global @fc2.bias: type tensor<\?xf32>: dynamic dimension" "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @fc2.bias(#ml_program.extern : tensor<3xf32>) : tensor<2xf32>\n}\n'
expect_fail extern_type_disagrees "its #ml_program.extern says tensor<3xf32> but the global's type is tensor<2xf32>" \
    "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n  ml_program.global private @"fc2.bias"(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n}\n'
expect_fail duplicate_symbol "3:3: global @fc2.bias: symbol defined twice \(first at 2:3\)" "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
printf '{"a": "codes", "b": "codes"}' >"$T/ab.json"
m 'module {\n  ml_program.global private @a(#ml_program.extern : tensor<2xi8>) : tensor<2xi8>\n  ml_program.global private @b(#ml_program.extern : tensor<2xui8>) : tensor<2xui8>\n}\n'
expect_fail shared_entry_types "global @b: shares entry 'codes' with the global at 2:3 but their types differ" \
    "$WPACK" resolve --map "$T/ab.json" "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @a(#ml_program.extern : tensor<2xi8>) : tensor<2xi8>\n  ml_program.global private @b(#ml_program.extern : tensor<2xi8>) : tensor<2xi8>\n}\n'
expect shared_entry_same_type "$WPACK" resolve -q --emit inline --map "$T/ab.json" "$A" "$T/e.mlir" -o "$T/e.out"
[ "$(grep -c '"0x' "$T/e.out")" = 1 ] && "$MLIR_OPT" "$T/e.out" >/dev/null 2>&1 && pass shared_entry_one_blob ||
    fail shared_entry_one_blob "expected one blob"
m 'module {\n  ml_program.global private mutable @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n}\n'
expect mutable_ok "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
grep -q "warning: .*global @fc2.bias: is mutable" "$T/err" && pass mutable_warns || fail mutable_warns "$(cat "$T/err")"
grep -q "entries not used by any global: '0.bias', '0.weight', 'codes'" "$T/err" && pass unused_listed ||
    fail unused_listed "$(cat "$T/err")"
# a NUL in a quoted symbol, a parameter key or a URI (written \00) names no
# entry: as C strings they were cut at the NUL and bound to entry 'codes'
m 'module {\n  ml_program.global private @"codes\\00evil"(#ml_program.extern : tensor<2xui8>) : tensor<2xui8>\n}\n'
expect_fail nul_in_symbol "e.mlir:2:3: global @codes\\\\x00evil: no archive entry" "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  "ml_program.global"() <{sym_name = "c", type = tensor<2xui8>, value = #flow.parameter.named<"model"::"codes\\00x"> : tensor<2xui8>}> : () -> ()\n}\n'
expect_fail nul_in_param_key "global @c: the key of its #flow.parameter.named value holds a NUL byte" \
    "$WPACK" resolve --emit iree "$A" "$T/e.mlir" -o "$T/e.out"
m 'module {\n  ml_program.global private @c(#ml_program.extern : tensor<2xui8>) : tensor<2xui8> {wpack.uri = "wpack:0000000000000000/codes\\00x"}\n}\n'
expect_fail nul_in_uri "global @c: its wpack.uri is not a wpack: URI" "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
# a symbol is unique in its module: the same @fc2.bias in two nested modules
# is two globals (both resolve, to the one entry; mlir-opt-19 takes it); it
# was "symbol defined twice". Twice in one module still is an error.
m 'module {\n  module @a {\n    ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n  }\n  module @b {\n    ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n  }\n}\n'
expect nested_modules_same_symbol "$WPACK" resolve -q --emit inline "$A" "$T/e.mlir" -o "$T/e.out"
[ "$(grep -c 'dense_resource<fc2.bias>' "$T/e.out" 2>/dev/null)" = 2 ] && "$MLIR_OPT" "$T/e.out" >/dev/null 2>&1 &&
    pass nested_modules_resolved || fail nested_modules_resolved "$(grep global "$T/e.out" 2>/dev/null)"
m 'module {\n  module @a {\n    ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n    ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n  }\n  ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n}\n'
expect_fail nested_module_duplicate "e.mlir:4:5: global @fc2.bias: symbol defined twice \(first at 3:5\)" \
    "$WPACK" resolve "$A" "$T/e.mlir" -o "$T/e.out"
printf '{"w": "no.such"}' >"$T/bad.json"
m 'module {\n  ml_program.global private @w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>\n}\n'
expect_fail map_target_missing "--map sends it to 'no.such', which is not in the archive" \
    "$WPACK" resolve --map "$T/bad.json" "$A" "$T/e.mlir" -o "$T/e.out"
printf '{"w": 3}' >"$T/bad.json"
expect_fail map_not_string "is not a string" "$WPACK" resolve --map "$T/bad.json" "$A" "$T/e.mlir" -o "$T/e.out"
printf '{"w": ' >"$T/bad.json"
expect_fail map_bad_json "bad.json:1:" "$WPACK" resolve --map "$T/bad.json" "$A" "$T/e.mlir" -o "$T/e.out"
expect_fail iree_bad_scope "scope 'a\"b'" "$WPACK" resolve --emit iree --scope 'a"b' "$A" "$T/e.mlir" -o "$T/e.out"
expect_fail bad_emit "--emit must be" "$WPACK" resolve --emit foo "$A" "$T/e.mlir" -o "$T/e.out"
"$WPACK" resolve >/dev/null 2>&1; [ $? = 2 ] && pass usage_exit_2 || fail usage_exit_2
"$WPACK" resolve --help | grep -q "usage: wpack resolve" && pass help || fail help

# malformed MLIR: clear errors with line and column (tests/mlir/malformed.txt)
while IFS='|' read -r name pat text; do
    case "$name" in '#'* | '') continue ;; esac
    printf '%b' "$text" >"$T/bad.mlir"
    expect_fail "malformed_$name" "bad.mlir:$pat" "$WPACK" resolve "$A" "$T/bad.mlir" -o "$T/e.out"
done <"$FIX/malformed.txt"

finish
