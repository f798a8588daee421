"""Every ctypes Structure in python/wpack/_lib.py against its C twin: a
tiny C program compiled here against include/*.h prints sizeof and each
field's offsetof, which must equal ctypes' sizeof and offsets (a header
change that moves or adds a field fails here instead of corrupting memory).
Also: each options struct's _init() fills only bytes ctypes knows about."""
import ctypes
import os
import shutil
import subprocess

from pycase import HERE, case, check, main
import wpack  # noqa: F401  (loads the libraries the way users do)
from wpack import _lib

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def _c_layouts(d):
    src = ['#include <stddef.h>', '#include <stdio.h>', '#include "wpack.h"',
           '#include "wpack_import.h"', '#include "wpack_remote.h"', 'int main(void) {']
    for cname, st in _lib.STRUCTS.items():
        src.append('printf("%s %%zu\\n", sizeof(%s));' % (cname, cname))
        for f in st._fields_:
            src.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));'
                       % (cname, f[0], cname, f[0]))
    src.append("return 0; }")
    c = os.path.join(d, "layout.c")
    with open(c, "w") as fh:
        fh.write("\n".join(src) + "\n")
    exe = os.path.join(d, "layout")
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    r = subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), "-o", exe, c],
                       capture_output=True, text=True)
    check(r.returncode == 0, "compiling the layout program failed: %s" % r.stderr[-2000:])
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


@case
def structs_match_the_headers(d):
    c = _c_layouts(d)
    bad = []
    for cname, st in _lib.STRUCTS.items():
        if int(c[cname]) != ctypes.sizeof(st):
            bad.append("sizeof(%s) C %s, ctypes %d" % (cname, c[cname], ctypes.sizeof(st)))
        for f in st._fields_:
            off = getattr(st, f[0]).offset
            if int(c["%s.%s" % (cname, f[0])]) != off:
                bad.append("%s.%s at C %s, ctypes %d" % (cname, f[0], c["%s.%s" % (cname, f[0])],
                                                          off))
    check(not bad, "; ".join(bad))
    check(len(_lib.STRUCTS) >= 10, "STRUCTS lists %d structs" % len(_lib.STRUCTS))


@case
def init_calls_stay_inside_the_structs(d):
    # Each *_options_init() writes its whole C struct: with a guard area
    # after the ctypes struct, the guard must be untouched.
    inits = [(_lib.WriterOptions, _lib.lib.wpack_writer_options_init),
             (_lib.ImportOptions, _lib.import_lib().wpack_import_options_init),
             (_lib.RemoteOptions, _lib.remote_lib().wpack_remote_options_init)]
    for st, fn in inits:
        n = ctypes.sizeof(st)
        buf = (ctypes.c_uint8 * (n + 64))(*([0xA5] * (n + 64)))
        fn(ctypes.cast(buf, ctypes.POINTER(st)))
        check(bytes(buf[n:]) == b"\xa5" * 64, "%s: init wrote past %d bytes" % (st.__name__, n))
    o = _lib.ImportOptions()
    _lib.import_lib().wpack_import_options_init(ctypes.byref(o))
    check(o.weight_stats == 1 and o.max_ratio == 200 and o.max_total == 1 << 40,
          "import defaults: weight_stats %d max_ratio %d max_total %d"
          % (o.weight_stats, o.max_ratio, o.max_total))


if __name__ == "__main__":
    main()
