# Disk reads from known lines, for the Python stack tests: each line the
# tests expect in a stack carries a marker comment naming it. The files
# are evicted by the test before the run.
import mmap
import os
import sys
import threading
import time

CHUNK = 64 * 1024


def read_range(path, start, length):
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        left = length
        while left > 0:
            b = f.read(min(CHUNK, left))  # @read_range
            if not b:
                break
            left -= len(b)


def load_weights(path):
    read_range(path, 0, os.path.getsize(path))  # @load_weights


def map_weights(path):
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        total = 0
        for off in range(0, len(m), 4096):
            total += m[off]  # @map_weights
        m.close()
    return total


def child_read(path):
    load_weights(path)  # @child_read


def head_of(path):
    read_range(path, 0, os.path.getsize(path) // 4)  # @head_of


def rest_of(path):
    size = os.path.getsize(path)
    read_range(path, size // 4, size - size // 4)  # @rest_of


def fetch(url, dest):
    import urllib.request

    with urllib.request.urlopen(url) as r, open(dest, "wb") as out:  # @fetch
        while True:
            b = r.read(CHUNK)
            if not b:
                break
            out.write(b)


READER = '''
def reader_{i}(path):
    with open(path, "rb", buffering=0) as f:
        while f.read(65536):  # @reader_{i}
            pass
'''


def many_threads(workdir, paths):
    # One function per thread, each in a module of the user's own.
    with open(os.path.join(workdir, "readers.py"), "w") as f:
        for i in range(len(paths)):
            f.write(READER.format(i=i))
    sys.path.insert(0, workdir)
    import readers

    threads = [threading.Thread(target=getattr(readers, "reader_%d" % i), args=(p,)) for i, p in enumerate(paths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Stacks are decoded from the process's memory while it lives: on a
    # loaded machine the last threads' new stacks could still be queued
    # when the process exits (the same race as the one at the start).
    time.sleep(0.5)


if __name__ == "__main__":
    how, args = sys.argv[1], sys.argv[2:]
    # coldtrace locates the interpreter in user space after the exec; the
    # tests are about the stack, not that race (see spawn.py).
    time.sleep(0.6)
    if how == "read":
        load_weights(args[0])  # @module_read
        if len(args) > 1:
            time.sleep(float(args[1]))
    elif how == "mmap":
        map_weights(args[0])  # @module_mmap
    elif how == "split":
        head_of(args[0])  # @module_head
        rest_of(args[0])  # @module_rest
    elif how == "phases":
        # Two phases apart in time, each reading from its own line.
        head_of(args[0])  # @phase_head
        time.sleep(0.5)
        rest_of(args[0])  # @phase_rest
        if len(args) > 1:
            time.sleep(float(args[1]))
    elif how == "threads":
        many_threads(args[0], args[1:])
    elif how == "fork":
        import multiprocessing

        p = multiprocessing.get_context("fork").Process(target=child_read, args=(args[0],))
        p.start()  # @module_fork
        p.join()
        sys.exit(p.exitcode)
    elif how == "fetch":
        fetch(args[0], args[1])  # @module_fetch
