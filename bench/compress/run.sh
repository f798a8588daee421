#!/bin/bash
# bench/compress/run.sh [WPACK] - zstd inside wpack vs the zstd command-line
# tool on the same bytes at the same level, in one run: compression ratio and
# MB/s (compress and decompress), reported as ratios wpack/zstd.
# Data: 256 MiB of f32 weights rounded to bf16 precision (as from a bf16
# checkpoint up-cast to f32, common and compressible) plus 64 MiB of
# full-precision noise (nearly incompressible).
set -e
WPACK=${1:-build/wpack}
LEVELS=${LEVELS:-"1 3 9"}
D=$(mktemp -d "${BENCH_DIR:-/tmp}/wpack-zbench.XXXXXX")
trap 'rm -rf "$D"' EXIT
/usr/bin/python3 - "$D" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(0)
w = rng.standard_normal((64, 1024, 1024), dtype=np.float32) * 0.02
w = (w.view(np.uint32) & 0xFFFF0000).view(np.float32)   # bf16 precision
np.save(f"{d}/bf16_as_f32.npy", w)
np.save(f"{d}/noise.npy", rng.standard_normal((16, 1024, 1024), dtype=np.float32))
PYEOF
mkdir "$D/in" && mv "$D"/*.npy "$D/in/"
cat "$D/in/bf16_as_f32.npy" "$D/in/noise.npy" >"$D/all.bin"
bytes=$(stat -c %s "$D/all.bin")
now() { date +%s.%N; }
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "input: $((bytes >> 20)) MiB; WPACK_THREADS=${WPACK_THREADS:-all cores} for decoding; zstd -T1 and wpack compress on one thread"
printf "%-6s %-14s %-14s %-16s %-16s\n" level "ratio wpack" "ratio zstd" "compress wpack/zstd" "decompress wpack/zstd"
for L in $LEVELS; do
    cat "$D/all.bin" >/dev/null
    t0=$(now); zstd -q -f -T1 -"$L" "$D/all.bin" -o "$D/all.zst"; t1=$(now)
    zstd -q -f -d "$D/all.zst" -o "$D/all.out"; t2=$(now)
    "$WPACK" create -q --no-stats --compress "zstd:$L" --compress-min 0 --compress-saving 0 -o "$D/z.wpack" "$D/in"; t3=$(now)
    "$WPACK" convert "$D/z.wpack" --decompress -o "$D/plain.wpack"; t4=$(now)
    zs=$(stat -c %s "$D/all.zst"); ws=$(stat -c %s "$D/z.wpack")
    /usr/bin/python3 -c "
b=$bytes; zs=$zs; ws=$ws
zc=$t1-$t0; zd=$t2-$t1; wc=$t3-$t2; wd=$t4-$t3
print('%-6s %-14.3f %-14.3f %-16.2f %-16.2f' % ('$L', b/ws, b/zs, zc/wc, zd/wd))
print('       (MB/s: zstd compress %.0f, wpack create %.0f; zstd -d %.0f, wpack convert --decompress %.0f)' % (b/zc/1e6, b/wc/1e6, b/zd/1e6, b/wd/1e6))"
done
echo "ratios > 1 in the last two columns mean wpack is faster; wpack create also hashes and"
echo "fsyncs, and convert --decompress also re-hashes and writes an archive."
