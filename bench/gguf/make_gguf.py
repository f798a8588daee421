#!/usr/bin/python3
"""make_gguf.py FILE SIZE_BYTES - a GGUF v3 file shaped like a Llama model
quantized the way llama.cpp's mixed types are: f16 token_embd and output,
Q8_0 attention projections, Q4_0 MLP projections, f32 norms; valid block
data (an f16 scale per block of 32, random quants). Hidden size 4096 from
2 GiB up, smaller below; layers are added while they fit in SIZE_BYTES.
Written tensor by tensor (never the whole file in memory), laid out as
tests/cli/gguf_tool.py (the tests' writer of the published layout, whose
encoders this reuses) lays it out: header, KVs, tensor infos, padding to
general.alignment (32), each tensor padded to it. Prints the byte count."""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "cli"))
from gguf_tool import ARRAY, F32, STRING, U32, gstr, nbytes, value  # noqa: E402

GF32, GF16, Q4_0, Q8_0 = 0, 1, 2, 8
ALIGN = 32
path, size = sys.argv[1], int(sys.argv[2])
h = 4096 if size >= 2 << 30 else 1024 if size >= 128 << 20 else 256
ffn, vocab = (h * 43 // 16 + 31) // 32 * 32, 32000 if h == 4096 else 8 * h
rng = np.random.default_rng(18)


def layer_bytes():
    return 4 * nbytes(Q8_0, (h, h)) + 3 * nbytes(Q4_0, (h, ffn)) + 2 * 4 * h


tensors = [("token_embd.weight", GF16, (h, vocab))]          # ne: innermost first
fixed = 2 * nbytes(GF16, (h, vocab)) + 4 * h
nl = 0
while nl == 0 or fixed + (nl + 1) * layer_bytes() <= size:
    nl += 1
for i in range(nl):
    b = f"blk.{i}."
    tensors += [(b + "attn_norm.weight", GF32, (h,))]
    tensors += [(b + n + ".weight", Q8_0, (h, h)) for n in ("attn_q", "attn_k", "attn_v", "attn_output")]
    tensors += [(b + "ffn_norm.weight", GF32, (h,)),
                (b + "ffn_gate.weight", Q4_0, (h, ffn)), (b + "ffn_up.weight", Q4_0, (h, ffn)),
                (b + "ffn_down.weight", Q4_0, (ffn, h))]
tensors += [("output_norm.weight", GF32, (h,)), ("output.weight", GF16, (h, vocab))]

kvs = [("general.architecture", STRING, "llama"), ("general.name", STRING, "wpack bench"),
       ("general.file_type", U32, 7), ("llama.block_count", U32, nl),
       ("llama.embedding_length", U32, h), ("llama.feed_forward_length", U32, ffn),
       ("llama.attention.head_count", U32, h // 128), ("llama.rope.freq_base", F32, 10000.0),
       ("tokenizer.ggml.tokens", ARRAY, (STRING, [f"t{i}" for i in range(256)]))]

head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
for k, t, v in kvs:
    head += gstr(k) + struct.pack("<I", t) + value(t, v)
off = 0
for name, gt, ne in tensors:
    head += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
    head += struct.pack("<IQ", gt, off)
    off += (nbytes(gt, ne) + ALIGN - 1) // ALIGN * ALIGN
head += b"\0" * (-len(head) % ALIGN)

STEP = 1 << 22  # blocks / elements per piece written


def pieces(gt, n):
    """the tensor's bytes, in pieces: n elements of type gt"""
    for a in range(0, n, STEP * 32 if gt in (Q4_0, Q8_0) else STEP):
        k = min(n - a, STEP * 32 if gt in (Q4_0, Q8_0) else STEP)
        if gt == GF32:
            yield (1 + 0.1 * rng.standard_normal(k, dtype=np.float32)).astype("<f4").tobytes()
        elif gt == GF16:
            yield (0.02 * rng.standard_normal(k, dtype=np.float32)).astype("<f2").tobytes()
        else:
            nb, q = k // 32, 32 if gt == Q8_0 else 16
            blk = np.empty(nb, dtype=[("d", "<f2"), ("qs", "u1", (q,))])
            blk["d"] = rng.uniform(0.001, 0.01, nb).astype("<f2")
            blk["qs"] = rng.integers(0, 256, (nb, q), dtype=np.uint8)
            yield blk.tobytes()


with open(path, "wb") as f:
    f.write(head)
    for name, gt, ne in tensors:
        n = 1
        for d in ne:
            n *= d
        w = 0
        for p in pieces(gt, n):
            f.write(p)
            w += len(p)
        assert w == nbytes(gt, ne), name
        f.write(b"\0" * (-w % ALIGN))
print(f"{os.path.getsize(path)} bytes: {len(tensors)} tensors ({nl} layers, hidden {h}; "
      f"f16 embd/output, Q8_0 attention, Q4_0 MLP, f32 norms)")
