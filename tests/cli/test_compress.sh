#!/bin/bash
# test_compress.sh - zstd through the command line: create --compress,
# inspect's stored/logical sizes, verify, extract bit for bit, convert both ways.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/in"
$PY - "$T/in" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
np.save(f"{d}/smooth.npy", np.tile(np.linspace(-1, 1, 512, dtype=np.float32), 2048).reshape(1024, 1024))
np.save(f"{d}/noise.npy", np.random.default_rng(3).standard_normal((256, 1024)).astype(np.float32))
np.save(f"{d}/ids.npy", (np.arange(300000) % 7).astype(np.int64))
np.save(f"{d}/tiny.npy", np.ones(4, np.float32))
PYEOF
expect create_compressed "$WPACK" create -q -o "$T/z.wpack" --compress zstd:5 --chunk-size 64K --compress-saving 10 "$T/in"
expect inspect_compressed "$WPACK" inspect "$T/z.wpack"
# zstd (1.1) with a checksum per decoded zstd chunk (1.2, optional)
grep -q "wpack format 1.2 (chunk checksums)" "$T/out" && pass format_1_2 || fail format_1_2 "$(head -1 "$T/out")"
grep -q "zstd: .* stored for 4.0 MiB, ratio" "$T/out" && pass inspect_shows_ratio || fail inspect_shows_ratio "$(cat "$T/out")"
grep -q "zstd tensors: .* stored for .* logical, ratio" "$T/out" && pass inspect_total_ratio || fail inspect_total_ratio
"$WPACK" inspect --json "$T/z.wpack" >"$T/z.json"
$PY - "$T/z.json" <<'PYEOF' && pass json_codecs || fail json_codecs
import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tensors"]}
assert t["smooth"]["codec"] == "zstd" and t["smooth"]["chunk_size"] == 65536
assert t["smooth"]["stored_length"] * 10 < t["smooth"]["nbytes"]
assert t["ids"]["codec"] == "zstd"
assert "codec" not in t["noise"], "noise saves < 10% and is stored raw"
assert "codec" not in t["tiny"], "below --compress-min"
PYEOF
expect verify_compressed "$WPACK" verify "$T/z.wpack"
expect extract_compressed "$WPACK" extract -q -o "$T/x" "$T/z.wpack"
$PY - "$T" <<'PYEOF' && pass extract_bit_identical || fail extract_bit_identical
import numpy as np, sys
t = sys.argv[1]
for n in ["smooth", "noise", "ids", "tiny"]:
    a, b = np.load(f"{t}/x/{n}.npy"), np.load(f"{t}/in/{n}.npy")
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), n
PYEOF
expect convert_decompress "$WPACK" convert "$T/z.wpack" --decompress -o "$T/plain.wpack"
"$WPACK" inspect --json "$T/plain.wpack" >"$T/p.json"
$PY - "$T/z.json" "$T/p.json" <<'PYEOF' && pass decompressed_same_content || fail decompressed_same_content
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
A = {x["name"]: x.get("decoded_checksum", x["checksum"]) for x in a["tensors"]}
B = {x["name"]: x["checksum"] for x in b["tensors"]}
assert A == B, (A, B)
assert all("codec" not in x for x in b["tensors"])
# no zstd left; the 4 MiB tensors now carry chunk checksums (1.2)
assert b["format"] == "1.2", b["format"]
assert all(x.get("checksum_chunk") == 1 << 20 for x in b["tensors"] if x["nbytes"] > 1 << 20)
assert [s["key"] for s in a["stats"]] == [s["key"] for s in b["stats"]]
PYEOF
expect convert_compress "$WPACK" convert "$T/plain.wpack" --compress zstd -o "$T/z2.wpack"
expect verify_reconverted "$WPACK" verify "$T/z2.wpack"
expect_fail convert_needs_mode "one of --compress" "$WPACK" convert "$T/z.wpack" -o "$T/q.wpack"
expect_fail bad_codec "the codec is zstd" "$WPACK" create -q -o "$T/q.wpack" --compress lz4 "$T/in"
expect_fail bad_level "level from 1 to 22" "$WPACK" create -q -o "$T/q.wpack" --compress zstd:99 "$T/in"
expect_fail bad_chunk "power of two" "$WPACK" create -q -o "$T/q.wpack" --compress zstd --chunk-size 5000 "$T/in"
# a flipped byte inside compressed data is found by verify
off=$($PY -c "import json;d=json.load(open('$T/z.json'));print([t for t in d['tensors'] if t['name']=='smooth'][0]['offset']+40)")
cp "$T/z.wpack" "$T/bad.wpack"
printf '\x33' | dd of="$T/bad.wpack" bs=1 seek="$off" conv=notrunc 2>/dev/null
expect_fail verify_flags_compressed_damage "tensor 'smooth'" "$WPACK" verify "$T/bad.wpack"
finish
