"""The event log panel: the newest de-duplicated events, most recent at the bottom."""

from __future__ import annotations

from rich.text import Text

from console.eventlog import EventLog, LogEntry
from console.fmt import fmt_seconds
from console.widgets.text_view import TextView

SEVERITY_STYLES = {"info": "", "warning": "yellow", "error": "bold red"}


def entry_line(entry: LogEntry) -> Text:
    """``  12.5 ms  warning  rerouted       leaf00->spine01  traffic moved ×3``."""
    e = entry.event
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{fmt_seconds(e.time_s):>9} ", "dim")
    text.append(f"{e.kind:<16.16} ", SEVERITY_STYLES.get(e.severity, ""))
    text.append(f"{e.target:<18} ", "bold")
    text.append(e.message)
    if entry.count > 1:
        text.append(f" ×{entry.count}", "bold cyan")
    return text


class EventLogView(TextView):
    """Shows the tail of an ``EventLog``; redraws only when the log changed."""

    DEFAULT_CSS = """
    EventLogView { height: 1fr; min-height: 3; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, lines: int = 40, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines = lines
        self._version = -1

    def show(self, log: EventLog) -> None:
        """Redraw from ``log`` if it changed."""
        if log.version == self._version:
            return
        self._version = log.version
        # Only the newest lines that fit (the log itself keeps more, for the detail screen).
        entries = list(log.entries)[-(self.size.height or self.lines) :]
        if not entries:
            self.show_text(Text("no events yet", style="dim"))
            return
        text = Text("\n").join(entry_line(e) for e in entries)
        text.no_wrap, text.overflow = True, "ellipsis"
        self.show_text(text)
