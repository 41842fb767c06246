#!/usr/bin/env python3
"""The GPU workload of the scripted-NVML tests (see scenarios/README.md).

    workload.py COMM STEP...

It names itself COMM (/proc/self/comm), the name a scenario's proc lines
give the fake library, then runs the steps in order:

    mark:LABEL    marks the trace (one datagram to $COLDTRACE_MARK) and
                  holds until the GPU has been sampled after it
    phase:NAME    writes NAME to $FAKE_NVML_PHASE and waits until the
                  library has answered $FAKE_NVML_POLLS (default 2) memory
                  queries in it (its .ack file), so each phase is sampled
    once:NAME     writes NAME and waits for a single query (a lost GPU is
                  queried once more, then never again)
    sleep:SECONDS sleeps

Waiting on the library's acknowledgements, not on the clock, is what
makes the per-segment numbers exact on a loaded machine. A wait longer
than 120 s exits with status 3.
"""
import os
import socket
import sys
import time


def write_phase(path, name):
    tmp = path + ".w"
    with open(tmp, "w") as f:
        f.write(name + "\n")
    os.rename(tmp, path)


def wait_ack(path, name, need):
    if need <= 0:  # no GPU to wait for (an init failure)
        return
    deadline = time.monotonic() + 120
    last = "(no acknowledgement)"
    while time.monotonic() < deadline:
        try:
            with open(path + ".ack") as f:
                last = f.read().strip()
            got, _, n = last.rpartition(" ")
            if got == name and int(n) >= need:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    sys.stderr.write("workload.py: phase %s not sampled %d times in 120 s; last acknowledgement: %s\n" % (name, need, last))
    sys.exit(3)


def main():
    with open("/proc/self/comm", "w") as f:
        f.write(sys.argv[1])
    phase = os.environ["FAKE_NVML_PHASE"]
    need = int(os.environ.get("FAKE_NVML_POLLS", "2"))
    for n, step in enumerate(sys.argv[2:]):
        kind, _, arg = step.partition(":")
        if kind == "mark":
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(arg.encode(), os.environ["COLDTRACE_MARK"])
            hold = "hold-%d" % n  # a name no step uses: the state stays
            write_phase(phase, hold)
            wait_ack(phase, hold, need)
        elif kind == "phase":
            write_phase(phase, arg)
            wait_ack(phase, arg, need)
        elif kind == "once":
            write_phase(phase, arg)
            wait_ack(phase, arg, 1)
        elif kind == "sleep":
            time.sleep(float(arg))
        else:
            sys.exit("workload.py: unknown step " + step)


main()
