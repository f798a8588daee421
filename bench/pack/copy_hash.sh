#!/bin/bash
# copy_hash.sh - the bytes-moving paths against cp, CPU time and wall time:
# `create --no-stats` from every input kind, `extract` and `export --to
# safetensors` (durable, and with --no-sync: the like-for-like peer of
# cp), each by one or two wpack binaries (e.g. before and after a
# change), interleaved (each repetition runs every command once, in turn),
# medians of REPS. A benchmark, not a test: it never fails on a slow figure.
#
# usage: bench/pack/copy_hash.sh WPACK [WPACK_BEFORE]
# env:   BENCH_SIZE (bytes of tensor data, default 1 GiB), BENCH_REPS (5),
#        BENCH_DIR (default /tmp; needs ~8x BENCH_SIZE), BENCH_INPUTS (a
#        directory of inputs kept from an earlier run: not removed), BENCH_PRELOAD (an
#        LD_PRELOAD for the timed commands, e.g. the no-fsync shim of
#        HELPERS.md: for analysis only, never for reported figures),
#        BENCH_KINDS (the inputs `create` runs from, default all six; empty:
#        only extract and export, from the safetensors input alone)
# Printed per command: median wall s, median CPU s (user+sys), median peak
# RSS MiB, and "cp wall / wall" (1.00: as fast as cp).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
TIME=/usr/bin/time
SIZE=${BENCH_SIZE:-$((1 << 30))}
REPS=${BENCH_REPS:-5}
[ $# -ge 1 ] || { echo "usage: $0 WPACK [WPACK_BEFORE]" >&2; exit 2; }
NEW=$(realpath "$1")
OLD=${2:+$(realpath "$2")}
WORK=$(mktemp -d "${BENCH_DIR:-/tmp}/wpack-copyhash.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
IN=${BENCH_INPUTS:-$WORK/in}
KINDS=${BENCH_KINDS-model.pt model.safetensors model.npz npy model.gguf model.irpa}
if [ ! -e "$IN/model.safetensors" ]; then
    echo "== inputs: $SIZE bytes in $IN" >&2
    "$PY" "$HERE/make_inputs.py" "$IN" "$SIZE" 400 >&2
fi
case " $KINDS " in *" model.gguf "*) [ -e "$IN/model.gguf" ] ||
    "$PY" "$HERE/../gguf/make_gguf.py" "$IN/model.gguf" "$SIZE" >&2 ;; esac
"$NEW" create -q --no-stats -o "$WORK/arc.wpack" "$IN/model.safetensors"
case " $KINDS " in *" model.irpa "*) [ -e "$IN/model.irpa" ] ||
    "$NEW" export "$WORK/arc.wpack" --to irpa -o "$IN/model.irpa" >/dev/null ;; esac

# run LABEL CMD...: one timed run, appended to $WORK/times as "LABEL wall cpu rssKiB"
run() {
    local label=$1
    shift
    LD_PRELOAD=${BENCH_PRELOAD:-} "$TIME" -f "%e %U %S %M" -o "$WORK/t" "$@" >/dev/null 2>"$WORK/err" ||
        { cat "$WORK/err" >&2; exit 1; }
    read -r e u s m <"$WORK/t"
    echo "$label $e $(awk "BEGIN{print $u + $s}") $m" >>"$WORK/times"
}

bins() { echo "new:$NEW${OLD:+ old:$OLD}"; }
cat "$IN"/model.* "$IN"/npy/* "$WORK/arc.wpack" >/dev/null # page cache
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for rep in $(seq "$REPS"); do
    echo "== repetition $rep/$REPS (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    for k in $KINDS; do
        run "cp/$k" cp -r "$IN/$k" "$WORK/copy"
        rm -rf "$WORK/copy"
        for b in $(bins); do
            run "${b%%:*}/create/$k" "${b#*:}" create -q --no-stats -o "$WORK/out.wpack" "$IN/$k"
            rm -f "$WORK/out.wpack"
        done
    done
    run "cp/archive" cp "$WORK/arc.wpack" "$WORK/copy"
    rm -f "$WORK/copy"
    for b in $(bins); do
        run "${b%%:*}/extract" "${b#*:}" extract -q "$WORK/arc.wpack" -o "$WORK/ex"
        rm -rf "$WORK/ex"
        run "${b%%:*}/export" "${b#*:}" export "$WORK/arc.wpack" --to safetensors -o "$WORK/ex.st"
        rm -f "$WORK/ex.st"
        run "${b%%:*}/extract_nosync" "${b#*:}" extract -q --no-sync "$WORK/arc.wpack" -o "$WORK/ex"
        rm -rf "$WORK/ex"
        run "${b%%:*}/export_nosync" "${b#*:}" export --no-sync "$WORK/arc.wpack" --to safetensors -o "$WORK/ex.st"
        rm -f "$WORK/ex.st"
    done
done

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) CPUs online)"
echo "file system: $(stat -f -c %T "$WORK"); $SIZE bytes, 400 tensors; median of $REPS, interleaved"
echo "preload: ${BENCH_PRELOAD:-none}; load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$WORK/times" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, e, c, m = line.split()
    rows.setdefault(label, []).append((float(e), float(c), int(m) / 1024))
med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in rows.items()}
print(f"| {'command':34} | wall s | CPU s | RSS MiB | cp wall / wall |")
print(f"|{'-' * 36}|--------|-------|---------|----------------|")
for k, (e, c, m) in med.items():
    if k.startswith("cp/"):
        continue
    what = k.split("/", 2)
    peer = "cp/" + (what[2] if what[1] == "create" else "archive")
    pe = med[peer][0]
    print(f"| {k:34} | {e:6.2f} | {c:5.2f} | {m:7.1f} | {pe / e:14.2f} |")
for k, (e, c, m) in med.items():
    if k.startswith("cp/"):
        print(f"| {k:34} | {e:6.2f} | {c:5.2f} |         |                |")
EOF
