"""wpack for Python: read and write wpack archives (page-aligned files of model
weights with typed metadata, name maps and calibration statistics).

Bindings over the C shared library libwpack (ctypes: nothing to compile).
The API follows safetensors::

    with wpack.safe_open("model.wpack", framework="np") as f:
        w = f.get_tensor("encoder.0.weight")     # zero-copy, read-only numpy view
        kind = f.describe("encoder.0.weight")["dtype"]  # "bf16": w is its bits, uint16
        rows = f.get_slice("embed.weight")[0:128]  # reads only those rows
    wpack.save_file({"w": w}, "copy.wpack", dtypes={"w": kind}, metadata={"epochs": 3})
    wpack.pack(["model.pt", "extra.npz"], "packed.wpack", cast="bf16")  # wpack create
    with wpack.safe_open("https://host/model.wpack") as f:  # or s3://bucket/key
        w = f.get_tensor("encoder.0.weight")     # fetched, verified, copied

Every C failure is raised as wpack.Error (.code, .name, message).
"""
import collections.abc
import ctypes
import errno
import mmap
import operator
import os
import re
import stat
import sys
import threading

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["Error", "FileNotFound", "NotADirectory", "IsADirectory", "PermissionDenied",
           "OSFailure", "InvalidArgument", "NotFound", "safe_open", "load_file", "save_file", "update_stats", "pack", "detect", "is_url",
           "version",
           "DTYPES"]

# Error codes used here (include/wpack.h).
E_IO, E_INVALID_ARGUMENT, E_NOT_FOUND, E_STATE, E_NO_VIEW = 1, 3, 4, 5, 7
E_SAME_FILE, E_FILE_TYPE, E_EMPTY, E_NOMEM = 8, 10, 11, 2
E_INPUT, E_UNSUPPORTED = 60, 61

KIND_DATA, KIND_SPLAT, KIND_ALIAS, KIND_EXTERNAL = 1, 2, 3, 4
CODEC_NONE = 0
OPEN_VERIFY_READS = 4
OPEN_NO_VERIFY_READS = 8
READ_VERIFY = 1
STATS_WEIGHT, STATS_ACTIVATION = 1, 2
META_STRING, META_I64, META_F64, META_BOOL, META_BYTES, META_ARRAY = 1, 2, 3, 4, 5, 6

# wpack dtype code -> (name, numpy dtype for framework "np")
DTYPES = {
    1: ("f64", np.float64), 2: ("f32", np.float32), 3: ("f16", np.float16),
    4: ("bf16", np.uint16), 5: ("f8e4m3fn", np.uint8), 6: ("f8e5m2", np.uint8),
    7: ("i64", np.int64), 8: ("i32", np.int32), 9: ("i16", np.int16), 10: ("i8", np.int8),
    11: ("u64", np.uint64), 12: ("u32", np.uint32), 13: ("u16", np.uint16), 14: ("u8", np.uint8),
    15: ("bool", np.bool_),
}
_NP_TO_CODE = {np.dtype(np.float64): 1, np.dtype(np.float32): 2, np.dtype(np.float16): 3,
               np.dtype(np.int64): 7, np.dtype(np.int32): 8, np.dtype(np.int16): 9,
               np.dtype(np.int8): 10, np.dtype(np.uint64): 11, np.dtype(np.uint32): 12,
               np.dtype(np.uint16): 13, np.dtype(np.uint8): 14, np.dtype(np.bool_): 15}
_CODE_BY_NAME = {name: code for code, (name, _) in DTYPES.items()}
# numpy dtypes of the ml_dtypes package, by name (no import needed): stored
# as their wpack dtype, their bytes as they are
_ML_DTYPES = {"bfloat16": 4, "float8_e4m3fn": 5, "float8_e5m2": 6}


class Error(Exception):
    """A failure reported by the C library: .code (int, a wpack_error),
    .name ("WPACK_E_CHECKSUM", ...) and the library's message as str(e).
    The message holds no control character: the paths and names it quotes
    are escaped as the library escapes them (ESC as \\x1b, a newline as
    \\x0a, C1 and bidirectional controls as \\u009b, bytes that are not
    UTF-8 as \\xff), so printing or logging it is safe.

    A path that cannot be opened or created for an OS reason (WPACK_E_IO
    with the system's reason: a missing file or directory, a file where a
    directory should be, no permission) is also the OSError Python raises
    for it, with .errno and .strerror: `except FileNotFoundError` catches
    a missing archive as it does for safetensors and torch.load (the
    classes are FileNotFound, NotADirectory, IsADirectory,
    PermissionDenied and, for any other errno, OSFailure, each a
    subclass of Error and of that OSError); str(e) stays the library's
    message. Likewise WPACK_E_INVALID_ARGUMENT (a bad option value:
    pack(cast="bfloat16"), chunk_sums=3, an ftp:// URL) is also a
    ValueError (wpack.InvalidArgument), and WPACK_E_NOT_FOUND (a name
    not in the archive: get_tensor("nope"), stats, describe) also a
    KeyError (wpack.NotFound), with the same message (not KeyError's
    quoted repr of it)."""

    def __new__(cls, code=0, message="", *rest):
        if cls is Error:   # the flavour of the failure: the builtin it also is
            n = _os_errno(code, message)
            if n is not None:
                cls = _OS_FLAVOURS.get(n, OSFailure)
            elif code == E_INVALID_ARGUMENT:
                cls = InvalidArgument
            elif code == E_NOT_FOUND:
                cls = NotFound
        return super().__new__(cls)

    def __init__(self, code, message):
        self.code = int(code)
        self.name = lib.wpack_error_name(self.code).decode()
        super().__init__("%s [%s]" % (_shown(message), self.name))

    def __reduce__(self):
        # pickle and copy rebuild an exception as cls(*self.args): here that
        # is one argument, the shown message, not (code, message). Without
        # this, an Error raised in a multiprocessing worker could not come
        # back (Pool hung, ProcessPoolExecutor said BrokenProcessPool).
        return _error_rebuild, (type(self), self.args), self.__dict__


def _error_rebuild(cls, args):
    """An Error (or subclass) with args as they were, not formatted again;
    .code, .name and the rest come back from the pickled __dict__."""
    e = cls.__new__(cls)
    Exception.__init__(e, *args)
    return e


# Library messages of an OS failure end with the system's reason,
# strerror(errno): in this process os.strerror gives the same text
# (one C library, one locale), so the errno comes back from it. The C
# API has no errno to ask for.
_STRERROR = {}


def _os_errno(code, message):
    """The errno of a WPACK_E_IO failure whose message ends with its
    strerror (detect's missing input: WPACK_E_NOT_FOUND), else None."""
    if code not in (E_IO, E_NOT_FOUND) or not isinstance(message, str):
        return None
    if not _STRERROR:
        _STRERROR.update((os.strerror(n), n) for n in errno.errorcode)
    _, sep, reason = message.rpartition(": ")
    return _STRERROR.get(reason) if sep else None


class _Flavour(Error):
    """An Error that is also a builtin exception (ValueError, KeyError,
    an OSError): str(e) stays the library's message (KeyError's own str
    would quote it as a repr, OSError's show "[Errno 2] ...")."""

    def __str__(self):
        return Exception.__str__(self)


class InvalidArgument(_Flavour, ValueError):
    """wpack.Error WPACK_E_INVALID_ARGUMENT: a bad argument value."""


class NotFound(_Flavour, KeyError):
    """wpack.Error WPACK_E_NOT_FOUND: a name (tensor, stats record, key)
    that is not there."""


class _OSFlavour(_Flavour):
    """What the OS flavours of Error share: errno and strerror set, the
    library's message as str(e) (OSError's own str would be "[Errno 2]
    No such file or directory", naming no file), errno kept by pickle."""

    def __init__(self, code, message):
        super().__init__(code, message)
        # OSError's __init__ does nothing for a class with its own __new__
        self.args = ("%s [%s]" % (_shown(message), self.name),)
        self.errno = _os_errno(code, message)
        self.strerror = os.strerror(self.errno) if self.errno is not None else None

    def __reduce__(self):
        rebuild, args, state = super().__reduce__()
        return rebuild, args, dict(state, errno=self.errno, strerror=self.strerror)


class FileNotFound(_OSFlavour, FileNotFoundError):
    """wpack.Error for a missing file or directory (ENOENT)."""


class NotADirectory(_OSFlavour, NotADirectoryError):
    """wpack.Error for a file where a directory should be (ENOTDIR)."""


class IsADirectory(_OSFlavour, IsADirectoryError):
    """wpack.Error for a directory where a file should be (EISDIR)."""


class PermissionDenied(_OSFlavour, PermissionError):
    """wpack.Error for a path without the permission asked (EACCES, EPERM)."""


class OSFailure(_OSFlavour, OSError):
    """wpack.Error for any other OS failure (EIO, ENOSPC, EROFS, ...)."""


_OS_FLAVOURS = {errno.ENOENT: FileNotFound, errno.ENOTDIR: NotADirectory,
                errno.EISDIR: IsADirectory, errno.EACCES: PermissionDenied,
                errno.EPERM: PermissionDenied}


def _os_error(code, message, n):
    """Error(code, message) as the OS flavour of errno n: for a failure
    found in Python (os.stat), whose message has no strerror to read."""
    e = _OS_FLAVOURS.get(n, OSFailure)(code, message)
    e.errno, e.strerror = n, os.strerror(n)
    return e


def _shown(text):
    """text escaped by the library's one rule (wpack_text_escape); a
    library message, escaped already, comes back as it is."""
    try:
        b = text.encode("utf-8", "surrogateescape")  # a path's bytes, as os.fsdecode took them
    except UnicodeEncodeError:
        b = text.encode("utf-8", "backslashreplace")
    buf = ctypes.create_string_buffer(4 * len(b) + 1)
    n = lib.wpack_text_escape(buf, len(buf), b, len(b))
    return buf.raw[:n].decode("utf-8")


def _describe(code):
    return lib.wpack_error_describe(code).decode()


def _b(s, what):
    """s as the bytes of a C string (str: UTF-8, with a byte that is not
    UTF-8, which os.fsdecode gives in a file name as U+DC80..U+DCFF, back
    as that byte, as os.fsencode does). A NUL inside would end the string
    early in C (a name, key, value or path silently cut short): ValueError
    naming `what`."""
    b = s if isinstance(s, bytes) else str(s).encode("utf-8", "surrogateescape")
    if b"\0" in b:
        raise ValueError("%s %r contains a NUL character (C strings end at one)" % (what, s))
    return b


def _fspath(p):
    """A path argument (str, bytes or os.PathLike) as str: bytes decoded as
    os.fsdecode does (a byte that is not UTF-8 as U+DC80..U+DCFF, which _b
    gives back as that byte), so messages show it as a path, not b'...'
    (os.fspath alone kept bytes: a message naming such a path was
    AttributeError). Whether a path is a URL is asked of os.fspath(p):
    bytes never are (is_url)."""
    return os.fsdecode(os.fspath(p))


def _key(s, what):
    """A name or key the caller gives to be stored (tensor name, metadata
    key, name-map pair, stats key) as C string bytes: a str (or its UTF-8
    bytes) only. Anything else went through str() (1 -> "1", None ->
    "None"): stored under a name that lookups by the caller's own object
    never find, and {1: a, "1": b} collided (safetensors takes str keys only)."""
    if not isinstance(s, (str, bytes)):
        raise TypeError("%s %r: want a str, not %s" % (what, s, type(s).__name__))
    return _b(s, what)


def _int_arg(v, ctype, what):
    """v as a Python int that fits the C integer type ctype (a ctypes type,
    which would otherwise wrap it silently): TypeError if v is not an
    integer (bool is not one), OverflowError naming `what` outside
    ctype's range."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("%s must be an int, not bool" % what)
    try:
        n = operator.index(v)
    except TypeError:
        raise TypeError("%s must be an int, not %s" % (what, type(v).__name__)) from None
    bits = 8 * ctypes.sizeof(ctype)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ctype(-1).value == -1 \
        else (0, (1 << bits) - 1)
    if not lo <= n <= hi:
        raise OverflowError("%s: %d is out of range %d..%d" % (what, n, lo, hi))
    return n


def _set_int(struct, field, v, what):
    """struct.field = v, checked against the field's C type (_int_arg)."""
    setattr(struct, field, _int_arg(v, dict(type(struct)._fields_)[field], what))


def version():
    """The linked C library's version string ("0.1.0")."""
    return lib.wpack_version_string().decode()


# ------------------------------------------------------------------ reading

_REMOTE_OPTIONS = ("connections", "chunk_size", "retries", "retry_delay_ms", "timeout_s",
                   "max_bytes_per_s", "follow_redirects", "s3_region", "s3_endpoint",
                   "access_key", "secret_key", "session_token", "ca_file", "cache",
                   "cache_max_bytes", "proxy", "no_proxy")
# Filled from the environment when not given, as the wpack CLI does (the C
# library reads no environment).
_AWS_ENV = {"access_key": ("AWS_ACCESS_KEY_ID",), "secret_key": ("AWS_SECRET_ACCESS_KEY",),
            "session_token": ("AWS_SESSION_TOKEN",),
            "s3_region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
            "s3_endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")}


def _env_first(*names):
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def _proxy_env(url, s3_endpoint):
    """The proxy for url's scheme from the variables curl reads, as the
    wpack CLI picks it (cli/open_url.c): https_proxy / HTTPS_PROXY for
    https and s3:// (unless its endpoint is http://), http_proxy (lower
    case only) for http, then all_proxy / ALL_PROXY."""
    target = url
    if url[:5].lower() == "s3://":
        target = s3_endpoint or "https://"
    if target[:7].lower() == "http://":
        p = _env_first("http_proxy")
    else:
        p = _env_first("https_proxy", "HTTPS_PROXY")
    return p or _env_first("all_proxy", "ALL_PROXY")


_SCHEME_SHAPE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path):
    """True when path names a remote archive safe_open fetches through
    libwpack-remote: http://, https:// or s3://bucket/key, the scheme in
    any case ("HTTPS://h/m" too, as URLs allow; a local file of such a
    name is reached as "./HTTPS://..."). libwpack-remote's rule
    (wpack_remote_is_url), loaded only for a path that starts with a
    scheme's shape (RFC 3986: a letter, then letters, digits, "+", "-",
    "."; then "://"): a local path needs no libwpack-remote."""
    if not isinstance(path, str) or not _SCHEME_SHAPE.match(path):
        return False
    return bool(_lib.remote_lib().wpack_remote_is_url(path.encode("utf-8", "surrogateescape")))


def _has_scheme(path):
    """path starts with any URL scheme and "://" (wpack_remote_has_scheme)."""
    return isinstance(path, str) and bool(_SCHEME_SHAPE.match(path)) and bool(
        _lib.remote_lib().wpack_remote_has_scheme(path.encode("utf-8", "surrogateescape")))


def _refuse_url(path, caller, why):
    """A URL where only a local path will do: refused, named redacted (the
    writer's own message quoted "https://user:PASSWORD@host/m" whole)."""
    if _has_scheme(path):
        raise Error(E_INVALID_ARGUMENT, "%s: %s(): %s (a local file whose path starts so is "
                    "named ./PATH)" % (_lib.shown_url(path), caller, why))


class _Progress:
    """The on_bytes callback of one remote archive: adds up the bytes each
    completed request brought and calls progress(total). libwpack-remote
    calls it in the thread doing the read (curl's multi interface, no thread
    of its own); ctypes takes the GIL for it. An exception cannot cross the
    C frames: the first is kept and re-raised by raise_pending() when the C
    call returns (the read itself finishes)."""

    def __init__(self, fn):
        self.fn, self.total, self.error = fn, 0, None
        self.c_fn = _lib.RemoteOnBytes(self._on_bytes)   # kept alive with the handle

    def _on_bytes(self, _user, nbytes):
        self.total += int(nbytes)
        if self.error is None:
            try:
                self.fn(self.total)
            except BaseException as e:  # noqa: B036 - re-raised after the C call
                self.error = e

    def raise_pending(self):
        e, self.error = self.error, None
        if e is not None:
            raise e


def _remote_options(url, flags, given, use_env, progress=None):
    _check_options("safe_open", given, _REMOTE_OPTIONS)
    if progress is not None and not callable(progress):
        raise TypeError("safe_open(): progress must be callable(fetched_bytes)")
    o = _lib.RemoteOptions()
    _lib.remote_lib().wpack_remote_options_init(ctypes.byref(o))
    o.flags = flags
    o._progress = None
    if progress is not None:
        o._progress = _Progress(progress)
        o.on_bytes = o._progress.c_fn
    vals = dict(given)
    if use_env:
        for k, names in _AWS_ENV.items():
            if k not in vals:
                v = _env_first(*names)
                if v:
                    vals[k] = v
        if "proxy" not in vals:
            vals["proxy"] = _proxy_env(url, vals.get("s3_endpoint"))
        if "no_proxy" not in vals:
            vals["no_proxy"] = _env_first("no_proxy", "NO_PROXY")
    o._keep = []
    for k, v in vals.items():
        if v is None:
            continue
        if k == "cache":  # the directory of the chunk cache
            b = _b(_fspath(v), "cache")
            o._keep.append(b)
            o.cache_dir = b
        elif k in ("s3_region", "s3_endpoint", "access_key", "secret_key", "session_token",
                 "ca_file", "proxy", "no_proxy"):
            b = _b(_fspath(v) if k == "ca_file" else v, k)
            o._keep.append(b)
            setattr(o, k, b)
        elif k == "follow_redirects":
            o.follow_redirects = 1 if v else 0
        else:
            _set_int(o, k, v, "safe_open(): " + k)
    return o


class _Handle:
    """Owns one wpack_archive*. Every zero-copy view holds a reference to it,
    so wpack_close() runs only when the archive is closed AND the last view
    is gone (from __del__). For framework "pt" it also owns our descriptor
    of the file and its private mapping (fd, mm; see safe_open._open_pt):
    a read in another thread holds the handle, so close() cannot take the
    descriptor from under it (its number reused by another open, the read
    would map that file)."""

    fd = mm = None

    def __init__(self, path, flags, remote=None):
        self.handed = set()   # entries handed out over mm ("pt")
        self.lock = threading.Lock()
        p = ctypes.c_void_p()
        # the remote options (their strings and progress callback) live as
        # long as the handle: the C archive calls on_bytes on later reads
        self.remote = remote
        self.progress = getattr(remote, "_progress", None)
        if remote is not None:   # a URL: through libwpack-remote
            rc = _lib.remote_lib().wpack_open_url(ctypes.byref(p), _b(path, "URL"), ctypes.byref(remote))
        else:
            rc = lib.wpack_open_file(ctypes.byref(p), _b(path, "path"), flags)
        # a URL as the library shows it: a credential in it never in a message
        shown = _lib.shown_url(_fspath(path)) if remote is not None else _fspath(path)
        if rc != 0:
            msg = lib.wpack_errmsg(p).decode("utf-8", "replace") if p else _describe(rc)
            lib.wpack_close(p)
            raise Error(rc, msg or "%s: %s" % (shown, _describe(rc)))
        self.ptr = p
        self.path = shown
        self.raise_pending()

    def raise_pending(self):
        """Re-raise what the progress callback raised during the last C call."""
        if self.progress is not None:
            self.progress.raise_pending()

    def fail(self, rc, what):
        # code and message taken together: other threads may be failing on
        # this handle (ctypes lets them run during C calls)
        buf = ctypes.create_string_buffer(1024)
        code = lib.wpack_errmsg_copy(self.ptr, buf, len(buf))
        msg = buf.value.decode("utf-8", "replace")
        where = _shown(self.path)   # escaped, as the library's messages are
        if not msg or code != rc:
            msg = "%s: %s: %s" % (where, what, _describe(rc))
        elif where not in msg:
            # a read's message names the entry ("tensor 'w': checksum
            # mismatch ..."), not the archive: which of the files loaded?
            msg = "%s: %s" % (where, msg)
        raise Error(rc, msg)

    def __del__(self):
        p, self.ptr = getattr(self, "ptr", None), None
        if p and lib is not None:   # lib may be gone at interpreter exit
            lib.wpack_close(p)
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


def _view_base(handle, addr, nbytes):
    """A read-only buffer over nbytes at addr that keeps handle alive."""
    buf = (ctypes.c_char * nbytes).from_address(addr)
    buf._wpack_handle = handle   # ctypes instances take attributes: the lifetime link
    return memoryview(buf).toreadonly()


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int64]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class _Unmap:
    """Unmaps one mapping when the buffer holding it is garbage-collected."""

    def __init__(self, addr, length):
        self.addr, self.length = addr, length

    def __del__(self):
        if _libc is not None:
            _libc.munmap(self.addr, self.length)


# A private writable mapping is charged to the commit limit whole, before
# any page is written: the default (heuristic) overcommit refuses one larger
# than RAM + swap, so "pt" could not open a 100 GB archive on a 23 GB machine
# (OSError ENOMEM). MAP_NORESERVE maps it unaccounted (pages are taken as
# they are written); strict overcommit (mode 2) ignores the flag, and a
# mapping refused there falls back to copies (see _open_pt, _zero_copy).
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)


def _private_map(fd, offset, nbytes):
    """A writable buffer over nbytes at offset of file fd: a private
    copy-on-write mapping of its own (no descriptor kept, unlike
    mmap.mmap's), unmapped when the buffer is garbage-collected."""
    start = offset - offset % mmap.PAGESIZE
    length = offset - start + nbytes
    addr = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_PRIVATE | _MAP_NORESERVE, fd, start)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        e = ctypes.get_errno()
        raise OSError(e, "wpack: cannot map %d bytes: %s" % (nbytes, os.strerror(e)))
    buf = (ctypes.c_char * nbytes).from_address(addr + offset - start)
    buf._wpack_unmap = _Unmap(addr, length)   # ctypes instances take attributes
    return buf


def _torch():
    import torch
    return torch


def _repeats_one_element(arr):
    """arr has 2 elements or more, all one in memory: every dim above 1
    has stride 0 (the rule wpack create applies to torch views)."""
    return arr.size > 1 and all(st == 0 for n, st in zip(arr.shape, arr.strides) if n > 1)


def _to_framework(arr, code, framework):
    """numpy array (np dtype from DTYPES) -> the framework's object."""
    if framework == "np":
        return arr
    torch = _torch()
    arr = np.asarray(arr)   # one element indexed out is a numpy scalar: a 0-d tensor
    if not arr.flags.writeable and _repeats_one_element(arr):
        # A splat's broadcast view: a tensor of its own, writable (an
        # expand would share one element among all: t[0] = 1 would set
        # every element). Zeros come from np.zeros, whose large blocks
        # cost memory only as their pages are touched.
        one = arr[(0,) * arr.ndim]
        full = np.zeros(arr.shape, arr.dtype)
        if one.tobytes() != bytes(arr.itemsize):
            full[...] = one
        arr = full
    if not arr.flags.writeable or any(st < 0 for st in arr.strides):
        arr = arr.copy()   # only "np" mappings are read-only; "pt" ones are private
    if code == 4:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


class safe_open:
    """Open a wpack archive (or a sharded set's manifest) for reading.

    safe_open(path, framework="np", verify=True, device="cpu")

    framework: "np" gives numpy arrays, "pt" torch tensors.
    device: "pt" only: tensors (of get_tensor and get_slice) are moved there
    (.to(device)); a device torch cannot name is ValueError at the open; with
    "np" anything but "cpu" (or "cpu:N") is ValueError (numpy arrays live in
    host memory).
    verify: True (default) checks every entry's bytes against its XXH3 before
    any of them is handed out (once per entry and open; the C library's default);
    a mismatch raises wpack.Error (WPACK_E_CHECKSUM). False skips the check
    (WPACK_OPEN_NO_VERIFY_READS). Once per open, as the C library: bytes
    another process writes into the file in place after their check show
    in zero-copy arrays and tensors, "np" and "pt" alike, and are not
    checked again until the archive is opened again (wpack's own writers
    never change an archive's tensor bytes in place).

    Plain (uncompressed, stored) entries come back zero-copy:
      - "np": a read-only numpy array over the library's read-only mapping
        of the file. numpy refuses to write into it (ValueError, and so
        does setflags(write=True)), but torch.from_numpy(), torch.as_tensor()
        and torch.frombuffer() ignore the flag (torch warns, once per
        process): writing into the tensor they give over such an array
        kills the process with SIGSEGV. For something writable take a copy
        (np.array(a), a.copy(), torch.tensor(a)) or open with "pt".
      - "pt": a torch tensor over a private copy-on-write mapping of the file
        (torch has no read-only tensors; writing into it changes only this
        process's copy, never the file): every tensor "pt" hands out is
        writable. A later read of the same entry
        (again, through an alias, or a slice) gets a private mapping of
        its own: the file's bytes, whatever was written into tensors
        handed out before (checked at the entry's first read; see verify). Entries of a sharded set's shards are
        copied for "pt". The mapping is made with MAP_NORESERVE, so an
        archive larger than RAM + swap opens (written pages take memory
        as they are written); where the kernel refuses it all the same
        (strict overcommit, vm.overcommit_memory=2), tensors are copies.
    Splat, alias, zstd-compressed and sharded entries work through the same
    calls (aliases resolve to their target; others are read into new arrays,
    except a splat, one value repeated, for "np": a read-only
    np.broadcast_to view of its value, no memory whatever its shape; "pt"
    fills a tensor, zeros costing memory only as their pages are touched).
    An entry too large to allocate is wpack.Error WPACK_E_NOMEM naming it.
    bf16 is torch.bfloat16 for "pt" and raw uint16 bit patterns for "np";
    f8 dtypes are raw uint8 for both; block dtypes (ggml.q4_0, ...) are
    their bytes as flat uint8, (nbytes,), while describe() and
    get_slice().get_shape() give their shape in elements, as wpack
    inspect does (save_file(..., dtypes={name: describe(name)["dtype"]})
    stores bf16 and f8 bit patterns back as such).

    Names looked up (get_tensor, get_slice, describe, stats, read_plan)
    are str (or UTF-8 bytes): any other type is TypeError, never its str()
    (get_tensor(1) is not the entry "1"), and `1 in f` is False.

    A local path that is not a regular file (FIFO, directory, device) is
    refused without blocking, wpack.Error WPACK_E_FILE_TYPE; a missing one
    is WPACK_E_IO, and also a FileNotFoundError (wpack.FileNotFound, with
    .errno, as safetensors and torch.load raise for a missing file; see
    wpack.Error): the library's error, the same for both frameworks.

    Views stay valid after close() (or leaving the `with`): the archive is
    really closed when the last view is garbage-collected.
    Use as a context manager or call close().

    Remote archives: path may be an http://, https:// or s3://bucket/key URL
    (wpack.is_url), opened through libwpack-remote (wpack_open_url; a path
    starting with any other scheme and "://", such as ftp://, is refused as
    a URL wpack does not read, never taken for a local file), which
    fetches only the byte ranges asked for (the header and index, then each
    tensor read; reads in keys() order, or planned with read_plan, are
    fetched ahead). There is no mapping, so nothing is zero-copy: get_tensor
    and get_slice return new arrays (writable). Every entry fetched whole is
    checked against its XXH3 before any byte is handed out, whatever verify
    says; with verify on, get_slice of an entry with chunk checksums
    (format 1.2, the default for tensors over 1 MiB) fetches and checks
    only the chunks that hold the rows; of one without them it fetches and
    checks the whole entry once, and slices of it that follow come from
    that fetch (entries up to 128 MiB are kept) or the cache; with
    verify=False, get_slice fetches only the rows' bytes (unchecked: the checksum covers the whole entry).
    cache=DIR keeps fetched chunks in DIR (created 0700, files 0600), keyed by the
    index's XXH3 and the URL (scheme, host, port, path) and checked on reuse, bounded by cache_max_bytes (10 GiB,
    least recently used removed first); see include/wpack_remote.h.
    Keyword options (wpack_remote_options): connections (8),
    chunk_size (8 MiB; 64 KiB to 1 GiB, a value outside taken as the nearest), retries (4), retry_delay_ms (250; a 429 or 503
    with Retry-After waits what it says, up to 60 s or timeout_s if
    longer, else fails at once), timeout_s (30; also each request's
    deadline: timeout_s plus its length at 16 KiB/s),
    max_bytes_per_s (0: no cap), follow_redirects (True) (ints: outside
    their C field's range OverflowError), and for s3://
    s3_region, s3_endpoint ("http://host:port", path style), access_key,
    secret_key, session_token, ca_file; proxy ("http://host:port": every
    request through it; "": none) and no_proxy (hosts reached directly,
    curl's list). With aws_env=True (default) the
    S3 ones not given come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION and
    AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, and proxy / no_proxy from the
    variables curl reads (https_proxy / HTTPS_PROXY for https and s3://,
    http_proxy for http, else all_proxy / ALL_PROXY; no_proxy / NO_PROXY),
    as the wpack CLI reads them; aws_env=False reads none (the C library
    never reads them, nor lets libcurl). Without a key, requests are
    unsigned (a public bucket). Exceptions
    name a URL redacted (its user info, each query value and its fragment
    as "***": http://***@host/m.wpack?sig=***); requests use it as
    given.
    progress: callable(fetched_bytes), called after each completed HTTP
    request (wpack_remote_options.on_bytes) with the bytes this archive has
    fetched so far (header, index and tensor ranges; response bodies, a
    retried request once), in the thread doing the read. An exception it
    raises is re-raised from the safe_open or get_tensor/get_slice call
    during which it ran (that call's fetch still completes; progress is not
    called again until then).
    """

    def __init__(self, path, framework="np", verify=True, device="cpu", aws_env=True,
                 progress=None, **remote_options):
        if framework in ("numpy",):
            framework = "np"
        if framework in ("torch", "pytorch"):
            framework = "pt"
        if framework not in ("np", "pt"):
            raise ValueError("framework must be 'np' or 'pt', not %r" % (framework,))
        if framework == "pt":
            try:  # a device torch cannot name is refused here, not at the first read
                device = _torch().device(device)
            except (RuntimeError, TypeError, ValueError) as e:
                raise ValueError("safe_open(): device=%r: %s" % (device, e)) from None
        elif str(device) != "cpu" and not str(device).startswith("cpu:"):
            raise ValueError("safe_open(): device=%r is for framework='pt'; numpy arrays "
                             "live in host memory" % (device,))
        self._framework = framework
        self._device = device
        self._verify = bool(verify)
        raw, path = os.fspath(path), _fspath(path)
        # any "SCHEME://" goes to libwpack-remote, which refuses one it does
        # not read with the URL redacted (a local open's error quoted
        # "ftp://user:password@host/m" whole); a bytes path is local
        self._remote = is_url(raw) or _has_scheme(raw)
        if self._remote and "\0" in path:   # named as shown: no credential in the message
            raise ValueError("URL %s contains a NUL character (C strings end at one)"
                             % _lib.shown_url(path.replace("\0", "%00")))
        _b(path, "path")   # a NUL is refused before any open
        flags = 0 if verify else OPEN_NO_VERIFY_READS
        if self._remote:
            self._h = _Handle(path, flags,
                              _remote_options(path, flags, remote_options, aws_env, progress))
        elif remote_options or progress is not None:
            given = sorted(remote_options) + (["progress"] if progress is not None else [])
            raise TypeError("safe_open(): %s only for a URL (http://, https://, s3://)"
                            % ", ".join(given))
        elif framework == "pt":
            self._h = self._open_pt(path, flags)
        else:
            self._h = _Handle(path, flags)
        self._shown = self._h.path   # as messages name it (a URL redacted)
        info = _lib.Info()
        lib.wpack_get_info(self._h.ptr, ctypes.byref(info))
        self._info = info
        self._sharded = lib.wpack_shard_count(self._h.ptr) > 0
        self._user_plan = False   # read_plan() given: _follow() stays out
        self._last_read = -2      # index of the entry get_tensor read last
        self._following = (0, 0)  # _follow()'s plan: entries [from, to); (0, 0): none
        self._other_names = None  # _names(): read once per open

    def _open_pt(self, path, flags):
        # Map the same file the C library opened: open our descriptor first,
        # then the library, then check the path still names our file (a
        # rename over it in between would give two different files). Our
        # open never blocks (O_NONBLOCK: a FIFO would wait for a writer) and
        # maps regular files only; whatever we cannot open or map, the
        # library is asked to open, so its error is the one "np" raises
        # (WPACK_E_IO for a missing file, WPACK_E_FILE_TYPE for a FIFO...).
        for _ in range(5):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                fd = None
            try:
                if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
                    _Handle(path, flags)   # raises the library's error for it
                    continue               # it changed in between: again
                h = _Handle(path, flags)
                st, now = os.fstat(fd), os.stat(path)
                if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
                    continue
                if st.st_size > 0:
                    try:
                        h.mm = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE | _MAP_NORESERVE,
                                         prot=mmap.PROT_READ | mmap.PROT_WRITE)
                    except OSError:   # refused (strict overcommit): tensors are copies
                        return h
                    h.fd, fd = fd, None   # kept for _private_map, closed with h
                return h
            finally:
                if fd is not None:
                    os.close(fd)
        raise Error(E_IO, "%s: replaced while being opened, five times" % path)

    # -- lifetime
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Close the archive. Arrays and tensors already handed out stay valid
        (the C handle is freed when the last of them is gone, and reads
        running in other threads finish). Idempotent. Any call on it (or
        on a get_slice object of it) afterwards raises wpack.Error
        WPACK_E_STATE naming the archive."""
        self._h = None

    def __del__(self):
        self.close()

    def _handle(self):
        # Callers keep the handle in a local for as long as they use its
        # pointer: lib.f(self._handle().ptr) drops it before f runs, and a
        # close() in another thread then frees the archive under f.
        h = self._h   # read once: a close() in another thread may run between two reads
        if h is None:   # which one: a program may have many open and closed
            raise Error(E_STATE, "%s: the archive is closed" % self._shown)
        return h

    # -- lookups
    def _find(self, name):
        h = self._handle()
        t = _lib.Tensor()
        rc = lib.wpack_find(h.ptr, _key(name, "name"), ctypes.byref(t))
        if rc != 0:
            raise Error(rc, "%s: no entry or name-map name %r" % (h.path, name))
        t.handle = h   # its name points into the archive: kept alive with it
        return t

    def _at(self, i):
        t = _lib.Tensor()
        h = self._handle()
        rc = lib.wpack_tensor_at(h.ptr, i, ctypes.byref(t))
        if rc != 0:
            h.fail(rc, "entry %d" % i)
        t.handle = h   # as in _find
        return t

    def _verify_all(self, threads):
        """Check every entry against its XXH3 on `threads` threads (each
        entry once: the handle remembers the result)."""
        from concurrent.futures import ThreadPoolExecutor
        h = self._handle()
        # an alias's bytes are its target's: checked (and named) as the target
        idx = [i for i in range(int(lib.wpack_count(h.ptr))) if self._at(i).kind != KIND_ALIAS]
        with ThreadPoolExecutor(max_workers=threads) as ex:
            rcs = list(ex.map(lambda i: lib.wpack_verify_once(h.ptr, i), idx))
        bad = next(((i, rc) for i, rc in zip(idx, rcs) if rc != 0), None)
        if bad is not None:
            # The handle keeps one message, the last failure's on any thread:
            # ask again for the first failed entry alone (the handle remembers
            # the result), so the message is that entry's.
            rc = lib.wpack_verify_once(h.ptr, bad[0])
            h.fail(rc or bad[1], "checking %r" % self._at(bad[0]).name.decode())

    def read_plan(self, names=None):
        """A hint before reading the tensors `names` (entry or name-map
        names) whole, in that order: an archive at a URL then fetches them
        ahead (several requests in flight while earlier tensors are handed
        out; small neighbours merged into one request). Nothing changes for
        a local file, nor in what the reads return (each tensor is still
        checked before it is handed out). None or [] drops the plan.
        load_file() plans every tensor. Without a plan, get_tensor of one
        key after the other in keys() order plans the next 256 entries
        itself (from the second read in a row; a read out of that window
        drops it); a plan given here replaces that until it is dropped. Raises wpack.Error
        (WPACK_E_NOT_FOUND) for an unknown name, giving no plan. One name
        (a str) is a list of one."""
        if isinstance(names, (str, bytes)):   # not its characters, one by one
            names = [names]
        self._plan([self._find(name) for name in names or ()])
        self._user_plan = bool(names)
        self._following = (0, 0)

    def _plan(self, entries):
        idx, seen = [], set()
        for t in entries:
            if t.kind == KIND_ALIAS:  # its bytes are its target's: fetched once
                t = self._at(t.alias_target)
            if t.kind != KIND_SPLAT and t.index not in seen:  # a splat has no bytes
                seen.add(t.index)
                idx.append(t.index)
        h = self._handle()
        rc = lib.wpack_read_plan(h.ptr, (ctypes.c_uint64 * max(len(idx), 1))(*idx), len(idx))
        if rc != 0:
            h.fail(rc, "read plan")

    def _follow(self, index):
        # A URL archive read in name order (get_tensor of each key in turn,
        # the usual loading loop) is fetched ahead as if read_plan() had named
        # the next _FOLLOW_WINDOW entries: from the second read in a row of
        # the next entry, then a window at a time. A read behind or beyond
        # the window drops that plan (nothing more is fetched for it); a plan
        # the caller gave is never replaced.
        if not self._remote or self._user_plan:
            return
        sequential = index == self._last_read + 1
        self._last_read = index
        start, end = self._following
        if end and not start <= index < end:
            self._plan([])
            start = end = 0
        if sequential and not end:
            h = self._handle()
            start, end = index, min(index + _FOLLOW_WINDOW, lib.wpack_count(h.ptr))
            self._plan([self._at(i) for i in range(start, end)])
        self._following = (start, end)

    def keys(self, prefix=None):
        """Entry names in name order. prefix: a module path ("encoder.0"):
        the entries under it ("encoder.0.*", not "encoder.01.x"), or an exact
        name; a name-map name of a module or entry is looked up too.
        None or "": every entry."""
        h = self._handle()
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError("keys(): prefix must be a str, not %s" % type(prefix).__name__)
        if not prefix or not prefix.rstrip("."):
            return [self._at(i).name.decode() for i in range(lib.wpack_count(h.ptr))]
        out = []
        for p in self._prefix_candidates(prefix):
            first, count = ctypes.c_uint64(), ctypes.c_uint64()
            rc = lib.wpack_prefix_range(h.ptr, _b(p + ".", "prefix"), ctypes.byref(first),
                                        ctypes.byref(count))
            if rc == E_NOT_FOUND:
                count.value = 0
            elif rc != 0:
                h.fail(rc, "prefix %r" % p)
            names = [self._at(first.value + k).name.decode() for k in range(count.value)]
            t = _lib.Tensor()
            if lib.wpack_find(h.ptr, _b(p, "prefix"), ctypes.byref(t)) == 0 and t.name.decode() == p:
                names.insert(0, p)
            if names:
                out = names
                break
        return out

    def _names(self):
        """(name map, wpack.module_names pairs), read once per open: the
        index does not change under an open handle, and stats(name) and
        keys(prefix) look there on every call (a full read each was one
        ctypes call per pair: 30 ms a call with 4000 named tensors, a
        stats() loop over a model quadratic)."""
        if self._other_names is None:
            mods = self.metadata().get("wpack.module_names")
            pairs = [(mods[k], mods[k + 1]) for k in range(0, len(mods) - 1, 2)] \
                if isinstance(mods, list) else []
            self._other_names = (self.name_map(), pairs)
        return self._other_names

    def _prefix_candidates(self, prefix):
        prefix = prefix.rstrip(".")
        cands = [prefix]
        # A name-map name for a module: other names of the module's entries or
        # wpack.module_names pairs.
        nm, pairs = self._names()
        for other, entry in nm.items():
            if other == prefix:
                cands.append(entry)
            elif other.startswith(prefix + ".") and "." in entry:
                tail = other[len(prefix):]
                if entry.endswith(tail):
                    cands.append(entry[:-len(tail)])
        cands += [module for other, module in pairs if other == prefix]
        return cands

    def __contains__(self, name):
        t = _lib.Tensor()
        try:
            b = _key(name, "name")
        except (ValueError, TypeError):   # no entry has a NUL in its name, nor is 1 "1"
            return False
        h = self._handle()
        return lib.wpack_find(h.ptr, b, ctypes.byref(t)) == 0

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        h = self._handle()
        return int(lib.wpack_count(h.ptr))

    def info(self):
        """Archive facts as a dict of ints (format version, alignment,
        generation, file length, index checksum, counts, shard count)."""
        i = self._info
        # the C struct's reserved fields are no facts (ctypes arrays: not JSON)
        d = {f: int(getattr(i, f)) for f, _ in _lib.Info._fields_
             if not f.startswith("reserved")}
        h = self._handle()
        d["shards"] = int(lib.wpack_shard_count(h.ptr))
        return d

    def describe(self, name):
        """Entry facts without reading bytes: dict of name, dtype (wpack name),
        shape, kind ("data"/"splat"/"alias"/"external"), codec, nbytes,
        checksum_chunk (bytes per checksummed chunk, format 1.2; 0: none)."""
        t = self._find(name)
        kinds = {1: "data", 2: "splat", 3: "alias", 4: "external"}
        return {"name": t.name.decode(), "dtype": self._dtype_name(t.dtype),
                "shape": tuple(t.dims[k] for k in range(t.rank)),
                "kind": kinds.get(t.kind, str(t.kind)),
                "codec": "zstd" if t.codec == 1 else "none", "nbytes": int(t.nbytes),
                "checksum_chunk": self._chunk_size(t)}

    def _dtype_name(self, code):
        if code in DTYPES:
            return DTYPES[code][0]
        block = self._block_dtype(code)
        return block[0] if block else "dtype%d" % code

    def _block_dtype(self, code):
        """(name, block_elems, block_bytes) of block dtype `code`, or None."""
        name = ctypes.c_char_p()
        be, bb = ctypes.c_uint32(), ctypes.c_uint32()
        pp, pl = ctypes.c_void_p(), ctypes.c_uint64()
        h = self._handle()
        if code < 128 or lib.wpack_block_dtype_at(h.ptr, code - 128, ctypes.byref(name),
                                                  ctypes.byref(be), ctypes.byref(bb),
                                                  ctypes.byref(pp), ctypes.byref(pl)) != 0:
            return None
        return name.value.decode(), int(be.value), int(bb.value)

    # -- tensor bytes
    def _target(self, t):
        """Follow an alias to the entry that has the bytes."""
        if t.kind == KIND_ALIAS:
            return self._at(t.alias_target)
        return t

    def _np_dtype_shape(self, t):
        shape = tuple(int(t.dims[k]) for k in range(t.rank))
        if t.dtype in DTYPES:
            return np.dtype(DTYPES[t.dtype][1]), shape
        return np.dtype(np.uint8), (int(t.nbytes),)

    def _read_into(self, t, offset, arr):
        h = self._handle()
        n = arr.nbytes
        if n == 0:
            return arr
        rc = lib.wpack_read_ex(h.ptr, t.index, offset, arr.ctypes.data, n,
                               READ_VERIFY if self._verify else 0)
        h.raise_pending()
        if rc != 0:
            h.fail(rc, "reading %r" % t.name.decode())
        return arr

    def _chunk_size(self, t):
        """Bytes per checksummed chunk of t (format 1.2), or 0."""
        h = self._handle()
        return int(lib.wpack_tensor_chunk_size(h.ptr, t.index))

    def _zero_copy(self, t, dtype, shape):
        """A zero-copy array of the whole entry, or None if it has no view."""
        h = self._handle()
        if t.kind == KIND_SPLAT and t.dtype in DTYPES and t.nbytes:
            # one element read (and checked) and broadcast, read-only: a
            # 4 KiB archive may declare a splat of terabytes
            one = self._read_into(t, 0, np.empty(1, dtype=dtype))
            return np.broadcast_to(one.reshape(()), shape)
        if t.codec != CODEC_NONE or t.kind not in (KIND_DATA, KIND_EXTERNAL):
            return None
        if self._framework == "pt":
            if t.kind != KIND_DATA or self._sharded or h.mm is None:
                return None
            if self._verify:
                rc = lib.wpack_verify_once(h.ptr, t.index)
                if rc != 0:
                    h.fail(rc, "checking %r" % t.name.decode())
            return self._pt_view(t, 0, int(t.nbytes), dtype, shape)
        data, nbytes = ctypes.c_void_p(), ctypes.c_uint64()
        rc = lib.wpack_tensor_view(h.ptr, t.index, ctypes.byref(data), ctypes.byref(nbytes))
        if rc == E_NO_VIEW:
            return None
        if rc != 0:
            h.fail(rc, "viewing %r" % t.name.decode())
        if nbytes.value == 0 or not data.value:
            return None
        buf = _view_base(h, data.value, int(nbytes.value))
        return np.frombuffer(buf, dtype=dtype).reshape(shape)

    def _pt_view(self, t, off, n, dtype, shape):
        """For "pt": n bytes from off of plain entry t (checked by the
        caller) as an array over the archive's private mapping, or over a
        private mapping of its own when the entry was handed out before;
        None when that mapping is refused."""
        h = self._handle()
        count = n // dtype.itemsize
        with h.lock:   # one thread only gets an entry's bytes in h.mm
            first = t.index not in h.handed
            h.handed.add(t.index)
        if not first:
            # Handed out before, so perhaps written into since (the
            # mapping is private, not read-only): this read gets a
            # private mapping of its own, the file's bytes (checked
            # at the first read, as every view: once per open).
            try:
                buf = _private_map(h.fd, int(t.offset) + off, n)
            except OSError:   # refused (strict overcommit): a copy
                return None
            return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)
        return np.frombuffer(h.mm, dtype=dtype, count=count,
                             offset=int(t.offset) + off).reshape(shape)

    def _zero_copy_rows(self, t, dtype, shape, lo, hi):
        """A zero-copy array of rows [lo, hi) of a plain entry with chunk
        checksums, with only the chunks that hold them checked (each once
        per open); None if it has no view."""
        h = self._handle()
        if t.codec != CODEC_NONE or t.kind not in (KIND_DATA, KIND_EXTERNAL):
            return None
        if self._framework == "pt" and (t.kind != KIND_DATA or self._sharded or h.mm is None):
            return None
        rowbytes = int(t.nbytes) // shape[0]
        off, n = lo * rowbytes, (hi - lo) * rowbytes
        rows = (hi - lo,) + tuple(shape[1:])
        data = ctypes.c_void_p()
        rc = lib.wpack_tensor_view_range(h.ptr, t.index, off, n, ctypes.byref(data))
        if rc == E_NO_VIEW:
            return None
        if rc != 0:
            h.fail(rc, "viewing rows %d..%d of %r" % (lo, hi, t.name.decode()))
        if n == 0:
            return np.empty(rows, dtype=dtype)
        if self._framework == "pt":
            return self._pt_view(t, off, n, dtype, rows)
        return np.frombuffer(_view_base(h, data.value, n), dtype=dtype).reshape(rows)

    def _torch_can_hold(self, t):
        """Before reading t for "pt": torch 1.13 has no u16/u32/u64."""
        if self._framework == "pt" and t.dtype in (11, 12, 13):
            raise Error(E_UNSUPPORTED, "%s: %r: dtype %s has no torch equivalent in this "
                        "torch; use framework='np'"
                        % (self._handle().path, t.name.decode(), DTYPES[t.dtype][0]))

    def _get_np(self, name):
        t = self._find(name)
        self._follow(t.index)
        t = self._target(t)
        self._torch_can_hold(t)
        dtype, shape = self._np_dtype_shape(t)
        arr = self._zero_copy(t, dtype, shape)
        if arr is None:
            arr = self._read_into(t, 0, np.empty(shape, dtype=dtype))
        return arr, t.dtype

    def get_tensor(self, name):
        """The whole tensor `name` (an entry name or a name-map name) as a
        numpy array ("np") or torch tensor ("pt"); zero-copy when the entry is
        stored plain (see the class doc). Raises wpack.Error (WPACK_E_NOT_FOUND,
        WPACK_E_CHECKSUM, WPACK_E_NOMEM for an entry too large to allocate,
        ...)."""
        try:
            arr, code = self._get_np(name)
            return self._out(arr, code)
        except MemoryError:
            raise self._no_memory(self._find(name), "") from None

    def _out(self, arr, code):
        """What get_tensor and get_slice hand out: the framework's object,
        for "pt" on the device asked for."""
        out = _to_framework(arr, code, self._framework)
        if self._framework == "pt" and self._device.type != "cpu":
            out = out.to(self._device)
        return out

    def _no_memory(self, t, what, nbytes=None):
        # numpy's MemoryError names no entry; a declared shape is the
        # archive's say (a zstd entry of terabytes may be a few KiB).
        # nbytes: what was being allocated (a slice's), if not the entry
        return Error(E_NOMEM, "%s: %r%s: cannot allocate memory for its %d bytes"
                     % (self._handle().path, t.name.decode(), what,
                        t.nbytes if nbytes is None else nbytes))

    def get_slice(self, name):
        """A lazy slice object for `name`: index it (`[a:b]`, `[a:b, :, 3]`,
        `[i]`) to read only the rows of the first dimension asked for
        (for zstd entries only the chunks that hold those bytes are decoded).
        With verify on, an entry with chunk checksums (format 1.2, written by
        default for tensors over 1 MiB; a zstd entry's per decoded zstd
        chunk) is checked by the chunks that hold the rows only (each once
        per open), and the rows are a zero-copy view where the entry is
        stored plain in a local archive, else a checked copy (from a URL
        only those chunks are fetched, from a zstd entry only they are
        decoded); an entry without them is checked once as a whole first,
        and the rows are a view where it has one. Other indices (arrays, Ellipsis, None first) read the whole tensor and
        index it as numpy does. A single element is a numpy scalar ("np")
        or a 0-d tensor ("pt"), as indexing the whole tensor gives. A bool
        index (True/False) is refused (TypeError); an index out of range
        (or too many) is IndexError naming the archive, tensor and index. It also has get_shape()
        (in elements) and get_dtype().
        A block dtype's slice (ggml.q4_0, ...: blocks of elements along the
        last dimension) is the bytes of the rows asked for as flat uint8,
        the form get_tensor gives the whole entry: dimension 0 by an int or
        a slice of any step, every other dimension whole (':' or '...');
        for rank 1, whose rows are the blocks, a slice of step 1 that starts
        and ends on a block's edge. An index that would cut a block is
        wpack.Error WPACK_E_UNSUPPORTED naming the tensor."""
        return _Slice(self, self._find(name))

    def metadata(self):
        """Metadata as {key: value} with typed values: str, int, float, bool,
        bytes, or a list of those for arrays."""
        h = self._handle()
        out = {}
        for i in range(lib.wpack_meta_count(h.ptr)):
            m = _lib.Meta()
            rc = lib.wpack_meta_at(h.ptr, i, ctypes.byref(m))
            if rc != 0:
                h.fail(rc, "metadata %d" % i)
            out[m.key.decode()] = self._meta_value(h, m)
        return out

    def _meta_value(self, h, m):
        if m.type == META_STRING:
            return ctypes.string_at(m.str, m.count).decode("utf-8")
        if m.type == META_I64:
            return int(m.i64)
        if m.type == META_F64:
            return float(m.f64)
        if m.type == META_BOOL:
            return bool(m.boolean)
        if m.type == META_BYTES:
            return ctypes.string_at(m.bytes, m.count) if m.count else b""
        if m.type == META_ARRAY:
            vals = []
            for j in range(m.count):
                e = _lib.Meta()
                rc = lib.wpack_meta_elem(h.ptr, ctypes.byref(m), j, ctypes.byref(e))
                if rc != 0:
                    h.fail(rc, "metadata %r element %d" % (m.key.decode(), j))
                vals.append(self._meta_value(h, e))
            return vals
        raise Error(E_UNSUPPORTED, "metadata %r: unknown type %d" % (m.key.decode(), m.type))

    def name_map(self):
        """The name map: {other name: entry name} (names consumers such as
        torch.export placeholders or MLIR globals use for entries)."""
        h = self._handle()
        out = {}
        for i in range(lib.wpack_namemap_count(h.ptr)):
            other, entry = ctypes.c_char_p(), ctypes.c_uint64()
            rc = lib.wpack_namemap_at(h.ptr, i, ctypes.byref(other), ctypes.byref(entry))
            if rc != 0:
                h.fail(rc, "name map %d" % i)
            out[other.value.decode()] = self._at(entry.value).name.decode()
        return out

    def stats(self, name_or_module=None, kind=None):
        """Calibration statistics. With a name: the record of that tensor
        (weight stats) or module path (activation stats: its output), also
        found through the name map; kind "weight"/"activation" picks one
        when both exist (any other kind: ValueError). Returns a dict: key, kind, granularity ("tensor" or
        "channel"), axis, channels, count, min, max, absmax, mean, variance
        (floats, or numpy arrays per channel), histogram ((edges, counts)
        numpy arrays, or None), percentiles [(q, value)]. Without a name: a
        list of every record (of that kind, if kind is given). Missing:
        wpack.Error WPACK_E_NOT_FOUND."""
        h = self._handle()
        kinds = (STATS_WEIGHT, STATS_ACTIVATION) if kind is None else \
            (_stats_kind(kind, "stats()"),)
        if name_or_module is None:
            out = []
            for i in range(lib.wpack_stats_count(h.ptr)):
                s = _lib.Stats()
                rc = lib.wpack_stats_at(h.ptr, i, ctypes.byref(s))
                if rc != 0:
                    h.fail(rc, "stats record %d" % i)
                if s.kind in kinds:
                    out.append(_stats_dict(s))
            return out
        keys = [name_or_module]
        nm, pairs = self._names()
        if name_or_module in nm:
            keys.append(nm[name_or_module])
        keys += [module for other, module in pairs if other == name_or_module]
        for key in keys:
            for k in kinds:
                s = _lib.Stats()
                if lib.wpack_stats_find(h.ptr, _key(key, "stats key"), k, ctypes.byref(s)) == 0:
                    return _stats_dict(s)
        raise Error(E_NOT_FOUND, "%s: no stats record for %r" % (h.path, name_or_module))


def _stats_dict(s):
    # one C call per array (values, histogram, percentiles), whatever the
    # channel and bin counts: a call per channel was thousands of ctypes
    # calls for a wide tensor
    sp = ctypes.byref(s)
    C = int(s.channels)
    d = {"key": s.key.decode(), "kind": "weight" if s.kind == STATS_WEIGHT else "activation",
         "granularity": "channel" if s.granularity == 1 else "tensor",
         "axis": int(s.axis), "channels": C, "count": int(s.count)}
    vals = np.empty(5 * C)
    _stats_check(lib.wpack_stats_values(sp, _dbl(vals), vals.size), s, "values")
    for w, f in enumerate(("min", "max", "absmax", "mean", "variance")):
        if s.granularity == 1:
            d[f] = vals[w * C:(w + 1) * C].copy()
        else:
            d[f] = float(getattr(s, f))
    if s.hist_bins:
        edges = np.empty(s.hist_bins + 1)
        counts = np.empty(s.hist_bins, dtype=np.uint64)
        _stats_check(lib.wpack_stats_histogram(
            sp, _dbl(edges), edges.size,
            counts.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), counts.size), s, "histogram")
        d["histogram"] = (edges, counts)
    else:
        d["histogram"] = None
    pct = np.empty(2 * s.percentile_count)
    _stats_check(lib.wpack_stats_percentiles(sp, _dbl(pct), pct.size), s, "percentiles")
    d["percentiles"] = [(float(q), float(v)) for q, v in pct.reshape(-1, 2)]
    return d


def _dbl(arr):
    return arr.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def _stats_check(rc, s, what):
    if rc != 0:   # buffers are sized from the record: a library bug
        raise Error(rc, "stats '%s': reading its %s: %s"
                    % (_shown(s.key.decode()), what, _describe(rc)))


class _Slice:
    """Returned by safe_open.get_slice(): index it to read part of a tensor."""

    def __init__(self, f, t):
        self._f = f
        self._t = f._target(t)
        self._dtype, self._shape = f._np_dtype_shape(self._t)
        # a block dtype's elements (its logical shape, as describe() and
        # wpack inspect give it); _shape is then its bytes, (nbytes,)
        self._block = f._block_dtype(self._t.dtype) if self._t.dtype not in DTYPES else None
        self._dims = tuple(int(self._t.dims[k]) for k in range(self._t.rank))

    def get_shape(self):
        """The tensor's shape as a list: its elements, as describe() gives
        it (for a block dtype too, whose get_tensor is its bytes)."""
        return list(self._dims)

    def get_dtype(self):
        """The wpack dtype name ("f32", "bf16", "ggml.q4_0", ...)."""
        return self._f._dtype_name(self._t.dtype)

    def __getitem__(self, key):
        try:
            if self._block is not None:
                return self._get_block(key)
            return self._get(key)
        except MemoryError:   # the whole entry was being read (indices other than rows)
            raise self._f._no_memory(self._t, " (a slice)") from None
        except IndexError as e:   # ours or numpy's: named as get_tensor's errors are
            raise IndexError("%s: get_slice(%r)[%s]: %s" % (
                _shown(self._f._shown), self._t.name.decode(), _key_text(key), e)) from None

    def _rows(self, first, n0):
        """(lo, hi, local) for index `first` (an int or a slice) of a
        dimension of n0: the rows [lo, hi) to read and the index that
        picks the ones asked for among them."""
        if isinstance(first, slice):
            idx = range(*first.indices(n0))
            if len(idx) == 0:
                return 0, 0, slice(0, 0)
            if idx.step > 0:
                return idx[0], idx[-1] + 1, slice(0, idx[-1] + 1 - idx[0], idx.step)
            lo, hi = idx[-1], idx[0] + 1
            return lo, hi, slice(hi - 1 - lo, None, idx.step)
        i = int(first)
        if i < 0:
            i += n0
        if not 0 <= i < n0:
            raise IndexError("index %d is out of bounds for dimension 0 of size %d"
                             % (int(first), n0))
        return i, i + 1, 0

    def _read_rows(self, dtype, shape, lo, hi):
        """Rows [lo, hi) of the entry seen as `shape` (its bytes as rows of
        shape[1:]): a view where it has one, else a checked copy."""
        f, t = self._f, self._t
        n0 = shape[0]
        rowbytes = t.nbytes // n0 if n0 else 0
        # A part of a tensor with chunk checksums (format 1.2): a view of
        # its rows with only the chunks that hold them hashed, rather than a
        # view that hashes (and pages in) the whole tensor first.
        if f._verify and hi - lo < n0 and f._chunk_size(t):
            part = f._zero_copy_rows(t, dtype, shape, lo, hi)
        else:
            whole = f._zero_copy(t, dtype, shape)
            part = None if whole is None else whole[lo:hi]
        if part is None:
            try:
                buf = np.empty((hi - lo,) + tuple(shape[1:]), dtype=dtype)
            except MemoryError:
                raise f._no_memory(t, " (a slice)", (hi - lo) * rowbytes) from None
            part = f._read_into(t, lo * rowbytes, buf)
        return part

    def _out(self, part):
        try:
            return self._f._out(part, self._t.dtype)
        except MemoryError:   # "pt" fills a splat's rows: the slice's bytes
            raise self._f._no_memory(self._t, " (a slice)", part.nbytes) from None

    def _get(self, key):
        f, t, shape = self._f, self._t, self._shape
        f._torch_can_hold(t)
        if not isinstance(key, tuple):
            key = (key,)
        if any(isinstance(k, (bool, np.bool_)) for k in key):
            # bool is an int: True would read row 1 (numpy adds an axis)
            raise TypeError("get_slice(%r)[...]: bool indices are not supported; "
                            "use ints, slices or a boolean array" % t.name.decode())
        if not shape or not key or not isinstance(key[0], (int, np.integer, slice)):
            arr, _ = f._get_np(t.name.decode())
            return f._out(arr[key], t.dtype)
        first, rest = key[0], key[1:]
        lo, hi, local = self._rows(first, shape[0])
        part = self._read_rows(self._dtype, shape, lo, hi)
        return self._out(part[(local,) + rest])

    def _get_block(self, key):
        """A block dtype's slice: the bytes of whole rows (dimension 0, any
        step; for rank 1, whole blocks, step 1), every other dimension
        whole, as flat uint8 (the form get_tensor gives the whole entry);
        anything else, which would cut a block, wpack.Error
        WPACK_E_UNSUPPORTED naming the tensor."""
        t, dims = self._t, self._dims
        bname, be, bb = self._block
        name = t.name.decode()

        def refuse(why):
            return Error(E_UNSUPPORTED, "%s: get_slice(%r)[%s]: %r is of block dtype %s (%d "
                         "elements in %d bytes), whose slices are the bytes of whole rows%s: "
                         "%s" % (self._f._handle().path, name, _key_text(key), name, bname,
                                 be, bb, " of whole blocks" if len(dims) == 1 else "", why))

        parts = list(key) if isinstance(key, tuple) else [key]
        if any(isinstance(k, (bool, np.bool_)) for k in parts):
            raise TypeError("get_slice(%r)[...]: bool indices are not supported; "
                            "use ints or slices" % name)
        if sum(k is Ellipsis for k in parts) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        # by identity: `in` and index() compare with ==, which a numpy
        # array index answers elementwise (ValueError, not this refusal)
        at = next((i for i, k in enumerate(parts) if k is Ellipsis), None)
        if at is not None:
            parts[at:at + 1] = [slice(None)] * max(len(dims) - (len(parts) - 1), 0)
        for k in parts:
            if not isinstance(k, (int, np.integer, slice)):
                raise refuse("index %r is not an int, a slice or '...'" % (k,))
        if len(parts) > len(dims):
            raise IndexError("too many indices for tensor %r: it is %d-dimensional, but %d "
                             "were indexed" % (name, len(dims), len(parts)))
        parts += [slice(None)] * (len(dims) - len(parts))
        for d, k in enumerate(parts[1:], 1):
            if not isinstance(k, slice) or range(*k.indices(dims[d])) != range(dims[d]):
                raise refuse("dimension %d must be whole (':')" % d)
        lo, hi, local = self._rows(parts[0], dims[0])
        if len(dims) == 1:   # dimension 0 is the blocks': the rows are blocks
            if isinstance(local, slice) and local.step not in (None, 1) and hi - lo > 1:
                raise refuse("step %d would reorder or skip elements inside blocks"
                             % local.step)
            if isinstance(local, int) or lo % be or hi % be:
                raise refuse("elements %d..%d do not start and end on a block's edge"
                             % (lo, hi))
            nrows, lo, hi, local = dims[0] // be, lo // be, hi // be, slice(None)
        else:
            nrows = dims[0]
        rowbytes = t.nbytes // nrows if nrows else 0
        shape = (nrows, rowbytes)
        if hi == lo:
            part = np.empty((0, rowbytes), np.uint8)
        else:
            part = self._read_rows(np.dtype(np.uint8), shape, lo, hi)
        return self._out(np.ascontiguousarray(part[local]).reshape(-1))


def _key_text(key):
    """An index as it was written: "0:2, ..." for (slice(0, 2), Ellipsis)."""
    def one(k):
        if k is Ellipsis:
            return "..."
        if isinstance(k, slice):
            text = ":".join("" if v is None else str(v) for v in (k.start, k.stop))
            return text + ("" if k.step is None else ":%s" % k.step)
        return repr(k)
    return ", ".join(one(k) for k in (key if isinstance(key, tuple) else (key,)))


def load_file(path, framework="np", verify=True, threads=1, **options):
    """Every tensor of the archive at path as {name: array or tensor}
    (framework "np" or "pt"; zero-copy where safe_open is). options: those
    of safe_open for a URL (progress, connections, ...).

    threads: with verify on, a local archive's entries are checked against
    their XXH3 on this many threads at once before any is handed out (the
    library's calls release the GIL); 1 (default): one after another as
    they are handed out, no thread started. From a URL the tensors are
    fetched ahead in the order they are read (safe_open.read_plan).
    Hashing is what a verified
    load costs (~0.2 s per GiB on one core); 2 threads took ~35% off here.
    A failed check raises wpack.Error (WPACK_E_CHECKSUM) naming the tensor,
    as without threads.

    An alias and its target are one array or tensor in the dict (tied
    weights come back tied, as torch.load gives them: for "pt" a write
    into one shows in the other, never in the file; save_file of the dict
    writes the alias again)."""
    threads = int(threads)
    if threads < 1:
        raise ValueError("load_file(): threads must be >= 1, not %d" % threads)
    with safe_open(path, framework=framework, verify=verify, **options) as f:
        if threads > 1 and verify and not f._remote:
            f._verify_all(threads)
        keys = f.keys()
        if f._remote:
            f.read_plan(keys)  # fetched ahead, in the order read below
        out, by_entry = {}, {}
        for k in keys:
            # an alias is its target's tensor, tied as torch.load gives
            # tied weights (get_tensor would give "pt" a second private
            # mapping: untied, and save_file would write it twice)
            target = f._target(f._find(k)).index
            if target not in by_entry:
                by_entry[target] = f.get_tensor(k)
            out[k] = by_entry[target]
        return out


# ------------------------------------------------------------------ writing

_CHUNK = 16 << 20
_FOLLOW_WINDOW = 256  # entries safe_open plans ahead of reads in name order (_follow)


_WRITER_OPTIONS = ("alignment", "weight_stats", "histogram_bins", "compress_level",
                   "compress_chunk", "compress_min", "compress_min_saving", "shard_size",
                   "max_data_bytes", "portable_stats", "threads", "chunk_sums")


def _check_options(caller, given, known):
    bad = [k for k in given if k not in known]
    if bad:
        raise TypeError("%s(): unknown option(s) %s (known: %s)"
                        % (caller, ", ".join(sorted(bad)), ", ".join(known)))


def _check_writer_options(caller, options):
    _check_options(caller, options, _WRITER_OPTIONS)
    if options.get("histogram_bins") and not options.get("weight_stats", True):
        # the histograms are the weight stats': none would be written
        raise Error(E_INVALID_ARGUMENT, "%s(): histogram_bins needs weight_stats "
                    "(as wpack create --histogram refuses --no-stats)" % caller)


class _Writer:
    """One wpack_writer. caller names the public function in errors."""

    def __init__(self, caller, path, durable=True, **options):
        _check_writer_options(caller, options)
        self.pool = self.executor = self.w = None
        self.path = _fspath(path)
        _refuse_url(os.fspath(path), caller, "outputs are local files")
        bpath = _b(self.path, "path")
        opt = _lib.WriterOptions()
        lib.wpack_writer_options_init(ctypes.byref(opt))
        for k in ("alignment", "histogram_bins", "compress_level", "compress_chunk",
                  "compress_min", "compress_min_saving", "shard_size", "max_data_bytes"):
            v = options.get(k)
            if v is not None and (v or k not in ("alignment", "compress_chunk")):
                # None (alignment, compress_chunk: also 0): the library's default
                _set_int(opt, k, v, "%s(): %s" % (caller, k))
        opt.weight_stats = 1 if options.get("weight_stats", True) else 0
        opt.portable_stats = 1 if options.get("portable_stats") else 0
        opt.no_sync = 0 if durable else 1
        if options.get("chunk_sums") is not None:
            # 0: none; else a power of two 4 KiB..64 MiB (the C writer checks)
            _set_int(opt, "chunk_sums", options["chunk_sums"], "%s(): chunk_sums" % caller)
        threads = _int_arg(options.get("threads") or 1, ctypes.c_uint32,
                           "%s(): threads" % caller)
        if threads > 1:
            # stats and hashing on a pool of libwpack-dense: the same bytes
            dense = _lib.dense_lib()
            self.pool = dense.wpack_pool_create(min(threads, 256), -1)
            if not self.pool:
                raise MemoryError("wpack: no thread pool of %d threads" % threads)
            self.executor = _lib.Executor()
            dense.wpack_pool_executor(self.pool, ctypes.byref(self.executor))
            opt.executor = ctypes.addressof(self.executor)
        p = ctypes.c_void_p()
        rc = lib.wpack_writer_open(ctypes.byref(p), bpath, ctypes.byref(opt))
        self.w = p
        if rc != 0:
            self.fail(rc)

    def fail(self, rc):
        msg = lib.wpack_writer_errmsg(self.w).decode("utf-8", "replace") if self.w else ""
        self.abort()
        where = _shown(self.path)   # escaped, as the library's messages are
        if msg and where not in msg:
            # a refused tensor, metadata key or record is named alone
            # ("tensor '': empty name"): which output was it?
            msg = "%s: %s" % (where, msg)
        raise Error(rc, msg or "%s: %s" % (where, _describe(rc)))

    def check(self, rc):
        if rc != 0:
            self.fail(rc)

    def drop_pool(self):
        pool, self.pool = self.pool, None
        if pool:
            _lib.dense_lib().wpack_pool_destroy(pool)

    def abort(self):
        w, self.w = self.w, None
        if w:
            lib.wpack_writer_abort(w)
        self.drop_pool()

    def finish(self):
        w, self.w = self.w, None
        buf = ctypes.create_string_buffer(1024)
        rc = lib.wpack_writer_finish(w, buf, len(buf))
        self.drop_pool()
        if rc != 0:
            raise Error(rc, buf.value.decode("utf-8", "replace"))

    def add_array(self, name, arr, code):
        dims = (ctypes.c_uint64 * max(1, arr.ndim))(*arr.shape)
        # wpack stores little-endian: a big-endian array ('>f4', as
        # np.load of a '>f4' .npy gives) is swapped piece by piece below
        wire = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        if _repeats_one_element(arr):
            # torch's expand, numpy's broadcast_to: one element, stored once
            # as a splat entry, as wpack create stores such a torch view
            # (written out, an expand of one float to [2^20, 2^20] is 4 TiB)
            fill = np.ascontiguousarray(arr[(0,) * arr.ndim], dtype=wire)
            self.check(lib.wpack_writer_add_splat(self.w, _b(name, "tensor name"), code,
                                                  arr.ndim, dims, fill.ctypes.data,
                                                  fill.nbytes))
            return
        self.check(lib.wpack_writer_begin_tensor(self.w, _b(name, "tensor name"), code, arr.ndim, dims))
        if arr.size:
            if arr.flags.c_contiguous and wire == arr.dtype:
                base = arr.ctypes.data
                for off in range(0, arr.nbytes, _CHUNK):
                    self.check(lib.wpack_writer_write(self.w, base + off,
                                                      min(_CHUNK, arr.nbytes - off)))
            else:
                self.write_pieces(arr, wire)
        self.check(lib.wpack_writer_end_tensor(self.w))

    def write_pieces(self, arr, wire):
        """The C-order bytes of a non-empty arr that is not C-contiguous or
        not little-endian, as dtype wire (little-endian), copied at most
        _CHUNK bytes at a time (memory stays flat): runs of whole rows of
        the first dimension, or row by row, recursively, when one row is
        larger. (A reshape to 2-D would copy the whole array first.)"""
        if arr.ndim == 0:   # a 0-d big-endian array: one element
            piece = np.ascontiguousarray(arr, dtype=wire)
            self.check(lib.wpack_writer_write(self.w, piece.ctypes.data, piece.nbytes))
            return
        row = arr.nbytes // arr.shape[0]
        if row > _CHUNK:
            for i in range(arr.shape[0]):
                self.write_pieces(arr[i], wire)
            return
        rows = max(1, _CHUNK // row)
        for r in range(0, arr.shape[0], rows):
            piece = np.ascontiguousarray(arr[r:r + rows], dtype=wire)
            self.check(lib.wpack_writer_write(self.w, piece.ctypes.data, piece.nbytes))


def _as_numpy(x, name):
    """(numpy array, wpack dtype code, tie key) of the value save_file
    writes as `name` (named in every refusal). The tie key names the
    caller's own memory (storage, offset, shape, strides, dtype), or is None
    when there is none to share: a list, a scalar, a converted copy. Keys are
    only compared while the caller's objects are alive (save_file keeps
    them), so an address freed and reused cannot look tied."""
    where = "save_file(): tensor %r" % (name,)
    # any torch.Tensor, a subclass defined elsewhere too (a Parameter
    # subclass of a quantization library, as_subclass): asking its class's
    # module missed those, and np.asarray() then refused bf16 and a tensor
    # that requires grad. torch needs no import here: a tensor means it is.
    torch_mod = sys.modules.get("torch")
    if torch_mod is not None and isinstance(x, torch_mod.Tensor):
        torch = _torch()
        t = x.detach()
        if t.layout != torch.strided:
            raise Error(E_UNSUPPORTED, "%s: a %s tensor: save t.to_dense()" % (where, t.layout))
        if getattr(t, "is_nested", False):   # strided, but no sizes: torch raised its own error
            raise Error(E_UNSUPPORTED, "%s: a nested tensor: save its tensors (t.unbind()) "
                        "one by one" % where)
        if t.is_complex():
            raise Error(E_UNSUPPORTED, "%s: complex tensors are not supported (save "
                        "torch.view_as_real(t), a real tensor with a last dim of 2)" % where)
        if t.device.type == "meta":
            raise Error(E_UNSUPPORTED, "%s: a meta tensor has no data to write" % where)
        key = None
        if t.numel():   # the caller's storage, on whatever device it is
            key = ("pt", str(t.device), t.storage().data_ptr(), t.storage_offset(),
                   tuple(t.shape), tuple(t.stride()), str(t.dtype))
        if t.is_neg():   # a lazy negation (torch._neg_view): its values, a new tensor
            t, key = t.resolve_neg(), None
        if t.device.type != "cpu":
            t = t.cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16), 4, key
        if t.dtype not in (torch.float64, torch.float32, torch.float16, torch.int64,
                           torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool):
            raise Error(E_UNSUPPORTED, "%s: torch dtype %s is not a wpack dtype"
                        % (where, t.dtype))
        return t.numpy(), _NP_TO_CODE[np.dtype(t.numpy().dtype)], key
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as e:   # a ragged list, ...: numpy names no tensor
        raise type(e)("%s: %s" % (where, e)) from None
    fresh = arr is not x and arr.base is None   # np.asarray made a new array
    ml = _ML_DTYPES.get(arr.dtype.name)
    if ml is not None and arr.dtype.itemsize == DTYPES[ml][1]().itemsize:
        code, arr = ml, arr.view(DTYPES[ml][1])   # ml_dtypes.bfloat16, ...: the same bytes
    elif arr.dtype in _NP_TO_CODE:
        code = _NP_TO_CODE[arr.dtype]
    elif arr.dtype.byteorder == ">" and arr.dtype.newbyteorder("<") in _NP_TO_CODE:
        code = _NP_TO_CODE[arr.dtype.newbyteorder("<")]   # swapped as written (add_array)
    else:
        hint = ""
        if arr.dtype.kind == "c":
            hint = " (complex: save np.stack([a.real, a.imag], axis=-1))"
        raise Error(E_UNSUPPORTED, "%s: numpy dtype %s is not a wpack dtype%s"
                    % (where, arr.dtype, hint))
    key = None
    if arr.size and not fresh:
        key = ("np", arr.__array_interface__["data"][0], tuple(arr.shape),
               tuple(arr.strides), arr.dtype.str)
    return arr, code, key


def _check_dtypes(tensors, dtypes):
    """save_file's dtypes= checked before anything is written."""
    for name, want in (dtypes or {}).items():
        if name not in tensors:
            raise ValueError("save_file(): dtypes names %r, which is not in tensors" % (name,))
        if want not in _CODE_BY_NAME:
            raise ValueError("save_file(): dtypes[%r]=%r: want one of %s"
                             % (name, want, ", ".join(_CODE_BY_NAME)))


_UNSIGNED = (11, 12, 13, 14)   # u64 u32 u16 u8: bit patterns dtypes= may retag


def _retag(name, arr, code, want):
    """The wpack dtype code of arr (wpack dtype code) stored as `want`
    (save_file's dtypes=): its own, or the bits of an unsigned array of the
    same item size (bf16 and f8 read with framework "np" are uint16 /
    uint8). The code, not arr's numpy dtype, says what the value is: a
    torch.bfloat16 tensor (or an ml_dtypes one) is carried as uint16 but
    is bf16, and its bits stored as f16 or i16 were other numbers."""
    w = _CODE_BY_NAME[want]
    if w == code:
        return w
    if code in _UNSIGNED and arr.dtype.itemsize == np.dtype(DTYPES[w][1]).itemsize:
        return w
    raise ValueError("save_file(): dtypes[%r]=%r: a %s value is not %s; give its bit patterns "
                     "as uint%d" % (name, want, DTYPES[code][0], want,
                                    8 * np.dtype(DTYPES[w][1]).itemsize))


def _set_metadata(wr, metadata):
    for key, v in (metadata or {}).items():
        try:
            k = _key(key, "metadata key")
        except TypeError:
            wr.abort()
            raise
        if isinstance(v, (bool, np.bool_)):
            rc = lib.wpack_writer_set_bool(wr.w, k, int(bool(v)))
        elif isinstance(v, (int, np.integer)):
            rc = lib.wpack_writer_set_i64(wr.w, k, _int_arg(v, ctypes.c_int64,
                                                            "metadata %r" % (key,)))
        elif isinstance(v, (float, np.floating)):
            rc = lib.wpack_writer_set_f64(wr.w, k, float(v))
        elif isinstance(v, str):
            rc = lib.wpack_writer_set_string(wr.w, k, _b(v, "metadata %r value" % (key,)))
        elif isinstance(v, (bytes, bytearray)):
            b = bytes(v)
            rc = lib.wpack_writer_set_bytes(wr.w, k, b, len(b))
        elif isinstance(v, (list, tuple)):
            rc = _set_array(wr, k, list(v))
        else:
            wr.abort()
            raise TypeError("metadata %r: %s is not str/int/float/bool/bytes/list"
                            % (key, type(v).__name__))
        wr.check(rc)


def _set_array(wr, k, vals):
    kinds = set()
    for v in vals:
        if isinstance(v, (bool, np.bool_)):
            kinds.add(META_BOOL)
        elif isinstance(v, (int, np.integer)):
            kinds.add(META_I64)
        elif isinstance(v, (float, np.floating)):
            kinds.add(META_F64)
        elif isinstance(v, str):
            kinds.add(META_STRING)
        elif isinstance(v, (bytes, bytearray)):
            kinds.add(META_BYTES)
        else:
            kinds.add(None)
    if kinds == {META_I64, META_F64}:
        kinds = {META_F64}
    if len(kinds) > 1 or None in kinds:
        wr.abort()
        raise TypeError("metadata %r: an array's elements must all be one of "
                        "str/int/float/bool/bytes" % k.decode())
    et = kinds.pop() if kinds else META_I64
    n = len(vals)
    if et == META_I64:
        arr = (ctypes.c_int64 * max(1, n))(*[_int_arg(v, ctypes.c_int64, "metadata %r element"
                                                      % k.decode()) for v in vals])
    elif et == META_F64:
        arr = (ctypes.c_double * max(1, n))(*[float(v) for v in vals])
    elif et == META_BOOL:
        arr = (ctypes.c_int * max(1, n))(*[int(bool(v)) for v in vals])
    elif et == META_STRING:
        arr = (ctypes.c_char_p * max(1, n))(*[_b(v, "metadata %r element" % k.decode())
                                              for v in vals])
    else:
        keep = [bytes(v) for v in vals]
        arr = (_lib.Bytes * max(1, n))(*[_lib.Bytes(ctypes.cast(ctypes.c_char_p(b),
                                                                 ctypes.c_void_p), len(b))
                                         for b in keep])
    return lib.wpack_writer_set_array(wr.w, k, et, n, arr)


_STATS_KINDS = {"weight": STATS_WEIGHT, "activation": STATS_ACTIVATION}
_STATS_VALUES = ("min", "max", "absmax", "mean", "variance")
_MAX_AXIS = 7   # WPACK_MAX_RANK - 1


def _stats_kind(kind, what):
    if kind not in _STATS_KINDS:
        raise ValueError("%s: kind %r: want one of %s"
                         % (what, kind, ", ".join(repr(k) for k in _STATS_KINDS)))
    return _STATS_KINDS[kind]


def _stats_in(key, rec):
    """(wpack_stats_in, keep-alive list) from a stats dict (see save_file).
    Every array's length is checked here (the C side reads `channels`
    values of each, hist_bins + 1 edges): TypeError/ValueError/OverflowError
    naming the record and field."""
    where = "stats %r" % (key,)
    if not isinstance(rec, dict):
        raise TypeError("%s: want a dict, not %s" % (where, type(rec).__name__))
    for f in ("count", "min", "max", "mean"):
        if rec.get(f) is None:
            raise ValueError("%s: %r is required" % (where, f))
    s = _lib.StatsIn()
    s.key = _key(key, "stats key")
    s.kind = _stats_kind(rec.get("kind", "weight"), where)
    gran = rec.get("granularity")
    if gran is None:
        gran = "channel" if np.ndim(rec["min"]) else "tensor"
    if gran not in ("tensor", "channel"):
        raise ValueError("%s: granularity %r: want 'tensor' or 'channel'" % (where, gran))
    keep = []

    def floats(f, v, ndim):
        try:
            a = np.array(v, dtype=np.float64, order="C")   # a copy, 0-d kept 0-d
        except (TypeError, ValueError):
            raise TypeError("%s: %r must be numbers, not %r" % (where, f, v)) from None
        if a.ndim != ndim:
            want = {0: "a number", 1: "a 1-D array", 2: "(q, value) pairs"}[ndim]
            raise ValueError("%s: %r must be %s, not of shape %s" % (where, f, want, a.shape))
        keep.append(a)
        return a

    per = gran == "channel"
    mn = floats("min", rec["min"], 1 if per else 0)
    C = _int_arg(mn.size, ctypes.c_uint32, where + " channels")
    if C == 0:
        raise ValueError("%s: per-channel stats need at least one channel" % where)
    s.granularity = 1 if per else 0
    s.channels = C
    axis = _int_arg(rec.get("axis", 0), ctypes.c_int64, where + " axis")
    if not 0 <= axis <= _MAX_AXIS:
        raise ValueError("%s: axis %d: want 0..%d" % (where, axis, _MAX_AXIS))
    s.axis = axis
    s.count = _int_arg(rec["count"], ctypes.c_uint64, where + " count")
    vals = {"min": mn}
    for f in _STATS_VALUES[1:]:
        v = rec.get(f)
        if v is None and f == "absmax":
            v = np.maximum(np.abs(mn), np.abs(vals["max"]))
        elif v is None and f == "variance":
            v = np.zeros_like(mn)   # as the --stats JSON schema: 0, a placeholder
        vals[f] = floats(f, v, mn.ndim)
        if vals[f].size != C:
            raise ValueError("%s: %r has %d values, 'min' %d: one per channel"
                             % (where, f, vals[f].size, C))
    for f, a in vals.items():
        setattr(s, f, a.ctypes.data_as(_lib.c_dblp))
    hist = rec.get("histogram")
    if hist is not None:
        if not isinstance(hist, (tuple, list)) or len(hist) != 2:
            raise TypeError("%s: 'histogram' must be (edges, counts)" % where)
        counts = np.asarray(hist[1])
        if counts.ndim != 1 or counts.size == 0 or counts.dtype.kind not in "iu":
            raise TypeError("%s: histogram counts must be a non-empty 1-D array of ints, "
                            "not %s of shape %s" % (where, counts.dtype, counts.shape))
        if counts.dtype.kind == "i" and (counts < 0).any():
            raise ValueError("%s: histogram counts must be >= 0" % where)
        counts = np.ascontiguousarray(counts, dtype=np.uint64)
        keep.append(counts)
        edges = floats("histogram edges", hist[0], 1)
        if edges.size != counts.size + 1:
            raise ValueError("%s: histogram has %d counts and %d edges: want counts + 1 edges"
                             % (where, counts.size, edges.size))
        s.hist_bins = _int_arg(counts.size, ctypes.c_uint32, where + " histogram bins")
        s.hist_edges = edges.ctypes.data_as(_lib.c_dblp)
        s.hist_counts = counts.ctypes.data_as(_lib.c_u64p)
    pct = rec.get("percentiles")
    if pct is not None and len(pct):
        p = floats("percentiles", pct, 2)
        if p.shape[1] != 2:
            raise ValueError("%s: 'percentiles' must be (q, value) pairs, not of shape %s"
                             % (where, p.shape))
        s.percentile_count = _int_arg(p.shape[0], ctypes.c_uint32, where + " percentiles")
        s.percentiles = p.ctypes.data_as(_lib.c_dblp)
    return s, keep


def save_file(tensors, path, metadata=None, name_map=None, stats=None, durable=True,
              dtypes=None, **options):
    """Write {name: numpy array or torch tensor} to a new archive at path.

    The bytes stream through the C writer straight from the arrays' memory
    (one call per 16 MiB; a non-contiguous array (a slice with steps,
    Fortran order, ...) is copied in C order 16 MiB at a time, and a
    big-endian one ('>f4', ...) byte-swapped to wpack's little-endian 16
    MiB at a time, its values kept): memory does not grow with the data. The archive appears at path
    only when complete and durable (temporary file, fsync, rename, fsync of
    the directory; torch.save does no fsync); on any error nothing is left
    behind. durable=False skips the two fsyncs (as torch.save): other
    processes still see the old file or the whole new one, but after a
    power loss or OS crash the new file may be missing, empty or torn (a
    torn archive fails to open) and the file it replaced lost. A sharded
    set whose manifest is at path is replaced as a whole: its shard files
    are removed once the new archive is in place (not before). A
    write-protected file at path (no write bit in its mode, root too), or
    a write-protected shard of the set it replaces, is never replaced:
    wpack.Error (E_IO, "write-protected"), the file unchanged.

    Tensors that are the same memory (same data pointer, shape, strides and
    dtype: tied weights) are written once; the later names become alias
    entries. Only the caller's own arrays and tensors can be tied: values
    converted to new arrays (lists, Python and numpy scalars) never are.
    An array or tensor that repeats one element (every dim above 1 has
    stride 0: torch's expand, numpy's broadcast_to) is stored as a splat
    entry of that element, as `wpack create` stores such torch views.

    dtypes: the wpack dtype of each array by name, for what numpy has no
    dtype for: bf16 and f8 read with framework "np" come back as their bit
    patterns (uint16 / uint8) and save_file stores those as u16 / u8
    unless told, e.g. dtypes={"w": "bf16"} (safe_open.describe(name)
    ["dtype"] says what an entry was). An unsigned array is stored as any
    wpack dtype of its item size, bits unchanged; otherwise a dtype must
    be the array's own (a torch.bfloat16 or ml_dtypes tensor is bf16,
    never retagged) (ValueError, as for a name not in tensors or an
    unknown dtype). Without dtypes: torch bfloat16 is bf16, numpy uint16
    u16, and ml_dtypes' bfloat16 / float8_e4m3fn / float8_e5m2 arrays
    are bf16 / f8e4m3fn / f8e5m2.

    Names and keys (of tensors, metadata, name_map and stats) are str (or
      UTF-8 bytes): any other type is TypeError (never stored as its str(),
      1 as "1").
    metadata: {key: str | int | float | bool | bytes | list of one of those}
      stored typed; ints must fit int64 (OverflowError, never wrapped).
      Names, keys and str values (also in lists) must not hold a NUL
      character (ValueError: C would end them there); bytes values may.
      name_map: {other name: entry name (or a module path with
      activation stats)}. stats: {key: {"kind": "weight" (default) or
      "activation", "count" (int >= 0), "min", "max", "mean", optional
      "absmax" (default max(|min|, |max|)), "variance" (default 0, as the
      --stats JSON schema: a placeholder, not an observed value),
      "granularity" ("channel" when min is an array, else "tensor"),
      "axis" (0..7, default 0), "histogram": (edges[N + 1], counts[N]),
      "percentiles": [(q, v)]}} (spec appendix A). Per-tensor values are
      numbers; per-channel ones 1-D arrays all as long as min (the channel
      count). A record that breaks these raises TypeError, ValueError or
      OverflowError naming it and the field; the values themselves (finite,
      min <= max, ...) are checked by the C writer (wpack.Error
      WPACK_E_STATS).
    options: alignment, weight_stats (True: min/max/mean/variance of each
      float tensor, about a third of save_file's CPU time; False skips them),
      histogram_bins (0; needs weight_stats, else wpack.Error
      WPACK_E_INVALID_ARGUMENT, as wpack create),
      compress_level (0: off; zstd level), compress_chunk, compress_min,
      compress_min_saving (percent, 5), shard_size (>0: a sharded set),
      max_data_bytes, portable_stats (False; True: the portable C path for
      weight stats, what the CLI does under WPACK_ISA=scalar), threads (1;
      N: weight stats and hashing of large tensors on a pool of N threads,
      the same bytes, as `wpack create -j N`), chunk_sums (bytes per
      checksummed chunk, default 1 MiB: each tensor larger than that also
      gets an XXH3 per chunk, so get_slice checks, or fetches from a URL,
      only the chunks of its rows (format 1.2); 0: none).
    durable: True (default); False: no fsync, see above (`wpack create
      --no-sync`), for scratch outputs and benchmarks.
    tensors, metadata, name_map, stats and dtypes that are not dicts
    (mappings) are TypeError, before the output is started.
    An unknown option is TypeError; an int option outside its C field's
    range (a negative size, ...) OverflowError, never wrapped. A value
    with no wpack dtype (complex, strings, objects, quantized, sparse,
    nested or meta tensors) is wpack.Error WPACK_E_UNSUPPORTED naming the
    tensor; a value numpy cannot make an array of (a ragged list) is
    numpy's ValueError or TypeError, naming the tensor.
    """
    for what, v in (("tensors", tensors), ("metadata", metadata), ("name_map", name_map),
                    ("stats", stats), ("dtypes", dtypes)):
        _mapping("save_file", what, v)
    _check_dtypes(tensors, dtypes)
    wr = _Writer("save_file", path, durable=durable, **options)
    try:
        # metadata first: a value the writer refuses (a reserved wpack.* key
        # of the wrong form) is refused before any tensor streams
        _set_metadata(wr, metadata)
        seen = {}      # tie key -> the first name written with it
        alive = []     # the objects keyed, alive until the end (see _as_numpy)
        for name, x in tensors.items():
            _key(name, "tensor name")
            arr, code, key = _as_numpy(x, name)
            if dtypes and name in dtypes:
                code = _retag(name, arr, code, dtypes[name])
            if key is not None:
                key += (code,)   # the same bits stored as two dtypes are two entries
            if key is not None and key in seen:
                wr.check(lib.wpack_writer_add_alias(wr.w, _b(name, "tensor name"),
                                                    _b(seen[key], "tensor name")))
                continue
            wr.add_array(name, arr, code)
            if key is not None:
                seen[key] = name
                alive.append((x, arr))
        for other, entry in (name_map or {}).items():
            wr.check(lib.wpack_writer_add_name(wr.w, _key(other, "name-map name"),
                                                 _key(entry, "name-map entry")))
        for key, rec in (stats or {}).items():
            s, keep = _stats_in(key, rec)
            wr.check(lib.wpack_writer_add_stats(wr.w, ctypes.byref(s)))
            del keep
        wr.finish()
    except BaseException:
        wr.abort()
        raise


def _mapping(caller, what, v):
    """TypeError unless v is a mapping (or None where optional): a list of
    pairs was AttributeError "'list' object has no attribute 'items'",
    after the output had been started."""
    if v is not None and not isinstance(v, collections.abc.Mapping):
        raise TypeError("%s(): %s must be a dict (name -> value), not %s"
                        % (caller, what, type(v).__name__))


def _check_updatable(path):
    """wpack.Error unless an update of the archive at path could start now:
    what the update would refuse (not an archive, a shard of a set, a
    write-protected file, a newer format) is refused here, writing nothing
    (an update an earlier one left half-done is completed, as any update
    does first)."""
    u = ctypes.c_void_p()
    buf = ctypes.create_string_buffer(1024)
    rc = lib.wpack_update_begin(ctypes.byref(u), _b(_fspath(path), "path"), 0, buf, len(buf))
    lib.wpack_update_abort(u)
    if rc != 0:
        raise Error(rc, buf.value.decode("utf-8", "replace"))


def update_stats(path, stats):
    """Add or replace calibration statistics records of the archive at path
    in place (the crash-safe index update: no data is rewritten; open
    readers keep working). stats: as in save_file; an empty one writes
    nothing but still checks that path is an archive that could be updated
    (wpack.Error if not: not an archive, a shard of a set, write-protected)."""
    _mapping("update_stats", "stats", stats)
    if stats is None:
        raise TypeError("update_stats(): stats must be a dict (key -> record), not None")
    _refuse_url(os.fspath(path), "update_stats", "a URL is read only; update a local copy")
    recs, keep = [], []
    for key, rec in stats.items():
        s, k = _stats_in(key, rec)
        recs.append(s)
        keep.append(k)
    if not recs:  # no new generation for nothing, but no silent pass either
        _check_updatable(path)
        return
    arr = (_lib.StatsIn * len(recs))(*recs)
    buf = ctypes.create_string_buffer(1024)
    rc = lib.wpack_update_add_stats(_b(_fspath(path), "path"), arr, len(recs), buf, len(buf))
    if rc != 0:
        raise Error(rc, buf.value.decode("utf-8", "replace"))


_CASTS = {None: 0, "": 0, "bf16": 4, "f16": 3}
_OUTPUT_RATIO, _OUTPUT_FLOOR = 1000, 1 << 30   # the CLI's default output cap (cli/util.c)


def detect(path):
    """What the input at path is, by content, as wpack_import_detect() says:
    "npy", "torch", "torch-legacy", "safetensors", "zip", "tar", "manifest",
    "directory", "gguf", "irpa". Anything else raises wpack.Error
    (WPACK_E_INPUT, or WPACK_E_NOT_FOUND / WPACK_E_FILE_TYPE) with the
    library's reason."""
    _refuse_url(os.fspath(path), "detect", "an input is a local file")
    imp = _lib.import_lib()
    err = ctypes.create_string_buffer(1024)
    kind = imp.wpack_import_detect(_b(_fspath(path), "path"), err, len(err))
    if kind == 0:
        msg = err.value.decode("utf-8", "replace")
        code = E_INPUT
        if "No such file" in msg:
            code = E_NOT_FOUND
        elif "not a regular file" in msg:
            code = E_FILE_TYPE
        raise Error(code, msg or "%s: not a recognised input" % _fspath(path))
    return imp.wpack_import_kind_name(kind).decode()


def _cstrs(items, keep, what):
    items = [_b(x, what) for x in items]
    keep.append(items)
    arr = (ctypes.c_char_p * max(1, len(items)))(*items)
    keep.append(arr)
    return ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))


def pack(inputs, path, *, prefix=None, key=None, cast=None, only=None, weight_stats=True,
         follow_links=False, max_ratio=0, max_total=0, max_output=0, stats_file=None,
         name_map=None, metadata=None, layers=None, allow_empty=False, progress=None,
         warn=None, temp_dir=None, keep_observers=False, durable=True, **writer_options):
    """Pack model files into one new archive at path, as `wpack create` does
    (the same inputs and options give the same bytes), through
    libwpack-import (wpack_import_open/add/close).

    inputs: a path or a list of them, each a torch.save checkpoint
      (.pt/.pth/.bin, read without running pickle code), safetensors (or a
      Hugging Face model.safetensors.index.json), .npz / zip / tar bundle of
      .npy, a .npy file, a directory of .npy files, a JSON manifest of raw
      binaries, GGUF or IREE .irpa; recognised by content (wpack.detect).
      An item may be a (path, {"prefix": P, "key": K}) pair: options for that
      input alone (the CLI's --prefix/--key before it). A name two inputs
      both produce is an error naming both.
    Importer options (wpack_import_options; the CLI flag in brackets):
      prefix   put every name under module path prefix [--prefix]
      key      torch: keep only this sub-dict ("model") [--key]
      cast     "bf16" or "f16": store float tensors in it [--cast]; values
               beyond its range become +-inf, with a warning
      only     list of fnmatch globs: with cast, only these names [--only]
      weight_stats  False: no weight statistics [--no-stats]
      follow_links  True: follow symlinks among the files an input names
      max_ratio, max_total  bundle expansion limits (0: 200:1, 1 TiB)
      max_output  the most tensor bytes the archive may hold (0: 1000 x the
               inputs' size, at least 1 GiB, as the CLI) [--max-output]
      stats_file  calibration statistics JSON (import/README.md), or any file
               --stats-from takes; one that gives no record is refused [--stats]
      name_map {other name: entry or module path} [--name OTHER=ENTRY]
      metadata {key: value}, typed as in save_file (str values are what
               --meta KEY=VALUE stores); layers: wpack.layers [--layers]
      allow_empty  write an archive even with no tensor [--allow-empty]
      keep_observers  True: a torch checkpoint's torch.ao observer buffers
               are stored as tensors too, not only as the activation stats
               they become (spec appendix A.1) [--keep-observers]
      progress callable(done_bytes, total_bytes, path): done and total in
               input file bytes (total: all inputs'), called as an input's
               tensors are read (every 4 MiB of a .npy, every 256 KiB from
               a zip or torch checkpoint) and once when it is done, so the
               last call has done == total
      warn     callable(message) for what an input leaves out (default:
               warnings.warn)
      temp_dir where Fortran-order .npy members are spilled (default:
               tempfile.gettempdir())
    writer_options: those of save_file (alignment, histogram_bins,
      compress_level, compress_chunk, compress_min, compress_min_saving,
      shard_size, max_data_bytes, portable_stats, threads: weight statistics
      and hashing of large tensors on that many threads, the same bytes;
      chunk_sums).
    durable  True (default): the archive is fsynced, renamed, its directory
               fsynced; False: no fsync (still atomic for other processes,
               but a power loss or OS crash may leave it missing, empty or
               torn and lose the file it replaced) [--no-sync]

    The archive appears at path only when complete; on any error nothing is
    left there (an existing file is untouched). A sharded set whose manifest
    is at path is replaced as a whole (its shards removed once the new
    archive is in place, as save_file). Raises wpack.Error with the
    library's message ("m.pt: ...") and code, TypeError for an unknown
    option or a non-int where an int goes, OverflowError for an int outside
    its C field's range (max_ratio=-1 would wrap to 2^32-1: the guard off),
    OSError if libwpack-import cannot be loaded. An exception
    raised by progress or warn is re-raised when the input being imported
    is done (the import is then abandoned).
    """
    _check_writer_options("pack", dict(writer_options, weight_stats=weight_stats))
    _int_arg(max_output or 0, ctypes.c_uint64, "pack(): max_output")
    if cast not in _CASTS:
        raise Error(E_INVALID_ARGUMENT, "pack(): cast=%r: want 'bf16' or 'f16'" % (cast,))
    if only and not cast:
        raise Error(E_INVALID_ARGUMENT, "pack(): only= needs cast=")
    if writer_options.get("shard_size") and writer_options.get("compress_level"):
        raise Error(E_INVALID_ARGUMENT, "pack(): shard_size stores shards uncompressed; "
                    "drop compress_level")
    imp = _lib.import_lib()
    path = os.fspath(path)
    if isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]
    keep = []
    pending = []   # exceptions raised in callbacks: re-raised after the C call
    err = ctypes.create_string_buffer(1024)

    def on_warn(_user, message):
        try:
            msg = message.decode("utf-8", "replace")
            if warn is None:
                import warnings
                warnings.warn(msg, stacklevel=3)
            else:
                warn(msg)
        except BaseException as e:  # noqa: B902 (ctypes would swallow it)
            pending.append(e)

    warn_cb = _lib.ImportWarn(on_warn)
    if temp_dir is None:
        import tempfile
        temp_dir = tempfile.gettempdir()

    def options(per):
        o = _lib.ImportOptions()
        imp.wpack_import_options_init(ctypes.byref(o))
        p, k = per.get("prefix", prefix), per.get("key", key)
        o.prefix = _b(p, "prefix") if p else None
        o.key = _b(k, "key") if k else None
        o.cast = _CASTS[cast]
        if only:
            globs = [only] if isinstance(only, str) else list(only)
            o.only = _cstrs(globs, keep, "only glob")
            o.only_count = len(globs)
        o.weight_stats = 1 if weight_stats else 0
        o.follow_links = 1 if follow_links else 0
        o.keep_observers = 1 if keep_observers else 0
        _set_int(o, "max_ratio", max_ratio or 0, "pack(): max_ratio")
        _set_int(o, "max_total", max_total or 0, "pack(): max_total")
        o.temp_dir = _b(_fspath(temp_dir), "temp_dir") if temp_dir else None
        o.warn = warn_cb
        o.err = ctypes.cast(err, ctypes.c_void_p)
        o.err_size = len(err)
        return o

    def check_pending():
        if pending:
            raise pending[0]

    # List every input first (as the CLI): the files it consists of, their
    # bytes for the output cap and progress, and the same-file guard.
    items = []
    if isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[1], dict):
        raise TypeError("pack(): inputs is one (path, options) pair: pass a list of inputs, "
                        "[(path, {'prefix': ..., 'key': ...})]")
    for spec in inputs:
        per = {}
        if not isinstance(spec, (str, bytes, os.PathLike, tuple)):
            raise TypeError("pack(): an input is a path or a (path, {'prefix': P, 'key': K}) "
                            "pair, not %s" % type(spec).__name__)
        if isinstance(spec, tuple):
            spec, per = spec
            extra = [k for k in per if k not in ("prefix", "key")]
            if extra:
                raise TypeError("pack(): per-input options are prefix and key, not %s"
                                % ", ".join(sorted(extra)))
        _refuse_url(os.fspath(spec), "pack", "inputs are local files (wpack fetches no URL "
                    "to pack it)")
        o = options(per)

        def on_item(_user, item_p, o=o):
            it = ctypes.cast(item_p, ctypes.POINTER(_lib.ImportItem)).contents
            items.append((it.path.decode("utf-8", "surrogateescape"),
                          it.name, int(it.bytes), o))
            return 0

        rc = imp.wpack_import_list(_b(_fspath(spec), "input"), ctypes.byref(o),
                                   _lib.ImportItemFn(on_item), None)
        check_pending()
        if rc != 0:
            raise Error(rc, err.value.decode("utf-8", "replace")
                        or "%s: %s" % (_fspath(spec), _describe(rc)))
    for p, _, _, _ in items + [(stats_file, None, 0, None)]:
        # (a missing stats_file is the library's error, whether path exists or not)
        if p and os.path.exists(path) and os.path.exists(p) and os.path.samefile(p, path):
            raise Error(E_SAME_FILE, "pack(): the output %s is the input %s"
                        % (_shown(_fspath(path)), _shown(p)))
    if not items and not allow_empty:
        raise Error(E_EMPTY, "pack(): no input files found: nothing written; "
                    "allow_empty=True writes an empty archive")
    total = sum(b for _, _, b, _ in items)
    if not writer_options.get("max_data_bytes"):
        writer_options["max_data_bytes"] = max_output or \
            max(total * _OUTPUT_RATIO, _OUTPUT_FLOOR)
    writer_options["weight_stats"] = weight_stats
    wr = _Writer("pack", path, durable=durable, **writer_options)
    handle = ctypes.c_void_p()
    try:
        _set_metadata(wr, metadata)
        if layers is not None:
            wr.check(lib.wpack_writer_set_string(wr.w, b"wpack.layers", _b(layers, "layers")))
        rc = imp.wpack_import_open(ctypes.byref(handle), wr.w)
        if rc != 0:
            raise Error(rc, "pack(): %s" % _describe(rc))
        base = 0
        for p, name, size, o in items:
            o.name = name
            if progress is not None:
                # The library counts the tensor bytes read from the input,
                # which stop short of its file size (headers, pickle): done
                # is bounded by the file, and reaches it when it is done.
                def on_progress(_user, done, p=p, base=base, size=size):
                    try:
                        progress(base + min(int(done), size), total, p)
                    except BaseException as e:  # noqa: B902
                        pending.append(e)
                o.progress = _lib.ImportProgress(on_progress)
                keep.append(o.progress)
            if wr.executor is not None:   # threads=N: the stats before a cast too
                o.executor = ctypes.addressof(wr.executor)
            o.portable_stats = 1 if writer_options.get("portable_stats") else 0
            rc = imp.wpack_import_add(handle, _b(p, "input"), ctypes.byref(o))
            o.progress = _lib.ImportProgress()
            check_pending()
            if rc != 0:
                raise Error(rc, imp.wpack_import_errmsg(handle).decode("utf-8", "replace")
                            or err.value.decode("utf-8", "replace"))
            base += size
            if progress is not None:
                progress(base, total, p)   # this input whole
        if stats_file or name_map:
            o = options({})
            if stats_file:
                o.stats_file = _b(_fspath(stats_file), "stats_file")
            pairs = list((name_map or {}).items())
            if pairs:
                o.name_map_other = _cstrs([a for a, _ in pairs], keep, "name-map name")
                o.name_map_entry = _cstrs([b for _, b in pairs], keep, "name-map entry")
                o.name_map_count = len(pairs)
            rc = imp.wpack_import_add(handle, None, ctypes.byref(o))
            if rc != 0:
                raise Error(rc, imp.wpack_import_errmsg(handle).decode("utf-8", "replace"))
        if not allow_empty and lib.wpack_writer_count(wr.w) == 0:
            raise Error(E_EMPTY, "pack(): the inputs hold no tensor: nothing written; "
                        "allow_empty=True writes an empty archive")
        imp.wpack_import_close(handle)
        handle = None
        wr.finish()
    except BaseException:
        if handle:
            imp.wpack_import_close(handle)
        wr.abort()
        raise
