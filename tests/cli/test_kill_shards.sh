#!/bin/bash
# test_kill_shards.sh - kill -9 of `wpack create --shard-size` writing a set
# over an existing set (spec 19a, README "Sharded sets"):
#  - at random moments of a ~200 MiB set, and right after each rename, link
#    and unlink of the commit (strace's syscall injection), the set at the
#    path always verifies and is wholly the old set or wholly the new one;
#  - every file a killed writer leaves is its own (a temporary, or a shard
#    name linked to one of its temporaries), and the next run over the same
#    path removes exactly those: afterwards the directory holds the set, its
#    shards and the user's files (some named like shards, a hard link to an
#    old shard, a file named like a temporary), nothing else;
#  - readers that open the set while it is replaced get the old or the new
#    set, not an error;
#  - the same for a plain archive written over a set (`create` without
#    --shard-size) and for `convert -o` over a set (`convert`/`cast
#    --in-place` refuse a set); `wpack update` of a set's manifest killed
#    after each write leaves the set whole, with the old or new metadata.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
TRIALS=${WPACK_KILL_TRIALS:-10}

$PY - <<'PYEOF' || fail fixtures "python failed"
import os, numpy as np
for tag, seed, shape in (("A", 1, (2048, 1024)), ("B", 2, (2048, 1024)),
                         ("a", 3, (64, 64)), ("b", 4, (64, 64))):
    os.makedirs(tag)
    r = np.random.default_rng(seed)
    for i in range(12):
        np.save(f"{tag}/w{i:02d}.npy", r.standard_normal(shape).astype(np.float32))
PYEOF

# sums SET: the set's tensor checksums (tensors in name order), one line
sums() { "$WPACK" inspect --json "$1" | grep -o '"checksum": "[0-9a-f]*"' | md5sum | cut -c1-32; }
# state SET: "A", "B", "a", "b" (whose tensors it holds) after a passing
# verify, else "BROKEN: why"; $T/names gets the files the set names.
state() {
    if ! "$WPACK" verify "$1" >/dev/null 2>"$T/verr"; then
        echo "BROKEN: $(head -c 300 "$T/verr")"
        return
    fi
    names_of "$1"
    local s k v
    s=$(grep -o '"checksum": "[0-9a-f]*"' "$T/json" | md5sum | cut -c1-32)
    while read -r k v; do
        [ "$v" = "$s" ] && { echo "$k"; return; }
    done <"$T/refs"
    echo "BROKEN: tensors of neither set"
}
names_of() { # SET: $T/names as state writes it, without the verify
    "$WPACK" inspect --json "$1" >"$T/json"
    { basename "$1"; grep -o '"wpack.shards": \[[^]]*\]' "$T/json" | grep -o '"[^"]*"' | tr -d '"' |
        grep -v -x wpack.shards; } >"$T/names"
}
sums_of() { echo "$1 $(sums "$2")" >>"$T/refs"; } # TAG SET: the set's sums are TAG's

# The user's files beside the set: none may change or go.
plant_user_files() { # DIR SET_BASE (without .wpack)
    echo mine >"$1/$2-00001-of-00006.wpack.bak"
    echo mine >"$1/$2-00007-of-00009.wpack"   # named like a shard of no set
    echo mine >"$1/$2.wpack.tmp-notours"
    echo mine >"$1/$2.wpack.tmp-12-0123456789abcdef.new" # not a writer's suffix
}
user_files_ok() { # DIR SET_BASE
    local f
    for f in "$2-00001-of-00006.wpack.bak" "$2-00007-of-00009.wpack" "$2.wpack.tmp-notours" \
        "$2.wpack.tmp-12-0123456789abcdef.new"; do
        [ -f "$1/$f" ] && [ "$(<"$1/$f")" = mine ] || { echo "$f changed or gone"; return 1; }
    done
    [ ! -e "$1/mine.wpack" ] || cmp -s "$1/mine.wpack" "$1/mine.copy" || { echo "mine.wpack changed"; return 1; }
}
# leftovers DIR SET: files that are neither the set, its shards, inputs nor
# the user's
leftovers() {
    ls "$1" | grep -v -x -F -f "$T/names" |
        grep -v -x -E 'A|B|a|b|refs|names|verr|err|out|json|trace|steps|plain_b\.wpack|mine\.wpack|mine\.copy|.*\.bak|.*-00007-of-00009\.wpack|.*\.tmp-notours|.*\.tmp-12-0123456789abcdef\.new' || true
}
# untied DIR: shard-like files the set does not name, not linked to a temporary
# of a writer (which the next run's sweep settles): orphans nothing cleans up
untied() {
    local f
    f=$(ls "$1" | grep -E -- '-[0-9]{5}-of-[0-9]{5}(\.[0-9]+)?\.wpack$' | grep -v -e '\.tmp-' |
        grep -v -x -F -f "$T/names" | grep -v -- '-00007-of-00009\.wpack$')
    [ -z "$f" ] || (cd "$1" && stat -c '%h %n' $f) | grep '^1 ' || true
}

# ---- references
expect set_A "$WPACK" create -q --shard-size 20M -o S.wpack A
sums_of A S.wpack
expect set_B "$WPACK" create -q --shard-size 20M -o S.wpack B
sums_of B S.wpack
expect set_a "$WPACK" create -q --shard-size 70K -o s.wpack a
sums_of a s.wpack
expect set_b "$WPACK" create -q --shard-size 70K -o s.wpack b
sums_of b s.wpack
[ "$(wc -l <"$T/refs")" = 4 ] && [ "$(cut -d' ' -f2 "$T/refs" | sort -u | wc -l)" = 4 ] &&
    pass refs_distinct || fail refs_distinct "$(cat "$T/refs")"
[ "$(state S.wpack)" = B ] && pass state_B || fail state_B "$(state S.wpack)"
rm -f S*.wpack s*.wpack
plant_user_files . S
plant_user_files . s

echo "# ${SECONDS}s"
# ---- random kills while a ~100 MiB set replaces another
# (both runs timed: the kill delays span the shorter, so that one run
# slowed by a load spike does not put most kills after the end)
start=$(date +%s%3N)
expect first_set "$WPACK" create -q --shard-size 20M -o S.wpack A
dur1=$(($(date +%s%3N) - start + 1))
ln S-00001-of-00006.wpack mine.wpack && cp mine.wpack mine.copy # the user's link to a shard
start=$(date +%s%3N)
"$WPACK" create -q --shard-size 20M -o S.wpack B || fail timed_run
dur=$(($(date +%s%3N) - start + 1))
[ "$dur1" -lt "$dur" ] && dur=$dur1
echo "# a replacing run takes $dur ms"
killed=0 bad=0 why="" seen=""
for t in $(seq "$TRIALS"); do
    cur=$(state S.wpack)
    next=A; [ "$cur" = A ] && next=B
    delay=$((RANDOM % (dur + dur / 4)))
    "$WPACK" create -q --shard-size 20M -o S.wpack "$next" >/dev/null 2>&1 &
    pid=$!
    sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
    kill -9 $pid 2>/dev/null
    { wait $pid; } 2>/dev/null
    [ $? = 137 ] && killed=$((killed + 1))
    now=$(state S.wpack)
    seen="$seen $now"
    case $now in
    "$cur" | "$next") ;;
    *) bad=$((bad + 1)) why="trial $t (${delay} ms): $now" ;;
    esac
    u=$(untied .)
    [ -z "$u" ] || { bad=$((bad + 1)) why="trial $t (${delay} ms): orphans $u"; }
    m=$(user_files_ok . S) || { bad=$((bad + 1)) why="trial $t: $m"; }
done
[ $bad = 0 ] && pass random_kills_safe || fail random_kills_safe "$bad bad; $why"
[ $killed -ge $((TRIALS / 4)) ] && pass random_kills_landed ||
    fail random_kills_landed "only $killed of $TRIALS runs were killed (a run takes $dur ms)"
echo "# states after the kills:$seen"
expect random_clean_run "$WPACK" create -q --shard-size 20M -o S.wpack A
[ "$(state S.wpack)" = A ] && pass random_clean_state || fail random_clean_state "$(state S.wpack)"
l=$(leftovers .)
[ -z "$l" ] && pass random_swept_exactly || fail random_swept_exactly "$(echo $l)"
m=$(user_files_ok . S) && pass random_user_files_kept || fail random_user_files_kept "$m"
cmp -s mine.wpack mine.copy && pass user_link_to_old_shard_kept || fail user_link_to_old_shard_kept
rm -f S.wpack S-0000?-of-00006*.wpack mine.wpack mine.copy

echo "# ${SECONDS}s"
# ---- a kill right after each step of the commit (small sets: the same steps)
# step_trials NAME STRIDE MAKE_OLD CMD...: for every STRIDEth rename, link
# and unlink of the commit (the manifest's rename, and those of files tied to
# it) the command makes, a run killed right after it; then the state, and
# after the next run (MAKE_OLD, which sweeps) the directory.
STEPS="rename,renameat2,link,linkat,unlink,unlinkat"
# traced: a command under strace (an ASan build's leak check cannot run
# under ptrace; everything else it checks still runs)
traced() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -qq "$@"; }
step_trials() {
    local name=$1 stride=$2 make_old=$3 sc i bad=0 why="" runs=0 olds=0 news=0 old new now u m l
    shift 3
    if ! command -v strace >/dev/null; then
        fail "${name}_steps" "strace is needed for the kills after each step"
        return
    fi
    $make_old >/dev/null 2>&1 || { fail "${name}_make_old"; return; }
    old=$(state s.wpack)
    traced -o "$T/trace" -e trace=$STEPS "$@" >/dev/null 2>&1 || { fail "${name}_traced"; return; }
    new=$(state s.wpack)
    $make_old >/dev/null 2>&1 || { fail "${name}_make_old"; return; }
    # "SYSCALL N" of each step: the Nth call of that syscall
    awk -F'(' -v stride="$stride" '{ n[$1]++ }
        /\.new-|\.gone-|-of-|"s\.wpack"/ && k++ % stride == 0 { print $1, n[$1] }' "$T/trace" >"$T/steps"
    while read -r sc i; do
        { traced -o /dev/null -e trace=$sc -e inject=$sc:signal=KILL:when=$i "$@"; } >/dev/null 2>&1
        runs=$((runs + 1))
        now=$(state s.wpack)
        case $now in
        "$old") olds=$((olds + 1)) ;;
        "$new") news=$((news + 1)) ;;
        *) bad=$((bad + 1)) why="$sc #$i: $now" ;;
        esac
        u=$(untied .)
        [ -z "$u" ] || { bad=$((bad + 1)) why="$sc #$i: orphans $(echo $u)"; }
        $make_old >/dev/null 2>&1 || { fail "${name}_make_old"; return; }
        names_of s.wpack
        l=$(leftovers .)
        [ -z "$l" ] || { bad=$((bad + 1)) why="$sc #$i: the next run left $(echo $l)"; }
        m=$(user_files_ok . s) || { bad=$((bad + 1)) why="$sc #$i: $m"; }
    done <"$T/steps"
    echo "# ${SECONDS}s $name: $runs kills after a step: $olds left the old set, $news the new one"
    [ $bad = 0 ] && pass "${name}_steps_safe" || fail "${name}_steps_safe" "$bad bad; $why"
    # both outcomes happened: the kills spanned the switch
    [ $olds -gt 0 ] && [ $news -gt 0 ] && pass "${name}_steps_span" ||
        fail "${name}_steps_span" "$olds old, $news new of $runs"
}
old_a() { "$WPACK" create -q --shard-size 70K -o s.wpack a; }
step_trials set_over_set 1 old_a "$WPACK" create -q --shard-size 70K -o s.wpack b
# another shard count: no name of the new set is taken
step_trials set_over_set_other_count 3 old_a "$WPACK" create -q --shard-size 100K -o s.wpack b
# a plain archive over a set: the set's shards go with its rename (convert,
# cast and the API's writer take the same path)
step_trials plain_over_set 2 old_a "$WPACK" create -q -o s.wpack b
"$WPACK" create -q -o plain_b.wpack b 2>/dev/null
step_trials convert_over_set 5 old_a "$WPACK" convert plain_b.wpack --decompress -o s.wpack

# ---- `wpack update` of a set's manifest (its index, in place; the shards
# are not touched), killed right after each of its writes and fsyncs: the
# set verifies, holds the same tensors, and has the old metadata or the new
if command -v strace >/dev/null; then
    bad=0 why="" runs=0
    for step in pwrite64:1 pwrite64:2 pwrite64:3 fsync:1 fsync:2; do
        old_a >/dev/null 2>&1 || fail update_make_old
        { traced -o /dev/null -e trace=${step%:*} -e inject=${step%:*}:signal=KILL:when=${step#*:} \
            "$WPACK" update s.wpack --meta k=v; } >/dev/null 2>&1
        runs=$((runs + 1))
        now=$(state s.wpack)
        [ "$now" = a ] || { bad=$((bad + 1)) why="$step: $now"; }
        "$WPACK" update s.wpack --meta k=v >/dev/null 2>"$T/err" || { bad=$((bad + 1)) why="$step: rerun $(cat "$T/err")"; }
        [ "$(state s.wpack)" = a ] && grep -q '"k": "v"' "$T/json" ||
            { bad=$((bad + 1)) why="$step: after the rerun"; }
    done
    [ $bad = 0 ] && pass update_set_kills_safe || fail update_set_kills_safe "$bad bad of $runs; $why"
else
    fail update_set_kills_safe "strace is needed for the kills after each step"
fi

# ---- a writer killed between the two passes of another run's sweep: the
# first pass leaves its tied files (its temporary is locked: alive), the
# second finds the temporary dead. It settles them before it removes the
# temporary; else a '.gone-' link outlived it, and the next sweep took the
# missing temporary for a rename and removed a shard of the set in place.
# The writer is faked (its temporary and one tie, held by flock for 2 s);
# strace holds the sweep 4 s before its second pass (its rewinddir's lseek).
if command -v strace >/dev/null && command -v flock >/dev/null; then
    rm -rf race && mkdir race
    "$WPACK" create -q --shard-size 70K -o race/s.wpack a || fail race_set
    tmp=race/s.wpack.tmp-999-0123456789abcdef
    echo manifest >$tmp
    sh1=$(cd race && ls | grep -- '-00001-of-')
    ln race/$sh1 $tmp.gone-$sh1
    flock $tmp sleep 2 &
    hpid=$!
    sleep 0.3
    echo garbage >race/bad.npy
    traced -o /dev/null -e trace=lseek -e inject=lseek:delay_enter=4000000:when=2 \
        "$WPACK" create -q -o race/s.wpack race/bad.npy >/dev/null 2>&1 # fails after its sweep
    wait $hpid
    "$WPACK" create -q -o race/s.wpack race/bad.npy >/dev/null 2>&1 # the next sweep
    [ "$(state race/s.wpack)" = a ] && [ ! -e $tmp ] && [ -z "$(ls race | grep tmp-999)" ] &&
        pass sweep_race_keeps_set || fail sweep_race_keeps_set "$(state race/s.wpack); $(ls race)"
    rm -rf race
else
    fail sweep_race_keeps_set "strace and flock are needed"
fi

# ---- readers while the set is replaced: old or new, never an error. The
# reader is held for a second right after it opened the manifest (strace:
# delay after its openat of it), while the set is replaced and the old
# shards removed.
if command -v strace >/dev/null; then
    bad=0 why=""
    for k in 1 2 3; do
        "$WPACK" create -q --shard-size 70K -o s.wpack a || fail reader_old_set
        traced -o /dev/null -P s.wpack -e trace=openat -e inject=openat:delay_exit=1000000:when=1 \
            "$WPACK" verify s.wpack >"$T/out" 2>"$T/err" &
        rpid=$!
        sleep 0.3
        "$WPACK" create -q --shard-size 70K -o s.wpack b || fail reader_new_set
        wait $rpid || { bad=$((bad + 1)) why="$(head -c 300 "$T/err")"; }
    done
    [ $bad = 0 ] && pass readers_see_a_whole_set || fail readers_see_a_whole_set "$bad of 3: $why"
else
    fail readers_see_a_whole_set "strace is needed to hold the reader"
fi

finish
