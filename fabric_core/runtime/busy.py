"""Busy ticks at once: a fabric's ticks in which only compiled workloads act, in one call.

``runtime.uneventful`` runs ticks in which nothing starts or ends. On a busy fabric that
is none: on the default scenario the RPC probes start messages every tick and the
background's flows end and are replaced about every other tick. ``kernels.busy.busy_ticks``
runs those ticks too, workloads and all, as long as the workloads that act are ones it
knows (``workloads.traffic.Bulk``, ``Rpc`` and ``AllToAll``, one of each at most) and the
others are quiet (``Workload.quiet_until``). This module decides when a call may run, hands the
kernel its arguments from the fabric's parts (``runtime.uneventful``'s groups, and the
starts', the finishes' and the workloads') and writes back what ``Fabric.step`` would
have left. The ticks' results are the same bit for bit (``tests/test_busy.py`` holds a
fabric run this way to one run tick by tick).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fabric_core.faults import recovery
from fabric_core.net import endpoint_costs
from fabric_core.net.routing import MAX_HOPS
from fabric_core.runtime import uneventful
from fabric_core.tick.histogram import Histogram, HistogramRows
from fabric_core.tick.kernels.groups import IX_PLACES
from fabric_core.tick.lazy import LazyModule
from fabric_core.workloads.arrivals import BLOCK as ARRIVALS_BLOCK
from fabric_core.workloads.base import Workload
from fabric_core.workloads.traffic import AllToAll, Bulk, Rpc

if TYPE_CHECKING:
    from fabric_core.faults.book import Fault, FaultBook
    from fabric_core.net.profiles import Profile
    from fabric_core.net.topology import Topology
    from fabric_core.runtime.uneventful import KernelGroups
    from fabric_core.tick.flows import FlowTable
    from fabric_core.tick.kernels import busy as busy_kernels
    from fabric_core.tick.kernels import tick as tick_kernels
    from fabric_core.tick.kernels.tick import CompiledTick
    from fabric_core.tick.links import LinkBook
    from fabric_core.tick.pfc import PfcQueues
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    busy_kernels = LazyModule("fabric_core.tick.kernels.busy")
    tick_kernels = LazyModule("fabric_core.tick.kernels.tick")


class BusyHost(Protocol):
    """What the kernel's arguments are gathered from (``runtime.fabric.Fabric`` is one)."""

    topo: Topology
    profile: Profile
    flows: FlowTable
    link_book: LinkBook
    faults: FaultBook
    classes: list[str]
    class_vl: NDArray[np.int8]
    injected_bytes: float
    completed_flows: int
    hop_updates: int
    dt_s: float
    sim_time_s: float

    def pfc_paused_queues(self) -> NDArray[np.bool_]: ...

    @property
    def pfc(self) -> PfcQueues | None: ...


#: a fabric whose busy ticks run one by one (tests and benchmarks compare the two)
ENABLED = True
#: the fewest ticks worth a call (building its arguments costs about a quiet tick)
MIN_TICKS = 3
#: the histograms the workloads file their latencies in (``on_complete``)
BULK_HISTOGRAM = "fct_seconds"
RPC_HISTOGRAM = "message_seconds"
ALLTOALL_HISTOGRAMS = ("message_seconds", "alltoall_seconds")  # messages, rounds


@dataclass(frozen=True)
class CompiledWorkloads:
    """The workloads the kernel runs: their places among the fabric's (-1: none)."""

    bulk_at: int
    bulk: Bulk | None
    rpc_at: int
    rpc: Rpc | None
    alltoall_at: int = -1
    alltoall: AllToAll | None = None

    @property
    def places(self) -> frozenset[int]:
        """Their places among the fabric's workloads."""
        return frozenset(i for i in (self.bulk_at, self.rpc_at, self.alltoall_at) if i >= 0)


def compiled_workloads(workloads: list[Workload]) -> CompiledWorkloads | None:
    """The background bulk, the RPC workload and the MoE all-to-all among ``workloads``
    that the kernel can run (at most one of each, exactly those classes, in a state the
    kernel takes up: the RPC's first arrivals drawn, each one's latency histograms made by
    a first completion, the all-to-all's by its first round); None if there is neither a
    bulk nor an RPC workload, and no all-to-all if there are two."""
    bulk_at = rpc_at = -1
    alltoalls: list[int] = []
    for i, wl in enumerate(workloads):
        if type(wl) is Bulk:
            if bulk_at >= 0:
                return None
            if wl.pool.size < 2 or BULK_HISTOGRAM not in wl.histograms:
                continue
            bulk_at = i
        elif type(wl) is Rpc:
            if rpc_at >= 0:
                return None
            if wl.busy_state() is None or RPC_HISTOGRAM not in wl.histograms:
                continue
            rpc_at = i
        elif type(wl) is AllToAll:
            alltoalls.append(i)
    if bulk_at < 0 and rpc_at < 0:
        return None
    bulk = workloads[bulk_at] if bulk_at >= 0 else None
    rpc = workloads[rpc_at] if rpc_at >= 0 else None
    alltoall_at = alltoalls[0] if len(alltoalls) == 1 else -1
    if alltoall_at >= 0 and not all(
        h in workloads[alltoall_at].histograms for h in ALLTOALL_HISTOGRAMS
    ):
        alltoall_at = -1
    alltoall = workloads[alltoall_at] if alltoall_at >= 0 else None
    assert bulk is None or isinstance(bulk, Bulk)
    assert rpc is None or isinstance(rpc, Rpc)
    assert alltoall is None or isinstance(alltoall, AllToAll)
    return CompiledWorkloads(bulk_at, bulk, rpc_at, rpc, alltoall_at, alltoall)


def _int32(n: int) -> NDArray[np.int32]:
    return np.zeros(n, dtype=np.int32)


#: a histogram's arrays, of the types the kernel takes, for a workload there is none of
_NO_HISTOGRAM = Histogram()
_NO_HISTOGRAM_ARRAYS = (_NO_HISTOGRAM.counts, _NO_HISTOGRAM._stats, _NO_HISTOGRAM._ring)


def bulk_arguments(
    wl: Bulk | None, lane: int, cls: int
) -> tuple[tuple[Any, ...], bool, bool, int, float]:
    """The bulk workload's fixed arguments and state (running, owed, next tag, delivered
    bytes); of the same types, unused, when there is none."""
    if wl is None:
        h = _NO_HISTOGRAM_ARRAYS
        return (
            (_int32(0), _int32(2), np.zeros(0, np.int64), 0, 0, 0.0, 0.0, 0, 0, *h),
            False,
            False,
            0,
            0.0,
        )
    hist = wl.histograms[BULK_HISTOGRAM]
    owed, seq = wl.busy_state()
    fixed = (
        wl.senders, wl.pool, wl.in_flight, int(wl.outstanding), int(wl.hotspots),
        float(wl.hotspot_fraction), float(wl.size_bytes), lane, cls, hist.counts,
        hist._stats, hist._ring,
    )  # fmt: skip
    return fixed, wl.running, owed, seq, wl.delivered_bytes


def rpc_arguments(
    wl: Rpc | None, lane: int, cls: int
) -> tuple[tuple[Any, ...], bool, int, int, float, int, tuple[Any, ...]]:
    """The RPC workload's fixed arguments, its state (running, next tag, sent), and its
    arrivals: the rate and places, then the block drawn, the next arrival and the last
    drawn (``PoissonArrivals.drawn``); of the same types, unused, when there is none."""
    state = None if wl is None else wl.busy_state()
    if wl is None or state is None:
        h = _NO_HISTOGRAM_ARRAYS
        fixed = (_int32(0), _int32(2), 0.0, 0, 0, *h)
        block = (np.zeros(1), np.zeros(1, np.int64), np.zeros(1), 0, 0.0)
        return fixed, False, 0, 0, 0.0, 1, block
    arrivals, seq = state
    hist = wl.histograms[RPC_HISTOGRAM]
    fixed = (
        wl.senders,
        wl.pool,
        float(wl.size_bytes),
        lane,
        cls,
        hist.counts,
        hist._stats,
        hist._ring,
    )
    return (
        fixed, wl.running, seq, wl.sent, float(arrivals.rate_per_s), int(arrivals.places),
        arrivals.drawn(),
    )  # fmt: skip


def alltoall_arguments(wl: AllToAll | None, lane: int, cls: int) -> tuple[Any, ...]:
    """The all-to-all's arguments: its fixed ones (its histograms' arrays, the messages'
    and the rounds', its ranks, message size, period, lane and class), whether it runs,
    and its rounds' state (``AllToAll.busy_state``, the last round's length between); of
    the same types, unused, when there is none."""
    if wl is None:
        fixed = (*_NO_HISTOGRAM_ARRAYS * 2, _int32(0), 0.0, 0.0, 0, 0)
        return (fixed, False, False, 0, 0.0, 0.0, float("nan"), 0)
    messages, rounds = (wl.histograms[h] for h in ALLTOALL_HISTOGRAMS)
    fixed = (
        messages.counts, messages._stats, messages._ring, rounds.counts, rounds._stats,
        rounds._ring, wl.ranks, float(wl.size_bytes), float(wl.period_s), lane, cls,
    )  # fmt: skip
    busy, left, round_start, next_s, started = wl.busy_state()
    return (
        fixed, wl.running, busy, int(left), float(round_start), float(next_s),
        float(wl.last_round_s), int(started),
    )  # fmt: skip


def start_arguments(
    fabric: BusyHost, layout: CompiledTick
) -> tuple[float, tuple[Any, ...], tuple[Any, ...]]:
    """``kernels.start.start_routed``'s fixed arguments, either side of the buffers'
    occupancy and drain (which the kernel takes as they are tick by tick): the host costs
    of a message, then the two groups, as ``CompiledTick.start_routed`` hands them."""
    topo, p, fl, lb = fabric.topo, fabric.profile, fabric.flows, fabric.link_book
    endpoint = layout._endpoint_figures(p)
    start_a = (
        layout.n_vls, topo.links.bandwidth_Bps, lb.known_down,
        *tick_kernels._routing_tables(topo), p.routing != "ecmp", layout.link_load_bytes,
        topo.has_every_candidate, tick_kernels._down_links(lb.known_down, lb.known_down_ids),
        topo.links.src, topo.links.dst, topo.nodes.tier, topo.links.prop_delay_s,
    )  # fmt: skip
    _, cycle_s, avg_Bps = lb.departures()
    start_b = (
        cycle_s, avg_Bps, fabric.pfc_paused_queues(), p.flow_control == "credit",
        p.cut_through, p.switch_latency_s, *endpoint, float(p.mtu_bytes),
        float(p.header_bytes), fl.path, fl.vl, fl.backlog, fl.rate, fl.parent, fl.pending,
        fl.latest_finish_s, fl.active, fl.hops, fl.cls, fl.workload, fl.size, fl.delivered,
        fl.start_s, fl.extra_latency_s, fl.fixed_latency_s, fl.wait_s, fl.parent_size,
        fl.tag, fl.src, fl.dst, fl.resend_bytes,
    )  # fmt: skip
    return endpoint_costs.host_costs_s(p), start_a, start_b


def finish_arguments(
    fabric: BusyHost, class_rows: HistogramRows
) -> tuple[tuple[Any, ...], tuple[Any, ...], NDArray[np.float64]]:
    """``kernels.finish.finish_flows``' fixed arguments (the flow table's), the latency
    histograms per class (the flows' classes, then the rows' arrays) and their bounds."""
    fl = fabric.flows
    finish_fixed = (
        fl.path, fl.backlog, fl.rate, fl.active, fl.size, fl.delivered, fl.start_s,
        fl.wait_s, fl.parent_size, fl.fixed_latency_s, fl.extra_latency_s, fl.parent,
        fl.pending, fl.latest_finish_s, fl.held, fabric.topo.links.bandwidth_Bps,
    )  # fmt: skip
    counts, stats, rings, bounds = class_rows.arrays()
    return finish_fixed, (fl.cls, counts, stats, rings), bounds


@dataclass(frozen=True)
class BusyRun:
    """What one call of ``busy_ticks`` did (see it for each field)."""

    started: int
    stop: int
    t_start: NDArray[np.float64]
    d_start: NDArray[np.float64]
    end_s: float
    delivered: float
    dropped: float
    injected: float
    completed: int
    hop_updates: int
    n_flows: int
    live_end: int
    version: int
    built_buf: NDArray[np.intp]
    built_bounds: NDArray[np.intp]
    index_version: int
    tick: uneventful.TicksRun  # the last tick's ``uneventful_ticks`` result
    bulk: tuple[bool, int, float]
    rpc: tuple[int, int]
    arrivals: tuple[Any, ...]  # the RPC's block, next arrival and last drawn
    #: the links and buffers the last tick run used: the solve's and the move's to clear
    stale: tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]
    batches: int  # of flows started, each admitted whole by the fabric-wide cap
    #: the all-to-all's rounds: one in flight, its messages left, its start, the next
    #: round's start, the last round's length, the rounds started
    alltoall: tuple[bool, int, float, float, float, int]
    cnps: int  # sent in all the ticks run (RoCE's DCQCN)
    #: the flows waiting for their ACK timeout and the earliest resend (``FlowTable``'s)
    waiting: tuple[int, float]

    @property
    def failed(self) -> bool:
        """A batch could not be routed or filed (``STOP_ERROR``)."""
        return self.stop == busy_kernels.STOP_ERROR

    @property
    def whole(self) -> int:
        """The ticks run whole: the last of a ``STOP_REPORT`` (flows of another workload
        ended, or on RoCE a PFC watchdog fired or a sender is blocked) waits for Python."""
        return self.started - 1 if self.stop == busy_kernels.STOP_REPORT else self.started


def run_kernel(args: list[Any]) -> BusyRun:
    """Call ``busy_ticks`` with its list of arguments."""
    (
        started, stop, t_start, d_start, end_s, delivered, dropped, injected, completed,
        hop_updates, n_flows, live_end, version, built_buf, built_bounds, index_version, one,
        bulk, rpc, r_t, r_at, r_u, stale, batches, alltoall, cnps, waiting,
    ) = busy_kernels.busy_ticks(*args)  # fmt: skip
    return BusyRun(
        started=int(started),
        stop=int(stop),
        t_start=t_start,
        d_start=d_start,
        end_s=float(end_s),
        delivered=float(delivered),
        dropped=float(dropped),
        injected=float(injected),
        completed=int(completed),
        hop_updates=int(hop_updates),
        n_flows=int(n_flows),
        live_end=int(live_end),
        version=int(version),
        built_buf=built_buf,
        built_bounds=built_bounds,
        index_version=int(index_version),
        tick=uneventful.ticks_run(one),
        bulk=(bool(bulk[0]), int(bulk[1]), float(bulk[2])),
        rpc=(int(rpc[0]), int(rpc[1])),
        arrivals=(r_t, r_at, r_u, int(rpc[2]), float(rpc[3])),
        stale=stale,
        batches=int(batches),
        alltoall=_alltoall_state(alltoall),
        cnps=int(cnps),
        waiting=(int(waiting[0]), float(waiting[1])),
    )


def _alltoall_state(r: Any) -> tuple[bool, int, float, float, float, int]:
    """The all-to-all's rounds as ``busy_ticks`` returns them, as Python's values."""
    busy, left, round_start, next_s, last_round_s, rounds = r
    return (
        bool(busy),
        int(left),
        float(round_start),
        float(next_s),
        float(last_round_s),
        int(rounds),
    )


def route_hops(topo: Topology) -> int:
    """The most links a route of a new flow may cross, which bounds the entries a batch
    adds (the kernel stops before a tick whose index could reach
    ``PARALLEL_FROM_ENTRIES``): up the tiers and down again on a generated tree, whose
    new routes are up*/down* (around the links known down, too); ``MAX_HOPS`` elsewhere.
    (A bound too low would cost speed only: the serial kernels' results are the parallel
    ones'.)"""
    return min(2 * topo.tiers, MAX_HOPS) if topo.updown is None else MAX_HOPS


@dataclass
class DeadLinks:
    """What ``busy_ticks`` loses at links down that routing does not know of yet, on
    RoCE (``faults.recovery._blackhole``): per link, whether it is one, and the faults
    that count their lost bytes, with their links as offsets into one array and their
    bytes lost so far (the kernel adds to them: ``lost_back`` writes them back)."""

    dead: NDArray[np.bool_]
    counted: tuple[Fault, ...]
    ptr: NDArray[np.intp]
    links: NDArray[np.intp]
    lost: NDArray[np.float64]

    @classmethod
    def of(cls, fabric: BusyHost) -> DeadLinks:
        """The fabric's: none on a credit fabric, where nothing is lost to a dead link."""
        book = fabric.faults
        if fabric.pfc is None:
            dead = np.zeros(len(fabric.topo.links), dtype=np.bool_)
        else:
            dead = book.seen_down & ~fabric.link_book.known_down
        counted: tuple[Fault, ...] = ()
        if dead.any():  # (``recovery.track``'s choice)
            counted = tuple(f for f in book.active() if f.links.size and f.mitigated_at_s is None)
        ptr = np.zeros(len(counted) + 1, dtype=np.intp)
        ptr[1:] = np.cumsum([f.links.size for f in counted], dtype=np.intp)
        links = np.zeros(int(ptr[-1]), dtype=np.intp)
        for f, at in zip(counted, ptr.tolist(), strict=False):
            links[at : at + f.links.size] = f.links
        return cls(
            dead=dead,
            counted=counted,
            ptr=ptr,
            links=links,
            lost=np.array([f.lost_bytes for f in counted], dtype=np.float64),
        )

    def lost_back(self) -> None:
        """Each counted fault's bytes lost, as the kernel left them."""
        for f, lost in zip(self.counted, self.lost.tolist(), strict=True):
            f.lost_bytes = lost


def recovery_arguments(
    fabric: BusyHost,
) -> tuple[float, NDArray[np.float64], NDArray[np.float64], float, float, int]:
    """What ``busy_ticks`` measures a rerouted link-down's recovery with (``faults.recovery``
    ``delivered_rate``): the rate at which the first recovers (inf: none to measure), the
    history back over the window, the window, the slack of a time reached and the entries
    the history keeps."""
    history = fabric.faults.delivered_history
    at_Bps = recovery.recovered_at_Bps(fabric.faults)
    dt = float(fabric.dt_s)
    kept = history.maxlen or 2**62  # (an unbounded history: all it holds)
    if at_Bps == np.inf:
        empty = np.zeros(0)
        return at_Bps, empty, empty, recovery.recovery_window_s(dt), recovery.TIME_EPS_S, kept
    hist_t, hist_d = recovery.history_tail(history, fabric.sim_time_s, dt)
    return at_Bps, hist_t, hist_d, recovery.recovery_window_s(dt), recovery.TIME_EPS_S, kept


def kernel_arguments(
    fabric: BusyHost,
    layout: CompiledTick,
    groups: KernelGroups,
    workload_rngs: list[np.random.Generator],
    class_rows: HistogramRows,
    cw: CompiledWorkloads,
    last: tuple[NDArray[np.intp], NDArray[np.intp], int],
    most_entries: int,
    dead: DeadLinks,
) -> list[Any]:
    """``busy_ticks``' arguments: ``groups`` (``runtime.uneventful.kernel_groups`` of the
    fabric now), the workloads' generators, the latency histograms per class, the
    index's last hops and version (``last``), the links down that routing does not know
    of (``dead``), and the rest from the fabric's parts."""
    fl = fabric.flows
    # the buffers' order where routes break up*/down*: always, so that an index rebuilt in
    # the kernel finds it (the solve reads it only there)
    entries = groups.entries
    index = (*entries[:IX_PLACES], layout.buffer_places(), *entries[IX_PLACES + 1 :])
    rebuild = (
        fl.path, fl.vl, fl.active, layout.link_rank, layout.n_ranks, layout.n_vls,
        layout.link_slot, layout.buf_slot,
    )  # fmt: skip
    host_s, start_a, start_b = start_arguments(fabric, layout)
    finish_fixed, class_hist, bounds_s = finish_arguments(fabric, class_rows)
    classes, class_vl = fabric.classes, fabric.class_vl

    def lane_cls(wl: Workload | None) -> tuple[int, int]:
        if wl is None:
            return 0, 0
        cls = classes.index(wl.traffic_class)
        return int(class_vl[cls]), cls

    b_fixed, b_running, b_owed, b_seq, b_delivered = bulk_arguments(cw.bulk, *lane_cls(cw.bulk))
    b_rng = workload_rngs[max(cw.bulk_at, 0)]
    r_fixed, r_running, r_seq, r_sent, r_rate, r_places, r_block = rpc_arguments(
        cw.rpc, *lane_cls(cw.rpc)
    )
    r_rng = workload_rngs[max(cw.rpc_at, 0)]
    last_hops, last_flow, index_version = last
    return [
        *groups.head, index, groups.flow_table, groups.link_book,
        groups.solved, groups.rest, groups.rng, groups.profile, last_hops, last_flow, fl.version, index_version,
        rebuild, fl.n_parents, fl.live_end, fabric.faults.admission.limits.fabric_flows,
        fabric.injected_bytes, fabric.completed_flows, fabric.hop_updates, most_entries,
        route_hops(fabric.topo), fl.held, fl.workload, fl.tag, fl.src, fl.parent_size, host_s,
        np.zeros(0), start_a, start_b, finish_fixed, class_hist, bounds_s, cw.bulk_at,
        b_fixed, b_rng, b_running, b_owed, b_seq, b_delivered, cw.rpc_at, r_fixed, r_rng,
        r_running, r_seq, r_sent, r_rate, r_places, ARRIVALS_BLOCK, *r_block,
        cw.alltoall_at, *alltoall_arguments(cw.alltoall, *lane_cls(cw.alltoall)), dead.dead,
        fl.rate, fl.resend_s, float(fabric.profile.local_ack_timeout_s),
        fl.n_waiting, float(fl.next_resend_s), dead.ptr, dead.links, dead.lost,
        *recovery_arguments(fabric),
    ]  # fmt: skip
