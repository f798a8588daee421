# bench/lib.sh - the timing helpers of bench/*/run.sh (sourced once WORK and
# TIME are set). Each timed run appends "microseconds rss_kib" to
# $WORK/t.NAME; the figures are medians over those lines.
#   bench_before, bench_after   run around each timed command, outside the
#                               timing (default: nothing; a script defines
#                               its own after sourcing this file)
#   BENCH_RATIO_SUFFIX          printed after each ratio (default "x")

bench_before() { :; }
bench_after() { :; }

# timed NAME CMD...: one run of CMD (its output dropped; a failure stops the
# script with CMD's last words)
timed() {
    local name=$1; shift
    bench_before
    local t0 t1
    t0=$(date +%s%N)
    "$TIME" -f "%M" -o "$WORK/one" "$@" >/dev/null 2>"$WORK/err" ||
        { echo "$(basename "$0"): $* failed: $(tail -c 600 "$WORK/err")" >&2; exit 1; }
    t1=$(date +%s%N)
    echo "$(( (t1 - t0) / 1000 )) $(tail -n1 "$WORK/one")" >>"$WORK/t.$name"
    bench_after
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# secs NAME: median microseconds; rss NAME: median peak RSS in KiB
secs() { awk '{print $1}' "$WORK/t.$1" | median; }
rss() { awk '{print $2}' "$WORK/t.$1" | median; }
# rss_mib NAME [DECIMALS]: median peak RSS in MiB (1 decimal by default)
rss_mib() { rss "$1" | awk -v d="${2:-1}" '{printf "%.*f", d, $1 / 1024}'; }
# ratio PEER NAME: PEER's median time / NAME's (higher: NAME is faster)
ratio() {
    awk -v a="$(secs "$1")" -v b="$(secs "$2")" -v s="${BENCH_RATIO_SUFFIX-x}" \
        'BEGIN {printf "%.2f%s", (b > 0 ? a / b : 0), s}'
}
# all NAME: every run's seconds, in order
all() { awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e6}' "$WORK/t.$1"; }
