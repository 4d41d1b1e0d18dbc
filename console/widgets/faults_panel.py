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
COLUMNS = (
    ("id", "id", 4),
    ("kind", "kind", 14),
    ("target", "target", 16),
    ("state", "state", 10),
    ("detected", "detected", 9),
    ("rerouted", "rerouted", 9),
    ("recovered", "recovered", 10),
    ("elapsed", "elapsed", 8),
)
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


def _since(fault: FaultView, at_s: float | None) -> str:
    return "…" if at_s is None else "+" + fmt_seconds(at_s - fault.injected_at_s)


def fault_row(fault: FaultView, now_s: float) -> tuple[str, ...]:
    """The cells of one fault: times are relative to its injection (simulated)."""
    end = fault.cleared_at_s if fault.cleared_at_s is not None else now_s
    return (
        fault.id,
        fault.kind,
        fault.target,
        fault.state,
        _since(fault, fault.detected_at_s),
        _since(fault, fault.mitigated_at_s),
        _since(fault, fault.recovered_at_s),
        fmt_seconds(end - fault.injected_at_s),
    )


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
    """See the module docstring."""

    DEFAULT_CSS = """
    FaultsPanel { height: auto; max-height: 9; padding-left: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_cursor=False, cell_padding=0)
        self._cells: dict[str, tuple[str, ...]] = {}
        self._order: list[str] = []

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def show(self, snap: Snapshot) -> None:
        """Bring the rows in line with the snapshot's faults."""
        faults = faults_to_show(snap)
        rows = {f.id: fault_row(f, snap.sim_time_s) for f in faults}
        for fid in [k for k in self._cells if k not in rows]:
            self.remove_row(fid)
            del self._cells[fid]
        keys = [k for k, _, _ in COLUMNS]
        for fid, row in rows.items():
            old = self._cells.get(fid)
            if old is None:
                self.add_row(*(self._cell(k, v) for k, v in zip(keys, row, strict=True)), key=fid)
            elif old != row:
                for k, a, b in zip(keys, old, row, strict=True):
                    if a != b:
                        self.update_cell(fid, k, self._cell(k, b))
            self._cells[fid] = row
        order = list(rows)
        if order != self._order:
            rank = {fid: i for i, fid in enumerate(order)}
            self.sort("id", key=lambda cell: rank[cell.plain])
            self._order = order

    @staticmethod
    def _cell(column: str, value: str) -> Text:
        if column == "state":
            return Text(value, style=STATE_STYLES.get(value, ""))
        return Text(value)
