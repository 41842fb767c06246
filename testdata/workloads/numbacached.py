"""A Numba function with cache=True: Numba files its cache entry by this
file's path and keys it by this file's modification time."""
import numba
import numpy as np


@numba.njit(cache=True)
def weighted(a):
    s = 0.0
    for x in a:
        s += x * 1.5
    return s


print(weighted(np.arange(10.0)))
