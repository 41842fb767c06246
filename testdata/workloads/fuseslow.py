"""A read-only FUSE passthrough that adds a fixed delay to every read.

usage: fuseslow.py BACKING MOUNTPOINT DELAY_MS

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
    def __init__(self, root, delay):
        self.root, self.delay = root, delay

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
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        return os.open(self._p(path), os.O_RDONLY)

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
    FUSE(Slow(sys.argv[1], float(sys.argv[3]) / 1000), sys.argv[2], foreground=True, ro=True,
         allow_other=True, nothreads=True)
