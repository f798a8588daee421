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
