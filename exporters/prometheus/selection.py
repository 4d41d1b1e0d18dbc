"""Which links get per-link series in a scrape (the ``--link-metrics`` policy).

``top:N`` must not make counters look as if they went backwards, nor make
series flicker in and out with every scrape. So a link, once among the N
hottest, keeps its series for ``hold_s`` seconds of wall time after it was last
hot (a ``rate()`` over a few minutes sees a continuous series). Links that are
not up are exported while they are not up; a link whose error counters grew is
exported for ``hold_s`` after they last grew (it "was hot" then), so after a
storm the set shrinks back instead of keeping every link that ever had an
error. The total is capped (``max_links``, default ``max(200, 4 N)``): past it the
links down now come first, then the most recently hot; ``cut`` says how many
links the cap left out (``fabtop_exporter_links_cut``). Aggregates per switch and
per tier are computed over *all* links in every mode, so they never decrease.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from exporters.prometheus.options import LinkMetrics

#: How long a link keeps its series after it was last among the hottest N (or its
#: error counters last grew).
DEFAULT_HOLD_S = 300.0
#: Fewest links ``top:N`` may export before the cap cuts (the cap is max(this, 4 N)).
MIN_LINK_CAP = 200


def link_cap(policy: LinkMetrics) -> int | None:
    """The most links a scrape exports under ``policy`` (None: no cap, ``all``)."""
    return max(MIN_LINK_CAP, 4 * policy.top_n) if policy.mode == "top" else None


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
        max_links: int | None = None,
    ) -> None:
        """Create a selector for ``policy`` (``all`` / ``top:N`` / ``switch``).

        ``max_links`` caps the links exported (default ``link_cap(policy)``).
        """
        self.policy = policy
        self.hold_s = hold_s
        self._clock = clock
        self.max_links = link_cap(policy) if max_links is None else max_links
        self._last_hot: NDArray[np.float64] = np.empty(0)
        self._errors: NDArray[np.float64] = np.empty(0)
        #: links the cap left out of the last selection
        self.cut = 0

    def select(
        self,
        score: NDArray[np.float64],
        always: NDArray[np.bool_],
        errors: NDArray[np.float64] | None = None,
    ) -> NDArray[np.intp]:
        """Indices (ascending) of the links to export in this scrape.

        Args:
            score: hotness per link (higher = hotter); only links with score > 0
                count as hot.
            always: links exported whatever their score (not up), within the cap.
            errors: per link, a sum of its error counters; a link whose sum grew
                counts as hot now.
        """
        n = score.size
        self.cut = 0
        if self.policy.mode == "all":
            return np.arange(n)
        if self.policy.mode == "switch":
            return np.empty(0, dtype=np.intp)
        now = self._clock()
        if self._last_hot.size != n:  # a new link table: start afresh
            self._last_hot = np.full(n, -np.inf)
            self._errors = np.zeros(n)
        if errors is not None:
            self._last_hot[errors > self._errors] = now
            self._errors = np.maximum(self._errors, errors)
        k = min(self.policy.top_n, n)
        if k > 0:
            top = np.argpartition(-score, k - 1)[:k] if k < n else np.arange(n)
            top = top[score[top] > 0]
            self._last_hot[top] = now
        keep = np.flatnonzero((now - self._last_hot <= self.hold_s) | always)
        cap = self.max_links
        if cap is not None and keep.size > cap:
            # down now first, then the most recently hot, then the hottest
            order = np.lexsort((-score[keep], -self._last_hot[keep], ~always[keep]))
            self.cut = int(keep.size - cap)
            keep = np.sort(keep[order[:cap]])
        return keep
