"""A stand-in for `python main.py` of an ML job, small enough to run anywhere.

It does what a diffusion or LLM start-up does, in miniature:
  1. load weights: read a model file (cold after a reboot or drop_caches);
  2. compile kernels: look a kernel up in a Triton-style cache
     ($TRITON_CACHE_DIR/<key>/), and on a miss build it with the C compiler
     into tmp.pid_<pid>_<n>/ and rename it into place;
  3. compute: a CPU loop standing in for the GPU work.
Each phase prints its own duration, so coldtrace's breakdown can be checked
against it.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import time

KERNEL = r"""
double scale(double x) { return x * 1.0000001 + 0.5; }
"""


def load(path):
    t0 = time.monotonic()
    h = hashlib.blake2b()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk[:64])
    return time.monotonic() - t0


def compile_kernel(cache_dir):
    t0 = time.monotonic()
    key = hashlib.sha256(KERNEL.encode()).hexdigest()[:32]
    entry = os.path.join(cache_dir, key)
    so = os.path.join(entry, "kernel.so")
    if os.path.exists(so):
        with open(so, "rb") as f:
            f.read()
        return time.monotonic() - t0, "hit"
    os.makedirs(cache_dir, exist_ok=True)
    tmp = os.path.join(cache_dir, key, "tmp.pid_%d_0" % os.getpid())
    os.makedirs(tmp, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as src:
        src.write(KERNEL)
    cc = os.environ.get("CC", "cc")
    for opt in ("-O0", "-O1", "-O2"):  # several passes, as autotuning would
        subprocess.run([cc, opt, "-shared", "-fPIC", "-o", os.path.join(tmp, "kernel.so"), src.name], check=True)
    os.replace(os.path.join(tmp, "kernel.so"), so)
    os.rmdir(tmp)
    os.unlink(src.name)
    return time.monotonic() - t0, "miss"


def compute(seconds):
    t0 = time.monotonic()
    x = 0
    while time.monotonic() - t0 < seconds:
        for i in range(10000):
            x += i * i
    return time.monotonic() - t0


def main():
    model, cache = sys.argv[1], os.environ.get("TRITON_CACHE_DIR", os.path.expanduser("~/.triton/cache"))
    t_load = load(model)
    t_compile, outcome = compile_kernel(cache)
    t_compute = compute(0.5)
    print("demo: load %.2fs, compile %.2fs (cache %s), compute %.2fs" % (t_load, t_compile, outcome, t_compute))


if __name__ == "__main__":
    main()
