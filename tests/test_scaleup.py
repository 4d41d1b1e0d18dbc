"""The scale-up domain (issue 15): GPUs of one node reach each other over NVLink through a
non-blocking NVSwitch, not through the NIC and the fabric."""

from __future__ import annotations

import tomllib
from typing import Any

import numpy as np
import pytest

from fabric_core.net.scaleup import ScaleUpParams
from fabric_core.reports.endpoints_doc import moe_layer
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import ScenarioError, parse_scenario
from fabric_core.tick.scaleup import ScaleUpDomain
from fabric_core.workloads.moe import MoEAllToAll, nic_payload_Bps


def _layer(
    ranks: int,
    gpus_per_node: int,
    *,
    dt: str = "1us",
    tokens: int = 128,
    scaleup: dict[str, float] | None = None,
    duration_s: float = 900e-6,
) -> tuple[Fabric, MoEAllToAll]:
    """One MoE layer (hidden 7168, top-8, IBGDA) on ``ranks`` GPUs, 4 per leaf, 4 spines."""
    fabric, wl = moe_layer(
        "ibgda",
        7168,
        tokens,
        dt,
        ranks=ranks,
        gpus_per_node=gpus_per_node,
        scaleup=scaleup,
        duration_s=duration_s,
    )
    assert wl.layer == 1 and wl.left == 0
    return fabric, wl


def _k(fabric: Fabric, wl: MoEAllToAll) -> dict[str, float]:
    return dict(wl.kpis(fabric.sim_time_s))


# ---------------------------------------------------------------- the domain alone
def test_one_message_costs_its_bytes_at_the_port_rate_plus_the_latency() -> None:
    p = ScaleUpParams()
    assert p.payload_Bps == pytest.approx(450e9 * 0.835)
    dom = ScaleUpDomain(p, np.array([0, 0, 0, 1]))
    size = 1e6
    dom.send(np.array([0]), np.array([1]), np.array([size]), np.array([7]), 0.0)
    done = dom.advance(0.0, 1e-3)
    assert done.tag.tolist() == [7]
    assert done.finish_s[0] == pytest.approx(size / p.payload_Bps + p.latency_s, rel=1e-9)
    assert done.finish_s[0] == pytest.approx(p.isolated_s(size), rel=1e-9)


@pytest.mark.parametrize("link_Bps", [450e9, 150e9])
def test_messages_share_the_ports_and_the_time_follows_bytes_over_bandwidth(
    link_Bps: float,
) -> None:
    p = ScaleUpParams(link_Bps=link_Bps)
    n, size = 10, 50e3
    # 10 messages 0 -> 1 and 10 messages 2 -> 1: GPU 1's ingress port is the bottleneck
    dom = ScaleUpDomain(p, np.zeros(3, dtype=np.int64))
    src = np.repeat([0, 2], n)
    dst = np.ones(2 * n, dtype=np.int64)
    dom.send(src, dst, np.full(2 * n, size), np.arange(2 * n), 0.0)
    done = dom.advance(0.0, 1e-3)
    assert len(done) == 2 * n
    expect = 2 * n * size / p.payload_Bps + p.latency_s
    assert done.finish_s.max() == pytest.approx(expect, rel=1e-9)
    assert dom.bound_s(src, dst, np.full(2 * n, size)) == pytest.approx(expect, rel=1e-9)
    # two messages that share no port (0 -> 1 and 2 -> 0) each move at the full port rate
    dom.send(np.array([0, 2]), np.array([1, 0]), np.full(2, size), np.array([98, 99]), 1e-3)
    done = dom.advance(1e-3, 1e-3)
    np.testing.assert_allclose(done.finish_s - 1e-3, p.isolated_s(size), rtol=1e-9)


def test_the_fluid_model_does_not_depend_on_how_time_is_cut() -> None:
    rng = np.random.default_rng(5)
    m = 400
    src = rng.integers(0, 8, m)
    dst = rng.integers(0, 8, m)
    size = rng.uniform(1e3, 3e4, m)
    start = rng.uniform(0, 4e-6, m)
    out = []
    for dt in (0.25e-6, 1e-6, 3e-6):
        dom = ScaleUpDomain(ScaleUpParams(), np.zeros(8, dtype=np.int64))
        dom.send(src, dst, size, np.arange(m), start)
        fin = np.full(m, np.nan)
        t = 0.0
        while dom.in_flight:
            d = dom.advance(t, dt)
            fin[d.tag] = d.finish_s
            t += dt
        out.append(fin)
    np.testing.assert_allclose(out[1], out[0], rtol=1e-9)
    np.testing.assert_allclose(out[2], out[0], rtol=1e-9)
    # a copy to the GPU itself crosses no port: the latency alone
    own = src == dst
    np.testing.assert_allclose(out[0][own], start[own] + ScaleUpParams().latency_s)


def test_a_message_must_stay_within_its_domain() -> None:
    dom = ScaleUpDomain(ScaleUpParams(), np.array([0, 0, 1, 1, -1]))
    assert dom.same_domain(np.array([0, 0, 4]), np.array([1, 2, 4])).tolist() == [
        True,
        False,
        False,
    ]
    with pytest.raises(ValueError, match="within one domain"):
        dom.send(np.array([0]), np.array([2]), np.array([1.0]), np.array([0]), 0.0)


# ---------------------------------------------------------------- the MoE workload
def test_intra_node_messages_never_touch_the_fabric() -> None:
    # EP 8 on one 8-GPU node (its GPUs hang off two leaves): every message is NVLink
    fabric, wl = _layer(8, 8)
    k = _k(fabric, wl)
    assert fabric.injected_bytes == 0 and fabric.completed_flows == 0
    assert fabric.counters["tx_bytes_total"].sum() == 0
    assert k["wqe_posted_total"] == 0  # no WQE, no NIC, no PCIe
    assert k["scaleup_messages_total"] == 2 * 8 * 128 * 8
    assert k["scaleup_byte_fraction"] == 1.0
    assert wl.nic_bounds_s() == (0.0, 0.0)
    # the phase is the NVLink part: it reaches the busiest port's bound (where that port
    # sets the time, the model's figure is the bound worked out another way: it may differ
    # in the last bit)
    d_bound, c_bound = wl.scaleup_bounds_s()
    assert k["dispatch_last_seconds"] == k["dispatch_scaleup_last_seconds"]
    assert d_bound * (1 - 1e-12) <= k["dispatch_last_seconds"] <= 1.01 * d_bound
    assert c_bound * (1 - 1e-12) <= k["combine_last_seconds"] <= 1.01 * c_bound


def test_the_intra_node_time_moves_as_bytes_over_bandwidth_plus_latency() -> None:
    base = ScaleUpParams()
    runs = {
        (bw, lat): _k(*_layer(8, 8, scaleup={"link_Bps": bw, "latency_s": lat}))[
            "dispatch_last_seconds"
        ]
        for bw, lat in ((base.link_Bps, 1e-6), (base.link_Bps / 3, 1e-6), (base.link_Bps, 3e-6))
    }
    wire = runs[(base.link_Bps, 1e-6)] - 1e-6
    # a third of the bandwidth: three times the bytes' time, the same latency
    assert runs[(base.link_Bps / 3, 1e-6)] - 1e-6 == pytest.approx(3 * wire, rel=1e-6)
    # 2 µs more latency: 2 µs more per phase (messages move in parallel, each pays it once)
    assert runs[(base.link_Bps, 3e-6)] - runs[(base.link_Bps, 1e-6)] == pytest.approx(
        2e-6, rel=1e-6
    )
    # the bytes: ~7/8 of a GPU's 1,024 dispatch messages cross its port (1/8 are its own)
    assert wire == pytest.approx(1024 * 7 / 8 * 7408 / base.payload_Bps, rel=0.2)


@pytest.fixture(scope="module")
def ep64() -> dict[int, tuple[Fabric, MoEAllToAll]]:
    return {g: _layer(64, g) for g in (1, 8)}


def test_8_gpu_nodes_make_an_ep64_dispatch_faster(
    ep64: dict[int, tuple[Fabric, MoEAllToAll]],
) -> None:
    one, eight = (_k(*ep64[g]) for g in (1, 8))
    # the same layer: the same tokens went to the same experts
    np.testing.assert_array_equal(ep64[1][1].msg_dst, ep64[8][1].msg_dst)
    assert eight["dispatch_last_seconds"] < 0.95 * one["dispatch_last_seconds"]
    assert eight["combine_last_seconds"] < 0.95 * one["combine_last_seconds"]
    assert one["scaleup_messages_total"] == 0
    # an eighth of the peers of a GPU are on its node
    assert eight["scaleup_byte_fraction"] == pytest.approx(1 / 8, abs=0.01)
    # NVLink is done long before the NIC: the phase ends near the NIC's bound
    d_nic, _ = ep64[8][1].nic_bounds_s()
    assert eight["dispatch_scaleup_last_seconds"] < 0.1 * d_nic
    assert eight["dispatch_last_seconds"] <= 1.10 * d_nic


def test_the_nic_bound_counts_only_inter_node_messages(
    ep64: dict[int, tuple[Fabric, MoEAllToAll]],
) -> None:
    fabric, wl = ep64[8]
    node = fabric.topo.node_domains()
    remote = node[wl.msg_src] != node[wl.msg_dst]
    rate = nic_payload_Bps(fabric)
    n = rate.size
    busiest = np.maximum(
        np.bincount(wl.msg_src[remote], minlength=n), np.bincount(wl.msg_dst[remote], minlength=n)
    )
    expect = float(np.max(busiest / rate))
    assert wl.nic_bounds_s() == pytest.approx((expect * wl.dispatch_size, expect * wl.combine_size))
    one = ep64[1][1].nic_bounds_s()
    assert wl.nic_bounds_s()[0] < one[0] and wl.nic_bounds_s()[1] < one[1]
    # and the fabric carried exactly the inter-node bytes of both phases
    assert fabric.injected_bytes == pytest.approx(
        remote.sum() * (wl.dispatch_size + wl.combine_size), rel=1e-9
    )


def test_an_ep64_layer_on_8_gpu_nodes_does_not_depend_on_the_tick(
    ep64: dict[int, tuple[Fabric, MoEAllToAll]],
) -> None:
    one = _k(*ep64[8])
    fabric, wl = _layer(64, 8, dt="2us")
    two = _k(fabric, wl)
    for key in ("dispatch_last_seconds", "combine_last_seconds"):
        assert two[key] == pytest.approx(one[key], rel=0.03)
    for key in ("dispatch_scaleup_last_seconds", "combine_scaleup_last_seconds"):
        assert two[key] == pytest.approx(one[key], rel=0.01)


def test_one_gpu_per_node_keeps_every_peer_on_the_nic() -> None:
    fabric, wl = _layer(8, 1, tokens=16, duration_s=300e-6)
    assert wl.scaleup is None and fabric.topo.gpus_per_node == 1
    k = _k(fabric, wl)
    assert k["scaleup_messages_total"] == 0 and k["scaleup_byte_fraction"] == 0
    assert k["wqe_posted_total"] == 2 * 8 * 16 * 8


# ---------------------------------------------------------------- the scenario keys
_LEAF_SPINE = {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4}


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ({"gpus_per_node": 3}, "topology.gpus_per_node: must divide the GPU count (8: 2 leaves"),
        ({"gpus_per_node": 0}, "topology.gpus_per_node: expected a whole number >= 1, got 0"),
        ({"gpus_per_node": "8"}, "topology.gpus_per_node: expected a whole number >= 1, got '8'"),
        (
            {"leaves": 8, "rails": 8, "gpus_per_node": 4},
            "topology.gpus_per_node: must be a multiple of rails (8",
        ),
        ({"gpus_per_node": 8, "scaleup": {"bandwidth": 1}}, "unknown scale-up parameter(s)"),
        ({"scaleup": 450e9}, "topology.scaleup: must be a table"),
        ({"scaleup": {"efficiency": 1.5}}, "topology.scaleup: efficiency must be in (0, 1]"),
        ({"scaleup": {"latency_s": "1us"}}, "topology.scaleup: latency_s: expected a number"),
        (
            {
                "kind": "fat-tree",
                "pods": 2,
                "leaves_per_pod": 2,
                "spines_per_pod": 2,
                "cores_per_spine": 1,
                "gpus_per_node": 16,
            },
            "(8: 2 pods x 2 leaves_per_pod x 2 gpus_per_leaf)",
        ),
    ],
)
def test_bad_scale_up_keys_are_refused_naming_the_key(
    topology: dict[str, Any], message: str
) -> None:
    topo = {**_LEAF_SPINE, **topology}
    if topo["kind"] == "fat-tree":
        del topo["leaves"], topo["spines"]
        topo["gpus_per_leaf"] = 2
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"topology": topo}, "bad.toml")
    assert message in str(err.value)
    assert str(err.value).startswith("bad.toml: topology.")


def test_good_scale_up_keys_build_the_domains() -> None:
    topo = {**_LEAF_SPINE, "gpus_per_node": 4, "scaleup": {"latency_s": 2e-6}}
    built = parse_scenario({"topology": topo}).build_topology()
    assert built.gpus_per_node == 4 and built.scaleup.latency_s == 2e-6
    assert built.node_domains()[built.gpus].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (built.node_domains()[len(built.gpus) :] == -1).all()  # switches: in none


def test_a_topology_file_groups_its_gpus_in_file_order() -> None:
    from fabric_core.runtime.scenario import bundled_dir

    path = bundled_dir() / "express-lab.toml"
    raw = tomllib.loads(path.read_text())
    raw["topology"]["gpus_per_node"] = 2
    built = parse_scenario(raw, str(path)).build_topology()
    assert built.node_domains()[built.gpus].tolist() == [i // 2 for i in range(built.gpus.size)]
    raw["topology"]["gpus_per_node"] = 5
    with pytest.raises(ScenarioError, match=r"GPU count \(12: the gpu nodes of the file\)"):
        parse_scenario(raw, str(path))
