"""safe_open(url, progress=callable) (issue 16): the progress callback of
libwpack-remote (wpack_remote_options.on_bytes) from Python, against the
real nginx of tests/cli/remote_lib.sh (remote_servers.py). The totals it
reports equal the response bytes nginx logged; an exception it raises comes
out of the call during which it ran; load_file passes it on; a local path
refuses it."""
import os
import threading
import time

import numpy as np

from pycase import case, check, main, raises
from remote_servers import _servers, _stop
import wpack


def _log(www):
    return os.path.join(os.path.dirname(www), "nginx", "access.log")


def _logged_bytes(www, want_total):
    """nginx writes a request's log line just after the response, so the
    last one may not be there yet when the client is done: wait (up to 5 s)
    until the logged bytes reach want_total."""
    deadline = time.monotonic() + 5
    while True:
        lines = open(_log(www)).read().splitlines()
        sizes = [int(x.rsplit(" ", 1)[1]) for x in lines]
        if sum(sizes) >= want_total or time.monotonic() > deadline:
            return lines, sizes
        time.sleep(0.05)


@case
def progress_totals_equal_nginx_log(d):
    u, _, www = _servers()
    open(_log(www), "w").close()
    seen = []
    threads = set()

    def progress(n):
        seen.append(n)
        threads.add(threading.get_ident())

    with wpack.safe_open(u + "/a.wpack", progress=progress) as f:
        after_open = len(seen)
        check(after_open >= 1, "no progress during open: %r" % seen)
        t1 = f.get_tensor("t1")
        want = wpack.load_file(os.path.join(www, "a.wpack"))["t1"]
        check(np.array_equal(t1, want), "t1 differs")
        check(len(seen) > after_open, "no progress for the tensor read: %r" % seen)
    lines, sizes = _logged_bytes(www, seen[-1] if seen else 0)
    check(len(seen) == len(lines), "%d calls, %d requests: %r %r" % (len(seen), len(lines),
                                                                     seen, lines))
    check(seen == sorted(seen) and seen[-1] == sum(sizes),
          "totals %r, nginx sent %r" % (seen, sizes))
    check(seen[-1] - seen[after_open - 1] >= t1.nbytes, "tensor bytes not counted: %r" % seen)
    check(threads == {threading.get_ident()}, "called from other threads: %r" % threads)


@case
def progress_on_sharded_and_load_file(d):
    u, _, www = _servers()
    open(_log(www), "w").close()
    seen = []
    got = wpack.load_file(u + "/set/m.wpack", progress=seen.append, connections=2)
    want = wpack.load_file(os.path.join(www, "set", "m.wpack"))
    check(sorted(got) == sorted(want) and all(np.array_equal(got[k], want[k]) for k in want),
          "sharded set differs")
    _, sizes = _logged_bytes(www, seen[-1] if seen else 0)
    check(seen and seen[-1] == sum(sizes), "totals %r, nginx sent %d" % (seen[-3:], sum(sizes)))


@case
def progress_exception_reaches_the_caller(d):
    u, _, www = _servers()

    class Stop(Exception):
        pass

    calls = []

    def stop_on_open(n):
        calls.append(n)
        raise Stop("from progress")

    e = raises(Stop, wpack.safe_open, u + "/a.wpack", progress=stop_on_open)
    check(str(e) == "from progress" and len(calls) == 1, (str(e), calls))

    state = {"armed": False, "calls": 0}

    def stop_when_armed(n):
        state["calls"] += 1
        if state["armed"]:
            raise Stop("during the read")

    with wpack.safe_open(u + "/a.wpack", progress=stop_when_armed, chunk_size=65536) as f:
        state["armed"] = True
        before = state["calls"]
        raises(Stop, f.get_tensor, "t2")
        check(state["calls"] == before + 1, "called again after raising: %r" % state)
        state["armed"] = False
        # the archive still works, and progress runs again
        t2 = f.get_tensor("t2")
        check(np.array_equal(t2, wpack.load_file(os.path.join(www, "a.wpack"))["t2"]), "t2")
        check(state["calls"] > before + 1, "progress not called after the exception")


@case
def progress_refused_where_it_cannot_run(d):
    u, _, www = _servers()
    e = raises(TypeError, wpack.safe_open, os.path.join(www, "a.wpack"), progress=print)
    check("progress" in str(e) and "URL" in str(e), str(e))
    e = raises(TypeError, wpack.safe_open, u + "/a.wpack", progress=3)
    check("callable" in str(e), str(e))


if __name__ == "__main__":
    try:
        main()
    finally:
        _stop()
