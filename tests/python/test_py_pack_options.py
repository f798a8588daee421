"""wpack.pack with importer options (issue 16): the archive is byte for
byte the one `wpack create` writes from the same inputs and flags, for a
torch checkpoint, a safetensors file, an npz, a directory and several
inputs with per-input prefixes; progress and warning callbacks; every
error path raises wpack.Error with the library's message and leaves
nothing at the output."""
import json
import os
import struct
import subprocess

import numpy as np
import torch

from pycase import HERE, case, check, main, raises
import wpack

WPACK = os.environ.get("WPACK") or os.path.join(HERE, "..", "..", "build", "wpack")


def _cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "WPACK_ISA"}
    r = subprocess.run([WPACK, "create", "-q"] + list(args), capture_output=True, text=True,
                       env=env)
    check(r.returncode == 0, "wpack create %s: %s" % (" ".join(args), r.stderr[-800:]))


def _same(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        x, y = fa.read(), fb.read()
    check(len(x) > 0 and x == y, "%s (%d bytes) differs from %s (%d bytes)"
          % (a, len(x), b, len(y)))


def _checkpoint(d):
    torch.manual_seed(16)
    enc = torch.randn(8, 4)
    sd = {"model": {"enc.weight": enc, "enc.bias": torch.randn(8),
                    "dec.weight": enc,            # tied: an alias
                    "head.weight": torch.randn(3, 8, dtype=torch.float64),
                    "steps": torch.arange(5)},
          "epoch": 3}
    pt = os.path.join(d, "m.pt")
    torch.save(sd, pt)
    return pt


def _safetensors(d):
    r = np.random.default_rng(5)
    ts = {"a.weight": r.standard_normal((16, 8)).astype(np.float32),
          "a.bias": r.standard_normal(16).astype(np.float16),
          "ids": np.arange(10, dtype=np.int64)}
    codes = {np.float32: "F32", np.float16: "F16", np.int64: "I64"}
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for k, v in ts.items():
        b = v.tobytes()
        header[k] = {"dtype": codes[v.dtype.type], "shape": list(v.shape),
                     "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    p = os.path.join(d, "w.safetensors")
    with open(p, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return p, ts


def _npz(d):
    p = os.path.join(d, "x.npz")
    np.savez(p, emb=np.linspace(-1, 1, 300000, dtype=np.float32).reshape(3000, 100),
             zeros=np.zeros((256, 256), dtype=np.float32), flag=np.array([True, False]))
    return p


@case
def torch_checkpoint_like_create(d):
    pt = _checkpoint(d)
    a, b = os.path.join(d, "py.wpack"), os.path.join(d, "cli.wpack")
    wpack.pack(pt, a, key="model", prefix="net", cast="bf16", only=["*.weight"],
               histogram_bins=16)
    _cli("-o", b, "--key", "model", "--prefix", "net", "--cast", "bf16", "--only", "*.weight",
         "--histogram", "16", pt)
    _same(a, b)
    with wpack.safe_open(a, framework="pt") as f:
        check(f.describe("net.dec.weight")["kind"] == "alias", f.describe("net.dec.weight"))
        check(f.get_tensor("net.enc.weight").dtype == torch.bfloat16, "cast to bf16")
        check(f.get_tensor("net.enc.bias").dtype == torch.float32, "only= kept the bias")
        check(torch.equal(f.get_tensor("net.steps"), torch.arange(5)), "steps")
        ref = torch.load(pt)["model"]["enc.weight"].to(torch.bfloat16)
        check(torch.equal(f.get_tensor("net.enc.weight"), ref), "bf16 values")


@case
def safetensors_with_stats_names_metadata_like_create(d):
    st, ts = _safetensors(d)
    stats = os.path.join(d, "s.json")
    with open(stats, "w") as fh:
        json.dump({"version": 1, "stats": [
            {"key": "a", "kind": "activation", "count": 10, "min": -1.0, "max": 2.0,
             "mean": 0.5}]}, fh)
    a, b = os.path.join(d, "py.wpack"), os.path.join(d, "cli.wpack")
    wpack.pack([st], a, stats_file=stats, name_map={"p_a_weight": "a.weight", "model.a": "a"},
               metadata={"model.name": "mlp"}, layers="a", alignment=64)
    _cli("-o", b, "--stats", stats, "--name", "p_a_weight=a.weight", "--name", "model.a=a",
         "--meta", "model.name=mlp", "--layers", "a", "--align", "64", st)
    _same(a, b)
    with wpack.safe_open(a) as f:
        for k, v in ts.items():
            check(np.array_equal(f.get_tensor(k), v), k)
        check(np.array_equal(f.get_tensor("p_a_weight"), ts["a.weight"]), "name map")
        check(f.stats("model.a")["max"] == 2.0, f.stats("model.a"))
        check(f.metadata()["model.name"] == "mlp", f.metadata())


@case
def npz_compressed_no_stats_like_create(d):
    npz = _npz(d)
    a, b = os.path.join(d, "py.wpack"), os.path.join(d, "cli.wpack")
    wpack.pack(npz, a, compress_level=3, compress_min=4096, weight_stats=False)
    _cli("-o", b, "--compress", "zstd:3", "--compress-min", "4096", "--no-stats", npz)
    _same(a, b)
    z = np.load(npz)
    with wpack.safe_open(a) as f:
        check(f.describe("zeros")["codec"] == "zstd", f.describe("zeros"))
        check(f.stats() == [], "no weight stats")
        for k in z.files:
            check(np.array_equal(f.get_tensor(k), z[k]), k)


@case
def several_inputs_and_a_directory_like_create(d):
    pt, npz = _checkpoint(d), _npz(d)
    nd = os.path.join(d, "dir", "enc", "0")
    os.makedirs(nd)
    np.save(os.path.join(nd, "w.npy"), np.arange(6, dtype=np.int16).reshape(2, 3))
    np.save(os.path.join(d, "dir", "b.npy"), np.ones(4, dtype=np.float32))
    a, b = os.path.join(d, "py.wpack"), os.path.join(d, "cli.wpack")
    shard = os.path.join(d, "set")
    os.mkdir(shard)
    wpack.pack([(pt, {"prefix": "t", "key": "model"}), npz, os.path.join(d, "dir")], a)
    _cli("-o", b, "--prefix", "t", "--key", "model", pt, "--prefix", "", "--key", "", npz,
         os.path.join(d, "dir"))
    _same(a, b)
    with wpack.safe_open(a) as f:
        check(np.array_equal(f.get_tensor("enc.0.w"), np.arange(6).reshape(2, 3)), "dir")
        check("t.enc.weight" in f and "emb" in f, f.keys())
    # a sharded set: the manifest and each shard as the CLI writes them
    wpack.pack(npz, os.path.join(shard, "py.wpack"), shard_size=200000)
    os.mkdir(os.path.join(d, "set2"))
    _cli("-o", os.path.join(d, "set2", "py.wpack"), "--shard-size", "200000", npz)
    names = sorted(os.listdir(shard))
    check(len(names) > 2 and names == sorted(os.listdir(os.path.join(d, "set2"))), names)
    for n in names:
        _same(os.path.join(shard, n), os.path.join(d, "set2", n))
    # a single archive written over the set: once it is in place, the set's
    # shards go (pack() reads no .wpack, so none can be an input)
    m = os.path.join(shard, "py.wpack")
    wpack.pack(npz, m)
    check(os.listdir(shard) == ["py.wpack"], os.listdir(shard))
    with wpack.safe_open(m) as f:
        check("emb" in f, f.keys())


@case
def progress_and_warnings(d):
    npz = _npz(d)
    nd = os.path.join(d, "dir")
    os.mkdir(nd)
    np.save(os.path.join(nd, "w.npy"), np.ones((1000, 1000), dtype=np.float32))
    with open(os.path.join(nd, "notes.txt"), "w") as fh:
        fh.write("not a tensor")
    seen, warned = [], []
    wpack.pack([npz, nd], os.path.join(d, "o.wpack"),
               progress=lambda done, total, p: seen.append((done, total, p)),
               warn=warned.append)
    total = os.path.getsize(npz) + os.path.getsize(os.path.join(nd, "w.npy"))
    check(seen and all(t == total for _, t, _ in seen), seen[:3])
    check([x[0] for x in seen] == sorted(x[0] for x in seen), "progress goes backwards")
    check(seen[-1][0] == total, "done never reaches total: %s of %s" % (seen[-1], total))
    check(all(d <= total for d, _, _ in seen), "done beyond total")
    check({p for _, _, p in seen} == {npz, os.path.join(nd, "w.npy")}, seen)
    check(any("notes.txt" in w for w in warned), warned)
    # a cast that overflows says so: 2 of the 4 values are beyond f16
    big = os.path.join(d, "big.npy")
    np.save(big, np.array([1.0, 7e4, -1e5, 65504.0], dtype=np.float32))
    warned = []
    wpack.pack(big, os.path.join(d, "big.wpack"), cast="f16", warn=warned.append)
    check(warned == ["%s: tensor 'big': 2 of 4 values are beyond f16's range (+-65504) and "
                     "became +-inf" % big], warned)

    def stop(done, total, p):
        raise KeyboardInterrupt("stop")
    out = os.path.join(d, "stopped.wpack")
    raises(KeyboardInterrupt, wpack.pack, npz, out, progress=stop)
    check(not os.path.exists(out), "output left after a callback raised")
    check(not [n for n in os.listdir(d) if ".tmp-" in n], os.listdir(d))


@case
def detect_kinds(d):
    pt, npz = _checkpoint(d), _npz(d)
    st, _ = _safetensors(d)
    np.save(os.path.join(d, "a.npy"), np.ones(2))
    for p, k in ((pt, "torch"), (npz, "zip"), (st, "safetensors"),
                 (os.path.join(d, "a.npy"), "npy"), (d, "directory")):
        check(wpack.detect(p) == k, "%s: %s, not %s" % (p, wpack.detect(p), k))
    junk = os.path.join(d, "junk")
    with open(junk, "wb") as fh:
        fh.write(b"hello")
    e = raises(wpack.Error, wpack.detect, junk)
    check("junk" in str(e), str(e))
    e = raises(wpack.Error, wpack.detect, os.path.join(d, "missing"))
    check(e.name == "WPACK_E_NOT_FOUND" and "missing" in str(e), (e.name, str(e)))


@case
def pack_error_paths(d):
    pt, npz = _checkpoint(d), _npz(d)
    out = os.path.join(d, "o.wpack")
    e = raises(wpack.Error, wpack.pack, [npz, npz], out, code="WPACK_E_EXISTS")
    check("emb" in str(e) and "x.npz" in str(e), str(e))
    raises(wpack.Error, wpack.pack, pt, out, cast="f8", code="WPACK_E_INVALID_ARGUMENT")
    raises(wpack.Error, wpack.pack, pt, out, only=["*"], code="WPACK_E_INVALID_ARGUMENT")
    raises(wpack.Error, wpack.pack, pt, out, key="nope", code="WPACK_E_NOT_FOUND")
    e = raises(wpack.Error, wpack.pack, npz, out, max_output=1000, code="WPACK_E_TOO_LARGE")
    check("x.npz" in str(e) or "emb" in str(e), str(e))
    empty = os.path.join(d, "empty")
    os.mkdir(empty)
    raises(wpack.Error, wpack.pack, empty, out, code="WPACK_E_EMPTY")
    check(not os.path.exists(out), "output left after a failed pack")
    wpack.pack(empty, out, allow_empty=True)
    with wpack.safe_open(out) as f:
        check(len(f) == 0, f.keys())
    raises(wpack.Error, wpack.pack, [npz, pt], pt, code="WPACK_E_SAME_FILE")
    check(torch.load(pt)["epoch"] == 3, "the input was overwritten")
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as fh:
        json.dump({"version": 1, "stats": [{"key": "emb", "count": 1, "min": 2.0,
                                            "max": 1.0, "mean": 0.0}]}, fh)
    out2 = os.path.join(d, "o2.wpack")
    e = raises(wpack.Error, wpack.pack, npz, out2, stats_file=bad)
    check("stats[0]" in str(e), str(e))
    raises(wpack.Error, wpack.pack, npz, out2, name_map={"x": "no.such.entry"})
    raises(TypeError, wpack.pack, [(npz, {"cast": "bf16"})], out2)
    e = raises(TypeError, wpack.pack, (npz, {"prefix": "p"}), out2)
    check("list" in str(e) and "dict" not in str(e), "one pair, not in a list: %s" % e)
    e = raises(TypeError, wpack.pack, [npz, {"prefix": "p"}], out2)
    check("(path, {'prefix'" in str(e), "a dict as an input: %s" % e)
    # A missing stats file is the library's error whether the output exists
    # or not (it was FileNotFoundError from samefile when it did).
    missing = os.path.join(d, "missing.json")
    e1 = raises(wpack.Error, wpack.pack, npz, out2, stats_file=missing)
    wpack.pack(npz, out2)
    e2 = raises(wpack.Error, wpack.pack, npz, out2, stats_file=missing)
    check(e1.name == e2.name and "missing.json" in str(e2), (str(e1), str(e2)))
    os.remove(out2)
    check(not os.path.exists(out2), "output left after a failed pack")
    check(not [n for n in os.listdir(d) if ".tmp-" in n], os.listdir(d))


@case
def installed_package_packs(d):
    # make install PREFIX=d: the installed package finds the installed
    # libwpack-import and libwpack-remote beside the installed libwpack.
    root = os.path.abspath(os.path.join(HERE, "..", ".."))
    build = os.environ.get("WPACK_LIBRARY_PATH", os.path.join(root, "build"))
    r = subprocess.run(["make", "-s", "-C", root, "install", "PREFIX=" + d,
                        "BUILD=" + os.path.relpath(build, root)], capture_output=True, text=True)
    check(r.returncode == 0, "make install: %s" % r.stderr[-400:])
    npz = _npz(d)
    env = {k: v for k, v in os.environ.items() if k not in ("WPACK_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = os.path.join(d, "lib", "python3", "dist-packages")
    r = subprocess.run(["/usr/bin/python3", "-c",
                        "import wpack, sys; wpack.pack(sys.argv[1], 'o.wpack', cast='f16');"
                        "wpack._lib.remote_lib(); p = wpack._lib.library_paths();"
                        "print(p['wpack-import']); print(p['wpack-remote'])", npz],
                       capture_output=True, text=True, env=env, cwd=d)
    check(r.returncode == 0, "installed wpack.pack: %s" % r.stderr[-600:])
    lib = os.path.join(d, "lib")
    check(r.stdout.split() == [os.path.join(lib, "libwpack-import.so.0"),
                               os.path.join(lib, "libwpack-remote.so.0")], r.stdout)
    with wpack.safe_open(os.path.join(d, "o.wpack")) as f:
        check(f.describe("emb")["dtype"] == "f16", f.describe("emb"))


if __name__ == "__main__":
    main()
