#!/usr/bin/python3
"""check_quant.py PREFIX PRINTED.mlir INSPECT.json EXPECT.json

PRINTED is what `mlir-opt-19 --mlir-print-debuginfo --mlir-print-local-scope`
printed for a module annotated with `wpack resolve --annotate --form quant`;
INSPECT is `wpack inspect --json` of the archive. EXPECT is
  {"quant": {"t.py:N": "activation key", ...},
   "attrs": {"t.py:N": "activation key", ...},
   "globals": {"sym": "weight stats key (the entry name)"}}
An op (or global) in "quant" must carry exactly one
PREFIX.range = !quant.calibrated<f32<MIN:MAX>> whose MIN and MAX, as mlir-opt
printed them, are bit for bit the archive's f64 min and max, and no
PREFIX.min/.max/.absmax/.axis; one in "attrs" the attrs form (PREFIX.min ...)
and no PREFIX.range; every other "t.py" op line nothing of PREFIX.
Prints one line per problem; exit 1 if any."""
import json, re, struct, sys
from printed_ops import global_line, op_lines, report, unseen

prefix, printed, inspect_path, expect_path = sys.argv[1:5]
text = open(printed).read()
# parse_int keeps "-0" (how %.17g prints -0.0) a float with its sign
info = json.load(open(inspect_path), parse_int=float)
expect = json.load(open(expect_path))
problems = []
P = re.escape(prefix)
RANGE = re.compile(P + r'\.range = !quant\.calibrated<f32<([^:>]+):([^>]+)>>')
ATTRS = re.compile(P + r'\.(min|max|absmax|axis) = ')

act = {s["key"]: s for s in info["stats"] if s["kind"] == "activation"}
weight = {t["name"]: t["stats"] for t in info["tensors"] if "stats" in t}


def bits(x):
    return struct.pack('<d', float(x))


def check(what, line, stats, form):
    ranges = RANGE.findall(line)
    attrs = ATTRS.findall(line)
    if form == "attrs":
        if ranges or not attrs:
            problems.append(f"{what}: want the attrs form, got {len(ranges)} ranges: {line.strip()[:300]}")
        return
    if len(ranges) != 1 or attrs:
        problems.append(f"{what}: want one {prefix}.range and no attrs: {line.strip()[:300]}")
        return
    lo, hi = ranges[0]
    if bits(lo) != bits(stats["min"]) or bits(hi) != bits(stats["max"]):
        problems.append(f"{what}: range {lo}:{hi} is not the archive's {stats['min']!r}:{stats['max']!r}")


lines = text.splitlines()
seen = set()
want_ops = {k: ("quant", v) for k, v in expect.get("quant", {}).items()}
want_ops.update({k: ("attrs", v) for k, v in expect.get("attrs", {}).items()})
for key, line in op_lines(lines):
    if key not in want_ops:
        if RANGE.search(line) or ATTRS.search(line):
            problems.append(f"{key}: should have no {prefix}.* attributes: {line.strip()[:300]}")
        continue
    seen.add(key)
    form, akey = want_ops[key]
    if akey not in act:
        problems.append(f"{key}: the archive has no activation stats '{akey}'")
        continue
    check(key, line, act[akey], form)
unseen(want_ops, seen, problems)
for g, ekey in expect.get("globals", {}).items():
    line = global_line(lines, g)
    if line is None or ekey not in weight:
        problems.append(f"global {g}: not printed or no weight stats '{ekey}'")
        continue
    check(f"global {g}", line, weight[ekey], "quant")
report(problems)
