#!/usr/bin/env python3
"""make_importfs.py OUTDIR - the round-2 hostile inputs of tests/cli/test_importfs.sh
that cannot be committed: FIFOs, symlinks (they need the test's own paths),
files of a megabyte or more, and Hugging Face sharded safetensors sets.
Written with the standard library and numpy only; the safetensors format is
written directly (8-byte header length, JSON header, data)."""
import json
import os
import struct
import sys
import zlib

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def p(*names):
    return os.path.join(out, *names)


def npy_bytes(a):
    import io
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def npy_u8_header(n):
    """A .npy v1 header for n uint8 elements (shape (n,)), 64-byte aligned."""
    d = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % n
    h = d + " " * (-(10 + len(d) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()


def safetensors(tensors, meta=None):
    """tensors: list of (name, np.ndarray); returns the file bytes."""
    hdr, data, off = {}, b"", 0
    names = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}
    for name, a in tensors:
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        hdr[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        data += b
        off += len(b)
    if meta is not None:
        hdr["__metadata__"] = meta
    j = json.dumps(hdr).encode()
    j += b" " * (-len(j) % 8)
    return struct.pack("<Q", len(j)) + j + data


# --- point 6: FIFOs where a file is expected
os.makedirs(p("fifo_manifest"), exist_ok=True)
with open(p("fifo_manifest", "manifest.json"), "w") as f:
    json.dump({"tensors": [{"name": "w", "dtype": "f32", "shape": [2], "file": "w.bin"}]}, f)
os.mkfifo(p("fifo_manifest", "w.bin"))
os.mkfifo(p("fifo.npy"))
os.mkfifo(p("fifo.safetensors"))
os.mkfifo(p("fifo_stats.json"))
os.makedirs(p("fifo_dir"), exist_ok=True)
os.mkfifo(p("fifo_dir", "a.npy"))
np.save(p("fifo_dir", "b.npy"), np.arange(3, dtype=np.float32))

# --- point 7: a manifest whose data file is a symlink out of its directory
os.makedirs(p("link_manifest"), exist_ok=True)
with open(p("link_manifest", "manifest.json"), "w") as f:
    json.dump({"tensors": [{"name": "secret", "dtype": "u8", "shape": [4], "file": "w.bin"}]}, f)
with open(p("outside.bin"), "wb") as f:
    f.write(b"SECRET-BYTES")
os.symlink(os.path.abspath(p("outside.bin")), p("link_manifest", "w.bin"))
# ... a data file under a symlinked sub-directory
os.makedirs(p("link_dir_manifest"), exist_ok=True)
os.symlink(os.path.abspath(out), p("link_dir_manifest", "sub"))
with open(p("link_dir_manifest", "manifest.json"), "w") as f:
    json.dump({"tensors": [{"name": "secret", "dtype": "u8", "shape": [4], "file": "sub/outside.bin"}]}, f)
# ... a directory walk with a symlinked .npy
os.makedirs(p("link_walk"), exist_ok=True)
np.save(p("link_walk", "a.npy"), np.arange(4, dtype=np.float32))
np.save(p("walk_target.npy"), np.ones(2, dtype=np.float32))
os.symlink(os.path.abspath(p("walk_target.npy")), p("link_walk", "b.npy"))

# --- issue 13 point 7: directories with nothing to pack
os.makedirs(p("empty_dir"), exist_ok=True)
os.makedirs(p("no_npy_dir"), exist_ok=True)
with open(p("no_npy_dir", "README.txt"), "w") as f:
    f.write("no arrays here\n")

# --- point 2: 257 nested stored zip members. Member k's stored data is a
# .npy of uint8 whose payload is member k+1's local header and data, so each
# member spans nearly the whole file: 1.1 MB listing 270 MB of members.
N, INNER = 257, 1 << 20


def local_header(name, data):
    crc = zlib.crc32(data) & 0xffffffff
    return struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0, crc, len(data), len(data),
                       len(name), 0) + name


names = [("m%03d.npy" % k).encode() for k in range(N)]
datas = [None] * N
datas[N - 1] = npy_u8_header(INNER) + bytes(INNER)
for k in range(N - 2, -1, -1):
    payload = local_header(names[k + 1], datas[k + 1]) + datas[k + 1]
    datas[k] = npy_u8_header(len(payload)) + payload
body = local_header(names[0], datas[0]) + datas[0]
cd, off = b"", 0
for k in range(N):
    cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 0, 0, 0,
                      zlib.crc32(datas[k]) & 0xffffffff, len(datas[k]), len(datas[k]),
                      len(names[k]), 0, 0, 0, 0, 0, off) + names[k]
    if k + 1 < N:  # member k+1's header follows member k's header, name and .npy header
        off += 30 + len(names[k]) + len(npy_u8_header(0))
eocd = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, N, N, len(cd), len(body), 0)
with open(p("nested_members.npz"), "wb") as f:
    f.write(body + cd + eocd)

# --- issue 13 point 7: Hugging Face sharded safetensors (index + shards)
rng = np.random.default_rng(7)
a = rng.standard_normal((4, 3)).astype(np.float32)
b = rng.standard_normal(5).astype(np.float16)
c = np.arange(6, dtype=np.int64).reshape(2, 3)


def hf_set(d, shards, wmap, meta=({"format": "pt"}, {"format": "pt"})):
    os.makedirs(p(d), exist_ok=True)
    for i, (fname, ts) in enumerate(shards):
        with open(p(d, fname), "wb") as f:
            f.write(safetensors(ts, meta[i] if i < len(meta) else None))
    with open(p(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 110}, "weight_map": wmap}, f, indent=2)


S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
good = {"enc.w": S1, "enc.b": S1, "dec.idx": S2}
hf_set("hf_ok", [(S1, [("enc.w", a), ("enc.b", b)]), (S2, [("dec.idx", c)])], good)
np.save(p("hf_ok", "expect_enc.w.npy"), a)
np.save(p("hf_ok", "expect_enc.b.npy"), b)
np.save(p("hf_ok", "expect_dec.idx.npy"), c)
# a tensor of the map missing from its shard
hf_set("hf_missing", [(S1, [("enc.w", a)]), (S2, [("dec.idx", c)])], good)
# a shard tensor the map does not list
hf_set("hf_unlisted", [(S1, [("enc.w", a), ("enc.b", b), ("extra", c)]), (S2, [("dec.idx", c)])], good)
# the map puts a tensor in the other shard
hf_set("hf_wrong_shard", [(S1, [("enc.w", a)]), (S2, [("dec.idx", c), ("enc.b", b)])], good)
# a shard name leading out of the directory
hf_set("hf_traversal", [(S1, [("enc.w", a)])], {"enc.w": "../" + S1})
# a shard that is a symlink out of the directory, and one that is a FIFO
hf_set("hf_link", [(S2, [("dec.idx", c)])], {"enc.w": S1, "enc.b": S1, "dec.idx": S2})
with open(p("hf_link_target.safetensors"), "wb") as f:
    f.write(safetensors([("enc.w", a), ("enc.b", b)], {"format": "pt"}))
os.symlink(os.path.abspath(p("hf_link_target.safetensors")), p("hf_link", S1))
hf_set("hf_fifo", [(S2, [("dec.idx", c)])], good)
os.mkfifo(p("hf_fifo", S1))
# shards disagreeing on __metadata__
hf_set("hf_meta_conflict", [(S1, [("enc.w", a), ("enc.b", b)]), (S2, [("dec.idx", c)])], good,
       meta=({"format": "pt"}, {"format": "tf"}))

# --- point 3: 300,000 empty safetensors tensors (17 MB), for the RSS bound
h = {"t%06d" % i: {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(300000)}
j = json.dumps(h, separators=(",", ":")).encode()
j += b" " * (-len(j) % 8)
with open(p("empty_300k.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(j)) + j)
