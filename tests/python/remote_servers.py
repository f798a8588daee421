"""The servers of the Python remote tests (test_py_remote*.py): a real nginx
on loopback and tests/cli/remote_server.py (a fake S3 that checks SigV4,
and a server that flips a byte), both started by tests/cli/remote_lib.sh
from a bash child that stops them when this process closes its stdin
(_stop). Archives a.wpack (plain), z.wpack (zstd) and set/m.wpack (sharded)
of _tensors() are served from the www directory."""
import os
import subprocess
import tempfile

import numpy as np
import torch

from pycase import HERE, check
import wpack

TESTS = os.path.normpath(os.path.join(HERE, ".."))
_srv = {}


def _servers():
    """(nginx URL, bad-server URL, www dir), started once for the file."""
    if _srv:
        return _srv["u"], _srv["b"], _srv["www"]
    t = tempfile.mkdtemp(prefix="wpack-pyremote-")
    www = os.path.join(t, "www")
    os.makedirs(os.path.join(www, "set"))
    _make_archives(www)
    script = ('T=$1 PY=/usr/bin/python3 TESTS_DIR=$2; . "$TESTS_DIR/cli/remote_lib.sh"; '
              'start_nginx "$3" || exit 1; start_bad_server "$3" || exit 1; '
              'echo "$NGINX_PORT $BAD_PORT"; read -r _')
    p = subprocess.Popen(["bash", "-c", script, "bash", t, TESTS, www], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    check(len(line) == 2, "nginx or remote_server.py did not start (tools/deps.sh installs "
          "nginx); see the lines above")
    _srv.update(p=p, u="http://127.0.0.1:%s" % line[0], b="http://127.0.0.1:%s" % line[1],
                www=www, t=t)
    return _srv["u"], _srv["b"], www


def _stop():
    if _srv:
        _srv["p"].stdin.close()   # bash's read ends; its EXIT trap stops both servers
        _srv["p"].wait(timeout=30)


def _tensors():
    r = np.random.default_rng(16)
    return {"t%d" % i: r.standard_normal((256, 256)).astype(np.float32) for i in range(4)} | {
        "zeros": np.zeros((512, 512), dtype=np.float32),
        "bf": torch.randn(7, 5).to(torch.bfloat16),
        "ids": np.arange(12, dtype=np.int64).reshape(3, 4),
        "scalar": np.array(True)}


def _make_archives(www):
    ts = _tensors()
    meta = {"epochs": 3, "lr": 0.5, "tags": ["a", "b"]}
    wpack.save_file(ts, os.path.join(www, "a.wpack"), metadata=meta,
                    name_map={"p_t0": "t0"})
    wpack.save_file(ts, os.path.join(www, "z.wpack"), compress_level=3)
    wpack.save_file({k: v for k, v in ts.items() if k != "scalar"},
                    os.path.join(www, "set", "m.wpack"), shard_size=300000)
