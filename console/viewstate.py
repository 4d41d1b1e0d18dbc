"""What the console derives from the snapshots it has seen (shared by main and compare views).

A ``FabricView`` takes snapshots one by one (``ingest``) and keeps what needs
more than one snapshot: counter rates, windowed latency, the event log, the
histories of watched links, and the severities of links and nodes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from console.eventlog import EventLog
from console.latency import ClassLatency, LatencyWindow
from console.linkhistory import LinkHistory
from console.linkview import (
    LinkFilter,
    LinkRates,
    RateTracker,
    link_severity,
    node_severity,
    stalled_word,
    top_links,
)
from console.widgets.links_table import row_texts
from fabric_core.runtime.snapshot import LinkStatus, Snapshot


class FabricView:
    """See the module docstring."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self._rates = RateTracker()
        self.rates: LinkRates = LinkRates.zeros(0)
        self._latency = LatencyWindow()
        self.latency: dict[str, ClassLatency] = {}
        self.events = EventLog()
        self.history = LinkHistory()
        self.link_sev: NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self.node_sev: NDArray[np.int8] = np.zeros(0, dtype=np.int8)

    def ingest(self, snap: Snapshot | None, watched: list[str] | tuple[str, ...] = ()) -> bool:
        """Take ``snap`` as the current view; False if there is nothing new."""
        if snap is None or snap is self.snapshot:
            return False
        self.snapshot = snap
        self.rates = self._rates.update(snap)
        self.latency = self._latency.update(snap)
        self.events.feed(snap.events)
        self.link_sev = link_severity(snap)
        self.node_sev = node_severity(snap, self.link_sev)
        self.history.sample(snap, watched)
        return True

    def table_rows(
        self, *, column: str, reverse: bool, limit: int, link_filter: LinkFilter
    ) -> tuple[list[tuple[str, ...]], int]:
        """Rows of the links table and how many links pass the filter."""
        snap = self.snapshot
        if snap is None:
            return [], 0
        keep = link_filter.mask(snap)
        matching = len(snap.links) if keep is None else int(keep.sum())
        idx = top_links(snap, self.rates, column=column, reverse=reverse, limit=limit, keep=keep)
        return row_texts(snap, self.rates, idx), matching

    def link_counts(self) -> dict[str, int]:
        """How many links are down, degraded, starved/paused (for summaries: the key is
        ``stalled_word`` of the fabric, "starved" on credit, "paused" on PFC)."""
        snap = self.snapshot
        if snap is None:
            return {}
        ls = snap.link_state
        return {
            "links": len(snap.links),
            "down": int((ls.status == LinkStatus.DOWN).sum()),
            "degraded": int((ls.status == LinkStatus.DEGRADED).sum()),
            stalled_word(snap.flow_control): int(ls.paused.sum()),
        }
