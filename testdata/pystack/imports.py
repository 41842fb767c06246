# A compiler run by the last of 24 nested imports (each import adds its
# module's frame and importlib's): more frames than a stack keeps, so the
# stack has a gap, and its outermost frame is still the line of this
# script that started the chain.
import os
import sys
import time

# Time for coldtrace to locate the interpreter after its exec (see
# spawn.py).
time.sleep(0.6)
work = sys.argv[1]
DEPTH = 24
with open(os.path.join(work, "k.c"), "w") as f:
    f.write("int k;\n")
for i in range(DEPTH - 1):
    with open(os.path.join(work, "nest%d.py" % i), "w") as f:
        f.write("import nest%d\n" % (i + 1))
with open(os.path.join(work, "nest%d.py" % (DEPTH - 1)), "w") as f:
    f.write("import subprocess\n")
    f.write("subprocess.run(['cc', '-c', %r, '-o', %r], check=True)\n"
            % (os.path.join(work, "k.c"), os.path.join(work, "k.o")))
sys.path.insert(0, work)
sys.dont_write_bytecode = True
import nest0  # @outer
