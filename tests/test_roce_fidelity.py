"""RoCE where it differs most from the credit fabric: ECN on the egress queue (DCQCN's
victim-flow case), PFC pause time and frames that do not depend on the tick, and
thresholds that follow the link's speed.

Expectations are derived here from the physics (max-min fair shares, the pause cycle
of a queue, IEEE 802.1Qbb's pause quanta), never read from the model.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.commands import InjectFault
from fabric_core.net.profiles import ROCE_400G, Profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.scenario import load_scenario
from fabric_core.tick.pfc import ecn_thresholds, refresh_period_s
from fabric_core.workloads.traffic import Scripted
from tests.helpers import SOLVERS

LINE = ROCE_400G.link_bandwidth_Bps
NO_ECN = {"ecn_kmin_s": 1.0, "ecn_kmax_s": 2.0}  # no queue gets that deep: no marks


def _victim_case(profile: Profile, solver: Solver = "compiled") -> dict[str, float]:
    """The DCQCN paper's victim flow on a two-leaf fabric, one spine.

    Five senders (three on leaf00, two on leaf01) send to R on leaf01; once they are
    under way (1 ms) a victim on leaf00 sends to VR, also on leaf01: it shares
    leaf00's uplink and the spine's downlink with three of them, but not R's port.
    Returns, over 1.5-3.5 ms: the victim's rate, the incast's, and the paused time.
    """
    topo = leaf_spine(profile, leaves=2, spines=1, gpus_per_leaf=4)
    g = [int(x) for x in topo.gpus]
    receiver, victim_dst, victim_src = g[4], g[5], g[3]
    senders = [g[0], g[1], g[2], g[6], g[7]]
    flows = [(s, receiver, 1e9, 0.0) for s in senders] + [(victim_src, victim_dst, 1e9, 1e-3)]
    wl = Scripted(name="victim", traffic_class="bulk", flows=flows)
    fabric = Fabric(topo, profile, [wl], dt_s=2e-6, seed=1, solver=solver)
    names = topo.nodes.name
    to_victim = topo.links.index[f"leaf01->{names[victim_dst]}"]
    to_receiver = topo.links.index[f"leaf01->{names[receiver]}"]
    tx = fabric.counters["tx_bytes_total"]
    fabric.run_ticks(750)
    v0, r0 = tx[to_victim], tx[to_receiver]
    paused0 = fabric.counters["pause_seconds_total"].sum()
    fabric.run_ticks(1000)
    window = 1000 * fabric.dt_s
    return {
        "victim": (tx[to_victim] - v0) / window,
        "incast": (tx[to_receiver] - r0) / window,
        "paused": fabric.counters["pause_seconds_total"].sum() - paused0,
        "marks": float(fabric.counters["ecn_marked_packets_total"].sum()),
        "incast_rc": float(np.max(fabric.dcqcn.rc[: len(senders)])) if fabric.dcqcn else 0.0,
    }


@pytest.mark.parametrize("solver", SOLVERS)
def test_dcqcn_cuts_the_incast_and_spares_a_victim_that_shares_its_uplink(
    solver: Solver,
) -> None:
    """Max-min fair: R's port gives each of the 5 incast flows 1/5 of a link; three of
    them share leaf00's uplink (and the spine's downlink) with the victim, whose fair
    share is what they leave: 1 - 3/5 = 2/5 of a link. Marked by the egress queue (R's port), DCQCN slows the incast and the victim
    keeps >= 80 % of its share; with PFC alone the victim is held behind the incast's
    paused bytes (head of line) and gets far less."""
    fair = LINE * (1 - 3 / 5)
    with_dcqcn = _victim_case(ROCE_400G, solver)
    pfc_only = _victim_case(dataclasses.replace(ROCE_400G, **NO_ECN), solver)
    assert with_dcqcn["marks"] > 0 and pfc_only["marks"] == 0
    assert with_dcqcn["victim"] >= 0.8 * fair, with_dcqcn
    assert pfc_only["victim"] < 0.8 * fair, pfc_only  # the case is one where it matters
    # the incast senders' rates fell: DCQCN paces them below line rate
    assert with_dcqcn["incast_rc"] < 0.5 * LINE
    assert with_dcqcn["paused"] < pfc_only["paused"]


def _pfc_incast(dt: float) -> Fabric:
    """``incast-100g`` (8 x 1 MiB into one 100G port) with 256 KB PFC queues and no ECN,
    run to completion at tick ``dt``: each sender's queue cycles between XON and XOFF."""
    scn = load_scenario("incast-100g")
    scn = dataclasses.replace(
        scn,
        profile=scn.profile.with_overrides(
            pfc_buffer_mode="static", pfc_buffer_bytes=256e3, **NO_ECN
        ),
    )
    fabric = Fabric.from_scenario(scn)
    fabric.set_dt(dt)
    while fabric.completed_flows < 8:
        fabric.step()
    return fabric


def test_pause_frames_and_paused_time_do_not_depend_on_the_tick() -> None:
    """Paused time and pause frames within 10 % of the 0.25 µs run at 1, 5 and 20 µs,
    and both near the pause cycle's own figures. Each of the 8 queues drains at 1/8 of
    the port, ``D = A/8``, while its sender, unpaused, sends at the payload rate ``A``:
    it fills to XOFF in ``t1 = XOFF / (A - D)``, then cycles, its sender stopped 7/8 of
    the time, until the rest of its MiB has gone in at ``D``. One pause lasts
    ``(XOFF - XON + A·reaction) / D`` and carries one frame (shorter than the refresh
    period at 100G)."""
    runs = {dt: _pfc_incast(dt) for dt in (0.25e-6, 1e-6, 5e-6, 20e-6)}
    paused = {dt: float(f.counters["pause_seconds_total"].sum()) for dt, f in runs.items()}
    frames = {dt: float(f.counters["pause_frames_total"].sum()) for dt, f in runs.items()}
    for dt in runs:
        assert paused[dt] == pytest.approx(paused[0.25e-6], rel=0.10), paused
        assert frames[dt] == pytest.approx(frames[0.25e-6], rel=0.10), frames
    # the cycle, from the parameters
    fine = runs[0.25e-6]
    p = fine.profile
    q = fine.roce.pfc if fine.roce else None
    assert q is not None
    into_port = fine.topo.links.index["gpu0001->leaf00"] * fine.n_vls
    a = p.link_bandwidth_Bps * p.mtu_bytes / (p.mtu_bytes + p.header_bytes)
    d = a / 8
    xoff, xon, reaction = q.xoff[into_port], q.xon[into_port], q.reaction_s[into_port]
    t1 = xoff / (a - d)
    cycling_s = (1024**2 - a * t1) / d
    assert paused[0.25e-6] == pytest.approx(8 * cycling_s * 7 / 8, rel=0.05)
    pause_s = (xoff - xon + a * reaction) / d
    assert pause_s < refresh_period_s(np.array([p.link_bandwidth_Bps]), p.pfc_refresh_fraction)[0]
    assert frames[0.25e-6] == pytest.approx(paused[0.25e-6] / pause_s, rel=0.15)


def test_a_queue_that_cannot_drain_gets_a_frame_per_refresh_period() -> None:
    """A NIC that stops taking data (a PFC storm) pauses its link for good: one frame at
    once, then one per refresh period, half the 65535 x 512 bit times a frame asks for
    at the link's speed (IEEE 802.1Qbb)."""
    fabric = Fabric.from_scenario(load_scenario("tiny", profile="roce-400g"))
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0001"))
    into = fabric.topo.links.index["leaf00->gpu0001"]
    fabric.run_ticks(1000)
    storm_s = 1000 * fabric.dt_s
    refresh = 0.5 * 65535 * 512 / (8 * fabric.topo.links.bandwidth_Bps[into])
    per_lane = fabric.pause_vl["pause_frames_vl_total"][into]
    assert per_lane == pytest.approx(1 + storm_s / refresh, abs=1.0)
    assert fabric.pause_vl["pause_seconds_vl_total"][into] == pytest.approx(storm_s, rel=1e-6)


def test_refresh_period_and_ecn_thresholds_follow_the_link_speed() -> None:
    """At 400 Gb/s a frame pauses 65535 x 512 bits = 83.9 µs, refreshed at half: 41.9 µs;
    four times that at 100 Gb/s. Kmin / Kmax: 100 KB and 400 KB per 25 Gb/s (DCQCN
    production settings), so 1.6 / 6.4 MB at 400G and 400 KB / 1.6 MB at 100G."""
    rates = np.array([400e9 / 8, 100e9 / 8])
    refresh = refresh_period_s(rates, 0.5)
    assert refresh[0] == pytest.approx(65535 * 512 / 400e9 / 2, rel=1e-12)
    assert refresh[1] == pytest.approx(4 * refresh[0], rel=1e-12)
    kmin, kmax = ecn_thresholds(rates, ROCE_400G)
    assert kmin == pytest.approx([100e3 * 16, 100e3 * 4], rel=1e-9)
    assert kmax == pytest.approx([400e3 * 16, 400e3 * 4], rel=1e-9)


def _mlx5_headroom(speed_Bps: float, cable_m: float, mtu: float) -> float:
    """The driver's headroom (Linux mlx5 calculate_xoff), written out again here."""
    return (301 + 2.16 * cable_m) * speed_Bps * 8 / 1e9 + 2.72 * mtu


def test_shared_buffer_thresholds_fall_as_the_switch_fills() -> None:
    """Broadcom's dynamic threshold: a queue pauses at alpha x the shared buffer still
    free, the pool being the switch's buffer less the headroom every lossless queue
    keeps, and drops past its headroom above that (or above what it holds, where the
    threshold fell below it); a NIC's queues take no part."""
    prof = dataclasses.replace(
        ROCE_400G, pfc_buffer_mode="shared", switch_buffer_bytes=8e6, pfc_alpha=0.25
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    fabric = Fabric(topo, prof, [], dt_s=1e-6, seed=1)
    q = fabric.roce.pfc if fabric.roce else None
    assert q is not None
    links, V = topo.links, fabric.n_vls
    into_leaf = [i for i, name in enumerate(links.name) if name.endswith("->leaf00")]
    into_nic = [links.index[f"leaf00->gpu{k:04d}"] for k in range(4)]
    hdrm = [
        _mlx5_headroom(
            links.bandwidth_Bps[i],
            links.prop_delay_s[i] / prof.propagation_s_per_m,
            prof.ethernet_mtu_bytes,
        )
        for i in into_leaf
    ]
    pool = 8e6 - V * sum(hdrm)
    occupancy = np.zeros(len(links) * V)
    for used in (0.0, 1e6, 3e6):
        occupancy[into_leaf[0] * V] = used  # one queue at the leaf holds `used` bytes
        q.share(occupancy)
        for i, h in zip(into_leaf, hdrm, strict=True):
            assert q.xoff[i * V] == pytest.approx(0.25 * (pool - used), rel=1e-9)
            assert q.xon[i * V] == pytest.approx(q.xoff[i * V] - prof.ethernet_mtu_bytes)
            # drops start a headroom above XOFF, or above what the queue already holds
            held = occupancy[i * V]
            assert q.buffer[i * V] == pytest.approx(max(q.xoff[i * V], held) + h, rel=1e-9)
        for i in into_nic:  # static: the NIC sinks at line rate
            assert q.xoff[i * V] == pytest.approx(q.buffer[i * V] - q.headroom[i * V])
            assert q.buffer[i * V] == pytest.approx(prof.pfc_buffer_bytes)


@pytest.mark.parametrize("senders", [2, 6])
def test_a_shared_buffer_gives_each_congested_queue_its_dynamic_share(senders: int) -> None:
    """N senders into one port of a switch with a small shared buffer, no ECN: each of
    the N ingress queues settles at its dynamic threshold, x = alpha (S - N x), that is
    alpha S / (1 + N alpha); more senders, less each. Nothing is dropped (the headroom
    holds what is in flight when a pause is sent)."""
    alpha, switch_buffer = 0.125, 16e6
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_buffer_mode="shared",
        switch_buffer_bytes=switch_buffer,
        pfc_alpha=alpha,
        **NO_ECN,
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=senders + 1)
    g = [int(x) for x in topo.gpus]
    wl = Scripted(name="incast", traffic_class="bulk", flows=[(s, g[-1], 1e9, 0.0) for s in g[:-1]])
    fabric = Fabric(topo, prof, [wl], dt_s=1e-6, seed=1)
    q = fabric.roce.pfc if fabric.roce else None
    assert q is not None
    pool = float(q.shared_pool[topo.nodes.index["leaf00"]])
    fabric.run_ticks(400)
    V = fabric.n_vls
    held = [
        float(fabric.occupancy[topo.links.index[f"gpu{k:04d}->leaf00"] * V]) for k in range(senders)
    ]
    share = alpha * pool / (1 + senders * alpha)
    assert held == pytest.approx([share] * senders, rel=0.05)
    assert fabric.dropped_bytes == 0
    assert fabric.counters["pause_frames_total"].sum() > 0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"pfc_buffer_mode": "sharde"}, "pfc_buffer_mode: must be one of shared, static"),
        ({"pfc_alpha": 0.0}, "pfc_alpha: must be > 0"),
        ({"switch_buffer_bytes": -1.0}, "switch_buffer_bytes: must be > 0"),
        ({"congestion_control": "hpcc"}, "congestion_control: must be one of dcqcn, swift"),
    ],
)
def test_bad_pfc_buffer_settings_are_refused_with_the_key(
    override: dict[str, object], message: str
) -> None:
    prof = dataclasses.replace(ROCE_400G, **override)  # type: ignore[arg-type]
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    with pytest.raises(ValueError, match=message):
        Fabric(topo, prof, [], dt_s=1e-6, seed=1)


@pytest.mark.parametrize("solver", SOLVERS)
def test_swift_holds_an_incast_at_its_target_delay_with_the_port_busy_and_no_pause(
    solver: Solver,
) -> None:
    """Swift is a window-based AIMD on the fabric delay: four senders into one port
    settle where the port's egress queue delays packets by the target, the port runs
    at its payload rate, and PFC never has to act (the queue is far below XOFF)."""
    prof = dataclasses.replace(ROCE_400G, congestion_control="swift")
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=5)
    g = [int(x) for x in topo.gpus]
    flows = [(s, g[-1], 1e9, 0.0) for s in g[:-1]]
    wl = Scripted(name="i", traffic_class="bulk", flows=flows)
    fabric = Fabric(topo, prof, [wl], dt_s=1e-6, seed=1, solver=solver)
    fabric.run_ticks(3000)
    V, line = fabric.n_vls, prof.link_bandwidth_Bps
    queued = sum(
        float(fabric.occupancy[topo.links.index[f"gpu{k:04d}->leaf00"] * V]) for k in range(4)
    )
    assert queued / line == pytest.approx(prof.swift_target_delay_s, rel=0.10)
    payload = line * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    port = topo.links.index[f"leaf00->{topo.nodes.name[g[-1]]}"]
    assert fabric.link_rate[port] >= 0.98 * payload
    assert fabric.counters["pause_frames_total"].sum() == 0
    assert fabric.dcqcn is not None and fabric.dcqcn.cnps_total == 0


@pytest.mark.parametrize("solver", SOLVERS)
def test_each_congestion_control_against_the_victim_case(solver: Solver) -> None:
    """The victim case under each choice: Swift, like DCQCN, leaves the victim >= 80 %
    of its fair share; with none the senders stay at line rate (no CNP is sent, though
    the switches still mark), PFC does the work and the victim is held behind it."""
    fair = LINE * (1 - 3 / 5)
    swift = _victim_case(dataclasses.replace(ROCE_400G, congestion_control="swift"), solver)
    none = _victim_case(dataclasses.replace(ROCE_400G, congestion_control="none"), solver)
    assert swift["victim"] >= 0.8 * fair and swift["incast_rc"] < 0.5 * LINE
    assert swift["paused"] < none["paused"]
    assert none["victim"] < 0.8 * fair
    assert none["incast_rc"] == LINE and none["marks"] > 0


def test_a_shrinking_shared_threshold_drops_nothing_already_admitted() -> None:
    """The default scenario on RoCE with PFC alone at an 8 µs tick (what the console adapts to): many
    queues fill at once and the dynamic thresholds fall below what some queues already
    hold; a switch drops only arriving packets past their headroom, so nothing is lost
    (with the drop limit at XOFF + headroom alone, 3.5 MiB were, against none at 2 µs)."""
    scenario = load_scenario("default", profile="roce-400g")
    # PFC alone: DCQCN keeps the default scenario's queues below their pause thresholds
    prof = dataclasses.replace(scenario.profile, congestion_control="none")
    fabric = Fabric.from_scenario(dataclasses.replace(scenario, profile=prof))
    fabric.set_dt(8e-6)
    fabric.run_ticks(2500)  # 20 ms
    assert fabric.counters["pause_frames_total"].sum() > 0
    assert fabric.dropped_bytes == 0
