"""The coordinator of a fabric run one engine per plane: to the engine, the console, the
exporters and the recorder it is a fabric (``PlanedFabric``).

Each batch of ticks it runs the workloads tick by tick, sprays each message over the
planes (``spray``), hands every plane its parts for the batch at once, lets the planes
run the batch, and collects the parts that finished: a message completes when its last
part does, and its workload hears of it at the end of the batch. A part a plane's
fabric-wide cap refuses makes its message one that never completes: its workload hears
of it at the batch's end too (``Workload.on_refused``, as one fabric tells it at once),
and a closed loop's sender tries again. A batch of one tick is
what a single fabric does; a longer batch costs fewer round trips to the planes and
delays what a workload hears by up to the batch (docs/OPERATIONS.md, "One engine per
plane"). Batches end on a fixed grid of ticks (every ``batch_ticks``-th), and a call that
ends between two only splits a batch in two round trips: the results depend on the
batch size, not on how a caller splits its ticks.

Commands apply between batches: a fault goes to the plane that owns its target (a link
or a switch), or to every plane (a NIC's PFC storm stops all its ports; an incast sends
its share of the bytes on each), or stays here when the workloads read it themselves (a
slow storage target, an IBGDA version mismatch); a tick length or a parameter goes to
every plane; workloads start and stop here. A snapshot merges the
planes': their links in the whole fabric's numbering, their byte counts summed, the
messages' latencies per class from here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import (
    ClearFault,
    Command,
    CommandError,
    InjectFault,
    SetParam,
    SetTick,
    StartWorkload,
    StopWorkload,
)
from fabric_core.faults import recovery
from fabric_core.faults.book import FaultBook, FaultView, select_cleared
from fabric_core.net.profiles import Profile
from fabric_core.net.topology import Topology
from fabric_core.planes.messages import MessageTable
from fabric_core.planes.plane import PlaneDone, PlaneParts, PlaneSpec, PlaneState
from fabric_core.planes.pool import PlaneLostError, PlanePool
from fabric_core.planes.split import PlaneCut, cut_planes, plane_topology
from fabric_core.runtime.events import EventLog
from fabric_core.runtime.fabric import Solver, check_tick, tick_start_s, traffic_classes
from fabric_core.runtime.scenario import Scenario, ScenarioError
from fabric_core.runtime.snapshot import Event, LinkState, Snapshot, Totals, workload_views
from fabric_core.tick.histogram import HistogramRows
from fabric_core.workloads import Workload
from fabric_core.workloads.base import admission_notes, tick_notes, workload_rngs

#: fault kinds on an endpoint that stop all its ports, so every plane takes them
EVERY_PLANE_FAULTS = ("pfc_storm",)
#: fault kinds that send traffic: every plane sends its share (the bytes over the planes)
SPRAYED_FAULTS = ("incast",)
#: where the coordinator keeps a fault the workloads read themselves (a slow storage
#: target, an IBGDA version mismatch): in its own fault book, not in a plane
HERE = -1
#: the default batch: ticks a plane runs per round trip (docs/OPERATIONS.md)
DEFAULT_BATCH_TICKS = 8
MAX_EVENTS = 1000


def parts_of(size: NDArray[np.float64], planes: int, mtu: float) -> NDArray[np.int64]:
    """How many planes each message is sprayed over: as many as it has packets
    (``mtu``), up to all of them."""
    return np.clip(np.ceil(size / mtu), 1, planes).astype(np.int64)


def spray(
    first_plane: NDArray[np.int64], size: NDArray[np.float64], parts: NDArray[np.int64], planes: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The parts of messages sprayed over ``planes`` planes: a message of ``size`` bytes
    goes over ``parts`` planes (``parts_of``) in equal shares, starting at its
    ``first_plane`` and going round. Returns, per part, the message's position, its
    plane and its bytes."""
    owner = np.repeat(np.arange(size.size), parts)
    nth = np.arange(owner.size) - np.repeat(np.cumsum(parts) - parts, parts)
    plane = (first_plane[owner] + nth) % planes
    return owner, plane, size[owner] / parts[owner]


class PlanedFabric:
    """A multi-plane fabric run one engine per plane (see the module docstring)."""

    def __init__(
        self,
        scn: Scenario,
        pool: Callable[[Sequence[PlaneSpec]], PlanePool],
        *,
        batch_ticks: int = DEFAULT_BATCH_TICKS,
        solver: Solver = "compiled",
    ) -> None:
        """Cut ``scn``'s fabric at its planes and start a plane engine for each in the
        pool ``pool`` makes.

        Raises:
            ScenarioError: the scenario cannot run one engine per plane (one plane,
                scale-up domains, static routes, or a workload that needs the planes).
        """
        if batch_ticks < 1:
            raise ValueError(f"the batch must be at least 1 tick, got {batch_ticks}")
        try:
            one_plane = plane_topology(scn.profile, scn.topology)
            self.topo: Topology = scn.build_topology()
            self.cuts: list[PlaneCut] = cut_planes(self.topo, one_plane)
        except ValueError as exc:
            raise ScenarioError(f"{scn.source}: one engine per plane: {exc}") from None
        if scn.routes:
            raise ScenarioError(
                f"{scn.source}: one engine per plane: static routes are not supported"
            )
        self.workloads: list[Workload] = scn.build_workloads()
        self.profile: Profile = scn.profile
        self.seed = scn.seed
        self.cluster, self.scenario = scn.cluster, scn.name
        self.solver: Solver = solver
        self.batch_ticks = batch_ticks
        self.dt_s = scn.dt_s
        self.tick = 0
        self.sim_time_s = 0.0
        self._epoch_tick, self._epoch_s = 0, 0.0
        self.hop_updates = 0
        #: whether a plane's ticks ran as Python in the last batch, its kernels compiling
        #: aside (``EngineFabric``: a live engine keeps its tick meanwhile)
        self.compiling_aside = False
        #: per plane, its admission's refusals (flows, bytes) counted so far
        self._plane_refused = [(0, 0.0)] * len(self.cuts)
        self.completed_flows = 0
        self.events = EventLog(lambda: self.sim_time_s, MAX_EVENTS)
        # the whole fabric's fault book checks commands as a single fabric would and keeps
        # the faults the workloads read themselves; the network's faults live in the planes
        self.faults = FaultBook(
            self.topo.links, self.topo.nodes, self.emit, flow_control=scn.profile.flow_control
        )
        self.classes = traffic_classes(self.workloads)
        self._class_rows = HistogramRows(len(self.classes))
        self.class_hist = dict(zip(self.classes, self._class_rows.hists, strict=True))
        self._wl_class = np.array(
            [self.classes.index(wl.traffic_class) for wl in self.workloads], dtype=np.int64
        )
        self._workload_rngs = workload_rngs(scn.seed, self.workloads)  # (their own streams)
        for wl, wl_rng in zip(self.workloads, self._workload_rngs, strict=True):
            wl.bind(self.topo.gpus, self.topo.storage, wl_rng)
            wl.attach(self)
        self.messages = MessageTable()
        #: messages completed in the batch under way, not yet handed to their workloads
        self._finished: list[NDArray[np.int64]] = []
        #: messages a plane refused a part of, not yet handed back to their workloads
        self._refused: list[NDArray[np.int64]] = []
        #: refused messages with no part left in a plane, their slots not yet freed
        self._ended: list[NDArray[np.int64]] = []
        self.planes = len(self.cuts)
        # where each whole-fabric link and switch is in its plane (-1: not in it)
        self._link_plane = np.full(len(self.topo.links), -1, dtype=np.int64)
        self._link_local = np.full(len(self.topo.links), -1, dtype=np.int64)
        self._node_local = np.full((self.planes, len(self.topo.nodes)), -1, dtype=np.int64)
        for cut in self.cuts:
            self._link_plane[cut.link_global] = cut.plane
            self._link_local[cut.link_global] = np.arange(cut.link_global.size)
            self._node_local[cut.plane, cut.node_global] = np.arange(cut.node_global.size)
        #: global fault id -> its kind, target and (plane, the plane's fault id) pairs
        self._faults: dict[str, tuple[str, str, list[tuple[int, str]]]] = {}
        self._next_fault = 1
        #: the plane lost (the run cannot go on), once one is
        self.lost: PlaneLostError | None = None
        self.schedule: list[tuple[float, InjectFault | ClearFault]] = []
        self.schedule_skipped: list[str] = []  # those refused when due (recovery.skipped)
        for i, f in enumerate(scn.faults):
            try:
                cmd = recovery.scheduled_command(f.kind, f.target, dict(f.params), f.duration_s)
                if isinstance(cmd, InjectFault):
                    self._route_fault(cmd)
            except CommandError as exc:
                raise ScenarioError(f"{scn.source}: fault[{i}]: {exc}") from None
            self.schedule.append((f.at_s, cmd))
        self.schedule.sort(key=lambda s: s[0])
        specs = [
            PlaneSpec(
                plane=cut.plane,
                topo=cut.topo,
                profile=scn.profile,
                dt_s=scn.dt_s,
                seed=scn.seed,
                workloads=tuple((wl.name, wl.traffic_class) for wl in self.workloads),
                class_vl=dict(scn.classes),
                solver=solver,
                cluster=scn.cluster,
                scenario=scn.name,
            )
            for cut in self.cuts
        ]
        self.pool: PlanePool = pool(specs)
        #: each plane's last state (a snapshot of a run whose plane was lost shows that
        #: plane as it was last seen, from the start on)
        self._states: list[PlaneState] = list(self.pool.call("state", [()] * self.planes))
        self.warn_of_tick()

    # ---------------------------------------------------------------- the clock
    def _time_of(self, tick: int) -> float:
        """Simulated time at the start of ``tick``, as a fabric has it (``tick_start_s``)."""
        if tick == self.tick:
            return self.sim_time_s
        return tick_start_s(self._epoch_s, self._epoch_tick, tick, self.dt_s)

    def emit(self, severity: str, kind: str, target: str, message: str) -> None:
        """Add an event to the log the snapshot carries."""
        self.events.emit(severity, kind, target, message)

    def tick_notes(self) -> list[str]:
        """Why the tick is too long for some workloads (as ``Fabric.tick_notes``)."""
        return [note for _, note in tick_notes(self.workloads, self.dt_s)]

    def admission_notes(self) -> list[str]:
        """Why some workloads cannot run whole (as ``Fabric.admission_notes``: each plane
        has the cap, a message is a flow on each plane it is sprayed over, and a workload
        hears of a refused one at the end of a batch)."""
        cap = self.faults.admission.limits.fabric_flows
        notes = admission_notes(self.workloads, cap, retry_every="batch of ticks")
        return [note for _, note in notes]

    def warn_of_tick(self) -> None:
        """Say ``tick_notes`` in the event log (as ``Fabric.warn_of_tick``)."""
        for name, note in tick_notes(self.workloads, self.dt_s):
            self.emit("warning", "tick_too_long", name, note)

    # ---------------------------------------------------------------- running
    def run_ticks(self, n: int) -> None:
        """Advance ``n`` ticks, in batches of at most ``batch_ticks``, each ending where a
        scheduled command is due.

        Raises:
            PlaneLostError: a plane's engine died (an event says which; the run cannot go on).
        """
        if self.lost is not None:
            raise self.lost
        left = n
        while left > 0:
            self._apply_due()
            # batches on a fixed grid of ticks: where a caller splits its ticks changes
            # nothing (a replay splits them elsewhere than the live engine did)
            k = min(left, self.batch_ticks - self.tick % self.batch_ticks)
            if self.schedule:
                due = self.schedule[0][0]
                k = max(1, min(k, math.ceil((due - self.sim_time_s) / self.dt_s - 1e-9)))
            self._run_batch(k)
            left -= k
            if self.tick % self.batch_ticks == 0:
                self._deliver()

    def step(self) -> None:
        """Advance one tick."""
        self.run_ticks(1)

    def _apply_due(self) -> None:
        self.faults.expire(self.sim_time_s)
        while self.schedule and self.schedule[0][0] <= self.sim_time_s + 1e-15:
            _, cmd = self.schedule.pop(0)
            try:
                self.apply(cmd)
            except CommandError as exc:
                recovery.skipped(self, cmd, exc)

    def _run_batch(self, k: int) -> None:
        parts = self._generate(k)
        try:
            done: list[PlaneDone] = self.pool.call("advance", [(k, p) for p in parts])
        except PlaneLostError as lost:
            self._lose(lost)
            raise
        self.sim_time_s = self._time_of(self.tick + k)
        self.tick += k
        for d in done:
            if d.tick != self.tick or d.sim_time_s != self.sim_time_s:
                raise RuntimeError(
                    f"a plane is at tick {d.tick} ({d.sim_time_s!r} s), the coordinator at "
                    f"{self.tick} ({self.sim_time_s!r} s)"
                )
        self.hop_updates = sum(d.hop_updates for d in done)
        # (its planes warm their kernels up in their own processes: ``EngineFabric``)
        self.compiling_aside = any(d.compiling_aside for d in done)
        self._count_refused(done)
        self._refuse(done)
        self._complete(done)

    def _count_refused(self, done: list[PlaneDone]) -> None:
        """Add what the planes' admission limits refused since the last batch to the
        coordinator's own count, which the engine exports (``fabtop_flows_refused_total``):
        the whole fabric's refusals are those of its planes (each workload's too, the
        sum of its parts the planes refused)."""
        for p, d in enumerate(done):
            flows, total_bytes = self._plane_refused[p]
            if d.refused_flows > flows:
                self.faults.admission.refuse(d.refused_flows - flows, d.refused_bytes - total_bytes)
            self._plane_refused[p] = (d.refused_flows, d.refused_bytes)
        by_workload: dict[str, tuple[int, float]] = {}
        for d in done:  # (each plane's counts are its whole run's: summed afresh)
            for name, (flows, total_bytes) in d.refused_by_workload.items():
                was = by_workload.get(name, (0, 0.0))
                by_workload[name] = (was[0] + flows, was[1] + total_bytes)
        if by_workload:
            self.faults.admission.refused_by_workload = by_workload

    def _lose(self, lost: PlaneLostError) -> None:
        self.lost = lost
        self.emit("error", "plane_lost", f"plane{lost.plane}", f"{lost}; the run stops here")

    def _generate(self, k: int) -> list[PlaneParts]:
        """The workloads' messages of the next ``k`` ticks, sprayed: each plane's parts."""
        P = self.planes
        chunks: list[list[tuple[NDArray[Any], ...]]] = [[] for _ in range(P)]
        dt = self.dt_s
        for i in range(k):
            tick = self.tick + i
            now = self._time_of(tick)
            for wi, wl in enumerate(self.workloads):
                req = wl.generate(now, dt, self._workload_rngs[wi])
                n = len(req)
                if n == 0:
                    continue
                parts = parts_of(req.size_bytes, P, self.profile.mtu_bytes)
                ids = self.messages.add(
                    wi, req.tag, req.src, req.dst, req.size_bytes, req.ready_s, parts
                )
                owner, plane, part_size = spray(ids % P, req.size_bytes, parts, P)
                # NaN: the plane's own endpoint costs, which a fabric gives a request that
                # names none
                extra = (
                    req.extra_latency_s if req.extra_latency_s is not None else np.full(n, np.nan)
                )
                for p in range(P):
                    pick = owner[plane == p]
                    if pick.size == 0:
                        continue
                    chunks[p].append(
                        (
                            np.full(pick.size, tick, dtype=np.int64),
                            np.full(pick.size, wi, dtype=np.int64),
                            req.src[pick].astype(np.int64),
                            req.dst[pick].astype(np.int64),
                            part_size[plane == p],
                            ids[pick],
                            req.ready_s[pick],
                            extra[pick],
                        )
                    )
        out = []
        for p in range(P):
            if not chunks[p]:
                out.append(PlaneParts.empty())
                continue
            cols = [np.concatenate(c) for c in zip(*chunks[p], strict=True)]
            out.append(PlaneParts(*cols))
        return out

    def _refuse(self, done: Sequence[PlaneDone]) -> None:
        """Messages a plane refused a part of: kept to be handed back at the end of the
        batch (``_deliver``), and freed there once no part of theirs is left."""
        message = np.concatenate([d.refused_message for d in done])
        if message.size == 0:
            return
        first, ended = self.messages.refuse(message)
        self._refused.append(first)
        self._ended.append(ended)

    def _complete(self, done: Sequence[PlaneDone]) -> None:
        """Messages whose last part finished: kept for the end of the batch (``_deliver``),
        those a plane refused a part of to be freed there."""
        message = np.concatenate([d.message for d in done])
        if message.size == 0:
            return
        ms = self.messages
        whole = ms.parts_done(
            message,
            np.concatenate([d.start_s for d in done]),
            np.concatenate([d.finish_s for d in done]),
        )
        refused = ms.refused[whole]
        if refused.any():
            self._ended.append(whole[refused])
            whole = whole[~refused]
        if whole.size:
            self._finished.append(whole)

    def _deliver(self) -> None:
        """The end of the batch: the messages a plane refused handed back to their
        workloads (in the order refused, then id), and those completed counted, timed per
        class and handed to their workloads in the order they finished (time, then id);
        the slots of the ended ones freed."""
        ms = self.messages
        if self._refused:
            refused = np.concatenate(self._refused)
            self._refused = []
            for wl, pick in self._by_workload(refused):
                wl.on_refused(ms.requests(pick))
        if self._ended:
            ms.release(np.concatenate(self._ended))
            self._ended = []
        if not self._finished:
            return
        whole = np.concatenate(self._finished)
        self._finished = []
        whole = whole[np.lexsort((whole, ms.finish_s[whole]))]
        # counted and timed here, in one go: the same sums however the batch was split
        self.completed_flows += int(whole.size)
        latency = ms.finish_s[whole] - ms.start_s[whole]
        self._class_rows.observe(self._wl_class[ms.workload[whole]], latency)
        for wl, pick in self._by_workload(whole):
            wl.on_complete(ms.completions(pick), self.sim_time_s)
        ms.release(whole)

    def _by_workload(self, ids: NDArray[np.int64]) -> Iterator[tuple[Workload, NDArray[np.int64]]]:
        """The messages ``ids`` by workload, in the workloads' order: each workload that
        has some, with its own in ``ids``' order."""
        of = self.messages.workload[ids]
        for wi, wl in enumerate(self.workloads):
            pick = ids[of == wi]
            if pick.size:
                yield wl, pick

    # ---------------------------------------------------------------- commands
    def apply(self, cmd: Command) -> Mapping[str, Any]:
        """Apply a fabric command between batches (see the module docstring).

        Raises:
            CommandError: the command does not fit this fabric.
            PlaneLostError: a plane's engine died.
        """
        if self.lost is not None:
            raise CommandError(f"the run has stopped: {self.lost}")
        if isinstance(cmd, InjectFault):
            return {"fault_id": self._inject(cmd)}
        if isinstance(cmd, ClearFault):
            return {"cleared": self._clear(cmd)}
        if isinstance(cmd, SetTick):
            check_tick(cmd.dt_s)
            self._on_every_plane(cmd)
            self._epoch_tick, self._epoch_s = self.tick, self.sim_time_s
            self.dt_s = float(cmd.dt_s)
            self.warn_of_tick()
            return {"dt_s": self.dt_s}
        if isinstance(cmd, SetParam):
            details = self._on_every_plane(cmd)
            self.profile = self.profile.with_overrides(**{cmd.name: cmd.value})
            return details[0]
        if isinstance(cmd, StartWorkload | StopWorkload):
            for wl in self.workloads:
                if wl.name == cmd.workload:
                    wl.start() if isinstance(cmd, StartWorkload) else wl.stop()
                    return {"workload": wl.name, "running": wl.running}
            raise CommandError(
                f"unknown workload {cmd.workload!r}; known: "
                f"{', '.join(w.name for w in self.workloads)}"
            )
        raise CommandError(f"the fabric does not handle {type(cmd).__name__}")

    def _call(self, plane: int, cmd: Command) -> Mapping[str, Any]:
        try:
            ok, detail = self.pool.call_one(plane, "apply", cmd)
        except PlaneLostError as lost:
            self._lose(lost)
            raise CommandError(f"the run has stopped: {lost}") from None
        if not ok:
            raise CommandError(str(detail))
        return dict(detail)

    def _on_every_plane(self, cmd: Command) -> list[Mapping[str, Any]]:
        """``cmd`` on every plane in turn; the planes are alike, so the first refuses
        what any would, before the others see it."""
        return [self._call(p, cmd) for p in range(self.planes)]

    def _route_fault(self, cmd: InjectFault) -> list[tuple[int, InjectFault]]:
        """Where a fault goes, as (plane or ``HERE``, the command there): a link's or a
        switch's to its plane, named as there; a NIC's PFC storm to every plane; an
        incast to every plane with its share of the bytes; the faults the workloads read
        themselves here. Checks it as the whole fabric would.

        Raises:
            CommandError: the fault does not fit this fabric.
        """
        kind, ids, node, params = self.faults.check(cmd)
        replace = msgspec.structs.replace
        if kind.target == "link":
            li = int(ids[0])
            p = int(self._link_plane[li])
            return [(p, replace(cmd, target=self.cuts[p].topo.links.name[self._link_local[li]]))]
        if kind.target == "switch":
            p = int(self.topo.nodes.plane[node])
            local = self.cuts[p].topo.nodes.name[self._node_local[p, node]]
            return [(p, replace(cmd, target=local))]
        if kind.name in EVERY_PLANE_FAULTS:
            return [(p, cmd) for p in range(self.planes)]
        if kind.name in SPRAYED_FAULTS:
            share = {**params, "size_bytes": float(params["size_bytes"]) / self.planes}
            return [(p, replace(cmd, params=share)) for p in range(self.planes)]
        return [(HERE, cmd)]

    def _inject(self, cmd: InjectFault) -> str:
        placed = []
        for p, sent in self._route_fault(cmd):
            if p == HERE:
                placed.append((p, self.faults.inject(sent, self.sim_time_s).id))
            else:
                placed.append((p, str(self._call(p, sent)["fault_id"])))
        fid = f"f{self._next_fault}"
        self._next_fault += 1
        self._faults[fid] = (cmd.kind, cmd.target, placed)
        return fid

    def _clear(self, cmd: ClearFault) -> list[str]:
        views = self._fault_views(fresh=True)
        live = [v for v in views if v.cleared_at_s is None]
        chosen = [v.id for v in select_cleared(cmd, live, self._faults)]
        for fid in chosen:
            for p, local_id in self._faults[fid][2]:
                if p == HERE:
                    self.faults.clear(ClearFault(fault_id=local_id), self.sim_time_s)
                else:
                    self._call(p, ClearFault(fault_id=local_id))
        return chosen

    # ---------------------------------------------------------------- snapshots
    def _plane_states(self, fresh: bool = True) -> list[PlaneState]:
        """Every plane's state now (the last seen, once a plane is lost)."""
        if fresh and self.lost is None:
            try:
                self._states = list(self.pool.call("state", [()] * self.planes))
            except PlaneLostError as lost:
                self._lose(lost)
        return self._states

    def _fault_views(self, fresh: bool) -> list[FaultView]:
        states = self._plane_states(fresh)
        by_plane = {p: {f.id: f for f in s.faults} for p, s in enumerate(states)}
        by_plane[HERE] = {f.id: f for f in self.faults.views()}
        out = []
        for fid, (_, target, placed) in self._faults.items():
            p, local_id = placed[0]
            view = by_plane.get(p, {}).get(local_id)
            if view is not None:
                out.append(dataclasses.replace(view, id=fid, target=target))
        return out

    def _global_name(self, plane: int, local: str) -> str:
        cut = self.cuts[plane]
        i = cut.topo.nodes.index.get(local)
        if i is not None:
            return str(self.topo.nodes.name[cut.node_global[i]])
        j = cut.topo.links.index.get(local)
        if j is not None:
            return str(self.topo.links.name[cut.link_global[j]])
        return local

    def _merged_events(self, states: Sequence[PlaneState]) -> tuple[Event, ...]:
        """This coordinator's events and the planes', named as in the whole fabric (a
        plane's fault id becomes the whole fabric's, with its plane)."""
        local_fault = {
            (p, lid): fid for fid, (_, _, placed) in self._faults.items() for p, lid in placed
        }

        def named(p: int, e: Event) -> Event:
            target = e.target if p == HERE else self._global_name(p, e.target)
            message = e.message.replace(e.target, target) if target != e.target else e.message
            where = "" if p == HERE else f", plane {p}"
            for (q, lid), fid in local_fault.items():
                if q == p and f"({lid})" in message:
                    message = message.replace(f"({lid})", f"({fid}{where})")
            return dataclasses.replace(e, target=target, message=message)

        events = [named(HERE, e) for e in self.events.latest(100)]
        for p, s in enumerate(states):
            events.extend(named(p, e) for e in s.events)
        events.sort(key=lambda e: e.time_s)
        return tuple(events[-100:])

    def _merged_links(self, states: Sequence[PlaneState]) -> LinkState:
        L = len(self.topo.links)
        merged: dict[str, NDArray[Any]] = {}
        for field in dataclasses.fields(LinkState):
            first = getattr(states[0].link_state, field.name)
            out = np.zeros((L, *first.shape[1:]), dtype=first.dtype)
            for cut, s in zip(self.cuts, states, strict=False):
                out[cut.link_global] = getattr(s.link_state, field.name)
            out.flags.writeable = False
            merged[field.name] = out
        return LinkState(**merged)

    def snapshot(
        self,
        *,
        wall_time_s: float = 0.0,
        target_speed: float = 0.0,
        measured_speed: float = 0.0,
        running: bool = True,
    ) -> Snapshot:
        """One picture of every plane now (see the module docstring)."""
        states = self._plane_states()
        totals = [s.totals for s in states]
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
            link_state=self._merged_links(states),
            totals=Totals(
                injected_bytes_total=sum(t.injected_bytes_total for t in totals),
                delivered_bytes_total=sum(t.delivered_bytes_total for t in totals),
                cancelled_bytes_total=sum(t.cancelled_bytes_total for t in totals),
                dropped_bytes_total=sum(t.dropped_bytes_total for t in totals),
                in_flight_bytes=sum(t.in_flight_bytes for t in totals),
                throughput_Bps=sum(t.throughput_Bps for t in totals),
                active_flows=self.messages.in_flight,
                completed_flows_total=self.completed_flows,
                waiting_flows=sum(t.waiting_flows for t in totals),
            ),
            latency={c: h.freeze() for c, h in self.class_hist.items()},
            workloads=workload_views(self.workloads, now),
            faults=tuple(self._fault_views(fresh=False)),
            events=self._merged_events(states),
            params=dict(states[0].params) if states else {},
        )

    def close(self) -> None:
        """Stop the plane engines."""
        self.pool.close()
