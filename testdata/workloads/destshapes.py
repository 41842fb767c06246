"""Downloads a body from a loopback server in the shapes real clients have,
for coldtrace's download-destination tests. The server speaks a bare
protocol: the client sends one line (the name of a body), the server
answers with the body and closes, so the bytes received are exactly the
body's.

  destshapes.py pool HOST:PORT NAME STAGE HUB
      the main thread receives; 4 worker threads pwrite each 1 MiB piece
      at its offset into STAGE/blobs/<sha256>.incomplete; the file is then
      renamed into another directory, HUB/models--org--m/blobs/<sha256>,
      and linked from snapshots/rev1/model.safetensors, as the Hugging
      Face hub client lays out its cache.
  destshapes.py chunks HOST:PORT NAME N SIZE OUT
      N threads, one connection each, fetch N pieces of SIZE bytes and
      pwrite each at its offset into OUT (a parallel chunked download).
  destshapes.py memory HOST:PORT NAME
      the body stays in memory.
  destshapes.py gunzip HOST:PORT NAME OUT
      a gzip body, decompressed as it arrives and written expanded to OUT.

Prints one JSON line: the bytes received, the bytes written and the path
of the file written (after its rename), and the client's own
CLOCK_MONOTONIC times of its first connect and last byte.
"""
import hashlib
import json
import os
import queue
import socket
import sys
import threading
import time
import zlib

PIECE = 1 << 20


def connect(addr, name):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(name.encode() + b"\n")
    return s


def receive(s, on_piece):
    """Reads the body in pieces of up to PIECE bytes; returns its size."""
    n = 0
    while True:
        buf = bytearray(PIECE)
        view, got = memoryview(buf), 0
        while got < PIECE:
            k = s.recv_into(view[got:])
            if k == 0:
                break
            got += k
        if got:
            on_piece(n, bytes(buf[:got]))
            n += got
        if got < PIECE:
            return n


def pool(addr, name, stage, hub):
    os.makedirs(os.path.join(stage, "blobs"), exist_ok=True)
    repo = os.path.join(hub, "models--org--m")
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "snapshots", "rev1"), exist_ok=True)
    # The temporary name, as the blob's name, is the body's sha256: the
    # client is told it before the download (the hub's ETag).
    sha = os.environ["BODY_SHA256"]
    tmp = os.path.join(stage, "blobs", sha + ".incomplete")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    work = queue.Queue(maxsize=8)

    def writer():
        while True:
            item = work.get()
            if item is None:
                return
            off, data = item
            os.pwrite(fd, data, off)

    workers = [threading.Thread(target=writer) for _ in range(4)]
    for w in workers:
        w.start()
    h = hashlib.sha256()
    t0 = time.monotonic_ns()
    s = connect(addr, name)

    def piece(off, data):
        h.update(data)
        work.put((off, data))

    n = receive(s, piece)
    t1 = time.monotonic_ns()
    s.close()
    for _ in workers:
        work.put(None)
    for w in workers:
        w.join()
    os.close(fd)
    if h.hexdigest() != sha:
        sys.exit("body sha256 %s, want %s" % (h.hexdigest(), sha))
    blob = os.path.join(repo, "blobs", sha)
    os.rename(tmp, blob)
    os.symlink("../../blobs/" + sha, os.path.join(repo, "snapshots", "rev1", "model.safetensors"))
    return n, n, blob, t0, t1


def chunks(addr, name, count, size, out):
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    got = [0] * count
    t0 = time.monotonic_ns()

    def fetch(i):
        s = connect(addr, name)
        got[i] = receive(s, lambda off, data: os.pwrite(fd, data, i * size + off))
        s.close()

    ts = [threading.Thread(target=fetch, args=(i,)) for i in range(count)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    t1 = time.monotonic_ns()
    os.close(fd)
    return sum(got), sum(got), out, t0, t1


def memory(addr, name):
    body = bytearray()
    t0 = time.monotonic_ns()
    s = connect(addr, name)
    n = receive(s, lambda off, data: body.extend(data))
    t1 = time.monotonic_ns()
    s.close()
    return n, 0, "", t0, t1


def gunzip(addr, name, out):
    d = zlib.decompressobj(wbits=31)
    written = [0]
    with open(out, "wb") as f:

        def piece(off, data):
            x = d.decompress(data)
            f.write(x)
            written[0] += len(x)

        t0 = time.monotonic_ns()
        s = connect(addr, name)
        n = receive(s, piece)
        t1 = time.monotonic_ns()
        s.close()
        x = d.flush()
        f.write(x)
        written[0] += len(x)
    return n, written[0], out, t0, t1


mode, args = sys.argv[1], sys.argv[2:]
if mode == "pool":
    r = pool(*args)
elif mode == "chunks":
    r = chunks(args[0], args[1], int(args[2]), int(args[3]), args[4])
elif mode == "memory":
    r = memory(*args)
elif mode == "gunzip":
    r = gunzip(*args)
else:
    sys.exit("unknown mode " + mode)
received, written, path, t0, t1 = r
print(json.dumps({"received": received, "written": written, "path": path, "t0": t0, "t1": t1}), flush=True)
