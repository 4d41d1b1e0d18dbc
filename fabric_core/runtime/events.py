"""The event log: what an operator should see happen (faults, detections, reroutes,
deadlocks), stamped with the simulated time, bounded, newest last."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from fabric_core.runtime.snapshot import Event


class EventLog:
    """The last ``maxlen`` events of a run; ``emit`` adds one at the clock's time."""

    def __init__(self, clock: Callable[[], float], maxlen: int) -> None:
        self._clock = clock
        self._events: deque[Event] = deque(maxlen=maxlen)

    def emit(self, severity: str, kind: str, target: str, message: str) -> None:
        """Add an event (``severity``: "info", "warning" or "error") now."""
        self._events.append(Event(self._clock(), severity, kind, target, message))

    def latest(self, n: int) -> tuple[Event, ...]:
        """The newest ``n`` events, oldest first."""
        return tuple(self._events)[-n:]

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)
