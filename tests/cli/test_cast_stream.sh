#!/bin/bash
# test_cast_stream.sh - `wpack cast` streams: a tensor is read and cast in
# blocks, so memory does not grow with its size; and one rounding from the
# exact value (f64 inputs are not rounded to f32 first), checked against
# numpy's own float64 -> float16 conversion.
. "$(dirname "$0")/lib.sh"

# 1. f64 values where rounding through f32 first gives another answer.
"$PY" - "$T" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
x = np.array([1 + 2**-11 + 2**-40,      # f16: above the tie -> 0x3c01 (via f32: 0x3c00)
              1 + 2**-8 + 2**-30,       # bf16: above the tie -> 0x3f81 (via f32: 0x3f80)
              -(1 + 3 * 2**-11),        # exact tie: to even
              65519.999, 1e-8, -0.0, 3.0e38], dtype=np.float64)
np.save(f"{d}/x.npy", np.stack([x, x]))
np.save(f"{d}/x_f16.npy", np.stack([x, x]).astype(np.float16))   # numpy rounds f64 -> f16 once
EOF
"$WPACK" create -q -o "$T/x.wpack" "$T/x.npy" --no-stats
expect cast_f64_to_f16 "$WPACK" cast "$T/x.wpack" --to f16 -o "$T/x16.wpack" -q
expect extract_f16 "$WPACK" extract "$T/x16.wpack" -o "$T/x16" -q
if cmp -s <(tail -c 28 "$T/x16/x.npy") <(tail -c 28 "$T/x_f16.npy"); then
    pass f64_to_f16_equals_numpy
else
    fail f64_to_f16_equals_numpy "$(od -An -tx2 "$T/x16/x.npy" | tail -2)"
fi
expect cast_f64_to_bf16 "$WPACK" cast "$T/x.wpack" --to bf16 -o "$T/xb.wpack" -q
expect extract_bf16 "$WPACK" extract "$T/xb.wpack" -o "$T/xb" -q
got=$("$PY" -c "import numpy as np, sys; a = np.load(sys.argv[1]).view(np.uint16); print('%04x' % a[0, 1])" "$T/xb/x.npy" 2>&1)
[ "$got" = 3f81 ] && pass f64_to_bf16_one_rounding || fail f64_to_bf16_one_rounding "got $got, want 3f81"

# 2. A 256 MiB f32 tensor cast under an address-space limit of the mapped
# archive plus 100 MiB: reading it whole (as cast once did) needs 384 MiB more.
"$PY" -c "
import numpy as np, sys
np.save(sys.argv[1], np.random.default_rng(7).standard_normal((8192, 8192), dtype=np.float32))
" "$T/big.npy"
"$WPACK" create -q --no-stats -o "$T/big.wpack" "$T/big.npy"
size=$(stat -c %s "$T/big.wpack")
if [ -n "${SAN:-}" ]; then
    echo "skip cast_bounded_memory_bf16, cast_bounded_memory_int8: ASan reserves terabytes of address space, so ulimit -v cannot measure (run in the plain build)"
else
    limit=$(((size + 100 * 1048576) / 1024))
    for to in bf16 int8; do
        if (ulimit -v $limit && "$WPACK" cast "$T/big.wpack" --to $to --only '*' -o "$T/big_$to.wpack" -q) 2>"$T/err"; then
            pass "cast_bounded_memory_$to"
        else
            fail "cast_bounded_memory_$to" "$(cat "$T/err")"
        fi
    done
    # the streamed bf16 equals numpy's round-to-nearest-even of the same values
    "$WPACK" extract -q "$T/big_bf16.wpack" -o "$T/bigx" 2>"$T/err"
    out=$("$PY" - "$T/big.npy" "$T/bigx/big.npy" <<'EOF' 2>&1
import sys, numpy as np
u = np.load(sys.argv[1]).view(np.uint32).astype(np.uint64)
want = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
got = np.load(sys.argv[2]).view(np.uint16)
print("same" if np.array_equal(want, got) else "differ at %d elements" % int((want != got).sum()))
EOF
)
    [ "$out" = same ] && pass cast_streamed_bf16_equals_numpy || fail cast_streamed_bf16_equals_numpy "$out"
fi

# 3. A cast that overflows is never silent: finite values beyond the target's
# range become +-inf, and both `create --cast` and `wpack cast` say how many,
# per tensor. The counts are numpy's (f16) and torch's (bf16) for the same
# values: a range of magnitudes with the rounding boundaries themselves.
"$PY" - "$T" <<'EOF' || fail make_overflow_inputs
import sys, numpy as np, torch
d = sys.argv[1]
r = np.random.default_rng(5)
edges = [65504.0, 65519.99, 65520.0, 65536.0, 3.3895e38, 3.3961e38, 3.3962e38, 3.4e38]
for dt in (np.float64, np.float32):
    a = np.concatenate([r.standard_normal(3000) * 10.0 ** r.integers(0, 39, 3000),
                        edges, [-e for e in edges], [np.inf, -np.inf, np.nan]]).astype(dt)
    name = "o64" if dt == np.float64 else "o32"
    np.save(f"{d}/{name}.npy", a)
    with np.errstate(over="ignore"):
        f16 = int((np.isfinite(a) & np.isinf(a.astype(np.float16))).sum())
    bf16 = int((np.isfinite(a) & np.isinf(torch.from_numpy(a).to(torch.bfloat16).float().numpy())).sum())
    open(f"{d}/{name}.want", "w").write(f"{f16} {bf16} {a.size}\n")
EOF
for name in o32 o64; do
    read -r w16 wbf n <"$T/$name.want"
    for to in f16 bf16; do
        want=$([ $to = f16 ] && echo "$w16" || echo "$wbf")
        pat="$name.npy: tensor '$name': $want of $n values are beyond $to's range .* and became \\+-inf"
        "$WPACK" create -q --cast $to -o "$T/ov.wpack" "$T/$name.npy" 2>"$T/err" &&
            grep -Eq "^wpack: warning: .*$pat" "$T/err" && pass "create_cast_${name}_${to}_warns" ||
            fail "create_cast_${name}_${to}_warns" "want $want: $(cat "$T/err")"
        "$WPACK" create -q -o "$T/ov0.wpack" "$T/$name.npy" --no-stats 2>/dev/null
        "$WPACK" cast -q --to $to --only '*' -o "$T/ov1.wpack" "$T/ov0.wpack" 2>"$T/err" &&
            grep -Eq "^wpack: warning: tensor '$name': $want of $n values are beyond $to" "$T/err" &&
            pass "cast_${name}_${to}_warns" || fail "cast_${name}_${to}_warns" "want $want: $(cat "$T/err")"
    done
done
# no overflow, no warning
"$WPACK" create -q --cast bf16 -o "$T/ok.wpack" "$T/x.npy" 2>"$T/err"
[ ! -s "$T/err" ] && pass cast_in_range_quiet || fail cast_in_range_quiet "$(cat "$T/err")"
finish
