"""Fetches URLs into memory in the ways coldtrace's download tests need,
timing each fetch itself (CLOCK_MONOTONIC, request to last byte):

  fetchmany.py threads URL URL...   one thread per URL, all at once
  fetchmany.py asyncio URL          an asyncio client: it waits in epoll_wait
  fetchmany.py child ARG...         a child process (curl, wget) fetches

Prints one JSON line per fetch: {"bytes": N, "t0": ns, "t1": ns}. A child's
span includes its own start (curl loads a dozen libraries: 0.3 s on a slow
VM), so a child that prints its own timing in seconds (curl -w
'%{time_total}') has it reported as "own_ns".
"""
import asyncio
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse


# print() writes the line and its newline apart: two threads finishing
# together would interleave them ("{...}{...}\n\n").
report_lock = threading.Lock()


def report(n, t0, t1, **extra):
    with report_lock:
        sys.stdout.write(json.dumps({"bytes": n, "t0": t0, "t1": t1, **extra}) + "\n")
        sys.stdout.flush()


def fetch(url):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    t0 = time.monotonic_ns()
    conn.request("GET", u.path)
    resp = conn.getresponse()
    n = 0
    while True:
        b = resp.read(1 << 20)
        if not b:
            break
        n += len(b)
    t1 = time.monotonic_ns()
    conn.close()
    report(n, t0, t1)


async def fetch_async(url):
    u = urllib.parse.urlsplit(url)
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    t0 = time.monotonic_ns()
    writer.write(f"GET {u.path} HTTP/1.0\r\nHost: {u.hostname}\r\n\r\n".encode())
    await writer.drain()
    n = 0
    while True:
        b = await reader.read(1 << 20)
        if not b:
            break
        n += len(b)
    t1 = time.monotonic_ns()
    writer.close()
    report(n, t0, t1)


mode, args = sys.argv[1], sys.argv[2:]
if mode == "threads":
    ts = [threading.Thread(target=fetch, args=(u,)) for u in args]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
elif mode == "asyncio":
    asyncio.run(fetch_async(args[0]))
elif mode == "child":
    t0 = time.monotonic_ns()
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE).stdout
    t1 = time.monotonic_ns()
    try:
        report(0, t0, t1, own_ns=round(float(out) * 1e9))
    except ValueError:
        sys.stdout.buffer.write(out)
        report(0, t0, t1)
else:
    sys.exit("unknown mode " + mode)
