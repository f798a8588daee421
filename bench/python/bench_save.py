"""Benchmark (not a test), issue 16: save throughput of wpack.save_file vs
torch.save on one state_dict (f32 and bf16 torch tensors, ~200 of them).

Peers, run interleaved (A B C D, A B C D, ...), median of the runs:
  torch.save                  what users call; leaves the data dirty in the
                              page cache (not durable when it returns)
  torch.save + fsync          the same made durable (os.fsync of the file and
                              of its directory): what wpack.save_file does
  wpack.save_file             default: XXH3 of every byte, weight stats,
                              temporary file + fsync + rename + directory fsync
  wpack.save_file(weight_stats=False)
  wpack.save_file(durable=False)   no fsync: the like-for-like peer of torch.save
  wpack.save_file(weight_stats=False, durable=False)
The durable rows compare with torch.save + fsync, the durable=False rows
with torch.save.

After each timed run the file is fsynced (untimed) and removed, so dirty
pages of one run do not slow the next. The machine is shared: the load
average before and after is printed; compare ratios, not seconds. The CPU
time of the process (user + system, all threads) is printed too: it varies
less with other processes' load than wall time does.

usage: PYTHONPATH=python /usr/bin/python3 bench/python/bench_save.py [MiB] [runs] [DIR]
(default 1024 MiB, 5 runs, a temporary directory under $TMPDIR or /tmp;
DIR=/dev/shm measures CPU cost with no disk).
"""
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

import torch

import wpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_load import make_state_dict  # noqa: E402  (the same state_dict as bench_load)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def torch_save(sd, path):
    torch.save(sd, path)


def torch_save_fsync(sd, path):
    torch.save(sd, path)
    fsync_path(path)
    fsync_path(os.path.dirname(path))


def wpack_save(sd, path):
    wpack.save_file(sd, path)


def wpack_save_nostats(sd, path):
    wpack.save_file(sd, path, weight_stats=False)


def wpack_save_nosync(sd, path):
    wpack.save_file(sd, path, durable=False)


def wpack_save_nostats_nosync(sd, path):
    wpack.save_file(sd, path, weight_stats=False, durable=False)


PEERS = [("torch.save", torch_save, "m.pt"),
         ("torch.save + fsync", torch_save_fsync, "m.pt"),
         ("wpack.save_file", wpack_save, "m.wpack"),
         ("wpack.save_file(weight_stats=False)", wpack_save_nostats, "m.wpack"),
         ("wpack.save_file(durable=False)", wpack_save_nosync, "m.wpack"),
         ("save_file(weight_stats=False, durable=False)", wpack_save_nostats_nosync, "m.wpack")]


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)   # every thread of this process
    return r.ru_utime + r.ru_stime


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    d = tempfile.mkdtemp(prefix="wpack-bench-save-", dir=sys.argv[3] if len(sys.argv) > 3 else None)
    sd = make_state_dict(mib)
    gib = sum(t.numel() * t.element_size() for t in sd.values()) / 2 ** 30
    load0 = os.getloadavg()
    times = {name: [] for name, _, _ in PEERS}
    cpu = {name: [] for name, _, _ in PEERS}
    try:
        for _ in range(runs):
            for name, fn, fname in PEERS:
                path = os.path.join(d, fname)
                c0, t0 = cpu_seconds(), time.perf_counter()
                fn(sd, path)
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(cpu_seconds() - c0)
                fsync_path(path)       # untimed: no dirty pages left for the next run
                os.unlink(path)
        got_path = os.path.join(d, "check.wpack")
        wpack.save_file(sd, got_path)
        got = wpack.load_file(got_path, framework="pt")
        assert all(torch.equal(got[k], v) for k, v in sd.items())
        del got
    finally:
        shutil.rmtree(d, ignore_errors=True)
    load1 = os.getloadavg()
    med = {k: statistics.median(v) for k, v in times.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print("CPU: %s, %d cores; load average %.1f before, %.1f after; dir %s"
          % (cpu_model(), os.cpu_count(), load0[0], load1[0], os.path.dirname(d)))
    print("state_dict: %d tensors, %.2f GiB (f32 and bf16); median of %d interleaved runs"
          % (len(sd), gib, runs))
    base, base_sync = med["torch.save"], med["torch.save + fsync"]
    print("  wall time (ratio: the peer's time / this one's; > 1 is faster):")
    for name, _, _ in PEERS:
        print("  %-46s %7.3f s  %6.2f GiB/s  %5.2fx torch.save  %5.2fx torch.save+fsync"
              "   (runs: %s)" % (name, med[name], gib / med[name], base / med[name],
                                 base_sync / med[name],
                                 " ".join("%.2f" % t for t in times[name])))
    print("  CPU time of this process (user + system; excludes the kernel's writeback):")
    base, base_sync = mcpu["torch.save"], mcpu["torch.save + fsync"]
    for name, _, _ in PEERS:
        print("  %-46s %7.3f s  %5.2fx torch.save  %5.2fx torch.save+fsync"
              % (name, mcpu[name], base / mcpu[name], base_sync / mcpu[name]))


if __name__ == "__main__":
    main()
