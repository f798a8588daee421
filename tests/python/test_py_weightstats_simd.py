"""Weight stats of f32, bf16 and f16 tensors (written by wpack.save_file on
this CPU's best SIMD path) against numpy in float64: count, min and max
exact, mean and variance within 1e-12 relative, histogram counts equal to
np.histogram's on the writer's edges. Lengths around the SIMD group (8)
and block (4096) sizes, values with NaN, infinity, -0.0 and denormals."""
import os

import numpy as np
import torch

from pycase import case, check, main
import wpack


def values(rng, n, kind):
    if kind == "weights":
        return rng.standard_normal(n).astype(np.float32)
    if kind == "offset":  # a large mean: the shifted sums must keep the variance
        return (rng.random(n) * 100 + 3000).astype(np.float32)
    if kind == "special":
        v = rng.standard_normal(n).astype(np.float32)
        pick = rng.random(n)
        v[pick < 0.01] = np.nan
        v[(pick >= 0.01) & (pick < 0.015)] = np.inf
        v[(pick >= 0.015) & (pick < 0.02)] = -np.inf
        v[(pick >= 0.02) & (pick < 0.05)] = -0.0
        v[(pick >= 0.05) & (pick < 0.06)] = 1e-40  # an f32 denormal
        return v
    raise ValueError(kind)


@case
def stats_match_numpy(d):
    rng = np.random.default_rng(7)
    tensors, ref = {}, {}
    for n in (1, 7, 8, 9, 4095, 4097, 12345, 100003):
        for kind in ("weights", "offset", "special"):
            v = values(rng, n, kind)
            for dt in ("f32", "bf16", "f16"):
                name = "%s.%s.%d" % (dt, kind, n)
                if dt == "f32":
                    tensors[name], exact = v, v.astype(np.float64)
                elif dt == "f16":
                    h = v.astype(np.float16)
                    tensors[name], exact = h, h.astype(np.float64)
                else:
                    t = torch.from_numpy(v.copy()).to(torch.bfloat16)
                    tensors[name], exact = t, t.float().numpy().astype(np.float64)
                ref[name] = exact[np.isfinite(exact)]
    p = os.path.join(d, "s.wpack")
    wpack.save_file(tensors, p, histogram_bins=37)
    bad = []
    with wpack.safe_open(p) as f:
        for name, v in ref.items():
            s = f.stats(name)
            ok = s["count"] == v.size and s["min"] == v.min() and s["max"] == v.max()
            ok = ok and abs(s["mean"] - v.mean()) <= 1e-12 * np.abs(v).max()
            ok = ok and abs(s["variance"] - v.var()) <= 1e-12 * v.var() + 1e-300
            edges, counts = s["histogram"]
            ok = ok and np.array_equal(counts, np.histogram(v, bins=edges)[0])
            if not ok:
                bad.append("%s: count %d/%d min %r/%r max %r/%r mean %r/%r var %r/%r"
                           % (name, s["count"], v.size, s["min"], v.min(), s["max"], v.max(),
                              s["mean"], v.mean(), s["variance"], v.var()))
    check(not bad, "%d tensors differ from numpy, first: %s" % (len(bad), bad[:3]))


if __name__ == "__main__":
    main()
