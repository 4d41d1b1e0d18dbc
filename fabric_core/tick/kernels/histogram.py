"""The latency histograms' per-value work, compiled (``fabric_core.tick.histogram``).

A histogram's state is three arrays: the bucket counts, ``stats`` = (sum, min, max,
values seen) and ``ring``, the last ``ring.size`` values (value ``k`` of those seen at
``k % ring.size``). Rows of a ``HistogramRows`` are rows of 2-D arrays of the same
shapes, so one pass files each value in its row's histogram.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import inline_kernel, kernel

_F = NDArray[np.float64]

#: places in ``stats``
SUM, MIN, MAX, SEEN = 0, 1, 2, 3


@inline_kernel
def _keep(stats: _F, ring: _F, v: float) -> None:
    """One value's min, max and place among the last values kept."""
    stats[MIN] = min(stats[MIN], v)
    stats[MAX] = max(stats[MAX], v)
    seen = int(stats[SEEN])
    ring[seen % ring.size] = v
    stats[SEEN] = seen + 1


@kernel
def keep_values(stats: _F, ring: _F, values_s: _F) -> None:
    """Min, max and the last values (in ``ring``) of a histogram, after ``values_s``."""
    for v in values_s:
        _keep(stats, ring, v)


@kernel
def observe_values(
    counts: NDArray[np.int64], stats: _F, ring: _F, values_s: _F, bounds_s: _F
) -> None:
    """File ``values_s`` in one histogram's buckets (``le``, as ``histogram.bucket_index``)
    and keep their min, max and last values. The sum of one value is added here (it is
    exact); of more, the caller adds numpy's (pairwise) sum, as it always has."""
    if values_s.size == 1:
        stats[SUM] += values_s[0]
    for v in values_s:
        counts[np.searchsorted(bounds_s, v, side="left")] += 1
    keep_values(stats, ring, values_s)


@kernel
def observe_rows(
    counts: NDArray[np.int64],
    stats: _F,
    rings: _F,
    group: NDArray[np.int16],
    values_s: _F,
    bounds_s: _F,
) -> bool:
    """File each value in row ``group[i]``'s histogram: its bucket, its row's sum (this
    call's values of a row summed in order, then added), min, max and last values.
    False, with nothing filed, when a row is not one of the arrays' (numba does not
    check an index: a row past the end would be written all the same)."""
    n_rows = rings.shape[0]
    for g in group:
        if not 0 <= g < n_rows:
            return False
    tick_sum = np.zeros(n_rows)
    for i in range(values_s.size):
        g, v = group[i], values_s[i]
        counts[g, np.searchsorted(bounds_s, v, side="left")] += 1
        tick_sum[g] += v
        _keep(stats[g], rings[g], v)
    for g in range(n_rows):
        stats[g, SUM] += tick_sum[g]
    return True
