#!/bin/bash
# test_annotate.sh - `wpack resolve --annotate`: activation stats (from
# `wpack create --stats`) go on the op producing each module's output, weight
# stats on resolved globals. Every output is parsed by mlir-opt-19 (no flags)
# and tests/mlir/check_annotated.py checks the attributes in what it printed.
. "$(dirname "$0")/lib.sh"
FIX="$TESTS_DIR/mlir"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}

"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], (np.arange(16, dtype=np.float32).reshape(4, 4) - 5) / 4)" "$T/w0.npy"
# where each must land (the "t.py":N:1 location of the op), by the rule of
# appendix B: the last result-defining op at function-body level naming the path
cat >"$T/expect.json" <<'J'
{"ops": {
  "t.py:2": {"min": -23.5, "max": 18.9, "absmax": 23.5},
  "t.py:4": {"axis": 1, "min": [0.0, -0.5, 0.0, -1.25], "max": [1.5, 2.5, 3.5, 4.5], "absmax": [1.5, 2.5, 3.5, 4.5]},
  "t.py:5": {"min": 2.0, "max": 2.0, "absmax": 2.0},
  "t.py:7": {"min": -1e-20, "max": 1e20, "absmax": 1e20},
  "t.py:8": {"min": -7.25, "max": 7.0, "absmax": 7.25},
  "t.py:9": {"min": -3.0, "max": 0.125, "absmax": 3.0}},
 "globals": {"w0": {"min": -1.25, "max": 2.5, "absmax": 2.5}}}
J
A="$T/m.wpack"
expect create_with_stats "$WPACK" create -q -o "$A" "$T/w0.npy" --stats "$FIX/annotate_stats.json"

# annotate_check NAME OUT PREFIX
annotate_check() {
    if ! "$MLIR_OPT" --mlir-print-debuginfo --mlir-print-local-scope "$2" >"$T/printed.mlir" 2>"$T/err2"; then
        fail "$1" "mlir-opt-19 rejected it: $(head -c 300 "$T/err2")"; return
    fi
    if "$PY" "$FIX/check_annotated.py" "$3" "$T/printed.mlir" "$T/expect.json" >"$T/err2" 2>&1; then
        pass "$1"
    else
        fail "$1" "$(head -c 600 "$T/err2")"
    fi
}

for mode in uri inline; do
    expect "annotate_$mode" "$WPACK" resolve --annotate --emit "$mode" "$A" "$FIX/annotate_locs.mlir" -o "$T/a_$mode.mlir"
    cp "$T/err" "$T/err_$mode"
    annotate_check "annotate_${mode}_printed" "$T/a_$mode.mlir" wpack
    "$WPACK" resolve -q --annotate --emit "$mode" "$A" "$T/a_$mode.mlir" -o "$T/a_$mode.again" 2>/dev/null &&
        cmp -s "$T/a_$mode.mlir" "$T/a_$mode.again" && pass "annotate_${mode}_idempotent" ||
        fail "annotate_${mode}_idempotent" "annotating the output again changed it"
done
grep -q "activation stats 'missing': no op in a function body" "$T/err_uri" && pass missing_path_warned ||
    fail missing_path_warned "$(cat "$T/err_uri")"
grep -q "the op ends both 'enc.fc' and 'enc'; it gets the stats of 'enc.fc'" "$T/err_uri" && pass longest_path_wins ||
    fail longest_path_wins "$(cat "$T/err_uri")"
grep -q "annotated 6 ops with activation stats and 1 globals" "$T/err_uri" && pass annotate_counts ||
    fail annotate_counts "$(cat "$T/err_uri")"

# everything but the inserted attributes is copied byte for byte
"$PY" - "$T/a_uri.mlir" >"$T/stripped.mlir" <<'PYEOF'
import re, sys
t = open(sys.argv[1]).read()
ours = r'wpack\.(?:uri = "[^"]*"|axis = \d+ : i64|(?:min|max|absmax) = (?:dense<\[[^\]]*\]> : tensor<\d+xf32>|[-+0-9.eE]+ : f32))'
t = re.sub(ours + r'(?:, )?', '', t)
t = re.sub(r' \{\}(?=\s)', '', t)      # dicts that held only ours
t = re.sub(r'\{\} ', '', t)
sys.stdout.write(t)
PYEOF
if cmp -s "$T/stripped.mlir" "$FIX/annotate_locs.mlir"; then pass annotate_copy_through
else fail annotate_copy_through "$(diff "$T/stripped.mlir" "$FIX/annotate_locs.mlir" | head -c 600)"; fi

# function bodies one region below the innermost module, however the module
# is written: the generic form mlir-opt-19 prints ("builtin.module"() ({
# "func.func"() <{...}> ({ ...), `builtin.module {`, and a module nested in
# another (their ops were 1 or 2 regions deeper than a top-level `module {`
# makes them: nothing was annotated, WPACK_E_EMPTY)
if "$MLIR_OPT" --mlir-print-op-generic --mlir-print-debuginfo "$FIX/annotate_locs.mlir" >"$T/generic.mlir" 2>"$T/err2"; then
    expect generic_form "$WPACK" resolve -q --annotate "$A" "$T/generic.mlir" -o "$T/generic.out.mlir"
    annotate_check generic_form_printed "$T/generic.out.mlir" wpack
else
    fail generic_form "mlir-opt-19 --mlir-print-op-generic: $(head -c 300 "$T/err2")"
fi
sed 's/^module {/builtin.module {/' "$FIX/annotate_locs.mlir" >"$T/bmod.mlir"
expect builtin_module "$WPACK" resolve -q --annotate "$A" "$T/bmod.mlir" -o "$T/bmod.out.mlir"
annotate_check builtin_module_printed "$T/bmod.out.mlir" wpack
sed 's/^module {/module {\nmodule @inner attributes {test.x = 1 : i64} {/; s/^}$/}\n}/' "$FIX/annotate_locs.mlir" >"$T/nested.mlir"
expect nested_module "$WPACK" resolve -q --annotate "$A" "$T/nested.mlir" -o "$T/nested.out.mlir"
annotate_check nested_module_printed "$T/nested.out.mlir" wpack

# --attr-prefix: the same attributes under another name; a second prefix adds, never clobbers
expect attr_prefix "$WPACK" resolve -q --annotate --attr-prefix custom "$A" "$FIX/annotate_locs.mlir" -o "$T/c.mlir"
annotate_check attr_prefix_printed "$T/c.mlir" custom
grep -q "wpack\.min" "$T/c.mlir" && fail attr_prefix_only "wpack.min present" || pass attr_prefix_only
expect_fail attr_prefix_bad "not a bare MLIR identifier" "$WPACK" resolve --annotate --attr-prefix '1"x' "$A" "$FIX/annotate_locs.mlir" -o "$T/c.mlir"

# without --annotate nothing of the stats appears
expect no_annotate "$WPACK" resolve -q "$A" "$FIX/annotate_locs.mlir" -o "$T/n.mlir"
grep -q "wpack\.min" "$T/n.mlir" && fail no_annotate_no_attrs || pass no_annotate_no_attrs

# archives with activation stats written through the C API (test_resolver_annotate.c
# makes them the same way); a file without a top-level module: function bodies at depth 1
printf 'func.func @f(%%a: tensor<4xf32>) -> tensor<4xf32> {\n  %%0 = arith.negf %%a : tensor<4xf32> loc("0"("t.py":2:1))\n  %%1 = arith.addf %%0, %%a : tensor<4xf32> loc("0"("t.py":3:1))\n  return %%1 : tensor<4xf32> loc("0"("t.py":4:1))\n}\n' >"$T/nomod.mlir"
echo '{"ops": {"t.py:3": {"min": -23.5, "max": 18.9, "absmax": 23.5}}}' >"$T/expect.json"
expect nomodule "$WPACK" resolve -q --annotate "$A" "$T/nomod.mlir" -o "$T/nomod.out.mlir"
annotate_check nomodule_printed "$T/nomod.out.mlir" wpack
# a 2.5 MB location name "0.a.a.a...": every "."-prefix was hashed, n^2 / 2
# bytes (a quarter of it took 3.4 s, 4x the length 16x the time); only
# prefixes up to the longest key are now, and "0" still names key "0"
"$PY" -c "
import sys
loc = '0' + '.a' * 1250000
open(sys.argv[1], 'w').write(open(sys.argv[2]).read().replace('loc(\"0\"(\"t.py\":3:1))', 'loc(\"%s\"(\"t.py\":3:1))' % loc))
" "$T/long.mlir" "$T/nomod.mlir"
expect long_location cpu_limit 20 "$WPACK" resolve -q --annotate "$A" "$T/long.mlir" -o "$T/long.out.mlir"
annotate_check long_location_printed "$T/long.out.mlir" wpack


# a 2 MB module path "a.a.a...a" against a --module-map path that differs in
# its last byte: every "."-prefix was looked up in the map by a binary search
# comparing up to its length (n^2 / 4 bytes: 1 MB took 17 s, 2 MB about 70 s);
# the map's sorted paths are narrowed one byte at a time now. The op is still
# annotated for the "0" of its fused location.
"$PY" - "$T" <<'PYEOF'
import json, sys
d = sys.argv[1]
name = "a." * 1048575 + "a"
json.dump({name[:-1] + "q": "1"}, open(d + "/longmap.json", "w"))
src = open(d + "/nomod.mlir").read()
open(d + "/longmap.mlir", "w").write(src.replace('loc("0"("t.py":3:1))', 'loc(fused["%s", "0"("t.py":3:1)])' % name))
PYEOF
expect long_map_path cpu_limit 20 "$WPACK" resolve -q --annotate --module-map "$T/longmap.json" "$A" "$T/longmap.mlir" -o "$T/longmap.out.mlir"
annotate_check long_map_path_printed "$T/longmap.out.mlir" wpack

# the HLO constants print their attr-dict right after the op name; before
# the ':' of `dense<...> : T` (the value's own type) it does not parse
# (hlo's parseConstantOp). mlir-opt-19 has no stablehlo dialect: checked as text
printf 'func.func @f(%%a: tensor<4xf32>) -> tensor<4xf32> {\n  %%0 = stablehlo.constant dense<1.0> : tensor<4xf32> loc("0")\n  %%1 = stablehlo.add %%a, %%0 : tensor<4xf32> loc("1")\n  return %%1 : tensor<4xf32>\n}\n' >"$T/hlo.mlir"
expect hlo_constant "$WPACK" resolve -q --annotate "$A" "$T/hlo.mlir" -o "$T/hlo.out.mlir"
grep -q '^  %0 = stablehlo.constant {wpack.min = -23.5 : f32, [^}]*} dense<1.0> : tensor<4xf32> loc("0")$' "$T/hlo.out.mlir" &&
    grep -q '^  %1 = stablehlo.add %a, %0 {wpack.axis = 1 : i64, [^}]*} : tensor<4xf32> loc("1")$' "$T/hlo.out.mlir" &&
    pass hlo_constant_placed || fail hlo_constant_placed "$(grep stablehlo "$T/hlo.out.mlir" | cut -c1-200)"

# location aliases that refer to each other: #l1 = loc(fused[#l0, #l0]) ...
# 40 deep was read 2^40 times (it never ended); an alias is read once per op
# now, and "0" still names key "0"
"$PY" - "$T" <<'PYEOF'
import sys
d = sys.argv[1]
al = ['#l0 = loc("x")'] + ['#l%d = loc(fused[#l%d, #l%d])' % (i, i - 1, i - 1) for i in range(1, 40)]
al += ['#top = loc(fused[#l39, "0"("t.py":3:1)])']
src = open(d + "/nomod.mlir").read()
open(d + "/bomb.mlir", "w").write(src.replace('loc("0"("t.py":3:1))', 'loc(#top)') + "\n".join(al) + "\n")
# ... and 400 ops that each reach 3,000 aliases: alias text read is bounded
# over the file (16 x its bytes, at least 16 MiB): an error, not minutes
al = ['#a%d_%d = loc("m%d_%d")' % (i, j, i, j) for i in range(60) for j in range(100)]
al += ['#c0 = loc(fused[%s])' % ", ".join("#a0_%d" % j for j in range(100))]
al += ['#c%d = loc(fused[%s, #c%d])' % (i, ", ".join("#a%d_%d" % (i, j) for j in range(100)), i - 1) for i in range(1, 60)]
ops = "".join('  %%w%d = arith.negf %%a : tensor<4xf32> loc(#c59)\n' % i for i in range(400))
open(d + "/wide.mlir", "w").write(src.replace("  return", ops + "  return") + "\n".join(al) + "\n")
# ... and 5,000 ops sharing one 1 MB torch_xla JSON location: the bound
# counts the alias's bytes, not one per read (5 GB of lexing, 40 s)
big = '#big = loc("{\\22stack_trace\\22: \\22%s\\22, \\22nn_module_stack\\22: \\22k,0,Linear\\22}"("t.py":2:1))' % ("x" * 1000000)
ops = "".join('  %%w%d = arith.negf %%a : tensor<4xf32> loc(#big)\n' % i for i in range(5000))
open(d + "/long.mlir", "w").write(src.replace("  return", ops + "  return") + big + "\n")
PYEOF
expect alias_bomb cpu_limit 20 "$WPACK" resolve -q --annotate "$A" "$T/bomb.mlir" -o "$T/bomb.out.mlir"
annotate_check alias_bomb_printed "$T/bomb.out.mlir" wpack
expect_fail alias_reads_bounded "wide.mlir: --annotate: the ops' locations read more than 16777216 bytes of location aliases in all.*\[WPACK_E_INPUT\]" \
    cpu_limit 20 "$WPACK" resolve -q --annotate "$A" "$T/wide.mlir" -o "$T/wide.out.mlir"
expect_fail alias_bytes_bounded "long.mlir: --annotate: the ops' locations read more than [0-9]+ bytes of location aliases in all.*\[WPACK_E_INPUT\]" \
    cpu_limit 20 "$WPACK" resolve -q --annotate "$A" "$T/long.mlir" -o "$T/long.out.mlir"
rm -f "$T/long.mlir"

# 100,000 activation records, each named by the op on its own line: every
# annotated op's line number was counted from the start of the file
# (records x lines: 40,000 took 12 s, this 100,000 about 75 s); one cursor
# through the file now (well under a second)
"$PY" - "$T" <<'PYEOF'
import json, sys
d, k = sys.argv[1], 100000
st = [{"key": "m%d" % i, "kind": "activation", "count": 4, "min": -1.0, "max": 1.0, "mean": 0.0} for i in range(k)]
json.dump({"version": 1, "stats": st}, open(d + "/many.json", "w"))
with open(d + "/many.mlir", "w") as f:
    f.write("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n")
    prev = "%a"
    for i in range(k):
        f.write('  %%%d = arith.addf %s, %s : tensor<4xf32> loc("m%d")\n' % (i, prev, prev, i))
        prev = "%%%d" % i
    f.write("  return %s : tensor<4xf32>\n}\n" % prev)
PYEOF
expect many_records_archive "$WPACK" create -q -o "$T/many.wpack" "$T/w0.npy" --stats "$T/many.json"
expect many_records cpu_limit 30 "$WPACK" resolve -q --annotate "$T/many.wpack" "$T/many.mlir" -o "$T/many.out.mlir"
[ "$(grep -c 'wpack.min = -1.0 : f32' "$T/many.out.mlir" 2>/dev/null)" = 100000 ] && pass many_records_all ||
    fail many_records_all "$(grep -c 'wpack.min' "$T/many.out.mlir" 2>/dev/null) ops annotated"

# linalg.map and linalg.reduce read a '{' after their name as the short form's
# payload op ({ arith.addf }): their attr-dict follows outs(...) (and reduce's
# dimensions = [...]). mlir-opt-19 prints the long form's region arguments on
# a line of their own, `(%in: f32, ...) {`: a continuation of the op, whose
# location comes after the region. So does a generic op's type wrapped
# onto a line of its own.
cat >"$T/mapred.json" <<'J'
{"version": 1, "stats": [
 {"key": "m1", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5},
 {"key": "m2", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5},
 {"key": "r1", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5},
 {"key": "r2", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5},
 {"key": "g1", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5}]}
J
# annotate_parsed NAME COUNT: an archive with NAME.json's stats annotates
# NAME.mlir, COUNT ops are annotated, and mlir-opt-19 prints the output into
# NAME.printed (else NAME_parsed fails and it returns 1)
annotate_parsed() {
    expect "$1_archive" "$WPACK" create -q -o "$T/$1.wpack" "$T/w0.npy" --stats "$T/$1.json"
    expect "$1_annotate" "$WPACK" resolve --annotate --allow-missing "$T/$1.wpack" "$T/$1.mlir" \
        -o "$T/$1.out.mlir"
    grep -q "annotated $2 ops with activation stats" "$T/err" && pass "$1_all_found" ||
        fail "$1_all_found" "$(cat "$T/err")"
    "$MLIR_OPT" "$T/$1.out.mlir" >"$T/$1.printed" 2>"$T/err2" && return 0
    fail "$1_parsed" "mlir-opt-19 rejected it: $(head -c 300 "$T/err2")"
    return 1
}
cat >"$T/mapred.mlir" <<'EOF'
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4x4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.map { arith.addf } ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) loc("m1")
  %1 = linalg.map ins(%0 : tensor<4xf32>) outs(%e : tensor<4xf32>) {keep = 1 : i32}
    (%in: f32) {
      linalg.yield %in : f32
    } loc("m2")
  %2 = linalg.reduce { arith.addf } ins(%c : tensor<4x4xf32>) outs(%e : tensor<4xf32>) dimensions = [1] loc("r1")
  %3 = linalg.reduce ins(%c : tensor<4x4xf32>) outs(%2 : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    } loc("r2")
  %4 = "arith.addf"(%3, %3) <{fastmath = #arith.fastmath<none>}>
    : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("g1")
  return %4 : tensor<4xf32>
}
EOF
if annotate_parsed mapred 5; then
    [ "$(grep -c 'linalg\.\(map\|reduce\).*wpack.min = -1' "$T/mapred.printed")" = 4 ] &&
        grep -q 'linalg.map ins.*{keep = 1 : i32, wpack.absmax' "$T/mapred.printed" &&
        grep -q 'arith.addf %reduced_1, %reduced_1 {wpack.absmax' "$T/mapred.printed" && pass mapred_parsed ||
        fail mapred_parsed "$(grep linalg "$T/mapred.printed")"
fi

# Keywords of an op's custom form wrapped onto lines of their own (outs(...),
# dimensions = [..], ins(...), scf.for's `to`/`step`, a type) continue the
# op's statement; a line's dot-less `return` still starts one. Wrapped like
# this, no op was found ("no op annotated").
cat >"$T/wrap.json" <<'J'
{"version": 1, "stats": [
 {"key": "mm", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5},
 {"key": "r1", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5},
 {"key": "m1", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5},
 {"key": "cs", "kind": "activation", "count": 4, "min": -1.0, "max": 2.0, "mean": 0.5}]}
J
cat >"$T/wrap.mlir" <<'EOF'
func.func @f(%a: tensor<4x4xf32>, %c: tensor<4x4xf32>, %n: index) -> tensor<?xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.matmul ins(%a, %c : tensor<4x4xf32>, tensor<4x4xf32>)
         outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32> loc("mm")
  %2 = linalg.reduce { arith.addf } ins(%0 : tensor<4x4xf32>)
         outs(%e : tensor<4xf32>)
         dimensions = [1] loc("r1")
  %3 = linalg.map { arith.addf }
         ins(%2, %2 : tensor<4xf32>, tensor<4xf32>)
         outs(%e : tensor<4xf32>) loc("m1")
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %4 = scf.for %i = %c0
         to %n
         step %c1 iter_args(%acc = %3) ->
         (tensor<4xf32>) {
    scf.yield %acc : tensor<4xf32>
  }
  %5 = tensor.cast %4 : tensor<4xf32>
         to tensor<?xf32> loc("cs")
  return
    %5 : tensor<?xf32>
}
EOF
if annotate_parsed wrap 4; then
    [ "$(grep -c '\(linalg\.\(matmul\|map\|reduce\)\|tensor\.cast\).*wpack.min = -1' "$T/wrap.printed")" = 4 ] &&
        pass wrap_parsed || fail wrap_parsed "$(grep 'linalg\|tensor.cast' "$T/wrap.printed")"
fi

finish
