"""Whether each engine is paused, as the console last learnt it: one record for every
footer's ``p``.

The main view and the compare view each kept their own copy, fed by their own reads: a
frozen main view reads no snapshot, so after "Pause both" on the compare view its footer
still said "p Pause" with both engines paused, and the compare view learnt of a pause or
resume sent from the main view only from its next snapshot. ``PauseRecord`` is the one
copy: the app keeps it, every view tells it what it learns (a snapshot read, a pause or
resume the engine accepted), and every footer reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fabric_core.commands import Command, CommandResult, Pause, Resume

if TYPE_CHECKING:
    from console.source import FabricSource
    from fabric_core.runtime.snapshot import Snapshot


class PauseRecord:
    """Whether each source's emulation is paused, by the latest of its snapshots read and
    the pause or resume commands it accepted."""

    def __init__(self, changed: Callable[[], None]) -> None:
        """``changed`` is called when a source's state changes (to redraw the footers)."""
        self._changed = changed
        self._paused: dict[int, bool] = {}  # by the source's id
        # the snapshot each source's state was last taken from: only a newer one says
        # more than a command accepted since (an engine publishes again once it pauses)
        self._seen: dict[int, Snapshot] = {}

    def paused(self, *sources: FabricSource) -> bool:
        """Whether any of ``sources`` is paused (what their ``p`` resumes)."""
        return any(self._paused.get(id(s), False) for s in sources)

    def read(self, source: FabricSource, snap: Snapshot | None) -> None:
        """Learn ``source``'s state from ``snap``, a snapshot of it just read, if new."""
        if snap is None or self._seen.get(id(source)) is snap:
            return
        self._seen[id(source)] = snap
        self._set(source, not snap.running)

    def sent(self, source: FabricSource, command: Command, result: CommandResult) -> None:
        """Learn ``source``'s state from a command it answered (a snapshot may come later:
        a frozen view reads none)."""
        if result.ok and isinstance(command, Pause | Resume):
            self._set(source, isinstance(command, Pause))

    def _set(self, source: FabricSource, paused: bool) -> None:
        if self._paused.get(id(source), False) != paused:
            self._paused[id(source)] = paused
            self._changed()
