"""What every workload does: ask for flows each tick, hear when they complete."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from fabric_core.storage.model import StorageHost
from fabric_core.tick.flows import Completions, FlowRequests
from fabric_core.tick.histogram import Histogram, HistogramView
from fabric_core.units import format_duration

#: The requests and completions are the flow table's (``tick.flows``); a workload finds
#: them here.
__all__ = [
    "Completions",
    "FlowRequests",
    "Workload",
    "WorkloadHost",
    "pick_endpoints",
    "workload_rngs",
]


class WorkloadHost(StorageHost, Protocol):
    """What a workload reads of the fabric it runs on (``runtime.fabric.Fabric`` is one):
    the storage model's view and the run's seed."""

    @property
    def seed(self) -> int: ...


@dataclass
class Workload:
    """Base class: a named traffic source with a class and KPIs."""

    name: str
    traffic_class: str
    kind: str = "workload"
    running: bool = True
    histograms: dict[str, Histogram] = field(default_factory=dict)
    #: whether ``on_refused`` gives a refused flow's slot back, so that its sender tries
    #: again (a closed loop's); if not, what waits for the flow waits for ever
    retries_refused: ClassVar[bool] = False

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        """Called once with the fabric's endpoints before the first tick."""

    def attach(self, fabric: WorkloadHost) -> None:
        """Called once after ``bind`` with the fabric (for faults, profile, names)."""
        self.fabric = fabric

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        """Flows to start in the tick [now, now + dt)."""
        return FlowRequests.empty()

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        """A time before which ``generate`` starts no flow and changes nothing (neither
        this workload nor the generator), as things stand at ``now_s`` with ticks of
        ``dt_s``: the fabric may run the ticks that start before it without calling
        ``generate``
        (``fabric_core.runtime.uneventful``). A completion or a command may bring it
        forward; both go through Python, which asks again. The base promises nothing."""
        return now_s

    def tick_note(self, dt_s: float) -> str | None:
        """Why a tick of ``dt_s`` is too long for this workload (None: it is not)."""
        return None

    def flows_at_once(self) -> tuple[int, str] | None:
        """The most flows this workload's own parameters put in flight at once (once bound
        and attached), with how, as words after its name: ``(1047552, "starts 1,047,552
        flows a round (1,024 ranks, each to the 1,023 others)")``. None: its parameters
        set no such bound (random arrivals, I/O its storage model paces)."""
        return None

    def on_complete(self, done: Completions, now_s: float) -> None:
        """Flows of this workload that completed."""

    def on_refused(self, refused: FlowRequests) -> None:
        """Flows of this workload (of its last ``generate``) that the fabric-wide cap
        refused at admission (``faults.admission``): they never run, so never complete.
        The base forgets them (what waits for them, an all-to-all round, waits for ever);
        a closed loop gives their slots back, to try again (``retries_refused``). The
        busy ticks' kernel has no twin of it: it leaves a tick that could pass the cap to
        Python."""

    def kpis(self, now_s: float) -> Mapping[str, float]:
        """Key figures in base units for the snapshot."""
        return {}

    def histogram(self, name: str) -> Histogram:
        """A named histogram of this workload (created on first use)."""
        h = self.histograms.get(name)
        if h is None:
            h = self.histograms[name] = Histogram()
        return h

    def frozen_histograms(self) -> dict[str, HistogramView]:
        """Immutable copies for a snapshot."""
        return {k: h.freeze() for k, h in self.histograms.items()}

    def stop(self) -> None:
        """Stop starting new flows (flows in flight finish)."""
        self.running = False

    def start(self) -> None:
        """Start (again)."""
        self.running = True


def one_a_tick_note(wl: Workload, what: str, period_s: float, dt_s: float) -> str | None:
    """The note of a workload that starts at most one ``what`` (a round, a burst) a tick,
    every ``period_s``: a tick longer than that period loses some (it does not bunch
    them, as it bunches random arrivals: docs/MODEL.md, "Time scales")."""
    if not 0 < period_s < dt_s:
        return None
    return (
        f"workload {wl.name!r} starts a {what} every {format_duration(period_s)}, but the tick "
        f"is {format_duration(dt_s)}: at most one a tick, so some are lost, not bunched"
    )


def require_positive(workload: str, values: Mapping[str, float]) -> None:
    """Raise ``ValueError`` naming the first of ``values`` (by scenario key) not > 0."""
    for key, value in values.items():
        if not value > 0:
            raise ValueError(f"workload {workload!r}: {key} must be > 0, got {value:g}")


def tick_notes(workloads: Sequence[Workload], dt_s: float) -> list[tuple[str, str]]:
    """(workload, note) for each workload a tick of ``dt_s`` is too long for."""
    return [(wl.name, note) for wl in workloads if (note := wl.tick_note(dt_s))]


#: What becomes of a workload's flows past the fabric-wide cap (``admission_notes``)
_NEVER_RUN = (
    "refused, not queued or retried, so they never run and what waits for them waits for ever"
)


def _tried_again(every: str) -> str:
    return (
        f"refused (each try counted) and its senders try again each {every}, the room going "
        "to the flows asked for first, in sender order"
    )


def admission_notes(
    workloads: Sequence[Workload], fabric_flows: int, *, retry_every: str = "tick"
) -> list[tuple[str, str]]:
    """(workload, note) for each workload whose own parameters put more flows in flight
    at once (``Workload.flows_at_once``) than the fabric-wide cap of ``fabric_flows``
    (``faults.admission``) lets in: the rest are refused, so it cannot run as its
    scenario asks. ``retry_every``: when a workload that takes a refused flow's slot back
    (``retries_refused``) hears of the refusal, and so tries again: each tick on one
    fabric, each batch of ticks on a multi-plane fabric run one engine per plane."""
    notes = []
    for wl in workloads:
        at_once = wl.flows_at_once()
        if at_once is not None and at_once[0] > fabric_flows:
            fate = _tried_again(retry_every) if wl.retries_refused else _NEVER_RUN
            notes.append(
                (
                    wl.name,
                    f"workload {wl.name!r} {at_once[1]}, more than the fabric-wide cap of "
                    f"{fabric_flows:,} flows in flight: past it new flows are {fate} "
                    '(docs/MQTT.md, "Limits")',
                )
            )
    return notes


def pick_endpoints(
    spec: Any, pool: NDArray[np.int32], rng: np.random.Generator, what: str
) -> NDArray[np.int32]:
    """Endpoints from a spec: ``"all"``, a count, a fraction (0, 1], or a list of indices into the pool."""
    if spec == "all":
        return pool.copy()
    if isinstance(spec, bool):
        raise ValueError(f"{what}: expected 'all', a count, a fraction or a list of indices")
    if isinstance(spec, float) and 0 < spec <= 1:
        n = max(1, round(spec * pool.size))
        return np.sort(rng.choice(pool, size=n, replace=False)).astype(np.int32)
    if isinstance(spec, int):
        if not 1 <= spec <= pool.size:
            raise ValueError(
                f"{what}: {spec} endpoints asked for, the fabric has {pool.size}: give a "
                f"count of 1 to {pool.size}, a fraction in (0, 1], 'all' or a list of indices"
            )
        return np.sort(rng.choice(pool, size=spec, replace=False)).astype(np.int32)
    if isinstance(spec, list) and all(isinstance(i, int) for i in spec):
        bad = [i for i in spec if not 0 <= i < pool.size]
        if bad:
            raise ValueError(f"{what}: indices {bad} out of range 0..{pool.size - 1}")
        given, times = np.unique(np.array(spec, dtype=np.int64), return_counts=True)
        twice = given[times > 1].tolist()
        if twice:  # ([0, 0, 0] made three senders of one GPU)
            raise ValueError(f"{what}: indices {twice} given more than once; give each once")
        return pool[np.array(spec, dtype=np.intp)]
    raise ValueError(
        f"{what}: expected 'all', a count, a fraction or a list of indices, got {spec!r}"
    )


def workload_rngs(seed: int, workloads: Sequence[Workload]) -> list[np.random.Generator]:
    """One random generator per workload, from the run's seed and the workload's name
    (and, for names used twice, which of them it is).

    A workload draws from its own stream only, so what it draws does not depend on what
    else draws: not on the other workloads, nor on the fabric's own draws (which of a
    tick's checks bring a RoCE sender a CNP). The two sides of a comparison therefore offer an
    open-loop workload the same arrivals, sizes and peers (common random numbers), and
    adding a workload to a scenario leaves the others' draws as they were. (A workload
    that keeps a generator of its own, PD's or the MoE router's, seeds it from this
    stream.)
    """
    seen: dict[str, int] = {}
    rngs = []
    for wl in workloads:
        k = seen[wl.name] = seen.get(wl.name, -1) + 1
        key = [seed, zlib.crc32(wl.name.encode()), k]
        rngs.append(np.random.default_rng(np.random.SeedSequence(key)))
    return rngs
