#!/usr/bin/env python3
"""make_torch.py DIR - the torch_* inputs of tests/hostile/round2/ (issue 14
points 2 and 3, issue 13 point 7), checked by tests/cli/test_torch_hostile.sh.

Files torch can write are written by torch 1.13 (/usr/bin/python3); pickles
torch would never write are crafted here byte by byte. Deterministic: run it
again to regenerate the committed files.

  torch_expand_4tib.pt      torch.empty(1).expand(2**20, 2**20): a 4 TiB view of one element
  torch_expand_small.pt     small stride-0 views (splats) and a broadcast row view, for a round trip
  torch_expand_partial.pt   arange(2).reshape(2, 1).expand(2, 2**40): strides (1, 0), 8 TiB
  torch_views_256.pt        256 overlapping 16 KiB views of one storage (4 MiB materialised)
  torch_memo_paths_16e6.pt  one tensor reached through 16^6 memo paths (6 levels of 16 keys)
  torch_memo_paths_16e5.pt  the same with 16^5 paths (1M aliases)
  torch_ordereddict_copies.pt  a 1000-pair list copied into OrderedDict 20,000 times
  torch_memo_index.pt       LONG_BINPUT 4,000,000 in a 30-byte pickle (a 32 MB memo table)
  torch_memo_strings.pt     one 64 KiB string under 2,000 keys (128 MB of metadata strings)
  torch_complex.pt          a complex64 tensor
  torch_quantized.pt        a per-tensor quantized tensor (quint8)
  torch_quantized_channel.pt  a per-channel quantized tensor (qint8)
  torch_ckpt_bytes_bigint.pt  a training checkpoint with b'..' and ints >= 2**64 (protocol 2)
  torch_ckpt_bytes_p4.pt    the same saved with pickle protocol 4 (BINBYTES, LONG1)
"""
import os
import struct
import sys
import zipfile

import torch

D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
os.makedirs(D, exist_ok=True)


def path(name):
    return os.path.join(D, name)


# --- written by torch ------------------------------------------------------
torch.save({"w": torch.empty(1).fill_(0.5).expand(2**20, 2**20)}, path("torch_expand_4tib.pt"))

base = torch.arange(10, dtype=torch.float32)
torch.save({
    "splat_f32": torch.tensor(2.5).expand(3, 5),                     # strides (0, 0)
    "splat_offset": base[4:5].expand(6),                             # offset 4, stride 0
    "splat_i64": torch.tensor([7], dtype=torch.int64).expand(4, 2),  # (1,) -> (0, 0)
    "splat_bf16": torch.tensor([-1.25], dtype=torch.bfloat16).expand(2, 3, 4),
    "splat_bool": torch.tensor([True]).expand(5),
    "row_bcast": torch.arange(3, dtype=torch.float32).reshape(3, 1).expand(3, 4),  # (1, 0)
    "plain": torch.arange(6, dtype=torch.float32).reshape(2, 3),
}, path("torch_expand_small.pt"))

torch.save({"w": torch.arange(2, dtype=torch.float32).reshape(2, 1).expand(2, 2**40)},
           path("torch_expand_partial.pt"))

store = torch.arange(4096 + 255, dtype=torch.float32)
torch.save({"v%d" % i: store[i:i + 4096] for i in range(256)}, path("torch_views_256.pt"))

torch.save({"w": torch.zeros(2, dtype=torch.complex64)}, path("torch_complex.pt"))
torch.save({"w": torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)},
           path("torch_quantized.pt"))
torch.save({"w": torch.quantize_per_channel(torch.ones(2, 3), torch.tensor([0.1, 0.2]),
                                            torch.tensor([0, 0]), 0, torch.qint8)},
           path("torch_quantized_channel.pt"))

ckpt = {
    "model": {"fc.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
              "fc.bias": torch.zeros(2)},
    "epoch": 3,
    "tokenizer_blob": b"\x00\x01ab",
    "seed": 2**70,
    "neg_big": -2**64,
    "lr": 0.5,
}
torch.save(ckpt, path("torch_ckpt_bytes_bigint.pt"))
torch.save(ckpt, path("torch_ckpt_bytes_p4.pt"), pickle_protocol=4)


# --- crafted pickles (torch never writes these) ----------------------------
def zip_write(p, members):
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            zi = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            z.writestr(zi, data)


def su(s):  # SHORT_BINUNICODE
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def tensor_f32(key, numel, size, stride):
    def tup(v):
        return b"(" + b"".join(b"J" + struct.pack("<i", x) for x in v) + b"t"
    pid = b"(" + su("storage") + b"ctorch\nFloatStorage\n" + su(key) + su("cpu") + \
        b"J" + struct.pack("<i", numel) + b"tQ"
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"J\x00\x00\x00\x00" + tup(size) +
            tup(stride) + b"\x89ccollections\nOrderedDict\n)RtR")


def torch_zip(p, pkl, storages):
    zip_write(p, [("archive/data.pkl", pkl)] +
              [("archive/data/" + k, v) for k, v in storages] + [("archive/version", b"3\n")])


def memo_paths(levels):
    """Level 0 is a tensor (memo 0); level k a dict of 16 keys, each the
    level below (memo k): the tensor is reached through 16^levels paths."""
    out = b"\x80\x02" + tensor_f32("0", 1, [1], [1]) + b"q\x000"
    for k in range(1, levels + 1):
        out += b"}(" + b"".join(su("abcdefghijklmnop"[i]) + b"h" + bytes([k - 1])
                                for i in range(16)) + b"uq" + bytes([k])
        out += b"0" if k < levels else b"."
    return out


one = struct.pack("<f", 1.0)
torch_zip(path("torch_memo_paths_16e6.pt"), memo_paths(6), [("0", one)])
torch_zip(path("torch_memo_paths_16e5.pt"), memo_paths(5), [("0", one)])

# OrderedDict([1000 pairs]) called 20,000 times on one memoised list: 7 bytes
# of pickle per call, 2,000 references copied per call.
pairs = b"".join(su("k%d" % i) + b"K\x01\x86" for i in range(1000))
od = (b"\x80\x02ccollections\nOrderedDict\nq\x00](" + pairs + b"eq\x01" +
      b"h\x00h\x01\x85R0" * 20000 + b"00}.")
torch_zip(path("torch_ordereddict_copies.pt"), od, [])

torch_zip(path("torch_memo_index.pt"), b"\x80\x02}r" + struct.pack("<I", 4000000) + b".", [])

# A tensor, and one 64 KiB string memoised, then under 2,000 keys (2 bytes
# each): 128 MB of metadata strings from an 82 KB file. Strings count against the names'
# budget (32 bytes per byte of data.pkl, at least 16 MiB).
big = b"s" * (64 << 10)
memo_str = (b"\x80\x02}(" + su("w") + tensor_f32("0", 1, [1], [1]) + su("k0") + b"X" +
            struct.pack("<I", len(big)) + big + b"q\x00")
memo_str += b"".join(su("k%d" % i) + b"h\x00" for i in range(1, 2000)) + b"u."
torch_zip(path("torch_memo_strings.pt"), memo_str, [("0", one)])
