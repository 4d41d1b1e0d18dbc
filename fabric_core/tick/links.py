"""The links' state from one tick to the next: buffers, rates, what routing knows is down,
and the counters.

Per-buffer arrays are indexed ``link * lanes + lane`` (the downstream ingress buffer of a
link, one per virtual lane or priority); per-link arrays by link. ``Fabric`` owns one
``LinkBook`` (as it owns a ``FlowTable`` and a ``FaultBook``) and the tick writes it; the subsystems that need it are handed it (or a
protocol that names it, ``tick.host``), and snapshots copy from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.tables import LinkTable
from fabric_core.tick.lazy import LazyModule

if TYPE_CHECKING:
    from fabric_core.tick.kernels import departure as departure_kernels
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    departure_kernels = LazyModule("fabric_core.tick.kernels.departure")

F64 = NDArray[np.float64]
#: A buffer's departure rate comes from these, per buffer: the last tick's drain, the
#: measurement's cycle under way (seconds) and its average (``LinkBook.departures``)
Departures = tuple[F64, F64, F64]
#: ``LinkBook.credit_loop_s`` where there is no credit loop
_NO_LOOP: F64 = np.zeros(0)

#: The per-link counters, cumulative since the start of the run (``LinkBook.counters``;
#: the snapshot's ``LinkBook`` fields of the same names).
COUNTERS = (
    "tx_bytes_total",
    "tx_packets_total",
    "transmit_wait_seconds_total",
    "pause_frames_total",
    "pause_seconds_total",
    "ecn_marked_packets_total",
    "cnp_handled_total",
    "discards_bytes_total",
    "retransmitted_bytes_total",
    "link_downed_total",
    "link_error_recovery_total",
    "symbol_errors_total",
)


def credit_loop_delay(links: LinkTable, n_vls: int, forwarding_s: float) -> F64:
    """Each buffer's credit loop's one-way delay: its link's propagation delay ``t`` and
    half the switch's forwarding time ``s``.

    A byte's credit is out from when its sender spends it until it comes back: over the
    cable (``t``), through the switch's pipeline, which holds it at least ``s`` before it
    can leave (cut-through: its header is looked up and the crossbar scheduled), and back
    over the cable (``t``). A round trip of ``2t + s``, so in a steady state the loop
    holds ``x·(t + s) + y·t`` for an inflow ``x`` and a drain ``y``. The loop is kept as
    ``(x + y)·t'`` with ``t' = t + s/2`` (``kernels.solve.credit_room``): the same round
    trip and the same bytes wherever ``x = y``, and ``(x - y)·s/2`` off while a buffer
    fills or drains. (A buffer into an endpoint has no loop: the NIC sinks at line
    rate.)"""
    return np.repeat(links.prop_delay_s + 0.5 * forwarding_s, n_vls).astype(np.float64)


@dataclass
class LinkBook:
    """Every link's and buffer's state at the end of the last tick (the snapshot's
    ``LinkState`` is a frozen view of it)."""

    #: per buffer: its size (the credits of a credit link, the PFC limit on RoCE)
    buffer_bytes: F64
    #: per buffer: the one-way delay of its credit loop, s (``credit_loop_delay``): the
    #: propagation delay of the link that feeds it, over which the bytes come in and their
    #: credits go back, and half the switch's forwarding time, which its bytes spend in it
    #: before they can leave
    credit_delay: F64
    #: per buffer (credit fabric): the bytes its credit loop holds, on the cable, in the
    #: switch's forwarding and in credits on their way back, as of ``loop_at_s``
    #: (``kernels.solve.credit_room``)
    loop_bytes: F64
    loop_at_s: F64
    #: per buffer: what the current tick adds to its loop per byte/s in and out, s
    loop_share_s: F64
    #: per buffer: the bytes it holds
    occupancy: F64
    #: per buffer: the rate it drained at in the last tick, B/s
    buffer_drain: F64
    #: per buffer: the departure measurement's cycle under way (bytes, seconds) and the
    #: average of the cycles done (``kernels.departure``; a buffer's departure rate is
    #: ``departure_rates`` of ``departures``)
    dq_bytes: F64
    dq_s: F64
    dq_avg_Bps: F64
    #: the buffers with a departure cycle under way (``dq_s`` > 0), and scratch for the
    #: measurement (all False between ticks)
    dq_open: NDArray[np.intp]
    dq_seen: NDArray[np.bool_]
    #: per link: the rate it carried in the last tick, B/s
    link_rate: F64
    #: per link: down, and known to routing (it avoids it); changed by ``set_known_down``
    known_down: NDArray[np.bool_]
    #: per link: credit-starved (credit fabric) or PFC-paused (RoCE) in the last tick
    paused: NDArray[np.bool_]
    #: per link: the ``COUNTERS``
    counters: dict[str, F64]
    #: PFC per priority, (links, lanes): pause frames received and time paused
    pause_vl: dict[str, F64]
    #: the links ``known_down`` marks, ascending: what routing reads when it starts flows
    #: (kept here, so that a start does not look over every link for them)
    known_down_ids: NDArray[np.intp] = field(default_factory=lambda: np.zeros(0, np.intp))

    @classmethod
    def empty(cls, links: LinkTable, n_vls: int, forwarding_s: float) -> LinkBook:
        """Empty buffers of the links' sizes, nothing carried, every counter at 0; the
        switches forward in ``forwarding_s`` (``credit_loop_delay``)."""
        n, nq = len(links), len(links) * n_vls
        return cls(
            buffer_bytes=np.repeat(links.buffer_bytes, n_vls).astype(np.float64),
            credit_delay=credit_loop_delay(links, n_vls, forwarding_s),
            loop_bytes=np.zeros(nq),
            loop_at_s=np.zeros(nq),
            loop_share_s=np.zeros(nq),
            occupancy=np.zeros(nq),
            buffer_drain=np.zeros(nq),
            dq_bytes=np.zeros(nq),
            dq_s=np.zeros(nq),
            dq_avg_Bps=np.zeros(nq),
            dq_open=np.zeros(0, dtype=np.intp),
            dq_seen=np.zeros(nq, dtype=bool),
            link_rate=np.zeros(n),
            known_down=np.zeros(n, dtype=bool),
            paused=np.zeros(n, dtype=bool),
            counters={k: np.zeros(n) for k in COUNTERS},
            pause_vl={
                "pause_frames_vl_total": np.zeros((n, n_vls)),
                "pause_seconds_vl_total": np.zeros((n, n_vls)),
            },
        )

    def credit_loop_s(self, credits: bool) -> F64:
        """``loop_share_s`` where the fabric's flow control is by credits, else none (an
        empty array: PFC has no credit loop, its headroom takes the round trip)."""
        return self.loop_share_s if credits else _NO_LOOP

    def loop_bytes_at(self, now: float) -> F64:
        """Every buffer's credit loop's bytes at ``now`` (each decays from when it was
        last worked out, ``kernels.solve.credit_room``)."""
        t = self.credit_delay
        elapsed = np.maximum(now - self.loop_at_s, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            decay = np.where(t > 0, np.exp(-elapsed / np.where(t > 0, 2.0 * t, 1.0)), 0.0)
        return self.loop_bytes * decay

    def set_known_down(self, down: NDArray[np.bool_]) -> None:
        """Routing knows the links ``down`` marks are down, and no others (``down`` may be
        ``known_down`` itself, changed in place: the ids are found again from it)."""
        if down is not self.known_down:
            self.known_down[:] = down
        self.known_down_ids = np.flatnonzero(self.known_down)

    def measure_departures(
        self, drain: F64, occupancy: F64, dt: float, holding: NDArray[np.intp]
    ) -> None:
        """One tick of each buffer's PIE-style departure-rate measurement
        (``kernels.departure``), at the buffers it can change: those with a cycle under
        way and ``holding``, the buffers that hold bytes this tick (repeats allowed)."""
        cycles = np.empty(self.dq_open.size + holding.size, dtype=np.intp)
        n = departure_kernels.update_departures_at(
            drain,
            occupancy,
            dt,
            holding,
            self.dq_open,
            self.dq_seen,
            self.dq_bytes,
            self.dq_s,
            self.dq_avg_Bps,
            cycles,
        )
        self.dq_open = cycles[:n]

    def departures(self) -> Departures:
        """What a buffer's departure rate is worked out from (``departure_rates``)."""
        return self.buffer_drain, self.dq_s, self.dq_avg_Bps


def departure_rates(departures: Departures) -> F64:
    """Per buffer: the rate its queued bytes leave at, for a new message's FIFO wait
    (``kernels.departure.departure_rate``: a measurement over drain cycles, not one
    tick's drain, which a pause can make all but 0)."""
    return departure_kernels.departure_rates(*departures)
