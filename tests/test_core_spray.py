"""Packet spraying (routing = "spray"): a flow spread evenly over its equal-cost paths."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fabric_core.commands import ClearFault, InjectFault
from fabric_core.net.profiles import NATIVE_800G, Profile
from fabric_core.net.routing import SPRAY_MAX_WAYS, route, spray, spray_ways
from fabric_core.net.topology import Topology, fat_tree, leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.scenario import ScenarioError, load_scenario, parse_scenario
from fabric_core.workloads import Completions
from fabric_core.workloads.traffic import Scripted
from tests.helpers import SOLVERS, profile, scripted_fabric
from tests.test_cli_run import fabtop
from tests.test_faults import run_until_recovered, tiny

DT = 1e-6


def _payload_Bps(prof: Profile) -> float:
    return prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)


def _fixed_latency(topo: Topology, prof: Profile, names: list[str]) -> float:
    """Propagation + switches + the endpoints (NIC pipelines, DMA read and write, the CPU's
    post, doorbell and poll) along a path given by link names."""
    links = topo.links
    prop = sum(links.prop_delay_s[links.index[n]] for n in names)
    endpoints = (
        2 * prof.nic_latency_s
        + prof.pcie_read_latency_s
        + 2 * prof.pcie_write_latency_s
        + prof.host_post_s
        + prof.host_poll_s
    )
    return prop + (len(names) - 1) * prof.switch_latency_s + endpoints


def _run_until_done(fabric: Fabric, n_flows: int, limit: int = 5000) -> None:
    for _ in range(limit):
        fabric.step()
        if fabric.completed_flows >= n_flows:
            return
    raise AssertionError(f"only {fabric.completed_flows} of {n_flows} flows completed")


def _uplinks(topo: Topology, leaf: str, spines: int) -> list[int]:
    return [topo.links.index[f"{leaf}->spine{j:02d}"] for j in range(spines)]


# ------------------------------------------------------------------ one big flow
@pytest.mark.parametrize("routing", ["spray", "adaptive"])
def test_one_flow_sprays_evenly_over_every_spine_adaptive_uses_one(routing: str) -> None:
    prof = profile(routing=routing)
    topo = leaf_spine(prof, leaves=2, spines=4, gpus_per_leaf=4)
    size = 8e6
    fabric, wls = scripted_fabric(topo, prof, [("gpu0000", "gpu0004", size, 0.0)], dt_s=DT)
    _run_until_done(fabric, 1)
    carried = fabric.counters["tx_bytes_total"][_uplinks(topo, "leaf00", 4)]
    if routing == "spray":
        assert carried == pytest.approx(np.full(4, size / 4), rel=0.01)
    else:
        assert sorted(carried) == pytest.approx([0, 0, 0, size], abs=1.0)
    # the host link (not the 4 spine paths together) sets the pace: size / NIC + fixed
    (_, start, finish) = wls[0].finished[0]
    path = ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0004"]
    expected = size / _payload_Bps(prof) + _fixed_latency(topo, prof, path)
    assert finish - start == pytest.approx(expected, rel=0.01)
    assert fabric.delivered_bytes == pytest.approx(fabric.injected_bytes, rel=1e-12)


def test_spray_is_paced_by_the_spine_paths_when_they_are_slower_than_the_host() -> None:
    """Half-speed fabric links behind a full-speed NIC: 2 sprayed spine paths together
    match the NIC; one adaptive path halves the throughput."""
    fct = {}
    for routing in ("spray", "adaptive"):
        prof = profile(routing=routing)
        topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=2)
        fabric_links = np.array(
            [
                "spine" in t or "spine" in n
                for t, n in zip(topo.links.tier, topo.links.name, strict=True)
            ]
        )
        topo.links.bandwidth_Bps[fabric_links] /= 2
        size = 4e6
        fabric, wls = scripted_fabric(topo, prof, [("gpu0000", "gpu0002", size, 0.0)], dt_s=DT)
        _run_until_done(fabric, 1)
        (_, start, finish) = wls[0].finished[0]
        fct[routing] = finish - start
    path = ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0002"]
    fixed = _fixed_latency(topo, profile(), path)  # propagation, switches, NICs
    nic_time = size / _payload_Bps(profile())
    assert fct["spray"] == pytest.approx(nic_time + fixed, rel=0.02)
    assert fct["adaptive"] == pytest.approx(2 * nic_time + fixed, rel=0.02)


# ------------------------------------------------------------------ hash collisions
def _colliding_pair(topo: Topology) -> tuple[int, int]:
    """Destinations on leaf01 for gpu0000 and gpu0001 (tags 0 and 1 of a Scripted workload)
    that ECMP hashes onto the same spine."""
    n = len(topo.links)
    for d0 in (4, 5, 6, 7):
        for d1 in (4, 5, 6, 7):
            if d1 == d0:
                continue
            path, _ = route(
                topo,
                np.array([0, 1]),
                np.array([d0, d1]),
                np.array([0, 1_000_003]),
                mode="ecmp",
                link_cost=np.zeros(n),
            )
            if path[1, 0] == path[1, 1]:
                return d0, d1
    raise AssertionError("no ECMP collision among the pairs tried")


def test_spray_gives_two_flows_their_full_share_where_ecmp_collides() -> None:
    base = profile()
    topo = leaf_spine(base, leaves=2, spines=2, gpus_per_leaf=4)
    d0, d1 = _colliding_pair(topo)
    size = 4e6
    fct: dict[str, list[float]] = {}
    for routing in ("ecmp", "spray"):
        prof = profile(routing=routing)
        flows = [
            ("gpu0000", f"gpu{d0:04d}", size, 0.0),
            ("gpu0001", f"gpu{d1:04d}", size, 0.0),
        ]
        fabric, wls = scripted_fabric(topo, prof, flows, dt_s=DT)
        _run_until_done(fabric, 2)
        fct[routing] = [f - s for _, s, f in wls[0].finished]
    nic_time = size / _payload_Bps(base)
    # the fixed costs of the path (3 switches), endpoints included
    fixed = _fixed_latency(
        topo,
        base,
        ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", f"leaf01->gpu{d0:04d}"],
    )
    # ECMP: both flows on one spine uplink, half the rate each; spray: each at line rate
    assert max(fct["ecmp"]) == pytest.approx(2 * nic_time + fixed, rel=0.03)
    assert max(fct["spray"]) == pytest.approx(nic_time + fixed, rel=0.03)


# ------------------------------------------------------------------ one completion per flow
@dataclass
class _Recorder(Scripted):
    """A scripted workload that keeps every completion it is handed."""

    seen: list[Completions] = field(default_factory=list)

    def on_complete(self, done: Completions, now_s: float) -> None:
        super().on_complete(done, now_s)
        self.seen.append(done)


def test_one_completion_per_sprayed_flow_with_its_full_size() -> None:
    prof = profile(routing="spray")
    topo = leaf_spine(prof, leaves=3, spines=4, gpus_per_leaf=2)
    idx = topo.nodes.index
    rows = [  # (src, dst, bytes, start): cross-leaf big and small, same leaf, odd sizes
        ("gpu0000", "gpu0002", 3e6 + 7, 0.0),
        ("gpu0001", "gpu0004", 1000.0, 0.0),  # one packet: one path
        ("gpu0002", "gpu0003", 2e6, 2e-6),  # same leaf
        ("gpu0003", "gpu0000", 3 * 4096.0, 3e-6),  # three packets: three paths
        ("gpu0004", "gpu0001", 1e6 / 3, 5e-6),
        ("gpu0005", "gpu0002", 5e5, 5e-6),
    ]
    sizes = [r[2] for r in rows]
    wl = _Recorder(
        name="main",
        traffic_class="bulk",
        flows=[(idx[s], idx[d], b, t) for s, d, b, t in rows],
    )
    fabric = Fabric(topo, prof, [wl], dt_s=DT, seed=1)
    fabric.run_ticks(6)
    snap = fabric.snapshot()
    # flows in flight count once, not per sub-flow
    assert snap.totals.active_flows + snap.totals.completed_flows_total == len(rows)
    assert fabric.flows.n_active > snap.totals.active_flows
    _run_until_done(fabric, len(rows))
    fabric.run_ticks(50)  # nothing more is reported
    tags = np.concatenate([c.tag for c in wl.seen])
    assert sorted(tags.tolist()) == list(range(len(rows)))
    got = {int(t): float(s) for c in wl.seen for t, s in zip(c.tag, c.size_bytes, strict=True)}
    assert got == {i: pytest.approx(b) for i, b in enumerate(sizes)}
    for c in wl.seen:
        for t, s, d in zip(c.tag, c.src, c.dst, strict=True):
            assert (int(s), int(d)) == (idx[rows[int(t)][0]], idx[rows[int(t)][1]])
    assert fabric.completed_flows == len(rows)
    assert fabric.snapshot().latency["bulk"].count == len(rows)
    assert fabric.flows.n_parents == 0 and not fabric.flows.held.any()
    assert fabric.injected_bytes == pytest.approx(sum(sizes), rel=1e-12)
    assert fabric.delivered_bytes == pytest.approx(fabric.injected_bytes, rel=1e-12)
    # a flow lasts at least its bytes through the source NIC
    for _, start, finish in wl.finished:
        assert finish > start
    big = next(f - s for t, s, f in wl.finished if t == 0)
    assert big >= sizes[0] / _payload_Bps(prof)


def test_sprayed_flow_finishes_with_its_last_sub_flow() -> None:
    """One spine uplink is shared with a second flow: the sub-flow on it is slower, and the
    flow's completion waits for it."""
    prof = profile(routing="spray")
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=4)
    size = 4e6
    flows = [("gpu0000", "gpu0004", size, 0.0)]
    # a pinned flow on leaf00->spine00 slows that sub-flow down
    fabric, wls = scripted_fabric(
        topo, prof, flows, dt_s=DT, extra=[("other", "bulk", [("gpu0001", "gpu0005", 8e6, 0.0)])]
    )
    fabric.add_static_route("gpu0001", "gpu0005", ["leaf00", "spine00", "leaf01"])
    fabric.run_ticks(3)
    fl = fabric.flows
    mine = np.flatnonzero(fl.active & (fl.workload == 0))
    assert mine.size == 2
    _run_until_done(fabric, 1)
    (_, start, finish) = wls[0].finished[0]
    # the NIC alone would pace the flow to size / line rate; the sub-flow sharing spine00
    # with the two sub-flows of the pinned flow gets a third of it: about 1.5 × longer
    assert finish - start == pytest.approx(1.5 * size / _payload_Bps(prof), rel=0.05)


# ------------------------------------------------------------------ routing itself
def test_spray_ways_and_paths_on_a_fat_tree() -> None:
    prof = NATIVE_800G
    topo = fat_tree(
        prof, pods=2, leaves_per_pod=2, spines_per_pod=3, cores_per_spine=4, gpus_per_leaf=2
    )
    ways = spray_ways(topo)
    assert ways == 6  # 12 candidates capped at 8, down to a multiple of the 3 spines
    assert ways <= SPRAY_MAX_WAYS
    n = len(topo.links)
    path, hops = spray(
        topo, np.array([0]), np.array([7]), np.array([5]), ways=ways, link_cost=np.zeros(n)
    )
    assert (hops == 6).all()
    first = [topo.links.name[i] for i in path[1]]
    cores = {topo.links.name[i].split("->")[1] for i in path[2]}
    assert sorted(first) == sorted([f"leaf00->spine0{j}" for j in range(3)] * 2)
    assert len(cores) == ways  # distinct core paths
    # a down uplink is never used while others remain
    cost = np.zeros(n)
    cost[topo.links.index["leaf00->spine00"]] = np.inf
    path, _ = spray(topo, np.array([0]), np.array([7]), np.array([5]), ways=ways, link_cost=cost)
    assert topo.links.index["leaf00->spine00"] not in path[1]


def test_spray_ways_on_leaf_spines() -> None:
    for spines, expected in ((1, 1), (4, 4), (8, 8), (12, SPRAY_MAX_WAYS)):
        topo = leaf_spine(NATIVE_800G, leaves=2, spines=spines, gpus_per_leaf=1)
        assert spray_ways(topo) == expected


# ------------------------------------------------------------------ faults
def test_link_down_under_spray_reroutes_sub_flows_and_every_flow_completes() -> None:
    prof = profile(routing="spray", reroute_s=50e-6)
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=4)
    rows = [(f"gpu000{i}", f"gpu000{4 + i}", 4e6, 0.0) for i in range(4)]
    fabric, wls = scripted_fabric(topo, prof, rows, dt_s=DT)
    fabric.run_ticks(50)
    dead = topo.links.index["leaf00->spine00"]
    assert fabric.link_rate[dead] > 0
    fabric.apply(InjectFault(kind="link_down", target="leaf00->spine00"))
    fabric.run_ticks(200)
    fl = fabric.flows
    assert not (fl.path[:, fl.active] == dead).any()  # rerouted away from it
    _run_until_done(fabric, len(rows), limit=20000)
    assert len(wls[0].finished) == len(rows)
    assert fabric.delivered_bytes == pytest.approx(fabric.injected_bytes, rel=1e-12)


def test_tiny_scenario_on_native_800g_recovers_from_a_link_down() -> None:
    fabric = tiny("native-800g")
    assert fabric.profile.routing == "spray"
    fabric.run_ticks(200)
    fabric.apply(InjectFault(kind="link_down", target="leaf00->spine00"))
    run_until_recovered(fabric, "f0", limit=4000)
    f = fabric.faults.faults["f0"]
    assert f.recovered_at_s is not None
    before = fabric.completed_flows
    fabric.run_ticks(200)
    assert fabric.completed_flows > before


# ------------------------------------------------------------------ scenarios and CLI
def _scenario(**overrides: Any) -> dict[str, Any]:
    return {
        "profile": "roce-400g",
        "profile_overrides": overrides,
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 2},
    }


def test_routing_is_validated_and_spray_is_refused_on_pfc() -> None:
    with pytest.raises(ScenarioError, match=r"profile_overrides\.routing: 'spray'.*credit"):
        parse_scenario(_scenario(routing="spray"))
    with pytest.raises(ScenarioError, match=r"profile_overrides\.routing: must be one of"):
        parse_scenario(_scenario(routing="random"))
    assert load_scenario("tiny", profile="native-800g").profile.routing == "spray"
    scn = _scenario(flow_control="pfc")
    scn["profile"] = "native-800g"
    with pytest.raises(ScenarioError, match=r"profile 'native-800g': routing: 'spray'"):
        parse_scenario(scn)
    with pytest.raises(ValueError, match="routing"):
        Fabric(
            leaf_spine(NATIVE_800G, leaves=1, spines=1, gpus_per_leaf=2),
            profile(routing="sprays"),
            [],
            dt_s=DT,
            seed=1,
        )


def test_fabtop_run_on_native_800g_writes_a_valid_report(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    out = fabtop(
        "run", "tiny", "--profile", "native-800g", "--duration", "100us", "--json", str(report)
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(report.read_text())
    assert data["profile"] == "native-800g"
    assert data["totals"]["injected_bytes"] > 0
    assert data["totals"]["delivered_bytes"] > 0


@pytest.mark.parametrize("solver", SOLVERS)
def test_spraying_with_every_candidate_down_waits_on_them_and_goes_once_one_is_back(
    solver: Solver,
) -> None:
    """Both uplinks of a leaf known down: the sprayed sub-flows of new flows have no usable
    path; each is placed on one of the (dead) candidates and waits there, and once a link
    is back the flows complete. Many flows at once, more than there are candidates."""
    prof = dataclasses.replace(NATIVE_800G, fault_detect_s=2e-6, reroute_s=4e-6)
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=4)
    names = topo.nodes.name
    rows = [
        (str(names[topo.gpus[i]]), str(names[topo.gpus[4 + j]]), 1e6, 20e-6)
        for i in range(4)
        for j in range(4)
    ]
    fabric, (wl,) = scripted_fabric(topo, prof, rows, dt_s=1e-6, solver=solver)
    for link in ("leaf00->spine00", "leaf00->spine01"):
        fabric.apply(InjectFault(kind="link_down", target=link))
    fabric.run_ticks(60)  # known down, then the 16 flows start with no path
    assert fabric.flows.active.any() and len(wl.finished) == 0
    assert fabric.delivered_bytes == 0
    up = fabric.topo.links.index["leaf00->spine00"]
    assert (fabric.flows.path[:, fabric.flows.active] != -1).any()
    fabric.apply(ClearFault(target="leaf00->spine00"))
    for _ in range(5000):
        if len(wl.finished) == len(rows):
            break
        fabric.step()
    assert len(wl.finished) == len(rows)
    assert fabric.counters["tx_bytes_total"][up] > 0
