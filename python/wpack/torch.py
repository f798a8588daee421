"""wpack for PyTorch models: save and load state_dicts, calibrate any
nn.Module (activation statistics written into the archive in place), and
name maps from traced graphs. Needs torch (import wpack alone does not).
"""
import collections
import ctypes
import errno
import functools
import os
import warnings

import numpy as np
import torch

from . import load_file as _load_file, safe_open, save_file as _save_file, update_stats
from . import _check_updatable, _fspath, _int_arg, _os_error, _shown, _MAX_AXIS, E_IO

_MAX_HIST_BINS = 1 << 20   # the format's limit (spec: Limits)

__all__ = ["save_model", "load_model", "IncompatibleKeys", "calibrate", "name_map", "CalibrationResult",
           "load_file", "save_file"]


def load_file(path, device="cpu", **options):
    """safetensors.torch.load_file's call for wpack: every tensor of the
    archive at path as {name: torch.Tensor} on device, i.e.
    wpack.load_file(path, framework="pt", device=device, **options)
    (zero-copy where it is; options: verify, threads, and safe_open's
    for a URL)."""
    return _load_file(path, framework="pt", device=device, **options)


# safetensors.torch.save_file's call is wpack.save_file's already
save_file = _save_file


def save_model(model, path, name_map=None, metadata=None, stats=None, durable=True, **options):
    """Write model.state_dict() to a new archive at path (wpack.save_file:
    streamed, tied parameters become alias entries). name_map: {graph
    name -> state_dict key}, e.g. from wpack.torch.name_map(), recorded so
    `wpack resolve` and safe_open find the weights under the graph's
    names. durable=False: no fsync (as torch.save; see wpack.save_file).
    metadata, stats and the other arguments as for wpack.save_file."""
    _save_file(model.state_dict(), path, metadata=metadata, name_map=name_map, stats=stats,
              durable=durable, **options)


def _owner(model, key):
    mod_path, _, attr = key.rpartition(".")
    return (model.get_submodule(mod_path) if mod_path else model), attr


def _extra_states(model):
    """{state_dict key: module} of the modules that take their extra state
    back (set_extra_state overridden), as nn.Module.load_state_dict gives it
    them. Its state_dict value is whatever get_extra_state returned (a
    tensor, for wpack to store one): copy_() into that returned object, or
    setattr of "_extra_state", would drop it silently."""
    suffix = getattr(torch.nn.modules.module, "_EXTRA_STATE_KEY_SUFFIX", "_extra_state")
    return {(name + "." if name else "") + suffix: mod for name, mod in model.named_modules()
            if type(mod).set_extra_state is not torch.nn.Module.set_extra_state}


# What load_model returns: the fields of nn.Module.load_state_dict's result
# (missing_keys, unexpected_keys), and a pair to unpack, as that one is.
IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def load_model(model, path, strict=True, assign=False, verify=True):
    """Load the archive's tensors into model's parameters and buffers.

    assign=False (default) is model.load_state_dict(state, strict) with
    the archive as the state: torch's own load, so everything it runs
    runs (load_state_dict pre- and post-hooks, a module's own
    _load_from_state_dict such as BatchNorm's, a lazy module's
    materialization, set_extra_state), strict=True raises RuntimeError
    naming missing and unexpected keys after loading the rest, as torch
    does, a shape mismatch raises RuntimeError whatever strict says, and
    the model keeps its dtypes and devices. Memory stays low: an entry
    stored plain in a local archive is a zero-copy tensor over a private
    mapping of the file (free until read, pages of the file as copy_
    reads them); any other entry (zstd, splat, sharded, from a URL) and
    an entry the model has no key for are stand-ins (a torch.Tensor
    subclass with the entry's shape and dtype, on the meta device) that
    read the entry each time a torch function or tensor method uses them,
    so one such entry at a time is in memory, never all. Hooks see them
    as tensors; a stand-in kept past load_model reads nothing (wpack.Error
    WPACK_E_STATE: the archive is closed). An entry that fails its check
    (or cannot be read) raises its wpack.Error (torch would wrap it in its
    RuntimeError). A parameter on the meta device takes nothing (torch's
    copy_ into it is a no-op): a warning names it.

    assign=True (torch 1.13's load_state_dict has no assign) replaces the
    parameters and buffers with zero-copy tensors over a private
    copy-on-write mapping of the file (training may write to them; the
    file never changes), Parameters keeping their requires_grad; it runs
    no load_state_dict hook nor a module's _load_from_state_dict (it sets
    each tensor itself). Ties are kept: keys that are one Parameter (or
    buffer) in the model, or one entry in the archive (an alias and its
    target), are all given one new object, so the model keeps its
    parameter count (tied embedding and head stay tied). A lazy module's
    uninitialized parameters and buffers take the archive's shapes, and a
    module's extra state goes to its set_extra_state, as with assign=False.
    What load_state_dict would refuse (strict=True: missing and unexpected
    keys; any shape mismatch) raises the RuntimeError assign=False raises,
    in torch's words, before anything is assigned.

    Returns the keys not loaded as nn.Module.load_state_dict does: a named
    tuple (missing_keys: the model's keys the archive lacks; unexpected_keys:
    the archive's entries the model lacks) that also unpacks as
    `missing, unexpected = load_model(...)`. RuntimeErrors start
    "load_model(PATH): " (a URL redacted).
    path may be a URL (safe_open's defaults): the tensors are then fetched
    ahead in the order they are loaded (safe_open.read_plan).
    verify: as safe_open's: True (default) checks each tensor's bytes
    against its XXH3 before loading it (wpack.Error WPACK_E_CHECKSUM
    naming it on a mismatch); False skips the check."""
    sd = model.state_dict(keep_vars=True)
    extra = _extra_states(model)
    with safe_open(path, framework="pt", verify=verify) as f:
        # the archive as its own messages show it: a URL redacted (its
        # password and query were quoted whole), a bytes path as text,
        # control characters escaped
        where = _shown(f._handle().path)
        names = f.keys()
        if f._remote:  # a URL: fetched ahead in the order read below
            have = set(names)
            f.read_plan([k for k in sd if k in have])
        if not assign:
            return _load_state(model, f, sd, extra, names, strict, where)
        return _assign(model, f, sd, extra, set(names), strict, where)


def _assign(model, f, sd, extra, names, strict, where):
    """load_model(assign=True): each tensor set in the model (see there)."""
    missing = [k for k in sd if k not in names]
    unexpected = sorted(names - set(sd))
    # Everything load_state_dict would refuse, refused before anything is
    # assigned (a mismatch found halfway left the model half replaced), in
    # its words: the same RuntimeError as assign=False
    errors = []
    for key, cur in sd.items():
        if key in names and key not in extra and not torch.nn.parameter.is_lazy(cur):
            shape = torch.Size(f._np_dtype_shape(f._target(f._find(key)))[1])
            if shape != cur.shape:
                errors.append("size mismatch for %s: copying a param with shape %s from "
                              "checkpoint, the shape in current model is %s."
                              % (key, shape, cur.shape))
    if strict and unexpected:
        errors.insert(0, "Unexpected key(s) in state_dict: %s. "
                      % ", ".join('"%s"' % k for k in unexpected))
    if strict and missing:
        errors.insert(0, "Missing key(s) in state_dict: %s. "
                      % ", ".join('"%s"' % k for k in missing))
    if errors:
        raise RuntimeError("load_model(%s): Error(s) in loading state_dict for %s:\n\t%s"
                           % (where, type(model).__name__, "\n\t".join(errors)))
    assigned = {}   # ("model", id) / ("archive", entry, is Parameter) -> object given
    for key, cur in sd.items():
        if key not in names:
            continue
        if key in extra:   # as load_state_dict: the module takes it (its size may change)
            extra[key].set_extra_state(f.get_tensor(key))
            continue
        is_param = isinstance(cur, torch.nn.Parameter)
        # a lazy module's parameter (nn.LazyLinear before its first
        # forward) has no shape yet: it takes the archive's, as
        # load_state_dict materializes it (its shape raised RuntimeError)
        lazy = torch.nn.parameter.is_lazy(cur)
        ties = [("model", id(cur)), ("archive", f._target(f._find(key)).index, is_param)]
        obj = next((assigned[k] for k in ties if k in assigned), None)
        t = f.get_tensor(key) if obj is None else obj
        if obj is None:
            obj = torch.nn.Parameter(t, requires_grad=cur.requires_grad) if is_param else t
        for k in ties:
            assigned.setdefault(k, obj)
        mod, attr = _owner(model, key)
        setattr(mod, attr, obj)
    return IncompatibleKeys(missing, unexpected)


def _load_state(model, f, sd, extra, names, strict, where):
    """load_model(assign=False): model.load_state_dict over the archive."""
    have = set(names)
    for key, cur in sd.items():
        if key in have and not torch.nn.parameter.is_lazy(cur) and cur.is_meta:
            # copy_ into it does nothing: as torch >= 2.1, said
            warnings.warn("load_model(%s): %s is a meta tensor in the model: copying "
                          "into it is a no-op (nothing loaded); use assign=True"
                          % (where, key), stacklevel=3)
    failed = []   # what a stand-in's read raised (torch's copy_ wraps it in a RuntimeError)
    state = collections.OrderedDict()
    for key in names:
        t = f._target(f._find(key))
        if key in extra or (key in sd and _maps(f, t)):
            state[key] = f.get_tensor(key)   # zero-copy (or extra state: kept by its module)
        else:
            state[key] = _Entry(f, key, t, failed)
    try:
        r = model.load_state_dict(state, strict=strict)
    except RuntimeError as e:
        if failed:
            raise failed[0] from e
        raise RuntimeError("load_model(%s): %s" % (where, e)) from None
    return IncompatibleKeys(list(r.missing_keys), list(r.unexpected_keys))


def _maps(f, t):
    """safe_open(framework="pt").get_tensor of entry t is zero-copy (a
    private mapping of the file, no memory until written)."""
    return (t.kind == _KIND_DATA and t.codec == 0 and not f._remote and not f._sharded and
            f._handle().mm is not None)


_KIND_DATA = 1
# torch dtypes of the stand-ins (by wpack dtype code); one torch lacks
# (u16, u32, u64) gets a placeholder of its size: reading it raises
_TORCH_DTYPES = {1: torch.float64, 2: torch.float32, 3: torch.float16, 4: torch.bfloat16,
                 5: torch.uint8, 6: torch.uint8, 7: torch.int64, 8: torch.int32, 9: torch.int16,
                 10: torch.int8, 11: torch.int64, 12: torch.int32, 13: torch.int16,
                 14: torch.uint8, 15: torch.bool}
# what a stand-in answers without reading its entry
_T = torch.Tensor
_METADATA = {_T.shape.__get__, _T.size, _T.dim, _T.ndim.__get__, _T.dtype.__get__, _T.numel,
             _T.nelement, _T.__len__, _T.requires_grad.__get__}


class _Entry(torch.Tensor):
    """An archive entry in load_model's state: a meta tensor of its shape and
    dtype that reads the entry (safe_open.get_tensor) whenever a torch
    function or tensor method other than shape, size, dim, dtype or numel
    uses it; the tensor read is dropped after that use."""

    @staticmethod
    def __new__(cls, f, key, t, failed):
        code = t.dtype
        shape = (int(t.nbytes),) if code not in _TORCH_DTYPES else \
            tuple(int(t.dims[k]) for k in range(t.rank))
        e = torch.Tensor._make_subclass(
            cls, torch.empty(shape, dtype=_TORCH_DTYPES.get(code, torch.uint8), device="meta"))
        e._wpack = (f, key, failed)
        return e

    def _read(self):
        f, key, failed = self._wpack
        try:
            return f.get_tensor(key)
        except Exception as err:
            failed.append(err)
            raise

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _METADATA:
            with torch._C.DisableTorchFunction():
                return func(*args, **kwargs)

        def real(x):
            if isinstance(x, _Entry):
                return x._read()
            if isinstance(x, (list, tuple)):
                return type(x)(real(y) for y in x)
            return x
        return func(*real(args), **{k: real(v) for k, v in kwargs.items()})


# ------------------------------------------------------------ calibration

class _Acc:
    """Streaming stats of one module's outputs (float64, Chan's merge)."""

    def __init__(self, name, axis):
        self.name = name
        self.axis = axis      # None, or an int; made >= 0 at the first output
        self.rank = None      # the rank of the first output
        self.n = 0            # finite values, all channels
        self.nc = None        # per channel finite counts (tensor)
        self.min = self.max = self.mean = self.m2 = None
        self.hist = None
        self.calls = 0

    def _as2d(self, y):
        y = y.detach()
        if self.axis is None:
            return y.reshape(1, -1).double()
        if self.rank is None:   # the first output: a negative axis counts from its end
            if not -y.dim() <= self.axis < y.dim():
                raise ValueError("calibrate: axis %d is out of range for %r's output of "
                                 "rank %d" % (self.axis, self.name, y.dim()))
            self.rank, self.axis = y.dim(), self.axis % y.dim()
            if self.axis > _MAX_AXIS:
                raise ValueError("calibrate: axis %d of %r's output: stats axes are 0..%d"
                                 % (self.axis, self.name, _MAX_AXIS))
        elif y.dim() != self.rank:
            raise ValueError("calibrate: %r's output rank changed between batches (%d, then "
                             "%d): axis %d is not one channel axis"
                             % (self.name, self.rank, y.dim(), self.axis))
        # (not reshape(C, -1): an empty batch along the axis, C = 0, left
        # -1 ambiguous and torch raised 'cannot reshape tensor of 0 elements')
        c = y.shape[self.axis]
        return y.movedim(self.axis, 0).reshape(c, y.numel() // max(c, 1)).double()

    def add(self, y):
        self.calls += 1
        v = self._as2d(y)
        fin = torch.isfinite(v)
        nb = fin.sum(1).double()
        tot = int(nb.sum().item())
        if tot == 0:
            return
        z = torch.where(fin, v, torch.zeros((), dtype=v.dtype))
        inf = torch.tensor(float("inf"), dtype=v.dtype)
        bmin = torch.where(fin, v, inf).amin(1)
        bmax = torch.where(fin, v, -inf).amax(1)
        bmean = z.sum(1) / nb.clamp(min=1)
        bm2 = torch.where(fin, (v - bmean[:, None]) ** 2, torch.zeros((), dtype=v.dtype)).sum(1)
        if self.nc is None:
            self.nc, self.min, self.max, self.mean, self.m2 = nb, bmin, bmax, bmean, bm2
        else:
            if self.nc.numel() != nb.numel():
                raise ValueError("calibrate: the channel count along axis %d changed between "
                                 "batches (%d, then %d)" % (self.axis, self.nc.numel(), nb.numel()))
            n = self.nc + nb
            d = bmean - self.mean
            safe = n.clamp(min=1)
            self.mean = self.mean + d * nb / safe
            self.m2 = self.m2 + bm2 + d * d * self.nc * nb / safe
            self.min = torch.minimum(self.min, bmin)
            self.max = torch.maximum(self.max, bmax)
            self.nc = n
        self.n += tot

    def edges(self, bins):
        lo = float(self.min.min().item())
        hi = float(self.max.max().item())
        if not lo < hi:
            lo, hi = lo - 0.5, hi + 0.5
        return np.linspace(lo, hi, bins + 1)

    def add_hist(self, y, edges):
        v = y.detach().reshape(-1).double().cpu().numpy()
        v = v[np.isfinite(v)]
        counts, _ = np.histogram(v, bins=edges)
        if counts.sum() != v.size:   # np.histogram leaves out what is outside
            self.second_pass_differs("values outside [%r, %r], the first pass's min and max"
                                     % (edges[0], edges[-1]))
        self.hist = counts if self.hist is None else self.hist + counts

    def second_pass_differs(self, what):
        # The histogram's counts must add up to the first pass's count (spec
        # 11): data that changes between passes cannot give a valid record.
        raise ValueError("calibrate: the histogram pass over batches gave %r %s: batches "
                         "must give the same data each time they are iterated (a "
                         "DataLoader with shuffle=True and drop_last=True, or random "
                         "augmentation, does not); pass a fixed list of batches, or "
                         "histogram=0" % (self.name, what))

    def record(self, edges):
        per = self.axis is not None
        var = (self.m2 / self.nc.clamp(min=1)).clamp(min=0)

        def out(t):
            a = t.cpu().numpy().astype(np.float64)
            return a if per else float(a[0])

        # the fields and types safe_open.stats() returns
        rec = {"key": self.name, "kind": "activation",
               "granularity": "channel" if per else "tensor",
               "axis": self.axis if per else 0, "channels": int(self.nc.numel()),
               "count": self.n, "min": out(self.min), "max": out(self.max)}
        rec["absmax"] = np.maximum(np.abs(rec["min"]), np.abs(rec["max"])) if per else \
            max(abs(rec["min"]), abs(rec["max"]))
        rec["mean"], rec["variance"] = out(self.mean), out(var)
        if per and bool((self.nc == 0).any()):
            # A channel with no finite value has no min/max to store.
            raise ValueError("calibrate: a channel of %r saw no finite value" % self.name)
        rec["histogram"] = None
        if edges is not None and self.hist is not None:
            rec["histogram"] = (edges, self.hist.astype(np.uint64))
        rec["percentiles"] = []
        return rec


class CalibrationResult(dict):
    """{module path: stats dict (the fields safe_open.stats returns)} of what
    calibrate() wrote; .no_output lists modules whose hook never fired or
    saw no finite value (not written)."""
    no_output = ()


def _first_tensor(out):
    """The first floating-point tensor of a module's output: the output
    itself, or found in order in a tuple, list or dict (a Hugging Face
    ModelOutput is an OrderedDict), nested; None if there is none."""
    if torch.is_tensor(out):
        return out if out.is_floating_point() else None
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


_ROOT_HAS_NO_PATH = ("stats are keyed by module path and the model itself has none (an "
                     "empty key is not allowed); wrap it, e.g. nn.Sequential(model), whose "
                     "module '0' it then is")


def _targets(model, modules):
    """Modules to hook: the named ones (a str: one name; duplicates once),
    or every leaf. A MultiheadAttention counts as a leaf: it calls its
    out_proj's weights directly, so hooks on out_proj would never fire."""
    if modules is not None:
        # every path, a module registered under two names (shared) too:
        # named_modules() lists it once, and modules=["second.path"] was
        # "no such module"
        named = dict(model.named_modules(remove_duplicate=False))
        if isinstance(modules, str):
            modules = [modules]
        modules = list(dict.fromkeys(modules))   # in order, each once
        if "" in modules:
            raise ValueError("calibrate: modules=[''] names the model itself: "
                             + _ROOT_HAS_NO_PATH)
        missing = [repr(m) for m in modules if m not in named]
        if missing:
            raise ValueError("calibrate: no such modules: %s" % ", ".join(missing))
        return [(m, named[m]) for m in modules]
    if not any(True for _ in model.children()):
        raise ValueError("calibrate: the model is a leaf module (no submodules): "
                         + _ROOT_HAS_NO_PATH)
    out, skip = [], []
    for name, mod in model.named_modules():
        if not name or any(name.startswith(s + ".") for s in skip):
            continue
        if isinstance(mod, torch.nn.MultiheadAttention):
            out.append((name, mod))
            skip.append(name)
        elif not any(True for _ in mod.children()):
            out.append((name, mod))
    return out


class _NoFastPath:
    """Turn off torch's fused inference paths that skip the submodules'
    forward (and so their hooks), restoring them afterwards:
    TransformerEncoderLayer takes its fused kernel in eval mode unless
    activation_relu_or_gelu is false (torch 1.13; the attribute only gates
    the fast path: the layer still applies self.activation), and
    TransformerEncoder turns padded input into nested tensors when
    enable_nested_tensor is set; MultiheadAttention runs a fused kernel in
    eval mode when its dropout is 0 (slightly different rounding from the
    plain path), so it is put in training mode with dropout 0 (the same
    computation as eval: no dropout). Newer torch also has
    torch.backends.mha.set_fastpath_enabled(False)."""

    def __init__(self, model):
        self.model = model
        self.saved = []

    def __enter__(self):
        for mod in self.model.modules():
            if isinstance(mod, torch.nn.TransformerEncoderLayer) and \
                    hasattr(mod, "activation_relu_or_gelu"):
                self.saved.append((mod, "activation_relu_or_gelu", mod.activation_relu_or_gelu))
                mod.activation_relu_or_gelu = False
            if isinstance(mod, torch.nn.MultiheadAttention):
                self.saved.append((mod, "training", mod.training))
                self.saved.append((mod, "dropout", mod.dropout))
                mod.training, mod.dropout = True, 0.0
            if isinstance(mod, torch.nn.TransformerEncoder) and \
                    hasattr(mod, "enable_nested_tensor"):
                self.saved.append((mod, "enable_nested_tensor", mod.enable_nested_tensor))
                mod.enable_nested_tensor = False
        mha = getattr(getattr(torch.backends, "mha", None), "set_fastpath_enabled", None)
        if mha is not None:
            self.mha_prev = torch.backends.mha.get_fastpath_enabled()
            mha(False)
        return self

    def __exit__(self, *exc):
        for mod, attr, val in reversed(self.saved):
            setattr(mod, attr, val)
        if hasattr(self, "mha_prev"):
            torch.backends.mha.set_fastpath_enabled(self.mha_prev)


def _run(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def calibrate(model, batches, path, histogram=256, modules=None, axis=None):
    """Measure every leaf module's output on batches and write the stats into
    the archive at path in place (activation stats keyed by module path,
    through the crash-safe index update; no data rewritten). If path does not
    exist, model.state_dict() is saved there with the stats in one atomic
    write (save_model) once every batch has run: a calibration that fails
    (a batch raising, a second pass that differs) writes nothing, at a new
    path or an existing one. The model saved is as it is after the batches
    (a forward in eval mode under no_grad changes no parameter; a buffer a
    module updates itself, such as a torch.ao observer's, is saved updated).
    A path the write would refuse (a missing directory: FileNotFoundError,
    as save_file's; an existing file that is no archive, a shard of a set
    or write-protected) raises wpack.Error before any batch runs.

    model runs in eval mode under torch.no_grad() (its training flags are
    restored afterwards); each batch is passed as model(batch), model(*batch)
    for a tuple/list, model(**batch) for a dict. modules: module paths to
    measure instead of every leaf (a MultiheadAttention counts as a leaf);
    a str is one path, a path given twice is measured once. Stats are keyed
    by module path, so the model itself cannot be measured: modules=[""],
    or a model that is itself a leaf (a bare nn.Linear), raises ValueError
    up front (wrap it: nn.Sequential(model) measures it as "0").
    The output measured is the module's output tensor: the first
    floating-point tensor of a tuple, list or dict in order, nested (e.g.
    MultiheadAttention's attention output, a ModelOutput's first field;
    integer and bool tensors are passed over). Fused fast paths
    that skip hooks (TransformerEncoderLayer in eval mode) are turned off
    while calibrating (see _NoFastPath).

    Stats per module, over all batches: count of finite values (NaN and
    +-inf are left out), min, max, absmax, mean and population variance
    (float64, Chan's parallel merge), and a histogram of `histogram` equal
    bins between the final min and max (histogram=0: none; 0..2^20, else
    ValueError up front). A histogram
    needs a second pass over batches, so batches must then be re-iterable
    (a list, a DataLoader), not a one-shot iterator (ValueError), and give
    the same data again: a value outside the first pass's range, or a
    different count, is ValueError naming the module (nothing is written).
    axis: per-channel stats along that axis of each output (the histogram
    still covers all channels); -8..7, negative counting from the end of
    the output's rank as in torch. It is checked against each module's
    first output (ValueError during the first batch, before more runs) and
    stored as the non-negative axis.

    Returns a CalibrationResult {module path: stats dict with the fields
    safe_open.stats() returns (key, kind, granularity, axis, channels,
    count, min, max, absmax, mean, variance, histogram or None,
    percentiles [])}; its .no_output
    lists modules that produced no output (hook never fired, or no finite
    value); a warning names them too."""
    histogram = _int_arg(histogram or 0, ctypes.c_int64, "calibrate(): histogram")
    if not 0 <= histogram <= _MAX_HIST_BINS:
        raise ValueError("calibrate: histogram=%d: want 0..%d bins" % (histogram, _MAX_HIST_BINS))
    if axis is not None:
        axis = _int_arg(axis, ctypes.c_int64, "calibrate(): axis")
        if not -_MAX_AXIS - 1 <= axis <= _MAX_AXIS:
            raise ValueError("calibrate: axis %d: want -%d..%d (counted from the end of "
                             "each output's rank when negative)" % (axis, _MAX_AXIS + 1, _MAX_AXIS))
    if histogram and iter(batches) is batches:
        raise ValueError("calibrate: histogram=%d needs batches that can be iterated twice "
                         "(a list or DataLoader), not an iterator; or pass histogram=0"
                         % histogram)
    path = os.fspath(path)
    targets = _targets(model, modules)
    # saved at the end, with the stats: saved here, a batch that raised left
    # an archive of the weights without them, as if calibrated
    new = not os.path.exists(path)
    # what the write at the end would refuse, refused before the batches run
    # (a long calibration ran for nothing into a missing directory)
    if not new:
        _check_updatable(path)
    elif not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        try:   # why not: FileNotFoundError or NotADirectoryError, as save_file's
            os.stat(os.path.dirname(os.path.abspath(path)))
            why = errno.ENOTDIR
        except OSError as e:
            why = e.errno
        raise _os_error(E_IO, "%s: calibrate: its directory does not exist: nothing was run or "
                        "written" % _shown(_fspath(path)), why)
    accs = {name: _Acc(name, axis) for name, _ in targets}
    training = {m: m.training for m in model.modules()}
    phase = {"hist": None}

    def hook_for(name):
        def hook(mod, inp, out):
            y = _first_tensor(out)
            if y is None:
                return
            if phase["hist"] is None:
                accs[name].add(y)
            elif name in phase["hist"]:
                accs[name].add_hist(y, phase["hist"][name])
        return hook

    handles = []
    try:
        # inside the try: a module that refuses a hook (a ScriptModule) left
        # the hooks registered before it on the model, run by every later
        # forward
        for name, mod in targets:
            try:
                handles.append(mod.register_forward_hook(hook_for(name)))
            except RuntimeError as e:   # torch's says not which module
                raise RuntimeError("calibrate: cannot hook module %r (%s): %s; leave it out "
                                   "with modules=[...]" % (name, type(mod).__name__, e)) from e
        model.eval()
        with torch.no_grad(), _NoFastPath(model):
            for b in batches:
                _run(model, b)
            edges = {}
            if histogram:
                edges = {n: a.edges(histogram) for n, a in accs.items() if a.n}
                phase["hist"] = edges
                for b in batches:
                    _run(model, b)
    finally:
        for h in handles:
            h.remove()
        for m, t in training.items():
            m.training = t
    for n, e in edges.items():
        got = 0 if accs[n].hist is None else int(accs[n].hist.sum())
        if got != accs[n].n:
            accs[n].second_pass_differs("%d finite values, the first pass %d"
                                        % (got, accs[n].n))
    result = CalibrationResult()
    result.no_output = [n for n, a in accs.items() if a.n == 0]
    for n, a in accs.items():
        if a.n:
            result[n] = a.record(edges.get(n))
    if result.no_output:
        warnings.warn("wpack.torch.calibrate: no output from %s" % ", ".join(result.no_output))
    records = {n: r for n, r in result.items()}
    if new:
        save_model(model, path, stats=records)
    else:
        update_stats(path, records)
    return result


# -------------------------------------------------------------- name maps

def _ident(t):
    if not torch.is_tensor(t) or t.numel() == 0:
        return None
    return (t.storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()),
            t.dtype)


def _export_signature(graph):
    """The torch.export graph signature of graph (an ExportedProgram or the
    signature itself), or None."""
    sig = getattr(graph, "graph_signature", None)
    if sig is None and (hasattr(graph, "input_specs") or hasattr(graph, "inputs_to_parameters")):
        sig = graph
    if sig is not None and (hasattr(sig, "input_specs") or hasattr(sig, "inputs_to_parameters")):
        return sig
    return None


def _kind_name(kind):
    return getattr(kind, "name", str(kind).rpartition(".")[2])


def _from_export_signature(sig, model):
    """{placeholder name -> state_dict key} of lifted parameters and buffers."""
    out = {}
    specs = getattr(sig, "input_specs", None)
    if specs is not None:
        # torch >= 2.2: InputSpec(kind, arg=TensorArgument(name), target,
        # persistent). A non-persistent buffer is not in the state_dict;
        # lifted constants, custom objects, tokens and user inputs are not
        # weights of the module.
        for spec in specs:
            kind = _kind_name(spec.kind)
            name = getattr(spec.arg, "name", None)
            if kind not in ("PARAMETER", "BUFFER") or not isinstance(name, str) \
                    or not isinstance(spec.target, str):
                continue
            if kind == "BUFFER" and getattr(spec, "persistent", None) is False:
                continue
            out[name] = spec.target
    else:
        # torch 2.1: dict fields inputs_to_parameters, inputs_to_buffers
        out.update(sig.inputs_to_parameters or {})
        out.update(getattr(sig, "inputs_to_buffers", None) or {})
    if model is not None:   # keep only what save_model(model) writes
        keys = set(model.state_dict().keys())
        out = {k: v for k, v in out.items() if v in keys}
    return {k: v for k, v in out.items() if k != v}


def name_map(graph, model=None):
    """{graph name -> state_dict key} for weights referenced by a graph.

    graph may be:
    - a torch.fx GraphModule (symbolic_trace or make_fx, where weights are
      get_attr nodes, named _param_constantN by make_fx): each get_attr
      node's target and node name map to the state_dict key of the model
      tensor with the same storage, offset, shape, strides and dtype
      (identity, not name guessing; tied weights give the first key). A
      0-element tensor has no storage address: it matches only when the
      node's object is the model's own tensor object (symbolic_trace; a
      make_fx copy of an empty tensor is not matched).
      Names equal to their key are left out, and so are names that are
      state_dict keys themselves (a second Parameter or buffer over a
      tied weight's storage: its own entry, an alias of the same bytes;
      a node named after another key: that key's entry). model is
      required.
      Tested for real with torch 1.13's make_fx and symbolic_trace.
    - a torch.export ExportedProgram or its graph_signature: each lifted
      parameter or buffer placeholder name maps to its target (the
      state_dict key). Read from graph_signature.input_specs where it
      exists (torch >= 2.2: InputSpec kind PARAMETER / BUFFER,
      arg.name -> target; non-persistent buffers left out), else from the
      dicts inputs_to_parameters / inputs_to_buffers (torch 2.1). Lifted
      constants, custom objects, tokens and user inputs are not weights:
      left out. With model, only targets in model.state_dict() are kept.
      torch 1.13 has no torch.export: this path is tested against objects
      shaped as pytorch's torch/export/graph_signature.py defines them
      (2.1's dataclass fields; 2.2+'s InputSpec list), not a real export.
    Pass the result to save_model(..., name_map=...)."""
    sig = _export_signature(graph)
    if sig is not None:
        return _from_export_signature(sig, model)
    if model is None:
        raise TypeError("name_map(graph_module, model): model is required for a GraphModule")
    by_id, by_obj = {}, {}
    sd = model.state_dict(keep_vars=True)
    for key, t in sd.items():
        by_obj.setdefault(id(t), key)
        i = _ident(t)
        if i is not None:
            by_id.setdefault(i, key)
    out = {}
    for node in graph.graph.nodes:
        if node.op != "get_attr":
            continue
        try:
            obj = functools.reduce(getattr, node.target.split("."), graph)
        except AttributeError:
            continue
        # a 0-element tensor has no storage to tell it by: the same object
        key = by_id.get(_ident(obj)) if _ident(obj) is not None else by_obj.get(id(obj))
        if key is None:
            continue
        for name in (node.target, node.name):
            # A name that is a state_dict key already names its own entry:
            # mapped elsewhere it would shadow that entry (save_model then
            # refused the map: WPACK_E_EXISTS), and a second key over the
            # same storage (a tie) is an alias entry of the same bytes.
            if name != key and name not in sd:
                out[name] = key
    return out
