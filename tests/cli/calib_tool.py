#!/usr/bin/python3
"""calib_tool.py - writers of other tools' calibration files, for
tests/cli/test_calib_in.sh, following the published formats:

  TensorRT calibration cache (IInt8Calibrator::writeCalibrationCache as
    trtexec and the samples write it): "TRT-<ver>-EntropyCalibration2", then
    "<tensor>: <8 hex digits>" lines, the hex being the big-endian bits of the
    f32 scale (range [-scale*127, scale*127]).
  ONNX Runtime write_calibration_table (onnxruntime/quantization/calibrate.py):
    the old form {name: [min, max]} and TensorsData.to_dict() through its JSON
    encoder ({"CLS": "TensorsData", "data": {name: {"lowest": {"data": x,
    "dtype": "float32", "CLS": "numpy.array"}, "highest": ..., "CLS":
    "TensorData"}}, ...}).
  llama.cpp imatrix: legacy .dat (save_imatrix_legacy: i32 n_entries; per
    entry i32 len, name, i32 ncall, i32 nval, f32[nval] = sum2/count*ncall;
    then i32 last_call, i32 len, dataset name) and the GGUF form
    (general.type = "imatrix", <name>.in_sum2 f32 [n_cols, n_mat] and
    <name>.counts f32 [1, n_mat]).

  torch.ao observers (torch 1.13): a state_dict with MinMaxObserver,
    HistogramObserver, PerChannelMinMaxObserver and an observer that never
    ran, each as `<module>.activation_post_process` (what prepare() adds);
    obs.json holds the expected values as torch computed them.

  calib_tool.py make DIR       write the test files into DIR
  calib_tool.py torch DIR      write obs.pt, obs.json, plain.pt into DIR
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_tool as G  # noqa: E402
import numpy as np  # noqa: E402

# tensor name -> scale (f32); names sorted, as wpack exports them in index order
TRT = {"conv1.out": 0.0123, "fc.weight_in": 1.5, "input": 0.0078125, "relu/Relu:0": 2.0e-3}
ORT = {"X": [-1.25, 3.75], "conv/output_0": [-0.5, 0.25], "y": [0.125, 7.5]}


def f32bits(x):
    return struct.unpack(">I", struct.pack(">f", x))[0]


def trt(path, table, header="TRT-8601-EntropyCalibration2"):
    with open(path, "w") as f:
        f.write(header + "\n")
        for k in sorted(table):
            f.write("%s: %08x\n" % (k, f32bits(table[k])))


def ort_old(path, table):
    """Our export's form: the old {name: [min, max]}, one pair a line."""
    body = ",\n".join("  %s: [%r, %r]" % (json.dumps(k), v[0], v[1]) for k, v in sorted(table.items()))
    with open(path, "w") as f:
        f.write("{\n" + body + "\n}\n")


def nparr(x):
    return {"data": float(np.float32(x)), "dtype": "float32", "CLS": "numpy.array"}


def ort_tensorsdata(path, table):
    data = {k: {"lowest": nparr(v[0]), "highest": nparr(v[1]), "CLS": "TensorData"}
            for k, v in table.items()}
    doc = {"CLS": "TensorsData", "data": data,
           "calibration_method": {"CLS": "CalibrationMethod", "value": "CalibrationMethod.MinMax"}}
    with open(path, "w") as f:
        json.dump(doc, f)


def imatrix_dat(path, entries, last_call=10, dataset="wiki.train.raw"):
    """entries: [(name, ncall, counts, sum2)]: values written = sum2/count*ncall."""
    out = bytearray(struct.pack("<i", len(entries)))
    for name, ncall, count, sum2 in entries:
        b = name.encode()
        vals = (np.asarray(sum2, np.float32) / np.float32(count) * np.float32(ncall)).astype("<f4")
        out += struct.pack("<i", len(b)) + b + struct.pack("<ii", ncall, len(vals)) + vals.tobytes()
    d = dataset.encode()
    out += struct.pack("<ii", last_call, len(d)) + d
    with open(path, "wb") as f:
        f.write(out)


def imatrix_gguf(path, entries, typ="imatrix"):
    """entries: [(name, sum2 [n_mat][n_cols], counts [n_mat])]."""
    tensors = []
    for name, sum2, counts in entries:
        s = np.asarray(sum2, "<f4")
        c = np.asarray(counts, "<f4")
        tensors.append((name + ".in_sum2", 0, [s.shape[1], s.shape[0]], s.tobytes()))
        tensors.append((name + ".counts", 0, [1, c.shape[0]], c.tobytes()))
    kvs = [("general.type", G.STRING, typ),
           ("imatrix.chunk_count", G.U32, 4),
           ("imatrix.chunk_size", G.U32, 512),
           ("imatrix.datasets", G.ARRAY, (G.STRING, ["wiki.train.raw"]))]
    G.write(path, kvs, tensors)


def make(d):
    trt(os.path.join(d, "calib.cache"), TRT)
    ort_old(os.path.join(d, "calibration.json"), ORT)
    ort_tensorsdata(os.path.join(d, "calibration_td.json"), ORT)
    # blk.0.attn_q.weight: 4 input columns, 8 rows of inputs in 2 calls
    imatrix_dat(os.path.join(d, "imatrix.dat"),
                [("blk.0.attn_q.weight", 2, 8, [8.0, 32.0, 2.0, 0.5]),
                 ("output.weight", 1, 4, [4.0, 16.0])])
    imatrix_gguf(os.path.join(d, "imatrix.gguf"),
                 [("blk.0.attn_q.weight", [[8.0, 32.0, 2.0, 0.5]], [8.0]),
                  ("blk.0.ffn_up_exps.weight", [[4.0, 4.0], [9.0, 36.0]], [4.0, 9.0])])
    imatrix_gguf(os.path.join(d, "model_not_imatrix.gguf"),
                 [("blk.0.attn_q.weight", [[1.0]], [1.0])], typ="model")
    # hostile ones
    with open(os.path.join(d, "bad_hex.cache"), "w") as f:
        f.write("TRT-8601-EntropyCalibration2\ninput: 3c01zz04\n")
    with open(os.path.join(d, "bad_line.cache"), "w") as f:
        f.write("TRT-8601-EntropyCalibration2\njust a name\n")
    trt(os.path.join(d, "neg.cache"), {"x": -1.0})
    with open(os.path.join(d, "bad_ort.json"), "w") as f:
        json.dump({"x": [1.0]}, f)
    with open(os.path.join(d, "inverted_ort.json"), "w") as f:
        json.dump({"x": [2.0, 1.0]}, f)
    with open(os.path.join(d, "trunc.dat"), "wb") as f:  # n_entries 1, then nothing
        f.write(struct.pack("<ii", 1, 1000))
    with open(os.path.join(d, "random.bin"), "wb") as f:
        f.write(bytes(range(7, 200)))


def torch_files(d):
    import torch
    from torch.ao.quantization import HistogramObserver, MinMaxObserver, PerChannelMinMaxObserver

    torch.manual_seed(0)  # before the layers: their initial weights are random too
    m = torch.nn.Module()
    m.fc = torch.nn.Linear(4, 3)
    m.fc.activation_post_process = MinMaxObserver()
    m.relu = torch.nn.ReLU()
    m.relu.activation_post_process = HistogramObserver(bins=16)
    m.conv = torch.nn.Conv1d(2, 2, 1)
    m.conv.activation_post_process = PerChannelMinMaxObserver(ch_axis=1)
    m.idle = torch.nn.Identity()
    m.idle.activation_post_process = MinMaxObserver()  # never runs: +inf / -inf
    x = torch.randn(8, 4)
    with torch.no_grad():
        m.fc.activation_post_process(m.fc(x))
        r = torch.relu(m.fc(x))
        m.relu.activation_post_process(r)
        m.conv.activation_post_process(m.conv(torch.randn(3, 2, 5)))
    sd = m.state_dict()
    torch.save(sd, os.path.join(d, "obs.pt"))
    torch.save({"w": torch.ones(2)}, os.path.join(d, "plain.pt"))
    exp = {k: sd[k].tolist() for k in sd if "activation_post_process" in k and "eps" not in k}
    exp["relu_data"] = [r.double().mean().item(), r.double().var(unbiased=False).item(), r.numel()]
    # the histogram's own moments over its bin midpoints (torch.histc may
    # leave out a value at the top edge, so its total can be below numel)
    h = sd["relu.activation_post_process.histogram"].double()
    lo, hi = sd["relu.activation_post_process.min_val"].double(), sd["relu.activation_post_process.max_val"].double()
    mids = lo + (hi - lo) * (torch.arange(16, dtype=torch.float64) + 0.5) / 16
    mean = (h * mids).sum() / h.sum()
    exp["relu_hist"] = [mean.item(), (h * (mids - mean) ** 2).sum().item() / h.sum().item(), h.sum().item()]
    with open(os.path.join(d, "obs.json"), "w") as f:
        json.dump(exp, f)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "torch":
        torch_files(sys.argv[2])
    else:
        sys.exit(__doc__)
