#!/bin/bash
# test_externalize_cap.sh - `externalize` cannot turn bytes into terabytes:
# a splat literal (a bare scalar, hex of one element, i1 0x00/0xFF) becomes a
# splat entry of the archive (one element: a 150-byte dense<1.0> of 4 TiB
# gives a 5 KB archive), a dense_resource blob or an attribute alias named
# by globals of one type is written once (the others alias its entry), and
# the tensor bytes the archive would hold are checked before anything is
# written against the cap of extract and export (the larger of 1 GiB and
# 1000 x IN.mlir, --max-output SIZE), with WPACK_E_TOO_LARGE and neither
# output written.
. "$(dirname "$0")/lib.sh"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}
# A regression must fail here, not fill the disk: no file above 64 MiB.
ulimit -f 65536
cd "$T" || exit 1

# g NAME VALUE TYPE: one ml_program.global line.
g() { printf '  ml_program.global private @%s(%s : %s) : %s\n' "$1" "$2" "$3" "$3"; }

# --- splat literals become splat entries -----------------------------------
{ echo 'module {'; g w 'dense<1.0>' 'tensor<1048576x1048576xf32>'; echo '}'; } >e.mlir
expect splat_4tib timeout 20 "$WPACK" externalize -q e.mlir -o eo.mlir --archive en.wpack --min-bytes 1
[ -f en.wpack ] && [ "$(wc -c <en.wpack)" -lt 65536 ] && pass splat_4tib_small_archive ||
    fail splat_4tib_small_archive "$(ls -la en.wpack 2>&1)"
"$WPACK" inspect en.wpack 2>/dev/null | grep -Eq '^w +f32 +\[1048576, 1048576\] +4\.0 TiB +splat .*fill 1$' &&
    pass splat_4tib_entry || fail splat_4tib_entry "$("$WPACK" inspect en.wpack 2>&1 | head -8)"
"$MLIR_OPT" eo.mlir >/dev/null 2>&1 && grep -q '@w(#ml_program.extern' eo.mlir && pass splat_4tib_ir ||
    fail splat_4tib_ir "$(cat eo.mlir)"
# and back: resolve --emit inline writes the splat again
expect splat_round_trip "$WPACK" resolve -q en.wpack eo.mlir -o back.mlir --emit inline
grep -q '@w(dense<"0x0000803F"> : tensor<1048576x1048576xf32>)' back.mlir && pass splat_round_trip_value ||
    fail splat_round_trip_value "$(head -c 300 back.mlir)"

# every splat form; a list or full hex stays data
{
    echo 'module {'
    g hexsplat 'dense<"0x0000C03F">' 'tensor<64x64xf32>'
    g flags 'dense<"0xFF">' 'tensor<64xi1>'
    g off 'dense<false>' 'tensor<512xi1>'
    g h 'dense<2.5>' 'tensor<300xf16>'
    g neg 'dense<-3>' 'tensor<70xi64>'
    g u 'dense<250>' 'tensor<300xui8>'
    g list 'dense<[1.0, 2.0, 3.0, 4.0]>' 'tensor<4xf32>'
    g full 'dense<"0x0000803F00000040">' 'tensor<2xf32>'
    g packed 'dense<"0xFF">' 'tensor<8xi1>'
    echo '}'
} >k.mlir
expect splat_forms "$WPACK" externalize -q k.mlir -o ko.mlir --archive k.wpack --min-bytes 1
"$WPACK" inspect k.wpack >k.txt 2>&1
ok=1
for want in 'hexsplat f32 .* splat .*fill 1\.5$' 'flags +bool .* splat .*fill 1$' 'off +bool .* splat .*fill 0$' \
    'h +f16 .* splat .*fill 0x0041$' 'neg +i64 .* splat .*fill -3$' 'u +u8 .* splat .*fill 250$'; do
    grep -Eq "^$want" k.txt || { ok=0; fail "splat_forms_entry" "no /$want/ in $(cat k.txt)"; }
done
for data in list full packed; do
    grep -E "^$data " k.txt | grep -q splat && { ok=0; fail splat_forms_data "$data became a splat"; }
done
[ $ok = 1 ] && pass splat_forms_entries
# the bytes are the literal's: extract the splats and a list
"$WPACK" extract -q k.wpack -o kx hexsplat flags h neg list 2>/dev/null
"$PY" - <<'PYEOF' && pass splat_forms_bytes || fail splat_forms_bytes
import numpy as np, sys
ok = (np.all(np.load("kx/hexsplat.npy") == 1.5) and np.all(np.load("kx/flags.npy"))
      and np.all(np.load("kx/h.npy") == np.float16(2.5)) and np.all(np.load("kx/neg.npy") == -3)
      and list(np.load("kx/list.npy")) == [1, 2, 3, 4])
sys.exit(0 if ok else 1)
PYEOF
"$MLIR_OPT" ko.mlir >/dev/null 2>&1 && pass splat_forms_ir || fail splat_forms_ir "$("$MLIR_OPT" ko.mlir 2>&1 | head -3)"
# a bad splat scalar is still an error at its place
{ echo 'module {'; g w 'dense<1.5x>' 'tensor<4096xf32>'; echo '}'; } >bad.mlir
expect_fail splat_bad_scalar "bad.mlir:2:.*global @w: '1.5x' is not a number \[WPACK_E_INPUT\]" \
    "$WPACK" externalize bad.mlir -o bo.mlir --archive b.wpack
nothing_at splat_bad_nothing_written bo.mlir b.wpack

# --- the output cap -----------------------------------------------------------
{
    echo 'module {'
    printf '  ml_program.global private @a(dense<['
    for i in $(seq 1 63); do printf '%s.0, ' "$i"; done
    printf '64.0]> : tensor<64xf32>) : tensor<64xf32>\n'
    g s 'dense<1.0>' 'tensor<1048576x1048576xf32>'
    echo '}'
} >c.mlir
expect_fail cap_max_output 'c.wpack: the inline weights of c.mlir: 256 bytes would bring the tensor data past the output cap of 200 bytes.*nothing written \[WPACK_E_TOO_LARGE\]' \
    "$WPACK" externalize c.mlir -o co.mlir --archive c.wpack --max-output 200
grep -q 'externalize: the cap is --max-output 200 B' err && pass cap_named || fail cap_named "$(cat err)"
nothing_at cap_nothing_written co.mlir c.wpack
# the splat costs nothing: 256 bytes pass a cap of 256
expect cap_splat_free "$WPACK" externalize -q c.mlir -o co.mlir --archive c.wpack --max-output 256
"$WPACK" inspect c.wpack 2>/dev/null | grep -Eq '^s .* splat ' && pass cap_splat_entry || fail cap_splat_entry
expect_fail cap_bad_size 'max-output 0: want a size above 0' \
    "$WPACK" externalize c.mlir -o co2.mlir --archive c2.wpack --max-output 0
"$WPACK" externalize --help | grep -q -- '--max-output SIZE' && pass help_max_output || fail help_max_output

# --- a blob many globals share --------------------------------------------
# One 64 KiB dense_resource blob named by 3 globals of its type and one of
# another shape: its bytes are written once for the type (the others are
# aliases of the first: 4,000 globals of one 1 MiB blob made a 4 GiB archive
# out of a 2 MB file), and once more for the other type, which counts.
{
    echo 'module {'
    for s in r0 r1 r2; do g "$s" 'dense_resource<blob>' 'tensor<16384xf32>'; done
    g other 'dense_resource<blob>' 'tensor<128x128xf32>'
    echo '}'
    printf '{-#\n  dialect_resources: {\n    builtin: {\n      blob: "0x04000000%s"\n    }\n  }\n#-}\n' \
        "$(head -c 65536 /dev/zero | tr '\0' '\1' | od -An -v -tx1 | tr -d ' \n')"
} >sh.mlir
expect shared_blob "$WPACK" externalize -q sh.mlir -o sho.mlir --archive sh.wpack --max-output 131072
"$WPACK" inspect sh.wpack >sh.txt 2>&1
{ grep -Eq '^r0 +f32 .*\[16384\]' sh.txt && grep -Eq '^other +f32 .*\[128, 128\]' sh.txt &&
    [ "$(grep -Ec '^r[12] +f32 .* alias ' sh.txt)" = 2 ]; } && pass shared_blob_aliases ||
    fail shared_blob_aliases "$(cat sh.txt err)"
[ "$(wc -c <sh.wpack)" -lt 200000 ] && pass shared_blob_written_twice ||
    fail shared_blob_written_twice "$(wc -c <sh.wpack) bytes"
# one literal that 3 globals name through an attribute alias: one entry
{
    printf '#lit = dense<"0x%s"> : tensor<16384xf32>\nmodule {\n' \
        "$(head -c 65536 /dev/zero | tr '\0' '\2' | od -An -v -tx1 | tr -d ' \n')"
    for s in a0 a1 a2; do printf '  ml_program.global private @%s(#lit) : tensor<16384xf32>\n' "$s"; done
    echo '}'
} >la.mlir
expect shared_literal "$WPACK" externalize -q la.mlir -o lao.mlir --archive la.wpack --max-output 65536
"$WPACK" inspect la.wpack >la.txt 2>&1
[ "$(grep -Ec '^a[12] +f32 .* alias ' la.txt)" = 2 ] && grep -Eq '^a0 +f32 .*\[16384\]' la.txt &&
    pass shared_literal_aliases || fail shared_literal_aliases "$(cat la.txt)"
"$MLIR_OPT" lao.mlir >/dev/null 2>&1 && pass shared_literal_ir || fail shared_literal_ir "$("$MLIR_OPT" lao.mlir 2>&1 | head -3)"
# and back: every global gets the blob's values, and the aliases share
# their target's blob (128 KiB of hex each: 4 blobs would pass the cap)
expect shared_blob_round_trip "$WPACK" resolve -q sh.wpack sho.mlir -o shb.mlir --emit inline --max-output 300000
[ "$(grep -Ec '^      (r[012]|other): "0x[0-9A-Fa-f]{8}01010101' shb.mlir)" = 2 ] &&
    [ "$(grep -c '(dense_resource<r0> : tensor<16384xf32>)' shb.mlir)" = 3 ] &&
    grep -q '@other(dense_resource<other> : tensor<128x128xf32>)' shb.mlir && pass shared_blob_round_trip_values ||
    fail shared_blob_round_trip_values "$(cut -c1-160 shb.mlir)"
"$MLIR_OPT" shb.mlir >/dev/null 2>&1 && pass shared_blob_round_trip_ir ||
    fail shared_blob_round_trip_ir "$("$MLIR_OPT" shb.mlir 2>&1 | head -3)"
"$MLIR_OPT" sho.mlir >/dev/null 2>&1 && pass shared_blob_ir || fail shared_blob_ir "$("$MLIR_OPT" sho.mlir 2>&1 | head -3)"

# the archive's write fails (a 4 KiB file size limit): the message names
# it once (it said "fo.wpack: fo.wpack: write failed")
{ echo 'module {'; g big 'dense<"0x'"$(head -c 16384 /dev/zero | od -An -v -tx1 | tr -d ' \n' | tr 0 1)"'">' 'tensor<4096xf32>'; echo '}'; } >f.mlir
expect_fail archive_write_fails "fo.wpack: .*(write|File too large)" \
    bash -c 'ulimit -f 4; exec "$0" externalize -q f.mlir -o fo.mlir --archive fo.wpack --min-bytes 1' "$WPACK"
named_once archive_write_fails_named_once "fo.wpack:"

finish
