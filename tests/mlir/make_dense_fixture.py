#!/usr/bin/python3
"""make_dense_fixture.py DIR: writes DIR/dense.mlir, a module whose globals
hold inline weights in every form externalize takes (nested dense lists,
splats, hex, i1 bit-packed hex, float bit patterns, dense_resource blobs,
the generic form, an attribute alias), the values numpy says each must
decode to as DIR/npy/<symbol>.npy, and DIR/moved.json (symbol -> entry)
for the globals at or above 16 bytes."""
import json, os, sys
import numpy as np

d = sys.argv[1]
os.makedirs(f"{d}/npy", exist_ok=True)
r = np.random.default_rng(7)
globals_, resources, moved = [], [], {}

def lit(a, fmt):
    if a.ndim == 0:
        return fmt(a[()])
    return "[" + ", ".join(lit(x, fmt) for x in a) + "]"

def ffmt(x):
    return repr(float(x)).replace("inf", "1e400")
def ifmt(x):
    return str(int(x))
def bfmt(x):
    return "true" if x else "false"

def mlir_type(shape, elem):
    return "tensor<" + "".join(f"{n}x" for n in shape) + elem + ">"

def add(sym, value, shape, elem, want, generic=False):
    t = mlir_type(shape, elem)
    if generic:
        globals_.append(f'  "ml_program.global"() <{{sym_name = "{sym}", sym_visibility = "private", type = {t}, value = {value} : {t}}}> : () -> ()')
    else:
        globals_.append(f"  ml_program.global private @{sym}({value} : {t}) : {t}")
    np.save(f"{d}/npy/{sym}.npy", want)
    if want.nbytes >= 16:
        moved[sym] = sym

def bf16_bits(f32):
    b = f32.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)

a = r.standard_normal((3, 4)).astype(np.float32)
add("f32_nested", "dense<" + lit(a, ffmt) + ">", a.shape, "f32", a)
a = r.standard_normal((2, 3)) * 1e100
add("f64", "dense<" + lit(a, ffmt) + ">", a.shape, "f64", a)
a = (r.standard_normal(9) * 100).astype(np.float16)
add("f16", "dense<" + lit(a, ffmt) + ">", a.shape, "f16", a)
# bf16: exact values and two ties that round to even
vals = np.array([1.0, -2.5, 1.00390625, 1.01171875, 3.0e38, 1e-40, 0.1, -7.0], dtype=np.float32)
add("bf16", "dense<[" + ", ".join(repr(float(v)) for v in vals) + "]>", (8,), "bf16", bf16_bits(vals))
a = np.array([True, False, True, True, False, False, False, False, True] * 2)
add("bools", "dense<" + lit(a, bfmt) + ">", a.shape, "i1", a)
a = r.integers(0, 2, 20).astype(bool)
packed = np.packbits(a, bitorder="little").tobytes().hex().upper()
add("bools_hex", f'dense<"0x{packed}">', a.shape, "i1", a)
add("bools_splat", 'dense<"0xFF">', (4, 8), "i1", np.ones((4, 8), dtype=bool))
a = np.array([-128, 127, 0, -1] * 4, dtype=np.int8)
add("i8", "dense<" + lit(a, ifmt) + ">", a.shape, "i8", a)
a = np.array([0, 255, 7, 128] * 4, dtype=np.uint8)
add("ui8", "dense<" + lit(a, ifmt) + ">", a.shape, "ui8", a)
a = np.array([-32768, 32767, 1, -2, 3, 4, 5, 6], dtype=np.int16)
add("si16", "dense<" + lit(a, ifmt) + ">", a.shape, "si16", a)
# signless i16 takes 0..65535 too: stored as the same bits, signed
add("i16_unsigned_lit", "dense<[65535, 32768, 1, 2, 3, 4, 5, 6]>", (8,), "i16",
    np.array([65535, 32768, 1, 2, 3, 4, 5, 6], dtype=np.uint16).view(np.int16))
a = r.integers(-2**31, 2**31, (2, 2, 2), dtype=np.int64).astype(np.int32)
add("i32_3d", "dense<" + lit(a, ifmt) + ">", a.shape, "i32", a)
a = np.array([-2**63, 2**63 - 1, 0], dtype=np.int64)
add("i64", "dense<" + lit(a, ifmt) + ">", a.shape, "i64", a)
a = np.array([2**64 - 1, 0], dtype=np.uint64)
add("ui64", "dense<" + lit(a, ifmt) + ">", a.shape, "ui64", a)
add("splat_f32", "dense<-0.5>", (8, 8), "f32", np.full((8, 8), -0.5, dtype=np.float32))
add("splat_i32", "dense<-3>", (5,), "i32", np.full(5, -3, dtype=np.int32))
a = r.standard_normal(6).astype(np.float32)
add("hex_f32", f'dense<"0x{a.tobytes().hex().upper()}">', a.shape, "f32", a)
add("hex_splat", 'dense<"0x0000C03F">', (16,), "f32", np.full(16, 1.5, dtype=np.float32))
# float bit patterns in a list (a NaN payload and -inf)
a = np.array([0x7FC00001, 0xFF800000, 0x3F800000, 0], dtype=np.uint32).view(np.float32)
add("bits_f32", "dense<[0x7FC00001, 0xFF800000, 1.0, 0.0]>", (4,), "f32", a)
a = r.standard_normal((2, 4)).astype(np.float32)
add("generic_form", "dense<" + lit(a, ffmt) + ">", a.shape, "f32", a, generic=True)
add("small", "dense<[1.0, 2.0]>", (2,), "f32", np.array([1.0, 2.0], dtype=np.float32))
# dense_resource: one blob only this global uses (dropped), one shared with a constant (kept)
a = r.standard_normal((4, 4)).astype(np.float32)
resources.append(f'      blob_only: "0x10000000{a.tobytes().hex().upper()}"')
globals_.append("  ml_program.global private @res_only(dense_resource<blob_only> : tensor<4x4xf32>) : tensor<4x4xf32>")
np.save(f"{d}/npy/res_only.npy", a); moved["res_only"] = "res_only"
b = r.standard_normal(8).astype(np.float32)
resources.append(f'      blob_shared: "0x04000000{b.tobytes().hex().upper()}"')
globals_.append("  ml_program.global private @res_shared(dense_resource<blob_shared> : tensor<8xf32>) : tensor<8xf32> {keep.me}")
np.save(f"{d}/npy/res_shared.npy", b); moved["res_shared"] = "res_shared"
# ... and with an arith.constant (hoisted to a global @blob_shared, entry
# blob_shared) and an attribute of the function (which keeps the blob)
np.save(f"{d}/npy/blob_shared.npy", b); moved["blob_shared"] = "blob_shared"
# through an attribute alias
a = np.arange(12, dtype=np.float32) / 8
np.save(f"{d}/npy/aliased.npy", a); moved["aliased"] = "aliased"

with open(f"{d}/dense.mlir", "w") as f:
    f.write("#w_alias = dense<" + lit(a, ffmt) + "> : tensor<12xf32>\n")
    f.write("module {\n" + "\n".join(globals_) + "\n")
    f.write("  ml_program.global private @aliased(#w_alias) : tensor<12xf32>\n")
    f.write("  func.func @f() -> tensor<8xf32> attributes {w.ref = dense_resource<blob_shared> : tensor<8xf32>} {\n"
            "    %0 = arith.constant dense_resource<blob_shared> : tensor<8xf32>\n"
            "    return %0 : tensor<8xf32>\n  }\n}\n")
    f.write("{-#\n  dialect_resources: {\n    builtin: {\n" + ",\n".join(resources) + "\n    }\n  }\n#-}\n")
json.dump(moved, open(f"{d}/moved.json", "w"), indent=1)
