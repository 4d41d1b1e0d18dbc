"""The compiled tick's Python face: the same ``EntryIndex`` and ``Solution`` the reference
solver (``fabric_core.tick.step``) gives, computed by the kernels of this package.

A handful of calls per tick, none of which loops in Python over flows or links.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numba
import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import CommandError
from fabric_core.net import endpoint_costs
from fabric_core.net.profiles import Profile
from fabric_core.net.routing import SubFlows, sprayed
from fabric_core.net.topology import Topology
from fabric_core.tick.faster_of_two import FasterOfTwo
from fabric_core.tick.flows import FlowTable
from fabric_core.tick.histogram import HistogramRows
from fabric_core.tick.kernels import warmup
from fabric_core.tick.kernels._jit import MOST_THREADS
from fabric_core.tick.kernels.finish import finish_flows
from fabric_core.tick.kernels.index import entry_index, entry_index_parallel, flow_values_parallel
from fabric_core.tick.kernels.move import (
    credit_wait,
    credit_wait_parallel,
    finish_times,
    link_counters,
    move_bytes,
    move_step,
    move_step_parallel,
)
from fabric_core.tick.kernels.route import (
    lanes_and_costs,
    link_costs,
    link_loads,
    route_flows,
    route_flows_in_pods,
)
from fabric_core.tick.kernels.slots import by_workload, start_limits
from fabric_core.tick.kernels.solve import (
    credit_loop_fill,
    credit_room,
    credit_room_parallel,
    solve_tick_parallel,
    solve_tick_serial,
)
from fabric_core.tick.kernels.spray import spray_flows
from fabric_core.tick.kernels.start import start_routed
from fabric_core.tick.kernels.table_route import table_route_flows
from fabric_core.tick.links import Departures, LinkBook
from fabric_core.tick.step import ENDLESS_ROOM_BYTES, EntryIndex, Moved, RankLayout, Solution

#: Entries from which the solve and the index may run their loops on all the cores numba
#: has (``kernels.solve.solve_tick_parallel``, ``kernels.index.entry_index_parallel``; the
#: move, the credits and the backlogs' gather follow the solve: ``_over_cores``);
#: below it, waking the threads for each loop costs more than sharing the loop saves.
#: From it on the engine runs whichever solve was faster when last both ran on one tick's
#: work (``faster_of_two``: a busy second core makes the parallel one several times
#: slower), and the index the same way as the solve.
PARALLEL_FROM_ENTRIES = 20_000
#: From ``PARALLEL_FROM_ENTRIES`` on, run the solve and the index only this way (0
#: serial, 1 over the cores) instead of the faster: for the tests and benchmarks that
#: hold one to the other.
ONLY_WAY: int | None = None
#: ``buffer_places`` where the solve does not read it (a feed-forward index)
_NO_PLACES = np.zeros(0, dtype=np.intp)
#: the solve's entry caps when no entry has one (``kernels.solve.solve_tick``)
_NO_CAPS = np.zeros(0)
#: the solve's credit loops' shares where there are none (PFC)
_NO_LOOPS = np.zeros(0)
#: the finish's credit levels where credits are not shared max-min (PFC: ``alpha``)
_NO_LEVELS = np.zeros(0)
#: ``start_routed``'s extra latencies when the batch has none of its own
_NO_EXTRA = np.zeros(0)


_I32 = NDArray[np.int32]


def _routing_tables(
    topo: Topology,
) -> tuple[_I32, _I32, _I32, _I32, _I32, _I32, _I32, _I32, int, int]:
    """What the compiled routers read of a generated topology, in their arguments' order
    (``kernels.route.route_flows``, ``kernels.spray.spray_flows``,
    ``kernels.start.start_routed``): each endpoint's ports and leaf per plane, each
    node's pod, the switch-to-switch link table, the spines of each pod and the cores of
    each slot per plane, the planes and the tiers."""
    return (
        topo.ep_uplink,
        topo.ep_downlink,
        topo.ep_leaf,
        topo.node_pod,
        topo.switch_index,
        topo.switch_link,
        topo.spines_by_pod,
        topo.cores_by_slot,
        topo.planes,
        topo.tiers,
    )


def _down_links(
    known_down: NDArray[np.bool_], down_ids: NDArray[np.intp] | None
) -> NDArray[np.intp]:
    """The links routing knows are down, ascending (the routers' ``down_links``):
    ``down_ids`` where the caller keeps them (``LinkBook.known_down_ids``), else found in
    ``known_down``."""
    if down_ids is not None:
        return down_ids
    return np.flatnonzero(known_down) if known_down.any() else np.zeros(0, np.intp)


@dataclass(frozen=True)
class CompiledTick:
    """The compiled solver of one fabric, with what its kernels need of the topology,
    built once: each link's rank."""

    link_rank: NDArray[np.int64]
    n_ranks: int
    n_vls: int
    #: the index's scratch, per link and per buffer (``kernels.index.entry_index``): -1
    #: between ticks
    link_slot: NDArray[np.int32]
    buf_slot: NDArray[np.int32]
    #: adaptive routing's expected load: per link, the bytes flows in flight still have to
    #: send over it, as of the last tick's move, plus what routing placed since
    #: (``routing.route``); written in place
    link_load_bytes: NDArray[np.float64]
    #: whether ``move`` keeps ``link_load_bytes`` (only adaptive routing reads it)
    track_load: bool = True
    #: [(profile, its data-path fixed cost, its PCIe goodput)], worked out again only
    #: when the profile changes (a ``set`` command makes a new one)
    _figures: list[tuple[Profile, float, float, float, float]] = field(
        default_factory=list, compare=False
    )
    #: the move's per-link and per-buffer sums, kept from tick to tick (``move``): link
    #: rate, then occupancy, drain and inflow with a pad slot; and the links and buffers
    #: the last move's entries used, where they are not 0
    _sums: list[NDArray[np.float64]] = field(default_factory=list, compare=False)
    _stale: list[NDArray[np.intp]] = field(default_factory=list, compare=False)
    #: the solve's results, kept likewise (``solve``): per link the level, the share and
    #: the first pass's share, per buffer the credit factor and level; the used links and buffers
    #: of the last solve; and the credits (free space) of the buffers
    _solved: list[NDArray[np.float64]] = field(default_factory=list, compare=False)
    _solved_stale: list[NDArray[np.intp]] = field(default_factory=list, compare=False)
    _free: list[NDArray[np.float64]] = field(default_factory=list, compare=False)
    #: each buffer's place in the order credits are settled where a route breaks
    #: up*/down* (``buffer_places``), worked out the first time one does
    _buf_pos: list[NDArray[np.intp]] = field(default_factory=list, compare=False)
    #: serial (0) or over the cores (1): the faster, on ticks that may share
    solve_choice: FasterOfTwo = field(default_factory=FasterOfTwo, compare=False)
    #: the entries of the last index built (whether the next may share the cores)
    _index_entries: list[int] = field(default_factory=lambda: [0], compare=False)
    #: whether the last solve ran over the cores: the move and the waits for credit after
    #: it, and the next tick's credits before it, run the same way (the same results)
    _over_cores: list[bool] = field(default_factory=lambda: [False], compare=False)

    @classmethod
    def of(cls, layout: RankLayout, n_vls: int, track_load: bool) -> CompiledTick:
        """From the reference's rank layout (``track_load``: see the field)."""
        n_links = layout.rank.size
        return cls(
            layout.rank.astype(np.int64),
            len(layout.links),
            n_vls,
            np.full(n_links, -1, dtype=np.int32),
            np.full(n_links * n_vls, -1, dtype=np.int32),
            np.zeros(n_links),
            track_load,
        )

    def build_index(self, flows: FlowTable) -> EntryIndex:
        """The active entries (see ``build_index``)."""
        return build_index(flows, self)

    def flow_values(self, table: NDArray[np.float64], idx: EntryIndex) -> NDArray[np.float64]:
        """``table`` (a flow-table array, flat) at ``idx``'s entries: ``table[idx.pos]``,
        over the cores where the solve lately ran so."""
        if self._over_cores[0]:
            return flow_values_parallel(table, idx.pos)
        return table[idx.pos]

    def buffer_places(self) -> NDArray[np.intp]:
        """Each buffer's place in the reference's order of settling credits where a route
        breaks up*/down*: by lane, then rank, downstream first (then by number, last first)."""
        if not self._buf_pos:
            n_bufs = self.link_slot.size * self.n_vls
            buf = np.arange(n_bufs, dtype=np.intp)
            lane, rank = buf % self.n_vls, self.link_rank[buf // self.n_vls]
            key = lane * (self.n_ranks + 1) + rank
            order = np.argsort(key, kind="stable")[::-1]  # (lane, rank, buffer) descending
            places = np.empty(n_bufs, dtype=np.intp)
            places[order] = buf
            self._buf_pos.append(places)
        return self._buf_pos[0]

    def link_cost(
        self,
        topo: Topology,
        occupancy: NDArray[np.float64],
        n_vls: int,
        known_down: NDArray[np.bool_],
    ) -> NDArray[np.float64]:
        """Adaptive routing's cost of every link (``kernels.route.link_costs``)."""
        return link_costs(occupancy, n_vls, topo.links.bandwidth_Bps, known_down)

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
        """Paths of new flows (``kernels.route.route_flows``; on a file topology
        ``kernels.table_route.table_route_flows``), each candidate link's cost computed
        where it is read; adaptive routing adds the load in flight (``link_load_bytes``)
        and, with ``size_bytes``, the bytes the batch has already placed (``routing.route``;
        not on a file topology). ``down_ids``: the links ``known_down`` marks, where the
        caller keeps them (``LinkBook.known_down_ids``; else found here)."""
        if topo.updown is not None:
            ud = topo.updown
            any_d, down_d = ud.tables(known_down)
            return table_route_flows(
                np.asarray(src, np.int64),
                np.asarray(dst, np.int64),
                np.asarray(key, np.int64),
                occupancy,
                n_vls,
                topo.links.bandwidth_Bps,
                known_down,
                topo.ep_uplink,
                topo.ep_downlink,
                topo.ep_leaf,
                topo.switch_index,
                ud.adj_link,
                ud.adj_row,
                ud.adj_up,
                ud.dist_any,
                ud.dist_down,
                any_d,
                down_d,
                adaptive,
            )
        # a 2-tier fabric's routes stay in their pods: the kernel without the rest
        router = route_flows_in_pods if topo.tiers == 2 else route_flows
        return router(
            np.asarray(src, np.int64),
            np.asarray(dst, np.int64),
            np.asarray(key, np.int64),
            occupancy,
            n_vls,
            topo.links.bandwidth_Bps,
            known_down,
            *_routing_tables(topo),
            adaptive,
            np.zeros(0) if size_bytes is None else np.asarray(size_bytes, np.float64),
            self.link_load_bytes,
            topo.has_every_candidate,
            _down_links(known_down, down_ids),
            topo.links.src,
            topo.links.dst,
        )

    def starts_at_once(self, topo: Topology) -> bool:
        """Whether a batch of new flows on ``topo`` can start in one compiled call
        (``start_routed``): on a generated 2-tier topology (a file topology routes by its
        tables; a 3-tier one starts its flows step by step, which keeps the routes between
        pods out of the one-call kernel's first compile)."""
        return topo.updown is None and topo.tiers == 2

    def start_routed(
        self,
        topo: Topology,
        profile: Profile,
        flows: FlowTable,
        slots: NDArray[np.intp],
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        *,
        ready_s: NDArray[np.float64],
        extra_latency_s: NDArray[np.float64] | None,
        host_s: float,
        tag: NDArray[np.int64],
        lane: int,
        traffic_class: int,
        workload: int,
        adaptive: bool,
        occupancy: NDArray[np.float64],
        known_down: NDArray[np.bool_],
        departures: Departures,
        paused: NDArray[np.bool_],
        down_ids: NDArray[np.intp] | None = None,
    ) -> None:
        """Route a batch of new flows, give them their lanes and fixed costs and write
        them into ``slots`` of ``flows`` (``kernels.start.start_routed``): what ``route``,
        ``lanes_and_costs`` and ``FlowTable.add`` do one after the other, in one call. The
        caller counts them in (``FlowTable.added``). Each flow is routed by its key
        (``route_rules.FLOW_KEY_STRIDE``); ``extra_latency_s`` None: each costs ``host_s``.

        Raises:
            CommandError: a route turns down-up more often than there are lanes (nothing
                is written).
        """
        fl = flows
        top = start_routed(
            np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(size, np.float64),
            np.asarray(ready_s, np.float64),
            _NO_EXTRA if extra_latency_s is None else np.asarray(extra_latency_s, np.float64),
            host_s, np.asarray(tag, np.int64), lane,
            traffic_class, workload, slots, occupancy, self.n_vls, topo.links.bandwidth_Bps,
            known_down, *_routing_tables(topo), adaptive, self.link_load_bytes,
            topo.has_every_candidate,
            _down_links(known_down, down_ids),
            topo.links.src, topo.links.dst, topo.nodes.tier, topo.links.prop_delay_s,
            *departures, paused, profile.flow_control == "credit", profile.cut_through,
            profile.switch_latency_s, *self._endpoint_figures(profile),
            float(profile.mtu_bytes), float(profile.header_bytes), fl.path, fl.vl,
            fl.backlog, fl.rate, fl.parent, fl.pending, fl.latest_finish_s, fl.active,
            fl.hops, fl.cls, fl.workload, fl.size, fl.delivered, fl.start_s,
            fl.extra_latency_s, fl.fixed_latency_s, fl.wait_s, fl.parent_size, fl.tag,
            fl.src, fl.dst, fl.resend_bytes,
        )  # fmt: skip
        if top >= self.n_vls:
            raise CommandError("a route turns down-up more often than there are virtual lanes")

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
        """Sub-flows of sprayed flows (``kernels.spray.spray_flows``; on a file topology
        ``routing.sprayed``): (path, hops, flow of each
        sub-flow, sub-flows per flow, bytes per sub-flow). ``down_ids`` as for ``route``."""
        if topo.updown is not None:
            cost = self.link_cost(topo, occupancy, n_vls, known_down)
            return sprayed(
                topo, src, dst, key, size, ways=ways, mtu_bytes=mtu_bytes, link_cost=cost
            )
        return spray_flows(
            np.asarray(src, np.int64),
            np.asarray(dst, np.int64),
            np.asarray(key, np.int64),
            np.asarray(size, np.float64),
            ways,
            float(mtu_bytes),
            occupancy,
            n_vls,
            topo.links.bandwidth_Bps,
            known_down,
            *_routing_tables(topo),
            # the reference's shortcut: every candidate exists and none crosses a down link
            topo.has_every_candidate and _down_links(known_down, down_ids).size == 0,
        )

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
        """Lane per hop, fixed latency and FIFO wait of new flows
        (``kernels.route.lanes_and_costs``), the FIFO wait at each buffer's departure rate
        (``LinkBook.departures``).

        Raises:
            CommandError: a route turns down-up more often than there are lanes.
        """
        vl, fixed, wait, top = lanes_and_costs(
            path,
            hops,
            vl0,
            np.asarray(size, np.float64),
            topo.nodes.tier,
            topo.links.src,
            topo.links.dst,
            topo.links.prop_delay_s,
            topo.links.bandwidth_Bps,
            occupancy,
            *departures,
            paused,
            self.n_vls,
            profile.flow_control == "credit",
            profile.cut_through,
            profile.switch_latency_s,
            *self._endpoint_figures(profile),
            float(profile.mtu_bytes),
            float(profile.header_bytes),
        )
        if top >= self.n_vls:
            raise CommandError("a route turns down-up more often than there are virtual lanes")
        return vl, fixed, wait

    def _endpoint_figures(self, profile: Profile) -> tuple[float, float, float, float]:
        """(data-path fixed cost, PCIe goodput, largest inline payload, what inlining
        saves) of ``profile`` (``endpoint_costs``)."""
        if not self._figures or self._figures[0][0] is not profile:
            self._figures[:] = [
                (
                    profile,
                    endpoint_costs.data_path_fixed_s(profile),
                    endpoint_costs.pcie_Bps(profile),
                    float(profile.inline_bytes),
                    float(profile.pcie_read_latency_s),  # what inlining saves
                )
            ]
        _, fixed_s, pcie, inline_bytes, inline_saving = self._figures[0]
        return fixed_s, pcie, inline_bytes, inline_saving

    def solve(
        self,
        idx: EntryIndex,
        backlog: NDArray[np.float64],
        capacity: NDArray[np.float64],
        free_bytes: NDArray[np.float64],
        dt: float,
        rate_table: NDArray[np.float64],
        entry_cap: NDArray[np.float64] | None,
        warm_share: NDArray[np.float64] | None = None,
        max_min: bool = True,
        loop_s: NDArray[np.float64] | None = None,
    ) -> Solution:
        """The tick's rates (see ``solve``; progressive filling needs no warm share);
        ``max_min``: credits shared max-min (the credit fabric), not scaled (PFC);
        ``loop_s``: each buffer's credit loop's share of the tick, None for none."""
        return solve(
            idx, self, backlog, capacity, free_bytes, dt, rate_table, entry_cap, max_min,
            loop_s,
        )  # fmt: skip

    def start_limit(
        self,
        idx: EntryIndex,
        start_s: NDArray[np.float64],
        capacity: NDArray[np.float64],
        now: float,
        dt: float,
    ) -> NDArray[np.float64] | None:
        """The late-start limit per entry (``kernels.slots.start_limits``), None if none."""
        limit, late = start_limits(
            idx.heads, idx.flow, idx.link, start_s, capacity, idx.size, now, dt
        )
        return limit if late else None

    def credit_room(
        self,
        idx: EntryIndex,
        links: LinkBook,
        into_endpoint: NDArray[np.bool_],
        now: float,
        dt: float,
    ) -> NDArray[np.float64]:
        """The buffers' credits for the tick from ``now``: their free space less their
        credit loops' bytes, endless for the queues into a NIC, and each loop's share of
        the tick (``links.loop_share_s``); worked out (``kernels.solve.credit_room``) for
        the buffers ``idx``'s entries feed, the only ones the solve reads (the others hold
        what they last had)."""
        if not self._free:
            self._free.append(np.zeros(links.buffer_bytes.size))
        csr: IndexCsr = idx.csr
        # over the cores where the solve lately ran so (the same room either way)
        room = credit_room_parallel if self._over_cores[0] else credit_room
        room(
            csr.used_bufs, links.buffer_bytes, links.occupancy, into_endpoint,
            ENDLESS_ROOM_BYTES, self._free[0], links.credit_delay, links.loop_bytes,
            links.loop_at_s, links.loop_share_s, now, dt,
        )  # fmt: skip
        return self._free[0]

    @staticmethod
    def credit_loop_fill(idx: EntryIndex, moved: Moved, links: LinkBook) -> None:
        """What the tick's bytes add to the credit loops (``kernels.solve.credit_loop_fill``),
        at the buffers ``idx``'s entries feed."""
        csr: IndexCsr = idx.csr
        credit_loop_fill(
            csr.used_bufs, moved.inflow, moved.drain, links.loop_share_s, links.loop_bytes
        )

    @staticmethod
    def by_workload(
        workload: NDArray[np.int16], n_workloads: int
    ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """The places of each workload's flows, workload by workload (``kernels.slots``)."""
        return by_workload(workload, n_workloads)

    def drained_buffers(self, idx: EntryIndex) -> NDArray[np.intp]:
        """The buffers ``idx``'s entries drain, the ones that can hold bytes: the index's
        used buffers, each once (the same set as the entries' ``drains_pad``, which repeats
        one for each entry)."""
        csr: IndexCsr = idx.csr
        return csr.used_bufs

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
        """Add a tick to the per-link counters (``kernels.move.link_counters``), at the
        links ``idx``'s entries used (the others carried nothing): the reference's step
        of ``move_and_count``, which counts the sources' resends after it (the compiled
        tick counts all in one call: ``move_and_count``)."""
        csr: IndexCsr = idx.csr
        link_counters(
            csr.used_links,
            link_rate,
            goodput,
            ber,
            go_back_n,
            float(mtu),
            dt,
            counters["tx_bytes_total"],
            counters["tx_packets_total"],
            counters["retransmitted_bytes_total"],
            counters["link_error_recovery_total"],
            counters["symbol_errors_total"],
        )

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
        """Credit-starved links (``kernels.move.credit_wait``)."""
        starved = np.zeros(transmit_wait.size, dtype=np.bool_)
        csr: IndexCsr = idx.csr
        wait = credit_wait_parallel if self._over_cores[0] else credit_wait
        wait(
            alpha,
            inflow,
            csr.used_links,
            csr.lane_buf,
            csr.buf_ptr,
            csr.buf_ent,
            new_backlog,
            n_vls,
            dt,
            transmit_wait,
            starved,
        )
        return starved

    def _move_sums(self, n_links: int, n_bufs: int) -> list[NDArray[np.float64]]:
        """The move's per-link and per-buffer sums, kept from tick to tick: link rate, then
        occupancy, drain and inflow with a pad slot (made, all 0, at the first move)."""
        if not self._sums:
            self._sums[:] = [np.zeros(n_links)] + [np.zeros(n_bufs + 1) for _ in range(3)]
            self._stale[:] = [np.zeros(0, dtype=np.intp)] * 2
        return self._sums

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
        """One tick of bytes (``kernels.move.move_bytes``). The per-link and per-buffer
        sums it returns are kept and written again by the next move (the link book holds
        them until then; a snapshot copies them)."""
        link_rate, occupancy, drain, inflow = self._move_sums(n_links, n_bufs)
        csr: IndexCsr = idx.csr
        new_backlog, arrival, got, done = move_bytes(
            sol.padded,
            idx.prev_pad,
            idx.nxt_pad,
            idx.link,
            idx.drains_pad,
            idx.buf_pad,
            idx.pos,
            idx.flow,
            backlog,
            flows.backlog.reshape(-1),
            flows.rate.reshape(-1),
            flows.delivered,
            flows.size,
            dt,
            link_rate,
            occupancy,
            drain,
            inflow,
            *self._stale,
        )
        self._stale[:] = [csr.used_links, csr.used_bufs]
        if self.track_load:  # what adaptive routing will see as the load in flight
            link_loads(
                flows.active[: flows.live_end],  # (no flow in flight past it)
                flows.path,
                flows.backlog,
                flows.hops,
                self.link_load_bytes,
            )
        return Moved(
            new_backlog,
            arrival,
            link_rate,
            occupancy[:n_bufs],
            drain[:n_bufs],
            inflow[:n_bufs],
            got,
            done,
        )

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
        """Move the tick's bytes and count them in ``links``: what ``move``,
        ``LinkBook.measure_departures`` and ``link_counters`` do one after the other (the
        reference's ``move_and_count``), in one compiled call (``kernels.move.move_step``;
        over the cores, the same bit for bit, where this tick's solve ran so)."""
        n_links, n_bufs = len(links.link_rate), links.occupancy.size
        link_rate, occupancy, drain, inflow = self._move_sums(n_links, n_bufs)
        csr: IndexCsr = idx.csr
        stale_links, stale_bufs = self._stale
        c = links.counters
        move = move_step_parallel if self._over_cores[0] else move_step
        new_backlog, arrival, got, done, links.dq_open = move(
            sol.padded, idx.prev_pad, idx.nxt_pad, idx.link, idx.drains_pad, idx.buf_pad,
            idx.pos, idx.flow, backlog, flows.backlog.reshape(-1), flows.rate.reshape(-1),
            flows.delivered, flows.size, dt, link_rate, occupancy, drain, inflow, stale_links,
            stale_bufs, self.track_load, flows.active[: flows.live_end], flows.path,
            flows.backlog, flows.hops, self.link_load_bytes, csr.used_bufs, links.dq_open,
            links.dq_seen, links.dq_bytes, links.dq_s, links.dq_avg_Bps, csr.used_links,
            goodput, ber, go_back_n, float(mtu), c["tx_bytes_total"], c["tx_packets_total"],
            c["retransmitted_bytes_total"], c["link_error_recovery_total"],
            c["symbol_errors_total"], idx.heads, flows.resend_bytes,
        )  # fmt: skip
        self._stale[:] = [csr.used_links, csr.used_bufs]
        links.link_rate = link_rate
        links.occupancy = occupancy[:n_bufs]
        links.buffer_drain = drain[:n_bufs]
        return Moved(
            new_backlog, arrival, link_rate, links.occupancy, links.buffer_drain,
            inflow[:n_bufs], got, done,
        )  # fmt: skip

    def finish_times(
        self,
        idx: EntryIndex,
        sol: Solution,
        capacity: NDArray[np.float64],
        done: NDArray[np.intp],
        n_slots: int,
        dt: float,
    ) -> NDArray[np.float64]:
        """Sub-tick finish of the flows in ``done`` (``kernels.move.finish_times``)."""
        csr: IndexCsr = idx.csr
        return finish_times(
            sol.padded,
            sol.level,
            sol.alpha,
            _NO_LEVELS if sol.credit_level is None else sol.credit_level,
            idx.buf_pad,
            idx.flow,
            idx.prev_pad,
            idx.last,
            idx.last_flow,
            csr.used_links,
            csr.link_ptr,
            csr.link_ent,
            csr.ent_link,
            capacity,
            done,
            n_slots,
            dt,
        )

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
        """Retire the flows in ``done`` (their bytes all arrived this tick) and file the
        latency of those now whole in ``latency``, a row per traffic class: what
        ``finish_times``, ``FlowTable.finish_at`` and ``HistogramRows.observe`` do one
        after the other, in one call (``kernels.finish.finish_flows``). Returns the heads
        of the flows now whole, their finish times and the bytes rounding left in the
        network (``FlowTable.finish_at``'s)."""
        csr: IndexCsr = idx.csr
        fl = flows
        whole, finish, rounding, end, filed = finish_flows(
            sol.padded, sol.level, sol.alpha,
            _NO_LEVELS if sol.credit_level is None else sol.credit_level,
            idx.buf_pad, idx.flow, idx.prev_pad, idx.last,
            idx.last_flow, csr.used_links, csr.link_ptr, csr.link_ent, csr.ent_link, capacity,
            done, now, dt, fl.path, fl.backlog, fl.rate, fl.active, fl.size, fl.delivered,
            fl.start_s, fl.wait_s, fl.parent_size, fl.fixed_latency_s, fl.extra_latency_s,
            fl.parent, fl.pending, fl.latest_finish_s, fl.held, bandwidth_Bps, fl.live_end,
            fl.cls, *latency.arrays(),
        )  # fmt: skip
        fl.retired(done.size, whole.size, end)
        if not filed:
            raise latency.rows_error(fl.cls[whole])
        return whole, finish, rounding


class IndexCsr(NamedTuple):
    """Entries grouped for the kernels (offsets ``*_ptr`` into ``*_ent``), by the links
    and buffers they use (``kernels.index.entry_index`` says what each array holds).
    A named tuple: one is made with every new index, and a frozen dataclass's checked
    assignments cost more (``build_index``)."""

    key_ptr: NDArray[np.intp]  # entries of key (rank, lane, fed)
    used_links: NDArray[np.intp]
    rank_ptr: NDArray[np.intp]
    link_ptr: NDArray[np.intp]
    link_ent: NDArray[np.intp]
    ent_link: NDArray[np.intp]
    used_bufs: NDArray[np.intp]
    buf_group_ptr: NDArray[np.intp]
    buf_ptr: NDArray[np.intp]
    buf_ent: NDArray[np.intp]
    lane_buf: NDArray[np.intp]


def parallel_from_entries() -> int:
    """``PARALLEL_FROM_ENTRIES`` as it is now (a ``LazyModule`` keeps the value it read
    first, and tests and the manifest's recording set it lower for a while)."""
    return PARALLEL_FROM_ENTRIES


def _fixed_way(entries: int) -> bool | None:
    """Whether the solve and the index run over the cores when there is nothing to choose
    for ``entries`` (below ``PARALLEL_FROM_ENTRIES``, a way fixed by ``ONLY_WAY``, or one
    thread to use); None when the engine chooses."""
    large = entries >= PARALLEL_FROM_ENTRIES
    if not large or ONLY_WAY is not None or numba.get_num_threads() == 1:
        return large and ONLY_WAY == 1
    if not warmup.parallel_ready():
        return False  # a helper compiles the kernels over the cores: serial meanwhile
    return None


def _index_buffer(
    flows: FlowTable, layout: CompiledTick
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``entry_index``'s buffer and bounds, from the serial kernel or the one over the
    cores (the same, bit for bit): from ``PARALLEL_FROM_ENTRIES`` entries in the last
    index on, the way the solve runs (``PARALLEL_FROM_ENTRIES``)."""
    args = (
        flows.path,
        flows.vl,
        flows.active[: flows.live_end],  # (no flow in flight past it)
        layout.link_rank,
        layout.n_ranks,
        layout.n_vls,
        layout.link_slot,
        layout.buf_slot,
    )

    parallel = _fixed_way(layout._index_entries[0])
    if parallel is None:
        # the way the solve runs lately (its probes time the two on this machine's load
        # now): a choice of the index's own would probe as often again, and a probe over
        # cores that another process holds costs many ticks' time
        parallel = layout.solve_choice.best == 1
    buf, bounds = entry_index_parallel(*args, MOST_THREADS) if parallel else entry_index(*args)
    layout._index_entries[0] = int(bounds[1] - bounds[0])
    return buf, bounds


def build_index(flows: FlowTable, layout: CompiledTick) -> EntryIndex:
    """The flow table's active entries, in the reference's order, with the kernels' groups."""
    buf, bounds = _index_buffer(flows, layout)
    return index_from_buffer(buf, bounds, flows.version)


def index_from_buffer(buf: NDArray[np.intp], bounds: NDArray[np.intp], version: int) -> EntryIndex:
    """The index in ``entry_index``'s buffer (``bounds``: where each part is), made of the
    flow table at ``version``."""
    # each part of the one buffer the kernel returns: a view of it, taken positionally
    # (by name through a dict, with a frozen dataclass for the groups, this wrapper took
    # 10.0 µs a rebuild instead of 7.4 on the default scenario), into names in the order of
    # ``kernels.index.PARTS`` (``tests/test_kernel_sources.py`` reads them here)
    at = iter(bounds.tolist())
    (
        pos, hop, flow, link, queue, prev_pad, nxt_pad, buf_pad, drains_pad, first,
        link_ent, ent_link, buf_ent, heads, last, last_flow, key_ptr, used_links, rank_ptr,
        link_ptr, used_bufs, buf_group_ptr, buf_ptr, lane_buf, feedforward,
    ) = [buf[lo:hi] for lo, hi in zip(at, at, strict=True)]  # fmt: skip
    return EntryIndex(
        version=version, hop=hop, flow=flow, pos=pos, link=link, queue=queue,
        prev_pad=prev_pad, nxt_pad=nxt_pad, buf_pad=buf_pad, drains_pad=drains_pad,
        heads=heads, first=first, feedforward=bool(feedforward[0]), rank_groups=[],
        buffer_groups=[], hop_groups=[], last=last, last_flow=last_flow,
        csr=IndexCsr(
            key_ptr=key_ptr,
            # (copies: the solve and the move keep these two until the next index, which
            # views of the buffer would keep whole)
            used_links=used_links.copy(), rank_ptr=rank_ptr, link_ptr=link_ptr,
            link_ent=link_ent, ent_link=ent_link, used_bufs=used_bufs.copy(),
            buf_group_ptr=buf_group_ptr, buf_ptr=buf_ptr, buf_ent=buf_ent, lane_buf=lane_buf,
        ),
    )  # fmt: skip


def solve(
    idx: EntryIndex,
    layout: CompiledTick,
    backlog: NDArray[np.float64],
    capacity: NDArray[np.float64],
    free_bytes: NDArray[np.float64],
    dt: float,
    rate_table: NDArray[np.float64],
    entry_cap: NDArray[np.float64] | None = None,
    max_min: bool = True,
    loop_s: NDArray[np.float64] | None = None,
) -> Solution:
    """The tick's rates (``fabric_core.tick.step.solve``'s contract, compiled), each entry
    starting from its rate in ``rate_table`` (the flow table's, flat), read in the kernel;
    ``max_min``: a short buffer's credits shared max-min among its inflows;
    ``loop_s``: each buffer's credit loop's share of the tick, None for none."""
    csr: IndexCsr = idx.csr
    if entry_cap is None:
        entry_cap = _NO_CAPS
    if loop_s is None:
        loop_s = _NO_LOOPS
    if not layout._solved:
        n_links = capacity.size
        layout._solved[:] = [
            capacity.copy(),
            np.full(n_links, np.inf),
            np.full(n_links, np.inf),
            np.ones(free_bytes.size),
            np.full(free_bytes.size, np.inf),
        ]
        layout._solved_stale[:] = [np.zeros(0, dtype=np.intp)] * 2
    level, share, first_share, alpha, credit_level = layout._solved
    places = _NO_PLACES if idx.feedforward else layout.buffer_places()

    def run(parallel: bool, stale: list[NDArray[np.intp]]) -> tuple[NDArray[np.float64], float]:
        """The rates by one of the two solves, and the seconds it took."""
        started = time.perf_counter()
        rate = (solve_tick_parallel if parallel else solve_tick_serial)(
            idx.link,
            csr.ent_link,
            idx.prev_pad,
            idx.nxt_pad,
            idx.first,
            idx.hop,
            csr.key_ptr,
            csr.used_links,
            csr.rank_ptr,
            csr.link_ptr,
            csr.link_ent,
            csr.used_bufs,
            csr.buf_group_ptr,
            csr.buf_ptr,
            csr.buf_ent,
            idx.feedforward,
            places,
            2 * layout.n_vls,
            MOST_THREADS if parallel else 1,
            backlog,
            capacity,
            free_bytes,
            loop_s,
            dt,
            idx.pos,
            rate_table,
            entry_cap,
            True,
            max_min,
            level,
            share,
            first_share,
            alpha,
            credit_level,
            *stale,
        )
        return rate, time.perf_counter() - started

    # from PARALLEL_FROM_ENTRIES on, the faster of the serial solve and the one over the
    # cores (their rates are the same, bit for bit), unless there is one core to use
    fixed = _fixed_way(idx.size)
    if fixed is not None:
        rate, _ = run(fixed, layout._solved_stale)
        layout._over_cores[0] = fixed
    else:
        choice = layout.solve_choice
        best, probe = choice.plan()
        if probe:  # both on this tick's work; the second puts back what the first wrote
            _, other_s = run(best == 0, layout._solved_stale)
            rate, best_s = run(best == 1, [csr.used_links, csr.used_bufs])
            choice.probed((best_s, other_s) if best == 0 else (other_s, best_s), idx.size)
        else:
            rate, best_s = run(best == 1, layout._solved_stale)
            choice.ran(best_s, idx.size)
        layout._over_cores[0] = best == 1
    layout._solved_stale[:] = [csr.used_links, csr.used_bufs]
    # (kept by the layout and written again by the next solve, in place)
    levels = credit_level if max_min else None  # (None: PFC's one factor, ``alpha``)
    return Solution(padded=rate, level=level, alpha=alpha, share=first_share, credit_level=levels)
