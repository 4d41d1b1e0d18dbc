"""Active faults with their timelines, keyed by fault id and updated by difference."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from console.fmt import fmt_seconds
from fabric_core.runtime.snapshot import FaultView, Snapshot

#: (key, label, width): each width is its longest value's ("version_mismatch" aside,
#: "leaf00->spine01", "recovered", "+2.02 ms") and a space before the next column, the
#: table's only padding, so that the whole timeline fits the panel from 120 columns on
#: (``FabtopApp`` sizes the panel's box to ``PANEL_WIDTH``)
#: A layout: its columns' (key, label, width)
Columns = tuple[tuple[str, str, int], ...]

COLUMNS: Columns = (
    ("id", "id", 4),
    ("kind", "kind", 14),
    ("target", "target", 16),
    ("state", "state", 10),
    ("detected", "detected", 9),
    ("rerouted", "rerouted", 9),
    ("recovered", "recovered", 10),
    ("elapsed", "elapsed", 8),
)
#: Narrower (the panel takes at most 70 % of the terminal: 67 columns inside at 100): no
#: elapsed time, and the timeline's times without their "+" ("2.02 ms", after injection
#: as in the full table) under shorter labels, the last with no space after it
COMPACT_COLUMNS: Columns = (
    *COLUMNS[:4],
    ("detected", "detect", 8),
    ("rerouted", "reroute", 8),
    ("recovered", "recover", 7),
)
#: Narrower still (53 columns inside at 80): the timeline's last step in one column, the
#: state and when it was reached ("mitigated +2.02 ms")
NARROW_COLUMNS: Columns = (*COLUMNS[:3], ("stage", "state", 19))
#: The layouts, widest first: the panel takes the widest that fits (the last if none does)
LAYOUTS = (COLUMNS, COMPACT_COLUMNS, NARROW_COLUMNS)
#: The columns and the panel's border and leading space
PANEL_WIDTH = sum(width for _, _, width in COLUMNS) + 3
STATE_STYLES = {
    "active": "bold red",
    "detected": "dark_orange",
    "mitigated": "yellow",
    "recovered": "green",
    "cleared": "dim",
}
#: Cleared faults stay listed (dimmed) for reference, at most this many.
KEEP_CLEARED = 5


def since(fault: FaultView, at_s: float | None, sign: str = "+") -> str:
    """When a step was reached after the injection; "…" while it may still come, "—" for
    a fault cleared without it (a cleared switch never rerouted: "…" read as pending)."""
    if at_s is None:
        return "—" if fault.cleared_at_s is not None else "…"
    return sign + fmt_seconds(at_s - fault.injected_at_s)


def fault_cells(fault: FaultView, now_s: float, columns: Columns) -> dict[str, str]:
    """The cells of one fault by column key, for the layout ``columns`` (one of
    ``LAYOUTS``): times are relative to its injection (simulated), signed in the full
    layout ("+2.02 ms"), not in the narrower ones."""
    sign = "+" if columns is COLUMNS else ""
    keys = [key for key, _, _ in columns]
    end = fault.cleared_at_s if fault.cleared_at_s is not None else now_s
    every = {
        "id": fault.id,
        "kind": fault.kind,
        "target": fault.target,
        "state": fault.state,
        "detected": since(fault, fault.detected_at_s, sign),
        "rerouted": since(fault, fault.mitigated_at_s, sign),
        "recovered": since(fault, fault.recovered_at_s, sign),
        "elapsed": fmt_seconds(end - fault.injected_at_s),
    }
    if "stage" in keys:
        reached = {
            "detected": fault.detected_at_s,
            "mitigated": fault.mitigated_at_s,
            "recovered": fault.recovered_at_s,
            "cleared": fault.cleared_at_s,
        }.get(fault.state)
        every["stage"] = fault.state + ("" if reached is None else " " + since(fault, reached))
    return {key: every[key] for key in keys}


def layout_for(width: int) -> Columns:
    """The widest of ``LAYOUTS`` whose columns fit ``width`` cells (the narrowest if none)."""
    for columns in LAYOUTS:
        if sum(w for _, _, w in columns) <= width:
            return columns
    return LAYOUTS[-1]


def faults_to_show(snap: Snapshot) -> list[FaultView]:
    """Active faults first, newest first (the panel holds a few rows: the fault just
    injected must not land below its fold), then the most recently cleared ones."""
    active = [f for f in snap.faults if f.cleared_at_s is None]
    cleared = [f for f in snap.faults if f.cleared_at_s is not None]
    cleared.sort(key=lambda f: f.cleared_at_s or 0.0, reverse=True)
    active.sort(key=lambda f: (f.injected_at_s, _number(f.id)), reverse=True)
    return active + cleared[:KEEP_CLEARED]


def _number(fault_id: str) -> int:
    """``f12`` -> 12: faults injected at one tick, in the order they were."""
    digits = fault_id.lstrip("f")
    return int(digits) if digits.isdigit() else -1


class FaultsPanel(DataTable[Text]):
    """See the module docstring. Its columns are the widest of ``LAYOUTS`` that fit it,
    chosen again when it is resized."""

    DEFAULT_CSS = """
    FaultsPanel { height: auto; max-height: 9; padding-left: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_cursor=False, cell_padding=0)
        self.layout_columns: Columns = COLUMNS
        self._cells: dict[str, dict[str, str]] = {}
        self._order: list[str] = []
        self._last: Snapshot | None = None

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for key, label, width in self.layout_columns:
            self.add_column(label, key=key, width=width)

    def on_resize(self) -> None:
        """Take the layout that fits the new width, and draw the faults in it."""
        columns = layout_for(self.size.width)  # (the event's size counts the padding in)
        if columns is self.layout_columns:
            return
        self.layout_columns = columns
        self.clear(columns=True)
        self._cells.clear()
        self._order = []
        self._add_columns()
        if self._last is not None:
            self.show(self._last)

    def show(self, snap: Snapshot) -> None:
        """Bring the rows in line with the snapshot's faults."""
        self._last = snap
        faults = faults_to_show(snap)
        columns = self.layout_columns
        rows = {f.id: fault_cells(f, snap.sim_time_s, columns) for f in faults}
        states = {f.id: f.state for f in faults}
        for fid in [k for k in self._cells if k not in rows]:
            self.remove_row(fid)
            del self._cells[fid]
        for fid, row in rows.items():
            old = self._cells.get(fid)
            state = states[fid]
            if old is None:
                cells = (self._cell(k, v, state) for k, v in row.items())
                self.add_row(*cells, key=fid)
            elif old != row:
                for k, value in row.items():
                    if old[k] != value:
                        self.update_cell(fid, k, self._cell(k, value, state))
            self._cells[fid] = row
        order = list(rows)
        if order != self._order:
            rank = {fid: i for i, fid in enumerate(order)}
            self.sort("id", key=lambda cell: rank[cell.plain])
            self._order = order

    @staticmethod
    def _cell(column: str, value: str, state: str) -> Text:
        """A cell's text: the state in its colour (alone, or with when it was reached)."""
        if column in ("state", "stage"):
            return Text(value, style=STATE_STYLES.get(state, ""))
        return Text(value)
