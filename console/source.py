"""Where the console gets its snapshots and sends its commands.

An engine in a process of its own (the default, ``console.process_source``), one
in the console's process (``--in-process``) and a remote emulator reached over MQTT
all look like this to the console, so the screens are the same for all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from console.compiling import Compiling, compiling_note
from console.process_source import ProcessSource
from fabric_core.commands import Command, CommandResult
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.snapshot import Snapshot


class FabricSource(Protocol):
    """A live fabric seen from a consumer."""

    #: Shown in the header, e.g. "embedded" or "mqtt://127.0.0.1:1883 fabtop/demo".
    description: str

    def latest(self) -> Snapshot | None:
        """The most recent snapshot, or None before the first one arrives."""

    async def submit(self, command: Command) -> CommandResult:
        """Send a command and wait for its result."""


@runtime_checkable
class RemoteSource(FabricSource, Protocol):
    """An emulator served elsewhere (``exporters.mqtt.remote.MqttSource``): the broker or
    the emulator can go away while the console shows its last state."""

    @property
    def link_loss(self) -> tuple[str, str] | None:
        """(state, note) when the view no longer follows the emulator, else None: the state
        is ``"no broker"``, ``"offline"``, ``"unheard"`` (nothing heard from it) or
        ``"silent"`` (its status says online, its telemetry stopped), the note says it in
        a few words naming the broker or the cluster."""


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


def compiling_of(source: FabricSource) -> Compiling | None:
    """What the source's engine compiles now (its first run after an install), if it
    says: an engine process does; an engine in this process holds the console up while
    it compiles, and a remote one does not say."""
    return source.compiling if isinstance(source, ProcessSource) else None


def compiling_note_of(source: FabricSource) -> str | None:
    """``compiling_note`` of what the source's engine compiles now, None if nothing: what
    a view compares with the note it last drew, to draw again as the seconds count."""
    compiling = compiling_of(source)
    return None if compiling is None else compiling_note(compiling)


def served_elsewhere(source: FabricSource) -> bool:
    """Whether the source is an emulator served elsewhere (``fabtop console``), not one
    this fabtop runs."""
    return isinstance(source, RemoteSource)


def link_loss_of(source: FabricSource) -> tuple[str, str] | None:
    """``RemoteSource.link_loss`` of a remote source; None for an engine this fabtop runs
    (it cannot go away unheard: its stop is the source's ``failure``)."""
    return source.link_loss if isinstance(source, RemoteSource) else None


async def submit_together(sources: Sequence[FabricSource], command: Command) -> list[CommandResult]:
    """Send ``command`` to every source; the results in their order.

    Engines in this process (``Engine.submit_together``) or in processes of one group
    (``ProcessEngines.submit_together``) apply it at the same simulated time; other
    sources each at their next boundary."""
    engines = [src.engine for src in sources if isinstance(src, EngineSource)]
    if len(engines) == len(sources):
        return await Engine.submit_together(engines, command)
    procs = [src for src in sources if isinstance(src, ProcessSource)]
    if len(procs) == len(sources) and all(p.group is procs[0].group for p in procs):
        return await procs[0].group.submit_together(command, procs)
    return [await src.submit(command) for src in sources]
