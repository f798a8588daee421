#!/bin/bash
# test_parallel_create.sh - `create -j N` / WPACK_THREADS (issue 19): weight
# stats, histograms and XXH3 of large tensors on a pool give the archive of
# the serial default byte for byte, from every input kind; awkward tensors
# (prime element counts over several 8 MiB steps, NaN and infinities, all
# equal values, bf16 and f16) keep their stats; a damaged torch checkpoint
# is still caught; unchanged bytes copied by copy_file_range on a pool
# thread (falling back to write across file systems) land the same; a bad
# -j is refused.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

if ! "$PY" "$SRC/bench/pack/make_inputs.py" "$T/in" 24000000 6 2>"$T/err"; then
    fail make_inputs "$(head -c 300 "$T/err")"
    finish
    exit
fi
# awkward tensors, as a checkpoint and as .npy files
"$PY" - "$T/odd" <<'PY' || fail make_odd
import os, sys, numpy as np, torch
d = sys.argv[1]
os.makedirs(d)
rng = np.random.default_rng(7)
a = rng.standard_normal(5000011).astype(np.float32)   # prime, > 2 steps of 2 Mi elements
a[::99991] = np.nan; a[17] = np.inf; a[4000000] = -np.inf
sd = {
    "nan_inf": torch.from_numpy(a),
    "equal": torch.full((3000017,), 0.625, dtype=torch.float32),
    "bf16": torch.from_numpy(rng.standard_normal(4194319).astype(np.float32)).to(torch.bfloat16),
    "f16": torch.from_numpy((rng.standard_normal(2097169) * 1000).astype(np.float16)),
    "big": torch.from_numpy((rng.standard_normal(1000003) * 1e30).astype(np.float32)),
    "f64": torch.from_numpy(rng.standard_normal(1048583) * 1e307),
}
torch.save(sd, os.path.join(d, "odd.pt"))
os.makedirs(os.path.join(d, "npy"))
for k, t in sd.items():
    if t.dtype != torch.bfloat16:
        np.save(os.path.join(d, "npy", k + ".npy"), t.numpy())
PY

# same NAME ARGS...: create serial (the default), with -j 1/2/4 and with
# WPACK_THREADS=3: every archive identical, and verified
same() {
    local name=$1; shift
    rm -f "$T"/s.wpack "$T"/j*.wpack
    if ! "$WPACK" create -q -o "$T/s.wpack" "$@" 2>"$T/err"; then fail "$name" "serial: $(head -c 300 "$T/err")"; return; fi
    for j in 1 2 4; do
        if ! "$WPACK" create -q -j "$j" -o "$T/j$j.wpack" "$@" 2>"$T/err"; then fail "$name" "-j $j: $(head -c 300 "$T/err")"; return; fi
        if ! cmp -s "$T/s.wpack" "$T/j$j.wpack"; then fail "$name" "-j $j: archives differ"; return; fi
    done
    if ! WPACK_THREADS=3 "$WPACK" create -q -o "$T/je.wpack" "$@" 2>"$T/err"; then fail "$name" "WPACK_THREADS: $(head -c 300 "$T/err")"; return; fi
    if ! cmp -s "$T/s.wpack" "$T/je.wpack"; then fail "$name" "WPACK_THREADS=3: archives differ"; return; fi
    if ! "$WPACK" verify "$T/s.wpack" >/dev/null 2>"$T/err"; then fail "$name" "verify: $(head -c 300 "$T/err")"; return; fi
    pass "$name"
}

for kind in model.pt model.safetensors model.npz npy; do
    same "same_${kind}" "$T/in/$kind"
done
same same_pt_histogram --histogram 100 "$T/in/model.pt"
same same_npy_plain_io_histogram --histogram 7 "$T/in/npy"
WPACK_NO_COPY_RANGE=1 same same_pt_read_write "$T/in/model.pt"
same same_pt_cast --cast bf16 "$T/in/model.pt"
same same_odd_pt --histogram 33 "$T/odd/odd.pt"
same same_odd_npy --histogram 33 "$T/odd/npy"
# a sharded set: the shards' names follow the manifest's, so two directories
mkdir -p "$T/sa" "$T/sb"
if "$WPACK" create -q --shard-size 16M -o "$T/sa/m.wpack" "$T/odd/odd.pt" 2>"$T/err" &&
    "$WPACK" create -q -j 3 --shard-size 16M -o "$T/sb/m.wpack" "$T/odd/odd.pt" 2>>"$T/err" &&
    [ "$(ls "$T/sa" | wc -l)" -gt 2 ] && diff -r "$T/sa" "$T/sb" >/dev/null; then
    pass same_odd_sharded
else
    fail same_odd_sharded "$(head -c 300 "$T/err")"
fi
WPACK_ISA=scalar same same_odd_portable "$T/odd/odd.pt"
# the stats of the values before a cast, on the portable path as well
# (WPACK_ISA=scalar reaches the importer): the same archive as SIMD
WPACK_ISA=scalar same same_odd_cast_portable --cast bf16 "$T/odd/odd.pt"
cp "$T/s.wpack" "$T/cast_portable.wpack"
if "$WPACK" create -q --cast bf16 -o "$T/cast_simd.wpack" "$T/odd/odd.pt" 2>"$T/err" &&
    cmp -s "$T/cast_simd.wpack" "$T/cast_portable.wpack"; then
    pass cast_portable_same_as_simd
else
    fail cast_portable_same_as_simd "$(head -c 300 "$T/err")"
fi

# The stats of the awkward tensors are there, and the same as serial
"$WPACK" create -q -o "$T/s.wpack" "$T/odd/odd.pt" && "$WPACK" create -q -j 4 -o "$T/p.wpack" "$T/odd/odd.pt"
"$WPACK" inspect --json "$T/s.wpack" 2>&1 | sed 's/"path": "[^"]*"//' >"$T/s.stats"
"$WPACK" inspect --json "$T/p.wpack" 2>&1 | sed 's/"path": "[^"]*"//' >"$T/p.stats"
if [ "$(grep -o '"absmax"' "$T/s.stats" | wc -l)" -ge 6 ] && cmp -s "$T/s.stats" "$T/p.stats"; then
    pass odd_stats_listed
else
    fail odd_stats_listed "$(head -c 300 "$T/p.stats")"
fi

# Across file systems (input on /dev/shm): copy_file_range refuses with
# EXDEV on a pool thread, the copy falls back to write; the same bytes.
if [ -d /dev/shm ] && [ "$(stat -c %d /dev/shm)" != "$(stat -c %d "$T")" ]; then
    S=$(mktemp -d /dev/shm/wpack-par.XXXXXX)
    cp "$T/odd/odd.pt" "$S/"
    "$WPACK" create -q -o "$T/x.wpack" "$T/odd/odd.pt" 2>"$T/err" &&
        "$WPACK" create -q -j 2 -o "$T/y.wpack" "$S/odd.pt" 2>>"$T/err" &&
        cmp -s "$T/x.wpack" "$T/y.wpack" && pass cross_fs_j2 || fail cross_fs_j2 "$(head -c 300 "$T/err")"
    rm -rf "$S"
else
    echo "skip cross_fs_j2: /dev/shm is missing or on the same file system as $T"
fi

# wpack cast -j: the same archive as serial
"$WPACK" create -q -o "$T/m.wpack" "$T/odd/odd.pt" 2>"$T/err"
if "$WPACK" cast -q --to bf16 --only '*' -o "$T/c1.wpack" "$T/m.wpack" 2>>"$T/err" &&
    "$WPACK" cast -q -j 3 --to bf16 --only '*' -o "$T/c3.wpack" "$T/m.wpack" 2>>"$T/err" &&
    cmp -s "$T/c1.wpack" "$T/c3.wpack"; then
    pass cast_j_same
else
    fail cast_j_same "$(head -c 300 "$T/err")"
fi

# A flipped byte inside a torch storage: refused with -j too, no output.
"$PY" - "$T/in/model.pt" "$T/bad.pt" <<'PY'
import shutil, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
shutil.copy(src, dst)
with zipfile.ZipFile(src) as z:
    info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
with open(dst, "r+b") as f:
    f.seek(info.header_offset + 26)
    n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
    at = info.header_offset + 30 + n + m + info.file_size - 5
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x40]))
PY
expect_fail crc_caught_j2 "CRC-32.*\[WPACK_E_CHECKSUM\]" "$WPACK" create -q -j 2 -o "$T/bad.wpack" "$T/bad.pt"
[ -e "$T/bad.wpack" ] && fail crc_no_output_j2 || pass crc_no_output_j2
WPACK_THREADS=4 expect_fail crc_caught_env "CRC-32.*\[WPACK_E_CHECKSUM\]" "$WPACK" create -q -o "$T/bad.wpack" "$T/bad.pt"

# Bad counts are refused before anything is written
expect_fail bad_j_zero "-j 0: want a thread count" "$WPACK" create -q -j 0 -o "$T/z.wpack" "$T/in/npy"
expect_fail bad_j_junk "--jobs 2x: want a thread count" "$WPACK" create -q --jobs 2x -o "$T/z.wpack" "$T/in/npy"
expect_fail bad_j_missing "option -j needs a value" "$WPACK" create -q -o "$T/z.wpack" "$T/in/npy" -j
expect_fail bad_j_attached_junk "-j 2x: want a thread count" "$WPACK" create -q -j2x -o "$T/z.wpack" "$T/in/npy"
expect_fail bad_jobs_attached "unknown option '--jobs2'" "$WPACK" create -q --jobs2 -o "$T/z.wpack" "$T/in/npy"
[ -e "$T/z.wpack" ] && fail bad_j_no_output || pass bad_j_no_output
# one-letter options take their value attached, as getopt's do: -j2, -oOUT
rm -f "$T/s.wpack"
if "$WPACK" create -q -o "$T/s.wpack" "$T/in/npy" 2>"$T/err" &&
    "$WPACK" create -q -j2 "-o$T/attached.wpack" "$T/in/npy" 2>>"$T/err" && cmp -s "$T/s.wpack" "$T/attached.wpack"; then
    pass attached_short_values
else
    fail attached_short_values "$(head -c 300 "$T/err")"
fi
"$WPACK" create --help | grep -q -- "-j, --jobs N" && pass help_lists_jobs || fail help_lists_jobs

# A pool is really used: with -j 4 the process has more than one thread
# while it packs (sampled from /proc), without -j never.
threads_seen() {
    "$@" &
    local pid=$! max=1 n
    while kill -0 "$pid" 2>/dev/null; do
        n=$(ls "/proc/$pid/task" 2>/dev/null | wc -l)
        [ "$n" -gt "$max" ] && max=$n
        sleep 0.01
    done
    wait "$pid"
    echo "$max"
}
n=$(threads_seen "$WPACK" create -q -j 4 -o "$T/t.wpack" "$T/in/model.pt" "$T/odd/odd.pt" --prefix x "$T/in/model.pt")
[ "$n" -ge 2 ] && pass pool_threads_used || fail pool_threads_used "max $n threads seen"
n=$(threads_seen "$WPACK" create -q -o "$T/t.wpack" "$T/in/model.pt" "$T/odd/odd.pt" --prefix x "$T/in/model.pt")
[ "$n" -eq 1 ] && pass serial_one_thread || fail serial_one_thread "max $n threads seen"

finish
