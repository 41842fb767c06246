"""Numba functions without cache=True: compiled again in every process,
leaving no cache lookup."""
import numba
import numpy as np


@numba.njit
def total(a):
    s = 0.0
    for x in a:
        s += x
    return s


@numba.njit
def dot(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@numba.njit
def clip(a, lo, hi):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = min(max(a[i], lo), hi)
    return out


@numba.njit
def poly(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        x = a[i]
        out[i] = ((3.0 * x + 2.0) * x - 1.0) * x + 0.5
    return out


a = np.arange(100.0)
print(total(a), dot(a, a), clip(a, 3.0, 7.0)[0], poly(a)[1])
