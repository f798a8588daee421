"""wpack.pack over libwpack-import's wpack_import_file(): torch checkpoints,
.npz and .npy packed into one archive, checked against torch.load and
np.load. Fails (never skips) while libwpack-import lacks wpack_import_file
(issue 15's import API)."""
import os

import numpy as np
import torch

from pycase import BAD, SHOWN, case, check, escaped, main, raises
import wpack

torch.manual_seed(0)  # a failure reruns with the same values


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
def pack_messages_escape_controls(d):
    """Paths, tar / npz members, safetensors and torch keys holding ESC, LF
    and CR reach the exception escaped."""
    import io, json, struct, tarfile, zipfile
    out = os.path.join(d, "o.wpack")
    e = raises(wpack.Error, wpack.pack, [os.path.join(d, "missing" + BAD + ".npy")], out)
    check(escaped(e, "missing"), "missing: %r" % str(e))
    junk = b"not an npy file"
    tar = os.path.join(d, "m.tar")
    with tarfile.open(tar, "w") as tf:
        ti = tarfile.TarInfo("w" + BAD + ".npy")
        ti.size = len(junk)
        tf.addfile(ti, io.BytesIO(junk))
    e = raises(wpack.Error, wpack.pack, [tar], out, code="WPACK_E_INPUT")
    check(escaped(e, "m.tar: member 'w"), "tar member: %r" % str(e))
    npz = os.path.join(d, "z" + BAD + ".npz")
    with zipfile.ZipFile(npz, "w") as zf:
        zf.writestr("a" + BAD + ".npy", junk)
    e = raises(wpack.Error, wpack.pack, [npz], out, code="WPACK_E_INPUT")
    check(escaped(e, "z" + SHOWN + ".npz: member 'a" + SHOWN), "npz member: %r" % str(e))
    hdr = json.dumps({"k" + BAD: {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode()
    st = os.path.join(d, "s.safetensors")
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 4)
    e = raises(wpack.Error, wpack.pack, [st], out, code="WPACK_E_SIZE")
    check(escaped(e, "'k"), "safetensors key: %r" % str(e))
    pt = os.path.join(d, "t" + BAD + ".pt")
    torch.save({"k" + BAD: torch.ones(2)}, pt)
    e = raises(wpack.Error, wpack.pack, [pt], out, code="WPACK_E_NAME")
    check(escaped(e, "t" + SHOWN + ".pt", "k" + SHOWN), "torch key: %r" % str(e))


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
