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
    check(len(_lib.STRUCTS) >= 11, "STRUCTS lists %d structs" % len(_lib.STRUCTS))


# wpack.h, "Structs never change size": the structs a caller fills and the
# ones the library fills end with reserved fields (mirrored here, so that
# the sizes above match); a new field takes one's place.
RESERVED = ("wpack_writer_options", "wpack_import_options", "wpack_remote_options",
            "wpack_stats_in", "wpack_executor", "wpack_tensor", "wpack_info", "wpack_stats",
            "wpack_meta")


@case
def structs_end_with_reserved_fields(d):
    bad = []
    for cname in RESERVED:
        names = [f[0] for f in _lib.STRUCTS[cname]._fields_]
        if "reserved_ptr" not in names or "reserved" not in names:
            bad.append(cname)
    check(not bad, "no reserved fields: %s" % ", ".join(bad))


@case
def init_calls_zero_the_reserved_fields(d):
    inits = [(_lib.WriterOptions, _lib.lib.wpack_writer_options_init),
             (_lib.ImportOptions, _lib.import_lib().wpack_import_options_init),
             (_lib.RemoteOptions, _lib.remote_lib().wpack_remote_options_init)]
    for st, fn in inits:
        o = st()
        ctypes.memset(ctypes.byref(o), 0xA5, ctypes.sizeof(st))
        fn(ctypes.byref(o))
        check(not any(o.reserved_ptr) and not any(o.reserved),
              "%s: init left reserved fields set" % st.__name__)


@case
def nonzero_reserved_fields_are_refused(d):
    # what a program built against a newer header that set a new field
    # gets from this library: WPACK_E_INVALID_ARGUMENT naming the field
    lib = _lib.lib
    o = _lib.WriterOptions()
    lib.wpack_writer_options_init(ctypes.byref(o))
    o.reserved[1] = 1
    w = ctypes.c_void_p()
    out = os.path.join(d, "r.wpack")
    rc = lib.wpack_writer_open(ctypes.byref(w), out.encode(), ctypes.byref(o))
    msg = lib.wpack_writer_errmsg(w).decode()
    lib.wpack_writer_abort(w)
    check(rc == wpack.E_INVALID_ARGUMENT and "wpack_writer_options: reserved[1] is not zero" in msg,
          "writer: %d %r" % (rc, msg))
    check(not os.path.exists(out), "the refused writer made %s" % out)
    r = _lib.RemoteOptions()
    rl = _lib.remote_lib()
    rl.wpack_remote_options_init(ctypes.byref(r))
    r.reserved_ptr[1] = 8
    ar = ctypes.c_void_p()
    rc = rl.wpack_open_url(ctypes.byref(ar), b"http://127.0.0.1:9/x.wpack", ctypes.byref(r))
    msg = lib.wpack_errmsg(ar).decode()
    lib.wpack_close(ar)
    check(rc == wpack.E_INVALID_ARGUMENT and "wpack_remote_options: reserved_ptr[1] is not zero"
          in msg, "remote: %d %r" % (rc, msg))


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
