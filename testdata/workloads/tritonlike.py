"""Fills a kernel cache laid out as Triton's (FileCacheManager), with
cc as the compiler: for each of N kernels, look its group file up, and
on a miss compile it, write the files under a tmp.pid_* directory in the
key directory and rename them into place.

usage: tritonlike.py N      (the cache is $TRITON_CACHE_DIR)

A rename that fails is reported on stderr and the kernel goes on
uncached, as a framework that only logs it would: the next run compiles
it again. Prints one line per kernel: "hit", "kept" or "not kept".
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

SOURCE = "int kernel_%d(int x) { return x * %d + 1; }\n"


def compile_kernel(i):
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "k.c"), os.path.join(d, "k.o")
        with open(src, "w") as f:
            f.write(SOURCE % (i, i))
        subprocess.run(["cc", "-O2", "-c", src, "-o", obj], check=True)
        with open(obj, "rb") as f:
            return f.read()


def main():
    root = os.environ["TRITON_CACHE_DIR"]
    os.makedirs(root, exist_ok=True)
    for i in range(int(sys.argv[1])):
        key = hashlib.sha256(b"kernel%d" % i).hexdigest()[:32]
        d = os.path.join(root, key)
        group = os.path.join(d, "__grp__kernel_%d.json" % i)
        if os.path.exists(group):
            with open(group, "rb") as f:
                f.read()
            print("hit")
            continue
        obj = compile_kernel(i)
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, "tmp.pid_%d_%s" % (os.getpid(), uuid.uuid4().hex[:8]))
        os.makedirs(tmp)
        kept = True
        for name, data in (("kernel_%d.o" % i, obj), (os.path.basename(group), b"{}")):
            p = os.path.join(tmp, name)
            with open(p, "wb") as f:
                f.write(data)
            try:
                os.replace(p, os.path.join(d, name))
            except OSError as e:
                print("cache write failed: %s" % e, file=sys.stderr)
                kept = False
        shutil.rmtree(tmp, ignore_errors=True)
        print("kept" if kept else "not kept")


if __name__ == "__main__":
    main()
