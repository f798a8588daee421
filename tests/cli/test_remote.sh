#!/bin/bash
# test_remote.sh - archives over HTTP from a real nginx on loopback (issue
# 17): inspect, verify, extract, export, run and resolve of a URL equal byte
# for byte to the local result, for a plain, a compressed and a sharded
# archive; nginx's access log shows what was fetched: two range GETs for
# the header and index, then only the byte range of the tensor asked for.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

W="$T/www"
mkdir -p "$W/set" "$T/in"
"$PY" - "$T/in" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
r = np.random.default_rng(17)
for i in range(4):                      # 256 KiB each: the middle ones lie
    np.save(f"{d}/t{i}.npy", r.standard_normal((256, 256)).astype(np.float32))  # outside both open requests
np.save(f"{d}/0.weight.npy", r.standard_normal((8, 4)).astype(np.float32))
np.save(f"{d}/0.bias.npy", r.standard_normal(8).astype(np.float32))
np.save(f"{d}/2.weight.npy", r.standard_normal((3, 8)).astype(np.float32))
np.save(f"{d}/2.bias.npy", r.standard_normal(3).astype(np.float32))
np.save(f"{d}/zeros.npy", np.zeros((512, 512), dtype=np.float32))      # compresses
np.save(f"{d}/x.npy", r.standard_normal((2, 4)).astype(np.float32))
np.save(f"{d}/u.weight.npy", (r.standard_normal((64, 64)) / 8).astype(np.float32))  # a shared layer
np.save(f"{d}/xs.npy", r.standard_normal((2, 64)).astype(np.float32))
PYEOF
mv "$T/in/x.npy" "$T/x.npy"
mv "$T/in/xs.npy" "$T/xs.npy"
expect create_plain "$WPACK" create -q -o "$W/a.wpack" "$T/in" --layers 0,1=relu,2
expect create_zstd "$WPACK" create -q --compress zstd:3 -o "$W/z.wpack" "$T/in"
expect create_set "$WPACK" create -q --shard-size 300K -o "$W/set/m.wpack" "$T/in"

need_nginx "$W"
U="http://127.0.0.1:$NGINX_PORT"
LOGF="$T/nginx/access.log"

for a in a.wpack z.wpack set/m.wpack; do
    n=${a%%.wpack}
    reads_equal "${n//\//_}" "$W/$a" "$U/$a"
done

# run: a Linear/ReLU stack from the URL's weights, as from the file
expect run_url "$WPACK" run "$U/a.wpack" --input "$T/x.npy" -o "$T/yu.npy"
"$WPACK" run "$W/a.wpack" --input "$T/x.npy" -o "$T/yl.npy"
cmp -s "$T/yu.npy" "$T/yl.npy" && pass run_same_bytes || fail run_same_bytes
# a layer named four times (shared weights) is fetched once, not once a use
read -r soff slen <<<"$("$WPACK" inspect --json "$W/a.wpack" | "$PY" -c '
import json, sys
for t in json.load(sys.stdin)["tensors"]:
    if t["name"] == "u.weight": print(t["offset"], t["stored_length"])')"
: >"$LOGF"
expect run_url_shared "$WPACK" run "$U/a.wpack" --layers u,u,r=relu,u,u --input "$T/xs.npy" -o "$T/ysu.npy"
"$WPACK" run "$W/a.wpack" --layers u,u,r=relu,u,u --input "$T/xs.npy" -o "$T/ysl.npy"
cmp -s "$T/ysu.npy" "$T/ysl.npy" && pass run_shared_same_bytes || fail run_shared_same_bytes
[ "$(grep -c "\"bytes=$soff-$((soff + slen - 1))\"" "$LOGF")" = 1 ] && pass run_shared_fetched_once ||
    fail run_shared_fetched_once "u.weight at $soff+$slen: $(cat "$LOGF")"

# resolve: inline blobs come from the fetched (checked) bytes
cat >"$T/m.mlir" <<'MLIR'
module {
  ml_program.global private @"0.weight"(#ml_program.extern : tensor<8x4xf32>) : tensor<8x4xf32>
  ml_program.global private @"2.bias"(#ml_program.extern : tensor<3xf32>) : tensor<3xf32>
}
MLIR
for mode in inline iree; do
    expect "resolve_$mode" "$WPACK" resolve -q "$U/a.wpack" "$T/m.mlir" -o "$T/u.mlir" --emit $mode
    "$WPACK" resolve -q "$W/a.wpack" "$T/m.mlir" -o "$T/l.mlir" --emit $mode
    cmp -s "$T/u.mlir" "$T/l.mlir" && pass "resolve_same_$mode" || fail "resolve_same_$mode"
done

# Only the bytes needed: inspect is two range GETs (the first 64 KiB, the
# last 256 KiB); extracting one tensor adds exactly its own range.
: >"$LOGF"
"$WPACK" inspect "$U/a.wpack" >/dev/null 2>&1
size=$(stat -c %s "$W/a.wpack")
want1="GET /a.wpack \"bytes=0-65535\" 206 65536"
want2="GET /a.wpack \"bytes=$((size - 262144))-$((size - 1))\" 206 262144"
[ "$(wc -l <"$LOGF")" -eq 2 ] && [ "$(sed -n 1p "$LOGF")" = "$want1" ] && [ "$(sed -n 2p "$LOGF")" = "$want2" ] &&
    pass inspect_two_gets || fail inspect_two_gets "$(cat "$LOGF")"
off=$("$WPACK" inspect --json "$W/a.wpack" | "$PY" -c '
import json, sys
for t in json.load(sys.stdin)["tensors"]:
    if t["name"] == "t1": print(t["offset"], t["stored_length"])')
read -r toff tlen <<<"$off"
: >"$LOGF"
expect extract_one "$WPACK" extract -q -o "$T/one" "$U/a.wpack" t1
[ "$(wc -l <"$LOGF")" -eq 3 ] &&
    [ "$(sed -n 3p "$LOGF")" = "GET /a.wpack \"bytes=$toff-$((toff + tlen - 1))\" 206 $tlen" ] &&
    pass extract_fetches_only_its_range || fail extract_fetches_only_its_range "t1 at $toff+$tlen: $(cat "$LOGF")"
total=$(awk '{s += $NF} END {print s}' "$LOGF")
[ "$total" -lt $((65536 + 262144 + tlen + 1)) ] && pass bytes_bounded || fail bytes_bounded "$total bytes"

# Chunks over several connections: a 256 KiB tensor in 64 KiB requests.
: >"$LOGF"
rm -rf "$T/ch"
expect extract_chunked env WPACK_REMOTE_CHUNK=64K WPACK_REMOTE_CONNECTIONS=3 \
    "$WPACK" extract -q -o "$T/ch" "$U/a.wpack" t1 t2
n64=$(grep -c '" 206 65536$' "$LOGF")
[ "$n64" -ge 9 ] && pass chunked_requests || fail chunked_requests "$n64 chunks: $(cat "$LOGF")"
rm -rf "$T/xl"
"$WPACK" extract -q -o "$T/xl" "$W/a.wpack"
cmp -s "$T/ch/t1.npy" "$T/xl/t1.npy" && cmp -s "$T/ch/t2.npy" "$T/xl/t2.npy" &&
    pass chunked_same_bytes || fail chunked_same_bytes

# The sharded set: a shard is fetched only for the tensors that live in it.
: >"$LOGF"
expect extract_from_set "$WPACK" extract -q -o "$T/s1" "$U/set/m.wpack" t2
cmp -s "$T/s1/t2.npy" "$T/xl/t2.npy" && pass set_tensor_same_bytes || fail set_tensor_same_bytes
# a shard's data is fetched only where the tensor lives: one shard has a
# third request, exactly t2's range in it
third=$(grep -- '-of-' "$LOGF" | grep -v '"bytes=0-65535"' | awk '{print $2}' | sort | uniq -c | awk '$1 == 2' | wc -l)
[ "$third" -eq 1 ] && pass set_fetches_one_shard || fail set_fetches_one_shard "$(cat "$LOGF")"

# verify checks the padding between extents through planned reads
# (1 MiB alignment: each gap is almost 1 MiB), not one per 4 KiB; a read
# goes over the connections in pieces of 256 KiB or more (fetch.c), so
# at most 4 requests per gap
"$PY" -c 'import numpy as np, sys; [np.save(f"{sys.argv[1]}/p{i}.npy", np.full(300, i, np.float32)) for i in range(3)]' "$T"
expect create_aligned "$WPACK" create -q --align 1M -o "$W/p.wpack" "$T/p0.npy" "$T/p1.npy" "$T/p2.npy"
: >"$LOGF"
same_output verify_aligned "$W/p.wpack" "$U/p.wpack" verify @A@
[ "$(wc -l <"$LOGF")" -le 20 ] && pass verify_padding_few_requests ||
    fail verify_padding_few_requests "$(wc -l <"$LOGF") requests"

# The fetch progress on a terminal (script(1) gives one): -q silences it;
# without -q it shares the command's own progress line, and what follows
# starts a line of its own (the status line is cleared or ended first)
if command -v script >/dev/null; then
    rm -rf "$T/xq" "$T/xn"
    script -qc "'$WPACK' extract -q -o '$T/xq' '$U/a.wpack'; echo NEXT" /dev/null >"$T/tty.q" 2>&1
    [ "$(tr -d '\r' <"$T/tty.q")" = NEXT ] && pass tty_quiet_no_progress ||
        fail tty_quiet_no_progress "$(cat -A "$T/tty.q" | head -c 300)"
    script -qc "'$WPACK' extract -o '$T/xn' '$U/a.wpack'; echo NEXT" /dev/null >"$T/tty.n" 2>&1
    # one line: the progress with the fetch count in it, never a second
    # display drawn over it; the summary and what follows at a line's start
    if grep -aq 'tensors  fetched' "$T/tty.n" && ! grep -aq 'wpack: fetched' "$T/tty.n" &&
        grep -aq '^extracted [0-9]* tensors' "$T/tty.n" && grep -aq '^NEXT' "$T/tty.n"; then
        pass tty_progress_one_line
    else
        fail tty_progress_one_line "$(cat -A "$T/tty.n" | tail -c 400)"
    fi
    script -qc "'$WPACK' inspect '$U/a.wpack' | head -1; echo NEXT" /dev/null >"$T/tty.i" 2>&1
    grep -aq '^http://127.0.0.1:[0-9]*/a.wpack: wpack format' <(sed 's/.*\x1b\[K//' "$T/tty.i") &&
        grep -aq '^NEXT' "$T/tty.i" && pass tty_inspect_starts_line ||
        fail tty_inspect_starts_line "$(cat -A "$T/tty.i" | head -c 400)"
fi

# calibrate updates in place: a URL is refused at once, nothing fetched
: >"$LOGF"
expect_fail calibrate_url_refused "a URL is read only.*calibrate a local copy" \
    "$WPACK" calibrate "$U/a.wpack" --input "$T/x.npy"
sleep 0.3
[ ! -s "$LOGF" ] && pass calibrate_url_nothing_fetched || fail calibrate_url_nothing_fetched "$(wc -l <"$LOGF") requests"

# Errors name the URL and what the server said.
expect_fail missing_404 "http://127.0.0.1:$NGINX_PORT/nope.wpack.*HTTP 404.*\[WPACK_E_IO\]" "$WPACK" inspect "$U/nope.wpack"
echo "not an archive, just some text long enough for a superblock and a trailer, $(seq 100)" >"$W/text.wpack"
expect_fail text_file "not a wpack archive.*\[WPACK_E_BAD_MAGIC\]" "$WPACK" inspect "$U/text.wpack"
expect_fail bad_scheme "ftp://x" "$WPACK" inspect "ftp://x"
expect_fail bad_env_chunk "WPACK_REMOTE_CHUNK=abc" env WPACK_REMOTE_CHUNK=abc "$WPACK" inspect "$U/a.wpack"
# Commands that rewrite their archive take local files only.
expect_fail update_url_refused "a URL is read only.*\[WPACK_E_UNSUPPORTED\]" "$WPACK" update "$U/a.wpack" --meta k=v
expect_fail convert_url_refused "a URL cannot be rewritten.*\[WPACK_E_UNSUPPORTED\]" \
    "$WPACK" convert "$U/a.wpack" --compress zstd -o "$T/c.wpack"
port=$(free_port)
expect_fail refused "127.0.0.1:$port.*(Couldn.t connect|connect)" env WPACK_REMOTE_RETRIES=0 "$WPACK" inspect "http://127.0.0.1:$port/a.wpack"
# A host name is looked up on the caller's thread: the library (and curl
# under it) starts no thread. Counted by strace: libcurl's threaded
# resolver clones once per lookup, even one that fails (curl answers
# "localhost" itself, so that name proves nothing about threads).
# no_clone NAME URL: wpack inspect URL makes no clone/fork call
no_clone() {
    local name=$1 url=$2
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" WPACK_REMOTE_RETRIES=0 strace -f -qq \
        -o "$T/clone.log" -e trace=clone,clone3,fork,vfork "$WPACK" inspect "$url" >/dev/null 2>"$T/err"
    local n
    n=$(grep -cE '(^|[ ])(clone|clone3|fork|vfork)\(' "$T/clone.log")
    [ "$n" -eq 0 ] && pass "$name" || fail "$name" "$n clone calls: $(head -3 "$T/clone.log")"
}
if command -v strace >/dev/null; then
    no_clone unknown_host_no_thread "http://no-such-host.invalid/a.wpack"
    grep -Eq "http://no-such-host.invalid/a.wpack: cannot resolve host 'no-such-host.invalid'.*\[WPACK_E_IO\]" "$T/err" &&
        pass unknown_host_message || fail unknown_host_message "$(cat "$T/err")"
    # a name that resolves, other than localhost: this machine's, where it
    # is 127.0.0.1 (nginx listens there only)
    me=$(hostname 2>/dev/null)
    if [ -n "$me" ] && [ "$me" != localhost ] && [ "$(getent ahostsv4 "$me" | awk 'NR == 1 {print $1}')" = 127.0.0.1 ]; then
        no_clone by_name_no_thread "http://$me:$NGINX_PORT/a.wpack"
        [ ! -s "$T/err" ] && pass by_name_inspect || fail by_name_inspect "$(cat "$T/err")"
    else
        echo "skip by_name_no_thread: the host name '$me' does not resolve to 127.0.0.1 here (unknown_host_no_thread covers the lookup)"
    fi
else
    fail unknown_host_no_thread "strace is not installed (tools/deps.sh installs it)"
fi
rm -rf "$T/byname"
expect by_localhost_extract "$WPACK" extract -q -o "$T/byname" "http://localhost:$NGINX_PORT/a.wpack"
diff -r "$T/byname" "$T/xl" >/dev/null 2>&1 && pass by_localhost_same || fail by_localhost_same
finish
