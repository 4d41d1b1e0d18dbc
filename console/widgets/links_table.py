"""The links table: the top-N links by a chosen column, updated by difference.

Rows are keyed by link name. A refresh gives the place of a row that left the
top-N to one that entered (its key and cells change in place: no row is removed
and added, which would lay out the whole screen again), rewrites only the cells
whose text changed, and reorders. Once the operator has moved the cursor off the
top row, the cursor goes back to the link it was on, wherever that row moved; on
the top row it watches whatever is hottest. Nothing is ever cleared and rebuilt.

Drawing is by difference too: a cell is drawn again only when it or its style
changed, a line of the table only when one of its cells (or the cursor, the width,
the row's place) did, and a plain one-line cell is laid out without Rich's console
(the same segments as ``DataTable``'s, which a test checks cell by cell).
"""

from __future__ import annotations

from itertools import chain
from operator import is_

import numpy as np
from numpy.typing import NDArray
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._segment_tools import line_crop
from textual._two_way_dict import TwoWayDict
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, Row, RowKey

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


def column_label(key: str, flow_control: str) -> str:
    """A column's heading on a fabric of ``flow_control``: the credits column holds PFC
    headroom on RoCE (the same counter: the room left in the receiver's buffer), and says
    so there; the others are the same on both."""
    if key == "credits" and flow_control == "pfc":
        return "headroom"
    return COLUMNS[key][0]


def natural_widths(flow_control: str) -> dict[str, int]:
    """``WIDTHS``, with room for a heading that is longer on this fabric and its sort arrow
    ("headroom ▲")."""
    return {
        key: max(width, cell_len(column_label(key, flow_control)) + 2)
        for key, width in WIDTHS.items()
    }


#: The narrowest the link names' column gets on a narrow terminal: "leaf00->spine01" and a
#: space (longer names are cut there)
MIN_LINK_WIDTH = 16


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
        #: row -> (how its line was drawn, its cells, the line pair): see ``_render_line_in_row``
        self._row_lines: dict[
            tuple[RowKey, int], tuple[tuple[object, ...], tuple[object, ...], object]
        ] = {}
        #: screen line -> (row line pair, crop, the strip): see ``_render_line``
        self._strips: dict[int, tuple[object, tuple[object, ...], Strip]] = {}
        #: what every line's drawing depends on besides its row: see ``render_lines``
        self._frame: tuple[object, ...] = ()
        #: the table's width and its columns' as of the paint under way
        self._width = 0
        self._widths: tuple[int, ...] = ()
        #: header, even and odd row styles: see ``render_lines``
        self._row_styles: tuple[Style, Style, Style] = (Style(), Style(), Style())
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)  # clears the caches
        self._cells: dict[str, tuple[str, ...]] = {}
        self._order: list[str] = []
        self.sort_column = "util"
        self.sort_reverse = False
        #: True once the operator moved the cursor off the top row: it then sticks to its link.
        self.follow_link = False
        #: the fabric's flow control ("credit" or "pfc"), which some headings depend on
        self.flow_control = "credit"

    def on_mount(self) -> None:
        for key, (label, _) in COLUMNS.items():
            self.add_column(label, key=key, width=WIDTHS[key])
        self._label_columns()

    def on_resize(self) -> None:
        """Spread the width over the columns (a wide terminal gets wider columns, up to
        twice their natural width, the link name column first), so the table reads
        across the screen instead of leaving half of it blank."""
        natural_of = natural_widths(self.flow_control)
        natural = sum(natural_of.values())
        pad = 2 * self.cell_padding * len(natural_of) + 2  # cell padding and the scrollbar
        spare = max(0, self.size.width - natural - pad)
        widths = dict(natural_of)
        if self.size.width and natural + pad > self.size.width:
            # a narrow terminal: the link names give up their spare room first, so that the
            # last column's figures are not pushed past the edge (at 100 columns the header
            # "drops" showed and its right-aligned values did not)
            short = natural + pad - self.size.width
            widths["link"] = max(MIN_LINK_WIDTH, natural_of["link"] - short)
        grow_link = min(spare, natural_of["link"] // 2)
        widths["link"] += grow_link
        spare -= grow_link
        others = [k for k in natural_of if k != "link"]
        for k in others:
            widths[k] += min(natural_of[k], spare // len(others))
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

    def set_flow_control(self, flow_control: str) -> None:
        """Head the columns for a fabric of ``flow_control`` ("credit" or "pfc")."""
        if flow_control == self.flow_control:
            return
        self.flow_control = flow_control
        self._label_columns()
        self.on_resize()  # ("headroom ▲" is wider than "credits ▲")

    def _label_columns(self) -> None:
        for key, (_, hotter_is_bigger) in COLUMNS.items():
            if key not in self.columns:
                continue
            label = column_label(key, self.flow_control)
            text = Text(label)
            if key == self.sort_column:
                # The arrow points the way the hottest-first ordering runs.
                down = hotter_is_bigger != self.sort_reverse
                text = Text(f"{label} {'▼' if down else '▲'}", style="bold")
            self.columns[key].label = text  # type: ignore[index]
        # the header's drawn lines are cached until a row changes: an empty table (a filter
        # that matches nothing) kept the arrow on the column sorted by before
        self._clear_caches()
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

    def show(self, rows: list[tuple[str, ...]], flow_control: str) -> None:
        """Make the table show ``rows`` (first cell = link name) in that order, and
        repaint only the rows whose link or cells changed; ``flow_control``: the fabric's,
        for the headings."""
        self.set_flow_control(flow_control)
        keep_on = self.cursor_link
        before = [self._cells[name] for name in self._order]
        wanted = {row[0]: row for row in rows}
        leaving = [n for n in self._cells if n not in wanted]
        entering = [n for n in wanted if n not in self._cells]
        # a row that enters takes the place of one that left: same count, no layout
        for old, new in zip(leaving, entering, strict=False):
            self._rekey_row(old, wanted[new])
        for name in leaving[len(entering) :]:
            self.remove_row(name)
            self._forget(name)
        columns = list(COLUMNS)
        for name in entering[len(leaving) :]:
            row = wanted[name]
            self.add_row(*(self._cell(c, v) for c, v in zip(columns, row, strict=True)), key=name)
            self._cells[name] = row
        for name, row in wanted.items():
            old_row = self._cells[name]
            if old_row is row:
                continue
            # as update_cell does, without a repaint and an update count per cell
            data = self._data[RowKey(name)]
            for c, (a, b) in enumerate(zip(old_row, row, strict=True)):
                if a != b:
                    data[ColumnKey(columns[c])] = self._cell(columns[c], b)
            self._cells[name] = row
        order = [row[0] for row in rows]
        if order != self._order:
            # as sort() orders the rows, without repainting them all
            self._row_locations = TwoWayDict({RowKey(name): i for i, name in enumerate(order)})
            self._order = order
        if rows != before:
            self._update_count += 1
            if len(rows) != len(before):
                self.refresh()
            else:
                for index, (was, now) in enumerate(zip(before, rows, strict=True)):
                    if was != now:
                        self.refresh_row(index)
        if self.follow_link and keep_on is not None and keep_on in wanted:
            index = self.get_row_index(keep_on)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False)

    def _rekey_row(self, old: str, row: tuple[str, ...]) -> None:
        """Give row ``old``'s place to link ``row[0]`` with ``row``'s cells: what
        ``remove_row`` then ``add_row`` and a sort would leave, without the layout
        of the whole screen they ask for (the row count, column widths and row
        heights stay). The caller counts the update and repaints."""
        old_key, new_key = RowKey(old), RowKey(row[0])
        index = self._row_locations.get(old_key)
        assert index is not None
        del self._row_locations[old_key]
        self._row_locations[new_key] = index
        del self.rows[old_key]
        self.rows[new_key] = Row(new_key, 1)
        del self._data[old_key]
        self._data[new_key] = {
            ColumnKey(c): self._cell(c, v) for c, v in zip(COLUMNS, row, strict=True)
        }
        self._forget(old)
        self._cells[row[0]] = row

    def _forget(self, name: str) -> None:
        """Drop what was kept of a row that left."""
        del self._cells[name]
        key = RowKey(name)
        for column in COLUMNS:
            self._drawn.pop((key, ColumnKey(column)), None)
        for line in [k for k in self._row_lines if k[0] == key]:
            del self._row_lines[line]

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
            lines = self._draw_cell(
                row_key, cell, row_index, column_index, base_style, width, cursor, hover
            )
            if len(drawings) >= self.DRAWINGS_KEPT:
                del drawings[next(iter(drawings))]
        drawings[how] = (row_index, lines)
        return lines

    def _draw_cell(
        self,
        row_key: RowKey,
        cell: object,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> Lines:
        """A data cell drawn as ``DataTable._render_cell`` draws it, without Rich's console
        for the cells this table holds (one line of text without spans, left or right
        justified, that fits): padding, the text (a right-justified one with its leading
        blanks), the blanks after a left-justified one, padding. Anything else goes to
        ``DataTable``."""
        pad = self.cell_padding
        room = width - 2 * pad
        if (
            type(cell) is not Text
            or cell.spans
            or pad <= 0
            or self.rows[row_key].height != 1
            or "\n" in cell.plain
            or "\t" in cell.plain
            or cell.justify not in (None, "default", "left", "right")
            or (cell.justify == "right" and cell.style)
            or not 0 < cell_len(cell.plain) <= room
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
        component, post = self._get_styles_to_render_cell(
            False,
            False,
            fixed,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pre = base_style + Style.from_meta({"row": row_index, "column": column_index})
        pre = pre + component
        plain = cell.plain
        blank = pre + post if post else pre
        spaces = " " * pad
        blanks = room - cell_len(plain)
        if cell.justify == "right":
            return [
                [
                    Segment(spaces, blank),
                    Segment(" " * blanks + plain, blank),
                    Segment(spaces, blank),
                ]
            ]
        if cell.style:
            own = pre + self.app.console.get_style(cell.style)
            styled = own + post if post else own
        else:
            styled = blank
        line = [Segment(spaces, blank), Segment(plain, styled)]
        if blanks:
            line.append(Segment(" " * blanks, blank))
        line.append(Segment(spaces, blank))
        return [line]

    def render_lines(self, crop: Region) -> list[Strip]:
        # what every line's drawing depends on besides its row: worked out once a paint
        self._width = self.size.width
        self._widths = tuple(column.get_render_width(self) for column in self.ordered_columns)
        self._frame = (
            self._width,
            self._widths,
            self.cell_padding,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_type,
        )
        component = self.get_component_styles
        self._row_styles = (
            component("datatable--header").rich_style,
            component("datatable--even-row").rich_style,
            component("datatable--odd-row").rich_style,
        )
        return super().render_lines(crop)

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[Lines, Lines]:
        """A row's line, drawn again only when one of its cells, its place, the cursor
        or hover on it, or the table's width or columns changed (``DataTable`` keys it
        on a count of all updates: one changed cell drew every line again)."""
        if (
            not self._frame  # not within a paint (render_lines)
            or self.cursor_type != "row"
            or self.fixed_columns
            or self.fixed_rows
            or (self._labelled_row_exists and self.show_row_labels)
        ):
            return super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
        if row_key is self._header_row_key:
            row_index = -1
            cells: tuple[object, ...] = tuple(c.label for c in self.ordered_columns)
        else:
            found = self._row_locations.get(row_key)
            row_index = -1 if found is None else found
            cells = tuple(self._data[row_key].values())
        how = (
            base_style,
            row_index,
            cursor_location.row == row_index,
            hover_location.row == row_index,
            self._pseudo_class_state,
            self._frame,
        )
        slot = (row_key, line_no)
        kept = self._row_lines.get(slot)
        if (
            kept is not None
            and kept[0] == how
            and len(kept[1]) == len(cells)
            and all(map(is_, kept[1], cells))
        ):
            return kept[2]  # type: ignore[return-value]
        pair = self._draw_line_in_row(row_index, line_no, cursor_location, hover_location)
        self._row_lines[slot] = (how, cells, pair)
        return pair

    def _draw_line_in_row(
        self, row_index: int, line_no: int, cursor_location: Coordinate, hover_location: Coordinate
    ) -> tuple[Lines, Lines]:
        """``DataTable._render_line_in_row`` for a row cursor, without fixed rows, fixed
        columns or row labels, with the row styles looked up once a paint (a test holds
        it to ``DataTable``'s)."""
        header, even, odd = self._row_styles
        if row_index == -1:
            row_style = header
        elif self.zebra_stripes:
            row_style = odd if row_index % 2 else even
        else:
            row_style = self.rich_style
        on_cursor = cursor_location.row == row_index
        on_hover = hover_location.row == row_index
        render_cell = self._render_cell
        scrollable_row = [
            render_cell(row_index, c, row_style, width, cursor=on_cursor, hover=on_hover)[line_no]
            for c, width in enumerate(self._widths)
        ]
        remaining_space = max(0, self._width - sum(self._widths) - self._row_label_column_width)
        extend_style, _ = self._get_styles_to_render_cell(
            row_index == -1,
            False,
            False,
            hover_location.row == (row_index or 0),
            on_cursor,
            self.show_cursor,
            self._show_hover_cursor,
            False,
            False,
        )
        extend_style = row_style + extend_style
        extend_style += Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})
        scrollable_row.append([Segment(" " * remaining_space, extend_style)])
        return ([], scrollable_row)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """A screen line of the table, made again only when its row's line (or the crop)
        changed; as ``DataTable._render_line`` makes it."""
        width = self.size.width
        try:
            row_key, y_offset_in_row = self._get_offsets(y)
        except LookupError:
            return Strip.blank(width, base_style)
        pair = self._render_line_in_row(
            row_key,
            y_offset_in_row,
            base_style,
            cursor_location=self.cursor_coordinate,
            hover_location=self.hover_coordinate,
        )
        crop = (x1, x2, width, base_style)
        kept = self._strips.get(y)
        if kept is not None and kept[0] is pair and kept[1] == crop:
            return kept[2]
        fixed, scrollable = pair
        fixed_width = sum(
            column.get_render_width(self) for column in self.ordered_columns[: self.fixed_columns]
        )
        fixed_line: list[Segment] = list(chain.from_iterable(fixed)) if fixed else []
        scrollable_line: list[Segment] = list(chain.from_iterable(scrollable))
        segments = fixed_line + line_crop(scrollable_line, x1 + fixed_width, x2, width)
        strip = Strip(segments).adjust_cell_length(width, base_style).simplify()
        self._strips[y] = (pair, crop, strip)
        return strip

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._drawn.clear()
        self._row_lines.clear()
        self._strips.clear()

    def notify_style_update(self) -> None:
        self._drawn.clear()
        self._row_lines.clear()
        self._strips.clear()
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
