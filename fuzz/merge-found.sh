#!/bin/sh
# merge-found.sh - keep what a long run found, minimized, as found-* files:
#
#   sh fuzz/merge-found.sh TARGET DIR...
#
# libFuzzer's -merge=1 (build-fuzz/TARGET) starts from the generated and
# copied files of fuzz/corpus/TARGET (seed-*, golden-*, hostile-*, cli-*;
# crash-* and found-* left out) and adds, from the old found-* files and
# each DIR (say /tmp/fuzzlogs/corpus-TARGET of fuzz/long-run.sh), only the
# inputs that reach edges those do not (-use_counters=0: new edges, not new
# hit counts, which would keep ten times as many), smallest first. The result
# replaces the found-* files, so the corpus stays small.
set -u
cd "$(dirname "$0")/.." || exit 1
[ $# -ge 2 ] || { echo "usage: $0 TARGET DIR..."; exit 2; }
t=$1
shift
bin=build-fuzz/$t
[ -x "$bin" ] || { echo "$bin missing: make fuzz first"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/base" "$tmp/old"
for f in fuzz/corpus/$t/*; do
    case ${f##*/} in
        found-*) cp "$f" "$tmp/old/" ;;
        crash-*|leak-*|timeout-*|oom-*) ;;
        *) cp "$f" "$tmp/base/" ;;
    esac
done
ls "$tmp/base" | sort >"$tmp/before"
"$bin" -merge=1 -use_counters=0 -max_len=1048576 "$tmp/base" "$tmp/old" "$@" >"$tmp/merge.log" 2>&1 ||
    { tail -5 "$tmp/merge.log"; exit 1; }
ls "$tmp/base" | sort | comm -13 "$tmp/before" - >"$tmp/added"
old=$(ls "$tmp/old" | wc -l)
rm -f fuzz/corpus/$t/found-*
while read -r f; do
    case $f in found-*) cp "$tmp/base/$f" "fuzz/corpus/$t/$f" ;; *) cp "$tmp/base/$f" "fuzz/corpus/$t/found-$f" ;; esac
done <"$tmp/added"
echo "$t: $old found-* files before, $(wc -l <"$tmp/added") now; corpus $(ls fuzz/corpus/$t | wc -l) files, $(du -sh fuzz/corpus/$t | cut -f1)"
