"""Short utilisation and credit histories for the links an operator is looking at.

Keeping history for every link would cost links × samples memory; the console
keeps it for the links on screen (the table's top-N and an open detail
screen), which is what sparklines need.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from fabric_core.runtime.snapshot import Snapshot


class LinkHistory:
    """Per-link deques of utilisation (0..1) and credits (bytes), one entry per new tick."""

    def __init__(self, length: int = 60, max_links: int = 400) -> None:
        self.length = length
        self.max_links = max_links
        self.util: dict[str, deque[float]] = {}
        self.credits: dict[str, deque[float]] = {}
        self.queue: dict[str, deque[float]] = {}
        self._last_tick: int | None = None

    def sample(self, snap: Snapshot, names: Iterable[str]) -> None:
        """Append the values of ``names`` (once per tick; watched links only)."""
        if snap.tick == self._last_tick:
            return
        self._last_tick = snap.tick
        ls = snap.link_state
        index = snap.links.index
        for name in names:
            i = index.get(name)
            if i is None:
                continue
            if name not in self.util:
                if len(self.util) >= self.max_links:
                    self._forget_oldest()
                self.util[name] = deque(maxlen=self.length)
                self.credits[name] = deque(maxlen=self.length)
                self.queue[name] = deque(maxlen=self.length)
            self.util[name].append(float(ls.utilisation[i]))
            self.credits[name].append(float(ls.credits_bytes[i]))
            self.queue[name].append(float(ls.queue_bytes[i]))

    def _forget_oldest(self) -> None:
        oldest = next(iter(self.util))
        for table in (self.util, self.credits, self.queue):
            table.pop(oldest, None)
