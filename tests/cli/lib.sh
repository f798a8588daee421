# lib.sh - shared by the CLI tests (sourced). Each test script calls
# pass/fail per case and `finish` at the end, printing the same lines as the
# C harness so tests/run-tests.sh can add them up.
#   WPACK   the binary under test     PY  /usr/bin/python3
#   WPACK_HOOKS  the same CLI with the test hooks (make tests builds it
#                beside the unit tests; the released wpack has none)
set -u
WPACK=${WPACK:?WPACK must point at the wpack binary}
WPACK_HOOKS=${WPACK_HOOKS:-$(dirname "$WPACK")/tests/wpack-hooks}
PY=${PY:-/usr/bin/python3}
TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/wpack-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
tl_passed=0
tl_failed=0

pass() { tl_passed=$((tl_passed + 1)); echo "ok $1"; }
fail() { tl_failed=$((tl_failed + 1)); echo "FAIL $1${2:+: $2}"; }

# expect NAME CMD...: CMD must exit 0.
expect() {
    local name=$1; shift
    if "$@" >"$T/out" 2>"$T/err"; then pass "$name"; else fail "$name" "exit $? : $(head -c 400 "$T/err")"; fi
}

# nothing_at NAME PATH...: none of the paths (nor a temporary beside them) exists.
nothing_at() {
    local name=$1 p left=""; shift
    for p in "$@"; do
        left="$left$(ls -d "$p" "$p".tmp-* 2>/dev/null)"
    done
    if [ -z "$left" ]; then pass "$name"; else fail "$name" "left: $left"; fi
}

# expect_fail NAME PATTERN CMD...: CMD must exit non-zero (not by a signal)
# and its stderr must match the extended regex PATTERN.
expect_fail() {
    local name=$1 pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 0 ]; then fail "$name" "exited 0"; return; fi
    if [ $rc -ge 128 ]; then fail "$name" "killed by signal $((rc - 128))"; return; fi
    if grep -Eq -- "$pat" "$T/err"; then pass "$name"; else fail "$name" "stderr lacks /$pat/: $(head -c 400 "$T/err")"; fi
}

# named_once NAME TEXT: the last command's stderr ($T/err) holds TEXT
# exactly once (a message names its path once, not "PATH: PATH: ...").
named_once() {
    local n
    n=$(grep -oF -- "$2" "$T/err" | wc -l)
    if [ "$n" -eq 1 ]; then pass "$1"; else fail "$1" "'$2' $n times in: $(head -c 400 "$T/err")"; fi
}

# expect_hostile_dir DIR EXT MIN: every file DIR/*.EXT is listed in DIR/EXPECT
# ("file code" lines), at least MIN of them, and `wpack create` of each fails
# with [code], never by a signal, leaving no output.
expect_hostile_dir() {
    local dir=$1 ext=$2 min=$3 n=0 file code
    while read -r file code; do
        case $file in "#"*|"") continue ;; esac
        n=$((n + 1))
        expect_fail "hostile_${file%.$ext}" "\[$code\]" "$WPACK" create -q -o "$T/h.wpack" "$dir/$file"
        if ls "$T"/h.wpack* >/dev/null 2>&1; then fail "hostile_${file%.$ext}_no_output"; fi
    done <"$dir/EXPECT"
    [ "$n" -ge "$min" ] && pass hostile_all_listed || fail hostile_all_listed "only $n files in EXPECT"
    for file in "$dir"/*."$ext"; do
        grep -q "^$(basename "$file") " "$dir/EXPECT" || fail "hostile_unlisted_$(basename "$file")"
    done
}

# same_with_copy_range NAME ARGS...: `wpack create ARGS` with the
# copy_file_range fast path and without it (WPACK_NO_COPY_RANGE=1) gives the
# same archive, byte for byte, and it verifies.
same_with_copy_range() {
    local name=$1; shift
    rm -f "$T/a.wpack" "$T/b.wpack"
    if ! "$WPACK" create -q -o "$T/a.wpack" "$@" 2>"$T/err"; then fail "$name" "fast: $(head -c 300 "$T/err")"; return; fi
    if ! WPACK_NO_COPY_RANGE=1 "$WPACK" create -q -o "$T/b.wpack" "$@" 2>"$T/err"; then fail "$name" "plain: $(head -c 300 "$T/err")"; return; fi
    if ! cmp -s "$T/a.wpack" "$T/b.wpack"; then fail "$name" "archives differ"; return; fi
    if ! "$WPACK" verify "$T/a.wpack" >/dev/null 2>"$T/err"; then fail "$name" "verify: $(head -c 300 "$T/err")"; return; fi
    pass "$name"
}

# make_page_gguf PATH SEED: a GGUF with general.alignment 4096 and its
# tensors (f32 700x300, f16 900x200, random from SEED) at page offsets: the
# offsets of the archive made from it (wpack's default alignment), so its
# bytes line up in a page both ways (wpk_pages_line_up).
make_page_gguf() {
    "$PY" - "$1" "$TESTS_DIR/cli" "$2" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np
import gguf_tool as g
r = np.random.RandomState(int(sys.argv[3]))
kvs = [("general.architecture", g.STRING, "llama"), ("general.alignment", g.U32, 4096)]
g.write(sys.argv[1], kvs,
        [("a.f32", 0, [700, 300], r.standard_normal(700 * 300).astype(np.float32).tobytes()),
         ("b.f16", 1, [900, 200], r.standard_normal(900 * 200).astype(np.float16).tobytes())],
        alignment=4096)
PY
}

# copy_range_used NAME yes|no ARGS...: under strace, `wpack create ARGS`
# moves bytes with copy_file_range (yes) or never calls it (no). The writer
# calls it only where the input's bytes sit at the same offset in a 4 KiB
# page as in the archive (wpk_pages_line_up): elsewhere write() of the step
# it read is cheaper. A visible skip without strace.
copy_range_used() {
    local name=$1 want=$2; shift 2
    rm -f "$T/cr.wpack"
    copy_range_used_by "$name" "$want" "$WPACK" create -q -o "$T/cr.wpack" "$@"
}

# copy_range_used_by NAME yes|no CMD...: the same for any command (extract,
# export: wpack_read_to_fd follows the same rule).
copy_range_used_by() {
    local name=$1 want=$2 got; shift 2
    if ! command -v strace >/dev/null 2>&1; then echo "skip $name: no strace"; return; fi
    # LeakSanitizer cannot run under ptrace (an ASan build would fail at exit)
    if ! ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -e trace=copy_file_range -o "$T/trace" "$@" 2>"$T/err"; then
        fail "$name" "$(head -c 300 "$T/err")"
        return
    fi
    if grep -q "copy_file_range(.*= [1-9]" "$T/trace"; then got=yes
    elif grep -q "copy_file_range(" "$T/trace"; then got="called, nothing copied"
    else got=no; fi
    [ "$got" = "$want" ] && pass "$name" || fail "$name" "copy_file_range: $got (want $want)"
}

# cpu_limit SECS CMD...: CMD with SECS seconds of CPU time (RLIMIT_CPU:
# SIGXCPU past it) and 10 x SECS of wall time. Bounds a case's work without
# failing it on a loaded machine, where an ASan build's wall time was 4x
# its CPU time (`timeout 30` of a 12 s run).
cpu_limit() {
    local s=$1; shift
    ( ulimit -t "$s" && exec timeout $((s * 10)) "$@" )
}

finish() {
    echo "# passed $tl_passed failed $tl_failed"
    [ "$tl_failed" -eq 0 ]
}

# need_mlir_opt: MLIR_OPT is mlir-opt-19, or the test fails here (the
# cases compare with it) and exits.
need_mlir_opt() {
    MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}
    if ! [ -x "$MLIR_OPT" ]; then
        fail mlir_opt "mlir-opt-19 not found: these cases compare with it"
        finish
        exit 1
    fi
}

# py_wpack ARGS...: $PY with the wpack package over the libraries of the
# build under test ($WPACK's directory), the ASan runtime preloaded when
# that build is sanitized (Python's own allocations not leak-checked).
py_wpack() {
    local bdir pre=""
    bdir=$(cd "$(dirname "$WPACK")" && pwd)
    if ldd "$WPACK" 2>/dev/null | grep -q libasan; then
        pre=$(${CC:-cc} -print-file-name=libasan.so)
    fi
    WPACK_LIBRARY_PATH="$bdir" PYTHONPATH="$TESTS_DIR/../python" LD_PRELOAD="$pre" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$PY" "$@"
}
