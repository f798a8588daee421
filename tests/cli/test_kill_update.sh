#!/bin/bash
# test_kill_update.sh - kill -9 at random points of `wpack calibrate` and
# `wpack update` (issue 13, Done when; spec 14 crash table), 20 trials each:
# the archive always opens and verifies, equals either the old or the new
# state, and a rerun of the command then gives the new state.
. "$(dirname "$0")/lib.sh"
TRIALS=${KILL_TRIALS:-20}

# state ARCHIVE: a digest of the archive's content, without where its index
# lives (the first line of inspect --json holds those fields)
state() {
    "$WPACK" inspect --json "$1" | sed -E '1s/"(path|generation|file_length|index_offset|index_checksum|recovered)": [^,]*,//g' | md5sum
}

"$PY" - "$T" <<'EOF' || fail make_inputs
import sys, os, json, numpy as np
d = sys.argv[1]
os.makedirs(d + "/m")
rng = np.random.default_rng(3)
spec = []
for i in range(59):
    if i % 2 == 0:
        np.save("%s/m/%d.weight.npy" % (d, i), (rng.standard_normal((32, 32)) * 0.2).astype(np.float32))
        np.save("%s/m/%d.bias.npy" % (d, i), (rng.standard_normal(32) * 0.1).astype(np.float32))
        spec.append(str(i))
    else:
        spec.append("%d=relu" % i)
open(d + "/spec", "w").write(",".join(spec))
np.save(d + "/x.npy", rng.standard_normal((64, 32)).astype(np.float32))
np.save(d + "/x2.npy", rng.standard_normal((64, 32)).astype(np.float32))
# stats for `update`: big histograms, so that the index write takes a while
recs = []
for i in range(59):
    b = 2048
    edges = list(np.linspace(-1.0, 1.0, b + 1))
    counts = [1] * b
    recs.append({"key": str(i), "kind": "activation", "count": b, "min": -1.0, "max": 1.0,
                 "mean": 0.0, "variance": 0.3, "histogram": {"edges": edges, "counts": counts}})
json.dump({"version": 1, "stats": recs}, open(d + "/big.json", "w"))
EOF
BASE="$T/base.wpack"
expect create "$WPACK" create -q -o "$BASE" --layers "$(cat "$T/spec")" "$T/m"
# one calibration first, so that later ones replace records and reuse space
expect calibrate_once "$WPACK" calibrate "$BASE" --input "$T/x.npy" --histogram 1024

# trials NAME SUBCOMMAND ARGS...: `wpack SUBCOMMAND COPY ARGS...` on copies of
# BASE, killed at random points
trials() {
    local name=$1 sub=$2; shift 2
    cp "$BASE" "$T/w.wpack"
    local t0 t1
    t0=$(date +%s%N)
    "$WPACK" "$sub" "$T/w.wpack" "$@" >/dev/null 2>"$T/err" || { fail "${name}_reference" "$(head -c 300 "$T/err")"; return; }
    t1=$(date +%s%N)
    local dur_us=$(( (t1 - t0) / 1000 ))
    local old new
    old=$(state "$BASE"); new=$(state "$T/w.wpack")
    [ "$old" != "$new" ] || { fail "${name}_changes_something"; return; }
    echo "# $name: a full run takes $((dur_us / 1000)) ms"
    local n_old=0 n_new=0 bad=0 k
    for k in $(seq "$TRIALS"); do
        cp "$BASE" "$T/k.wpack"
        # uniform over the last 80% of a run: the start is option parsing and
        # the model run, the end is where the index is written
        local at=$(( RANDOM * 32768 + RANDOM ))
        at=$(( dur_us / 5 + at % (dur_us * 4 / 5 + 1) ))
        "$WPACK" "$sub" "$T/k.wpack" "$@" >/dev/null 2>&1 &
        local pid=$!
        sleep "$(printf '0.%06d' "$at")" 2>/dev/null || sleep "$((at / 1000000)).$(printf '%06d' $((at % 1000000)))"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        if ! "$WPACK" verify "$T/k.wpack" >/dev/null 2>"$T/verr"; then
            bad=$((bad + 1)); fail "${name}_kill_${k}_verify" "at ${at} us: $(head -c 300 "$T/verr")"
            continue
        fi
        local s
        s=$(state "$T/k.wpack")
        if [ "$s" = "$new" ]; then n_new=$((n_new + 1)); continue; fi
        if [ "$s" != "$old" ]; then
            bad=$((bad + 1)); fail "${name}_kill_${k}_state" "at ${at} us: neither old nor new"; continue
        fi
        n_old=$((n_old + 1))
        # and the command does the job from there (every other time: time)
        [ $((k % 2)) = 0 ] && continue
        if ! "$WPACK" "$sub" "$T/k.wpack" "$@" >/dev/null 2>"$T/err" || [ "$(state "$T/k.wpack")" != "$new" ]; then
            bad=$((bad + 1)); fail "${name}_kill_${k}_rerun" "$(head -c 300 "$T/err")"
        fi
    done
    echo "# $name: $TRIALS kills: $n_old left the old state, $n_new the new one"
    [ $bad = 0 ] && pass "${name}_${TRIALS}_kills_old_or_new"
}

SECONDS=0
trials calibrate calibrate --input "$T/x2.npy" --histogram 1024
trials update update --stats "$T/big.json" --meta kill.test=1 --drop-stats 0.weight
echo "# took ${SECONDS} s"
finish
