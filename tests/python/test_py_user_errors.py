"""wpack Python package: exceptions as a Python (safetensors, torch) user
catches them. A path that cannot be opened or created for an OS reason is
a wpack.Error that is also the OSError Python raises for that errno
(FileNotFoundError, NotADirectoryError, ...), as safetensors' safe_open
and torch.load raise FileNotFoundError for a missing file."""
import copy
import errno
import os
import pickle

import numpy as np
import torch

from pycase import BAD, SHOWN, case, check, escaped, main, raises
import wpack
import wpack.torch as wt


def _is_os_error(e, cls, code, path):
    check(isinstance(e, cls) and isinstance(e, wpack.Error) and isinstance(e, OSError),
          "%s: %r is not a wpack.Error and %s" % (path, e, cls.__name__))
    want = {FileNotFoundError: errno.ENOENT, NotADirectoryError: errno.ENOTDIR}[cls]
    check(e.errno == want and e.strerror == os.strerror(want),
          "errno %r strerror %r" % (e.errno, e.strerror))
    check(e.name == code, "code %s, want %s" % (e.name, code))
    # the library's message as before: the path, what failed, the code
    check(path in str(e) and str(e).endswith("[%s]" % code) and "[Errno" not in str(e),
          "message: %s" % e)


@case
def missing_files_are_file_not_found_errors(d):
    # `except FileNotFoundError` (what safetensors' safe_open and
    # torch.load raise for a missing file) did not catch wpack's: a plain
    # wpack.Error, no OSError at all
    gone = os.path.join(d, "gone.wpack")
    stats = {"x": {"count": 1, "min": 0.0, "max": 1.0, "mean": 0.5}}
    for what, fn, code in (
            ("safe_open np", lambda: wpack.safe_open(gone), "WPACK_E_IO"),
            ("safe_open pt", lambda: wpack.safe_open(gone, framework="pt"), "WPACK_E_IO"),
            ("load_file", lambda: wpack.load_file(gone), "WPACK_E_IO"),
            ("load_model", lambda: wt.load_model(torch.nn.Linear(2, 2), gone), "WPACK_E_IO"),
            ("update_stats", lambda: wpack.update_stats(gone, stats), "WPACK_E_IO"),
            ("pack", lambda: wpack.pack([os.path.join(d, "gone.pt")], gone), "WPACK_E_IO"),
            ("detect", lambda: wpack.detect(os.path.join(d, "gone.pt")), "WPACK_E_NOT_FOUND"),
            ("save_file", lambda: wpack.save_file({"a": np.ones(2)},
                                                   os.path.join(d, "no", "dir.wpack")),
             "WPACK_E_IO")):
        try:
            fn()
        except FileNotFoundError as e:
            _is_os_error(e, FileNotFoundError, code, d)
        except Exception as e:   # noqa: B902 - the failure being tested
            raise AssertionError("%s: %r is not a FileNotFoundError" % (what, e)) from None
        else:
            raise AssertionError("%s did not raise" % what)


@case
def a_file_used_as_a_directory_is_not_a_directory_error(d):
    f = os.path.join(d, "file")
    with open(f, "w") as out:
        out.write("x")
    inside = os.path.join(f, "m.wpack")
    for fn in (lambda: wpack.safe_open(inside), lambda: wpack.safe_open(inside, framework="pt"),
               lambda: wpack.save_file({"a": np.ones(2)}, inside)):
        e = raises(NotADirectoryError, fn)
        _is_os_error(e, NotADirectoryError, "WPACK_E_IO", inside)


@case
def os_flavoured_errors_pickle_and_copy(d):
    # an Error sent back from a worker process keeps its class and errno
    e = raises(FileNotFoundError, wpack.safe_open, os.path.join(d, "gone.wpack"))
    for again in (pickle.loads(pickle.dumps(e)), copy.copy(e), copy.deepcopy(e)):
        check(type(again) is type(e) and (again.code, again.name, str(again), again.args,
                                          again.errno, again.strerror) ==
              (e.code, e.name, str(e), e.args, e.errno, e.strerror), "rebuilt: %r" % (again,))


@case
def other_failures_stay_plain_errors(d):
    # only an OS failure is an OSError: a file that is no archive, a
    # missing tensor, a directory refused by type are not
    p = os.path.join(d, "junk")
    with open(p, "wb") as out:
        out.write(b"not an archive" * 100)
    e = raises(wpack.Error, wpack.safe_open, p, code="WPACK_E_BAD_MAGIC")
    check(not isinstance(e, OSError), "bad magic is %r" % (e,))
    good = os.path.join(d, "m.wpack")
    wpack.save_file({"a": np.ones(2, np.float32)}, good)
    with wpack.safe_open(good) as f:
        e = raises(wpack.Error, f.get_tensor, "No such file or directory", code="WPACK_E_NOT_FOUND")
        check(not isinstance(e, OSError), "a missing tensor is %r" % (e,))
    check(isinstance(wpack.Error(wpack.E_IO, "x: cannot open: Input/output error"), OSError)
          and not isinstance(wpack.Error(wpack.E_INVALID_ARGUMENT, "x: No such file or directory"),
                             OSError),
          "only WPACK_E_IO (and detect's WPACK_E_NOT_FOUND) carry an errno")
    check(type(wpack.Error(wpack.E_IO, "x: short read")) is wpack.Error, "no errno, no OSError")



@case
def writer_refusals_name_the_output(d):
    # a tensor, metadata key or stats record the writer refused was named
    # without the archive ("tensor '': empty name"): which of the files a
    # conversion script writes was it?
    p = os.path.join(d, "out.wpack")
    o = np.ones(2, np.float32)
    for fn, code, also in (
            (lambda: wpack.save_file({"": o}, p), "WPACK_E_NAME", "tensor ''"),
            (lambda: wpack.save_file({"a": np.ones((1,) * 9)}, p), "WPACK_E_RANK", "tensor 'a'"),
            (lambda: wpack.save_file({"a": o}, p, metadata={"": 1}), "WPACK_E_NAME", "metadata"),
            (lambda: wpack.save_file({"a": o}, p, metadata={"wpack.layers": 3}),
             "WPACK_E_METADATA", "wpack.layers"),
            (lambda: wpack.save_file({"a": o, "b": o + 1}, p, name_map={"b": "a"}),
             "WPACK_E_EXISTS", "'b'"),
            (lambda: wpack.save_file({"a": o}, p, stats={"a": {"count": 1, "min": 2.0,
                                                               "max": 1.0, "mean": 0.0}}),
             "WPACK_E_STATS", "stats 'a'"),
            (lambda: wt.save_model(torch.nn.Linear(2, 2), p, metadata={"": 1}), "WPACK_E_NAME",
             "metadata")):
        e = raises(wpack.Error, fn, code=code)
        check(p in str(e) and also in str(e), "%s: %s names no output or no %s" % (code, e, also))
        check(str(e).count(p) == 1, "named twice: %s" % e)
        check(not os.path.exists(p), "an archive was left at %s" % p)
    bad = os.path.join(d, BAD + ".wpack")   # named once, escaped as the library does
    e = raises(wpack.Error, wpack.save_file, {"": o}, bad, code="WPACK_E_NAME")
    check(escaped(e, "tensor ''") and str(e).count(SHOWN) == 1, "shown: %s" % e)


@case
def slice_index_errors_name_the_tensor(d):
    # get_slice(name)[key] out of range said "index 50 is out of bounds for
    # dimension 0 of size 4" (or numpy's words): which of a loader's many
    # slices, of which archive? (get_tensor's errors name both)
    p = os.path.join(d, "m.wpack")
    wpack.save_file({"w": np.ones((4, 3), np.float32), "z": np.zeros((4, 3), np.float32)}, p,
                    compress_level=3, compress_min=0)
    for fw in ("np", "pt"):
        with wpack.safe_open(p, framework=fw) as f:
            for name in ("w", "z"):
                for key, shown in ((50, "[50]"), ((0, 9), "[0, 9]"), ((Ellipsis, 9), "[..., 9]"),
                                   ([0, 9], "[[0, 9]]"), ((0, 0, 0), "[0, 0, 0]")):
                    e = raises(IndexError, f.get_slice(name).__getitem__, key)
                    check(p in str(e) and "get_slice(%r)%s" % (name, shown) in str(e) and
                          ("out of bounds" in str(e) or "too many indices" in str(e)),
                          "%s %s %r: %s" % (fw, name, key, e))


@case
def calibrate_into_a_missing_directory_is_file_not_found(d):
    # calibrate refuses a path it could not write before running the
    # batches: a plain wpack.Error, where save_file into the same missing
    # directory is a FileNotFoundError
    m = torch.nn.Sequential(torch.nn.Linear(2, 2))
    f = os.path.join(d, "file")
    with open(f, "w") as out:
        out.write("x")
    for path, cls in ((os.path.join(d, "no", "m.wpack"), FileNotFoundError),
                      (os.path.join(f, "m.wpack"), NotADirectoryError)):
        e = raises(cls, wt.calibrate, m, [torch.ones(1, 2)], path)
        _is_os_error(e, cls, "WPACK_E_IO", path)
        check("nothing was run or written" in str(e), str(e))


@case
def bad_argument_values_are_value_errors(d):
    # a bad option value (pack's cast="bfloat16", a chunk_sums that is no
    # power of two, an unknown URL scheme) was a wpack.Error only:
    # `except ValueError`, what Python raises for a bad value, missed it
    p = os.path.join(d, "m.wpack")
    a = {"a": np.ones(3)}
    for fn in (lambda: wpack.pack([], p, cast="bfloat16", allow_empty=True),
               lambda: wpack.pack([], p, only=["*.weight"], allow_empty=True),
               lambda: wpack.save_file(a, p, chunk_sums=3),
               lambda: wpack.save_file(a, p, compress_level=99),
               lambda: wpack.save_file(a, p, histogram_bins=4, weight_stats=False),
               lambda: wpack.safe_open("ftp://host/m.wpack")):
        e = raises(ValueError, fn)
        check(isinstance(e, wpack.Error) and e.name == "WPACK_E_INVALID_ARGUMENT" and
              str(e).endswith("[WPACK_E_INVALID_ARGUMENT]"), "%r" % (e,))
        check(type(pickle.loads(pickle.dumps(e))) is type(e), "pickled: %r" % (e,))


@case
def unknown_names_are_key_errors(d):
    # get_tensor("nope") is a lookup by key: `except KeyError` (what a dict,
    # and load_file's dict, raise) missed wpack's WPACK_E_NOT_FOUND
    p = os.path.join(d, "m.wpack")
    wpack.save_file({"a": np.ones(3, np.float32)}, p)
    for fw in ("np", "pt"):
        with wpack.safe_open(p, framework=fw) as f:
            for fn in (f.get_tensor, f.get_slice, f.describe, f.stats, f.read_plan):
                e = raises(KeyError, fn, "nope")
                check(isinstance(e, wpack.Error) and e.name == "WPACK_E_NOT_FOUND", "%r" % (e,))
                # str() as every Error's, not KeyError's repr of it ("'...'")
                check(str(e).startswith(p) and "'nope'" in str(e) and
                      str(e).endswith("[WPACK_E_NOT_FOUND]"), "%s: %s" % (fn.__name__, e))
                again = pickle.loads(pickle.dumps(e))
                check(type(again) is type(e) and str(again) == str(e), "pickled: %r" % (again,))
    # a missing file is no KeyError, a found name no error
    e = raises(FileNotFoundError, wpack.detect, os.path.join(d, "gone.pt"))
    check(not isinstance(e, KeyError), "a missing file is %r" % (e,))


@case
def wpack_torch_has_safetensors_torch_load_and_save_file(d):
    # "from safetensors.torch import load_file, save_file" is how torch
    # users load and save; "from wpack.torch import ..." was ImportError
    from wpack.torch import load_file, save_file
    p = os.path.join(d, "m.wpack")
    sd = {"w": torch.randn(3, 4), "b": torch.zeros(4, dtype=torch.bfloat16)}
    save_file(sd, p, metadata={"format": "pt"})
    got = load_file(p)
    check(set(got) == set(sd) and all(torch.is_tensor(v) and torch.equal(v, sd[k])
                                      for k, v in got.items()), "load_file: %r" % (got,))
    got = load_file(p, device="cpu")
    check(all(v.device.type == "cpu" for v in got.values()), "device")
    with wpack.safe_open(p) as f:
        check(f.metadata()["format"] == "pt", "metadata")


if __name__ == "__main__":
    main()
