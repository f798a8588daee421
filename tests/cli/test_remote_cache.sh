#!/bin/bash
# test_remote_cache.sh - the local chunk cache of remote archives (--cache
# DIR, issue 17) against a real nginx on loopback: a second extract/verify
# fetches no data range (nginx's access log), outputs equal the local
# ones; a corrupted or truncated cache file is detected and refetched; a
# replaced object (new index) never reuses old files; --cache-max bounds
# the directory; two processes sharing DIR both succeed; a symlink planted
# in DIR is not followed; the directory is made 0700 and refused when
# others may write it or it is a symlink; a first run reads ahead through
# the cache (a slow server sees the requests out at once).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W" "$T/in" "$T/in2"
"$PY" - "$T/in" "$T/in2" <<'PYEOF'
import numpy as np, sys
r = np.random.default_rng(171)
for i in range(8):                     # 256 KiB each, 2 MiB in all
    np.save(f"{sys.argv[1]}/t{i}.npy", r.standard_normal((256, 256)).astype(np.float32))
for i in range(6):                     # another archive, served at the same URL later
    np.save(f"{sys.argv[2]}/t{i}.npy", r.standard_normal((256, 256)).astype(np.float32))
PYEOF
expect create_a "$WPACK" create -q -o "$T/a.wpack" "$T/in"
expect create_b "$WPACK" create -q -o "$T/b.wpack" "$T/in2"
cp "$T/a.wpack" "$W/m.wpack"

need_nginx "$W"
URL="http://127.0.0.1:$NGINX_PORT/m.wpack"
LOGF="$T/nginx/access.log"
export WPACK_REMOTE_CHUNK=64K          # many chunks (the smallest size allowed)
unset WPACK_CACHE

# data_ranges: the GETs logged since the last `clear_log` other than the
# open's (the first 64 KiB; the last 256 KiB, in chunk-sized GETs).
data_ranges() {
    sleep 0.3 # nginx logs a request just after its last byte went out
    local size
    size=$(stat -c %s "$W/m.wpack")
    awk -v tail=$((size > 262144 ? size - 262144 : 65536)) '
        $1 == "GET" { split($3, a, /[=-]/); if (a[2] + 0 >= 65536 && a[2] + 0 < tail) n++ }
        END { print n + 0 }' "$LOGF"
}
clear_log() { sleep 0.3; : >"$LOGF"; }
same_dirs() { # NAME DIR1 DIR2: the same .npy files, byte for byte
    if diff -r "$2" "$3" >/dev/null 2>&1 && [ -n "$(ls "$2")" ]; then pass "$1"; else fail "$1" "$(diff -r "$2" "$3" 2>&1 | head -3)"; fi
}
chunk_files() { find "$1" -maxdepth 1 -name '*.chunk' -type f | wc -l; }

rm -rf "$T/xl"
expect extract_local "$WPACK" extract -q -o "$T/xl" "$T/a.wpack"
C="$T/cache"

# 1. First run: fetches and fills the cache (0700, made here).
clear_log
expect first_extract "$WPACK" extract -q --cache "$C" -o "$T/x1" "$URL"
same_dirs first_extract_equal "$T/x1" "$T/xl"
n=$(data_ranges)
[ "$n" -gt 0 ] && pass first_run_fetches || fail first_run_fetches "no data GET logged"
[ "$(stat -c %a "$C")" = 700 ] && pass cache_dir_0700 || fail cache_dir_0700 "mode $(stat -c %a "$C")"
[ "$(chunk_files "$C")" -gt 10 ] && pass cache_filled || fail cache_filled "$(ls "$C" | head -3)"

# 2. Second extract and verify of the same URL: no data range fetched.
clear_log
expect second_extract "$WPACK" extract -q --cache "$C" -o "$T/x2" "$URL"
same_dirs second_extract_equal "$T/x2" "$T/xl"
n=$(data_ranges)
[ "$n" -eq 0 ] && pass second_extract_no_fetch || fail second_extract_no_fetch "$n data GETs: $(head -3 "$LOGF")"
clear_log
expect second_verify "$WPACK" verify --cache "$C" "$URL"
n=$(data_ranges)
[ "$n" -eq 0 ] && pass second_verify_no_fetch || fail second_verify_no_fetch "$n data GETs: $(head -3 "$LOGF")"
clear_log
WPACK_CACHE="$C" "$WPACK" extract -q -o "$T/x2e" "$URL" >/dev/null 2>"$T/err" && pass env_cache_extract || fail env_cache_extract "$(head -c 300 "$T/err")"
n=$(data_ranges)
[ "$n" -eq 0 ] && pass env_cache_no_fetch || fail env_cache_no_fetch "$n data GETs"
same_dirs env_cache_equal "$T/x2e" "$T/xl"

# 2b. Filling a cache syncs nothing: its files are checked on every reuse
#     (section 3), so a torn one costs a refetch, not a wrong byte; verify
#     writes nothing else, so its fsyncs are the cache's.
if command -v strace >/dev/null; then
    if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$T/strace.log" \
        -e trace=fsync,fdatasync,sync_file_range,getdents64 "$WPACK" verify --cache "$T/cache_s" "$URL" \
        >/dev/null 2>"$T/err"; then
        n=$(grep -cE '(^|[ ])(fsync|fdatasync|sync_file_range)\(' "$T/strace.log")
        [ "$(chunk_files "$T/cache_s")" -gt 10 ] && [ "$n" -eq 0 ] && pass cache_fill_no_fsync ||
            fail cache_fill_no_fsync "$n sync calls, $(chunk_files "$T/cache_s") files"
        # 2c. The directory is scanned for eviction once here (the sweep
        #     at open, one scan after the first puts: each a getdents64
        #     with entries and one at the end), not after every read that
        #     missed (one per tensor: quadratic for a large model)
        n=$(grep -cE '(^|[ ])getdents64\(' "$T/strace.log")
        [ "$n" -le 6 ] && pass cache_scans_bounded ||
            fail cache_scans_bounded "$n getdents64 calls for $(chunk_files "$T/cache_s") chunk files"
    else
        fail cache_fill_no_fsync "verify under strace: $(head -c 300 "$T/err")"
    fi
else
    fail cache_fill_no_fsync "strace is not installed (tools/deps.sh installs it)"
fi

# 2d. Each chunk file is read once per run: the chunk a tensor ends in,
#     where the next one starts, stays in memory (reading it back from its
#     file cost a pread and an XXH3 of the whole chunk per tensor). Every
#     reuse refreshes the file's mtime (utimensat): at most one per file.
if command -v strace >/dev/null; then
    if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$T/strace2.log" \
        -e trace=utimensat "$WPACK" extract -q --cache "$C" -o "$T/x2s" "$URL" >/dev/null 2>"$T/err"; then
        n=$(grep -cE '(^|[ ])utimensat\(' "$T/strace2.log")
        files=$(chunk_files "$C")
        [ "$n" -gt 0 ] && [ "$n" -le "$files" ] && pass cache_chunk_read_once ||
            fail cache_chunk_read_once "$n reuses of $files chunk files"
        same_dirs cache_chunk_read_once_equal "$T/x2s" "$T/xl"
    else
        fail cache_chunk_read_once "extract under strace: $(head -c 300 "$T/err")"
    fi
else
    fail cache_chunk_read_once "strace is not installed (tools/deps.sh installs it)"
fi

# 3. A corrupted cache file (one byte flipped in its data) and a truncated
#    one: detected, refetched (one chunk each), the output still right.
f1=$(find "$C" -name '*.chunk' -type f | sort | sed -n 3p)
f2=$(find "$C" -name '*.chunk' -type f | sort | sed -n 7p)
"$PY" - "$f1" <<'PYEOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[1000] ^= 0x40
open(p, "wb").write(bytes(b))
PYEOF
truncate -s 2000 "$f2"
clear_log
expect corrupt_extract "$WPACK" extract -q --cache "$C" -o "$T/x3" "$URL"
same_dirs corrupt_extract_equal "$T/x3" "$T/xl"
n=$(data_ranges)
[ "$n" -eq 2 ] && pass corrupt_refetched_two_chunks || fail corrupt_refetched_two_chunks "$n data GETs: $(cat "$LOGF")"
[ "$(stat -c %s "$f1")" -eq "$(stat -c %s "$f2")" ] && pass corrupt_files_rewritten || fail corrupt_files_rewritten "$(ls -l "$f1" "$f2")"
#    Verified reads catch a forged file even when its own checksum matches:
#    a cache file rewritten with other bytes and a matching header XXH3.
"$PY" - "$f1" <<'PYEOF'
import ctypes, ctypes.util, sys, struct
x = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
x.XXH3_64bits.restype = ctypes.c_uint64
x.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[48 + 100] ^= 0x01
data = bytes(b[48:])
b[40:48] = struct.pack("<Q", x.XXH3_64bits(data, len(data)))
open(p, "wb").write(bytes(b))
PYEOF
clear_log
expect forged_verify "$WPACK" verify --cache "$C" "$URL"
n=$(data_ranges)
[ "$n" -ge 1 ] && pass forged_refetched || fail forged_refetched "no data GET: the forged chunk was not refetched"
expect forged_extract "$WPACK" extract -q --cache "$C" -o "$T/x3f" "$URL"
same_dirs forged_extract_equal "$T/x3f" "$T/xl"

# 4. The object replaced on the server (another index): no old file reused.
rm -rf "$T/xlb"
expect extract_local_b "$WPACK" extract -q -o "$T/xlb" "$T/b.wpack"
before=$(chunk_files "$C")
keys() { find "$C" -name '*.chunk' -printf '%f\n' | cut -d- -f1 | sort -u; }
keys >"$T/keys.before"
cp "$T/b.wpack" "$W/m.wpack.new" && mv "$W/m.wpack.new" "$W/m.wpack"
clear_log
expect replaced_extract "$WPACK" extract -q --cache "$C" -o "$T/x4" "$URL"
same_dirs replaced_extract_equal "$T/x4" "$T/xlb"
n=$(data_ranges)
[ "$n" -gt 0 ] && pass replaced_fetches || fail replaced_fetches "no data GET: old cache files were used"
# one new key (the index's XXH3 and the URL hashed), the old files untouched
key_b=$(keys | comm -13 "$T/keys.before" -)
nb=$( [ "$(printf '%s\n' "$key_b" | wc -w)" -eq 1 ] && find "$C" -name "$key_b-*.chunk" | wc -l)
[ "$nb" -gt 0 ] && [ "$(chunk_files "$C")" -eq $((before + nb)) ] && pass replaced_new_key ||
    fail replaced_new_key "key $key_b: $nb files, $(chunk_files "$C") in all, $before before"
cp "$T/a.wpack" "$W/m.wpack.new" && mv "$W/m.wpack.new" "$W/m.wpack"

# 5. The bound: 1 MiB of cache while extracting 2 MiB.
C2="$T/cache2"
expect bounded_extract "$WPACK" extract -q --cache "$C2" --cache-max 1M -o "$T/x5" "$URL"
same_dirs bounded_extract_equal "$T/x5" "$T/xl"
total=$(find "$C2" -maxdepth 1 -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
[ "$total" -le 1048576 ] && [ "$total" -gt 0 ] && pass cache_bound_respected || fail cache_bound_respected "$total bytes in $C2"
expect_fail bad_cache_max "cache-max" "$WPACK" extract -q --cache "$C2" --cache-max junk -o "$T/x5b" "$URL"
# a lower bound applies at the next open, even when it stores nothing
C4="$T/cache4"
"$WPACK" extract -q --cache "$C4" -o "$T/x5c" "$URL"
before=$(chunk_files "$C4")
expect bound_on_open "$WPACK" inspect --cache "$C4" --cache-max 64K "$URL"
total=$(find "$C4" -maxdepth 1 -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
[ "$before" -gt 1 ] && [ "$total" -le 65536 ] && pass cache_bound_on_open ||
    fail cache_bound_on_open "$before files before, $total bytes after"
# a directory given as --cache may hold the user's own files: eviction takes
# only the cache's ("KEY-SIZE-OFF-LEN.chunk"); any "*.chunk" went before,
# oldest first (a user's dataset "part-01.chunk" deleted by a verify)
C5="$T/cache5"
mkdir -m 700 "$C5"
head -c 300000 /dev/urandom >"$C5/part-01.chunk"
head -c 300000 /dev/urandom >"$C5/0123456789ABCDEF-1-0-1.chunk"
touch -d 2000-01-01 "$C5"/*.chunk
sums=$(cat "$C5/part-01.chunk" "$C5/0123456789ABCDEF-1-0-1.chunk" | sha256sum)
expect user_chunks_extract "$WPACK" extract -q --cache "$C5" --cache-max 512K -o "$T/x5d" "$URL"
[ "$(cat "$C5/part-01.chunk" "$C5/0123456789ABCDEF-1-0-1.chunk" 2>/dev/null | sha256sum)" = "$sums" ] &&
    pass user_chunk_files_kept || fail user_chunk_files_kept "$(ls "$C5" | head -5)"
[ "$(chunk_files "$C5")" -gt 2 ] && pass user_chunks_cache_used || fail user_chunks_cache_used "$(ls "$C5")"

# 6. Two processes sharing a fresh directory.
C3="$T/cache3"
"$WPACK" extract -q --cache "$C3" -o "$T/x6a" "$URL" 2>"$T/e6a" & p1=$!
"$WPACK" extract -q --cache "$C3" -o "$T/x6b" "$URL" 2>"$T/e6b" & p2=$!
wait $p1 && r1=0 || r1=$?
wait $p2 && r2=0 || r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && pass concurrent_both_ok || fail concurrent_both_ok "exit $r1/$r2: $(cat "$T/e6a" "$T/e6b" | head -c 300)"
same_dirs concurrent_a_equal "$T/x6a" "$T/xl"
same_dirs concurrent_b_equal "$T/x6b" "$T/xl"
ls "$C3" | grep -q tmp- && fail concurrent_no_temporaries "$(ls "$C3" | grep tmp- | head -2)" || pass concurrent_no_temporaries
clear_log
expect concurrent_then_cached "$WPACK" verify --cache "$C3" "$URL"
n=$(data_ranges)
[ "$n" -eq 0 ] && pass concurrent_cache_complete || fail concurrent_cache_complete "$n data GETs"

# 7. A symlink planted in the cache directory is not followed: the file it
#    names stays as it was, the read is right, the link is replaced.
victim="$T/victim"
printf 'do not touch' >"$victim"
f=$(find "$C3" -name '*.chunk' -type f | sort | sed -n 5p)
rm -f "$f" && ln -s "$victim" "$f"
clear_log
expect symlink_extract "$WPACK" extract -q --cache "$C3" -o "$T/x7" "$URL"
same_dirs symlink_extract_equal "$T/x7" "$T/xl"
[ "$(cat "$victim")" = "do not touch" ] && pass symlink_target_untouched || fail symlink_target_untouched "$(head -c 50 "$victim")"
[ -f "$f" ] && [ ! -L "$f" ] && pass symlink_replaced || fail symlink_replaced "$(ls -l "$f")"
n=$(data_ranges)
[ "$n" -eq 1 ] && pass symlink_chunk_refetched || fail symlink_chunk_refetched "$n data GETs"

# 8. Directories refused: a symlink to a directory, one writable by others.
ln -s "$C3" "$T/cache-link"
expect_fail cache_dir_symlink "cache directory .*symlink.*\[WPACK_E_FILE_TYPE\]" \
    "$WPACK" verify --cache "$T/cache-link" "$URL"
# ... however it is written: "LINK/" and "LINK/." resolve the link (O_NOFOLLOW
# sees its target as the last component): they were used
for d in slash:/ slash_dot:/. slashes_dot://./; do
    expect_fail "cache_dir_symlink_${d%%:*}" "cache directory .*symlink.*\[WPACK_E_FILE_TYPE\]" \
        "$WPACK" verify --cache "$T/cache-link${d#*:}" "$URL"
done
# 8b. Files are private (0600) whatever the umask: a directory others may
#     enter (0755, allowed) held 0644 chunks any user could read (a private
#     model's bytes), 0666 ones under umask 0 any user could rewrite.
mkdir -p "$T/cache755" && chmod 755 "$T/cache755"
(umask 0 && "$WPACK" verify --cache "$T/cache755" "$URL" >/dev/null 2>"$T/err") && pass cache_umask0_verify ||
    fail cache_umask0_verify "$(head -c 300 "$T/err")"
modes=$(find "$T/cache755" -name '*.chunk' -printf '%m\n' | sort -u)
[ "$modes" = 600 ] && pass cache_files_private || fail cache_files_private "modes: $modes"
mkdir -p "$T/open" && chmod 777 "$T/open"
expect_fail cache_dir_world_writable "writable by group or others.*\[WPACK_E_FILE_TYPE\]" \
    "$WPACK" verify --cache "$T/open" "$URL"

# 9. Python: safe_open(url, cache=DIR) reuses the same files.
clear_log
if py_wpack - "$URL" "$C" "$T/a.wpack" <<'PYEOF' 2>"$T/pyerr"; then
import sys, numpy as np, wpack
url, cache, local = sys.argv[1:4]
with wpack.safe_open(url, cache=cache, chunk_size=65536) as f, wpack.safe_open(local) as g:
    for k in g.keys():
        assert np.array_equal(f.get_tensor(k), g.get_tensor(k)), k
PYEOF
    pass python_cache_read
else
    fail python_cache_read "$(tail -3 "$T/pyerr")"
fi
n=$(data_ranges)
[ "$n" -eq 0 ] && pass python_cache_no_fetch || fail python_cache_no_fetch "$n data GETs"

# 10. A first run through the cache reads ahead as one without: the plan's
#     chunks not cached yet are asked for before the reads reach them.
#     remote_server.py's /slow/ answers each range 0.3 s late and logs how
#     many requests were in flight when each came (the open's tail
#     requests, out together in any case, not counted). 64 tensors of 16 KiB
#     in 64 KiB chunks: chunk by chunk (the cache before) a read waited
#     for its one or two chunks, at most 2 in flight; with 16 connections
#     the read-ahead keeps two steps of 4 chunks out.
mkdir -p "$T/many" "$T/sw"
"$PY" - "$T/many" <<'PYEOF'
import numpy as np, sys
r = np.random.default_rng(1717)
for i in range(64):
    np.save(f"{sys.argv[1]}/s{i:02d}.npy", r.standard_normal(4096).astype(np.float32))
PYEOF
expect create_many "$WPACK" create -q -o "$T/sw/many.wpack" "$T/many"
expect extract_many_local "$WPACK" extract -q -o "$T/many_local" "$T/sw/many.wpack"
if start_bad_server "$T/sw"; then
    SURL="http://127.0.0.1:$BAD_PORT/slow/many.wpack"
    SLOG="$T/requests.log"
    C4="$T/cache4"
    slow_data() { # data requests logged (not the open's first 64 KiB or last 256 KiB)
        awk -v tail=$(($(stat -c %s "$T/sw/many.wpack") - 262144)) '
            $1 == "slow" { split($2, a, /[=-]/); if (a[2] + 0 >= 65536 && a[2] + 0 < tail) n++ }
            END { print n + 0 }' "$SLOG"
    }
    : >"$SLOG"
    WPACK_REMOTE_CONNECTIONS=16 expect cache_ahead_extract "$WPACK" extract -q --cache "$C4" -o "$T/xa" "$SURL"
    same_dirs cache_ahead_equal "$T/xa" "$T/many_local"
    peak=$(awk -v tail=$(($(stat -c %s "$T/sw/many.wpack") - 262144)) '
        $1 == "slow" && NF == 4 { split($2, a, /[=-]/) }
        $1 == "slow" && NF == 4 && a[2] + 0 < tail && $4 > m { m = $4 } END { print m + 0 }' "$SLOG")
    [ "$peak" -ge 4 ] && pass cache_reads_ahead ||
        fail cache_reads_ahead "at most $peak requests in flight: $(head -5 "$SLOG")"
    nchunks=$(chunk_files "$C4")
    [ "$nchunks" -ge 12 ] && pass cache_ahead_stored || fail cache_ahead_stored "$nchunks chunk files"
    #    Chunks already cached are not planned: two removed, two fetched.
    find "$C4" -name '*.chunk' -type f | sort | sed -n '5p;11p' | xargs rm -f
    : >"$SLOG"
    WPACK_REMOTE_CONNECTIONS=16 expect cache_ahead_again "$WPACK" extract -q --cache "$C4" -o "$T/xb" "$SURL"
    same_dirs cache_ahead_again_equal "$T/xb" "$T/many_local"
    n=$(slow_data)
    [ "$n" -eq 2 ] && pass cache_plan_skips_cached || fail cache_plan_skips_cached "$n data requests: $(cat "$SLOG")"
    [ "$(chunk_files "$C4")" -eq "$nchunks" ] && pass cache_ahead_refilled || fail cache_ahead_refilled "$(chunk_files "$C4") files, $nchunks before"
else
    fail slow_server_started "remote_server.py did not start"
fi

finish
