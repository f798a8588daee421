#!/usr/bin/python3
"""make_model.py DIR SIZE_BYTES - a directory of .npy shaped like a small
Llama-style decoder (what `wpack create` packs for bench/remote/run.sh):
an f16 embedding, per layer four h x h attention projections and three
h x ffn MLP projections in f16 plus two f32 norms of h elements, then a final
norm. h is 2048 from 1 GiB up (8 MiB and 22 MiB tensors, as a 1-7B model
has), smaller below so that a tiny smoke run still has several layers.
Layers are added while they fit in SIZE_BYTES; prints the byte count."""
import os
import sys

import numpy as np

d, size = sys.argv[1], int(sys.argv[2])
h = 2048 if size >= 1 << 30 else 1024 if size >= 128 << 20 else 256
ffn, vocab = h * 11 // 4, 32000 if h == 2048 else 8 * h
rng = np.random.default_rng(17)
total = 0


def put(name, shape, dtype):
    global total
    a = rng.standard_normal(shape, dtype=np.float32) * 0.02
    path = os.path.join(d, *name.split("/")) + ".npy"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, a.astype(dtype))
    total += a.size * np.dtype(dtype).itemsize


layer = (4 * h * h + 3 * h * ffn) * 2 + 2 * h * 4
put("model/embed_tokens.weight", (vocab, h), np.float16)
i = 0
while i == 0 or total + layer <= size:
    p = f"model/layers/{i}/"
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        put(p + "self_attn/" + n + ".weight", (h, h), np.float16)
    put(p + "mlp/gate_proj.weight", (ffn, h), np.float16)
    put(p + "mlp/up_proj.weight", (ffn, h), np.float16)
    put(p + "mlp/down_proj.weight", (h, ffn), np.float16)
    put(p + "input_layernorm.weight", (h,), np.float32)
    put(p + "post_attention_layernorm.weight", (h,), np.float32)
    i += 1
put("model/norm.weight", (h,), np.float32)
print(f"{total} bytes of tensor data: {i} layers, hidden {h}, ffn {ffn}, vocab {vocab}")
