"""Tiny test harness for tests/python/test_*.py: prints "ok NAME" or
"FAIL NAME: why" per case and "# passed N failed M" at the end, the lines
tests/run-tests.sh adds up. Run a file with /usr/bin/python3 FILE."""
import os
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

_cases = []
_counts = {"passed": 0, "failed": 0}


def case(fn):
    """Register fn(tmpdir) as a test case."""
    _cases.append(fn)
    return fn


def check(cond, what):
    """A check inside a case: raise AssertionError(what) unless cond."""
    if not cond:
        raise AssertionError(what)


def raises(exc_type, fn, *args, code=None, **kw):
    """fn(*args) must raise exc_type (with .name == code if given); returns it."""
    try:
        fn(*args, **kw)
    except exc_type as e:
        if code is not None and getattr(e, "name", None) != code:
            raise AssertionError("expected %s, got %s: %s" % (code, getattr(e, "name", None), e))
        return e
    raise AssertionError("%s did not raise %s" % (getattr(fn, "__name__", fn), exc_type.__name__))


# Messages must show untrusted text escaped (the library's rule, wpack_text_escape).
BAD = "e\x1b[31m\n\rX"            # ESC [31m, LF, CR in a path or a name
SHOWN = r"e\x1b[31m\x0a\x0dX"       # as messages show it


def escaped(e, *also):
    """str(e) holds no control character, shows BAD escaped and each of also."""
    s = str(e)
    return (not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in s) and SHOWN in s
            and all(a in s for a in also))


ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")   # a sanitized build's run


def asan_note(name, why):
    """True (after printing a visible "# note" line) when running under ASan:
    the case `name` returns without checking, for the reason `why`."""
    if ASAN:
        print("# note: %s: not run under ASan (%s)" % (name, why))
    return ASAN


def run_capped(code, *args, timeout=300):
    """Run python `code` (argv: args) in a child whose large allocations
    fail as on a small machine: its address space capped at 8 GiB, or under
    ASan (whose shadow needs more) its allocator returning NULL instead.
    Returns the subprocess.CompletedProcess (text output)."""
    import subprocess
    cap = "" if ASAN else ("import resource\n"
                           "resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))\n")
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") +
               ":allocator_may_return_null=1")
    return subprocess.run([sys.executable, "-c", cap + code] + list(args), env=env,
                          capture_output=True, text=True, timeout=timeout)


def main():
    tmp = tempfile.mkdtemp(prefix="wpack-py-")
    try:
        for fn in _cases:
            d = os.path.join(tmp, fn.__name__)
            os.mkdir(d)
            try:
                fn(d)
            except Exception as e:  # a failed case, reported with where
                _counts["failed"] += 1
                tb = traceback.extract_tb(e.__traceback__)[-1]
                print("FAIL %s: %s: %s (line %d)" % (fn.__name__, type(e).__name__, e, tb.lineno))
                sys.stdout.flush()
            else:
                _counts["passed"] += 1
                print("ok %s" % fn.__name__)
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    print("# passed %d failed %d" % (_counts["passed"], _counts["failed"]))
    sys.exit(1 if _counts["failed"] else 0)
