#!/usr/bin/python3
"""make_corpus.py - the rest of the seed corpora (make_corpus.c writes the
archives, npy_format_header seeds and round-trip programs):

  DIR/fuzz_npy/seed-numpy-*.npy   arrays saved by numpy (every dtype it and
                                  wpack share, versions 1.0/2.0/3.0, Fortran
                                  order, big-endian, 0-d, empty, rank 8)
  DIR/fuzz_npy/seed-bad-*.npy     hand-made headers the parser must reject
  DIR/fuzz_response/seed-*        a request and a server's answer (header
                                  lines, body): good ranges, wrong ones,
                                  encodings, redirects, error bodies
  DIR/fuzz_*/golden-*, hostile-*, cli-*
                                  copies of files under tests/golden,
                                  tests/hostile and tests/cli: archives go to
                                  fuzz_archive, .npy files to fuzz_npy (by
                                  magic or extension); larger than the
                                  target's max_len are skipped

  make_corpus.py DIR
"""
import io
import os
import struct
import sys

MAX_LEN = {"fuzz_archive": 65536, "fuzz_npy": 4096}
WPK_MAGIC = b"\x89WPK"
NPY_MAGIC = b"\x93NUMPY"


def npy_header(dict_text, major=1, pad=True):
    """A .npy preamble + header for a dict literal (not checked)."""
    body = dict_text.encode("utf-8") if isinstance(dict_text, str) else dict_text
    pre = 10 if major == 1 else 12
    if pad:
        total = (pre + len(body) + 1 + 63) // 64 * 64
        body = body + b" " * (total - pre - len(body) - 1) + b"\n"
    length = struct.pack("<H", len(body)) if major == 1 else struct.pack("<I", len(body))
    return NPY_MAGIC + bytes([major, 0]) + length + body


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def numpy_seeds(out):
    try:
        import numpy as np
    except ImportError:
        print("make_corpus.py: numpy not importable, numpy-made .npy seeds skipped")
        return
    arrays = {
        "f8": np.arange(6, dtype="<f8").reshape(2, 3),
        "f4": np.array([1.5, -2.0, np.nan, np.inf], dtype="<f4"),
        "f2": np.arange(4, dtype="<f2"),
        "i8": np.array([-1, 2**62], dtype="<i8"),
        "i4": np.arange(3, dtype="<i4"),
        "i2": np.arange(3, dtype="<i2"),
        "i1": np.arange(3, dtype="i1"),
        "u8": np.arange(2, dtype="<u8"),
        "u4": np.arange(2, dtype="<u4"),
        "u2": np.arange(2, dtype="<u2"),
        "u1": np.arange(5, dtype="u1"),
        "bool": np.array([True, False, True]),
        "be-f4": np.arange(4, dtype=">f4"),
        "be-i8": np.arange(2, dtype=">i8"),
        "fortran": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
        "scalar": np.array(3.25, dtype="<f8"),
        "empty": np.zeros((0, 4), dtype="<f4"),
        "rank8": np.zeros((1, 2, 1, 2, 1, 1, 1, 1), dtype="u1"),
        # kinds wpack does not take: must be rejected, not crash
        "complex": np.arange(2, dtype="<c8"),
        "unicode": np.array(["ab", "c"]),
        "bytes": np.array([b"ab"]),
        "datetime": np.array(["2020-01-01"], dtype="datetime64[D]"),
        "struct": np.zeros(2, dtype=[("a", "<f4"), ("b", "u1")]),
    }
    for name, arr in arrays.items():
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        write(os.path.join(out, "seed-numpy-%s.npy" % name), buf.getvalue())
    # Explicit versions 2.0 and 3.0 (3.0: a UTF-8 header).
    fmt = np.lib.format
    for version in ((2, 0), (3, 0)):
        buf = io.BytesIO()
        arr = np.arange(4, dtype="<f4")
        fmt.write_array(buf, arr, version=version)
        write(os.path.join(out, "seed-numpy-v%d.npy" % version[0]), buf.getvalue())
    # A structured dtype whose field name needs UTF-8 makes numpy choose 3.0.
    buf = io.BytesIO()
    np.save(buf, np.zeros(1, dtype=[("\u00e9", "<f4")]))
    write(os.path.join(out, "seed-numpy-utf8-field.npy"), buf.getvalue())


BAD_HEADERS = {
    "empty": b"",
    "magic-only": NPY_MAGIC,
    "version-4": NPY_MAGIC + b"\x04\x00\x10\x00" + b"{}" + b" " * 13 + b"\n",
    "minor-1": NPY_MAGIC + b"\x01\x01\x10\x00" + b"{}" + b" " * 13 + b"\n",
    "length-past-end": NPY_MAGIC + b"\x01\x00\xff\xff{'descr': '<f4'",
    "length-huge-v2": NPY_MAGIC + b"\x02\x00\xff\xff\xff\xff{",
    "no-dict": npy_header("'descr': '<f4'"),
    "missing-shape": npy_header("{'descr': '<f4', 'fortran_order': False}"),
    "duplicate-key": npy_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}"),
    "unknown-key": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}"),
    "negative-dim": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}"),
    "dim-2p64": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,)}"),
    "overflow": npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"),
    "overflow-with-zero": npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 18446744073709551615, 2)}"),
    "rank-9": npy_header("{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}"),
    "bar-f4": npy_header("{'descr': '|f4', 'fortran_order': False, 'shape': (2,)}"),
    "object": npy_header("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}"),
    "float128": npy_header("{'descr': '<f16', 'fortran_order': False, 'shape': (2,)}"),
    "struct-list": npy_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}"),
    "fortran-lower": npy_header("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}"),
    "shape-list": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}"),
    "junk-after": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x"),
    "comment-control": npy_header("{'descr': '<u2', 'fortran_order': False, 'shape': (2,)} # wpack dtype bf16\x01"),
    "comment-bf16": npy_header("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }  # wpack dtype bf16 (raw bits)"),
    "comment-wrong-raw": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }  # wpack dtype bf16 (raw bits)"),
    "v3-bad-utf8": npy_header(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\xc3\x28", major=3),
    "v1-latin1": npy_header(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } #\xe9", major=1),
    "unterminated-string": npy_header("{'descr': '<f4"),
    "escape-in-string": npy_header("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}"),
    "double-quotes": npy_header('{"descr": "<f4", "fortran_order": False, "shape": (2,)}'),
    "no-padding": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", pad=False),
    "nul-in-header": npy_header("{'descr': '<f4',\x00 'fortran_order': False, 'shape': (2,)}"),
    "deep-parens": npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': ((((2,)))),}"),
}


def bad_seeds(out):
    for name, data in BAD_HEADERS.items():
        write(os.path.join(out, "seed-bad-%s.npy" % name), data)


def copy_tests(root, corpus):
    """Copy test files that are archives or .npy files into the corpora."""
    copied = skipped = 0
    for sub in ("golden", "hostile", "cli"):
        top = os.path.join(root, "tests", sub)
        if not os.path.isdir(top):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for fn in sorted(filenames):
                path = os.path.join(dirpath, fn)
                if not os.path.isfile(path) or os.path.islink(path):
                    continue
                with open(path, "rb") as f:
                    head = f.read(8)
                if head.startswith(WPK_MAGIC) or fn.endswith(".wpk"):
                    target = "fuzz_archive"
                elif head.startswith(NPY_MAGIC) or fn.endswith(".npy"):
                    target = "fuzz_npy"
                else:
                    continue
                if os.path.getsize(path) > MAX_LEN[target]:
                    skipped += 1
                    continue
                rel = os.path.relpath(path, top).replace(os.sep, "_")
                with open(path, "rb") as f:
                    write(os.path.join(corpus, target, "%s-%s" % (sub, rel)), f.read())
                copied += 1
    print("make_corpus.py: copied %d test files, skipped %d above max_len" % (copied, skipped))


def response_seeds(out):
    """fuzz_response: a request (probe flag, first byte, length - 1, size
    past the range) then a server's answer, each a case of
    tests/cli/test_remote_bad.sh or remote_server.py."""
    def case(name, headers, body=b"", probe=False, off=10, length=10, rest=80):
        req = bytes([1 if probe else 0]) + struct.pack("<Q", off) + \
            struct.pack("<H", length - 1) + struct.pack("<Q", rest)[:5]
        lines = b"".join(h.encode("latin-1") + b"\r\n" for h in headers) + b"\r\n"
        write(os.path.join(out, "seed-" + name), req + lines + body)
    ok = ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 10-19/100",
          "ETag: \"abc\"", "Last-Modified: Sun, 06 Dec 2026 10:00:00 GMT",
          "Content-Type: application/octet-stream"]
    case("206", ok, b"0123456789")
    case("206-long-body", ok, b"0123456789" * 3)
    case("206-short-body", ok, b"01234")
    case("probe", ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-9/100"],
         b"0123456789", probe=True, off=0)
    case("probe-star", ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-9/*"],
         b"0123456789", probe=True, off=0)
    case("probe-empty", ["HTTP/1.1 206 Partial Content", "Content-Range: bytes */0"],
         probe=True, off=0)
    case("whole-200", ["HTTP/1.1 200 OK", "Content-Type: text/html"], b"<html>" * 50)
    case("wrong-range", ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-9/100"],
         b"0123456789")
    case("range-overflow", ["HTTP/1.1 206 Partial Content",
                            "Content-Range: bytes 10-19/184467440737095516160"], b"0123456789")
    case("no-range", ["HTTP/1.1 206 Partial Content"], b"0123456789")
    case("gzip", ok + ["Content-Encoding: gzip"], b"\x1f\x8b" + b"\0" * 8)
    case("gzip-then-identity", ok + ["Content-Encoding: gzip", "Content-Encoding: identity"],
         b"0123456789")
    case("long-etag", ok[:2] + ["ETag: \"" + "e" * 400 + "\""], b"0123456789")
    case("redirect-then-206", ["HTTP/1.1 302 Found", "Location: http://127.0.0.1:1/x",
                               "Content-Length: 0", ""] + ok, b"0123456789")
    case("control-chars", ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 10-19/100",
                           "Content-Encoding: \x1b[31mx\xc2\x9b", "Content-Type: \x07\xff"],
         b"0123456789")
    case("s3-error", ["HTTP/1.1 403 Forbidden", "Content-Type: application/xml"],
         b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code>"
         b"<Message>Access \x1b denied</Message></Error>")
    case("s3-error-unclosed", ["HTTP/1.1 404 Not Found"], b"<Error><Code>NoSuchKey")
    case("snippet-long", ["HTTP/1.1 500 Oops"], b"x" * 3000)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py DIR")
    corpus = sys.argv[1]
    npy = os.path.join(corpus, "fuzz_npy")
    os.makedirs(npy, exist_ok=True)
    numpy_seeds(npy)
    bad_seeds(npy)
    response = os.path.join(corpus, "fuzz_response")
    os.makedirs(response, exist_ok=True)
    response_seeds(response)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    copy_tests(root, corpus)


if __name__ == "__main__":
    main()
