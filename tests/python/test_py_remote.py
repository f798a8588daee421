"""wpack.safe_open of URLs (issue 16) through libwpack-remote: a real nginx
on loopback and tests/cli/remote_server.py (a fake S3 that checks SigV4,
and a server that flips a byte), both started by tests/cli/remote_lib.sh
from a bash child that stops them when this process closes its stdin.
Every tensor equals the local file's, for "np" and "pt", plain, zstd and
sharded; slices; no zero-copy (new, writable arrays); reads verified
(a flipped byte is WPACK_E_CHECKSUM even with verify=False); S3 signed
with options or with the AWS_* environment; errors as wpack.Error."""
import os
import time

import numpy as np
import torch

from pycase import case, check, main, raises
from remote_servers import _servers, _stop, _tensors
import wpack


def log_lines(log):
    """The access log's lines once nginx has written them all: it logs a
    request after the response is sent, so the client may finish first
    (a count read at once missed the last request, now and then: 49 of 50).
    Read until the same lines come back twice more, 0.1 s apart (at most 5 s)."""
    last, still = None, 0
    for _ in range(50):
        lines = open(log).read().splitlines()
        still = still + 1 if lines == last else 0
        if still == 2:
            break
        last = lines
        time.sleep(0.1)
    return lines


@case
def http_reads_equal_local(d):
    u, _, www = _servers()
    for a in ("a.wpack", "z.wpack", "set/m.wpack"):
        for fw in ("np", "pt"):
            with wpack.safe_open(os.path.join(www, a), framework=fw) as loc, \
                    wpack.safe_open("%s/%s" % (u, a), framework=fw) as rem:
                check(rem.keys() == loc.keys(), (a, rem.keys()))
                check(rem.metadata() == loc.metadata(), (a, rem.metadata()))
                check(rem.name_map() == loc.name_map(), a)
                check(rem.info()["index_checksum"] == loc.info()["index_checksum"], a)
                for k in loc.keys():
                    x, y = rem.get_tensor(k), loc.get_tensor(k)
                    if fw == "pt":
                        check(x.dtype == y.dtype and torch.equal(x, y), (a, fw, k))
                    else:
                        check(x.dtype == y.dtype and np.array_equal(x, y), (a, fw, k))
                        # a copy: writable, not a view of any mapping
                        check(x.flags.writeable and x.flags.owndata, (a, k, x.flags))
                part = rem.get_slice("t1")[10:20, 3]
                want = loc.get_slice("t1")[10:20, 3]
                check((torch.equal(part, want) if fw == "pt" else np.array_equal(part, want)),
                      (a, fw, "slice"))
                if a == "a.wpack":
                    check(rem.stats("t2")["max"] == loc.stats("t2")["max"], "stats")
                    check(np.array_equal(np.asarray(rem.get_tensor("p_t0")),
                                         np.asarray(loc.get_tensor("t0"))), "name map")
    with wpack.safe_open(u + "/a.wpack") as f:
        f.close()
        raises(wpack.Error, f.get_tensor, "t0", code="WPACK_E_STATE")
    loaded = wpack.load_file(u + "/z.wpack")
    check(sorted(loaded) == sorted(_tensors()), sorted(loaded))


@case
def fetches_only_what_is_read(d):
    u, _, www = _servers()
    log = os.path.join(os.path.dirname(www), "nginx", "access.log")
    open(log, "w").close()
    with wpack.safe_open(u + "/a.wpack") as f:
        f.get_tensor("t1")
    lines = log_lines(log)
    got = sum(int(x.rsplit(" ", 1)[1]) for x in lines)
    size = os.path.getsize(os.path.join(www, "a.wpack"))
    check(len(lines) == 3 and all(" 206 " in x for x in lines), lines)
    check(got < size - 256 * 1024, "fetched %d of %d bytes" % (got, size))


@case
def name_order_reads_fetch_ahead(d):
    """safe_open of a URL read key by key in name order (the usual loading
    loop, no read_plan) fetches ahead from the second read on: 600 tensors
    of 4 KiB (three windows of 256) in a few merged requests, not 600; reads
    out of name order fetch only what they read, and a jump drops what was
    planned."""
    u, _, www = _servers()
    log = os.path.join(os.path.dirname(www), "nginx", "access.log")
    r = np.random.default_rng(1617)
    small = {"n%03d" % k: r.standard_normal(1024).astype(np.float32) for k in range(600)}
    path = os.path.join(www, "seq.wpack")
    wpack.save_file(small, path)

    size = os.path.getsize(path)

    def requests(run):
        """(requests, bytes) of run(f) but the open's: its head (from byte 0)
        and tail (to the last byte; nginx may log it after the open returns)"""
        open(log, "w").close()
        with wpack.safe_open(u + "/seq.wpack") as f:
            run(f)
        lines = [x for x in log_lines(log)
                 if '"bytes=0-' not in x and not x.split('"')[1].endswith("-%d" % (size - 1))]
        return len(lines), sum(int(x.rsplit(" ", 1)[1]) for x in lines)

    got = {}
    n, _ = requests(lambda f: got.update((k, f.get_tensor(k)) for k in f.keys()))
    check(sorted(got) == sorted(small) and all(np.array_equal(got[k], small[k]) for k in small),
          sorted(got)[:3])
    check(n <= 16, ("name order", n))  # 600 before
    back = ["n%03d" % k for k in range(399, 349, -1)]  # not in the tail the open kept
    n, sent = requests(lambda f: [check(np.array_equal(f.get_tensor(k), small[k]), k) for k in back])
    check(n == 50 and sent == 50 * 4096, ("reverse order: one exact request each", n, sent))
    n, sent = requests(lambda f: [f.get_tensor(k) for k in ("n200", "n100", "n300")])
    check(n == 3 and sent == 3 * 4096, ("scattered", n, sent))
    # two in a row start a plan; a jump drops it: what follows is read alone
    def pair_then_jump(f):
        f.get_tensor("n300"), f.get_tensor("n301")
        for k in ("n050", "n010", "n020"):
            check(np.array_equal(f.get_tensor(k), small[k]), k)
    n, sent = requests(pair_then_jump)
    # n300 alone, the plan's requests from n301 (at most the 1 MiB of the
    # 256 entries), then the three alone
    check(n <= 1 + 8 + 3 and sent <= 4096 + (1 << 20) + 3 * 4096, ("after a jump", n, sent))
    os.unlink(path)


@case
def huge_chunk_size_clamped(d):
    """A chunk_size past 1 GiB is taken as 1 GiB: 2**61 and more made
    connections x chunk_size wrap around to 0, and the read-ahead went in
    64 KiB steps (3074 requests for a 192 MiB archive, not 194) with every
    entry held whole."""
    u, _, www = _servers()
    log = os.path.join(os.path.dirname(www), "nginx", "access.log")
    r = np.random.default_rng(1618)
    big = {"b%d" % k: r.standard_normal(1 << 17).astype(np.float32) for k in range(8)}
    path = os.path.join(www, "huge_chunk.wpack")
    wpack.save_file(big, path)
    for chunk in (2 ** 61, 2 ** 64 - 1):
        open(log, "w").close()
        with wpack.safe_open(u + "/huge_chunk.wpack", chunk_size=chunk) as f:
            f.read_plan(f.keys())
            for k in f.keys():
                check(np.array_equal(f.get_tensor(k), big[k]), (chunk, k))
        n = len(log_lines(log))
        check(n <= 16, ("requests for 4 MiB with chunk_size", chunk, n))  # 66 before
    os.unlink(path)


@case
def load_file_reads_ahead(d):
    """load_file of a URL plans its reads (safe_open.read_plan): 200 tensors
    of 4 KiB come in a few merged requests, not one request each."""
    u, _, www = _servers()
    log = os.path.join(os.path.dirname(www), "nginx", "access.log")
    r = np.random.default_rng(1616)
    small = {"n%03d" % k: r.standard_normal(1024).astype(np.float32) for k in range(200)}
    path = os.path.join(www, "small.wpack")
    wpack.save_file(small, path, name_map={"alias_n007": "n007"})
    open(log, "w").close()
    got = wpack.load_file(u + "/small.wpack")
    lines = log_lines(log)
    check(sorted(got) == sorted(small) and all(np.array_equal(got[k], small[k]) for k in small),
          sorted(got)[:3])
    # the open's two requests (more when its tail is fetched in chunks) and
    # a few merged ones: 202 without the plan
    check(len(lines) <= 12, (len(lines), lines[:5]))
    with wpack.safe_open(u + "/small.wpack") as f:
        open(log, "w").close()
        f.read_plan(["n010", "alias_n007", "n011"])
        check(np.array_equal(f.get_tensor("n010"), small["n010"]), "planned read")
        check(np.array_equal(f.get_tensor("alias_n007"), small["n007"]), "by its other name")
        e = raises(wpack.Error, f.read_plan, ["n010", "nope"], code="WPACK_E_NOT_FOUND")
        check("nope" in str(e), str(e))
        f.read_plan(None)  # dropped: reads go one by one
        check(np.array_equal(f.get_tensor("n199"), small["n199"]), "after the plan is dropped")
    with wpack.safe_open(path) as f:
        f.read_plan(f.keys())  # local: nothing changes
        check(np.array_equal(f.get_tensor("n000"), small["n000"]), "local")
        # one name is one name: read_plan("n000") looked up "n", "0", ...
        # (WPACK_E_NOT_FOUND for "n", a name never asked for)
        f.read_plan("n000")
        f.read_plan(b"n001")
    os.unlink(path)
    # wpack.torch.load_model of a URL plans its reads the same way
    import wpack.torch as wt
    torch.manual_seed(5)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(60)])
    mpath = os.path.join(www, "model.wpack")
    wt.save_model(model, mpath)
    other = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(60)])
    open(log, "w").close()
    wt.load_model(other, u + "/model.wpack")
    lines = log_lines(log)
    check(all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 other.state_dict().values())), "load_model")
    check(len(lines) <= 12, ("load_model requests", len(lines), lines[:5]))
    os.unlink(mpath)


@case
def reads_are_verified(d):
    _, b, _ = _servers()
    for verify in (True, False):
        with wpack.safe_open(b + "/flip/a.wpack", verify=verify) as f:
            bad = []
            for k in ("t0", "t1", "t2", "t3"):
                try:
                    f.get_tensor(k)
                except wpack.Error as e:
                    bad.append(e)
            check(bad and all(e.name == "WPACK_E_CHECKSUM" for e in bad),
                  (verify, [str(e) for e in bad]))
            check("tensor 't" in str(bad[0]) and "hash" in str(bad[0]), str(bad[0]))


@case
def s3_signed(d):
    _, b, www = _servers()
    want = wpack.load_file(os.path.join(www, "a.wpack"))
    creds = dict(s3_endpoint=b + "/s3", s3_region="eu-west-3", access_key="AKIDTEST",
                 secret_key="secret/TEST+key")
    with wpack.safe_open("s3://bucket/a.wpack", aws_env=False, **creds) as f:
        check(np.array_equal(f.get_tensor("t3"), want["t3"]), "s3 t3")
    e = raises(wpack.Error, wpack.safe_open, "s3://bucket/a.wpack", aws_env=False,
               **dict(creds, secret_key="wrong"))
    check("403" in str(e), str(e))
    env = {"AWS_ENDPOINT_URL": b + "/s3", "AWS_REGION": "eu-west-3",
           "AWS_ACCESS_KEY_ID": "AKIDTOKEN", "AWS_SECRET_ACCESS_KEY": "tokensecret",
           "AWS_SESSION_TOKEN": "tok/en="}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with wpack.safe_open("s3://bucket/a.wpack", framework="pt") as f:
            check(torch.equal(f.get_tensor("bf"), torch.from_numpy(
                want["bf"].view(np.int16).copy()).view(torch.bfloat16)), "s3 bf16 from env")
        raises(wpack.Error, wpack.safe_open, "s3://bucket/a.wpack", aws_env=False,
               s3_endpoint=b + "/s3")   # unsigned: 403
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@case
def remote_errors(d):
    u, _, www = _servers()
    e = raises(wpack.Error, wpack.safe_open, u + "/missing.wpack")
    check("404" in str(e) and "missing.wpack" in str(e), str(e))
    raises(TypeError, wpack.safe_open, u + "/a.wpack", no_such_option=1)
    raises(TypeError, wpack.safe_open, os.path.join(www, "a.wpack"), connections=2)
    with wpack.safe_open(u + "/a.wpack", connections=2, chunk_size=65536, retries=0,
                         timeout_s=10) as f:
        raises(wpack.Error, f.get_tensor, "nope", code="WPACK_E_NOT_FOUND")
    check(wpack.is_url("HTTPS://x/y") and not wpack.is_url("x.wpack"), "is_url")
    # the scheme in any case: passed to the library as given, shown as given
    mixed = "HtTp://me:s3cret@" + u[len("http://"):]
    with wpack.safe_open(mixed + "/a.wpack") as f:
        check(f.keys() and np.array_equal(f.get_tensor("t1"),
                                          wpack.safe_open(os.path.join(www, "a.wpack"))
                                          .get_tensor("t1")), "mixed-case scheme reads")
    e = raises(wpack.Error, wpack.safe_open, mixed + "/missing.wpack")
    check("s3cret" not in str(e) and "HtTp://***@" in str(e) and "me:" not in str(e) and "404" in str(e), str(e))
    # a password in the URL is never shown: the library's messages and
    # Python's own (a name not found names the archive by its URL)
    ua = u.replace("http://", "http://me:s3cret@")
    e = raises(wpack.Error, wpack.safe_open, ua + "/missing.wpack")
    check("s3cret" not in str(e) and "//***@" in str(e) and "me:" not in str(e), str(e))
    with wpack.safe_open(ua + "/a.wpack") as f:
        e = raises(wpack.Error, f.get_tensor, "nope", code="WPACK_E_NOT_FOUND")
        check("s3cret" not in str(e) and "//***@" in str(e) and "me:" not in str(e), str(e))
        e = raises(wpack.Error, f.stats, "nope")
        check("s3cret" not in str(e), str(e))



_Q = ("?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIASEKRIT1%2F20260101%2Fus-east-1"
      "%2Fs3%2Faws4_request&X-Amz-Signature=5e6bSEKRIT2&sig=SEKRIT3%2B%3D&token=SEKRIT4/a/b"
      "#SEKRIT5")
_QS = "?X-Amz-Algorithm=***&X-Amz-Credential=***&X-Amz-Signature=***&sig=***&token=***#***"


@case
def url_secrets_never_shown(d):
    """A presigned-S3-like query (every value), a fragment and a token as
    user name never reach an exception (the library's messages and
    Python's own), for failed opens (404, a truncated archive, a refused
    connection, a redirect not followed, a server echoing the request) and
    failed reads of archives that open; host, path and the query's names
    are still shown, and the request uses the URL as given."""
    u, b, www = _servers()
    with open(os.path.join(www, "a.wpack"), "rb") as f:
        head = f.read(3000)
    with open(os.path.join(www, "trunc.wpack"), "wb") as f:
        f.write(head)
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = "http://127.0.0.1:%d" % s.getsockname()[1]
    s.close()

    def hidden(e, shown):
        text = "%s %r" % (e, e)
        check("SEKRIT" not in text and shown in text, text)

    for url, code, opts in ((u + "/missing.wpack", "WPACK_E_IO", {}),
                            (u + "/trunc.wpack", "WPACK_E_TRUNCATED", {}),
                            (dead + "/a.wpack", "WPACK_E_IO", {"retries": 0}),
                            (b + "/redirect/a.wpack", "WPACK_E_IO", {"follow_redirects": False}),
                            (b + "/echo/a.wpack", "WPACK_E_IO", {})):
        e = raises(wpack.Error, wpack.safe_open, url + _Q, code=code, **opts)
        hidden(e, url + _QS)
    e = raises(wpack.Error, wpack.safe_open, b + "/redirect/a.wpack" + _Q, follow_redirects=False)
    hidden(e, "redirect to %s/a.wpack?X-Amz-Algorithm=***&" % b)
    e = raises(wpack.Error, wpack.safe_open, b + "/echo/a.wpack" + _Q)
    hidden(e, "denied: /echo/a.wpack?X-Amz-Algorithm=")
    e = raises(wpack.Error, wpack.safe_open, u.replace("http://", "http://SEKRIT6@") + "/missing.wpack")
    hidden(e, "http://***@127.0.0.1:")
    e = raises(ValueError, wpack.safe_open, u + "/a\0.wpack" + _Q)
    hidden(e, "/a%00.wpack" + _QS)
    # a scheme wpack does not read is refused, shown redacted (it was taken
    # for a local path: "No such file", the password and token quoted whole)
    for url, shown in (("ftp://user:SEKRIT7@127.0.0.1/m.wpack" + _Q, "ftp://***@127.0.0.1/m.wpack" + _QS),
                       ("gs://SEKRIT8@bucket/m.wpack", "gs://***@bucket/m.wpack"),
                       ("file://h/m.wpack?sig=SEKRIT9", "file://h/m.wpack?sig=***")):
        for fn in (wpack.safe_open, wpack.load_file):
            e = raises(wpack.Error, fn, url, code="WPACK_E_INVALID_ARGUMENT")
            hidden(e, shown + ": unsupported URL scheme")
    # a URL where a local file is written is refused, named redacted (the
    # writer's "cannot create a temporary file" quoted the password)
    npy = os.path.join(d, "t.npy")
    np.save(npy, np.zeros(3, np.float32))
    for fn, url in ((lambda p: wpack.save_file({"a": np.zeros(3, np.float32)}, p), "ftp://u:SEKRIT10@h/x"),
                    (lambda p: wpack.pack([npy], p), "https://u:SEKRIT11@h/x"),
                    (lambda p: wpack.update_stats(p, {}), "http://SEKRIT12tok@h/x"),
                    # ... or read as a local input (a presigned link to pack)
                    (lambda p: wpack.pack([p], os.path.join(d, "o.wpack")), "https://u:SEKRIT13@h/x"),
                    (lambda p: wpack.pack([(p, {"prefix": "a."})], os.path.join(d, "o.wpack")),
                     "https://u:SEKRIT14@h/x"),
                    (wpack.detect, "https://u:SEKRIT15@h/x")):
        e = raises(wpack.Error, fn, url, code="WPACK_E_INVALID_ARGUMENT")
        hidden(e, "://***@h/x: ")
    want = wpack.load_file(os.path.join(www, "a.wpack"))
    for a in ("a.wpack", "set/m.wpack"):
        with wpack.safe_open(u + "/" + a + _Q) as f:
            check(np.array_equal(f.get_tensor("t1"), want["t1"]), a)
            e = raises(wpack.Error, f.get_tensor, "nope", code="WPACK_E_NOT_FOUND")
            hidden(e, u + "/" + a + _QS)
            e = raises(wpack.Error, f.stats, "nope")
            hidden(e, u + "/" + a + _QS)
    # load_model's own RuntimeErrors (keys missing, a shape that differs)
    # quoted the URL as given: password and query values whole
    import wpack.torch as wt
    url = u.replace("http://", "http://SEKRIT16@") + "/a.wpack" + _Q
    m = torch.nn.Sequential(torch.nn.Linear(2, 2))
    e = raises(RuntimeError, wt.load_model, m, url)
    hidden(e, "load_model(http://***@127.0.0.1:")
    check('Missing key(s) in state_dict: "0.weight", "0.bias"' in str(e) and _QS in str(e),
          str(e))
    m = torch.nn.Module()
    m.t0 = torch.nn.Parameter(torch.zeros(3))
    e = raises(RuntimeError, wt.load_model, m, url, strict=False)
    hidden(e, "/a.wpack" + _QS + "): Error(s) in loading state_dict")
    check("size mismatch for t0: copying a param with shape torch.Size([256, 256])" in str(e),
          str(e))
    os.unlink(os.path.join(www, "trunc.wpack"))


@case
def cache_dir_swapped_after_open(d):
    """The cache directory is checked at the open (ours, 0700, no symlink);
    one renamed away after it and replaced by a symlink to another
    directory (by whoever may write its parent) does not get the chunks:
    they were written by path, through the link, into the other directory
    (a private model's bytes). Written into the directory opened, they are
    reused from there."""
    u, _, www = _servers()
    want = wpack.load_file(os.path.join(www, "a.wpack"))
    parent = os.path.join(d, "shared")
    os.mkdir(parent)
    cache, moved, other = (os.path.join(parent, x) for x in ("c", "c.moved", "other"))
    os.mkdir(other)
    with wpack.safe_open(u + "/a.wpack", cache=cache) as f:
        os.rename(cache, moved)
        os.symlink("other", cache)
        check(np.array_equal(f.get_tensor("t1"), want["t1"]), "t1")
    chunks = lambda p: [x for x in os.listdir(p) if x.endswith(".chunk")]
    check(chunks(other) == [], ("written through the link", os.listdir(other)))
    check(chunks(moved), ("none in the directory opened", os.listdir(moved)))


@case
def cache_not_shared_across_objects(d):
    """Chunks are keyed by the index's XXH3 and the URL's origin: a server
    serving a copy of a real archive's index over other bytes (the same
    index and size) seeded the cache under the real archive's key, and a
    later unverified slice of the real archive (verify=False: only whole
    entries are checked) returned its bytes. Two objects on nginx: the
    real a.wpack and a copy, t1's bytes negated, at another path."""
    u, _, www = _servers()
    real = open(os.path.join(www, "a.wpack"), "rb").read()
    want = wpack.load_file(os.path.join(www, "a.wpack"))["t1"]
    at = real.find(want.tobytes())
    check(at > 0, "t1's bytes not found stored plain in a.wpack")
    os.makedirs(os.path.join(www, "copy"), exist_ok=True)
    with open(os.path.join(www, "copy", "a.wpack"), "wb") as f:
        f.write(real[:at] + (-want).tobytes() + real[at + want.nbytes:])
    cache = os.path.join(d, "cache")
    with wpack.safe_open(u + "/copy/a.wpack", cache=cache, verify=False) as f:
        check(np.array_equal(f.get_slice("t1")[0:2], -want[0:2]), "the copy's own bytes")
    with wpack.safe_open(u + "/a.wpack", cache=cache, verify=False) as f:
        got = f.get_slice("t1")[0:2]
        check(np.array_equal(got, want[0:2]), ("the copy's bytes returned", got[0, :4]))
    # the same object through its cache still reuses its chunks
    with wpack.safe_open(u + "/a.wpack", cache=cache, verify=False) as f:
        check(np.array_equal(f.get_slice("t1")[0:2], want[0:2]), "reuse")

if __name__ == "__main__":
    try:
        main()
    finally:
        _stop()
