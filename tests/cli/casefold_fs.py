#!/usr/bin/env python3
"""casefold_fs.py BACKING MOUNTPOINT - a case-insensitive file system for
the tests (FUSE, python3-fusepy): every name is looked up and stored in
lower case under BACKING, as ext4 casefold, vfat, exfat, APFS and NTFS
take 'A.npy' and 'a.npy' for one file. Inode numbers are BACKING's
(use_ino), so one file has one number under any spelling. Runs in the
foreground until unmounted."""
import os
import sys

from fusepy import FUSE, Operations

STAT = ('st_atime', 'st_ctime', 'st_gid', 'st_mode', 'st_mtime', 'st_nlink', 'st_size', 'st_uid',
        'st_ino')
STATVFS = ('f_bavail', 'f_bfree', 'f_blocks', 'f_bsize', 'f_favail', 'f_ffree', 'f_files',
           'f_flag', 'f_frsize', 'f_namemax')


class CaseFold(Operations):
    def __init__(self, root):
        self.root = root

    def _p(self, path):
        return os.path.join(self.root, path.lstrip('/').lower())

    def getattr(self, path, fh=None):
        st = os.lstat(self._p(path))
        return {k: getattr(st, k) for k in STAT}

    def readdir(self, path, fh):
        return ['.', '..'] + os.listdir(self._p(path))

    def mkdir(self, path, mode):
        os.mkdir(self._p(path), mode)

    def rmdir(self, path):
        os.rmdir(self._p(path))

    def unlink(self, path):
        os.unlink(self._p(path))

    def rename(self, old, new):
        os.rename(self._p(old), self._p(new))

    def link(self, target, source):
        os.link(self._p(source), self._p(target))

    def chmod(self, path, mode):
        os.chmod(self._p(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self._p(path), uid, gid)

    def truncate(self, path, length, fh=None):
        os.truncate(self._p(path), length)

    def utimens(self, path, times=None):
        os.utime(self._p(path), times)

    def open(self, path, flags):
        return os.open(self._p(path), flags)

    def create(self, path, mode, fi=None):
        return os.open(self._p(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)

    def fsync(self, path, datasync, fh):
        os.fsync(fh)

    def fsyncdir(self, path, datasync, fh):
        return 0

    def statfs(self, path):
        s = os.statvfs(self._p(path))
        return {k: getattr(s, k) for k in STATVFS}


if __name__ == '__main__':
    # no kernel cache of names or attributes: "OUT.X" looked up before "out.x"
    # was replaced must not keep the old file (a real folding file system
    # compares names folded in its dentry cache)
    FUSE(CaseFold(sys.argv[1]), sys.argv[2], foreground=True, use_ino=True, nothreads=True,
         entry_timeout=0, attr_timeout=0, negative_timeout=0)
