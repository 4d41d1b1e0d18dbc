"""A fabric stepped by hand: a deterministic ``FabricSource`` for tests and screenshots.

It wraps an ``Engine`` that is never started: the caller runs ticks with
``step``; commands are applied at once through ``Engine.apply`` (the same code
the running engine uses), so a seeded scenario plus the same steps and
commands always renders the same screen. Header figures that depend on the
wall clock (measured speed) stay at zero.
"""

from __future__ import annotations

from fabric_core.commands import Command, CommandResult
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.snapshot import Snapshot


class SteppedSource:
    """See the module docstring."""

    def __init__(self, fabric: Fabric, description: str = "stepped", speed: float = 1e-3) -> None:
        self.engine = Engine(fabric, speed=speed)
        self.description = description
        self._latest: Snapshot | None = None
        self.publish()

    def publish(self) -> Snapshot:
        """Take a snapshot of the fabric as it is now."""
        snap = self.engine.fabric.snapshot(
            wall_time_s=0.0,
            target_speed=self.engine.speed,
            measured_speed=0.0,
            running=self.engine.running,
        )
        self._latest = snap
        return snap

    def step(self, ticks: int = 1) -> Snapshot:
        """Run ``ticks`` ticks (none while paused) and publish."""
        if self.engine.running and ticks > 0:
            self.engine.fabric.run_ticks(ticks)
        return self.publish()

    def latest(self) -> Snapshot | None:
        """The last snapshot published."""
        return self._latest

    async def submit(self, command: Command) -> CommandResult:
        """Apply ``command`` now (between ticks) and publish."""
        result = self.engine.apply(command)
        self.publish()
        return result
