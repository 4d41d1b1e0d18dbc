"""RoCEv2 next to the credit fabric: PFC headroom, victims, DCQCN, deadlock, ECN settings, latency."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.commands import CommandError, SetParam
from fabric_core.net.profiles import ROCE_400G, get_profile
from fabric_core.net.topology import leaf_spine
from fabric_core.reports.compare import message_latency
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.workloads.traffic import Scripted

BIG = 1e12
SHALLOW = 512 * 1024  # a shallow-buffer switch: PFC pauses early


def _incast_fabric(prof, dt: float, senders: int = 8) -> tuple[Fabric, Scripted]:  # type: ignore[no-untyped-def]
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=9)
    idx = topo.nodes.index
    flows = [(idx[f"gpu{k:04d}"], idx["gpu0009"], 8 * 1024**2, 0.0) for k in range(senders)]
    wl = Scripted(name="incast", traffic_class="bulk", flows=flows)
    return Fabric(topo, prof, [wl], dt_s=dt, seed=1), wl


# up to the longest ticks a live engine may adapt to: the reaction's bytes past XOFF are one
# allowance, not one per tick, or a queue whose sender resumes within a long tick overflows
@pytest.mark.parametrize("dt", [1e-6, 10e-6, 40e-6, 100e-6])
def test_pfc_headroom_from_the_driver_formula_drops_nothing(dt: float) -> None:
    prof = dataclasses.replace(ROCE_400G, pfc_buffer_mode="static", pfc_buffer_bytes=SHALLOW)
    fabric, wl = _incast_fabric(prof, dt)
    while len(wl.finished) < 8:
        fabric.step()
    assert fabric.counters["pause_frames_total"].sum() > 0  # PFC did act
    assert fabric.dropped_bytes == 0
    assert fabric.counters["retransmitted_bytes_total"].sum() == 0
    # mlx5's calculate_xoff, (301 + 2.16 · cable_m) · Gb/s + 2.72 · MTU, by hand at 400 Gb/s
    # and a 9000 B (jumbo) MTU: 307.48 · 400 + 24,480 = 147,472 B on the 3 m GPU cables,
    # 365.8 · 400 + 24,480 = 170,800 B on the 30 m leaf-spine ones
    links = fabric.topo.links
    headroom = fabric.pfc.buffer - fabric.pfc.xoff
    for name, i in links.index.items():
        want = 147_472.0 if "gpu" in name else 170_800.0
        assert headroom[i * fabric.n_vls : (i + 1) * fabric.n_vls] == pytest.approx(want), name


def test_too_little_headroom_drops_and_goes_back_n() -> None:
    prof = dataclasses.replace(
        ROCE_400G, pfc_buffer_mode="static", pfc_buffer_bytes=SHALLOW, pfc_headroom_bytes=2000.0
    )
    fabric, wl = _incast_fabric(prof, 1e-6)
    while len(wl.finished) < 8:
        fabric.step()
    snap = fabric.snapshot()
    assert snap.totals.dropped_bytes_total > 0
    assert float(np.sum(snap.link_state.discards_bytes_total)) > 0
    # every dropped byte is resent (sums in another order: equal to rounding)
    resent = float(np.sum(snap.link_state.retransmitted_bytes_total))
    assert resent >= snap.totals.dropped_bytes_total * (1 - 1e-12)
    # every byte still arrives exactly once (go-back-N resends what was lost)
    assert snap.totals.delivered_bytes_total == pytest.approx(8 * 8 * 1024**2)


def _victim_run(prof) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """DCQCN's motivating case, scaled: long flows A (to the hot receiver) and B (to
    another one on the same leaf); 14 leaf-mates of the hot receiver then incast onto it."""
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=16)
    idx = topo.nodes.index
    longs = Scripted(
        name="long",
        traffic_class="bulk",
        flows=[
            (idx["gpu0000"], idx["gpu0016"], BIG, 0.0),
            (idx["gpu0001"], idx["gpu0017"], BIG, 0.0),
        ],
    )
    burst = [(idx[f"gpu{k:04d}"], idx["gpu0016"], 2 * 1024**2, 1e-3) for k in range(18, 32)]
    incast = Scripted(name="incast", traffic_class="bulk", flows=burst)
    fabric = Fabric(topo, prof, [longs, incast], dt_s=1e-6, seed=1)
    fabric.run_ticks(900)

    def rate_of_b(ticks: int) -> float:
        before = fabric.flows.delivered[1]
        fabric.run_ticks(ticks)
        return float(fabric.flows.delivered[1] - before) / (ticks * fabric.dt_s)

    b_before = rate_of_b(100)
    spine_to_leaf = topo.links.index["spine00->leaf01"]
    pauses0 = fabric.counters["pause_frames_total"][spine_to_leaf]
    b_during = rate_of_b(400)
    incast_rates = []
    if fabric.dcqcn is not None:
        slots = np.flatnonzero(fabric.flows.active & (fabric.flows.workload == 1))
        incast_rates = fabric.dcqcn.rc[slots].tolist()
    return {
        "b_before": b_before,
        "b_during": b_during,
        "pauses_on_b_link": float(fabric.counters["pause_frames_total"][spine_to_leaf] - pauses0),
        "cnps": fabric.dcqcn.cnps_total if fabric.dcqcn is not None else 0.0,
        "cnps_on_ports": float(fabric.snapshot().link_state.cnp_handled_total.sum()),
        "min_incast_rate": min(incast_rates) if incast_rates else float("nan"),
        "drops": fabric.dropped_bytes,
    }


def test_pfc_pauses_the_flow_that_does_not_go_to_the_congested_port() -> None:
    # PFC alone: DCQCN, fed back every 4 µs, cuts the incast before the shallow buffer
    # pauses anyone, and B then gains A's share
    r = _victim_run(
        dataclasses.replace(
            ROCE_400G,
            pfc_buffer_mode="static",
            pfc_buffer_bytes=SHALLOW,
            congestion_control="none",
        )
    )
    assert r["pauses_on_b_link"] > 0
    # B's own path is not congested (its receiver is idle) yet it is held back
    assert r["b_during"] < 0.5 * r["b_before"]
    assert r["drops"] == 0


def test_dcqcn_cuts_the_incast_senders() -> None:
    r = _victim_run(ROCE_400G)
    assert r["cnps"] > 0
    assert r["cnps_on_ports"] == r["cnps"]  # counted on the senders' ports for the exporter
    assert r["min_incast_rate"] <= 0.5 * ROCE_400G.link_bandwidth_Bps  # at least one cut


def test_credit_fabric_has_no_pause_frames_and_no_drops_in_the_same_case() -> None:
    r = _victim_run(get_profile("native-400g"))
    assert r["pauses_on_b_link"] == 0 and r["drops"] == 0 and r["cnps"] == 0


def _ring_throughput(profile: str, t0: float, t1: float) -> tuple[Fabric, float]:
    fabric = Fabric.from_scenario(load_scenario("pfc-deadlock", profile=profile))
    fabric.run_ticks(round(t0 / fabric.dt_s))
    ring = 0
    before = fabric.workloads[ring].delivered_bytes  # type: ignore[attr-defined]
    fabric.run_ticks(round((t1 - t0) / fabric.dt_s))
    rate = (fabric.workloads[ring].delivered_bytes - before) / (t1 - t0)  # type: ignore[attr-defined]
    return fabric, rate


def test_roce_deadlocks_on_the_cyclic_dependency_and_the_watchdog_breaks_it() -> None:
    fabric, stalled = _ring_throughput("roce-400g", 3e-3, 4.5e-3)
    assert stalled == 0.0
    dead = [e for e in fabric.events if e.kind == "deadlock"]
    assert dead, "the detector must report the cycle"
    for link in ("leaf00->spine00", "spine00->leaf01", "leaf01->spine01", "spine01->leaf00"):
        assert link in dead[-1].message
    # the watchdog (5 ms in this scenario) ignores the pause: traffic moves, with losses
    fabric.run_ticks(round(3e-3 / fabric.dt_s))
    assert any(e.kind == "pfc_watchdog" for e in fabric.events)
    before = fabric.workloads[0].delivered_bytes  # type: ignore[attr-defined]
    fabric.run_ticks(500)
    assert fabric.workloads[0].delivered_bytes > before  # type: ignore[attr-defined]
    assert fabric.dropped_bytes > 0


def test_native_fabric_does_not_deadlock_on_the_same_routes() -> None:
    fabric, rate = _ring_throughput("native-400g", 3e-3, 4.5e-3)
    assert rate > 1e9
    assert fabric.deadlocks == 0 and fabric.dropped_bytes == 0
    # the bounced hops run on another lane: no cyclic buffer dependency
    lanes = fabric.flows.vl[:, fabric.flows.active]
    assert (lanes.max(axis=0) > lanes.min(axis=0)).any()


def test_bad_ecn_settings_are_rejected_and_the_fabric_keeps_its_values() -> None:
    fabric = Fabric.from_scenario(load_scenario("tiny", profile="roce-400g"))
    before = fabric.params()
    with pytest.raises(CommandError, match=r"Kmin .* must not exceed Kmax"):
        fabric.apply(SetParam(name="ecn_kmin_s", value=fabric.profile.ecn_kmax_s * 2))
    with pytest.raises(CommandError, match=r"ecn_kmax_s must be in \[0"):
        fabric.apply(SetParam(name="ecn_kmax_s", value=-1))
    with pytest.raises(CommandError, match="ecn_pmax must be in"):
        fabric.apply(SetParam(name="ecn_pmax", value=1.5))
    with pytest.raises(CommandError, match="unknown parameter 'ecn_kmn_bytes'"):
        fabric.apply(SetParam(name="ecn_kmn_bytes", value=1))
    assert fabric.params() == before


def _bottleneck(kmin: float, kmax: float) -> tuple[float, float]:
    """Two long flows into one port on RoCE, ECN thresholds in bytes at 400G: (its
    throughput, mean queue in bytes)."""
    line = ROCE_400G.link_bandwidth_Bps
    prof = dataclasses.replace(ROCE_400G, ecn_kmin_s=kmin / line, ecn_kmax_s=kmax / line)
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=3)
    idx = topo.nodes.index
    flows = [(idx["gpu0000"], idx["gpu0002"], BIG, 0.0), (idx["gpu0001"], idx["gpu0002"], BIG, 0.0)]
    fabric = Fabric(
        topo, prof, [Scripted(name="two", traffic_class="bulk", flows=flows)], dt_s=2e-6, seed=1
    )
    fabric.run_ticks(500)
    port = topo.links.index["leaf00->gpu0002"]
    tx0 = fabric.counters["tx_bytes_total"][port]
    queue = 0.0
    for _ in range(1500):
        fabric.step()
        queue += float(
            fabric.occupancy.reshape(-1, fabric.n_vls).sum(axis=1)[
                topo.links.index["gpu0000->leaf00"]
            ]
        )
    thr = (fabric.counters["tx_bytes_total"][port] - tx0) / (1500 * fabric.dt_s)
    return thr, queue / 1500


def test_extreme_ecn_thresholds_move_throughput_and_delay_the_expected_way() -> None:
    line = ROCE_400G.link_bandwidth_Bps
    default = _bottleneck(ROCE_400G.ecn_kmin_s * line, ROCE_400G.ecn_kmax_s * line)
    eager = _bottleneck(0.0, 1000.0)  # marks any standing queue
    lazy = _bottleneck(12e6, 14e6)  # marks only deep queues
    # the thresholds set the standing queue: lower marks, shorter queue
    assert eager[1] < 0.1 * default[1] and lazy[1] > 2 * default[1]
    # with feedback every 4 µs and a fast-recovery step a timer period after each cut,
    # DCQCN keeps the port busy whatever the thresholds (DCTCP-like marking at K = 0)
    for thr, _ in (eager, default, lazy):
        assert thr > 0.9 * line


def test_three_hop_latency_of_large_messages_is_lower_on_native_and_follows_the_parameters() -> (
    None
):
    for size in (4096, 65536):
        native = message_latency("native-400g", size, 3)
        roce = message_latency("roce-400g", size, 3)
        assert native < roce
    # the gap is made of per-hop and per-packet costs: give RoCE the native switch and
    # headers and it closes
    size = 4096
    gap = message_latency("roce-400g", size, 3) - message_latency("native-400g", size, 3)
    p = ROCE_400G
    n = get_profile("native-400g")
    switch_part = 3 * (p.switch_latency_s - n.switch_latency_s)
    assert gap == pytest.approx(
        switch_part
        + size / (p.mtu_bytes / (p.mtu_bytes + p.header_bytes) * p.link_bandwidth_Bps)
        - size / (n.mtu_bytes / (n.mtu_bytes + n.header_bytes) * n.link_bandwidth_Bps),
        rel=0.05,
    )
