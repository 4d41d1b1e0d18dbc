"""The borderless tables the compare view's difference and timelines are laid out in, and
their width, known from the cells before a table is made."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.cells import cell_len
from rich.console import RenderableType
from rich.table import Table


def new_grid(expand: bool = False) -> Table:
    """A table of the difference's and the timelines' layouts: bold headings, no box, two
    spaces between columns, none at the edges."""
    return Table(box=None, expand=expand, header_style="bold", pad_edge=False, padding=(0, 1))


def cells_width(headings: Sequence[str], rows: Sequence[Sequence[RenderableType]]) -> int:
    """The cells a ``new_grid`` of these headings and rows takes to show every cell
    whole, without making it."""
    widths = [cell_len(h) for h in headings]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], cell_len(str(cell)))
    return sum(widths) + 2 * (len(widths) - 1)


def filled_grid(
    headings: Sequence[str],
    rows: Sequence[Sequence[RenderableType]],
    *,
    left: Collection[int],
    expand: bool = False,
) -> Table:
    """A ``new_grid`` of ``rows`` under ``headings``: the columns ``left`` (labels: a
    class, a quantile, a fault, a fabric, a state) left-aligned, the figures
    right-aligned, none wrapped."""
    table = new_grid(expand=expand)
    for i, heading in enumerate(headings):
        table.add_column(heading, justify="left" if i in left else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table
