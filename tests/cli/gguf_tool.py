#!/usr/bin/python3
"""gguf_tool.py - an independent writer and reader of the GGUF layout (ggml
docs/gguf.md), for the tests: the gguf Python package is not installable here.

  gguf_tool.py make DIR        write the test files into DIR (see make())
  gguf_tool.py dump FILE       print a canonical description of FILE (KVs with
                               their types, tensors with ne, type and a hash)
  gguf_tool.py hostile DIR     write the malformed files of tests/hostile/gguf

The writer lays files out as ggml's gguf_write and gguf-py's GGUFWriter do:
header, KVs, tensor infos, zero padding to the alignment, each tensor's bytes
padded to the alignment (the last one too).
"""
import hashlib
import struct
import sys

import numpy as np

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# (block elements, block bytes) of the GGML types used here (gguf-py GGML_QUANT_SIZES)
QUANT = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
         19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136),
         24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56),
         30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17)}


def gstr(s):
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def nbytes(ggml_type, ne):
    be, bb = QUANT[ggml_type]
    n = 1
    for d in ne:
        n *= d
    return n // be * bb


def write(path, kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)], arrays as (ARRAY, (elem_type, [values]));
    tensors: [(name, ggml_type, ne innermost first, bytes)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + value(t, v)
    off = 0
    for name, gt, ne, data in tensors:
        assert len(data) == nbytes(gt, ne), name
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, off)
        off += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for name, gt, ne, data in tensors:
        out += data + b"\0" * (-len(data) % alignment)
    with open(path, "wb") as f:
        f.write(out)


def read(path):
    """(version, [(key, type, value)], [(name, type, ne, bytes)], alignment)"""
    b = open(path, "rb").read()
    assert b[:4] == b"GGUF", "magic"
    version, nt, nkv = struct.unpack_from("<IQQ", b, 4)
    at = 24

    def rd(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, b, at)
        at += struct.calcsize(fmt)
        return v[0]

    def rstr():
        nonlocal at
        n = rd("<Q")
        s = b[at:at + n]
        assert len(s) == n, "string past the end"
        at += n
        return s

    def rval(t):
        if t == STRING:
            return rstr()
        if t == ARRAY:
            et, n = rd("<I"), rd("<Q")
            return (et, [rval(et) for _ in range(n)])
        return rd(SCALAR[t])

    kvs = []
    for _ in range(nkv):
        k = rstr().decode()
        t = rd("<I")
        kvs.append((k, t, rval(t)))
    align = dict((k, v) for k, t, v in kvs).get("general.alignment", 32)
    infos = []
    for _ in range(nt):
        name = rstr().decode()
        nd = rd("<I")
        ne = [rd("<Q") for _ in range(nd)]
        infos.append((name, rd("<I"), ne, rd("<Q")))
    start = at + (-at % align)
    tensors = []
    for name, gt, ne, off in infos:
        assert off % align == 0, "misaligned"
        n = nbytes(gt, ne)
        data = b[start + off:start + off + n]
        assert len(data) == n, "tensor past the end"
        tensors.append((name, gt, ne, data))
    return version, kvs, tensors, align


def dump(path):
    version, kvs, tensors, align = read(path)
    print("version", version, "alignment", align)
    for k, t, v in kvs:
        print("kv", k, t, repr(v))
    for name, gt, ne, data in tensors:
        print("tensor", name, gt, ne, hashlib.sha256(data).hexdigest()[:16])


def rnd(n, seed):
    return np.random.RandomState(seed).randint(0, 256, n, dtype=np.uint8).tobytes()


def base_model(string_tail=True):
    f32 = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5 - 3  # torch shape [4, 6]
    kvs = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "tiny test model"),
        ("test.u8", U8, 200), ("test.i8", I8, -100), ("test.u16", U16, 65000),
        ("test.i16", I16, -30000), ("test.u32", U32, 4000000000), ("test.i32", I32, -2000000000),
        ("test.f32", F32, 0.1), ("test.bool", BOOL, True), ("test.u64", U64, 2**64 - 5),
        ("test.i64", I64, -2**62), ("test.f64", F64, 1e300),
        ("test.latin1", STRING, b"caf\xe9"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<s>", "</s>", "hello", "\u00e9t\u00e9", ""])),
        ("tokenizer.ggml.scores", ARRAY, (F32, [0.0, -1.5, 2.25])),
        ("tokenizer.ggml.token_type", ARRAY, (I32, [1, 3, -1])),
        ("test.arr.u8", ARRAY, (U8, [0, 1, 255])), ("test.arr.bool", ARRAY, (BOOL, [True, False])),
        ("test.arr.u64", ARRAY, (U64, [2**64 - 1, 0])), ("test.arr.f64", ARRAY, (F64, [0.5])),
        ("test.arr.empty", ARRAY, (U16, [])),
        ("test.arr.bytes", ARRAY, (STRING, [b"ok", b"\xff\xfe"])),
    ]
    tensors = [
        ("token_embd.weight", 0, [6, 4], f32.tobytes()),
        ("blk.0.attn_q.weight", 2, [64, 3], rnd(3 * 2 * 18, 1)),      # Q4_0
        ("blk.0.attn_k.weight", 8, [32, 2], rnd(2 * 34, 2)),          # Q8_0
        ("blk.0.ffn_up.weight", 12, [256, 2], rnd(2 * 144, 3)),       # Q4_K
        ("blk.0.ffn_down.weight", 14, [256, 1], rnd(210, 4)),         # Q6_K
        ("blk.0.iq.weight", 16, [256, 1], rnd(66, 5)),                # IQ2_XXS
        ("blk.0.mx.weight", 39, [32, 2], rnd(34, 6)),                 # MXFP4
        ("blk.0.attn_norm.weight", 1, [8], np.linspace(-1, 1, 8).astype(np.float16).tobytes()),
        ("blk.0.bf", 30, [2, 3], rnd(12, 7)),
        ("blk.0.cube", 26, [2, 3, 4], np.arange(24, dtype=np.int32).tobytes()),
        ("blk.0.big", 28, [3], np.array([1.5, -2, 3], dtype=np.float64).tobytes()),
        ("scalar", 0, [], np.float32(7).tobytes()),
        ("empty", 0, [0, 4], b""),
    ]
    return kvs, tensors


def make(d):
    kvs, tensors = base_model()
    write(f"{d}/base.gguf", kvs, tensors)
    write(f"{d}/base_v2.gguf", kvs, tensors, version=2)
    write(f"{d}/align64.gguf", kvs + [("general.alignment", U32, 64)], tensors, alignment=64)
    write(f"{d}/empty.gguf", [], [])


def hostile(d):
    """Each file: one fault; the name says which. EXPECT lists the code."""
    ok = [("a", STRING, "b")]
    t1 = [("t", 0, [4], b"\0" * 16)]
    expect = []

    def put(name, data, code):
        with open(f"{d}/{name}", "wb") as f:
            f.write(data)
        expect.append(f"{name} {code}")

    def good(kvs=ok, tensors=t1, **kw):
        write(f"{d}/.tmp", kvs, tensors, **kw)
        return bytearray(open(f"{d}/.tmp", "rb").read())

    hdr = lambda nt, nkv, v=3: b"GGUF" + struct.pack("<IQQ", v, nt, nkv)
    put("huge_n_tensors.gguf", hdr(2**63, 0) + b"\0" * 64, "WPACK_E_LIMIT")
    put("huge_n_kv.gguf", hdr(0, 2**64 - 1) + b"\0" * 64, "WPACK_E_LIMIT")
    # string length 2^64-1: length + position would wrap
    put("string_len_overflow.gguf", hdr(0, 1) + struct.pack("<Q", 2**64 - 1) + b"k" * 40, "WPACK_E_TRUNCATED")
    put("string_past_eof.gguf", hdr(0, 1) + gstr("key") + struct.pack("<IQ", STRING, 1000) + b"ab", "WPACK_E_TRUNCATED")
    put("array_of_arrays.gguf", hdr(0, 1) + gstr("k") + struct.pack("<IIQ", ARRAY, ARRAY, 1)
        + struct.pack("<IQ", U8, 1) + b"\1", "WPACK_E_UNSUPPORTED")
    put("array_huge_count.gguf", hdr(0, 1) + gstr("k") + struct.pack("<IIQ", ARRAY, U32, 2**62) + b"\0" * 16, "WPACK_E_LIMIT")
    put("array_bad_elem_type.gguf", hdr(0, 1) + gstr("k") + struct.pack("<IIQ", ARRAY, 13, 1) + b"\0" * 16, "WPACK_E_METADATA")
    put("kv_bad_type.gguf", hdr(0, 1) + gstr("k") + struct.pack("<I", 99) + b"\0" * 16, "WPACK_E_METADATA")
    put("bool_not_01.gguf", hdr(0, 1) + gstr("k") + struct.pack("<IB", BOOL, 2), "WPACK_E_VALUE")
    put("duplicate_key.gguf", bytes(good([("a", U8, 1), ("a", U8, 2)], [])), "WPACK_E_DUPLICATE")
    put("duplicate_tensor.gguf", bytes(good(ok, [("t", 0, [4], b"\0" * 16), ("t", 0, [4], b"\1" * 16)])),
        "WPACK_E_DUPLICATE")
    # a tensor whose offset points past the end of the file
    b = good()
    off_at = b.rindex(gstr("t")) + 9 + 4 + 8 + 4  # tensor info's offset field
    struct.pack_into("<Q", b, off_at, 2**20)
    put("offset_past_eof.gguf", bytes(b), "WPACK_E_BOUNDS")
    struct.pack_into("<Q", b, off_at, 2**64 - 32)
    put("offset_wraps.gguf", bytes(b), "WPACK_E_BOUNDS")
    struct.pack_into("<Q", b, off_at, 4)
    put("misaligned_offset.gguf", bytes(b), "WPACK_E_MISALIGNED")
    # dims whose product overflows u64
    info = gstr("t") + struct.pack("<IQQIQ", 2, 2**32, 2**32 + 1, 0, 0)
    put("dims_overflow.gguf", hdr(1, 0) + info + b"\0" * 64, "WPACK_E_OVERFLOW")
    # element count fits, x type size (f32) overflows
    info = gstr("t") + struct.pack("<IQIQ", 1, 2**63 - 1, 0, 0)
    put("bytes_overflow.gguf", hdr(1, 0) + info + b"\0" * 64, "WPACK_E_OVERFLOW")
    info = gstr("t") + struct.pack("<IQ", 1, 2**63) + struct.pack("<IQ", 0, 0)
    put("dim_negative.gguf", hdr(1, 0) + info + b"\0" * 64, "WPACK_E_SHAPE")
    info = gstr("t") + struct.pack("<IQIQ", 1, 4, 40000, 0)
    put("type_out_of_range.gguf", hdr(1, 0) + info + b"\0" * 64, "WPACK_E_DTYPE")
    info = gstr("t") + struct.pack("<IQIQ", 1, 32, 4, 0)  # Q4_2, removed from ggml
    put("type_removed.gguf", hdr(1, 0) + info + b"\0" * 64, "WPACK_E_DTYPE")
    info = gstr("t") + struct.pack("<IQIQ", 1, 33, 2, 0)  # Q4_0 needs a multiple of 32
    put("block_not_multiple.gguf", hdr(1, 0) + info + b"\0" * 64, "WPACK_E_SHAPE")
    info = gstr("t") + struct.pack("<I", 9) + struct.pack("<9Q", *[1] * 9) + struct.pack("<IQ", 0, 0)
    put("rank_9.gguf", hdr(1, 0) + info + b"\0" * 64, "WPACK_E_RANK")
    info = gstr("t") + struct.pack("<I", 2**31) + b"\0" * 64
    put("rank_huge.gguf", hdr(1, 0) + info, "WPACK_E_RANK")
    put("overlap.gguf", bytes(good(ok, [("t", 0, [4], b"\0" * 16), ("u", 0, [4], b"\1" * 16)])), "")
    b = bytearray(open(f"{d}/overlap.gguf", "rb").read())
    i = b.index(gstr("u")) + len(gstr("u")) + 4 + 8 + 4
    struct.pack_into("<Q", b, i, 0)
    expect.pop()
    put("overlap.gguf", bytes(b), "WPACK_E_OVERLAP")
    put("alignment_not_pow2.gguf", bytes(good([("general.alignment", U32, 48)], [])), "WPACK_E_ALIGNMENT")
    put("alignment_zero.gguf", bytes(good([("general.alignment", U32, 0)], [])), "WPACK_E_ALIGNMENT")
    put("alignment_wrong_type.gguf", bytes(good([("general.alignment", U64, 32)], [])), "WPACK_E_METADATA")
    put("version_1.gguf", hdr(0, 0, 1), "WPACK_E_VERSION")
    put("version_99.gguf", hdr(0, 0, 99), "WPACK_E_VERSION")
    put("big_endian.gguf", b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "WPACK_E_ENDIAN")
    put("truncated_header.gguf", b"GGUF\3\0\0\0\0", "WPACK_E_TRUNCATED")
    b = good()
    put("truncated_data.gguf", bytes(b[:-20]), "WPACK_E_BOUNDS")
    put("name_nul.gguf", bytes(good(ok, [("a\0b", 0, [4], b"\0" * 16)])), "WPACK_E_NAME")
    import os
    os.remove(f"{d}/.tmp")
    with open(f"{d}/EXPECT", "w") as f:
        f.write("# file code - written by tests/cli/gguf_tool.py hostile; checked by tests/cli/test_gguf.sh\n")
        f.write("\n".join(expect) + "\n")


if __name__ == "__main__":
    {"make": make, "dump": dump, "hostile": hostile}[sys.argv[1]](sys.argv[2])
