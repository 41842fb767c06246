"""The bench's collateral Python loop: stat, open, read and close N small
files in DIR (f00000 …), pinned to CPU; one JSON line with the elapsed
time over the loop.

usage: collateral.py CPU DIR N
"""
import json
import os
import sys
import time


def main():
    cpu, d, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    os.sched_setaffinity(0, {cpu})
    names = [os.path.join(d, "f%05d" % i) for i in range(n)]
    t0 = time.monotonic_ns()
    total = 0
    for p in names:
        os.stat(p)
        with open(p, "rb") as f:
            total += len(f.read())
    t1 = time.monotonic_ns()
    print(json.dumps({"elapsed_ns": t1 - t0, "n": n, "check": total}))


main()
