"""Training data loading: GPU utilisation follows the client's CPU budget on NFS/TCP and the
compute on NFS/RDMA (C5 holds only where the budget is short of what the reads need)."""

from __future__ import annotations

from typing import Any

import pytest

from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.storage.model import StorageParams, inject_slow_target


def preset(path: str, **extra: Any) -> Fabric:
    raw = load_scenario("training-nfs").raw
    loader = {**raw["workload"][0], "path": path, **extra}
    # the loader alone (the preset's RPC probe only slows the test down) on a 200 µs tick
    # (the bundled 40 µs gives the same figures, 5× slower; see docs/STORAGE.md)
    raw = {**raw, "dt": "200us", "workload": [loader]}
    return Fabric.from_scenario(parse_scenario(raw))


def kpis(fabric: Fabric, duration: float = 0.25) -> dict[str, Any]:
    out: dict[str, Any] = run_for(fabric, duration)["workloads"]["loader"]["kpis"]
    return out


@pytest.fixture(scope="module")
def tcp() -> dict[str, Any]:
    return kpis(preset("nfs-tcp"))


@pytest.fixture(scope="module")
def rdma() -> dict[str, Any]:
    return kpis(preset("nfs-rdma"))


def test_default_preset_is_loader_bound_on_nfs_tcp(tcp: dict[str, Any]) -> None:
    assert tcp["steps_started"] >= 8 * 4
    assert tcp["gpu_utilisation"] < 0.75
    assert tcp["data_wait_fraction"] > 0.25
    # the reason is visible: the client CPU (per-byte receive copy) is saturated
    assert tcp["client_cpu_utilisation"] > 0.9
    assert tcp["client_copy_cpu_seconds"] > 0
    # the loader delivers what the CPU can copy, short of what the GPUs ask for
    assert tcp["loader_bytes_per_second"] < 0.8 * tcp["demand_bytes_per_second"]


def test_default_preset_is_near_compute_bound_on_nfs_rdma(
    tcp: dict[str, Any], rdma: dict[str, Any]
) -> None:
    assert rdma["gpu_utilisation"] > 0.95
    assert rdma["client_cpu_utilisation"] < 0.5
    assert rdma["client_copy_cpu_seconds"] == 0.0
    # compute-bound: a step takes the compute time (30 ms), plus at most a little waiting
    assert rdma["step_seconds_mean"] == pytest.approx(30e-3, rel=0.05)


def _cores_needed_per_gpu() -> float:
    """Client cores one GPU's NFS/TCP reads need at the preset's demand, from the
    parameters: per 1 MiB read the stack's CPU (initiator + NFS RPC), the bounce buffer's
    cudaMemcpy launch and the receive copy of every byte; demand 128 MiB per 30 ms."""
    p = StorageParams()
    io = 1024**2
    per_byte = (
        p.tcp_rx_cpu_s_per_byte + (p.tcp_io_cpu_s + p.nfs_rpc_cpu_s + p.cuda_memcpy_cpu_s) / io
    )
    return 128 * 1024**2 / 30e-3 * per_byte


@pytest.mark.parametrize("cores", [0.25, 0.5])
def test_a_cpu_bound_loader_keeps_the_gpus_busy_in_proportion_to_its_cores(cores: float) -> None:
    """While the client CPU is the bottleneck the loader delivers cores / (CPU per byte),
    so GPU utilisation is cores / cores needed (about 0.94 here); the preset's 0.5 core is
    one point of that line, not a figure the result was tuned to."""
    got = kpis(preset("nfs-tcp", storage={"client_cores": cores}), 0.6)  # a few steps
    assert got["client_cpu_utilisation"] > 0.9
    assert got["gpu_utilisation"] == pytest.approx(cores / _cores_needed_per_gpu(), rel=0.05)


def test_utilisation_follows_from_cpu_not_from_a_constant(tcp: dict[str, Any]) -> None:
    """More cores for the TCP stack lift the TCP run (the preset gives it 0.5); nothing else changed."""
    few = tcp
    more = kpis(preset("nfs-tcp", storage={"client_cores": 2.0}), 0.15)
    assert more["gpu_utilisation"] > few["gpu_utilisation"] + 0.2
    assert more["client_cpu_utilisation"] < few["client_cpu_utilisation"]


def test_slow_target_lowers_gpu_utilisation() -> None:
    fabric = preset("nfs-rdma")
    inject_slow_target(fabric, "stor00", latency_factor=10.0, bandwidth_factor=0.25)
    slow = kpis(fabric, 0.15)
    # half of every batch comes from stor00, whose drives now give 13.6 GB/s for ~18 GB/s asked
    assert slow["gpu_utilisation"] < 0.9
    assert slow["data_wait_fraction"] > 0.1
