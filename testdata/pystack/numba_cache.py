"""A Numba cache=True function compiled from a function at a known line:
the compile's Python stack (tests in test/e2e and trace/jit)."""
import sys

import numba


@numba.njit(cache=True)
def kernel(x):
    return x * 2 + 1


def compile_kernel():
    return kernel(21)  # @call


def main():
    print(compile_kernel())  # @main


main()  # @module
