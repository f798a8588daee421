#!/bin/bash
# test_resolve_strict.sh - issue 13 points 4, 7 (resolver part) and 8:
# `resolve --annotate` that annotates nothing fails (WPACK_E_EMPTY) unless
# --allow-none; --strict names what is unmatched; module paths of the IR
# (a wrapper's model.0, dynamo's L['self'].0) are remapped by --strip-prefix,
# --module-map or `create --name IR=KEY`; an --emit uri output re-resolves
# after `wpack calibrate` changed the archive id; a full disk names the path
# and errno; every error ends with its [WPACK_E_*] name. Annotated outputs
# are parsed by mlir-opt-19 and checked by tests/mlir/check_annotated.py.
. "$(dirname "$0")/lib.sh"
FIX="$TESTS_DIR/mlir"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}
[ -x "$MLIR_OPT" ] || fail mlir_opt_present "no mlir-opt-19 at $MLIR_OPT"

# annotate_check NAME OUT EXPECT.json: mlir-opt-19 parses OUT (no flags) and
# the attributes it printed are the expected ones (and no others)
annotate_check() {
    if ! "$MLIR_OPT" --mlir-print-debuginfo --mlir-print-local-scope "$2" >"$T/printed.mlir" 2>"$T/err2"; then
        fail "$1" "mlir-opt-19 rejected it: $(head -c 300 "$T/err2")"; return
    fi
    if "$PY" "$FIX/check_annotated.py" wpack "$T/printed.mlir" "$3" >"$T/err2" 2>&1; then
        pass "$1"
    else
        fail "$1" "$(head -c 600 "$T/err2")"
    fi
}
# no_file NAME PATH...: none of the paths (nor a temp file beside them) exists
no_file() {
    local name=$1 p; shift
    for p in "$@"; do
        if [ -e "$p" ] || compgen -G "$p.tmp*" >/dev/null; then fail "$name" "$p (or a temp file) exists"; return; fi
    done
    pass "$name"
}
# err_has NAME REGEX: the last command's stderr ($T/err) matches
err_has() {
    if grep -Eq -- "$2" "$T/err"; then pass "$1"; else fail "$1" "stderr lacks /$2/: $(head -c 500 "$T/err")"; fi
}

"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], (np.arange(16, dtype=np.float32).reshape(4, 4) - 5) / 4)" "$T/w0.npy"
cat >"$T/stats.json" <<'J'
{"version": 1, "stats": [
 {"key": "0", "kind": "activation", "count": 16, "min": -2.5, "max": 1.5, "mean": 0.1},
 {"key": "1", "kind": "activation", "count": 16, "min": 0.0, "max": 3.0, "mean": 0.5},
 {"key": "2", "kind": "activation", "count": 16, "min": -1.0, "max": 1.0, "mean": 0.0}
]}
J
A="$T/m.wpack"
expect create "$WPACK" create -q -o "$A" "$T/w0.npy" --stats "$T/stats.json"

# a wrapper module (`model = Wrapper(nn.Sequential(...))`): every path is model.N;
# the op at "t.py":N:1 is the one that must get stats
cat >"$T/wrap.mlir" <<'M'
module {
  ml_program.global private @w0(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32>
  func.func @forward(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %w = ml_program.global_load_const @w0 : tensor<4x4xf32> loc("model.0"("t.py":1:1))
    %a = arith.addf %x, %w : tensor<4x4xf32> loc("model.0"("t.py":2:1))
    %b = arith.mulf %a, %a : tensor<4x4xf32> loc("model.1"("t.py":3:1))
    %c = arith.negf %b : tensor<4x4xf32> loc("model.2.act"("t.py":4:1))
    return %c : tensor<4x4xf32> loc("t.py":5:1)
  }
}
M
cat >"$T/expect.json" <<'J'
{"ops": {"t.py:2": {"min": -2.5, "max": 1.5, "absmax": 2.5},
         "t.py:3": {"min": 0.0, "max": 3.0, "absmax": 3.0},
         "t.py:4": {"min": -1.0, "max": 1.0, "absmax": 1.0}},
 "globals": {"w0": {"min": -1.25, "max": 2.5, "absmax": 2.5}}}
J
echo '{"ops": {}, "globals": {"w0": {"min": -1.25, "max": 2.5, "absmax": 2.5}}}' >"$T/expect_none.json"

# 1. nothing annotated is an error that says why, and writes nothing
expect_fail wrapper_none_is_error "no op annotated.*'0', '1', '2'.*'model\.0'.*--strip-prefix.*\[WPACK_E_EMPTY\]$" \
    "$WPACK" resolve --annotate "$A" "$T/wrap.mlir" -o "$T/none.mlir"
[ "$(wc -l <"$T/err")" -eq 1 ] && pass wrapper_none_one_message || fail wrapper_none_one_message "$(cat "$T/err")"
no_file wrapper_none_writes_nothing "$T/none.mlir"
expect allow_none "$WPACK" resolve --annotate --allow-none "$A" "$T/wrap.mlir" -o "$T/none.mlir"
err_has allow_none_counts "annotated 0 ops with activation stats"
annotate_check allow_none_printed "$T/none.mlir" "$T/expect_none.json"

# 2. --strict names the unmatched records and ops, with counts
expect_fail strict_records "--strict: 3 of 3 activation stats records are named by no op's location: '0', '1', '2' \[WPACK_E_NOT_FOUND\]" \
    "$WPACK" resolve --annotate --strict "$A" "$T/wrap.mlir" -o "$T/s.mlir"
err_has strict_ops "--strict: 4 ops in function bodies have locations naming only module paths without activation stats: .*wrap\.mlir:4:5 'model\.0', 5:5 'model\.0', 6:5 'model\.1', 7:5 'model\.2\.act' \[WPACK_E_NOT_FOUND\]"
no_file strict_writes_nothing "$T/s.mlir"

# 3. --strip-prefix, with or without the dot
expect strip_prefix "$WPACK" resolve --annotate --strict --strip-prefix model "$A" "$T/wrap.mlir" -o "$T/strip.mlir"
err_has strip_prefix_counts "annotated 3 ops with activation stats and 1 globals"
annotate_check strip_prefix_printed "$T/strip.mlir" "$T/expect.json"
expect strip_prefix_dot "$WPACK" resolve -q --annotate --strip-prefix model. "$A" "$T/wrap.mlir" -o "$T/strip2.mlir"
cmp -s "$T/strip.mlir" "$T/strip2.mlir" && pass strip_prefix_dot_same || fail strip_prefix_dot_same "outputs differ"
expect strip_prefix_other_first "$WPACK" resolve -q --annotate --strip-prefix nothing --strip-prefix model "$A" "$T/wrap.mlir" -o "$T/strip3.mlir"
cmp -s "$T/strip.mlir" "$T/strip3.mlir" && pass strip_prefix_repeatable || fail strip_prefix_repeatable "outputs differ"
expect_fail strip_prefix_empty "non-empty.*\[WPACK_E_INVALID_ARGUMENT\]" "$WPACK" resolve --annotate --strip-prefix "" "$A" "$T/wrap.mlir" -o "$T/x.mlir"

# 4. --module-map: a path and the paths under it (model.2.act -> 2.act -> under 2)
echo '{"model.1": "1"}' >"$T/part.json"
expect_fail module_map_partial "--strict: 2 of 3 activation stats records .*: '0', '2' \[WPACK_E_NOT_FOUND\]" \
    "$WPACK" resolve --annotate --strict --module-map "$T/part.json" "$A" "$T/wrap.mlir" -o "$T/mm.mlir"
err_has module_map_partial_ops "3 ops .*4:5 'model\.0', 5:5 'model\.0', 7:5 'model\.2\.act'"
echo '{"model.0": "0", "model.1": "1", "model.2": "2"}' >"$T/full.json"
expect module_map_full "$WPACK" resolve -q --annotate --strict --module-map "$T/full.json" "$A" "$T/wrap.mlir" -o "$T/mm.mlir"
annotate_check module_map_printed "$T/mm.mlir" "$T/expect.json"
cmp -s "$T/strip.mlir" "$T/mm.mlir" && pass module_map_same_as_strip || fail module_map_same_as_strip "outputs differ"
echo '{"model.0": ""}' >"$T/empty.json"
expect_fail module_map_empty_value "empty module path.*\[WPACK_E_INPUT\]" \
    "$WPACK" resolve --annotate --module-map "$T/empty.json" "$A" "$T/wrap.mlir" -o "$T/x.mlir"
echo '["model.0"]' >"$T/array.json"
expect_fail module_map_not_object "expected a JSON object.*\[WPACK_E_INPUT\]" \
    "$WPACK" resolve --annotate --module-map "$T/array.json" "$A" "$T/wrap.mlir" -o "$T/x.mlir"

# 5. non-strict: partial matches succeed; the unmatched op is a note, the record a warning
echo '{"model.0": "0", "model.1": "1"}' >"$T/two.json"
expect partial_ok "$WPACK" resolve --annotate --module-map "$T/two.json" "$A" "$T/wrap.mlir" -o "$T/p.mlir"
err_has partial_warns_record "warning: activation stats '2': no op in a function body"
err_has partial_notes_op "note: 1 ops .*7:5 'model\.2\.act' \(--strict makes this an error\)"

# 6. torch dynamo / torch_xla paths: L['self'].N in nn_module_stack JSON and in a name
cat >"$T/dyn.mlir" <<'M'
module {
  func.func @forward(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %a = arith.negf %x : tensor<4x4xf32> loc("{\22stack_trace\22: \22x.py\22, \22nn_module_stack\22: \22L__self___0,L['self'].0,torch.nn.modules.linear.Linear\22}"("t.py":2:1))
    %b = arith.mulf %a, %a : tensor<4x4xf32> loc("L['self'].1"("t.py":3:1))
    %c = arith.addf %b, %b : tensor<4x4xf32> loc(fused["L['self'].2", "t.py":4:1])
    return %c : tensor<4x4xf32> loc("t.py":5:1)
  }
}
M
echo '{"ops": {"t.py:2": {"min": -2.5, "max": 1.5, "absmax": 2.5}, "t.py:3": {"min": 0.0, "max": 3.0, "absmax": 3.0}, "t.py:4": {"min": -1.0, "max": 1.0, "absmax": 1.0}}}' >"$T/expect_dyn.json"
expect_fail dynamo_none "no op annotated.*L\['self'\]\.0.*\[WPACK_E_EMPTY\]" "$WPACK" resolve --annotate "$A" "$T/dyn.mlir" -o "$T/d.mlir"
expect dynamo_strip "$WPACK" resolve --annotate --strict --strip-prefix "L['self']" "$A" "$T/dyn.mlir" -o "$T/d.mlir"
err_has dynamo_strip_counts "annotated 3 ops"
annotate_check dynamo_strip_printed "$T/d.mlir" "$T/expect_dyn.json"

# 7. activation keys through `create --name IR=KEY` (the archive's wpack.module_names)
A2="$T/named.wpack"
expect create_name_module "$WPACK" create -q -o "$A2" "$T/w0.npy" --stats "$T/stats.json" \
    --name model.0=0 --name model.1=1 --name model.2=2 --name weight0=w0
"$WPACK" inspect --json "$A2" >"$T/inspect.json" 2>"$T/err"
if "$PY" -c "
import json, sys
j = json.load(open(sys.argv[1]))
meta = j['metadata']['wpack.module_names']
assert meta == ['model.0', '0', 'model.1', '1', 'model.2', '2'], meta
assert j['name_map'] == {'weight0': 'w0'}, j['name_map']
" "$T/inspect.json" 2>"$T/err2"; then pass create_name_stored; else fail create_name_stored "$(tail -c 400 "$T/err2")"; fi
expect resolve_with_archive_names "$WPACK" resolve -q --annotate --strict "$A2" "$T/wrap.mlir" -o "$T/n.mlir"
annotate_check archive_names_printed "$T/n.mlir" "$T/expect.json"
expect_fail create_name_nothing "no tensor 'nothing'" "$WPACK" create -q -o "$T/bad.wpack" "$T/w0.npy" --stats "$T/stats.json" --name model.9=nothing
no_file create_name_nothing_no_archive "$T/bad.wpack"
# the pairs survive `wpack convert` (metadata is copied)
expect convert_keeps_names "$WPACK" convert --compress zstd "$A2" -o "$T/conv.wpack"
expect resolve_converted "$WPACK" resolve -q --annotate --strict "$T/conv.wpack" "$T/wrap.mlir" -o "$T/n2.mlir"
annotate_check converted_printed "$T/n2.mlir" "$T/expect.json"

# 8. an archive without activation stats: 0 annotated says so
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.ones((4, 4), np.float32))" "$T/one.npy"
mkdir -p "$T/ones" && cp "$T/one.npy" "$T/ones/w0.npy"
expect create_plain "$WPACK" create -q -o "$T/plain.wpack" "$T/ones"
expect_fail no_activation_stats "archive has no activation stats.*--allow-none.*\[WPACK_E_EMPTY\]" \
    "$WPACK" resolve --annotate "$T/plain.wpack" "$T/wrap.mlir" -o "$T/x.mlir"
expect no_activation_stats_allowed "$WPACK" resolve -q --annotate --allow-none "$T/plain.wpack" "$T/wrap.mlir" -o "$T/x.mlir"

# 9. --emit uri output re-resolves after `wpack calibrate` changed the archive id
mkdir -p "$T/lin"
"$PY" -c "
import numpy as np, sys
d = sys.argv[1]
np.save(d + '/lin/0.weight.npy', (np.arange(12, dtype=np.float32).reshape(3, 4) - 4) / 10)
np.save(d + '/lin/0.bias.npy', np.array([0.5, -0.5, 0.0], np.float32))
np.save(d + '/x.npy', np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))" "$T"
C="$T/c.wpack"
expect create_chain "$WPACK" create -q -o "$C" "$T/lin" --layers 0,1=relu
cat >"$T/g.mlir" <<'M'
module {
  ml_program.global private @p0(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32>
  ml_program.global private @p1(#ml_program.extern : tensor<3xf32>) : tensor<3xf32>
  func.func @forward(%x: tensor<5x4xf32>) -> tensor<3x4xf32> {
    %w = ml_program.global_load_const @p0 : tensor<3x4xf32> loc("model.0"("t.py":1:1))
    %a = arith.negf %w : tensor<3x4xf32> loc("model.0"("t.py":2:1))
    %r = arith.negf %a : tensor<3x4xf32> loc("model.1"("t.py":3:1))
    return %r : tensor<3x4xf32> loc("t.py":4:1)
  }
}
M
echo '{"p0": "0.weight", "p1": "0.bias"}' >"$T/map.json"
expect uri_first "$WPACK" resolve -q --map "$T/map.json" "$C" "$T/g.mlir" -o "$T/g1.mlir"
id1=$("$PY" -c "import re,sys; print(re.search(r'wpack:([0-9a-f]{16})/0\.weight', open(sys.argv[1]).read()).group(1))" "$T/g1.mlir" 2>/dev/null)
expect calibrate "$WPACK" calibrate "$C" --input "$T/x.npy"
id2=$("$WPACK" inspect --json "$C" | "$PY" -c "import json,sys; print('%016x' % json.load(sys.stdin)['index_xxh3'])" 2>/dev/null ||
      "$WPACK" inspect "$C" | sed -n 's/.*index xxh3 \([0-9a-f]*\).*/\1/p')
[ -n "$id1" ] && [ -n "$id2" ] && [ "$id1" != "$id2" ] && pass calibrate_changed_id || fail calibrate_changed_id "ids '$id1' '$id2'"
# without --map: the entry names come back from the URIs; the old id is a note
expect uri_reresolve "$WPACK" resolve --annotate --strip-prefix model "$C" "$T/g1.mlir" -o "$T/g2.mlir"
err_has uri_reresolve_note "note: 2 globals' wpack.uri name archive $id1 \(first: .*g1\.mlir:2:3: global @p0\), not this one \($id2\)"
grep -q "wpack.uri = \"wpack:$id2/0.weight\"" "$T/g2.mlir" && grep -q "wpack.uri = \"wpack:$id2/0.bias\"" "$T/g2.mlir" &&
    pass uri_reresolve_new_id || fail uri_reresolve_new_id "$(grep wpack.uri "$T/g2.mlir")"
"$MLIR_OPT" "$T/g2.mlir" >/dev/null 2>"$T/err2" && pass uri_reresolve_parses || fail uri_reresolve_parses "$(head -c 300 "$T/err2")"
grep -q 'wpack.min' "$T/g2.mlir" && pass uri_reresolve_annotated || fail uri_reresolve_annotated "no calibrate stats on the ops"
expect_fail uri_strict "--strict: 2 globals' wpack.uri name archive $id1 .*\[WPACK_E_NOT_FOUND\]" \
    "$WPACK" resolve --strict "$C" "$T/g1.mlir" -o "$T/g3.mlir"
no_file uri_strict_writes_nothing "$T/g3.mlir"
expect uri_same_id_quiet "$WPACK" resolve --annotate --strip-prefix model "$C" "$T/g2.mlir" -o "$T/g4.mlir"
grep -q "wpack.uri name archive" "$T/err" && fail uri_same_id_no_note "$(cat "$T/err")" || pass uri_same_id_no_note
cmp -s "$T/g2.mlir" "$T/g4.mlir" && pass uri_reresolve_idempotent || fail uri_reresolve_idempotent "second run changed it"
# --map still overrides what a URI says
echo '{"p1": "0.weight"}' >"$T/override.json"
expect_fail uri_map_overrides "global @p1: type tensor<3xf32> does not match entry '0.weight'.*\[WPACK_E_SHAPE\]" \
    "$WPACK" resolve --map "$T/override.json" "$C" "$T/g1.mlir" -o "$T/x.mlir"
# a URI naming no entry, and one that is no wpack: URI
sed 's|/0.bias"|/gone"|' "$T/g1.mlir" >"$T/gone.mlir"
expect_fail uri_missing_entry "global @p1: its wpack.uri names entry 'gone', which is not in the archive.*\[WPACK_E_NOT_FOUND\]" \
    "$WPACK" resolve "$C" "$T/gone.mlir" -o "$T/x.mlir"
sed 's|wpack:[0-9a-f]*/0.bias|http://x/0.bias|' "$T/g1.mlir" >"$T/bad_uri.mlir"
expect_fail uri_malformed "global @p1: its wpack.uri is not a wpack: URI.*\[WPACK_E_INPUT\]" \
    "$WPACK" resolve "$C" "$T/bad_uri.mlir" -o "$T/x.mlir"
# percent-encoded names come back decoded
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.ones(3, np.float32))" "$T/sp.npy"
mkdir -p "$T/spd" && cp "$T/sp.npy" "$T/spd/a b.npy"
expect create_space "$WPACK" create -q -o "$T/sp.wpack" "$T/spd"
printf 'module {\n  ml_program.global private @g(#ml_program.extern : tensor<3xf32>) : tensor<3xf32>\n}\n' >"$T/sp.mlir"
echo '{"g": "a b"}' >"$T/spmap.json"
expect uri_pct_first "$WPACK" resolve -q --map "$T/spmap.json" "$T/sp.wpack" "$T/sp.mlir" -o "$T/sp1.mlir"
grep -q 'a%20b"' "$T/sp1.mlir" && pass uri_pct_encoded || fail uri_pct_encoded "$(cat "$T/sp1.mlir")"
expect uri_pct_reresolve "$WPACK" resolve -q "$T/sp.wpack" "$T/sp1.mlir" -o "$T/sp2.mlir"
cmp -s "$T/sp1.mlir" "$T/sp2.mlir" && pass uri_pct_same || fail uri_pct_same "differs"

# 10. a full disk: ulimit -f makes write() fail with EFBIG (SIGXFSZ ignored)
"$PY" -c "
import sys
with open(sys.argv[1], 'w') as f:
    f.write('module {\n')
    for i in range(3000):
        f.write('  ml_program.global private @p%d(#ml_program.extern : tensor<3x4xf32>) : tensor<3x4xf32>\n' % i)
    f.write('}\n')" "$T/big.mlir"
echo '{' >"$T/bigmap.json"; for i in $(seq 0 2998); do echo "\"p$i\": \"0.weight\","; done >>"$T/bigmap.json"; echo '"p2999": "0.weight"}' >>"$T/bigmap.json"
( ulimit -f 64; trap '' XFSZ; exec "$WPACK" resolve -q --map "$T/bigmap.json" "$C" "$T/big.mlir" -o "$T/big.out.mlir" ) >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && pass full_disk_resolve_rc || fail full_disk_resolve_rc "exit $rc"
err_has full_disk_resolve_msg "^wpack: $T/big.out.mlir: writing failed: File too large \[WPACK_E_IO\]$"
no_file full_disk_resolve_nothing_left "$T/big.out.mlir"
# ... with SIGXFSZ at its default, as under a user's `ulimit -f` or a batch
# system's RLIMIT_FSIZE: wpack ignores it itself (it ended the run with no
# message, exit 153, and left OUT.mlir.tmp-* behind)
( ulimit -f 64; trap - XFSZ; exec "$WPACK" resolve -q --map "$T/bigmap.json" "$C" "$T/big.mlir" -o "$T/big.out.mlir" ) >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && pass fsize_limit_resolve_rc || fail fsize_limit_resolve_rc "exit $rc"
err_has fsize_limit_resolve_msg "^wpack: $T/big.out.mlir: writing failed: File too large \[WPACK_E_IO\]$"
no_file fsize_limit_resolve_nothing_left "$T/big.out.mlir"
# externalize: the archive write fails ...
"$PY" -c "
import sys
with open(sys.argv[1], 'w') as f:
    f.write('module {\n  ml_program.global private @w(dense<\"0x' + '3F800000' * 60000 + '\"> : tensor<60000xf32>) : tensor<60000xf32>\n}\n')" "$T/inl.mlir"
( ulimit -f 64; trap '' XFSZ; exec "$WPACK" externalize -q "$T/inl.mlir" -o "$T/ext.mlir" --archive "$T/ext.wpack" ) >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && pass full_disk_ext_archive_rc || fail full_disk_ext_archive_rc "exit $rc"
err_has full_disk_ext_archive_msg "ext\.wpack.*File too large \[WPACK_E_IO\]$"
no_file full_disk_ext_archive_nothing_left "$T/ext.mlir" "$T/ext.wpack"
# ... and the MLIR write fails (a large f8 literal stays inline, a small weight moves)
"$PY" -c "
import sys
with open(sys.argv[1], 'w') as f:
    f.write('module {\n  ml_program.global private @big(dense<\"0x' + '00' * 400000 + '\"> : tensor<400000xf8E4M3FN>) : tensor<400000xf8E4M3FN>\n')
    f.write('  ml_program.global private @small(dense<1.0> : tensor<100xf32>) : tensor<100xf32>\n}\n')" "$T/inl2.mlir"
( ulimit -f 256; trap '' XFSZ; exec "$WPACK" externalize -q "$T/inl2.mlir" -o "$T/ext2.mlir" --archive "$T/ext2.wpack" --min-bytes 100 ) >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && pass full_disk_ext_mlir_rc || fail full_disk_ext_mlir_rc "exit $rc"
err_has full_disk_ext_mlir_msg "^wpack: $T/ext2.mlir: writing failed: File too large \[WPACK_E_IO\]$"
no_file full_disk_ext_mlir_nothing_left "$T/ext2.mlir" "$T/ext2.wpack"

# 11. every resolver error line ends with its code; no internal numbers
for args in "--emit bogus $A $T/wrap.mlir -o $T/x.mlir" "$A $T/nope.mlir -o $T/x.mlir" \
            "$T/nope.wpack $T/wrap.mlir -o $T/x.mlir" "$A $T/wrap.mlir" "--map $T/nope.json $A $T/wrap.mlir -o $T/x.mlir" \
            "--bogus $A $T/wrap.mlir -o $T/x.mlir"; do
    # shellcheck disable=SC2086
    "$WPACK" resolve $args >"$T/out" 2>"$T/err"
    bad=$(grep -v '^wpack: \(warning\|note\):' "$T/err" | grep -v '\[WPACK_E_[A-Z_]*\]$' | grep -v '^usage' | head -1)
    [ -z "$bad" ] && grep -q '\[WPACK_E_' "$T/err" && pass "codes: $args" || fail "codes: $args" "${bad:-no code}"
done
# an input that is a directory or a FIFO is refused (the FIFO without blocking)
expect_fail input_directory "$T: not a regular file \[WPACK_E_FILE_TYPE\]$" "$WPACK" resolve "$A" "$T" -o "$T/x.mlir"
mkfifo "$T/fifo"
expect_fail input_fifo "fifo: not a regular file \[WPACK_E_FILE_TYPE\]$" timeout 10 "$WPACK" resolve "$A" "$T/fifo" -o "$T/x.mlir"
expect_fail externalize_fifo "fifo: not a regular file \[WPACK_E_FILE_TYPE\]$" timeout 10 "$WPACK" externalize "$T/fifo" -o "$T/x.mlir" --archive "$T/x.wpack"
grep -rh 'kind [0-9]' "$T"/err* 2>/dev/null | grep -q . && fail no_kind_numbers || pass no_kind_numbers

finish
