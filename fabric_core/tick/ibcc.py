"""InfiniBand-style congestion control on the credit fabric (an option: ``ib_congestion_control``).

Without a congestion-control loop, credit back-pressure lets one hot receiver
stall every link whose lane feeds it: congestion trees (the back-pressure test
shows them). IB's answer (IBTA Vol. 1, Annex A10; configured by OpenSM's
congestion-control manager) is the loop modelled here, in the fluid model:

* **FECN.** A switch marks the packets leaving a port whose egress queue (the
  bytes at the switch waiting for that link and lane, whichever ingress buffer
  holds them) is past a threshold, one in ``marking_rate + 1`` of them. The mark
  is a bit: a packet marked at two hot ports carries one.
* **BECN.** The receiver returns each mark to the sender at once (its return
  delay is not modelled).
* **CCT.** Each BECN raises the sender's congestion-control table index by
  ``ccti_increase`` (up to ``ccti_limit``); a timer lowers it by one every
  ``ccti_timer_s``. The index sets an inter-packet delay, here linear in it:
  the sender injects at ``line / (1 + index × ipd_step)``.

The same numpy code serves both solvers (it is not part of the solve); the
counters reuse the ECN ones: FECN marks as ``ecn_marked_packets_total`` on the
link they were marked on, BECNs as ``cnp_handled_total`` on the sender's link.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.host import FlowControlHost
from fabric_core.tick.pfc import egress_bytes
from fabric_core.tick.step import EntryIndex, sum_by


@dataclass
class IbCongestionControl:
    """Per flow slot: the sender's CCT index and its timer (grows with the flow table)."""

    ccti: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    since_timer_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    becns_total: float = 0.0

    def grow(self, n: int) -> None:
        """Make room for ``n`` flow slots."""
        pad = n - self.ccti.size
        if pad > 0:
            self.ccti = np.r_[self.ccti, np.zeros(pad)]
            self.since_timer_s = np.r_[self.since_timer_s, np.zeros(pad)]

    def start(self, capacity: int, slots: NDArray[np.intp]) -> None:
        """New flows start unthrottled (index 0)."""
        self.grow(capacity)
        self.ccti[slots] = 0.0
        self.since_timer_s[slots] = 0.0

    def limits(
        self, f: FlowControlHost, idx: EntryIndex, limit: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Each entry's cap with the senders paced by their CCT index (``limit``: the caps
        so far, None for none)."""
        self.grow(f.flows.capacity)
        p = f.profile
        out = np.full(idx.size, np.inf) if limit is None else limit.copy()
        heads = idx.heads
        line = f.topo.links.bandwidth_Bps[idx.link[heads]]
        paced = line / (1 + self.ccti[idx.flow[heads]] * p.ibcc_ipd_step)
        out[heads] = np.minimum(out[heads], paced)
        return out

    def after_tick(
        self,
        f: FlowControlHost,
        idx: EntryIndex,
        rate: NDArray[np.float64],
        new_backlog: NDArray[np.float64],
        dt: float,
    ) -> None:
        """FECN marks by the egress queues after the tick, BECNs to the senders, their CCT
        index up by the BECNs and down by the timer."""
        p = f.profile
        L = len(f.topo.links)
        nq = L * f.n_vls
        egress = egress_bytes(idx, new_backlog, nq)
        at_switch = idx.prev_pad < idx.size
        hot = at_switch & (egress[idx.queue] > p.ibcc_threshold_bytes)
        share = 1 / (p.ibcc_marking_rate + 1)  # of a hot port's packets, marked
        packets = rate * dt / p.mtu_bytes
        c = f.link_book.counters
        c["ecn_marked_packets_total"] += sum_by(idx.link, np.where(hot, packets * share, 0.0), L)
        # a packet leaves the fabric marked unless no hot port on its path marked it
        hot_hops = sum_by(idx.flow, hot.astype(np.float64), f.flows.capacity)
        heads = idx.heads
        flows = idx.flow[heads]
        got = packets[heads] * (1 - (1 - share) ** hot_hops[flows])  # BECNs
        c["cnp_handled_total"] += sum_by(idx.link[heads], got, L)
        self.becns_total += float(got.sum())
        since = self.since_timer_s[flows] + dt
        ticks = np.floor(since / p.ibcc_ccti_timer_s)
        ccti = self.ccti[flows] + p.ibcc_ccti_increase * got
        self.ccti[flows] = np.clip(ccti - ticks, 0.0, p.ibcc_ccti_limit)
        self.since_timer_s[flows] = since - ticks * p.ibcc_ccti_timer_s
