#!/usr/bin/python3
"""calib_formats_tool.py DIR - calibration files shaped exactly as the peers'
own writers lay them out, for tests/cli/test_calib_formats.sh. Each writer
below follows the code read with the search tool (none of these packages is
installable here), cited by repository and path:

  TensorRT cache: a file as TensorRT 5.1 wrote it, nvdla/sw
    umd/utils/calibdata/resnet50.txt ("TRT-5101-EntropyCalibration2", names of
    unnamed layers with spaces, '*' and brackets, the hex read by NVIDIA's
    calib_txt_to_json.py as struct.unpack('>f')).
  ONNX Runtime: microsoft/onnxruntime
    onnxruntime/python/tools/quantization/quant_utils.py write_calibration_table:
    - 20e3ace0: json.dumps(calibration_cache), a dict of name -> (min, max)
      Python floats                                     -> ort_v1.json
    - later: json.dumps(calibration_cache, cls=MyEncoder), where numpy arrays
      become {"data": a.tolist(), "dtype": str(a.dtype), "CLS": "numpy.array"}:
      a dict of name -> (np min, np max)                  -> ort_v2.json
      and a TensorsData (calibrate.py: to_dict() = {"CLS", "data",
      "calibration_method"}; TensorData.to_dict() = its attributes + "CLS";
      CalibrationMethod as {"CLS", "value": str(enum)})  -> ort_td_*.json
      (MinMax per tensor, MinMax per channel, Entropy with hist/hist_edges/bins)
  llama.cpp imatrix: ggml-org/llama.cpp tools/imatrix/imatrix.cpp
    - save_imatrix_legacy: i32 n_entries; per entry (names sorted) i32 len,
      name, i32 ncall = ceil(max(counts) / chunk_size), i32 nval, f32[nval] =
      (value / count of its matrix) * ncall, a matrix with count 0 written as
      1 * ncall; then i32 m_last_chunk, i32 len, dataset    -> imatrix_llama.dat
    - save_imatrix: general.type "imatrix", imatrix.datasets (string array),
      imatrix.chunk_count, imatrix.chunk_size (u32); per name (sorted)
      NAME.in_sum2 f32 ne [nval/nmat, nmat], NAME.counts f32 ne [1, nmat],
      NAME.in_sum f32 ne [nval/nmat, nmat]                  -> imatrix_llama.gguf
expected.json holds what each record must be.
"""
import enum
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_tool as G  # noqa: E402


def trt(d, exp):
    scales = {"data": 1.1892054, "(Unnamed Layer* 0) [Convolution]_output": 6.5300665,
              "res2a_branch1": 0.11954, "prob": 0.00092945, "tiny": 1e-38}
    lines = ["TRT-5101-EntropyCalibration2"]
    for k, v in scales.items():  # TensorRT's order, not sorted
        lines.append("%s: %s" % (k, struct.pack(">f", v).hex()))
    lines.append("zero: 0")  # a writer that drops leading zeros
    with open(os.path.join(d, "trt5101.cache"), "w") as f:
        f.write("\n".join(lines) + "\n")
    for k, v in scales.items():
        s = float(np.float32(v))
        exp["trt"][k] = [-127 * s, 127 * s]
    exp["trt"]["zero"] = [0.0, 0.0]


class CalibrationMethod(enum.Enum):
    MinMax = 0
    Entropy = 1


class TensorData:
    def __init__(self, **kw):
        self._attrs = list(kw)
        for k, v in kw.items():
            setattr(self, k, v)

    def to_dict(self):
        d = {k: getattr(self, k) for k in self._attrs}
        d["CLS"] = self.__class__.__name__
        return d


class TensorsData:
    def __init__(self, method, data):
        self.calibration_method = method
        self.data = data

    def to_dict(self):
        return {"CLS": self.__class__.__name__, "data": self.data,
                "calibration_method": self.calibration_method}


class MyEncoder(json.JSONEncoder):
    def default(self, obj):
        if isinstance(obj, (TensorData, TensorsData)):
            return obj.to_dict()
        if isinstance(obj, np.ndarray):
            return {"data": obj.tolist(), "dtype": str(obj.dtype), "CLS": "numpy.array"}
        if isinstance(obj, CalibrationMethod):
            return {"CLS": obj.__class__.__name__, "value": str(obj)}
        return json.JSONEncoder.default(self, obj)


def f32(x):
    return np.array(x, dtype=np.float32)


def ort(d, exp):
    r = {"input": (-1.2345, 2.5), "/conv1/Conv_output_0": (-0.1, 0.3)}
    with open(os.path.join(d, "ort_v1.json"), "w") as f:
        f.write(json.dumps(r))
    exp["ort_v1"] = {k: list(v) for k, v in r.items()}
    with open(os.path.join(d, "ort_v2.json"), "w") as f:
        f.write(json.dumps({k: (f32(a), f32(b)) for k, (a, b) in r.items()}, cls=MyEncoder))
    exp["ort_v2"] = {k: [float(f32(a)), float(f32(b))] for k, (a, b) in r.items()}
    td = TensorsData(CalibrationMethod.MinMax,
                     {k: TensorData(lowest=f32(a), highest=f32(b)) for k, (a, b) in r.items()})
    with open(os.path.join(d, "ort_td_minmax.json"), "w") as f:
        f.write(json.dumps(td, cls=MyEncoder))
    exp["ort_td_minmax"] = exp["ort_v2"]
    lo, hi = [-1.5, -0.25, 0.0], [2.0, 0.75, 0.125]
    td = TensorsData(CalibrationMethod.MinMax,
                     {"/conv1/Conv_output_0": TensorData(lowest=f32(lo), highest=f32(hi))})
    with open(os.path.join(d, "ort_td_channel.json"), "w") as f:
        f.write(json.dumps(td, cls=MyEncoder))
    exp["ort_td_channel"] = {"/conv1/Conv_output_0": [lo, hi]}
    hist = np.array([3, 0, 5, 2], dtype=np.int64)
    td = TensorsData(CalibrationMethod.Entropy,
                     {"input": TensorData(lowest=f32(-0.75), highest=f32(0.75), hist=hist,
                                          hist_edges=f32([-1, -0.5, 0, 0.5, 1]), bins=4)})
    with open(os.path.join(d, "ort_td_entropy.json"), "w") as f:
        f.write(json.dumps(td, cls=MyEncoder))
    exp["ort_td_entropy"] = {"input": [-0.75, 0.75]}


# name -> (values per matrix [nmat][ncols] (sum of squares), sums, counts per matrix)
IMATRIX = {
    "blk.0.attn_q.weight": ([[2048.0, 512.0, 8192.0, 0.0]], [[512.0, -256.0, 0.0, 0.0]], [1024]),
    # 3 experts; the last one saw no rows (partial data)
    "blk.0.ffn_up_exps.weight": ([[64.0, 16.0], [256.0, 1024.0], [0.0, 0.0]],
                                 [[16.0, 0.0], [-32.0, 64.0], [0.0, 0.0]], [16, 64, 0]),
    "output.weight": ([[600.0, 1200.0]], [[0.0, 300.0]], [600]),
}
CHUNK = 512


def imatrix(d, exp):
    names = sorted(IMATRIX)
    out = bytearray(struct.pack("<i", len(names)))
    exp["dat"], exp["gguf"] = {}, {}
    for name in names:
        vals, sums, counts = IMATRIX[name]
        nmat, ncols = len(vals), len(vals[0])
        ncall = (max(counts) + CHUNK - 1) // CHUNK
        tmp, ms = [], []
        for m in range(nmat):
            for j in range(ncols):
                count, value = np.float32(counts[m]), np.float32(vals[m][j])
                if count == 0:
                    value, count = np.float32(1), np.float32(1)
                tmp.append(np.float32(np.float32(value / count) * np.float32(ncall)))
                ms.append(float(tmp[-1]) / ncall)
        b = name.encode()
        out += struct.pack("<i", len(b)) + b + struct.pack("<ii", ncall, len(tmp))
        out += np.array(tmp, "<f4").tobytes()
        exp["dat"][name] = {"variance": ms, "mean": [0.0] * len(ms), "count": ncall,
                            "max": [math.sqrt(x) for x in ms]}
        # GGUF: mean = in_sum / count, variance = in_sum2 / count - mean^2
        mean, var = [], []
        for m in range(nmat):
            for j in range(ncols):
                c = counts[m]
                mu = sums[m][j] / c if c else 0.0
                mean.append(mu)
                var.append(vals[m][j] / c - mu * mu if c else 0.0)
        exp["gguf"][name] = {"variance": var, "mean": mean, "count": sum(counts),
                             "max": [math.sqrt(vals[m][j] / counts[m]) if counts[m] else 0.0
                                     for m in range(nmat) for j in range(ncols)]}
    ds = b"wiki.train.raw"
    out += struct.pack("<i", 7) + struct.pack("<i", len(ds)) + ds
    with open(os.path.join(d, "imatrix_llama.dat"), "wb") as f:
        f.write(out)
    kvs = [("general.type", G.STRING, "imatrix"),
           ("imatrix.datasets", G.ARRAY, (G.STRING, ["wiki.train.raw"])),
           ("imatrix.chunk_count", G.U32, 7),
           ("imatrix.chunk_size", G.U32, CHUNK)]
    tensors = []
    for name in names:
        vals, sums, counts = IMATRIX[name]
        nmat, ncols = len(vals), len(vals[0])
        tensors.append((name + ".in_sum2", 0, [ncols, nmat], np.array(vals, "<f4").tobytes()))
        tensors.append((name + ".counts", 0, [1, nmat], np.array(counts, "<f4").tobytes()))
        tensors.append((name + ".in_sum", 0, [ncols, nmat], np.array(sums, "<f4").tobytes()))
    G.write(os.path.join(d, "imatrix_llama.gguf"), kvs, tensors)


def main(d):
    exp = {"trt": {}}
    trt(d, exp)
    ort(d, exp)
    imatrix(d, exp)
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(exp, f)


if __name__ == "__main__":
    main(sys.argv[1])
