"""Routing's costs and lanes, held to figures derived by hand.

Written against the documented contracts of the compiled routing kernels
(``fabric_core.tick.kernels.route``: ``route_flows``, ``link_loads``) and against
``Fabric`` (its ``lanes_and_costs`` and pinned routes), not against the kernels' lines:
``scripts/mutate`` runs them first for the routing modules, each to fail on a one-line
bug that the lockstep property tests let through.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.commands import CommandError
from fabric_core.net.profiles import NATIVE_400G, ROCE_400G
from fabric_core.net.routing import MAX_HOPS
from fabric_core.net.topology import Topology, every_candidate_present, fat_tree, leaf_spine
from fabric_core.runtime.fabric import Solver
from fabric_core.tick.kernels._jit import specialised_kernel
from fabric_core.tick.kernels.route import link_loads, route_flows, route_flows_in_pods
from tests.helpers import SOLVERS, scripted_fabric

BW = NATIVE_400G.link_bandwidth_Bps  # 50 GB/s on every link
QUANTUM_S = 100e-9  # adaptive routing's cost quantum (route_rules.ADAPTIVE_COST_QUANTUM_S)


def test_a_links_load_is_what_the_flows_crossing_it_have_still_to_send_over_it() -> None:
    """``link_loads``: a byte waiting at hop ``h`` of a flow has still to cross hop ``h``
    and every hop after it. One flow on links 3 -> 1 -> 4 -> 0 holding 100, 50, 0 and
    25 B at its hops loads them with 100, 100 + 50 = 150, 150 + 0 = 150 and 150 + 25 =
    175 B; a second flow on 1 -> 2 holding 10 and 5 B adds 10 to link 1 and 15 to link 2;
    an inactive flow adds nothing, and a link no flow crosses carries 0."""
    n_links = 6
    path = np.full((MAX_HOPS, 3), -1, dtype=np.int32)
    backlog = np.zeros((MAX_HOPS, 3))
    path[:4, 0] = [3, 1, 4, 0]
    backlog[:4, 0] = [100.0, 50.0, 0.0, 25.0]
    path[:2, 1] = [1, 2]
    backlog[:2, 1] = [10.0, 5.0]
    path[:2, 2] = [5, 2]  # inactive
    backlog[:2, 2] = [1e6, 1e6]
    hops = np.array([4, 2, 2], dtype=np.int8)
    active = np.array([True, True, False])
    out = np.full(n_links, np.nan)
    link_loads(active, path, backlog, hops, out)
    np.testing.assert_array_equal(out, [175.0, 150.0 + 10.0, 15.0, 100.0, 150.0, 0.0])


def _route(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    adaptive: bool,
    occupancy: np.ndarray,
    load: np.ndarray,
) -> np.ndarray:
    """``route_flows`` on a leaf-spine with one lane per link: the path of each flow."""
    n = src.size
    path, _ = route_flows(
        src, dst, np.arange(n, dtype=np.int64), occupancy, 1, topo.links.bandwidth_Bps,
        np.zeros(len(topo.links), dtype=np.bool_), topo.ep_uplink, topo.ep_downlink,
        topo.ep_leaf, topo.node_pod, topo.switch_index, topo.switch_link, topo.spines_by_pod,
        topo.cores_by_slot, topo.planes, topo.tiers, adaptive, np.zeros(0), load.copy(), False,
        np.zeros(0, np.intp), topo.links.src, topo.links.dst,
    )  # fmt: skip
    return path


def test_adaptive_routing_weighs_bytes_in_flight_at_line_rate_against_queues() -> None:
    """A link's adaptive cost is its queueing delay plus the bytes flows in flight still
    have to send over it, at line rate. leaf00 -> spine00 has 7,408 B in flight: 7,408 /
    50e9 = 148 ns, one 100 ns quantum; leaf00 -> spine01 has 50,000 B queued: 1 us, ten
    quanta. So every flow leaf00 -> leaf01 whose two hashed candidates include spine00
    takes it: adaptive routing moves a flow off its hashed (ECMP) spine only onto spine00,
    and some flows that the hash puts on spine01 move (64 flows: some have both
    candidates)."""
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=2)
    links = topo.links.index
    n = 64
    src = np.full(n, topo.nodes.index["gpu0000"], dtype=np.int64)
    dst = np.full(n, topo.nodes.index["gpu0002"], dtype=np.int64)
    occupancy = np.zeros(len(topo.links))
    occupancy[links["leaf00->spine01"]] = 50_000.0
    load = np.zeros(len(topo.links))
    load[links["leaf00->spine00"]] = 7_408.0
    assert np.floor(7_408.0 / BW / QUANTUM_S) < np.floor(50_000.0 / BW / QUANTUM_S)
    via00 = links["leaf00->spine00"]
    ecmp = _route(topo, src, dst, False, occupancy, load)[1]
    adaptive = _route(topo, src, dst, True, occupancy, load)[1]
    assert set(ecmp.tolist()) == {via00, links["leaf00->spine01"]}  # the hash uses both
    moved = adaptive != ecmp
    assert moved.any()
    assert (adaptive[moved] == via00).all()


@pytest.mark.parametrize("solver", SOLVERS)
def test_adaptive_routing_sees_the_load_in_flight_as_of_the_last_move(solver: Solver) -> None:
    """On an adaptive fabric each tick's move writes the load in flight that routing
    weighs (``link_load_bytes``): a lone flow of 1 MB gpu0000 -> gpu0002 across the
    spine, with nothing queued inside the fabric (it runs at line rate hop after hop),
    has size - delivered bytes still to send over each of its four links, and no other
    link carries any. (Routing placed the whole 1 MB on them when it started; a move
    that does not rewrite the load would leave that.)"""
    prof = dataclasses.replace(NATIVE_400G, routing="adaptive")
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    size = 1e6
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0002", size, 0.0)], dt_s=1e-6, solver=solver
    )
    for _ in range(3):
        fabric.step()
        slot = int(np.flatnonzero(fabric.flows.active)[0])
        path = fabric.flows.path[: fabric.flows.hops[slot], slot]
        assert path.size == 4
        left = size - fabric.flows.delivered[slot]
        assert 0 < left < size
        load = fabric._tick.link_load_bytes
        assert load[path] == pytest.approx([left] * 4, rel=1e-12)
        assert np.delete(load, path).tolist() == [0.0] * (load.size - 4)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_pinned_route_that_turns_down_up_needs_a_second_lane(solver: Solver) -> None:
    """On the credit fabric a path that turns from down to up moves up a lane at the turn
    (so the buffer dependencies stay acyclic): gpu0000 -> leaf00 -> spine00 -> leaf01 ->
    spine01 -> leaf02 -> gpu0004 turns once, at leaf01, and needs lanes 0 and 1. With one
    lane a flow on it cannot start: the fabric refuses it."""
    prof = dataclasses.replace(NATIVE_400G, virtual_lanes=1)
    topo = leaf_spine(prof, leaves=3, spines=2, gpus_per_leaf=2)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0004", 1e6, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.add_static_route(
        "gpu0000", "gpu0004", ["leaf00", "spine00", "leaf01", "spine01", "leaf02"]
    )
    with pytest.raises(CommandError, match="virtual lanes"):
        fabric.run_ticks(3)
    # with two lanes the same path is carried, on lane 0 up to leaf01 and lane 1 after it
    two = dataclasses.replace(prof, virtual_lanes=2)
    fabric, _ = scripted_fabric(
        leaf_spine(two, leaves=3, spines=2, gpus_per_leaf=2), two, [], dt_s=1e-6, solver=solver
    )
    links = fabric.topo.links.index
    names = [
        "gpu0000->leaf00",
        "leaf00->spine00",
        "spine00->leaf01",
        "leaf01->spine01",
        "spine01->leaf02",
        "leaf02->gpu0004",
    ]
    path = np.array([[links[n]] for n in names], dtype=np.int32)
    vl, _, _ = fabric.lanes_and_costs(
        path, np.array([6], np.int8), np.zeros(1, np.int8), np.array([1e6])
    )
    assert vl[:, 0].tolist() == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_roce_packet_behind_any_queued_byte_is_stored_and_forwarded(solver: Solver) -> None:
    """Ethernet cut-through falls back to store-and-forward where the egress queue is not
    empty: a packet then waits for the whole of itself at that switch, one packet time
    more, (min(size, MTU) + header) / bandwidth = (4096 + 82) / 50e9 = 83.56 ns for a
    flow of 1 MB. Even the fraction of a byte a fluid queue can hold counts as queued."""
    prof = ROCE_400G
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    fabric, _ = scripted_fabric(topo, prof, [], dt_s=1e-6, solver=solver)
    links = topo.links.index
    hops = ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0002"]
    path = np.full((MAX_HOPS, 1), -1, dtype=np.int32)
    path[:4, 0] = [links[h] for h in hops]
    args = (path, np.array([4], np.int8), np.zeros(1, np.int8), np.array([1e6]))
    _, cut, _ = fabric.lanes_and_costs(*args)
    fabric.occupancy[links["leaf00->spine00"] * fabric.n_vls] = 0.5  # half a byte at spine00
    _, stored, _ = fabric.lanes_and_costs(*args)
    pkt = min(1e6, prof.mtu_bytes) + prof.header_bytes
    assert stored[0] - cut[0] == pytest.approx(pkt / BW, rel=1e-9)
    assert pkt / BW == pytest.approx(83.56e-9, rel=1e-9)


def _route_both_ways(
    topo: Topology, seed: int, adaptive: bool, n_down: int = 0, n: int = 400
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One batch routed by the shortcut (``complete``: the two hashed choices costed, the
    unusable candidates found from the down links) and by costing every candidate: random
    endpoint pairs, ``n_down`` random links known down, queues and loads in flight drawn
    on a scale of a few cost quanta so that many pairs of candidates tie or differ by
    one; returns (path, hops, load placed) of each."""
    rng = np.random.default_rng(seed)
    eps = topo.endpoints.astype(np.int64)
    src, dst = rng.choice(eps, n), rng.choice(eps, n)
    same = src == dst
    dst[same] = eps[(np.searchsorted(eps, dst[same]) + 1) % eps.size]
    n_vls = 2
    occupancy = np.floor(rng.exponential(2 * QUANTUM_S * BW, len(topo.links) * n_vls))
    load = np.floor(rng.exponential(QUANTUM_S * BW, len(topo.links)))
    size = rng.integers(1, 8, n) * 1024.0
    known_down = np.zeros(len(topo.links), dtype=np.bool_)
    known_down[rng.choice(len(topo.links), n_down, replace=False)] = True
    out = []
    for complete in (True, False):
        placed = load.copy()
        path, hops = route_flows(
            src, dst, np.arange(n, dtype=np.int64), occupancy, n_vls, topo.links.bandwidth_Bps,
            known_down, topo.ep_uplink, topo.ep_downlink, topo.ep_leaf, topo.node_pod,
            topo.switch_index, topo.switch_link, topo.spines_by_pod, topo.cores_by_slot,
            topo.planes, topo.tiers, adaptive, size, placed, complete,
            np.flatnonzero(known_down), topo.links.src, topo.links.dst,
        )  # fmt: skip
        out.append((path, hops, placed))
    return out[0], out[1]


@pytest.mark.parametrize("adaptive", [True, False])
@pytest.mark.parametrize(
    "build",
    [
        lambda: leaf_spine(NATIVE_400G, leaves=4, spines=3, gpus_per_leaf=4),
        lambda: leaf_spine(NATIVE_400G, leaves=4, spines=2, gpus_per_leaf=2, planes=2),
        lambda: fat_tree(
            NATIVE_400G,
            pods=3,
            leaves_per_pod=2,
            spines_per_pod=3,
            cores_per_spine=2,
            gpus_per_leaf=2,
        ),
    ],
    ids=["leaf-spine", "two-planes", "fat-tree"],
)
def test_the_two_choice_shortcut_picks_what_costing_every_candidate_picks(
    build: object, adaptive: bool
) -> None:
    """On a topology with every candidate, ``route_flows`` costs only a flow's two hashed
    choices: with no link known down its k-th usable candidate is its k-th; with some down,
    the candidates that cross them are found from the down links and skipped (a 3-tier flow
    has slots × cores per slot candidates). The paths and the load the batch places must
    be those of costing every candidate, bit for bit, on random queues (ties within a
    quantum included), with 0 to 12 random links down (endpoint, leaf-spine and spine-core
    links alike; a flow whose own link is down, or that has no candidate left, takes the
    first)."""
    topo = build()  # type: ignore[operator]
    assert every_candidate_present(topo)
    for seed in range(5):
        for n_down in (0, 1, 3, 12):
            (p1, h1, l1), (p2, h2, l2) = _route_both_ways(topo, seed, adaptive, n_down)
            np.testing.assert_array_equal(p1, p2)
            np.testing.assert_array_equal(h1, h2)
            np.testing.assert_array_equal(l1, l2)
    # and adaptive routing does use the costs: some flows leave their hashed choice
    if adaptive:
        (p_ad, _, _), _ = _route_both_ways(topo, 0, True)
        (p_hash, _, _), _ = _route_both_ways(topo, 0, False)
        assert (p_ad != p_hash).any()


@pytest.mark.parametrize("adaptive", [True, False])
@pytest.mark.parametrize("planes", [1, 2])
def test_the_two_tier_router_routes_as_the_general_one(adaptive: bool, planes: int) -> None:
    """``route_flows_in_pods`` (2-tier fabrics, without the routes between pods) gives the
    paths, hop counts and placed load of ``route_flows``, bit for bit, on random queues
    and loads with 0 to 12 random links down, costing two choices or every candidate."""
    topo = leaf_spine(NATIVE_400G, leaves=5, spines=4, gpus_per_leaf=3, planes=planes)
    for seed in range(6):
        rng = np.random.default_rng(seed)
        eps = topo.endpoints.astype(np.int64)
        n = 40
        src, dst = rng.choice(eps, n), rng.choice(eps, n)
        occupancy = np.floor(rng.exponential(2 * QUANTUM_S * BW, len(topo.links) * 2))
        load = np.floor(rng.exponential(QUANTUM_S * BW, len(topo.links)))
        size = rng.integers(1, 8, n) * 1024.0
        known_down = np.zeros(len(topo.links), dtype=np.bool_)
        known_down[rng.choice(len(topo.links), seed * 2, replace=False)] = True
        for complete in (True, False):
            got = []
            for router in (route_flows, route_flows_in_pods):
                placed = load.copy()
                path, hops = router(
                    src, dst, np.arange(n, dtype=np.int64), occupancy, 2,
                    topo.links.bandwidth_Bps, known_down, topo.ep_uplink, topo.ep_downlink,
                    topo.ep_leaf, topo.node_pod, topo.switch_index, topo.switch_link,
                    topo.spines_by_pod, topo.cores_by_slot, topo.planes, topo.tiers,
                    adaptive, size, placed, complete, np.flatnonzero(known_down),
                    topo.links.src, topo.links.dst,
                )  # fmt: skip
                got.append((path, hops, placed))
            for a, b in zip(got[0], got[1], strict=True):
                np.testing.assert_array_equal(b, a)


def test_a_specialised_kernel_is_a_copy_of_its_own_and_names_its_constants() -> None:
    """The 2-tier router is ``route_flows`` compiled again under its own name (numba's
    disk cache keeps a kernel per name) with ``ACROSS_PODS`` off; a constant the module
    lacks is refused by name, not silently added."""
    assert route_flows_in_pods.py_func.__qualname__ == "route_flows_in_pods"
    assert route_flows_in_pods.py_func.__globals__["ACROSS_PODS"] is False
    assert route_flows.py_func.__globals__["ACROSS_PODS"] is True
    with pytest.raises(NameError, match="route_flows has no module constant ACROSS_POD"):
        specialised_kernel(route_flows, "other", ACROSS_POD=False)


def _damaged(topo: Topology, damage: str) -> Topology:
    """``topo`` with one candidate of some flow gone: a cable cut one way (leaf to spine,
    spine to leaf, spine to core or core to spine), a spine or a core missing from its
    table, an endpoint without a leaf, or a link with no bandwidth."""
    sw, cut = topo.switch_index, topo.switch_link.copy()
    leaf = topo.ep_leaf[topo.endpoints[0], 0]
    spine, core = topo.spines_by_pod[0, 1, 1], topo.cores_by_slot[0, 1, 0]
    pairs = {
        "leaf-spine": (leaf, topo.spines_by_pod[0, 0, 1]),
        "spine-leaf": (topo.spines_by_pod[0, 0, 1], leaf),
        "spine-core": (spine, core),
        "core-spine": (core, spine),
    }
    if damage in pairs:
        a, b = pairs[damage]
        cut[sw[a], sw[b]] = -1
        return dataclasses.replace(topo, switch_link=cut)
    if damage == "no-spine":
        spines = topo.spines_by_pod.copy()
        spines[0, 1, 0] = -1
        return dataclasses.replace(topo, spines_by_pod=spines)
    if damage == "no-core":
        cores = topo.cores_by_slot.copy()
        cores[0, 1, 1] = -1
        return dataclasses.replace(topo, cores_by_slot=cores)
    if damage == "no-leaf":
        ep_leaf = topo.ep_leaf.copy()
        ep_leaf[topo.endpoints[-1], 0] = -1
        return dataclasses.replace(topo, ep_leaf=ep_leaf)
    assert damage == "no-bandwidth"
    bw = topo.links.bandwidth_Bps.copy()
    bw[3] = 0.0
    return dataclasses.replace(topo, links=dataclasses.replace(topo.links, bandwidth_Bps=bw))


@pytest.mark.parametrize(
    "damage",
    [
        "leaf-spine",
        "spine-leaf",
        "spine-core",
        "core-spine",
        "no-spine",
        "no-core",
        "no-leaf",
        "no-bandwidth",
    ],
)
def test_a_topology_missing_a_candidate_is_not_taken_for_complete(damage: str) -> None:
    """``every_candidate_present`` is what lets routing skip costing the candidates, so it
    must say False for a fat-tree missing any one candidate of some flow, and True for the
    whole one."""
    topo = fat_tree(
        NATIVE_400G, pods=2, leaves_per_pod=2, spines_per_pod=2, cores_per_spine=2,
        gpus_per_leaf=2,
    )  # fmt: skip
    assert every_candidate_present(topo)
    assert not every_candidate_present(_damaged(topo, damage))


def test_a_two_tier_fabric_missing_a_spine_is_not_taken_for_complete() -> None:
    """A missing spine is -1 in ``spines_by_pod``. On a 2-tier leaf-spine the last node
    is the last spine, which every leaf is cabled to, so reading -1 as a node id finds
    cables: the table itself must be checked, not only the cabling it points to."""
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=1)
    assert topo.nodes.name[-1] == "spine01"
    assert every_candidate_present(topo)
    spines = topo.spines_by_pod.copy()
    spines[0, 0, 0] = -1
    assert not every_candidate_present(dataclasses.replace(topo, spines_by_pod=spines))


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_new_profile_gives_new_flows_its_own_endpoint_costs(solver: Solver) -> None:
    """A flow's fixed latency includes the endpoints' data path, 2 × the NIC pipeline +
    the PCIe read round trip + the PCIe write (``endpoint_costs.data_path_fixed_s``). The
    compiled tick keeps those figures for the profile it last saw; a fabric given a new
    profile (as ``set`` makes one) must cost new flows by it: a NIC pipeline 1 µs longer
    adds 2 µs to the same path."""
    prof = NATIVE_400G
    fabric, _ = scripted_fabric(
        leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=1), prof, [], dt_s=1e-6, solver=solver
    )
    links = fabric.topo.links.index
    names = ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0001"]
    path = np.array([[links[n]] for n in names], dtype=np.int32)
    args = (path, np.array([4], np.int8), np.zeros(1, np.int8), np.array([4096.0]))
    _, before, _ = fabric.lanes_and_costs(*args)
    fabric.profile = dataclasses.replace(prof, nic_latency_s=prof.nic_latency_s + 1e-6)
    _, after, _ = fabric.lanes_and_costs(*args)
    assert after[0] - before[0] == pytest.approx(2e-6, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_message_sent_inline_skips_the_payloads_dma_read(solver: Solver) -> None:
    """A payload of at most ``inline_bytes`` rides in the work request the doorbell write
    carries, so the NIC reads no payload from memory: such a flow's fixed latency is the
    PCIe read round trip shorter than one a byte longer (perftest's latency tests send
    inline, which is how the NIC figure the model starts from was measured)."""
    prof = NATIVE_400G
    fabric, _ = scripted_fabric(
        leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=1), prof, [], dt_s=1e-6, solver=solver
    )
    links = fabric.topo.links.index
    names = ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0001"]
    path = np.array([[links[n]] * 2 for n in names], dtype=np.int32)
    sizes = np.array([prof.inline_bytes, prof.inline_bytes + 1])
    args = (path, np.array([4, 4], np.int8), np.zeros(2, np.int8), sizes)
    _, fixed, _ = fabric.lanes_and_costs(*args)
    assert fixed[1] - fixed[0] == pytest.approx(prof.pcie_read_latency_s, rel=1e-6)
    fabric.profile = dataclasses.replace(prof, inline_bytes=0.0)  # inlining off
    _, fixed, _ = fabric.lanes_and_costs(*args)
    assert fixed[1] - fixed[0] == pytest.approx(0.0, abs=1e-15)
