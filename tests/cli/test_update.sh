#!/bin/bash
# test_update.sh - in-place updates (issue 13 points 3 and 5, spec 14): a
# recalibrated index keeps the size of a fresh archive's index, the dead
# space stays bounded, and `wpack update` adds, replaces and drops stats,
# metadata and name-map names, refusing bad input with nothing written.
. "$(dirname "$0")/lib.sh"

# field NAME ARCHIVE: a top-level field of inspect --json
field() { "$WPACK" inspect --json "$2" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
# pyq ARCHIVE EXPR: EXPR over d = inspect --json
pyq() { "$WPACK" inspect --json "$1" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($2)"; }
size_of() { stat -c %s "$1"; }

# A 99-module chain: 50 Linear(16, 16) and 49 ReLU.
"$PY" - "$T" <<'EOF' || fail make_chain
import sys, numpy as np
d = sys.argv[1]
import os
os.makedirs(d + "/m")
rng = np.random.default_rng(7)
spec = []
for i in range(99):
    if i % 2 == 0:
        np.save("%s/m/%d.weight.npy" % (d, i), (rng.standard_normal((16, 16)) * 0.3).astype(np.float32))
        np.save("%s/m/%d.bias.npy" % (d, i), (rng.standard_normal(16) * 0.1).astype(np.float32))
        spec.append(str(i))
    else:
        spec.append("%d=relu" % i)
open(d + "/spec", "w").write(",".join(spec))
np.save(d + "/x.npy", rng.standard_normal((32, 16)).astype(np.float32))
EOF
A="$T/chain.wpack"
expect create_chain "$WPACK" create -q -o "$A" --layers "$(cat "$T/spec")" "$T/m"

# ---- issue 13 point 3: the index does not grow, the dead space is bounded
ilen=() ; fsize=()
for k in 1 2 3 4 5 6; do
    if "$WPACK" calibrate "$A" --input "$T/x.npy" --histogram 1024 >"$T/out" 2>"$T/err"; then
        ilen[$k]=$(field index_length "$A"); fsize[$k]=$(size_of "$A")
        echo "# calibration $k: index ${ilen[$k]} B, file ${fsize[$k]} B, generation $(field generation "$A")"
    else
        fail "calibrate_$k" "$(head -c 300 "$T/err")"
    fi
done
[ "$(pyq "$A" 'len(d["stats"])')" = 199 ] && pass calibrated_199_records || fail calibrated_199_records
same=1
for k in 2 3 4 5 6; do [ "${ilen[$k]:-x}" = "${ilen[1]:-y}" ] || same=0; done
[ $same = 1 ] && pass index_same_size_every_generation \
    || fail index_same_size_every_generation "${ilen[*]}"
# a fresh archive of the same content (convert rewrites everything)
expect convert_fresh "$WPACK" convert "$A" --decompress -o "$T/fresh.wpack"
fresh=$(field index_length "$T/fresh.wpack")
d=$(( ${ilen[4]:-0} - fresh )); d=${d#-}
[ "$d" -le 4096 ] && pass index_within_padding_of_fresh \
    || fail index_within_padding_of_fresh "updated ${ilen[4]:-?} fresh $fresh"
# bounded: after the data, at most three generations (spec 14 Space), and no
# growth once recalibration alternates
data_end=$(( $(field data_offset "$A") + $(field data_length "$A") ))
tail=$(( ${fsize[6]:-0} - data_end )); gen=$(( ${ilen[6]:-0} + 128 ))
[ "$tail" -le $(( 3 * gen )) ] && pass dead_space_bounded \
    || fail dead_space_bounded "tail $tail > 3 x $gen"
[ "${fsize[4]:-a}" = "${fsize[6]:-b}" ] && [ "${fsize[3]:-a}" = "${fsize[6]:-b}" ] \
    && pass file_stops_growing || fail file_stops_growing "${fsize[*]}"
expect verify_after_recalibrations "$WPACK" verify "$A"
[ "$(field recovered "$A")" = False ] && pass reused_space_is_not_recovered \
    || fail reused_space_is_not_recovered
# the old 4 generations cost 4 x the index: now the tail is below 3
[ "$tail" -lt $(( 4 * ${ilen[1]:-0} )) ] && pass tail_below_old_growth || fail tail_below_old_growth

# ---- issue 13 point 5: wpack update
B="$T/b.wpack"
expect create_small "$WPACK" create -q -o "$B" --layers "0,1=relu,2" --meta model.name=first \
    --name p0=0.weight "$T/m/0.weight.npy" "$T/m/0.bias.npy" "$T/m/2.weight.npy" "$T/m/2.bias.npy"
expect update_help "$WPACK" update --help
grep -q -- '--drop-stats' "$T/out" && pass update_help_text || fail update_help_text
"$WPACK" --help | grep -q '^  update ' && pass update_in_command_list || fail update_in_command_list

expect update_meta_add "$WPACK" update "$B" --meta model.source=hub/x
grep -q 'generation 2: 1 option applied; ' "$T/out" && pass update_summary_line || fail update_summary_line "$(cat "$T/out")"
[ "$(pyq "$B" 'd["metadata"]["model.source"]')" = hub/x ] && pass meta_added || fail meta_added
expect update_meta_replace "$WPACK" update "$B" --meta model.name=second
[ "$(pyq "$B" '(d["metadata"]["model.name"], len(d["metadata"]))')" = "('second', 4)" ] \
    && pass meta_replaced || fail meta_replaced "$(pyq "$B" 'd["metadata"]')"

expect update_name_add "$WPACK" update "$B" --name p2=2.weight
[ "$(pyq "$B" 'sorted(d["name_map"].items())')" = "[('p0', '0.weight'), ('p2', '2.weight')]" ] \
    && pass name_added || fail name_added "$(pyq "$B" 'd["name_map"]')"
expect update_name_replace "$WPACK" update "$B" --name p0=2.bias
[ "$(pyq "$B" '(d["name_map"]["p0"], len(d["name_map"]))')" = "('2.bias', 2)" ] \
    && pass name_replaced || fail name_replaced
expect extract_by_new_name "$WPACK" extract "$B" -o "$T/ex" p2

cat >"$T/s1.json" <<'EOF'
{"version": 1, "stats": [
 {"key": "0", "kind": "activation", "count": 10, "min": -1, "max": 2, "mean": 0.5, "variance": 0.25,
  "histogram": {"edges": [-1, 0.5, 2], "counts": [4, 6]}},
 {"key": "0.weight", "kind": "weight", "count": 256, "min": -0.5, "max": 0.5, "mean": 0, "variance": 0.1}
]}
EOF
cat >"$T/s2.json" <<'EOF'
{"version": 1, "stats": [{"key": "0", "kind": "activation", "count": 3, "min": -3, "max": 3, "mean": 0}]}
EOF
n0=$(pyq "$B" 'len(d["stats"])')
expect update_stats_add "$WPACK" update "$B" --stats "$T/s1.json"
[ "$(pyq "$B" 'len(d["stats"])')" = $((n0 + 1)) ] && pass stats_added_one_replaced_one \
    || fail stats_added_one_replaced_one
[ "$(pyq "$B" '[s["max"] for s in d["stats"] if s["key"]=="0.weight"][0]')" = 0.5 ] \
    && pass weight_stats_replaced || fail weight_stats_replaced
# the same key and kind again: replaced, never "added twice"
expect update_stats_again "$WPACK" update "$B" --stats "$T/s1.json"
expect update_stats_later_wins "$WPACK" update "$B" --stats "$T/s1.json" --stats "$T/s2.json"
[ "$(pyq "$B" '[(float(s["min"]), s["count"]) for s in d["stats"] if s["key"]=="0" and s["kind"]=="activation"]')" = "[(-3.0, 3)]" ] \
    && pass activation_stats_replaced || fail activation_stats_replaced

expect update_drop_activation "$WPACK" update "$B" --drop-stats 0:activation
[ "$(pyq "$B" 'len([s for s in d["stats"] if s["key"]=="0"])')" = 0 ] && pass dropped_activation \
    || fail dropped_activation
expect update_drop_both "$WPACK" update "$B" --drop-stats 0.weight
[ "$(pyq "$B" 'len([s for s in d["stats"] if s["key"]=="0.weight"])')" = 0 ] && pass dropped_weight \
    || fail dropped_weight
expect update_drop_and_set "$WPACK" update "$B" --drop-stats 2.bias:weight --meta a.b=c
expect verify_after_updates "$WPACK" verify "$B"

# errors: named kinds, [WPACK_E_*], and nothing written
cp "$B" "$T/before.wpack"
expect_fail drop_missing 'no activation stats .0. to drop.*\[WPACK_E_NOT_FOUND\]' \
    "$WPACK" update "$B" --drop-stats 0:activation
cat >"$T/bad.json" <<'EOF'
{"version": 1, "stats": [{"key": "nope", "kind": "weight", "count": 1, "min": 0, "max": 1, "mean": 0.5}]}
EOF
expect_fail weight_stats_no_tensor "no tensor of that name.*\[WPACK_E_STATS\]" \
    "$WPACK" update "$B" --stats "$T/bad.json"
cat >"$T/bad2.json" <<'EOF'
{"version": 1, "stats": [{"key": "0", "kind": "activation", "count": 1, "min": 2, "max": 1, "mean": 1.5}]}
EOF
expect_fail stats_inconsistent "\[WPACK_E_STATS\]" "$WPACK" update "$B" --stats "$T/bad2.json"
expect_fail name_is_entry "is an entry name.*\[WPACK_E_EXISTS\]" "$WPACK" update "$B" --name 0.bias=2.bias
expect_fail name_no_entry "no tensor of that name.*\[WPACK_E_NOT_FOUND\]" "$WPACK" update "$B" --name q=zz
expect_fail meta_bad "wants KEY=VALUE" "$WPACK" update "$B" --meta novalue
expect_fail meta_bad_utf8 "\[WPACK_E_METADATA\]" "$WPACK" update "$B" --meta "k=$(printf '\xff')"
expect_fail nothing_to_do "nothing to change" "$WPACK" update "$B"
expect_fail unknown_option "unknown option" "$WPACK" update "$B" --frob
expect_fail no_such_archive "\[WPACK_E_IO\]" "$WPACK" update "$T/none.wpack" --meta a=b
if grep -rq 'kind [0-9]' "$T/err"; then fail no_kind_numbers; else pass no_kind_numbers; fi
cmp -s "$B" "$T/before.wpack" && pass failed_updates_write_nothing || fail failed_updates_write_nothing

# a full disk (ulimit -f: writes past the limit fail with EFBIG, SIGXFSZ
# ignored) while the new generation is appended: the archive is left byte
# for byte as it was, not grown by a part of the generation that every later
# open would warn about
cp "$B" "$T/full.wpack"
"$PY" -c "
import json
b = 20000
e = [-1 + 2 * i / b for i in range(b + 1)]
json.dump({'version': 1, 'stats': [{'key': 'full%d' % i, 'kind': 'activation', 'count': b, 'min': -1.0,
           'max': 1.0, 'mean': 0.0, 'variance': 0.3, 'histogram': {'edges': e, 'counts': [1] * b}}
           for i in range(4)]}, open('$T/full.json', 'w'))
" || fail make_full_json
kb=$(( $(stat -c %s "$T/full.wpack") / 1024 + 2 ))
( ulimit -f "$kb"; trap '' XFSZ; exec "$WPACK" update "$T/full.wpack" --stats "$T/full.json" ) \
    >"$T/out" 2>"$T/err"
rc=$?
{ [ $rc -eq 1 ] && grep -q 'writing the new index.*\[WPACK_E_IO\]' "$T/err"; } && pass full_disk_update_fails \
    || fail full_disk_update_fails "exit $rc: $(head -c 300 "$T/err")"
cmp -s "$B" "$T/full.wpack" && pass full_disk_update_leaves_file || fail full_disk_update_leaves_file
"$WPACK" verify "$T/full.wpack" >"$T/out" 2>"$T/err" && ! grep -q warning "$T/err" \
    && pass full_disk_update_no_warning || fail full_disk_update_no_warning "$(head -c 300 "$T/err")"

# convert / cast --in-place hold the updaters' lock from their read to their
# rename: an update meanwhile waits and then changes the new file (before,
# it committed into the old one, which the rename then threw away: an update
# that said it succeeded, lost). The rewrite is stopped (SIGSTOP) once its
# temporary exists, so the update surely starts in the middle of it.
"$PY" -c "
import numpy as np
np.save('$T/big.npy', np.random.default_rng(5).standard_normal((1024, 2048)).astype(np.float32))
" || fail make_big
# (a cast runs about 0.15 s: the 10 ms polling missed its temporary in 2
# of 30 runs, so a run not caught is tried again, up to 10 times in all)
in_place_vs_update() {
    local name=$1 i pid upid try caught=""; shift
    for try in $(seq 10); do
        rm -f "$T"/ip.wpack*
        "$WPACK" create -q -o "$T/ip.wpack" "$T/big.npy" || { fail "$name" create; return; }
        "$WPACK" "$@" "$T/ip.wpack" --in-place -q 2>"$T/ip.err" &
        pid=$!
        for i in $(seq 1000); do
            ls "$T"/ip.wpack.tmp-* >/dev/null 2>&1 && break
            sleep 0.01
        done
        if kill -STOP "$pid" 2>/dev/null && ls "$T"/ip.wpack.tmp-* >/dev/null 2>&1; then
            caught=1; break
        fi
        kill -CONT "$pid" 2>/dev/null
        wait "$pid" || { fail "$name" "rewrite (not caught): $(head -c 300 "$T/ip.err")"; return; }
    done
    if [ -z "$caught" ]; then
        fail "$name" "the rewrite was not caught in the middle in 10 tries"; return
    fi
    "$WPACK" update "$T/ip.wpack" --meta during=1 >/dev/null 2>"$T/up.err" &
    upid=$!
    sleep 0.5
    kill -CONT "$pid"
    wait "$pid" || { fail "$name" "rewrite: $(head -c 300 "$T/ip.err")"; wait "$upid"; return; }
    wait "$upid" || { fail "$name" "update: $(head -c 300 "$T/up.err")"; return; }
    [ "$(pyq "$T/ip.wpack" 'd["metadata"].get("during")')" = 1 ] || { fail "$name" "update lost"; return; }
    "$WPACK" verify "$T/ip.wpack" >/dev/null 2>&1 && pass "$name" || fail "$name" verify
}
in_place_vs_update convert_in_place_keeps_update convert --compress zstd:19
in_place_vs_update cast_in_place_keeps_update cast --to bf16

# the test hook stops between the two steps: the new generation is there,
# the superblock does not name it yet; the next update commits it
g=$(field generation "$B")
expect_fail stop_after_append "stopped after the append" env WPACK_UPDATE_STOP_AFTER=append \
    "$WPACK_HOOKS" update "$B" --meta stop=1
expect verify_after_stop "$WPACK" verify "$B"
g2=$(field generation "$B")
{ [ "$g2" = "$g" ] || [ "$g2" = $((g + 1)) ]; } && pass stop_old_or_new || fail stop_old_or_new "$g -> $g2"
expect update_after_stop "$WPACK" update "$B" --meta after=1
[ "$(pyq "$B" 'd["metadata"].get("after")')" = 1 ] && pass update_after_stop_applied \
    || fail update_after_stop_applied
# ---- a shard of a sharded set is never changed in place: its manifest
# records the shard's length and index XXH3, so `update`, `calibrate`,
# `convert --in-place` or `cast --in-place` of a shard (said success and)
# made the whole set fail to open [WPACK_E_SHARD]. Refused, the shard
# byte for byte as it was; the set's own stats and metadata are changed
# through its manifest.
mkdir -p "$T/set"
"$PY" -c "
import numpy as np
np.save('$T/set/l0.weight.npy', np.ones((4, 8), np.float32)); np.save('$T/set/l0.bias.npy', np.zeros(4, np.float32))
np.save('$T/set/t0.npy', np.ones((16, 16), np.float32)); np.save('$T/set/x.npy', np.ones((2, 8), np.float32))" ||
    fail set_inputs
expect set_create "$WPACK" create -q --shard-size 1K -o "$T/set/s.wpack" "$T/set/t0.npy" "$T/set/l0.weight.npy" "$T/set/l0.bias.npy"
ln -s set/s-00002-of-00002.wpack "$T/lnk-shard"
sum=$(cat "$T"/set/s-0000*.wpack | sha256sum)
for c in "update:update SHARD --meta a=b" "update_link:update $T/lnk-shard --meta a=b" \
    "calibrate:calibrate SHARD --layers l0 --input $T/set/x.npy" \
    "convert_in_place:convert SHARD --compress zstd --in-place" "cast_in_place:cast SHARD --to bf16 --in-place"; do
    args=${c#*:}
    expect_fail "shard_${c%%:*}_refused" "is a shard of the set at .*/set/s\.wpack.*whole set fail to open.*\[WPACK_E_SHARD\]" \
        "$WPACK" ${args//SHARD/$T/set/s-00002-of-00002.wpack}
    [ "$(cat "$T"/set/s-0000*.wpack | sha256sum)" = "$sum" ] && "$WPACK" verify "$T/set/s.wpack" >/dev/null 2>&1 &&
        pass "shard_${c%%:*}_set_intact" || fail "shard_${c%%:*}_set_intact" "$(ls "$T/set")"
done
expect set_calibrate_through_manifest "$WPACK" calibrate "$T/set/s.wpack" --layers l0 --input "$T/set/x.npy"
expect set_update_through_manifest "$WPACK" update "$T/set/s.wpack" --meta a=b
expect set_verifies "$WPACK" verify "$T/set/s.wpack"
# a shard whose set is gone is an archive like any other
cp "$T/set/s-00002-of-00002.wpack" "$T/lone.wpack"
expect lone_shard_copy_updated "$WPACK" update "$T/lone.wpack" --meta a=b
rm "$T/set/s.wpack"
expect shard_without_manifest_updated "$WPACK" update "$T/set/s-00002-of-00002.wpack" --meta a=b
finish
