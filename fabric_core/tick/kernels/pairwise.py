"""numpy's sum of a float64 array, compiled: the same additions in the same order.

``numpy.sum`` adds a contiguous float64 array by pairwise summation (numpy's
``pairwise_sum``, ``loops_utils.h``): blocks of at most ``PAIRWISE_BLOCK`` elements are
summed with eight running partial sums (fewer than eight elements one by one), and a
longer array is split in two halves (the first a multiple of eight long) whose sums are
added. A plain loop adds in another order and can differ in the last bits, so a kernel
that stands in for Python which summed with numpy (a batch of flows' bytes, a workload's
delivered bytes, a histogram's sum) sums this way. ``tests/test_pairwise.py`` holds it to
numpy's on arrays of every length up to a few blocks and beyond.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import inline_kernel, kernel

#: numpy's ``PW_BLOCKSIZE``: the most elements summed without splitting in halves
PAIRWISE_BLOCK = 128
#: deepest split: halves of arrays up to 2**64 elements
_MOST_SPLITS = 64


@inline_kernel
def _block(a: NDArray[np.float64], lo: int, n: int) -> float:
    """numpy's sum of ``a[lo:lo + n]``, ``n <= PAIRWISE_BLOCK``."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return float(res)


@kernel
def numpy_sum(a: NDArray[np.float64]) -> float:
    """``float(a.sum())`` for a contiguous 1-D float64 ``a``, bit for bit: numpy's
    recursion into halves walked with a stack of its own (numba compiles a kernel that
    calls itself unreliably)."""
    n = a.size
    if n <= PAIRWISE_BLOCK:
        return float(_block(a, 0, n))
    lo = np.empty(_MOST_SPLITS, dtype=np.int64)
    size = np.empty(_MOST_SPLITS, dtype=np.int64)
    phase = np.zeros(_MOST_SPLITS, dtype=np.int64)  # 0: split; 1: left done; 2: both
    left = np.empty(_MOST_SPLITS)
    lo[0], size[0] = 0, n
    top = 1
    value = 0.0  # the sum of the part last finished
    while top > 0:
        f = top - 1
        m = size[f]
        if m <= PAIRWISE_BLOCK:
            value = _block(a, lo[f], m)
            top -= 1
            continue
        half = m // 2
        half -= half % 8
        if phase[f] == 0:
            phase[f] = 1
            lo[top], size[top], phase[top] = lo[f], half, 0
            top += 1
        elif phase[f] == 1:
            left[f] = value
            phase[f] = 2
            lo[top], size[top], phase[top] = lo[f] + half, m - half, 0
            top += 1
        else:
            value = left[f] + value
            top -= 1
    return value
