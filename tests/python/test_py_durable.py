"""wpack Python package, durability: save_file, pack and torch.save_model
fsync by default (file and directory) and not with durable=False, with
the same bytes either way; update_stats (the in-place update) always
fsyncs. The calls run in a child under strace, counting fsync-family
system calls: strace missing is a failure, not a pass."""
import os
import shutil
import subprocess
import sys

import numpy as np

from pycase import case, check, main
import wpack

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "python")
SYNCS = ("fsync", "fdatasync", "sync_file_range", "syncfs", "sync")


def sync_calls(d, code):
    """Run code in a child python (the wpack package importable, variables
    D and np set) under strace; {syscall: count} of the sync family."""
    strace = shutil.which("strace")
    check(strace is not None, "strace is not installed (tools/deps.sh installs it)")
    log = os.path.join(d, "strace.log")
    env = dict(os.environ)
    preload = env.pop("LD_PRELOAD", "")  # for python (ASan builds), not for strace itself
    env["PYTHONPATH"] = PYDIR + os.pathsep + env.get("PYTHONPATH", "")
    prog = "import os, numpy as np, wpack, wpack.torch\nD = %r\n%s" % (d, code)
    cmd = [strace, "-f", "-qq", "-o", log, "-e", "trace=" + ",".join(SYNCS),
           "env", "LD_PRELOAD=" + preload, sys.executable, "-c", prog]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 0, "child failed: %s" % r.stderr.decode(errors="replace")[-2000:])
    counts = {}
    with open(log) as f:
        for line in f:
            for s in SYNCS:
                if (" %s(" % s) in line or line.startswith(s + "("):
                    counts[s] = counts.get(s, 0) + 1
    return counts


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


TENSORS = "T = {'w%d' % i: np.arange(300000 + i, dtype=np.float32) for i in range(3)}\n"


@case
def save_file_durable_by_default(d):
    c = sync_calls(d, TENSORS + "wpack.save_file(T, os.path.join(D, 'a.wpack'))")
    # the archive's fsync and its directory's (writeback kicks may add more)
    check(c.get("fsync", 0) >= 2, "save_file: want >= 2 fsyncs, saw %s" % c)


@case
def save_file_not_durable(d):
    c = sync_calls(d, TENSORS +
                   "wpack.save_file(T, os.path.join(D, 'a.wpack'))\n"
                   "wpack.save_file(T, os.path.join(D, 'b.wpack'), durable=False)\n")
    check(c.get("fsync", 0) >= 2, "the durable save: %s" % c)
    c2 = sync_calls(d, TENSORS + "wpack.save_file(T, os.path.join(D, 'c.wpack'), durable=False)")
    check(not c2, "durable=False: want no sync call, saw %s" % c2)
    check(same_bytes(os.path.join(d, "a.wpack"), os.path.join(d, "b.wpack")) and
          same_bytes(os.path.join(d, "a.wpack"), os.path.join(d, "c.wpack")),
          "durable=False changed the archive's bytes")
    with wpack.safe_open(os.path.join(d, "c.wpack")) as f:
        check(np.array_equal(f.get_tensor("w2"), np.arange(300002, dtype=np.float32)), "w2")


@case
def pack_durable_and_not(d):
    np.save(os.path.join(d, "x.npy"), np.arange(50000, dtype=np.float64))
    src = os.path.join(d, "x.npy")
    c = sync_calls(d, "wpack.pack(%r, os.path.join(D, 'p1.wpack'))" % src)
    check(c.get("fsync", 0) >= 2, "pack: want >= 2 fsyncs, saw %s" % c)
    c = sync_calls(d, "wpack.pack(%r, os.path.join(D, 'p2.wpack'), durable=False)" % src)
    check(not c, "pack(durable=False): want no sync call, saw %s" % c)
    check(same_bytes(os.path.join(d, "p1.wpack"), os.path.join(d, "p2.wpack")),
          "pack(durable=False) changed the bytes")


@case
def torch_save_model_durable_and_not(d):
    model = "import torch\ntorch.manual_seed(0)\nm = torch.nn.Linear(64, 32)\n"
    c = sync_calls(d, model + "wpack.torch.save_model(m, os.path.join(D, 'm1.wpack'))")
    check(c.get("fsync", 0) >= 2, "save_model: want >= 2 fsyncs, saw %s" % c)
    c = sync_calls(d, model +
                   "wpack.torch.save_model(m, os.path.join(D, 'm2.wpack'), durable=False)")
    check(not c, "save_model(durable=False): want no sync call, saw %s" % c)
    check(same_bytes(os.path.join(d, "m1.wpack"), os.path.join(d, "m2.wpack")),
          "save_model(durable=False) changed the bytes")


@case
def update_stats_always_fsyncs(d):
    p = os.path.join(d, "u.wpack")
    wpack.save_file({"w": np.ones(16, dtype=np.float32)}, p, durable=False)
    rec = {"u": {"kind": "activation", "count": 4, "min": -1.0, "max": 1.0, "mean": 0.0}}
    c = sync_calls(d, "wpack.update_stats(%r, %r)" % (p, rec))
    check(c.get("fsync", 0) >= 2, "update_stats (crash-safe in place): want fsyncs, saw %s" % c)
    with wpack.safe_open(p) as f:
        check(f.stats("u", kind="activation")["max"] == 1.0, "the record is there")


@case
def writer_options_field(d):
    from wpack import _lib
    opt = _lib.WriterOptions()
    _lib.lib.wpack_writer_options_init(opt)
    check(opt.no_sync == 0, "wpack_writer_options_init: no_sync must default to 0 (durable)")


if __name__ == "__main__":
    main()
