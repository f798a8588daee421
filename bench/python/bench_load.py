"""Benchmark (not a test), issue 16: time to get every tensor of a state_dict
(f32 and bf16, ~200 tensors) as torch tensors from
  - wpack.load_file(framework="pt") (zero-copy), verify=False and verify=True
    (one thread, and threads=the CPU count up to 8)
  - torch.load of the same state_dict
  - np.load(mmap_mode="r") of one .npy per tensor (bf16 as uint16) + torch.from_numpy
and save throughput of wpack.save_file vs torch.save (best of two; for the
interleaved, fsync-fair comparison see bench_save.py). Files stay in the page
cache (second of two runs counts), so these are CPU costs, not disk reads.

usage: PYTHONPATH=python /usr/bin/python3 bench/python/bench_load.py [MiB] [DIR]
(default 2048 MiB in a temporary directory)."""
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

import wpack


def make_state_dict(mib, n=200):
    per = (mib << 20) // n
    sd = {}
    for i in range(n):
        if i % 2:
            cols = 1024
            rows = max(1, per // (cols * 2))
            sd["layers.%d.weight" % i] = torch.randn(rows, cols).to(torch.bfloat16)
        else:
            cols = 1024
            rows = max(1, per // (cols * 4))
            sd["layers.%d.weight" % i] = torch.randn(rows, cols)
    return sd


def best_of(fn, runs=2):
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        t.append(time.perf_counter() - t0)
        del out
    return min(t)


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    d = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="wpack-bench-")
    os.makedirs(d, exist_ok=True)
    sd = make_state_dict(mib)
    total = sum(t.numel() * t.element_size() for t in sd.values())
    pt, wp, npd = os.path.join(d, "m.pt"), os.path.join(d, "m.wpack"), os.path.join(d, "npy")
    try:
        t_tsave = best_of(lambda: torch.save(sd, pt))
        t_wsave_ns = best_of(lambda: wpack.save_file(sd, wp, weight_stats=False))
        t_wsave = best_of(lambda: wpack.save_file(sd, wp))
        os.makedirs(npd, exist_ok=True)
        for k, v in sd.items():
            a = v.view(torch.int16).numpy().view(np.uint16) if v.dtype == torch.bfloat16 \
                else v.numpy()
            np.save(os.path.join(npd, k + ".npy"), a)

        def via_npy():
            out = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # from_numpy of a read-only memmap
                for k, v in sd.items():
                    a = np.load(os.path.join(npd, k + ".npy"), mmap_mode="r")
                    t = torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a)
                    out[k] = t.view(torch.bfloat16) if v.dtype == torch.bfloat16 else t
            return out

        t_tload = best_of(lambda: torch.load(pt))
        t_wload = best_of(lambda: wpack.load_file(wp, framework="pt", verify=False))
        t_wload_v = best_of(lambda: wpack.load_file(wp, framework="pt", verify=True))
        nt = min(os.cpu_count() or 1, 8)
        t_wload_vt = best_of(lambda: wpack.load_file(wp, framework="pt", verify=True, threads=nt))
        t_npy = best_of(via_npy)
        got = wpack.load_file(wp, framework="pt")
        assert all(torch.equal(got[k], v) for k, v in sd.items())
        gib = total / 2 ** 30
        print("state_dict: %d tensors, %.2f GiB (f32 and bf16)" % (len(sd), gib))
        print("load: torch.load %.3f s | wpack zero-copy %.4f s (%.0fx) | wpack verify=True "
              "%.3f s (%.1fx) | verify=True, threads=%d %.3f s (%.1fx) | np.load mmap %.4f s "
              "(wpack/np %.2f)"
              % (t_tload, t_wload, t_tload / t_wload, t_wload_v, t_tload / t_wload_v, nt,
                 t_wload_vt, t_tload / t_wload_vt, t_npy, t_wload / t_npy))
        print("save: torch.save %.3f s (%.2f GiB/s) | wpack.save_file %.3f s (%.2f GiB/s, %.2fx; "
              "with weight stats, the default) | weight_stats=False %.3f s (%.2fx)"
              % (t_tsave, gib / t_tsave, t_wsave, gib / t_wsave, t_tsave / t_wsave,
                 t_wsave_ns, t_tsave / t_wsave_ns))
    finally:
        if len(sys.argv) <= 2:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
