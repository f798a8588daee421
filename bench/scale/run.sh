#!/bin/bash
# bench/scale/run.sh [WPACK] [GIB] - streaming at scale: `wpack create` of GIB
# GiB of .npy input (default 8) must keep its peak memory flat (goal: under
# 64 MiB plus the index) while `cp` of the same files is the speed peer.
# Memory is the figure that matters here; the speed ratio is noisy on a
# shared machine (page-cache writeback lands on whichever runs first).
# The inputs are sparse .npy files (holes read back as zeros), so the bench
# needs GIB GiB of free disk for the archive only.
set -e
WPACK=${1:-build/wpack}
GIB=${2:-8}
D=$(mktemp -d "${BENCH_DIR:-/tmp}/wpack-scale.XXXXXX")
trap 'rm -rf "$D"' EXIT
mkdir "$D/in"
/usr/bin/python3 - "$D/in" "$GIB" <<'PYEOF'
import numpy as np, sys
d, gib = sys.argv[1], int(sys.argv[2])
for i in range(gib):          # 1 GiB per file, u8 (no weight stats), sparse on disk
    a = np.lib.format.open_memmap(f"{d}/layer{i}.npy", mode="w+", dtype=np.uint8, shape=(1 << 30,))
    a[::1 << 20] = i          # a byte per MiB so the data is not all zeros
    del a
PYEOF
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); input ${GIB} GiB (sparse .npy)"
cat "$D"/in/*.npy >/dev/null
/usr/bin/time -f "%e %M" -o "$D/cp.t" cp -r --sparse=never "$D/in" "$D/cp"; sync
rm -rf "$D/cp"
/usr/bin/time -f "%e %M" -o "$D/w.t" "$WPACK" create -q -o "$D/out.wpack" "$D/in"
read ct cm <"$D/cp.t"; read wt wm <"$D/w.t"
"$WPACK" verify "$D/out.wpack" >/dev/null
echo "cp -r --sparse=never (no fsync): ${ct} s, peak RSS $((cm / 1024)) MiB"
echo "wpack create: ${wt} s, peak RSS $((wm / 1024)) MiB (fsync included)"
/usr/bin/python3 -c "print('throughput wpack/cp: %.2f; peak RSS %s 64 MiB' % ($ct/$wt, 'under' if $wm < 65536 else 'OVER'))"
