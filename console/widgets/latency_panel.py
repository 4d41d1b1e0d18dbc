"""Latency per traffic class (p50 / p99 / p99.9 now, p99 history) and workload KPIs."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline

from console.fmt import fmt_kpi, fmt_seconds, kpi_label
from console.latency import ClassLatency
from console.widgets.text_view import TextView
from fabric_core.runtime.snapshot import WorkloadView

#: A latency's width (three figures and a unit: "12.8 µs", "1.34 ms")
FIGURE_WIDTH = 7
#: A class's line: its name, then p50, p99 and p99.9 with their labels (47 columns, which
#: a 100-column terminal's panel holds; the sparkline takes what is left)
LINE_WIDTH = 9 + 3 * (FIGURE_WIDTH + 2) + len("p50p99p99.9")
#: The same without the labels (33 columns), where the panel is narrower than a line and
#: the smallest sparkline: the border title names the three figures instead (at 80
#: columns the panel holds 38 characters a class, and p99.9 was cut off)
COMPACT_WIDTH = 9 + 3 * (FIGURE_WIDTH + 1)
#: The fewest columns a class's sparkline is worth drawing in
MIN_SPARKLINE = 4
#: The panel's title, in full and over compact lines
TITLE = "Latency now (window) · p99 history · workload KPIs"
COMPACT_TITLE = "Latency p50 p99 p99.9 · p99 history · KPIs"


def class_line(lat: ClassLatency, *, labels: bool = True) -> Text:
    """``bulk      p50 3.1 µs  p99 12 µs  p99.9 40 µs``, or without ``labels``
    ``bulk       3.1 µs   12 µs   40 µs``."""
    text = Text(no_wrap=True)
    text.append(f"{lat.name:<9.9}", "bold")
    for label, value in (("p50", lat.p50_s), ("p99", lat.p99_s), ("p99.9", lat.p999_s)):
        text.append(f" {label} " if labels else " ", "dim")
        text.append(f"{fmt_seconds(value):>{FIGURE_WIDTH}}", "dim" if lat.stalled else "")
    if lat.stalled:
        text.append("  none done lately", "bold yellow")
    return text


#: Where a workload's KPIs go on past its first line: under its name, this far in
KPI_INDENT = 2


def kpi_lines(
    workloads: dict[str, WorkloadView] | None, width: int = 0, rows: int | None = None
) -> Text:
    """One line per workload: its KPIs by name. With a ``width`` (the panel's), a KPI that
    would end past it goes on the next line, indented, so that none is cut off (a label
    stays with its figure), as long as the lines stay within ``rows`` (the panel's room:
    past it the line goes on, cut off at the panel's edge, and the workloads below keep
    their places)."""
    text = Text()
    if not workloads:
        text.append("no workloads", "dim")
        return text
    spare = None if rows is None else rows - len(workloads)  # lines that wraps may add
    for n, (name, wl) in enumerate(sorted(workloads.items())):
        if n:
            text.append("\n")
        text.append(f"{name} ", "bold")
        text.append(f"({wl.kind})", "dim")
        column = len(name) + len(wl.kind) + 3
        gap = " "  # before the next KPI: one space after the kind, two between KPIs
        for key, value in sorted(wl.kpis.items()):
            label, figure = kpi_label(key), fmt_kpi(key, value)
            size = len(gap) + len(label) + 1 + len(figure)
            fits = column + size <= width
            if width and not fits and column > KPI_INDENT and (spare is None or spare > 0):
                text.append("\n")
                column, gap = 0, " " * KPI_INDENT
                spare = None if spare is None else spare - 1
                size = len(gap) + len(label) + 1 + len(figure)
            text.append(gap)
            text.append(f"{label} ", "dim")
            text.append(figure)
            column += size
            gap = "  "
    return text


class ClassRow(Horizontal):
    """One traffic class: its quantiles and a sparkline of p99."""

    DEFAULT_CSS = f"""
    ClassRow {{ height: 1; }}
    ClassRow > TextView {{ width: {LINE_WIDTH + 1}; height: 1; }}
    ClassRow.-compact > TextView {{ width: {COMPACT_WIDTH + 1}; }}
    ClassRow > Sparkline {{ width: 1fr; }}
    """

    def __init__(self, name: str, *, compact: bool = False) -> None:
        super().__init__(id=f"latency-{name}", classes="-compact" if compact else "")
        self.class_name = name
        self.latest: ClassLatency | None = None  # as last shown, to redraw on a resize

    def compose(self) -> ComposeResult:
        yield TextView(id="figures")
        yield Sparkline([], summary_function=max)

    def show(self, lat: ClassLatency) -> None:
        """Redraw the figures; the sparkline gets a new list (it compares by equality)."""
        figures, sparks = self.query("#figures"), self.query(Sparkline)
        if not figures or not sparks:
            return  # mounted but not composed yet: the next refresh draws it
        self.latest = lat
        labels = not self.has_class("-compact")
        figures.first(TextView).show_text(class_line(lat, labels=labels))
        data = [v * 1e6 for v in lat.p99_history_s if math.isfinite(v)]
        spark = sparks.first(Sparkline)
        if data != spark.data:
            spark.data = data


class LatencyPanel(Vertical):
    """See the module docstring."""

    DEFAULT_CSS = """
    LatencyPanel { height: auto; border: round $secondary; border-title-color: $text; }
    LatencyPanel > #kpis { height: auto; margin-top: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = TITLE
        self.compact = False  # lines without labels (``COMPACT_WIDTH``)
        self._rows: dict[str, ClassRow] = {}
        self._workloads: dict[str, WorkloadView] = {}

    def compose(self) -> ComposeResult:
        yield TextView(id="kpis")

    def show(self, latency: dict[str, ClassLatency], workloads: dict[str, WorkloadView]) -> None:
        """Redraw per-class figures (adding a row for a class seen for the first time)."""
        found = self.query("#kpis")
        if not found:
            return  # not composed yet (a refresh right at start-up): the next one draws
        kpis = found.first(TextView)
        for name, lat in latency.items():
            row = self._rows.get(name)
            if row is None:
                row = self._rows[name] = ClassRow(name, compact=self.compact)
                self.mount(row, before=kpis)
                self.call_after_refresh(row.show, lat)
            else:
                row.show(lat)
        self._workloads = workloads
        self._show_kpis(kpis)

    def _show_kpis(self, kpis: TextView) -> None:
        """The KPIs, laid out for the panel's width and the rows its height leaves them."""
        rows = None
        scalars = (self.styles.height, self.styles.max_height)
        caps = [s.cells for s in scalars if s is not None and s.cells]
        if caps:  # (its border, the class rows, and the margin above the KPIs)
            rows = min(caps) - 2 - len(self._rows) - 1
        kpis.show_text(kpi_lines(self._workloads, kpis.size.width, rows))

    def on_resize(self) -> None:
        """Lay the lines and the KPIs out for the new size (a paused console draws nothing
        else): compact lines where full ones leave no room for a sparkline."""
        compact = self.content_size.width < LINE_WIDTH + 1 + MIN_SPARKLINE
        if compact != self.compact:
            self.compact = compact
            self.border_title = COMPACT_TITLE if compact else TITLE
            for row in self._rows.values():
                row.set_class(compact, "-compact")
                if row.latest is not None:
                    row.show(row.latest)
        found = self.query("#kpis")
        if found and self._workloads:
            self.call_after_refresh(self._show_kpis, found.first(TextView))
