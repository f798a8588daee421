"""observers_tool.py DIR - real torch.ao checkpoints (torch 1.13) for
tests/cli/test_observers_create.sh: a small Conv+ReLU+Linear model prepared in
eager mode and run on a few batches, its state_dict saved with torch.save:
  ptq.pt    prepare() with the default fbgemm qconfig (HistogramObserver
            activations, 2048 bins)
  hist.pt   prepare() with HistogramObserver(bins=64) activations
  minmax.pt prepare() with MinMaxObserver activations (one observer never runs)
  qat.pt    prepare_qat() with the default fbgemm QAT qconfig (FakeQuantize:
            scale, zero_point, flags, inner observer; per-channel
            weight_fake_quant)
  lsq.pt    prepare_qat() with _LearnableFakeQuantize activations (learned
            scale / zero_point)
and NAME.json: every state_dict entry as a list of floats (flattened)."""
import json
import os
import sys

import torch
import torch.ao.quantization as tq
import torch.nn as nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(3, 4, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 5)
        self.idle = nn.Linear(5, 5)   # observed, never run
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu(self.conv(x))
        return self.dequant(self.fc(x.flatten(1)))


def save(d, name, model):
    sd = model.state_dict()
    torch.save(sd, os.path.join(d, name + ".pt"))
    out = {k: [float(x) for x in v.detach().flatten().tolist()] for k, v in sd.items()}
    with open(os.path.join(d, name + ".json"), "w") as f:
        json.dump(out, f)


def run(model, n=3):
    g = torch.Generator().manual_seed(1)
    for _ in range(n):
        model(torch.randn(2, 3, 8, 8, generator=g) * 2)


def main(d):
    torch.manual_seed(0)
    q = {"ptq": tq.get_default_qconfig("fbgemm"),
         "hist": tq.QConfig(activation=tq.HistogramObserver.with_args(bins=64),
                            weight=tq.default_per_channel_weight_observer),
         "minmax": tq.QConfig(activation=tq.MinMaxObserver, weight=tq.default_weight_observer)}
    for name, qc in q.items():
        m = M().eval()
        m.qconfig = qc
        p = tq.prepare(m)
        run(p)
        save(d, name, p)
    m = M().train()
    m.qconfig = tq.get_default_qat_qconfig("fbgemm")
    p = tq.prepare_qat(m)
    run(p)
    save(d, "qat", p)
    from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize
    m = M().train()
    m.qconfig = tq.QConfig(
        activation=_LearnableFakeQuantize.with_args(observer=tq.MovingAverageMinMaxObserver,
                                                    quant_min=0, quant_max=255),
        weight=tq.default_weight_fake_quant)
    p = tq.prepare_qat(m)
    run(p)
    save(d, "lsq", p)


if __name__ == "__main__":
    main(sys.argv[1])
