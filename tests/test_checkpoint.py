"""Checkpoint bursts: large writes from all GPUs raise other classes' latency, less on their own lane."""

from __future__ import annotations

from typing import Any

import pytest

from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario


def run(name: str, *, checkpoint: bool = True, duration: float = 3e-3) -> dict[str, Any]:
    raw = load_scenario(name).raw
    if not checkpoint:
        raw = {**raw, "workload": [w for w in raw["workload"] if w["kind"] != "checkpoint"]}
    return run_for(Fabric.from_scenario(parse_scenario(raw)), duration)


@pytest.fixture(scope="module")
def quiet() -> dict[str, Any]:
    return run("checkpoint-burst", checkpoint=False)


@pytest.fixture(scope="module")
def shared() -> dict[str, Any]:
    return run("checkpoint-burst")


@pytest.fixture(scope="module")
def own_lane() -> dict[str, Any]:
    return run("checkpoint-burst-vl")


def test_burst_writes_from_every_gpu(shared: dict[str, Any]) -> None:
    """At 3 ms the burst is under way; by 6 ms every GPU's 32 MiB shard has landed, 8 × 32
    I/Os of 1 MiB. An I/O counts once it has landed (it counted when scheduled, so a run
    that ended before its I/Os landed showed them done: 128 at 3 ms, not 120)."""
    k = shared["workloads"]["checkpoint"]["kpis"]
    assert k["bursts_started"] == 1 and k["in_burst"] == 1
    assert 0 < k["ios_completed"] < 8 * 32
    assert shared["classes"]["checkpoint"]["completed"] > 0
    done = run("checkpoint-burst", duration=6e-3)["workloads"]["checkpoint"]["kpis"]
    assert done["in_burst"] == 0 and done["ios_completed"] == 8 * 32
    assert done["checkpoint_seconds_last"] > 0


def test_burst_raises_latency_of_other_classes(
    quiet: dict[str, Any], shared: dict[str, Any]
) -> None:
    q, s = quiet["classes"]["rpc"], shared["classes"]["rpc"]
    assert s["completed"] > 100
    assert s["p99_seconds"] > 10 * q["p99_seconds"]
    assert s["mean_seconds"] > 3 * q["mean_seconds"]


def test_own_virtual_lane_protects_other_classes(
    quiet: dict[str, Any], shared: dict[str, Any], own_lane: dict[str, Any]
) -> None:
    q, s, v = (r["classes"]["rpc"] for r in (quiet, shared, own_lane))
    assert own_lane["workloads"]["checkpoint"]["kpis"]["ios_completed"] > 0  # (under way)
    assert v["p99_seconds"] < 0.2 * s["p99_seconds"]
    assert v["mean_seconds"] < 2 * q["mean_seconds"]


def test_checkpoint_finishes_and_reports_its_duration() -> None:
    raw = load_scenario("checkpoint-burst").raw
    wl = [{**w, "size": "4MiB"} if w["kind"] == "checkpoint" else w for w in raw["workload"]]
    r = run_for(Fabric.from_scenario(parse_scenario({**raw, "workload": wl})), 3e-3)
    k = r["workloads"]["checkpoint"]["kpis"]
    assert k["in_burst"] == 0.0
    # 8 GPUs × 4 MiB: at most the two targets' links (2 × 50 GB/s), and not absurdly slow
    assert 8 * 4 * 2**20 / 100e9 < k["checkpoint_seconds_last"] < 2.5e-3


def test_operator_starts_a_checkpoint_with_the_start_command() -> None:
    from fabric_core.commands import StartWorkload

    raw = load_scenario("checkpoint-burst").raw
    wl = [
        {**w, "size": "2MiB", "start_stopped": True} if w["kind"] == "checkpoint" else w
        for w in raw["workload"]
    ]
    fabric = Fabric.from_scenario(parse_scenario({**raw, "workload": wl}))
    fabric.run_ticks(100)
    ck = run_for(fabric, 1e-4)["workloads"]["checkpoint"]["kpis"]
    assert ck["bursts_started"] == 0
    for expected in (1, 2):  # once, and again after it finished
        fabric.apply(StartWorkload(workload="checkpoint"))
        ck = run_for(fabric, 1.5e-3)["workloads"]["checkpoint"]["kpis"]
        assert ck["bursts_started"] == expected and ck["in_burst"] == 0.0
        assert ck["checkpoint_seconds_last"] > 0
