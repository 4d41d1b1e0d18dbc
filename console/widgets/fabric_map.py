"""The fabric map: tiers as rows, each node coloured by its worst port."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.widget import Widget

from console.linkview import SEVERITY_NAMES, severity_names
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
#: Above this many nodes a row shows counts per severity instead of one cell per node.
MAX_CELLS_PER_ROW = 160
LABEL_WIDTH = 8


class FabricMap(Widget, can_focus=True):
    """Switches (and endpoints, compactly) by tier; arrows move, Enter shows the ports."""

    DEFAULT_CSS = """
    FabricMap { height: auto; max-height: 12; padding: 0 1; }
    FabricMap:focus { background: $boost; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(0, -1)", "◀", show=False),
        Binding("right", "move(0, 1)", "▶", show=False),
        Binding("up", "move(-1, 0)", "▲", show=False),
        Binding("down", "move(1, 0)", "▼", show=False),
        Binding("enter", "select", "Ports", show=True),
    ]

    #: (row, column) of the cursor in ``rows``.
    cursor: reactive[tuple[int, int]] = reactive((0, 0))

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[tuple[str, list[int]]] = []  # (tier label, node indices)
        self._names: tuple[str, ...] = ()
        self._severity: NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self._tables: object = None
        self.severity_names: tuple[str, ...] = SEVERITY_NAMES

    def show(self, snap: Snapshot, node_sev: NDArray[np.int8]) -> None:
        """Recolour from a snapshot's node severities; redraws only on change."""
        if snap.nodes is not self._tables:
            self._tables = snap.nodes
            self.severity_names = severity_names(snap.flow_control)
            self._names = snap.nodes.name
            self.rows = self._build_rows(snap)
            self._severity = node_sev.copy()
            self.refresh(layout=True)
        elif not np.array_equal(node_sev, self._severity):
            self._severity = node_sev.copy()
            self.refresh()

    @staticmethod
    def _build_rows(snap: Snapshot) -> list[tuple[str, list[int]]]:
        nodes = snap.nodes
        tiers = np.asarray(nodes.tier)
        rows: list[tuple[str, list[int]]] = []
        for tier in sorted({int(t) for t in tiers}, reverse=True):
            members = [i for i in np.flatnonzero(tiers == tier).tolist()]
            if tier == 0:
                for kind in ("gpu", "storage"):
                    of_kind = [i for i in members if nodes.kind[i] == kind]
                    if of_kind:
                        rows.append((kind, of_kind))
                others = [i for i in members if nodes.kind[i] not in ("gpu", "storage")]
                if others:
                    rows.append(("other", others))
            else:
                rows.append((TIER_NAMES.get(tier, f"tier{tier}"), members))
        return rows

    @property
    def selected_name(self) -> str | None:
        """Name of the node under the cursor."""
        r, c = self.cursor
        if not self.rows:
            return None
        members = self.rows[r][1]
        return self._names[members[min(c, len(members) - 1)]]

    def action_move(self, dr: int, dc: int) -> None:
        """Move the cursor within a tier (left/right) or between tiers (up/down)."""
        if not self.rows:
            return
        r, c = self.cursor
        r = min(max(r + dr, 0), len(self.rows) - 1)
        width = len(self.rows[r][1])
        if width > MAX_CELLS_PER_ROW:
            width = 1  # summarised row: nothing to walk through
        c = min(max(c + dc, 0), width - 1)
        self.cursor = (r, c)

    def action_select(self) -> None:
        """Tell the app to show the ports of the node under the cursor."""
        name = self.selected_name
        if name is not None:
            self.post_message(SwitchSelected(name))

    def render(self) -> Text:
        """One line (wrapped) per tier; the focused node is underlined and bold."""
        text = Text()
        sev = self._severity
        cur_r, cur_c = self.cursor
        for r, (label, members) in enumerate(self.rows):
            if r:
                text.append("\n")
            text.append(f"{label:>{LABEL_WIDTH - 1}} ", "bold")
            if len(members) > MAX_CELLS_PER_ROW:
                counts = np.bincount(sev[members], minlength=len(SEVERITY_NAMES))
                text.append(f"{len(members)} nodes: ")
                for level, n in enumerate(counts.tolist()):
                    if n:
                        text.append(
                            f" {self.severity_names[level]}\u00a0{n} ", SEVERITY_STYLES[level]
                        )
                        text.append(" ")
                continue
            compact = label in ("gpu", "storage") or len(members) > 32
            cell_width = 1 if compact else max(len(self._names[m]) for m in members) + 3
            per_line = (
                max(1, (self.size.width - LABEL_WIDTH) // cell_width) if self.size.width else 0
            )
            for c, node in enumerate(members):
                if per_line and c and c % per_line == 0:
                    text.append(
                        "\n" + " " * LABEL_WIDTH
                    )  # wrap under the first cell, not the label
                style = SEVERITY_STYLES[int(sev[node]) if node < len(sev) else 0]
                if r == cur_r and c == cur_c and self.has_focus:
                    style += " bold underline reverse"
                name = self._names[node]
                text.append("■" if compact else f" {name} ".ljust(cell_width - 1), style)
                if not compact:
                    text.append(" ")
        return text

    def legend(self) -> Text:
        """The colour key."""
        text = Text()
        for level, name in enumerate(self.severity_names):
            text.append(f" {name} ", SEVERITY_STYLES[level])
        return text
