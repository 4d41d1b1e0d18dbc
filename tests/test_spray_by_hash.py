"""Spraying with every candidate usable (no link down, every candidate present) picks its
candidates by the hash alone and looks up only their links (``routing.spray``'s
``by_hash``): the same paths as costing every candidate first, on 2 and 3 tiers and on
several planes; and with a link known down it still avoids it."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.net.profiles import NATIVE_800G
from fabric_core.net.routing import UNUSABLE_COST, spray, spray_ways
from fabric_core.net.topology import Topology, fat_tree, leaf_spine

TOPOLOGIES = {
    "2-tier, 4 planes": lambda: leaf_spine(
        NATIVE_800G, leaves=6, spines=5, gpus_per_leaf=4, storage_targets=3, planes=4
    ),
    "3-tier": lambda: fat_tree(
        NATIVE_800G,
        pods=3,
        leaves_per_pod=2,
        spines_per_pod=3,
        cores_per_spine=2,
        gpus_per_leaf=3,
        storage_targets=2,
    ),
}


def _flows(topo: Topology, n: int = 500) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    ends = topo.endpoints.astype(np.int64)
    src, dst = rng.choice(ends, n), rng.choice(ends, n)
    keep = src != dst
    return src[keep], dst[keep], np.arange(int(keep.sum()), dtype=np.int64)


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_by_hash_gives_the_paths_costing_every_candidate_gives(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    topo = TOPOLOGIES[name]()
    src, dst, key = _flows(topo)
    ways = spray_ways(topo)
    cost = np.random.default_rng(1).uniform(0.0, 1e-6, len(topo.links))  # loads, all usable
    fast = spray(topo, src, dst, key, ways=ways, link_cost=cost)
    # taken for incomplete, it costs every candidate (cached_property keeps its value in
    # the instance's dict)
    monkeypatch.setitem(topo.__dict__, "has_every_candidate", False)
    slow = spray(topo, src, dst, key, ways=ways, link_cost=cost)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    assert (fast[1] >= 4).any() and (fast[0] >= 0).sum() > 4 * src.size  # real paths


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_a_link_known_down_is_still_avoided(name: str) -> None:
    topo = TOPOLOGIES[name]()
    src, dst, key = _flows(topo)
    ways = spray_ways(topo)
    cost = np.zeros(len(topo.links))
    path, _ = spray(topo, src, dst, key, ways=ways, link_cost=cost)
    crossed = np.bincount(path[path >= 0], minlength=len(topo.links))
    tiers = np.array(topo.links.tier)
    busiest = int(np.argmax(np.where(tiers == "leaf-spine", crossed, -1)))
    assert crossed[busiest] > 0
    cost[busiest] = UNUSABLE_COST  # known down: the fast path no longer applies
    path, _ = spray(topo, src, dst, key, ways=ways, link_cost=cost)
    assert not (path == busiest).any()
