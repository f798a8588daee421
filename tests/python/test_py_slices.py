"""wpack Python package, get_slice edge cases: block dtypes (shape in
elements, slices of whole rows and blocks or a refusal naming the tensor),
the size a failed slice quotes, and use after close."""
import os
import sys

import numpy as np
import torch

from pycase import case, check, main, raises, run_capped
import wpack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gguf_tool as G  # noqa: E402  (tests/cli: a GGUF writer independent of wpack)

rng = np.random.default_rng(25)
Q4_0 = 2   # GGML type id: 32 elements in 18 bytes


def _quantized(d):
    """An archive with ggml.q4_0 tensors w2 [3, 64] and w1 [128] (made by
    wpack.pack from a GGUF file) and their bytes."""
    w2 = rng.integers(0, 256, 3 * 2 * 18, dtype=np.uint8)
    w1 = rng.integers(0, 256, 4 * 18, dtype=np.uint8)
    g, p = os.path.join(d, "q.gguf"), os.path.join(d, "q.wpack")
    G.write(g, [("general.architecture", G.STRING, "llama")],
            [("w2", Q4_0, [64, 3], w2.tobytes()), ("w1", Q4_0, [128], w1.tobytes())])
    wpack.pack([g], p)
    return p, w2, w1


@case
def block_dtype_shape_is_in_elements(d):
    # get_slice(name).get_shape() of a ggml.q4_0 [3, 64] tensor was [108],
    # its bytes, while describe() and wpack inspect said [3, 64]
    p, w2, w1 = _quantized(d)
    for fw in ("np", "pt"):
        with wpack.safe_open(p, framework=fw) as f:
            for name, shape in (("w2", [3, 64]), ("w1", [128])):
                s = f.get_slice(name)
                check(s.get_shape() == shape == list(f.describe(name)["shape"]),
                      "%s %s: %s" % (fw, name, s.get_shape()))
                check(s.get_dtype() == "ggml.q4_0", s.get_dtype())
            check(tuple(f.get_tensor("w2").shape) == (108,), "get_tensor: its bytes")


@case
def block_dtype_slices_are_whole_rows(d):
    # a slice indexed the bytes as elements: [1:3] of w2 [3, 64] gave bytes
    # 1..2, not rows 1..2 (36 bytes each)
    p, w2, w1 = _quantized(d)
    rows = w2.reshape(3, 36)
    for fw in ("np", "pt"):
        with wpack.safe_open(p, framework=fw) as f:
            s, s1 = f.get_slice("w2"), f.get_slice("w1")
            want = [((slice(1, 3),), rows[1:3].ravel()), ((1,), rows[1]),
                    ((-1, slice(None)), rows[2]), ((slice(None, None, -1),), rows[::-1].ravel()),
                    ((Ellipsis,), w2), ((slice(0, 3, 2), Ellipsis), rows[::2].ravel()),
                    ((slice(0, 2), slice(0, 64)), rows[:2].ravel()),
                    ((slice(2, 2),), w2[:0]), ((slice(5, 9),), w2[:0])]
            for key, exp in want:
                got = s[key]
                check(isinstance(got, np.ndarray if fw == "np" else torch.Tensor), type(got))
                got = np.asarray(got)
                check(got.dtype == np.uint8 and np.array_equal(got, exp),
                      "%s w2[%s]: %s" % (fw, key, got.shape))
            for key, exp in (((slice(32, 128),), w1[18:]), ((slice(0, 64),), w1[:36]),
                             ((Ellipsis,), w1), ((slice(64, 64),), w1[:0])):
                got = np.asarray(s1[key])
                check(np.array_equal(got, exp), "%s w1[%s]: %s" % (fw, key, got.shape))
            if fw == "np":
                check(not s[0:2].flags.writeable, "np rows of a plain entry: a view")


@case
def block_dtype_slices_that_cut_a_block_are_refused(d):
    p, w2, w1 = _quantized(d)
    with wpack.safe_open(p) as f:
        for name, key, why in (("w2", (slice(0, 2), slice(0, 32)), "dimension 1 must be whole"),
                               ("w2", (0, 0), "dimension 1 must be whole"),
                               ("w1", 5, "elements 5..6"),
                               ("w1", slice(0, 16), "elements 0..16"),
                               ("w1", slice(16, 48), "elements 16..48"),
                               ("w1", slice(None, None, -1), "step -1"),
                               ("w1", slice(0, 128, 2), "step 2"),
                               ("w2", None, "index None"),
                               ("w2", [0, 1], "index [0, 1]"),
                               # an array index: refused, not ValueError from
                               # comparing it with '...'
                               ("w2", (np.array([0, 1]), Ellipsis), "index array")):
            e = raises(wpack.Error, f.get_slice(name).__getitem__, key,
                       code="WPACK_E_UNSUPPORTED")
            check("q.wpack: get_slice(%r)" % name in str(e) and "ggml.q4_0" in str(e) and
                  why in str(e), str(e))
        raises(IndexError, f.get_slice("w2").__getitem__, 3)
        raises(IndexError, f.get_slice("w2").__getitem__, (0, slice(None), 0))
        raises(IndexError, f.get_slice("w2").__getitem__, (Ellipsis, Ellipsis))
        raises(TypeError, f.get_slice("w2").__getitem__, True)


@case
def failed_slice_quotes_its_own_size(d):
    # WPACK_E_NOMEM of a slice quoted the whole entry's bytes (4 TiB for
    # half of it)
    p = os.path.join(d, "s.wpack")
    wpack.save_file({"big": torch.ones(1).expand(1 << 20, 1 << 20)}, p)   # 4 TiB splat
    r = run_capped("import sys, wpack\n"
                   "f = wpack.safe_open(sys.argv[1], framework='pt')\n"
                   "for key in (slice(0, 1 << 19), (slice(0, 1 << 19), 0)):\n"
                   "    try:\n"
                   "        f.get_slice('big')[key]\n"
                   "        print('no-error')\n"
                   "    except wpack.Error as e:\n"
                   "        print(e.name, str(e))\n", p)
    lines = r.stdout.splitlines()
    check(len(lines) == 2, "rc %d out %r err %r" % (r.returncode, r.stdout, r.stderr[-300:]))
    half = (1 << 19) * (1 << 20) * 4
    check(lines[0].startswith("WPACK_E_NOMEM ") and "'big' (a slice)" in lines[0] and
          "its %d bytes" % half in lines[0], lines[0])
    # [rows, 0]: 2 MiB (1 << 19 floats): allocated, no error
    check(lines[1] == "no-error", lines[1])


@case
def use_after_close_names_the_archive(d):
    # "archive is closed [WPACK_E_STATE]": which of the program's archives?
    p = os.path.join(d, "closed.wpack")
    wpack.save_file({"a": np.ones((2, 2), np.float32)}, p)
    for fw in ("np", "pt"):
        f = wpack.safe_open(p, framework=fw)
        s = f.get_slice("a")
        f.close()
        for fn in (f.keys, f.metadata, f.info, lambda: f.get_tensor("a"), lambda: s[0],
                   lambda: "a" in f, lambda: len(f)):
            e = raises(wpack.Error, fn, code="WPACK_E_STATE")
            check(str(e).startswith(p + ": the archive is closed"), str(e))

    # a close() in another thread between _handle()'s check and its return
    # (the GIL switches between any two bytecodes) gave None: AttributeError
    # "'NoneType' object has no attribute 'ptr'", not WPACK_E_STATE. Here
    # the close happens at that point: every read of _h closes the archive.

    class ClosedWhileRead(wpack.safe_open):
        armed = False

        @property
        def _h(self):
            h = self.__dict__.get("_real")
            if self.armed:
                self.__dict__["_real"] = None
            return h

        @_h.setter
        def _h(self, h):
            self.__dict__["_real"] = h

    for fw in ("np", "pt"):
        f = ClosedWhileRead(p, framework=fw)
        f.armed = True
        for fn in (lambda: f.get_tensor("a"), f.keys, lambda: f.describe("a")):
            f.__dict__["_real"] = wpack.safe_open(p, framework=fw)._h
            raises(wpack.Error, fn, code="WPACK_E_STATE")

if __name__ == "__main__":
    main()
