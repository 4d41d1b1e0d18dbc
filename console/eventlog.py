"""A bounded, de-duplicated event log fed by successive snapshots.

Snapshots carry the most recent events (bounded, most recent last). The log
keeps what it has already seen, appends only what is new, and folds a repeat of
the same event (kind, target, message) into a count, so a flapping link or a
pause storm shows as one line "×40" instead of flooding the panel.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from fabric_core.runtime.snapshot import Event


@dataclass(slots=True)
class LogEntry:
    """One line of the log: the latest occurrence of an event and how often it repeated."""

    event: Event
    count: int = 1
    first_time_s: float = 0.0

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two events "the same" for de-duplication."""
        return (self.event.kind, self.event.target, self.event.message)


class EventLog:
    """See the module docstring. ``dedupe_span`` is how many recent lines a repeat may fold into."""

    def __init__(self, max_entries: int = 500, dedupe_span: int = 8) -> None:
        self.entries: deque[LogEntry] = deque(maxlen=max_entries)
        self.dedupe_span = dedupe_span
        self._last_seen: Event | None = None
        self.version = 0  # bumps whenever the entries change (lets widgets skip redraws)

    def feed(self, events: tuple[Event, ...]) -> int:
        """Add the events not seen before; returns how many were new."""
        new = self._new_events(events)
        for event in new:
            self._add(event)
        if new:
            self.version += 1
        if events:
            self._last_seen = events[-1]
        return len(new)

    def _new_events(self, events: tuple[Event, ...]) -> tuple[Event, ...]:
        last = self._last_seen
        if last is None:
            return events
        for i in range(len(events) - 1, -1, -1):
            if events[i] == last:
                return events[i + 1 :]
        # The last event seen has rolled out of the snapshot's buffer: keep the later ones.
        return tuple(e for e in events if e.time_s >= last.time_s)

    def _add(self, event: Event) -> None:
        key = (event.kind, event.target, event.message)
        recent = list(self.entries)[-self.dedupe_span :]
        for entry in reversed(recent):
            if entry.key == key:
                entry.count += 1
                entry.event = event
                # Move it to the end so the log stays in time order of last occurrence.
                self.entries.remove(entry)
                self.entries.append(entry)
                return
        self.entries.append(LogEntry(event, 1, event.time_s))

    def for_target(self, *names: str) -> list[LogEntry]:
        """Entries about any of ``names`` (a link, its reverse, its endpoints)."""
        wanted = set(names)
        return [e for e in self.entries if e.event.target in wanted]
