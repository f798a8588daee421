"""The Python docs name what the code takes: every named parameter of the
public functions is in the function's docstring, every writer option
save_file and pack accept (_WRITER_OPTIONS) is in both docstrings, and
every remote keyword safe_open accepts (_REMOTE_OPTIONS) is in safe_open's
docstring and README.md's Python section. A parameter added, renamed or
removed without its docs fails here."""
import inspect
import os
import re

from pycase import HERE, case, check, main
import wpack

README = os.path.normpath(os.path.join(HERE, "..", "..", "README.md"))


def _words(text):
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text or ""))


def _public_functions():
    fns = [wpack.safe_open, wpack.save_file, wpack.load_file, wpack.pack,
           wpack.update_stats, wpack.detect, wpack.is_url]
    try:
        import wpack.torch as wt
    except ImportError:  # torch missing: the wpack ones are still checked
        print("skip wpack.torch docstrings: torch is not importable")
        return fns
    return fns + [wt.calibrate, wt.load_model, wt.name_map, wt.save_model, wt.load_file]


@case
def parameters_are_in_their_docstrings(d):
    lacking = []
    fns = _public_functions()
    for f in fns:
        doc = _words(f.__doc__)
        for p in inspect.signature(f).parameters.values():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name == "self":
                continue
            if p.name not in doc:
                lacking.append("%s(%s)" % (f.__qualname__, p.name))
    check(len(fns) >= 7, "only %d functions" % len(fns))
    check(not lacking, "parameters their docstrings do not name: %s" % ", ".join(lacking))


@case
def writer_options_are_documented(d):
    opts = wpack._WRITER_OPTIONS
    check(len(opts) >= 10, "only %d writer options: %r" % (len(opts), opts))
    for f in (wpack.save_file, wpack.pack):
        lacking = [o for o in opts if o not in _words(f.__doc__)]
        check(not lacking, "%s's docstring lacks writer options %s" % (f.__name__, lacking))


@case
def remote_options_are_documented(d):
    opts = wpack._REMOTE_OPTIONS
    check(len(opts) >= 15, "only %d remote options: %r" % (len(opts), opts))
    lacking = [o for o in opts if o not in _words(wpack.safe_open.__doc__)]
    check(not lacking, "safe_open's docstring lacks remote options %s" % lacking)
    with open(README) as fh:
        text = fh.read()
    m = re.search(r"^## Python\n(.*?)^## ", text, re.S | re.M)
    check(m, "README.md has no '## Python' section")
    lacking = [o for o in opts if "`%s`" % o not in m.group(1)]
    check(not lacking, "README's Python section lacks remote options %s" % lacking)


if __name__ == "__main__":
    main()
