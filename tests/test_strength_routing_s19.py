"""Spraying's choice of candidates and its number of ways, held to figures derived by hand
(issue 23, session 19).

``routing.spray`` splits a flow into ``ways`` sub-flows that take consecutive usable
candidates from a hashed offset (``flow_hash(src, dst, key) % usable``, in the candidates'
order: on a leaf-spine the spines by slot), round-robin when there are fewer usable
candidates than ways; ``routing.spray_ways`` caps the ways at ``SPRAY_MAX_WAYS`` (8) and,
past the spine count, rounds them down to a multiple of it. ``scripts/mutate`` runs this
file first in the ``routing`` subset.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.net.profiles import NATIVE_800G
from fabric_core.net.route_rules import SPRAY_MAX_WAYS, flow_hash
from fabric_core.net.routing import spray, spray_ways
from fabric_core.net.topology import fat_tree, leaf_spine

SRC, DST = 0, 2  # gpu0000 on leaf00, gpu0002 on leaf01 (two GPUs a leaf)


def _spines_taken(down: list[int], key: int) -> list[int]:
    """The spine slot of each of the 4 sub-flows of one flow gpu0000 -> gpu0002 on a
    leaf-spine of 2 leaves and 4 spines, with leaf00 -> spine0j down for j in ``down``."""
    topo = leaf_spine(NATIVE_800G, leaves=2, spines=4, gpus_per_leaf=2)
    assert topo.nodes.index["gpu0000"] == SRC and topo.nodes.index["gpu0002"] == DST
    cost = np.zeros(len(topo.links))
    for j in down:
        cost[topo.links.index[f"leaf00->spine0{j}"]] = np.inf
    path, hops = spray(
        topo, np.array([SRC]), np.array([DST]), np.array([key]), ways=4, link_cost=cost
    )
    assert (hops == 4).all()
    return [int(topo.links.name[li].split("->spine0")[1]) for li in path[1]]


def _offset(key: int, usable: int) -> int:
    """The hashed offset among ``usable`` candidates."""
    h = flow_hash(np.array([SRC]), np.array([DST]), np.array([key]))
    return int(h[0] % np.uint64(usable))


@pytest.mark.parametrize("key", range(8))
def test_four_sub_flows_take_the_four_spines_in_turn_from_the_hashed_one(key: int) -> None:
    """Every spine usable: sub-flow i takes spine (o + i) mod 4, o the hashed offset
    among the 4: each spine once."""
    o = _offset(key, 4)
    assert _spines_taken([], key) == [(o + i) % 4 for i in range(4)]


@pytest.mark.parametrize("key", range(12))
def test_with_a_spine_down_the_sub_flows_take_the_three_others_round_robin(key: int) -> None:
    """leaf00 -> spine01 down: the usable spines are 0, 2, 3 (ranks 0, 1, 2). Sub-flow i
    takes the usable spine of rank (o + i) mod 3, o the hashed offset among the 3: all
    three, and the one of rank o twice (sub-flows 0 and 3). The keys cover o = 0, 1, 2."""
    usable = [0, 2, 3]
    o = _offset(key, 3)
    assert _spines_taken([1], key) == [usable[(o + i) % 3] for i in range(4)]


def test_the_keys_cover_every_offset() -> None:
    assert {_offset(k, 3) for k in range(12)} == {0, 1, 2}
    assert {_offset(k, 4) for k in range(8)} == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("spines", "cores", "ways"),
    [
        (4, 3, 8),  # 12 candidates capped at 8, a multiple of the 4 spines already
        (5, 2, 5),  # 10 capped at 8, down to 5, the multiple of 5 spines below it
        (3, 4, 6),  # 12 capped at 8, down to 6
        (2, 3, 6),  # 6 candidates, under the cap: all of them
    ],
)
def test_spray_ways_on_fat_trees_are_capped_then_a_multiple_of_the_spines(
    spines: int, cores: int, ways: int
) -> None:
    topo = fat_tree(
        NATIVE_800G,
        pods=2,
        leaves_per_pod=2,
        spines_per_pod=spines,
        cores_per_spine=cores,
        gpus_per_leaf=2,
    )
    assert SPRAY_MAX_WAYS == 8
    assert spray_ways(topo) == ways
