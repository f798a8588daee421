#!/usr/bin/env python3
"""make_hostile.py DIR - the hostile importer inputs of tests/hostile/importers/.

Each file is small and deterministic; tests/hostile/importers/README.md lists
what each one attacks and the error wpack must give. Run it again to
regenerate the checked-in files (needs only the Python standard library,
plus zstd via the `zstd` command for the .tar.zst bomb when present).
"""
import bz2
import gzip
import io
import json
import lzma
import os
import struct
import subprocess
import sys
import tarfile
import zipfile

D = sys.argv[1]
os.makedirs(D, exist_ok=True)


def zip_write(path, members, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", method) as z:
        for name, data in members:
            zi = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = method
            z.writestr(zi, data)


def u(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def storage_pid(key, numel, typ="FloatStorage"):
    return (b"(" + u("storage") + b"ctorch\n" + typ.encode() + b"\n" + u(key) + u("cpu") +
            b"J" + struct.pack("<i", numel) + b"tQ")


def tensor(key, numel, offset, size, stride, typ="FloatStorage"):
    def tup(v):
        return b"(" + b"".join(b"J" + struct.pack("<i", x) if abs(x) < 2**31 else
                               b"\x8a\x08" + struct.pack("<q", x) for x in v) + b"t"
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage_pid(key, numel, typ) +
            b"J" + struct.pack("<i", offset) + tup(size) + tup(stride) + b"\x89" +
            b"ccollections\nOrderedDict\n)R" + b"tR")


def state_dict(pairs):
    return b"\x80\x02}(" + b"".join(u(k) + v for k, v in pairs) + b"u."


def torch_zip(path, pkl, storages=(), extra=()):
    members = [("archive/data.pkl", pkl)] + [("archive/data/" + k, v) for k, v in storages]
    members += list(extra) + [("archive/version", b"3\n")]
    zip_write(path, members)


f4 = struct.pack("<4f", 1, 2, 3, 4)
# --- pickles that try to run code
torch_zip(f"{D}/pickle_os_system.pt", b"\x80\x02cos\nsystem\n" + u("echo pwned") + b"\x85R.")
torch_zip(f"{D}/pickle_builtins_eval.pt", b"\x80\x02cbuiltins\neval\n" + u("1+1") + b"\x85R.")
torch_zip(f"{D}/pickle_load_from_bytes.pt",
          b"\x80\x02ctorch.storage\n_load_from_bytes\n" + b"C\x04abcd\x85R.")
torch_zip(f"{D}/pickle_stack_global.pt",
          b"\x80\x04" + b"\x8c\x05posix\x8c\x06system\x93" + u("id") + b"\x85R.")
torch_zip(f"{D}/pickle_memo_huge.pt", b"\x80\x02}r\xff\xff\xff\xff.")
torch_zip(f"{D}/pickle_cycle.pt", b"\x80\x02}" + u("a") + b"]q\x00h\x00as.")
torch_zip(f"{D}/pickle_truncated.pt", b"\x80\x02}(" + u("w"))
# --- storages and views
torch_zip(f"{D}/storage_key_traversal.pt", state_dict([("w", tensor("../../../etc/passwd", 4, 0, [4], [1]))]),
          [("0", f4)])
torch_zip(f"{D}/storage_key_missing.pt", state_dict([("w", tensor("7", 4, 0, [4], [1]))]), [("0", f4)])
torch_zip(f"{D}/storage_size_mismatch.pt", state_dict([("w", tensor("0", 400, 0, [4], [1]))]), [("0", f4)])
torch_zip(f"{D}/view_outside_storage.pt", state_dict([("w", tensor("0", 4, 2, [4], [1]))]), [("0", f4)])
torch_zip(f"{D}/size_overflow.pt",
          state_dict([("w", tensor("0", 4, 0, [2**62, 2**62, 16], [0, 0, 0]))]), [("0", f4)])
torch_zip(f"{D}/stride_overflow.pt",
          state_dict([("w", tensor("0", 4, 0, [2, 2], [2**62, 2**62]))]), [("0", f4)])
# one storage read as f32 [4] and as f16 [4]: the second became an alias of
# the first (an f32) instead of the f16 its pickle says
torch_zip(f"{D}/storage_two_dtypes.pt", state_dict([("a", tensor("0", 4, 0, [4], [1])),
                                                    ("b", tensor("0", 8, 0, [4], [1], "HalfStorage"))]),
          [("0", f4)])
# a dict key with a NUL: the name was cut there ('a'), silently; an empty
# key at the top named its tensor 'tensor' (the bare tensor's name)
torch_zip(f"{D}/key_nul.pt", state_dict([("a\x00b", tensor("0", 4, 0, [4], [1]))]), [("0", f4)])
torch_zip(f"{D}/key_empty.pt", state_dict([("", tensor("0", 4, 0, [4], [1]))]), [("0", f4)])
torch_zip(f"{D}/rank_too_high.pt", state_dict([("w", tensor("0", 4, 0, [1] * 9, [1] * 9))]), [("0", f4)])
# --- zip structure
good = state_dict([("w", tensor("0", 4, 0, [4], [1]))])
torch_zip(f"{D}/_good.pt", good, [("0", f4)])
raw = open(f"{D}/_good.pt", "rb").read()
open(f"{D}/zip_truncated.pt", "wb").write(raw[: len(raw) // 2])
# central directory entry for data/0 points past the end of the file
i = raw.find(b"PK\x01\x02", raw.find(b"PK\x01\x02") + 4)
bad = bytearray(raw)
struct.pack_into("<I", bad, i + 42, len(raw) + 1000)
open(f"{D}/zip_offset_outside.pt", "wb").write(bytes(bad))
# entry sizes that overflow (zip64 extra with 2^64-1)
zip_write(f"{D}/zip_dotdot_name.pt", [("archive/data.pkl", good), ("archive/../../evil", f4)])
zip_write(f"{D}/zip_absolute_name.pt", [("archive/data.pkl", good), ("/etc/evil", f4)])
with zipfile.ZipFile(f"{D}/zip_symlink.pt", "w") as z:
    z.writestr("archive/data.pkl", good)
    zi = zipfile.ZipInfo("archive/data/0")
    zi.create_system = 3
    zi.external_attr = (0o120777 << 16)
    z.writestr(zi, "/etc/passwd")
os.remove(f"{D}/_good.pt")
# --- legacy format: a bare pickle stream starting with the magic number
open(f"{D}/legacy_format.pt", "wb").write(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.")
# --- zip bombs: 512 MiB of zeros as one .npy member
hdr = b"\x93NUMPY\x01\x00" + struct.pack("<H", 118)
d = "{'descr': '<f4', 'fortran_order': False, 'shape': (67108864,), }"
hdr += (d + " " * (118 - len(d) - 1) + "\n").encode()
with zipfile.ZipFile(f"{D}/bomb.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    with z.open("w.npy", "w", force_zip64=True) as f:
        f.write(hdr)
        zero = bytes(1 << 20)
        for _ in range(256):
            f.write(zero)
# --- a deflated member whose recorded size (local and central) is not what
# it inflates to: libarchive's message for it ended with a newline
buf = io.BytesIO()
zip_write_to = zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED)
zi = zipfile.ZipInfo("w.npy", date_time=(2024, 1, 1, 0, 0, 0))
zi.compress_type = zipfile.ZIP_DEFLATED
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", 118)
d = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
npy += (d + " " * (118 - len(d) - 1) + "\n").encode() + bytes(16)
zip_write_to.writestr(zi, npy)
zip_write_to.close()
z = bytearray(buf.getvalue())
for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size fields
    i = z.index(sig)
    z[i + at:i + at + 4] = struct.pack("<I", 0xFFFFFFF0)
open(f"{D}/zip_wrong_size.npz", "wb").write(bytes(z))
# --- a stored Fortran-order member (transposed through a temporary file)
# whose CRC-32 (local and central) is off by one bit: was packed silently
fnpy = b"\x93NUMPY\x01\x00" + struct.pack("<H", 118)
d = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }"
fnpy += (d + " " * (118 - len(d) - 1) + "\n").encode() + f4
zip_write(f"{D}/zip_fortran_bad_crc.npz", [("w.npy", fnpy)])
z = bytearray(open(f"{D}/zip_fortran_bad_crc.npz", "rb").read())
for sig, at in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):  # CRC-32 fields
    i = z.index(sig)
    z[i + at] ^= 1
open(f"{D}/zip_fortran_bad_crc.npz", "wb").write(bytes(z))
try:
    tf = io.BytesIO()
    with tarfile.open(fileobj=tf, mode="w") as t:
        class Zeros(io.RawIOBase):
            def __init__(self, n):
                self.left = n
            def readinto(self, b):
                k = min(len(b), self.left)
                b[:k] = bytes(k)
                self.left -= k
                return k
        ti = tarfile.TarInfo("w.npy")
        ti.size = len(hdr) + (256 << 20)
        t.addfile(ti, io.BufferedReader(io.BytesIO(hdr + bytes(256 << 20))))
    z = subprocess.run(["zstd", "-19", "-q", "-c"], input=tf.getvalue(), capture_output=True, check=True)
    open(f"{D}/bomb.tar.zst", "wb").write(z.stdout)
except (OSError, subprocess.CalledProcessError):
    pass
# --- a .tar.bz2 (~250 bytes) whose first member, not a .npy, is 256 MiB of
# zeros: libarchive inflated it all to skip it, unchecked (2 GB took 8 s;
# a few KB of bzip2 hold terabytes), and the .npy after it was packed
bzc = bz2.BZ2Compressor(9)
skipped = [tarfile.TarInfo("junk.bin"), tarfile.TarInfo("w.npy")]
skipped[0].size = 256 << 20
skipped[1].size = len(fnpy)
parts = [bzc.compress(skipped[0].tobuf(format=tarfile.USTAR_FORMAT))]
zero = bytes(1 << 20)
for _ in range(256):
    parts.append(bzc.compress(zero))
parts.append(bzc.compress(skipped[1].tobuf(format=tarfile.USTAR_FORMAT) + fnpy +
                          bytes(-len(fnpy) % 512) + bytes(1024)))
parts.append(bzc.flush())
open(f"{D}/bomb_skipped.tar.bz2", "wb").write(b"".join(parts))
# --- a .tar.gz whose inflated stream starts with lrzip's magic: libarchive's
# filter_all spawned `lrzip -d` from $PATH on it
open(f"{D}/filter_program.tar.gz", "wb").write(gzip.compress(b"LRZI\x00\x06" + bytes(250), mtime=0))
# --- a .tar.gz whose gzip CRC-32 is off by one bit: libarchive never checks
# the trailer, and the tar inside is fine
tf = io.BytesIO()
with tarfile.open(fileobj=tf, mode="w", format=tarfile.USTAR_FORMAT) as t:
    ti = tarfile.TarInfo("w.npy")
    ti.size = len(fnpy)
    t.addfile(ti, io.BytesIO(fnpy))
gz = bytearray(gzip.compress(tf.getvalue(), mtime=0))
gz[-8] ^= 1
open(f"{D}/gzip_bad_crc.tar.gz", "wb").write(bytes(gz))
# --- a good .tar.gz member holding the whole tar, then a damaged one: the
# tensor is packed before the damage is found, past the tar's end
junk = bytearray(gzip.compress(b"x" * (1 << 20), mtime=0))
junk[-8] ^= 1
open(f"{D}/gzip_bad_crc_last.tar.gz", "wb").write(gzip.compress(tf.getvalue(), mtime=0) + bytes(junk))
# --- gzip_bad_crc.tar.gz inside another layer: libarchive's gzip filter read
# it (zlib checks only the outermost gzip), and the damaged tar packed
open(f"{D}/gzip_in_gzip.tar.gz", "wb").write(gzip.compress(bytes(gz), mtime=0))
open(f"{D}/gzip_in_xz.tar.xz", "wb").write(lzma.compress(bytes(gz)))


# --- a GNU sparse tar member (type 'S'): 512 bytes stored (the .npy header
# and zeros), then a hole up to 1 GiB + 128 bytes that libarchive fills with
# zeros: the bomb guard caught it, with the code of a read error
def octal(n, w):
    return ("%0*o" % (w - 1, n)).encode() + b"\0"


sp_hdr = b"\x93NUMPY\x01\x00" + struct.pack("<H", 118)
d = "{'descr': '<f4', 'fortran_order': False, 'shape': (268435456,), }"
sp_hdr += (d + " " * (118 - len(d) - 1) + "\n").encode()
sp_data = sp_hdr + bytes(512 - len(sp_hdr))
sp_real = len(sp_hdr) + (1 << 30)
h = bytearray(512)
h[0:5] = b"w.npy"
h[100:108], h[108:116], h[116:124] = octal(0o644, 8), octal(0, 8), octal(0, 8)
h[124:136], h[136:148] = octal(len(sp_data), 12), octal(0, 12)
h[156] = ord("S")
h[257:265] = b"ustar  \0"
h[386:398], h[398:410] = octal(0, 12), octal(len(sp_data), 12)  # the data stored
h[410:422], h[422:434] = octal(sp_real, 12), octal(0, 12)       # a hole to the end
h[483:495] = octal(sp_real, 12)                                  # the size it unpacks to
h[148:156] = b" " * 8
h[148:156] = ("%06o\0 " % sum(h)).encode()
open(f"{D}/tar_sparse.tar", "wb").write(bytes(h) + sp_data + bytes(1024))
# --- bundles
tf = io.BytesIO()
with tarfile.open(f"{D}/tar_symlink.tar", "w") as t:
    ti = tarfile.TarInfo("w.npy")
    ti.type = tarfile.SYMTYPE
    ti.linkname = "/etc/passwd"
    t.addfile(ti)
# a member 3 bytes short: the message named it by its tensor name and
# '.npy' ('enc.0.w.npy'), not by the path in the tar
with tarfile.open(f"{D}/tar_member_truncated.tar", "w") as t:
    ti = tarfile.TarInfo("enc/0/w.npy")
    ti.size = len(fnpy) - 3
    t.addfile(ti, io.BytesIO(fnpy[:-3]))
with tarfile.open(f"{D}/tar_dotdot.tar", "w") as t:
    ti = tarfile.TarInfo("../w.npy")
    ti.size = 4
    t.addfile(ti, io.BytesIO(b"abcd"))


# --- safetensors
def st(path, header, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


T = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
st(f"{D}/st_header_huge.safetensors", None, b"", raw_header=b"{}")
bad = bytearray(open(f"{D}/st_header_huge.safetensors", "rb").read())
struct.pack_into("<Q", bad, 0, 200_000_000)
open(f"{D}/st_header_huge.safetensors", "wb").write(bytes(bad))
st(f"{D}/st_overlap.safetensors", {"a": T, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12))
st(f"{D}/st_hole.safetensors", {"a": T, "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}}, bytes(16))
st(f"{D}/st_trailing.safetensors", {"a": T}, bytes(12))
st(f"{D}/st_truncated.safetensors", {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8))
st(f"{D}/st_size_mismatch.safetensors", {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, bytes(8))
st(f"{D}/st_shape_overflow.safetensors",
   {"a": {"dtype": "F32", "shape": [2**32, 2**32, 2**2], "data_offsets": [0, 8]}}, bytes(8))
st(f"{D}/st_duplicate.safetensors", None, bytes(8), raw_header=(
    b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
    b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'))
st(f"{D}/st_bad_dtype.safetensors", {"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}, bytes(1))
# --- manifest
os.makedirs(f"{D}/manifest_traversal", exist_ok=True)
json.dump({"tensors": [{"name": "w", "dtype": "f32", "shape": [4], "file": "../../etc/passwd"}]},
          open(f"{D}/manifest_traversal/manifest.json", "w"))
json.dump({"tensors": [{"name": "w", "dtype": "f32", "shape": [4], "file": "w.bin", "offset": 2**62}]},
          open(f"{D}/manifest_offset.json", "w"))
open(f"{D}/w.bin", "wb").write(f4)
