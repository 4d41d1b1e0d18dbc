"""The IBGDA bring-up check the article recommends (C3): 2 GPUs first, then the cluster.

Step 1 runs a small-message all-to-all between two GPUs on one leaf (the
article's "single machine, two cards"); step 2 runs it across every GPU of the
scenario. Each step passes when every message completes with no WQE post error
before a timeout. On failure the check says what failed (post error vs hang)
and on which GPU, and for a hang where it stuck (posted, never completed).

Each step builds a fresh fabric from the scenario with the probe as its only
workload (the scenario's background traffic is left out: a bring-up check runs
on an idle fabric).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import InjectFault
from fabric_core.endpoint import EndpointModel, EndpointParams, fault_masks
from fabric_core.fabric import Fabric
from fabric_core.scenario import Scenario
from fabric_core.workloads.base import Completions, FlowRequests, Workload


@dataclass
class ProbeAllToAll(Workload):
    """``rounds`` all-to-all rounds of ``size_bytes`` among ``ranks`` (node ids) through the
    endpoint model; a round starts when the previous one completes."""

    kind: str = "probe-alltoall"
    ranks: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    size_bytes: float = 4096.0
    rounds: int = 4
    burst: int = 8  # messages to each peer per round (a message-rate test, not ping-pong)
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

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.ep = EndpointModel(self.endpoint, int(gpus.max()) + 1)

    @property
    def done(self) -> bool:
        """Every round completed."""
        return self.round >= self.rounds and self.left == 0

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        assert self.ep is not None
        if self._round_due and self.round < self.rounds:
            self._round_due = False
            n = self.ranks.size
            src = np.repeat(self.ranks, n - 1)
            dst_idx = (np.repeat(np.arange(n), n - 1) + np.tile(np.arange(1, n), n)) % n
            dst = self.ranks[dst_idx]
            src, dst = np.tile(src, self.burst), np.tile(dst, self.burst)
            at = max(now_s, self._request_s)
            if self.round == 0:
                self.start_s = at
            fail, hang = fault_masks(self.fabric)
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
        self.left -= done.tag.size
        self.histogram("message_seconds").observe_many(done.finish_s - self._last_request_s)
        if self.left == 0:
            self.end_s = float(done.finish_s.max())
            self._request_s = self.end_s
            self._round_due = True

    _last_request_s: float = 0.0


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
    failure: str = ""  # "" | "post_error" | "hang"
    diagnosis: list[str] = field(default_factory=list)

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
    cmds = [
        InjectFault(kind=f.kind, target=f.target, params=dict(f.params), duration_s=f.duration_s)
        for f in scn.faults
    ]
    return fabric, cmds


def run_step(
    scn: Scenario,
    name: str,
    gpus: NDArray[np.int64],
    *,
    faults: Sequence[InjectFault] = (),
    size_bytes: float = 4096.0,
    rounds: int = 4,
    timeout_s: float = 1e-3,
    endpoint: EndpointParams | None = None,
) -> StepResult:
    """Run one all-to-all step on ``gpus`` (node ids) and judge it."""
    probe = ProbeAllToAll(
        name="bringup",
        traffic_class="bringup",
        ranks=gpus.astype(np.int64),
        size_bytes=size_bytes,
        rounds=rounds,
        endpoint=endpoint or EndpointParams(control="ibgda", data_path="gdr"),
    )
    fabric, scheduled = _fabric_for(scn, probe)
    for cmd in [*scheduled, *faults]:
        fabric.apply(cmd)
    names = fabric.topo.nodes.name
    deadline = timeout_s
    while not probe.done and fabric.sim_time_s < deadline:
        fabric.step()
        if probe.sent == 0 and probe.round >= rounds:
            break
    ep = probe.ep
    assert ep is not None
    idx = gpus.astype(np.intp)
    view = probe.histogram("message_seconds").freeze()
    elapsed = (probe.end_s if probe.done else fabric.sim_time_s) - (
        probe.start_s if np.isfinite(probe.start_s) else 0.0
    )
    n_msgs = rounds * probe.burst * gpus.size * (gpus.size - 1)
    rate = probe.received / elapsed / gpus.size if elapsed > 0 else 0.0
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
                f"{names[idx[g]]}: {int(stuck[g])} WQE(s) posted, no completion after "
                f"{timeout_s * 1e6:.0f} µs timeout: stuck in the send queue (doorbell rung, "
                "the NIC never executed the WQE)"
            )
    if not failure and not probe.done:
        failure = "hang"
        diagnosis.append(
            f"{probe.received}/{n_msgs} messages completed before the {timeout_s * 1e6:.0f} µs timeout"
        )
    return StepResult(
        name=name,
        gpus=[names[i] for i in idx],
        passed=not failure,
        messages=n_msgs,
        completed=probe.received,
        message_rate_per_s=rate,
        latency_p50_s=view.quantile(0.5),
        latency_p99_s=view.quantile(0.99),
        elapsed_s=elapsed,
        failure=failure,
        diagnosis=diagnosis,
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
    timeout_s: float = 1e-3,
) -> list[StepResult]:
    """The bring-up check: step 1 on two GPUs of one leaf; step 2 on every GPU if step 1 passed."""
    topo = scn.build_topology()
    links = topo.links
    up = np.isin(links.src, topo.gpus)
    leaf_of = dict(zip(links.src[up].tolist(), links.dst[up].tolist(), strict=True))
    pair = two_gpus(topo.gpus, leaf_of)
    kw: dict[str, Any] = dict(
        faults=faults, size_bytes=size_bytes, rounds=rounds, timeout_s=timeout_s
    )
    first = run_step(scn, "2-GPU all-to-all", pair, **kw)
    if not first.passed:
        return [first]
    return [first, run_step(scn, "cluster all-to-all", topo.gpus.astype(np.int64), **kw)]
