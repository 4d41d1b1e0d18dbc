"""The numpy reference tick: the solver of ``fabric_core.tick.step`` and the rest of a tick
(byte moves, sub-tick finish, counters, routing of new flows) behind the interface the
fabric uses, ``ReferenceTick``. ``kernels.tick.CompiledTick`` is the compiled one, the
default; ``tests/test_kernels.py`` holds the two together. ``Fabric(solver="reference")``
and ``fabtop run --solver reference`` run this one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.paths import fixed_costs, lanes
from fabric_core.net.profiles import Profile
from fabric_core.net.routing import SubFlows, link_loads, route, sprayed
from fabric_core.net.topology import Topology
from fabric_core.tick.flows import DONE_BYTES, DONE_FRACTION, RESIDUE_BYTES, FlowTable
from fabric_core.tick.histogram import HistogramRows
from fabric_core.tick.links import Departures, LinkBook, departure_rates
from fabric_core.tick.step import (
    ENDLESS_ROOM_BYTES,
    EntryIndex,
    Moved,
    RankLayout,
    Solution,
    build_index,
    finish_within_tick,
    solve,
    sum_by,
)


def move_bytes(
    idx: EntryIndex,
    sol: Solution,
    backlog: NDArray[np.float64],
    flows: FlowTable,
    n_links: int,
    n_bufs: int,
    dt: float,
) -> Moved:
    """One tick of bytes: backlogs and rates written back into the flow table, the
    last hops' bytes added to ``flows.delivered``, and the sums the next tick needs."""
    rate = sol.rate
    arrival = sol.padded[idx.prev_pad]
    new_backlog = backlog + (arrival - rate) * dt
    new_backlog[new_backlog < RESIDUE_BYTES] = 0.0
    flows.backlog.reshape(-1)[idx.pos] = new_backlog
    flows.rate.reshape(-1)[idx.pos] = rate
    got = rate[idx.last] * dt
    np.add.at(flows.delivered, idx.last_flow, got)
    lf = idx.last_flow
    remaining = flows.size[lf] - flows.delivered[lf]
    return Moved(
        new_backlog=new_backlog,
        arrival=arrival,
        link_rate=sum_by(idx.link, rate, n_links),
        # bytes in, and drained from, each switch buffer (bytes at the NIC go to the pad)
        occupancy=sum_by(idx.drains_pad, new_backlog, n_bufs + 1)[:n_bufs],
        drain=sum_by(idx.drains_pad, rate, n_bufs + 1)[:n_bufs],
        inflow=sum_by(idx.buf_pad, rate, n_bufs + 1)[:n_bufs],
        delivered_bytes=float(got.sum()),
        done=lf[remaining <= DONE_FRACTION * flows.size[lf] + DONE_BYTES],
    )


def retries_per_byte(goodput: NDArray[np.float64]) -> NDArray[np.float64]:
    """Bytes sent again per byte of new data on links of ``goodput`` under bit errors
    (``kernels.move.retries_per_byte``, elementwise)."""
    return 1 / np.maximum(goodput, 1e-12) - 1


def count_resends(
    idx: EntryIndex,
    rate: NDArray[np.float64],
    new_backlog: NDArray[np.float64],
    flows: FlowTable,
    dt: float,
    retransmitted: NDArray[np.float64],
) -> None:
    """Count go-back-N's resends when they are sent: of what each hop-0 entry sent this
    tick, up to what its flow owes a resend (``FlowTable.resend_bytes``, which goes down
    by as much, and never above what is left at the source) is added to its link's
    ``retransmitted``."""
    heads = idx.heads
    f = idx.flow[heads]
    owed = flows.resend_bytes[f]
    resent = np.minimum(owed, rate[heads] * dt)
    retransmitted += sum_by(idx.link[heads], resent, retransmitted.size)
    flows.resend_bytes[f] = np.minimum(owed - resent, new_backlog[heads])


def count_bit_error_resends(
    idx: EntryIndex,
    rate: NDArray[np.float64],
    flows: FlowTable,
    goodput: NDArray[np.float64],
    dt: float,
    retransmitted: NDArray[np.float64],
) -> None:
    """Go-back-N's resends of bit errors (RoCE), counted on the link that sends them:
    what each entry's link costs its flow this tick (its bytes × (1 / goodput − 1)) is
    added to its flow's first link's ``retransmitted``, entry by entry in entry order
    (``np.add.at``, as the compiled kernel adds them)."""
    g = goodput[idx.link]
    hit = g < 1.0
    if hit.any():
        first = flows.path[0, idx.flow[hit]]
        np.add.at(retransmitted, first, rate[hit] * dt * retries_per_byte(g[hit]))


def flow_finish_times(
    idx: EntryIndex,
    sol: Solution,
    capacity: NDArray[np.float64],
    done: NDArray[np.intp],
    n_slots: int,
    dt: float,
) -> NDArray[np.float64]:
    """When, inside the tick, each flow in ``done`` sent its last byte: its latest hop's
    ``finish_within_tick``."""
    is_done = np.zeros(n_slots, dtype=bool)
    is_done[done] = True
    finishing = is_done[idx.flow]
    t_entry = finish_within_tick(idx, sol, capacity, finishing, dt)
    fin = np.flatnonzero(finishing)
    t_flow = np.zeros(n_slots)
    np.maximum.at(t_flow, idx.flow[fin], t_entry[fin])
    return t_flow[done]


class ReferenceTick:
    """The numpy solver behind the interface the fabric uses (``kernels.tick.CompiledTick``
    is the compiled one): the reference the kernels are tested against."""

    def __init__(self, layout: RankLayout, n_vls: int, track_load: bool = True) -> None:
        self.layout = layout
        self.n_vls = n_vls
        #: adaptive routing's expected load (``CompiledTick.link_load_bytes``), kept by
        #: ``move`` where ``track_load`` (only adaptive routing reads it)
        self.link_load_bytes = np.zeros(layout.rank.size)
        self.track_load = track_load

    @staticmethod
    def flow_values(table: NDArray[np.float64], idx: EntryIndex) -> NDArray[np.float64]:
        """``table`` (a flow-table array, flat) at ``idx``'s entries."""
        return table[idx.pos]

    def link_cost(
        self,
        topo: Topology,
        occupancy: NDArray[np.float64],
        n_vls: int,
        known_down: NDArray[np.bool_],
    ) -> NDArray[np.float64]:
        """Adaptive routing's cost of each link: the queueing delay of the bytes waiting
        for it (all lanes), infinite for a link routing knows is down."""
        lanes = occupancy.reshape(-1, n_vls)
        queued = lanes[:, 0].copy()
        for v in range(1, n_vls):
            queued += lanes[:, v]
        return np.where(known_down, np.inf, queued / topo.links.bandwidth_Bps)

    def route(
        self,
        topo: Topology,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        key: NDArray[np.int64],
        adaptive: bool,
        occupancy: NDArray[np.float64],
        n_vls: int,
        known_down: NDArray[np.bool_],
        size_bytes: NDArray[np.float64] | None = None,
        down_ids: NDArray[np.intp] | None = None,
    ) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
        """Paths of new flows (``routing.route``, which walks ``table_route`` on a file
        topology) by ``link_cost``, the load in flight and, with ``size_bytes``, the
        batch's own load. (``down_ids``, the compiled tick's, is not read: the reference
        costs every link.)"""
        mode = "adaptive" if adaptive else "ecmp"
        cost = self.link_cost(topo, occupancy, n_vls, known_down)
        load = self.link_load_bytes
        return route(
            topo,
            src,
            dst,
            key,
            mode=mode,
            link_cost=cost,
            size_bytes=size_bytes,
            link_load_bytes=load,
        )

    def starts_at_once(self, topo: Topology) -> bool:
        """Never: the reference starts flows step by step (``route``,
        ``lanes_and_costs``, ``FlowTable.add``)."""
        return False

    def spray(
        self,
        topo: Topology,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        key: NDArray[np.int64],
        size: NDArray[np.float64],
        ways: int,
        mtu_bytes: float,
        occupancy: NDArray[np.float64],
        n_vls: int,
        known_down: NDArray[np.bool_],
        down_ids: NDArray[np.intp] | None = None,
    ) -> SubFlows:
        """Sub-flows of sprayed flows (``routing.sprayed``):
        (path, hops, flow of each sub-flow, sub-flows per flow, bytes per sub-flow).
        (``down_ids`` is not read, as for ``route``.)"""
        cost = self.link_cost(topo, occupancy, n_vls, known_down)
        return sprayed(topo, src, dst, key, size, ways=ways, mtu_bytes=mtu_bytes, link_cost=cost)

    def lanes_and_costs(
        self,
        topo: Topology,
        profile: Profile,
        path: NDArray[np.int32],
        hops: NDArray[np.int8],
        vl0: NDArray[np.int8],
        size: NDArray[np.float64],
        occupancy: NDArray[np.float64],
        departures: Departures,
        paused: NDArray[np.bool_],
    ) -> tuple[NDArray[np.int8], NDArray[np.float64], NDArray[np.float64]]:
        """Lane per hop, fixed latency and FIFO wait of new flows (``paths.lanes`` and
        ``paths.fixed_costs``), the wait at each buffer's departure rate
        (``LinkBook.departures``)."""
        drain = departure_rates(departures)
        vl = lanes(topo, profile.flow_control, self.n_vls, path, vl0)
        queue = (np.where(path >= 0, path, 0) * self.n_vls + vl).astype(np.intp)
        fixed, wait = fixed_costs(topo, profile, path, hops, size, queue, occupancy, drain, paused)
        return vl, fixed, wait

    def build_index(self, flows: FlowTable) -> EntryIndex:
        """The active entries (see ``build_index``)."""
        return build_index(flows, self.layout, self.n_vls)

    def solve(
        self,
        idx: EntryIndex,
        backlog: NDArray[np.float64],
        capacity: NDArray[np.float64],
        free_bytes: NDArray[np.float64],
        dt: float,
        rate_table: NDArray[np.float64],
        entry_cap: NDArray[np.float64] | None,
        warm_share: NDArray[np.float64] | None,
        max_min: bool = True,
        loop_s: NDArray[np.float64] | None = None,
    ) -> Solution:
        """The tick's rates (see ``solve``), each entry starting from last tick's rate in
        ``rate_table`` (the flow table's, flat); ``max_min``: credits shared max-min;
        ``loop_s``: each buffer's credit loop's share of the tick, None for none."""
        warm = rate_table[idx.pos]
        return solve(
            idx,
            backlog,
            capacity,
            free_bytes,
            dt,
            warm,
            entry_cap,
            warm_share=warm_share,
            max_min=max_min,
            loop_s=loop_s,
        )

    def start_limit(
        self,
        idx: EntryIndex,
        start_s: NDArray[np.float64],
        capacity: NDArray[np.float64],
        now: float,
        dt: float,
    ) -> NDArray[np.float64] | None:
        """A flow ready only inside this tick sends for the part of the tick it exists:
        the most each entry may carry (None when every flow is ready all tick)."""
        heads = idx.heads
        ready = (now + dt - start_s[idx.flow[heads]]) / dt
        late = ready < 1
        if not late.any():
            return None
        limit = np.full(idx.size, np.inf)
        late_heads = heads[late]
        limit[late_heads] = np.clip(ready[late], 0.0, 1.0) * capacity[idx.link[late_heads]]
        return limit

    @staticmethod
    def credit_room(
        idx: EntryIndex,
        links: LinkBook,
        into_endpoint: NDArray[np.bool_],
        now: float,
        dt: float,
    ) -> NDArray[np.float64]:
        """Each buffer's credits for the tick from ``now``: its free space less its credit
        loop's bytes at the tick's end, endless for the queues into a NIC; and each loop's
        share of the tick into ``links.loop_share_s`` (``kernels.solve.credit_room``, here
        for every buffer: one that carries nothing adds nothing to its loop)."""
        t = links.credit_delay
        looped = (t > 0) & ~into_endpoint
        links.loop_bytes[:] = np.where(looped, links.loop_bytes_at(now + dt), 0.0)
        links.loop_at_s[looped] = now + dt
        round_trip = np.where(looped, 2.0 * t, 1.0)  # (the lag's time constant)
        links.loop_share_s[:] = np.where(looped, -np.expm1(-dt / round_trip) * t, 0.0)
        free = np.maximum(links.buffer_bytes - links.occupancy - links.loop_bytes, 0.0)
        free[into_endpoint] = ENDLESS_ROOM_BYTES
        return free

    @staticmethod
    def credit_loop_fill(idx: EntryIndex, moved: Moved, links: LinkBook) -> None:
        """What the tick's bytes add to the credit loops: inflow and drain times the
        loop's share of the tick."""
        links.loop_bytes += links.loop_share_s * (moved.inflow + moved.drain)

    @staticmethod
    def by_workload(
        workload: NDArray[np.int16], n_workloads: int
    ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """The places of each workload's flows, workload by workload, in the order given
        (workload -1 left out), and where each workload's end (``kernels.slots.by_workload``)."""
        order = np.flatnonzero(workload >= 0)
        order = order[np.argsort(workload[order], kind="stable")]
        return order, np.cumsum(np.bincount(workload[order], minlength=n_workloads))

    def drained_buffers(self, idx: EntryIndex) -> NDArray[np.intp]:
        """The buffers ``idx``'s entries drain, the ones that can hold bytes: an entry's
        each, repeats and the padding included (``LinkBook.measure_departures`` takes them)."""
        return idx.drains_pad

    def link_counters(
        self,
        idx: EntryIndex,
        link_rate: NDArray[np.float64],
        goodput: NDArray[np.float64],
        ber: NDArray[np.float64],
        go_back_n: bool,
        mtu: float,
        dt: float,
        counters: dict[str, NDArray[np.float64]],
    ) -> None:
        """Add a tick to the per-link counters: bytes and packets sent, and what bit
        errors cost (the retries on top of the goodput, the symbols hit). The retries
        are retransmitted here where the link resends them (link-level retry); under
        go-back-N the sources do (``count_bit_error_resends``)."""
        carried = link_rate * dt
        counters["tx_bytes_total"] += carried
        counters["tx_packets_total"] += carried / mtu
        resent = carried * retries_per_byte(goodput)
        if not go_back_n:
            counters["retransmitted_bytes_total"] += resent
        counters["link_error_recovery_total"] += resent / mtu
        counters["symbol_errors_total"] += carried * 8 * ber

    def credit_wait(
        self,
        alpha: NDArray[np.float64],
        inflow: NDArray[np.float64],
        idx: EntryIndex,
        new_backlog: NDArray[np.float64],
        n_vls: int,
        dt: float,
        transmit_wait: NDArray[np.float64],
    ) -> NDArray[np.bool_]:
        """Credit-starved links (a buffer held back what wanted in this tick, and the lane
        had data: an inflow, or bytes queued for the buffer when credits stopped it
        altogether); adds the share of the tick the most held-back lane could not send
        to ``transmit_wait``."""
        queued = sum_by(idx.buf_pad, new_backlog, alpha.size + 1)[: alpha.size]
        had_data = (inflow > 0) | (queued > 0)
        held_back = np.where((alpha < 1 - 1e-9) & had_data, alpha, 1.0)
        lanes = held_back.reshape(-1, n_vls)
        worst = lanes[:, 0].copy()
        for v in range(1, n_vls):
            np.minimum(worst, lanes[:, v], out=worst)
        transmit_wait += (1 - worst) * dt
        return worst < 1 - 1e-9

    def move(
        self,
        idx: EntryIndex,
        sol: Solution,
        backlog: NDArray[np.float64],
        flows: FlowTable,
        n_links: int,
        n_bufs: int,
        dt: float,
    ) -> Moved:
        """One tick of bytes (see ``move_bytes``)."""
        moved = move_bytes(idx, sol, backlog, flows, n_links, n_bufs, dt)
        if self.track_load:  # what adaptive routing will see as the load in flight
            self.link_load_bytes[:] = link_loads(
                flows.active, flows.path, flows.backlog, flows.hops, n_links
            )
        return moved

    def move_and_count(
        self,
        idx: EntryIndex,
        sol: Solution,
        backlog: NDArray[np.float64],
        flows: FlowTable,
        links: LinkBook,
        goodput: NDArray[np.float64],
        ber: NDArray[np.float64],
        go_back_n: bool,
        mtu: float,
        dt: float,
    ) -> Moved:
        """Move the tick's bytes and count them in ``links``, step by step: ``move``, the
        link book's rates, occupancy and drain, its departure cycles
        (``LinkBook.measure_departures``) and its counters (``link_counters``, under
        ``go_back_n`` the resends of bit errors, ``count_bit_error_resends``, then the
        resends the sources owed: ``count_resends``)."""
        moved = self.move(idx, sol, backlog, flows, len(links.link_rate), links.occupancy.size, dt)
        links.link_rate = moved.link_rate
        links.occupancy = moved.occupancy
        links.buffer_drain = moved.drain
        links.measure_departures(moved.drain, moved.occupancy, dt, self.drained_buffers(idx))
        self.link_counters(idx, links.link_rate, goodput, ber, go_back_n, mtu, dt, links.counters)
        retransmitted = links.counters["retransmitted_bytes_total"]
        if go_back_n:
            count_bit_error_resends(idx, sol.rate, flows, goodput, dt, retransmitted)
        count_resends(idx, sol.rate, moved.new_backlog, flows, dt, retransmitted)
        return moved

    def finish_times(
        self,
        idx: EntryIndex,
        sol: Solution,
        capacity: NDArray[np.float64],
        done: NDArray[np.intp],
        n_slots: int,
        dt: float,
    ) -> NDArray[np.float64]:
        """Sub-tick finish of the flows in ``done`` (see ``flow_finish_times``)."""
        return flow_finish_times(idx, sol, capacity, done, n_slots, dt)

    def finish_flows(
        self,
        idx: EntryIndex,
        sol: Solution,
        capacity: NDArray[np.float64],
        done: NDArray[np.intp],
        flows: FlowTable,
        now: float,
        dt: float,
        bandwidth_Bps: NDArray[np.float64],
        latency: HistogramRows,
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], float]:
        """Retire the flows in ``done`` and file the latency of those now whole in
        ``latency`` (a row per traffic class), step by step: their sub-tick finish
        (``finish_times``), ``FlowTable.finish_at``, ``HistogramRows.observe``. Returns
        ``finish_at``'s result."""
        t = self.finish_times(idx, sol, capacity, done, flows.live_end, dt)
        whole, finish, rounding = flows.finish_at(done, t, now, dt, bandwidth_Bps)
        if whole.size:
            latency.observe(flows.cls[whole], finish - flows.start_s[whole])
        return whole, finish, rounding
