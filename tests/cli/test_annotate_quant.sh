#!/bin/bash
# test_annotate_quant.sh - `wpack resolve --annotate --form quant`: ranges as
# upstream MLIR quant types, P.range = !quant.calibrated<f32<MIN:MAX>>. Every
# output is parsed by the stock mlir-opt-19 and printed again (and that print
# parsed again gives itself); tests/mlir/check_quant.py compares the MIN:MAX
# mlir-opt printed with `wpack inspect --json`'s f64 stats bit for bit.
# Per-channel and min == max records keep the attrs form (a note says so);
# `--form attrs` (the default) is byte for byte what it was before --form
# existed (tests/mlir/annotate_locs.attrs.golden).
. "$(dirname "$0")/lib.sh"
FIX="$TESTS_DIR/mlir"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}
[ -x "$MLIR_OPT" ] || fail mlir_opt_present "no mlir-opt-19 ($MLIR_OPT)"

"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], (np.arange(16, dtype=np.float32).reshape(4, 4) - 5) / 4)" "$T/w0.npy"
# tests/mlir/annotate_stats.json (shared with test_annotate.sh; the golden comes from it),
# and values at the edges: -0.0, f64 values no f32 holds (0.1, 0.30000000000000004),
# the smallest subnormal, DBL_MAX, -FLT_MAX, -0.0:0.0 (an empty range)
cat >"$T/edges.json" <<'J'
{"version": 1, "stats": [
 {"key": "0", "kind": "activation", "count": 16, "min": -0.0, "max": 0.1, "mean": 0.05},
 {"key": "1", "kind": "activation", "count": 16, "min": 5e-324, "max": 1.7976931348623157e308, "mean": 1.0},
 {"key": "2", "kind": "activation", "count": 16, "min": -0.0, "max": 0.0, "mean": 0.0},
 {"key": "layers.0", "kind": "activation", "count": 16, "min": -3.4028234663852886e38, "max": 123456789.123, "mean": 0.0},
 {"key": "layers.0.mlp", "kind": "activation", "count": 16, "min": -1e15, "max": 1e16, "mean": 0.0},
 {"key": "enc.fc", "kind": "activation", "count": 16, "min": -1.0000000000000002, "max": 0.30000000000000004, "mean": 0.0}
]}
J
A="$T/m.wpack" E="$T/e.wpack"
expect create_with_stats "$WPACK" create -q -o "$A" "$T/w0.npy" --stats "$FIX/annotate_stats.json"
expect create_with_edges "$WPACK" create -q -o "$E" "$T/w0.npy" --stats "$T/edges.json"

# parse_check NAME OUT [FLAG]: mlir-opt-19 parses OUT, prints it, and parses
# its own print back to the same text; the print is left in $T/printed.mlir
# (--emit iree's #flow.parameter.named needs --allow-unregistered-dialect)
parse_check() {
    local flags=(--mlir-print-debuginfo --mlir-print-local-scope ${3:+"$3"})
    if ! "$MLIR_OPT" "${flags[@]}" "$2" >"$T/printed.mlir" 2>"$T/err2"; then
        fail "$1" "mlir-opt-19 rejected it: $(head -c 300 "$T/err2")"; return 1
    fi
    if ! "$MLIR_OPT" "${flags[@]}" "$T/printed.mlir" >"$T/printed2.mlir" 2>"$T/err2"; then
        fail "$1" "mlir-opt-19 rejected its own print: $(head -c 300 "$T/err2")"; return 1
    fi
    cmp -s "$T/printed.mlir" "$T/printed2.mlir" || { fail "$1" "the print changed on a second pass"; return 1; }
    pass "$1"
}
# values_check NAME ARCHIVE EXPECT.json: the printed ranges are the archive's stats
values_check() {
    "$WPACK" inspect --json "$2" >"$T/inspect.json" 2>"$T/err2" || { fail "$1" "inspect: $(cat "$T/err2")"; return; }
    if "$PY" "$FIX/check_quant.py" wpack "$T/printed.mlir" "$T/inspect.json" "$3" >"$T/err2" 2>&1; then
        pass "$1"
    else
        fail "$1" "$(head -c 600 "$T/err2")"
    fi
}

# where each record lands: the op rule of appendix B, as in test_annotate.sh
cat >"$T/expect.json" <<'J'
{"quant": {"t.py:2": "0", "t.py:7": "layers.0.mlp", "t.py:8": "layers.0", "t.py:9": "enc.fc"},
 "attrs": {"t.py:4": "1", "t.py:5": "2"},
 "globals": {"w0": "w0"}}
J
for mode in uri iree inline; do
    expect "quant_$mode" "$WPACK" resolve --annotate --form quant --emit "$mode" "$A" "$FIX/annotate_locs.mlir" -o "$T/q_$mode.mlir"
    cp "$T/err" "$T/err_q_$mode"
    flag=; [ "$mode" = iree ] && flag=--allow-unregistered-dialect
    parse_check "quant_${mode}_mlir_opt" "$T/q_$mode.mlir" $flag && values_check "quant_${mode}_values" "$A" "$T/expect.json"
    "$WPACK" resolve -q --annotate --form quant --emit "$mode" "$A" "$T/q_$mode.mlir" -o "$T/q_$mode.again" 2>/dev/null &&
        cmp -s "$T/q_$mode.mlir" "$T/q_$mode.again" && pass "quant_${mode}_idempotent" ||
        fail "quant_${mode}_idempotent" "annotating the output again changed it"
    # annotating again in the other form replaces the first form's attributes
    # (not for inline: an inlined global is no weight global any more, so a
    # second run leaves its attributes as they are, in either form)
    [ "$mode" = inline ] && continue
    "$WPACK" resolve -q --annotate --emit "$mode" "$A" "$T/q_$mode.mlir" -o "$T/a_$mode.mlir" 2>/dev/null &&
        "$WPACK" resolve -q --annotate --emit "$mode" "$A" "$FIX/annotate_locs.mlir" -o "$T/a0_$mode.mlir" 2>/dev/null &&
        cmp -s "$T/a_$mode.mlir" "$T/a0_$mode.mlir" && pass "quant_${mode}_to_attrs" ||
        fail "quant_${mode}_to_attrs" "--form attrs over a quant output differs from attrs over the input"
    "$WPACK" resolve -q --annotate --form quant --emit "$mode" "$A" "$T/a0_$mode.mlir" -o "$T/qa_$mode.mlir" 2>/dev/null &&
        cmp -s "$T/qa_$mode.mlir" "$T/q_$mode.mlir" && pass "attrs_${mode}_to_quant" ||
        fail "attrs_${mode}_to_quant" "--form quant over an attrs output differs from quant over the input"
done
grep -q "wpack.range = !quant.calibrated<f32<-23.5:18.9>>" "$T/q_uri.mlir" && pass quant_text ||
    fail quant_text "$(grep -n wpack "$T/q_uri.mlir" | head -c 600)"
grep -q "note: --form quant: 2 stats records kept the attrs form (wpack.min, wpack.max, wpack.absmax): 1 per-channel, 1 with min == max, 0 not finite" "$T/err_q_uri" &&
    pass quant_fallback_note || fail quant_fallback_note "$(cat "$T/err_q_uri")"
grep -q "annotated 6 ops with activation stats and 1 globals" "$T/err_q_uri" && pass quant_counts ||
    fail quant_counts "$(cat "$T/err_q_uri")"

# the edge values: bit for bit through mlir-opt-19's parser and printer
cat >"$T/expect_e.json" <<'J'
{"quant": {"t.py:2": "0", "t.py:7": "layers.0.mlp", "t.py:8": "layers.0", "t.py:9": "enc.fc", "t.py:4": "1"},
 "attrs": {"t.py:5": "2"},
 "globals": {"w0": "w0"}}
J
expect quant_edges "$WPACK" resolve -q --annotate --form quant "$E" "$FIX/annotate_locs.mlir" -o "$T/qe.mlir"
parse_check quant_edges_mlir_opt "$T/qe.mlir" && values_check quant_edges_values "$E" "$T/expect_e.json"
grep -q "wpack.range = !quant.calibrated<f32<-0.0:0.1>>" "$T/qe.mlir" && pass quant_negative_zero ||
    fail quant_negative_zero "$(grep -n wpack "$T/qe.mlir" | head -c 600)"

# --form attrs is the default and unchanged: the golden was written before --form
for how in default attrs; do
    set -- ; [ "$how" = attrs ] && set -- --form attrs
    expect "attrs_$how" "$WPACK" resolve -q --annotate "$@" --emit iree "$A" "$FIX/annotate_locs.mlir" -o "$T/g_$how.mlir"
    cmp -s "$T/g_$how.mlir" "$FIX/annotate_locs.attrs.golden" && pass "attrs_${how}_golden" ||
        fail "attrs_${how}_golden" "$(diff "$T/g_$how.mlir" "$FIX/annotate_locs.attrs.golden" | head -c 600)"
done
grep -q "range" "$T/g_default.mlir" && fail attrs_no_range || pass attrs_no_range

# usage: a bad form, and --form without --annotate (a warning, the output unannotated)
expect_fail form_bad "resolve: --form must be attrs or quant, not 'types' \[WPACK_E_INVALID_ARGUMENT\]" \
    "$WPACK" resolve --annotate --form types "$A" "$FIX/annotate_locs.mlir" -o "$T/x.mlir"
"$WPACK" resolve --annotate --form types "$A" "$FIX/annotate_locs.mlir" -o "$T/x.mlir" 2>/dev/null
[ $? -eq 2 ] && pass form_bad_exit_2 || fail form_bad_exit_2
[ -e "$T/x.mlir" ] && fail form_bad_no_output || pass form_bad_no_output
expect_fail form_missing_value "" "$WPACK" resolve --annotate "$A" "$FIX/annotate_locs.mlir" -o "$T/x.mlir" --form
expect form_without_annotate "$WPACK" resolve -q --form quant "$A" "$FIX/annotate_locs.mlir" -o "$T/n.mlir"
grep -q -- "--form only matters with --annotate" "$T/err" && pass form_without_annotate_warned ||
    fail form_without_annotate_warned "$(cat "$T/err")"
grep -q "quant" "$T/n.mlir" && fail form_without_annotate_no_attrs || pass form_without_annotate_no_attrs
"$WPACK" resolve --help | grep -q -- "--form FORM" && pass help_mentions_form || fail help_mentions_form

# non-finite stats never reach the resolver: the archive cannot hold them
# (spec 6.9: every f64 finite), and a stats JSON with one is refused
echo '{"version": 1, "stats": [{"key": "0", "kind": "activation", "count": 1, "min": -1e400, "max": 1.0, "mean": 0.0}]}' >"$T/inf.json"
expect_fail nonfinite_refused "overflow.*\[WPACK_E_STATS\]" "$WPACK" create -q -o "$T/inf.wpack" "$T/w0.npy" --stats "$T/inf.json"

finish
