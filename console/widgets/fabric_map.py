"""The fabric map: tiers as rows, each node coloured by its worst port."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.reactive import reactive
from textual.widget import Widget

from console.linkview import SEVERITY_NAMES, severity_names
from console.mapgroups import NodeGroups, node_groups
from console.messages import SwitchSelected
from fabric_core.runtime.snapshot import Snapshot

SEVERITY_STYLES = (
    "black on green",
    "black on yellow",
    "black on dark_orange",
    "white on magenta",
    "white on purple",
    "bold white on red",
)
TIER_NAMES = {3: "core", 2: "spine", 1: "leaf", 0: "gpu"}
#: Above this many nodes a row shows a cell per group (pod, core group) instead of one
#: per node, or counts per severity when the nodes form no groups.
MAX_CELLS_PER_ROW = 160
LABEL_WIDTH = 8


@dataclass(frozen=True, slots=True)
class MapRow:
    """One row of the map: a tier's nodes, or its groups (``cells`` are then group ids)."""

    label: str
    nodes: NDArray[np.intp]  # the row's nodes
    cells: list[int]  # node ids, or group ids for a grouped row
    grouped: bool

    @property
    def walkable(self) -> bool:
        """Whether the cursor moves through the cells (a counts-only row is one cell)."""
        return self.grouped or len(self.cells) <= MAX_CELLS_PER_ROW


class FabricMap(Widget, can_focus=True):
    """Switches (and endpoints, compactly) by tier; arrows move, Enter shows the ports.

    A tier too large for a cell per node gets a cell per pod or core group, coloured by
    its worst node; Enter on one drills down into that group's nodes, Esc comes back.
    """

    DEFAULT_CSS = """
    FabricMap { height: auto; padding: 0 1; }
    FabricMap:focus { background: $boost; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(0, -1)", "◀", show=False),
        Binding("right", "move(0, 1)", "▶", show=False),
        Binding("up", "move(-1, 0)", "▲", show=False),
        Binding("down", "move(1, 0)", "▼", show=False),
        Binding("enter", "select", "Ports", show=True),
        Binding("escape,backspace", "up_level", "All groups", show=True),
    ]

    #: (row, column) of the cursor in ``rows``.
    cursor: reactive[tuple[int, int]] = reactive((0, 0))

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[MapRow] = []
        self._tiers: list[MapRow] = []  # the whole fabric's rows
        self._names: tuple[str, ...] = ()
        self._groups = NodeGroups(of_node=np.zeros(0, dtype=np.int32), names=())
        self._severity: NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self._tables: object = None
        #: the group drilled into (None: the whole fabric), and the cursor to go back to
        self.drilled: int | None = None
        self._cursor_above: tuple[int, int] = (0, 0)
        self._cursor_line = 0  # the line of the map the cursor is on, as last drawn
        self._scroll_pending = False  # the cursor moved: scroll its line into view
        self.severity_names: tuple[str, ...] = SEVERITY_NAMES
        #: what the last render drew, row by row (see ``_row_levels``)
        self._drawn: tuple[bytes, ...] | None = None
        #: the rows' levels as last worked out, and for which rows and severities
        self._levels: list[NDArray[np.int8] | NDArray[np.intp]] = []
        self._levels_of: tuple[int, int] = (-1, -1)
        self._severity_version = 0

    def show(self, snap: Snapshot, node_sev: NDArray[np.int8]) -> None:
        """Recolour from a snapshot's node severities; redraws only when a cell (or a
        count) it draws changed, not on every change of a node in a group."""
        if snap.nodes is not self._tables:
            self._tables = snap.nodes
            self.severity_names = severity_names(snap.flow_control)
            self._names = snap.nodes.name
            big = len(snap.nodes) > MAX_CELLS_PER_ROW
            self._groups = node_groups(snap.nodes, snap.links) if big else self._groups
            self._tiers = self._build_rows(snap, self._groups if big else None)
            self.drilled = None
            self.rows = self._tiers
            self.cursor = (0, 0)
            self._set_severity(node_sev)
            self.refresh(layout=True)
        elif not np.array_equal(node_sev, self._severity):
            self._set_severity(node_sev)
            if self._drawn != tuple(a.tobytes() for a in self._levels_now()):
                self.refresh()

    def _set_severity(self, node_sev: NDArray[np.int8]) -> None:
        self._severity = node_sev.copy()
        self._severity_version += 1

    def _levels_now(self) -> list[NDArray[np.int8] | NDArray[np.intp]]:
        """Every row's levels (``_row_levels``), worked out once per change of the rows
        or of the severities: the check for a change and the render share them."""
        of = (id(self.rows), self._severity_version)
        if of != self._levels_of:
            self._levels = [self._row_levels(row) for row in self.rows]
            self._levels_of = of
        return self._levels

    @staticmethod
    def _build_rows(snap: Snapshot, groups: NodeGroups | None) -> list[MapRow]:
        nodes = snap.nodes
        tiers = np.asarray(nodes.tier)
        kinds = np.array(nodes.kind)
        labelled: list[tuple[str, NDArray[np.intp]]] = []
        for tier in sorted({int(t) for t in tiers}, reverse=True):
            members = np.flatnonzero(tiers == tier)
            if tier == 0:
                for kind in ("gpu", "storage"):
                    labelled.append((kind, members[kinds[members] == kind]))
                labelled.append(("other", members[~np.isin(kinds[members], ("gpu", "storage"))]))
            else:
                labelled.append((TIER_NAMES.get(tier, f"tier{tier}"), members))
        rows = []
        for label, members in labelled:
            if not members.size:
                continue
            of = groups.of_node[members] if groups is not None else None
            if of is not None and members.size > MAX_CELLS_PER_ROW and (of >= 0).all():
                cells = np.unique(of).tolist()
                if 1 < len(cells) <= MAX_CELLS_PER_ROW:
                    rows.append(MapRow(label, members, cells, grouped=True))
                    continue
            rows.append(MapRow(label, members, members.tolist(), grouped=False))
        return rows

    def _drill_rows(self, group: int) -> list[MapRow]:
        """The rows of one group's nodes."""
        of = self._groups.of_node
        rows = []
        for row in self._tiers:
            members = row.nodes[of[row.nodes] == group]
            if members.size:
                rows.append(MapRow(row.label, members, members.tolist(), grouped=False))
        return rows

    def _cell(self) -> tuple[MapRow, int] | None:
        """The row under the cursor and the id in its cell (node or group)."""
        if not self.rows:
            return None
        r, c = self.cursor
        row = self.rows[min(r, len(self.rows) - 1)]
        return row, row.cells[min(c, len(row.cells) - 1)]

    @property
    def selected_name(self) -> str | None:
        """Name of the node (or group) under the cursor."""
        cell = self._cell()
        if cell is None:
            return None
        row, k = cell
        return self._groups.names[k] if row.grouped else self._names[k]

    def action_move(self, dr: int, dc: int) -> None:
        """Move the cursor within a tier (left/right) or between tiers (up/down)."""
        if not self.rows:
            return
        r, c = self.cursor
        r = min(max(r + dr, 0), len(self.rows) - 1)
        row = self.rows[r]
        width = len(row.cells) if row.walkable else 1  # a counts row: nothing to walk
        c = min(max(c + dc, 0), width - 1)
        self.cursor = (r, c)

    def action_select(self) -> None:
        """Drill into the group under the cursor, or show the ports of its node."""
        cell = self._cell()
        if cell is None:
            return
        row, k = cell
        if row.grouped:
            self._cursor_above = self.cursor
            self.drilled = k
            self.rows = self._drill_rows(k)
            self.cursor = (0, 0)
            self.refresh(layout=True)
            self.refresh_bindings()
        elif row.walkable:
            self.post_message(SwitchSelected(self._names[k]))

    def action_up_level(self) -> None:
        """Back from a group to the whole fabric, the cursor on that group."""
        if self.drilled is None:
            return
        self.drilled = None
        self.rows = self._tiers
        self.cursor = self._cursor_above
        self.refresh(layout=True)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc means "back" only inside a group."""
        if action == "up_level":
            return self.drilled is not None
        return True

    def _cell_severities(self, row: MapRow) -> NDArray[np.int8]:
        """A severity per cell: the node's, or a group's worst node's."""
        sev = self._severity
        if not row.grouped:
            ids = np.asarray(row.cells, dtype=np.intp)
            out = np.zeros(ids.size, dtype=np.int8)
            known = ids < sev.size
            out[known] = sev[ids[known]]
            return out
        worst = np.zeros(len(self._groups.names), dtype=np.int8)
        seen = row.nodes[row.nodes < sev.size]
        np.maximum.at(worst, self._groups.of_node[seen], sev[seen])
        return worst[row.cells]

    def _row_levels(self, row: MapRow) -> NDArray[np.int8] | NDArray[np.intp]:
        """What a row draws: its cells' severities, or (a row too long to walk) how many
        of its nodes are at each severity."""
        if row.walkable:
            return self._cell_severities(row)
        known = row.nodes[row.nodes < self._severity.size]
        return np.bincount(self._severity[known], minlength=len(SEVERITY_NAMES))

    def watch_cursor(self) -> None:
        """Keep the cursor's line in view: the map's box scrolls where the terminal is too
        short for every tier (at 100x30 the cursor walked onto nodes below the box's edge).
        The line is known once the map is drawn again (``render``)."""
        self._scroll_pending = True

    def _scroll_to_cursor(self) -> None:
        box = self.parent
        if isinstance(box, Widget) and box.allow_vertical_scroll:
            line = self.virtual_region.y + self._cursor_line
            box.scroll_to_region(Region(0, line, 1, 1), animate=False, immediate=True)

    def render(self) -> Text:
        """One line (wrapped) per tier; the focused cell is underlined and bold."""
        text = self._draw()
        if self._scroll_pending:
            self._scroll_pending = False
            self.call_after_refresh(self._scroll_to_cursor)
        return text

    def _draw(self) -> Text:
        self._cursor_line = 0
        levels = self._levels_now()
        self._drawn = tuple(a.tobytes() for a in levels)
        text = Text()
        cur_r, cur_c = self.cursor
        if self.drilled is not None:
            text.append(f"{self._groups.names[self.drilled]}", "bold")
            text.append("  (Esc: back to all groups)\n", "dim")
        for r, row in enumerate(self.rows):
            if r:
                text.append("\n")
            if r == cur_r:
                self._cursor_line = text.plain.count("\n")  # (a counts row has no cell)
            text.append(f"{row.label:>{LABEL_WIDTH - 1}} ", "bold")
            if not row.walkable:
                self._append_counts(text, levels[r].tolist(), len(row.cells))
                continue
            if row.grouped:
                text.append(f"{row.nodes.size:,} in {len(row.cells):,} groups: ", "dim")
            compact = row.grouped or row.label in ("gpu", "storage") or len(row.cells) > 32
            cell_width = 1 if compact else max(len(self._names[m]) for m in row.cells) + 3
            lead = LABEL_WIDTH
            per_line = max(1, (self.size.width - lead) // cell_width) if self.size.width else 0
            cells = levels[r].tolist()
            at = cur_c if r == cur_r and self.has_focus else -1  # the cursor's cell
            c = 0
            while c < len(cells):
                if per_line and c and c % per_line == 0:
                    text.append("\n" + " " * lead)  # wrap under the first cell, not the label
                level = cells[c]
                style = SEVERITY_STYLES[level]
                if c == at:
                    style += " bold underline reverse"
                    self._cursor_line = text.plain.count("\n")
                if compact:
                    # a run of cells alike is one span (a map of thousands of nodes draws
                    # a few dozen spans, not a span per cell): to the end of the line, the
                    # cursor or the first cell unlike it
                    end = len(cells)
                    if per_line:
                        end = min(end, (c // per_line + 1) * per_line)
                    if c < at < end:
                        end = at
                    run = c + 1
                    if c != at:
                        while run < end and cells[run] == level:
                            run += 1
                    text.append("■" * (run - c), style)
                    c = run
                    continue
                text.append(f" {self._names[row.cells[c]]} ".ljust(cell_width - 1), style)
                text.append(" ")
                c += 1
        if self.has_focus and self.rows:
            name = self.selected_name
            row = self.rows[min(cur_r, len(self.rows) - 1)]
            hint = "Enter: its nodes" if row.grouped else ("Enter: ports" if row.walkable else "")
            text.append(f"\n{'':>{LABEL_WIDTH}}▸ {name}", "bold")
            if hint:
                text.append(f"  ({hint})", "dim")
        return text

    def _append_counts(self, text: Text, counts: list[int], n_nodes: int) -> None:
        """A row too long to walk: its node count and how many are at each severity, each
        "name count" kept on one line. The line breaks between them, under the first, where
        the next would not fit: Rich wraps at any space, a no-break space included (Python
        counts it as one), which put a count on the line below its name."""
        head = f"{n_nodes:,} nodes: "
        text.append(head)
        width = self.size.width
        column = LABEL_WIDTH + len(head)
        for level, n in enumerate(counts):
            if not n:
                continue
            # chips side by side (their colours part them): with a space between them too,
            # the default scenario's GPU row took a second line at 120 columns whenever a
            # count had three digits, and pushed the storage row out of the map's box
            chip = f" {self.severity_names[level]} {n:,} "
            if width and column > LABEL_WIDTH and column + len(chip) > width:
                text.append("\n" + " " * LABEL_WIDTH)
                column = LABEL_WIDTH
            text.append(chip, SEVERITY_STYLES[level])
            column += len(chip)

    def legend(self) -> Text:
        """The colour key."""
        text = Text()
        for level, name in enumerate(self.severity_names):
            text.append(f" {name} ", SEVERITY_STYLES[level])
        return text
