"""Log-bucketed latency histograms: bounded memory, mergeable, exportable.

Buckets are fixed for the whole program (so histograms from any run, class or
workload merge by adding counts): ``BUCKETS_PER_DECADE`` log-spaced upper bounds
from 10 ns to 100 s, plus an overflow bucket. Quantiles interpolate
log-linearly inside a bucket, so their relative error is below one bucket width
(10**(1/BUCKETS_PER_DECADE) - 1, about 12 % at 20 per decade, and usually far less).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

BUCKETS_PER_DECADE = 20
LOWEST_BOUND_S = 1e-8
HIGHEST_BOUND_S = 100.0

#: Upper bounds (seconds) of the finite buckets; the last bucket (+Inf) follows them.
BOUNDS_S: NDArray[np.float64] = np.logspace(
    np.log10(LOWEST_BOUND_S),
    np.log10(HIGHEST_BOUND_S),
    round(np.log10(HIGHEST_BOUND_S / LOWEST_BOUND_S)) * BUCKETS_PER_DECADE + 1,
)
N_BUCKETS = BOUNDS_S.size + 1


def bucket_index(values_s: NDArray[np.float64]) -> NDArray[np.intp]:
    """Index of the bucket each value falls in (``le`` semantics, as Prometheus)."""
    return np.searchsorted(BOUNDS_S, values_s, side="left")


class Histogram:
    """A mutable log-bucketed histogram of durations in seconds."""

    __slots__ = ("counts", "sum_s")

    def __init__(self) -> None:
        self.counts: NDArray[np.int64] = np.zeros(N_BUCKETS, dtype=np.int64)
        self.sum_s = 0.0

    def observe_many(self, values_s: NDArray[np.float64]) -> None:
        """Add many observations at once (vectorised)."""
        if values_s.size == 0:
            return
        self.counts += np.bincount(bucket_index(values_s), minlength=N_BUCKETS)
        self.sum_s += float(values_s.sum())

    def merge(self, other: Histogram) -> None:
        """Add another histogram's observations to this one."""
        self.counts += other.counts
        self.sum_s += other.sum_s

    def freeze(self) -> HistogramView:
        """An immutable copy for a snapshot."""
        counts = self.counts.copy()
        counts.flags.writeable = False
        return HistogramView(counts=counts, sum_s=self.sum_s)


@dataclass(frozen=True, slots=True)
class HistogramView:
    """An immutable histogram: per-bucket counts (not cumulative) and the sum."""

    counts: NDArray[np.int64]
    sum_s: float

    @property
    def count(self) -> int:
        """Number of observations."""
        return int(self.counts.sum())

    def cumulative(self) -> NDArray[np.int64]:
        """Cumulative counts per bucket, the last one being the total (``le="+Inf"``)."""
        return np.cumsum(self.counts)

    def quantile(self, q: float) -> float:
        """The q-quantile (0 < q <= 1) in seconds; NaN when empty."""
        total = self.count
        if total == 0:
            return float("nan")
        cum = self.cumulative()
        rank = q * total
        i = int(np.searchsorted(cum, rank, side="left"))
        if i >= BOUNDS_S.size:  # overflow bucket: report its lower bound
            return float(BOUNDS_S[-1])
        upper = float(BOUNDS_S[i])
        lower = float(BOUNDS_S[i - 1]) if i > 0 else upper / 10 ** (1 / BUCKETS_PER_DECADE)
        below = float(cum[i - 1]) if i > 0 else 0.0
        inside = float(self.counts[i])
        frac = (rank - below) / inside if inside else 1.0
        return float(lower * (upper / lower) ** min(max(frac, 0.0), 1.0))

    def mean(self) -> float:
        """Mean in seconds; NaN when empty."""
        n = self.count
        return self.sum_s / n if n else float("nan")

    @staticmethod
    def empty() -> HistogramView:
        """An empty view."""
        return Histogram().freeze()

    def merged(self, other: HistogramView) -> HistogramView:
        """A new view holding both histograms' observations."""
        counts = self.counts + other.counts
        counts.flags.writeable = False
        return HistogramView(counts=counts, sum_s=self.sum_s + other.sum_s)


class HistogramRows:
    """Histograms that share one array (a row each), filled together: each value goes to
    the row of its group in one compiled pass (``kernels.slots.observe_rows``), the same
    as ``observe_many`` on each group's values."""

    def __init__(self, n: int) -> None:
        self.counts: NDArray[np.int64] = np.zeros((n, N_BUCKETS), dtype=np.int64)
        self.hists = [Histogram() for _ in range(n)]
        for h, row in zip(self.hists, self.counts, strict=True):
            h.counts = row  # a view: the kernel's increments are the histogram's

    def observe(self, group: NDArray[np.integer], values_s: NDArray[np.float64]) -> None:
        """Add ``values_s[i]`` to histogram ``group[i]``."""
        from fabric_core.kernels.slots import observe_rows  # compiled: imported when used

        if values_s.size == 0:
            return
        sums = np.zeros(len(self.hists))
        observe_rows(self.counts, sums, np.asarray(group, np.int16), values_s, BOUNDS_S)
        for h, s in zip(self.hists, sums.tolist(), strict=True):
            h.sum_s += s
