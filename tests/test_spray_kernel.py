"""The compiled spray (``kernels.spray.spray_flows``) against the numpy reference
(``routing.spray`` then ``routing.split_sprayed``), on random fabrics, flows and down links.

Both solvers' ticks answer ``spray`` (``ReferenceTick`` with numpy, ``CompiledTick`` with the
kernel); every array they return must be the same, element for element, including where
links are down and a flow's usable candidates are fewer than its sub-flows.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.net.profiles import NATIVE_800G
from fabric_core.net.routing import spray_ways
from fabric_core.net.topology import Topology, fat_tree, leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.kernels.tick import CompiledTick
from fabric_core.tick.reference import ReferenceTick


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    """A sprayed 2-tier leaf-spine (some with planes) or 3-tier fat tree."""
    if draw(st.booleans()):
        return leaf_spine(
            NATIVE_800G,
            leaves=draw(st.integers(1, 4)),
            spines=draw(st.integers(1, 10)),
            gpus_per_leaf=draw(st.integers(1, 4)),
            planes=draw(st.sampled_from([1, 1, 2])),
        )
    return fat_tree(
        NATIVE_800G,
        pods=draw(st.integers(1, 3)),
        leaves_per_pod=draw(st.integers(1, 3)),
        spines_per_pod=draw(st.integers(1, 3)),
        cores_per_spine=draw(st.integers(1, 4)),
        gpus_per_leaf=draw(st.integers(1, 3)),
    )


def _ticks(topo: Topology) -> tuple[ReferenceTick, CompiledTick]:
    compiled = Fabric(topo, NATIVE_800G, [], dt_s=1e-6, seed=0, solver="compiled")._tick
    reference = Fabric(topo, NATIVE_800G, [], dt_s=1e-6, seed=0, solver="reference")._tick
    assert isinstance(compiled, CompiledTick) and isinstance(reference, ReferenceTick)
    return reference, compiled


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(), st.data())
def test_compiled_spray_is_the_reference_exactly(topo: Topology, data: st.DataObject) -> None:
    if data.draw(st.booleans()):
        # a cable missing between two switches: candidates crossing it are unusable
        cabled = np.argwhere(topo.switch_link >= 0)
        a, b = cabled[data.draw(st.integers(0, len(cabled) - 1))]
        switch_link = topo.switch_link.copy()
        switch_link[a, b] = -1
        topo = dataclasses.replace(topo, switch_link=switch_link)
    reference, compiled = _ticks(topo)
    eps = topo.gpus
    n = data.draw(st.integers(1, 40))
    src = eps[np.array(data.draw(st.lists(st.integers(0, eps.size - 1), min_size=n, max_size=n)))]
    dst = eps[np.array(data.draw(st.lists(st.integers(0, eps.size - 1), min_size=n, max_size=n)))]
    key = np.array(data.draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)))
    # from a header-only message to many packets, so some flows use fewer ways than others
    size = np.array(
        data.draw(st.lists(st.floats(1.0, 1e6, allow_nan=False), min_size=n, max_size=n))
    )
    n_links = len(topo.links)
    known_down = np.zeros(n_links, dtype=bool)
    down = data.draw(st.lists(st.integers(0, n_links - 1), max_size=6))
    known_down[down] = True
    occupancy = np.array(
        data.draw(
            st.lists(
                st.floats(0.0, 1e6, allow_nan=False),
                min_size=n_links * 2,
                max_size=n_links * 2,
            )
        )
    )
    src, dst, key = src.astype(np.int64), dst.astype(np.int64), key.astype(np.int64)
    ways = spray_ways(topo)
    want = reference.spray(topo, src, dst, key, size, ways, 4096.0, occupancy, 2, known_down)
    got = compiled.spray(topo, src, dst, key, size, ways, 4096.0, occupancy, 2, known_down)
    for name, i in (("path", 0), ("hops", 1), ("of", 2), ("n_sub", 3), ("sub_size", 4)):
        assert got[i].dtype == want[i].dtype, name
        np.testing.assert_array_equal(got[i], want[i], err_msg=name)


def test_a_down_uplink_of_every_spine_but_one_puts_every_sub_flow_on_it() -> None:
    """Leaf 0 with four spines, three of its uplinks down: a four-way flow to leaf 1
    takes the one spine left four times, in both solvers."""
    topo = leaf_spine(NATIVE_800G, leaves=2, spines=4, gpus_per_leaf=1)
    reference, compiled = _ticks(topo)
    known_down = np.zeros(len(topo.links), dtype=bool)
    for s in range(3):
        known_down[topo.links.index[f"leaf00->spine0{s}"]] = True
    src, dst = topo.gpus[:1].astype(np.int64), topo.gpus[1:2].astype(np.int64)
    key, size = np.array([7], np.int64), np.array([1e6])
    occ = np.zeros(len(topo.links) * 2)
    for tick in (reference, compiled):
        path, hops, of, n_sub, sub_size = tick.spray(
            topo, src, dst, key, size, 4, 4096.0, occ, 2, known_down
        )
        assert n_sub.tolist() == [4] and (hops == 4).all() and (of == 0).all()
        assert {topo.links.name[i] for i in path[1]} == {"leaf00->spine03"}
        assert sub_size.sum() == 1e6
