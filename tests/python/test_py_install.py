"""`pip install ./python` (issue 16), with Debian's pip and setuptools
(python3-pip, python3-setuptools: tools/deps.sh), offline
(--no-build-isolation --no-index --no-deps). The package is pure Python
(ctypes); the C libraries are found at run time (README, "Python"): by
WPACK_LIBRARY_PATH, or by the dynamic loader (LD_LIBRARY_PATH, ldconfig).
Each case installs a copy of python/ (pip writes build/ and *.egg-info
into the source directory) and runs the installed package from outside the
tree, checking which package file and which libwpack were loaded:
  - pip install --target T, WPACK_LIBRARY_PATH = this build;
  - pip install --target T next to `make install PREFIX=P`, found through
    LD_LIBRARY_PATH=P/lib (libwpack-import too: wpack.pack);
  - pip install --target T with no library anywhere: a clear OSError;
  - a venv (--system-site-packages: numpy and torch from Debian) with
    `venv/bin/python -m pip install`, WPACK_LIBRARY_PATH = this build.
Missing pip or setuptools is a failure, not a pass.
(`make install PREFIX=P` alone, PYTHONPATH=P/lib/python3/dist-packages, is
tested by test_py_write.py and test_py_pack_options.py.)"""
import ctypes.util
import os
import shutil
import subprocess
import sys

from pycase import HERE, case, check, main

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("WPACK_LIBRARY_PATH", os.path.join(ROOT, "build"))

# Run by the installed package, from a directory outside the tree: write an
# archive, read it back, print where wpack and libwpack came from.
PROBE = r"""
import os, sys, numpy as np, wpack
a = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "ids": np.arange(5)}
wpack.save_file(a, "probe.wpack", metadata={"from": "pip"})
with wpack.safe_open("probe.wpack") as f:
    ok = all(np.array_equal(f.get_tensor(k), v) for k, v in a.items())
    ok = ok and f.metadata()["from"] == "pip"
if len(sys.argv) > 1 and sys.argv[1] == "pack":
    np.save("x.npy", a["w"])
    wpack.pack("x.npy", "packed.wpack", cast="f16")
    with wpack.safe_open("packed.wpack") as f:
        ok = ok and f.describe("x")["dtype"] == "f16"
print(os.path.realpath(wpack.__file__))
print(os.path.realpath(wpack._lib.library_paths()["wpack"])
      if os.sep in wpack._lib.library_paths()["wpack"] else wpack._lib.library_paths()["wpack"])
maps = open("/proc/self/maps").read()
print(sorted({l.split()[-1] for l in maps.splitlines() if "libwpack" in l}))
print("READ_OK" if ok else "READ_BAD")
"""


def _env(**extra):
    """This environment without the tree's package and libraries (the ASan
    preload of a sanitized run stays)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("WPACK_LIBRARY_PATH", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", PIP_NO_INPUT="1",
               PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def _need_pip():
    r = subprocess.run(["/usr/bin/python3", "-c", "import setuptools, pip; print(pip.__version__,"
                        " setuptools.__version__)"], capture_output=True, text=True, env=_env())
    check(r.returncode == 0, "pip or setuptools missing for /usr/bin/python3 (tools/deps.sh "
          "installs python3-pip python3-setuptools): %s" % r.stderr[-300:])


def _source(d):
    """A copy of python/ to build from (pip leaves build/ and wpack.egg-info)."""
    src = os.path.join(d, "src")
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info",
                                                  "_install.py"))
    return src


def _pip(python, d, *args):
    r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--no-deps", "--quiet", *args, _source(d)],
                       capture_output=True, text=True, env=_env(), cwd=d)
    check(r.returncode == 0, "pip install %s: %s %s" % (" ".join(args), r.stdout[-400:],
                                                        r.stderr[-800:]))


def _probe(python, d, env, *args):
    run = os.path.join(d, "run")
    os.makedirs(run, exist_ok=True)
    r = subprocess.run([python, "-c", PROBE, *args], capture_output=True, text=True, env=env,
                       cwd=run)
    return r, r.stdout.splitlines()


@case
def pip_target_with_library_path(d):
    _need_pip()
    t = os.path.join(d, "t")
    _pip("/usr/bin/python3", d, "--target", t)
    check(os.path.isfile(os.path.join(t, "wpack", "_lib.py")) and
          os.path.isfile(os.path.join(t, "wpack", "torch.py")), os.listdir(t))
    check(any(n.startswith("wpack-0.1.0.dist-info") for n in os.listdir(t)), os.listdir(t))
    check(not os.path.exists(os.path.join(t, "wpack", "_install.py")), "_install.py installed")
    r, out = _probe("/usr/bin/python3", d, _env(PYTHONPATH=t, WPACK_LIBRARY_PATH=BUILD))
    check(r.returncode == 0 and len(out) == 4, "installed wpack: %s" % r.stderr[-800:])
    check(out[0] == os.path.realpath(os.path.join(t, "wpack", "__init__.py")),
          "imported %s, not the pip-installed package" % out[0])
    check(out[1] == os.path.realpath(os.path.join(BUILD, "libwpack.so.0")), out[1])
    check(out[3] == "READ_OK", out)


@case
def pip_target_beside_make_install(d):
    _need_pip()
    p = os.path.join(d, "P")
    r = subprocess.run(["make", "-s", "-C", ROOT, "install", "PREFIX=" + p,
                        "BUILD=" + os.path.relpath(BUILD, ROOT)], capture_output=True, text=True)
    check(r.returncode == 0, "make install: %s" % r.stderr[-400:])
    t = os.path.join(d, "t")
    _pip("/usr/bin/python3", d, "--target", t)
    libdir = os.path.join(p, "lib")
    r, out = _probe("/usr/bin/python3", d, _env(PYTHONPATH=t, LD_LIBRARY_PATH=libdir), "pack")
    check(r.returncode == 0 and len(out) == 4, "installed wpack: %s" % r.stderr[-800:])
    check(out[0] == os.path.realpath(os.path.join(t, "wpack", "__init__.py")), out[0])
    want = [os.path.realpath(os.path.join(libdir, n))
            for n in ("libwpack-import.so.0", "libwpack.so.0")]
    check(out[2] == repr(want), "mapped %s, want %s" % (out[2], want))
    check(out[3] == "READ_OK", out)


@case
def pip_target_without_libraries_says_so(d):
    _need_pip()
    t = os.path.join(d, "t")
    _pip("/usr/bin/python3", d, "--target", t)
    r, out = _probe("/usr/bin/python3", d, _env(PYTHONPATH=t))
    if ctypes.util.find_library("wpack"):
        # installed system-wide here: then that one is used, never the tree's
        check(r.returncode == 0 and out[3] == "READ_OK", r.stderr[-400:])
        check(not out[1].startswith(ROOT), "loaded the tree's %s" % out[1])
        return
    check(r.returncode != 0, "imported without any libwpack: %s" % out)
    check("OSError" in r.stderr and "WPACK_LIBRARY_PATH" in r.stderr and
          "cannot load libwpack.so" in r.stderr, r.stderr[-600:])


@case
def venv_install(d):
    _need_pip()
    v = os.path.join(d, "venv")
    # --without-pip: the venv uses Debian's pip from the system site
    # packages (no python3-venv / ensurepip needed)
    r = subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip",
                        "--system-site-packages", v], capture_output=True, text=True, env=_env())
    check(r.returncode == 0, "python3 -m venv: %s" % r.stderr[-400:])
    py = os.path.join(v, "bin", "python")
    _pip(py, d)
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, env=_env()).stdout.strip()
    check(os.path.isfile(os.path.join(site, "wpack", "__init__.py")),
          "not installed in the venv's %s" % site)
    r, out = _probe(py, d, _env(WPACK_LIBRARY_PATH=BUILD))
    check(r.returncode == 0 and len(out) == 4, "venv wpack: %s" % r.stderr[-800:])
    check(out[0] == os.path.realpath(os.path.join(site, "wpack", "__init__.py")), out[0])
    check(out[1] == os.path.realpath(os.path.join(BUILD, "libwpack.so.0")), out[1])
    check(out[3] == "READ_OK", out)
    r = subprocess.run([py, "-c", "import wpack.torch, torch; print(torch.__version__)"],
                       capture_output=True, text=True, env=_env(WPACK_LIBRARY_PATH=BUILD),
                       cwd=d)
    check(r.returncode == 0, "wpack.torch in the venv: %s" % r.stderr[-400:])
    r = subprocess.run([py, "-m", "pip", "uninstall", "-y", "wpack"], capture_output=True,
                       text=True, env=_env(), cwd=d)
    check(r.returncode == 0 and not os.path.exists(os.path.join(site, "wpack")),
          "pip uninstall: %s" % r.stderr[-400:])


if __name__ == "__main__":
    sys.exit(main())
