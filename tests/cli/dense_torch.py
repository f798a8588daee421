"""dense_torch.py - PyTorch side of test_dense.sh.

  make DIR            seed MLP (DIR/seed), deeper MLP (DIR/deep) as .npy files,
                      with bf16/f16-rounded and int8 (weight + weight_scale) twins,
                      inputs x1/x7/x64/x256.npy
  check MODEL KIND Y.npy X.npy   compare wpack's output with torch.nn.Linear
  checkall LIST       the same for each line 'TEST MODEL KIND Y X' of LIST
  stats MODEL X.npy JSON        compare calibrated min/max with torch's
"""
import json
import os
import sys

import numpy as np
import torch

SPECS = {"seed": "0,1=relu,2", "deep": "0,1=relu,2,3=relu,4,5=relu,6"}


def models():
    torch.manual_seed(0)
    seed = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    torch.manual_seed(1)
    deep = torch.nn.Sequential(torch.nn.Linear(97, 257), torch.nn.ReLU(), torch.nn.Linear(257, 130),
                               torch.nn.ReLU(), torch.nn.Linear(130, 17, bias=False), torch.nn.ReLU(),
                               torch.nn.Linear(17, 3))
    return {"seed": seed, "deep": deep}


def int8_of(w):
    """Symmetric per-output-channel int8, kernel/README.md convention."""
    absmax = w.abs().amax(dim=1)
    scale = torch.where(absmax > 0, absmax / 127.0, torch.ones_like(absmax)).float()
    q = torch.clamp(torch.round(w / scale[:, None]), -127, 127).to(torch.int8)
    return q, scale


def rounded(model, kind):
    """A copy whose Linear weights are what wpack computes with for kind."""
    import copy
    m = copy.deepcopy(model)
    for l in m:
        if isinstance(l, torch.nn.Linear):
            with torch.no_grad():
                if kind == "bf16":
                    l.weight.copy_(l.weight.bfloat16().float())
                elif kind == "f16":
                    l.weight.copy_(l.weight.half().float())
                elif kind == "int8":
                    q, s = int8_of(l.weight)
                    l.weight.copy_(q.float() * s[:, None])
    return m


def make(d):
    for name, model in models().items():
        for kind in ("f32", "int8"):
            out = os.path.join(d, name + "_" + kind)
            os.makedirs(out, exist_ok=True)
            for i, l in enumerate(model):
                if not isinstance(l, torch.nn.Linear):
                    continue
                w = l.weight.detach()
                if kind == "int8":
                    q, s = int8_of(w)
                    np.save(os.path.join(out, "%d.weight.npy" % i), q.numpy())
                    np.save(os.path.join(out, "%d.weight_scale.npy" % i), s.numpy())
                else:
                    np.save(os.path.join(out, "%d.weight.npy" % i), w.numpy())
                if l.bias is not None:
                    np.save(os.path.join(out, "%d.bias.npy" % i), l.bias.detach().numpy())
        fin = model[0].in_features
        g = torch.Generator().manual_seed(7)
        for b in (1, 7, 64, 256):
            np.save(os.path.join(d, "%s_x%d.npy" % (name, b)), torch.randn(b, fin, generator=g).numpy())


_MODELS = {}


def check(name, kind, ypath, xpath):
    if (name, kind) not in _MODELS:
        _MODELS[(name, kind)] = rounded(models()[name], kind)
    m = _MODELS[(name, kind)]
    x = torch.from_numpy(np.load(xpath))
    with torch.no_grad():
        ref = m(x).numpy()
    y = np.load(ypath)
    if y.shape != ref.shape:
        raise ValueError("shape %s, torch %s" % (y.shape, ref.shape))
    scale = float(np.abs(ref).max())
    err = float(np.abs(y - ref).max())
    # f32 within 1e-5 relative; the rounded kinds against torch with the same weights
    if not err <= 1e-5 * scale:
        raise ValueError("%s %s: max error %.3g, %.3g relative (limit 1e-5)" % (name, kind, err, err / scale))


def check_all(listing):
    """Lines 'TEST NAME KIND Y X': print 'ok TEST' or 'FAIL TEST: why'."""
    for line in open(listing):
        test, name, kind, y, x = line.split()
        try:
            check(name, kind, y, x)
            print("ok", test)
        except Exception as e:  # noqa: BLE001 - reported as a failed case
            print("FAIL %s: %s" % (test, e))


def stats(name, xpath, jpath):
    m = models()[name]
    x = torch.from_numpy(np.load(xpath))
    info = json.load(open(jpath))
    got = {s["key"]: s for s in info["stats"] if s["kind"] == "activation"}
    h = x
    with torch.no_grad():
        for i, l in enumerate(m):
            h = l(h)
            s = got.get(str(i))
            if s is None:
                sys.exit("no activation stats for module %d" % i)
            scale = float(h.abs().max())
            for key, ref in (("min", float(h.min())), ("max", float(h.max())), ("mean", float(h.double().mean()))):
                if abs(s[key] - ref) > 1e-5 * scale:
                    sys.exit("module %d %s: wpack %r, torch %r" % (i, key, s[key], ref))
            if s["count"] != h.numel():
                sys.exit("module %d count %d, want %d" % (i, s["count"], h.numel()))
            var = float(h.double().var(unbiased=False))
            if abs(s["variance"] - var) > 1e-4 * max(var, 1e-12):
                sys.exit("module %d variance %r, torch %r" % (i, s["variance"], var))
            if "histogram" in s and sum(s["histogram"]["counts"]) != h.numel():
                sys.exit("module %d histogram counts do not add up" % i)
            if "histogram" in s:
                # numpy's bins over the same edges ([a, b), the last closed, as
                # the spec's); values within f32 rounding of an edge may land
                # on its other side in torch's sums, so a few counts may move
                edges = np.array(s["histogram"]["edges"])
                ref, _ = np.histogram(h.numpy().astype(np.float64), bins=edges)
                moved = int(np.abs(ref - np.array(s["histogram"]["counts"])).sum())
                if moved > 4 + h.numel() // 10000:
                    sys.exit("module %d histogram: %d counts differ from numpy's" % (i, moved))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "check":
        check(*sys.argv[2:6])
    elif cmd == "checkall":
        check_all(sys.argv[2])
    elif cmd == "stats":
        stats(*sys.argv[2:5])
