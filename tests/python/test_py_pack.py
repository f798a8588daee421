"""wpack.pack over libwpack-import's wpack_import_file(): torch checkpoints,
.npz and .npy packed into one archive, checked against torch.load and
np.load. Fails (never skips) while libwpack-import lacks wpack_import_file
(issue 15's import API)."""
import os

import numpy as np
import torch

from pycase import case, check, main, raises
import wpack


def _inputs(d):
    sd = {"enc.weight": torch.randn(6, 4), "enc.bias": torch.randn(6),
          "head.weight": torch.randn(2, 6).to(torch.bfloat16)}
    pt = os.path.join(d, "m.pt")
    torch.save(sd, pt)
    npz = os.path.join(d, "x.npz")
    np.savez(npz, emb=np.arange(12, dtype=np.int32).reshape(3, 4), scale=np.float64(0.5))
    return pt, npz


@case
def pack_torch_and_npz(d):
    pt, npz = _inputs(d)
    out = os.path.join(d, "p.wpack")
    wpack.pack([pt, npz], out, compress_level=3)
    ref = torch.load(pt)
    with wpack.safe_open(out, framework="pt") as f:
        for k, v in ref.items():
            check(torch.equal(f.get_tensor(k), v), "torch entry %s" % k)
    z = np.load(npz)
    with wpack.safe_open(out) as f:
        names = f.keys()
        for k in z.files:
            hit = [n for n in names if n == k or n.endswith("." + k) or n.endswith("/" + k)]
            check(hit, "npz entry %s missing in %s" % (k, names))
            check(np.array_equal(f.get_tensor(hit[0]), z[k]), "npz entry %s" % k)


@case
def pack_errors(d):
    pt, _ = _inputs(d)
    out = os.path.join(d, "e.wpack")
    raises(TypeError, wpack.pack, pt, out, no_such_option=1)
    junk = os.path.join(d, "junk.pt")
    with open(junk, "wb") as fh:
        fh.write(b"\x80\x02garbage")
    e = raises(wpack.Error, wpack.pack, junk, out)
    check(e.name.startswith("WPACK_E_"), e.name)
    raises(wpack.Error, wpack.pack, os.path.join(d, "missing.pt"), out)
    check(not os.path.exists(out), "output left after a failed pack")


if __name__ == "__main__":
    main()
