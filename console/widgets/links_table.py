"""The links table: the top-N links by a chosen column, updated by difference.

Rows are keyed by link name. A refresh removes the rows that left the top-N,
adds the ones that entered, rewrites only the cells whose text changed, and
reorders. Once the operator has moved the cursor off the top row, the cursor
goes back to the link it was on, wherever that row moved; on the top row it
watches whatever is hottest. Nothing is ever cleared and rebuilt.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from console.fmt import fmt_bitrate, fmt_bytes, fmt_pct, fmt_rate
from console.linkview import COLUMNS, WIDTHS, LinkRates, stalled_word
from console.messages import LinkChosen, SortRequested
from fabric_core.runtime.snapshot import LinkStatus, Snapshot

#: A cell's drawing: lines of segments.
Lines = list[list[Segment]]

STATE_STYLES = {
    "up": "green",
    "busy": "yellow",
    "hot": "dark_orange",
    "starved": "magenta",
    "paused": "magenta",
    "degraded": "purple",
    "down": "bold red",
}
_STATUS_NAMES = {int(LinkStatus.UP): "up", int(LinkStatus.DOWN): "down", 2: "degraded"}


def link_state_name(status: int, paused: bool, flow_control: str = "credit") -> str:
    """What the state column says: down / degraded win over starved (credit) / paused
    (PFC), then up."""
    name = _STATUS_NAMES.get(int(status), "up")
    if name == "up" and paused:
        return stalled_word(flow_control)
    return name


def row_texts(snap: Snapshot, rates: LinkRates, idx: NDArray[np.intp]) -> list[tuple[str, ...]]:
    """The cell strings of the rows ``idx`` (only these links are formatted)."""
    ls = snap.link_state
    names = snap.links.name
    status = ls.status[idx].tolist()
    paused = ls.paused[idx].tolist()
    util = ls.utilisation[idx].tolist()
    queue = ls.queue_bytes[idx].tolist()
    credits = ls.credits_bytes[idx].tolist()
    pauses = rates.at("pauses_per_s", idx).tolist()
    ecn = rates.at("ecn_per_s", idx).tolist()
    drops = rates.at("drops_Bps", idx).tolist()
    return [
        (
            names[i],
            link_state_name(status[k], paused[k], snap.flow_control),
            fmt_pct(util[k]),
            fmt_bytes(queue[k]),
            fmt_bytes(credits[k]),
            fmt_rate(pauses[k]),
            fmt_rate(ecn[k]),
            fmt_bitrate(drops[k]) if drops[k] else "0",
        )
        for k, i in enumerate(idx.tolist())
    ]


class LinksTable(DataTable[Text]):
    """See the module docstring; Enter opens the link under the cursor."""

    DEFAULT_CSS = """
    LinksTable { height: 1fr; }
    """

    #: Drawings kept per cell (even and odd stripe, with and without the cursor).
    DRAWINGS_KEPT = 4

    def __init__(self, *, id: str | None = None) -> None:
        #: (row, column) -> (cell, {how it was drawn: (row index, lines)}): see ``_render_cell``
        self._drawn: dict[
            tuple[RowKey, ColumnKey], tuple[object, dict[tuple[object, ...], tuple[int, Lines]]]
        ] = {}
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)  # clears the caches
        self._cells: dict[str, tuple[str, ...]] = {}
        self._order: list[str] = []
        self.sort_column = "util"
        self.sort_reverse = False
        #: True once the operator moved the cursor off the top row: it then sticks to its link.
        self.follow_link = False

    def on_mount(self) -> None:
        for key, (label, _) in COLUMNS.items():
            self.add_column(label, key=key, width=WIDTHS[key])
        self._label_columns()

    def on_resize(self) -> None:
        """Spread the width over the columns (a wide terminal gets wider columns, up to
        twice their natural width, the link name column first), so the table reads
        across the screen instead of leaving half of it blank."""
        natural = sum(WIDTHS.values())
        pad = 2 * self.cell_padding * len(WIDTHS) + 2  # cell padding and the scrollbar
        spare = max(0, self.size.width - natural - pad)
        widths = dict(WIDTHS)
        grow_link = min(spare, WIDTHS["link"] // 2)
        widths["link"] += grow_link
        spare -= grow_link
        others = [k for k in WIDTHS if k != "link"]
        for k in others:
            widths[k] += min(WIDTHS[k], spare // len(others))
        changed = False
        for key, w in widths.items():
            col = self.columns.get(ColumnKey(key))
            if col is not None and col.width != w:
                col.width = w
                changed = True
        if changed:
            self._require_update_dimensions = True
            self.refresh()

    def set_sort(self, column: str, reverse: bool) -> None:
        """Show which column orders the rows (the app recomputes the rows)."""
        self.sort_column, self.sort_reverse = column, reverse
        self._label_columns()

    def _label_columns(self) -> None:
        for key, (label, hotter_is_bigger) in COLUMNS.items():
            if key not in self.columns:
                continue
            text = Text(label)
            if key == self.sort_column:
                # The arrow points the way the hottest-first ordering runs.
                down = hotter_is_bigger != self.sort_reverse
                text = Text(f"{label} {'▼' if down else '▲'}", style="bold")
            self.columns[key].label = text  # type: ignore[index]
        self.refresh()

    @property
    def cursor_link(self) -> str | None:
        """The link the cursor is on."""
        if not self.row_count:
            return None
        row_key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return None if row_key.value is None else str(row_key.value)

    @property
    def links_shown(self) -> list[str]:
        """Link names in display order."""
        return list(self._order)

    def show(self, rows: list[tuple[str, ...]]) -> None:
        """Make the table show ``rows`` (first cell = link name) in that order."""
        keep_on = self.cursor_link
        wanted = {row[0]: row for row in rows}
        for name in [n for n in self._cells if n not in wanted]:
            self.remove_row(name)
            del self._cells[name]
            for column in COLUMNS:
                self._drawn.pop((RowKey(name), ColumnKey(column)), None)
        columns = list(COLUMNS)
        for name, row in wanted.items():
            old = self._cells.get(name)
            if old is None:
                self.add_row(
                    *(self._cell(c, v) for c, v in zip(columns, row, strict=True)), key=name
                )
            elif old != row:
                for c, (a, b) in enumerate(zip(old, row, strict=True)):
                    if a != b:
                        self.update_cell(name, columns[c], self._cell(columns[c], b))
            self._cells[name] = row
        order = [row[0] for row in rows]
        if order != self._order:
            rank = {name: i for i, name in enumerate(order)}
            self.sort("link", key=lambda cell: rank[cell.plain])
            self._order = order
        if self.follow_link and keep_on is not None and keep_on in wanted:
            index = self.get_row_index(keep_on)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False)

    def _moved_by_operator(self) -> None:
        self.follow_link = self.cursor_row != 0

    def action_cursor_up(self) -> None:
        super().action_cursor_up()
        self._moved_by_operator()

    def action_cursor_down(self) -> None:
        super().action_cursor_down()
        self._moved_by_operator()

    def action_page_up(self) -> None:
        super().action_page_up()
        self._moved_by_operator()

    def action_page_down(self) -> None:
        super().action_page_down()
        self._moved_by_operator()

    def action_scroll_top(self) -> None:
        super().action_scroll_top()
        self._moved_by_operator()

    def action_scroll_bottom(self) -> None:
        super().action_scroll_bottom()
        self._moved_by_operator()

    # ------------------------------------------------------------------ drawing
    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> Lines:
        """A cell's lines, drawn again only when the cell or its style changed.

        ``DataTable`` keys its caches on a count of all updates, so one changed cell (or a
        re-sort) draws every visible cell again. Here a cell is kept while its value (the
        very ``Text`` the table holds: a change puts a new one) and everything its drawing
        depends on are the same; a row that only moved to another index gets its lines
        with that index in their mouse metadata (the one thing the index changes, the
        zebra stripe being part of ``base_style``). A few drawings are kept per cell: a
        row moving by an odd number of places changes its stripe, a cursor its style."""
        if row_index < 0 or column_index < 0:  # the header and row labels: not data cells
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cell = self._data[row_key][column_key]
        how = (
            base_style,
            width,
            cursor,
            hover,
            self._show_hover_cursor,
            self._pseudo_class_state,
            self.show_cursor,
            self.cursor_foreground_priority,
            self.cursor_background_priority,
            self.rows[row_key].height,
            self.cell_padding,
            row_index < self.fixed_rows or column_index < self.fixed_columns,
            column_index,
        )
        slot = (row_key, column_key)
        kept = self._drawn.get(slot)
        if kept is None or kept[0] is not cell:
            kept = self._drawn[slot] = (cell, {})
        drawings = kept[1]
        drawn = drawings.get(how)
        if drawn is not None and drawn[0] == row_index:
            return drawn[1]
        if drawn is not None:
            meta = Style.from_meta({"row": row_index, "column": column_index})
            lines = [
                [
                    Segment(text, None if control or style is None else style + meta, control)
                    for text, style, control in line
                ]
                for line in drawn[1]
            ]
        else:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            if len(drawings) >= self.DRAWINGS_KEPT:
                del drawings[next(iter(drawings))]
        drawings[how] = (row_index, lines)
        return lines

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._drawn.clear()

    def notify_style_update(self) -> None:
        self._drawn.clear()
        super().notify_style_update()

    @staticmethod
    def _cell(column: str, value: str) -> Text:
        if column == "state":
            return Text(value, style=STATE_STYLES.get(value, ""))
        if column == "link":
            return Text(value)
        return Text(value, justify="right")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(LinkChosen(str(event.row_key.value)))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        if event.column_key.value is not None:
            self.post_message(SortRequested(str(event.column_key.value)))
