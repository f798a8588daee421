#!/bin/sh
# coverage.sh - `make fuzz-coverage`: line coverage of format/ and reader/
# from the checked-in corpora alone. Builds the replay drivers with gcc
# --coverage into build-cov/, runs every corpus file of every target (-k:
# each in its own process, which exits, so gcov sees it), then prints gcov's
# line count per file and per directory.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${COV_BUILD:-build-cov}
MAKE=${MAKE:-make}
$MAKE -s --no-print-directory BUILD="$B" OPT="-O0 -g" CFLAGS=--coverage LDFLAGS=--coverage \
    fuzz-replay-build || exit 1
find "$B" -name '*.gcda' -delete
targets=$($MAKE -s --no-print-directory fuzz-oss-vars | sed -n "s/^FUZZ_TARGETS='\(.*\)'$/\1/p")
for t in $targets; do
    "$B/fuzz/replay_$t" -k -t 60 "fuzz/corpus/$t" | tail -1 | sed "s|^|$t: |"
done
for d in format reader; do
    for s in $d/*.c; do
        # gcov -n: no .gcov files; "Lines executed:P% of N" for the file itself
        gcov -n -o "$B/obj/$d" "$s" 2>/dev/null |
            awk -v f="$s" '$0 == "File '"'"'" f "'"'"'" {on = 1; next}
                on && /^Lines executed/ {split($2, a, ":"); sub("%", "", a[2]); print f, a[2], $4; exit}'
    done
done | awk '{ split($1, p, "/"); d = p[1]; hit = $2 * $3 / 100; ex[d] += hit; tot[d] += $3
              printf "  %-22s %6.2f%% of %d lines\n", $1, $2, $3 }
        END { for (d in ex) printf "%s/: %.1f%% of %d lines\n", d, 100 * ex[d] / tot[d], tot[d] }'
