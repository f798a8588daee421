#!/bin/sh
# demo.sh WPACK - pack the bundled example MLP, inspect it, verify it, and
# check that extracting gives back the exact bytes (what `make demo` runs).
set -e
WPACK=${1:-build/wpack}
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/wpack-demo.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "== wpack create: examples/mlp/*.npy -> $out/mlp.wpack"
"$WPACK" create -o "$out/mlp.wpack" --histogram 16 --meta model.name=mlp-64-32-10 \
    --meta model.source=examples/mlp examples/mlp
echo
echo "== wpack inspect"
"$WPACK" inspect "$out/mlp.wpack"
echo
echo "== wpack inspect (module prefix '0')"
"$WPACK" inspect "$out/mlp.wpack" 0 | tail -n +4
echo
echo "== wpack verify"
"$WPACK" verify "$out/mlp.wpack"
echo
echo "== wpack extract, then compare with the inputs"
"$WPACK" extract "$out/mlp.wpack" -o "$out/extracted"
for f in examples/mlp/*.npy; do
    cmp "$f" "$out/extracted/$(basename "$f")" >/dev/null 2>&1 && same=identical || same=differs
    # Headers may differ in padding only; the array bytes are what matter.
    /usr/bin/python3 -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); sys.exit(0 if a.dtype==b.dtype and a.shape==b.shape and a.tobytes()==b.tobytes() else 1)" \
        "$f" "$out/extracted/$(basename "$f")" && echo "  $(basename "$f"): same dtype, shape and bytes" \
        || { echo "  $(basename "$f"): MISMATCH"; exit 1; }
done
echo
echo "demo OK"
