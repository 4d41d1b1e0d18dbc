"""Poisson arrivals drawn in the order they come, whatever the tick.

A workload that draws "how many arrivals in this tick" (``poisson(rate * dt)``) draws a
different sample for every tick length: two engines that run the same scenario on
different ticks (the compare view's engines adapt theirs independently) would offer
different arrivals, and every arrival would sit at the start of its tick.
``PoissonArrivals`` draws the process itself instead: the gaps between arrivals
(exponential), where each one arrives (one of ``places``, uniformly) and a uniform number
for the workload's own use (a peer, a size), in blocks, ahead of time. A tick takes the
arrivals before its end, at their own times, so the same seed gives the same arrivals at
the same times on any tick, and a workload knows when the next one comes (its
``quiet_until``).
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np
from numpy.typing import NDArray

#: Arrivals drawn at a time: a block's draws cost about what one tick's did before.
BLOCK = 256


def _none() -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
    """What ``take`` returns when nothing arrives: the same read-only arrays every time
    (most ticks take one arrival or none)."""
    t, at, u = np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0)
    for a in (t, at, u):
        a.setflags(write=False)
    return t, at, u


_NONE = _none()


class PoissonArrivals:
    """A Poisson process of ``rate_per_s`` arrivals a second from ``start_s``, each at one
    of ``places`` and with a uniform number in [0, 1) of its own.

    The generator handed to ``take`` must serve this process only (a workload's own
    stream, ``workloads.base.workload_rngs``), so that what it draws does not depend on
    when it is asked."""

    def __init__(self, rate_per_s: float, places: int, start_s: float) -> None:
        if rate_per_s < 0 or not np.isfinite(rate_per_s):
            raise ValueError(f"a rate of arrivals must be finite and >= 0, got {rate_per_s}")
        if places < 1:
            raise ValueError("arrivals need at least one place to arrive at")
        self.rate_per_s = rate_per_s
        self.places = places
        self._last_s = start_s  # the last arrival drawn (or the start)
        self._t = np.zeros(0)
        #: ``_t`` as a list, which ``bisect`` searches in 0.1 µs (``np.searchsorted`` on a
        #: slice of ``_t`` took 0.9 µs, once a tick)
        self._t_list: list[float] = []
        self._at = np.zeros(0, dtype=np.int64)
        self._u = np.zeros(0)
        self._i = 0  # the first arrival not taken yet

    @property
    def next_s(self) -> float:
        """When the next arrival comes (infinity at a rate of 0; before the first
        ``take``, the start: nothing is drawn yet)."""
        if self.rate_per_s == 0:
            return float("inf")
        if self._i >= self._t.size:
            return self._last_s
        return float(self._t[self._i])

    def drawn(
        self,
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], int, float]:
        """The block drawn (times, places, uniform numbers), the first arrival not taken
        and the last drawn: what a kernel takes arrivals from and draws the next block
        after, as ``take`` does (``kernels.busy``)."""
        return self._t, self._at, self._u, self._i, self._last_s

    def resume(
        self,
        t: NDArray[np.float64],
        at: NDArray[np.int64],
        u: NDArray[np.float64],
        first: int,
        last_s: float,
    ) -> None:
        """Carry on from where a kernel left the process (``drawn``'s parts)."""
        if not (t.size == at.size == u.size and 0 <= first < t.size):
            raise ValueError("not a block of arrivals with one not taken yet")
        if t is not self._t:
            self._t, self._t_list, self._at, self._u = t, t.tolist(), at, u
        self._i, self._last_s = first, last_s

    def take(
        self, end_s: float, rng: np.random.Generator
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
        """The arrivals before ``end_s`` not taken yet: their times, places and uniform
        numbers. Draws the next block whenever the last drawn comes before ``end_s``, so
        the next arrival is always known (``next_s``) between calls. Nothing arriving:
        read-only empty arrays."""
        if self.rate_per_s == 0:
            return _NONE
        # a block more while none is left to take, or all that are come before the end
        while self._i >= self._t.size or self._last_s < end_s:
            self._draw(rng)
        stop = bisect_left(self._t_list, end_s, self._i)
        if stop == self._i:
            return _NONE
        start, self._i = self._i, stop
        return self._t[start:stop], self._at[start:stop], self._u[start:stop]

    def _draw(self, rng: np.random.Generator) -> None:
        """The next ``BLOCK`` arrivals, in one fixed order of draws, after those of the
        last block not taken yet (``kernels.busy`` draws them the same way)."""
        gaps = rng.exponential(1.0 / self.rate_per_s, BLOCK)
        t = self._last_s + np.cumsum(gaps)
        at = rng.integers(0, self.places, BLOCK)
        u = rng.random(BLOCK)
        i = self._i
        self._t = np.concatenate((self._t[i:], t))
        self._t_list = self._t.tolist()
        self._at = np.concatenate((self._at[i:], at))
        self._u = np.concatenate((self._u[i:], u))
        self._i = 0
        self._last_s = float(t[-1])
