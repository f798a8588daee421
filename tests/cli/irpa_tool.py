#!/usr/bin/python3
"""irpa_tool.py - an independent writer and reader of IREE parameter archives,
from IREE's runtime/src/iree/schemas/parameter_archive.h (version 0.0), laid
out as its builder (iree/io/formats/irpa/irpa_builder.c) does: header (88 B),
entry table at 96 with each entry 16-aligned, metadata segment right after it,
storage segment 64-aligned with each data entry 64-aligned, file padded to 4096.

  irpa_tool.py make DIR      write the test files into DIR
  irpa_tool.py dump FILE     print each entry: key, kind, length, metadata, hash
  irpa_tool.py hostile DIR   write the malformed files of tests/hostile/irpa
"""
import hashlib
import struct
import sys

SKIP, SPLAT, DATA, EXTERNAL = 0, 1, 2, 3
HDR = struct.Struct("<4sHHQQQQQQQQQQ")          # 88 bytes
ENTRY = struct.Struct("<QIQQQQQQ")              # 60 bytes
assert HDR.size == 88 and ENTRY.size == 60


def up(v, a):
    return (v + a - 1) // a * a


def write(path, entries, file_align=4096):
    """entries: dicts with name, kind ('data', 'splat', 'skip'), meta (bytes),
    data (bytes) or pattern (bytes) + length."""
    table = bytearray()
    meta = bytearray()
    storage = bytearray()
    for e in entries:
        table += b"\0" * (-len(table) % 16)
        name, md = e["name"].encode(), e.get("meta", b"")
        name_ref = (len(meta), len(name))
        meta += name
        md_ref = (len(meta) if md else 0, len(md))
        meta += md
        if e["kind"] == "splat":
            pat = e["pattern"]
            table += ENTRY.pack(85, SPLAT, 0, *name_ref, *md_ref, 0)
            table += struct.pack("<Q16sB", e["length"], pat.ljust(16, b"\0"), len(pat))
        else:
            kind = DATA if e["kind"] == "data" else SKIP
            off = up(len(storage), 64)
            storage += b"\0" * (off - len(storage)) + e.get("data", b"")
            table += ENTRY.pack(76, kind, 0, *name_ref, *md_ref, 64)
            table += struct.pack("<QQ", off, len(e.get("data", b"")))
    es = (96, len(table))
    ms = (96 + len(table), len(meta))
    # the builder aligns the storage segment to its first data entry's
    # minimum_alignment (64), to 1 when there is none (irpa_builder.c
    # storage_alignment): an archive of splats only has it right after the metadata
    data = any(e["kind"] != "splat" for e in entries)
    ss = (up(ms[0] + ms[1], 64 if data else 1), len(storage))
    hdr = HDR.pack(b"IRPA", 0, 0, 88, 0, 0, len(entries), *es, *ms, *ss)
    out = hdr + b"\0" * 8 + table + meta
    out += b"\0" * (ss[0] - len(out)) + storage
    out += b"\0" * (-len(out) % file_align)
    with open(path, "wb") as f:
        f.write(out)


def read(path):
    """[(key, kind, length, meta, bytes or pattern)]; skips are left out."""
    b = open(path, "rb").read()
    out = []
    base = 0
    while True:
        h = HDR.unpack_from(b, base)
        assert h[0] == b"IRPA" and h[1] == 0 and h[3] == 88, "header"
        count, es_off, es_len, ms_off, ms_len, ss_off, ss_len = h[6:13]
        at = base + es_off
        for _ in range(count):
            size, kind, _flags, n_off, n_len, m_off, m_len, _align = ENTRY.unpack_from(b, at)
            assert n_off + n_len <= ms_len and m_off + m_len <= ms_len, "metadata ref"
            key = b[base + ms_off + n_off: base + ms_off + n_off + n_len].decode()
            md = b[base + ms_off + m_off: base + ms_off + m_off + m_len]
            if kind == SPLAT:
                length, pat, pl = struct.unpack_from("<Q16sB", b, at + 60)
                out.append((key, "splat", length, md, pat[:pl]))
            elif kind == DATA:
                off, length = struct.unpack_from("<QQ", b, at + 60)
                assert off + length <= ss_len, "storage ref"
                if _align:
                    assert (base + ss_off + off) % _align == 0, "alignment"
                s = base + ss_off + off
                out.append((key, "data", length, md, b[s:s + length]))
            at += up(size, 16)
        if not h[4]:
            return out
        base += h[4]


def dump(path):
    for key, kind, length, md, payload in read(path):
        print(key, kind, length, md.decode(errors="replace"),
              payload.hex() if kind == "splat" else hashlib.sha256(payload).hexdigest()[:16])


def make(d):
    import numpy as np
    entries = [
        {"name": "model.weight", "kind": "data", "data": np.arange(12, dtype=np.float32).tobytes(),
         "meta": b"opaque metadata"},
        {"name": "model.bias", "kind": "splat", "pattern": struct.pack("<f", 0.5), "length": 4 * 300},
        {"name": "zeros16", "kind": "splat", "pattern": bytes(range(16)), "length": 64},
        {"name": "dropped", "kind": "skip", "data": b"xx"},
        {"name": "bytes.odd", "kind": "data", "data": b"abcde"},
        {"name": "empty", "kind": "data", "data": b""},
        {"name": "u8splat", "kind": "splat", "pattern": b"\x07", "length": 9},
    ]
    write(f"{d}/mixed.irpa", entries)
    write(f"{d}/empty.irpa", [])
    # in wpack's own conventions (entries in name order, "wpack:DTYPE[DIMS]"
    # metadata): wpack create + export --to irpa gives back these bytes
    ref = [
        {"name": "a.weight", "kind": "data", "meta": b"wpack:f32[2,3]",
         "data": np.arange(6, dtype=np.float32).tobytes()},
        {"name": "b.bias", "kind": "splat", "meta": b"wpack:f32[4]", "pattern": struct.pack("<f", -1),
         "length": 16},
        {"name": "c.ids", "kind": "data", "meta": b"wpack:i64[3]",
         "data": np.array([1, -2, 3], dtype=np.int64).tobytes()},
        {"name": "d.raw", "kind": "data", "meta": b"wpack:u8[5]", "data": b"12345"},
        {"name": "e.half", "kind": "splat", "meta": b"wpack:f16[2,2]", "pattern": b"\x00\x3c", "length": 8},
        {"name": "f.scalar", "kind": "data", "meta": b"wpack:f64[]", "data": struct.pack("<d", 2.5)},
    ]
    write(f"{d}/ref.irpa", ref)
    write(f"{d}/ref_splats.irpa", [e for e in ref if e["kind"] == "splat"])


def hostile(d):
    expect = []

    def put(name, data, code):
        with open(f"{d}/{name}", "wb") as f:
            f.write(data)
        expect.append(f"{name} {code}")

    one = [{"name": "w", "kind": "data", "data": b"\1" * 8}]
    write(f"{d}/.tmp", one)
    good = bytearray(open(f"{d}/.tmp", "rb").read())
    import os
    os.remove(f"{d}/.tmp")

    def mod(fmt, off, v):
        b = bytearray(good)
        struct.pack_into(fmt, b, off, v)
        return bytes(b)

    put("bad_magic.irpa", mod("<4s", 0, b"IRPB"), "WPACK_E_BAD_MAGIC")
    put("version_1.irpa", mod("<H", 4, 1), "WPACK_E_VERSION")
    put("minor_1.irpa", mod("<H", 6, 1), "WPACK_E_VERSION")
    put("header_size.irpa", mod("<Q", 8, 96), "WPACK_E_LAYOUT")
    put("huge_entry_count.irpa", mod("<Q", 32, 2**63), "WPACK_E_LIMIT")
    put("segment_wraps.irpa", mod("<Q", 72, 2**64 - 8), "WPACK_E_BOUNDS")
    put("segment_past_eof.irpa", mod("<Q", 80, 2**20), "WPACK_E_BOUNDS")
    put("entry_size_small.irpa", mod("<Q", 96, 8), "WPACK_E_SIZE")
    put("entry_size_huge.irpa", mod("<Q", 96, 2**64 - 1), "WPACK_E_SIZE")
    put("data_entry_short.irpa", mod("<Q", 96, 70), "WPACK_E_SIZE")
    put("name_past_segment.irpa", mod("<Q", 96 + 20, 2**64 - 1), "WPACK_E_BOUNDS")
    put("storage_past_segment.irpa", mod("<Q", 96 + 60, 64), "WPACK_E_BOUNDS")
    put("storage_len_wraps.irpa", mod("<Q", 96 + 68, 2**64 - 1), "WPACK_E_BOUNDS")
    put("misaligned.irpa", mod("<Q", 96 + 52, 4096), "WPACK_E_MISALIGNED")
    put("alignment_not_pow2.irpa", mod("<Q", 96 + 52, 48), "WPACK_E_ALIGNMENT")
    put("external_entry.irpa", mod("<I", 96 + 8, EXTERNAL), "WPACK_E_UNSUPPORTED")
    put("unknown_kind.irpa", mod("<I", 96 + 8, 7), "WPACK_E_KIND")
    put("next_header_past_eof.irpa", mod("<Q", 16, 2**40), "WPACK_E_BOUNDS")
    put("next_header_self_loop.irpa", mod("<Q", 16, 0) , "")
    expect.pop()  # (a zero next offset ends the chain: not hostile)
    os.remove(f"{d}/next_header_self_loop.irpa")
    put("next_header_garbage.irpa", mod("<Q", 16, 16), "WPACK_E_BAD_MAGIC")
    put("truncated.irpa", bytes(good[:40]), "WPACK_E_TRUNCATED")
    write(f"{d}/.tmp", [{"name": "s", "kind": "splat", "pattern": b"\1\2\3", "length": 9}])
    put("splat_pattern_3.irpa", open(f"{d}/.tmp", "rb").read(), "WPACK_E_INPUT")
    write(f"{d}/.tmp", [{"name": "s", "kind": "splat", "pattern": b"\1\2", "length": 9}])
    put("splat_len_not_multiple.irpa", open(f"{d}/.tmp", "rb").read(), "WPACK_E_INPUT")
    write(f"{d}/.tmp", [{"name": "w", "kind": "data", "data": b"a"}, {"name": "w", "kind": "data", "data": b"b"}])
    put("duplicate_key.irpa", open(f"{d}/.tmp", "rb").read(), "WPACK_E_DUPLICATE")
    # many entries naming one storage range: each would be copied again
    # (a 4 KB file as 256 MB); one range is one tensor and its aliases, and
    # two ranges that only partly overlap are refused, as GGUF's are
    write(f"{d}/.tmp", [{"name": "a", "kind": "data", "data": b"\1" * 64},
                        {"name": "b", "kind": "data", "data": b"\2" * 64}])
    b = bytearray(open(f"{d}/.tmp", "rb").read())
    struct.pack_into("<Q", b, 96 + 80 + 60, 32)  # b's bytes start inside a's
    struct.pack_into("<Q", b, 96 + 80 + 52, 0)   # (and need no alignment)
    put("data_overlap.irpa", bytes(b), "WPACK_E_OVERLAP")
    # a 16-byte pattern (no dtype that wide: written out in full) 2^28 bytes
    # long from a 4 KB file: the zip-bomb guard's ratio applies
    write(f"{d}/.tmp", [{"name": "s", "kind": "splat", "pattern": bytes(range(16)), "length": 2**28}])
    put("splat16_bomb.irpa", open(f"{d}/.tmp", "rb").read(), "WPACK_E_LIMIT")
    # K linked headers sharing one table of K entries: K^2 entries from
    # K x 168 bytes (each header's metadata segment starts one byte further
    # along a string of letters, and entry j's name is 16 + j long, so every
    # name differs). Entries are bounded by the file's size over all headers.
    import random
    K = 600
    rnd = random.Random(7)
    letters = bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(2 * K + 32))
    table = b"".join(ENTRY.pack(76, DATA, 0, 0, 16 + j, 0, 0, 0) + struct.pack("<QQ", 0, 0) + b"\0" * 4
                     for j in range(K))
    tab_at = 88 * K
    meta_at = tab_at + len(table)
    hdrs = b"".join(HDR.pack(b"IRPA", 0, 0, 88, 88 if k < K - 1 else 0, 0, K,
                             tab_at - 88 * k, len(table), meta_at + k - 88 * k, len(letters) - k,
                             meta_at - 88 * k, 0) for k in range(K))
    put("headers_share_table.irpa", hdrs + table + letters, "WPACK_E_LIMIT")
    # names are references into the metadata segment: 2000 empty data
    # entries naming windows of one 16,000-byte run of letters, each a
    # distinct name of ~15.9 KB. The names took 30 MB (a 30 MB archive from
    # 172 KB), and at 4 MB names the duplicate check's sort ran for minutes.
    # The names of all entries together are bounded by the file's size.
    L, N = 16000, 2000
    table = b"".join(ENTRY.pack(76, DATA, 0, j % 64, L - 64 - j, 0, 0, 0) + struct.pack("<QQ", 0, 0)
                     + b"\0" * 4 for j in range(N))
    hdr = HDR.pack(b"IRPA", 0, 0, 88, 0, 0, N, 96, len(table), 96 + len(table), L,
                   96 + len(table) + L, 0)
    put("names_share_bytes.irpa", hdr + b"\0" * 8 + table + b"n" * L, "WPACK_E_LIMIT")
    os.remove(f"{d}/.tmp")
    with open(f"{d}/EXPECT", "w") as f:
        f.write("# file code - written by tests/cli/irpa_tool.py hostile; checked by tests/cli/test_irpa.sh\n")
        f.write("\n".join(expect) + "\n")


if __name__ == "__main__":
    {"make": make, "dump": dump, "hostile": hostile}[sys.argv[1]](sys.argv[2])
