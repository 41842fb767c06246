"""Python workloads of coldtrace's bench (cmd/bench), the twin of work.c.

    python3 work.py START_NS MODE ARGS...

It sleeps until CLOCK_MONOTONIC START_NS (0: start at once), times its
work on the same clock and prints one JSON line in work.c's format, so
the harness compares traced and untraced runs of Python as it does C:

    pysmallfiles TREE N   stat, open, read, close TREE/dNNN/fNNNNN.dat (work.c's
                          mkfiles layout), N files, absolute paths
    pyimport LIST         import every module named in LIST (one a line)
    pyread FILE           read FILE start to end, 1 MiB os.read calls
    pyread64k FILE        the same in 64 KiB reads, from a function of its own
                          (a Python stack at each cold fill)
    pymmap FILE           map FILE and read one byte of each page
    pycoldimport DIR N    import coldpkg.m0000 ... N modules from DIR (the
                          harness evicts their .py and .pyc first)
    mkcoldpkg DIR N       write DIR/coldpkg with N modules and their .pyc (setup)
    pymodules OUT [MAX]   write the importable modules to OUT (setup), at most MAX (0: all)
    pylong SECONDS DIR    32 threads reading and re-reading DIR's files,
                          a compiler subprocess every few seconds
"""

import json
import os
import sys
import time


def cpu_ns():
    return time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID)


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def small_files(tree, n):
    check = 0
    for i in range(n):
        p = "%s/d%03d/f%05d.dat" % (tree, i // 100, i)
        st = os.stat(p)
        fd = os.open(p, os.O_RDONLY)
        try:
            b = os.read(fd, st.st_size)
        finally:
            os.close(fd)
        check += len(b)
    return check


def imports(listfile):
    import importlib
    import warnings

    warnings.simplefilter("ignore")
    with open(listfile) as f:
        names = [l.strip() for l in f if l.strip()]
    for name in names:
        importlib.import_module(name)
    return len(names)


def read_file(path):
    fd = os.open(path, os.O_RDONLY)
    total = 0
    try:
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            total += len(b)
    finally:
        os.close(fd)
    return total


def read_chunks(path, chunk):
    fd = os.open(path, os.O_RDONLY)
    total = 0
    try:
        while True:
            b = os.read(fd, chunk)
            if not b:
                break
            total += len(b)
    finally:
        os.close(fd)
    return total


def fault_pages(path):
    import mmap

    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        total = 0
        for off in range(0, len(m), 4096):
            total += m[off]
        m.close()
    return total


MODULE = '''"""Module {i} of the bench's evicted package."""

TABLE = {table!r}


def value(x):
    return sum(TABLE) + x * {i}


class Thing{i}:
    def __init__(self, n):
        self.n = n

    def scaled(self):
        return value(self.n)
'''


def make_cold_package(root, n):
    import compileall

    pkg = os.path.join(root, "coldpkg")
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("")
    for i in range(n):
        with open(os.path.join(pkg, "m%04d.py" % i), "w") as f:
            f.write(MODULE.format(i=i, table=list(range(i % 97, i % 97 + 200))))
    compileall.compile_dir(pkg, quiet=1)
    # Clean pages only: the harness evicts them before each run.
    os.sync()
    return n


def cold_imports(root, n):
    import importlib

    sys.path.insert(0, root)
    for i in range(n):
        importlib.import_module("coldpkg.m%04d" % i)
    return n


# Modules with effects beyond their import (a browser, a GUI, printed
# text) or that are tests.
SKIP_PREFIXES = ("test", "idlelib", "turtledemo", "tkinter", "turtle", "antigravity", "this",
                 "__main__", "__hello__", "__phello__", "lib2to3.tests", "numpy.tests",
                 "ensurepip", "pydoc_data", "numpy.f2py", "numpy.distutils")


def skip(name):
    parts = name.split(".")
    if any(p in ("tests", "test", "testing", "_tests", "conftest", "setup", "__main__") for p in parts):
        return True
    return any(name == s or name.startswith(s + ".") for s in SKIP_PREFIXES)


def modules(out, limit=0):
    """Lists the non-test modules of the standard library and numpy (and
    torch when installed) that this interpreter imports without error,
    in one process, in the order they imported; the first limit of them
    when limit is not 0."""
    import importlib
    import pkgutil
    import warnings

    warnings.simplefilter("ignore")
    roots = sorted(sys.stdlib_module_names) + ["numpy", "torch"]
    ok = []
    seen = set()

    def attempt(name):
        if name in seen or skip(name):
            return None
        seen.add(name)
        try:
            m = importlib.import_module(name)
        except BaseException:
            return None
        ok.append(name)
        return m

    for root in roots:
        if limit and len(ok) >= limit:
            break
        m = attempt(root)
        if m is None or not hasattr(m, "__path__"):
            continue
        for info in pkgutil.walk_packages(m.__path__, root + ".", onerror=lambda n: None):
            if limit and len(ok) >= limit:
                break
            attempt(info.name)
    if limit:
        del ok[limit:]
    with open(out, "w") as f:
        f.write("\n".join(ok) + "\n")
    return len(ok)


def long_run(seconds, tree):
    """32 threads read and re-read the files under tree; every 3 s a C
    compiler runs in a subprocess."""
    import subprocess
    import tempfile
    import threading

    files = []
    for d, _, names in os.walk(tree):
        files.extend(os.path.join(d, n) for n in names)
    files.sort()
    stop = mono_ns() + int(seconds * 1e9)
    total = [0] * 32

    def reader(k):
        i = k
        while mono_ns() < stop:
            p = files[i % len(files)]
            with open(p, "rb") as f:
                total[k] += len(f.read())
            i += 32
            if i % 256 == k:
                time.sleep(0.005)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(32)]
    for t in threads:
        t.start()
    compiles = 0
    with tempfile.TemporaryDirectory() as td:
        src = os.path.join(td, "k.c")
        with open(src, "w") as f:
            f.write("int k(int x) { return x * 3 + 1; }\n")
        while mono_ns() < stop:
            subprocess.run(["cc", "-O2", "-c", "-o", os.path.join(td, "k.o"), src], check=True)
            compiles += 1
            time.sleep(min(3.0, max(0.0, (stop - mono_ns()) / 1e9)))
    for t in threads:
        t.join()
    return sum(total) + compiles


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    start_at = int(sys.argv[1])
    mode, args = sys.argv[2], sys.argv[3:]
    entry = mono_ns()
    late = start_at > 0 and entry > start_at
    if start_at > 0 and not late:
        time.sleep((start_at - entry) / 1e9)
        while mono_ns() < start_at:
            pass
    t0 = mono_ns()
    c0 = cpu_ns()
    if mode == "pysmallfiles":
        check = small_files(args[0], int(args[1]))
    elif mode == "pyimport":
        check = imports(args[0])
    elif mode == "pyread":
        check = read_file(args[0])
    elif mode == "pyread64k":
        check = read_chunks(args[0], 64 << 10)
    elif mode == "pymmap":
        check = fault_pages(args[0])
    elif mode == "pycoldimport":
        check = cold_imports(args[0], int(args[1]))
    elif mode == "mkcoldpkg":
        check = make_cold_package(args[0], int(args[1]))
    elif mode == "pymodules":
        check = modules(args[0], int(args[1]) if len(args) > 1 else 0)
    elif mode == "pylong":
        check = long_run(float(args[0]), args[1])
    else:
        sys.exit("work.py: unknown mode %r" % mode)
    end = mono_ns()
    print(json.dumps({"entry_ns": entry, "start_ns": t0, "elapsed_ns": end - t0, "late": late,
                      "check": check, "switches": 0, "cpu_ns": cpu_ns() - c0, "phases_ns": []}),
          flush=True)


if __name__ == "__main__":
    main()
