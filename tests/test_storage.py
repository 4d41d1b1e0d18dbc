"""Storage passthrough: queues, access paths, the random-read probe, XDS vs bounce, slow targets."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.commands import CommandError, InjectFault
from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import ScenarioError, load_scenario, parse_scenario
from fabric_core.storage.model import PATHS, ServerPool, StorageParams, inject_slow_target
from fabric_core.workloads.storage_io import StorageProbe

TOPO = {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4, "storage_targets": 2}


def probe_fabric(path: str, dt_override: str | None = None, **extra: Any) -> Fabric:
    raw = load_scenario("storage-random-read").raw
    if dt_override is not None:
        raw = {**raw, "dt": dt_override}
    # the probe alone (the scenario's RPC probe only slows the test down)
    raw = {**raw, "workload": [{**raw["workload"][0], "path": path, **extra}]}
    return Fabric.from_scenario(parse_scenario(raw))


def probe_kpis(path: str, duration: float = 3e-3, **extra: Any) -> dict[str, Any]:
    report = run_for(probe_fabric(path, **extra), duration)
    kpis: dict[str, Any] = report["workloads"]["probe"]["kpis"]
    return kpis


# ---------------------------------------------------------------- the queue primitive
def fifo_reference(
    arrival: list[float], work: list[float], servers: float
) -> tuple[list[float], list[float]]:
    """One node, items in arrival order (ties in given order): the recursion as a loop."""
    busy = 0.0
    starts, finishes = [0.0] * len(arrival), [0.0] * len(arrival)
    for i in sorted(range(len(arrival)), key=lambda i: arrival[i]):
        s = max(arrival[i], busy)
        busy = s + work[i] / servers
        starts[i] = s
        finishes[i] = s + work[i]
    return starts, finishes


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(
        st.tuples(
            st.integers(0, 3), st.floats(0, 1e-3), st.floats(1e-9, 1e-4)
        ),  # (node, arrival, work)
        min_size=1,
        max_size=40,
    ),
    servers=st.sampled_from([1.0, 0.5, 4.0]),
)
def test_server_pool_matches_sequential_fifo(
    items: list[tuple[int, float, float]], servers: float
) -> None:
    pool = ServerPool(4, np.full(4, servers))
    node = np.array([i[0] for i in items], dtype=np.int64)
    arrival = np.array([i[1] for i in items])
    work = np.array([i[2] for i in items])
    finish = pool.reserve(node, arrival, work)
    for n in range(4):
        m = node == n
        if not m.any():
            continue
        _, ref = fifo_reference(arrival[m].tolist(), work[m].tolist(), servers)
        np.testing.assert_allclose(finish[m], ref, rtol=0, atol=1e-12)
        assert pool.work_s[n] == pytest.approx(work[m].sum())


def test_server_pool_capacity_is_servers_per_second() -> None:
    pool = ServerPool(1, np.array([2.0]))
    node = np.zeros(1000, dtype=np.int64)
    finish = pool.reserve(node, np.zeros(1000), np.full(1000, 1e-3))
    # 1000 items of 1 ms on 2 servers: the last finishes after ~0.5 s, not 1 s or 1 ms
    assert finish.max() == pytest.approx(0.5, rel=0.01)
    assert pool.utilisation(np.array([0]), finish.max()) == pytest.approx(1.0, rel=0.01)


# ---------------------------------------------------------------- parameters and paths
def test_every_storage_parameter_has_a_source_and_unit_field() -> None:
    for f in dataclasses.fields(StorageParams):
        assert f.metadata["source"], f.name
        assert "unit" in f.metadata, f.name


def test_paths_cover_the_issue() -> None:
    assert {"local-nvme", "nvmeof", "xds", "nfs-rdma", "nfs-tcp", "nvme-tcp"} <= set(PATHS)
    assert PATHS["xds"].gpu_direct and PATHS["xds"].host_passes() == 0
    assert PATHS["nfs-tcp"].host_passes() > PATHS["nfs-rdma"].host_passes() > 0


def test_unknown_path_and_parameter_are_named() -> None:
    raw = load_scenario("storage-random-read").raw
    bad = {**raw, "workload": [{**raw["workload"][0], "path": "nfs-udp"}]}
    with pytest.raises(ScenarioError, match=r"nfs-udp.*known: local-nvme"):
        parse_scenario(bad)
    bad = {**raw, "workload": [{**raw["workload"][0], "storage": {"drive_speed": 1}}]}
    with pytest.raises(ScenarioError, match=r"unknown storage parameter.*drive_speed"):
        parse_scenario(bad)


def test_remote_path_needs_storage_targets() -> None:
    raw = {
        "topology": {**TOPO, "storage_targets": 0},
        "workload": [{"kind": "storage_io", "class": "s", "path": "nvmeof"}],
    }
    with pytest.raises(ScenarioError, match="needs storage targets"):
        Fabric.from_scenario(parse_scenario(raw))


# ---------------------------------------------------------------- small random reads (C4)
def test_small_random_reads_nvmeof_close_to_local_far_below_tcp() -> None:
    local = probe_kpis("local-nvme")["io_latency_mean_seconds"]
    nvmeof = probe_kpis("nvmeof")["io_latency_mean_seconds"]
    tcp = probe_kpis("nvme-tcp")["io_latency_mean_seconds"]
    drive = StorageParams().drive_read_latency_s
    assert local > drive  # the drive is the floor
    assert nvmeof - local < 0.4 * (tcp - local)  # the RDMA penalty is a fraction of TCP's
    assert nvmeof < 0.75 * tcp
    assert nvmeof / local < 1.4


@pytest.mark.parametrize("path", ["local-nvme", "nvmeof"])
def test_an_io_counts_once_it_has_landed(path: str) -> None:
    """A run shorter than one read (a drive's read alone is tens of µs) completes none,
    and says so: it counted each I/O when scheduled, so 50 µs showed 6.67e4 IOPS with no
    latency sample. Longer, every completed I/O has its latency sample."""
    short = probe_kpis(path, duration=10e-6)
    assert short["ios_completed"] == 0 and short["iops"] == 0
    assert short["storage_bytes_per_second"] == 0 and short["io_latency_p50_seconds"] is None
    fabric = probe_fabric(path)
    run_for(fabric, 1e-3)
    (probe,) = fabric.workloads
    assert isinstance(probe, StorageProbe)
    assert probe.io.ios_done == probe.histograms["io_seconds"].freeze().count > 0


def test_tcp_latency_grows_when_client_cpu_saturates() -> None:
    """Under load the TCP stack's CPU queue, not the drive, sets the latency."""
    light = probe_kpis("nvme-tcp", depth=1)
    heavy = probe_kpis("nvme-tcp", depth=32)
    rdma = probe_kpis("nvmeof", depth=32)
    assert heavy["client_cpu_utilisation"] > 0.9
    assert heavy["io_latency_mean_seconds"] > 2 * light["io_latency_mean_seconds"]
    assert heavy["iops"] < 0.7 * rdma["iops"]
    assert rdma["io_latency_mean_seconds"] < 0.7 * heavy["io_latency_mean_seconds"]


# ---------------------------------------------------------------- XDS vs bounce (C6)
def test_xds_moves_no_bytes_through_host_memory_and_bounce_does() -> None:
    xds = probe_kpis("xds", size="1MiB", depth=4)
    bounce = probe_kpis("nvmeof", size="1MiB", depth=4)
    tcp = probe_kpis("nfs-tcp", size="1MiB", depth=4)
    assert xds["ios_completed"] > 0 and bounce["ios_completed"] > 0
    assert xds["host_memory_bytes"] == 0.0
    assert xds["client_copy_cpu_seconds"] == 0.0
    assert bounce["host_memory_bytes_per_byte"] == 2.0
    assert tcp["host_memory_bytes_per_byte"] == 4.0
    assert tcp["client_copy_cpu_seconds"] > 0.0
    # the bounce's host→GPU copy costs time and CPU launches: xds is faster and lighter
    assert xds["io_latency_mean_seconds"] < bounce["io_latency_mean_seconds"]
    assert xds["client_cpu_utilisation"] < bounce["client_cpu_utilisation"]


# ---------------------------------------------------------------- slow target fault
def test_slow_target_raises_read_latency_and_clears() -> None:
    base = probe_kpis("nvmeof")["io_latency_mean_seconds"]
    fabric = probe_fabric("nvmeof")
    for target in ("stor00", "stor01"):
        inject_slow_target(fabric, target, latency_factor=10.0, bandwidth_factor=0.5)
    assert [f.kind for f in fabric.faults.active("slow_target")] == ["slow_target"] * 2
    slow = run_for(fabric, 3e-3)["workloads"]["probe"]["kpis"]["io_latency_mean_seconds"]
    assert slow > 5 * base
    # a fault with a duration clears itself and the target is fast again
    fabric = probe_fabric("nvmeof")
    fid = inject_slow_target(fabric, "stor00", latency_factor=50.0, duration_s=1e-3)
    run_for(fabric, 3e-3)
    assert not fabric.faults.active("slow_target")
    assert fabric.faults.faults[fid].cleared_at_s == pytest.approx(1e-3, abs=1e-4)
    sys_ = fabric.workloads[0]
    assert isinstance(sys_, StorageProbe)
    lat_f, _ = sys_.io.system.slow_factors(np.array([fabric.topo.storage[0]], dtype=np.int64))
    assert lat_f[0] == 1.0


def test_slow_target_rejects_non_storage_nodes_and_bad_params() -> None:
    fabric = probe_fabric("nvmeof")
    with pytest.raises(
        CommandError, match="slow_target targets a storage target; 'gpu0000' is a GPU"
    ):
        inject_slow_target(fabric, "gpu0000")
    with pytest.raises(CommandError, match="latency_factor"):
        inject_slow_target(fabric, "stor00", latency_factor=0.5)


def test_slow_target_through_the_command_interface() -> None:
    fabric = probe_fabric("nvmeof")
    out = fabric.apply(InjectFault(kind="slow_target", target="stor00", params={}))
    assert out["fault_id"]
    with pytest.raises(CommandError, match="unknown storage 'stor99'"):
        fabric.apply(InjectFault(kind="slow_target", target="stor99", params={}))


def test_io_records_are_reused_so_memory_stays_bounded() -> None:
    fabric = probe_fabric("local-nvme", depth=2)
    run_for(fabric, 3e-3)
    wl = fabric.workloads[0]
    assert isinstance(wl, StorageProbe)
    client = wl.io
    assert client.ios_done > 100
    # thousands of I/Os went through a few dozen records
    assert client.slots <= 4 * 2 * 4


def test_storage_workloads_of_one_fabric_share_their_parameters() -> None:
    raw = {
        "topology": TOPO,
        "workload": [
            {"kind": "storage_io", "class": "s", "path": "xds"},
            {"kind": "checkpoint", "class": "c", "storage": {"client_cores": 4}},
        ],
    }
    with pytest.raises(ScenarioError, match="share the same storage parameters"):
        Fabric.from_scenario(parse_scenario(raw))
    raw["workload"][0]["storage"] = {"client_cores": 4}
    fabric = Fabric.from_scenario(parse_scenario(raw))
    assert len(fabric.workloads) == 2


def test_io_latency_does_not_depend_on_the_tick() -> None:
    """Storage queues run in continuous time; only the transfer waits for its tick."""
    fine = probe_kpis("nvmeof", size="64KiB", depth=4, dt_override="5us")
    coarse = probe_kpis("nvmeof", size="64KiB", depth=4, dt_override="50us")
    assert coarse["io_latency_mean_seconds"] == pytest.approx(
        fine["io_latency_mean_seconds"], rel=0.1
    )
    assert coarse["iops"] == pytest.approx(fine["iops"], rel=0.1)
