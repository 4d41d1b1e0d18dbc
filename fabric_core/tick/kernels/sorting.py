"""A stable sort for the kernels, written out: numpy's orders, exactly, for less compiling.

numba compiles its own ``np.sort`` and ``np.argsort`` (quicksort, mergesort and their
helpers) into every kernel that calls them, some three seconds of a first start, for
sorts of a few dozen values a tick (a tick's finishing flows, a flow's unusable
candidates). A bottom-up merge sort of indices is a few loops: it gives
``np.argsort(a, kind="stable")`` (equal values keep their order, NaN last), which for
distinct values is every sort's order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import inline_kernel, kernel


@inline_kernel
def _before(x: float, y: float) -> bool:
    """Whether ``x`` sorts strictly before ``y`` (numpy's order: NaN after every number)."""
    return x < y or (y != y and x == x)


@kernel
def stable_argsort(a: NDArray[np.generic]) -> NDArray[np.intp]:
    """``np.argsort(a, kind="stable")`` of a 1-D array: a bottom-up merge sort of the
    indices, a run's left element first where two are equal."""
    n = a.size
    order = np.arange(n)
    other = np.empty(n, dtype=np.intp)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if j < hi and (i >= mid or _before(a[order[j]], a[order[i]])):
                    other[k] = order[j]
                    j += 1
                else:
                    other[k] = order[i]
                    i += 1
        order, other = other, order
        width *= 2
    return order


@kernel
def sorted_copy(a: NDArray[np.int64]) -> NDArray[np.int64]:
    """``np.sort(a)`` of a 1-D integer array."""
    return a[stable_argsort(a)]
