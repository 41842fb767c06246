# fuseload.py EAGER RANDOM: read EAGER with read(2), then map RANDOM
# with MADV_RANDOM and touch its pages in a shuffled order (read it too
# with a third argument "eager"); print both
# rates (MB/s) and their ratio.
import mmap, random, sys, time
def eager(p):
    t = time.time(); n = 0
    with open(p, "rb") as f:
        while True:
            b = f.read(16 << 20)
            if not b: break
            n += len(b)
    return n / (time.time() - t) / 1e6
def rand(p):
    t = time.time()
    with open(p, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        m.madvise(mmap.MADV_RANDOM)
        pages = list(range(0, len(m), 4096)); random.Random(1).shuffle(pages)
        s = 0
        for o in pages: s += m[o]
        n = len(m)
    return n / (time.time() - t) / 1e6
a = eager(sys.argv[1])
b = eager(sys.argv[2]) if sys.argv[3:] == ["eager"] else rand(sys.argv[2])
print("eager %.3f random %.3f ratio %.3f" % (a, b, a / b))
