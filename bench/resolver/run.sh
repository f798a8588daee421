#!/bin/bash
# bench/resolver/run.sh [WPACK] - `wpack resolve` against mlir-opt-19 parsing
# and printing the same file, measured in the same run (ratios, not bare
# times). Two inputs: 100,000 extern globals (resolved against an archive of
# 100,000 entries), and 1 GiB of inline hex weights (a dense_resource blob,
# copied through; its bytes are validated by the scanner). Goal: >= 10x.
# Each command runs REPS times (alternating with its peer), the fastest run
# of each counts; bench/resolver/README.md has the latest table.
set -eu
WPACK=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build/wpack}
MLIR_OPT=${MLIR_OPT:-mlir-opt-19}
PY=${PY:-/usr/bin/python3}
HEX_MB=${HEX_MB:-1024}       # MiB of hex digits in the second file
NGLOBALS=${NGLOBALS:-100000}
REPS=${REPS:-3}              # runs of each command; the fastest counts
T=$(mktemp -d "${TMPDIR:-/tmp}/wpack-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT

now() { date +%s.%N; }
# time_it LABEL CMD... : runs CMD, prints seconds and peak RSS (MiB)
time_it() {
    local label=$1; shift
    local t0 t1 a prev=""
    # each run writes a new file: the previous run's output (-o FILE) is
    # removed first, outside the timing, so that neither tool pays for
    # dropping the last run's gigabyte from the page cache (O_TRUNC for
    # mlir-opt, the rename over it for resolve)
    for a in "$@"; do [ "$prev" = "-o" ] && rm -f "$a"; prev=$a; done
    # start every run from the same clean page cache: without this the
    # gigabyte the generator (or the previous run) left dirty is written
    # back during the next run and throttles its writes (seconds, for
    # whichever tool comes next)
    sync
    t0=$(now)
    /usr/bin/time -f "%M" -o "$T/rss" "$@" >/dev/null 2>"$T/err" || { echo "$label failed: $(head -c 300 "$T/err")" >&2; exit 1; }
    t1=$(now)
    echo "$(echo "$t1 - $t0" | bc -l) $(( $(cat "$T/rss") / 1024 ))"
}

"$PY" - "$T" "$NGLOBALS" "$HEX_MB" <<'PYEOF'
import numpy as np, os, sys
d, n, hex_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(f"{d}/w/layers", exist_ok=True)
# one 100,000-entry archive input: a single .npy per entry is slow to pack,
# so entries are small; the MLIR side is what is measured
a = np.zeros(4, dtype=np.float32)
for i in range(n):
    np.save(f"{d}/w/layers/p{i}.npy", a)
with open(f"{d}/globals.mlir", "w") as f:
    f.write("module {\n")
    for i in range(n):
        f.write(f'  ml_program.global private @layers.p{i}(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n')
    f.write("}\n")
with open(f"{d}/hex.mlir", "w") as f:
    nbytes = hex_mb * 1024 * 1024 // 2
    f.write("module {\n  ml_program.global private @big(dense_resource<big> : tensor<%dxi8>) : tensor<%dxi8>\n"
            "  ml_program.global private @w(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>\n}\n" % (nbytes, nbytes))
    f.write('{-#\n  dialect_resources: {\n    builtin: {\n      big: "0x04000000')
    chunk = ("0123456789ABCDEF" * 65536)
    left = nbytes * 2
    while left:
        k = min(left, len(chunk)); f.write(chunk[:k]); left -= k
    f.write('"\n    }\n  }\n#-}\n')
np.save(f"{d}/w.npy", a)
PYEOF
"$WPACK" create -q --no-stats -o "$T/g.wpack" "$T/w" >/dev/null
"$WPACK" create -q --no-stats -o "$T/h.wpack" "$T/w.npy" >/dev/null

# best LINE1 LINE2 : the faster of two "seconds rss" lines
best() { if [ -z "$1" ] || [ "$(echo "${2%% *} < ${1%% *}" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }

# pair LABEL RESOLVE_CMD... -- MLIR_CMD... : REPS alternating runs of both, the
# fastest of each kept (the machine is shared: the minimum is the run with the
# least interference); prints "RESOLVE_LINE|MLIR_LINE"
pair() {
    local label=$1; shift
    local a=() b=() r="" m="" x i
    while [ "$1" != "--" ]; do a+=("$1"); shift; done; shift
    b=("$@")
    for ((i = 0; i < REPS; i++)); do
        x=$(time_it "$label: resolve" "${a[@]}") || exit 1
        r=$(best "$r" "$x")
        if [ ${#b[@]} -gt 0 ]; then
            x=$(time_it "$label: mlir-opt" "${b[@]}") || exit 1
            m=$(best "$m" "$x")
        fi
    done
    echo "$r|$m"
}

report() { # NAME RESOLVE_LINE MLIR_LINE
    read -r rt rm <<<"$2"; read -r mt mm <<<"$3"
    printf '%-28s resolve %7.3fs %6d MiB | mlir-opt-19 %7.3fs %6d MiB | ratio %6.1fx\n' \
        "$1" "$rt" "$rm" "$mt" "$mm" "$(echo "$mt / $rt" | bc -l)"
}
p=$(pair uri "$WPACK" resolve -q "$T/g.wpack" "$T/globals.mlir" -o "$T/g.out.mlir" -- "$MLIR_OPT" "$T/globals.mlir" -o "$T/g.opt.mlir")
m=${p#*|}
report "$NGLOBALS globals (uri)" "${p%|*}" "$m"
p=$(pair iree "$WPACK" resolve -q --emit iree "$T/g.wpack" "$T/globals.mlir" -o "$T/g.out2.mlir" --)
report "$NGLOBALS globals (iree)" "${p%|*}" "$m"
p=$(pair hex "$WPACK" resolve -q "$T/h.wpack" "$T/hex.mlir" -o "$T/h.out.mlir" -- "$MLIR_OPT" "$T/hex.mlir" -o "$T/h.opt.mlir")
report "$HEX_MB MiB inline hex" "${p%|*}" "${p#*|}"
