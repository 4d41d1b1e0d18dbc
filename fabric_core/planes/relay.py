"""A plane's stand-in for one of the coordinator's workloads: it starts the parts the
coordinator hands it, at their ticks, and keeps their completions for it.

A plane engine runs one relay per coordinator workload, in the same order, with the same
name and traffic class, so the plane's flows have the classes (and virtual lanes) the
workload's flows would have on one fabric. What the plane's fabric-wide cap refuses it
keeps too (``take_refused``): the coordinator hands the refused messages back to their
workloads, as one fabric does its refused flows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.flows import Completions, FlowRequests
from fabric_core.workloads.base import Workload


@dataclass
class Relay(Workload):
    """Starts queued parts at their ticks (``queue``) and keeps what completed (``take``)
    and what the plane refused (``take_refused``)."""

    kind: str = "relay"
    #: the plane fabric's tick number (set by the plane engine once the fabric is built)
    tick_of: Callable[[], int] = lambda: 0
    #: parts to start, by the tick they start in (ascending; several per tick at most once)
    _queued: list[tuple[int, FlowRequests]] = field(default_factory=list, repr=False)
    _done: list[Completions] = field(default_factory=list, repr=False)
    _refused: list[NDArray[np.int64]] = field(default_factory=list, repr=False)

    def queue(self, tick: NDArray[np.int64], parts: FlowRequests) -> None:
        """Parts to start, each in tick ``tick`` (``parts``' arrays and ``tick`` are of one
        length, ticks ascending)."""
        if tick.size == 0:
            return
        bounds = np.flatnonzero(np.diff(tick)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, tick.size], strict=True):
            pick = slice(int(lo), int(hi))
            self._queued.append(
                (
                    int(tick[lo]),
                    FlowRequests(
                        parts.src[pick],
                        parts.dst[pick],
                        parts.size_bytes[pick],
                        parts.tag[pick],
                        parts.ready_s[pick],
                        None if parts.extra_latency_s is None else parts.extra_latency_s[pick],
                    ),
                )
            )
        self._queued.sort(key=lambda q: q[0])

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        """The parts queued for this tick (the fabric's tick number)."""
        if not self._queued or self._queued[0][0] > self.tick_of():
            return FlowRequests.empty()
        return self._queued.pop(0)[1]

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        """The start of the tick the next queued parts start in (none queued: never)."""
        if not self._queued:
            return float("inf")
        return now_s + (self._queued[0][0] - self.tick_of()) * dt_s

    def on_complete(self, done: Completions, now_s: float) -> None:
        self._done.append(done)

    def on_refused(self, refused: FlowRequests) -> None:
        self._refused.append(refused.tag)

    def take(self) -> list[Completions]:
        """The completions kept since the last call, in the order they came."""
        out, self._done = self._done, []
        return out

    def take_refused(self) -> list[NDArray[np.int64]]:
        """The messages (the parts' tags) the plane refused since the last call, in the
        order it refused them."""
        out, self._refused = self._refused, []
        return out
