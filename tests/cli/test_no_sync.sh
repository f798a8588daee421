#!/bin/bash
# test_no_sync.sh - durability by default, --no-sync / WPACK_NO_SYNC=1 as the
# opt-out (README: Durability). Counts the fsync-family system calls under
# strace: create, cast, convert, export, externalize, resolve, run and a
# sharded create fsync by default and make none with the opt-out, with the
# same bytes either way; extract of N files makes at most N+2 fsyncs (not
# 2N) and none with the opt-out; update still fsyncs under WPACK_NO_SYNC=1;
# an extract that fails half-way leaves the files before the failure whole
# and no temporary.
. "$(dirname "$0")/lib.sh"

if ! command -v strace >/dev/null; then
    fail strace_installed "strace is not installed (tools/deps.sh installs it)"
    finish
    exit 1
fi

# syncs LOG CMD...: run CMD under strace (LeakSanitizer cannot run under a
# tracer: leaks are checked by the other tests); the count of
# fsync/fdatasync/sync_file_range/syncfs/sync calls into $T/n. CMD must
# exit 0.
syncs() {
    local log=$1; shift
    if ! ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$log" \
        -e trace=fsync,fdatasync,sync_file_range,syncfs,sync "$@" >"$T/out" 2>"$T/err"; then
        echo "-1" >"$T/n"
        return 1
    fi
    grep -cE '(^|[ ])(fsync|fdatasync|sync_file_range|syncfs|sync)\(' "$log" >"$T/n"
    return 0
}
fsyncs() { grep -cE '(^|[ ])(fsync|fdatasync)\(' "$1"; }

# want_syncs NAME OP COUNT CMD...: CMD's sync calls compare (OP: -eq -ge -le) with COUNT.
want_syncs() {
    local name=$1 op=$2 want=$3; shift 3
    if ! syncs "$T/$name.log" "$@"; then
        fail "$name" "exit: $(head -c 300 "$T/err")"
        return
    fi
    local n
    n=$(cat "$T/n")
    [ "$n" "$op" "$want" ] && pass "$name" || fail "$name" "$n sync calls, want $op $want"
}

same() { # NAME A B: byte-identical files or trees
    if diff -r "$2" "$3" >/dev/null 2>&1; then pass "$1"; else fail "$1" "$2 and $3 differ"; fi
}

"$PY" - "$T/src" <<'EOF' || { fail inputs "numpy failed"; finish; exit 1; }
import os, sys, numpy as np
d = sys.argv[1]
os.makedirs(d)
for i in range(40):
    a = np.arange(5000 + 100 * i, dtype=np.float32) * (i + 1)
    if i == 5:
        a = np.full(4096, 7.5, dtype=np.float32)  # found and damaged below
    np.save(os.path.join(d, "t%02d.npy" % i), a)
EOF

# ---- create: durable by default, none with the opt-out, the same bytes
want_syncs create_default -ge 2 "$WPACK" create -q -o "$T/a.wpack" "$T/src"
want_syncs create_no_sync -eq 0 "$WPACK" create -q --no-sync -o "$T/b.wpack" "$T/src"
want_syncs create_env -eq 0 env WPACK_NO_SYNC=1 "$WPACK" create -q -o "$T/c.wpack" "$T/src"
want_syncs create_env_not_1 -ge 2 env WPACK_NO_SYNC=0 "$WPACK" create -q -o "$T/d.wpack" "$T/src"
same create_same_bytes "$T/a.wpack" "$T/b.wpack"
same create_env_same_bytes "$T/a.wpack" "$T/c.wpack"
"$WPACK" verify "$T/b.wpack" >/dev/null 2>&1 && pass no_sync_archive_verifies || fail no_sync_archive_verifies
# an archive and its directory: 2 fsyncs, not 3 (the file is not fsynced twice)
n=$(fsyncs "$T/create_default.log")
[ "$n" -eq 2 ] && pass create_two_fsyncs || fail create_two_fsyncs "$n fsyncs"

# ---- sharded create: a shard and the manifest each fsynced, the directory once
mkdir -p "$T/sa" "$T/sb"
want_syncs shards_no_sync -eq 0 "$WPACK" create -q --no-sync --shard-size 64K -o "$T/sb/s.wpack" "$T/src"
if syncs "$T/shards.log" "$WPACK" create -q --shard-size 64K -o "$T/sa/s.wpack" "$T/src"; then
    ns=$(ls "$T"/sa/s-*-of-*.wpack | wc -l)
    n=$(fsyncs "$T/shards.log")
    [ "$ns" -ge 3 ] && [ "$n" -ge $((ns + 1)) ] && [ "$n" -le $((ns + 2)) ] && pass shards_fsyncs ||
        fail shards_fsyncs "$n fsyncs for $ns shards"
else
    fail shards_fsyncs "$(head -c 300 "$T/err")"
fi
same shards_same_bytes "$T/sa" "$T/sb"

# ---- extract: N files, at most N+2 fsyncs; none with the opt-out
want_syncs extract_default -ge 40 "$WPACK" extract -q -o "$T/x1" "$T/a.wpack"
n=$(fsyncs "$T/extract_default.log")
[ "$n" -le 42 ] && pass extract_batched_fsyncs || fail extract_batched_fsyncs "$n fsyncs for 40 files (want <= 42)"
want_syncs extract_no_sync -eq 0 "$WPACK" extract -q --no-sync -o "$T/x2" "$T/a.wpack"
want_syncs extract_env -eq 0 env WPACK_NO_SYNC=1 "$WPACK" extract -q -o "$T/x3" "$T/a.wpack"
same extract_same_files "$T/x1" "$T/x2"
same extract_env_same_files "$T/x1" "$T/x3"
[ "$(ls "$T/x1" | wc -l)" -eq 40 ] && pass extract_all_files || fail extract_all_files "$(ls "$T/x1" | wc -l)"
"$PY" - "$T/src" "$T/x1" <<'EOF' && pass extract_values || fail extract_values
import os, sys, numpy as np
for f in os.listdir(sys.argv[1]):
    assert np.array_equal(np.load(os.path.join(sys.argv[1], f)), np.load(os.path.join(sys.argv[2], f))), f
EOF

# a low open-file limit: batches of 16 files, each made durable together
if syncs "$T/lowfd.log" bash -c 'ulimit -n 64 && exec "$@"' sh "$WPACK" extract -q -o "$T/x4" "$T/a.wpack"; then
    n=$(fsyncs "$T/lowfd.log")
    [ "$n" -eq 43 ] && pass extract_low_fd_limit_batches || fail extract_low_fd_limit_batches "$n fsyncs, want 40 + 3"
    same extract_low_fd_limit_same_files "$T/x1" "$T/x4"
else
    fail extract_low_fd_limit_batches "$(head -c 300 "$T/err")"
fi

# ---- export (safetensors) and cast/convert
want_syncs export_default -ge 2 "$WPACK" export -q --to safetensors -o "$T/e1.st" "$T/a.wpack"
want_syncs export_no_sync -eq 0 "$WPACK" export -q --no-sync --to safetensors -o "$T/e2.st" "$T/a.wpack"
same export_same_bytes "$T/e1.st" "$T/e2.st"
# a durable export starts the writeback of each large tensor as it is copied
# (the final fsync has little left); with --no-sync, none (above: 0 calls)
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.ones((3, 1 << 20), np.float32))" "$T/big.npy"
"$WPACK" create -q --no-sync -o "$T/big.wpack" "$T/big.npy"
want_syncs export_big -ge 2 "$WPACK" export -q --to safetensors -o "$T/big.st" "$T/big.wpack"
n=$(grep -c 'sync_file_range(' "$T/export_big.log")
[ "$n" -ge 1 ] && pass export_starts_writeback || fail export_starts_writeback "$n sync_file_range calls"
want_syncs export_big_no_sync -eq 0 "$WPACK" export -q --no-sync --to gguf -o "$T/big.gguf" "$T/big.wpack"
want_syncs export_big_gguf -ge 3 "$WPACK" export -q --to gguf -o "$T/big2.gguf" "$T/big.wpack"
want_syncs cast_default -ge 2 "$WPACK" cast --to bf16 -q -o "$T/k1.wpack" "$T/a.wpack"
want_syncs cast_no_sync -eq 0 "$WPACK" cast --to bf16 -q --no-sync -o "$T/k2.wpack" "$T/a.wpack"
same cast_same_bytes "$T/k1.wpack" "$T/k2.wpack"
want_syncs convert_default -ge 2 "$WPACK" convert -q --compress zstd -o "$T/z1.wpack" "$T/a.wpack"
want_syncs convert_no_sync -eq 0 "$WPACK" convert -q --no-sync --compress zstd -o "$T/z2.wpack" "$T/a.wpack"
same convert_same_bytes "$T/z1.wpack" "$T/z2.wpack"

# ---- externalize and resolve (MLIR outputs)
cat >"$T/m.mlir" <<'EOF'
module {
  ml_program.global private @w(dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>) : tensor<8xf32>
}
EOF
want_syncs externalize_default -ge 4 "$WPACK" externalize -q "$T/m.mlir" -o "$T/m1.mlir" --archive "$T/m1.wpack" --min-bytes 4
want_syncs externalize_no_sync -eq 0 "$WPACK" externalize -q --no-sync "$T/m.mlir" -o "$T/m2.mlir" --archive "$T/m2.wpack" --min-bytes 4
same externalize_same_archive "$T/m1.wpack" "$T/m2.wpack"
want_syncs resolve_default -ge 2 "$WPACK" resolve -q "$T/m1.wpack" "$T/m1.mlir" -o "$T/r1.mlir"
want_syncs resolve_no_sync -eq 0 "$WPACK" resolve -q --no-sync "$T/m1.wpack" "$T/m1.mlir" -o "$T/r2.mlir"
same resolve_same_bytes "$T/r1.mlir" "$T/r2.mlir"

# ---- update: in place, crash-safe by its fsyncs: never skipped
cat >"$T/stats.json" <<'EOF'
{"version": 1, "stats": [{"key": "t00", "kind": "activation", "count": 4, "min": -1.0, "max": 1.0, "mean": 0.0}]}
EOF
want_syncs update_env_still_fsyncs -ge 2 env WPACK_NO_SYNC=1 "$WPACK" update "$T/b.wpack" --stats "$T/stats.json"
expect_fail update_has_no_no_sync "unknown|usage|--no-sync" "$WPACK" update "$T/b.wpack" --no-sync --meta a=b

# ---- help: every writer documents --no-sync, update does not offer it
for c in create cast convert extract export externalize resolve run; do
    "$WPACK" "$c" --help 2>&1 | grep -q -- "--no-sync" && pass "help_$c" || fail "help_$c" "no --no-sync"
done
"$WPACK" --help 2>&1 | grep -q "WPACK_NO_SYNC" && pass help_main_env || fail help_main_env "wpack --help lacks WPACK_NO_SYNC"
"$WPACK" update --help 2>&1 | grep -q "always fsyncs" && pass help_update_says_durable ||
    fail help_update_says_durable

# ---- an extract that fails half-way (t05's bytes damaged): t00..t04 whole,
# t05 and later absent, no temporary left
cp "$T/a.wpack" "$T/bad.wpack"
"$PY" - "$T/bad.wpack" <<'EOF' || fail damage "python failed"
import sys, numpy as np
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
pat = np.full(64, 7.5, dtype=np.float32).tobytes()
at = b.find(pat)
assert at > 0
b[at + 100] ^= 0x40
open(p, "wb").write(bytes(b))
EOF
expect_fail extract_damaged_fails "t05.*WPACK_E_CHECKSUM|WPACK_E_CHECKSUM.*t05" "$WPACK" extract -q -o "$T/xb" "$T/bad.wpack"
ok=1
for i in 00 01 02 03 04; do cmp -s "$T/x1/t$i.npy" "$T/xb/t$i.npy" || ok=0; done
[ $ok = 1 ] && pass extract_failure_keeps_earlier_files || fail extract_failure_keeps_earlier_files "$(ls "$T/xb")"
[ ! -e "$T/xb/t05.npy" ] && [ -z "$(ls "$T/xb" | grep -v '^t0[0-4]\.npy$')" ] && pass extract_failure_nothing_else ||
    fail extract_failure_nothing_else "$(ls "$T/xb")"

finish
