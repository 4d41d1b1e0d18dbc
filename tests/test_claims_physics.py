"""A physical parameter moves each claim's figure as its formula says (issues 17 and 22:
"changing each of these parameters moves its result as the formula says; a test per claim")."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from console.claimsrun import Settings
from console.claimsrun.measure_endpoints import measure_c1, measure_c2
from console.claimsrun.measure_fabric import (
    DEFAULT_LEAVES,
    DEFAULT_OUTSTANDING,
    ROUTING_SEEDS,
    _p99_over_seeds,
    fabric_table,
    measure_c10,
    recovery,
)
from console.claimsrun.measure_inference import pd_share
from console.claimsrun.measure_latency import measure_c7
from console.claimsrun.measure_storage import measure_c4, measure_c5
from console.claimsrun.runs import bundled, run_scenario, set_workloads
from fabric_core.commands import InjectFault
from fabric_core.endpoints.params import EndpointParams
from fabric_core.net.profiles import get_profile
from fabric_core.reports.bringup import check_ibgda
from fabric_core.reports.storage import STORAGE_KINDS
from fabric_core.runtime.scenario import parse_scenario
from fabric_core.storage.model import StorageParams
from fabric_core.workloads.kvcache import KvCache
from tests.helpers import scenario_alone


def _tick(label: str) -> None:
    pass


def test_a_slower_roce_switch_widens_the_c7_gap() -> None:
    base = measure_c7(Settings(quick=True), _tick)
    slow = measure_c7(
        Settings(quick=True, profile_overrides={"roce-400g": {"switch_latency_s": 1.2e-6}}),
        _tick,
    )
    for part in ("3-switch", "sub-microsecond"):
        assert slow.parts[part].right.value > base.parts[part].right.value
        assert slow.parts[part].left.value == base.parts[part].left.value  # native untouched
    assert (
        slow.parts["3-switch"].metrics["gap_3sw_ge_4k"]
        > base.parts["3-switch"].metrics["gap_3sw_ge_4k"]
    )
    # and the sweep at every size, over 1 and 3 switches
    for b, s in zip(base.sweeps, slow.sweeps, strict=True):
        if b.key.startswith("c7_gap"):
            assert all(
                y > x
                for x, y in zip(b.series["native vs RoCE"], s.series["native vs RoCE"], strict=True)
            )


def _c5_gap(cores: float) -> float:
    m = measure_c5(Settings(quick=True, storage={"client_cores": cores}), _tick)
    util = m.parts["util"]
    return util.left.value - util.right.value


def test_more_client_cores_narrow_the_c5_gap() -> None:
    few, many = _c5_gap(0.5), _c5_gap(2.0)
    assert few > 0.2  # NFS over TCP is CPU-bound at half a core per GPU
    assert many < few


def test_a_slower_kv_transport_raises_the_c9_share() -> None:
    base = pd_share(Settings(), _tick, "llama3-70b", 4096)["transfer_share_of_ttft"]
    slow = pd_share(
        Settings(profile_overrides={"native-400g": {"link_bandwidth_Bps": 12.5e9}}),
        _tick,
        "llama3-70b",
        4096,
    )["transfer_share_of_ttft"]
    assert slow > base > 0
    bounce = pd_share(
        Settings(endpoint={"control": "proxy", "data_path": "bounce", "host_copy_Bps": 5e9}),
        _tick,
        "llama3-70b",
        4096,
    )["transfer_share_of_ttft"]
    assert bounce > base


def test_the_c7_switch_sweep_shows_the_gap_follow_the_switch_latencies() -> None:
    """With no vendor figure for either switch the claim rests on their difference: the
    sweep's gap grows with the RoCE switch's latency, falls with the native one's, and is
    about nothing (headers only) where the two are equal."""
    m = measure_c7(Settings(quick=True), _tick)
    sweep = next(s for s in m.sweeps if s.key == "c7_switch_latency_gap")
    for series in sweep.series.values():
        assert all(b > a for a, b in itertools.pairwise(series))
    by_native = list(sweep.series.values())
    at = sweep.x.index(250e-9)  # the RoCE point nearest the native switch's 275 ns
    assert by_native[0][at] > by_native[1][at] > by_native[2][at]  # 150, 275, 400 ns
    assert abs(by_native[1][at]) < 0.05  # 3 x 25 ns and the headers, of ~1.8 us


# --- one test per claim: the parameter the claim rests on moves it as its formula says ---


def test_c1_each_bounce_copy_costs_its_launch_and_gdr_has_none() -> None:
    """The bounce path copies twice (sender GPU → host, host → receiver GPU): a copy
    launch 1 µs dearer adds 2 µs to it and nothing to GPUDirect RDMA."""
    base = measure_c1(Settings(quick=True), _tick).parts["latency"]
    dearer = EndpointParams().copy_launch_s + 1e-6
    slow = measure_c1(Settings(quick=True, endpoint={"copy_launch_s": dearer}), _tick)
    slow_part = slow.parts["latency"]
    assert slow_part.left.value == base.left.value
    assert slow_part.right.value - base.right.value == pytest.approx(2 * 1e-6, rel=1e-6)


def test_c2_the_proxy_thread_posts_every_message_ibgda_does_not_wait_for_it() -> None:
    """EP 8, 128 tokens × top-8 per rank: the proxy's one thread posts 1,024 work
    requests a rank, so 0.2 µs more per post adds about 1,024 × 0.2 µs = 205 µs to its
    dispatch; IBGDA's GPU threads post in parallel and do not move."""
    base = measure_c2(Settings(quick=True), _tick).parts["dispatch"]
    slow = measure_c2(Settings(quick=True, endpoint={"cpu_post_s": 4e-7}), _tick).parts["dispatch"]
    assert slow.left.value == base.left.value
    assert slow.right.value - base.right.value == pytest.approx(128 * 8 * 0.2e-6, rel=0.03)


def test_c3_a_mismatched_gpu_loses_its_own_posts_only() -> None:
    """The bring-up check's cluster step completes every message except those whose
    sender has mismatched versions: 1 − k/8 of them with k such GPUs of 8."""
    scn = parse_scenario(bundled("tiny"), "tiny")
    for k, targets in enumerate(([], ["gpu0005"], ["gpu0005", "gpu0006"])):
        steps = check_ibgda(
            scn, faults=[InjectFault(kind="version_mismatch", target=t) for t in targets]
        )
        assert steps[0].passed  # the 2-GPU step holds neither
        cluster = steps[-1]
        assert cluster.passed == (k == 0)
        assert cluster.completed / cluster.messages == pytest.approx(1 - k / 8)


def test_c4_the_tcp_stack_latency_lands_on_tcp_only() -> None:
    """10 µs more of kernel TCP stack per I/O moves NVMe/TCP's median by about that
    (the median of a histogram: within its bucket) and NVMe over RDMA not at all."""
    base = measure_c4(Settings(quick=True), _tick).parts["vs-tcp"]
    slow = measure_c4(Settings(quick=True, storage={"tcp_stack_latency_s": 90e-6}), _tick)
    part = slow.parts["vs-tcp"]
    assert part.left.value == base.left.value
    assert part.right.value - base.right.value == pytest.approx(10e-6, rel=0.15)


def _lone_restore_s(path: str, pcie_Bps: float) -> float:
    """One KV restore (320 MiB) with nothing else on the fabric or the hosts: the
    storage-kvcache scenario's KV cache alone, every request a hit, stopped after its
    first request; the restore's time from its request to its last block in GPU memory."""
    fabric = scenario_alone(
        "storage-kvcache",
        "kvcache",
        dt="100us",
        path=path,
        hit_rate=1.0,
        offload=False,
        storage={"pcie_Bps": pcie_Bps},
    )
    wl = fabric.workloads[0]
    store = wl.store
    assert isinstance(wl, KvCache) and store is not None
    while wl.hits == 0:
        fabric.run_ticks(1)
    wl.stop()
    assert wl.hits == 1
    took: list[float] = []
    pop_done = store.pop_done

    def timed(upto_s: float, *, external: bool = True) -> tuple[Any, Any]:
        ids, t = pop_done(upto_s, external=external)
        took.extend((t - store.start[ids]).tolist())
        return ids, t

    store.pop_done = timed  # type: ignore[method-assign]
    while not took:
        fabric.run_ticks(10)
    return took[0]


def test_c6_the_host_copy_crosses_pcie_once_more_and_xds_does_not() -> None:
    """NVMe-oF via host memory copies the KV (320 MiB) over the host's PCIe once more than
    XDS. Where those copies bound a restore (the host's PCIe at a quarter of its rate and
    below), halving the rate again adds 320 MiB / 7.2 GB/s − 320 MiB / 14.4 GB/s to a lone
    restore, and XDS's does not move. (At its full rate the copies overlap the blocks
    still on their way, so halving it adds less: 4.5 ms against 5.8. Asserted under load
    before session 25, the full formula held for one sample of the requests only.)"""
    rate = StorageParams().pcie_Bps
    kv = 320 * 2**20
    quarter, eighth = (_lone_restore_s("nvmeof", rate / d) for d in (4, 8))
    assert eighth - quarter == pytest.approx(kv / (rate / 8) - kv / (rate / 4), rel=0.02)
    xds = _lone_restore_s("xds", rate)
    assert _lone_restore_s("xds", rate / 8) == xds
    assert _lone_restore_s("nvmeof", rate) > xds  # the one more crossing costs, at any rate


def test_c8_credits_are_lossless_whatever_the_buffer_and_the_watchdog_trades_drops_for_life() -> (
    None
):
    """pfc-deadlock: the native fabric drops nothing and never deadlocks, with a quarter
    of its buffer too; on RoCE the cycle deadlocks, and a watchdog short enough to fire
    in the run breaks it by dropping, so the fabric carries more."""

    def run(prof: str, **over: float) -> dict[str, Any]:
        s = Settings(quick=True, profile_overrides={prof: over})
        return run_scenario(bundled("pfc-deadlock"), 10e-3, s, _tick, prof=prof, label=prof)

    native_buffer = get_profile("native-400g").buffer_per_vl_bytes
    for rep in (run("native-400g"), run("native-400g", buffer_per_vl_bytes=native_buffer / 4)):
        assert rep["deadlocks"] == 0 and rep["totals"]["dropped_bytes"] == 0
    stuck, watched = run("roce-400g"), run("roce-400g", pfc_watchdog_s=2e-3)
    assert stuck["deadlocks"] > 0
    tput = "throughput_bytes_per_second"
    assert watched["totals"][tput] > 1.2 * stuck["totals"][tput]


def test_c10_roce_recovery_waits_for_the_blackholed_senders_ack_timeout() -> None:
    """RoCE's senders whose bytes the dead link swallowed hear nothing back and resend
    when their RC local ACK timeout is up, each time it is (docs/MODEL.md, "Faults and
    recovery"). With NCCL's timeout (4.096 µs × 2^18 = 1.07 s) longer than BFD's
    detection plus the ECMP reconvergence (0.9 + 0.1 s), recovery follows the timeout:
    50 ms more of it is 50 ms more recovery, 50 ms less reconvergence changes nothing. A
    0.3 s timeout resends into the dead link at 0.3, 0.6 and 0.9 s and gets through at
    1.2 s, on the new path. Native does not move."""
    roce = get_profile("roce-400g")
    timeout = roce.local_ack_timeout_s
    assert timeout == pytest.approx(4.096e-6 * 2**18)

    def run(**over: float) -> dict[str, float]:
        return recovery(Settings(quick=True, profile_overrides={"roce-400g": over}), _tick)

    base = run()
    later, faster_ecmp, short = (
        run(local_ack_timeout_s=timeout + 0.05),
        run(ecmp_reconverge_s=0.05),
        run(local_ack_timeout_s=0.3),
    )
    tick = 100e-6  # the RoCE run's tick (``recovery``)
    assert later["native-400g"] == base["native-400g"]
    assert roce.bfd_interval_s * roce.bfd_multiplier + roce.ecmp_reconverge_s < timeout
    # the loss is seen a tick after the failure, and the resent bytes refill the
    # measurement window within a few ticks
    assert timeout < base["roce-400g"] < timeout + 20 * tick
    assert later["roce-400g"] - base["roce-400g"] == pytest.approx(0.05, abs=2 * tick)
    assert faster_ecmp["roce-400g"] == pytest.approx(base["roce-400g"], abs=2 * tick)
    assert 4 * 0.3 < short["roce-400g"] < 4 * 0.3 + 20 * tick


def test_c10_800g_links_double_what_the_fabric_carries_when_links_are_the_limit() -> None:
    """The same bulk load on 400G and 800G: throughput follows the link rate (less
    what the endpoints and the load's own gaps take), within 20 % of 2×."""
    m = measure_c10(Settings(quick=True), _tick).parts["800g"]
    next_rate = get_profile("native-800g").link_bandwidth_Bps
    ratio = next_rate / get_profile("native-400g").link_bandwidth_Bps
    assert m.ratio == pytest.approx(ratio, rel=0.2)


def test_c10_routing_tails_are_means_over_seeds_the_routings_share() -> None:
    """A bulk p99 of a few hundred flows moves with the draws by ±10 %: the routing
    comparison averages seeds, and each routing runs on the same ones (its runs are the
    fabric table's with those seeds, so a seed's figures are paired)."""
    settings = Settings(quick=True, seed=5)
    mean, each = _p99_over_seeds(settings, _tick, DEFAULT_OUTSTANDING, "spray")
    assert len(each) == ROUTING_SEEDS[0]
    assert len(set(each)) == len(each)  # other seeds, other draws
    assert mean == pytest.approx(sum(each) / len(each), rel=1e-12)
    for k, p99 in enumerate(each):
        table = fabric_table(DEFAULT_LEAVES, DEFAULT_OUTSTANDING, "spray")
        one = run_scenario(table, 1e-3, Settings(quick=True, seed=5 + k), _tick, label="seed")
        assert p99 == one["classes"]["bulk"]["p99_seconds"]


def test_a_drained_kv_run_counts_every_request_of_its_window() -> None:
    """KV restores over NVMe/TCP take tens of ms: a 100 ms window ends with some under
    way, and a TTFT percentile of that run leaves them out (the slow path's slowest).
    Drained, the run stops its arrivals at the window's end and goes on until all are
    done: the same requests, every one counted."""
    raw = set_workloads(bundled("storage-kvcache"), STORAGE_KINDS, path="nvme-tcp", rate_per_s=10.0)
    raw["dt"] = "100us"
    cut = run_scenario(raw, 0.1, Settings(quick=True), _tick, label="kv cut")
    drained = run_scenario(raw, 0.1, Settings(quick=True), _tick, label="kv drained", drain=True)
    k_cut = cut["workloads"]["kvcache"]["kpis"]
    k_all = drained["workloads"]["kvcache"]["kpis"]
    assert k_cut["requests_outstanding"] > 0
    assert k_all["requests_outstanding"] == 0
    assert k_all["hit_fraction"] == k_cut["hit_fraction"]  # the same arrivals
    assert drained["run"]["simulated_seconds"] > 0.1
    assert k_all["ttft_p50_seconds"] > k_cut["ttft_p50_seconds"]
