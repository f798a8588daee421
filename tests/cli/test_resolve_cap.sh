#!/bin/bash
# test_resolve_cap.sh - `resolve --emit inline` cannot turn kilobytes into
# terabytes: a splat entry becomes the splat dense<"0xFILL"> (a few bytes,
# no blob; mlir-opt-19 takes it), and the output's size is counted before
# anything is written and refused above the cap of extract and export (the
# larger of 1 GiB and 1000 x the inputs, --max-output SIZE), with
# WPACK_E_TOO_LARGE and nothing left behind. Uses the archives of
# tests/hostile/round2 (a 680-byte 4 EiB splat, 170 KB of zstd for 3 GiB).
. "$(dirname "$0")/lib.sh"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}
R="$TESTS_DIR/hostile/round2"
# A regression must fail here, not fill the disk: no file above 64 MiB.
ulimit -f 65536
cd "$T" || exit 1

# global NAME TYPE...: a module of extern globals NAME : TYPE.
module() {
    printf 'module {\n'
    while [ $# -ge 2 ]; do
        printf '  ml_program.global private @%s(#ml_program.extern : %s) : %s\n' "$1" "$2" "$2"
        shift 2
    done
    printf '}\n'
}

# --- splat entries are inlined as splats ------------------------------------
module huge 'tensor<2147483648x536870912xf32>' >huge.mlir
expect inline_splat_huge timeout 20 "$WPACK" resolve -q "$R/splat_huge.wpack" huge.mlir -o huge.out.mlir --emit inline
grep -q '@huge(dense<"0x0000C03F"> : tensor<2147483648x536870912xf32>)' huge.out.mlir &&
    ! grep -q dialect_resources huge.out.mlir && [ "$(wc -c <huge.out.mlir)" -lt 300 ] &&
    pass inline_splat_is_dense_splat || fail inline_splat_is_dense_splat "$(head -c 400 huge.out.mlir)"
"$MLIR_OPT" huge.out.mlir 2>&1 | grep -q '@huge(dense<1.500000e+00> : tensor<2147483648x536870912xf32>)' &&
    pass inline_splat_mlir_opt || fail inline_splat_mlir_opt "$("$MLIR_OPT" huge.out.mlir 2>&1 | head -c 300)"

# a splat beside a data entry: the splat inline, the data in a blob
module big 'tensor<2048x1024xf32>' small 'tensor<4xf32>' >mixed.mlir
expect inline_splat_mixed "$WPACK" resolve -q "$R/splat_8m.wpack" mixed.mlir -o mixed.out.mlir --emit inline
grep -q '@big(dense<"0x0000C03F"> : tensor<2048x1024xf32>)' mixed.out.mlir &&
    grep -q '@small(dense_resource<small> : tensor<4xf32>)' mixed.out.mlir &&
    [ "$(grep -c '"0x' mixed.out.mlir)" = 2 ] && "$MLIR_OPT" mixed.out.mlir >/dev/null 2>&1 &&
    pass inline_splat_and_blob || fail inline_splat_and_blob "$(head -c 600 mixed.out.mlir)"

# i1 (dense<true>), f16, i64 fills and an alias of a splat, checked by mlir-opt
"$PY" -c "
import torch
t = torch.tensor([True]).expand(4, 4)
torch.save({'flag': t, 'flag2': t, 'h': torch.tensor([2.5], dtype=torch.float16).expand(3, 5),
            'i': torch.tensor([-3], dtype=torch.int64).expand(7)}, 'k.pt')" 2>/dev/null &&
    "$WPACK" create -q -o k.wpack k.pt 2>/dev/null
if [ -f k.wpack ]; then
    module flag 'tensor<4x4xi1>' flag2 'tensor<4x4xi1>' h 'tensor<3x5xf16>' i 'tensor<7xi64>' >k.mlir
    expect inline_splat_kinds "$WPACK" resolve -q k.wpack k.mlir -o k.out.mlir --emit inline
    "$MLIR_OPT" k.out.mlir >k.printed 2>&1
    grep -q '@flag(dense<true> : tensor<4x4xi1>)' k.printed &&
        grep -q '@flag2(dense<true> : tensor<4x4xi1>)' k.printed &&
        grep -q '@h(dense<2.500000e+00> : tensor<3x5xf16>)' k.printed &&
        grep -q '@i(dense<-3> : tensor<7xi64>)' k.printed &&
        pass inline_splat_kinds_printed || fail inline_splat_kinds_printed "$(head -c 600 k.printed)"
    # the output resolves to itself
    "$WPACK" resolve -q k.wpack k.out.mlir -o k.again.mlir --emit inline --allow-missing 2>/dev/null &&
        cmp -s k.out.mlir k.again.mlir && pass inline_splat_idempotent || fail inline_splat_idempotent
else
    fail inline_splat_kinds "could not make the torch splat archive"
fi

# --- the output cap -----------------------------------------------------------
module huge 'tensor<786432x1024xf32>' >z.mlir
expect_fail inline_zstd_huge_refused \
    'z.mlir: the output would be 6442451145 bytes, above the output cap of 1073741824 bytes.*nothing written \[WPACK_E_TOO_LARGE\]' \
    timeout 20 "$WPACK" resolve "$R/zstd_huge.wpack" z.mlir -o z.out.mlir --emit inline
grep -q 'default cap is 1.0 GiB (the larger of 1 GiB and 1000 x the input, .*raise it with --max-output SIZE' err &&
    pass inline_cap_says_how || fail inline_cap_says_how "$(cat err)"
nothing_at inline_zstd_huge_nothing_written z.out.mlir
expect_fail inline_max_output_lowers 'above the output cap of 100 bytes.*\[WPACK_E_TOO_LARGE\]' \
    "$WPACK" resolve "$R/splat_8m.wpack" mixed.mlir -o m2.mlir --emit inline --max-output 100
grep -q 'the cap is --max-output 100 B' err && pass inline_max_output_named || fail inline_max_output_named "$(cat err)"
nothing_at inline_max_output_nothing_written m2.mlir
# the count is exact: a cap of the output's size passes, one byte less fails
n=$(wc -c <mixed.out.mlir)
expect inline_cap_exact "$WPACK" resolve -q "$R/splat_8m.wpack" mixed.mlir -o m3.mlir --emit inline --max-output "$n"
cmp -s mixed.out.mlir m3.mlir && pass inline_cap_same_output || fail inline_cap_same_output
expect_fail inline_cap_exact_minus_one "would be $n bytes, above the output cap of $((n - 1)) bytes" \
    "$WPACK" resolve "$R/splat_8m.wpack" mixed.mlir -o m4.mlir --emit inline --max-output "$((n - 1))"
# the other modes are counted too
expect_fail uri_cap "above the output cap of 10 bytes.*\[WPACK_E_TOO_LARGE\]" \
    "$WPACK" resolve "$R/splat_8m.wpack" mixed.mlir -o m5.mlir --max-output 10
expect_fail max_output_bad 'max-output 0: want a size above 0' \
    "$WPACK" resolve "$R/splat_8m.wpack" mixed.mlir -o m6.mlir --max-output 0
"$WPACK" resolve --help | grep -q -- '--max-output SIZE' && pass help_max_output || fail help_max_output

finish
