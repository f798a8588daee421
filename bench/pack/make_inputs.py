#!/usr/bin/env python3
"""make_inputs.py OUTDIR TOTAL_BYTES [NTENSORS]: the same f32 and bf16 tensors
as a torch checkpoint (model.pt), a safetensors file (model.safetensors), a
stored npz (model.npz, bf16 as uint16 bit patterns) and a directory of .npy
(npy/).  Used by bench/pack/run.sh and tests/cli/test_copy_range.sh."""
import json, os, struct, sys, zipfile

import numpy as np
import torch


def tensors(total, count):
    rng = np.random.default_rng(0)
    per = max(1, total // count)
    out = {}
    for i in range(count):
        bf16 = i % 2 == 1
        n = max(1, per // (2 if bf16 else 4))
        cols = 64 if n >= 64 else 1
        rows = max(1, n // cols)
        a = rng.standard_normal((rows, cols), dtype=np.float32)
        t = torch.from_numpy(a)
        out[f"layers.{i}.weight"] = t.to(torch.bfloat16) if bf16 else t
    return out


def save_safetensors(path, sd):
    header, blobs, off = {}, [], 0
    for k, t in sd.items():
        b = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[k] = {"dtype": "BF16" if t.dtype == torch.bfloat16 else "F32",
                     "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def arrays(sd):
    return {k: (t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16
                else t.numpy()) for k, t in sd.items()}


def main():
    out, total = sys.argv[1], int(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    os.makedirs(os.path.join(out, "npy"), exist_ok=True)
    sd = tensors(total, count)
    torch.save(sd, os.path.join(out, "model.pt"))
    save_safetensors(os.path.join(out, "model.safetensors"), sd)
    arr = arrays(sd)
    np.savez(os.path.join(out, "model.npz"), **arr)  # stored (no compression)
    for k, a in arr.items():
        np.save(os.path.join(out, "npy", k + ".npy"), a)


if __name__ == "__main__":
    main()
