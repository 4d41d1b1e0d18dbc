"""Which links get per-link series in a scrape (the ``--link-metrics`` policy).

``top:N`` must not make counters look as if they went backwards, nor make
series flicker in and out with every scrape. So a link, once among the N
hottest, keeps its series for ``hold_s`` seconds of wall time after it was last
hot (a ``rate()`` over a few minutes sees a continuous series); links that are
not up, or whose error counters are not zero, are always exported: error
counters only grow, so that set only grows too, and an operator looking for a
downed link always finds it. Aggregates per switch and per tier are computed
over *all* links in every mode, so they never decrease either.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from exporters.prometheus.options import LinkMetrics

#: How long a link keeps its series after it was last among the hottest N.
DEFAULT_HOLD_S = 300.0


def heat(
    utilisation: NDArray[np.float64],
    queue_bytes: NDArray[np.float64],
    buffer_bytes: NDArray[np.float64],
) -> NDArray[np.float64]:
    """A link's "hotness": utilisation (0..1) plus queue fill (queue / buffer, 0..~1)."""
    fill = np.divide(
        queue_bytes, buffer_bytes, out=np.zeros_like(queue_bytes), where=buffer_bytes > 0
    )
    return np.asarray(utilisation + fill, dtype=np.float64)


class LinkSelector:
    """Remembers which links were hot recently; see the module docstring."""

    def __init__(
        self,
        policy: LinkMetrics,
        hold_s: float = DEFAULT_HOLD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create a selector for ``policy`` (``all`` / ``top:N`` / ``switch``)."""
        self.policy = policy
        self.hold_s = hold_s
        self._clock = clock
        self._last_hot: NDArray[np.float64] = np.empty(0)

    def select(self, score: NDArray[np.float64], always: NDArray[np.bool_]) -> NDArray[np.intp]:
        """Indices (ascending) of the links to export in this scrape.

        Args:
            score: hotness per link (higher = hotter); only links with score > 0
                count as hot.
            always: links exported whatever their score (not up, or with errors).
        """
        n = score.size
        if self.policy.mode == "all":
            return np.arange(n)
        if self.policy.mode == "switch":
            return np.empty(0, dtype=np.intp)
        if self._last_hot.size != n:  # a new link table: start afresh
            self._last_hot = np.full(n, -np.inf)
        now = self._clock()
        k = min(self.policy.top_n, n)
        if k > 0:
            top = np.argpartition(-score, k - 1)[:k] if k < n else np.arange(n)
            top = top[score[top] > 0]
            self._last_hot[top] = now
        keep = (now - self._last_hot <= self.hold_s) | always
        return np.flatnonzero(keep)
