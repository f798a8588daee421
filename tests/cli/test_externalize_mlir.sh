#!/bin/bash
# test_externalize_mlir.sh - `wpack externalize` agrees with mlir-opt-19 on
# what MLIR is: one symbol in two nested modules (two symbol tables) is two
# globals; torch-mlir's torch.vtensor.literal(dense_resource<...>) weights
# move; dense literals mlir-opt refuses are refused (line:col), the ones it
# takes are read as it reads them (each case runs both on the same input).
. "$(dirname "$0")/lib.sh"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}
if ! [ -x "$MLIR_OPT" ]; then
    fail mlir_opt "mlir-opt-19 not found: these cases compare with it"
    finish
    exit 1
fi

# entries as "FILE HEX" lines (extract writes NAME.npy, a "/" as %2F; numpy reads them)
entries_hex() { # ARCHIVE DIR
    rm -rf "$2" && mkdir -p "$2" && "$WPACK" extract "$1" -o "$2" >/dev/null 2>&1 &&
        "$PY" -c "
import os, sys, numpy as np
d = sys.argv[1]
for root, _, files in sorted(os.walk(d)):
    for f in sorted(files):
        p = os.path.join(root, f)
        print(os.path.relpath(p, d)[:-4], np.load(p).tobytes().hex().upper())" "$2"
}

# --- one symbol in two nested modules: two entries, by module path
cat >"$T/nest.mlir" <<'EOF'
module {
  module @a {
    ml_program.global private @w(dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
  }
  module @b {
    ml_program.global private @w(dense<[3.0, 4.0]> : tensor<2xf32>) : tensor<2xf32>
  }
  ml_program.global private @v(dense<[5.0, 6.0]> : tensor<2xf32>) : tensor<2xf32>
}
EOF
"$MLIR_OPT" "$T/nest.mlir" >/dev/null 2>"$T/err" && pass nested_input_parses || fail nested_input_parses "$(head -c 300 "$T/err")"
expect nested_externalize "$WPACK" externalize "$T/nest.mlir" -o "$T/nest.out" --archive "$T/nest.wpack" --min-bytes 0
"$MLIR_OPT" "$T/nest.out" >/dev/null 2>"$T/err" && pass nested_output_parses || fail nested_output_parses "$(head -c 300 "$T/err")"
got=$(entries_hex "$T/nest.wpack" "$T/nx" | tr '\n' ' ')
[ "$got" = "a%2Fw 0000803F00000040 b%2Fw 0000404000008040 v 0000A0400000C040 " ] && pass nested_entries ||
    fail nested_entries "$got"
grep -q '@w(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {wpack.uri = "wpack:[0-9a-f]*/a%2Fw"}' "$T/nest.out" &&
    grep -q '{wpack.uri = "wpack:[0-9a-f]*/b%2Fw"}' "$T/nest.out" && grep -q '{wpack.uri = "wpack:[0-9a-f]*/v"}' "$T/nest.out" &&
    pass nested_uris || fail nested_uris "$(cat "$T/nest.out")"
# and back: resolve --emit inline puts each module's own values back
expect nested_resolve "$WPACK" resolve -q "$T/nest.wpack" "$T/nest.out" -o "$T/nest.back" --emit inline
"$MLIR_OPT" --mlir-print-elementsattrs-with-hex-if-larger=0 "$T/nest.back" >"$T/p" 2>"$T/err" &&
    grep -q 'a_w: "0x[0-9A-F]\{8\}0000803F00000040"' "$T/p" && grep -q 'b_w: "0x[0-9A-F]\{8\}0000404000008040"' "$T/p" &&
    pass nested_roundtrip || fail nested_roundtrip "$(cat "$T/p" "$T/err")"
expect nested_iree "$WPACK" externalize -q "$T/nest.mlir" -o "$T/nest.iree" --archive "$T/nest2.wpack" --min-bytes 0 --emit iree
grep -q '#flow.parameter.named<"model"::"b/w">' "$T/nest.iree" &&
    "$MLIR_OPT" --allow-unregistered-dialect "$T/nest.iree" >/dev/null 2>&1 && pass nested_iree_key || fail nested_iree_key
# modules without names cannot tell the two apart: a clear error, nothing written
sed 's/ @a//; s/ @b//' "$T/nest.mlir" >"$T/unnamed.mlir"
expect_fail nested_unnamed "unnamed.mlir:3:5: global @w and .*unnamed.mlir:6:5: global @w: both would be entry 'w' .*give the modules names" \
    "$WPACK" externalize "$T/unnamed.mlir" -o "$T/unnamed.out" --archive "$T/unnamed.wpack" --min-bytes 0
[ ! -e "$T/unnamed.out" ] && [ ! -e "$T/unnamed.wpack" ] && pass nested_unnamed_nothing_written ||
    fail nested_unnamed_nothing_written

# --- torch-mlir's weights: torch.vtensor.literal(dense_resource<KEY>) moves
# to entry KEY and becomes torch.vtensor.external.literal(@KEY), the external
# reference torch-mlir's convert-torch-to-mlprogram turns into an
# ml_program.global @KEY extern (they stayed inline: 0 of 0 moved). mlir-opt
# reads torch ops only in generic form (unregistered dialect).
W4=0000803F000000400000404000008040   # 1.0 2.0 3.0 4.0
W2=0000A0400000C040                   # 5.0 6.0
cat >"$T/torch.mlir" <<EOF
module {
  func.func @main() -> !torch.vtensor<[4],f32> {
    %0 = "torch.vtensor.literal"() <{value = dense_resource<torch_tensor_4_torch.float32> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    %1 = "torch.vtensor.literal"() {value = dense_resource<torch_tensor_4_torch.float32> : tensor<4xf32>, keep = 1 : i64} : () -> !torch.vtensor<[4],f32>
    %2 = "torch.vtensor.literal"() <{value = dense_resource<fc.bias> : tensor<2xf32>}> {keep} : () -> !torch.vtensor<[2],f32>
    %3 = arith.constant dense_resource<fc.bias> : tensor<2xf32>
    %4 = "torch.vtensor.literal"() <{value = dense<1.0> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    return %0 : !torch.vtensor<[4],f32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      torch_tensor_4_torch.float32: "0x04000000$W4",
      fc.bias: "0x04000000$W2"
    }
  }
#-}
EOF
"$MLIR_OPT" --allow-unregistered-dialect "$T/torch.mlir" >/dev/null 2>"$T/err" && pass torch_input_parses ||
    fail torch_input_parses "$(head -c 300 "$T/err")"
expect torch_externalize "$WPACK" externalize "$T/torch.mlir" -o "$T/torch.out" --archive "$T/torch.wpack" --min-bytes 0
grep -q "moved 3 of 3 inline globals (40 B) into .*; 0 kept inline, 1 resource blobs dropped" "$T/err" &&
    pass torch_summary || fail torch_summary "$(cat "$T/err")"
"$MLIR_OPT" --allow-unregistered-dialect "$T/torch.out" >/dev/null 2>"$T/err" && pass torch_output_parses ||
    fail torch_output_parses "$(head -c 300 "$T/err")"
got=$(entries_hex "$T/torch.wpack" "$T/tx" | tr '\n' ' ')
[ "$got" = "fc.bias $W2 torch_tensor_4_torch.float32 $W4 " ] && pass torch_entries || fail torch_entries "$got"
id=$("$WPACK" inspect "$T/torch.wpack" | grep -o 'index xxh3 [0-9a-f]*' | cut -d' ' -f3)
U="wpack:$id/torch_tensor_4_torch.float32"
grep -qF "%0 = \"torch.vtensor.external.literal\"() <{name = @torch_tensor_4_torch.float32}> {wpack.uri = \"$U\"} : () -> !torch.vtensor<[4],f32>" "$T/torch.out" &&
    grep -qF "%1 = \"torch.vtensor.external.literal\"() {name = @torch_tensor_4_torch.float32, wpack.uri = \"$U\", keep = 1 : i64} : () -> " "$T/torch.out" &&
    grep -qF "%2 = \"torch.vtensor.external.literal\"() <{name = @fc.bias}> {wpack.uri = \"wpack:$id/fc.bias\", keep} : () -> " "$T/torch.out" &&
    pass torch_generic_forms || fail torch_generic_forms "$(grep torch.vtensor "$T/torch.out")"
# the blob only moved literals used goes; one an arith.constant uses stays; dense<> stays
! grep -q "torch_tensor_4_torch.float32: " "$T/torch.out" && grep -q "fc.bias: \"0x04000000$W2\"" "$T/torch.out" &&
    grep -qF '<{value = dense<1.0> : tensor<4xf32>}>' "$T/torch.out" && pass torch_blobs || fail torch_blobs "$(tail -8 "$T/torch.out")"
expect torch_again "$WPACK" externalize -q "$T/torch.out" -o "$T/torch.out2" --archive "$T/torch2.wpack" --min-bytes 0
cmp -s "$T/torch.out" "$T/torch.out2" && pass torch_again_unchanged || fail torch_again_unchanged
# the pretty form torch-mlir prints (mlir-opt cannot read it: the text is checked)
printf 'module {\n  func.func @f() -> !torch.vtensor<[4],f32> {\n    %%0 = torch.vtensor.literal(dense_resource<w_1> : tensor<4xf32>) : !torch.vtensor<[4],f32>\n    %%1 = torch.vtensor.literal(dense_resource<w_1> : tensor<4xf32>) {a} : !torch.vtensor<[4],f32>\n    return %%0 : !torch.vtensor<[4],f32>\n  }\n}\n' >"$T/noblob.mlir"
{ cat "$T/noblob.mlir"; printf '{-#\n  dialect_resources: {\n    builtin: {\n      w_1: "0x04000000%s"\n    }\n  }\n#-}\n' "$W4"; } >"$T/pretty.mlir"
expect torch_pretty "$WPACK" externalize -q "$T/pretty.mlir" -o "$T/pretty.out" --archive "$T/pretty.wpack" --min-bytes 0 --emit iree
grep -qxF '    %0 = torch.vtensor.external.literal(@w_1) : !torch.vtensor<[4],f32>' "$T/pretty.out" &&
    grep -qxF '    %1 = torch.vtensor.external.literal(@w_1) {a} : !torch.vtensor<[4],f32>' "$T/pretty.out" &&
    ! grep -q 'w_1: ' "$T/pretty.out" && pass torch_pretty_form || fail torch_pretty_form "$(cat "$T/pretty.out")"
expect torch_pretty_uri "$WPACK" externalize -q "$T/pretty.mlir" -o "$T/pretty.out" --archive "$T/pretty.wpack" --min-bytes 0
grep -q '    %1 = torch.vtensor.external.literal(@w_1) {wpack.uri = "wpack:[0-9a-f]*/w_1", a} : !torch.vtensor<\[4\],f32>$' "$T/pretty.out" &&
    pass torch_pretty_uri_form || fail torch_pretty_uri_form "$(cat "$T/pretty.out")"
# a literal whose blob is missing: an error with its line:col, nothing written
expect_fail torch_no_blob "noblob.mlir:3:10: torch.vtensor.literal: dense_resource<w_1> has no blob" \
    "$WPACK" externalize "$T/noblob.mlir" -o "$T/noblob.out" --archive "$T/noblob.wpack" --min-bytes 0
[ ! -e "$T/noblob.out" ] && [ ! -e "$T/noblob.wpack" ] && pass torch_no_blob_nothing_written ||
    fail torch_no_blob_nothing_written

# --- characters MLIR's lexer refuses (outside strings, comments and a
# dialect's <...> body): a UTF-8 byte order mark, ~ ; non-ASCII, control
# bytes. wpack copied them into an output mlir-opt refuses; now both refuse,
# and both accept them inside a dialect attribute's body.
same_verdict() { # NAME FILE PATTERN(wpack's error, empty: both accept)
    "$MLIR_OPT" --allow-unregistered-dialect "$2" >/dev/null 2>&1; local m=$?
    rm -f "$T/ch.out" "$T/ch.wpack"
    "$WPACK" externalize "$2" -o "$T/ch.out" --archive "$T/ch.wpack" --min-bytes 0 >/dev/null 2>"$T/err"; local w=$?
    if [ $m -ne 0 ] && [ $w -ne 0 ] && grep -Eq -- "$3" "$T/err"; then pass "$1"
    elif [ -z "$3" ] && [ $m -eq 0 ] && [ $w -eq 0 ]; then pass "$1"
    else fail "$1" "mlir-opt rc $m, wpack rc $w: $(head -c 300 "$T/err")"; fi
}
{ printf '\357\273\277'; cat "$T/nest.mlir"; } >"$T/bom.mlir"
same_verdict char_bom "$T/bom.mlir" "bom.mlir:1:1: unexpected character 0xEF, a UTF-8 byte order mark"
for c in '~' ';' '\001' '\303\251' '$' '\014' '\013'; do
    { cat "$T/nest.mlir"; printf "$c\n"; } >"$T/ch.mlir"
    same_verdict "char_$(printf "$c" | od -An -tx1 | tr -d ' ')" "$T/ch.mlir" "ch.mlir:10:1: unexpected character 0x"
done
printf 'module {\n  ml_program.global private @w(dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32> {x = #foo<a;b~$>}\n}\n' >"$T/ch.mlir"
same_verdict char_in_dialect_body "$T/ch.mlir" ""

# --- dense literals: mlir-opt-19 and wpack on the same file, case by case
# (tests/mlir/literal_parity.py): wpack accepted nan, inf, 1e5, .5, +1.0,
# integers for floats, 0X, -0, missing or extra commas and text after the
# value, all of which mlir-opt refuses, and read f32 decimals straight to
# f32 where MLIR goes through f64 (1.0000000596046447755 is 1.0 there)
mkdir -p "$T/lit"
"$PY" "$TESTS_DIR/mlir/literal_parity.py" "$WPACK" "$MLIR_OPT" "$T/lit" >"$T/parity" 2>&1
while read -r word rest; do
    case $word in
    ok) pass "literal ${rest}" ;;
    FAIL) fail "literal ${rest%%: *}" "${rest#*: }" ;;
    *) fail literal_parity "$word $rest" ;;
    esac
done <"$T/parity"
[ "$(grep -c '^ok' "$T/parity")" -ge 70 ] && pass literal_parity_ran || fail literal_parity_ran "$(head -c 300 "$T/parity")"

finish
