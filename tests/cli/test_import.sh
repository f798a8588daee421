#!/bin/bash
# test_import.sh - `wpack create` on the dumps people really have: torch.save
# checkpoints (checked against torch.load bit for bit), safetensors, .npz,
# tar bundles, raw binaries with a manifest, calibration stats, --cast,
# --prefix, --key, duplicate names; then the hostile inputs of
# tests/hostile/importers/, each with its own error and no output left.
. "$(dirname "$0")/lib.sh"
IMP="$TESTS_DIR/import"
H="$TESTS_DIR/hostile/importers"

# roundtrip NAME INPUT CHECKARGS... : create, extract, compare with torch.load
torch_roundtrip() {
    local name=$1 input=$2; shift 2
    local opts=() chk=()
    while [ $# -gt 0 ]; do
        case $1 in
        --key | --prefix | --cast) opts+=("$1" "$2"); chk+=("$1" "$2"); shift 2 ;;
        *) opts+=("$1"); shift ;;
        esac
    done
    rm -rf "$T/x"
    if ! "$WPACK" create -q -o "$T/$name.wpack" "${opts[@]}" "$input" 2>"$T/err"; then
        fail "$name" "create: $(head -c 300 "$T/err")"; return
    fi
    if ! "$WPACK" extract -q "$T/$name.wpack" -o "$T/x" 2>"$T/err"; then
        fail "$name" "extract: $(head -c 300 "$T/err")"; return
    fi
    if $PY "$IMP/torch_cases.py" check "$input" "$T/x" "${chk[@]}" >"$T/out" 2>&1; then
        pass "$name"
    else
        fail "$name" "$(head -c 300 "$T/out")"
    fi
}

if ! $PY -c 'import torch' 2>/dev/null; then
    fail torch_available "python3-torch is not importable by $PY"
    finish; exit
fi
$PY "$IMP/torch_cases.py" make "$T/pt" || fail torch_cases_made

# --- torch.save checkpoints
torch_roundtrip torch_state_dict "$T/pt/model.pt"
torch_roundtrip torch_parameters "$T/pt/params.pt"
torch_roundtrip torch_views_dtypes_ranks "$T/pt/views.pt"
torch_roundtrip torch_nested_checkpoint "$T/pt/ckpt.pt"
torch_roundtrip torch_bare_tensor "$T/pt/bare.pt"
torch_roundtrip torch_key_model "$T/pt/ckpt.pt" --key model
torch_roundtrip torch_prefix "$T/pt/model.pt" --prefix enc.block0
torch_roundtrip torch_cast_bf16 "$T/pt/cast.pt" --cast bf16
torch_roundtrip torch_cast_f16 "$T/pt/cast.pt" --cast f16

"$WPACK" inspect "$T/torch_state_dict.wpack" >"$T/out"
grep -Eq '^head\.weight .*alias .*= emb\.weight' "$T/out" && pass torch_tied_is_alias || fail torch_tied_is_alias "$(grep head "$T/out")"
"$WPACK" inspect "$T/torch_views_dtypes_ranks.wpack" >"$T/out"
grep -Eq '^same2 .*= (rows|same1)' "$T/out" && pass torch_same_view_alias || fail torch_same_view_alias
grep -Eq '^cols .*[0-9]+ [0-9a-f]{16}' "$T/out" && pass torch_different_view_stored || fail torch_different_view_stored
"$WPACK" inspect "$T/torch_nested_checkpoint.wpack" >"$T/out"
for m in 'epoch = 3' 'lr = 0.125' 'name = run-7' 'best = true' 'optimizer.param_groups.0.lr = 0.01'; do
    grep -qF "$m" "$T/out" && pass "torch_meta_${m%% *}" || fail "torch_meta_${m%% *}" "$(grep -A20 metadata: "$T/out")"
done
"$WPACK" inspect "$T/torch_key_model.wpack" >"$T/out"
grep -q '^emb.weight' "$T/out" && ! grep -q 'epoch' "$T/out" && pass torch_key_drops_rest || fail torch_key_drops_rest
expect_fail torch_key_missing "--key nope: no key 'nope' \(keys: 'model'" "$WPACK" create -q -o "$T/k.wpack" --key nope "$T/pt/ckpt.pt"

# --cast: only matching names, stats of the values before the cast
expect torch_cast_only "$WPACK" create -q -o "$T/only.wpack" --cast bf16 --only 'ti*' "$T/pt/cast.pt"
"$WPACK" inspect "$T/only.wpack" >"$T/out"
grep -Eq '^tiny +bf16' "$T/out" && grep -Eq '^rand +f32' "$T/out" && grep -Eq '^ints +i64' "$T/out" &&
    pass torch_cast_only_dtypes || fail torch_cast_only_dtypes "$(cat "$T/out")"
"$WPACK" inspect --json "$T/torch_cast_bf16.wpack" >"$T/j.json"
$PY - "$T/pt/cast.pt" "$T/j.json" <<'PYEOF' && pass cast_stats_before_cast || fail cast_stats_before_cast
import json, sys, torch
t = torch.load(sys.argv[1])["rand"].double()
j = {e["name"]: e for e in json.load(open(sys.argv[2]))["tensors"]}
s = j["rand"]["stats"]
assert j["rand"]["dtype"] == "bf16"
assert s["min"] == t.min().item() and s["max"] == t.max().item(), (s, t.min(), t.max())
assert abs(s["mean"] - t.mean().item()) < 1e-9 * max(1, abs(t.mean().item())), s
PYEOF

# several inputs: duplicates reported with both inputs named
expect_fail torch_duplicate_inputs "tensor 'emb.weight' is already taken by .*model.pt" \
    "$WPACK" create -q -o "$T/dup.wpack" "$T/pt/model.pt" "$T/pt/params.pt"
[ ! -e "$T/dup.wpack" ] && pass duplicate_leaves_nothing || fail duplicate_leaves_nothing
expect torch_two_prefixes "$WPACK" create -q -o "$T/two.wpack" --prefix a "$T/pt/model.pt" --prefix b "$T/pt/params.pt"
"$WPACK" inspect "$T/two.wpack" | grep -q '^b.emb.weight' && pass two_prefixes_names || fail two_prefixes_names

# the legacy format, written by torch itself
$PY -c "import torch,sys; torch.save({'w': torch.ones(2)}, sys.argv[1], _use_new_zipfile_serialization=False)" "$T/legacy.pt"
expect_fail torch_legacy_advice "_use_new_zipfile_serialization=True" "$WPACK" create -q -o "$T/l.wpack" "$T/legacy.pt"
# detection by content: a checkpoint called .bin
cp "$T/pt/model.pt" "$T/pytorch_model.bin"
expect torch_detected_by_content "$WPACK" create -q -o "$T/bin.wpack" "$T/pytorch_model.bin"
# a damaged storage: one byte flipped inside it must fail the zip's CRC-32,
# both for a tensor that is its whole storage and for a view of a storage
damage_storage() { # SRC DST TENSOR: flip the last byte of TENSOR's storage
    $PY - "$@" <<'PYEOF'
import struct, sys, torch, zipfile
src, dst, name = sys.argv[1:]
t = torch.load(src)[name]
with zipfile.ZipFile(src) as z:
    # the storage torch wrote for NAME: the data/ entry of the same size
    want = t.storage().size() * t.element_size()
    infos = [i for i in z.infolist() if '/data/' in i.filename and i.file_size == want]
    info = infos[0]
b = bytearray(open(src, 'rb').read())
off = info.header_offset
name_len, extra_len = struct.unpack_from('<HH', b, off + 26)
b[off + 30 + name_len + extra_len + info.file_size - 1] ^= 0x40
open(dst, 'wb').write(b)
PYEOF
}
damage_storage "$T/pt/model.pt" "$T/bad_whole.pt" emb.weight
expect_fail torch_storage_crc_whole "tensor '.*': its storage does not match the zip's CRC-32" \
    "$WPACK" create -q -o "$T/bad1.wpack" "$T/bad_whole.pt"
[ ! -e "$T/bad1.wpack" ] && pass torch_storage_crc_no_output || fail torch_storage_crc_no_output
damage_storage "$T/pt/views.pt" "$T/bad_view.pt" cols
expect_fail torch_storage_crc_view "its storage does not match the zip's CRC-32" \
    "$WPACK" create -q -o "$T/bad2.wpack" "$T/bad_view.pt"

# --- safetensors (written by a minimal writer here), npz, bundles, manifest
$PY - "$T" <<'PYEOF' || fail made_inputs
import io, json, os, struct, sys, tarfile, zipfile
import numpy as np, torch
t = sys.argv[1]
rng = np.random.default_rng(3)
arrs = {"a.w": rng.standard_normal((3, 4)).astype(np.float32), "a.b": rng.standard_normal(4).astype(np.float16),
        "i": np.arange(12, dtype=np.int64).reshape(3, 2, 2), "m": rng.random(5) > 0.5,
        "u": np.arange(7, dtype=np.uint8), "d": rng.standard_normal(()).astype(np.float64),
        "r6": rng.standard_normal((1, 2, 1, 2, 1, 2)).astype(np.float32), "e": np.zeros((0, 2), np.float32)}
bf = torch.randn(3, 3).bfloat16()
def st_write(path, arrays, bf16, meta):
    names = {np.float32: "F32", np.float16: "F16", np.int64: "I64", np.bool_: "BOOL", np.uint8: "U8", np.float64: "F64"}
    h, blobs, off = {"__metadata__": meta}, [], 0
    items = [(k, names[v.dtype.type], list(v.shape), v.tobytes()) for k, v in arrays.items()]
    items.append(("bf", "BF16", [3, 3], bf16.view(torch.int16).numpy().tobytes()))
    for k, dt, shape, b in items:
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
st_write(f"{t}/m.safetensors", arrs, bf, {"format": "pt", "model": "tiny"})
np.save(f"{t}/bf.npy", bf.view(torch.int16).numpy().view("<u2"))
os.makedirs(f"{t}/ref", exist_ok=True)
for k, v in arrs.items():
    np.save(f"{t}/ref/{k}.npy", v)
np.savez(f"{t}/stored.npz", **arrs)
np.savez_compressed(f"{t}/deflated.npz", **arrs)
for mode, ext in (("w:gz", "tar.gz"), ("w", "tar")):
    with tarfile.open(f"{t}/b.{ext}", mode) as tf:
        for k, v in arrs.items():
            b = io.BytesIO(); np.save(b, v); ti = tarfile.TarInfo("dir/" + k.replace(".", "/") + ".npy")
            ti.size = len(b.getvalue()); tf.addfile(ti, io.BytesIO(b.getvalue()))
# raw binaries + manifest, one big-endian, one at an offset
w = rng.standard_normal((2, 3)).astype(np.float32)
open(f"{t}/raw.bin", "wb").write(b"HEAD" + w.tobytes() + w.astype(">f4").tobytes())
json.dump({"tensors": [{"name": "raw.le", "dtype": "f32", "shape": [2, 3], "file": "raw.bin", "offset": 4},
                       {"name": "raw.be", "dtype": "F32", "shape": [2, 3], "file": "raw.bin", "offset": 28, "endian": "big"}],
           "metadata": {"source": "manifest", "version": 2, "scale": 0.5, "ok": True}},
          open(f"{t}/manifest.json", "w"))
os.makedirs(f"{t}/refraw", exist_ok=True); np.save(f"{t}/refraw/raw.le.npy", w)
json.dump({"version": 1, "stats": [
    {"key": "enc.0", "kind": "activation", "count": 100, "min": -3.5, "max": 2.25, "mean": 0.1, "variance": 1.5,
     "histogram": {"edges": [-3.5, 0, 2.25], "counts": [40, 60]}, "percentiles": [[99.9, 2.0]]},
    {"key": "a.w", "kind": "weight", "granularity": "channel", "axis": 0, "count": 12,
     "min": [-1, -2, -3], "max": [1, 2, 3], "mean": [0, 0, 0], "variance": [1, 1, 1]}]}, open(f"{t}/stats.json", "w"))
PYEOF

# compare_dir NAME EXTRACTED REF...: every REF/*.npy equals EXTRACTED/*.npy byte for byte
compare_dir() {
    $PY - "$2" "$3" "${4:-}" <<'PYEOF'
import glob, os, sys
import numpy as np
x, ref, pre = sys.argv[1], sys.argv[2], sys.argv[3]
n = 0
for f in sorted(glob.glob(ref + "/*.npy")):
    k = os.path.basename(f)
    g, w = np.load(os.path.join(x, pre + k)), np.load(f)
    assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), k
    n += 1
assert n > 0
PYEOF
}

for input in m.safetensors stored.npz deflated.npz b.tar b.tar.gz; do
    rm -rf "$T/x"
    pre=""
    case $input in b.tar*) pre=dir. ;; esac
    if "$WPACK" create -q -o "$T/in.wpack" "$T/$input" 2>"$T/err" && "$WPACK" extract -q "$T/in.wpack" -o "$T/x" &&
        compare_dir "$input" "$T/x" "$T/ref" "$pre" 2>"$T/err"; then
        pass "import_$input"
    else
        fail "import_$input" "$(head -c 300 "$T/err")"
    fi
done
"$WPACK" create -q -o "$T/st.wpack" "$T/m.safetensors" && "$WPACK" inspect "$T/st.wpack" >"$T/out"
grep -q 'format = pt' "$T/out" && grep -q 'model = tiny' "$T/out" && pass safetensors_metadata || fail safetensors_metadata
grep -Eq '^bf +bf16 +\[3, 3\]' "$T/out" && pass safetensors_bf16 || fail safetensors_bf16
rm -rf "$T/x" && "$WPACK" extract -q "$T/st.wpack" -o "$T/x" bf && cmp -s <(tail -c 18 "$T/x/bf.npy") <(tail -c 18 "$T/bf.npy") &&
    pass safetensors_bf16_bits || fail safetensors_bf16_bits
"$WPACK" inspect "$T/in.wpack" | grep -q '^dir.a.w ' && pass tar_member_names || fail tar_member_names
# Fortran-order and big-endian members (numpy writes transposed views that way)
$PY - "$T" <<'PYEOF'
import numpy as np, sys, os
t = sys.argv[1]
os.makedirs(f"{t}/fref", exist_ok=True)
a = np.asfortranarray(np.arange(2 * 3 * 5, dtype=">f4").reshape(2, 3, 5))
b = np.arange(12, dtype=np.int16).reshape(3, 4).T
np.savez_compressed(f"{t}/fortran.npz", a=a, b=b)
np.save(f"{t}/fref/a.npy", np.ascontiguousarray(a).astype("<f4")); np.save(f"{t}/fref/b.npy", np.ascontiguousarray(b))
PYEOF
rm -rf "$T/x"
if "$WPACK" create -q -o "$T/f.wpack" "$T/fortran.npz" 2>"$T/err" && "$WPACK" extract -q "$T/f.wpack" -o "$T/x" &&
    compare_dir fortran "$T/x" "$T/fref" 2>"$T/err"; then
    pass import_fortran_order_npz
else
    fail import_fortran_order_npz "$(head -c 300 "$T/err")"
fi
# an empty Fortran-order member (numpy itself says fortran_order False for
# an empty array, other writers need not; numpy loads either): nothing to
# transpose, and the 0-byte spill could not be mapped ("mapping for the
# transpose failed: Invalid argument")
$PY - "$T" <<'PYEOF'
import struct, sys, zipfile
t = sys.argv[1]
def npy(descr):
    h = "{'descr': '%s', 'fortran_order': True, 'shape': (2, 0, 3), }" % descr
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()
with zipfile.ZipFile(f"{t}/fempty.npz", "w", zipfile.ZIP_STORED) as z:
    z.writestr("w.npy", npy("<f4"))
with zipfile.ZipFile(f"{t}/fempty_z.npz", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("w.npy", npy(">f4"))
PYEOF
for f in fempty fempty_z; do
    if "$WPACK" create -q -o "$T/$f.wpack" "$T/$f.npz" 2>"$T/err" &&
        "$WPACK" inspect "$T/$f.wpack" | grep -Eq '^w +f32 +\[2, 0, 3\]'; then
        pass "import_${f}_fortran_npz"
    else
        fail "import_${f}_fortran_npz" "$(head -c 300 "$T/err")"
    fi
done
# a Fortran-order member past --max-output is refused before it is spilled
# for the transpose: with no usable $TMPDIR the cap must be what is reported
# (the spill came first, and filled $TMPDIR with bytes about to be refused)
$PY - "$T" <<'PYEOF'
import io, sys, tarfile, zipfile, numpy as np
t = sys.argv[1]
a = np.asfortranarray(np.arange(512 * 1024, dtype="<f4").reshape(512, 1024))
b = io.BytesIO(); np.save(b, a); d = b.getvalue()
with tarfile.open(f"{t}/fbig.tar", "w", format=tarfile.USTAR_FORMAT) as tf:
    ti = tarfile.TarInfo("w.npy"); ti.size = len(d); tf.addfile(ti, io.BytesIO(d))
with zipfile.ZipFile(f"{t}/fbig.npz", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("w.npy", d)
PYEOF
for f in fbig.tar fbig.npz; do
    TMPDIR="$T/no-such-dir" expect_fail "fortran_cap_before_spill_${f#*.}" \
        "tensor 'w': 2097152 bytes would bring the tensor data past the output cap of 1048576 bytes.*\[WPACK_E_TOO_LARGE\]" \
        "$WPACK" create -q -o "$T/fbig.wpack" --max-output 1M "$T/$f"
done
if command -v zstd >/dev/null; then
    tar -C "$T" -cf - ref | zstd -q -o "$T/b.tar.zst"
    rm -rf "$T/x"
    "$WPACK" create -q -o "$T/z.wpack" "$T/b.tar.zst" && "$WPACK" extract -q "$T/z.wpack" -o "$T/x" &&
        compare_dir zst "$T/x" "$T/ref" ref. && pass import_tar_zst || fail import_tar_zst
fi
rm -rf "$T/x"
expect import_manifest "$WPACK" create -q -o "$T/man.wpack" "$T/manifest.json"
"$WPACK" extract -q "$T/man.wpack" -o "$T/x" && cmp -s "$T/x/raw.le.npy" "$T/refraw/raw.le.npy" && cmp -s "$T/x/raw.be.npy" "$T/refraw/raw.le.npy" &&
    pass manifest_values || fail manifest_values
"$WPACK" inspect "$T/man.wpack" | grep -q 'version = 2' && pass manifest_metadata || fail manifest_metadata
# a manifest whose JSON does not parse: the message names it once (it said
# "m.json: m.json: manifest JSON: ...")
printf '{"tensors": [], "tensors": []}' >"$T/dupkey_manifest.json"
expect_fail manifest_bad_json "dupkey_manifest.json: manifest JSON: duplicate object key .*\[WPACK_E_INPUT\]$" \
    "$WPACK" create -q -o "$T/h.wpack" "$T/dupkey_manifest.json"
named_once manifest_bad_json_named_once "dupkey_manifest.json"
expect import_stats "$WPACK" create -q -o "$T/stats.wpack" --stats "$T/stats.json" "$T/m.safetensors"
"$WPACK" inspect --json "$T/stats.wpack" >"$T/j.json"
$PY - "$T/j.json" <<'PYEOF' && pass stats_records || fail stats_records "$(head -c 600 "$T/j.json")"
import json, sys
j = json.load(open(sys.argv[1]))
s = {e["key"] + ":" + e["kind"]: e for e in j.get("stats", [])}
a = s["enc.0:activation"]
assert a["min"] == -3.5 and a["max"] == 2.25 and a["count"] == 100, a
w = [e for e in j["tensors"] if e["name"] == "a.w"][0]["stats"]
assert w["granularity"] == "channel" and w["channels"] == 3, w
PYEOF
echo '{"version": 1, "stats": [{"key": "x", "count": 1, "min": 0, "max": [1, 2]}]}' >"$T/badstats.json"
expect_fail stats_bad_record "stats\[0\] 'x': \"max\" must be a number" "$WPACK" create -q -o "$T/bs.wpack" --stats "$T/badstats.json" "$T/m.safetensors"
[ ! -e "$T/bs.wpack" ] && pass stats_bad_leaves_nothing || fail stats_bad_leaves_nothing

# --- hostile inputs: each its own error, never a signal, never an output file
hostile() {
    local file=$1 pat=$2
    rm -f "$T"/h.wpack*
    expect_fail "hostile_${file//[^a-z0-9_]/_}" "$pat" "$WPACK" create -q -o "$T/h.wpack" "$H/$file"
    if ls "$T"/h.wpack* >/dev/null 2>&1; then fail "hostile_${file//[^a-z0-9_]/_}_no_output"; fi
}
hostile pickle_os_system.pt "global 'os.system' .* not allowed"
hostile pickle_builtins_eval.pt "global 'builtins.eval' .* not allowed"
hostile pickle_load_from_bytes.pt "global 'torch.storage._load_from_bytes' .* not allowed"
hostile pickle_stack_global.pt "global 'posix.system' .* not allowed"
hostile pickle_memo_huge.pt "memo index 4294967295 above"
hostile pickle_cycle.pt "nesting deeper than 64"
hostile pickle_truncated.pt "pickle: truncated"
hostile storage_key_traversal.pt "storage key '../../../etc/passwd' is not a plain name"
hostile storage_key_missing.pt "storage '7' is not in the zip"
hostile storage_size_mismatch.pt "claims 400 elements of 4 bytes but its entry holds 16"
hostile view_outside_storage.pt "view reaches element 5 of storage '0' which has 4"
hostile size_overflow.pt "element count overflows"
hostile stride_overflow.pt "view reaches element"
hostile rank_too_high.pt "rank 9 above the 8 limit"
hostile key_nul.pt "torch: the dict key 'a\\\\x00b' holds a NUL byte: no name can be made of it \[WPACK_E_NAME\]$"
hostile key_empty.pt "torch: an empty dict key at the top level: no name can be made of it \[WPACK_E_NAME\]$"
hostile storage_two_dtypes.pt "tensor 'b': storage '0' is read as f16 here but as f32 before"
hostile zip_truncated.pt "no end-of-central-directory record \(truncated"
hostile zip_offset_outside.pt "local header at offset [0-9]+ is missing or past the end"
hostile zip_dotdot_name.pt "has a '..' component"
hostile zip_absolute_name.pt "has an absolute name"
hostile zip_symlink.pt "is a symlink \(refused\)"
hostile legacy_format.pt "legacy \(pre-1.6\).*_use_new_zipfile_serialization=True"
# the guard trips inside the member: the bomb's code, not a read error's
hostile bomb.npz "refused as a zip bomb \[WPACK_E_LIMIT\]$"
# libarchive's own message, without the newline it ends with
# (a malformed member, not a read error; a bad CRC is a damaged file, as
# for a stored member read without libarchive)
hostile zip_wrong_size.npz "wrong size \(read 144, expected 4294967280\) \[WPACK_E_INPUT\]$"
hostile zip_fortran_bad_crc.npz "member 'w.npy': ZIP bad CRC.* \[WPACK_E_CHECKSUM\]$"
hostile gzip_bad_crc.tar.gz "gzip stream at byte [0-9]+: incorrect data check \(damaged file\) \[WPACK_E_CHECKSUM\]"
# one pass: the tensor is packed before the damaged member after the tar's
# end is inflated; the half-written archive is discarded, an existing one kept
hostile gzip_bad_crc_last.tar.gz "gzip stream at byte [0-9]+: incorrect data check \(damaged file\) \[WPACK_E_CHECKSUM\]"
cp "$T/st.wpack" "$T/h.wpack"
"$WPACK" create -q -o "$T/h.wpack" "$H/gzip_bad_crc_last.tar.gz" 2>/dev/null
cmp -s "$T/st.wpack" "$T/h.wpack" && [ "$(ls "$T" | grep -c '^h\.wpack')" = 1 ] &&
    pass gzip_bad_crc_last_keeps_existing_output || fail gzip_bad_crc_last_keeps_existing_output
[ -f "$H/bomb.tar.zst" ] && hostile bomb.tar.zst "refused as a zip bomb \[WPACK_E_LIMIT\]$"
# a gzip under another layer went through libarchive's gzip filter, which
# checks no CRC-32: the damaged tar inside packed
hostile gzip_in_gzip.tar.gz "a gzip stream inside gzip compression: its checksums would not be checked .*\[WPACK_E_UNSUPPORTED\]$"
hostile gzip_in_xz.tar.xz "a gzip stream inside xz compression: .*\[WPACK_E_UNSUPPORTED\]$"
# a sparse member's hole (1 GiB in a 2 KB tar) is filled with zeros: the guard
hostile tar_sparse.tar "member 'w.npy': expands more than 200:1 .*refused as a zip bomb \[WPACK_E_LIMIT\]$"
# magic bytes inside a bundle never start a program: libarchive's external
# decompressors (lrzip -d, found on $PATH) are not registered
mkdir -p "$T/fakebin" && rm -f "$T/ran"
printf '#!/bin/sh\ntouch "%s"\ncat >/dev/null\n' "$T/ran" >"$T/fakebin/lrzip"
chmod +x "$T/fakebin/lrzip"
PATH="$T/fakebin:$PATH" expect_fail filter_program_not_run "Unrecognized archive format" \
    "$WPACK" create -q -o "$T/h.wpack" "$H/filter_program.tar.gz"
[ ! -e "$T/ran" ] && pass filter_program_no_exec || fail filter_program_no_exec "lrzip was run"
# a member that is not a .npy is inflated under the guard too (it was skipped
# unchecked: a few KB of .tar.bz2 kept create busy for minutes)
hostile bomb_skipped.tar.bz2 "member 'junk.bin': expands more than 200:1"
# the members' headers count as inflated bytes: 70,000 empty .npy in 78 KB
# of .tar.xz (a 1.3 MB .tar.zst of a million took 650 MB and 15 s)
if $PY - "$T/headers.tar.xz" <<'EOF'
import io, lzma, struct, sys, tarfile
d = "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }"
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", 118) + (d + " " * (117 - len(d)) + "\n").encode()
with lzma.open(sys.argv[1], "wb", preset=9) as f, tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as t:
    for i in range(70000):
        ti = tarfile.TarInfo("m%05d.npy" % i)
        ti.size = len(npy)
        t.addfile(ti, io.BytesIO(npy))
EOF
then
    expect_fail bomb_member_headers "member 'm6553[0-9].npy': expands more than 200:1" \
        "$WPACK" create -q -o "$T/h.wpack" "$T/headers.tar.xz"
else
    fail bomb_member_headers_made
fi
hostile tar_symlink.tar "is a symbolic link, not a file"
hostile tar_dotdot.tar "'..' path refused"
hostile tar_member_truncated.tar "member 'enc/0/w.npy': truncated data \[WPACK_E_INPUT\]$"
hostile st_header_huge.safetensors "header length 200000000 above the 100 MB limit"
hostile st_overlap.safetensors "an overlap"
hostile st_hole.safetensors "a hole"
hostile st_trailing.safetensors "4 trailing bytes"
hostile st_truncated.safetensors "truncated"
hostile st_size_mismatch.safetensors "hold 8 bytes but shape x F32 needs 12"
hostile st_shape_overflow.safetensors "element count overflows"
hostile st_duplicate.safetensors "duplicate object key"
hostile st_bad_dtype.safetensors "dtype 'F4' not supported"
hostile manifest_traversal/manifest.json "must be a relative path without '..'"
hostile manifest_offset.json "run past the end of"
# a safetensors header above the 100 MB limit, in a file without the
# extension (found by content; a sparse file: refused on
# its length, nothing past the header is read) is named as one, not "not a
# recognised input"
"$PY" - "$T/bighdr.st" <<'PYEOF'
import struct, sys
n = 100_000_130
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", n) + b'{"__metadata__": {"blob": "')
    f.truncate(8 + n)
PYEOF
expect_fail safetensors_big_header_named "bighdr\.st: safetensors: header length 100000130 above the 100 MB limit \[WPACK_E_LIMIT\]" \
    "$WPACK" create -q -o "$T/bighdr.wpack" "$T/bighdr.st"
rm -f "$T/bighdr.st"

# an existing output survives a failed import untouched
cp "$T/st.wpack" "$T/h.wpack"
"$WPACK" create -q -o "$T/h.wpack" "$H/pickle_os_system.pt" 2>/dev/null
cmp -s "$T/st.wpack" "$T/h.wpack" && pass hostile_keeps_existing_output || fail hostile_keeps_existing_output
finish
