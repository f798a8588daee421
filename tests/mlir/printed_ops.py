"""printed_ops.py - the walk over a module printed by `mlir-opt-19
--mlir-print-debuginfo --mlir-print-local-scope`, shared by check_annotated.py
and check_quant.py (imported from this folder)."""
import re
import sys


def op_lines(lines):
    """Yield (KEY, LINE) for every op located at "t.py":N:1, KEY "t.py:N".
    LINE is the op's line; for an op with regions, whose location is printed
    after its closing brace, the line that opened it (where its attributes
    are) joined to the closing one."""
    openers = []
    for raw in lines:
        line = raw
        if raw.rstrip().endswith('{'):
            openers.append(raw)
        if raw.strip().startswith('}') and openers:
            line = openers.pop() + raw
        for mark in re.findall(r'"t\.py":(\d+):1\b', raw):
            yield f"t.py:{mark}", line


def global_line(lines, sym):
    """The line of `ml_program.global ... @SYM(`, or None."""
    pat = re.compile(r'ml_program\.global .*@' + re.escape(sym) + r'\(')
    return next((l for l in lines if pat.search(l)), None)


def unseen(want, seen, problems):
    for key in want:
        if key not in seen:
            problems.append(f"{key}: no op with that location in the printed module")


def report(problems):
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)
