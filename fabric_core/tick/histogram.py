"""Log-bucketed latency histograms: bounded memory, mergeable, exportable.

Buckets are fixed for the whole program (so histograms from any run, class or
workload merge by adding counts): ``BUCKETS_PER_DECADE`` log-spaced upper bounds
from 10 ns to 100 s, plus an overflow bucket. The bucket counts are what the
Prometheus exporter serves; they never change with what follows.

Quantiles are read the way ``numpy.percentile`` reads samples (linear
interpolation between order statistics at rank ``q · (n − 1)``), from:

* **the exact values** while the histogram holds at most ``EXACT_SAMPLES``
  observations: a histogram keeps its last ``EXACT_SAMPLES`` values, so a
  quantile of few samples is the samples' own quantile, not a bucket midpoint;
* otherwise **estimated order statistics**: the ``c`` observations of a bucket
  are placed at log-even positions inside it (``(j + ½) / c``), the smallest and
  largest at the observed min and max, and the result clamped to them. Each
  estimate lies in the bucket of the true order statistic, so the quantile is
  within one bucket width (10**(1/20) − 1, about 12 %) of numpy's, and usually
  far closer. A view with counts only (a windowed difference, a decoded remote
  histogram) uses the same estimate without the min/max: one sample then gives
  p50 = p99 = the middle of its bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.lazy import LazyModule

if TYPE_CHECKING:
    from fabric_core.tick.kernels import histogram as hist_kernels
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    hist_kernels = LazyModule("fabric_core.tick.kernels.histogram")

BUCKETS_PER_DECADE = 20
LOWEST_BOUND_S = 1e-8
HIGHEST_BOUND_S = 100.0
#: Exact values kept per histogram. Below ~100 samples p99 and p99.9 are order statistics
#: next to the max, where a bucket estimate misleads most; 128 values cost 1 KiB.
EXACT_SAMPLES = 128

#: Upper bounds (seconds) of the finite buckets; the last bucket (+Inf) follows them.
BOUNDS_S: NDArray[np.float64] = np.logspace(
    np.log10(LOWEST_BOUND_S),
    np.log10(HIGHEST_BOUND_S),
    round(np.log10(HIGHEST_BOUND_S / LOWEST_BOUND_S)) * BUCKETS_PER_DECADE + 1,
)
N_BUCKETS = BOUNDS_S.size + 1
_WIDTH = 10 ** (1 / BUCKETS_PER_DECADE)  # ratio of a bucket's bounds


def bucket_index(values_s: NDArray[np.float64]) -> NDArray[np.intp]:
    """Index of the bucket each value falls in (``le`` semantics, as Prometheus)."""
    return np.searchsorted(BOUNDS_S, values_s, side="left")


def _empty() -> NDArray[np.float64]:
    return np.zeros(0)


#: places in a ``Histogram``'s stats array (``kernels.histogram``'s, which numba
#: compiles: the core's first import of this module must not pull numba in)
_SUM, _MIN, _MAX, _SEEN = 0, 1, 2, 3


def _fresh_stats() -> NDArray[np.float64]:
    """(sum, min, max, seen) of no observations."""
    return np.array([0.0, math.inf, -math.inf, 0.0])


class Histogram:
    """A mutable log-bucketed histogram of durations in seconds, with its min, max and
    last ``EXACT_SAMPLES`` values.

    Its state is three arrays, filled by compiled kernels (``kernels.histogram``): the
    bucket ``counts``, ``_stats`` (sum, min, max, values seen) and ``_ring`` (the last
    values, value ``k`` at ``k % EXACT_SAMPLES``). A ``HistogramRows`` row's arrays are
    views into its shared ones.
    """

    __slots__ = ("_ring", "_stats", "counts")

    def __init__(self) -> None:
        self.counts: NDArray[np.int64] = np.zeros(N_BUCKETS, dtype=np.int64)
        self._stats: NDArray[np.float64] = _fresh_stats()
        self._ring: NDArray[np.float64] = np.zeros(EXACT_SAMPLES)

    @property
    def sum_s(self) -> float:
        """Sum of the observations, seconds."""
        return float(self._stats[_SUM])

    @property
    def min_s(self) -> float:
        """Smallest observation (inf when none)."""
        return float(self._stats[_MIN])

    @property
    def max_s(self) -> float:
        """Largest observation (-inf when none)."""
        return float(self._stats[_MAX])

    @property
    def recent_s(self) -> NDArray[np.float64]:
        """The last (at most ``EXACT_SAMPLES``) values, oldest first (a new array)."""
        seen = int(self._stats[_SEEN])
        if seen <= EXACT_SAMPLES:
            return self._ring[:seen].copy()
        at = seen % EXACT_SAMPLES
        return np.concatenate((self._ring[at:], self._ring[:at]))

    def observe_many(self, values_s: NDArray[np.float64]) -> None:
        """Add many observations at once."""
        if values_s.size == 0:
            return
        if values_s.size > 1:  # numpy's (pairwise) sum; the kernel adds a single value
            self._stats[_SUM] += float(values_s.sum())
        hist_kernels.observe_values(
            self.counts, self._stats, self._ring, np.asarray(values_s, np.float64), BOUNDS_S
        )

    def note(self, values_s: NDArray[np.float64]) -> None:
        """Track min, max and the last values (the counts are added elsewhere)."""
        hist_kernels.keep_values(self._stats, self._ring, np.asarray(values_s, np.float64))

    def merge(self, other: Histogram) -> None:
        """Add another histogram's observations to this one."""
        self.counts += other.counts
        self._stats[_SUM] += other._stats[_SUM]
        recent = other.recent_s
        if recent.size:
            self.note(recent)  # its last values, in order
            # its min and max may be older than the values it kept
            self._stats[_MIN] = min(self._stats[_MIN], other._stats[_MIN])
            self._stats[_MAX] = max(self._stats[_MAX], other._stats[_MAX])

    def freeze(self) -> HistogramView:
        """An immutable copy for a snapshot."""
        counts = self.counts.copy()
        counts.flags.writeable = False
        recent = self.recent_s  # (a new array)
        recent.flags.writeable = False
        empty = not recent.size
        return HistogramView(
            counts=counts,
            sum_s=self.sum_s,
            min_s=math.nan if empty else self.min_s,
            max_s=math.nan if empty else self.max_s,
            recent_s=recent,
        )


@dataclass(frozen=True, slots=True)
class HistogramView:
    """An immutable histogram: per-bucket counts (not cumulative) and the sum, and, when
    it comes from a ``Histogram``, the observed min and max and the last values
    (oldest first). A view made of counts alone (NaN min/max, no values) still gives
    quantiles, from the buckets."""

    counts: NDArray[np.int64]
    sum_s: float
    min_s: float = math.nan
    max_s: float = math.nan
    recent_s: NDArray[np.float64] = field(default_factory=_empty)

    @property
    def count(self) -> int:
        """Number of observations."""
        return int(self.counts.sum())

    def cumulative(self) -> NDArray[np.int64]:
        """Cumulative counts per bucket, the last one being the total (``le="+Inf"``)."""
        return np.cumsum(self.counts)

    def exact(self) -> NDArray[np.float64] | None:
        """Every observation, when the view still holds them all; else None."""
        n = self.count
        return self.recent_s if 0 < n <= self.recent_s.size else None

    def quantile(self, q: float) -> float:
        """The q-quantile (0 <= q <= 1) in seconds, as ``numpy.percentile`` of the
        observations (exactly while they are all kept); NaN when empty."""
        n = self.count
        if n == 0:
            return float("nan")
        exact = self.exact()
        if exact is not None:
            return float(np.quantile(exact, q))
        h = q * (n - 1)
        lo = math.floor(h)
        a = self._order_statistic(lo, n)
        b = self._order_statistic(min(lo + 1, n - 1), n)
        v = a + (h - lo) * (b - a)
        if not math.isnan(self.min_s):
            v = min(max(v, self.min_s), self.max_s)
        return float(v)

    def _order_statistic(self, k: int, n: int) -> float:
        """Estimate of the k-th smallest observation (0-based) from the buckets."""
        if not math.isnan(self.min_s) and k in (0, n - 1):
            return self.min_s if k == 0 else self.max_s
        cum = self.cumulative()
        i = int(np.searchsorted(cum, k, side="right"))  # bucket holding rank k
        if i >= BOUNDS_S.size:  # overflow bucket: its lower bound is all we know
            return float(BOUNDS_S[-1])
        upper = float(BOUNDS_S[i])
        lower = upper / _WIDTH
        below = int(cum[i - 1]) if i > 0 else 0
        frac = (k - below + 0.5) / int(self.counts[i])
        return float(lower * _WIDTH**frac)

    def mean(self) -> float:
        """Mean in seconds; NaN when empty."""
        n = self.count
        return self.sum_s / n if n else float("nan")

    def since(self, older: HistogramView) -> HistogramView:
        """The observations made after ``older`` (an earlier view of the same histogram):
        counts subtracted, and the new values themselves while they are among the
        values kept (so a window of few samples gives exact quantiles)."""
        counts = self.counts - older.counts
        counts.flags.writeable = False
        new = int(counts.sum())
        if 0 < new <= self.recent_s.size:
            recent = self.recent_s[-new:]
            return HistogramView(
                counts, self.sum_s - older.sum_s, float(recent.min()), float(recent.max()), recent
            )
        return HistogramView(counts, self.sum_s - older.sum_s)

    @staticmethod
    def empty() -> HistogramView:
        """An empty view."""
        return Histogram().freeze()

    def merged(self, other: HistogramView) -> HistogramView:
        """A new view holding both histograms' observations."""
        counts = self.counts + other.counts
        counts.flags.writeable = False
        sides = [v for v in (self, other) if v.count]
        if sides and all(v.recent_s.size for v in sides):
            lo, hi = min(v.min_s for v in sides), max(v.max_s for v in sides)
        else:  # nothing, or a side of counts only: the union's min and max are unknown
            lo = hi = math.nan
        recent = np.concatenate((self.recent_s, other.recent_s))[-EXACT_SAMPLES:]
        recent.flags.writeable = False
        return HistogramView(counts, self.sum_s + other.sum_s, lo, hi, recent)


class HistogramRows:
    """Histograms that share arrays (a row each), filled together: each value goes to
    the row of its group in one compiled pass (``kernels.histogram.observe_rows``), the
    same as ``observe_many`` on each group's values, except that a call's values of a
    row are summed in order."""

    def __init__(self, n: int) -> None:
        self.counts: NDArray[np.int64] = np.zeros((n, N_BUCKETS), dtype=np.int64)
        self._stats = np.repeat(_fresh_stats()[None, :], n, axis=0)
        self._rings = np.zeros((n, EXACT_SAMPLES))
        self.hists = [Histogram() for _ in range(n)]
        for i, h in enumerate(self.hists):
            # views: the kernel's increments are the histogram's
            h.counts, h._stats, h._ring = self.counts[i], self._stats[i], self._rings[i]

    def observe(self, group: NDArray[np.integer], values_s: NDArray[np.float64]) -> None:
        """Add ``values_s[i]`` to histogram ``group[i]``."""
        if values_s.size == 0:
            return
        # (the flow table's classes are int16; another type's cast may wrap, so first clip)
        rows = (
            cast("NDArray[np.int16]", group)
            if group.dtype == np.int16
            else np.asarray(np.clip(group, -1, self.counts.shape[0]), np.int16)
        )
        filed = hist_kernels.observe_rows(
            self.counts,
            self._stats,
            self._rings,
            rows,
            np.asarray(values_s, np.float64),
            BOUNDS_S,
        )
        if not filed:
            raise self.rows_error(group)

    def arrays(
        self,
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The rows' shared arrays (counts, stats, last values) and the bucket bounds: for
        a kernel that files values itself (``kernels.histogram.observe_rows``' arguments
        but the values and their rows, in its order)."""
        return self.counts, self._stats, self._rings, BOUNDS_S

    def rows_error(self, group: NDArray[np.integer]) -> IndexError:
        """The error for values of ``group`` that name no row (and were not filed)."""
        return IndexError(
            f"histogram rows 0..{self.counts.shape[0] - 1}, got {group.min()}..{group.max()}"
        )
