"""Where the console gets its snapshots and sends its commands.

The embedded engine (the default) and a remote emulator reached over MQTT both
look like this to the console, so the screens are the same for both.
"""

from __future__ import annotations

from typing import Protocol

from fabric_core.commands import Command, CommandResult
from fabric_core.engine import Engine
from fabric_core.snapshot import Snapshot


class FabricSource(Protocol):
    """A live fabric seen from a consumer."""

    #: Shown in the header, e.g. "embedded" or "mqtt://127.0.0.1:1883 fabtop/demo".
    description: str

    def latest(self) -> Snapshot | None:
        """The most recent snapshot, or None before the first one arrives."""

    async def submit(self, command: Command) -> CommandResult:
        """Send a command and wait for its result."""


class EngineSource:
    """An engine running in this process."""

    def __init__(self, engine: Engine, description: str = "embedded") -> None:
        self.engine = engine
        self.description = description

    def latest(self) -> Snapshot | None:
        """The engine's latest published snapshot."""
        return self.engine.bus.latest

    async def submit(self, command: Command) -> CommandResult:
        """Apply a command at the engine's next tick boundary."""
        return await self.engine.submit(command)
