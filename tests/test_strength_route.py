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
from fabric_core.net.topology import Topology, leaf_spine
from fabric_core.runtime.fabric import Solver
from fabric_core.tick.kernels.route import link_loads, route_flows
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
        topo.cores_by_slot, topo.planes, topo.tiers, adaptive, np.zeros(0), load.copy(),
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
