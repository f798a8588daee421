#!/bin/bash
# test_kill.sh - kill -9 at random points of convert, cast, export and
# externalize (issue 13, "Done when"): 20 trials each on inputs big enough
# that a kill lands mid-write. After every kill the input is unchanged and
# each output is absent, the old file, or complete (byte for byte the output
# of an uninterrupted run, which is itself checked once: verify, numpy,
# resolve). After the trials one more run succeeds and leaves no temp file:
# the killed runs' temporaries are swept.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
TRIALS=${WPACK_KILL_TRIALS:-20}

$PY - <<'PYEOF' || fail fixtures "python failed"
import numpy as np
rng = np.random.default_rng(3)
for i in range(3):
    np.save(f"w{i}.npy", (rng.standard_normal((512, 1024)) * 0.02).astype(np.float32))
np.save("z.npy", np.zeros((512, 1024), np.float32))
w = rng.standard_normal(1 << 19).astype(np.float32)
open("big.mlir", "w").write(
    'module {\n  ml_program.global private @w(dense<"0x%s"> : tensor<%dxf32>) : tensor<%dxf32>\n}\n'
    % (w.tobytes().hex().upper(), w.size, w.size))
PYEOF
expect make_input "$WPACK" create -q -o A.wpack w0.npy w1.npy w2.npy z.npy

now_ms() { date +%s%3N; }

# trials NAME INPUT "OUTPUTS" CMD...: reference run (twice: the outputs must
# be the same bytes), then TRIALS killed runs, then a clean run.
trials() {
    local name=$1 input=$2 outs=$3 o t start dur delay rc killed=0 bad=0 why=""
    shift 3
    cp "$input" pristine
    start=$(now_ms)
    "$@" >/dev/null 2>"$T/err" || { fail "${name}_reference" "$(head -c 300 "$T/err")"; return; }
    dur=$(($(now_ms) - start + 1))
    for o in $outs; do mv "$o" "ref.$o"; done
    # the kill delays span the shorter of the two reference runs: one slowed
    # by a load spike would put most kills after the end (kills_landed)
    start=$(now_ms)
    "$@" >/dev/null 2>&1
    t=$(($(now_ms) - start + 1))
    [ "$t" -lt "$dur" ] && dur=$t
    for o in $outs; do
        cmp -s "$o" "ref.$o" || { fail "${name}_deterministic" "$o differs between two runs"; return; }
    done
    for t in $(seq "$TRIALS"); do
        for o in $outs; do # start without the outputs or with the old ones
            if [ $((t % 2)) = 0 ]; then cp "ref.$o" "$o"; else rm -f "$o"; fi
        done
        delay=$((RANDOM % dur))
        "$@" >/dev/null 2>&1 &
        local pid=$!
        sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
        kill -9 $pid 2>/dev/null
        { wait $pid; } 2>/dev/null # no "Killed" line
        rc=$?
        [ $rc = 137 ] && killed=$((killed + 1))
        cmp -s "$input" pristine || { bad=$((bad + 1)) why="trial $t: input changed"; }
        for o in $outs; do
            [ ! -e "$o" ] || cmp -s "$o" "ref.$o" ||
                { bad=$((bad + 1)) why="trial $t (rc $rc, ${delay} ms): $o half-written"; }
        done
    done
    [ $bad = 0 ] && pass "${name}_kills_safe" || fail "${name}_kills_safe" "$bad bad; $why"
    # at least some kills must land before the end, or the test proves nothing
    [ $killed -ge $((TRIALS / 4)) ] && pass "${name}_kills_landed" ||
        fail "${name}_kills_landed" "only $killed of $TRIALS runs were killed (run takes ${dur} ms)"
    "$@" >/dev/null 2>"$T/err" || fail "${name}_clean_run" "$(head -c 300 "$T/err")"
    ls | grep -q '\.tmp-' && fail "${name}_temps_swept" "$(ls | grep '\.tmp-')" || pass "${name}_temps_swept"
    for o in $outs; do
        cmp -s "$o" "ref.$o" && pass "${name}_${o}_complete" || fail "${name}_${o}_complete"
    done
}

trials convert A.wpack "c.wpack" "$WPACK" convert A.wpack --compress zstd:1 -o c.wpack
expect convert_ref_verifies "$WPACK" verify ref.c.wpack
trials cast A.wpack "b.wpack" "$WPACK" cast A.wpack --to bf16 -o b.wpack
expect cast_ref_verifies "$WPACK" verify ref.b.wpack
trials export A.wpack "a.npz" "$WPACK" export A.wpack --to npz -o a.npz
$PY - <<'PYEOF' && pass export_ref_loads || fail export_ref_loads
import numpy as np
z = np.load("ref.a.npz")
for i in range(3):
    assert np.array_equal(z[f"w{i}"], np.load(f"w{i}.npy"))
PYEOF
trials externalize big.mlir "o.mlir e.wpack" "$WPACK" externalize -q big.mlir -o o.mlir --archive e.wpack
expect externalize_ref_verifies "$WPACK" verify ref.e.wpack
expect externalize_ref_resolves "$WPACK" resolve -q ref.e.wpack ref.o.mlir -o r.mlir --emit inline

finish
