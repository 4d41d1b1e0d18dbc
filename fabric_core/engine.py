"""The engine: an asyncio task that runs a ``Fabric`` and publishes snapshots.

Commands come in through ``submit`` and are applied at a tick boundary, in the
order received, so a run is reproducible from (scenario, seed, command log).
Ticks run in batches in a worker thread so that a long batch never starves the
event loop the console and the exporters share. Pacing: the engine aims at
``speed`` simulated seconds per wall second (0 = flat out) and publishes a
snapshot at most every ``publish_interval_s`` of wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from fabric_core.bus import SnapshotBus
from fabric_core.commands import (
    Command,
    CommandError,
    CommandResult,
    Pause,
    Resume,
    SetSpeed,
)
from fabric_core.fabric import Fabric
from fabric_core.snapshot import Snapshot


@dataclass
class _Pending:
    command: Command
    reply: asyncio.Future[CommandResult]


class Engine:
    """Runs a fabric continuously; see the module docstring."""

    def __init__(
        self,
        fabric: Fabric,
        *,
        speed: float = 1e-3,
        publish_interval_s: float = 0.1,
        max_batch_wall_s: float = 0.05,
        on_command: Callable[[int, Command], None] | None = None,
    ) -> None:
        """Create an engine.

        Args:
            fabric: the emulated fabric (owned by the engine from now on).
            speed: simulated seconds per wall second; 0 = as fast as possible.
            publish_interval_s: wall time between snapshots.
            max_batch_wall_s: longest stretch of ticks run without looking at
                commands (bounds the latency of pause and of every command).
            on_command: called with (tick, command) for every command applied
                (the recorder uses it).
        """
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self.fabric = fabric
        self.bus = SnapshotBus()
        self.speed = speed
        self.running = True
        self.publish_interval_s = publish_interval_s
        self.max_batch_wall_s = max_batch_wall_s
        self._on_command = on_command
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._wall_start = time.monotonic()
        self._measured_speed = 0.0
        self._ticks_per_batch = 1
        self._peers: list[Engine] = []

    @staticmethod
    def lockstep(*engines: Engine) -> None:
        """Keep several engines (the compare view's fabrics) at the same simulated time:
        an engine that gets ahead of a running peer waits for it, so the clocks stay
        within one batch of each other whatever each fabric costs to step."""
        for engine in engines:
            engine._peers = [e for e in engines if e is not engine]

    # ---------------------------------------------------------------- commands
    async def submit(self, command: Command) -> CommandResult:
        """Queue a command; returns its result once applied at a tick boundary."""
        reply: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(command, reply))
        self._wake.set()  # cut a pacing sleep short: commands apply at the next boundary
        return await reply

    def _apply_pending(self) -> bool:
        """Apply queued commands; True if any was applied (a snapshot is due)."""
        applied = False
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            result = self.apply(pending.command)
            if not pending.reply.done():  # the caller may have given up waiting
                pending.reply.set_result(result)
            applied = True
        return applied

    def apply(self, command: Command) -> CommandResult:
        """Apply one command now (between ticks). Never raises for bad input."""
        try:
            if isinstance(command, Pause):
                self.running = False
                detail: dict[str, object] = {}
            elif isinstance(command, Resume):
                self.running = True
                detail = {}
            elif isinstance(command, SetSpeed):
                self.speed = command.speed
                detail = {"speed": command.speed}
            else:
                detail = dict(self.fabric.apply(command))
        except CommandError as exc:
            return CommandResult(id=command.id, ok=False, error=str(exc))
        if self._on_command is not None:
            self._on_command(self.fabric.tick, command)
        return CommandResult(id=command.id, ok=True, detail=detail)

    # ---------------------------------------------------------------- running
    def stop(self) -> None:
        """Ask ``run`` to return after the current batch."""
        self._stop.set()

    def snapshot(self) -> Snapshot:
        """Build a snapshot of the fabric now, with the engine's pacing figures."""
        return self.fabric.snapshot(
            wall_time_s=time.monotonic() - self._wall_start,
            target_speed=self.speed,
            measured_speed=self._measured_speed,
            running=self.running,
        )

    async def run(self) -> None:
        """Run until ``stop``; publishes the first snapshot at once."""
        self._wall_start = time.monotonic()
        self.bus.publish(self.snapshot())
        last_publish = time.monotonic()
        try:
            while not self._stop.is_set():
                changed = self._apply_pending()
                if not self.running:
                    if changed:
                        self.bus.publish(self.snapshot())
                    await self._idle(0.02)
                    continue
                if self._ahead_of_peers():
                    await self._idle(0.002)
                    continue
                await self._run_batch()
                now = time.monotonic()
                if changed or now - last_publish >= self.publish_interval_s:
                    self.bus.publish(self.snapshot())
                    last_publish = now
        finally:
            self._apply_pending()
            self.bus.publish(self.snapshot())
            self.bus.close()

    def _ahead_of_peers(self) -> bool:
        mine = self.fabric.sim_time_s
        return any(
            p.running and not p.bus.closed and p.fabric.sim_time_s < mine - 1e-15
            for p in self._peers
        )

    async def _idle(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    async def _run_batch(self) -> None:
        """Run a batch of ticks in a worker thread, then sleep to keep pace."""
        n = self._ticks_per_batch
        wall0 = time.monotonic()
        sim0 = self.fabric.sim_time_s
        await asyncio.to_thread(self.fabric.run_ticks, n)
        wall = max(time.monotonic() - wall0, 1e-9)
        sim = self.fabric.sim_time_s - sim0
        # adapt the batch so that it lasts about max_batch_wall_s / 2
        per_tick = wall / n
        self._ticks_per_batch = max(1, min(10_000, int(self.max_batch_wall_s / 2 / per_tick)))
        if self.speed > 0:
            wanted_wall = sim / self.speed
            if wanted_wall > wall:
                await self._idle(wanted_wall - wall)
            # Throttle the batch so one batch never spans much more than the interval.
            ticks_for_interval = self.publish_interval_s * self.speed / max(self.fabric.dt_s, 1e-15)
            self._ticks_per_batch = max(1, min(self._ticks_per_batch, int(ticks_for_interval)))
        elapsed = max(time.monotonic() - wall0, 1e-9)
        inst = sim / elapsed
        self._measured_speed = (
            inst if self._measured_speed == 0 else 0.8 * self._measured_speed + 0.2 * inst
        )
