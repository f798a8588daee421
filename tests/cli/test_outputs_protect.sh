#!/bin/bash
# test_outputs_protect.sh - two rules of every output:
#  1. any name the file system takes is an output. The temporary beside
#     OUT was "OUT.tmp-<pid>-<16 hex>": for a basename over ~225 bytes it
#     passed NAME_MAX (255) and the run failed with "cannot create a
#     temporary file beside it: File name too long"; a sharded set's shard
#     names ("NAME-0000k-of-0000n.wpack") likewise. The temporary's name is
#     now shortened (head cut, extension kept), and the sweep still finds a
#     killed run's shortened temporaries (and nothing else).
#  2. a write-protected file (no write bit in its mode, chmod a-w) is never
#     replaced nor updated in place: create/convert/cast -o, --in-place,
#     update, calibrate and extract refuse it naming the file, exit 1, and
#     leave it byte for byte; nor is a write-protected shard removed with
#     the set a new archive replaces. By the mode bits: this holds for root too,
#     whom access(W_OK) never stops (CI runs as root).
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1

$PY - <<'PYEOF' || fail fixtures "python failed"
import numpy as np
rng = np.random.default_rng(3)
np.save("l0.weight.npy", rng.standard_normal((4, 8)).astype(np.float32))
np.save("l0.bias.npy", rng.standard_normal(4).astype(np.float32))
np.save("x.npy", rng.standard_normal((2, 8)).astype(np.float32))
PYEOF
expect make_archive "$WPACK" create -q -o A.wpack l0.weight.npy l0.bias.npy
no_temp() { # no_temp NAME: no temporary left in $T
    if ls "$T" | grep -q '\.tmp-'; then fail "$1" "$(ls "$T" | grep '\.tmp-' | cut -c1-80)"; else pass "$1"; fi
}

# --- 1. long names ----------------------------------------------------------
L=$(printf 'w%.0s' $(seq 249)).wpack # 255 bytes: NAME_MAX
expect long_create "$WPACK" create -q -o "$L" l0.weight.npy l0.bias.npy
expect long_verify "$WPACK" verify "$L"
expect long_replace "$WPACK" create -q -o "$L" l0.weight.npy
"$WPACK" inspect "$L" | grep -q l0.bias && fail long_replaced "old archive still there" || pass long_replaced
expect long_convert "$WPACK" convert "$L" --compress zstd:1 --in-place
expect long_cast "$WPACK" cast A.wpack --to bf16 -o "$L"
U=$(printf '\xc3\xa9%.0s' $(seq 120)).wpack # 246 bytes of 2-byte characters
expect long_utf8 "$WPACK" create -q -o "$U" l0.weight.npy
expect long_export "$WPACK" export A.wpack --to safetensors -o "$(printf 's%.0s' $(seq 243)).safetensors"
no_temp long_no_temp
# a sharded set: its manifest and its shards
rm -f "$L"
expect long_shards "$WPACK" create -q --shard-size 100 -o "$L" l0.weight.npy l0.bias.npy
expect long_shards_verify "$WPACK" verify "$L"
n=$(ls | grep -c -- '-of-00002\.wpack$')
[ "$n" = 2 ] && pass long_shards_named || fail long_shards_named "$n shards: $(ls | cut -c1-60)"
expect long_shards_again "$WPACK" create -q --shard-size 100 -o "$L" l0.weight.npy l0.bias.npy
expect long_shards_again_verify "$WPACK" verify "$L"
no_temp long_shards_no_temp
# extract of a tensor whose name is long: a file name cut with its hash
N=$(printf 'n%.0s' $(seq 200)) # tensor "N.N": 401 bytes
mkdir -p "ed/$N" && cp l0.bias.npy "ed/$N/$N.npy"
expect long_entry "$WPACK" create -q -o E.wpack ed
mkdir -p ex
expect long_entry_extract "$WPACK" extract -q E.wpack -o ex
[ "$(ls ex | wc -l)" = 1 ] && pass long_entry_one_file || fail long_entry_one_file "$(ls ex)"
# the sweep: a killed writer's shortened temporary of L is removed by the
# next run to L (its stem: L's head then ".wpack", within NAME_MAX with room
# for the writer's other files); a user's file that only looks alike stays
pid=99999 # 5 digits: the stem keeps 255-49-(5+5+1+16)-6 = 173 bytes of head
stem=$(printf 'w%.0s' $(seq 173)).wpack
dead="$stem.tmp-$pid-0123456789abcdef"
: >"$dead"
: >"$dead.mine" # not a writer's continuation
: >"$stem.tmp-1234-0123456789abcdef" # a 4-digit pid: not L's stem for it
find . -maxdepth 1 -name '*-of-*' -delete
expect long_sweep_run "$WPACK" create -q -o "$L" l0.weight.npy
[ ! -e "$dead" ] && pass long_sweep_removed || fail long_sweep_removed "$(ls | cut -c1-60)"
[ -e "$dead.mine" ] && [ -e "$stem.tmp-1234-0123456789abcdef" ] && pass long_sweep_keeps_others ||
    fail long_sweep_keeps_others "$(ls | cut -c170-)"
rm -f "$dead.mine" "$stem.tmp-1234-0123456789abcdef"
# extract's sweep of DIR (by ".npy"): a shortened NAME.npy temporary too
: >"ex/$(printf 'q%.0s' $(seq 173)).npy.tmp-$pid-0123456789abcdef"
expect long_extract_sweep "$WPACK" extract -q E.wpack -o ex
[ "$(ls ex | wc -l)" = 1 ] && pass long_extract_swept || fail long_extract_swept "$(ls ex | cut -c1-60)"

# --- 2. write-protected targets ----------------------------------------------
cp A.wpack P.wpack
chmod 0444 P.wpack
sum=$(sha256sum <P.wpack)
# protected NAME CMD...: CMD exits 1 saying P.wpack is write-protected; P.wpack unchanged
protected() {
    local name=$1; shift
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -ne 1 ]; then
        fail "$name" "exit $rc: $(head -c 300 "$T/err")"
    elif ! grep -q "P\.wpack: write-protected (mode 0444).*chmod u+w it or remove it first" "$T/err"; then
        fail "$name" "message: $(head -c 300 "$T/err")"
    elif [ "$(sha256sum <P.wpack)" != "$sum" ] || [ "$(stat -c %a P.wpack)" != 444 ]; then
        fail "$name" "P.wpack changed"
    else
        pass "$name"
    fi
}
protected ro_create "$WPACK" create -q -o P.wpack l0.weight.npy
protected ro_convert_o "$WPACK" convert A.wpack --compress zstd:1 -o P.wpack
protected ro_convert_in_place "$WPACK" convert P.wpack --compress zstd:1 --in-place
protected ro_cast_in_place "$WPACK" cast P.wpack --to bf16 --in-place
protected ro_update "$WPACK" update P.wpack --meta k=v
protected ro_calibrate "$WPACK" calibrate P.wpack --layers l0 --input x.npy
protected ro_export "$WPACK" export A.wpack --to safetensors -o P.wpack
$PY -c "
import numpy as np
w = np.arange(16, dtype=np.float32)
open('i.mlir', 'w').write('module {\\n  ml_program.global private @w(dense<\"0x%s\"> : tensor<16xf32>) : tensor<16xf32>\\n}\\n' % w.tobytes().hex().upper())"
protected ro_externalize_archive "$WPACK" externalize -q i.mlir -o r.mlir --archive P.wpack
[ ! -e r.mlir ] && pass ro_externalize_no_mlir || fail ro_externalize_no_mlir "r.mlir written"
expect ro_externalize_make "$WPACK" externalize -q i.mlir -o r.mlir --archive X.wpack
cp r.mlir o.mlir && chmod 0444 o.mlir
expect_fail ro_resolve "o\.mlir: write-protected \(mode 0444\)" "$WPACK" resolve X.wpack r.mlir -o o.mlir
cmp -s r.mlir o.mlir && pass ro_resolve_kept || fail ro_resolve_kept "o.mlir changed"
ln -s P.wpack lnk-P
protected ro_through_link "$WPACK" create -q -o lnk-P l0.weight.npy
rm -f lnk-P
no_temp ro_no_temp
# extract: DIR/NAME.npy write-protected: refused before any file is written
mkdir -p rx
"$WPACK" extract -q A.wpack -o rx
chmod 0444 rx/l0.weight.npy
cp rx/l0.bias.npy bias.before
$PY -c "import numpy as np; np.save('rx/l0.bias.npy', np.zeros(1, np.float32))"
expect_fail ro_extract "l0\.weight\.npy: write-protected" "$WPACK" extract -q A.wpack -o rx
cmp -s rx/l0.bias.npy bias.before && fail ro_extract_nothing_written "l0.bias.npy rewritten" ||
    pass ro_extract_nothing_written
# a set whose manifest is writable but a shard write-protected: replacing
# the set removed the shard (chmod a-w set-0000* did not keep it)
mkdir -p rs
expect ro_set_make "$WPACK" create -q --shard-size 100 -o rs/set.wpack l0.weight.npy l0.bias.npy
chmod 0444 rs/set-00002-of-00002.wpack
ssum=$(cat rs/* | sha256sum)
expect_fail ro_set_shard "set-00002-of-00002\.wpack \(a shard of the set .*\): write-protected" \
    "$WPACK" create -q -o rs/set.wpack l0.weight.npy
[ "$(cat rs/* | sha256sum)" = "$ssum" ] && [ "$(ls rs | wc -l)" = 3 ] && pass ro_set_kept ||
    fail ro_set_kept "$(ls rs)"
# a write bit for anyone is enough (the rule is the mode, not who runs)
chmod 0644 P.wpack
expect rw_create "$WPACK" create -q -o P.wpack l0.weight.npy
[ "$(stat -c %a P.wpack)" = 644 ] && pass rw_keeps_mode || fail rw_keeps_mode "$(stat -c %a P.wpack)"

finish
