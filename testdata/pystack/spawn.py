# A compiler run from known lines, for the Python stack tests: each line
# the tests expect in a stack carries a marker comment naming it.
import multiprocessing
import os
import subprocess
import sys
import time


def run_compiler(src, out, how):
    if how == "spawn":
        pid = os.posix_spawn("/usr/bin/cc", ["cc", "-c", src, "-o", out], dict(os.environ))  # @spawn
        os.waitpid(pid, 0)
    else:
        subprocess.run(["cc", "-c", src, "-o", out], check=True)  # @run


def compile_kernel(workdir, how):
    src = os.path.join(workdir, "k.c")
    with open(src, "w") as f:
        f.write("int kernel(int x) { return x * 2; }\n")
    run_compiler(src, os.path.join(workdir, "k.o"), how)  # @compile_kernel


def child(workdir):
    compile_kernel(workdir, "run")  # @child


if __name__ == "__main__":
    how, workdir = sys.argv[1], sys.argv[2]
    # coldtrace locates the interpreter in user space after the exec wakes
    # it (under a millisecond on a quiet machine, tens of milliseconds on a
    # loaded 2-core VM, and once over 300 ms in a whole test run beside a
    # busy loop); a real program imports for far longer than that before
    # it compiles. The tests are about the stack, not that race.
    time.sleep(0.6)
    if how == "fork":
        ctx = multiprocessing.get_context("fork")
        p = ctx.Process(target=child, args=(workdir,))
        p.start()  # @start
        p.join()
        sys.exit(p.exitcode)
    compile_kernel(workdir, how)  # @module
