#!/bin/bash
# test_resolve_copy.sh - resolve and externalize copy long unchanged spans of
# IN.mlir (1 MiB and more) file to file with copy_file_range, only where the
# span sits at the same offset in a 4 KiB page in both files (the page-line
# rule, format/write_all.c's wpk_pages_line_up); elsewhere they write it from
# the mapping. Both ways give the same bytes: a span of 2 MiB of comments put
# before (on the line) or after (off it) a module gives that module's own
# output with the same span before or after it. strace checks which syscall
# ran (a visible skip without strace).
. "$(dirname "$0")/lib.sh"
MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt-19 || echo /usr/lib/llvm-19/bin/mlir-opt)}

"$PY" - "$T" <<'PY'
import numpy as np, sys
d = sys.argv[1]
np.save(f"{d}/w.npy", np.arange(6, dtype=np.float32))
line = "// " + "x" * 60 + "\n"             # 64 bytes
with open(f"{d}/pad.txt", "w") as f:
    f.write(line * (2 << 20 >> 6))           # 2 MiB, a page multiple
with open(f"{d}/m.mlir", "w") as f:
    f.write("module {\n"
            "  ml_program.global private @w(#ml_program.extern : tensor<6xf32>) : tensor<6xf32>\n"
            "}\n")
hexs = np.arange(64, dtype=np.float32).tobytes().hex().upper()
with open(f"{d}/inline.mlir", "w") as f:
    f.write("module {\n"
            f"  ml_program.global private @big(dense<\"0x{hexs}\"> : tensor<64xf32>) : tensor<64xf32>\n"
            "}\n")
PY
expect create_archive "$WPACK" create -q -o "$T/a.wpack" "$T/w.npy"
cat "$T/pad.txt" "$T/m.mlir" >"$T/before.mlir"
cat "$T/m.mlir" "$T/pad.txt" >"$T/after.mlir"
cat "$T/pad.txt" "$T/inline.mlir" >"$T/ibefore.mlir"
cat "$T/inline.mlir" "$T/pad.txt" >"$T/iafter.mlir"

expect resolve_plain "$WPACK" resolve -q "$T/a.wpack" "$T/m.mlir" -o "$T/m.out" --emit uri
# the archive's URI names its index checksum: equal in every output
copy_range_used_by resolve_span_on_line_copied yes \
    "$WPACK" resolve -q "$T/a.wpack" "$T/before.mlir" -o "$T/before.out" --emit uri
copy_range_used_by resolve_span_off_line_written no \
    "$WPACK" resolve -q "$T/a.wpack" "$T/after.mlir" -o "$T/after.out" --emit uri
cat "$T/pad.txt" "$T/m.out" | cmp -s - "$T/before.out" && pass resolve_copied_bytes_same ||
    fail resolve_copied_bytes_same "pad + resolve(m) differs from resolve(pad + m)"
cat "$T/m.out" "$T/pad.txt" | cmp -s - "$T/after.out" && pass resolve_written_bytes_same ||
    fail resolve_written_bytes_same "resolve(m) + pad differs from resolve(m + pad)"
"$MLIR_OPT" "$T/before.out" >/dev/null 2>"$T/err" && pass resolve_copied_parses ||
    fail resolve_copied_parses "$(head -c 300 "$T/err")"

# externalize: the inline weight is replaced by a shorter reference, so the
# span after it is off the line; the span before it is on it. The archive
# each run writes is the same (same tensor, same name), and so is its URI.
expect externalize_plain "$WPACK" externalize -q "$T/inline.mlir" -o "$T/i.out" --archive "$T/i.wpack"
copy_range_used_by externalize_span_on_line_copied yes \
    "$WPACK" externalize -q "$T/ibefore.mlir" -o "$T/ibefore.out" --archive "$T/ib.wpack"
copy_range_used_by externalize_span_off_line_written no \
    "$WPACK" externalize -q "$T/iafter.mlir" -o "$T/iafter.out" --archive "$T/ia.wpack"
cat "$T/pad.txt" "$T/i.out" | cmp -s - "$T/ibefore.out" && pass externalize_copied_bytes_same ||
    fail externalize_copied_bytes_same "pad + externalize(m) differs from externalize(pad + m)"
cat "$T/i.out" "$T/pad.txt" | cmp -s - "$T/iafter.out" && pass externalize_written_bytes_same ||
    fail externalize_written_bytes_same "externalize(m) + pad differs from externalize(m + pad)"
grep -q 'dense<"0x' "$T/ibefore.out" && fail externalize_moved "the weight is still inline" ||
    pass externalize_moved
finish
