#!/usr/bin/env python3
"""literal_parity.py WPACK MLIR_OPT DIR - dense literals, each run through
both mlir-opt-19 and `wpack externalize` on the same file: both accept or
both refuse; wpack's refusal names line:col; when both accept, the archive
holds the bytes mlir-opt read (its output printed in hex or as a splat).
Prints one "ok NAME" / "FAIL NAME: why" line per case."""
import os
import re
import subprocess
import sys

import numpy as np

WPACK, MLIR_OPT, DIR = sys.argv[1:4]
NP = {"f16": "<f2", "f32": "<f4", "f64": "<f8", "i8": "<i1", "si8": "<i1", "ui8": "<u1",
      "i32": "<i4", "si32": "<i4", "ui32": "<u4", "i64": "<i8", "ui64": "<u8", "i1": "?"}

CASES = [
    # floats: what mlir-opt-19 reads and what it refuses
    ("f32", "1.0"), ("f32", "1"), ("f32", "-1"), ("f32", "nan"), ("f32", "inf"),
    ("f32", "-inf"), ("f32", "1e5"), ("f32", "1.e5"), ("f32", ".5"), ("f32", "5."),
    ("f32", "+1.0"), ("f32", "- 1.0"), ("f32", "-0x1"), ("f32", "0X7FC00000"),
    ("f32", "0x7FC00000"), ("f32", "0x7fc00000"), ("f32", "0x100000000"), ("f32", "00.5"),
    ("f32", "1.5e"), ("f32", "1_0"), ("f32", "1.0e400"), ("f32", "1.0e-400"),
    # decimal -> f64 -> f32 (MLIR's double rounding), not decimal -> f32 directly
    ("f32", "1.0000000596046447755"), ("f32", "3.4028235677973366e38"),
    ("f32", "[1, 2]"), ("f32", "[1.0 2.0]"), ("f32", "[1.0,,2.0]"), ("f32", "[,1.0, 2.0]"),
    ("f32", "[1.0, 2.0,]"), ("f32", "[1.0, - 2.0]"), ("f32", "1.0 2.0"),
    ("f32", "[1.0, 2.0] 3.0"), ("f32", '"0x0000803F" 1'), ("f32", '"0X0000803F0000803F"'),
    ("f32", "[-1.0, 2.0e+1 // c\n]"), ("f32", "[1.0, 0x3F800000]"), ("f32", "[1.0, nan]"),
    ("f16", "65520.0"), ("f16", "1"), ("f16", "0x7E00"), ("f16", "0x10000"), ("f16", "nan"),
    ("f64", "0x7FF8000000000000"), ("f64", "4.9e-324"), ("f64", "1"), ("f64", "inf"),
    # integers
    ("i8", "-0"), ("i8", "+1"), ("i8", "0X1"), ("i8", "- 1"), ("i8", "0x80"), ("i8", "-0x80"),
    ("i8", "-0x81"), ("i8", "255"), ("i8", "256"), ("i8", "1.0"), ("i8", "007"),
    ("si8", "128"), ("si8", "-128"), ("ui8", "-0"), ("ui8", "255"), ("ui8", "- 1"),
    ("i64", "18446744073709551615"), ("i64", "18446744073709551616"),
    ("ui64", "0xFFFFFFFFFFFFFFFF"), ("i64", "-9223372036854775809"),
    ("i1", "-1"), ("i1", "0x1"), ("i1", "-0"), ("i1", "2"), ("i1", "00"), ("i1", "true"),
    ("i1", "- 1"), ("i1", "-true"), ("i1", "[true, 0]"),
]


def mlir_bytes(elem, printed, n):
    """The element bytes of mlir-opt's printed value of a tensor<nxELEM>."""
    m = re.search(r'dense<("0x[0-9A-F]*"|[^>]*)>', printed)
    v = m.group(1)
    if v.startswith('"0x'):
        raw = bytes.fromhex(v[3:-1])
        if elem == "i1":  # bit-packed; one byte of 0x00/0xFF is a splat
            if len(raw) == 1 and raw[0] in (0, 255) and n > 8:
                return bytes([raw[0] & 1]) * n
            return bytes((raw[i // 8] >> (i % 8)) & 1 for i in range(n))
        return raw
    if elem == "i1":
        return bytes([v == "true"]) * n
    if v.startswith("0x"):
        w = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}[elem]
        return int(v, 16).to_bytes(w, "little") * n
    dt = np.dtype(NP[elem])
    x = np.array([int(v) if dt.kind in "iu" else float(v)], dtype=dt)
    return x.tobytes() * n


def main():
    bad = 0
    for k, (elem, lit) in enumerate(CASES):
        name = f"{elem} {lit!r}"
        src = os.path.join(DIR, f"lit{k}.mlir")
        with open(src, "w") as f:
            f.write("module {\n  ml_program.global private @w(dense<%s> : tensor<2x%s>) : tensor<2x%s>\n}\n"
                    % (lit, elem, elem))
        m = subprocess.run([MLIR_OPT, "--mlir-print-elementsattrs-with-hex-if-larger=0", src],
                           capture_output=True, text=True)
        out, arch = os.path.join(DIR, f"lit{k}.out"), os.path.join(DIR, f"lit{k}.wpack")
        w = subprocess.run([WPACK, "externalize", "-q", src, "-o", out, "--archive", arch,
                            "--min-bytes", "0"], capture_output=True, text=True)
        why = None
        if (m.returncode == 0) != (w.returncode == 0):
            why = "mlir-opt %s, wpack %s: %s" % (
                "accepts" if m.returncode == 0 else "refuses",
                "accepts" if w.returncode == 0 else "refuses",
                (m.stderr or w.stderr).strip().splitlines()[0] if (m.stderr or w.stderr) else "")
        elif w.returncode != 0:
            if not re.search(re.escape(src) + r":\d+:\d+: global @w: ", w.stderr):
                why = "the refusal names no line:col: " + w.stderr.strip()
        else:
            x = os.path.join(DIR, f"x{k}")
            subprocess.run([WPACK, "extract", arch, "-o", x], capture_output=True, check=True)
            got = np.load(os.path.join(x, "w.npy")).tobytes()
            want = mlir_bytes(elem, m.stdout, 2)
            if got != want:
                why = f"archive {got.hex()} but mlir-opt read {want.hex()} ({m.stdout.strip()})"
        if why:
            bad += 1
            print(f"FAIL {name}: {why}")
        else:
            print(f"ok {name}")
    return 1 if bad else 0


sys.exit(main())
