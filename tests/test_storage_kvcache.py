"""KVCache offload/restore: a hit restores KV from storage instead of prefilling; slow targets hurt TTFT."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.storage.model import inject_slow_target
from fabric_core.workloads.kvcache import KvCache

KV_BYTES = 1024 * 327680.0  # 1,024 tokens of Llama-3-70B


def fabric(path: str, *, serving: bool = True, **extra: Any) -> Fabric:
    raw = load_scenario("storage-kvcache").raw
    kv = {**raw["workload"][0], "path": path, **extra}
    rest = raw["workload"][1:] if serving else []
    return Fabric.from_scenario(parse_scenario({**raw, "dt": "100us", "workload": [kv, *rest]}))


def kv_workload(f: Fabric) -> KvCache:
    wl = f.workloads[0]
    assert isinstance(wl, KvCache) and wl.store is not None
    return wl


def restore_times(f: Fabric, kv_bytes: list[float]) -> list[float]:
    """The API a PD workload would call: restore(gpu, bytes, t), then pop_done(upto) per tick."""
    store = kv_workload(f).store
    assert store is not None
    gpus = f.topo.gpus[: len(kv_bytes)].astype(np.int64)
    rid = store.restore(gpus, np.array(kv_bytes), np.zeros(len(kv_bytes)))
    done: dict[int, float] = {}
    while len(done) < len(kv_bytes) and f.sim_time_s < 0.5:
        f.step()
        ids, t = store.pop_done(f.sim_time_s)
        done.update(zip(ids.tolist(), t.tolist(), strict=True))
    assert sorted(done) == sorted(rid.tolist())
    return [done[int(r)] for r in rid]


def quiet(path: str) -> Fabric:
    return fabric(path, serving=False, rate_per_s=0.0)


def test_store_api_restores_whole_requests() -> None:
    small, large = restore_times(quiet("xds"), [10e6, 30e6])
    assert 0 < small < large


def test_restore_time_by_path() -> None:
    """4 GPUs restore 320 MiB each at once: xds < nvmeof (bounce) < nvme-tcp (CPU-bound copy)."""
    t = {p: max(restore_times(quiet(p), [KV_BYTES] * 4)) for p in ("xds", "nvmeof", "nvme-tcp")}
    assert t["xds"] < t["nvmeof"] < t["nvme-tcp"]
    # receiving 320 MiB through kernel TCP costs ~64 ms of one core: the restore waits for it
    assert t["nvme-tcp"] > KV_BYTES * 8 / 42e9
    assert t["nvme-tcp"] > 3 * t["xds"]


def test_slow_target_raises_restore_time() -> None:
    base = max(restore_times(quiet("xds"), [KV_BYTES] * 4))
    f = quiet("xds")
    inject_slow_target(f, "stor00", latency_factor=10.0, bandwidth_factor=0.1)
    assert max(restore_times(f, [KV_BYTES] * 4)) > 2 * base


@pytest.fixture(scope="module")
def serving() -> dict[str, Any]:
    f = fabric("xds", serving=False)  # the KV workload alone
    out: dict[str, Any] = run_for(f, 0.12)["workloads"]["kvcache"]["kpis"]
    return out


def test_cache_hits_restore_instead_of_prefill(serving: dict[str, Any]) -> None:
    assert serving["ios_completed"] > 0 and 0 < serving["hit_fraction"] < 1
    assert serving["restore_p50_seconds"] < serving["prefill_seconds"]
    assert serving["ttft_hit_p50_seconds"] < 0.8 * serving["ttft_miss_p50_seconds"]
    assert serving["host_memory_bytes"] == 0.0 and serving["client_copy_cpu_seconds"] == 0.0


def test_request_records_are_reused() -> None:
    f = quiet("xds")
    for _ in range(5):
        restore_times(f, [10e6, 10e6])
    store = kv_workload(f).store
    assert store is not None and store.slots <= 4
