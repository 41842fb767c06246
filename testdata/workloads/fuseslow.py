"""A FUSE passthrough that adds a fixed delay to every read.

usage: fuseslow.py BACKING MOUNTPOINT DELAY_MS [--rw] [--fail-rename=ERRNO]

Read-only unless --rw. --fail-rename=EBUSY (implies --rw) makes every
rename fail with that error, as renames on NFS or a cache shared between
processes do: a cache on it writes its temporary files but keeps no
entry.

Mounted without kernel_cache, as FUSE mounts are by default: the kernel
drops a file's cached pages each time it is opened, so every run reads
it again through this process.
"""
import errno
import os
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class Slow(Operations):
    def __init__(self, root, delay, rw=False, fail_rename=0):
        self.root, self.delay, self.rw, self.fail_rename = root, delay, rw, fail_rename

    def _p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._p(path))
        except OSError as e:
            raise FuseOSError(e.errno)
        return {k: getattr(st, k) for k in ("st_mode", "st_size", "st_nlink", "st_uid", "st_gid",
                                            "st_atime", "st_mtime", "st_ctime")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._p(path))

    def open(self, path, flags):
        if self.rw:
            return self._os(os.open, self._p(path), flags & ~os.O_CREAT)
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        return os.open(self._p(path), os.O_RDONLY)

    def _os(self, f, *args):
        """Runs f, passing its error on to the caller through FUSE."""
        if not self.rw:
            raise FuseOSError(errno.EROFS)
        try:
            return f(*args)
        except OSError as e:
            raise FuseOSError(e.errno)

    def create(self, path, mode, fi=None):
        return self._os(os.open, self._p(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def write(self, path, data, offset, fh):
        return self._os(os.pwrite, fh, data, offset)

    def truncate(self, path, length, fh=None):
        self._os(os.truncate, self._p(path), length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return 0

    def mkdir(self, path, mode):
        self._os(os.mkdir, self._p(path), mode)

    def rmdir(self, path):
        self._os(os.rmdir, self._p(path))

    def unlink(self, path):
        self._os(os.unlink, self._p(path))

    def rename(self, old, new):
        if self.fail_rename:
            raise FuseOSError(self.fail_rename)
        self._os(os.rename, self._p(old), self._p(new))

    def chmod(self, path, mode):
        self._os(os.chmod, self._p(path), mode)

    def chown(self, path, uid, gid):
        self._os(os.chown, self._p(path), uid, gid)

    def utimens(self, path, times=None):
        self._os(os.utime, self._p(path), times)

    def read(self, path, size, offset, fh):
        time.sleep(self.delay)
        if LOG:
            LOG.write("%d %d\n" % (offset, size))
            LOG.flush()
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)


# FUSESLOW_LOG names a file that gets one "OFFSET SIZE" line per read
# request: the request sizes and count the kernel sent.
LOG = open(os.environ["FUSESLOW_LOG"], "a") if os.environ.get("FUSESLOW_LOG") else None

if __name__ == "__main__":
    opts = sys.argv[4:]
    fail = 0
    for o in opts:
        if o.startswith("--fail-rename="):
            fail = getattr(errno, o.split("=", 1)[1])
    rw = "--rw" in opts or fail != 0
    FUSE(Slow(sys.argv[1], float(sys.argv[3]) / 1000, rw, fail), sys.argv[2], foreground=True, ro=not rw,
         allow_other=True, nothreads=True)
