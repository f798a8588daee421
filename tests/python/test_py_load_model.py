"""wpack.torch.load_model is torch's load_state_dict over the archive:
load_state_dict pre- and post-hooks run, a module's own _load_from_state_dict
(BatchNorm's) too, with entries that are not zero-copy read one at a time
(stand-ins), and a failed read raising its wpack.Error."""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

from pycase import ASAN, asan_note, case, check, main, raises
import wpack
import wpack.torch as wt

torch.manual_seed(25)
# a stand-in's read raising inside torch's dispatch is a C++ exception there
_CXX = "an exception raised inside torch's dispatch is a C++ exception, which aborts there"


class Renamed(nn.Module):
    """A module whose old checkpoints said "w" for "weight": its pre-hook
    renames the key (the pattern torch's own modules use for old versions),
    its post-hook records the keys reported."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(64, 64))
        self.seen, self.post = None, []
        self._register_load_state_dict_pre_hook(self._rename)
        self.register_load_state_dict_post_hook(
            lambda mod, keys: mod.post.append((list(keys.missing_keys), list(keys.unexpected_keys))))

    def _rename(self, state, prefix, *rest):
        if prefix + "w" in state:
            v = state.pop(prefix + "w")
            self.seen = (isinstance(v, torch.Tensor), tuple(v.shape), v.dtype)
            state[prefix + "weight"] = v


def _both(m_fn, p):
    """(torch's load_state_dict over load_file, load_model), each into a new m_fn()."""
    a, b = m_fn(), m_fn()
    ra = a.load_state_dict(wpack.load_file(p, framework="pt"))
    rb = wt.load_model(b, p)
    return a, ra, b, rb


@case
def load_model_runs_load_state_dict_hooks(d):
    # load_model copied tensors itself: a pre-hook that renames an old key
    # never ran (strict: RuntimeError "missing keys ['0.weight'], unexpected
    # keys ['0.w']"), nor a post-hook
    w = (torch.arange(4096) % 7).float().reshape(64, 64)   # compresses
    for compress in (0, 3):   # plain: zero-copy tensors; zstd: stand-ins
        p = os.path.join(d, "old%d.wpack" % compress)
        wpack.save_file({"0.w": w}, p, compress_level=compress, compress_min=0)
        m = nn.Sequential(Renamed())
        r = wt.load_model(m, p)
        check(r == ([], []) and torch.equal(m[0].weight.detach(), w),
              "compress %d: %s %s" % (compress, r, m[0].weight))
        check(m[0].seen == (True, (64, 64), torch.float32), "hook saw %s" % (m[0].seen,))
        check(m[0].post == [([], [])], "post-hook: %s" % m[0].post)
        with wpack.safe_open(p) as f:
            check(f.describe("0.w")["codec"] == ("zstd" if compress else "none"), "codec")


@case
def load_model_is_load_state_dict_for_batchnorm(d):
    # BatchNorm's _load_from_state_dict adds num_batches_tracked to a state
    # without it (a checkpoint of an older torch, or one converted from
    # elsewhere); load_model said it was missing
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    m(torch.randn(8, 3))
    sd = {k: v for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked")}
    p = os.path.join(d, "bn.wpack")
    wpack.save_file(sd, p)
    make = lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))  # noqa: E731
    a, ra, b, rb = _both(make, p)
    check(tuple(rb) == tuple(ra) == ([], []), "keys %s %s" % (rb, ra))
    for k, v in a.state_dict().items():
        check(torch.equal(v, b.state_dict()[k]), k)
    # the same errors as torch's, after "load_model(PATH): "
    small = lambda: nn.Sequential(nn.Linear(3, 5))  # noqa: E731
    e1 = raises(RuntimeError, small().load_state_dict, wpack.load_file(p, framework="pt"))
    e2 = raises(RuntimeError, wt.load_model, small(), p)
    check(str(e2) == "load_model(%s): %s" % (p, e1), "%s\n%s" % (e2, e1))


@case
def load_model_reads_stand_ins_one_at_a_time(d):
    # the entries that are copies (zstd here) are read as torch uses them,
    # not all before the load: peak memory is the model and one entry, not
    # the model twice (8 entries of 16 MiB)
    if ASAN:
        print("# note: load_model_reads_stand_ins_one_at_a_time: RSS bound not checked under ASan")
        return
    p = os.path.join(d, "z.wpack")
    n, size = 8, 4 << 20   # 16 MiB of f32 each
    wpack.save_file({"%d.weight" % i: (torch.arange(size) % 251).float().reshape(1024, -1)
                     for i in range(n)}, p, compress_level=1, weight_stats=False)
    with wpack.safe_open(p) as f:
        check(all(f.describe(k)["codec"] == "zstd" for k in f.keys()), "zstd entries")
    probe = ("import resource, sys, torch, wpack.torch as wt\n"
             "m = torch.nn.Sequential(*[torch.nn.Linear(%d, 1024, bias=False) for _ in range(%d)])\n"
             "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "wt.load_model(m, sys.argv[1])\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
             "print(int(m[3].weight[5, 7]))\n" % (size // 1024, n))
    r = subprocess.run([sys.executable, "-c", probe, p], capture_output=True, text=True,
                       timeout=300)
    out = r.stdout.split()
    check(len(out) == 2, "rc %d %r %r" % (r.returncode, r.stdout, r.stderr[-300:]))
    grew = int(out[0]) >> 10
    check(out[1] == str((5 * 4096 + 7) % 251), "values: %s" % out[1])
    # one entry's copy (16 MiB) and its decoding buffers; all of them: 128 MiB
    check(grew < 64, "peak RSS grew %d MiB over the model" % grew)


@case
def load_model_raises_a_failed_read_as_itself(d):
    # torch's copy_ wraps what reading a stand-in raises in its RuntimeError;
    # load_model raises the wpack.Error (which tensor, which check)
    if asan_note("load_model_raises_a_failed_read_as_itself", _CXX):
        return
    p = os.path.join(d, "bad.wpack")
    wpack.save_file({"0.weight": (torch.arange(4096) % 7).float().reshape(64, 64)}, p,
                    compress_level=1, compress_min=0, weight_stats=False)
    with wpack.safe_open(p) as f:
        check(f.describe("0.weight")["codec"] == "zstd", "zstd")
        t = f._find("0.weight")
        off = int(t.offset)
    with open(p, "r+b") as fh:   # the stored frame's last byte: the XXH3 no longer matches
        fh.seek(off + int(t.stored_length) - 1)
        b = fh.read(1)
        fh.seek(off + int(t.stored_length) - 1)
        fh.write(bytes([b[0] ^ 0x40]))
    m = nn.Sequential(nn.Linear(64, 64, bias=False))
    e = raises(wpack.Error, wt.load_model, m, p)
    check("'0.weight'" in str(e) and e.name in ("WPACK_E_CHECKSUM", "WPACK_E_CORRUPT",
                                                 "WPACK_E_DECODE"), "%s %s" % (e.name, e))
    # torch 1.13 has no u16: the entry's own refusal, naming it
    q = os.path.join(d, "u16.wpack")
    wpack.save_file({"0.weight": np.zeros((2, 2), np.uint16)}, q)
    e = raises(wpack.Error, wt.load_model, nn.Sequential(nn.Linear(2, 2, bias=False)), q,
               code="WPACK_E_UNSUPPORTED")
    check("'0.weight'" in str(e), str(e))


@case
def load_model_stand_ins_after_the_load_read_nothing(d):
    # a hook that keeps a stand-in past the load: using it then is a
    # wpack.Error (the archive is closed), never a read of a closed handle
    if asan_note("load_model_stand_ins_after_the_load_read_nothing", _CXX):
        return
    kept = []

    def keep(state, prefix, *rest):
        kept.append(state[prefix + "bias"])   # zstd: a stand-in
    p = os.path.join(d, "k.wpack")
    m = nn.Sequential(nn.Linear(64, 64))
    with torch.no_grad():
        m[0].bias.copy_(torch.arange(64.0) % 3)   # compresses
    wpack.save_file(m.state_dict(), p, compress_level=1, compress_min=0)
    with wpack.safe_open(p) as f:
        check(f.describe("0.bias")["codec"] == "zstd", "zstd")
    m2 = nn.Sequential(nn.Linear(64, 64))
    m2[0]._register_load_state_dict_pre_hook(keep)
    wt.load_model(m2, p)
    check(torch.equal(m2[0].bias, m[0].bias), "loaded")
    check(len(kept) == 1 and tuple(kept[0].shape) == (64,), "kept %d" % len(kept))
    raises(wpack.Error, kept[0].sum, code="WPACK_E_STATE")


@case
def assign_refuses_as_load_state_dict_does_and_before_assigning(d):
    # load_model(assign=True) said "missing keys [], unexpected keys [...]"
    # (torch: "Error(s) in loading state_dict for Sequential:\n\tUnexpected
    # key(s) in state_dict: ...", what assign=False raises), and a shape
    # mismatch raised at the first such key with the keys before it already
    # replaced: the model half loaded, the other mismatches unnamed
    make = lambda n: nn.Sequential(nn.Linear(3, n), nn.Linear(n, 2))  # noqa: E731
    p = os.path.join(d, "m.wpack")
    wt.save_model(make(4), p)
    for model, strict in ((make(5), True), (make(5), False), (nn.Sequential(nn.Linear(3, 4)), True),
                          (nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2), nn.Linear(2, 2)), True)):
        try:
            model.load_state_dict(wpack.load_file(p, framework="pt"), strict=strict)
        except RuntimeError as e:
            want = str(e)
        before = [id(t) for t in model.state_dict(keep_vars=True).values()]
        e = raises(RuntimeError, wt.load_model, model, p, strict=strict, assign=True)
        check(str(e) == "load_model(%s): %s" % (p, want), "assign=True: %s\ntorch: %s" % (e, want))
        e2 = raises(RuntimeError, wt.load_model, model, p, strict=strict)
        check(str(e2) == str(e), "assign=False: %s" % e2)
        check([id(t) for t in model.state_dict(keep_vars=True).values()] == before,
              "assign=True replaced tensors of the model before refusing it")


if __name__ == "__main__":
    main()
