#!/usr/bin/python3
"""check_annotated.py PREFIX PRINTED.mlir EXPECT.json

PRINTED is what `mlir-opt-19 --mlir-print-debuginfo --mlir-print-local-scope`
printed for an annotated module (locations inline). EXPECT is
  {"ops": {"t.py:N": {"min": x | [..], "max": .., "absmax": .., "axis": A?}, ...},
   "globals": {"sym": {"min": .., "max": .., "absmax": ..}}}
Every op whose line carries "t.py":N: must have exactly the listed PREFIX.*
attributes (as f32, or dense<[...]> : tensor<Cxf32> for lists); every other
"t.py" op line must have none. Prints one line per problem; exit 1 if any."""
import json, re, sys
import numpy as np
from printed_ops import global_line, op_lines, report, unseen

prefix, printed, expect_path = sys.argv[1:4]
text = open(printed).read()
expect = json.load(open(expect_path))
problems = []
P = re.escape(prefix)
F = r'([-+0-9.eE]+|0x[0-9A-Fa-f]+)'

def f32(v):
    return np.float32(v)

def parse_num(s):
    if s.startswith('0x'):
        return np.frombuffer(int(s, 16).to_bytes(4, 'little'), np.float32)[0]
    return f32(float(s))

def attrs_of(line):
    got = {}
    for name in ('min', 'max', 'absmax'):
        m = re.search(P + r'\.' + name + r' = ' + F + r' : f32', line)
        if m:
            got[name] = parse_num(m.group(1))
            continue
        m = re.search(P + r'\.' + name + r' = dense<\[([^\]]*)\]> : tensor<(\d+)xf32>', line)
        if m:
            vals = [parse_num(x.strip()) for x in m.group(1).split(',')]
            if len(vals) != int(m.group(2)):
                problems.append(f"{name}: {len(vals)} values for tensor<{m.group(2)}xf32>")
            got[name] = vals
        m = re.search(P + r'\.' + name + r' = dense<' + F + r'> : tensor<(\d+)xf32>', line)
        if m:  # mlir-opt prints a splat for equal values
            got[name] = [parse_num(m.group(1))] * int(m.group(2))
    m = re.search(P + r'\.axis = (\d+) : i64', line)
    if m:
        got['axis'] = int(m.group(1))
    return got

def same(want, got):
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(f32(a) == b for a, b in zip(want, got))
    return not isinstance(got, list) and f32(want) == got

lines = text.splitlines()
seen = set()
for key, line in op_lines(lines):
    got = attrs_of(line)
    want = expect["ops"].get(key)
    if want is None:
        if got:
            problems.append(f"{key}: should have no {prefix}.* attributes: {line.strip()}")
        continue
    seen.add(key)
    for k, v in want.items():
        if k not in got or not same(v, got[k]):
            problems.append(f"{key}: {prefix}.{k} want {v} got {got.get(k)}: {line.strip()[:300]}")
    for k in got:
        if k not in want:
            problems.append(f"{key}: unexpected {prefix}.{k}")
unseen(expect["ops"], seen, problems)
for g, want in expect.get("globals", {}).items():
    line = global_line(lines, g)
    if line is None:
        problems.append(f"global {g} not printed")
        continue
    got = attrs_of(line)
    for k, v in want.items():
        if k not in got or not same(v, got[k]):
            problems.append(f"global {g}: {prefix}.{k} want {v} got {got.get(k)}")
report(problems)
