# A compiler run from 200 nested calls, for the deep-stack test: the
# outermost line carries a marker.
import subprocess
import sys
import time


def nest(n, workdir):
    if n == 0:
        subprocess.run(["cc", "-c", workdir + "/k.c", "-o", workdir + "/k.o"], check=True)  # @leaf
        return
    nest(n - 1, workdir)


# Time for coldtrace to locate the interpreter after its exec (see
# spawn.py): the test is about the stack, not that race.
time.sleep(0.6)
with open(sys.argv[1] + "/k.c", "w") as f:
    f.write("int k;\n")
nest(200, sys.argv[1])  # @outer
