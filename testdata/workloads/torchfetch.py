"""Fetches a checkpoint with torch.hub, for coldtrace's download tests.

  torchfetch.py URL NAME

download_url_to_file(URL) into torch.hub.get_dir()/checkpoints/NAME, the
path load_state_dict_from_url uses ($TORCH_HOME/hub/checkpoints). Prints
one JSON line: the bytes fetched, the destination, and the client's own
CLOCK_MONOTONIC times around the fetch (request to last byte and rename).
"""
import json
import os
import sys
import time

import torch.hub

url, name = sys.argv[1], sys.argv[2]
dst = os.path.join(torch.hub.get_dir(), "checkpoints", name)
os.makedirs(os.path.dirname(dst), exist_ok=True)
t0 = time.monotonic_ns()
torch.hub.download_url_to_file(url, dst, progress=False)
t1 = time.monotonic_ns()
print(json.dumps({"bytes": os.path.getsize(dst), "t0": t0, "t1": t1, "dst": dst}), flush=True)
