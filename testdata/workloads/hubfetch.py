"""Fetches a model into a Hugging Face hub cache the way huggingface_hub
does, for coldtrace's download tests.

  hubfetch.py URL

The cache is $HF_HUB_CACHE, else $HOME/.cache/huggingface/hub. The body
of URL is written to models--org--m/blobs/abc123.incomplete, renamed to
blobs/abc123 at the end, and linked from snapshots/rev1/model.safetensors.
When the blob is already there the fetch is skipped, as the hub client
skips it. Prints one JSON line: the bytes fetched and the client's own
CLOCK_MONOTONIC times of the request and of its last byte.
"""
import http.client
import json
import os
import sys
import time
import urllib.parse

url = urllib.parse.urlsplit(sys.argv[1])
hub = os.environ.get("HF_HUB_CACHE") or os.path.join(os.environ["HOME"], ".cache", "huggingface", "hub")
repo = os.path.join(hub, "models--org--m")
blob = os.path.join(repo, "blobs", "abc123")
link = os.path.join(repo, "snapshots", "rev1", "model.safetensors")
os.makedirs(os.path.dirname(blob), exist_ok=True)
os.makedirs(os.path.dirname(link), exist_ok=True)
if not os.path.lexists(link):
    os.symlink("../../blobs/abc123", link)

if os.path.exists(blob):
    print(json.dumps({"bytes": 0, "t0": 0, "t1": 0, "skipped": True}), flush=True)
    sys.exit(0)

conn = http.client.HTTPConnection(url.hostname, url.port)
t0 = time.monotonic_ns()
conn.request("GET", url.path)
resp = conn.getresponse()
n = 0
with open(blob + ".incomplete", "wb") as out:
    while True:
        b = resp.read(1 << 20)
        if not b:
            break
        n += len(b)
        out.write(b)
t1 = time.monotonic_ns()
conn.close()
os.rename(blob + ".incomplete", blob)
print(json.dumps({"bytes": n, "t0": t0, "t1": t1, "skipped": False}), flush=True)
