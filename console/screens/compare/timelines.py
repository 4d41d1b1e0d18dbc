"""The compare view's fault timelines: every fault of either fabric with each side's state
and its times from the injection, in the widest of three layouts that fits."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.screens.compare.grid import cells_width, filled_grid, new_grid
from console.viewstate import FabricView
from console.widgets.faults_panel import STATE_STYLES, faults_to_show, since
from fabric_core.runtime.snapshot import FaultView

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
        return filled_grid(headings, wide_rows, left={0, *states}, expand=True), 1 + len(faults)
    headings = ["fault", "fabric", "state", *TIMELINE]
    per_side_rows: list[tuple[RenderableType, ...]] = []
    for fault, a, b in faults:
        per_side_rows += [(fault, names[0], *a), ("", names[1], *b)]
    if cells_width(headings, per_side_rows) <= width:
        return filled_grid(headings, per_side_rows, left={0, 1, 2}), 1 + 2 * len(faults)
    # stacked: a table per fault, all with the same column widths so that they line up
    headings = ["fabric", "state", *TIMELINE]
    rows: list[list[str | Text]] = []
    for _, a, b in faults:
        rows += [[f"  {names[0]}", *a], [f"  {names[1]}", *b]]
    widths = [max(cell_len(str(c)) for c in column) for column in zip(headings, *rows, strict=True)]

    def grid(show_header: bool) -> Table:
        table = new_grid()
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
