# Prints every code object of a sample module as JSON: its first line,
# its location table and the line of each instruction range (co_lines),
# for checking a decoder of the table against the interpreter itself.
import json
import sys

SAMPLE = '''
import os

def f(a, b):
    x = a + b
    if x > 3:
        return [i * 2
                for i in range(x)]
    try:
        y = 1 / 0
    except ZeroDivisionError:
        y = None
    return y


class K:
    def m(self):
        return sum(
            (1, 2, 3)
        )

''' + "\n" * 300 + '''
def far(v):
    return v + ''' + " + ".join(str(i) for i in range(200)) + '''
'''


def walk(co, out):
    out.append({
        "name": co.co_qualname,
        "first": co.co_firstlineno,
        "table": co.co_linetable.hex(),
        "lines": [[s, e, -1 if ln is None else ln] for s, e, ln in co.co_lines()],
    })
    for c in co.co_consts:
        if hasattr(c, "co_lines"):
            walk(c, out)


out = []
walk(compile(SAMPLE, "sample.py", "exec"), out)
json.dump(out, sys.stdout)
