"""extern_dense_cases.py - numpy side of test_externalize_dense.sh.

  make DIR     write DIR/arith.mlir (arith.constant, pretty and generic),
               DIR/hlo.mlir (stablehlo.constant and mhlo.constant, pretty and
               generic), DIR/hlo_generic.mlir (generic forms only) and for
               each DIR/NAME.expect: lines 'SSA DTYPE SHAPE HEX', the bytes
               numpy computes from the literal's text (MLIR's rules: a float
               is read as f64, then rounded to the element type), or
               'SSA kept - -' for a splat (a fill stays in its op)
  check OUT.mlir EXPECT NPYDIR
               for each expected op: its line in OUT (a kept one: still
               the constant) loads
               @dense_literal_<16 hex>, NPYDIR/<that>.npy (wpack extract)
               holds the expected dtype, shape and bytes; prints 'ok SSA' or
               'FAIL SSA: why', then 'entries N' (distinct names)
"""
import os
import re
import sys

import numpy as np

RNG = np.random.default_rng(20261205)


def float_text(x):
    """x (a Python float) as an MLIR float literal: MLIR wants a '.' and
    reads '-' as a token of its own; repr round-trips the f64 exactly."""
    s = repr(abs(float(x)))
    mant, _, exp = s.partition("e")
    if "." not in mant:
        mant += ".0"
    s = mant + ("e" + exp if exp else "")
    return ("-" if np.signbit(x) else "") + s


def nested(items, shape):
    """Items (texts) as a list nested to shape."""
    if len(shape) <= 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0]
    return "[" + ", ".join(nested(items[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def bf16_bits(f64):
    """f64 values exactly representable in bf16 -> their bf16 bits."""
    return (f64.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def case(elem, shape, form):
    """(literal text, type text, expected dtype name, expected bytes)."""
    n = int(np.prod(shape))
    ty = "tensor<%sx%s>" % ("x".join(map(str, shape)), elem)
    if elem == "f32":
        v = RNG.normal(0, 3, n)  # f64 values: rounding to f32 is part of the test
        ref = v.astype(np.float32)
        texts = [float_text(x) for x in v]
        dt, raw = "float32", ref.tobytes()
    elif elem == "f16":
        v = RNG.normal(0, 3, n)
        ref = v.astype(np.float16)  # numpy rounds f64 -> f16 once, as MLIR does
        texts = [float_text(x) for x in v]
        dt, raw = "float16", ref.tobytes()
    elif elem == "bf16":
        # values bf16 holds exactly (numpy has no bf16 to round with)
        b = (RNG.integers(0x3000, 0x4800, n) | (RNG.integers(0, 2, n) << 15)).astype(np.uint16)
        v = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        assert (bf16_bits(v) == b).all()
        ref = b
        texts = [float_text(x) for x in v]
        dt, raw = "bf16", b.tobytes()
    elif elem in ("i8", "i64"):
        info = np.iinfo(np.int8 if elem == "i8" else np.int64)
        ref = RNG.integers(info.min, info.max, n, dtype=np.int64, endpoint=True).astype(info.dtype)
        texts = [str(int(x)) for x in ref]
        dt, raw = str(ref.dtype), ref.tobytes()
    elif elem == "i1":
        ref = RNG.integers(0, 2, n).astype(np.bool_)
        texts = ["true" if x else "false" for x in ref]
        dt, raw = "bool", ref.tobytes()
    else:
        raise ValueError(elem)
    if form == "list":
        lit = "dense<%s>" % nested(texts, shape)
    elif form == "hex":
        if elem == "i1":
            h = np.packbits(ref, bitorder="little").tobytes()
        else:
            h = raw
        lit = 'dense<"0x%s">' % h.hex().upper()
    elif form == "splat":
        lit = "dense<%s>" % texts[0]
        one = raw[:len(raw) // n]
        raw = one * n
    elif form == "hexsplat":
        one = raw[:len(raw) // n]
        lit = 'dense<"0x%s">' % one.hex().upper()
        raw = one * n
    else:
        raise ValueError(form)
    return lit, ty, dt, raw


CASES = [  # elem, shape, form
    ("f32", (2, 3, 4), "list"), ("f32", (16,), "hex"), ("f32", (8, 8), "splat"),
    ("f32", (32,), "hexsplat"), ("bf16", (4, 8), "list"), ("bf16", (3, 8), "hex"),
    ("bf16", (64,), "splat"), ("f16", (5, 7), "list"), ("f16", (20,), "hex"),
    ("i8", (4, 9), "list"), ("i8", (40,), "hex"), ("i8", (6, 6), "splat"),
    ("i1", (4, 8), "list"), ("i1", (5, 9), "hex"), ("i1", (48,), "splat"),
    ("i64", (3, 2), "list"), ("i64", (4,), "hex"), ("i64", (2, 2, 2), "splat"),
]


def forms(kind):
    """Op texts for (ssa, literal, type)."""
    if kind == "arith":
        return [lambda s, l, t: "%s = arith.constant %s : %s" % (s, l, t),
                lambda s, l, t: '%s = arith.constant {tag = "a"} %s : %s' % (s, l, t),
                lambda s, l, t: '%s = "arith.constant"() <{value = %s : %s}> {tag} : () -> %s' % (s, l, t, t)]
    if kind == "hlo":
        return [lambda s, l, t: "%s = stablehlo.constant %s : %s" % (s, l, t),
                lambda s, l, t: '%s = stablehlo.constant {mhlo.sharding = "{replicated}"} %s : %s' % (s, l, t),
                lambda s, l, t: '%s = "stablehlo.constant"() <{value = %s : %s}> : () -> %s' % (s, l, t, t),
                lambda s, l, t: '%s = "stablehlo.constant"() {value = %s : %s, tag} : () -> %s' % (s, l, t, t),
                lambda s, l, t: "%s = mhlo.constant %s : %s" % (s, l, t),
                lambda s, l, t: '%s = "mhlo.constant"() {value = %s : %s} : () -> %s' % (s, l, t, t)]
    return forms("hlo")[2:4] + forms("hlo")[5:]


def make(d):
    for kind in ("arith", "hlo", "hlo_generic"):
        fs = forms(kind)
        body, exp = [], []
        for i, (elem, shape, form) in enumerate(CASES):
            lit, ty, dt, raw = case(elem, shape, form)
            ssa = "%%c%d" % i
            body.append("    " + fs[i % len(fs)](ssa, lit, ty))
            if form in ("splat", "hexsplat"):   # a fill: stays for the compiler to fold
                exp.append("%s kept - -" % ssa[1:])
            else:
                exp.append("%s %s %s %s" % (ssa[1:], dt, "x".join(map(str, shape)), raw.hex().upper()))
        # an equal literal (same text) shares the first one's entry
        lit0 = body[0].split(" = ", 1)[1]
        body.append("    %%c%d = %s" % (len(CASES), lit0))
        exp.append(exp[0].replace("c0 ", "c%d " % len(CASES), 1))
        ret = "    return : () -> ()" if kind == "hlo_generic" else "    return"
        text = "module {\n  func.func @main() {\n" + "\n".join(body) + "\n" + ret + "\n  }\n}\n"
        if kind == "hlo_generic":
            text = text.replace("    return : () -> ()", '    "func.return"() : () -> ()')
        open(os.path.join(d, kind + ".mlir"), "w").write(text)
        open(os.path.join(d, kind + ".expect"), "w").write("\n".join(exp) + "\n")


def check(out, expect, npydir):
    lines = open(out).read().split("\n")
    names = set()
    for e in open(expect):
        ssa, dt, shape, hexs = e.split()
        try:
            hit = [l for l in lines if l.strip().startswith("%" + ssa + " = ")]
            if len(hit) != 1:
                raise ValueError("%d lines define %%%s" % (len(hit), ssa))
            if dt == "kept":
                if "global_load_const" in hit[0] or "constant" not in hit[0]:
                    raise ValueError("a splat constant moved: " + hit[0])
                print("ok", ssa)
                continue
            m = re.search(r'global_load_const"?\(?\)?\s*(?:<?\{global = )?@(dense_literal_[0-9a-f]{16})\b', hit[0])
            if not m:
                raise ValueError("no load of a dense_literal_: " + hit[0])
            names.add(m.group(1))
            a = np.load(os.path.join(npydir, m.group(1) + ".npy"))
            want = tuple(int(x) for x in shape.split("x"))
            if a.shape != want:
                raise ValueError("shape %s, want %s" % (a.shape, want))
            if dt != "bf16" and str(a.dtype) != dt:
                raise ValueError("dtype %s, want %s" % (a.dtype, dt))
            if dt == "bf16" and a.dtype.itemsize != 2:
                raise ValueError("bf16 stored as %s" % a.dtype)
            if a.tobytes().hex().upper() != hexs:
                raise ValueError("bytes differ:\n got  %s\n want %s" % (a.tobytes().hex()[:80], hexs[:80].lower()))
            print("ok", ssa)
        except Exception as ex:  # noqa: BLE001 - reported as a failed case
            print("FAIL %s: %s" % (ssa, ex))
    print("entries", len(names))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "check":
        check(*sys.argv[2:5])
