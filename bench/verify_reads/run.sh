#!/bin/bash
# bench/verify_reads/run.sh [WPACK] - the cost of verify on read (issue 13
# point 2): `wpack extract` of a 1 GiB archive (one 1 GiB f32 tensor) with
# the default check against its XXH3, and with --no-verify; the same for a
# zstd archive of 1 GiB of bf16-precision weights (the check is then one
# hash pass next to the decoding). Medians of BENCH_REPS runs (default 3),
# wall and CPU (user + sys) time, reported as ratios verify / no-verify.
# Files go to BENCH_DIR (default /dev/shm: the page cache, so the figures
# are the CPU work, not the disk); ~4 GiB free needed there.
set -e
WPACK=${1:-build/wpack}
REPS=${BENCH_REPS:-3}
D=$(mktemp -d "${BENCH_DIR:-/dev/shm}/wpack-vbench.XXXXXX")
trap 'rm -rf "$D"' EXIT
mkdir "$D/plain" "$D/bf16"
/usr/bin/python3 - "$D" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(0)
w = rng.standard_normal((256, 1024, 1024), dtype=np.float32)
np.save(f"{d}/plain/w.npy", w)
np.save(f"{d}/bf16/w.npy", (w.view(np.uint32) & 0xFFFF0000).view(np.float32))
PYEOF
"$WPACK" create -q --no-stats -o "$D/plain.wpack" "$D/plain"
"$WPACK" create -q --no-stats --compress zstd:1 -o "$D/zstd.wpack" "$D/bf16"
rm -rf "$D/plain" "$D/bf16"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
# run ARCHIVE [OPTS]: "wall cpu" of one extract into $D/x
run() {
    local a=$1; shift
    rm -rf "$D/x"
    /usr/bin/time -f "%e %U %S" -o "$D/t" "$WPACK" extract -q "$@" -o "$D/x" "$a"
    awk '{printf "%s %.3f\n", $1, $2 + $3}' "$D/t"
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf "%-8s %-22s %-22s %-10s %-10s\n" archive "verify wall/cpu (s)" "no-verify wall/cpu (s)" "wall x" "cpu x"
for a in plain zstd; do
    cat "$D/$a.wpack" >/dev/null
    : >"$D/v"; : >"$D/n"
    for r in $(seq "$REPS"); do
        run "$D/$a.wpack" >>"$D/v"
        run "$D/$a.wpack" --no-verify >>"$D/n"
    done
    vw=$(cut -d' ' -f1 "$D/v" | median); vc=$(cut -d' ' -f2 "$D/v" | median)
    nw=$(cut -d' ' -f1 "$D/n" | median); nc=$(cut -d' ' -f2 "$D/n" | median)
    /usr/bin/python3 -c "print('%-8s %-22s %-22s %-10.3f %-10.3f' % ('$a', '$vw / $vc', '$nw / $nc', $vw / $nw, $vc / $nc))"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
