"""A stable sort for the kernels, written out: numpy's orders, exactly, for less compiling.

numba compiles its own ``np.sort`` and ``np.argsort`` (quicksort, mergesort and their
helpers) into every kernel that calls them, some three seconds of a first start, for
sorts of a few dozen values a tick (a tick's finishing flows, a flow's unusable
candidates). A merge sort of indices (insertion-sorted runs, merged bottom-up) is a
few loops: it gives ``np.argsort(a, kind="stable")`` (equal values keep their order,
NaN last), which for distinct values is every sort's order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import inline_kernel, kernel


@inline_kernel
def _before(x: float, y: float) -> bool:
    """Whether ``x`` sorts strictly before ``y`` (numpy's order: NaN after every number)."""
    return x < y or (y != y and x == x)


#: Runs this long are sorted by insertion before the merges (fewer moves than merging
#: them from single elements; the usual choice of hybrid merge sorts is 16 to 64)
RUN = 16


@kernel
def stable_argsort(a: NDArray[np.generic]) -> NDArray[np.intp]:
    """``np.argsort(a, kind="stable")`` of a 1-D array (``argsort_into``)."""
    order = np.empty(a.size, dtype=np.intp)
    argsort_into(a, a.size, order, np.empty(a.size, dtype=np.intp))
    return order


@kernel
def argsort_into(
    a: NDArray[np.generic], n: int, order: NDArray[np.intp], other: NDArray[np.intp]
) -> None:
    """``np.argsort(a[:n], kind="stable")`` into ``order[:n]``, with ``other`` (at least
    ``n`` long) as scratch, for a kernel that sorts many short arrays: the indices in
    order if ``a`` is already sorted (a tick's finishing flows on one link often send
    equal shares), else runs of ``RUN`` sorted by insertion and merged bottom-up; either
    way a run's left element first where two are equal."""
    for i in range(n):
        order[i] = i
    in_order = True
    for i in range(1, n):
        if _before(a[i], a[i - 1]):
            in_order = False
            break
    if in_order:
        return
    for lo in range(0, n, RUN):
        hi = min(lo + RUN, n)
        for k in range(lo + 1, hi):
            moving = order[k]
            j = k
            # strictly before: an equal value stays behind the one it followed
            while j > lo and _before(a[moving], a[order[j - 1]]):
                order[j] = order[j - 1]
                j -= 1
            order[j] = moving
    src, dst = order, other
    swapped = False  # the sorted indices are in ``other``
    width = RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if j < hi and (i >= mid or _before(a[src[j]], a[src[i]])):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
        src, dst = dst, src
        swapped = not swapped
        width *= 2
    if swapped:  # (a loop, not a slice copy: docs/MODEL.md, "How the tick is computed")
        for i in range(n):
            order[i] = other[i]


@kernel
def sorted_copy(a: NDArray[np.int64]) -> NDArray[np.int64]:
    """``np.sort(a)`` of a 1-D integer array."""
    return a[stable_argsort(a)]
