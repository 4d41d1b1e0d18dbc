"""RoCEv2 flow control in the tick: what PFC and DCQCN allow, and what follows a tick.

The fabric asks ``limits`` before solving a tick's rates (how long each queue's
sender may send, how many bytes each queue may still take, each sender's DCQCN
rate) and calls ``after_tick`` once bytes have moved (drops past the buffer with
go-back-N, pause transitions and counters, ECN marks and CNPs, DCQCN updates,
the deadlock watch). The rules themselves are in ``fabric_core.tick.pfc``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.net.topology import TIER_ENDPOINT
from fabric_core.tick.host import FlowControlHost
from fabric_core.tick.lazy import LazyModule
from fabric_core.tick.pfc import (
    Dcqcn,
    PauseTick,
    PfcQueues,
    ecn_probability,
    ecn_thresholds,
    egress_bytes,
    find_deadlock,
    flow_queueing_delay,
    hol_send_fraction,
    one_cycle,
    pause_accounting,
    pause_limits,
    swift_update,
    update_pause,
)
from fabric_core.tick.step import ENDLESS_ROOM_BYTES, EntryIndex, Solution, sum_by

if TYPE_CHECKING:
    from fabric_core.tick.kernels import pfc as pfc_kernels
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    pfc_kernels = LazyModule("fabric_core.tick.kernels.pfc")


def go_back_n(
    idx: EntryIndex,
    share: NDArray[np.float64],
    new_backlog: NDArray[np.float64],
    n_slots: int,
) -> NDArray[np.float64]:
    """What each flow slot resends after the tick's drops (``share``, per entry): go-back-N
    from its first byte lost (IBTA RC: the receiver NAKs the first missing packet and
    discards every later one; the sender resends from there).

    A flow's bytes keep their order along its path, so its first byte lost is the one
    dropped at its furthest hop. What is past that hop was sent before it and arrives;
    what the flow lost and what it has between its source and that hop (sent after it,
    which the receiver would discard) is resent: those bytes leave ``new_backlog`` (in
    place), and the caller puts them back at the source. The tick's drop is taken from
    the tail of its arrivals, so what the full queue did admit was sent before it."""
    hit = share > 0
    drop_hop = np.full(n_slots, -1, dtype=np.intp)
    np.maximum.at(drop_hop, idx.flow[hit], idx.hop[hit])
    behind = (idx.hop > 0) & (idx.hop < drop_hop[idx.flow])
    resent = sum_by(idx.flow, share, n_slots)
    resent += sum_by(idx.flow, np.where(behind, new_backlog, 0.0), n_slots)
    new_backlog[behind] = 0.0
    return resent


class RoceFlowControl:
    """PFC queues, DCQCN senders and the deadlock watch of one RoCE fabric."""

    def __init__(self, fabric: FlowControlHost, compiled: bool = False) -> None:
        topo = fabric.topo
        self.pfc = PfcQueues.build(
            topo.links, fabric.profile, fabric.n_vls, topo.nodes.tier != TIER_ENDPOINT
        )
        self.dcqcn = Dcqcn.empty(fabric.flows.capacity)
        self.deadlocks = 0
        self._deadlock_set: frozenset[int] = frozenset()
        self._pause: PauseTick | None = None
        #: by the kernels of ``fabric_core.tick.kernels.pfc`` (else the numpy reference here)
        self.compiled = compiled
        self._packed: tuple[Profile, NDArray[np.float64]] | None = None

    def dcqcn_params(self, p: Profile) -> NDArray[np.float64]:
        """The profile's DCQCN parameters as the kernel takes them, packed again only when
        the profile changes (a ``set`` command makes a new one)."""
        if self._packed is None or self._packed[0] is not p:
            self._packed = (p, pfc_kernels.dcqcn_params(p))
        return self._packed[1]

    def start_flows(
        self, capacity: int, slots: NDArray[np.intp], line_rate: NDArray[np.float64]
    ) -> None:
        """New flows' senders start at line rate (``capacity``: the flow table's slots)."""
        self.dcqcn.grow(capacity)
        self.dcqcn.start(slots, line_rate)

    def limits(
        self,
        f: FlowControlHost,
        idx: EntryIndex,
        backlog: NDArray[np.float64],
        cap: NDArray[np.float64],
        stormed: NDArray[np.bool_],
        now: float,
        dt: float,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(most each entry may carry this tick, bytes each queue may still take)."""
        self.dcqcn.grow(f.flows.capacity)
        self._share_buffer(f.link_book.occupancy)  # the shared buffer's thresholds for this tick
        if self.compiled:
            return self._limits_compiled(f, idx, backlog, cap, stormed, now, dt)
        link_cap = np.repeat(cap, f.n_vls)
        pt = pause_limits(
            self.pfc, f.link_book.occupancy, f.link_book.buffer_drain, link_cap, stormed, now, dt
        )
        self._pause = pt
        entry_cap = hol_send_fraction(idx, backlog, pt.send_fraction) * cap[idx.link]
        heads = idx.heads  # DCQCN paces the sender
        entry_cap[heads] = np.minimum(entry_cap[heads], self.dcqcn.rc[idx.flow[heads]])
        room = np.where(np.repeat(f.to_endpoint, f.n_vls), ENDLESS_ROOM_BYTES, pt.room_bytes)
        return entry_cap, room

    def _share_buffer(self, occupancy: NDArray[np.float64]) -> None:
        q = self.pfc
        if q.alpha == 0.0:  # static thresholds
            return
        if self.compiled:
            pfc_kernels.share_buffer(
                q.switch_of, occupancy, q.shared_pool, q.alpha, q.mtu, q.headroom, q.xoff,
                q.xon, q.buffer,
            )  # fmt: skip
        else:
            q.share(occupancy)

    def after_tick(
        self,
        f: FlowControlHost,
        idx: EntryIndex,
        rate: NDArray[np.float64],
        arrival: NDArray[np.float64],
        new_backlog: NDArray[np.float64],
        inflow: NDArray[np.float64],
        sol: Solution,
        stormed: NDArray[np.bool_],
        now: float,
        dt: float,
    ) -> None:
        """Drops past the buffer (go-back-N), pause and ECN counters, DCQCN, deadlock watch.

        ``arrival`` is each entry's arrival rate, ``inflow`` each queue's (before drops).
        """
        pt = self._pause
        assert pt is not None, "limits() comes first in a tick"
        if self.compiled:
            self._after_tick_compiled(
                f, idx, rate, arrival, new_backlog, inflow, sol, stormed, now, dt
            )
            return
        q = self.pfc
        dc = self.dcqcn
        fl = f.flows
        p = f.profile
        L = len(f.topo.links)
        V = f.n_vls
        c = f.link_book.counters
        nq = L * V
        # 1. overflow: what does not fit is dropped from this tick's arrivals
        excess = np.maximum(f.link_book.occupancy - q.buffer, 0.0)
        # the queue each entry's bytes wait in (the padding queue at the source NIC, where
        # nothing arrives)
        up = idx.drains_pad
        if (excess > 1e-9).any():
            arrived = arrival * dt
            total_arrived = sum_by(up, arrived, nq + 1)[up]
            # only what arrives is dropped (admission at enqueue): a threshold that fell
            # below what a queue already held drops nothing it had taken
            share = np.divide(
                np.minimum(np.append(excess, 0.0)[up], total_arrived) * arrived,
                total_arrived,
                out=np.zeros(idx.size),
                where=total_arrived > 0,
            )
            share = np.minimum(share, new_backlog)
            new_backlog -= share
            resent = go_back_n(idx, share, new_backlog, fl.capacity)
            heads = idx.heads
            new_backlog[heads] += resent[idx.flow[heads]]
            fl.backlog.reshape(-1)[idx.pos] = new_backlog
            c["discards_bytes_total"] += sum_by(up // V, share, L + 1)[:L]
            # resent when the source sends them (``kernels.move.count_resends``)
            fl.resend_bytes[idx.flow[heads]] += resent[idx.flow[heads]]
            f.dropped_bytes += float(share.sum())
            f.link_book.occupancy = sum_by(up, new_backlog, nq + 1)[:nq]
        # 2. pause time and frames from this tick's rates, then the transitions (frames are
        # received by the link's sender)
        stopped_q, frames_q = pause_accounting(
            q, pt.send_fraction, sol.alpha, inflow, f.link_book.buffer_drain, p, dt
        )
        hit = (sol.alpha < 1 - 1e-9) & ~pt.ignoring
        net = inflow - f.link_book.buffer_drain
        fired = update_pause(q, f.link_book.occupancy, net, hit, stormed, p, now, dt)
        stopped = stopped_q.reshape(L, V)
        frames = frames_q.reshape(L, V)
        c["pause_frames_total"] += frames.sum(axis=1)
        c["pause_seconds_total"] += stopped.sum(axis=1) * dt
        f.link_book.pause_vl["pause_frames_vl_total"] += frames
        f.link_book.pause_vl["pause_seconds_vl_total"] += stopped * dt
        c["transmit_wait_seconds_total"] += stopped.max(axis=1) * dt
        f.link_book.paused = np.asarray(q.paused.reshape(L, V).any(axis=1))
        _report_watchdog(f, fired)
        # 3. ECN: packets are marked by the egress queue of the port they leave (bytes
        # leaving a NIC are not marked)
        kmin, kmax = ecn_thresholds(q.line_rate_Bps, p)
        egress = egress_bytes(idx, new_backlog, nq)
        mark = ecn_probability(egress, kmin, kmax, p.ecn_pmax)
        p_entry = np.where(idx.prev_pad < idx.size, mark[idx.queue], 0.0)
        c["ecn_marked_packets_total"] += sum_by(idx.link, rate * dt / p.mtu_bytes * p_entry, L)
        heads = idx.heads
        flows = idx.flow[heads]
        sent = rate[heads] * dt
        line = f.topo.links.bandwidth_Bps[idx.link[heads]]
        # 4. the senders' congestion control: DCQCN reacts to the marks, Swift to the delay
        if p.congestion_control == "dcqcn":
            unmarked = sum_by(idx.flow, np.log1p(-np.minimum(p_entry, 1 - 1e-12)), fl.capacity)
            u = f.rng.random(flows.size)
            cuts = dc.update(flows, unmarked[flows], sent, line, u, p, dt)
            np.add.at(c["cnp_handled_total"], idx.link[heads], cuts)
        elif p.congestion_control == "swift":
            delay = flow_queueing_delay(idx, egress, q.line_rate_Bps, fl.capacity)[flows]
            swift_update(dc, flows, delay, 2 * fl.fixed_latency_s[flows], line, p, dt)
        # 5. deadlock: a cycle of paused queues that cannot drain
        self._watch_deadlock(f, idx, new_backlog, bool(((pt.send_fraction <= 0) & q.paused).any()))

    def _watch_deadlock(
        self,
        f: FlowControlHost,
        idx: EntryIndex,
        new_backlog: NDArray[np.float64],
        any_blocked: bool,
    ) -> None:
        """Report a new cycle of paused queues that cannot drain (Hu et al., HotNets 2016)."""
        q = self.pfc
        V = f.n_vls
        if any_blocked:
            assert self._pause is not None
            blocked = (self._pause.send_fraction <= 0) & q.paused
            stuck = find_deadlock(idx, new_backlog, f.link_book.occupancy, blocked)
            key = frozenset(stuck.tolist())
            if stuck.size and key != self._deadlock_set:
                cycle = one_cycle(idx, stuck)
                names = [f.topo.links.name[qi // V] for qi in cycle]
                self.deadlocks += 1
                f.emit(
                    "error",
                    "deadlock",
                    names[0] if names else "",
                    "PFC deadlock: cyclic buffer dependency " + " -> ".join(names),
                )
            self._deadlock_set = key
        else:
            self._deadlock_set = frozenset()

    # ---------------------------------------------------------------- compiled
    def _limits_compiled(
        self,
        f: FlowControlHost,
        idx: EntryIndex,
        backlog: NDArray[np.float64],
        cap: NDArray[np.float64],
        stormed: NDArray[np.bool_],
        now: float,
        dt: float,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        q = self.pfc
        send, room, ignoring = pfc_kernels.pfc_limits(
            q.xoff, q.xon, q.reaction_s, q.paused, q.paused_since_s, q.resume_s,
            q.watchdog_until_s, f.link_book.occupancy,
            f.link_book.buffer_drain, cap, stormed, f.to_endpoint, now, dt,
        )  # fmt: skip
        self._pause = PauseTick(send_fraction=send, room_bytes=room, ignoring=ignoring)
        entry_cap = pfc_kernels.entry_caps(
            send, idx.queue, idx.drains_pad, idx.link, idx.flow, idx.heads, backlog, cap,
            self.dcqcn.rc,
        )  # fmt: skip
        return entry_cap, room

    def _after_tick_compiled(
        self,
        f: FlowControlHost,
        idx: EntryIndex,
        rate: NDArray[np.float64],
        arrival: NDArray[np.float64],
        new_backlog: NDArray[np.float64],
        inflow: NDArray[np.float64],
        sol: Solution,
        stormed: NDArray[np.bool_],
        now: float,
        dt: float,
    ) -> None:
        pt = self._pause
        assert pt is not None
        q, dc, p, c = self.pfc, self.dcqcn, f.profile, f.link_book.counters
        cc = CC_MODES[p.congestion_control]
        # the reference draws these for the CNPs (DCQCN only)
        rand = f.rng.random(idx.heads.size) if cc == CC_MODES["dcqcn"] else np.zeros(0)
        dropped, occupancy, fired, any_blocked, n_cnp = pfc_kernels.pfc_after_tick(
            rate, arrival, new_backlog, sol.alpha, pt.send_fraction, pt.ignoring, stormed,
            rand, idx.pos, idx.hop, idx.flow, idx.link, idx.queue, idx.drains_pad, idx.heads,
            inflow, f.link_book.buffer_drain, f.flows.backlog.reshape(-1), f.link_book.occupancy,
            f.topo.links.bandwidth_Bps, f.flows.live_end, f.flows.fixed_latency_s,
            q.buffer, q.xoff, q.xon, q.reaction_s, q.paused, q.paused_since_s, q.resume_s,
            q.watchdog_until_s, q.frames_owed, q.frames_sent,
            c["discards_bytes_total"], f.flows.resend_bytes, c["pause_frames_total"],
            c["pause_seconds_total"], f.link_book.pause_vl["pause_frames_vl_total"].reshape(-1),
            f.link_book.pause_vl["pause_seconds_vl_total"].reshape(-1), c["transmit_wait_seconds_total"],
            c["ecn_marked_packets_total"], c["cnp_handled_total"], f.link_book.paused,
            dc.rc, dc.rt, dc.alpha, dc.since_cut_s, dc.since_alpha_s, dc.since_dec_s,
            dc.since_inc_s, dc.stage, dc.cwnd,
            float(p.mtu_bytes), p.ecn_kmin_s, p.ecn_kmax_s, p.ecn_pmax, p.pfc_refresh_fraction,
            p.pfc_watchdog_s, p.pfc_watchdog_recovery_s, self.dcqcn_params(p), cc, p.swift_target_delay_s,
            p.swift_ai_packets, p.swift_beta, p.swift_max_mdf, now, dt,
        )  # fmt: skip
        f.dropped_bytes += dropped
        f.link_book.occupancy = occupancy
        dc.cnps_total += n_cnp
        self.report_after_tick(f, idx, new_backlog, fired, any_blocked)

    def after_ticks_at_once(self, pause: PauseTick, cnps: int, cleared_watch: bool) -> None:
        """What ticks run at once in one compiled call (``runtime.uneventful``) leave: the
        last tick's pause limits, the CNPs sent, and the deadlock watch cleared when a
        tick ran whole (none of them left a paused queue's sender stopped)."""
        self._pause = pause
        self.dcqcn.cnps_total += cnps
        if cleared_watch:
            self._deadlock_set = frozenset()

    def report_after_tick(
        self,
        f: FlowControlHost,
        idx: EntryIndex,
        new_backlog: NDArray[np.float64],
        fired: NDArray[np.intp],
        any_blocked: bool,
    ) -> None:
        """The compiled tick's events: the queues whose PFC watchdog fired, and a deadlock
        among the paused queues whose senders are stopped (``any_blocked``)."""
        _report_watchdog(f, fired)
        self._watch_deadlock(f, idx, new_backlog, any_blocked)


#: ``Profile.congestion_control`` as the kernel takes it.
CC_MODES = {"none": 0, "dcqcn": 1, "swift": 2}


def _report_watchdog(f: FlowControlHost, queues: NDArray[np.intp]) -> None:
    """An event for each queue whose PFC watchdog fired this tick."""
    V = f.n_vls
    for qi in queues.tolist():
        name = f.topo.links.name[qi // V]
        f.emit(
            "warning",
            "pfc_watchdog",
            name,
            f"PFC watchdog on {name} priority {qi % V}: pause ignored, queue drops",
        )
