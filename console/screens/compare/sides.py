"""One engine's panel in the compare view: its rows (profile, state, speed, links,
latency, workloads, faults), and both panels as tables whose rows line up, each value
wrapped at whole items so that a figure keeps its name and its unit."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from console.compiling import compiling_note
from console.fmt import fmt_bitrate, fmt_bytes, fmt_rate, fmt_seconds, fmt_speed, kpi_text
from console.linkview import stalled_word
from console.source import FabricSource, compiling_of
from console.viewstate import FabricView
from console.widgets.status_header import FLOW_CONTROL_NAMES, state_label
from fabric_core.runtime.snapshot import Snapshot

#: One line of a side: (what, value).
Row = tuple[str | Text, str | Text]

#: What the values' items are joined with ("784 · down 0 · degraded 0 · starved 176")
ITEM_SEPARATOR = " · "
#: A latency row's three quantiles at their widest ("12.8 µs · 17.5 µs · 23.1 µs"): a side
#: whose values are narrower gives p50 and p99 only, rather than p99.9 on a line of its own
#: under the heading's one, where it read as another class's figure
LATENCY_WIDTH = 3 * len("12.8 µs") + 2 * len(ITEM_SEPARATOR)


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
