"""wpack.torch.name_map of a torch.export program (issue 16). torch 1.13 has
no torch.export, so the signatures here are built with the shapes pytorch
defines in torch/export/graph_signature.py (read from the pytorch source):
  - torch 2.1: ExportGraphSignature, a dataclass whose fields include the
    dicts inputs_to_parameters and inputs_to_buffers (placeholder name ->
    parameter / buffer FQN);
  - torch >= 2.2: ExportGraphSignature(input_specs, output_specs), each
    InputSpec(kind: InputKind, arg: TensorArgument(name), target,
    persistent), with inputs_to_parameters / inputs_to_buffers as derived
    properties (which, unlike input_specs, keep non-persistent buffers).
Each is wrapped like an ExportedProgram (.graph_signature) and passed bare.
The maps are checked, then recorded by save_model and looked up by the
graph's names in the archive."""
import dataclasses
import enum
import os
from typing import Dict, List, Optional

import torch
import torch.nn as nn

from pycase import case, check, main
import wpack
import wpack.torch as wt


# -- torch 2.1's shape -------------------------------------------------------
@dataclasses.dataclass
class Sig21:
    parameters: List[str]
    buffers: List[str]
    user_inputs: List[str]
    user_outputs: List[str]
    inputs_to_parameters: Dict[str, str]
    inputs_to_buffers: Dict[str, str]
    buffers_to_mutate: Dict[str, str]
    backward_signature: Optional[object]
    assertion_dep_token: Optional[Dict[int, str]] = None


# -- torch >= 2.2's shape ----------------------------------------------------
@dataclasses.dataclass
class TensorArgument:
    name: str


@dataclasses.dataclass
class ConstantArgument:
    name: str
    value: object


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()
    CONSTANT_TENSOR = enum.auto()
    CUSTOM_OBJ = enum.auto()
    TOKEN = enum.auto()


@dataclasses.dataclass
class InputSpec:
    kind: InputKind
    arg: object
    target: Optional[str]
    persistent: Optional[bool] = None


@dataclasses.dataclass
class Sig22:
    input_specs: List[InputSpec]
    output_specs: List[object]

    # derived as torch derives them (no persistent filter)
    @property
    def inputs_to_parameters(self):
        return {s.arg.name: s.target for s in self.input_specs
                if s.kind == InputKind.PARAMETER and isinstance(s.arg, TensorArgument)
                and isinstance(s.target, str)}

    @property
    def inputs_to_buffers(self):
        return {s.arg.name: s.target for s in self.input_specs
                if s.kind == InputKind.BUFFER and isinstance(s.arg, TensorArgument)
                and isinstance(s.target, str)}


class Program:
    """What name_map uses of torch.export.ExportedProgram."""

    def __init__(self, sig):
        self.graph_signature = sig


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.register_buffer("scratch", torch.zeros(3), persistent=False)

    def forward(self, x):
        return self.bn(self.lin(x)) + self.scratch


# torch.export >= 2.3 names placeholders p_<fqn> / b_<fqn>; 2.1 arg<N>_1
WANT22 = {"p_lin_weight": "lin.weight", "p_lin_bias": "lin.bias",
          "b_bn_running_mean": "bn.running_mean", "b_bn_running_var": "bn.running_var",
          "b_bn_num_batches_tracked": "bn.num_batches_tracked"}
WANT21 = {"arg0_1": "lin.weight", "arg1_1": "lin.bias", "arg2_1": "bn.weight",
          "arg3_1": "bn.bias", "arg4_1": "bn.running_mean", "arg5_1": "bn.running_var",
          "arg6_1": "bn.num_batches_tracked"}


def _sig21():
    return Sig21(parameters=["lin.weight", "lin.bias", "bn.weight", "bn.bias"],
                 buffers=["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"],
                 user_inputs=["arg7_1"], user_outputs=["add"],
                 inputs_to_parameters={k: v for k, v in WANT21.items()
                                       if k in ("arg0_1", "arg1_1", "arg2_1", "arg3_1")},
                 inputs_to_buffers={k: v for k, v in WANT21.items()
                                    if k in ("arg4_1", "arg5_1", "arg6_1")},
                 buffers_to_mutate={"getitem_3": "bn.running_mean"}, backward_signature=None)


def _sig22():
    P, B = InputKind.PARAMETER, InputKind.BUFFER
    specs = [InputSpec(P, TensorArgument("p_lin_weight"), "lin.weight"),
             InputSpec(P, TensorArgument("p_lin_bias"), "lin.bias"),
             InputSpec(P, TensorArgument("p_bn_weight"), "bn.weight"),
             InputSpec(P, TensorArgument("p_bn_bias"), "bn.bias"),
             InputSpec(B, TensorArgument("b_bn_running_mean"), "bn.running_mean", True),
             InputSpec(B, TensorArgument("b_bn_running_var"), "bn.running_var", True),
             InputSpec(B, TensorArgument("b_bn_num_batches_tracked"), "bn.num_batches_tracked",
                       True),
             InputSpec(B, TensorArgument("b_scratch"), "scratch", False),    # non-persistent
             InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument("c_lifted_tensor_0"),
                       "lifted_tensor_0"),
             InputSpec(InputKind.USER_INPUT, TensorArgument("x"), None),
             InputSpec(InputKind.USER_INPUT, ConstantArgument("flag", True), None)]
    return Sig22(input_specs=specs, output_specs=[])


@case
def export_21_shape(d):
    want = dict(WANT21)
    for g in (Program(_sig21()), _sig21()):
        check(wt.name_map(g) == want, wt.name_map(g))
        check(wt.name_map(g, Net()) == want, "with model")
    _saved_and_found(d, want)


@case
def export_22_shape(d):
    want = dict(WANT22, p_bn_weight="bn.weight", p_bn_bias="bn.bias")
    for g in (Program(_sig22()), _sig22()):
        nm = wt.name_map(g)
        check(nm == want, "input_specs: %s" % nm)
        check("b_scratch" not in nm and "c_lifted_tensor_0" not in nm and "x" not in nm, nm)
    # torch's own derived dict keeps the non-persistent buffer; input_specs wins
    check(_sig22().inputs_to_buffers["b_scratch"] == "scratch", "shape of the mirror")
    _saved_and_found(d, want)


@case
def export_map_filtered_by_model(d):
    sig = _sig21()
    sig.inputs_to_buffers["arg9_1"] = "not.in.the.model"
    sig.inputs_to_parameters["lin.weight"] = "lin.weight"    # equal names: left out
    nm = wt.name_map(Program(sig))
    check(nm["arg9_1"] == "not.in.the.model" and "lin.weight" not in nm, nm)
    check(wt.name_map(Program(sig), Net()) == WANT21, wt.name_map(Program(sig), Net()))


def _saved_and_found(d, nm):
    torch.manual_seed(0)
    m = Net()
    p = os.path.join(d, "m.wpack")
    wt.save_model(m, p, name_map=nm)
    sd = m.state_dict()
    with wpack.safe_open(p, framework="pt") as f:
        check(f.name_map() == nm, "stored map %s" % f.name_map())
        for g, k in nm.items():
            check(torch.equal(f.get_tensor(g), sd[k]), "lookup %s -> %s" % (g, k))


if __name__ == "__main__":
    main()
