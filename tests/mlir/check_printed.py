#!/usr/bin/python3
"""check_printed.py MODE PRINTED.mlir EXPECT.json NPYDIR

Checks what mlir-opt-19 printed for a resolved module. EXPECT maps each
global's symbol to the entry it must point at (and the entry's .npy file
in NPYDIR, named ENTRY.npy). MODE:
  uri     every expected global carries wpack.uri = "wpack:<16 hex>/<entry>"
  iree    its value is #flow.parameter.named<"SCOPE"::"<entry>">
  inline  its value is dense_resource<KEY> and KEY's blob (after the 4-byte
          alignment) equals the .npy's bytes; or, for an .npy whose
          elements are all one value, the splat dense<VALUE> of that value
          (as printed: floats to 7 digits)
Prints one line per problem and exits 1 if there is any."""
import json, re, sys, urllib.parse
import numpy as np

mode, printed, expect_path, npydir = sys.argv[1:5]
scope = sys.argv[5] if len(sys.argv) > 5 else "model"
text = open(printed).read()
expect = json.load(open(expect_path))
problems = []

SYM = r'@(?:"((?:[^"\\]|\\.)*)"|([\w.$-]+))'
def unescape(s):
    return re.sub(r'\\([0-9A-Fa-f]{2})', lambda m: chr(int(m.group(1), 16)),
                  s.replace('\\\\', '\\5C').replace('\\"', '\\22'))

globals_ = {}
for line in text.splitlines():
    s = line.strip()
    if s.startswith('ml_program.global') or s.startswith('util.global'):
        m = re.search(SYM, s)
        name = unescape(m.group(1)) if m.group(1) is not None else m.group(2)
        globals_[name] = s
    elif s.startswith('"ml_program.global"') or s.startswith('"util.global"'):
        m = re.search(r'sym_name = "((?:[^"\\]|\\.)*)"', s)
        globals_[unescape(m.group(1))] = s

resources = dict(re.findall(r'^\s*([\w.$]+): "0x([0-9A-Fa-f]*)"', text, re.M))

for g, entry in expect.items():
    line = globals_.get(g)
    if line is None:
        problems.append(f"global {g!r} not in the printed module")
        continue
    if mode == "uri":
        m = re.search(r'wpack\.uri = "wpack:([0-9a-f]{16})/([^"]*)"', line)
        if not m or urllib.parse.unquote(m.group(2)) != entry:
            problems.append(f"global {g!r}: wpack.uri wrong or missing: {line}")
        if '#ml_program.extern' not in line and '#extern' not in line:
            problems.append(f"global {g!r}: lost its #ml_program.extern value: {line}")
    elif mode == "iree":
        want = f'#flow.parameter.named<"{scope}"::"{entry}">'
        if want not in line:
            problems.append(f"global {g!r}: expected {want}: {line}")
    elif mode == "inline":
        m = re.search(r'dense_resource<([\w.$]+)>', line)
        splat = re.search(r'[(=] *dense<([-+\w.]+)>', line)
        if not m and splat:
            arr = np.load(f"{npydir}/{entry}.npy")
            v = splat.group(1)
            flat = arr.reshape(-1)
            same = flat.size == 0 or bool(np.all(flat == flat[0]))
            if v in ("true", "false"):
                ok = same and (flat.size == 0 or bool(flat[0]) == (v == "true"))
            elif arr.dtype.kind == "f":
                ok = same and (flat.size == 0 or np.isclose(float(flat[0]), float(v), rtol=1e-6))
            else:
                ok = same and (flat.size == 0 or int(flat[0]) == int(v))
            if not ok:
                problems.append(f"global {g!r}: splat dense<{v}> but {entry}.npy is not all {v}")
            continue
        if not m:
            problems.append(f"global {g!r}: no dense_resource value: {line}")
            continue
        blob = resources.get(m.group(1))
        if blob is None:
            problems.append(f"global {g!r}: resource {m.group(1)} not printed")
            continue
        raw = bytes.fromhex(blob)
        align = int.from_bytes(raw[:4], 'little')
        want = np.ascontiguousarray(np.load(f"{npydir}/{entry}.npy")).astype(
            np.load(f"{npydir}/{entry}.npy").dtype.newbyteorder('<')).tobytes()
        if align == 0 or align & (align - 1):
            problems.append(f"global {g!r}: blob alignment {align}")
        if raw[4:] != want:
            problems.append(f"global {g!r}: blob bytes differ from {entry}.npy "
                            f"({len(raw) - 4} vs {len(want)} bytes)")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
