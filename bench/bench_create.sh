#!/bin/sh
# bench_create.sh - `wpack create` of 1 GiB and 2 GiB of .npy data against cp
# of the same files, in one run (issue 2, section 5).
#
# usage: bench/bench_create.sh [path/to/wpack]     (default build/wpack)
# env:   BENCH_DIR  where the temporary data goes (default /tmp); needs ~6 GiB free
#        BENCH_REPS repetitions of each measurement (default 3; the median is reported)
#        BENCH_FILES files of 128 MiB in the big set (default 16 = 2 GiB; the small set has half)
#
# Each repetition runs, for the 1 GiB and then the 2 GiB input, one after the other:
#   cp -r IN COPY                     the peer (page cache only, nothing durable)
#   cp -r IN COPY && sync COPY/...    the durable peer (coreutils sync FILE = fsync of each
#                                     copied file and directory, like wpack's fsync + dir fsync)
#   wpack create -q -o OUT IN         the default: weight stats on, fsync, rename
#   wpack create -q --no-stats ...    what the weight stats cost
# timed by /usr/bin/time -v (elapsed wall clock, maximum resident set size).
# Benchmarks are not tests: this never fails on a slow figure.
set -eu

WPACK=${1:-build/wpack}
PY=/usr/bin/python3
BENCH_DIR=${BENCH_DIR:-/tmp}
REPS=${BENCH_REPS:-3}
FILES=${BENCH_FILES:-16}
TIME=/usr/bin/time

[ -x "$WPACK" ] || { echo "bench_create: no wpack binary at $WPACK (run make)" >&2; exit 1; }
[ -x "$TIME" ] || { echo "bench_create: $TIME missing: apt-get install time" >&2; exit 1; }
"$PY" -c 'import numpy' 2>/dev/null || { echo "bench_create: $PY has no numpy (python3-numpy)" >&2; exit 1; }

WORK=$(mktemp -d "$BENCH_DIR/wpack-bench-create.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the input: FILES x 128 MiB of f32 normal noise, laid out like a model ----
echo "== bench_create: making $FILES x 128 MiB of .npy in $WORK"
"$PY" - "$WORK/big" "$FILES" <<'EOF'
import os, sys
import numpy as np
root, files = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(2)
for i in range(files):
    d = os.path.join(root, "model", "layers", str(i), "mlp")
    os.makedirs(d)
    a = rng.standard_normal((8192, 4096), dtype=np.float32)  # 128 MiB
    np.save(os.path.join(d, "up_proj.weight.npy"), a)
EOF
# The small set is the first half of the big one (hard links: no extra disk).
half=$((FILES / 2))
i=0
while [ $i -lt $half ]; do
    mkdir -p "$WORK/small/model/layers/$i/mlp"
    ln "$WORK/big/model/layers/$i/mlp/up_proj.weight.npy" "$WORK/small/model/layers/$i/mlp/"
    i=$((i + 1))
done
sync # nothing of the input left dirty to be flushed inside a timed run
cat "$WORK"/big/model/layers/*/mlp/*.npy >/dev/null # and all of it in the page cache

bytes_of() { du -sb --count-links "$1" | cut -f1; }

# run LABEL CMD...: time CMD, append "LABEL seconds maxrss_kib" to $WORK/results.
run() {
    label=$1
    shift
    "$TIME" -v -o "$WORK/time.txt" "$@" >"$WORK/out.txt" 2>&1 || {
        echo "bench_create: $label failed:" >&2
        cat "$WORK/out.txt" "$WORK/time.txt" >&2
        exit 1
    }
    secs=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$WORK/time.txt" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
    echo "$label $secs $kib" >>"$WORK/results"
    rm -rf "$WORK/copy" "$WORK/out.wpack"
    sync
}

: >"$WORK/results"
rep=1
while [ "$rep" -le "$REPS" ]; do
    echo "   repetition $rep of $REPS"
    for set in small big; do
        in="$WORK/$set"
        run "$set.cp" cp -r "$in" "$WORK/copy"
        # shellcheck disable=SC2016 # $1 and $2 belong to the inner sh
        run "$set.cp_sync" sh -c 'cp -r "$1" "$2" && find "$2" -exec sync {} +' sh "$in" "$WORK/copy"
        run "$set.wpack" "$WPACK" create -q -o "$WORK/out.wpack" "$in"
        run "$set.wpack_nostats" "$WPACK" create -q --no-stats -o "$WORK/out.wpack" "$in"
    done
    rep=$((rep + 1))
done

# ---- report: medians, throughput ratios, peak RSS ----
small_bytes=$(bytes_of "$WORK/small")
big_bytes=$(bytes_of "$WORK/big")
awk -v small="$small_bytes" -v big="$big_bytes" -v reps="$REPS" '
function median(label,   n, i, j, t, v) {
    n = cnt[label]
    for (i = 1; i <= n; i++) v[i] = t_[label, i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function maxrss(label,   i, m) {
    m = 0
    for (i = 1; i <= cnt[label]; i++) if (r_[label, i] > m) m = r_[label, i]
    return m
}
function verdict(ok) { return ok ? "PASS" : "MISS" }
{ cnt[$1]++; t_[$1, cnt[$1]] = $2; r_[$1, cnt[$1]] = $3 }
END {
    split("small big", sets, " ")
    split("cp cp_sync wpack wpack_nostats", kinds, " ")
    name["cp"] = "cp -r"; name["cp_sync"] = "cp -r && sync"
    name["wpack"] = "wpack create"; name["wpack_nostats"] = "wpack create --no-stats"
    for (s = 1; s <= 2; s++) {
        set = sets[s]; bytes = set == "small" ? small : big
        printf "%.2f GiB of .npy (median of %d):\n", bytes / 1073741824, reps
        for (k = 1; k <= 4; k++) {
            l = set "." kinds[k]; t = median(l); T[l] = t
            raw = ""
            for (i = 1; i <= cnt[l]; i++) raw = raw sprintf(" %.2f", t_[l, i])
            printf "  %-24s %6.2f s  %7.0f MiB/s  max RSS %6.1f MiB   (runs:%s s)\n", name[kinds[k]], t, bytes / t / 1048576, maxrss(l) / 1024, raw
        }
        cp = T[set ".cp"]; cps = T[set ".cp_sync"]; w = T[set ".wpack"]; wn = T[set ".wpack_nostats"]
        printf "  throughput wpack/cp %.2fx, wpack/(cp && sync) %.2fx, --no-stats/cp %.2fx, --no-stats/(cp && sync) %.2fx\n", cp / w, cps / w, cp / wn, cps / wn
        printf "  weight stats cost %.0f%% of the create time (%.2f s with, %.2f s without)\n", (w - wn) / w * 100, w, wn
        ratio[set] = cp / w; ratio_sync[set] = cps / w; rss[set] = maxrss(set ".wpack")
        if (maxrss(set ".wpack_nostats") > rss[set]) rss[set] = maxrss(set ".wpack_nostats")
    }
    printf "peak RSS of wpack create: %.1f MiB at %.2f GiB, %.1f MiB at %.2f GiB (%+.1f MiB for twice the data)\n", rss["small"] / 1024, small / 1073741824, rss["big"] / 1024, big / 1073741824, (rss["big"] - rss["small"]) / 1024
    printf "goal throughput >= 0.8x cp (%.2f GiB)       : %s (%.2fx; against cp && sync %.2fx)\n", big / 1073741824, verdict(ratio["big"] >= 0.8), ratio["big"], ratio_sync["big"]
    # PASS: under 64 MiB at both sizes, and twice the data adds at most 10% + 1 MiB.
    printf "goal peak RSS < 64 MiB whatever the size    : %s (%.1f MiB at %.2f GiB, %.1f MiB at %.2f GiB)\n", verdict(rss["big"] < 65536 && rss["small"] < 65536 && rss["big"] <= rss["small"] * 1.1 + 1024), rss["big"] / 1024, big / 1073741824, rss["small"] / 1024, small / 1073741824
}' "$WORK/results"
