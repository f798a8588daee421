#!/bin/bash
# test_npy_cases.sh - every .npy flavour numpy writes (dtypes, byte orders,
# C/Fortran order, 0-d, empty, rank 1..8, versions 1.0/2.0/3.0) packed by
# `wpack create` and extracted by `wpack extract` must come back with the
# same dtype, shape and C-order little-endian bytes; each malformed or
# unsupported file must fail with its own code and leave no archive.
. "$(dirname "$0")/lib.sh"

$PY "$TESTS_DIR/cli/make_npy_cases.py" "$T/cases" >/dev/null || { fail generate_cases; finish; exit 1; }
mv "$T/cases/bad" "$T/bad"
mv "$T/cases/bad.json" "$T/bad.json"
mv "$T/cases/manifest.json" "$T/manifest.json"

expect pack_all_cases "$WPACK" create -q -o "$T/all.wpack" "$T/cases"
expect verify_all_cases "$WPACK" verify "$T/all.wpack"
"$WPACK" inspect --json "$T/all.wpack" >"$T/all.json" 2>/dev/null
expect extract_all_cases "$WPACK" extract -q -o "$T/xt" "$T/all.wpack"

$PY - "$T" <<'PYEOF' >"$T/compare.out" 2>&1
import hashlib, json, sys
import numpy as np
t = sys.argv[1]
manifest = json.load(open(f"{t}/manifest.json"))
archive = {x["name"]: x for x in json.load(open(f"{t}/all.json"))["tensors"]}
bad = 0
for rel, want in sorted(manifest.items()):
    name = rel[:-4].replace("/", ".")
    problems = []
    entry = archive.get(name)
    if entry is None:
        problems.append("missing from the archive")
    else:
        if entry["dtype"] != want["dtype"]:
            problems.append(f"archive dtype {entry['dtype']} != {want['dtype']}")
        if entry["shape"] != want["shape"]:
            problems.append(f"archive shape {entry['shape']} != {want['shape']}")
        a = np.load(f"{t}/xt/{name}.npy")
        if list(a.shape) != want["shape"]:
            problems.append(f"extracted shape {a.shape}")
        if not a.flags["C_CONTIGUOUS"] or a.dtype.byteorder == ">":
            problems.append("extracted array is not C-order little-endian")
        if hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() != want["sha256"]:
            problems.append("extracted bytes differ")
    print(("FAIL " if problems else "ok ") + "case_" + name + (": " + "; ".join(problems) if problems else ""))
PYEOF
while read -r line; do
    case "$line" in
    ok\ *) pass "${line#ok }" ;;
    FAIL\ *) n=${line#FAIL }; fail "${n%%:*}" "${n#*: }" ;;
    *) fail compare_script "$line" ;;
    esac
done <"$T/compare.out"

# malformed and unsupported inputs: their own code, their own message, no output
while IFS=$'\t' read -r rel code msg; do
    out="$T/bad-$(basename "$rel" .npy).wpack"
    expect_fail "bad_${rel//\//_}" "$msg.*\\[$code\\]" "$WPACK" create -q -o "$out" "$T/$rel"
    [ ! -e "$out" ] && pass "bad_${rel//\//_}_no_output" || fail "bad_${rel//\//_}_no_output"
done < <($PY -c "
import json,sys
for k,v in sorted(json.load(open('$T/bad.json')).items()): print(k, v['code'], v['message'], sep='\t')")
finish
