"""test_py_threads.py - save_file(..., threads=N) and pack(..., threads=N)
write the bytes of the serial default (issue 19), stats and cast included."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import wpack  # noqa: E402

passed = failed = 0


def check(name, cond, msg=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok", name)
    else:
        failed += 1
        print("FAIL", name, msg)


def read(p):
    with open(p, "rb") as f:
        return f.read()


with tempfile.TemporaryDirectory() as d:
    rng = np.random.default_rng(3)
    a = rng.standard_normal(3000017).astype(np.float32)
    a[::65537] = np.nan
    t = {"a": a, "b": rng.standard_normal((1031, 1033)).astype(np.float16),
         "c": np.full(1 << 20, 2.5, np.float64)}
    outs = {}
    for n in (1, 2, 4):
        p = os.path.join(d, "s%d.wpack" % n)
        wpack.save_file(t, p, histogram_bins=16, threads=n)
        outs[n] = read(p)
    check("save_file_threads_same", outs[1] == outs[2] == outs[4])
    np.save(os.path.join(d, "a.npy"), a)
    packed = {}
    for n in (1, 3):
        p = os.path.join(d, "p%d.wpack" % n)
        wpack.pack(os.path.join(d, "a.npy"), p, cast="bf16", threads=n)
        packed[n] = read(p)
    check("pack_cast_threads_same", packed[1] == packed[3])
    with wpack.safe_open(os.path.join(d, "p3.wpack")) as f:
        check("pack_threads_readable", f.keys() == ["a"] or list(f.keys()) == ["a"])

print("# passed %d failed %d" % (passed, failed))
sys.exit(1 if failed else 0)
