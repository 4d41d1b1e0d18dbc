"""The IBGDA bring-up check the article recommends (C3): 2 GPUs first, then the cluster.

Step 1 runs a small-message all-to-all between two GPUs on one leaf (the
"single machine, two cards" first step that NVSHMEM/IBGDA bring-up guides
recommend); step 2 runs it across every GPU of the scenario. Each step passes
when every message completes with no WQE post error.

Each step is sized from the cluster: the expected time of a round is the
slowest of its bounds (WQE posting, the NIC's line rate, each leaf's uplinks)
plus the latency of a round: for step 1 one message each way between its two GPUs on
the idle, healthy fabric (``idle_round_latency``), for step 2 step 1's measured round;
the step may take
``DEADLINE_MARGIN`` times the expected time (or ``--timeout``; a message counts as
completed by the deadline when it finished at or before it). A step that stops making progress
(no message completes for a window of ``HANG_WINDOW_ROUNDS`` expected rounds)
is a **hang**; one that keeps completing messages but overruns its deadline is
**slow**. On failure the check says which (post error, hang, slow) and on which
GPU, and for a hang where it stuck (posted, never completed).

The cluster step sends at most about ``CLUSTER_MESSAGE_BUDGET`` messages: a larger
all-to-all is scaled down (fewer rounds, then messages per peer, then peers per GPU, so
that every GPU still posts and receives), and the step says what it ran instead and why.

Each step builds a fresh fabric from the scenario with the probe as its only
workload (the scenario's background traffic is left out: a bring-up check runs
on an idle fabric).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import InjectFault
from fabric_core.endpoints.model import EndpointModel, EndpointParams, fault_masks
from fabric_core.net.topology import Topology
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import Scenario
from fabric_core.units import format_duration
from fabric_core.workloads.base import Completions, FlowRequests, Workload, WorkloadHost
from fabric_core.workloads.moe import nic_payload_Bps


def peer_offsets(n: int, peers: int) -> NDArray[np.int64]:
    """How far along the ``n`` ranks each rank's ``peers`` destinations are (1 .. n-1),
    spread evenly: all the other ranks for ``n - 1`` peers, the rank half-way round for
    one (so a scaled-down step still crosses the fabric rather than staying under a leaf)."""
    k = np.arange(peers, dtype=np.int64)
    return ((2 * k + 1) * (n - 1)) // max(1, 2 * peers) + 1


@dataclass
class ProbeAllToAll(Workload):
    """``rounds`` all-to-all rounds of ``size_bytes`` among ``ranks`` (node ids) through the
    endpoint model, each rank sending ``burst`` messages to each of its ``peers``; a round
    starts when the previous one completes."""

    kind: str = "probe-alltoall"
    ranks: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    size_bytes: float = 4096.0
    rounds: int = 4
    burst: int = 8  # messages to each peer per round (a message-rate test, not ping-pong)
    #: peers each rank sends to, spread over the ranks (``peer_offsets``); 0: every other rank
    peers: int = 0
    endpoint: EndpointParams = field(default_factory=EndpointParams)
    ep: EndpointModel | None = None
    round: int = 0
    left: int = 0
    sent: int = 0
    received: int = 0
    start_s: float = float("nan")
    end_s: float = float("nan")
    _round_due: bool = True
    _request_s: float = 0.0
    recv_from: dict[int, int] = field(default_factory=dict)
    #: completions count as on time when they finish by this (the step's deadline): the
    #: fabric reports a message in the tick its last bytes arrive, which can be a tick or
    #: more before it finishes (its fixed latencies come on top)
    count_until_s: float = math.inf
    on_time: int = 0

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.ep = EndpointModel(self.endpoint, int(gpus.max()) + 1)

    def attach(self, fabric: WorkloadHost) -> None:
        super().attach(fabric)
        assert self.ep is not None  # a NIC sends its messages one after another, at line rate
        self.ep.wire_Bps = nic_payload_Bps(fabric)[: self.ep.n_nodes]

    @property
    def done(self) -> bool:
        """Every round completed."""
        return self.round >= self.rounds and self.left == 0

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        assert self.ep is not None
        if self._round_due and self.round < self.rounds:
            self._round_due = False
            n = self.ranks.size
            offsets = peer_offsets(n, self.peers or n - 1)
            src_idx = np.repeat(np.arange(n), offsets.size)
            dst_idx = (src_idx + np.tile(offsets, n)) % n
            src = np.tile(self.ranks[src_idx], self.burst)
            dst = np.tile(self.ranks[dst_idx], self.burst)
            at = max(now_s, self._request_s)
            if self.round == 0:
                self.start_s = at
            fail, hang = fault_masks(self.fabric.topo.nodes, self.fabric.faults)
            ok = self.ep.post(
                src,
                dst,
                np.full(src.size, self.size_bytes),
                (np.int64(self.round) << 32) + np.arange(src.size, dtype=np.int64),
                np.full(src.size, at),
                fail=fail,
                hang=hang,
            )
            self.round += 1
            self.sent += int(ok.sum())
            self.left = int(ok.sum())
            self._last_request_s = at
            if self.left == 0:
                self._round_due = True
        req, _ = self.ep.release(now_s, dt_s)
        return req

    def on_complete(self, done: Completions, now_s: float) -> None:
        assert self.ep is not None
        self.ep.complete(done.src)
        self.received += done.tag.size
        self.on_time += int((done.finish_s <= self.count_until_s).sum())
        self.left -= done.tag.size
        self.histogram("message_seconds").observe_many(done.finish_s - self._last_request_s)
        if self.left == 0:
            self.end_s = float(done.finish_s.max())
            self._request_s = self.end_s
            self._round_due = True

    _last_request_s: float = 0.0


#: A step may take this many times its expected time before it is "slow".
DEADLINE_MARGIN = 4.0
#: Ticks a step's deadline must be at least: a step's time is known to a tick
DEADLINE_TICKS = 4
#: No completion for this many expected rounds (and at least ``HANG_WINDOW_MIN_TICKS``
#: ticks) is a hang.
HANG_WINDOW_ROUNDS = 2.0
HANG_WINDOW_MIN_TICKS = 20
#: The most ticks the idle round that step 1 expects (``idle_round_latency``) may take:
#: one message on an idle, healthy fabric lands in microseconds
IDLE_ROUND_MAX_TICKS = 100_000
#: The cluster step sends at most this many messages in all (but one from every GPU):
#: enough to load every link and every GPU's queue pair, while a 256-GPU fabric still
#: finishes in seconds of wall time. A larger all-to-all is scaled down (``size_step``),
#: and the step says so.
CLUSTER_MESSAGE_BUDGET = 1 << 17
#: A time within this fraction of a tick of a tick boundary is on it: ``10us`` is
#: 9.999999999999999e-06 s and ``1e-5s`` is 1e-05 s, and both must end a step on tick 10
TICK_TOLERANCE = 1e-6


@dataclass(frozen=True)
class StepSize:
    """A step's messages: ``rounds`` rounds, in each of which every GPU sends ``burst``
    messages to each of its ``peers`` peers."""

    rounds: int
    burst: int
    peers: int

    def messages(self, gpus: int) -> int:
        """Messages in all, on ``gpus`` GPUs."""
        return self.rounds * self.burst * self.peers * gpus


def size_step(gpus: int, rounds: int, burst: int) -> StepSize:
    """The all-to-all asked for on ``gpus`` GPUs, scaled down to ``CLUSTER_MESSAGE_BUDGET``
    messages when it is larger: fewer rounds first, then fewer messages per peer, then
    fewer peers per GPU, each at least 1, so that every GPU still posts and receives (a
    GPU left out could be the one with the fault the check looks for; past
    ``CLUSTER_MESSAGE_BUDGET`` GPUs that is one message each, over the budget). The 2-GPU
    step is never scaled: it is what the user asked for."""
    asked = StepSize(rounds, burst, gpus - 1)
    budget = CLUSTER_MESSAGE_BUDGET
    if gpus <= 2 or asked.messages(gpus) <= budget:
        return asked
    rounds = max(1, min(asked.rounds, budget // (burst * asked.peers * gpus)))
    burst = max(1, min(burst, budget // (rounds * asked.peers * gpus)))
    peers = max(1, min(asked.peers, budget // (rounds * burst * gpus)))
    return StepSize(rounds, burst, peers)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def describe_scaling(gpus: int, asked: StepSize, run: StepSize) -> str:
    """What a scaled-down step runs instead of what was asked, and why ("" when it runs
    as asked)."""
    if run == asked:
        return ""
    changes = []
    if run.rounds < asked.rounds:
        changes.append(f"{_plural(run.rounds, 'round')} of the {asked.rounds:,} asked (--rounds)")
    if run.burst < asked.burst:
        changes.append(f"{_plural(run.burst, 'message')} to each peer a round, not {asked.burst}")
    if run.peers < asked.peers:
        spread = "half-way round" if run.peers == 1 else "spread evenly round"
        changes.append(
            f"each GPU sends to {run.peers:,} of its {asked.peers:,} peers ({spread} the GPUs: "
            "every GPU still posts and receives)"
        )
    return (
        "; ".join(changes) + f": the full all-to-all is {asked.messages(gpus):,} messages, "
        f"over the check's budget of {CLUSTER_MESSAGE_BUDGET:,} (which bounds a large "
        "fabric's step in wall time and memory)"
    )


def ticks_in(seconds: float, dt_s: float) -> float:
    """``seconds`` in ticks of ``dt_s``, a whole number when within ``TICK_TOLERANCE`` of
    one (so ``10us``, ``0.01ms`` and ``1e-5s`` are all 10 ticks of 1 µs)."""
    ticks = seconds / dt_s
    nearest = round(ticks)
    return float(nearest) if abs(ticks - nearest) <= TICK_TOLERANCE else ticks


@dataclass(frozen=True)
class StepPlan:
    """How big a step is and how long it may take (simulated seconds)."""

    rounds: int
    burst: int
    messages: int
    expected_s: float
    deadline_s: float
    hang_window_s: float
    bound: str  # what limits a round: "posting", "NIC line rate", "leaf uplinks", "latency"
    peers: int = 1  # each GPU's peers (all the others unless the step was scaled down)
    deadline_ticks: int = 0  # the tick by whose end the deadline has come
    scaled: str = ""  # how and why the step is smaller than asked ("": it is not)

    def describe(self) -> str:
        """``expected 1.2 ms (bound: leaf uplinks), deadline 4.8 ms, hang after 0.6 ms``."""
        d = format_duration
        return (
            f"expected {d(self.expected_s)} (bound: {self.bound}), deadline "
            f"{d(self.deadline_s)}, hang after {d(self.hang_window_s)} without progress"
        )


@dataclass(frozen=True)
class StepProgress:
    """Where a running step is (passed to the progress callback every few ticks)."""

    name: str
    completed: int
    messages: int
    elapsed_s: float
    plan: StepPlan


ProgressFn = Callable[[StepProgress], None]


def _posting_s(endpoint: EndpointParams, posts: int) -> float:
    """A GPU posting ``posts`` WQEs (over its parallel posters with IBGDA, through the
    CPU proxy otherwise)."""
    if endpoint.control == "ibgda":
        return posts * endpoint.gpu_wqe_post_s / max(1, endpoint.ibgda_posters)
    return posts * (endpoint.gpu_request_s + endpoint.cpu_post_s)


def _nic_line_rate_s(topo: Topology, gpus: NDArray[np.int64], gpu_bytes: float) -> float:
    """The slowest GPU's NIC sending ``gpu_bytes``: at all its ports together, one per
    plane, as the endpoint model sends (``nic_payload_Bps``)."""
    up = topo.ep_uplink[gpus]
    bw = np.where(up >= 0, topo.links.bandwidth_Bps[np.maximum(up, 0)], 0.0).sum(axis=1)
    slowest = float(bw.min())
    return gpu_bytes / slowest if slowest > 0 else 0.0


def _leaf_uplinks_s(
    topo: Topology, gpus: NDArray[np.int64], offsets: NDArray[np.int64], peer_bytes: float
) -> float:
    """The busiest leaf carrying, over its uplinks, a round's bytes (``peer_bytes`` from
    each GPU to each of its peers) from its GPUs to peers under other leaves. The fabric
    hashes each message onto one plane, so a leaf of each plane carries its GPUs' share
    (1/planes) over that plane's uplinks."""
    n = gpus.size
    src = np.repeat(gpus, offsets.size)
    dst = gpus[(np.repeat(np.arange(n), offsets.size) + np.tile(offsets, n)) % n]
    links, n_nodes = topo.links, len(topo.nodes.name)
    to_switch = topo.switch_index[links.dst] >= 0
    cap = np.bincount(
        links.src[to_switch], weights=links.bandwidth_Bps[to_switch], minlength=n_nodes
    )
    worst = 0.0
    for plane in range(topo.planes):
        leaf_src, leaf_dst = topo.ep_leaf[src, plane], topo.ep_leaf[dst, plane]
        leaving = (leaf_src >= 0) & (leaf_src != leaf_dst)
        out = np.bincount(leaf_src[leaving], minlength=n_nodes) * peer_bytes / topo.planes
        busy = (out > 0) & (cap > 0)
        if busy.any():
            worst = max(worst, float((out[busy] / cap[busy]).max()))
    return worst


def plan_step(
    scn: Scenario,
    gpus: NDArray[np.int64],
    *,
    size_bytes: float,
    rounds: int,
    burst: int,
    round_latency_s: float,
    endpoint: EndpointParams,
    timeout_s: float | None = None,
) -> StepPlan:
    """The step's size and time budget from the cluster's bounds.

    Per round every GPU posts ``burst`` messages to each of its peers (``size_step``: all
    the others, unless that is over the budget). A round cannot be faster than posting
    them (``gpu_wqe_post_s`` per WQE over the parallel posters), than the GPU's NIC ports
    sending them, or than the busiest leaf's uplinks (of every plane) carrying the part
    that leaves the leaf; on top of that comes the latency of one message (measured on
    two GPUs in step 1).
    """
    topo = scn.build_topology()
    n = int(gpus.size)
    size = size_step(n, rounds, burst)
    posts = size.burst * size.peers
    peer_bytes = size.burst * float(size_bytes)
    bounds = {
        "posting": _posting_s(endpoint, posts),
        "NIC line rate": _nic_line_rate_s(topo, gpus, posts * float(size_bytes)),
        "leaf uplinks": _leaf_uplinks_s(topo, gpus, peer_offsets(n, size.peers), peer_bytes),
    }
    bound = max(bounds, key=lambda k: bounds[k])
    round_s = bounds[bound] + round_latency_s
    if bounds[bound] < round_latency_s:
        bound = "latency"
    expected = size.rounds * round_s
    window = max(HANG_WINDOW_ROUNDS * round_s, HANG_WINDOW_MIN_TICKS * scn.dt_s)
    deadline = timeout_s if timeout_s is not None else DEADLINE_MARGIN * expected
    return StepPlan(
        rounds=size.rounds,
        burst=size.burst,
        messages=size.messages(n),
        expected_s=expected,
        deadline_s=deadline,
        hang_window_s=window,
        bound=bound,
        peers=size.peers,
        deadline_ticks=math.ceil(ticks_in(deadline, scn.dt_s)),
        scaled=describe_scaling(n, StepSize(rounds, burst, n - 1), size),
    )


@dataclass
class StepResult:
    """One step of the check."""

    name: str
    gpus: list[str]
    passed: bool
    messages: int
    completed: int
    message_rate_per_s: float  # completed messages per second per GPU
    latency_p50_s: float
    latency_p99_s: float
    elapsed_s: float
    failure: str = ""  # "" | "post_error" | "hang" | "slow"
    diagnosis: list[str] = field(default_factory=list)
    rounds: int = 0
    burst: int = 0
    expected_s: float = float("nan")
    deadline_s: float = float("nan")
    hang_window_s: float = float("nan")
    bound: str = ""
    peers: int = 0  # each GPU's peers (all the others unless the step was scaled down)
    rounds_asked: int = 0
    burst_asked: int = 0
    scaled: str = ""  # how and why the step is smaller than asked ("": it is not)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def _fabric_for(scn: Scenario, probe: ProbeAllToAll) -> tuple[Fabric, list[InjectFault]]:
    """A fabric of the scenario's topology and profile with only the probe, and the
    scenario's faults as commands (injected at the start of the check)."""
    fabric = Fabric(
        scn.build_topology(),
        scn.profile,
        [probe],
        dt_s=scn.dt_s,
        seed=scn.seed,
        cluster=scn.cluster,
        scenario=scn.name,
    )
    # injected at once, so a scheduled clear has nothing to do and a fault the scenario
    # schedules twice (one after the other) is injected once
    cmds: dict[tuple[str, str], InjectFault] = {}
    for f in scn.faults:
        if f.kind != "clear":
            cmds.setdefault(
                (f.kind, f.target),
                InjectFault(
                    kind=f.kind, target=f.target, params=dict(f.params), duration_s=f.duration_s
                ),
            )
    return fabric, list(cmds.values())


#: Ticks between two progress reports.
PROGRESS_EVERY_TICKS = 5
#: A step's endpoints: GPU-initiated (IBGDA) posts, GPUDirect RDMA data
STEP_ENDPOINT = EndpointParams(control="ibgda", data_path="gdr")


def _refuse_a_coarse_deadline(name: str, plan: StepPlan, dt_s: float, asked: bool) -> None:
    """Raises ValueError when the step's deadline is under ``DEADLINE_TICKS`` ticks: its
    time is known to a tick, so with fewer on time and late blur (a 1 ms tick against a
    330 µs deadline failed a sound fabric as slow)."""
    if ticks_in(plan.deadline_s, dt_s) >= DEADLINE_TICKS:
        return
    finest = format_duration(plan.deadline_s / DEADLINE_TICKS)
    fix = (
        f"use a --timeout of at least {format_duration(DEADLINE_TICKS * dt_s)}"
        if asked
        else f"use a tick of at most {finest} (--dt)"
    )
    raise ValueError(
        f"step {name!r}: its deadline {format_duration(plan.deadline_s)} is less than "
        f"{DEADLINE_TICKS} ticks of {format_duration(dt_s)}, too coarse to judge it; {fix}"
    )


def run_step(
    scn: Scenario,
    name: str,
    gpus: NDArray[np.int64],
    *,
    faults: Sequence[InjectFault] = (),
    size_bytes: float = 4096.0,
    rounds: int = 4,
    burst: int = 8,
    round_latency_s: float,
    timeout_s: float | None = None,
    endpoint: EndpointParams | None = None,
    progress: ProgressFn | None = None,
) -> StepResult:
    """Run one all-to-all step on ``gpus`` (node ids) and judge it.

    ``timeout_s`` overrides the deadline computed from the cluster (``plan_step``). A
    message counts as completed by the deadline when it finished at or before it.
    """
    endpoint = endpoint or STEP_ENDPOINT
    plan = plan_step(
        scn,
        gpus,
        size_bytes=size_bytes,
        rounds=rounds,
        burst=burst,
        round_latency_s=round_latency_s,
        endpoint=endpoint,
        timeout_s=timeout_s,
    )
    _refuse_a_coarse_deadline(name, plan, scn.dt_s, asked=timeout_s is not None)
    probe = ProbeAllToAll(
        name="bringup",
        traffic_class="bringup",
        ranks=gpus.astype(np.int64),
        size_bytes=size_bytes,
        rounds=plan.rounds,
        burst=plan.burst,
        peers=plan.peers,
        endpoint=endpoint,
        count_until_s=plan.deadline_s + TICK_TOLERANCE * scn.dt_s,
    )
    fabric, scheduled = _fabric_for(scn, probe)
    for cmd in [*scheduled, *faults]:
        fabric.apply(cmd)
    names = fabric.topo.nodes.name
    last_received, last_progress_s = 0, fabric.sim_time_s
    outcome = ""  # "" (done or nothing posted) | "hang" | "slow"
    while not probe.done:
        fabric.step()
        now = fabric.sim_time_s
        if probe.received != last_received:
            last_received, last_progress_s = probe.received, now
        if progress is not None and fabric.tick % PROGRESS_EVERY_TICKS == 0:
            progress(StepProgress(name, probe.received, plan.messages, now, plan))
        if probe.sent == 0 and probe.round >= plan.rounds:
            break  # every post failed: nothing to wait for
        if now - last_progress_s >= plan.hang_window_s:
            outcome = "hang"
            break
        if fabric.tick >= plan.deadline_ticks and probe.received > 0:
            outcome = "slow"  # still completing messages (else the window above decides)
            break
    if probe.done and probe.on_time < probe.received:
        outcome = "slow"  # all came, some finishing after the deadline
    if progress is not None:
        progress(StepProgress(name, probe.received, plan.messages, fabric.sim_time_s, plan))
    ep = probe.ep
    assert ep is not None
    idx = gpus.astype(np.intp)
    view = probe.histogram("message_seconds").freeze()
    elapsed = (probe.end_s if probe.done else fabric.sim_time_s) - (
        probe.start_s if np.isfinite(probe.start_s) else 0.0
    )
    # stopped at the deadline: the messages reported that finish after it do not count
    counted = probe.received if probe.done else probe.on_time
    rate = counted / elapsed / gpus.size if elapsed > 0 else 0.0
    silent = fabric.sim_time_s - last_progress_s
    failure, diagnosis = _diagnose(ep, idx, names, silent)
    if not failure and outcome == "hang":
        failure = "hang"
        diagnosis.append(
            f"{probe.received:,}/{plan.messages:,} messages completed, then none for "
            f"{format_duration(silent)}"
        )
    elif not failure and outcome == "slow":
        failure = "slow"
        diagnosis.append(_slow(probe, plan, elapsed, asked=timeout_s is not None))
    return StepResult(
        name=name,
        gpus=[names[i] for i in idx],
        passed=not failure,
        messages=plan.messages,
        completed=probe.on_time,
        message_rate_per_s=rate,
        latency_p50_s=view.quantile(0.5),
        latency_p99_s=view.quantile(0.99),
        elapsed_s=elapsed,
        failure=failure,
        diagnosis=diagnosis,
        rounds=plan.rounds,
        burst=plan.burst,
        expected_s=plan.expected_s,
        deadline_s=plan.deadline_s,
        hang_window_s=plan.hang_window_s,
        bound=plan.bound,
        peers=plan.peers,
        rounds_asked=rounds,
        burst_asked=burst,
        scaled=plan.scaled,
    )


def _diagnose(
    ep: EndpointModel, idx: NDArray[np.intp], names: Sequence[str], silent_s: float
) -> tuple[str, list[str]]:
    """The failure the endpoints show ("" | "post_error" | "hang") and a line per GPU."""
    diagnosis: list[str] = []
    failure = ""
    errs = ep.post_errors[idx]
    if errs.any():
        failure = "post_error"
        for g in np.flatnonzero(errs):
            diagnosis.append(
                f"{names[idx[g]]}: {int(errs[g])} WQE post(s) failed (version_mismatch: "
                "driver / CUDA / NVSHMEM versions do not match)"
            )
    stuck = ep.stuck[idx]
    if stuck.any():
        failure = failure or "hang"
        for g in np.flatnonzero(stuck):
            diagnosis.append(
                f"{names[idx[g]]}: {int(stuck[g])} WQE(s) posted, no completion for "
                f"{format_duration(silent_s)}: stuck in the send queue (doorbell rung, "
                "the NIC never executed the WQE)"
            )
    return failure, diagnosis


def _slow(probe: ProbeAllToAll, plan: StepPlan, elapsed_s: float, *, asked: bool) -> str:
    """The diagnosis of a slow step: how much finished by the deadline, against what."""
    late = f"; all completed in {format_duration(elapsed_s)}" if probe.done else ""
    return (
        f"{probe.on_time:,}/{plan.messages:,} messages completed by the deadline "
        f"{format_duration(plan.deadline_s)} ("
        + ("the timeout asked for; " if asked else f"{DEADLINE_MARGIN:g}× ")
        + f"the expected {format_duration(plan.expected_s)}, bound: {plan.bound}){late}; "
        "messages kept completing, so the fabric is slow, not hung"
    )


def idle_round_latency(
    scn: Scenario, pair: NDArray[np.int64], size_bytes: float, endpoint: EndpointParams
) -> float:
    """What a round's latency is before step 1 has measured one: one message of
    ``size_bytes`` each way between the two GPUs ``pair``, through the endpoint model, on
    the scenario's fabric with nothing else running and no fault (the model's figure,
    not a guess: a check that assumed 20 µs judged a 8.5 µs step against 41 µs)."""
    probe = ProbeAllToAll(
        name="idle",
        traffic_class="bringup",
        ranks=pair,
        size_bytes=size_bytes,
        rounds=1,
        burst=1,
        endpoint=endpoint,
    )
    fabric, _ = _fabric_for(scn, probe)  # (healthy: the scenario's faults left out)
    for _ in range(IDLE_ROUND_MAX_TICKS):
        if probe.done:
            return probe.end_s - probe.start_s
        fabric.step()
    raise RuntimeError(
        f"one message between two idle GPUs did not land in {IDLE_ROUND_MAX_TICKS:,} ticks"
    )


def two_gpus(fabric_gpus: NDArray[np.int32], leaf_of: Mapping[int, int]) -> NDArray[np.int64]:
    """Two GPUs under one leaf (the first such pair), else the first two GPUs."""
    seen: dict[int, int] = {}
    for g in fabric_gpus.tolist():
        leaf = leaf_of.get(int(g), -1)
        if leaf in seen:
            return np.array([seen[leaf], g], dtype=np.int64)
        seen[leaf] = int(g)
    return fabric_gpus[:2].astype(np.int64)


def check_ibgda(
    scn: Scenario,
    *,
    faults: Sequence[InjectFault] = (),
    size_bytes: float = 4096.0,
    rounds: int = 4,
    timeout_s: float | None = None,
    progress: ProgressFn | None = None,
) -> list[StepResult]:
    """The bring-up check: step 1 on two GPUs of one leaf; step 2 on every GPU if step 1 passed.

    Step 2's round latency is step 1's measured time per round (the bounds come on top).
    """
    topo = scn.build_topology()
    links = topo.links
    up = np.isin(links.src, topo.gpus)
    leaf_of = dict(zip(links.src[up].tolist(), links.dst[up].tolist(), strict=True))
    pair = two_gpus(topo.gpus, leaf_of)
    kw: dict[str, Any] = dict(
        faults=faults,
        size_bytes=size_bytes,
        rounds=rounds,
        timeout_s=timeout_s,
        progress=progress,
    )
    idle = idle_round_latency(scn, pair, size_bytes, STEP_ENDPOINT)
    first = run_step(scn, "2-GPU all-to-all", pair, round_latency_s=idle, **kw)
    if not first.passed:
        return [first]
    per_round = first.elapsed_s / max(1, first.rounds)
    cluster = run_step(
        scn,
        "cluster all-to-all",
        topo.gpus.astype(np.int64),
        round_latency_s=per_round if math.isfinite(per_round) and per_round > 0 else idle,
        **kw,
    )
    return [first, cluster]
