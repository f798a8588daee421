#!/bin/bash
# test_extract2.sh - issue 14 points 2, 9, 11 and issue 13 point 7 for
# extract, export, convert, cast and verify, on the archives written by
# tests/hostile/round2/make_extract.c:
#   - tiny input, huge output: a 680-byte archive holding a 2^62-byte splat
#     and a 170 KB one holding 3 GiB of zstd zeros are refused before
#     anything is written (WPACK_E_TOO_LARGE), --max-output moves the cap
#     both ways, the free space is checked;
#   - two names that extract maps to one file name are refused, naming both;
#   - a decode failure is reported as one, not with a stale errno;
#   - a pattern that matches nothing creates nothing;
#   - export, convert and cast say what they wrote (-q: nothing), and long
#     runs show a progress line on a terminal only.
. "$(dirname "$0")/lib.sh"

R="$TESTS_DIR/hostile/round2"
# A regression must fail here, not fill the disk: no file above 64 MiB.
ulimit -f 65536

for f in splat_huge splat_8m zstd_huge names_collide decode_bad; do
    [ -f "$R/$f.wpack" ] || fail "have_$f" "$R/$f.wpack missing"
done

# --- 1. tiny input, huge output -------------------------------------------
cd "$T" || exit 1
expect_fail extract_splat_huge 'sh would get 4\.0 EiB \(4611686018427388[0-9]+ bytes\) from 680 B of input, above the default cap of 1\.0 GiB.*--max-output SIZE.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" extract "$R/splat_huge.wpack" -o sh
nothing_at extract_splat_huge_created_nothing sh
for fmt in safetensors npz tar; do
    expect_fail "export_${fmt}_splat_huge" 'would get 4\.0 EiB.*default cap.*--max-output.*\[WPACK_E_TOO_LARGE\]' \
        "$WPACK" export "$R/splat_huge.wpack" --to $fmt -o "sh.$fmt"
    expect_fail "export_${fmt}_zstd_huge" 'would get 3\.0 GiB.*from 171\.[0-9] KiB of input.*\[WPACK_E_TOO_LARGE\]' \
        "$WPACK" export "$R/zstd_huge.wpack" --to $fmt -o "zh.$fmt"
    nothing_at "export_${fmt}_huge_wrote_nothing" "sh.$fmt" "zh.$fmt"
done
# An irpa keeps a splat as a splat entry: its cap counts the entry, not 4 EiB.
expect export_irpa_splat_huge "$WPACK" export -q "$R/splat_huge.wpack" --to irpa -o sh.irpa
size=$(stat -c %s sh.irpa 2>/dev/null)
[ "${size:-0}" -gt 0 ] && [ "$size" -le 8192 ] && pass export_irpa_splat_huge_small || fail export_irpa_splat_huge_small "$size"
expect_fail export_irpa_zstd_huge 'would get 3\.0 GiB.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" export "$R/zstd_huge.wpack" --to irpa -o zh.irpa
expect_fail extract_zstd_huge 'zh would get 3\.0 GiB.*\[WPACK_E_TOO_LARGE\]' "$WPACK" extract "$R/zstd_huge.wpack" -o zh
expect_fail convert_decompress_zstd_huge 'zd\.wpack would get 3\.0 GiB.*default cap.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" convert "$R/zstd_huge.wpack" --decompress -o zd.wpack
expect_fail convert_compress_zstd_huge 'would get 3\.0 GiB.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" convert "$R/zstd_huge.wpack" --compress zstd -o zc.wpack
expect_fail cast_bf16_zstd_huge 'zb\.wpack would get 1\.5 GiB.*default cap.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" cast "$R/zstd_huge.wpack" --to bf16 -o zb.wpack
nothing_at huge_commands_wrote_nothing zh zd.wpack zc.wpack zb.wpack
# The cap counts what is selected: the small tensor of the same archive is fine.
expect extract_zstd_huge_small_only "$WPACK" extract -q "$R/zstd_huge.wpack" -o zs small
if [ "$(ls zs 2>/dev/null)" = "small.npy" ]; then pass extract_small_only_file; else fail extract_small_only_file "$(ls zs 2>&1)"; fi

# GGUF pads every tensor to the archive's general.alignment (up to 2^30):
# 200 one-float tensors asking for 2^30 were 200 GiB of zeros from an
# 860 KB archive, written until the disk filled; the bound counts the padding.
if py_wpack - "$T/galign.wpack" <<'PY'
import sys, numpy as np, wpack
wpack.save_file({"t%03d" % i: np.ones(1, np.float32) for i in range(200)}, sys.argv[1],
                metadata={"general.alignment": 1 << 30})
PY
then
    expect_fail export_gguf_align_huge 'galign\.gguf would get 201\.0 GiB .*from [0-9.]+ KiB of input, above the default cap of 1\.0 GiB.*\[WPACK_E_TOO_LARGE\]' \
        "$WPACK" export "$T/galign.wpack" --to gguf -o galign.gguf
    nothing_at export_gguf_align_huge_wrote_nothing galign.gguf
    # the other formats do not pad to it
    expect export_npz_align_meta_small "$WPACK" export -q "$T/galign.wpack" --to npz -o galign.npz
else
    fail made_galign "py_wpack failed"
fi

# --max-output lowers and raises the cap; an 8 MiB splat is really written.
expect_fail extract_max_output_1m 's8 would get 8\.0 MiB \([0-9]+ bytes\), above --max-output 1\.0 MiB \(1048576 bytes\).*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" extract "$R/splat_8m.wpack" -o s8 --max-output 1M
nothing_at extract_max_output_1m_created_nothing s8
expect extract_max_output_9m "$WPACK" extract -q "$R/splat_8m.wpack" -o s8 --max-output 9M
expect_fail export_max_output_1m 'above --max-output 1\.0 MiB.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" export "$R/splat_8m.wpack" --to npz -o s8.npz --max-output 1M
nothing_at export_max_output_1m_wrote_nothing s8.npz
expect export_max_output_9m "$WPACK" export -q "$R/splat_8m.wpack" --to npz -o s8.npz --max-output=9M
$PY - "$T" <<'PYEOF' && pass splat_8m_written_in_full || fail splat_8m_written_in_full
import sys, numpy as np
t = sys.argv[1]
for big in (np.load(f"{t}/s8/big.npy"), np.load(f"{t}/s8.npz")["big"]):
    assert big.shape == (2048, 1024) and big.dtype == np.float32 and (big == 1.5).all()
assert np.load(f"{t}/s8/small.npy").tolist() == [1, 2, 3, 4]
PYEOF
expect_fail max_output_junk 'max-output 12Q: want a size' "$WPACK" extract "$R/splat_8m.wpack" -o j --max-output 12Q
expect_fail max_output_zero 'max-output 0: want a size above 0' "$WPACK" export "$R/splat_8m.wpack" --to tar -o j.tar --max-output 0
"$WPACK" extract "$R/splat_8m.wpack" -o j --max-output 12Q 2>/dev/null
[ $? -eq 2 ] && pass max_output_junk_is_usage || fail max_output_junk_is_usage "exit not 2"

# convert --decompress and cast on ordinary archives: refused under a low
# --max-output, written under a high one.
$PY - "$T" <<'PYEOF' || fail made_inputs
import sys, numpy as np
t = sys.argv[1]
np.save(f"{t}/z.npy", np.zeros((1024, 1024), dtype=np.float32))  # 4 MiB, compresses to nothing
np.save(f"{t}/w.npy", np.random.default_rng(3).standard_normal((512, 512)).astype(np.float32))
PYEOF
expect make_zstd "$WPACK" create -q -o z.wpack --compress zstd z.npy w.npy
expect_fail convert_max_output_1m 'zd1\.wpack would get 5\.0 MiB.*above --max-output 1\.0 MiB.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" convert z.wpack --decompress -o zd1.wpack --max-output 1M
nothing_at convert_max_output_1m_wrote_nothing zd1.wpack
expect convert_max_output_8m "$WPACK" convert z.wpack --decompress -o zd8.wpack --max-output 8M
expect convert_output_verifies "$WPACK" verify zd8.wpack
expect_fail cast_max_output_100k 'wb\.wpack would get 2\.5 MiB.*above --max-output 100\.0 KiB.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" cast z.wpack --to bf16 -o wb.wpack --max-output 100K
nothing_at cast_max_output_100k_wrote_nothing wb.wpack
expect cast_max_output_3m "$WPACK" cast z.wpack --to bf16 -o wb.wpack --max-output 3M
$PY - "$T" <<'PYEOF' && pass cast_is_bf16 || fail cast_is_bf16
import subprocess, sys, os
out = subprocess.run([os.environ["WPACK"], "inspect", f"{sys.argv[1]}/wb.wpack"], capture_output=True, text=True).stdout
rows = [l.split() for l in out.splitlines() if l.split()[:1] in (["w"], ["z"])]
assert [r[1] for r in rows] == ["bf16", "bf16"], out
PYEOF

# Free space: a cap raised past the splat leaves the disk to refuse it.
expect_fail extract_free_space 'sp/a/b would get 4\.0 EiB.*but its file system has only .* free: nothing written \[WPACK_E_TOO_LARGE\]' \
    "$WPACK" extract "$R/splat_huge.wpack" -o sp/a/b --max-output 4294967297G
nothing_at extract_free_space_created_nothing sp
expect_fail export_free_space 'sp\.tar would get 4\.0 EiB.*file system has only .* free.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" export "$R/splat_huge.wpack" --to tar -o sp.tar --max-output 4294967297G
nothing_at export_free_space_wrote_nothing sp.tar

# --- 2. two names, one file ------------------------------------------------
long=L.$(printf 'x%.0s' $(seq 208))
expect_fail extract_collision "tensors '$long' and 'L\.x+~[0-9a-f]{16}' would both be written to nc/L\.x+~[0-9a-f]{16}\.npy: nothing extracted.*\[WPACK_E_SAME_FILE\]" \
    "$WPACK" extract "$R/names_collide.wpack" -o nc
nothing_at extract_collision_created_nothing nc
expect extract_collision_one_side "$WPACK" extract -q "$R/names_collide.wpack" -o nc "$long" c
if [ "$(ls nc | wc -l)" = 2 ]; then pass extract_collision_one_side_files; else fail extract_collision_one_side_files "$(ls nc)"; fi
# The same tensor selected twice is written and counted once.
expect extract_twice_once "$WPACK" extract "$R/splat_8m.wpack" -o tw small small
grep -q '^extracted 1 tensors (16 B) to tw$' "$T/err" && pass extract_twice_counted_once || fail extract_twice_counted_once "$(cat "$T/err")"

# --- 2b. file names: one escape rule for extract's files and npz/tar members
# '/', '%', '\' and a leading '.' become %2F, %25, %5C, %2E; extract cuts a name past
# 200 bytes and adds its hash (a file system's 255-byte limit).
if py_wpack - "$T/esc.wpack" <<'PY'
import sys, numpy as np, wpack
names = ["enc/layer.0", "50%", ".hidden", "a.b", "./x", "Z" * 210]
wpack.save_file({n: np.full(2, i, np.float32) for i, n in enumerate(names)}, sys.argv[1])
PY
then
    want=$(printf '%s\n' 'enc%2Flayer.0.npy' '50%25.npy' '%2Ehidden.npy' 'a.b.npy' '%2E%2Fx.npy' | sort)
    expect extract_escapes "$WPACK" extract -q "$T/esc.wpack" -o esc
    got=$(cd esc && ls | grep -v '^ZZZ' | sort)
    [ "$got" = "$want" ] && pass extract_escaped_names || fail extract_escaped_names "$got"
    long=$(cd esc && ls | grep '^ZZZ')
    [[ "$long" =~ ^Z{180}~[0-9a-f]{16}\.npy$ ]] && pass extract_long_name_cut || fail extract_long_name_cut "$long"
    for fmt in npz tar; do
        expect "export_${fmt}_escapes" "$WPACK" export -q "$T/esc.wpack" --to $fmt -o "esc.$fmt"
        got=$("$PY" -c 'import sys, tarfile, zipfile
p = sys.argv[1]
n = zipfile.ZipFile(p).namelist() if p.endswith(".npz") else tarfile.open(p).getnames()
print("\n".join(sorted(x for x in n if not x.startswith("ZZZ"))))
print(*[len(x) for x in n if x.startswith("ZZZ")])' "esc.$fmt")
        # members keep the whole name (no file-system limit inside an archive)
        [ "$got" = "$want"$'\n214' ] && pass "export_${fmt}_escaped_names" ||
            fail "export_${fmt}_escaped_names" "$got"
    done
else
    fail extract_escapes_archive "save_file of the escape test's archive failed"
fi

# Export, then create: the same names and bytes. create undoes exactly the
# escapes export wrote (%2F %25 %5C %2E, either hex case; any other '%' kept),
# so '/', '%', '\', a leading '.' and literal escapes come back; extract's
# files too, with no '/' ever a directory in DIR. (Names hold no control
# byte: the format refuses them.)
if py_wpack - "$T/rt.wpack" <<'PY'
import sys, numpy as np, wpack
names = ["a/b", "a%2Fb", "a%2fb", "a%25", "50%", "%", "%2", ".hidden", "./x", "..", "../../up",
         "x/../y", "/abs", "trail/", "a//b", "back\\slash", "q\"'", "w\\%5c%5C%2E",
         "\u00e9/\u00fc.w", "\u4e2d\u6587", "tab\u2028x", "\U0001f600/e", "enc.layer.0"]
wpack.save_file({n: np.arange(i + 1, dtype=np.float32) * (i + 0.5) for i, n in enumerate(names)},
                sys.argv[1])
PY
then
    entries() { "$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
for t in j["tensors"]:
    print(json.dumps([t["name"], t["dtype"], t["shape"], t["checksum"]]))' "$1"; }
    "$WPACK" inspect --json "$T/rt.wpack" >"$T/rt.json" && entries "$T/rt.json" >"$T/rt.want"
    [ "$(wc -l <"$T/rt.want")" = 23 ] && pass round_trip_archive || fail round_trip_archive "$(cat "$T/rt.want")"
    for fmt in npz tar; do
        expect "round_trip_export_$fmt" "$WPACK" export -q "$T/rt.wpack" --to $fmt -o "rt.$fmt"
        expect "round_trip_create_$fmt" "$WPACK" create -q -o "$T/rt_$fmt.wpack" "rt.$fmt"
        "$WPACK" inspect --json "$T/rt_$fmt.wpack" >"$T/rt2.json" && entries "$T/rt2.json" >"$T/rt.got"
        cmp -s "$T/rt.want" "$T/rt.got" && pass "round_trip_${fmt}_same_names_and_bytes" ||
            fail "round_trip_${fmt}_same_names_and_bytes" "$(diff "$T/rt.want" "$T/rt.got" | head -8)"
    done
    expect round_trip_extract "$WPACK" extract -q "$T/rt.wpack" -o rtx
    # all 23 tensors are regular files right in rtx: none went up or down a directory
    [ "$(find rtx -mindepth 1 -maxdepth 1 -type f | wc -l)" = 23 ] &&
        [ -z "$(find rtx -mindepth 1 ! -type f)" ] && pass extract_names_stay_files ||
        fail extract_names_stay_files "$(find rtx -mindepth 1 | head)"
    expect round_trip_create_dir "$WPACK" create -q -o "$T/rt_dir.wpack" rtx
    "$WPACK" inspect --json "$T/rt_dir.wpack" >"$T/rt2.json" && entries "$T/rt2.json" >"$T/rt.got"
    cmp -s "$T/rt.want" "$T/rt.got" && pass round_trip_extract_same_names_and_bytes ||
        fail round_trip_extract_same_names_and_bytes "$(diff "$T/rt.want" "$T/rt.got" | head -8)"
else
    fail round_trip_archive "save_file of the round trip's archive failed"
fi
# Another producer's bundle: only wpack's four escapes are undone, a '/'
# in a member's path is still a module separator.
"$PY" -c 'import sys, zipfile, numpy as np, io
z = zipfile.ZipFile(sys.argv[1], "w")
for i, n in enumerate(["a%2Fb.npy", "50%.npy", "p%41.npy", "d%2fe/f.npy", "x%252F.npy"]):
    b = io.BytesIO(); np.save(b, np.full(1, i, np.float32)); z.writestr(n, b.getvalue())
z.close()' foreign.npz || fail foreign_npz_made
expect foreign_create "$WPACK" create -q -o "$T/foreign.wpack" foreign.npz
got=$("$WPACK" inspect --json "$T/foreign.wpack" | "$PY" -c 'import json, sys
print(" ".join(sorted(t["name"] for t in json.load(sys.stdin)["tensors"])))')
[ "$got" = "50% a/b d/e.f p%41 x%2F" ] && pass foreign_member_names || fail foreign_member_names "$got"

# --- 3. the real cause of a read failure -----------------------------------
# (DECODE today; CHECKSUM is as true if the stored bytes get checked first)
mkdir -p db  # mkdir's EEXIST was the stale errno the issue saw
expect_fail extract_decode_error "tensor 'w'.*(does? not decode|checksum).*\[WPACK_E_(DECODE|CHECKSUM)\]" \
    "$WPACK" extract "$R/decode_bad.wpack" -o db
if grep -Eq 'File exists|Success' "$T/err"; then fail extract_decode_no_errno "$(cat "$T/err")"; else pass extract_decode_no_errno; fi
nothing_at extract_decode_wrote_nothing db/w.npy
expect_fail extract_decode_new_dir 'WPACK_E_(DECODE|CHECKSUM)' "$WPACK" extract "$R/decode_bad.wpack" -o db2
nothing_at extract_decode_leaves_no_dir db2
expect_fail export_decode_error "tensor 'w'.*(does? not decode|checksum).*\[WPACK_E_(DECODE|CHECKSUM)\]" \
    "$WPACK" export "$R/decode_bad.wpack" --to npz -o db.npz
expect_fail convert_decode_error "tensor 'w'.*(does? not decode|checksum).*\[WPACK_E_(DECODE|CHECKSUM)\]" \
    "$WPACK" convert "$R/decode_bad.wpack" --decompress -o db.wpack
nothing_at read_failures_wrote_nothing db.npz db.wpack

# --- 4. no match creates nothing; summaries; progress ----------------------
expect_fail extract_no_match "no tensor named or under 'zzz': nothing extracted \[WPACK_E_NOT_FOUND\]" \
    "$WPACK" extract "$R/splat_8m.wpack" -o nm small zzz
nothing_at extract_no_match_created_nothing nm
expect_fail extract_no_match_existing_dir "'zzz'.*WPACK_E_NOT_FOUND" "$WPACK" extract "$R/splat_8m.wpack" -o s8 zzz

expect export_summary "$WPACK" export "$R/splat_8m.wpack" --to tar -o sum.tar
grep -Eq '^exported 2 tensors \(8\.0 MiB\) to sum\.tar as tar$' "$T/err" && pass export_summary_line || fail export_summary_line "$(cat "$T/err")"
expect convert_summary "$WPACK" convert z.wpack --decompress -o sum.wpack
grep -Eq '^wrote sum\.wpack: 2 tensors, 5\.0 MiB of tensor data in a 5\.0 MiB file \(uncompressed\)$' "$T/err" && pass convert_summary_line || fail convert_summary_line "$(cat "$T/err")"
expect cast_summary "$WPACK" cast z.wpack --to f16 --only w -o sumc.wpack
grep -Eq '^wrote sumc\.wpack: 2 tensors, 1 cast to f16, [0-9.]+ [KM]iB$' "$T/err" && pass cast_summary_line || fail cast_summary_line "$(cat "$T/err")"
expect export_quiet "$WPACK" export -q "$R/splat_8m.wpack" --to tar -o q.tar
[ ! -s "$T/err" ] && pass export_quiet_silent || fail export_quiet_silent "$(cat "$T/err")"
expect convert_quiet "$WPACK" convert -q z.wpack --compress zstd -o q.wpack
[ ! -s "$T/err" ] && pass convert_quiet_silent || fail convert_quiet_silent "$(cat "$T/err")"
expect cast_quiet "$WPACK" cast -q z.wpack --to bf16 -o qc.wpack
[ ! -s "$T/err" ] && pass cast_quiet_silent || fail cast_quiet_silent "$(cat "$T/err")"

# Progress: never when stderr is not a terminal (the runs above) ...
"$WPACK" extract "$R/splat_8m.wpack" -o np 2>"$T/np.err" && "$WPACK" verify z.wpack 2>>"$T/np.err" >/dev/null
if grep -q $'\r' "$T/np.err" || grep -q '%' "$T/np.err"; then fail progress_absent_off_terminal "$(cat -v "$T/np.err")"; else pass progress_absent_off_terminal; fi
# ... and the create-style line on one (util-linux script gives a pty).
if command -v script >/dev/null 2>&1 && script -qec true /dev/null >/dev/null 2>&1; then
    for c in "extract $R/splat_8m.wpack -o pt" "export $R/splat_8m.wpack --to npz -o pt.npz" \
             "convert z.wpack --decompress -o pt.wpack" "verify z.wpack" "cast z.wpack --to bf16 -o ptc.wpack"; do
        name=progress_on_terminal_${c%% *}
        script -qec "$WPACK $c" /dev/null >"$T/pty" 2>&1
        if tr '\r' '\n' <"$T/pty" | grep -Eq '^.\[K100%  .* / .*  2/2 tensors'; then pass "$name"; else fail "$name" "$(cat -v "$T/pty" | head -c 400)"; fi
    done
    script -qec "$WPACK extract -q $R/splat_8m.wpack -o ptq" /dev/null >"$T/pty" 2>&1
    if grep -q '%' "$T/pty"; then fail progress_quiet_on_terminal "$(cat -v "$T/pty")"; else pass progress_quiet_on_terminal; fi
else
    fail progress_on_terminal "no working 'script' (util-linux) to give a pty: cannot check"
fi

# --- a tensor whose file name starts like a temporary's -------------------
# 'v.npy.tmp-99999-0123456789abcdef' is written as that name + '.npy'; the
# next extract to the directory sweeps dead temporaries, and took that file
# for one (an orphan of writer v.npy.tmp-99999-...): a file it had not
# written, deleted
mkdir -p "$T/tn" && cd "$T/tn" || exit 1
"$PY" -c "import numpy as np; np.save('v.npy.tmp-99999-0123456789abcdef.npy', np.ones(3, np.float32)); np.save('ok.npy', np.zeros(2, np.float32))" \
    || fail tmpname_inputs
expect tmpname_create "$WPACK" create -q -o "$T/tn.wpack" v.npy.tmp-99999-0123456789abcdef.npy ok.npy
expect tmpname_extract_all "$WPACK" extract -q "$T/tn.wpack" -o "$T/tn/out"
expect tmpname_extract_again "$WPACK" extract -q "$T/tn.wpack" -o "$T/tn/out" ok
[ -f "$T/tn/out/v.npy.tmp-99999-0123456789abcdef.npy" ] && pass tmpname_file_kept \
    || fail tmpname_file_kept "the second extract removed it: $(ls "$T/tn/out")"
cd "$T" || exit 1

# --- a long name cut inside a character or an escape ----------------------
# names over 200 bytes are cut: at byte 180 exactly, that split 'e9' (two
# bytes) and '%2F', leaving a file name that is not UTF-8, which create then
# refused (extract + create no longer round-tripped)
mkdir -p "$T/cut" && cd "$T/cut" || exit 1
"$PY" -c "
import numpy as np
np.save('x' * 179 + '\u00e9' * 20 + '.npy', np.ones(3, np.float32))
np.save('y' * 179 + '%' * 20 + '.npy', np.ones(2, np.float32))
" || fail cut_inputs
expect cut_create "$WPACK" create -q -o "$T/cut.wpack" .
expect cut_extract "$WPACK" extract -q "$T/cut.wpack" -o "$T/cut/out"
"$PY" -c "
import os, sys
for n in os.listdir(sys.argv[1]):
    b = os.fsencode(n)
    b.decode('utf-8')
    assert len(b) <= 201 and '%2~' not in n and not n.split('~')[0].endswith('%'), n
" "$T/cut/out" 2>"$T/err" && pass cut_names_whole || fail cut_names_whole "$(tail -c 300 "$T/err")"
expect cut_round_trip "$WPACK" create -q -o "$T/cut2.wpack" "$T/cut/out"
cd "$T" || exit 1

# --- a directory or FIFO at one of the file names ---------------------------
# refused before any file is written (it was refused when its turn came, after
# the files before it in the list had been written)
mkdir -p "$T/ft/out/b.npy" && mkfifo "$T/ft/out/d.npy" || fail ft_setup
cd "$T/ft" || exit 1
"$PY" -c "
import numpy as np
for n in 'abcde':
    np.save(n + '.npy', np.ones(2, np.float32))
" || fail ft_inputs
expect ft_create "$WPACK" create -q -o "$T/ft.wpack" a.npy b.npy c.npy d.npy e.npy
expect_fail ft_extract_refused "out/b\.npy: a directory, not a regular file.*nothing extracted \[WPACK_E_FILE_TYPE\]" \
    "$WPACK" extract -q "$T/ft.wpack" -o "$T/ft/out"
rmdir "$T/ft/out/b.npy"
expect_fail ft_extract_fifo_refused "out/d\.npy: a FIFO.*\[WPACK_E_FILE_TYPE\]" \
    "$WPACK" extract -q "$T/ft.wpack" -o "$T/ft/out"
[ "$(ls "$T/ft/out")" = d.npy ] && pass ft_nothing_written || fail ft_nothing_written "$(ls "$T/ft/out")"
cd "$T" || exit 1

# A failure midway leaves the files before it in place (each whole): the
# run said only what failed, not that files were written (and replaced)
"$PY" -c "
import numpy as np
np.save('$T/a0.npy', np.ones(4, np.float32)); np.save('$T/a1.npy', np.ones(4, np.float32))
np.save('$T/zbig.npy', np.ones(1 << 18, np.float32))" || fail midway_inputs
expect midway_archive "$WPACK" create -q -o "$T/mid.wpack" "$T/a0.npy" "$T/a1.npy" "$T/zbig.npy"
expect_fail extract_midway_says_what_is_left \
    "^wpack: extract: 2 of 3 tensors were written to .*/mid before the failure" \
    bash -c 'ulimit -f 256 && exec "$@"' sh "$WPACK" extract -q "$T/mid.wpack" -o "$T/mid"
[ "$(ls "$T/mid" 2>/dev/null | tr '\n' ' ')" = "a0.npy a1.npy " ] && pass extract_midway_files ||
    fail extract_midway_files "$(ls "$T/mid" 2>&1)"

# A zero-size tensor whose other dims overflow 64 bits (2^62 x 0 f32, taken
# from a safetensors file: 0 bytes) has no .npy form numpy or wpack reads
# back: extract and export to npz refuse it by name, before writing anything
# (they wrote a .npy that `create` then refused)
"$PY" - "$T/zero.safetensors" <<'EOF'
import json, struct, sys
h = json.dumps({"big": {"dtype": "F32", "shape": [4611686018427387904, 0],
                        "data_offsets": [0, 0]},
                "ok": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"\0\0\x80\x3f")
EOF
expect zero_overflow_create "$WPACK" create -q -o "$T/zero.wpack" "$T/zero.safetensors"
expect_fail zero_overflow_extract "tensor 'big': cannot make a .npy header: its shape has non-zero dims whose product overflows.*nothing extracted \[WPACK_E_UNSUPPORTED\]" \
    "$WPACK" extract -q "$T/zero.wpack" -o "$T/zx"
[ -z "$(ls "$T/zx" 2>/dev/null)" ] && pass zero_overflow_nothing_extracted ||
    fail zero_overflow_nothing_extracted "$(ls "$T/zx")"
expect_fail zero_overflow_export_npz "tensor 'big': cannot make a .npy header: its shape has non-zero dims" \
    "$WPACK" export -q "$T/zero.wpack" --to npz -o "$T/z.npz"
[ ! -e "$T/z.npz" ] && pass zero_overflow_no_npz || fail zero_overflow_no_npz
expect zero_overflow_extract_other "$WPACK" extract -q "$T/zero.wpack" -o "$T/zo" ok
finish
