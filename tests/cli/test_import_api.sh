#!/bin/bash
# test_import_api.sh - libwpack-import as a library (issue 15, "Done when"):
# a C program that includes only wpack.h and wpack_import.h, built with
# `pkg-config --cflags --libs wpack-import` against `make install`, turns a
# torch checkpoint, a safetensors file, .npz files and a .npy directory into
# archives byte-identical to `wpack create`'s, exports them as `wpack export`
# does, and gets the options, errors and defaults the header promises.
# Also: libwpack-import's objects use no core internal (wpk_) outside format/.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$TESTS_DIR/.." && pwd)
BUILD_DIR=$(dirname "$WPACK")

# --- the library's objects need nothing of the core but wpack.h and format/
if ls "$BUILD_DIR"/obj/import/*.o >/dev/null 2>&1; then
    nm -u "$BUILD_DIR"/obj/import/*.o | awk '$1 == "U" {print $2}' | grep '^wpk_' | sort -u >"$T/undef"
    nm --defined-only "$BUILD_DIR"/obj/format/*.o "$BUILD_DIR"/obj/import/*.o | awk 'NF == 3 {print $3}' | sort -u >"$T/def"
    missing=$(comm -23 "$T/undef" "$T/def" | tr '\n' ' ')
    [ -s "$T/undef" ] && [ -z "$missing" ] && pass import_uses_no_core_internals || fail import_uses_no_core_internals "${missing:-no wpk_ symbol seen}"
else
    fail import_objects_found "$BUILD_DIR/obj/import"
fi

# --- install, then build the user program against the installed libraries
P="$T/prefix"
if make -s -C "$ROOT" install BUILD="$(basename "$BUILD_DIR")" PREFIX="$P" OPT="${OPT:--O2 -g}" SAN="${SAN:-}" >"$T/inst.log" 2>&1; then
    pass make_install
else
    fail make_install "$(tail -5 "$T/inst.log")"
fi
[ -f "$P/include/wpack_import.h" ] && pass header_installed || fail header_installed
flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs wpack-import 2>"$T/pc.err")
case " $flags " in
*" -lwpack-import "*"-lwpack "*) pass pkg_config_wpack_import ;;
*) fail pkg_config_wpack_import "$flags $(cat "$T/pc.err")" ;;
esac
U="$T/user"
if cc ${SAN:-} -std=c11 -Wall -Wextra -Werror -o "$U" "$TESTS_DIR/cli/import_api_user.c" $flags \
    -Wl,-rpath,"$P/lib" 2>"$T/cc.err"; then
    pass user_program_builds
else
    fail user_program_builds "$(head -5 "$T/cc.err")"
    finish; exit
fi
ldd "$U" | grep -q "$P/lib/libwpack-import.so.0" && ldd "$U" | grep -q "$P/lib/libwpack.so.0" &&
    pass uses_installed_shared_libraries || fail uses_installed_shared_libraries "$(ldd "$U" | grep wpack)"

# --- the defaults and argument checks of the header
(cd "$T" && "$U" defaults) >"$T/defaults.out" 2>&1 && pass options_defaults ||
    fail options_defaults "$(grep -v '^ok' "$T/defaults.out" | head -5)"

# --- inputs, written by python itself
if ! $PY -c 'import torch, numpy' 2>/dev/null; then
    fail torch_available "python3 with torch and numpy is not importable by $PY"
    finish; exit
fi
mkdir -p "$T/in/dir/enc/layers"
$PY - "$T/in" <<'PYEOF' || fail inputs_made
import json, struct, sys, numpy as np, torch
d = sys.argv[1]
torch.manual_seed(0)
emb = torch.randn(16, 8)
state = {"emb.weight": emb, "enc.weight": torch.randn(8, 8), "enc.bias": torch.randn(8),
         "head.weight": emb, "steps": torch.tensor([1, 2, 3], dtype=torch.int64),
         "half": torch.randn(4, 4).half()}
torch.save(state, f"{d}/model.pt")
torch.save({"model": {"w": torch.randn(3, 5), "b": torch.zeros(5)}, "epoch": 3, "lr": 0.125,
            "name": "run-7"}, f"{d}/ckpt.pt")
# safetensors: u64 header length, JSON header, data (as the reference writes it)
tensors = {"dec.weight": np.random.RandomState(1).randn(6, 4).astype(np.float32),
           "dec.bias": np.arange(4, dtype=np.int32), "dec.scale": np.ones(3, dtype=np.float16)}
hdr, data = {"__metadata__": {"format": "pt"}}, b""
for k in sorted(tensors):
    b = tensors[k].tobytes()
    hdr[k] = {"dtype": {"float32": "F32", "int32": "I32", "float16": "F16"}[str(tensors[k].dtype)],
              "shape": list(tensors[k].shape), "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(f"{d}/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
rs = np.random.RandomState(2)
np.savez(f"{d}/w.npz", a=rs.randn(5, 3).astype(np.float32), b=np.arange(7, dtype=np.int16),
         t=np.asfortranarray(rs.randn(4, 6)))
np.savez_compressed(f"{d}/wc.npz", c=rs.randn(32, 32).astype(np.float32))
np.save(f"{d}/dir/enc/layers/w.npy", rs.randn(3, 3).astype(np.float32))
np.save(f"{d}/dir/enc/b.npy", rs.randn(3).astype(np.float64))
np.save(f"{d}/dir/top.npy", np.asfortranarray(rs.randn(2, 5).astype(np.float32)))
open(f"{d}/dir/notes.txt", "w").write("not a tensor\n")
json.dump({"version": 1, "stats": [{"key": "enc", "kind": "activation", "count": 10,
           "min": -1.0, "max": 2.0, "mean": 0.5}]}, open(f"{d}/stats.json", "w"))
PYEOF
I="$T/in"

# same NAME CREATE_ARGS -- USER_ARGS: both write an archive, byte for byte equal
same() {
    local name=$1; shift
    local cargs=() uargs=()
    while [ "$1" != "--" ]; do cargs+=("$1"); shift; done
    shift
    uargs=("$@")
    if ! "$WPACK" create -q -o "$T/c_$name.wpack" "${cargs[@]}" 2>"$T/err"; then
        fail "$name" "create: $(head -c 300 "$T/err")"; return
    fi
    if ! "$U" create "$T/u_$name.wpack" "${uargs[@]}" 2>"$T/err"; then
        fail "$name" "api: $(head -c 300 "$T/err")"; return
    fi
    if cmp -s "$T/c_$name.wpack" "$T/u_$name.wpack"; then
        pass "$name"
    else
        fail "$name" "$(cmp "$T/c_$name.wpack" "$T/u_$name.wpack" 2>&1 | head -1)"
    fi
}

# create stamps nothing that changes between runs: two creates, same bytes
"$WPACK" create -q -o "$T/r1.wpack" "$I/model.pt" && "$WPACK" create -q -o "$T/r2.wpack" "$I/model.pt" &&
    cmp -s "$T/r1.wpack" "$T/r2.wpack" && pass create_is_deterministic || fail create_is_deterministic

same torch_same_bytes "$I/model.pt" -- "$I/model.pt"
same safetensors_same_bytes "$I/model.safetensors" -- "$I/model.safetensors"
same npz_same_bytes "$I/w.npz" -- "$I/w.npz"
same npz_deflated_same_bytes "$I/wc.npz" -- "$I/wc.npz"
same npy_directory_same_bytes "$I/dir" -- "$I/dir"
same npy_file_same_bytes "$I/dir/enc/b.npy" -- "$I/dir/enc/b.npy"
same torch_key_same_bytes --key model "$I/ckpt.pt" -- -k model "$I/ckpt.pt"
same several_inputs_prefixes --prefix a "$I/model.pt" --prefix b "$I/model.safetensors" "$I/w.npz" "$I/dir" \
    -- -p a "$I/model.pt" -p b "$I/model.safetensors" "$I/w.npz" "$I/dir"
same several_inputs_per_call --prefix a "$I/model.pt" --prefix b "$I/model.safetensors" "$I/w.npz" \
    -- -1 -p a "$I/model.pt" -p b "$I/model.safetensors" "$I/w.npz"
same cast_only_bf16 --cast bf16 --only '*.weight' "$I/model.pt" "$I/model.safetensors" \
    -- -c bf16 -O '*.weight' "$I/model.pt" "$I/model.safetensors"
same cast_f16_npy --cast f16 "$I/dir" "$I/w.npz" -- -c f16 "$I/dir" "$I/w.npz"
same stats_and_name_map --stats "$I/stats.json" --name p_enc=enc.weight "$I/model.pt" \
    -- -s "$I/stats.json" -m p_enc=enc.weight "$I/model.pt"
same stats_name_map_per_call --stats "$I/stats.json" --name p_enc=enc.weight "$I/model.pt" \
    -- -1 -s "$I/stats.json" -m p_enc=enc.weight "$I/model.pt"

# the options did something: names, dtypes, stats and the name map are there
"$WPACK" inspect "$T/u_several_inputs_prefixes.wpack" >"$T/inspect" 2>&1
grep -q '^a\.emb\.weight ' "$T/inspect" && grep -q '^b\.dec\.weight ' "$T/inspect" && grep -q '^b\.t ' "$T/inspect" &&
    grep -q '^b\.enc\.layers\.w ' "$T/inspect" && pass prefixes_applied || fail prefixes_applied "$(head -c 600 "$T/inspect")"
"$WPACK" inspect "$T/u_cast_only_bf16.wpack" >"$T/inspect" 2>&1
grep -Eq '^enc\.weight +bf16' "$T/inspect" && grep -Eq '^enc\.bias +f32' "$T/inspect" && grep -Eq '^dec\.weight +bf16' "$T/inspect" &&
    pass cast_only_applied || fail cast_only_applied "$(head -c 600 "$T/inspect")"
"$WPACK" inspect "$T/u_torch_key_same_bytes.wpack" >"$T/inspect" 2>&1
grep -q '^w ' "$T/inspect" && ! grep -q 'epoch' "$T/inspect" && pass key_applied || fail key_applied "$(head -c 600 "$T/inspect")"
"$WPACK" inspect --json "$T/u_stats_and_name_map.wpack" >"$T/inspect" 2>&1
grep -q '"p_enc"' "$T/inspect" && grep -q '"activation"' "$T/inspect" && pass stats_name_map_applied ||
    fail stats_name_map_applied "$(head -c 600 "$T/inspect")"

# --- errors: code, and a message naming the file
head -c 1500 "$I/model.pt" >"$T/trunc.pt"
"$WPACK" create -q -o "$T/c_trunc.wpack" "$T/trunc.pt" 2>"$T/cerr"
"$U" create "$T/u_trunc.wpack" "$T/trunc.pt" 2>"$T/uerr"
code=$?
want=$(grep -o '\[WPACK_E_[A-Z_]*\]' "$T/cerr" | tail -1)
if [ $code -gt 0 ] && [ $code -lt 128 ] && grep -q "trunc.pt" "$T/uerr" && [ -n "$want" ] && grep -qF "$want" "$T/uerr" &&
    [ ! -e "$T/u_trunc.wpack" ]; then
    pass truncated_checkpoint_error
else
    fail truncated_checkpoint_error "exit $code: $(head -c 300 "$T/uerr") / create: $(head -c 300 "$T/cerr")"
fi
cp "$I/model.pt" "$T/again.pt"
"$U" create "$T/u_dup.wpack" "$I/model.pt" "$T/again.pt" 2>"$T/uerr"
code=$?
[ $code -eq 6 ] && grep -q "again.pt: tensor 'emb.weight' is already taken by .*/model.pt" "$T/uerr" &&
    pass duplicate_names_other_input || fail duplicate_names_other_input "exit $code: $(head -c 300 "$T/uerr")"
"$U" create "$T/u_dup2.wpack" "$I/dir" -p enc "$I/dir/enc/b.npy" 2>"$T/uerr"
code=$?
[ $code -eq 6 ] && grep -q "b.npy: tensor 'enc.b' is already taken by .*dir/enc/b.npy" "$T/uerr" && pass duplicate_npy_named ||
    fail duplicate_npy_named "exit $code: $(head -c 300 "$T/uerr")"
printf 'just some text\n' >"$T/plain.txt"
"$U" create "$T/u_plain.wpack" "$T/plain.txt" 2>"$T/uerr"
code=$?
[ $code -eq 60 ] && grep -q "plain.txt: not a recognised input" "$T/uerr" && pass unknown_input_error ||
    fail unknown_input_error "exit $code: $(head -c 300 "$T/uerr")"
mkfifo "$T/fifo"
"$U" create "$T/u_fifo.wpack" "$T/fifo" 2>"$T/uerr"
code=$?
[ $code -eq 10 ] && grep -q "fifo" "$T/uerr" && pass fifo_refused || fail fifo_refused "exit $code: $(head -c 300 "$T/uerr")"

# --- detect and list
"$U" detect "$I/model.pt" "$I/model.safetensors" "$I/w.npz" "$I/dir" "$I/dir/top.npy" "$I/stats.json" \
    "$T/plain.txt" >"$T/detect" 2>&1
kinds=$(awk '{print $2}' "$T/detect" | tr '\n' ' ')
[ "$kinds" = "torch safetensors zip directory npy manifest unknown " ] && pass detect_kinds || fail detect_kinds "$kinds"
"$U" list "$I/dir" >"$T/list" 2>"$T/list.err"
items=$(awk '{print $1 ":" $2}' "$T/list" | tr '\n' ' ')
[ "$items" = "enc.b:npy enc.layers.w:npy top:npy " ] && pass list_directory || fail list_directory "$items"
grep -q "skipping .*notes.txt: not a .npy file" "$T/list.err" && pass list_warns_skipped || fail list_warns_skipped "$(cat "$T/list.err")"

# --- exporters: the same bytes as `wpack export`
for fmt in safetensors npz tar; do
    if "$WPACK" export -q "$T/c_several_inputs_prefixes.wpack" --to $fmt -o "$T/c.$fmt" 2>"$T/err" &&
        "$U" export "$T/c_several_inputs_prefixes.wpack" $fmt "$T/u.$fmt" 2>>"$T/err" &&
        cmp -s "$T/c.$fmt" "$T/u.$fmt"; then
        pass "export_${fmt}_same_bytes"
    else
        fail "export_${fmt}_same_bytes" "$(head -c 300 "$T/err") $(cmp "$T/c.$fmt" "$T/u.$fmt" 2>&1)"
    fi
done
"$U" export "$T/c_several_inputs_prefixes.wpack" pmml "$T/u.gguf" 2>"$T/uerr"
code=$?
[ $code -eq 3 ] && [ ! -e "$T/u.gguf" ] && pass export_unknown_format || fail export_unknown_format "exit $code"
finish
