#!/bin/bash
# test_externalize_mlir.sh - `wpack externalize` agrees with mlir-opt-19 on
# what MLIR is: one symbol in two nested modules (two symbol tables) is two
# globals; torch-mlir's torch.vtensor.literal(dense_resource<...>) weights
# move; dense literals mlir-opt refuses are refused (line:col), the ones it
# takes are read as it reads them (each case runs both on the same input).
. "$(dirname "$0")/lib.sh"
need_mlir_opt

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
# a module's '{' on the line after `module @a` (as hand-written or reformatted
# IR has it) opens that module's body all the same
sed 's/^  module @\([ab]\) {$/  module @\1\n  {/' "$T/nest.mlir" >"$T/nest_nl.mlir"
grep -q '^  {$' "$T/nest_nl.mlir" && "$MLIR_OPT" "$T/nest_nl.mlir" >/dev/null 2>&1 &&
    expect nested_brace_next_line "$WPACK" externalize "$T/nest_nl.mlir" -o "$T/nest_nl.out" --archive "$T/nest_nl.wpack" --min-bytes 0 &&
    [ "$(entries_hex "$T/nest_nl.wpack" "$T/nnx" | tr '\n' ' ')" = "$got" ] && pass nested_brace_next_line_entries ||
    fail nested_brace_next_line_entries "$(cat "$T/err" 2>/dev/null)"
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
    %5 = "test.keep"() {v = dense_resource<fc.bias> : tensor<2xf32>} : () -> tensor<2xf32>
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
grep -q "moved 5 of 5 inline globals (64 B) into .*; 0 kept inline, 1 resource blobs dropped" "$T/err" &&
    pass torch_summary || fail torch_summary "$(cat "$T/err")"
"$MLIR_OPT" --allow-unregistered-dialect "$T/torch.out" >/dev/null 2>"$T/err" && pass torch_output_parses ||
    fail torch_output_parses "$(head -c 300 "$T/err")"
got=$(entries_hex "$T/torch.wpack" "$T/tx" | tr '\n' ' ')
L1=torch_literal_abc62920568b85a3   # XXH3-64 of the text "dense<1.0> : tensor<4xf32>"
[ "$got" = "fc.bias $W2 $L1 0000803F0000803F0000803F0000803F torch_tensor_4_torch.float32 $W4 " ] &&
    pass torch_entries || fail torch_entries "$got"
id=$("$WPACK" inspect "$T/torch.wpack" | grep -o 'index xxh3 [0-9a-f]*' | cut -d' ' -f3)
U="wpack:$id/torch_tensor_4_torch.float32"
grep -qF "%0 = \"torch.vtensor.external.literal\"() <{name = @torch_tensor_4_torch.float32}> {wpack.uri = \"$U\"} : () -> !torch.vtensor<[4],f32>" "$T/torch.out" &&
    grep -qF "%1 = \"torch.vtensor.external.literal\"() {name = @torch_tensor_4_torch.float32, wpack.uri = \"$U\", keep = 1 : i64} : () -> " "$T/torch.out" &&
    grep -qF "%2 = \"torch.vtensor.external.literal\"() <{name = @fc.bias}> {wpack.uri = \"wpack:$id/fc.bias\", keep} : () -> " "$T/torch.out" &&
    pass torch_generic_forms || fail torch_generic_forms "$(grep torch.vtensor "$T/torch.out")"
# the blob only moved literals used goes; one an unmoved op uses stays; a
# dense<> literal has no name: it gets one from its text's XXH3
! grep -q "torch_tensor_4_torch.float32: " "$T/torch.out" && grep -q "fc.bias: \"0x04000000$W2\"" "$T/torch.out" &&
    grep -qF "%4 = \"torch.vtensor.external.literal\"() <{name = @$L1}> {wpack.uri = \"wpack:$id/$L1\"} : () -> " "$T/torch.out" &&
    pass torch_blobs || fail torch_blobs "$(tail -8 "$T/torch.out")"
# the arith.constant of the same blob shares its entry, through a global
# hoisted into the module before the function
sed -n 2,3p "$T/torch.out" >"$T/got"
printf '  ml_program.global private @fc.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32> {wpack.uri = "wpack:%s/fc.bias"}\n  func.func @main() -> !torch.vtensor<[4],f32> {\n' "$id" >"$T/want"
cmp -s "$T/got" "$T/want" && grep -qxF '    %3 = ml_program.global_load_const @fc.bias : tensor<2xf32>' "$T/torch.out" &&
    pass torch_arith_shares_entry || fail torch_arith_shares_entry "$(head -5 "$T/torch.out")"
expect torch_again "$WPACK" externalize -q "$T/torch.out" -o "$T/torch.out2" --archive "$T/torch2.wpack" --min-bytes 0
cmp -s "$T/torch.out" "$T/torch.out2" && pass torch_again_unchanged || fail torch_again_unchanged
# the pretty form torch-mlir prints (mlir-opt cannot read it: the text is checked)
printf 'module {\n  func.func @f() -> !torch.vtensor<[4],f32> {\n    %%0 = torch.vtensor.literal(dense_resource<w_1> : tensor<4xf32>) : !torch.vtensor<[4],f32>\n    %%1 = torch.vtensor.literal(dense_resource<w_1> : tensor<4xf32>) {a} : !torch.vtensor<[4],f32>\n    return %%0 : !torch.vtensor<[4],f32>\n  }\n}\n' >"$T/noblob.mlir"
{ cat "$T/noblob.mlir"; printf '{-#\n  dialect_resources: {\n    builtin: {\n      w_1: "0x04000000%s"\n    }\n  }\n#-}\n' "$W4"; } >"$T/pretty.mlir"
expect torch_pretty "$WPACK" externalize -q "$T/pretty.mlir" -o "$T/pretty.out" --archive "$T/pretty.wpack" --min-bytes 0 --emit iree
cat >"$T/want" <<'EOF'
module {
  ml_program.global private @w_1(#flow.parameter.named<"model"::"w_1"> : tensor<4xf32>) : tensor<4xf32>
  func.func @f() -> !torch.vtensor<[4],f32> {
    %wpack.param.0 = ml_program.global_load_const @w_1 : tensor<4xf32>
    %0 = torch_c.from_builtin_tensor %wpack.param.0 : tensor<4xf32> -> !torch.vtensor<[4],f32>
    %wpack.param.1 = ml_program.global_load_const @w_1 : tensor<4xf32>
    %1 = torch_c.from_builtin_tensor %wpack.param.1 {a} : tensor<4xf32> -> !torch.vtensor<[4],f32>
EOF
head -7 "$T/pretty.out" | cmp -s - "$T/want" &&
    ! grep -q 'w_1: ' "$T/pretty.out" && pass torch_pretty_form || fail torch_pretty_form "$(cat "$T/pretty.out")"
# --emit iree: IREE loads parameters from globals whose value is
# #flow.parameter.named; its torch-to-iree pipeline does not lower
# torch.vtensor.external.literal (torch-mlir's convert-torch-to-mlprogram is
# not in it, and that pass's #ml_program.extern global is no parameter). So
# a literal loads a hoisted global, as iree-turbine's externalized weights
# do: %wpack.param.N = ml_program.global_load_const @KEY, then
# torch_c.from_builtin_tensor (IREE's ml_program import makes them util ops).
cat >"$T/tg.mlir" <<EOF
module {
  func.func @main() -> !torch.vtensor<[4],f32> {
    %0 = "torch.vtensor.literal"() <{value = dense_resource<t4> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    %1 = "torch.vtensor.literal"() {value = dense_resource<t4> : tensor<4xf32>, keep = 1 : i64} : () -> !torch.vtensor<[4],f32>
    %2 = "torch.vtensor.literal"() {keep = 1 : i64, value = dense_resource<t4> : tensor<4xf32>} : () -> !torch.vtensor<[4],f32>
    %3 = "torch.vtensor.literal"() {value = dense_resource<t4> : tensor<4xf32>} : () -> !torch.vtensor<[4],f32>
    return %0 : !torch.vtensor<[4],f32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      t4: "0x04000000$W4"
    }
  }
#-}
EOF
expect torch_iree_generic "$WPACK" externalize -q "$T/tg.mlir" -o "$T/tg.out" --archive "$T/tg.wpack" --min-bytes 0 --emit iree --scope p
cat >"$T/want" <<'EOF'
module {
  ml_program.global private @t4(#flow.parameter.named<"p"::"t4"> : tensor<4xf32>) : tensor<4xf32>
  func.func @main() -> !torch.vtensor<[4],f32> {
    %wpack.param.0 = ml_program.global_load_const @t4 : tensor<4xf32>
    %0 = "torch_c.from_builtin_tensor"(%wpack.param.0) : (tensor<4xf32>) -> !torch.vtensor<[4],f32>
    %wpack.param.1 = ml_program.global_load_const @t4 : tensor<4xf32>
    %1 = "torch_c.from_builtin_tensor"(%wpack.param.1) {keep = 1 : i64} : (tensor<4xf32>) -> !torch.vtensor<[4],f32>
    %wpack.param.2 = ml_program.global_load_const @t4 : tensor<4xf32>
    %2 = "torch_c.from_builtin_tensor"(%wpack.param.2) {keep = 1 : i64} : (tensor<4xf32>) -> !torch.vtensor<[4],f32>
    %wpack.param.3 = ml_program.global_load_const @t4 : tensor<4xf32>
    %3 = "torch_c.from_builtin_tensor"(%wpack.param.3) : (tensor<4xf32>) -> !torch.vtensor<[4],f32>
    return %0 : !torch.vtensor<[4],f32>
  }
}
EOF
head -14 "$T/tg.out" | cmp -s - "$T/want" && ! grep -q 't4: ' "$T/tg.out" && pass torch_iree_generic_form ||
    fail torch_iree_generic_form "$(head -14 "$T/tg.out")"
"$MLIR_OPT" --allow-unregistered-dialect "$T/tg.out" >/dev/null 2>"$T/err" && pass torch_iree_parses ||
    fail torch_iree_parses "$(head -c 300 "$T/err")"
expect torch_iree_again "$WPACK" externalize -q "$T/tg.out" -o "$T/tg.out2" --archive "$T/tg2.wpack" --min-bytes 0 --emit iree --scope p
cmp -s "$T/tg.out" "$T/tg.out2" && pass torch_iree_again_unchanged || fail torch_iree_again_unchanged
# the loads' names must be new in the file
sed 's/return %0 :/%wpack.param.9 = "x.y"() : () -> i1\n    return %0 :/' "$T/tg.mlir" >"$T/tgc.mlir"
expect_fail torch_iree_ssa_taken "tgc.mlir:3:10: torch.vtensor.literal: the file uses %wpack.param. names already" \
    "$WPACK" externalize "$T/tgc.mlir" -o "$T/tgc.out" --archive "$T/tgc.wpack" --min-bytes 0 --emit iree

# --- torch.vtensor.literal(dense<...>) has no name: one of at least
# --min-bytes moves as entry torch_literal_<XXH3-64 of the value's text, from
# "dense<" to the end of its type, 16 hex digits>: stable across runs, the
# same for equal literals (they share the entry); smaller ones stay
cat >"$T/td.mlir" <<'EOF'
module {
  func.func @main() -> !torch.vtensor<[4],f32> {
    %0 = "torch.vtensor.literal"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    %1 = "torch.vtensor.literal"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> {keep} : () -> !torch.vtensor<[4],f32>
    %2 = "torch.vtensor.literal"() <{value = dense<"0x0000803F000000400000404000008040"> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    %3 = "torch.vtensor.literal"() <{value = dense<1.5> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    %4 = "torch.vtensor.literal"() <{value = dense<1> : tensor<1xsi64>}> : () -> !torch.vtensor<[1],si64>
    return %0 : !torch.vtensor<[4],f32>
  }
}
EOF
"$MLIR_OPT" --allow-unregistered-dialect "$T/td.mlir" >/dev/null 2>"$T/err" && pass torch_dense_input_parses ||
    fail torch_dense_input_parses "$(head -c 300 "$T/err")"
expect torch_dense "$WPACK" externalize "$T/td.mlir" -o "$T/td.out" --archive "$T/td.wpack" --min-bytes 16
grep -q "moved 4 of 5 inline globals (64 B) into .*; 1 kept inline, 0 resource blobs dropped" "$T/err" &&
    pass torch_dense_summary || fail torch_dense_summary "$(cat "$T/err")"
got=$(entries_hex "$T/td.wpack" "$T/dx" | tr '\n' ' ')
D1=torch_literal_83f6ba69f4c7f868 D2=torch_literal_d8cabe308dcbb029 D3=torch_literal_389b137a2627b9e6
[ "$got" = "$D3 0000C03F0000C03F0000C03F0000C03F $D1 $W4 $D2 $W4 " ] && pass torch_dense_entries ||
    fail torch_dense_entries "$got"
grep -c "name = @$D1}" "$T/td.out" | grep -qx 2 && grep -qF '<{value = dense<1> : tensor<1xsi64>}>' "$T/td.out" &&
    pass torch_dense_shared_and_small_kept || fail torch_dense_shared_and_small_kept "$(cat "$T/td.out")"
"$MLIR_OPT" --allow-unregistered-dialect "$T/td.out" >/dev/null 2>"$T/err" && pass torch_dense_output_parses ||
    fail torch_dense_output_parses "$(head -c 300 "$T/err")"
expect torch_dense_rerun "$WPACK" externalize -q "$T/td.mlir" -o "$T/td.out2" --archive "$T/td2.wpack" --min-bytes 16
cmp -s "$T/td.out" "$T/td.out2" && cmp -s "$T/td.wpack" "$T/td2.wpack" && pass torch_dense_stable ||
    fail torch_dense_stable
expect torch_dense_iree "$WPACK" externalize -q "$T/td.mlir" -o "$T/td.iree" --archive "$T/tdi.wpack" --min-bytes 16 --emit iree
grep -qxF "  ml_program.global private @$D1(#flow.parameter.named<\"model\"::\"$D1\"> : tensor<4xf32>) : tensor<4xf32>" "$T/td.iree" &&
    "$MLIR_OPT" --allow-unregistered-dialect "$T/td.iree" >/dev/null 2>"$T/err" && pass torch_dense_iree_form ||
    fail torch_dense_iree_form "$(head -c 300 "$T/err"; head -5 "$T/td.iree")"
# a literal mlir-opt refuses (2 items for 4): refused with its line:col, nothing written
sed 's/dense<1.5>/dense<[1.0, 2.0]>/' "$T/td.mlir" >"$T/tdbad.mlir"
"$MLIR_OPT" --allow-unregistered-dialect "$T/tdbad.mlir" >/dev/null 2>&1 && fail torch_dense_bad_refused_by_mlir_opt ||
    pass torch_dense_bad_refused_by_mlir_opt
expect_fail torch_dense_bad "tdbad.mlir:6:" \
    "$WPACK" externalize "$T/tdbad.mlir" -o "$T/tdbad.out" --archive "$T/tdbad.wpack" --min-bytes 16
[ ! -e "$T/tdbad.out" ] && [ ! -e "$T/tdbad.wpack" ] && pass torch_dense_bad_nothing_written ||
    fail torch_dense_bad_nothing_written
# a resource named as a dense literal's entry would share that entry with
# other bytes (so would another text of the same XXH3): refused, naming both
cat >"$T/tdclash.mlir" <<EOF
module {
  func.func @main() -> !torch.vtensor<[4],f32> {
    %0 = "torch.vtensor.literal"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    %1 = "torch.vtensor.literal"() <{value = dense_resource<$D1> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    return %0 : !torch.vtensor<[4],f32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      $D1: "0x040000000000A0400000C0400000E04000000041"
    }
  }
#-}
EOF
expect_fail torch_dense_name_taken "tdclash.mlir:4:10: torch.vtensor.literal: its entry name '$D1' is also that of another value at 3:10" \
    "$WPACK" externalize "$T/tdclash.mlir" -o "$T/tdclash.out" --archive "$T/tdclash.wpack" --min-bytes 0
[ ! -e "$T/tdclash.out" ] && [ ! -e "$T/tdclash.wpack" ] && pass torch_dense_name_taken_nothing_written ||
    fail torch_dense_name_taken_nothing_written
expect torch_pretty_uri "$WPACK" externalize -q "$T/pretty.mlir" -o "$T/pretty.out" --archive "$T/pretty.wpack" --min-bytes 0
grep -q '    %1 = torch.vtensor.external.literal(@w_1) {wpack.uri = "wpack:[0-9a-f]*/w_1", a} : !torch.vtensor<\[4\],f32>$' "$T/pretty.out" &&
    pass torch_pretty_uri_form || fail torch_pretty_uri_form "$(cat "$T/pretty.out")"
# a literal whose blob is missing: an error with its line:col, nothing written
expect_fail torch_no_blob "noblob.mlir:3:10: torch.vtensor.literal: dense_resource<w_1> has no blob" \
    "$WPACK" externalize "$T/noblob.mlir" -o "$T/noblob.out" --archive "$T/noblob.wpack" --min-bytes 0
[ ! -e "$T/noblob.out" ] && [ ! -e "$T/noblob.wpack" ] && pass torch_no_blob_nothing_written ||
    fail torch_no_blob_nothing_written

# --- arith.constant dense_resource<KEY> (torch-mlir after lowering, stablehlo
# tools): an arith.constant cannot hold an external reference, so its value
# goes to `ml_program.global private @KEY(...)`, put once per module before the
# op of the module body around the constant, and the constant becomes
# `ml_program.global_load_const @KEY` (they stayed inline: 0 of 0 moved).
# mlir-opt-19 verifies both modes (the global's type against the load's).
cat >"$T/ar.mlir" <<EOF
module {
  func.func @main() -> tensor<4xf32> {
    %0 = arith.constant dense_resource<w.a> : tensor<4xf32>
    %1 = arith.constant {foo} dense_resource<w.a> : tensor<4xf32> loc("x")
    %2 = "arith.constant"() <{value = dense_resource<w_b> : tensor<4xf32>}> {foo} : () -> tensor<4xf32>
    %3 = arith.constant dense_resource<small> : tensor<2xf32>
    return %0 : tensor<4xf32>
  }
}
module @m2 {
  func.func @h() -> tensor<4xf32> {
    %0 = arith.constant dense_resource<w.a> : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      w.a: "0x04000000$W4",
      w_b: "0x04000000$W4",
      small: "0x04000000$W2"
    }
  }
#-}
EOF
expect arith_uri "$WPACK" externalize "$T/ar.mlir" -o "$T/ar.out" --archive "$T/ar.wpack" --min-bytes 16
grep -q "moved 4 of 5 inline globals (64 B) into .*; 1 kept inline, 2 resource blobs dropped" "$T/err" &&
    pass arith_summary || fail arith_summary "$(cat "$T/err")"
"$MLIR_OPT" "$T/ar.out" >/dev/null 2>"$T/err" && pass arith_uri_verifies || fail arith_uri_verifies "$(head -c 300 "$T/err")"
got=$(entries_hex "$T/ar.wpack" "$T/ax" | tr '\n' ' ')
[ "$got" = "w.a $W4 w_b $W4 " ] && pass arith_entries || fail arith_entries "$got"
id=$("$WPACK" inspect "$T/ar.wpack" | grep -o 'index xxh3 [0-9a-f]*' | cut -d' ' -f3)
cat >"$T/want" <<EOF
module {
  ml_program.global private @w.a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri = "wpack:$id/w.a"}
  ml_program.global private @w_b(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri = "wpack:$id/w_b"}
  func.func @main() -> tensor<4xf32> {
    %0 = ml_program.global_load_const @w.a : tensor<4xf32>
    %1 = ml_program.global_load_const @w.a : tensor<4xf32> {foo} loc("x")
    %2 = "ml_program.global_load_const"() <{global = @w_b}> {foo} : () -> tensor<4xf32>
    %3 = arith.constant dense_resource<small> : tensor<2xf32>
    return %0 : tensor<4xf32>
  }
}
module @m2 {
  ml_program.global private @w.a(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri = "wpack:$id/w.a"}
  func.func @h() -> tensor<4xf32> {
EOF
head -14 "$T/ar.out" | cmp -s - "$T/want" && grep -q "small: " "$T/ar.out" && ! grep -q "w_b: " "$T/ar.out" &&
    pass arith_uri_form || fail arith_uri_form "$(head -16 "$T/ar.out")"
expect arith_again "$WPACK" externalize -q "$T/ar.out" -o "$T/ar.out2" --archive "$T/ar2.wpack" --min-bytes 16
cmp -s "$T/ar.out" "$T/ar.out2" && pass arith_again_unchanged || fail arith_again_unchanged
# resolve reads the hoisted globals back: --emit inline gives the bytes again
expect arith_resolve_inline "$WPACK" resolve -q "$T/ar.wpack" "$T/ar.out" -o "$T/ar.back" --emit inline
"$MLIR_OPT" "$T/ar.back" >/dev/null 2>"$T/err" && grep -q "w.a: \"0x40000000$W4\"" "$T/ar.back" &&
    pass arith_resolve_inline_verifies || fail arith_resolve_inline_verifies "$(head -c 300 "$T/err")"
expect arith_iree "$WPACK" externalize -q "$T/ar.mlir" -o "$T/ar.iree" --archive "$T/ari.wpack" --min-bytes 16 --emit iree --scope p
grep -qxF '  ml_program.global private @w.a(#flow.parameter.named<"p"::"w.a"> : tensor<4xf32>) : tensor<4xf32>' "$T/ar.iree" &&
    "$MLIR_OPT" --allow-unregistered-dialect "$T/ar.iree" >/dev/null 2>"$T/err" &&
    pass arith_iree_form || fail arith_iree_form "$(head -c 300 "$T/err"; head -4 "$T/ar.iree")"
# stablehlo.constant / mhlo.constant of a dense_resource<KEY> (torch-mlir's
# stablehlo pipeline lowers a torch literal's blob so): the same hoisted
# global and load (the output has no stablehlo op left: mlir-opt-19 checks it)
cat >"$T/hr.mlir" <<EOF
module {
  func.func @main() -> tensor<4xf32> {
    %0 = stablehlo.constant dense_resource<w.a> : tensor<4xf32>
    %1 = "stablehlo.constant"() <{value = dense_resource<w_b> : tensor<4xf32>}> : () -> tensor<4xf32>
    %2 = "mhlo.constant"() {value = dense_resource<w.a> : tensor<4xf32>} : () -> tensor<4xf32>
    "func.return"(%0) : (tensor<4xf32>) -> ()
  }
}
{-#
  dialect_resources: {
    builtin: {
      w.a: "0x04000000$W4",
      w_b: "0x04000000$W4"
    }
  }
#-}
EOF
expect hlo_resource_uri "$WPACK" externalize "$T/hr.mlir" -o "$T/hr.out" --archive "$T/hr.wpack" --min-bytes 16
grep -q "moved 3 of 3 inline globals (48 B) into .*; 0 kept inline, 2 resource blobs dropped" "$T/err" &&
    pass hlo_resource_summary || fail hlo_resource_summary "$(cat "$T/err")"
got=$(entries_hex "$T/hr.wpack" "$T/hx" | tr '\n' ' ')
[ "$got" = "w.a $W4 w_b $W4 " ] && pass hlo_resource_entries || fail hlo_resource_entries "$got"
grep -qxF '    %0 = ml_program.global_load_const @w.a : tensor<4xf32>' "$T/hr.out" &&
    grep -qxF '    %1 = "ml_program.global_load_const"() <{global = @w_b}> : () -> tensor<4xf32>' "$T/hr.out" &&
    grep -qxF '    %2 = "ml_program.global_load_const"() {global = @w.a} : () -> tensor<4xf32>' "$T/hr.out" &&
    ! grep -q '0x04000000' "$T/hr.out" && "$MLIR_OPT" "$T/hr.out" >/dev/null 2>"$T/err" &&
    pass hlo_resource_form || fail hlo_resource_form "$(head -c 300 "$T/err"; cat "$T/hr.out")"
expect hlo_resource_iree "$WPACK" externalize -q "$T/hr.mlir" -o "$T/hr.iree" --archive "$T/hri.wpack" --min-bytes 16 --emit iree --scope p
grep -qxF '  ml_program.global private @w_b(#flow.parameter.named<"p"::"w_b"> : tensor<4xf32>) : tensor<4xf32>' "$T/hr.iree" &&
    "$MLIR_OPT" --allow-unregistered-dialect "$T/hr.iree" >/dev/null 2>"$T/err" &&
    pass hlo_resource_iree_form || fail hlo_resource_iree_form "$(head -c 300 "$T/err"; head -4 "$T/hr.iree")"
# no module: the global goes at the top level, before the function
printf 'func.func @f() -> tensor<4xf32> {\n  %%0 = arith.constant dense_resource<w> : tensor<4xf32>\n  return %%0 : tensor<4xf32>\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      w: "0x04000000%s"\n    }\n  }\n#-}\n' "$W4" >"$T/top.mlir"
expect arith_top "$WPACK" externalize -q "$T/top.mlir" -o "$T/top.out" --archive "$T/top.wpack" --min-bytes 0
head -1 "$T/top.out" | grep -q '^ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri' &&
    "$MLIR_OPT" "$T/top.out" >/dev/null 2>"$T/err" && pass arith_top_level || fail arith_top_level "$(head -c 300 "$T/err"; head -3 "$T/top.out")"
# the function on the line of `module {`: the global goes right after the '{'
printf 'module { func.func @f() -> tensor<4xf32> {\n    %%0 = arith.constant dense_resource<w> : tensor<4xf32>\n    return %%0 : tensor<4xf32>\n  }\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      w: "0x04000000%s"\n    }\n  }\n#-}\n' "$W4" >"$T/oneline.mlir"
expect arith_one_line "$WPACK" externalize -q "$T/oneline.mlir" -o "$T/oneline.out" --archive "$T/oneline.wpack" --min-bytes 0
head -1 "$T/oneline.out" | grep -q '^module { ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri = "[^"]*"} func.func @f()' &&
    "$MLIR_OPT" "$T/oneline.out" >/dev/null 2>"$T/err" && pass arith_one_line_module ||
    fail arith_one_line_module "$(head -c 300 "$T/err"; head -2 "$T/oneline.out")"
# a symbol @KEY in the file already (a global of the module, a function, a
# use, in any module, bare or quoted): KEY's global is @KEY_N, the first N
# the file does not mention, in every module that hoists KEY; the entry
# keeps the name KEY. mlir-opt-19 refused what wpack wrote before
# ("redefinition of symbol named 'main'"); now it checks the output, and
# resolve --emit inline reads the renamed globals back
printf 'module {\n  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n  func.func @f() -> tensor<4xf32> {\n    %%0 = arith.constant dense_resource<w> : tensor<4xf32>\n    return %%0 : tensor<4xf32>\n  }\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      w: "0x04000000%s"\n    }\n  }\n#-}\n' "$W4" >"$T/clash.mlir"
expect arith_symbol_taken "$WPACK" externalize "$T/clash.mlir" -o "$T/clash.out" --archive "$T/clash.wpack" --min-bytes 0
grep -qF "clash.mlir:4:10: the symbol @w is in the file already; the global of entry 'w' is @w_1" "$T/err" &&
    grep -q '^  ml_program.global private @w_1(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri = "wpack:[0-9a-f]*/w"}$' "$T/clash.out" &&
    grep -qxF '    %0 = ml_program.global_load_const @w_1 : tensor<4xf32>' "$T/clash.out" &&
    "$MLIR_OPT" "$T/clash.out" >/dev/null 2>"$T/err2" && pass arith_symbol_taken_renamed ||
    fail arith_symbol_taken_renamed "$(cat "$T/err" "$T/err2" "$T/clash.out")"
cat >"$T/taken.mlir" <<EOF
module {
  func.func @main() -> tensor<4xf32> {
    %0 = arith.constant dense_resource<main> : tensor<4xf32>
    %1 = "arith.constant"() <{value = dense_resource<w.1> : tensor<4xf32>}> : () -> tensor<4xf32>
    %2 = func.call @"main_1"() : () -> tensor<4xf32>
    %3 = "stablehlo.constant"() {value = dense_resource<free> : tensor<4xf32>} : () -> tensor<4xf32>
    %4 = "torch.vtensor.literal"() <{value = dense_resource<main> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32>
    return %0 : tensor<4xf32>
  }
  func.func @main_1() -> tensor<4xf32> attributes {peer = @m2::@"w\2E1"} {
    %0 = arith.constant dense<1.0> : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  module @m2 {
    func.func @"w.1"() -> tensor<4xf32> {
      %0 = arith.constant dense_resource<main> : tensor<4xf32>
      return %0 : tensor<4xf32>
    }
  }
}
{-#
  dialect_resources: {
    builtin: {
      main: "0x04000000$W4",
      w.1: "0x04000000$W4",
      free: "0x04000000$W4"
    }
  }
#-}
EOF
"$MLIR_OPT" --allow-unregistered-dialect "$T/taken.mlir" >/dev/null 2>"$T/err" && pass symbol_taken_input_verifies ||
    fail symbol_taken_input_verifies "$(head -c 300 "$T/err")"
expect symbol_taken_uri "$WPACK" externalize "$T/taken.mlir" -o "$T/taken.out" --archive "$T/taken.wpack" --min-bytes 0
[ "$(grep -c 'is in the file already' "$T/err")" = 2 ] &&
    grep -qF "taken.mlir:3:10: the symbol @main is in the file already; the global of entry 'main' is @main_2" "$T/err" &&
    grep -qF "the symbol @w.1 is in the file already; the global of entry 'w.1' is @w.1_1" "$T/err" &&
    [ "$(grep -c '^ *ml_program.global private @main_2(#ml_program.extern : tensor<4xf32>) : tensor<4xf32> {wpack.uri = "wpack:[0-9a-f]*/main"}$' "$T/taken.out")" = 2 ] &&
    [ "$(grep -c 'global_load_const @main_2 ' "$T/taken.out")" = 2 ] &&
    grep -qF '"ml_program.global_load_const"() <{global = @w.1_1}> : () -> tensor<4xf32>' "$T/taken.out" &&
    grep -qF '"ml_program.global_load_const"() {global = @free} : () -> tensor<4xf32>' "$T/taken.out" &&
    "$MLIR_OPT" --allow-unregistered-dialect "$T/taken.out" >/dev/null 2>"$T/err2" && pass symbol_taken_uri_renamed ||
    fail symbol_taken_uri_renamed "$(cat "$T/err" "$T/err2" "$T/taken.out")"
# every blob moved: the builtin dictionary is left empty, with no line of
# blanks between its braces (there was one: the last blob's indentation)
! grep -q '^[[:blank:]]\+$' "$T/taken.out" && grep -A1 '^    builtin: {$' "$T/taken.out" | tail -1 | grep -qx '    }' &&
    pass symbol_taken_resources_emptied || fail symbol_taken_resources_emptied "$(tail -8 "$T/taken.out" | cat -A)"
got=$(entries_hex "$T/taken.wpack" "$T/tx" | tr '\n' ' ')
[ "$got" = "free $W4 main $W4 w.1 $W4 " ] && pass symbol_taken_entries || fail symbol_taken_entries "$got"
expect symbol_taken_inline "$WPACK" resolve -q "$T/taken.wpack" "$T/taken.out" -o "$T/taken.back" --emit inline
"$MLIR_OPT" --allow-unregistered-dialect "$T/taken.back" >/dev/null 2>"$T/err" && grep -qF "main: \"0x40000000$W4\"" "$T/taken.back" &&
    pass symbol_taken_inline_verifies || fail symbol_taken_inline_verifies "$(head -c 300 "$T/err")"
expect symbol_taken_iree "$WPACK" externalize -q "$T/taken.mlir" -o "$T/taken.iree" --archive "$T/takeni.wpack" --min-bytes 0 --emit iree --scope p
grep -qxF '  ml_program.global private @main_2(#flow.parameter.named<"p"::"main"> : tensor<4xf32>) : tensor<4xf32>' "$T/taken.iree" &&
    grep -q '^    %wpack.param.[0-9]* = ml_program.global_load_const @main_2 : tensor<4xf32>$' "$T/taken.iree" &&
    "$MLIR_OPT" --allow-unregistered-dialect "$T/taken.iree" >/dev/null 2>"$T/err" &&
    pass symbol_taken_iree_form || fail symbol_taken_iree_form "$(head -c 300 "$T/err"; head -4 "$T/taken.iree")"

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
