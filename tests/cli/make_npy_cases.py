#!/usr/bin/python3
"""Write a deterministic set of .npy files for the CLI tests of `wpack pack` /
`wpack extract`.

    /usr/bin/python3 tests/cli/make_npy_cases.py OUTDIR

OUTDIR gets (about 1.3 MB in all):
  dtypes/   every numeric dtype, little- and big-endian, C and Fortran order
  ranks/    rank 1..8, C and Fortran order
  scalar/   0-d arrays
  empty/    arrays with a zero dim
  versions/ npy format 1.0, 2.0 and 3.0
  special/  non-finite floats, extreme integers
  large/    a few bigger Fortran / big-endian arrays
  raw/      bf16 and f8 arrays as wpack extract writes them: '<u2' / '|u1'
            with a "# wpack dtype NAME (raw bits)" comment after the dict
  enc/layers/0/w.npy ...  a nested module tree
  bad/      files wpack must reject (not in the manifest)

manifest.json maps each good file's path (relative, '/'-separated) to
  {"dtype": wpack dtype name, "shape": [...], "sha256": of the C-order
   little-endian bytes, "descr": as stored, "fortran_order": bool,
   "version": "1.0"}
bad.json maps each bad file to {"code": the expected WPACK_E_* name,
  "message": a substring the error message should contain}.

Needs numpy (Debian's python3-numpy; written against 1.24).
"""
import hashlib
import io
import json
import os
import sys

import numpy as np
from numpy.lib import format as npformat

WPACK_NAME = {
    "f8": "f64", "f4": "f32", "f2": "f16",
    "i8": "i64", "i4": "i32", "i2": "i16", "i1": "i8",
    "u8": "u64", "u4": "u32", "u2": "u16", "u1": "u8",
    "b1": "bool",
}
MULTI_BYTE = ["f8", "f4", "f2", "i8", "i4", "i2", "u8", "u4", "u2"]
ONE_BYTE = ["i1", "u1", "b1"]

rng = np.random.default_rng(20240611)
out_dir = None
manifest = {}
bad = {}


def values(code, shape):
    """Deterministic sample values of numpy type code ('f4', 'b1', ...)."""
    kind = code[0]
    if kind == "f":
        return np.asarray(rng.standard_normal(shape)).astype("<" + code)
    if kind == "b":
        return np.asarray(rng.integers(0, 2, size=shape)).astype(bool)
    info = np.iinfo("<" + code)
    return np.asarray(rng.integers(info.min, info.max, size=shape, dtype="<" + code,
                                   endpoint=True))


def le_bytes(arr):
    """C-order little-endian bytes: what the archive stores for arr."""
    a = np.ascontiguousarray(arr)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes(order="C")


def path_of(rel):
    p = os.path.join(out_dir, *rel.split("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


def header_of(data):
    f = io.BytesIO(data)
    version = npformat.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = npformat.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = npformat.read_array_header_2_0(f)
    return version, fortran, dtype.str


def add(rel, arr, version=None, wpack_dtype=None):
    """Write arr (its memory order decides fortran_order) and record it."""
    buf = io.BytesIO()
    npformat.write_array(buf, arr, version=version, allow_pickle=False)
    data = buf.getvalue()
    with open(path_of(rel), "wb") as f:
        f.write(data)
    ver, fortran, descr = header_of(data)
    code = arr.dtype.str[1:]
    manifest[rel] = {
        "dtype": wpack_dtype or WPACK_NAME[code],
        "shape": list(arr.shape),
        "sha256": hashlib.sha256(le_bytes(arr)).hexdigest(),
        "descr": descr,
        "fortran_order": bool(fortran),
        "version": "%d.%d" % ver,
    }


def order(arr, fortran):
    return np.asfortranarray(arr) if fortran else np.ascontiguousarray(arr)


def endian(arr, big):
    return arr.astype(arr.dtype.newbyteorder(">" if big else "<"))


def raw_npy(descr, shape, payload, comment=""):
    """A v1.0 .npy image built by hand, laid out as numpy lays it out."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }%s" % (descr, dims, comment)
    pad = -(10 + len(text) + 1) % 64
    header = (text + " " * pad + "\n").encode("latin-1")
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload


def add_raw(rel, wpack_dtype, descr, shape, payload):
    """bf16 / f8 as wpack extract writes them (numpy sees the raw uints)."""
    data = raw_npy(descr, shape, payload, "  # wpack dtype %s (raw bits)" % wpack_dtype)
    with open(path_of(rel), "wb") as f:
        f.write(data)
    manifest[rel] = {
        "dtype": wpack_dtype,
        "shape": list(shape),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "descr": descr,
        "fortran_order": False,
        "version": "1.0",
    }


def add_bad(rel, data, code, message):
    with open(path_of(rel), "wb") as f:
        f.write(data)
    bad[rel] = {"code": code, "message": message}


def good_cases():
    # Every dtype, both byte orders (1-byte types have none), both orders.
    for code in MULTI_BYTE:
        for big in (False, True):
            for fortran in (False, True):
                arr = order(endian(values(code, (3, 4, 5)), big), fortran)
                add("dtypes/%s_%s_%s.npy" % (code, "be" if big else "le", "f" if fortran else "c"),
                    arr)
    for code in ONE_BYTE:
        for fortran in (False, True):
            arr = order(values(code, (3, 4, 5)), fortran)
            add("dtypes/%s_%s.npy" % (code, "f" if fortran else "c"), arr)

    # Rank 1..8; Fortran order only differs from rank 2 on.
    dims = [2, 3, 1, 4, 2, 1, 3, 2]
    for r in range(1, 9):
        add("ranks/r%d_c.npy" % r, values("f4", tuple(dims[:r])))
        if r >= 2:
            add("ranks/r%d_f_be.npy" % r, order(endian(values("i4", tuple(dims[:r])), True), True))

    add("scalar/f8.npy", values("f8", ()))
    add("scalar/i4_be.npy", endian(values("i4", ()), True))
    add("scalar/bool.npy", values("b1", ()))

    add("empty/f4_3x0x2.npy", values("f4", (3, 0, 2)))
    add("empty/i8_0.npy", values("i8", (0,)))
    add("empty/u1_0x0.npy", values("u1", (0, 0)))
    add("empty/f8_be_4x0.npy", endian(values("f8", (4, 0)), True))

    for major in (1, 2, 3):
        add("versions/v%d_c.npy" % major, values("f4", (2, 3)), version=(major, 0))
        add("versions/v%d_f_be.npy" % major, order(endian(values("i2", (3, 5)), True), True),
            version=(major, 0))

    f4 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 3.4028235e38, -1.0],
                  dtype="<f4").reshape(2, 4)
    add("special/f4_nonfinite.npy", f4)
    add("special/f8_nonfinite_be.npy", endian(f4.astype("<f8"), True))
    with np.errstate(over="ignore"):  # 3.4e38 becomes inf in f16, on purpose
        add("special/f2_nonfinite.npy", f4.astype("<f2"))
    add("special/i8_extremes.npy", np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max],
                                            dtype="<i8"))
    add("special/u8_extremes_be.npy", np.array([0, 1, np.iinfo(np.uint64).max], dtype=">u8"))

    # Bigger arrays: Fortran transposition over many rows, big-endian swaps.
    add("large/f4_f_be_300x500.npy", order(endian(values("f4", (300, 500)), True), True))
    add("large/f8_f_40x30x50.npy", order(values("f8", (40, 30, 50)), True))
    add("large/i2_c_be_512x256.npy", endian(values("i2", (512, 256)), True))

    bf16 = rng.integers(0, 1 << 16, size=(4, 6), dtype="<u2")
    add_raw("raw/bf16.npy", "bf16", "<u2", (4, 6), bf16.tobytes())
    f8a = rng.integers(0, 256, size=(3, 5), dtype="u1")
    add_raw("raw/f8e4m3fn.npy", "f8e4m3fn", "|u1", (3, 5), f8a.tobytes())
    f8b = rng.integers(0, 256, size=(7,), dtype="u1")
    add_raw("raw/f8e5m2.npy", "f8e5m2", "|u1", (7,), f8b.tobytes())

    # A module tree: enc.layers.{0,1}.{w,b}, enc.embed.
    for layer in (0, 1):
        add("enc/layers/%d/w.npy" % layer, order(values("f4", (8, 4)), layer == 1))
        add("enc/layers/%d/b.npy" % layer, values("f4", (8,)))
    add("enc/embed.npy", values("f2", (16, 4)))


def bad_cases():
    buf = io.BytesIO()
    np.save(buf, np.array([1, "a", None], dtype=object), allow_pickle=True)
    add_bad("bad/object.npy", buf.getvalue(), "WPACK_E_UNSUPPORTED", "(object arrays)")

    buf = io.BytesIO()
    np.save(buf, values("f4", (4, 5)))
    good = buf.getvalue()
    add_bad("bad/truncated.npy", good[:-7], "WPACK_E_INPUT", "file is %d bytes, header needs %d"
            % (len(good) - 7, len(good)))
    add_bad("bad/trailing.npy", good + b"\0" * 5, "WPACK_E_INPUT", "trailing")
    add_bad("bad/header_cut.npy", good[:50], "WPACK_E_INPUT", "header needs")
    add_bad("bad/not_npy.npy", b"PK\x03\x04 not an npy file", "WPACK_E_INPUT", "not an npy file")

    for rel, dtype in (("bad/unicode.npy", "<U3"), ("bad/complex.npy", "<c8"),
                       ("bad/datetime.npy", "<M8[s]")):
        buf = io.BytesIO()
        np.save(buf, np.zeros(3, dtype=dtype))
        add_bad(rel, buf.getvalue(), "WPACK_E_UNSUPPORTED", "not supported")
    buf = io.BytesIO()
    np.save(buf, np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    add_bad("bad/structured.npy", buf.getvalue(), "WPACK_E_UNSUPPORTED", "structured")

    add_bad("bad/rank9.npy", raw_npy("<f4", (1,) * 9, b"\0" * 4), "WPACK_E_UNSUPPORTED",
            "rank 9")
    add_bad("bad/negative_dim.npy", raw_npy("<f4", (2, -3), b""), "WPACK_E_INPUT",
            "shape dim -3 is negative")
    add_bad("bad/overflow.npy", raw_npy("<f4", (1 << 32, 1 << 32), b""), "WPACK_E_INPUT",
            "shape overflows")
    big = raw_npy("<f4", (2,), b"\0" * 8)
    add_bad("bad/huge_header_len.npy",
            b"\x93NUMPY\x02\x00" + (1 << 30).to_bytes(4, "little") + big[10:],
            "WPACK_E_INPUT", "above the")
    add_bad("bad/version4.npy", b"\x93NUMPY\x04\x00" + big[8:], "WPACK_E_UNSUPPORTED",
            "version 4.0")


def main():
    global out_dir
    if len(sys.argv) != 2:
        sys.exit("usage: make_npy_cases.py OUTDIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    good_cases()
    bad_cases()
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out_dir, "bad.json"), "w") as f:
        json.dump(bad, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
