"""The shape generator: one logical job (download a body into a cache,
read a model file, compile into a cache) done in a way chosen at random
by a seed, the ways real programs do it, with what it did written down
as the oracle coldtrace's record is compared with.

  gen.py prepare SEED ROOT [DIM=VALUE...]
      chooses the case for SEED (DIM=VALUE pins a dimension), creates
      its inputs under ROOT, drops them from the page cache and checks
      with mincore(2) that none of their pages is cached; writes the
      case to ROOT/case.json and prints it.
  gen.py cover N
      prints seeds below N that together give every dimension every
      value (the e2e tests' fixed list).
  gen.py dims
      prints the dimensions and their values.
  gen.py run ROOT/case.json ADDR
      does the job (ADDR: the loopback body server, HOST:PORT) and
      prints the oracle, one JSON line, on stdout.

The body server speaks a bare protocol so that the bytes received are
exactly the body's: the client sends "SEED SIZE OFFSET LENGTH\\n", the
server sends those LENGTH bytes of the SIZE-byte body of SEED and
closes.

Paths are bytes (names need not be UTF-8): case.json and the oracle
carry them in base64.
"""
import base64
import ctypes
import json
import mmap
import os
import queue
import random
import socket
import subprocess
import sys
import threading
import time

PAGE = 4096
MIB = 1 << 20

# The dimensions and their values; prepare picks one of each by seed.
DIMS = {
    "job": ["read", "download", "compile"],
    "name": ["short", "len", "len255", "hex64", "nonutf8", "space", "newline", "deep"],
    # read: how the model file is read
    "read": ["read", "pread", "readv", "mmap", "sendfile", "copy_file_range", "splice", "uring", "uring_async", "direct"],
    # read: who reads it
    "reader": ["main", "thread", "child"],
    # download: who receives and who writes
    "writer": ["receiver", "pool", "chunks", "child"],
    "receiver": ["main", "thread"],
    # download and compile: the name the output is written under first
    "temp": ["none", "samedir", "otherdir"],
    # download: the receiving thread ends before or after the writers
    "exit": ["after", "before"],
    # download: the cache is on a disk or on tmpfs (/dev/shm), where
    # writes fill no page cache the page-cache events see
    "fs": ["disk", "tmpfs"],
    # read: the file is read where it is, or by a child in its own mount
    # namespace through a bind mount of its directory; with bindlive, by
    # a grandchild, while the child that made the namespace stays on (a
    # container's init and a worker)
    "mount": ["none", "bind", "bindlive"],
}


def b64(b):
    return base64.b64encode(b).decode()


def unb64(s):
    return base64.b64decode(s)


SAFE = b"abcdefghijklmnopqrstuvwxyz0123456789._-"


def component(rng, n):
    """A file name of n bytes (1-255) that is neither "." nor ".."."""
    while True:
        name = bytes(rng.choice(SAFE) for _ in range(n))
        if name not in (b".", b".."):
            return name


def shaped_name(rng, kind):
    """The last component of a path, by kind."""
    if kind == "short":
        return component(rng, 1)
    if kind == "len":
        return component(rng, rng.randint(1, 255))
    if kind == "len255":
        return component(rng, 255)
    if kind == "hex64":
        return bytes(rng.choice(b"0123456789abcdef") for _ in range(64))
    if kind == "nonutf8":
        return b"caf\xe9 \xff\xfe" + component(rng, rng.randint(1, 40))
    if kind == "space":
        return b" with space " + component(rng, rng.randint(1, 40)) + b" "
    if kind == "newline":
        return b"two\nlines\n" + component(rng, rng.randint(1, 40))
    return component(rng, rng.randint(1, 255))


def shaped_dir(rng, base, kind):
    """The directory a shaped file goes in: for "deep", 10-60 levels of
    1-100-byte names, the whole path kept under 4,000 bytes."""
    if kind != "deep":
        return base
    path = base
    for _ in range(rng.randint(10, 60)):
        part = component(rng, rng.randint(1, 100))
        if len(path) + 1 + len(part) > 3700:
            break
        path = os.path.join(path, part)
    return path


def choose(seed, pins):
    rng = random.Random(seed)
    case = {dim: rng.choice(values) for dim, values in DIMS.items()}
    for k, v in pins.items():
        if k not in DIMS or v not in DIMS[k]:
            sys.exit("unknown pin %s=%s (dimensions: %s)" % (k, v, json.dumps(DIMS)))
        case[k] = v
    if case["writer"] == "child":
        case["receiver"] = "main"
    if case["writer"] != "pool":
        case["exit"] = "after"
    # a case names only the dimensions its job has
    if case["mount"] != "none":
        case["reader"] = "child"  # unshare(CLONE_NEWNS) needs a process of one thread
    keep = {"read": ("read", "reader", "mount"), "download": ("writer", "receiver", "temp", "exit", "fs"), "compile": ("temp",)}
    for dim in DIMS:
        if dim not in ("job", "name") + keep[case["job"]]:
            del case[dim]
    case["seed"] = seed
    return case, rng


libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident(path):
    """Pages of path in the page cache (mincore(2) of a mapping that is
    never touched), the ground truth a case's cache state is checked by."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        try:
            vec = ctypes.create_string_buffer((size + PAGE - 1) // PAGE)
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return sum(b & 1 for b in vec.raw[: (size + PAGE - 1) // PAGE])
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def write_evicted(path, size, fill):
    """Writes size bytes to path, syncs, drops its pages and checks that
    none is cached."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    left, block = size, (fill * (MIB // len(fill) + 1))[:MIB]
    while left:
        left -= os.write(fd, block[: min(left, MIB)])
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    n = resident(path)
    if n != 0:
        sys.exit("%r: %d pages still cached after POSIX_FADV_DONTNEED" % (path, n))


def prepare(seed, root, pins):
    case, rng = choose(seed, pins)
    root = os.fsencode(os.path.abspath(root))
    home = os.path.join(root, b"home")
    cache = os.path.join(home, b".cache", b"shapes")
    stage = os.path.join(home, b".cache", b"shapes-stage")
    for d in (cache, stage):
        os.makedirs(d, exist_ok=True)
    if case.get("fs") == "tmpfs":
        # a cache on tmpfs: the run's own directory under /dev/shm
        shm = os.path.join(b"/dev/shm", b"coldtrace-shapes-" + os.path.basename(root) + b"-%d" % os.getpid())
        cache, stage = os.path.join(shm, b"shapes"), os.path.join(shm, b"shapes-stage")
        for d in (cache, stage):
            os.makedirs(d, exist_ok=True)
        case["cleanup"] = b64(shm)
    name = shaped_name(rng, case["name"])
    final = os.path.join(shaped_dir(rng, cache, case["name"]), name)
    case["home"] = b64(home)
    if case["job"] == "read":
        size = rng.randint(1, 8) * MIB + rng.randint(0, MIB - 1)
        if case["read"] == "mmap":
            # big enough for readahead's large folios, which a fault
            # maps whole
            size *= 4
        case["size"] = size
        case["path"] = b64(final)
        write_evicted(final, size, b"model!%d " % seed)
        if case["mount"] != "none":
            view = os.path.join(root, b"view")
            os.makedirs(view, exist_ok=True)
            case["view"] = b64(os.path.join(view, name))
        case["scratch"] = b64(os.path.join(root, b"scratch.out"))
    else:
        if case["temp"] == "none":
            temp = final
        else:
            tname = name + b".incomplete" if len(name) <= 244 else component(rng, 16) + b".part"
            tdir = os.path.dirname(final) if case["temp"] == "samedir" else stage
            temp = os.path.join(tdir, tname)
        case["path"], case["temp_path"] = b64(final), b64(temp)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.makedirs(os.path.dirname(temp), exist_ok=True)
    if case["job"] == "download":
        case["size"] = rng.randint(9, 32) * MIB // 2 + rng.randint(0, 64 << 10)
        case["piece"] = rng.choice([16 << 10, 64 << 10, 256 << 10, MIB])
        case["writers"] = rng.randint(2, 6)
        case["connections"] = rng.randint(2, 6) if case["writer"] == "chunks" else 1
    if case["job"] == "compile":
        src = os.path.join(root, b"src", name[:200] + b".c")
        body = b"int shape_%d(int x) { return x * %d; }\n" % (seed, seed + 1)
        body += b"".join(b"int f%d(int x) { return x + %d; }\n" % (i, i) for i in range(rng.randint(1, 400)))
        write_evicted(src, len(body), body)
        case["source"] = b64(src)
        case["source_size"] = len(body)
    if case["job"] == "read":
        # A loader reads a header first (safetensors: its length, then
        # the header) and the rest from where it ended, so the rest
        # starts where no readahead window does; picked last, so the
        # choices above stay each seed's own.
        case["header_pages"] = rng.randint(0, 7)
        # the rest read at offsets given to the call, or at the file's
        # position
        case["offsets"] = rng.random() < 0.5
        # io_uring requests in chunks of whole pages that start inside
        # readahead windows or at them, vectored or not, on a registered
        # file or a descriptor, at offsets or the file's position
        case["uring_chunk"] = rng.choice([MIB, 20 << 10, 132 << 10, rng.randint(1, 64) * PAGE])
        case["uring_ops"] = "".join(op for op in ("+fixed", "+readv", "+curpos") if rng.random() < 0.5)
    with open(os.path.join(root, b"case.json"), "w") as f:
        json.dump(case, f)
    print(json.dumps(case))


# ---- read --------------------------------------------------------------


def read_file(case, path, uring):
    """Reads path whole as case says; returns the bytes read."""
    how, scratch = case["read"], unb64(case["scratch"])
    if how in ("uring", "uring_async"):
        mode = ("inline" if how == "uring" else "async") + case.get("uring_ops", "")
        out = subprocess.run([uring, path, str(case.get("uring_chunk", MIB)), mode], check=True, capture_output=True)
        return int(out.stdout)
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    n = 0
    # the header in whole pages, each page read once, so pages_accessed
    # stays the file's pages (pread reads its chunks in a shuffled
    # order, mmap and O_DIRECT from the start)
    if how in ("read", "readv", "sendfile", "copy_file_range", "splice") and case.get("header_pages"):
        n = len(os.pread(fd, case["header_pages"] * PAGE, 0))
        os.lseek(fd, n, os.SEEK_SET)
    at = n if case.get("offsets") else None
    try:
        if how == "read":
            while True:
                b = os.read(fd, MIB)
                if not b:
                    break
                n += len(b)
        elif how == "pread":
            chunk = 128 << 10
            offs = list(range(0, size, chunk))
            random.Random(size).shuffle(offs)
            for off in offs:
                n += len(os.pread(fd, chunk, off))
        elif how == "readv":
            bufs = [bytearray(64 << 10) for _ in range(4)]
            while True:
                k = os.readv(fd, bufs)
                if k == 0:
                    break
                n += k
        elif how == "mmap":
            m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            s = 0
            for off in range(0, size, PAGE):
                s += m[off]
            m.close()
            n = size
        elif how == "sendfile":
            with open(os.devnull, "wb") as null:
                while n < size:
                    k = os.sendfile(null.fileno(), fd, at, MIB)
                    if k == 0:
                        break
                    n += k
                    at = n if at is not None else None
        elif how == "copy_file_range":
            out = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            while True:
                k = os.copy_file_range(fd, out, MIB, at)
                if k == 0:
                    break
                n += k
                at = n if at is not None else None
            os.close(out)
            os.unlink(scratch)
        elif how == "direct":
            # O_DIRECT: the page cache is bypassed; the block layer sees it
            os.close(fd)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            buf = mmap.mmap(-1, MIB)  # page-aligned, as O_DIRECT needs
            while True:
                k = os.preadv(fd, [buf], n)
                if k <= 0:
                    break
                n += k
            buf.close()
        elif how == "splice":
            r, w = os.pipe()
            with open(os.devnull, "wb") as null:
                while True:
                    k = os.splice(fd, w, 64 << 10, at)
                    if k == 0:
                        break
                    left = k
                    while left:
                        left -= os.splice(r, null.fileno(), left)
                    n += k
                    at = n if at is not None else None
            os.close(r)
            os.close(w)
    finally:
        os.close(fd)
    return n


def in_worker(who, fn):
    """Runs fn in the main thread, another thread or a child process;
    returns its result (an int)."""
    if who == "main":
        return fn()
    if who == "thread":
        out = []
        t = threading.Thread(target=lambda: out.append(fn()))
        t.start()
        t.join()
        return out[0]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, b"%d" % fn())
            os._exit(0)
        except BaseException as e:  # the child must not return into the parent's code
            os.write(2, b"child: %r\n" % e)
            os._exit(1)
    os.close(w)
    got = b""
    while True:
        b = os.read(r, 64)
        if not b:
            break
        got += b
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit("the child failed")
    return int(got)


CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]


def bind_view(case):
    """In this (single-threaded) process: a mount namespace of its own in
    which the model's directory is bind-mounted on the view's; returns
    the model's path as seen there."""
    src, view = unb64(case["path"]), unb64(case["view"])
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
    if libc.mount(os.path.dirname(src), os.path.dirname(view), None, MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --bind")
    return view


def do_read(case):
    path = unb64(case["path"])
    uring = os.environ.get("SHAPES_URING", "")
    if case["mount"] == "bindlive":
        def container():
            view = bind_view(case)
            n = in_worker("child", lambda: read_file(case, view, uring))
            # The namespace outlives the reader, as a container's init
            # outlives its worker.
            time.sleep(0.5)
            return n

        n = in_worker("child", container)
        return {"read_bytes": n}
    if case["mount"] == "bind":
        n = in_worker("child", lambda: read_file(case, bind_view(case), uring))
        return {"read_bytes": n}
    n = in_worker(case["reader"], lambda: read_file(case, path, uring))
    return {"read_bytes": n}




# ---- download -------------------------------------------------------------


def connect(addr, case, off, length):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(b"%d %d %d %d\n" % (case["seed"], case["size"], off, length))
    return s


def receive(s, piece, on_piece):
    n = 0
    while True:
        buf = bytearray(piece)
        view, got = memoryview(buf), 0
        while got < piece:
            k = s.recv_into(view[got:])
            if k == 0:
                break
            got += k
        if got:
            on_piece(n, bytes(buf[:got]))
            n += got
        if got < piece:
            s.close()
            return n


def download_into(case, addr, fd):
    """Fetches the body into fd as case says; returns the bytes received."""
    size, piece = case["size"], case["piece"]
    if case["writer"] == "chunks":
        k = case["connections"]
        bounds = [(i * size // k, (i + 1) * size // k) for i in range(k)]
        got = [0] * k

        def fetch(i):
            lo, hi = bounds[i]
            got[i] = receive(connect(addr, case, lo, hi - lo), piece, lambda off, d: os.pwrite(fd, d, lo + off))

        ts = [threading.Thread(target=fetch, args=(i,)) for i in range(k)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return sum(got)
    if case["writer"] in ("receiver", "child"):
        return in_worker(case["receiver"], lambda: receive(connect(addr, case, 0, size), piece,
                                                             lambda off, d: os.write(fd, d)))
    # pool: the receiver queues pieces, writer threads pwrite them at their
    # offsets; with exit=before the writers are slow and the receiving
    # thread ends first.
    work = queue.Queue()
    slow = case["exit"] == "before"

    def writer():
        while True:
            item = work.get()
            if item is None:
                return
            if slow:
                time.sleep(0.002)
            os.pwrite(fd, item[1], item[0])

    ws = [threading.Thread(target=writer) for _ in range(case["writers"])]
    for w in ws:
        w.start()
    n = in_worker("thread" if slow else case["receiver"],
                  lambda: receive(connect(addr, case, 0, size), piece, lambda off, d: work.put((off, d))))
    for _ in ws:
        work.put(None)
    for w in ws:
        w.join()
    return n


def do_download(case, addr):
    final, temp = unb64(case["path"]), unb64(case["temp_path"])
    t0 = time.monotonic_ns()
    if case["writer"] == "child":
        # a child process receives and writes, as a downloader run by the
        # command would
        def child():
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            n = download_into(case, addr, fd)
            os.close(fd)
            return n

        n = in_worker("child", child)
    else:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        n = download_into(case, addr, fd)
        os.close(fd)
    t1 = time.monotonic_ns()
    if temp != final:
        os.rename(temp, final)
    return {
        "received": n, "written": os.stat(final).st_size, "t0": t0, "t1": t1,
    }


# ---- compile -------------------------------------------------------------


def do_compile(case):
    src, final, temp = unb64(case["source"]), unb64(case["path"]), unb64(case["temp_path"])
    # -D carries bytes that are not UTF-8 into the compiler's argv
    subprocess.run([b"cc", b"-c", b"-O0", b"-DSHAPE_TAG=\"\xff\xfe\"", src, b"-o", temp], check=True)
    if temp != final:
        os.rename(temp, final)
    return {
        "object_bytes": os.stat(final).st_size,
    }


def run(case_path, addr):
    with open(case_path) as f:
        case = json.load(f)
    t0 = time.monotonic_ns()
    if case["job"] == "read":
        out = do_read(case)
    elif case["job"] == "download":
        out = do_download(case, addr)
    else:
        out = do_compile(case)
    out["span_ns"] = time.monotonic_ns() - t0
    out["pid"] = os.getpid()
    print(json.dumps(out))


def cover(upto):
    """Seeds below upto, chosen greedily, that give every dimension of
    every job every value: the fixed list the e2e tests trace."""
    jobdims = {"read": ("read", "reader", "mount"), "download": ("writer", "receiver", "temp", "exit", "fs"), "compile": ("temp",)}
    want = {(j, d, v) for j in DIMS["job"] for d in ("name",) + jobdims[j] for v in DIMS[d]}
    has = {}
    for seed in range(upto):
        case, _ = choose(seed, {})
        has[seed] = {(case["job"], d, case[d]) for d in ("name",) + jobdims[case["job"]]}
    seeds = []
    while want:
        best = max(has, key=lambda s: len(has[s] & want))
        if not has[best] & want:
            sys.exit("seeds below %d leave out %s" % (upto, sorted(want)))
        seeds.append(best)
        want -= has[best]
    print(",".join(str(s) for s in sorted(seeds)))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "prepare":
        pins = dict(a.split("=", 1) for a in sys.argv[4:])
        prepare(int(sys.argv[2]), sys.argv[3], pins)
    elif len(sys.argv) == 3 and sys.argv[1] == "cover":
        cover(int(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "dims":
        print(json.dumps(DIMS))
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
