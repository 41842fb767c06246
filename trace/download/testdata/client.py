"""A download client for the network sensor's tests.

It waits for a line on stdin (the test tracks it meanwhile), then runs
each operation given as an argument and prints one JSON line per
operation with its own CLOCK_MONOTONIC timing, comparable with the
kernel's bpf_ktime_get_ns:

  get:URL:DEST     fetch URL into DEST (a new file), renaming DEST.incomplete
                   into place at the end, as the Hugging Face hub does
  mem:URL          fetch URL into memory
  chatter:URL:N    N small requests on one keep-alive connection
  accept           listen on 127.0.0.1, print the port, take one
                   connection and read it to its end
  exec:ARG,ARG...  become another program (curl, wget): the last operation
"""
import http.client
import json
import os
import socket
import ssl
import sys
import time
import urllib.parse

CHUNK = 1 << 20


def split(url):
    u = urllib.parse.urlsplit(url)
    return u.hostname, u.port, u.path


def connect(url):
    host, port, path = split(url)
    if url.startswith("https:"):
        # The test server's certificate is self-signed.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(host, port, context=ctx), path
    return http.client.HTTPConnection(host, port), path


def fetch(url, out):
    conn, path = connect(url)
    t0 = time.monotonic_ns()  # before the connection (and its TLS handshake)
    conn.request("GET", path)
    resp = conn.getresponse()
    n = 0
    first = None
    while True:
        b = resp.read(CHUNK)
        if not b:
            break
        if first is None:
            first = time.monotonic_ns()
        n += len(b)
        if out is not None:
            out.write(b)
    t1 = time.monotonic_ns()
    conn.close()
    return {"bytes": n, "t0": t0, "t1": t1, "first": first}


def main():
    sys.stdin.readline()
    for op in sys.argv[1:]:
        kind, _, rest = op.partition(":")
        if kind == "get":
            url, dest = rest.rsplit(":", 1)
            tmp = dest + ".incomplete"
            with open(tmp, "wb") as f:
                res = fetch(url, f)
            os.rename(tmp, dest)
        elif kind == "mem":
            res = fetch(rest, None)
        elif kind == "chatter":
            url, count = rest.rsplit(":", 1)
            conn, path = connect(url)
            t0 = time.monotonic_ns()
            n = 0
            for _ in range(int(count)):
                conn.request("GET", path)
                n += len(conn.getresponse().read())
            res = {"bytes": n, "t0": t0, "t1": time.monotonic_ns()}
            conn.close()
        elif kind == "accept":
            srv = socket.create_server(("127.0.0.1", 0))
            print(json.dumps({"port": srv.getsockname()[1]}), flush=True)
            c, _ = srv.accept()
            t0 = time.monotonic_ns()
            n = 0
            buf = bytearray(1 << 20)
            while True:
                k = c.recv_into(buf)
                if not k:
                    break
                n += k
            res = {"bytes": n, "t0": t0, "t1": time.monotonic_ns()}
            c.close()
            srv.close()
        elif kind == "exec":
            args = rest.split(",")
            os.execv(args[0], args)
        else:
            sys.exit("unknown operation " + op)
        res["op"] = kind
        print(json.dumps(res), flush=True)


main()
