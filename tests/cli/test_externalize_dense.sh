#!/bin/bash
# test_externalize_dense.sh - `wpack externalize` moves inline dense<...>
# constants out of ops: arith.constant (checked by mlir-opt-19),
# stablehlo.constant and mhlo.constant (torch_xla's and JAX's weights; the
# pretty forms read back by wpack itself, the generic ones by mlir-opt-19
# with --allow-unregistered-dialect too). Every entry's bytes are compared
# with numpy's reading of the literal's text (extern_dense_cases.py), for
# f32, bf16, f16, i8, i1 and i64, element lists and hex; splats (fills a
# compiler folds, short text whatever their size) stay in their ops.
. "$(dirname "$0")/lib.sh"
need_mlir_opt
CASES="$TESTS_DIR/cli/extern_dense_cases.py"

# check_entries NAME OUT.mlir EXPECT ARCHIVE ENTRIES: every op of EXPECT
# loads an entry holding numpy's bytes; ENTRIES distinct entries in all
check_entries() {
    local name=$1 out=$2 exp=$3 ar=$4 want=$5 d="$T/x.$1"
    rm -rf "$d" && mkdir -p "$d"
    if ! "$WPACK" extract "$ar" -o "$d" >/dev/null 2>"$T/err"; then
        fail "${name}_extract" "$(head -c 300 "$T/err")"
        return
    fi
    "$PY" "$CASES" check "$out" "$exp" "$d" >"$T/chk" 2>&1
    while read -r word rest; do
        case $word in
        ok) pass "${name}_$rest" ;;
        FAIL) fail "${name}_${rest%%: *}" "${rest#*: }" ;;
        entries) [ "$rest" = "$want" ] && pass "${name}_entries" || fail "${name}_entries" "$rest, want $want" ;;
        *) fail "${name}_check" "$word $rest" ;;
        esac
    done <"$T/chk"
    [ "$(grep -c '^ok' "$T/chk")" -eq 19 ] && pass "${name}_all_checked" || fail "${name}_all_checked" "$(head -c 300 "$T/chk")"
}

"$PY" "$CASES" make "$T" || fail make_cases
n_cases=19 # 18 literals and one equal to the first (one entry for both)
n_moved=13 # all but the 6 splats
n_entries=12

# --- arith.constant: mlir-opt-19 takes the input and the output (the
# hoisted global's type against the load's), in both modes
"$MLIR_OPT" "$T/arith.mlir" >/dev/null 2>"$T/err" && pass arith_input_parses ||
    fail arith_input_parses "$(head -c 300 "$T/err")"
expect arith_uri "$WPACK" externalize "$T/arith.mlir" -o "$T/arith.out" --archive "$T/arith.wpack" --min-bytes 16
grep -q "moved $n_moved of $n_cases inline globals" "$T/err" && pass arith_summary || fail arith_summary "$(cat "$T/err")"
"$MLIR_OPT" "$T/arith.out" >/dev/null 2>"$T/err" && pass arith_output_verifies ||
    fail arith_output_verifies "$(head -c 300 "$T/err")"
check_entries arith "$T/arith.out" "$T/arith.expect" "$T/arith.wpack" $n_entries
grep -q '^    %c1 = ml_program.global_load_const @dense_literal_[0-9a-f]\{16\} : tensor<16xf32> {tag = "a"}$' "$T/arith.out" &&
    grep -q '^    %c5 = "ml_program.global_load_const"() <{global = @dense_literal_[0-9a-f]\{16\}}> {tag} : () -> tensor<3x8xbf16>$' "$T/arith.out" &&
    grep -q '^    %c2 = "arith.constant"() <{value = dense<' "$T/arith.out" &&
    pass arith_forms || fail arith_forms "$(grep -E '%c[125] =' "$T/arith.out")"
[ "$(grep -c '^  ml_program.global private @dense_literal_[0-9a-f]\{16\}(#ml_program.extern : tensor<[0-9x]*x[a-z0-9]*>) : tensor<[0-9a-z]*> {wpack.uri = "wpack:[0-9a-f]*/dense_literal_[0-9a-f]*"}$' "$T/arith.out")" = $n_entries ] &&
    pass arith_globals || fail arith_globals "$(head -5 "$T/arith.out")"
expect arith_again "$WPACK" externalize "$T/arith.out" -o "$T/arith.out2" --archive "$T/arith2.wpack" --min-bytes 16
grep -q "moved 0 of 6 inline globals" "$T/err" && cmp -s "$T/arith.out" "$T/arith.out2" &&
    pass arith_again_unchanged || fail arith_again_unchanged "$(cat "$T/err")"
expect arith_rerun "$WPACK" externalize -q "$T/arith.mlir" -o "$T/arith.out3" --archive "$T/arith3.wpack" --min-bytes 16
cmp -s "$T/arith.out" "$T/arith.out3" && cmp -s "$T/arith.wpack" "$T/arith3.wpack" && pass arith_stable ||
    fail arith_stable
expect arith_iree "$WPACK" externalize -q "$T/arith.mlir" -o "$T/arith.iree" --archive "$T/arithi.wpack" --min-bytes 16 --emit iree --scope p
grep -q '^  ml_program.global private @\(dense_literal_[0-9a-f]\{16\}\)(#flow.parameter.named<"p"::"\1"> : tensor<16xf32>) : tensor<16xf32>$' "$T/arith.iree" &&
    "$MLIR_OPT" --allow-unregistered-dialect "$T/arith.iree" >/dev/null 2>"$T/err" && pass arith_iree_form ||
    fail arith_iree_form "$(head -c 300 "$T/err"; head -3 "$T/arith.iree")"
check_entries arith_iree "$T/arith.iree" "$T/arith.expect" "$T/arithi.wpack" $n_entries
expect arith_iree_again "$WPACK" externalize -q "$T/arith.iree" -o "$T/arith.iree2" --archive "$T/arithi2.wpack" --min-bytes 16 --emit iree --scope p
cmp -s "$T/arith.iree" "$T/arith.iree2" && pass arith_iree_again_unchanged || fail arith_iree_again_unchanged
# smaller than --min-bytes: stays, byte for byte
expect arith_min_bytes "$WPACK" externalize "$T/arith.mlir" -o "$T/arith.big" --archive "$T/arithb.wpack" --min-bytes 90
grep -q "moved 2 of $n_cases inline globals (192 B)" "$T/err" && grep -q 'dense<\[\[true' "$T/arith.big" &&
    [ "$(grep -c 'arith.constant' "$T/arith.big")" = 17 ] &&
    pass arith_min_bytes_kept || fail arith_min_bytes_kept "$(cat "$T/err")"

# --- stablehlo.constant and mhlo.constant: pretty (read back by wpack:
# mlir-opt-19 has no stablehlo) and generic (mlir-opt-19 too)
expect hlo_uri "$WPACK" externalize "$T/hlo.mlir" -o "$T/hlo.out" --archive "$T/hlo.wpack" --min-bytes 16
grep -q "moved $n_moved of $n_cases inline globals" "$T/err" && pass hlo_summary || fail hlo_summary "$(cat "$T/err")"
check_entries hlo "$T/hlo.out" "$T/hlo.expect" "$T/hlo.wpack" $n_entries
grep -q '^    %c1 = ml_program.global_load_const @dense_literal_[0-9a-f]\{16\} : tensor<16xf32> {mhlo.sharding = "{replicated}"}$' "$T/hlo.out" &&
    grep -q '^    %c9 = "ml_program.global_load_const"() {global = @dense_literal_[0-9a-f]\{16\}, tag} : () -> tensor<4x9xi8>$' "$T/hlo.out" &&
    grep -q '^    %c4 = ml_program.global_load_const @dense_literal_[0-9a-f]\{16\} : tensor<4x8xbf16>$' "$T/hlo.out" &&
    [ "$(grep -c 'hlo.constant' "$T/hlo.out")" = 6 ] && pass hlo_forms || fail hlo_forms "$(grep -E '%c[149] =' "$T/hlo.out")"
expect hlo_again "$WPACK" externalize "$T/hlo.out" -o "$T/hlo.out2" --archive "$T/hlo2.wpack" --min-bytes 16
grep -q "moved 0 of 6 inline globals" "$T/err" && cmp -s "$T/hlo.out" "$T/hlo.out2" &&
    pass hlo_again_unchanged || fail hlo_again_unchanged "$(cat "$T/err")"
# resolve reads the output back: every load's global names an entry of the archive
expect hlo_resolves "$WPACK" resolve "$T/hlo.wpack" "$T/hlo.out" -o "$T/hlo.res"
grep -q "resolved $n_entries of $n_entries weight globals" "$T/err" && pass hlo_resolves_all || fail hlo_resolves_all "$(cat "$T/err")"
expect hlo_iree "$WPACK" externalize -q "$T/hlo.mlir" -o "$T/hlo.iree" --archive "$T/hloi.wpack" --min-bytes 16 --emit iree
check_entries hlo_iree "$T/hlo.iree" "$T/hlo.expect" "$T/hloi.wpack" $n_entries
"$MLIR_OPT" --allow-unregistered-dialect "$T/hlo_generic.mlir" >/dev/null 2>"$T/err" && pass hlo_generic_input_parses ||
    fail hlo_generic_input_parses "$(head -c 300 "$T/err")"
for mode in uri iree; do
    expect "hlo_generic_$mode" "$WPACK" externalize -q "$T/hlo_generic.mlir" -o "$T/hg.$mode" --archive "$T/hg.$mode.wpack" --min-bytes 16 --emit $mode
    "$MLIR_OPT" --allow-unregistered-dialect "$T/hg.$mode" >/dev/null 2>"$T/err" && pass "hlo_generic_${mode}_parses" ||
        fail "hlo_generic_${mode}_parses" "$(head -c 300 "$T/err")"
    check_entries "hlo_generic_$mode" "$T/hg.$mode" "$T/hlo_generic.expect" "$T/hg.$mode.wpack" $n_entries
done

# one text in two modules (two symbol tables): one entry, a global in each
printf 'module {\n  module @a {\n    func.func @f() -> tensor<4xf32> {\n      %%0 = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n      return %%0 : tensor<4xf32>\n    }\n  }\n  module @b {\n    func.func @g() -> tensor<4xf32> {\n      %%0 = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n      return %%0 : tensor<4xf32>\n    }\n  }\n}\n' >"$T/two.mlir"
expect two_modules "$WPACK" externalize "$T/two.mlir" -o "$T/two.out" --archive "$T/two.wpack" --min-bytes 16
[ "$(grep -c '^    ml_program.global private @dense_literal_83f6ba69f4c7f868(#ml_program.extern' "$T/two.out")" = 2 ] &&
    [ "$("$WPACK" inspect "$T/two.wpack" | grep -c '^dense_literal_83f6ba69f4c7f868 ')" = 1 ] &&
    "$MLIR_OPT" "$T/two.out" >/dev/null 2>"$T/err" && pass two_modules_one_entry ||
    fail two_modules_one_entry "$(head -c 300 "$T/err"; cat "$T/two.out")"

# --- hostile input: each an error naming FILE:LINE:COL (never a signal),
# nothing written; a huge shape is bounded by --max-output before anything
# is decoded, a splat of it is one element
hostile() { # NAME PATTERN OP [ARGS...]
    local name=$1 pat=$2 op=$3; shift 3
    printf 'module {\n  func.func @main() {\n    %%0 = %s\n    return\n  }\n}\n' "$op" >"$T/h.mlir"
    rm -f "$T/h.out" "$T/h.wpack"
    expect_fail "$name" "$pat" "$WPACK" externalize "$T/h.mlir" -o "$T/h.out" --archive "$T/h.wpack" --min-bytes 16 "$@"
    nothing_at "${name}_nothing_written" "$T/h.out" "$T/h.wpack"
}
hostile bad_comma 'h.mlir:3:10: stablehlo.constant: unexpected .,. in a dense literal \[WPACK_E_INPUT\]' \
    'stablehlo.constant dense<[1.0, , 2.0, 3.0]> : tensor<4xf32>'
hostile bad_count 'h.mlir:3:10: stablehlo.constant: a list of 2 items at depth 1; the type.s dim is 4' \
    'stablehlo.constant dense<[1.0, 2.0]> : tensor<4xf32>'
hostile bad_rank 'h.mlir:3:10: mhlo.constant: a number at list depth 1; the type.s rank is 2' \
    'mhlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<2x2xf32>'
hostile bad_hex 'h.mlir:3:10: arith.constant: hex data has 15 bytes; f32 needs 16' \
    'arith.constant dense<"0x0000803F0000004000004040000080"> : tensor<4xf32>'
hostile bad_number 'h.mlir:3:[0-9]+: stablehlo.constant: .*\[WPACK_E_INPUT\]' \
    'stablehlo.constant dense<[1.0, 2.0, 3.0, 1e5]> : tensor<4xf32>'
hostile result_type 'h.mlir:3:10: stablehlo.constant: its result type tensor<4xf32> is not its value.s type tensor<4xi32> \[WPACK_E_SHAPE\]' \
    '"stablehlo.constant"() <{value = dense<[1, 2, 3, 4]> : tensor<4xi32>}> : () -> tensor<4xf32>'
hostile result_type_arith 'h.mlir:3:10: arith.constant: its result type tensor<8xf32> is not its value.s type tensor<4xf32> \[WPACK_E_SHAPE\]' \
    '"arith.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<8xf32>'
hostile huge_list 'h.wpack: the inline weights of .*h.mlir: 4000000000000 bytes would bring the tensor data past the output cap .*\[WPACK_E_TOO_LARGE\]' \
    'stablehlo.constant dense<[1.0, 2.0]> : tensor<1000000000000xf32>'
hostile huge_hex 'past the output cap .*\[WPACK_E_TOO_LARGE\]' \
    '"stablehlo.constant"() <{value = dense<"0x0000803F00000040"> : tensor<1000000000000xf32>}> : () -> tensor<1000000000000xf32>'
hostile max_output 'h.wpack: the inline weights of .*h.mlir: 20 bytes would bring the tensor data past the output cap of 8 bytes' \
    'stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<5xf32>' --max-output 8
# a splat of a huge shape (hex of one element, or one number): a fill, kept
# as it is, nothing expanded
printf 'module {\n  func.func @main() {\n    %%0 = stablehlo.constant dense<"0x0000803F"> : tensor<1000000000000xf32>\n    %%1 = arith.constant dense<0.0> : tensor<1000000000000xf32>\n    return\n  }\n}\n' >"$T/hs.mlir"
expect huge_splat "$WPACK" externalize "$T/hs.mlir" -o "$T/hs.out" --archive "$T/hs.wpack" --min-bytes 16
"$WPACK" inspect "$T/hs.wpack" >"$T/ins" 2>&1
grep -q "moved 0 of 2 inline globals" "$T/err" && cmp -s "$T/hs.mlir" "$T/hs.out" && grep -q '^0 tensors' "$T/ins" &&
    pass huge_splat_kept || fail huge_splat_kept "$(cat "$T/err" "$T/ins")"
# kept, unchanged: a quantized result (another element type), a dynamic shape
printf 'module {\n  func.func @main() {\n    %%0 = "stablehlo.constant"() <{value = dense<[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]> : tensor<16xi8>}> : () -> tensor<16x!quant.uniform<i8:f32, 1.0>>\n    %%1 = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<?xf32>\n    return\n  }\n}\n' >"$T/keep.mlir"
expect kept "$WPACK" externalize "$T/keep.mlir" -o "$T/keep.out" --archive "$T/keep.wpack" --min-bytes 0
grep -q 'keep.mlir:3:10: stablehlo.constant: kept inline (its result type is not a builtin tensor of the element types taken)' "$T/err" &&
    grep -q 'moved 0 of 2 inline globals' "$T/err" && cmp -s "$T/keep.mlir" "$T/keep.out" && pass kept_unchanged ||
    fail kept_unchanged "$(cat "$T/err")"

# --- names: dense_literal_ + the XXH3-64 of "dense<[1.0, 2.0, 3.0, 4.0]> :
# tensor<4xf32>" taken already by a moved global or a resource: each an
# error naming both places (two values, one entry name). Taken as a symbol
# only (a global left as it is, a function, bare or quoted): the entry keeps
# the name and its global is @NAME_1 (mlir-opt-19 checks the output)
K=dense_literal_83f6ba69f4c7f868
clash() { # NAME PATTERN (the file is $T/clash.mlir)
    rm -f "$T/clash.out" "$T/clash.wpack"
    expect_fail "$1" "$2" "$WPACK" externalize "$T/clash.mlir" -o "$T/clash.out" --archive "$T/clash.wpack" --min-bytes 0
    nothing_at "${1}_nothing_written" "$T/clash.out" "$T/clash.wpack"
}
renamed() { # NAME SYMBOL LINE:COL (the file is $T/clash.mlir)
    rm -f "$T/clash.out" "$T/clash.wpack"
    expect "$1" "$WPACK" externalize "$T/clash.mlir" -o "$T/clash.out" --archive "$T/clash.wpack" --min-bytes 0
    grep -qF "clash.mlir:$3: the symbol @$K is in the file already; the global of entry '$K' is @$2" "$T/err" &&
        grep -q "^  ml_program.global private @$2(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri = \"wpack:[0-9a-f]*/$K\"}\$" "$T/clash.out" &&
        grep -qF "ml_program.global_load_const @$2 : tensor<4xf32>" "$T/clash.out" &&
        [ "$(entries_of "$T/clash.wpack")" = "$K" ] && pass "${1}_form" ||
        fail "${1}_form" "$(cat "$T/err" "$T/clash.out")"
    "$MLIR_OPT" --allow-unregistered-dialect "$T/clash.out" >/dev/null 2>"$T/err" && pass "${1}_verifies" ||
        fail "${1}_verifies" "$(head -c 300 "$T/err")"
}
entries_of() { "$WPACK" inspect --json "$1" | "$PY" -c 'import json,sys; print(" ".join(e["name"] for e in json.load(sys.stdin)["tensors"]))'; }
printf 'module {\n  ml_program.global private @%s(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n  func.func @f() -> tensor<4xf32> {\n    %%0 = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n    return %%0 : tensor<4xf32>\n  }\n}\n' $K >"$T/clash.mlir"
renamed name_global "${K}_1" 4:10
printf 'module {\n  func.func @%s() { return }\n  func.func @%s_1() { return }\n  func.func @f() -> tensor<4xf32> {\n    %%0 = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n    return %%0 : tensor<4xf32>\n  }\n}\n' $K $K >"$T/clash.mlir"
renamed name_function "${K}_2" 5:10
sed -i "s/@$K()/@\"$K\"()/" "$T/clash.mlir"
renamed name_function_quoted "${K}_2" 5:10
sed -i "s/@\"$K\"()/@\"dense_literal_83f6ba69f4c7f86\\\\38\"()/" "$T/clash.mlir"
grep -qF '@"dense_literal_83f6ba69f4c7f86\38"()' "$T/clash.mlir" || fail name_function_escaped_setup
renamed name_function_escaped "${K}_2" 5:10
printf 'module {\n  ml_program.global private @%s(dense<[5.0, 2.0, 3.0, 4.0]> : tensor<4xf32>) : tensor<4xf32>\n  func.func @f() -> tensor<4xf32> {\n    %%0 = "mhlo.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>\n    return %%0 : tensor<4xf32>\n  }\n}\n' $K >"$T/clash.mlir"
clash name_moved_global "clash.mlir:2:3: global @$K: its entry '$K' is also the name of the mhlo.constant at 4:10"
printf 'module {\n  func.func @f() -> tensor<4xf32> {\n    %%0 = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n    %%1 = arith.constant dense_resource<%s> : tensor<4xf32>\n    return %%0 : tensor<4xf32>\n  }\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      %s: "0x040000000000A0400000C0400000E04000000041"\n    }\n  }\n#-}\n' $K $K >"$T/clash.mlir"
clash name_resource "clash.mlir:4:10: arith.constant: its entry name '$K' is also that of another value at 3:10 \[WPACK_E_EXISTS\]"

finish
