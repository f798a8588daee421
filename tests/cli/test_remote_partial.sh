#!/bin/bash
# test_remote_partial.sh - partial reads of remote tensors fetch only what
# they need (issue 17), counted in the body bytes of nginx's access log:
# get_slice with verify off fetches exactly the rows' bytes (plain archive
# and a sharded set's shard). With verify on and chunk checksums (format
# 1.2, the default for tensors over 1 MiB), only the 1 MiB chunks holding
# the rows are fetched, each checked (a plain archive and a shard of a
# set); of a zstd tensor, the stored bytes of its zstd chunks holding the
# rows, each decoded and checked. Without chunk checksums (--chunk-sums off) the whole tensor is
# fetched ONCE, checked, and the slices that follow come from that fetch;
# after another tensor was read, a slice of a checked tensor fetches it
# whole again and checks it (no cache: a ranged fetch of only its rows
# could not be checked) or fetches nothing at all (--cache: from the cache
# files).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W/set" "$T/in"
"$PY" - "$T/in" <<'PYEOF'
import numpy as np, sys
r = np.random.default_rng(172)
np.save(f"{sys.argv[1]}/big.npy", r.standard_normal((1024, 1024)).astype(np.float32))  # 4 MiB
np.save(f"{sys.argv[1]}/other.npy", r.standard_normal((256, 256)).astype(np.float32))
np.save(f"{sys.argv[1]}/small.npy", r.standard_normal((4, 4)).astype(np.float32))
PYEOF
expect create_plain "$WPACK" create -q --chunk-sums off -o "$W/a.wpack" "$T/in"
expect create_chunked "$WPACK" create -q -o "$W/c.wpack" "$T/in"
expect create_set "$WPACK" create -q --shard-size 1M -o "$W/set/m.wpack" "$T/in"
# compressed in 64 KiB chunks (16 rows each): small integers as f32 shrink
# ~4x, and its ~1 MiB stored lies outside the bytes an open fetches
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(1).integers(0, 16, (1024, 1024)).astype(np.float32))" "$T/ramp.npy"
expect create_zstd "$WPACK" create -q --compress zstd:3 --chunk-size 64K -o "$W/z.wpack" "$T/ramp.npy"
zstored=$("$WPACK" inspect --json "$W/z.wpack" | grep -o '"stored_length": [0-9]*' | grep -o '[0-9]*$')

need_nginx "$W"
U="http://127.0.0.1:$NGINX_PORT"

# The cases run in Python (safe_open.get_slice over wpack_read_ex); each
# prints "NAME ok" or "NAME FAIL why".
py_wpack - "$U" "$W" "$T/nginx/access.log" "$T/cache" "$zstored" \
    >"$T/py.out" 2>"$T/py.err" <<'PYEOF'
import sys, time, numpy as np, wpack
base, www, logf, cache = sys.argv[1:5]
zstored = int(sys.argv[5])
ROW = 1024 * 4

def clear():
    time.sleep(0.3)   # nginx logs a request just after its last byte went out
    open(logf, "w").close()

def fetched():
    """(GETs, body bytes) logged since clear()."""
    time.sleep(0.3)
    n = b = 0
    for line in open(logf):
        f = line.split()
        if f and f[0] == "GET":
            n += 1
            b += int(f[-1])
    return n, b

def check(name, cond, why):
    print("%s %s" % (name, "ok" if cond else "FAIL " + why), flush=True)

local = wpack.safe_open(www + "/a.wpack")
want = local.get_tensor("big")
other = local.get_tensor("other")

for arch in ("a.wpack", "set/m.wpack"):
    tag = "plain" if arch == "a.wpack" else "shard"
    # verify off: only the rows' bytes
    with wpack.safe_open(base + "/" + arch, verify=False) as f:
        clear()
        got = f.get_slice("big")[100:110]
        n, b = fetched()
        check(tag + "_noverify_slice_equal", np.array_equal(got, want[100:110]), "values differ")
        check(tag + "_noverify_rows_only", b == 10 * ROW, "%d bytes in %d GETs, want %d" % (b, n, 10 * ROW))
        clear()
        got = f.get_slice("big")[1023]
        n, b = fetched()
        # (a shard's last row may lie in the tail its open fetched: 0 bytes)
        check(tag + "_noverify_last_row", np.array_equal(got, want[1023]) and b <= ROW,
              "%d bytes" % b)

# a compressed tensor, verify off: only the chunks holding the rows (their
# stored bytes, as the seek table says), decoded; a whole read: all of it
zwant = wpack.safe_open(www + "/z.wpack").get_tensor("ramp")
with wpack.safe_open(base + "/z.wpack", verify=False) as f:
    clear()
    got = f.get_slice("ramp")[500:510]       # rows 500..509: chunk 31, mid-file
    n, b = fetched()
    check("zstd_noverify_slice_equal", np.array_equal(got, zwant[500:510]), "values differ")
    check("zstd_noverify_chunks_only", 0 < b < zstored // 8,
          "%d bytes of %d stored, in %d GETs" % (b, zstored, n))
    clear()
    got = f.get_slice("ramp")[0:1024]        # all of it: fetched whole (and checked)
    n, b = fetched()
    check("zstd_noverify_whole", np.array_equal(got, zwant) and b <= zstored,
          "%d bytes of %d" % (b, zstored))

# verify on, with its chunk checksums (one per decoded 64 KiB chunk): only
# the chunks holding the rows are fetched, decoded and checked
with wpack.safe_open(base + "/z.wpack") as f:
    clear()
    got = f.get_slice("ramp")[500:510]
    n, b = fetched()
    check("zstd_verify_chunks_only", np.array_equal(got, zwant[500:510]) and 0 < b < zstored // 8,
          "%d bytes of %d stored, in %d GETs" % (b, zstored, n))

# verify on (the default): the whole tensor once, then slices from it
with wpack.safe_open(base + "/a.wpack") as f:
    clear()
    parts = [f.get_slice("big")[0:10], f.get_slice("big")[500:520], f.get_slice("big")[1000:1024]]
    n, b = fetched()
    ok = all(np.array_equal(p, want[s]) for p, s in
             zip(parts, (slice(0, 10), slice(500, 520), slice(1000, 1024))))
    check("verify_slices_equal", ok, "values differ")
    check("verify_whole_tensor_once", b == 1024 * ROW, "%d bytes in %d GETs, want %d" % (b, n, 1024 * ROW))
    clear()
    g = f.get_tensor("big")
    n, b = fetched()
    check("verify_then_whole_no_refetch", np.array_equal(g, want) and b == 0, "%d bytes" % b)
    # a slice of another tensor replaces the kept one: a checked tensor's
    # slice then fetches it whole again, checked (its rows alone could not be)
    f.get_slice("other")[0:1]
    clear()
    got = f.get_slice("big")[200:204]
    n, b = fetched()
    check("verify_checked_refetched_whole", np.array_equal(got, want[200:204]) and b == 1024 * ROW,
          "%d bytes, want %d" % (b, 1024 * ROW))

# verify on, chunk checksums: the chunks holding the rows, nothing more
MIB = 1 << 20
for arch in ("c.wpack", "set/m.wpack"):
    tag = "chunks_" + ("plain" if arch == "c.wpack" else "shard")
    with wpack.safe_open(base + "/" + arch) as f:
        check(tag + "_described", f.describe("big")["checksum_chunk"] == MIB, str(f.describe("big")))
        for rows, chunks in (((100, 110), 1), ((256, 512), 1), ((200, 300), 2), ((0, 1024), 4),
                             ((1023, 1024), 1)):
            clear()
            got = f.get_slice("big")[rows[0]:rows[1]]
            n, b = fetched()
            # (a shard's last chunk may lie in the tail its open fetched)
            ok = b == chunks * MIB or (tag.endswith("shard") and rows[1] == 1024 and b < chunks * MIB)
            check("%s_rows_%d_%d" % (tag, rows[0], rows[1]),
                  np.array_equal(got, want[rows[0]:rows[1]]) and ok,
                  "%d bytes in %d GETs, want %d chunks" % (b, n, chunks))
with wpack.safe_open(base + "/c.wpack", cache=cache + "-c", chunk_size=65536) as f:
    clear()
    f.get_slice("big")[300:310]
    n1, b1 = fetched()
    clear()
    got = f.get_slice("big")[260:300]           # the same chunk: from the cache
    n, b = fetched()
    # (the cache fetches in its own 64 KiB blocks: one more at the ends)
    check("chunks_cached", np.array_equal(got, want[260:300]) and MIB <= b1 <= MIB + 65536
          and n == 0,
          "first %d bytes, then %d GETs" % (b1, n))

# verify on with the cache: after the first fetch, later slices read nothing
with wpack.safe_open(base + "/a.wpack", cache=cache, chunk_size=65536) as f:
    clear()
    got = f.get_slice("big")[0:2]
    n, b = fetched()
    check("cache_first_fetch", np.array_equal(got, want[0:2]) and b >= 1024 * ROW,
          "%d bytes" % b)
    check("cache_other", np.array_equal(f.get_tensor("other"), other), "values differ")
    clear()
    got = f.get_slice("big")[300:310]
    n, b = fetched()
    check("cache_slice_no_fetch", np.array_equal(got, want[300:310]) and n == 0,
          "%d GETs, %d bytes" % (n, b))
with wpack.safe_open(base + "/a.wpack", cache=cache, chunk_size=65536, verify=False) as f:
    clear()
    got = f.get_slice("big")[700:900]
    n, b = fetched()
    check("cache_noverify_slice_no_fetch", np.array_equal(got, want[700:900]) and n == 0,
          "%d GETs, %d bytes" % (n, b))
PYEOF
rc=$?
while read -r name verdict why; do
    if [ "$verdict" = ok ]; then pass "$name"; else fail "$name" "$why"; fi
done <"$T/py.out"
n=$(grep -c . "$T/py.out" || true)
[ "$rc" -eq 0 ] && [ "$n" -eq 31 ] && pass python_cases_all_ran ||
    fail python_cases_all_ran "exit $rc, $n of 31 cases: $(tail -3 "$T/py.err")"
finish
