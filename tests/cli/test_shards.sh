#!/bin/bash
# test_shards.sh - `wpack create --shard-size`: shards + manifest that
# inspect, verify and extract treat as one archive; a changed or missing
# shard is refused by name.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/in/layers"
$PY - "$T/in" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(5)
for i in range(6):
    np.save(f"{d}/layers/{i}.weight.npy", rng.standard_normal((64, 64)).astype(np.float32))  # 16 KiB each
np.save(f"{d}/big.npy", rng.standard_normal((128, 128)).astype(np.float32))                # 64 KiB
PYEOF
mkdir -p "$T/set"
expect create_sharded "$WPACK" create -q --shard-size 40K --align 64 -o "$T/set/m.wpack" "$T/in" --name p_big=big
[ -f "$T/set/m.wpack" ] && ls "$T/set" | grep -q 'm-00001-of-0000[0-9].wpack' && pass shard_files || fail shard_files "$(ls "$T/set" 2>&1)"
n=$(ls "$T/set" | grep -c 'of-')
[ "$n" -ge 3 ] && pass several_shards || fail several_shards "$n shards"
[ ! -e "$T/set/m.wpack.whole" ] && ! ls "$T/set" | grep -q 'part\|tmp-' && pass no_leftover_files ||
    fail no_leftover_files "$(ls "$T/set")"
# a failure part way (the last input is cut short, found only as it streams,
# after shards were finished): no shard and no manifest remain
mkdir -p "$T/fail"
head -c 60000 "$T/in/big.npy" >"$T/zz_broken.npy"
expect_fail sharded_failure "zz_broken" "$WPACK" create -q --shard-size 20K -o "$T/fail/m.wpack" "$T/in" "$T/zz_broken.npy"
[ -z "$(ls -A "$T/fail")" ] && pass sharded_failure_leaves_nothing || fail sharded_failure_leaves_nothing "$(ls "$T/fail")"
expect inspect_manifest "$WPACK" inspect "$T/set/m.wpack"
grep -q '^shard 0: ' "$T/out" && grep -q "^layers.3.weight " "$T/out" && pass inspect_lists_shards || fail inspect_lists_shards
expect verify_set "$WPACK" verify "$T/set/m.wpack"
grep -q "OK: 7 tensors, 160.0 KiB of data in $n shards" "$T/out" && pass verify_counts_all ||
    fail verify_counts_all "$(cat "$T/out")"
expect extract_set "$WPACK" extract -q -o "$T/x" "$T/set/m.wpack"
$PY - "$T" <<'PYEOF' && pass extract_bit_identical || fail extract_bit_identical
import numpy as np, sys
t = sys.argv[1]
for i in range(6):
    assert np.load(f"{t}/x/layers.{i}.weight.npy").tobytes() == np.load(f"{t}/in/layers/{i}.weight.npy").tobytes()
assert np.load(f"{t}/x/big.npy").tobytes() == np.load(f"{t}/in/big.npy").tobytes()
PYEOF
expect extract_by_map_name "$WPACK" extract -q -o "$T/y" "$T/set/m.wpack" p_big
"$WPACK" inspect --json "$T/set/m.wpack" >"$T/m.json"
$PY - "$T/m.json" <<'PYEOF' && pass json_externals || fail json_externals
import json, sys
d = json.load(open(sys.argv[1]))
ext = [t for t in d["tensors"] if t["kind"] == "external"]
assert len(ext) == 7 and all("shard" in t for t in ext)
assert len(d["metadata"]["wpack.shards"]) == len(set(t["shard"] for t in ext))
assert d["name_map"] == {"p_big": "big"}
PYEOF
# create -o onto a shard of a set: refused (the manifest records the
# shard's length and index XXH3; it was replaced and the set broke)
first=$(ls "$T/set" | grep 'of-' | head -1)
cp "$T/set/$first" "$T/saved"
expect_fail create_onto_shard "$first is a shard of the set at .*m\.wpack.*whole set fail to open.*nothing was written.*\[WPACK_E_SHARD\]" \
    "$WPACK" create -q -o "$T/set/$first" "$T/in/big.npy"
cmp -s "$T/set/$first" "$T/saved" && "$WPACK" verify "$T/set/m.wpack" >/dev/null 2>&1 \
    && [ -z "$(ls -a "$T/set" | grep -v 'wpack$' | grep -v '^\.*$')" ] \
    && pass create_onto_shard_keeps_set || fail create_onto_shard_keeps_set "$(ls -a "$T/set")"
ln -s "$first" "$T/set/to_shard.wpack"
expect_fail create_onto_shard_link "to_shard.wpack -> .*$first is a shard of the set at .*\[WPACK_E_SHARD\]" \
    "$WPACK" create -q -o "$T/set/to_shard.wpack" "$T/in/big.npy"
rm "$T/set/to_shard.wpack"
# a copy of a shard is no shard: it does not name the set's manifest
expect convert_a_shard "$WPACK" convert -q --compress zstd "$T/set/$first" -o "$T/shard_copy.wpack"
"$WPACK" inspect "$T/shard_copy.wpack" | grep -q "wpack.manifest" \
    && fail convert_a_shard_no_manifest_key || pass convert_a_shard_no_manifest_key
# a shard replaced by a different archive: refused, naming it
"$WPACK" create -q -o "$T/other.wpack" "$T/in/big.npy" && cp "$T/other.wpack" "$T/set/$first"
expect_fail changed_shard "shard .*$first changed" "$WPACK" verify "$T/set/m.wpack"
rm "$T/set/$first"
expect_fail missing_shard "$first.*No such file" "$WPACK" inspect "$T/set/m.wpack"
cp "$T/saved" "$T/set/$first"
expect restored_shard "$WPACK" verify "$T/set/m.wpack"
# a set written through a symlink (-o replaces the link's target, and the
# shards go beside it) opens through the same link too, from any directory;
# it failed with "shard 0: .../lnk/m-00001-of-...: cannot open"
mkdir -p "$T/lnk" "$T/real"
"$WPACK" create -q -o "$T/real/m.wpack" "$T/in/big.npy"
ln -s ../real/m.wpack "$T/lnk/m.wpack"
expect create_through_link "$WPACK" create -q --shard-size 40K -o "$T/lnk/m.wpack" "$T/in"
[ -L "$T/lnk/m.wpack" ] && [ "$(ls "$T/lnk")" = m.wpack ] && ls "$T/real" | grep -q 'm-00001-of-' &&
    pass link_kept_set_beside_target || fail link_kept_set_beside_target "$(ls -l "$T/lnk" "$T/real")"
expect verify_through_link "$WPACK" verify "$T/lnk/m.wpack"
grep -q "OK: 7 tensors" "$T/out" && pass verify_through_link_all || fail verify_through_link_all "$(cat "$T/out")"
(cd "$T/lnk" && "$WPACK" extract -q -o "$T/lnkx" m.wpack big) >"$T/out" 2>"$T/err" &&
    cmp -s "$T/lnkx/big.npy" "$T/x/big.npy" && pass extract_through_link_relative ||
    fail extract_through_link_relative "$(cat "$T/err")"
expect verify_target "$WPACK" verify "$T/real/m.wpack"
# a damaged byte in a shard: the message names the shard file, not only the
# tensor (it named the tensor, leaving the search through the set's files)
cp -r "$T/set" "$T/dmg"
shard_of_big=$($PY - "$T/dmg" <<'PYEOF'
import json, subprocess, sys, os
d = json.loads(subprocess.run([os.environ["WPACK"], "inspect", "--json", sys.argv[1] + "/m.wpack"],
                              capture_output=True, check=True).stdout)
t = [t for t in d["tensors"] if t["name"] == "big"][0]
name = d["metadata"]["wpack.shards"][t["shard"]]
with open(os.path.join(sys.argv[1], name), "r+b") as f:
    f.seek(t["offset"] + 100)
    b = f.read(1)
    f.seek(t["offset"] + 100)
    f.write(bytes([b[0] ^ 1]))
print(name)
PYEOF
)
expect_fail damaged_shard_named "tensor 'big' \(shard .*/dmg/$shard_of_big\): checksum mismatch" "$WPACK" verify "$T/dmg/m.wpack"
expect_fail damaged_shard_named_extract "tensor 'big' \(shard .*/dmg/$shard_of_big\): checksum mismatch" \
    "$WPACK" extract -q -o "$T/dmgx" "$T/dmg/m.wpack" big
expect_fail shard_size_usage "want a byte count" "$WPACK" create -q --shard-size 0 -o "$T/z.wpack" "$T/in"

# convert -o / cast -o of a set: one archive holding every entry's own bytes
# (before, an entry in shard k was copied as an alias of entry k - the weights
# silently replaced, verify OK - or refused as "itself an alias"), without the
# set's wpack.shards / shard lengths / checksums
"$WPACK" create -q -o "$T/single.wpack" "$T/in" && "$WPACK" extract -q -o "$T/xs" "$T/single.wpack" ||
    fail single_reference
for c in "convert --decompress" "convert --compress zstd" "cast --to bf16 --only nothing"; do
    name=$(echo "$c" | tr ' -' '__')
    rm -rf "$T/xc"
    if "$WPACK" $c -q -o "$T/c.wpack" "$T/set/m.wpack" 2>"$T/err" && "$WPACK" extract -q -o "$T/xc" "$T/c.wpack" 2>>"$T/err" &&
        diff -r "$T/xs" "$T/xc" >/dev/null && ! "$WPACK" inspect "$T/c.wpack" | grep -q "wpack.shard" &&
        ! "$WPACK" inspect --json "$T/c.wpack" | grep -q '"kind": "alias"'; then
        pass "set_${name}_copies_bytes"
    else
        fail "set_${name}_copies_bytes" "$(head -c 300 "$T/err")"
    fi
done
# cast selects entries in shards like any other
expect cast_set_selects "$WPACK" cast -q --to bf16 --only 'layers.*' -o "$T/k.wpack" "$T/set/m.wpack"
[ "$("$WPACK" inspect "$T/k.wpack" | grep -c '^layers\.[0-9]*\.weight *bf16')" = 6 ] && pass cast_set_bf16 ||
    fail cast_set_bf16 "$("$WPACK" inspect "$T/k.wpack" | head -12)"
# A copy of a manifest (cp m.wpack backup.wpack beside it) or a second hard
# link to it lists the same shards, which name m.wpack (wpack.manifest) as
# theirs. Writing over the copy removed them with it: m.wpack, the set the
# user kept, then failed to open (its data gone). Only shards that name the
# manifest replaced go; through a symlink that is the link's target.
mkdir -p "$T/cp"
expect copy_set "$WPACK" create -q --shard-size 40K -o "$T/cp/m.wpack" "$T/in"
cp "$T/cp/m.wpack" "$T/cp/backup.wpack" && ln "$T/cp/m.wpack" "$T/cp/hard.wpack" || fail copy_links
shards=$(ls "$T/cp" | grep -c -- '-of-')
expect over_manifest_copy "$WPACK" create -q -o "$T/cp/backup.wpack" "$T/in/big.npy"
expect over_manifest_hard_link "$WPACK" create -q --shard-size 40K -o "$T/cp/hard.wpack" "$T/in"
[ "$(ls "$T/cp" | grep -c -- '^m-.*-of-')" = "$shards" ] && "$WPACK" verify "$T/cp/m.wpack" >/dev/null 2>&1 &&
    pass manifest_copy_keeps_original_set || fail manifest_copy_keeps_original_set "$(ls "$T/cp")"
ln -s m.wpack "$T/cp/lnk.wpack"
expect over_manifest_symlink "$WPACK" create -q -o "$T/cp/lnk.wpack" "$T/in/big.npy"
[ -z "$(ls "$T/cp" | grep -- '^m-.*-of-')" ] && pass symlink_target_set_replaced || fail symlink_target_set_replaced "$(ls "$T/cp")"

# create over a set, its inputs plain files: the same-file guard's second
# check (for files found under input directories) found none new and
# opened the old set again, 4 opens of the old manifest in all. The CLI's
# share is now one; the writer's two (its inputs' guard and the shards it
# removes, packer/replaced_set.c) stay. A directory input is still checked
# against the set's shards (a shard under it is refused).
if command -v strace >/dev/null 2>&1; then
    mkdir -p "$T/re"
    "$WPACK" create -q --shard-size 40K -o "$T/re/m.wpack" "$T/in" || fail reopen_set_made
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -e trace=openat -o "$T/trace" "$WPACK" create -q --shard-size 40K -o "$T/re/m.wpack" \
        "$T/in/big.npy" "$T/in/layers/0.weight.npy" 2>"$T/err" || fail reopen_create "$(head -c 300 "$T/err")"
    n=$(grep -c "\"$T/re/m.wpack\", O_RDONLY" "$T/trace")
    [ "$n" -le 3 ] && pass create_over_set_opens_it_less || fail create_over_set_opens_it_less "$n opens"
    "$WPACK" verify "$T/re/m.wpack" >/dev/null 2>&1 && pass create_over_set_verifies || fail create_over_set_verifies
    mkdir -p "$T/re/d" && cp "$T/in/big.npy" "$T/re/d/" && ln "$(ls "$T"/re/m-0000*.wpack | head -1)" "$T/re/d/s.npy"
    expect_fail dir_input_holding_a_shard "SAME_FILE" "$WPACK" create -q -o "$T/re/m.wpack" "$T/re/d"
else
    echo "skip create_over_set_opens_it_less: no strace"
fi
finish
