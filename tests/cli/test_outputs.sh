#!/bin/bash
# test_outputs.sh - outputs never destroy inputs (issue 13, point 1, and its
# stray temp files): every command refuses an output that is the same file
# as an input - spelled the same, as ./x, through a symlink or a hard link -
# or two outputs that are the same file, and leaves the input byte for byte
# as it was; convert/cast --in-place rewrite an archive crash-safely; created
# files follow the umask; a killed run's temp file is removed by the next run
# to the same output, a live run's is not.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1

$PY - <<'PYEOF' || fail fixtures "python failed"
import numpy as np, torch
rng = np.random.default_rng(7)
np.save("l0.weight.npy", rng.standard_normal((4, 8)).astype(np.float32))
np.save("l0.bias.npy", rng.standard_normal(4).astype(np.float32))
np.save("t0.npy", rng.standard_normal((16, 16)).astype(np.float32))
np.save("x.npy", rng.standard_normal((2, 8)).astype(np.float32))
np.save("z.npy", np.zeros((64, 64), np.float32))  # compresses
# a training checkpoint: losing it loses the optimizer state and the epoch
torch.save({"model": {"w": torch.ones(4, 4)}, "optim": {"lr": 0.1}, "epoch": 3}, "c.pt")
w = rng.standard_normal(64).astype(np.float32)
open("i.mlir", "w").write(
    'module {\n  ml_program.global private @w(dense<"0x%s"> : tensor<64xf32>) : tensor<64xf32>\n}\n'
    % w.tobytes().hex().upper())
PYEOF
expect make_archive "$WPACK" create -q -o A.wpack l0.weight.npy l0.bias.npy t0.npy z.npy
expect make_mlir "$WPACK" externalize -q i.mlir -o r.mlir --archive E.wpack
echo '{"w": "w"}' >map.json

# same_file NAME INPUT CMD... : CMD (with @OUT@ replaced by each spelling of
# INPUT) exits 1 with WPACK_E_SAME_FILE and INPUT is unchanged.
same_file() {
    local name=$1 in=$2 sum v tag out rc dir base
    shift 2
    dir=$(dirname "$in") base=$(basename "$in")
    sum=$(sha256sum <"$in")
    rm -f "$dir/lnk-$base" "$dir/hrd-$base"
    ln -s "$base" "$dir/lnk-$base" && ln "$in" "$dir/hrd-$base" || { fail "${name}_links" "cannot make links"; return; }
    for v in "plain:$in" "dot:./$in" "symlink:$dir/lnk-$base" "hardlink:$dir/hrd-$base"; do
        tag=${v%%:*} out=${v#*:}
        local args=()
        for a in "$@"; do args+=("${a//@OUT@/$out}"); done
        "${args[@]}" >"$T/out" 2>"$T/err"
        rc=$?
        if [ $rc -ne 1 ]; then
            fail "${name}_$tag" "exit $rc: $(head -c 300 "$T/err")"
        elif ! grep -q "same file.*\[WPACK_E_SAME_FILE\]" "$T/err"; then
            fail "${name}_$tag" "message: $(head -c 300 "$T/err")"
        elif [ "$(sha256sum <"$in")" != "$sum" ]; then
            fail "${name}_$tag" "$in changed"
        else
            pass "${name}_$tag"
        fi
    done
    ls "$dir" | grep -q '\.tmp-' && fail "${name}_no_temp" "$(ls "$dir" | grep '\.tmp-')" || pass "${name}_no_temp"
    rm -f "$dir/lnk-$base" "$dir/hrd-$base"
}

# --- the cases of issue 13, point 1
same_file create_onto_checkpoint c.pt "$WPACK" create -q -o @OUT@ --key model c.pt
grep -q "output '.*' is the same file as input 'c.pt'" "$T/err" && pass message_names_both ||
    fail message_names_both "$(cat "$T/err")"
same_file create_onto_stats map.json "$WPACK" create -q -o @OUT@ --stats map.json t0.npy
same_file externalize_out_is_archive E.wpack "$WPACK" externalize -q i.mlir -o @OUT@ --archive E.wpack
same_file externalize_onto_input i.mlir "$WPACK" externalize -q i.mlir -o @OUT@ --archive E2.wpack
same_file externalize_archive_onto_input i.mlir "$WPACK" externalize -q i.mlir -o o.mlir --archive @OUT@
same_file resolve_onto_archive E.wpack "$WPACK" resolve -q E.wpack r.mlir -o @OUT@
same_file resolve_onto_input r.mlir "$WPACK" resolve -q E.wpack r.mlir -o @OUT@
same_file resolve_onto_map map.json "$WPACK" resolve -q --map map.json E.wpack r.mlir -o @OUT@
same_file export_onto_archive A.wpack "$WPACK" export A.wpack --to npz -o @OUT@
same_file convert_onto_archive A.wpack "$WPACK" convert A.wpack --compress zstd -o @OUT@
grep -q "use --in-place" "$T/err" && pass convert_hints_in_place || fail convert_hints_in_place "$(cat "$T/err")"
same_file cast_onto_archive A.wpack "$WPACK" cast A.wpack --to bf16 -o @OUT@
same_file run_onto_archive A.wpack "$WPACK" run A.wpack --layers l0 --input x.npy -o @OUT@
same_file run_onto_input x.npy "$WPACK" run A.wpack --layers l0 --input x.npy -o @OUT@
# files an input names are inputs too (a safetensors index's shard, a raw
# manifest's data file): before, `create -o` replaced them with the archive
mkdir -p named/st named/raw
$PY - <<'PYEOF' || fail named_fixtures
import json, struct, numpy as np
np.arange(6, dtype="f4").tofile("named/raw/w.bin")
json.dump({"tensors": [{"name": "enc.w", "dtype": "f32", "shape": [2, 3], "file": "w.bin"}]},
          open("named/raw/manifest.json", "w"))
def st(path, name, a):
    h = json.dumps({name: {"dtype": "F32", "shape": list(a.shape), "data_offsets": [0, a.nbytes]}}).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + a.tobytes())
st("named/st/model-00001-of-00002.safetensors", "a", np.ones(4, "f4"))
st("named/st/model-00002-of-00002.safetensors", "b", np.zeros(4, "f4"))
json.dump({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                          "b": "model-00002-of-00002.safetensors"}},
          open("named/st/model.safetensors.index.json", "w"))
PYEOF
same_file create_onto_index_shard named/st/model-00002-of-00002.safetensors \
    "$WPACK" create -q -o @OUT@ named/st/model.safetensors.index.json
same_file create_onto_manifest_file named/raw/w.bin "$WPACK" create -q -o @OUT@ named/raw/manifest.json
grep -q "w.bin is the same file as the output (or one it replaces)" "$T/err" && pass named_file_message ||
    fail named_file_message "$(cat "$T/err")"
# extract: DIR/NAME.npy is the archive itself
mkdir -p ex && cp A.wpack ex/t0.npy
sum=$(sha256sum <ex/t0.npy)
expect_fail extract_onto_archive "same file.*\[WPACK_E_SAME_FILE\]" "$WPACK" extract ex/t0.npy -o ex
[ "$(sha256sum <ex/t0.npy)" = "$sum" ] && [ "$(ls ex)" = t0.npy ] && pass extract_wrote_nothing ||
    fail extract_wrote_nothing "$(ls ex)"

# --- sharded archives: their shard files are inputs too
expect make_set "$WPACK" create -q --shard-size 1K -o set.wpack l0.weight.npy t0.npy
shard=$(ls set-00001-of-*.wpack 2>/dev/null | head -1)
if [ -n "$shard" ]; then
    same_file export_onto_shard "$shard" "$WPACK" export set.wpack --to tar -o @OUT@
    same_file resolve_onto_shard "$shard" "$WPACK" resolve -q set.wpack r.mlir -o @OUT@ --allow-missing
    # create: a shard of the set being replaced is removed with it, so it
    # cannot be an input
    sum_shard=$(sha256sum <"$shard")
    expect_fail create_old_shard_as_input "is a shard of the set at output 'set.wpack'.*\[WPACK_E_SAME_FILE\]" \
        "$WPACK" create -q --shard-size 1K -o set.wpack "$shard"
    [ "$(sha256sum <"$shard")" = "$sum_shard" ] && "$WPACK" verify set.wpack >/dev/null 2>&1 &&
        pass create_old_set_unchanged || fail create_old_set_unchanged
    # the same for one archive (not a set) written over the manifest, by
    # create and by convert -o: it removes the set's shards once in place
    expect_fail create_single_old_shard_as_input "is a shard of the set at output 'set.wpack'.*\[WPACK_E_SAME_FILE\]" \
        "$WPACK" create -q -o set.wpack "$shard"
    expect_fail convert_old_shard_as_input "is a shard of the set at output 'set.wpack'.*\[WPACK_E_SAME_FILE\]" \
        "$WPACK" convert -q "$shard" --compress zstd -o set.wpack
    [ "$(sha256sum <"$shard")" = "$sum_shard" ] && "$WPACK" verify set.wpack >/dev/null 2>&1 &&
        pass single_old_set_unchanged || fail single_old_set_unchanged
    cp -p set.wpack set-*.wpack ex/ # the set as it was, for the next case
    expect create_single_over_set "$WPACK" create -q -o set.wpack t0.npy
    [ -z "$(ls set-*.wpack 2>/dev/null)" ] && "$WPACK" verify set.wpack >/dev/null 2>&1 &&
        pass single_over_set_removed_shards || fail single_over_set_removed_shards "$(ls set*)"
    rm -f set.wpack && mv ex/set*.wpack .
    # a file of the user's named like a shard of the new set: never
    # renamed over (the new shard takes NAME-0000k-of-0000N.2.wpack)
    echo mine >n-00001-of-00001.wpack
    expect create_beside_shard_named_file "$WPACK" create -q --shard-size 1K -o n.wpack t0.npy
    [ "$(cat n-00001-of-00001.wpack)" = mine ] && [ -f n-00001-of-00001.2.wpack ] &&
        "$WPACK" verify n.wpack >/dev/null 2>&1 && pass create_shard_named_file_unchanged ||
        fail create_shard_named_file_unchanged "$(ls n*)"
else
    fail sharded_set_made "$(ls)"
fi
# a file under an input directory
mkdir -p d && cp t0.npy d/
# --follow-links: same_file puts a symlink to the input beside it, inside d
same_file create_onto_file_in_dir d/t0.npy "$WPACK" create -q --follow-links -o @OUT@ d

# --- two outputs that are the same file, also when neither exists yet
for v in "plain:new.x" "dot:./new.x" "dir:../$(basename "$T")/new.x"; do
    expect_fail "two_outputs_${v%%:*}" "outputs .* are the same file.*\[WPACK_E_SAME_FILE\]" \
        "$WPACK" externalize -q i.mlir -o new.x --archive "${v#*:}"
    [ ! -e new.x ] && pass "two_outputs_${v%%:*}_nothing_written" || fail "two_outputs_${v%%:*}_nothing_written"
done
ln -s E.wpack lnk-E
expect_fail two_outputs_symlink "outputs .* are the same file" "$WPACK" externalize -q i.mlir -o lnk-E --archive E.wpack
rm -f lnk-E
# ... and through a bind mount of the directory: another path, no symlink in
# it (the directories were compared by realpath, which does not see a bind
# mount: the MLIR was renamed over the new archive, and the command said ok)
mkdir -p bind-src bind-dst
if unshare -rm true 2>/dev/null; then
    unshare -rm sh -c 'mount --bind "$1/bind-src" "$1/bind-dst" && exec "$2" externalize -q "$1/i.mlir" -o "$1/bind-src/n.x" --archive "$1/bind-dst/n.x"' \
        sh "$PWD" "$WPACK" >"$T/out" 2>"$T/err"
    rc=$?
    { [ $rc -eq 1 ] && grep -q "outputs .* are the same file.*\[WPACK_E_SAME_FILE\]" "$T/err"; } &&
        pass two_outputs_bind_mount || fail two_outputs_bind_mount "exit $rc: $(head -c 300 "$T/err")"
    [ ! -e bind-src/n.x ] && pass two_outputs_bind_mount_nothing_written || fail two_outputs_bind_mount_nothing_written
else
    fail two_outputs_bind_mount "unshare -rm (a mount namespace to bind-mount in) is not available here"
fi

# --- --in-place
mkdir -p before after
"$WPACK" extract -q A.wpack -o before
expect convert_in_place "$WPACK" convert A.wpack --compress zstd:1 --compress-min 64 --in-place
expect convert_in_place_verifies "$WPACK" verify A.wpack
"$WPACK" inspect A.wpack | grep -q zstd && pass convert_in_place_compressed || fail convert_in_place_compressed
"$WPACK" extract -q A.wpack -o after
diff -r before after >/dev/null && pass convert_in_place_same_data || fail convert_in_place_same_data
ln -s A.wpack lnk-A
expect convert_in_place_through_link "$WPACK" convert lnk-A --decompress --in-place
[ -L lnk-A ] && ! "$WPACK" inspect A.wpack | grep -q zstd && pass in_place_replaces_link_target ||
    fail in_place_replaces_link_target "$(ls -l lnk-A)"
rm -f lnk-A
expect cast_in_place "$WPACK" cast A.wpack --to bf16 --in-place
expect cast_in_place_verifies "$WPACK" verify A.wpack
"$WPACK" inspect A.wpack | grep -Eq '^l0.weight +bf16' && pass cast_in_place_cast || fail cast_in_place_cast "$("$WPACK" inspect A.wpack)"
ls | grep -q '\.tmp-' && fail in_place_no_temp || pass in_place_no_temp
"$WPACK" convert A.wpack --decompress --in-place -o B.wpack >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "choose one" "$T/err" && pass in_place_and_o_usage || fail in_place_and_o_usage "$(cat "$T/err")"
"$WPACK" cast A.wpack --to f16 --in-place -o B.wpack >/dev/null 2>&1
[ $? -eq 2 ] && [ ! -e B.wpack ] && pass cast_in_place_and_o_usage || fail cast_in_place_and_o_usage
expect_fail in_place_sharded "sharded set.*\[WPACK_E_UNSUPPORTED\]" "$WPACK" convert set.wpack --compress zstd --in-place
# an output whose temporary cannot be created: what, where and the code
for c in "convert A.wpack --compress zstd" "cast A.wpack --to f16"; do
    expect_fail "${c%% *}_out_no_dir" "nodir/x\.wpack: cannot create a temporary file beside it.*\[WPACK_E_IO\]" \
        "$WPACK" $c -o nodir/x.wpack
done
# export says the path once (it used to prefix the atomic file's "PATH: ..." with PATH again)
for f in safetensors npz; do
    "$WPACK" export A.wpack --to $f -o nodir/x.$f >/dev/null 2>"$T/err"
    [ $? -ne 0 ] && grep -q "^wpack: nodir/x\.$f: cannot create a temporary file beside it" "$T/err" &&
        [ "$(grep -o 'nodir/x' "$T/err" | wc -l)" = 1 ] && pass export_${f}_out_no_dir ||
        fail export_${f}_out_no_dir "$(cat "$T/err")"
done

# --- created files follow the umask (no fixed mode, no umask() in the library)
mkdir -p um
(
    umask 027
    "$WPACK" create -q -o um/m.wpack t0.npy l0.weight.npy l0.bias.npy &&
        "$WPACK" convert um/m.wpack --compress zstd -o um/c.wpack &&
        "$WPACK" cast um/m.wpack --to f16 -o um/h.wpack &&
        "$WPACK" export um/m.wpack --to safetensors -o um/m.safetensors &&
        "$WPACK" extract -q um/m.wpack -o um/x t0 &&
        "$WPACK" externalize -q i.mlir -o um/e.mlir --archive um/e.wpack &&
        "$WPACK" resolve -q um/e.wpack um/e.mlir -o um/r.mlir &&
        "$WPACK" run um/m.wpack --layers l0 --input x.npy -o um/y.npy
) 2>"$T/err" || fail umask_runs "$(head -c 300 "$T/err")"
for f in m.wpack c.wpack h.wpack m.safetensors x/t0.npy e.mlir e.wpack r.mlir y.npy; do
    m=$(stat -c %a "um/$f" 2>/dev/null)
    [ "$m" = 640 ] && pass "umask_027_$f" || fail "umask_027_$f" "mode $m"
done
# --- a file replaced keeps its permission bits (as cp and > keep them): a
# private archive rewritten (--in-place, or -o over it) came back 0644 under
# umask 022, readable by everyone; a sharded set's shards take them too
mkdir -p pm
(
    umask 022
    cp A.wpack pm/in.wpack && chmod 600 pm/in.wpack &&
        "$WPACK" convert -q pm/in.wpack --compress zstd --in-place &&
        cp A.wpack pm/c.wpack && chmod 640 pm/c.wpack &&
        "$WPACK" cast -q pm/c.wpack --to f16 --in-place &&
        cp A.wpack pm/o.wpack && chmod 600 pm/o.wpack &&
        "$WPACK" create -q -o pm/o.wpack t0.npy &&
        mkdir -p pm/x && cp t0.npy pm/x/t0.npy && chmod 600 pm/x/t0.npy &&
        "$WPACK" extract -q A.wpack -o pm/x t0 &&
        cp A.wpack pm/s.wpack && chmod 600 pm/s.wpack &&
        "$WPACK" create -q -o pm/s.wpack --shard-size 1K t0.npy l0.weight.npy &&
        "$WPACK" create -q -o pm/new.wpack t0.npy
) 2>"$T/err" || fail keep_mode_runs "$(head -c 300 "$T/err")"
for fm in in.wpack:600 c.wpack:640 o.wpack:600 x/t0.npy:600 s.wpack:600 new.wpack:644; do
    f=${fm%:*} m=$(stat -c %a "pm/${fm%:*}" 2>/dev/null)
    [ "$m" = "${fm#*:}" ] && pass "keep_mode_$f" || fail "keep_mode_$f" "mode $m, want ${fm#*:}"
done
n=0
for f in pm/s-0000*.wpack; do
    n=$((n + 1))
    [ "$(stat -c %a "$f")" = 600 ] || fail keep_mode_shards "$f: mode $(stat -c %a "$f")"
done
[ $n -ge 2 ] && pass keep_mode_shards_checked || fail keep_mode_shards_checked "$n shards"
# ... and its owner and group, where the caller may give them (root
# rewriting a user's archive left it root's; cp keeps the owner)
if [ "$(id -u)" = 0 ]; then
    mkdir -p po && chmod 755 po
    for f in in.wpack o.wpack s.wpack; do cp A.wpack "po/$f" && chown 65534:65534 "po/$f"; done
    mkdir -p po/x && cp t0.npy po/x/t0.npy && chown 65534:65534 po/x/t0.npy
    { "$WPACK" convert -q po/in.wpack --compress zstd --in-place &&
        "$WPACK" create -q -o po/o.wpack t0.npy &&
        "$WPACK" extract -q A.wpack -o po/x t0 &&
        "$WPACK" create -q -o po/s.wpack --shard-size 1K t0.npy l0.weight.npy &&
        "$WPACK" create -q -o po/new.wpack t0.npy; } 2>"$T/err" || fail keep_owner_runs "$(head -c 300 "$T/err")"
    for fo in in.wpack:65534:65534 o.wpack:65534:65534 x/t0.npy:65534:65534 s.wpack:65534:65534 new.wpack:0:0; do
        f=${fo%%:*} o=$(stat -c %u:%g "po/$f" 2>/dev/null)
        [ "$o" = "${fo#*:}" ] && pass "keep_owner_$f" || fail "keep_owner_$f" "owner $o, want ${fo#*:}"
    done
    n=0
    for f in po/s-0000*.wpack; do
        n=$((n + 1))
        [ "$(stat -c %u "$f")" = 65534 ] || fail keep_owner_shards "$f: owner $(stat -c %u "$f")"
    done
    [ $n -ge 2 ] && pass keep_owner_shards_checked || fail keep_owner_shards_checked "$n shards"
else
    echo "SKIP keep_owner_*: needs root to own files as another user (not counted)"
fi
if nm -D --undefined-only "$(dirname "$WPACK")/libwpack.so" 2>/dev/null | grep -qw umask; then
    fail library_calls_no_umask
else
    nm -D "$(dirname "$WPACK")/libwpack.so" >/dev/null 2>&1 && pass library_calls_no_umask ||
        fail library_calls_no_umask "no libwpack.so beside $WPACK"
fi

# --- dead temp files are swept by the next run to the same output; live ones stay
dead=out.wpack.tmp-99999-0123456789abcdef
live=out.wpack.tmp-99998-fedcba9876543210
echo junk >$dead
echo junk >$dead.shard-00001          # a dead writer's finished shard
echo junk >out.wpack.tmp-1-aaaaaaaaaaaaaaaa.shard-00002   # a shard whose writer's temp is gone
echo junk >out.wpack.tmp-XXXXXX       # not our naming: never touched
ln -s t0.npy out.wpack.tmp-2-bbbbbbbbbbbbbbbb  # not a regular file: never touched
echo junk >other.wpack.tmp-3-cccccccccccccccc  # another target's
echo junk >$live
( exec 9>>$live; flock -x 9; exec sleep 60 ) &  # the sleep alone holds the lock
holder=$!
for i in $(seq 50); do                # until the holder has its lock
    flock -xn $live true 2>/dev/null || break
    sleep 0.1
done
expect sweep_run "$WPACK" create -q -o out.wpack t0.npy
[ ! -e $dead ] && pass sweep_dead_removed || fail sweep_dead_removed
[ ! -e $dead.shard-00001 ] && pass sweep_dead_shard_removed || fail sweep_dead_shard_removed
[ ! -e out.wpack.tmp-1-aaaaaaaaaaaaaaaa.shard-00002 ] && pass sweep_orphan_removed || fail sweep_orphan_removed
[ -e $live ] && pass sweep_live_kept || fail sweep_live_kept
[ -e out.wpack.tmp-XXXXXX ] && [ -L out.wpack.tmp-2-bbbbbbbbbbbbbbbb ] && [ -e other.wpack.tmp-3-cccccccccccccccc ] &&
    pass sweep_leaves_others || fail sweep_leaves_others "$(ls)"
kill $holder 2>/dev/null
wait $holder 2>/dev/null
expect sweep_run_again "$WPACK" convert out.wpack --compress zstd -o out.wpack.z
expect sweep_after_holder_exit "$WPACK" create -q -o out.wpack t0.npy
[ ! -e $live ] && pass sweep_live_removed_once_dead || fail sweep_live_removed_once_dead
# extract sweeps DIR once for every NAME.npy
echo junk >ex2.tmp && mkdir -p ex2 && mv ex2.tmp ex2/t0.npy.tmp-5-0123456789abcdef
expect extract_sweeps "$WPACK" extract -q out.wpack -o ex2
[ "$(ls ex2)" = t0.npy ] && pass extract_dead_temp_removed || fail extract_dead_temp_removed "$(ls ex2)"

# --- an empty output path is a usage error, found before any work: it was
# taken, the whole output written to a temporary, and only the rename to ""
# failed ("wpack: : cannot rename into place", exit 1)
for c in "create -q -o @ t0.npy" "export A.wpack --to npz -o @" "extract -q A.wpack -o @" \
    "convert A.wpack --compress zstd --output @" "resolve -q E.wpack r.mlir -o @" \
    "externalize -q i.mlir -o e0.mlir --archive @"; do
    args=()
    for a in $c; do [ "$a" = @ ] && args+=("") || args+=("$a"); done
    "$WPACK" "${args[@]}" >"$T/out" 2>"$T/err"
    rc=$?
    { [ $rc -eq 2 ] && grep -q "option .*: an empty path names no file" "$T/err"; } &&
        pass "empty_output_${c%% *}" || fail "empty_output_${c%% *}" "exit $rc: $(head -c 300 "$T/err")"
done
[ ! -e e0.mlir ] && pass empty_output_nothing_written || fail empty_output_nothing_written

# --- what is at OUT: a regular file is replaced; a device, FIFO, socket or
# directory never is (before, the rename put a regular file in place of a
# FIFO or device node: `-o /dev/null` as root replaced /dev/null); a symlink
# of ours is written through (its target replaced, the link kept, as cp and
# torch.save do), a dangling one or another user's is refused; names
# extract derives never follow a link out of DIR.
mkdir -p kinds/real kinds/dir
mkfifo kinds/fifo
ln -s real/t.wpack kinds/link.wpack
ln -s nowhere.wpack kinds/dangling.wpack
for k in fifo dir dangling.wpack; do
    expect_fail "out_${k%.wpack}_refused" "kinds/$k: .*not replaced \[WPACK_E_FILE_TYPE\]" \
        timeout 20 "$WPACK" create -q -o "kinds/$k" t0.npy
done
[ -p kinds/fifo ] && [ -d kinds/dir ] && [ -L kinds/dangling.wpack ] && [ ! -e kinds/nowhere.wpack ] &&
    pass out_kinds_kept || fail out_kinds_kept "$(ls -la kinds)"
# -o /dev/stdout onto a pipe: /proc/self/fd/1 leads to "pipe:[N]", no path;
# refused saying so (it said the link's target "does not exist")
expect_fail out_stdout_pipe_refused "/dev/stdout: a symlink to a FIFO that has no path of its own.*not replaced; give a file name \[WPACK_E_FILE_TYPE\]" \
    bash -c 'set -o pipefail; "$0" create -q -o /dev/stdout t0.npy | cat' "$WPACK"
expect_fail export_fifo_refused "FIFO, not a regular file: not replaced" \
    timeout 20 "$WPACK" export A.wpack --to safetensors -o kinds/fifo
expect_fail resolve_fifo_refused "FIFO, not a regular file: not replaced" \
    timeout 20 "$WPACK" resolve E.wpack r.mlir -o kinds/fifo
if [ "$(id -u)" -eq 0 ]; then
    mknod kinds/null c 1 3
    expect_fail out_device_refused "kinds/null: a character device, not a regular file" \
        "$WPACK" create -q -o kinds/null t0.npy
    [ -c kinds/null ] && pass out_device_kept || fail out_device_kept "$(ls -la kinds/null)"
    ln -s real/other.wpack kinds/theirs.wpack && cp A.wpack kinds/real/other.wpack && chown -h nobody kinds/theirs.wpack
    expect_fail out_foreign_link_refused "a symlink owned by another user: not followed" \
        "$WPACK" create -q -o kinds/theirs.wpack t0.npy
    cmp -s A.wpack kinds/real/other.wpack && pass out_foreign_link_target_kept || fail out_foreign_link_target_kept
else
    fail out_device_refused "not root: cannot make a device node or another user's link to check"
fi
cp A.wpack kinds/real/t.wpack
expect out_through_link "$WPACK" create -q -o kinds/link.wpack t0.npy
[ -L kinds/link.wpack ] && "$WPACK" inspect kinds/real/t.wpack | grep -q "^t0 " &&
    ! "$WPACK" inspect kinds/real/t.wpack | grep -q "^l0.weight" && [ -z "$(ls kinds/real | grep tmp)" ] &&
    pass out_link_target_replaced || fail out_link_target_replaced "$(ls -la kinds kinds/real)"
expect export_through_link "$WPACK" export A.wpack --to npz -o kinds/link.wpack
[ -L kinds/link.wpack ] && $PY -c "import numpy as np; assert 't0' in np.load('kinds/real/t.wpack')" &&
    pass export_link_target_replaced || fail export_link_target_replaced
# a sharded set through a link lands beside the link's target
expect shards_through_link "$WPACK" create -q --shard-size 2K -o kinds/link.wpack t0.npy z.npy
[ -L kinds/link.wpack ] && [ "$(ls kinds/real | grep -c -- '-of-')" -ge 2 ] && "$WPACK" verify kinds/real/t.wpack >/dev/null &&
    pass shards_beside_link_target || fail shards_beside_link_target "$(ls -la kinds kinds/real)"
# extract: DIR/t0.npy a link to a file outside DIR: the link is replaced, the file kept
mkdir -p exl && echo keep >outside.txt && ln -s ../outside.txt exl/t0.npy
expect extract_over_link "$WPACK" extract -q A.wpack -o exl t0
[ ! -L exl/t0.npy ] && [ "$(cat outside.txt)" = keep ] && pass extract_link_not_followed ||
    fail extract_link_not_followed "$(ls -la exl; cat outside.txt)"

# --- no failure is silent -------------------------------------------------
# Standard output that cannot be written: `inspect --json A > f.json` on a
# full disk (or into a closed stdout) left a cut f.json and exited 0.
if [ -w /dev/full ]; then
    for c in "inspect A.wpack" "inspect --json A.wpack" "verify A.wpack" "--version"; do
        "$WPACK" $c >/dev/full 2>"$T/err"
        rc=$?
        { [ $rc -eq 1 ] && grep -q "writing standard output failed: No space left on device.*\[WPACK_E_IO\]" "$T/err"; } &&
            pass "stdout_full_${c%% *}" || fail "stdout_full_${c%% *}" "exit $rc: $(head -c 300 "$T/err")"
    done
else
    fail stdout_full "no writable /dev/full here"
fi
"$WPACK" inspect A.wpack >&- 2>"$T/err"
[ $? -eq 1 ] && grep -q "writing standard output failed" "$T/err" && pass stdout_closed ||
    fail stdout_closed "$(cat "$T/err")"
# A file-size limit (ulimit -f): SIGXFSZ killed the run (status 153, no
# message, its temporary left beside OUT). Now the write fails with EFBIG,
# said with the user's path (messages named the temporary, OUT.tmp-PID-HEX,
# or a shard's OUT.tmp-...shard-00001.tmp-...), OUT as it was, nothing left.
"$PY" -c "import numpy as np; np.save('fsz.npy', np.random.default_rng(3).standard_normal(1 << 18).astype(np.float32))" ||
    fail fsize_input
expect fsize_archive "$WPACK" create -q -o fsz.wpack fsz.npy
cp A.wpack fs.wpack
sum=$(sha256sum <fs.wpack)
limited() { bash -c 'ulimit -f 256 && exec "$@"' limited "$@"; }
# fsize NAME PATTERN ARGS...: wpack ARGS under the limit fails saying PATTERN
fsize() {
    local name=$1 pat=$2
    shift 2
    expect_fail "fsize_$name" "^wpack: (fsz(\.npy)?: )?$pat: File too large \[WPACK_E_IO\]" limited "$WPACK" "$@"
    grep -q '\.tmp-' "$T/err" && fail "fsize_${name}_names_user_path" "$(cat "$T/err")" || pass "fsize_${name}_names_user_path"
    [ "$(sha256sum <fs.wpack)" = "$sum" ] && [ -z "$(ls | grep -e '^fs\.wpack\.tmp-' -e '^fs-0')" ] &&
        pass "fsize_${name}_old_kept" || fail "fsize_${name}_old_kept" "$(ls | grep '^fs')"
}
fsize create "fs\.wpack: (copying tensor bytes in|write) failed" create -q -o fs.wpack fsz.npy
fsize shards "fs\.wpack \(shard 1\): write failed" create -q --shard-size 64K -o fs.wpack fsz.npy t0.npy
fsize zstd "fs\.wpack: write failed" create -q --compress zstd:1 -o fs.wpack fsz.npy
fsize convert "fs\.wpack: write failed" convert -q fsz.wpack --compress zstd:1 -o fs.wpack
fsize export "fs\.wpack: tensor 'fsz': (writing its bytes|write) failed" export -q fsz.wpack --to npz -o fs.wpack
rm -f fs.wpack fsz.npy fsz.wpack

# --- the archive truncated by another process while it is read -------------
# Reads go through a map: a page past the new end faults (SIGBUS). The run
# ended as a "Bus error" crash; it now stops with an error saying so, and
# its output is not in place. The reader is stopped once it has mapped the
# archive, the file cut, the reader let go on.
"$PY" -c "
import numpy as np
np.save('big.npy', np.random.default_rng(1).standard_normal((4096, 8192)).astype(np.float32))
" || fail sigbus_input
for c in "verify" "convert --compress zstd:1 -o trunc.out.wpack"; do
    rm -f trunc.out.wpack
    "$WPACK" create -q -o trunc.wpack big.npy || fail sigbus_create
    "$WPACK" $c trunc.wpack >/dev/null 2>"$T/err" &
    pid=$!
    for i in $(seq 5000); do grep -q trunc.wpack "/proc/$pid/maps" 2>/dev/null && break; done
    kill -STOP "$pid" 2>/dev/null
    truncate -s 65536 trunc.wpack
    kill -CONT "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    { [ $rc -eq 1 ] && grep -q "shrank under this run.*\[WPACK_E_TRUNCATED\]" "$T/err"; } &&
        pass "truncated_while_read_${c%% *}" || fail "truncated_while_read_${c%% *}" "exit $rc: $(head -c 300 "$T/err")"
done
[ ! -e trunc.out.wpack ] && pass truncated_while_read_no_output || fail truncated_while_read_no_output
rm -f trunc.wpack trunc.out.wpack* big.npy

finish
