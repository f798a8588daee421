#!/usr/bin/python3
"""make_corpus_importers.py - seed corpora of the importer and resolver targets:

  DIR/fuzz_safetensors/seed-*.safetensors   hand-made valid files (every dtype,
                                            metadata, empty and 0-d tensors)
                                            and broken ones
  DIR/fuzz_safetensors/hostile-*            copies of tests/hostile/importers/st_*
  DIR/fuzz_torch/seed-torch-*.pt            torch.save checkpoints: the cases of
                                            tests/import/torch_cases.py plus a few
                                            small ones (every dtype, protocols 2
                                            and 4, legacy format, big-endian)
  DIR/fuzz_torch/seed-pickle-*.pkl          their data.pkl as bare pickles
  DIR/fuzz_torch/hostile-*                  copies of tests/hostile/importers/*.pt
  DIR/fuzz_stats_json/seed-*.json           stats files (import/README.md schema)
  DIR/fuzz_manifest/seed-*.json             raw-binary manifests (import/README.md
                                            schema): valid ones, each rule broken
                                            once, broken JSON
  DIR/fuzz_manifest/hostile-*               copies of tests/hostile/importers/manifest*
  DIR/fuzz_mlir/seed-*.mlir                 tests/mlir/*.mlir, inline cases of
                                            tests/cli/test_resolve.sh and each
                                            case of tests/mlir/malformed.txt
  DIR/fuzz_calib/seed-formats-*             the files of tests/cli/calib_formats_tool.py
                                            (TensorRT cache, ONNX Runtime tables,
                                            imatrix .dat and GGUF as their tools
                                            write them)
  DIR/fuzz_calib/seed-tool-*                the files of tests/cli/calib_tool.py make
                                            (valid and the bad ones of
                                            tests/cli/test_calib_in.sh)
  DIR/fuzz_calib/seed-{trt,ort,dat,gguf}-*  hand-made ones, each breaking one rule

Files larger than the target's max_len are skipped. torch comes from
/usr/bin/python3; without it the torch seeds are skipped, and without numpy
(the calibration tools of tests/cli need it) the seed-formats-* and
seed-tool-* ones.

  make_corpus_importers.py DIR
"""
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LEN = {"fuzz_safetensors": 65536, "fuzz_torch": 65536, "fuzz_stats_json": 16384,
           "fuzz_mlir": 65536, "fuzz_manifest": 16384, "fuzz_calib": 65536}


def write(corpus, target, name, data):
    if len(data) > MAX_LEN[target]:
        return 0
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data)
    return 1


def copy_hostile(corpus, target, pred):
    top = os.path.join(ROOT, "tests", "hostile", "importers")
    n = 0
    for fn in sorted(os.listdir(top)):
        path = os.path.join(top, fn)
        if os.path.isfile(path) and pred(fn):
            with open(path, "rb") as f:
                n += write(corpus, target, "hostile-" + fn, f.read())
    return n


# ------------------------------------------------------------ safetensors

ST_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
            "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def safetensors(tensors, meta=None, pad=True, header_extra=None):
    """tensors: [(name, dtype, shape)]; data is a counting pattern."""
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape in tensors:
        n = ST_SIZES.get(dtype, 4)
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((i * 7 + 1) & 0xFF for i in range(n))
    if header_extra:
        header.update(header_extra)
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def st_seeds(corpus):
    t = "fuzz_safetensors"
    seeds = {
        "small": safetensors([("w", "F32", [2, 3]), ("b", "F16", [3])]),
        "every-dtype": safetensors([("t_" + d.lower(), d, [2]) for d in ST_SIZES]),
        "meta": safetensors([("x", "I64", [1])], meta={"format": "pt", "epoch": "3"}),
        "empty-tensor": safetensors([("e", "F32", [0, 4]), ("x", "U8", [1])]),
        "scalar": safetensors([("s", "F64", [])]),
        "no-tensors": safetensors([], meta={}),
        "rank8": safetensors([("r", "U8", [1, 2, 1, 1, 1, 1, 1, 2])]),
        "unpadded": safetensors([("w", "BF16", [3])], pad=False),
        "dotted": safetensors([("model.layers.0.weight", "F32", [2, 2]),
                               ("model.layers.0.bias", "F32", [2])]),
        "bad-rank9": safetensors([("r", "U8", [1] * 9)]),
        "bad-meta-int": safetensors([("x", "U8", [1])], meta={"n": 1}),
        "bad-unknown-dtype": safetensors([("x", "C64", [1])]),
        "bad-negative-dim": safetensors([], header_extra={"x": {"dtype": "F32", "shape": [-1],
                                                               "data_offsets": [0, 0]}}),
        "extra-field": safetensors([], header_extra={"x": {"dtype": "U8", "shape": [0],
                                                               "data_offsets": [0, 0], "y": 1}}),
        "bad-not-object": struct.pack("<Q", 2) + b"[]",
        "bad-empty": b"",
        "bad-short-length": b"\x10\x00\x00",
    }
    n = sum(write(corpus, t, "seed-%s.safetensors" % k, v) for k, v in seeds.items())
    return n + copy_hostile(corpus, t, lambda fn: fn.endswith(".safetensors"))


# ------------------------------------------------------------------ torch

TORCH_SMALL = r'''
import collections, sys, torch
d = sys.argv[1]
dt = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
      torch.int16, torch.int8, torch.uint8, torch.bool]
torch.save({str(t).split(".")[1]: torch.arange(3).to(t) for t in dt}, d + "/dtypes.pt")
w = torch.arange(6.0).reshape(2, 3)
torch.save(collections.OrderedDict(a=w, b=w, c=w.t(), d=w[1:], e=torch.zeros(0, 2),
           f=torch.tensor(1.5)), d + "/views.pt")
torch.save({"model": {"enc": [torch.ones(2), {"k": torch.ones(1, dtype=torch.int8)}]},
            "epoch": 3, "lr": 0.5, "best": True, "name": "x", "none": None,
            7: torch.zeros(1)}, d + "/nested.pt")
torch.save({"w": w, "raw": b"ab"}, d + "/bytes.pt")  # bytes: _codecs.encode, refused
torch.save({"p": torch.nn.Parameter(torch.ones(2, 2))}, d + "/param.pt")
torch.save({"w": w}, d + "/proto2.pt", pickle_protocol=2)
torch.save({"w": w}, d + "/proto4.pt", pickle_protocol=4)
torch.save({"w": w}, d + "/legacy.pt", _use_new_zipfile_serialization=False)
torch.save(torch.nn.Linear(3, 2).state_dict(), d + "/linear.pt")
'''


def big_endian(pt):
    """The checkpoint with a byteorder entry saying 'big' and its storages
    byte-swapped (torch < 2.1 writes none; the reader accepts it)."""
    src = zipfile.ZipFile(io.BytesIO(pt))
    names = src.namelist()
    top = names[0].split("/")[0]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name in names:
            data = src.read(name)
            if name.startswith(top + "/data/"):
                data = b"".join(data[i:i + 4][::-1] for i in range(0, len(data), 4))
            z.writestr(name, data)
        z.writestr(top + "/byteorder", b"big")
    return out.getvalue()


def torch_seeds(corpus):
    t = "fuzz_torch"
    n = copy_hostile(corpus, t, lambda fn: fn.endswith(".pt"))
    with tempfile.TemporaryDirectory() as d:
        try:
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests/import/torch_cases.py"),
                            "make", d], check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["/usr/bin/python3", "-c", TORCH_SMALL, d], check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            print("make_corpus_importers.py: torch seeds skipped (%s)" % e)
            return n
        for fn in sorted(os.listdir(d)):
            if not fn.endswith(".pt"):
                continue
            with open(os.path.join(d, fn), "rb") as f:
                pt = f.read()
            stem = fn[:-3]
            n += write(corpus, t, "seed-torch-%s.pt" % stem, pt)
            if not pt.startswith(b"PK"):
                continue
            z = zipfile.ZipFile(io.BytesIO(pt))
            pkl = [x for x in z.namelist() if x.endswith("/data.pkl")]
            if pkl:
                n += write(corpus, t, "seed-pickle-%s.pkl" % stem, z.read(pkl[0]))
            if stem == "dtypes":
                continue  # mixed element sizes: the 4-byte swap above would not fit
            if stem in ("views", "linear"):
                n += write(corpus, t, "seed-torch-%s-big-endian.pt" % stem, big_endian(pt))
    return n


# ------------------------------------------------------------------ stats

STATS = {
    "doc-example": {"version": 1, "stats": [
        {"key": "encoder.layers.0.attn", "kind": "activation", "granularity": "tensor",
         "count": 1048576, "min": -3.5, "max": 2.25, "absmax": 3.5, "mean": 0.01, "variance": 0.9,
         "histogram": {"edges": [-3.5, 0.0, 2.25], "counts": [400000, 648576]},
         "percentiles": [[99.9, 2.0], [0.1, -3.1]]},
        {"key": "encoder.layers.0.attn.q_proj.weight", "kind": "weight", "granularity": "channel",
         "axis": 0, "count": 4096, "min": [-1.0, -2.0], "max": [1.0, 2.0], "mean": [0.0, 0.0],
         "variance": [0.1, 0.2]}]},
    "doc-example-sorted": {"version": 1, "stats": [
        {"key": "a", "kind": "activation", "count": 10, "min": -3.5, "max": 2.25, "mean": 0.01,
         "variance": 0.9, "histogram": {"edges": [-3.5, 0.0, 2.25], "counts": [4, 6]},
         "percentiles": [[0.1, -3.1], [99.9, 2.0]]}]},
    "minimal": {"version": 1, "stats": [{"key": "w", "count": 1, "min": 0, "max": 1, "mean": 0.5}]},
    "no-version": {"stats": [{"key": "w", "count": 0, "min": 0, "max": 0, "mean": 0}]},
    "empty": {"version": 1, "stats": []},
    "channel-3": {"version": 1, "stats": [
        {"key": "x", "granularity": "channel", "axis": 1, "count": 9, "min": [-1, -2, -3],
         "max": [1, 2, 3], "mean": [0, 0, 0], "variance": [1, 1, 1], "absmax": [1, 2, 3]}]},
    "bad-max-array": {"version": 1, "stats": [{"key": "x", "count": 1, "min": 0, "max": [1, 2]}]},
    "bad-version": {"version": 2, "stats": []},
    "bad-hist": {"version": 1, "stats": [{"key": "x", "count": 3, "min": 0, "max": 1, "mean": 0,
                                          "histogram": {"edges": [1, 0], "counts": [1, 2]}}]},
    "bad-percentile": {"version": 1, "stats": [{"key": "x", "count": 1, "min": 0, "max": 1,
                                                "mean": 0, "percentiles": [[101, 1]]}]},
    "bad-axis": {"version": 1, "stats": [{"key": "x", "granularity": "channel", "axis": 8,
                                          "count": 1, "min": [0], "max": [1], "mean": [0]}]},
    "bad-kind": {"version": 1, "stats": [{"key": "x", "kind": "bias", "count": 1, "min": 0,
                                          "max": 1, "mean": 0}]},
    "bad-duplicate-key": {"version": 1, "stats": [
        {"key": "x", "count": 1, "min": 0, "max": 1, "mean": 0},
        {"key": "x", "count": 1, "min": 0, "max": 1, "mean": 0}]},
    "bad-nan": {"version": 1, "stats": [{"key": "x", "count": 1, "min": 1, "max": 0, "mean": 0}]},
}


def stats_seeds(corpus):
    t = "fuzz_stats_json"
    n = sum(write(corpus, t, "seed-%s.json" % k, json.dumps(v, indent=1).encode())
            for k, v in STATS.items())
    raw = {"bad-syntax": b'{"version": 1, "stats": [', "bad-dup-json": b'{"stats": [], "stats": []}',
           "bad-top-array": b"[]", "bad-empty": b""}
    return n + sum(write(corpus, t, "seed-%s.json" % k, v) for k, v in raw.items())


# --------------------------------------------------------------- manifest

def mf_tensor(**kw):
    t = {"name": "enc.w", "dtype": "f32", "shape": [2, 3], "file": "w.bin"}
    t.update(kw)
    return {k: v for k, v in t.items() if v is not None}


MANIFESTS = {
    # the example of import/README.md and the manifest of tests/cli/test_import.sh
    "import-md": {"tensors": [mf_tensor(offset=0, endian="little")],
                  "metadata": {"source": "exporter-x", "version": 2, "scale": 0.5, "ok": True}},
    "test-import": {"tensors": [mf_tensor(name="raw.a", dtype="f32", shape=[2, 3], file="a.bin"),
                                mf_tensor(name="raw.b", dtype="i16", shape=[4], file="b.bin",
                                          endian="big"),
                                mf_tensor(name="raw.c", dtype="u8", shape=[3], file="c.bin",
                                          offset=5)],
                    "metadata": {"source": "manifest", "version": 2, "scale": 0.5, "ok": True}},
    "every-dtype": {"tensors": [mf_tensor(name="t.%s" % d, dtype=d, shape=[2], file="d/%s.bin" % d)
                                for d in ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8",
                                          "u64", "u32", "u16", "u8", "bool", "f8e4m3fn", "f8e5m2",
                                          "F32", "BF16", "F8_E4M3", "I64", "U8", "BOOL"]]},
    "empty": {"tensors": []},
    "scalar-and-empty": {"tensors": [mf_tensor(name="s", shape=[]), mf_tensor(name="z", shape=[0, 5])]},
    "rank8": {"tensors": [mf_tensor(shape=[1, 2, 1, 2, 1, 2, 1, 2])]},
    "subdir": {"tensors": [mf_tensor(file="sub/dir/w.bin"), mf_tensor(name="b", file="./w.bin"),
                           mf_tensor(name="c", file="a..b/..c")]},
    "bad-rank9": {"tensors": [mf_tensor(shape=[1] * 9)]},
    "bad-dtype": {"tensors": [mf_tensor(dtype="f128")]},
    "bad-dtype-type": {"tensors": [mf_tensor(dtype=4)]},
    "bad-dim-negative": {"tensors": [mf_tensor(shape=[2, -1])]},
    "bad-dim-real": {"tensors": [mf_tensor(shape=[2.5])]},
    "bad-count-overflow": {"tensors": [mf_tensor(shape=[4294967296, 4294967296])]},
    "bad-bytes-overflow": {"tensors": [mf_tensor(dtype="f64", shape=[2305843009213693952, 2])]},
    "bad-absolute": {"tensors": [mf_tensor(file="/etc/passwd")]},
    "bad-dotdot": {"tensors": [mf_tensor(file="a/../../w.bin")]},
    "bad-dotdot-end": {"tensors": [mf_tensor(file="a/..")]},
    "bad-backslash": {"tensors": [mf_tensor(file="a\\..\\w.bin")]},
    "bad-empty-file": {"tensors": [mf_tensor(file="")]},
    "bad-offset-negative": {"tensors": [mf_tensor(offset=-1)]},
    "bad-offset-string": {"tensors": [mf_tensor(offset="0")]},
    "bad-endian": {"tensors": [mf_tensor(endian="middle")]},
    "bad-endian-type": {"tensors": [mf_tensor(endian=1)]},
    "bad-no-name": {"tensors": [mf_tensor(name=None)]},
    "bad-no-shape": {"tensors": [mf_tensor(shape=None)]},
    "bad-entry-not-object": {"tensors": [1]},
    "bad-tensors-object": {"tensors": {}},
    "bad-metadata-array": {"tensors": [], "metadata": []},
    "bad-metadata-value": {"tensors": [], "metadata": {"a": [1, 2]}},
    "bad-metadata-null": {"tensors": [], "metadata": {"a": None}},
}


def manifest_seeds(corpus):
    t = "fuzz_manifest"
    n = sum(write(corpus, t, "seed-%s.json" % k, json.dumps(v, indent=1).encode())
            for k, v in MANIFESTS.items())
    raw = {"bad-syntax": b'{"tensors": [', "bad-dup-key": b'{"tensors": [], "tensors": []}',
           "bad-top-array": b"[]", "bad-empty": b"", "bad-nul": b'{"tensors": []}\x00',
           "bad-escape-nul": b'{"tensors": [{"name": "a\\u0000b", "dtype": "f32", "shape": [], "file": "w"}]}',
           "big-ints": b'{"tensors": [], "metadata": {"a": 9223372036854775807, "b": -9223372036854775808, "c": 1e308}}'}
    n += sum(write(corpus, t, "seed-%s.json" % k, v) for k, v in raw.items())
    n += copy_hostile(corpus, t, lambda fn: fn.startswith("manifest") and fn.endswith(".json"))
    with open(os.path.join(ROOT, "tests", "hostile", "importers", "manifest_traversal",
                           "manifest.json"), "rb") as f:
        n += write(corpus, t, "hostile-manifest_traversal.json", f.read())
    return n


# ------------------------------------------------------------------- mlir

MLIR_INLINE = {
    "w": 'module {\n  ml_program.global private @w(#ml_program.extern : tensor<6xi32>) : tensor<6xi32>\n}\n',
    "quoted": 'module {\n  ml_program.global private @"h\\22\\5Cx"(#ml_program.extern : tensor<3x2xf16>) : tensor<3x2xf16>\n}\n',
    "dense-hex": 'module {\n  ml_program.global private mutable @d(dense<"0x0000803F00000040"> : tensor<2xf32>) : tensor<2xf32>\n}\n',
    "resource": 'module {\n  util.global private @r = dense_resource<blob> : tensor<2xf32>\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      blob: "0x040000000000803F00000040"\n    }\n  }\n#-}\n',
    "param": 'module {\n  util.global private @p = #flow.parameter.named<"model"::"w"> : tensor<4xf32>\n}\n',
    # location aliases that refer to each other twice a level (read once per op)
    "loc-alias-dag": 'func.func @f(%a: f32) -> f32 {\n  %0 = arith.negf %a : f32 loc(#l9)\n  return %0 : f32\n}\n'
                     '#l0 = loc("m.0")\n' + "".join('#l%d = loc(fused[#l%d, callsite(#l%d at "x")])\n' % (i, i - 1, i - 1)
                                                    for i in range(1, 10)),
}


def mlir_seeds(corpus):
    t = "fuzz_mlir"
    n = 0
    top = os.path.join(ROOT, "tests", "mlir")
    for fn in sorted(os.listdir(top)):
        if fn.endswith(".mlir"):
            with open(os.path.join(top, fn), "rb") as f:
                n += write(corpus, t, "seed-tests-" + fn, f.read())
    for k, v in MLIR_INLINE.items():
        n += write(corpus, t, "seed-%s.mlir" % k, v.encode())
    with open(os.path.join(top, "malformed.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or "|" not in line:
                continue
            name, _, text = line.rstrip("\n").split("|", 2)
            n += write(corpus, t, "seed-malformed-%s.mlir" % name, text.replace("\\n", "\n").encode())
    return n


# ------------------------------------------------------------ calibration

TRT_HEAD = b"TRT-8601-EntropyCalibration2\n"
# TensorRT caches (import/calib_text.c), each breaking one rule
TRT_BAD = {
    "no-header": b"input: 3c010204\n",
    "bad-hex": TRT_HEAD + b"input: 3c01zz04\n",
    "nine-digits": TRT_HEAD + b"input: 3c0102040\n",
    "nan-scale": TRT_HEAD + b"input: 7fc00000\n",
    "inf-scale": TRT_HEAD + b"input: 7f800000\n",
    "negative-scale": TRT_HEAD + b"input: bf800000\n",
    "no-colon": TRT_HEAD + b"input 3c010204\n",
    "empty-name": TRT_HEAD + b": 3c010204\n",
    "long-line": TRT_HEAD + b"x" * 40000 + b": 3c010204\n",
    "crlf": TRT_HEAD.replace(b"\n", b"\r\n") + b"input: 3c010204\r\nout: 3f800000\r\n",
    "nul-in-name": TRT_HEAD + b"in\x00put: 3c010204\n",
    "header-only": TRT_HEAD,
    "largest-scale": TRT_HEAD + b"input: 7f7fffff\n",
}

# ONNX Runtime tables (import/calib_text.c), each breaking one rule
ORT_BAD = {
    "string": b'{"x": ["-1.5", 2.5]}',
    "reversed": b'{"x": [2.5, -1.5]}',
    "one-value": b'{"x": [1.0]}',
    "three-values": b'{"x": [-1.0, 0.0, 1.0]}',
    "channels-unequal": json.dumps({"CLS": "TensorsData", "data": {"x": {
        "lowest": {"data": [-1.0, -2.0, -3.0], "dtype": "float32", "CLS": "numpy.array"},
        "highest": {"data": [1.0, 2.0], "dtype": "float32", "CLS": "numpy.array"},
        "CLS": "TensorData"}}}).encode(),
    "nan": b'{"x": [NaN, 1.0]}',
    "1e999": b'{"x": [-1e999, 1e999]}',
    "deep": b'{"x": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    "td-no-data": json.dumps({"CLS": "TensorsData", "calibration_method": {
        "CLS": "CalibrationMethod", "value": "CalibrationMethod.MinMax"}}).encode(),
    "td-missing-data": json.dumps({"CLS": "TensorsData", "data": {"x": {
        "lowest": {"dtype": "float32", "CLS": "numpy.array"},
        "highest": {"data": 1.0, "dtype": "float32", "CLS": "numpy.array"},
        "CLS": "TensorData"}}}).encode(),
    "empty-object": b"{}",
}


def dat_entry(name, ncall, values, nval=None):
    """One entry of a legacy imatrix .dat (import/calib_imatrix.c)."""
    return (struct.pack("<i", len(name)) + name +
            struct.pack("<ii", ncall, len(values) if nval is None else nval) +
            struct.pack("<%df" % len(values), *values))


DAT_TAIL = struct.pack("<ii", 7, 14) + b"wiki.train.raw"
DAT_ONE = dat_entry(b"blk.0.attn_q.weight", 2, [8.0, 32.0, 2.0, 0.5])
DAT_BAD = {
    "negative-count": struct.pack("<i", -1) + DAT_ONE + DAT_TAIL,
    "huge-count": struct.pack("<i", 0x7FFFFFFF) + DAT_ONE + DAT_TAIL,
    "name-past-end": struct.pack("<ii", 1, 1000) + b"blk.0",
    "nval-huge": struct.pack("<i", 1) + dat_entry(b"w", 1, [1.0], 0x7FFFFFFF),
    "nval-zero": struct.pack("<i", 1) + dat_entry(b"w", 1, [], 0) + DAT_TAIL,
    "ncall-zero": struct.pack("<i", 1) + dat_entry(b"w", 0, [1.0, 2.0]) + DAT_TAIL,
    "ncall-negative": struct.pack("<i", 1) + dat_entry(b"w", -3, [1.0, 2.0]) + DAT_TAIL,
    "nan-value": struct.pack("<i", 1) + dat_entry(b"w", 1, [1.0, float("nan")]) + DAT_TAIL,
    "truncated-values": (struct.pack("<i", 1) + DAT_ONE)[:-6],
    "trailing-garbage": struct.pack("<i", 1) + DAT_ONE + DAT_TAIL + b"garbage",
    "no-tail": struct.pack("<i", 1) + DAT_ONE,
    "nul-in-name": struct.pack("<i", 1) + dat_entry(b"w\x00x", 1, [1.0]) + DAT_TAIL,
}


def f32s(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def gguf_bytes(G, d, tensors, typ="imatrix"):
    """An imatrix GGUF (tests/cli/gguf_tool.py's writer) as bytes."""
    kvs = [("general.type", G.STRING, typ), ("imatrix.chunk_count", G.U32, 4),
           ("imatrix.chunk_size", G.U32, 512),
           ("imatrix.datasets", G.ARRAY, (G.STRING, ["wiki.train.raw"]))]
    path = os.path.join(d, "tmp.gguf")
    G.write(path, kvs, tensors)
    with open(path, "rb") as f:
        return f.read()


def gguf_bad(G, d):
    """Imatrix GGUF files, each breaking one rule."""
    w = "blk.0.attn_q.weight"
    s2 = (w + ".in_sum2", 0, [4, 1], f32s(8.0, 32.0, 2.0, 0.5))

    def counts(*c):
        return (w + ".counts", 0, [1, len(c)], f32s(*c))
    return {
        "no-counts": gguf_bytes(G, d, [s2]),
        "counts-wrong-shape": gguf_bytes(G, d, [s2, (w + ".counts", 0, [2, 1], f32s(8.0, 8.0))]),
        "count-zero": gguf_bytes(G, d, [s2, counts(0.0)]),
        "count-negative": gguf_bytes(G, d, [s2, counts(-8.0)]),
        "count-nan": gguf_bytes(G, d, [s2, counts(float("nan"))]),
        "f16-in-sum2": gguf_bytes(G, d, [(w + ".in_sum2", 1, [4, 1], b"\0\x3c" * 4), counts(8.0)]),
        "in-sum-short": gguf_bytes(G, d, [s2, counts(8.0), (w + ".in_sum", 0, [2, 1],
                                                             f32s(1.0, 2.0))]),
        "two-experts": gguf_bytes(G, d, [(w + ".in_sum2", 0, [2, 2], f32s(4.0, 4.0, 9.0, 36.0)),
                                         counts(4.0, 9.0),
                                         (w + ".in_sum", 0, [2, 2], f32s(2.0, -2.0, 3.0, 6.0))]),
        "not-imatrix": gguf_bytes(G, d, [s2, counts(8.0)], typ="model"),
        "nul-in-name": gguf_bytes(G, d, [("a\0b.in_sum2", 0, [1, 1], f32s(1.0)),
                                         ("a\0b.counts", 0, [1, 1], f32s(1.0))]),
        # 19 counts of 1e18 add up past 2^64
        "counts-past-2-64": gguf_bytes(G, d, [(w + ".in_sum2", 0, [1, 19], f32s(*[1.0] * 19)),
                                              counts(*[1e18] * 19)]),
    }


def calib_seeds(corpus):
    t = "fuzz_calib"
    n = sum(write(corpus, t, "seed-trt-%s.cache" % k, v) for k, v in TRT_BAD.items())
    n += sum(write(corpus, t, "seed-ort-%s.json" % k, v) for k, v in ORT_BAD.items())
    n += sum(write(corpus, t, "seed-dat-%s.dat" % k, v) for k, v in DAT_BAD.items())
    try:  # the tools of tests/cli, as calib_formats_tool.py imports gguf_tool
        sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
        import calib_formats_tool
        import calib_tool
        import gguf_tool
    except ImportError as e:
        print("make_corpus_importers.py: calibration tool seeds skipped (%s)" % e)
        return n
    for prefix, make in (("formats", calib_formats_tool.main), ("tool", calib_tool.make)):
        with tempfile.TemporaryDirectory() as d:
            make(d)
            for fn in sorted(os.listdir(d)):
                if fn != "expected.json":
                    with open(os.path.join(d, fn), "rb") as f:
                        n += write(corpus, t, "seed-%s-%s" % (prefix, fn), f.read())
    with tempfile.TemporaryDirectory() as d:
        n += sum(write(corpus, t, "seed-gguf-%s.gguf" % k, v)
                 for k, v in gguf_bad(gguf_tool, d).items())
    return n


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus_importers.py DIR")
    corpus = sys.argv[1]
    for t in MAX_LEN:
        os.makedirs(os.path.join(corpus, t), exist_ok=True)
    counts = {"fuzz_safetensors": st_seeds(corpus), "fuzz_torch": torch_seeds(corpus),
              "fuzz_stats_json": stats_seeds(corpus), "fuzz_mlir": mlir_seeds(corpus),
              "fuzz_manifest": manifest_seeds(corpus), "fuzz_calib": calib_seeds(corpus)}
    print("make_corpus_importers.py: " + ", ".join("%s %d" % kv for kv in counts.items()))


if __name__ == "__main__":
    main()
