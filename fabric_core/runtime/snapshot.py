"""Immutable snapshots: what every consumer (console, exporters, reports) reads.

A snapshot is published after a tick and never changes afterwards: arrays are
copies with ``writeable=False``. Static descriptions (node and link tables) are
shared between the snapshots of a run and change only when the fabric is rebuilt.

Counters (``*_total``) are cumulative since the start of the run and never
decrease; gauges describe the state at the end of the tick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from fabric_core.faults.book import FaultView
from fabric_core.net.tables import LinkStatus, LinkTable, NodeTable
from fabric_core.tick.histogram import HistogramView
from fabric_core.workloads.base import Workload

#: The static tables and the fault view live with what makes them (``net``, ``faults``);
#: a consumer finds every type of a snapshot here.
__all__ = [
    "Event",
    "FaultView",
    "LinkState",
    "LinkStatus",
    "LinkTable",
    "NodeTable",
    "Snapshot",
    "Totals",
    "WorkloadView",
    "frozen",
    "workload_views",
]


@dataclass(frozen=True, slots=True)
class LinkState:
    """Per-link arrays at the end of a tick (all indexed like ``LinkTable``)."""

    status: NDArray[np.int8]  # LinkStatus values
    utilisation: NDArray[np.float64]  # carried rate / bandwidth over the last tick, 0..1
    queue_bytes: NDArray[np.float64]  # bytes waiting at the downstream ingress (all VLs)
    queue_vl_bytes: NDArray[np.float64]  # shape (links, VLs)
    credits_bytes: NDArray[np.float64]  # credits held: free buffer less the loop's, or PFC headroom
    paused: NDArray[np.bool_]  # credit-starved (native) or PFC-paused (RoCE) in the last tick
    # counters, cumulative since the start of the run
    tx_bytes_total: NDArray[np.float64]
    tx_packets_total: NDArray[np.float64]
    transmit_wait_seconds_total: NDArray[np.float64]  # data waiting, no credit / paused
    pause_frames_total: NDArray[np.float64]  # PFC pause frames received by the sender
    pause_seconds_total: NDArray[np.float64]
    ecn_marked_packets_total: NDArray[np.float64]
    cnp_handled_total: NDArray[np.float64]  # CNPs received by the link's senders (DCQCN cuts)
    # PFC per priority (= virtual lane), shape (links, VLs); all zero on a credit fabric
    pause_frames_vl_total: NDArray[np.float64]
    pause_seconds_vl_total: NDArray[np.float64]
    discards_bytes_total: NDArray[np.float64]  # dropped (buffer overflow, link down)
    # sent again, counted when and where sent: link-level retry on the link, go-back-N
    # on the flow's first link (its source resends)
    retransmitted_bytes_total: NDArray[np.float64]
    link_downed_total: NDArray[np.float64]
    link_error_recovery_total: NDArray[np.float64]
    symbol_errors_total: NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Event:
    """Something an operator should see in the event log."""

    time_s: float  # simulated time
    severity: str  # "info" | "warning" | "error"
    kind: str  # "fault_injected", "fault_detected", "rerouted", "deadlock", ...
    target: str
    message: str


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """A running workload: its KPIs (floats in base units) and latency histograms."""

    name: str
    kind: str  # "bulk", "alltoall", "incast", "pd", "training", ...
    traffic_class: str
    kpis: Mapping[str, float]  # e.g. {"gpu_utilisation": 0.93, "ttft_p99_seconds": 0.21}
    histograms: Mapping[str, HistogramView]  # e.g. {"ttft_seconds": ..., "alltoall_seconds": ...}


@dataclass(frozen=True, slots=True)
class Totals:
    """Fabric-wide figures for the header and summaries."""

    injected_bytes_total: float
    delivered_bytes_total: float
    #: bytes of flows cancelled before they were sent (a cleared incast's): they leave
    #: the balance injected = delivered + in flight + cancelled, the counters stay counters
    cancelled_bytes_total: float
    dropped_bytes_total: float
    in_flight_bytes: float
    throughput_Bps: float  # delivered over the last reporting window
    active_flows: int
    completed_flows_total: int
    #: flows waiting for their RC local ACK timeout to resend (RoCE: a dead link that
    #: routing did not know of swallowed their bytes); they count in ``active_flows``
    waiting_flows: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a consumer needs about the fabric at the end of one tick."""

    cluster: str
    scenario: str
    profile: str  # "native-400g", "roce-400g", ...
    flow_control: str  # "credit" | "pfc"
    seed: int
    tick: int
    sim_time_s: float
    dt_s: float
    wall_time_s: float  # since the engine started
    target_speed: float  # simulated seconds per wall second asked for (0 = flat out)
    measured_speed: float  # simulated seconds per wall second achieved recently
    running: bool  # False while paused
    nodes: NodeTable
    links: LinkTable
    link_state: LinkState
    totals: Totals
    latency: Mapping[str, HistogramView]  # per traffic class, cumulative since start
    workloads: Mapping[str, WorkloadView]
    faults: tuple[FaultView, ...]
    events: tuple[Event, ...]  # most recent last, bounded
    params: Mapping[str, float]  # live-tunable profile parameters and their values

    @property
    def active_faults(self) -> tuple[FaultView, ...]:
        """Faults not yet cleared."""
        return tuple(f for f in self.faults if f.cleared_at_s is None)


def workload_views(workloads: Sequence[Workload], now_s: float) -> dict[str, WorkloadView]:
    """Each workload's KPIs and histograms now, by name, for a snapshot."""
    return {
        wl.name: WorkloadView(
            name=wl.name,
            kind=wl.kind,
            traffic_class=wl.traffic_class,
            kpis=dict(wl.kpis(now_s)),
            histograms=wl.frozen_histograms(),
        )
        for wl in workloads
    }


_A = TypeVar("_A", bound=np.generic)


def frozen(array: NDArray[_A]) -> NDArray[_A]:
    """A read-only copy of ``array`` for a snapshot."""
    out: NDArray[_A] = np.array(array, copy=True)
    out.flags.writeable = False
    return out
