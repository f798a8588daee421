"""wpack.torch: save/load of models, calibrate() against stats computed
with numpy from independently hooked outputs (Conv2d+BatchNorm+ReLU+Linear,
TransformerEncoderLayer whose eval fast path skips hooks), name maps from
make_fx and symbolic_trace graphs matched by storage identity."""
import os
import types
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from pycase import case, check, main, raises
import wpack
import wpack.torch as wt

torch.manual_seed(0)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 5)
        self.unused = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(self.relu(self.bn(self.conv(x))).flatten(1))


def reference(model, batches, names, train=False):
    """{module: float64 numpy of every output value} with plain hooks."""
    outs = {n: [] for n in names}
    mods = dict(model.named_modules())
    hs = [mods[n].register_forward_hook(
        lambda m, i, o, n=n: outs[n].append((o[0] if isinstance(o, tuple) else o)
                                            .detach().double().numpy().copy()))
        for n in names]
    model.train(train)
    with torch.no_grad():
        for b in batches:
            model(b)
    for h in hs:
        h.remove()
    return outs


def compare(res, ref, bins, what):
    for n, chunks in ref.items():
        check(n in res, "%s: no stats for %s" % (what, n))
        v = np.concatenate([c.reshape(-1) for c in chunks])
        v = v[np.isfinite(v)]
        r = res[n]
        check(r["count"] == v.size, "%s %s count %d != %d" % (what, n, r["count"], v.size))
        check(r["min"] == v.min() and r["max"] == v.max(), "%s %s min/max" % (what, n))
        check(np.isclose(r["mean"], v.mean(), rtol=1e-9, atol=1e-12), "%s %s mean" % (what, n))
        check(np.isclose(r["variance"], v.var(), rtol=1e-9, atol=1e-12), "%s %s var" % (what, n))
        edges = np.linspace(v.min(), v.max(), bins + 1) if v.min() < v.max() else None
        if edges is not None:
            counts, _ = np.histogram(v, bins=edges)
            check(np.array_equal(r["histogram"][1], counts), "%s %s histogram" % (what, n))


@case
def save_and_load_model(d):
    m = ConvNet().eval()
    m.fc.weight.data[0, 0] = float("nan")
    p = os.path.join(d, "m.wpack")
    wt.save_model(m, p, metadata={"arch": "convnet"})
    m2 = ConvNet().eval()
    missing, unexpected = wt.load_model(m2, p)
    check(missing == [] and unexpected == [], "keys")
    for k, v in m.state_dict().items():
        check(torch.equal(v, m2.state_dict()[k]) or (torch.isnan(v).any() and
              torch.equal(torch.nan_to_num(v), torch.nan_to_num(m2.state_dict()[k]))), k)
    m3 = ConvNet().eval()
    wt.load_model(m3, p, assign=True)
    check(m3.conv.weight.requires_grad and isinstance(m3.conv.weight, nn.Parameter), "param")
    x = torch.randn(2, 3, 8, 8)
    m.fc.weight.data[0, 0] = 0.0
    m3.fc.weight.data[0, 0] = 0.0   # writable: private mapping
    with torch.no_grad():
        check(torch.equal(m(x), m3(x)), "assigned model output")
    with wpack.safe_open(p) as f:
        check(f.get_tensor("fc.weight")[0, 0] != 0.0, "the file kept its bytes")
    small = nn.Linear(2, 2)
    raises(RuntimeError, wt.load_model, small, p)
    missing, unexpected = wt.load_model(nn.Sequential(), p, strict=False)
    check(len(unexpected) == len(m.state_dict()), "unexpected")
    # reported as nn.Module.load_state_dict reports them: a named tuple of
    # missing_keys and unexpected_keys (load_model gave a bare pair)
    part = ConvNet()
    part.extra = nn.Linear(2, 2)
    del part.fc
    r = wt.load_model(part, p, strict=False)
    want = ConvNet()
    want.extra = nn.Linear(2, 2)
    del want.fc
    want = want.load_state_dict(m.state_dict(), strict=False)
    check(r.missing_keys == ["extra.weight", "extra.bias"] == want.missing_keys and
          r.unexpected_keys == ["fc.bias", "fc.weight"] == sorted(want.unexpected_keys), r)
    check(r == (r.missing_keys, r.unexpected_keys), "still a pair")
    bad = ConvNet()
    bad.fc = nn.Linear(3, 3)
    raises(RuntimeError, wt.load_model, bad, p, strict=False)


class TiedLM(nn.Module):
    def __init__(self, tie=True):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.fc = nn.Linear(4, 10, bias=False)
        if tie:
            self.fc.weight = self.emb.weight

    def forward(self, x):
        return self.fc(self.emb(x))


@case
def load_model_assign_keeps_ties(d):
    # assign=True gave each key its own new Parameter: fc.weight stopped
    # being emb.weight and the model grew a parameter.
    m = TiedLM()
    p = os.path.join(d, "t.wpack")
    wt.save_model(m, p)
    with wpack.safe_open(p) as f:
        check(f.describe("fc.weight")["kind"] == "alias", "saved tied")
    m2 = TiedLM()
    n_params = len(list(m2.parameters()))
    wt.load_model(m2, p, assign=True)
    check(m2.fc.weight is m2.emb.weight, "tied in the model: still one Parameter")
    check(len(list(m2.parameters())) == n_params, "parameter count grew")
    check(torch.equal(m2.emb.weight, m.emb.weight), "values")
    x = torch.tensor([1, 2, 3])
    with torch.no_grad():
        check(torch.equal(m2(x), m(x)), "output")
    # Not tied in the model but one entry in the archive (an alias): one object too.
    m3 = TiedLM(tie=False)
    wt.load_model(m3, p, assign=True)
    check(m3.fc.weight is m3.emb.weight, "an alias entry in the archive: one Parameter")
    # Not tied anywhere: separate objects.
    m4 = TiedLM(tie=False)
    q = os.path.join(d, "u.wpack")
    wt.save_model(m4, q)
    wt.load_model(m4, q, assign=True)
    check(m4.fc.weight is not m4.emb.weight, "untied stays untied")


class WithExtraState(nn.Module):
    """A module whose extra state is a tensor (TransformerEngine keeps its
    fp8 metadata so): state_dict() stores it under "_extra_state"."""

    def __init__(self, n=2):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.scale = torch.zeros(n)

    def get_extra_state(self):
        return self.scale.clone()

    def set_extra_state(self, state):
        self.scale = state.clone()


@case
def load_model_gives_extra_state_back(d):
    # load_model copied into the tensor get_extra_state() had returned (a
    # throwaway: nothing loaded) or, with assign=True, set an attribute
    # "_extra_state": set_extra_state was never called and the state was
    # lost without a word. load_state_dict gives it back through
    # set_extra_state, whatever its size.
    m = nn.Sequential(WithExtraState(3))
    m[0].scale = torch.tensor([1.5, -2.0, 4.0])
    p = os.path.join(d, "x.wpack")
    wt.save_model(m, p)
    with wpack.safe_open(p) as f:
        check("0._extra_state" in f.keys(), "saved: %s" % f.keys())
    for assign, n in ((False, 3), (True, 3), (False, 2), (True, 2)):   # 2: no shape check
        m2 = nn.Sequential(WithExtraState(n))
        r = wt.load_model(m2, p, assign=assign)
        what = "assign=%s, size %d" % (assign, n)
        check(r == ([], []), "%s: %s" % (what, r))
        check(torch.equal(m2[0].scale, m[0].scale),
              "%s: the extra state not given back: %s" % (what, m2[0].scale))
        check(torch.equal(m2[0].lin.weight, m[0].lin.weight), "%s: weights" % what)
        check("_extra_state" not in vars(m2[0]), "%s: set as an attribute" % what)


@case
def load_model_materializes_lazy_modules(d):
    # load_state_dict gives a lazy module's uninitialized parameters and
    # buffers the checkpoint's shapes; load_model raised torch's "Can't
    # access the shape of an uninitialized parameter" for both copy and assign.
    def lazy():
        import warnings
        with warnings.catch_warnings():   # "a new feature under heavy development"
            warnings.simplefilter("ignore")
            return nn.Sequential(nn.LazyLinear(4), nn.LazyBatchNorm1d())
    m = lazy()
    m(torch.randn(5, 3))   # initialized: Linear(3, 4), BatchNorm1d(4), running stats updated
    m.eval()
    p = os.path.join(d, "lazy.wpack")
    wt.save_model(m, p)
    x = torch.randn(2, 3)
    with torch.no_grad():
        want = m(x)
    for assign in (False, True):
        m2 = lazy()
        r = wt.load_model(m2, p, assign=assign)
        check(r == ([], []), "keys %s" % (r,))
        for k, v in m.state_dict().items():
            got = m2.state_dict()[k]
            check(got.shape == v.shape and got.dtype == v.dtype and torch.equal(got, v),
                  "assign=%s %s" % (assign, k))
        m2.eval()
        with torch.no_grad():
            check(torch.equal(m2(x), want), "assign=%s forward" % assign)

@case
def load_model_into_meta_parameters_warns(d):
    # copy_ into a meta tensor does nothing: load_model returned as if the
    # weights were loaded (torch >= 2.1's load_state_dict warns so too).
    m = nn.Sequential(nn.Linear(3, 2))
    p = os.path.join(d, "m.wpack")
    wt.save_model(m, p)
    meta = nn.Sequential(nn.Linear(3, 2, device="meta"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        wt.load_model(meta, p)
    said = " ".join(str(x.message) for x in w)
    check("0.weight is a meta tensor" in said and "assign=True" in said, "warnings: %r" % said)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        wt.load_model(meta, p, assign=True)
    check(not w and torch.equal(meta[0].weight, m[0].weight), "assign=True loads it, quietly")


@case
def calibrate_arguments_checked_up_front(d):
    m = ConvNet()
    batches = [torch.randn(2, 3, 8, 8) for _ in range(3)]
    p = os.path.join(d, "c.wpack")
    ran = []

    def counted():
        for b in batches:
            ran.append(1)
            yield b
    # A negative axis counts from the end of the output's rank (as torch);
    # one beyond it fails at the first batch, not after all of them.
    res = wt.calibrate(m, batches, p, histogram=0, modules=["conv"], axis=-3)
    check(res["conv"]["axis"] == 1 and res["conv"]["channels"] == 4, "axis -3 of rank 4 is 1")
    with wpack.safe_open(p) as f:
        check(f.stats("conv")["axis"] == 1, "stored axis")
    e = raises(ValueError, wt.calibrate, m, counted(), p, histogram=0, modules=["fc"], axis=-3)
    check(len(ran) == 1 and "'fc'" in str(e) and "rank 2" in str(e), "%d batches: %s" % (len(ran), e))
    for kw, exc in ((dict(histogram=-3), ValueError), (dict(axis=8), ValueError),
                    (dict(axis=-9), ValueError), (dict(axis=1.0), TypeError),
                    (dict(modules=[""]), ValueError), (dict(modules="nope"), ValueError)):
        ran.clear()
        raises(exc, wt.calibrate, m, counted(), p, **dict(dict(histogram=0), **kw))
        check(ran == [], "%s: ran %d batches first" % (kw, len(ran)))
    e = raises(ValueError, wt.calibrate, m, batches, p, modules="nope")
    check("no such modules: 'nope'" in str(e), str(e))
    # A str is one module; a name given twice is measured once.
    one = wt.calibrate(m, batches, p, histogram=0, modules="fc")
    two = wt.calibrate(m, batches, p, histogram=0, modules=["fc", "fc"])
    check(list(one) == ["fc"] and one["fc"]["count"] == 2 * 5 * 3, "str modules: %s" % one)
    check(two["fc"]["count"] == one["fc"]["count"], "duplicates counted twice")
    # A module registered under two paths (shared) is found by either:
    # named_modules() lists it once, so its second path was "no such module".
    shared = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    shared.add_module("again", shared[0])
    q = os.path.join(d, "shared.wpack")
    res = wt.calibrate(shared, [torch.randn(3, 4)], q, histogram=0, modules=["again"])
    check(list(res) == ["again"] and res["again"]["count"] == 2 * 12,   # run twice
          "shared: %s" % dict(res))
    # The records have the fields and types safe_open.stats() returns.
    for hist in (0, 8):
        res = wt.calibrate(m, batches, p, histogram=hist, modules=["fc"])
        with wpack.safe_open(p) as f:
            stored = f.stats("fc", kind="activation")
        got = res["fc"]
        check(sorted(got) == sorted(stored), "fields %s != %s" % (sorted(got), sorted(stored)))
        for k, v in stored.items():
            if k == "histogram":
                check((v is None) == (got[k] is None), "histogram")
            else:
                check(type(v) == type(got[k]) and np.array_equal(v, got[k]), "%s: %r %r"
                      % (k, got[k], v))
    # A model that is itself a leaf has no module path to key its stats by:
    # refused up front, saying how (it recorded nothing and said nothing).
    q = os.path.join(d, "leaf.wpack")
    e = raises(ValueError, wt.calibrate, nn.Linear(3, 2), [torch.randn(2, 3)], q)
    check("nn.Sequential" in str(e) and not os.path.exists(q), str(e))
    seq = nn.Sequential(nn.Linear(3, 2))
    res = wt.calibrate(seq, [torch.randn(2, 3)], q, histogram=0)
    check(list(res) == ["0"], "wrapped: %s" % list(res))


@case
def calibrate_conv_bn_relu_linear(d):
    m = ConvNet()
    m.bn.running_mean.uniform_(-1, 1)
    batches = [torch.randn(4, 3, 8, 8) for _ in range(3)]
    batches[1][0, 0, 0, 0] = float("nan")
    p = os.path.join(d, "c.wpack")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = wt.calibrate(m, batches, p, histogram=32)
    check(m.training, "training flag restored")
    check(res.no_output == ["unused"], "no_output %s" % res.no_output)
    check(any("unused" in str(x.message) for x in w), "no warning names unused")
    ref = reference(m, batches, ["conv", "bn", "relu", "fc"])
    compare(res, ref, 32, "returned")
    with wpack.safe_open(p) as f:
        stored = {n: f.stats(n, kind="activation") for n in ref}
        check(f.keys() == sorted(m.state_dict()), "model saved first")
    compare(stored, ref, 32, "stored")
    # Per-channel along the conv output's channel axis, one-shot iterator.
    res = wt.calibrate(m, iter(batches), p, histogram=0, modules=["conv"], axis=1)
    v = np.concatenate([c for c in ref["conv"]]).transpose(1, 0, 2, 3).reshape(4, -1)
    fin = np.isfinite(v)
    check(np.array_equal(res["conv"]["max"], np.where(fin, v, -np.inf).max(1)), "channel max")
    check(np.array_equal(res["conv"]["min"], np.where(fin, v, np.inf).min(1)), "channel min")
    check(res["conv"]["count"] == fin.sum(), "channel count")
    var = np.array([v[c][fin[c]].var() for c in range(4)])
    check(np.allclose(res["conv"]["variance"], var, rtol=1e-9), "per-channel variance")
    with wpack.safe_open(p) as f:
        s = f.stats("conv")
        check(s["granularity"] == "channel" and s["axis"] == 1 and s["channels"] == 4, "stored")
        check(f.stats("fc")["histogram"] is not None, "other records kept")
    raises(ValueError, wt.calibrate, m, iter(batches), p, histogram=8)
    raises(ValueError, wt.calibrate, m, batches, p, modules=["nope"])


class _DictOut(nn.Module):   # the shape of a Hugging Face ModelOutput (an OrderedDict)
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return {"mask": x > 0, "last_hidden_state": self.lin(x) * 2, "aux": x}


class _IndexFirst(nn.Module):   # (indices, values), an int tensor first
    def forward(self, x):
        v, i = x.topk(2)
        return [i, (v + 1,)]


@case
def calibrate_measures_dict_and_nested_outputs(d):
    # A module returning a dict (a Hugging Face encoder's ModelOutput) or
    # an int tensor before its float one was "no output": only a bare
    # tensor or a tuple/list whose first tensor was floating-point counted.
    m = nn.Sequential(_DictOut(), _IndexFirst())
    m.forward = lambda x: m[1](m[0](x)["last_hidden_state"])
    batches = [torch.randn(4, 3) for _ in range(2)]
    p = os.path.join(d, "dict.wpack")
    res = wt.calibrate(m, batches, p, histogram=8, modules=["0", "1"])
    check(res.no_output == [] and sorted(res) == ["0", "1"], "no_output %s" % res.no_output)
    with torch.no_grad():
        h = [m[0].lin(b) * 2 for b in batches]
        want = {"0": torch.cat(h), "1": torch.cat([x.topk(2)[0] + 1 for x in h])}
    for n, v in want.items():
        v = v.double().numpy()
        check(res[n]["count"] == v.size and res[n]["min"] == v.min() and
              res[n]["max"] == v.max() and np.isclose(res[n]["mean"], v.mean()), n)


class _Fresh:
    """Batches that differ each time they are iterated (shuffle + drop_last,
    random augmentation): larger values (grow) or one batch more (more)."""
    def __init__(self, grow=False, more=False):
        self.grow, self.more, self.rounds = grow, more, 0

    def __iter__(self):
        self.rounds += 1
        g = torch.Generator().manual_seed(5)
        s = float(self.rounds) if self.grow else 1.0
        b = [torch.randn(3, 4, generator=g) * s for _ in range(3)]
        return iter(b + b[:1] * (self.rounds if self.more else 0))   # more: repeats


@case
def calibrate_histogram_needs_the_same_batches_twice(d):
    # The histogram pass dropped values outside the first pass's range
    # (np.histogram does), so its counts no longer added up to `count`:
    # after both passes, update_stats failed with "histogram counts sum to
    # 35, count is 36" (WPACK_E_STATS), which says nothing of the cause
    # (a DataLoader with shuffle=True and drop_last=True is enough).
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    p = os.path.join(d, "h.wpack")
    for batches, says in ((_Fresh(grow=True), "outside"),
                          (_Fresh(more=True), "finite values, the first pass")):
        e = raises(ValueError, wt.calibrate, m, batches, p, histogram=8)
        check("'0'" in str(e) and says in str(e) and "shuffle=True" in str(e), str(e))
        check(not os.path.exists(p), "an archive written")   # nothing, not even the weights
    res = wt.calibrate(m, _Fresh(), p, histogram=8)   # the same data twice: fine
    check(res["0"]["histogram"][1].sum() == res["0"]["count"] == 36, "%s" % res["0"])


class _FailsAt(nn.Module):
    """A user's module whose forward raises at its n-th call."""
    def __init__(self, n):
        super().__init__()
        self.fc, self.n, self.calls = nn.Linear(3, 2), n, 0

    def forward(self, x):
        self.calls += 1
        if self.calls == self.n:
            raise RuntimeError("batch %d: the user's forward failed" % self.calls)
        return self.fc(x)


@case
def calibrate_that_fails_writes_nothing(d):
    # The model was saved to a new path before the batches ran: a forward
    # raising at the 2nd batch left an archive of the weights without
    # their stats, as if calibrated (and a rerun then took it as existing).
    batches = [torch.randn(2, 3) for _ in range(3)]
    p = os.path.join(d, "new.wpack")
    m = nn.Sequential(_FailsAt(2))
    e = raises(RuntimeError, wt.calibrate, m, batches, p, histogram=0)
    check("batch 2" in str(e) and m[0].calls == 2, str(e))
    check(os.listdir(d) == [], "left after a failed calibration: %s" % os.listdir(d))
    # a histogram's second pass failing: nothing either
    m = nn.Sequential(_FailsAt(len(batches) + 2))
    raises(RuntimeError, wt.calibrate, m, batches, p, histogram=4)
    check(os.listdir(d) == [], "left after a failed second pass: %s" % os.listdir(d))
    # An existing archive (the user's) is unchanged, byte for byte
    q = os.path.join(d, "mine.wpack")
    m = nn.Sequential(_FailsAt(0))   # never fails
    wt.calibrate(m, batches, q, histogram=4)
    with open(q, "rb") as f:
        before = f.read()
    m[0].calls, m[0].n = 0, 2
    raises(RuntimeError, wt.calibrate, m, batches, q, histogram=0)
    with open(q, "rb") as f:
        check(f.read() == before, "the existing archive changed")
    check(sorted(os.listdir(d)) == ["mine.wpack"], "left: %s" % os.listdir(d))
    # A calibration that succeeds at a new path writes the weights and the
    # stats at once: one generation, both there
    with wpack.safe_open(q) as f:
        check(f.info()["generation"] == 1, "generation %d" % f.info()["generation"])
        check(f.keys() == sorted(m.state_dict()), "weights %s" % f.keys())
        st = f.stats("0.fc", kind="activation")   # the leaf
        check(st["count"] == 3 * 2 * 2 and st["histogram"] is not None, "%s" % st)


@case
def calibrate_refuses_up_front_what_it_could_not_write(d):
    # What the write at the end refuses was found only after every batch
    # had run (hours, on a real model): a missing directory, a file that is
    # no archive, a write-protected archive. Now no batch runs.
    batches = [torch.randn(2, 3) for _ in range(2)]
    m = nn.Sequential(_FailsAt(0))
    e = raises(wpack.Error, wt.calibrate, m, batches, os.path.join(d, "no", "m.wpack"),
               histogram=0, code="WPACK_E_IO")
    check("its directory does not exist" in str(e) and m[0].calls == 0, "%s, %d calls" % (e, m[0].calls))
    junk = os.path.join(d, "junk.wpack")
    with open(junk, "wb") as f:
        f.write(b"not an archive" * 100)
    e = raises(wpack.Error, wt.calibrate, m, batches, junk, histogram=0)
    check("junk.wpack" in str(e) and m[0].calls == 0, "%s, %d calls" % (e, m[0].calls))
    ro = os.path.join(d, "ro.wpack")
    wt.calibrate(m, batches, ro, histogram=0)
    os.chmod(ro, 0o444)
    with open(ro, "rb") as f:
        before = f.read()
    m[0].calls = 0
    e = raises(wpack.Error, wt.calibrate, m, batches, ro, histogram=0, code="WPACK_E_IO")
    check("write-protected" in str(e) and m[0].calls == 0, "%s, %d calls" % (e, m[0].calls))
    with open(ro, "rb") as f:
        check(f.read() == before, "the write-protected archive changed")
    e = raises(wpack.Error, wpack.update_stats, ro, {}, code="WPACK_E_IO")
    check("write-protected" in str(e), str(e))


@case
def calibrate_transformer_encoder_layer(d):
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0,
                                       batch_first=True)
    batches = [torch.randn(2, 5, 16) for _ in range(3)]
    leaves = ["self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1",
              "dropout2"]
    # The fast path is real here: plain eval hooks miss the inner modules.
    fired = reference(layer, batches[:1], ["linear1"], train=False)
    check(fired["linear1"] == [], "torch's eval fast path ran the hooks: test is moot")
    p = os.path.join(d, "tel.wpack")
    res = wt.calibrate(layer, batches, p, histogram=16)
    check(sorted(res) == sorted(leaves) and res.no_output == [], "modules %s / %s"
          % (sorted(res), res.no_output))
    check(layer.activation_relu_or_gelu, "fast path flag restored")
    # dropout=0 in training mode: the slow path, same values, hooks fire.
    ref = reference(layer, batches, leaves, train=True)
    compare(res, ref, 16, "transformer")
    with torch.no_grad():
        layer.eval()
        ref_out = layer(batches[0])
    check(torch.allclose(ref_out, layer.train()(batches[0]), atol=1e-5), "paths agree")


@case
def calibrate_transformer_encoder_with_padding(d):
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                       batch_first=True)
    enc = nn.TransformerEncoder(layer, num_layers=2)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    batches = [{"src": torch.randn(2, 5, 8), "src_key_padding_mask": mask} for _ in range(2)]
    p = os.path.join(d, "enc.wpack")
    res = wt.calibrate(enc, batches, p, histogram=8)
    check(res.no_output == [] and "layers.1.linear2" in res, "modules %s" % sorted(res))
    check(enc.enable_nested_tensor, "enable_nested_tensor restored")
    names = sorted(res)
    outs = {n: [] for n in names}
    mods = dict(enc.named_modules())
    hs = [mods[n].register_forward_hook(
        lambda m, i, o, n=n: outs[n].append((o[0] if isinstance(o, tuple) else o)
                                            .detach().double().numpy().copy())) for n in names]
    enc.train()
    with torch.no_grad():
        for b in batches:
            enc(**b)
    for h in hs:
        h.remove()
    compare(res, outs, 8, "encoder")


@case
def calibrate_takes_empty_batches_per_channel(d):
    # An empty batch counts nothing. Per channel along the batch axis it
    # raised torch's "cannot reshape tensor of 0 elements into shape [0, -1]"
    # (reshape(C, -1) with C = 0).
    m = nn.Sequential(nn.Linear(3, 5), nn.ReLU())
    xs = [torch.randn(4, 3) for _ in range(3)]
    for axis in (0, 1, -1):
        want = wt.calibrate(m, xs, os.path.join(d, "w%d.wpack" % axis), axis=axis)
        got = wt.calibrate(m, [torch.randn(0, 3)] + xs + [torch.randn(0, 3)],
                           os.path.join(d, "g%d.wpack" % axis), axis=axis)
        for n in ("0", "1"):
            check(got[n]["count"] == want[n]["count"] == 60, "count %s" % got[n]["count"])
            for k in ("min", "max", "mean", "variance"):
                check(np.array_equal(got[n][k], want[n][k]), "axis %d %s %s" % (axis, n, k))

@case
def calibrate_leaves_no_hook_when_one_is_refused(d):
    # A ScriptModule refuses forward hooks: the hooks registered on the
    # modules before it stayed on the model (every later forward ran them),
    # and torch's message named no module.
    m = nn.Sequential(nn.Linear(3, 3), torch.jit.script(nn.Linear(3, 3)), nn.ReLU())
    p = os.path.join(d, "s.wpack")
    e = raises(RuntimeError, wt.calibrate, m, [torch.randn(2, 3)], p)
    check("module '1'" in str(e) and "ScriptModule" in str(e), str(e))
    check(all(not mod._forward_hooks for mod in m.modules()), "hooks left on the model")
    check(not os.path.exists(p) and m.training, "written, or left in eval mode")
    res = wt.calibrate(m, [torch.randn(2, 3)], p, modules=["0", "2"])
    check(sorted(res) == ["0", "2"], "the others measured: %s" % sorted(res))

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 4))


class Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.blk = Block()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(F.linear(x, self.blk.w))


class WithEmpty(nn.Module):
    def __init__(self):
        super().__init__()
        self.blk = Block()
        self.blk.e = nn.Parameter(torch.zeros(0))
        self.blk.e2 = nn.Parameter(torch.zeros(0, 3))

    def forward(self, x):
        return F.linear(x, self.blk.w) + self.blk.e.sum() + self.blk.e2.sum()


@case
def name_map_includes_empty_parameters(d):
    # _ident gave None for 0-element tensors (no storage address), so they
    # were left out of the map; the node's object is the model's own.
    m = WithEmpty()
    nm = wt.name_map(torch.fx.symbolic_trace(m), m)
    check(nm == {"blk_w": "blk.w", "blk_e": "blk.e", "blk_e2": "blk.e2"}, "map %s" % nm)


@case
def name_maps_from_graphs(d):
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    with torch.no_grad():
        m[2].weight.copy_(m[0].weight)   # equal values: only identity tells them apart
        m[2].bias.copy_(m[0].bias)
    gm = make_fx(m)(torch.randn(2, 4))
    nm = wt.name_map(gm, m)
    consts = sorted(n.target for n in gm.graph.nodes if n.op == "get_attr")
    check(sorted(nm) == consts and len(consts) == 4, "make_fx names %s" % nm)
    sd = m.state_dict(keep_vars=True)
    for g, k in nm.items():
        check(getattr(gm, g).data_ptr() == sd[k].data_ptr(), "%s -> %s not the same storage"
              % (g, k))
    check(sorted(nm.values()) == sorted(sd), "every weight mapped: %s" % nm)
    p = os.path.join(d, "fx.wpack")
    wt.save_model(m, p, name_map=nm)
    with wpack.safe_open(p, framework="pt") as f:
        check(f.name_map() == nm, "stored map")
        for g, k in nm.items():
            check(torch.equal(f.get_tensor(g), sd[k].detach()), "lookup %s" % g)
    fm = Functional()
    sym = torch.fx.symbolic_trace(fm)
    nm2 = wt.name_map(sym, fm)
    check(nm2 == {"blk_w": "blk.w"}, "symbolic_trace map %s" % nm2)
    sig = types.SimpleNamespace(inputs_to_parameters={"p_lin_weight": "lin.weight"},
                                inputs_to_buffers={"b_bn_running_mean": "bn.running_mean"})
    ep = types.SimpleNamespace(graph_signature=sig)
    check(wt.name_map(ep) == {"p_lin_weight": "lin.weight",
                              "b_bn_running_mean": "bn.running_mean"}, "export signature")
    raises(TypeError, wt.name_map, gm)


class SharedStorage(nn.Module):
    """Two Parameters and a buffer over one storage (a tie that is not one
    object), and a parameter named as symbolic_trace names the node of
    another ("lin_weight" for lin.weight)."""
    def __init__(self):
        super().__init__()
        w = torch.randn(4, 3)
        self.a = nn.Parameter(w)
        self.b = nn.Parameter(w)
        self.register_buffer("c", self.a.data)
        self.lin = nn.Linear(3, 4, bias=False)
        self.lin_weight = nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        return F.linear(x, self.b) + F.linear(x, self.c) + F.linear(x, self.lin.weight) \
            + F.linear(x, self.lin_weight)


@case
def name_map_leaves_out_names_that_are_state_dict_keys(d):
    # name_map gave {"b": "a", "c": "a", "lin_weight": "lin.weight", ...}:
    # "b", "c" and "lin_weight" are entries of their own, so save_model
    # refused its own map (WPACK_E_EXISTS: the name already names an entry).
    m = SharedStorage()
    gm = torch.fx.symbolic_trace(m)
    nm = wt.name_map(gm, m)
    sd = m.state_dict()
    check(not set(nm) & set(sd), "names that are keys: %s" % nm)
    p = os.path.join(d, "shared.wpack")
    wt.save_model(m, p, name_map=nm)
    with wpack.safe_open(p, framework="pt") as f:
        check(f.name_map() == nm, "stored map %s" % f.name_map())
        for name in ("b", "c", "lin_weight", "lin.weight"):
            check(torch.equal(f.get_tensor(name), sd[name]), "entry %s" % name)
        for g, k in nm.items():
            check(torch.equal(f.get_tensor(g), sd[k]), "lookup %s" % g)

if __name__ == "__main__":
    main()
