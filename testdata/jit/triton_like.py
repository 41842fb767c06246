#!/usr/bin/env python3
"""A stand-in for Triton's kernel cache, for coldtrace's JIT tests.

Like triton.runtime.cache.FileCacheManager it makes the key directory
under $TRITON_CACHE_DIR (else ~/.triton/cache), looks for
__grp__<name>.json there, and on a miss builds the "kernel" (a small
shared object, with `cc`) into tmp.pid_<pid>_<n>/ inside the key
directory, then renames each file into place and removes the temp
directory. It prints one JSON line: its hits, misses and the wall time
of its own compiles (ns).

usage: triton_like.py [KERNELS] [FUNCS [LINGER]]

LINGER: seconds the program goes on running after its kernels (as a real
one runs them), so that a tracer can still read its memory; default 0.
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time


def source(kernel, funcs):
    out = ["#include <stdint.h>"]
    for f in range(funcs):
        out.append(
            f"uint64_t k{kernel}_f{f}(uint64_t x) {{\n"
            f"  for (int i = 0; i < {f % 7 + 3}; i++) x = x * 6364136223846793005ull + {f};\n"
            f"  return x ^ (x >> {f % 31 + 1});\n}}"
        )
    return "\n".join(out) + "\n"


def main():
    kernels = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    funcs = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    cache = os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")
    hits = misses = 0
    compile_ns = 0
    for k in range(kernels):
        name = f"kernel{k}"
        src = source(k, funcs)
        key = base64.b32encode(hashlib.sha256(src.encode()).digest()).decode().rstrip("=")
        key_dir = os.path.join(cache, key)
        os.makedirs(key_dir, exist_ok=True)
        grp = os.path.join(key_dir, f"__grp__{name}.json")
        if os.path.exists(grp):
            with open(grp) as f:
                files = json.load(f)["files"]
            for p in files:
                with open(os.path.join(key_dir, p), "rb") as f:
                    f.read()
            hits += 1
            continue
        misses += 1
        # Scratch source outside the cache, like ptxas's $TMPDIR files.
        with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
            f.write(src)
            c_path = f.name
        tmp = os.path.join(key_dir, f"tmp.pid_{os.getpid()}_{k}")
        os.makedirs(tmp, exist_ok=True)
        so = f"{name}.so"
        t0 = time.perf_counter_ns()
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", os.path.join(tmp, so), c_path], check=True)
        compile_ns += time.perf_counter_ns() - t0
        os.unlink(c_path)
        with open(os.path.join(tmp, f"{name}.json"), "w") as f:
            json.dump({"name": name, "key": key}, f)
        with open(os.path.join(tmp, f"__grp__{name}.json"), "w") as f:
            json.dump({"files": [so, f"{name}.json"]}, f)
        for p in (so, f"{name}.json", f"__grp__{name}.json"):
            os.replace(os.path.join(tmp, p), os.path.join(key_dir, p))
        os.removedirs(tmp)
    print(json.dumps({"hits": hits, "misses": misses, "compile_ns": compile_ns}))
    if len(sys.argv) > 3:
        time.sleep(float(sys.argv[3]))


if __name__ == "__main__":
    main()
