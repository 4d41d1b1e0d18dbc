"""One plane of a multi-plane fabric as an engine of its own: a ``Fabric`` on the plane's
topology whose workloads are the coordinator's relays (``relay.Relay``).

Everything that crosses between the coordinator and a plane engine is plain data
(``PlaneSpec`` once, then ``PlaneParts`` in and ``PlaneDone`` out per batch, commands, and
``PlaneState`` for a snapshot), so a plane engine can run in another process or on
another machine (``pool``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import Command, CommandError
from fabric_core.faults.book import FaultView
from fabric_core.net import endpoint_costs
from fabric_core.net.profiles import Profile
from fabric_core.net.topology import Topology
from fabric_core.planes.relay import Relay
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.snapshot import Event, LinkState, Totals
from fabric_core.tick.flows import FlowRequests


@dataclass(frozen=True)
class PlaneSpec:
    """What a plane engine is built from."""

    plane: int
    topo: Topology
    profile: Profile
    dt_s: float
    seed: int
    #: the coordinator's workloads, in order: (name, traffic class)
    workloads: tuple[tuple[str, str], ...]
    class_vl: Mapping[str, int]
    solver: Solver = "compiled"
    cluster: str = "fabtop"
    scenario: str = "custom"


@dataclass(frozen=True)
class PlaneParts:
    """The parts a plane starts in a batch, in tick order (arrays of one length)."""

    tick: NDArray[np.int64]  # the tick each starts in
    workload: NDArray[np.int64]  # the coordinator workload's index
    src: NDArray[np.int64]  # endpoint node ids (the same in every plane)
    dst: NDArray[np.int64]
    size_bytes: NDArray[np.float64]
    message: NDArray[np.int64]  # the coordinator's message id (the part's tag)
    ready_s: NDArray[np.float64]
    extra_latency_s: NDArray[np.float64]  # NaN: the plane's own endpoint costs

    @staticmethod
    def empty() -> PlaneParts:
        """No parts."""
        i, f = np.zeros(0, dtype=np.int64), np.zeros(0)
        return PlaneParts(i, i, i, i, f, i, f, f)


@dataclass(frozen=True)
class PlaneDone:
    """The parts a plane finished in a batch, and where its clock is."""

    message: NDArray[np.int64]
    start_s: NDArray[np.float64]
    finish_s: NDArray[np.float64]
    tick: int
    sim_time_s: float
    hop_updates: int
    #: what the plane's admission limits have refused so far (an incast's flows past its
    #: limits, parts past the plane's cap): flows and their bytes
    refused_flows: int = 0
    refused_bytes: float = 0.0
    #: of those, each workload's parts (by name): ``Admission.refused_by_workload``
    refused_by_workload: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    #: the messages whose parts the plane refused in the batch (one per part refused)
    refused_message: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    #: whether the plane's ticks run as Python while its kernels compile aside (a first
    #: run's: ``Fabric.compiling_aside``)
    compiling_aside: bool = False


@dataclass(frozen=True)
class PlaneState:
    """What a snapshot takes of a plane (its links in the plane's numbering)."""

    link_state: LinkState
    totals: Totals
    faults: tuple[FaultView, ...]
    events: tuple[Event, ...]
    params: Mapping[str, float]


class PlaneEngine:
    """A plane's fabric, advanced a batch of ticks at a time by the coordinator."""

    def __init__(self, spec: PlaneSpec) -> None:
        self.plane = spec.plane
        self.relays = [Relay(name=name, traffic_class=cls) for name, cls in spec.workloads]
        self.fabric = Fabric(
            spec.topo,
            spec.profile,
            list(self.relays),
            dt_s=spec.dt_s,
            seed=spec.seed,
            cluster=spec.cluster,
            scenario=spec.scenario,
            class_vl=spec.class_vl,
            solver=spec.solver,
        )
        for relay in self.relays:
            relay.tick_of = lambda: self.fabric.tick

    def advance(self, ticks: int, parts: PlaneParts) -> PlaneDone:
        """Start ``parts`` at their ticks and run ``ticks`` ticks; the parts finished.

        A part whose ``extra_latency_s`` is NaN pays the endpoint costs the fabric gives a
        request that names none (``net.endpoint_costs.host_costs_s``)."""
        extra = parts.extra_latency_s
        if np.isnan(extra).any():
            own = endpoint_costs.host_costs_s(self.fabric.profile)
            extra = np.where(np.isnan(extra), own, extra)
        for wi, relay in enumerate(self.relays):
            pick = np.flatnonzero(parts.workload == wi)
            if pick.size:
                relay.queue(
                    parts.tick[pick],
                    FlowRequests(
                        parts.src[pick],
                        parts.dst[pick],
                        parts.size_bytes[pick],
                        parts.message[pick],
                        parts.ready_s[pick],
                        extra[pick],
                    ),
                )
        self.fabric.run_ticks(ticks)
        done = [c for relay in self.relays for c in relay.take()]
        refused_parts = [m for relay in self.relays for m in relay.take_refused()]
        fl = self.fabric
        z = np.zeros(0)
        refused = fl.faults.admission
        return PlaneDone(
            message=np.concatenate([c.tag for c in done]) if done else z.astype(np.int64),
            start_s=np.concatenate([c.start_s for c in done]) if done else z,
            finish_s=np.concatenate([c.finish_s for c in done]) if done else z,
            tick=fl.tick,
            sim_time_s=fl.sim_time_s,
            hop_updates=fl.hop_updates,
            refused_flows=refused.refused_flows_total,
            refused_bytes=refused.refused_bytes_total,
            refused_by_workload=dict(refused.refused_by_workload),
            refused_message=(
                np.concatenate(refused_parts) if refused_parts else z.astype(np.int64)
            ),
            compiling_aside=fl.compiling_aside,
        )

    def apply(self, command: Command) -> tuple[bool, Mapping[str, Any] | str]:
        """Apply a command between batches: (True, its detail) or (False, the error)."""
        try:
            return True, dict(self.fabric.apply(command))
        except CommandError as exc:
            return False, str(exc)

    def state(self) -> PlaneState:
        """The plane now, for the coordinator's merged snapshot."""
        snap = self.fabric.snapshot()
        return PlaneState(snap.link_state, snap.totals, snap.faults, snap.events, snap.params)
