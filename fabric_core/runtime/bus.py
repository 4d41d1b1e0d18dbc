"""Latest-value fan-out of snapshots.

The engine publishes; every consumer reads the *latest* snapshot. Nothing is
queued, so a slow consumer skips snapshots and can never slow the engine down.
Consumers either poll ``latest`` (the console on a timer, the Prometheus
collector on each scrape) or ``await next_after(tick)`` (the MQTT bridge).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fabric_core.runtime.snapshot import Snapshot


class SnapshotBus:
    """Holds the latest snapshot and wakes the consumers waiting for a newer one."""

    def __init__(self) -> None:
        self._latest: Snapshot | None = None
        self._changed: asyncio.Condition | None = None
        self._closed = False

    @property
    def latest(self) -> Snapshot | None:
        """The most recent snapshot, or ``None`` before the first tick."""
        return self._latest

    def _condition(self) -> asyncio.Condition:
        # Created lazily so that the bus can be built outside a running loop.
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def publish(self, snapshot: Snapshot) -> None:
        """Replace the latest snapshot (cheap; never blocks) and wake waiters."""
        self._latest = snapshot
        cond = self._changed
        if cond is not None:
            asyncio.get_running_loop().create_task(self._notify(cond))

    @staticmethod
    async def _notify(cond: asyncio.Condition) -> None:
        async with cond:
            cond.notify_all()

    def close(self) -> None:
        """Wake every waiter; ``subscribe`` iterators end."""
        self._closed = True
        cond = self._changed
        if cond is not None:
            with contextlib.suppress(RuntimeError):  # no running loop: nobody can be waiting
                asyncio.get_running_loop().create_task(self._notify(cond))

    @property
    def closed(self) -> bool:
        """True once the publisher has stopped."""
        return self._closed

    async def next_after(self, tick: int) -> Snapshot | None:
        """Wait for a snapshot newer than ``tick``; ``None`` if the bus closed."""
        cond = self._condition()
        async with cond:
            await cond.wait_for(
                lambda: self._closed or (self._latest is not None and self._latest.tick > tick)
            )
        if self._latest is not None and self._latest.tick > tick:
            return self._latest
        return None

    async def subscribe(self, min_interval_s: float = 0.0) -> AsyncIterator[Snapshot]:
        """Yield the latest snapshot each time there is a newer one.

        At most one snapshot every ``min_interval_s`` seconds; the ones in
        between are skipped, never queued.
        """
        tick = -1
        while True:
            snap = await self.next_after(tick)
            if snap is None:
                return
            tick = snap.tick
            yield snap
            if min_interval_s > 0:
                await asyncio.sleep(min_interval_s)
