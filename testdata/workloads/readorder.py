"""Reads SEQ sequentially with read(2), then touches PAGES random 4 KiB
pages of RND through mmap with MADV_RANDOM (no read-around: one page per
fault). Used by the advice tests."""
import mmap
import os
import random
import sys

seq, rnd, pages = sys.argv[1], sys.argv[2], int(sys.argv[3])
if seq != "-":
    with open(seq, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
if rnd != "-":
    with open(rnd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
        m.madvise(mmap.MADV_RANDOM)
        rng = random.Random(18)
        total = 0
        for i in rng.sample(range(size // 4096), pages):
            total += m[i * 4096]
        m.close()
