#!/usr/bin/env python3
"""torch_cases.py - real torch.save checkpoints for the importer tests, and the
check that `wpack extract` gives back exactly what torch.load gives.

  torch_cases.py make DIR         write DIR/<case>.pt for every case
  torch_cases.py check FILE.pt EXTRACTED_DIR [--key K] [--prefix P] [--cast bf16|f16]
      every tensor torch.load(FILE) holds (flattened to dotted names like
      wpack does) must be in EXTRACTED_DIR as NAME.npy with the same dtype,
      shape and bytes; prints 'ok N tensors' or the first difference.
"""
import os
import sys

import numpy as np
import torch

torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.attn = torch.nn.MultiheadAttention(8, 2)
        self.conv = torch.nn.Conv1d(8, 4, 3)
        self.bn = torch.nn.BatchNorm1d(4)
        self.head = torch.nn.Linear(8, 11, bias=False)
        self.head.weight = self.emb.weight  # tied


def make(d):
    os.makedirs(d, exist_ok=True)
    m = Block()
    m.bn(torch.randn(5, 4, 6))  # running stats and num_batches_tracked (an int64 0-d)
    sd = m.state_dict(keep_vars=False)
    torch.save(sd, f"{d}/model.pt")
    torch.save(m.state_dict(keep_vars=True), f"{d}/params.pt")  # Parameters: _rebuild_parameter
    base = torch.randn(6, 5)
    views = {
        "t": base.t(),                      # transposed (strides 1, 5)
        "rows": base[1:4],                  # offset view
        "cols": base[:, 1:4],               # offset + non-contiguous
        "step": base[::2, ::3],             # strided
        "same1": base[1:4], "same2": base[1:4],  # the same view twice: alias
        "expand": torch.randn(3, 1).expand(3, 4),  # stride 0
        "scalar": torch.tensor(2.5),        # 0-d
        "r6": torch.randn(2, 1, 3, 1, 2, 2),
        "r6t": torch.randn(2, 3, 1, 2, 2, 2).permute(5, 4, 3, 2, 1, 0),
        "empty": torch.zeros(0, 3),
        "f16": torch.randn(4, 3).half(),
        "bf16": torch.randn(4, 3).bfloat16(),
        "bf16t": torch.randn(4, 3).bfloat16().t(),
        "i8": torch.randint(-128, 127, (7,), dtype=torch.int8),
        "u8": torch.randint(0, 255, (7,), dtype=torch.uint8),
        "i16": torch.randint(-999, 999, (3, 3), dtype=torch.int16),
        "i32": torch.randint(-99999, 99999, (3, 3), dtype=torch.int32),
        "i64": torch.arange(10, dtype=torch.int64).reshape(2, 5)[:, 1:],
        "f64": torch.randn(3, 2, dtype=torch.float64),
        "bool": torch.rand(9) > 0.5,
    }
    torch.save(views, f"{d}/views.pt")
    ckpt = {"model": sd, "epoch": 3, "lr": 0.125, "name": "run-7", "best": True,
            "history": [1.5, 2.5], "optimizer": {"state": {0: {"step": torch.tensor(4.0)}},
                                                 "param_groups": [{"lr": 0.01, "params": [0]}]}}
    torch.save(ckpt, f"{d}/ckpt.pt")
    torch.save(torch.arange(6.0).reshape(2, 3), f"{d}/bare.pt")
    # cast cases: f32 values near rounding boundaries, f64, and specials
    u = np.array([0x3f800000, 0x3f808000, 0x3f818000, 0x3f7fffff, 0x7f7fffff, 0x00000001,
                  0x38800000, 0x387fe000, 0x477fe000, 0x477ff000, 0x33800000, 0x7fc00000,
                  0xff800000, 0x80000000, 0x3f801000, 0x3f803000], dtype=np.uint32)
    edge = torch.from_numpy(u.view(np.float32).copy())
    cast = {"edge": edge, "rand": torch.randn(1000) * 1000, "tiny": torch.randn(50) * 1e-6,
            "d": torch.randn(20, dtype=torch.float64), "ints": torch.arange(5),
            "h": torch.randn(5).half()}
    torch.save(cast, f"{d}/cast.pt")


def flatten(obj, prefix, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, f"{prefix}.{i}" if prefix else str(i), out)
    elif isinstance(obj, torch.Tensor):
        out[prefix or "tensor"] = obj.detach()
    return out


def as_bytes_array(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view("<u2")
    return t.numpy()


def check(path, ext, key=None, prefix=None, cast=None):
    obj = torch.load(path)
    if key:
        for part in key.split("."):
            obj = obj[part]
    tensors = flatten(obj, "", {})
    for name, t in tensors.items():
        full = f"{prefix}.{name}" if prefix else name
        f = os.path.join(ext, full + ".npy")
        if not os.path.exists(f):
            print(f"missing {full}")
            return 1
        got = np.load(f)
        if cast and t.is_floating_point() and t.dtype != {"bf16": torch.bfloat16, "f16": torch.float16}[cast]:
            t = t.to({"bf16": torch.bfloat16, "f16": torch.float16}[cast])
        want = as_bytes_array(t)
        if cast and got.shape == want.shape and got.dtype.str == want.dtype.str == "<u2":
            # NaN bit patterns may differ (torch 1.13 makes 0xffff, wpack 0x7fc0): both NaN is equal
            e = 0x7f80 if cast == "bf16" else 0x7c00
            m = 0x007f if cast == "bf16" else 0x03ff
            nan = lambda a: ((a & e) == e) & ((a & m) != 0)
            got = np.where(nan(got) & nan(want), want, got)
        if got.shape != want.shape or got.dtype.str != want.dtype.str or got.tobytes() != want.tobytes():
            print(f"differs {full}: got {got.dtype} {got.shape}, want {want.dtype} {want.shape}")
            return 1
    print(f"ok {len(tensors)} tensors")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        a = sys.argv[2:]
        opts = {}
        while len(a) > 2:
            opts[a[-2].lstrip("-")] = a[-1]
            a = a[:-2]
        sys.exit(check(a[0], a[1], **opts))
