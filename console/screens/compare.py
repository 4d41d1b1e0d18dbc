"""Two fabrics side by side, live: the same workload and faults on native and RoCE.

Each side has its own ``FabricView`` fed from its own source; a fault injected
here goes to both sources, so both sides see the same fault at the same
simulated moment (each at its next tick boundary). Both sides' measured speeds are
measured here, over the same wall seconds (``console.speed.SharedWindow``), not taken
from each engine's snapshot (each engine smooths its own over its own batches).
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from console.compiling import compiling_note
from console.fmt import fmt_bitrate, fmt_bytes, fmt_rate, fmt_seconds, fmt_speed, kpi_text
from console.latency import ClassLatency
from console.linkview import stalled_word
from console.pausing import PauseRecord
from console.readonly import hidden_if_read_only, refuse_if_read_only
from console.screens.confirm import ConfirmScreen
from console.screens.fault_form import FaultFormScreen
from console.source import FabricSource, compiling_note_of, compiling_of, submit_together
from console.speed import SharedWindow, SpeedSteps
from console.viewstate import FabricView
from console.widgets.faults_panel import STATE_STYLES, faults_to_show, since
from console.widgets.key_footer import KeyFooter, drop_order
from console.widgets.status_header import FLOW_CONTROL_NAMES, state_label
from fabric_core.commands import ClearFault, Command, CommandResult, Pause, Resume
from fabric_core.runtime.snapshot import FaultView, Snapshot

#: One line of a side: (what, value).
Row = tuple[str | Text, str | Text]


def dropped_line(snap: Snapshot) -> str:
    """Bytes dropped, and the flows waiting for their ACK timeout to resend what a dead
    link swallowed (RoCE, until routing knows of it)."""
    text = fmt_bytes(snap.totals.dropped_bytes_total)
    waiting = snap.totals.waiting_flows
    if waiting:
        text += f" · {waiting:,} flow{'' if waiting == 1 else 's'} waiting to resend (ACK timeout)"
    return text


def side_rows(
    view: FabricView, source: FabricSource, measured: float = 0.0, *, p999: bool = True
) -> list[Row]:
    """One side of the comparison, a (what, value) row each; ``measured``: its speed over
    the window both sides are measured over (``SharedWindow``; 0: none); ``p999``: the
    latency rows give p99.9 after p50 and p99 (their heading says which they give)."""
    snap = view.snapshot
    if snap is None:
        return [(source.description, "waiting for the first snapshot…")]
    compiling = compiling_of(source)
    label, style = state_label(snap, frozen=False, compiling=compiling)
    state = Text(label, style=style)
    if compiling is not None:
        state.append(f" {compiling_note(compiling)}", "magenta")
    rows: list[Row] = [
        ("profile", f"{snap.profile} · {FLOW_CONTROL_NAMES.get(snap.flow_control, '')}"),
        ("source", source.description),
        ("state", state),
    ]
    speed = fmt_speed(snap.target_speed)
    if measured > 0:  # (an item of its own: at 80 columns "(now" and its figure parted)
        speed += f"{ITEM_SEPARATOR}now {fmt_speed(measured)}"
    rows += [
        ("sim time", f"{fmt_seconds(snap.sim_time_s)} · tick {fmt_seconds(snap.dt_s)}"),
        ("speed", speed),
        ("throughput", fmt_bitrate(snap.totals.throughput_Bps)),
        ("dropped", dropped_line(snap)),
    ]
    counts = view.link_counts()
    stalled = stalled_word(snap.flow_control)
    rows.append(
        (
            "links",
            f"{counts['links']:,} · down {counts['down']:,} · degraded {counts['degraded']:,}"
            f" · {stalled} {counts[stalled]:,}",
        )
    )
    rates = view.rates
    rows.append(
        (
            "fabric-wide",
            f"pauses/s {fmt_rate(float(rates.pauses_per_s.sum()))}"
            f" · ECN/s {fmt_rate(float(rates.ecn_per_s.sum()))}"
            f" · drops {fmt_bitrate(float(rates.drops_Bps.sum()))}",
        )
    )
    heading = ITEM_SEPARATOR.join(["p50", "p99", "p99.9"] if p999 else ["p50", "p99"])
    rows += [("", ""), (Text("latency now", style="bold underline"), Text(heading, "dim"))]
    for name, lat in view.latency.items():
        quantiles = [lat.p50_s, lat.p99_s, lat.p999_s] if p999 else [lat.p50_s, lat.p99_s]
        rows.append((name, ITEM_SEPARATOR.join(fmt_seconds(q) for q in quantiles)))
    rows += [("", ""), (Text("workloads", style="bold underline"), "")]
    for name, wl in sorted(snap.workloads.items()):
        kpis = " · ".join(kpi_text(k, v) for k, v in sorted(wl.kpis.items()))
        rows.append((name, kpis or "—"))
    n_faults = len(snap.active_faults)
    rows.append(("faults", f"{n_faults} active (timelines below)" if n_faults else "none"))
    return rows


def side_tables(
    sides: tuple[list[Row], list[Row]], widths: tuple[int, int], console: Console
) -> tuple[tuple[Table, int], tuple[Table, int]]:
    """Both sides as tables whose rows line up, each with its number of lines: each value
    is wrapped at its side's width and the shorter of two rows that say the same thing is
    padded to the taller one's lines (a value that wraps on one side only would shift
    every row below it). The tables do not wrap again, so the lines are known exactly."""
    label_w = label_width(sides)
    wrapped = [
        [wrap_value(value, width - label_w - 1, console) for _, value in rows]
        for rows, width in zip(sides, widths, strict=True)
    ]
    left, right = sides
    for i in range(min(len(left), len(right))):
        if str(left[i][0]) == str(right[i][0]):  # the same row on both sides
            height = max(len(wrapped[0][i]), len(wrapped[1][i]))
            for k in (0, 1):
                wrapped[k][i].extend([Text()] * (height - len(wrapped[k][i])))
    tables = []
    for rows, lines in zip(sides, wrapped, strict=True):
        table = Table(
            box=None, expand=True, show_header=False, pad_edge=False, padding=(0, 1, 0, 0)
        )
        table.add_column("what", style="bold", width=label_w, no_wrap=True)
        table.add_column("value", ratio=1, no_wrap=True)
        for (what, _), value_lines in zip(rows, lines, strict=True):
            table.add_row(what, Text("\n").join(value_lines))
        tables.append((table, sum(len(value_lines) for value_lines in lines)))
    return tables[0], tables[1]


#: What the values' items are joined with ("784 · down 0 · degraded 0 · starved 176")
ITEM_SEPARATOR = " · "
#: A latency row's three quantiles at their widest ("12.8 µs · 17.5 µs · 23.1 µs"): a side
#: whose values are narrower gives p50 and p99 only, rather than p99.9 on a line of its own
#: under the heading's one, where it read as another class's figure
LATENCY_WIDTH = 3 * len("12.8 µs") + 2 * len(ITEM_SEPARATOR)


def label_width(sides: tuple[list[Row], list[Row]]) -> int:
    """The width of the sides' label column: their longest label (both sides the same)."""
    return max((cell_len(str(what)) for rows in sides for what, _ in rows), default=0)


def both_sides(
    views: tuple[FabricView, FabricView],
    sources: tuple[FabricSource, FabricSource],
    measured: tuple[float, ...],
    widths: tuple[int, int],
) -> tuple[list[Row], list[Row]]:
    """Both sides' rows for panels ``widths`` wide inside (0: not laid out yet), p99.9
    left out of the latency rows on both where either side's values are narrower than
    ``LATENCY_WIDTH`` (as at 80 columns)."""

    def rows(p999: bool) -> tuple[list[Row], list[Row]]:
        left, right = (
            side_rows(view, source, speed, p999=p999)
            for view, source, speed in zip(views, sources, measured, strict=True)
        )
        return left, right

    sides = rows(True)
    narrowest = min(widths)
    if narrowest > 0 and narrowest - label_width(sides) - 1 < LATENCY_WIDTH:
        return rows(False)
    return sides


def wrap_value(value: str | Text, width: int, console: Console) -> list[Text]:
    """``value``'s lines at ``width``: whole items (``ITEM_SEPARATOR`` between them) to a
    line while they fit, the line broken between two, so that a figure keeps its name and
    its unit ("starved 176", "5.48 Tb/s"); an item wider than a line is wrapped by words."""
    text = value if isinstance(value, Text) else Text(value)
    if width <= 1:  # not laid out yet: one line, wrapped at the next redraw
        return [text]
    lines: list[Text] = []
    line: Text | None = None
    for item in text.split(ITEM_SEPARATOR):
        if line is not None and line.cell_len + len(ITEM_SEPARATOR) + item.cell_len <= width:
            line.append(ITEM_SEPARATOR, style=text.style)
            line.append_text(item)
            continue
        if line is not None:
            lines.append(line)
        parts = list(item.wrap(console, width)) or [Text()]
        lines.extend(parts[:-1])
        line = parts[-1]
    if line is not None:
        lines.append(line)
    return lines or [Text()]


#: A side's timeline after its state, times from the injection
TIMELINE = ("detected", "rerouted", "recovered")
#: A fault's cells on a side: its state, then ``TIMELINE``
Timeline = list[str | Text]


def _timeline(fv: FaultView | None) -> Timeline:
    """A fault's state (coloured as in the main view) and times on one side; a dash for a
    fault that side does not have."""
    if fv is None:
        return ["—", "", "", ""]
    return [
        Text(fv.state, style=STATE_STYLES.get(fv.state, "")),
        since(fv, fv.detected_at_s),
        since(fv, fv.mitigated_at_s),
        since(fv, fv.recovered_at_s),
    ]


def fault_timelines(left: FabricView, right: FabricView) -> list[tuple[str, Timeline, Timeline]]:
    """Every fault of either side, as shown (``faults_to_show``, left's first): its name
    ("f0 link_down leaf00->spine01") and its timeline on each side."""
    by_side: list[dict[tuple[str, str, str], FaultView]] = [{}, {}]
    keys: list[tuple[str, str, str]] = []
    for k, view in enumerate((left, right)):
        snap = view.snapshot
        for f in faults_to_show(snap) if snap is not None else []:
            key = (f.id, f.kind, f.target)
            by_side[k][key] = f
            if key not in keys:
                keys.append(key)
    return [
        (" ".join(key), _timeline(by_side[0].get(key)), _timeline(by_side[1].get(key)))
        for key in keys
    ]


def _faults_grid(expand: bool = False) -> Table:
    """A table of the timelines' layouts: two spaces between columns, none at the edges."""
    return Table(box=None, expand=expand, header_style="bold", pad_edge=False, padding=(0, 1))


def _add_timeline_columns(table: Table, state: str, widths: list[int] | None = None) -> None:
    """A side's columns: its state under ``state``, then ``TIMELINE``, right-aligned."""
    for i, heading in enumerate((state, *TIMELINE)):
        width = widths[i] if widths is not None else None
        table.add_column(heading, justify="left" if i == 0 else "right", no_wrap=True, width=width)


def faults_table(left: FabricView, right: FabricView, width: int = 0) -> tuple[RenderableType, int]:
    """Every fault of either side with both sides' timelines in full (state, then detected
    / rerouted / recovered relative to the injection), and its number of lines, in the
    widest of three layouts that fits ``width`` (0: the widest): a row per fault, the
    sides next to each other; a row per side, the fault named on the first; the fault on
    a line of its own and a row per side below it. Nothing is cut where a layout fits
    (at 80 and 100 columns the sides' eight times did not fit one row).

    The layout is chosen from the cells' widths, and only its tables are filled: the
    narrower ones were filled after the wider ones, made only to be measured, every
    refresh."""
    faults = fault_timelines(left, right)
    if not faults:
        return Text("no faults: i injects one on both fabrics", style="dim"), 1
    names = [v.snapshot.profile if v.snapshot is not None else "—" for v in (left, right)]
    headings = ["fault"]
    for name in names:
        headings += [f"{name}: state", *TIMELINE]
    wide_rows = [(fault, *a, *b) for fault, a, b in faults]
    if width <= 0 or cells_width(headings, wide_rows) <= width:
        states = {1, 2 + len(TIMELINE)}  # (left-aligned, as the fault is)
        return _grid(headings, wide_rows, left={0, *states}, expand=True), 1 + len(faults)
    headings = ["fault", "fabric", "state", *TIMELINE]
    per_side_rows: list[tuple[RenderableType, ...]] = []
    for fault, a, b in faults:
        per_side_rows += [(fault, names[0], *a), ("", names[1], *b)]
    if cells_width(headings, per_side_rows) <= width:
        return _grid(headings, per_side_rows, left={0, 1, 2}), 1 + 2 * len(faults)
    # stacked: a table per fault, all with the same column widths so that they line up
    headings = ["fabric", "state", *TIMELINE]
    rows: list[list[str | Text]] = []
    for _, a, b in faults:
        rows += [[f"  {names[0]}", *a], [f"  {names[1]}", *b]]
    widths = [max(cell_len(str(c)) for c in column) for column in zip(headings, *rows, strict=True)]

    def grid(show_header: bool) -> Table:
        table = _faults_grid()
        table.show_header = show_header
        table.add_column(headings[0], no_wrap=True, width=widths[0])
        _add_timeline_columns(table, headings[1], widths[1:])
        return table

    parts: list[RenderableType] = [grid(show_header=True)]
    for i, (fault, _, _) in enumerate(faults):
        parts.append(Text(fault, style="bold", no_wrap=True, overflow="ellipsis"))
        sides = grid(show_header=False)
        for row in rows[2 * i : 2 * i + 2]:
            sides.add_row(*row)
        parts.append(sides)
    return Group(*parts), 1 + 3 * len(faults)


def speed_line(
    views: tuple[FabricView, FabricView],
    measured: tuple[float, ...] | None,
    span_s: float,
    width: int = 0,
) -> Text:
    """``speed 1e-3× on both  (now 9.8e-4× native-400g · 9.8e-4× roce-400g, both over
    the last 2.0 s)   + faster ×2 · - slower ÷2 (both engines)``: ``measured``, each
    side's speed over the same ``span_s`` wall seconds (``SharedWindow``), None before it
    has one. Narrower than ``width`` (0: any width) it leaves out the keys' hint (the
    footer has them), then says "last 2.0 s" only; past that it wraps."""
    snaps = [v.snapshot for v in views]
    if any(s is None for s in snaps):
        return Text(" ")
    a, b = snaps[0], snaps[1]
    assert a is not None and b is not None
    asked = Text(" ")
    if a.target_speed == b.target_speed:
        asked.append(f"speed {fmt_speed(a.target_speed)} on both", "bold")
    else:
        asked.append(
            f"speed {fmt_speed(a.target_speed)} {a.profile} · {fmt_speed(b.target_speed)} "
            f"{b.profile}",
            "bold",
        )
    keys = Text("   + faster ×2 · - slower ÷2 (both engines)", "dim")
    if measured is None or not any(m > 0 for m in measured):
        return asked + keys
    now = " · ".join(
        # (a side that did not move, an engine that stopped, read 0×, not flat out's max)
        f"{fmt_speed(m) if m > 0 else '0×'} {s.profile}"
        for s, m in zip((a, b), measured, strict=True)
    )
    full = asked + Text(f"  (now {now}, both over the last {span_s:.1f} s)")
    variants = (full + keys, full, asked + Text(f"  (now {now}, last {span_s:.1f} s)"))
    return next((v for v in variants if width <= 0 or v.cell_len <= width), variants[-1])


def ratio(a: float, b: float, *, larger_is_worse: bool = True) -> Text:
    """``b / a`` as ``×1.63`` (``×119,355`` from 100 on: the decimals of a probe that
    waited a second for its ACK timeout say nothing), red when b is worse than a by
    over 5 %, green when better."""
    if not (math.isfinite(a) and math.isfinite(b)) or a <= 0:
        return Text("—", style="dim")
    r = b / a
    worse, better = (r > 1.05, r < 0.95) if larger_is_worse else (r < 0.95, r > 1.05)
    style = "bold red" if worse else "bold green" if better else ""
    # (two significant digits below 0.1: a probe 227 times faster read ×0.00)
    text = f"×{r:,.0f}" if r >= 100 else f"×{r:.2f}" if r >= 0.1 else f"×{r:.2g}"
    return Text(text, style=style)


def _latency_cell(value: float, lat: ClassLatency | None) -> Text:
    """A quantile, dimmed where its class completed nothing lately (its last figure)."""
    return Text(fmt_seconds(value), style="dim" if lat is not None and lat.stalled else "")


def _difference_rows(
    left: FabricView, right: FabricView
) -> list[tuple[str, tuple[RenderableType, ...], tuple[RenderableType, ...]]]:
    """Per class, then throughput: (name, its p50 cells, its p99 cells), each cells the
    left value, the right value and their ratio (throughput: no p50, its figure as p99)."""
    out: list[tuple[str, tuple[RenderableType, ...], tuple[RenderableType, ...]]] = []
    for cls in sorted(set(left.latency) | set(right.latency)):
        la, lb = left.latency.get(cls), right.latency.get(cls)
        # a side that completed nothing lately (a stall, or a sparse workload) shows its last
        # figures dimmed, and no ratio: they are not what its messages wait now
        stalled = (la is not None and la.stalled) or (lb is not None and lb.stalled)
        quantiles: list[tuple[RenderableType, ...]] = []
        for q in ("p50_s", "p99_s"):
            va = getattr(la, q) if la else math.nan
            vb = getattr(lb, q) if lb else math.nan
            why = Text("none done", style="bold yellow") if stalled else ratio(va, vb)
            quantiles.append((_latency_cell(va, la), _latency_cell(vb, lb), why))
        out.append((cls, quantiles[0], quantiles[1]))
    a, b = left.snapshot, right.snapshot
    if a is not None and b is not None:
        rate = (
            fmt_bitrate(a.totals.throughput_Bps),
            fmt_bitrate(b.totals.throughput_Bps),
            ratio(a.totals.throughput_Bps, b.totals.throughput_Bps, larger_is_worse=False),
        )
        out.append(("throughput", ("", "", ""), rate))
    return out


def difference_table(left: FabricView, right: FabricView, width: int = 0) -> Table:
    """Per class p50 and p99 of both sides with right/left ratios, then throughput, in
    the wider of two layouts that fits ``width`` (0: the wider): a row per class, a
    column per quantile and side ("p50 native-400g"); a row per quantile under its class,
    a column per side. At 80 columns the first cut its headings ("native-40…") and
    wrapped "none done" onto two lines.

    The layout is chosen from the cells' widths, and only its table is filled: the
    narrow one was filled after a wide one made only to be measured, every refresh."""
    a, b = left.snapshot, right.snapshot
    name_a = a.profile if a is not None else "left"
    name_b = b.profile if b is not None else "right"
    rows = _difference_rows(left, right)
    headings = ["now"]
    for q in ("p50", "p99"):
        headings += [f"{q} {name_a}", f"{q} {name_b}", "ratio"]
    wide_rows = [(name, *p50, *p99) for name, p50, p99 in rows]
    if width <= 0 or cells_width(headings, wide_rows) <= width:
        return _grid(headings, wide_rows, left={0}, expand=True)
    narrow_rows: list[tuple[RenderableType, ...]] = []
    for name, p50, p99 in rows:
        if name != "throughput":
            narrow_rows += [(name, "p50", *p50), ("", "p99", *p99)]
        else:
            narrow_rows.append((name, "", *p99))
    return _grid(["now", "", name_a, name_b, "ratio"], narrow_rows, left={0, 1})


def cells_width(headings: Sequence[str], rows: Sequence[Sequence[RenderableType]]) -> int:
    """The cells a ``_faults_grid`` of these headings and rows takes to show every cell
    whole, without making it."""
    widths = [cell_len(h) for h in headings]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], cell_len(str(cell)))
    return sum(widths) + 2 * (len(widths) - 1)


def _grid(
    headings: Sequence[str],
    rows: Sequence[Sequence[RenderableType]],
    *,
    left: Collection[int],
    expand: bool = False,
) -> Table:
    """A ``_faults_grid`` of ``rows`` under ``headings``: the columns ``left`` (labels: a
    class, a quantile, a fault, a fabric, a state) left-aligned, the figures
    right-aligned, none wrapped."""
    table = _faults_grid(expand=expand)
    for i, heading in enumerate(headings):
        table.add_column(heading, justify="left" if i in left else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


#: Least wall time between two measures of a panel whose rows only changed length.
MEASURE_EVERY_S = 1.0


@dataclass
class _Sized:
    """What a panel's height was last measured for."""

    width: int
    rows: int
    lengths: tuple[int, ...]
    height: int
    at: float


def _show(panel: Static, table: Table, sized: dict[str, _Sized]) -> None:
    """Show ``table`` in ``panel`` sized to it: its height is the table's lines at the
    panel's width plus the border, and changing it is the one case that needs a layout.

    Counting the lines renders the table (some 4 ms), so it is done when the width or
    the number of rows changed, and when cells changed length at most once a second
    (a value that starts to wrap may lose its last line for that long)."""
    width = panel.content_size.width
    if width <= 0:  # not laid out yet
        panel.update(table)
        return
    lengths = tuple(len(str(cell)) for col in table.columns for cell in col.cells)
    now = time.monotonic()
    known = sized.get(panel.id or "")
    if (
        known is None
        or known.width != width
        or known.rows != table.row_count
        or (known.lengths != lengths and now - known.at >= MEASURE_EVERY_S)
    ):
        console = panel.app.console
        lines = console.render_lines(table, console.options.update_width(width), pad=False)
        height = len(lines) + panel.styles.gutter.height
        sized[panel.id or ""] = _Sized(width, table.row_count, lengths, height, now)
    else:
        height = known.height
    _show_sized(panel, table, height)


def _show_sized(panel: Static, table: Table, height: int) -> None:
    """Show ``table`` in ``panel`` at ``height`` rows (border included), laying the screen
    out again only when that changes."""
    if panel.styles.height is None or panel.styles.height.value != height:
        panel.styles.height = height
    panel.update(table, layout=False)


#: The fault timelines' least height, border included (one fault in the widest layout)
FAULTS_MIN_HEIGHT = 5

#: + and - in the footer, as one ("+ - Speed (both)")
BOTH = Binding.Group("Speed (both)")


class CompareScreen(Screen[None]):
    """See the module docstring."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,c", "app.pop_screen", "Back"),
        Binding("p", "toggle_pause", "Pause both"),
        # while paused, in its place (``check_action``; the parameter tells them apart)
        Binding("p", "toggle_pause(True)", "Resume both"),
        Binding("plus,equals_sign", "speed(2.0)", "Faster (both)", key_display="+", group=BOTH),
        Binding("minus", "speed(0.5)", "Slower (both)", key_display="-", group=BOTH),
        Binding("i", "inject", "Inject on both"),
        Binding("x", "clear_all", "Clear both"),
    ]
    #: The keys the footer leaves out, first to last, where the line has no room for all
    FOOTER_DROP_ORDER = drop_order(BINDINGS, "clear_all", "toggle_pause", "toggle_pause(True)")
    DEFAULT_CSS = """
    CompareScreen Horizontal { height: auto; }
    CompareScreen #delta { height: auto; border: round $primary; padding: 0 1; }
    CompareScreen #faults-both { height: 1fr; border: round $error; padding: 0 1; }
    CompareScreen .side { width: 1fr; height: auto; border: round $secondary; padding: 0 1; }
    """

    def __init__(
        self,
        sources: tuple[FabricSource, FabricSource],
        pauses: PauseRecord,
        *,
        views: tuple[FabricView, FabricView] | None = None,
        read_only: bool = False,
        render_interval_s: float = 0.25,
    ) -> None:
        """``pauses`` is the app's record of which engines are paused (the one every
        footer's p reads); ``views`` lets the app keep each side's history (latency
        window) between visits."""
        super().__init__()
        self.sources = sources
        self.pauses = pauses
        self.views = views or (FabricView(), FabricView())
        self.speed_steps = SpeedSteps()  # what + and - ask for, on both
        self.measured = SharedWindow()  # both sides' speeds over one window
        self.read_only = read_only
        self.render_interval_s = render_interval_s
        self._described = ["", ""]  # each source's description as last shown
        self._compile_notes: list[str | None] = [None, None]  # what each side compiled
        self._heights: dict[str, _Sized] = {}  # by panel id: what it was sized for
        self._speed_lines = 1  # the speed line's lines as last shown

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A read-only console has no keys that change the emulation; ``p`` reads "Resume
        both" while either fabric is paused, "Pause both" otherwise."""
        if hidden_if_read_only(action, self.read_only):
            return False
        if action == "toggle_pause":
            return bool(parameters) == self.pauses.paused(*self.sources)
        return True

    def compose(self) -> ComposeResult:
        # scrolled by the keys where the terminal is shorter than the panels (100x30: the
        # difference and the timelines were below the last row, and no key reached them)
        with VerticalScroll(id="compare-body"):
            with Horizontal():
                yield Static(id="left", classes="side")
                yield Static(id="right", classes="side")
            yield Static(id="delta")
            yield Static(id="faults-both")
        yield Static(id="speed-line")
        yield KeyFooter(self.FOOTER_DROP_ORDER)

    def on_mount(self) -> None:
        self.query_one("#compare-body").focus()  # (so that PageDown, End and the arrows scroll)
        self.query_one("#delta", Static).border_title = "difference (right / left; red = worse)"
        self.query_one(
            "#faults-both", Static
        ).border_title = "faults on both fabrics (times from the injection)"
        self.set_interval(self.render_interval_s, self.refresh_sides)
        self.refresh_sides(force=True)

    def on_resize(self) -> None:
        # the sides are wrapped to their widths: wrap again once the new layout is in
        self.call_after_refresh(self.refresh_sides, True)

    def refresh_sides(self, force: bool = False) -> None:
        """Read both sources' latest snapshots and redraw the sides that changed.

        The panels are sized to their tables here, so a redraw lays the screen out again
        only when a height changes: a layout of this screen costs tens of ms of the
        console's CPU, which the engines share on a 2-core machine.
        """
        changed = force
        for k, (view, source) in enumerate(zip(self.views, self.sources, strict=True)):
            # a source that stops says so in its description, with no new snapshot
            said = source.description != self._described[k]
            note = compiling_note_of(source)
            if view.ingest(source.latest()) or said or note != self._compile_notes[k]:
                self._described[k] = source.description
                self._compile_notes[k] = note
                changed = True
        self.measured.read([view.snapshot for view in self.views])
        for view, source in zip(self.views, self.sources, strict=True):
            self.pauses.read(source, view.snapshot)  # (the footer's p follows)
        if changed:
            # both sides at once: a row's height depends on the other side's value too
            panels = (self.query_one("#left", Static), self.query_one("#right", Static))
            speeds = self.measured.speeds()
            measured = speeds or (0.0, 0.0)
            widths = (panels[0].content_size.width, panels[1].content_size.width)
            rows = both_sides(self.views, self.sources, measured, widths)
            tables = side_tables(rows, widths, self.app.console)
            for panel, view, source, (table, lines) in zip(
                panels, self.views, self.sources, tables, strict=True
            ):
                snap = view.snapshot
                panel.border_title = snap.profile if snap is not None else source.description
                if panel.content_size.width > 0:  # wrapped at its width: no need to measure
                    _show_sized(panel, table, lines + panel.styles.gutter.height)
                else:  # not laid out yet
                    panel.update(table)
            delta = self.query_one("#delta", Static)
            table = difference_table(*self.views, width=delta.content_size.width)
            _show(delta, table, self._heights)
            self._show_faults()
            bottom = self.query_one("#speed-line", Static)
            width = bottom.content_size.width
            line = speed_line(self.views, speeds, self.measured.span_s, width)
            # a line that wraps where the last did not (or no longer does) needs a layout:
            # without one its second line was cut ("…both over" at 80 columns)
            lines = len(line.wrap(self.app.console, width)) if width > 0 else 1
            bottom.update(line, layout=lines != self._speed_lines)
            self._speed_lines = lines

    def _show_faults(self) -> None:
        """The timelines in the layout that fits the panel, which is made at least as tall
        as they are (it fills the rest of the screen otherwise)."""
        panel = self.query_one("#faults-both", Static)
        table, lines = faults_table(*self.views, width=panel.content_size.width)
        least = max(FAULTS_MIN_HEIGHT, lines + panel.styles.gutter.height)
        if panel.styles.min_height is None or panel.styles.min_height.value != least:
            panel.styles.min_height = least
        panel.update(table, layout=False)

    async def send_both(self, command: Command) -> CommandResult:
        """Send ``command`` to both sources; the result is the first refusal, if any.

        Two embedded engines, or two engine processes of one group, apply it at the same
        simulated time (``console.source.submit_together``); other sources each at their
        next boundary."""
        results = await submit_together(self.sources, command)
        for src, result in zip(self.sources, results, strict=True):
            self.pauses.sent(src, command, result)
        for src, result in zip(self.sources, results, strict=True):
            if not result.ok:
                return CommandResult(
                    id=result.id, ok=False, error=f"{src.description}: {result.error}"
                )
        return results[0]

    async def _send_both_told(self, command: Command) -> CommandResult:
        """``send_both``, telling the operator when either source refuses."""
        result = await self.send_both(command)
        if not result.ok:
            self.notify(result.error or "refused", severity="error")
        return result

    @work(group="compare-commands")
    async def _send(self, command: Command) -> None:
        await self._send_both_told(command)
        self.refresh_sides(force=True)

    def action_inject(self) -> None:
        """The fault form; the fault goes to both fabrics."""
        if refuse_if_read_only(self, self.read_only, "fault injection"):
            return
        form = FaultFormScreen(
            self.send_both, self.views[0].snapshot, title="Inject a fault on both fabrics"
        )
        self.app.push_screen(form)

    def action_clear_all(self) -> None:
        """Clear every fault on both fabrics, after confirmation."""
        if refuse_if_read_only(self, self.read_only, "clearing faults"):
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._send(ClearFault(all=True))

        self.app.push_screen(ConfirmScreen("Clear all faults on both fabrics?"), confirmed)

    def action_speed(self, factor: float) -> None:
        """Multiply both engines' target speed (they run in lockstep: the slower sets the pace)."""
        if refuse_if_read_only(self, self.read_only, "changing the speed"):
            return
        self.speed_steps.press(
            factor,
            latest=self.sources[0].latest,
            send=self._send_both_told,
            notify=self.notify,
            start=lambda ask: self.run_worker(ask, group="compare-commands"),
            redraw=lambda: self.refresh_sides(force=True),
        )

    def action_toggle_pause(self, _resume: bool = False) -> None:
        """Pause or resume both fabrics together, as the footer says: resume both while
        either is paused (``pauses``); the parameter only tells the footer's two keys
        apart."""
        if refuse_if_read_only(self, self.read_only, "pause/resume"):
            return
        self._send(Resume() if self.pauses.paused(*self.sources) else Pause())
