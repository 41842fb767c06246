# 100,000 functions made and dropped one after another, each with its own
# name: half start at line 1 of their source, the others at lines that
# vary. A dropped function's code object, name and first line are freed
# and their addresses reused by the next. Two in every 128 fork while
# they run and write "PID NAME LINE" (the child's pid, the function, the
# line that forked) to argv[1]: the child's stack must name that
# function at that line, or "?", never another.
import os
import sys
import time

# Time for coldtrace to locate the interpreter after its exec (see
# spawn.py).
time.sleep(0.6)
BODY = """def f_{i}(fork):
    if fork:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return pid
    return 0
"""
with open(sys.argv[1], "w") as out:
    for i in range(100_000):
        first = 1 if i % 2 == 0 else 2 + i % 500
        src = "\n" * (first - 1) + BODY.format(i=i)
        ns = {"os": os}
        exec(compile(src, "reuse_gen.py", "exec"), ns)
        pid = ns["f_%d" % i](i % 128 < 2)
        if pid:
            out.write("%d f_%d %d\n" % (pid, i, first + 2))
        del ns
