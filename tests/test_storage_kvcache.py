"""KVCache offload/restore: a hit restores KV from storage instead of prefilling; slow targets hurt TTFT."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fabric_core.fabric import Fabric
from fabric_core.report import run_for
from fabric_core.scenario import load_scenario, parse_scenario
from fabric_core.storage import inject_slow_target
from fabric_core.workloads.kvcache import KvCache


def fabric(path: str, **extra: Any) -> Fabric:
    raw = load_scenario("storage-kvcache").raw
    raw = {**raw, "workload": [{**raw["workload"][0], "path": path, **extra}]}
    return Fabric.from_scenario(parse_scenario(raw))


def kpis(f: Fabric, duration: float = 0.12) -> dict[str, Any]:
    out: dict[str, Any] = run_for(f, duration)["workloads"]["kvcache"]["kpis"]
    return out


@pytest.fixture(scope="module")
def xds() -> dict[str, Any]:
    return kpis(fabric("xds"))


def test_restore_beats_prefill_on_xds(xds: dict[str, Any]) -> None:
    assert xds["ios_completed"] > 0
    assert xds["restore_p50_seconds"] < xds["prefill_seconds"]
    assert xds["ttft_hit_p50_seconds"] < xds["ttft_miss_p50_seconds"]
    assert xds["host_memory_bytes"] == 0.0


def test_tcp_restore_is_slower_and_costs_client_cpu(xds: dict[str, Any]) -> None:
    tcp = kpis(fabric("nvme-tcp"))
    assert tcp["restore_p50_seconds"] > 1.5 * xds["restore_p50_seconds"]
    assert tcp["client_cpu_utilisation"] > 10 * xds["client_cpu_utilisation"]
    assert tcp["host_memory_bytes_per_byte"] == 4.0


def test_slow_target_raises_restore_time_and_ttft(xds: dict[str, Any]) -> None:
    f = fabric("xds")
    inject_slow_target(f, "stor00", latency_factor=10.0, bandwidth_factor=0.1)
    slow = kpis(f)
    assert slow["restore_p50_seconds"] > 1.3 * xds["restore_p50_seconds"]
    assert slow["ttft_hit_p50_seconds"] > xds["ttft_hit_p50_seconds"]


def test_store_api_restores_whole_requests() -> None:
    """The API a PD workload would call: restore(gpu, bytes, t) then pop_done(upto)."""
    f = fabric("xds", rate_per_s=0.0)
    wl = f.workloads[0]
    assert isinstance(wl, KvCache) and wl.store is not None
    gpus = f.topo.gpus[:2].astype(np.int64)
    rid = wl.store.restore(gpus, np.array([10e6, 30e6]), np.zeros(2))
    done: dict[int, float] = {}
    for _ in range(200):
        f.step()
        ids, t = wl.store.pop_done(f.sim_time_s)
        done.update(zip(ids.tolist(), t.tolist(), strict=True))
        if len(done) == 2:
            break
    assert sorted(done) == sorted(rid.tolist())
    # the 30 MB request takes longer than the 10 MB one
    assert done[int(rid[1])] > done[int(rid[0])] > 0
