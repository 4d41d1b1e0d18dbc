"""The emulated fabric: topology + profile + flows + workloads + faults, advanced tick by tick.

``Fabric.step`` is the hot path: it asks the workloads for new flows, routes
them (vectorised), solves the tick's rates (``fabric_core.tick.step``), moves bytes,
completes flows with sub-tick interpolation, and updates the per-link counters.
Nothing on that path loops over flows or links in Python.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, cast, overload

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import (
    MAX_TICK_S,
    MIN_TICK_S,
    ClearFault,
    Command,
    CommandError,
    InjectFault,
    SetParam,
    SetTick,
    StartWorkload,
    StopWorkload,
    unknown,
)

# (ibgda: every fault kind registered wherever a fabric runs, not only where the endpoint
# model has been imported: an engine process refused version_mismatch, which its console
# offered)
from fabric_core.faults import ibgda, recovery  # noqa: F401
from fabric_core.faults.book import FaultBook, goodput_fraction
from fabric_core.net import endpoint_costs
from fabric_core.net.paths import StaticRoutes
from fabric_core.net.profiles import Profile, check_pfc, check_routing
from fabric_core.net.route_rules import FLOW_KEY_STRIDE
from fabric_core.net.routing import spray_ways
from fabric_core.net.topology import Topology
from fabric_core.runtime import busy, uneventful
from fabric_core.runtime.allocator import keep_freed_memory
from fabric_core.runtime.events import EventLog
from fabric_core.runtime.scenario import Scenario, ScenarioError
from fabric_core.runtime.snapshot import (
    LinkState,
    LinkStatus,
    Snapshot,
    Totals,
    frozen,
    workload_views,
)
from fabric_core.tick.flows import RESEND_EPS_S, FlowRequests, FlowTable, NewFlows
from fabric_core.tick.histogram import HistogramRows
from fabric_core.tick.ibcc import IbCongestionControl
from fabric_core.tick.lazy import LazyModule
from fabric_core.tick.links import LinkBook, credit_loop_delay
from fabric_core.tick.pfc import Dcqcn, PfcQueues
from fabric_core.tick.reference import ReferenceTick
from fabric_core.tick.roce import RoceFlowControl
from fabric_core.tick.step import EntryIndex, Moved, RankLayout, Solution
from fabric_core.workloads import Completions, Workload
from fabric_core.workloads.base import admission_notes, tick_notes, workload_rngs

if TYPE_CHECKING:
    from fabric_core.tick.kernels import tick as _tick_kernels
    from fabric_core.tick.kernels.tick import CompiledTick
    from fabric_core.tick.kernels.warmup import WarmUp
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    _tick_kernels = LazyModule("fabric_core.tick.kernels.tick")

MAX_EVENTS = 500
#: The tick's solver: numba kernels, or the vectorised numpy reference they are tested
#: against (``fabric_core.tick.step``; the same results, several times slower).
Solver = Literal["compiled", "reference"]
SOLVERS: tuple[Solver, ...] = ("compiled", "reference")


@dataclass(frozen=True)
class TunableParam:
    """A profile parameter operators may change at run time."""

    name: str
    low: float
    high: float
    help: str


TUNABLE: dict[str, TunableParam] = {
    p.name: p
    for p in (
        TunableParam("buffer_per_vl_bytes", 1024.0, 1e9, "per-VL ingress buffer (credits)"),
        TunableParam("switch_latency_s", 0.0, 1e-3, "switch port-to-port latency"),
        TunableParam("reroute_s", 1e-6, 60.0, "time from a link failure to traffic rerouted"),
        TunableParam(
            "ecn_kmin_s", 0.0, 1.0, "ECN marking starts above this queue (time at line rate)"
        ),
        TunableParam(
            "ecn_kmax_s", 0.0, 1.0, "ECN marks every packet above this queue (time at line rate)"
        ),
        TunableParam("ecn_pmax", 0.0, 1.0, "ECN marking probability at Kmax"),
        TunableParam("dcqcn_g", 1e-6, 1.0, "DCQCN alpha gain"),
        TunableParam("dcqcn_alpha_interval_s", 1e-7, 1.0, "DCQCN alpha update period"),
        TunableParam("dcqcn_decrease_interval_s", 1e-7, 1.0, "DCQCN rate-decrease check"),
        TunableParam("dcqcn_timer_s", 1e-6, 1.0, "DCQCN rate-increase timer"),
        TunableParam("dcqcn_ai_at_25g_Bps", 0.0, 1e11, "DCQCN additive increase at 25G"),
        TunableParam("dcqcn_hai_at_25g_Bps", 0.0, 1e11, "DCQCN hyper increase at 25G"),
        TunableParam("dcqcn_min_rate_Bps", 0.0, 1e11, "DCQCN lowest rate after a cut"),
        TunableParam("cnp_interval_s", 0.0, 1.0, "CNP rate limit per flow (0: none)"),
        TunableParam("pfc_watchdog_s", 1e-6, 60.0, "PFC watchdog detection time"),
        TunableParam("swift_target_delay_s", 0.0, 1.0, "Swift target queueing delay"),
    )
}


def _link_rank(topo: Topology) -> NDArray[np.int64]:
    """Order of links along any up*/down* path: up links by tier, then down links."""
    t_src = topo.nodes.tier[topo.links.src].astype(np.int64)
    t_dst = topo.nodes.tier[topo.links.dst].astype(np.int64)
    top = max(3, int(t_src.max(initial=0)))  # a file topology may have more than 3 tiers
    return np.where(t_dst > t_src, t_src, 2 * top - t_src)


class LinkConditions(NamedTuple):
    """What the faults make of the links in a tick."""

    status: NDArray[np.int8]  # LinkStatus per link
    goodput: NDArray[np.float64]  # share of each link left for new data under bit errors
    capacity: NDArray[np.float64]  # payload bytes/s per link
    stormed: NDArray[np.bool_]  # per queue: into a NIC that refuses data (PFC storm)
    any_stormed: bool  # whether any queue is (worked out once, not looked up every tick)


class _KeptConditions(NamedTuple):
    """Link conditions kept while faults are open, with what they were computed from."""

    profile: Profile
    state: tuple[NDArray[Any], ...]  # the fault book's ber, buffer factor, downs, flaps
    storms: tuple[str, ...]  # the targets of the PFC storms open
    conditions: LinkConditions


_T = TypeVar("_T")


class _LinkField(Generic[_T]):
    """A field of the fabric's ``link_book``, read and written under the same name on the
    fabric (``fabric.occupancy`` is ``fabric.link_book.occupancy``): the names the
    interfaces, reports and tests read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _LinkField[_T]: ...
    @overload
    def __get__(self, obj: Fabric, objtype: type | None = None) -> _T: ...
    def __get__(self, obj: Fabric | None, objtype: type | None = None) -> _T | _LinkField[_T]:
        if obj is None:
            return self
        return cast(_T, getattr(obj.link_book, self.name))

    def __set__(self, obj: Fabric, value: _T) -> None:
        setattr(obj.link_book, self.name, value)


def traffic_classes(workloads: Sequence[Workload]) -> list[str]:
    """A fabric's traffic classes: its workloads', in the order they first appear.
    Flows of no workload (a fault's incast) are of class "bulk", or the first class: a
    fabric with no workload still has that one to count their latency in."""
    names: list[str] = []
    for wl in workloads:
        if wl.traffic_class not in names:
            names.append(wl.traffic_class)
    return names or ["bulk"]


def tick_start_s(epoch_s: float, epoch_tick: int, tick: int, dt_s: float) -> float:
    """Simulated time at the start of ``tick``: the time since the tick length last
    changed (at ``epoch_tick``, ``epoch_s``) as a product, with no drift from summing."""
    return epoch_s + (tick - epoch_tick) * dt_s


def check_tick(dt_s: float) -> None:
    """Raises ``CommandError`` for a tick length outside MIN_TICK_S..MAX_TICK_S."""
    if not MIN_TICK_S <= dt_s <= MAX_TICK_S:
        raise CommandError(
            f"tick must be between {MIN_TICK_S:g} and {MAX_TICK_S:g} s, got {dt_s:g}"
        )


class Fabric:
    """A running emulation; see the module docstring."""

    buffer_bytes = _LinkField[NDArray[np.float64]]()
    occupancy = _LinkField[NDArray[np.float64]]()
    buffer_drain = _LinkField[NDArray[np.float64]]()
    link_rate = _LinkField[NDArray[np.float64]]()
    known_down = _LinkField[NDArray[np.bool_]]()
    paused = _LinkField[NDArray[np.bool_]]()
    counters = _LinkField[dict[str, NDArray[np.float64]]]()
    pause_vl = _LinkField[dict[str, NDArray[np.float64]]]()

    def __init__(
        self,
        topo: Topology,
        profile: Profile,
        workloads: list[Workload],
        *,
        dt_s: float,
        seed: int,
        cluster: str = "fabtop",
        scenario: str = "custom",
        class_vl: Mapping[str, int] | None = None,
        solver: Solver = "compiled",
    ) -> None:
        if dt_s <= 0:
            raise ValueError("dt must be > 0")
        check_routing(profile)
        check_pfc(profile)
        # the tick frees and allocates the same large arrays every tick: keep their pages
        keep_freed_memory()
        self.topo = topo
        self.profile = profile
        self.workloads = workloads
        self.dt_s = dt_s
        self.seed = seed
        self.cluster = cluster
        self.scenario = scenario
        self.rng = np.random.default_rng(seed)  # the fabric's own draws (DCQCN's CNPs)
        self.tick = 0
        self.sim_time_s = 0.0
        self._epoch_tick, self._epoch_s = 0, 0.0  # where the current tick length took over
        self.flows = FlowTable(1024)
        self.events = EventLog(lambda: self.sim_time_s, MAX_EVENTS)
        self.faults = FaultBook(
            topo.links, topo.nodes, self.emit, flow_control=profile.flow_control
        )
        self.n_vls = int(profile.virtual_lanes)
        self.classes: list[str] = traffic_classes(workloads)
        vl_map = dict(class_vl or {})
        self.class_vl = np.array(
            [vl_map.get(c, i % max(self.n_vls - 1, 1)) for i, c in enumerate(self.classes)],
            dtype=np.int8,
        )
        if (self.class_vl >= self.n_vls).any() or (self.class_vl < 0).any():
            raise ValueError(f"virtual lanes must be in 0..{self.n_vls - 1}")
        self._class_rows = HistogramRows(len(self.classes))  # latency per class, filled together
        self.class_hist = dict(zip(self.classes, self._class_rows.hists, strict=True))
        #: each workload's own random stream (``workloads.base.workload_rngs``); ``rng`` is
        #: the fabric's own (which of a tick's checks bring DCQCN a CNP)
        self._workload_rngs = workload_rngs(seed, workloads)
        for wl, wl_rng in zip(workloads, self._workload_rngs, strict=True):
            wl.bind(topo.gpus, topo.storage, wl_rng)
            wl.attach(self)
        self._layout = RankLayout.of(_link_rank(topo))
        self.solver = solver
        self._warmed_up = False  # (``_warm_up``)
        #: What this fabric's first ticks compiled over two processes (``kernels.warmup``),
        #: if they did (None: the cache had the kernels, or another fabric compiled them)
        self.kernel_warm_up: WarmUp | None = None
        #: the ticks that ran as Python while the kernels compiled aside, and the wall
        #: time they took, rests included (the run's report: ``run.as_python``)
        self.python_ticks = 0
        self.python_wall_s = 0.0
        self._tick: ReferenceTick | CompiledTick
        # only adaptive routing reads the load in flight: the others need not track it
        track_load = profile.routing == "adaptive"
        if solver == "compiled":
            from fabric_core.tick.kernels.tick import CompiledTick  # imports numba: only when used

            self._tick = CompiledTick.of(self._layout, self.n_vls, track_load)
        elif solver == "reference":
            self._tick = ReferenceTick(self._layout, self.n_vls, track_load)
        else:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
        self.to_endpoint = topo.nodes.tier[topo.links.dst] == 0
        self._endpoint_queues = np.repeat(self.to_endpoint, self.n_vls)
        self._index: EntryIndex | None = None
        #: the last tick's solution (its fair shares start the next tick's solve)
        self.solution: Solution | None = None
        #: (profile, status, goodput, capacity, stormed) of a fabric with no fault open
        self._healthy: tuple[Profile, LinkConditions] | None = None
        #: the same with faults open, and the fault state they were worked out from
        self._faulted: _KeptConditions | None = None
        #: no queue paused, for ``pfc_paused_queues`` on a credit fabric
        self._never_paused = np.zeros(0, dtype=bool)
        #: buffers, rates, the links known down, counters (the tick writes it)
        self.link_book = LinkBook.empty(topo.links, self.n_vls, self.profile.switch_latency_s)
        self.injected_bytes = 0.0
        self.cancelled_bytes = 0.0  # injected, then cancelled before they were sent
        self.delivered_bytes = 0.0
        self.dropped_bytes = 0.0
        self.completed_flows = 0
        self._window: deque[tuple[float, float]] = deque(maxlen=64)  # (time, delivered)
        self.hop_updates = 0
        self.schedule: list[tuple[float, InjectFault | ClearFault]] = []  # time order
        self.schedule_skipped: list[str] = []  # those refused when due (recovery.skipped)
        self.static_routes = StaticRoutes(topo)
        self.spray_ways = spray_ways(topo)  # sub-flows per sprayed flow (routing "spray")
        # RoCE: PFC queues, DCQCN senders, the deadlock watch (None on a credit fabric)
        self.roce = (
            RoceFlowControl(self, compiled=solver == "compiled")
            if profile.flow_control == "pfc"
            else None
        )
        if self.roce is not None:
            # the PFC queues' own array: a shared buffer moves it every tick
            self.buffer_bytes = self.roce.pfc.buffer
        #: IB congestion control (credit fabric, when the profile asks for it)
        self.ibcc = (
            IbCongestionControl()
            if self.roce is None and profile.ib_congestion_control == "ibcc"
            else None
        )

    @classmethod
    def from_scenario(cls, scn: Scenario, solver: Solver = "compiled") -> Fabric:
        """Build the fabric a scenario describes (fresh workloads, scheduled faults), solved
        by ``solver``.

        Raises:
            ScenarioError: a workload or scheduled fault does not fit the topology.
        """
        topo = scn.build_topology()
        try:
            fabric = cls(
                topo,
                scn.profile,
                scn.build_workloads(),
                dt_s=scn.dt_s,
                seed=scn.seed,
                cluster=scn.cluster,
                scenario=scn.name,
                class_vl=scn.classes,
                solver=solver,
            )
        except ValueError as exc:
            raise ScenarioError(f"{scn.source}: {exc}") from None
        for i, r in enumerate(scn.routes):
            try:
                fabric.add_static_route(r.src, r.dst, r.via)
            except ValueError as exc:
                raise ScenarioError(f"{scn.source}: route[{i}]: {exc}") from None
        for i, f in enumerate(scn.faults):
            try:
                cmd = recovery.scheduled_command(f.kind, f.target, dict(f.params), f.duration_s)
                recovery.check_scheduled(fabric, cmd)
            except CommandError as exc:
                raise ScenarioError(f"{scn.source}: fault[{i}]: {exc}") from None
            fabric.schedule.append((f.at_s, cmd))
        fabric.warn_of_tick()
        return fabric

    # ------------------------------------------------------------------ helpers
    def emit(self, severity: str, kind: str, target: str, message: str) -> None:
        """Add an event to the log the snapshot carries (bounded; newest last)."""
        self.events.emit(severity, kind, target, message)

    def capacity(
        self, status: NDArray[np.int8], goodput: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Payload capacity per link: line rate less headers, less retries (``goodput``,
        from ``_goodput``), 0 when down."""
        p = self.profile
        eff = p.mtu_bytes / (p.mtu_bytes + p.header_bytes)
        cap = self.topo.links.bandwidth_Bps * eff * goodput
        cap[status == LinkStatus.DOWN] = 0.0
        return cap

    def _goodput(self) -> NDArray[np.float64]:
        """Share of each link left for new data under bit errors: the native fabric
        retries the one bad packet on the link; RoCE goes back N end to end, resending
        the window in flight (bandwidth × ``Profile.go_back_n_round_trip_s``)."""
        p = self.profile
        packet = p.mtu_bytes + p.header_bytes
        if p.flow_control == "credit":
            resent = np.ones(len(self.topo.links))
        else:
            rtt = p.go_back_n_round_trip_s(self.topo.tiers)
            resent = np.maximum(self.topo.links.bandwidth_Bps * rtt / packet, 1.0)
        return goodput_fraction(self.faults.ber, packet, resent)

    # ------------------------------------------------------------------ flows in
    def start_flows(
        self,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        *,
        traffic_class: int,
        workload: int,
        tag: NDArray[np.int64],
        ready_s: NDArray[np.float64],
        extra_latency_s: NDArray[np.float64] | None = None,
    ) -> None:
        """Route and start flows (bytes wait at the source NIC until sent).

        On a ``spray`` profile each flow becomes sub-flows on distinct equal-cost paths
        (``routing.spray``, ``routing.split_sprayed``); the workload still sees one flow.
        """
        n = src.size
        if n == 0:
            return
        # the fabric-wide cap on flows in flight (fabric_core.faults.admission): the rest
        # refused, a workload's counted under its name (a fault's flows have workload < 0)
        # and handed back to it, since they will never complete
        wl = self.workloads[workload] if workload >= 0 else None
        keep = self.faults.admission.fabric_admit(
            size, self.flows.n_parents, self.emit, workload=None if wl is None else wl.name
        )
        if keep < n:
            if wl is not None:
                wl.on_refused(
                    FlowRequests(src[keep:], dst[keep:], size[keep:], tag[keep:], ready_s[keep:])
                )
            if keep == 0:
                return
            src, dst, size, tag, ready_s = (
                src[:keep],
                dst[:keep],
                size[:keep],
                tag[:keep],
                ready_s[:keep],
            )
            if extra_latency_s is not None:
                extra_latency_s = extra_latency_s[:keep]
        flow_bytes = float(size.sum())
        # a workload that models its endpoints hands their host costs in; the others'
        # messages are posted and polled by a CPU (endpoint_costs.host_costs_s)
        host_s = endpoint_costs.host_costs_s(self.profile)
        tick = self._tick
        if (
            self.profile.routing != "spray"
            and not self.static_routes
            and tick.starts_at_once(self.topo)
            and not uneventful.waiting_for_kernel()  # (compiled aside on a first run)
        ):
            # the usual case: routed, laned and written in one compiled call
            assert isinstance(tick, _tick_kernels.CompiledTick)  # (the reference never is)
            slots = self.flows.reserve(src.size)
            tick.start_routed(
                self.topo,
                self.profile,
                self.flows,
                slots,
                src,
                dst,
                size,
                ready_s=ready_s,
                extra_latency_s=extra_latency_s,
                host_s=host_s,
                tag=tag,
                lane=int(self.class_vl[traffic_class]),
                traffic_class=traffic_class,
                workload=workload,
                adaptive=self.profile.routing != "ecmp",
                occupancy=self.occupancy,
                known_down=self.known_down,
                departures=self.link_book.departures(),
                paused=self.pfc_paused_queues(),
                down_ids=self.link_book.known_down_ids,
            )
            self.flows.added(slots, src.size)
        else:
            slots = self._start_in_steps(
                src,
                dst,
                size,
                tag * FLOW_KEY_STRIDE + workload,
                traffic_class=traffic_class,
                workload=workload,
                tag=tag,
                ready_s=ready_s,
                extra_latency_s=(
                    np.full(src.size, host_s) if extra_latency_s is None else extra_latency_s
                ),
            )
        if self.roce is not None:
            first_hop = self.flows.path[0, slots]
            self.roce.start_flows(
                self.flows.capacity, slots, self.topo.links.bandwidth_Bps[first_hop]
            )
        if self.ibcc is not None:
            self.ibcc.start(self.flows.capacity, slots)
        self.injected_bytes += flow_bytes

    def _start_in_steps(
        self,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        key: NDArray[np.int64],
        *,
        traffic_class: int,
        workload: int,
        tag: NDArray[np.int64],
        ready_s: NDArray[np.float64],
        extra_latency_s: NDArray[np.float64],
    ) -> NDArray[np.intp]:
        """``start_flows`` step by step: routed (or sprayed into sub-flows), static routes
        applied, lanes and fixed costs, then written into the table. Returns the rows'
        slots."""
        n_sub: NDArray[np.int64] | None = None
        total: NDArray[np.float64] | None = None
        if self.profile.routing == "spray":
            path, hops, of, n_sub, sub_size = self._tick.spray(
                self.topo,
                src,
                dst,
                key,
                size,
                self.spray_ways,
                self.profile.mtu_bytes,
                self.occupancy,
                self.n_vls,
                self.known_down,
                self.link_book.known_down_ids,
            )
            total = size[of]
            src, dst, size, tag, ready_s = src[of], dst[of], sub_size, tag[of], ready_s[of]
            extra_latency_s = extra_latency_s[of]
        else:
            adaptive = self.profile.routing != "ecmp"
            # the sizes let adaptive routing count what this batch itself places
            path, hops = self._tick.route(
                self.topo,
                src,
                dst,
                key,
                adaptive,
                self.occupancy,
                self.n_vls,
                self.known_down,
                size,
                self.link_book.known_down_ids,
            )
        rows = src.size
        if self.static_routes:
            self.static_routes.apply(src, dst, path, hops)
        vl0 = np.full(rows, self.class_vl[traffic_class], dtype=np.int8)
        vl, fixed, wait = self.lanes_and_costs(path, hops, vl0, size)
        if total is not None:  # sprayed: inlined or not as the whole message is
            fixed = fixed + endpoint_costs.sprayed_read_s(self.profile, size, total)
        new = NewFlows(
            path=path,
            hops=hops,
            size_bytes=size,
            vl=vl,
            traffic_class=traffic_class,
            workload=workload,
            tag=tag,
            start_s=ready_s,
            extra_latency_s=extra_latency_s,
            src=src,
            dst=dst,
            n_sub=n_sub,
            total_bytes=total,
        )
        slots = self.flows.add(new)
        self.flows.fixed_latency_s[slots] = fixed
        self.flows.wait_s[slots] = wait
        return slots

    def set_dt(self, dt_s: float) -> float:
        """Change the tick length from the next tick on (the engine adapts it to the speed
        asked for; results do not depend on it). Returns the new tick.

        Raises:
            CommandError: outside MIN_TICK_S..MAX_TICK_S.
        """
        check_tick(dt_s)
        self._epoch_tick, self._epoch_s = self.tick, self.sim_time_s
        self.dt_s = float(dt_s)
        self.warn_of_tick()
        return self.dt_s

    def tick_notes(self) -> list[str]:
        """Why the tick is too long for some workloads (none: it is not)."""
        return [note for _, note in tick_notes(self.workloads, self.dt_s)]

    def admission_notes(self) -> list[str]:
        """Why some workloads cannot run whole: their own parameters put more flows in
        flight at once than the fabric-wide cap lets in (none: none do)."""
        return [
            note
            for _, note in admission_notes(
                self.workloads, self.faults.admission.limits.fabric_flows
            )
        ]

    def warn_of_tick(self) -> None:
        """Say ``tick_notes`` in the event log (from the scenario's tick on, and at each
        change of tick: the console's and serve's operators read them there)."""
        for name, note in tick_notes(self.workloads, self.dt_s):
            self.emit("warning", "tick_too_long", name, note)

    def add_static_route(self, src: str, dst: str, via: list[str]) -> None:
        """Pin flows from ``src`` to ``dst`` to a path through the switches ``via``
        (a misconfigured or hand-made route; it may break up*/down*)."""
        self.static_routes.add(src, dst, via)

    def lanes_and_costs(
        self,
        path: NDArray[np.int32],
        hops: NDArray[np.int8],
        vl0: NDArray[np.int8],
        size: NDArray[np.float64],
    ) -> tuple[NDArray[np.int8], NDArray[np.float64], NDArray[np.float64]]:
        """Lane per hop (``paths.lanes``), fixed latency and FIFO wait
        (``paths.fixed_costs``) of flows starting on ``path[hop, flow]`` now, or moved to
        it by a reroute, from the buffers as they are."""
        return self._tick.lanes_and_costs(
            self.topo,
            self.profile,
            path,
            hops,
            vl0,
            size,
            self.occupancy,
            self.link_book.departures(),
            self.pfc_paused_queues(),
        )

    # ------------------------------------------------------------------ the tick
    def _warm_up(self) -> None:
        """Before the first compiled ticks: the kernels compiled aside if this is the first
        run after an install (``kernels.warmup``), the ticks run as Python meanwhile; the
        ticks-at-once kernel held back while a helper still compiles it."""
        self._warmed_up = True
        if self.solver == "compiled":
            from fabric_core.tick.kernels import warmup  # imports numba: only when used

            self.kernel_warm_up = done = warmup.warm_up()
            if done is not None and done.deferred:
                uneventful.held_back = done.compiling_deferred

    @property
    def compiling_aside(self) -> bool:
        """Whether this fabric's ticks run as Python while its kernels compile aside (the
        first run after an install: ``kernels.warmup``): some 300 times slower than they
        will run, so a live engine does not lengthen its tick to keep up meanwhile."""
        done = self.kernel_warm_up
        return done is not None and bool(done.awaited)

    def run_ticks(self, n: int) -> None:
        """Advance ``n`` ticks: the uneventful ones in one compiled call
        (``runtime.uneventful``), the others one by one; the same results either way.
        The first call of a process compiles the kernels first if the cache lacks them
        (``_warm_up``), running the ticks as Python while other processes do (``step``
        compiles each kernel the warm-up left out as it meets it)."""
        if not self._warmed_up:
            self._warm_up()
        left = n
        done = self.kernel_warm_up
        if done is not None and self.compiling_aside:
            start = time.monotonic()
            while left > 0 and done.ticks_as_python():
                done.step_as_python(self.step)
                self.python_ticks += 1
                left -= 1
            self.python_wall_s += time.monotonic() - start
        while left > 0:
            ran = self._run_uneventful(left)
            if ran == 0:
                ran = self._run_busy(left)
            if ran == 0:
                self.step()
                ran = 1
            left -= ran

    # ------------------------------------------------------------ ticks at once
    def _run_uneventful(self, most: int) -> int:
        """Run up to ``most`` uneventful ticks at once (``runtime.uneventful``); how many
        ran (0 when the next may be eventful: the caller steps it)."""
        most = min(most, uneventful.MOST_TICKS)
        layout = self._tick
        if (
            not uneventful.ENABLED
            or most < uneventful.MIN_TICKS
            or not self._may_run_at_once(blackhole=True)
        ):
            return 0
        # the workloads first: on a busy fabric one of them acts every tick, and asking
        # them costs less than looking at the links
        horizon = self._quiet_until(busy_from=self.sim_time_s + 0.5 * self.dt_s)
        if self.sim_time_s + 0.5 * self.dt_s >= horizon:
            return 0
        conditions = self._settled_links()
        if conditions is None:
            return 0
        goodput, cap, stormed = conditions
        if not self._faults_at_rest() and self.flows.live_end > 0:
            return 0  # (a RoCE link-down followed tick by tick: the busy kernel's)
        idx = self._current_index()
        if idx.size == 0:
            # (nothing in flight, so nothing lost at a dead link either)
            return self._pass_idle_ticks(most, horizon)
        assert isinstance(layout, _tick_kernels.CompiledTick)
        if (
            idx.size >= _tick_kernels.parallel_from_entries()
            or not layout._sums
            or not layout._solved
            or (self.roce is None and not layout._free)
        ):
            return 0
        return self._run_at_once(layout, idx, most, horizon, goodput, cap, stormed)

    def _run_busy(self, most: int) -> int:
        """Run up to ``most`` busy ticks at once (``runtime.busy``): ticks in which only
        the workloads the kernel runs start and finish flows; how many ran (0 when the
        next needs Python: the caller steps it)."""
        most = min(most, uneventful.MOST_TICKS)
        layout = self._tick
        if (
            not busy.ENABLED
            or most < busy.MIN_TICKS
            or self.profile.routing == "spray"
            or self.static_routes
            or not self._may_run_at_once(blackhole=True, recovering=True)
        ):
            return 0
        cw = busy.compiled_workloads(self.workloads)
        if cw is None:
            return 0
        # the others first: the kernel runs until one of them could act
        busy_from = self.sim_time_s + 0.5 * self.dt_s
        horizon = self._quiet_until(busy_from, besides=cw.places, resends=False)
        if busy_from >= horizon:
            return 0
        assert isinstance(layout, _tick_kernels.CompiledTick)
        if not layout.starts_at_once(self.topo):
            return 0
        conditions = self._settled_links()
        if conditions is None:
            return 0
        goodput, cap, stormed = conditions
        # the last index, as it is: the kernel rebuilds it after the tick's starts if the
        # flows changed since (rebuilt here, it would be built twice in a tick)
        idx = self._index
        if (
            idx is None
            or idx.size == 0
            or idx.size >= _tick_kernels.parallel_from_entries()
            or not idx.feedforward
            or not layout._sums
            or not layout._solved
            or (self.roce is None and not layout._free)
            or (self.roce is not None and self.roce.dcqcn.rc.size < self.flows.capacity)
        ):
            return 0
        return self._run_busy_kernel(layout, idx, cw, most, horizon, goodput, cap, stormed)

    def _run_busy_kernel(
        self,
        layout: _tick_kernels.CompiledTick,
        idx: EntryIndex,
        cw: busy.CompiledWorkloads,
        most: int,
        horizon: float,
        goodput: NDArray[np.float64],
        cap: NDArray[np.float64],
        stormed: NDArray[np.bool_],
    ) -> int:
        """The busy ticks to ``horizon`` in one compiled call, and what ``step`` would
        have left written back; the last tick, when flows of another workload ended in
        it or (RoCE) a PFC watchdog fired or a paused queue's sender is stopped, is
        finished here as ``step`` finishes it."""
        dt = self.dt_s
        groups = self._kernel_groups(layout, idx, most, horizon, goodput, cap, stormed)
        dead = busy.DeadLinks.of(self)
        args = busy.kernel_arguments(
            self,
            layout,
            groups,
            self._workload_rngs,
            self._class_rows,
            cw,
            (idx.last, idx.last_flow, idx.version),
            _tick_kernels.parallel_from_entries(),
            dead,
        )
        run = busy.run_kernel(args)
        if run.failed:
            raise RuntimeError("busy ticks: a batch of flows could not be started or filed")
        if cw.rpc is not None:
            # (before the tick that stopped the run, too: its arrivals may be drawn)
            cw.rpc.busy_done(*run.rpc)
            arrivals = cw.rpc.busy_state()
            assert arrivals is not None
            arrivals[0].resume(*run.arrivals)
        # (before the tick that stopped the run too: its bytes lost at a dead link, which
        # Python's step of that tick finds gone)
        fl = self.flows
        fl.busy_done(run.n_flows, run.live_end, run.version)
        fl.n_waiting, fl.next_resend_s = run.waiting
        dead.lost_back()
        self.dropped_bytes = run.dropped
        if run.started == 0:
            return 0
        self._ticks_run(run.t_start, run.d_start, run.whole, run.end_s, run.delivered)
        self.injected_bytes = run.injected
        self.completed_flows = run.completed
        self.hop_updates = run.hop_updates
        if run.batches:  # (``Admission.fabric_admit``: a batch let in whole, so room)
            self.faults.admission.capped = False
        if run.built_buf.size:
            idx = _tick_kernels.index_from_buffer(
                run.built_buf, run.built_bounds, run.index_version
            )
            self._index = idx
            layout._index_entries[0] = idx.size
        solve_links, solve_bufs, move_links, move_bufs = run.stale
        self._links_taken_back(
            layout, run.tick.occupancy if self.roce is not None else None, run.tick.dq_open,
            run.tick.rate, [solve_links, solve_bufs], [move_links, move_bufs],
        )  # fmt: skip
        if self.roce is not None:
            self.roce.after_ticks_at_once(run.tick.pause, run.cnps, cleared_watch=run.whole > 0)
        else:
            self.link_book.paused = run.tick.starved
        if cw.bulk is not None:
            cw.bulk.busy_done(*run.bulk)
        if cw.alltoall is not None:
            cw.alltoall.busy_done(*run.alltoall)
        if run.whole == run.started:
            return run.started
        # the last tick needs Python: what step does after the flow control
        if self.roce is not None:
            self.roce.report_after_tick(
                self, idx, run.tick.new_backlog, run.tick.fired, run.tick.blocked
            )
        if run.tick.done.size:
            assert self.solution is not None
            self._complete(idx, self.solution, cap, run.tick.done, run.end_s, dt)
        self._finish_tick(self.faults.seen_status, dt)
        return run.started

    def _may_run_at_once(self, blackhole: bool = False, recovering: bool = False) -> bool:
        """What both kinds of ticks at once need (``runtime.uneventful``, ``runtime.busy``):
        the compiled tick, no IB congestion control, no fault that Python must still
        follow (``_faults_at_rest``; with ``blackhole``, also links down on RoCE that
        routing does not know of yet, and with ``recovering`` such a link rerouted whose
        recovery is measured, which the busy kernel follows: ``recovery.blackholing``), the
        kernels compiled (not held back). A flow waiting for its ACK timeout waits out of
        the solve: its resend ends the run before it, but for the busy kernel's, which
        resends it (``_quiet_until``)."""
        return (
            self.solver == "compiled"
            and self.ibcc is None
            and (
                self._faults_at_rest()
                or (blackhole and recovery.blackholing(self, recovering=recovering))
            )
            and not uneventful.waiting_for_kernel()
        )

    def _faults_at_rest(self) -> bool:
        """No fault that Python must follow from tick to tick (``FaultBook.at_rest``: at
        most links or switches down whose timeline is behind them). One that ends by
        itself (a duration) ends the run before it (``_quiet_until``)."""
        return self.faults.at_rest(self.link_book.known_down)

    def _settled_links(
        self,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]] | None:
        """The links' goodput, capacity and stormed queues, if they are as the last tick's
        fault tracking saw them and no queue is stormed (ticks at once take them as
        fixed); else None."""
        status, goodput, cap, stormed, any_stormed = self._link_conditions()
        if self.faults.seen_status is not status or any_stormed:
            return None
        return goodput, cap, stormed

    def _kernel_groups(
        self,
        layout: _tick_kernels.CompiledTick,
        idx: EntryIndex,
        most: int,
        horizon: float,
        goodput: NDArray[np.float64],
        cap: NDArray[np.float64],
        stormed: NDArray[np.bool_],
    ) -> uneventful.KernelGroups:
        """The ticks-at-once kernels' arguments from the fabric as it is now
        (``runtime.uneventful.kernel_groups``)."""
        return uneventful.kernel_groups(
            most=most,
            horizon_s=horizon,
            clock=(self.sim_time_s, self.tick, self._epoch_tick, self._epoch_s, self.dt_s),
            totals=(self.delivered_bytes, self.dropped_bytes),
            idx=idx,
            layout=layout,
            flows=self.flows,
            links=self.link_book,
            cap=cap,
            goodput=goodput,
            stormed=stormed,
            ber=self.faults.ber,
            to_endpoint=self.to_endpoint,
            endpoint_queues=self._endpoint_queues,
            bandwidth_Bps=self.topo.links.bandwidth_Bps,
            roce=self.roce,
            profile=self.profile,
            n_vls=self.n_vls,
            rng=self.rng,
        )

    def _links_taken_back(
        self,
        layout: _tick_kernels.CompiledTick,
        occupancy: NDArray[np.float64] | None,
        dq_open: NDArray[np.intp],
        rate: NDArray[np.float64],
        solve_stale: list[NDArray[np.intp]],
        move_stale: list[NDArray[np.intp]],
    ) -> None:
        """After ticks run at once: the link book as their move left it (the buffers'
        ``occupancy`` when PFC's drops changed it, else the move's), the links and buffers
        the last tick's solve and move used (the next's to clear), and the last solution
        (its padded ``rate``)."""
        lb = self.link_book
        link_rate, occ_pad, drain_pad, _ = layout._sums
        lb.link_rate = link_rate
        lb.occupancy = occ_pad[: lb.occupancy.size] if occupancy is None else occupancy
        lb.buffer_drain = drain_pad[: lb.buffer_drain.size]
        lb.dq_open = dq_open
        layout._stale[:] = move_stale
        layout._solved_stale[:] = solve_stale
        level, _, first_share, alpha, credit_level = layout._solved
        self.solution = Solution(
            padded=rate,
            level=level,
            alpha=alpha,
            share=first_share,
            credit_level=credit_level if self.roce is None else None,
        )

    def _ticks_run(
        self,
        t_start: NDArray[np.float64],
        d_start: NDArray[np.float64],
        whole: int,
        end_s: float,
        delivered: float,
    ) -> None:
        """After ticks run at once (their start times and the bytes delivered by then,
        ``whole`` of them run whole, to ``end_s`` with ``delivered`` in all): what their
        Python would have kept, the history each tick's fault tracking appends at its start
        and the window each whole tick appends at its end, and the clock."""
        uneventful.extend(self.faults.delivered_history, t_start, d_start)
        ends = np.append(t_start[1:], end_s)[:whole]
        uneventful.extend(self._window, ends, np.append(d_start[1:], delivered)[:whole])
        self.delivered_bytes = delivered
        self.tick += whole
        self.sim_time_s = end_s

    def _quiet_until(
        self, busy_from: float, besides: frozenset[int] = frozenset(), resends: bool = True
    ) -> float:
        """The earliest time a workload (but those at the places ``besides``), a scheduled
        command, the fault tracking or (with ``resends``) a flow's resend could act; as
        soon as one could act by ``busy_from``, that time (the others are not asked)."""
        now, dt = self.sim_time_s, self.dt_s
        first = float(self.schedule[0][0]) if self.schedule else np.inf
        # Python's: a fault's end (``expire``), the next step of a link-down's timeline
        # (``recovery.track``), a flow's resend after its ACK timeout (``resend_due``)
        first = min(first, self.faults.next_end_s(), recovery.next_step_s(self))
        if resends:
            first = min(first, self.flows.next_resend_s - RESEND_EPS_S)
        for i, wl in enumerate(self.workloads):
            if i in besides:
                continue
            first = min(first, wl.quiet_until(now, dt))
            if first <= busy_from:
                break
        return float(first)

    def _pass_idle_ticks(self, most: int, horizon: float) -> int:
        """Ticks with nothing in flight: only the time passes (``step``'s early return),
        worked out for all of them at once."""
        dt = self.dt_s
        starts = uneventful.idle_starts(
            self.sim_time_s, self.tick, self._epoch_tick, self._epoch_s, dt, most
        )
        n = int(np.count_nonzero(starts[:most] + 0.5 * dt < horizon))
        if n == 0:
            return 0
        self.link_book.link_rate[:] = 0.0
        delivered = np.full(n, self.delivered_bytes)
        uneventful.extend(self.faults.delivered_history, starts[:n], delivered)
        uneventful.extend(self._window, starts[1 : n + 1], delivered)
        self.tick += n
        self.sim_time_s = float(starts[n])
        return n

    def _run_at_once(
        self,
        layout: CompiledTick,
        idx: EntryIndex,
        most: int,
        horizon: float,
        goodput: NDArray[np.float64],
        cap: NDArray[np.float64],
        stormed: NDArray[np.bool_],
    ) -> int:
        """Steps 4-7 of the ticks to ``horizon`` in one compiled call, and what ``step``
        would have left written back; the last tick, when it finished flows or has a PFC
        event, is finished here as ``step`` finishes it."""
        dt = self.dt_s
        groups = self._kernel_groups(layout, idx, most, horizon, goodput, cap, stormed)
        run = uneventful.run_kernel(groups)
        if run.started == 0:
            return 0
        self._ticks_run(run.t_start, run.d_start, run.whole, run.end_s, run.delivered)
        self.dropped_bytes = run.dropped
        self.hop_updates += idx.size * run.started
        used = [idx.csr.used_links, idx.csr.used_bufs]
        self._links_taken_back(
            layout, run.occupancy if self.roce is not None else None, run.dq_open, run.rate,
            used, used,
        )  # fmt: skip
        if self.roce is not None:
            self.roce.after_ticks_at_once(run.pause, run.cnps, cleared_watch=run.whole > 0)
        else:
            self.link_book.paused = run.starved
        if run.whole == run.started:
            return run.started
        # the last tick needs Python: what step does after the flow control
        if self.roce is not None:
            self.roce.report_after_tick(self, idx, run.new_backlog, run.fired, run.blocked)
        if run.done.size:
            assert self.solution is not None
            self._complete(idx, self.solution, cap, run.done, run.end_s, dt)
        self._finish_tick(self.faults.seen_status, dt)
        return run.started

    #: the methods ``step`` calls, by name, in its order: what a profiler times one by one
    #: (``benchmarks/bench_breakdown.py``)
    STEPS = (
        "_apply_due",
        "_generate",
        "_link_conditions",
        "_track_link_changes",
        "_current_index",
        "_rates",
        "_move",
        "_flow_control",
        "_complete",
        "_finish_tick",
    )

    def step(self) -> None:
        """Advance one tick of ``dt_s``, in the order docs/ARCHITECTURE.md lists.

        ``kernels.uneventful`` runs steps 4-7 of an uneventful tick in the same order with
        the same arrays (``run_ticks``): a change here is a change there
        (``tests/test_uneventful.py`` holds the two to the same results bit for bit)."""
        dt = self.dt_s
        now = self.sim_time_s
        self._apply_due(now)  # 1. scheduled commands; faults whose time is up end
        self._generate(now, dt)  # 2. the workloads' new flows, routed
        status, goodput, cap, stormed, any_stormed = self._link_conditions()  # 3. the links
        self._track_link_changes(status, now)
        idx = self._current_index()  # 4. the (hop, flow) entries in flight
        if idx.size == 0:
            self.link_book.link_rate[:] = 0.0
            self._finish_tick(status, dt)
            return
        # the flow table's per-hop arrays, flat: one gather per tick instead of a 2-D one
        backlog = self._tick.flow_values(self.flows.backlog.reshape(-1), idx)
        sol = self._rates(idx, backlog, cap, stormed, any_stormed, now, dt)  # 5. the rates
        self.solution = sol
        moved = self._move(idx, sol, backlog, goodput, dt)  # 6. bytes, buffers, counters
        self._flow_control(idx, sol, moved, stormed, now, dt)  # 7. PFC/ECN/DCQCN, credits
        self.hop_updates += idx.size
        if moved.done.size:  # 8. the flows whose bytes have all arrived
            self._complete(idx, sol, cap, moved.done, now, dt)
        self._finish_tick(status, dt)

    def _apply_due(self, now: float) -> None:
        """End the faults that expire, then apply the scheduled fault commands due now (in
        that order: a fault scheduled where the same one ends follows it)."""
        self.faults.expire(now)
        while self.schedule and self.schedule[0][0] <= now + 1e-15:
            _, cmd = self.schedule.pop(0)
            recovery.apply_scheduled(self, cmd, now)

    def _rates(
        self,
        idx: EntryIndex,
        backlog: NDArray[np.float64],
        cap: NDArray[np.float64],
        stormed: NDArray[np.bool_],
        any_stormed: bool,
        now: float,
        dt: float,
    ) -> Solution:
        """The tick's rates under the fabric's flow control: the PFC limits on RoCE, the
        credits (and IB congestion control) on the credit fabric."""
        rate_table = self.flows.rate.reshape(-1)  # last tick's rates: the solve's start
        limit = self._tick.start_limit(idx, self.flows.start_s, cap, now, dt)
        if self.roce is not None:
            entry_cap, room = self.roce.limits(self, idx, backlog, cap, stormed, now, dt)
            if limit is not None:
                entry_cap = np.minimum(entry_cap, limit)
            return self._solve(idx, backlog, cap, room, dt, rate_table, entry_cap)
        links = self.link_book
        # the credits: each buffer's free space less its credit loop's; a NIC sinks at
        # line rate
        free = self._tick.credit_room(idx, links, self._endpoint_queues, now, dt)
        if any_stormed:
            # a NIC that stops taking data (stuck, storming) returns no credits
            base = np.full(idx.size, np.inf) if limit is None else limit
            limit = np.where(stormed[idx.queue], 0.0, base)
        if self.ibcc is not None:
            limit = self.ibcc.limits(self, idx, limit)
        return self._solve(idx, backlog, cap, free, dt, rate_table, limit)

    def _move(
        self,
        idx: EntryIndex,
        sol: Solution,
        backlog: NDArray[np.float64],
        goodput: NDArray[np.float64],
        dt: float,
    ) -> Moved:
        """Move the tick's bytes: the flow table, the link book and the counters."""
        moved = self._tick.move_and_count(
            idx,
            sol,
            backlog,
            self.flows,
            self.link_book,
            goodput,
            self.faults.ber,
            self.roce is not None,  # RoCE goes back N from the source (``_goodput``)
            self.profile.mtu_bytes,
            dt,
        )
        self.delivered_bytes += moved.delivered_bytes
        return moved

    def _flow_control(
        self,
        idx: EntryIndex,
        sol: Solution,
        moved: Moved,
        stormed: NDArray[np.bool_],
        now: float,
        dt: float,
    ) -> None:
        """After the bytes moved: RoCE's pauses, ECN marks and DCQCN, or the credit
        fabric's waits for credit (and IB congestion control's marks)."""
        if self.roce is not None:
            self.roce.after_tick(
                self,
                idx,
                sol.rate,
                moved.arrival,
                moved.new_backlog,
                moved.inflow,
                sol,
                stormed,
                now,
                dt,
            )
            return
        if self.ibcc is not None:
            self.ibcc.after_tick(self, idx, sol.rate, moved.new_backlog, dt)
        links = self.link_book
        self._tick.credit_loop_fill(idx, moved, links)
        links.paused = self._tick.credit_wait(
            sol.alpha,
            moved.inflow,
            idx,
            moved.new_backlog,
            self.n_vls,
            dt,
            links.counters["transmit_wait_seconds_total"],
        )

    def _link_conditions(self) -> LinkConditions:
        """What the faults make of the links this tick: (status, goodput, payload
        capacity, stormed queues). With no fault open (the usual case) they are the same
        every tick, so they are kept (read-only) instead of recomputed. With faults open
        they change only when the fault book's per-link state does (an injection, a
        clear, a flap's phase, a credit leak): they are kept too, and recomputed when
        that state differs from the one they were worked out from (a link down for a
        second of BFD costs four comparisons a tick, not the arithmetic over every link)."""
        book = self.faults
        if not book.settled():
            state: tuple[NDArray[Any], ...] = (
                book.ber,
                book.buffer_factor,
                book.down_count,
                book.flap_down,
            )
            storms = tuple(f.target for f in book.active("pfc_storm"))
            kept = self._faulted
            if (
                kept is not None
                and kept.profile is self.profile
                and kept.storms == storms
                and all(np.array_equal(a, b) for a, b in zip(state, kept.state, strict=True))
            ):
                return kept.conditions
            faulted = self._kept_conditions(book.status(), self._goodput())
            self._faulted = _KeptConditions(
                self.profile, tuple(a.copy() for a in state), storms, faulted
            )
            return faulted
        if self._healthy is None or self._healthy[0] is not self.profile:
            L = len(self.topo.links)
            status = np.full(L, LinkStatus.UP, dtype=np.int8)
            self._healthy = (self.profile, self._kept_conditions(status, np.ones(L)))
        return self._healthy[1]

    def _kept_conditions(
        self, status: NDArray[np.int8], goodput: NDArray[np.float64]
    ) -> LinkConditions:
        """The link conditions of ``status`` and ``goodput``, read-only: they are kept
        across ticks, so nothing may write into them."""
        stormed = self._stormed_queues()
        conditions = LinkConditions(
            status, goodput, self.capacity(status, goodput), stormed, bool(stormed.any())
        )
        for a in (conditions.status, conditions.goodput, conditions.capacity, stormed):
            a.setflags(write=False)
        return conditions

    def _current_index(self) -> EntryIndex:
        """The entry index of the flows in flight, rebuilt when the set of flows changed."""
        fl = self.flows
        if self._index is None or self._index.version != fl.version:
            # the last index let go first: the new one may then take its memory, still in
            # the caches from the last tick, instead of memory untouched for a tick (at 10k
            # GPUs a 15 MB buffer: the build took 0.4-0.5 ms longer)
            self._index = None
            self._index = self._tick.build_index(fl)
        return self._index

    def _solve(
        self,
        idx: EntryIndex,
        backlog: NDArray[np.float64],
        cap: NDArray[np.float64],
        free: NDArray[np.float64],
        dt: float,
        rate_table: NDArray[np.float64],
        entry_cap: NDArray[np.float64] | None,
    ) -> Solution:
        """The tick's rates. ``free`` is each buffer's room: credits on the credit fabric,
        the PFC bound on RoCE; ``rate_table`` the flow table's rates, flat (last tick's,
        where each entry's solve starts)."""
        share = None if self.roce is not None or self.solution is None else self.solution.share
        credits = self.roce is None
        # the credit fabric's ports hand credits out flow by flow, and its credits take a
        # round trip over the link to come back; PFC pauses them all
        return self._tick.solve(
            idx, backlog, cap, free, dt, rate_table, entry_cap, share, max_min=credits,
            loop_s=self.link_book.credit_loop_s(credits),
        )  # fmt: skip

    # ------------------------------------------------------------------ RoCE
    def _stormed_queues(self) -> NDArray[np.bool_]:
        """Queues (link, lane) into NICs that refuse data: a PFC storm (or a stuck NIC)."""
        out = np.zeros(len(self.topo.links) * self.n_vls, dtype=bool)
        storms = self.faults.active("pfc_storm")
        if storms:
            nodes = [self.topo.nodes.index[f.target] for f in storms]
            into = np.flatnonzero(np.isin(self.topo.links.dst, nodes))
            out[(into[:, None] * self.n_vls + np.arange(self.n_vls)).ravel()] = True
        return out

    def pfc_paused_queues(self) -> NDArray[np.bool_]:
        """Queues whose upstream is paused now (all False on a credit fabric), to read:
        the array is the fabric's own."""
        if self.roce is None:
            n = len(self.topo.links) * self.n_vls
            if self._never_paused.size != n:  # (made once: a start reads it every tick)
                self._never_paused = np.zeros(n, dtype=bool)
            return self._never_paused
        return self.roce.pfc.paused

    @property
    def pfc(self) -> PfcQueues | None:
        """The PFC queues (RoCE), or None on a credit fabric."""
        return None if self.roce is None else self.roce.pfc

    @property
    def dcqcn(self) -> Dcqcn | None:
        """The DCQCN senders (RoCE), or None on a credit fabric."""
        return None if self.roce is None else self.roce.dcqcn

    @property
    def deadlocks(self) -> int:
        """Deadlocks the detector has reported (always 0 on a credit fabric)."""
        return 0 if self.roce is None else self.roce.deadlocks

    def _finish_tick(self, status: NDArray[np.int8], dt: float) -> None:
        self.tick += 1
        self.sim_time_s = tick_start_s(self._epoch_s, self._epoch_tick, self.tick, dt)
        self._window.append((self.sim_time_s, self.delivered_bytes))

    def _generate(self, now: float, dt: float) -> None:
        for wi, (wl, wl_rng) in enumerate(zip(self.workloads, self._workload_rngs, strict=True)):
            req = wl.generate(now, dt, wl_rng)
            if len(req):
                cls = self.classes.index(wl.traffic_class)
                self.start_flows(
                    req.src,
                    req.dst,
                    req.size_bytes,
                    traffic_class=cls,
                    workload=wi,
                    tag=req.tag,
                    ready_s=req.ready_s,
                    extra_latency_s=req.extra_latency_s,
                )

    def _complete(
        self,
        idx: EntryIndex,
        sol: Solution,
        cap: NDArray[np.float64],
        flows: NDArray[np.intp],
        now: float,
        dt: float,
    ) -> None:
        """Retire the flows whose bytes have all arrived this tick and report them."""
        fl = self.flows
        # sub-tick finish: the latest hop of each finished flow (``step.finish_within_tick``);
        # the latency of each flow now whole filed in its class's histogram
        whole, whole_finish, rounding = self._tick.finish_flows(
            idx, sol, cap, flows, fl, now, dt, self.topo.links.bandwidth_Bps, self._class_rows
        )
        # the last bytes that floating-point rounding left in the network (at most a
        # billionth of the flow) are delivered with it, so the byte count stays exact
        self.delivered_bytes += rounding
        if whole.size == 0:
            return
        self.completed_flows += int(whole.size)
        # the completions of each workload, in the order they finished (a fault's own
        # flows, such as an incast's, belong to none: workload -1)
        wls = fl.workload[whole]
        if wls[0] >= 0 and (wls.size == 1 or (wls == wls[0]).all()):
            # one workload's flows only (most ticks): all of them, in the order finished
            self._report(int(wls[0]), whole, whole_finish, now + dt)
            return
        order, bounds = self._tick.by_workload(wls, len(self.workloads))
        lo = 0
        for wi, hi in enumerate(bounds.tolist()):
            if hi > lo:
                pick = order[lo:hi]
                self._report(wi, whole[pick], whole_finish[pick], now + dt)
            lo = hi

    def _report(
        self, wi: int, heads: NDArray[np.intp], finish_s: NDArray[np.float64], now: float
    ) -> None:
        """Hand workload ``wi`` its flows that are whole (``heads``, in the order they
        finished, at ``finish_s``)."""
        fl = self.flows
        self.workloads[wi].on_complete(
            Completions(
                tag=fl.tag[heads],
                src=fl.src[heads],
                dst=fl.dst[heads],
                size_bytes=fl.parent_size[heads],
                start_s=fl.start_s[heads],
                finish_s=finish_s,
            ),
            now,
        )

    def _track_link_changes(self, status: NDArray[np.int8], now: float) -> None:
        # detection, reroute / reconvergence, time-driven faults, measured recovery
        recovery.track(self, status, now)

    def _reroute(self, links: NDArray[np.int64]) -> int:
        """Give flows crossing failed links new paths (see ``recovery.reroute``)."""
        return recovery.reroute(self, links)[0]

    # ------------------------------------------------------------------ commands
    def apply(self, cmd: Command) -> Mapping[str, Any]:
        """Apply a fabric command (faults, parameters, workloads).

        Raises:
            CommandError: the command does not fit this fabric.
        """
        now = self.sim_time_s
        if isinstance(cmd, InjectFault):
            f = self.faults.inject(cmd, now)
            return {"fault_id": f.id}
        if isinstance(cmd, ClearFault):
            return {"cleared": self.faults.clear(cmd, now)}
        if isinstance(cmd, SetParam):
            return self._set_param(cmd)
        if isinstance(cmd, SetTick):
            return {"dt_s": self.set_dt(cmd.dt_s)}
        if isinstance(cmd, StartWorkload | StopWorkload):
            wl = self._workload(cmd.workload)
            if isinstance(cmd, StartWorkload):
                wl.start()
            else:
                wl.stop()
            return {"workload": wl.name, "running": wl.running}
        raise CommandError(f"the fabric does not handle {type(cmd).__name__}")

    def _workload(self, name: str) -> Workload:
        for wl in self.workloads:
            if wl.name == name:
                return wl
        raise unknown("workload", name, [w.name for w in self.workloads])

    def _set_param(self, cmd: SetParam) -> Mapping[str, Any]:
        spec = TUNABLE.get(cmd.name)
        if spec is None:
            raise unknown("parameter", cmd.name, TUNABLE)
        if not spec.low <= cmd.value <= spec.high:
            raise CommandError(
                f"{cmd.name} must be in [{spec.low:g}, {spec.high:g}], got {cmd.value:g}"
            )
        try:
            new = self.profile.with_overrides(**{cmd.name: cmd.value})
        except ValueError as exc:  # a value the model cannot run (profiles.check_value)
            raise CommandError(str(exc)) from None
        if new.ecn_kmin_s > new.ecn_kmax_s:
            raise CommandError(
                f"ECN Kmin ({new.ecn_kmin_s:g} s) must not exceed Kmax ({new.ecn_kmax_s:g} s)"
            )
        self.profile = new
        if cmd.name == "buffer_per_vl_bytes" and self.roce is None:
            self.buffer_bytes[:] = cmd.value
        if cmd.name == "switch_latency_s":  # the credit loops take the switch's time too
            self.link_book.credit_delay[:] = credit_loop_delay(
                self.topo.links, self.n_vls, cmd.value
            )
        self.emit("info", "param_set", cmd.name, f"{cmd.name} set to {cmd.value:g}")
        return {cmd.name: cmd.value}

    def params(self) -> dict[str, float]:
        """The live-tunable parameters and their values."""
        return {name: float(getattr(self.profile, name)) for name in TUNABLE}

    # ------------------------------------------------------------------ output
    def throughput_Bps(self) -> float:
        """Delivered bytes per second over the recent window."""
        if len(self._window) < 2:
            return 0.0
        (t0, b0), (t1, b1) = self._window[0], self._window[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0

    def link_state(self) -> LinkState:
        """Per-link arrays for a snapshot."""
        L = len(self.topo.links)
        status = self.faults.status()
        bw = self.topo.links.bandwidth_Bps
        occ = self.occupancy.reshape(L, self.n_vls)
        room = self.buffer_bytes - self.occupancy
        if self.roce is None:
            # the credits of the bytes on the cable and of those on their way back are not
            # the sender's (docs/MODEL.md, "Credits")
            room = room - self.link_book.loop_bytes_at(self.sim_time_s)
        free = room.reshape(L, self.n_vls).min(axis=1)
        free = np.where(self.to_endpoint, self.buffer_bytes.reshape(L, self.n_vls)[:, 0], free)
        c = self.counters
        return LinkState(
            status=frozen(status),
            utilisation=frozen(self.link_rate / bw),
            queue_bytes=frozen(occ.sum(axis=1)),
            queue_vl_bytes=frozen(occ),
            credits_bytes=frozen(np.maximum(free, 0.0)),
            paused=frozen(self.paused),
            **{k: frozen(v) for k, v in c.items()},
            **{k: frozen(v) for k, v in self.pause_vl.items()},
        )

    def snapshot(
        self,
        *,
        wall_time_s: float = 0.0,
        target_speed: float = 0.0,
        measured_speed: float = 0.0,
        running: bool = True,
    ) -> Snapshot:
        """An immutable picture of the fabric now."""
        now = self.sim_time_s
        return Snapshot(
            cluster=self.cluster,
            scenario=self.scenario,
            profile=self.profile.name,
            flow_control=self.profile.flow_control,
            seed=self.seed,
            tick=self.tick,
            sim_time_s=now,
            dt_s=self.dt_s,
            wall_time_s=wall_time_s,
            target_speed=target_speed,
            measured_speed=measured_speed,
            running=running,
            nodes=self.topo.nodes,
            links=self.topo.links,
            link_state=self.link_state(),
            totals=Totals(
                injected_bytes_total=self.injected_bytes,
                cancelled_bytes_total=self.cancelled_bytes,
                delivered_bytes_total=self.delivered_bytes,
                dropped_bytes_total=self.dropped_bytes,
                in_flight_bytes=self.flows.in_flight_bytes(),
                throughput_Bps=self.throughput_Bps(),
                active_flows=self.flows.n_parents,
                completed_flows_total=self.completed_flows,
                waiting_flows=self.flows.n_waiting,
            ),
            latency={c: h.freeze() for c, h in self.class_hist.items()},
            workloads=workload_views(self.workloads, now),
            faults=self.faults.views(),
            events=self.events.latest(100),
            params=self.params(),
        )
