"""The event log panel: the newest de-duplicated events, most recent at the bottom."""

from __future__ import annotations

from rich.text import Text

from console.eventlog import EventLog, LogEntry
from console.fmt import fmt_seconds
from console.widgets.text_view import TextView

SEVERITY_STYLES = {"info": "", "warning": "yellow", "error": "bold red"}


#: Columns of an entry's time, kind and target, each with its space after it
TIME_WIDTH, KIND_WIDTH, TARGET_WIDTH = 10, 17, 19
#: A panel narrower than an entry's time, kind and target shows each entry on two lines:
#: the target and the message go on the second, ``SECOND_LINE_INDENT`` in (at 120 columns
#: the panel has 33, and every target was cut to "leaf00-…"; under the kind, at column
#: 10 and padded to 18, the message then had no room left at 100 columns)
TWO_LINES_BELOW = TIME_WIDTH + KIND_WIDTH + TARGET_WIDTH
SECOND_LINE_INDENT = 2


def entry_line(entry: LogEntry) -> Text:
    """``  12.5 ms  warning  rerouted       leaf00->spine01  traffic moved ×3``."""
    return _when_and_kind(entry).append_text(_what(entry))


def entry_lines(entry: LogEntry, width: int) -> list[Text]:
    """``entry_line`` where ``width`` holds its time, kind and target; two lines where it
    does not, the target and the message on the second."""
    if width >= TWO_LINES_BELOW:
        return [entry_line(entry)]
    second = Text(" " * SECOND_LINE_INDENT).append_text(_what(entry, target_width=0))
    return [_when_and_kind(entry), second]


def _when_and_kind(entry: LogEntry) -> Text:
    e = entry.event
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{fmt_seconds(e.time_s):>{TIME_WIDTH - 1}} ", "dim")
    text.append(
        f"{e.kind:<{KIND_WIDTH - 1}.{KIND_WIDTH - 1}} ", SEVERITY_STYLES.get(e.severity, "")
    )
    return text


def _what(entry: LogEntry, target_width: int = TARGET_WIDTH) -> Text:
    """The target (padded to ``target_width`` with its space), the message, the repeats."""
    e = entry.event
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{e.target:<{target_width - 1}} " if target_width else f"{e.target}  ", "bold")
    text.append(e.message)
    if entry.count > 1:
        text.append(f" ×{entry.count}", "bold cyan")
    return text


class EventLogView(TextView):
    """Shows the tail of an ``EventLog``; redraws only when the log or the width changed."""

    DEFAULT_CSS = """
    EventLogView { height: 1fr; min-height: 3; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, lines: int = 40, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines = lines
        self._drawn: tuple[int, int, int] | None = None  # the log's version, width, height
        self._log: EventLog | None = None  # as last shown

    def on_resize(self) -> None:
        """Lay the entries out for the new width (a paused console gets no new snapshot)."""
        if self._log is not None:
            self.show(self._log)

    def show(self, log: EventLog) -> None:
        """Redraw from ``log`` if it or the panel's size changed."""
        self._log = log
        width, height = self.size.width, self.size.height or self.lines
        if self._drawn == (log.version, width, height):
            return
        self._drawn = (log.version, width, height)
        # Only the newest entries that fit whole (the log itself keeps more, for the detail
        # screen), or the first line of the newest where none does
        lines: list[Text] = []
        for entry in reversed(log.entries):
            more = entry_lines(entry, width)
            if len(lines) + len(more) > height:
                lines = lines or more[:height]
                break
            lines[:0] = more
        if not lines:
            self.show_text(Text("no events yet", style="dim"))
            return
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "ellipsis"
        self.show_text(text)
