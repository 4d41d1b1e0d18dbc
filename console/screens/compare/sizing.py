"""A compare panel sized to its table, so that a redraw lays the screen out again only
when a height changes (a layout of the compare screen costs tens of ms)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.table import Table
from textual.widgets import Static

#: Least wall time between two measures of a panel whose rows only changed length.
MEASURE_EVERY_S = 1.0


@dataclass
class Measured:
    """What a panel's height was last measured for."""

    width: int
    rows: int
    lengths: tuple[int, ...]
    height: int
    at: float


def show_fitted(panel: Static, table: Table, sized: dict[str, Measured]) -> None:
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
        sized[panel.id or ""] = Measured(width, table.row_count, lengths, height, now)
    else:
        height = known.height
    show_at_height(panel, table, height)


def show_at_height(panel: Static, table: Table, height: int) -> None:
    """Show ``table`` in ``panel`` at ``height`` rows (border included), laying the screen
    out again only when that changes."""
    if panel.styles.height is None or panel.styles.height.value != height:
        panel.styles.height = height
    panel.update(table, layout=False)
