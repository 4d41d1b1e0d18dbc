"""The compiled index's buffer groups, held to rates derived by hand (issue 23, session 19).

``kernels.index.entry_index`` numbers the used buffers by (link rank, lane) and cuts them
into groups, one per (rank, lane); the compiled solve settles the groups' credit factors
from the last (downstream first), so a buffer reads the drains its downstream buffers
have already cut. A group boundary missed merges two groups, whose buffers are then
settled upstream first (in their index order). ``scripts/mutate`` runs this file first in
the ``kernels.index`` subset.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.runtime.fabric import Solver
from tests.helpers import SOLVERS, profile, scripted_fabric, small_leaf_spine

ROOMY = 1e9  # bytes free: a buffer credits never cut


@pytest.mark.parametrize("solver", SOLVERS)
def test_an_upstream_buffer_reads_the_drain_its_downstream_buffer_has_cut(solver: Solver) -> None:
    """One lane, two leaves of three GPUs, one spine; dt = 1 s, each flow holding 100 B at
    its source and nothing queued past it (so a hop's demand is its upstream hop's rate).

    A: gpu0000 -> gpu0003 (leaf00, spine00, leaf01), F: gpu0000 -> gpu0001 and
    H: gpu0002 -> gpu0001 (leaf00 only). gpu0000's uplink carries 40 B/s, spine00 ->
    leaf01 5 B/s, leaf00 -> gpu0001 30 B/s, every other link 100 B/s. Full (0 B free):
    B0, leaf00's buffer of gpu0000's uplink (A and F feed it; rank 0, lane 0, the first
    buffer group) and B1, spine00's buffer of leaf00 -> spine00 (A; rank 1, lane 0, the
    next group, since no rank-0 buffer is on another lane). The rest have room.

    Pass 1 fills: A and F 20 each on the uplink; F and H 15 each on leaf00 -> gpu0001;
    A 5 on spine00 -> leaf01. Credits, downstream first: B1 takes what drains, A's hop
    into it 20 -> 5 (alpha 5/20); then B0, at alpha a, drains min(5, 20a) + min(15, 20a)
    of the 40a it takes: 40a = 20a + 5 for a in [1/4, 3/4], so a = 1/4, A and F 5 each.
    Pass 2 (they are capped at 5): leaf00 -> gpu0001 gives F its 5 and H the other
    25 B/s. Rates: A 5, F 5, H 25 on its last hop (100 on its uplink, into a roomy buffer).

    The two groups settled as one, B0 first, B0 reads A's next hop uncut (20): 40a = 20a +
    15, a = 3/4, and only pass 2 cuts A and F to 5, too late to offer leaf00 -> gpu0001
    back to H, which keeps 15 B/s (the compiled index's ``group_key >= 0`` -> ``> 0``,
    which does not end the group of key 0 = rank 0, lane 0)."""
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=3)
    flows = [
        ("gpu0000", "gpu0003", 1e6, 0.0),  # A
        ("gpu0000", "gpu0001", 1e6, 0.0),  # F
        ("gpu0002", "gpu0001", 1e6, 0.0),  # H
    ]
    fabric, _ = scripted_fabric(topo, prof, flows, dt_s=1e-6, solver=solver)
    fabric.step()
    idx = fabric._current_index()
    assert idx.feedforward
    assert (fabric.flows.vl[:, :3] == 0).all()  # one lane
    links = topo.links.index
    capacity = np.full(len(topo.links), 100.0)
    capacity[links["gpu0000->leaf00"]] = 40.0
    capacity[links["spine00->leaf01"]] = 5.0
    capacity[links["leaf00->gpu0001"]] = 30.0
    backlog = np.where(idx.hop == 0, 100.0, 0.0)
    free = np.full(len(topo.links) * fabric.n_vls, ROOMY)
    b0 = links["gpu0000->leaf00"] * fabric.n_vls
    b1 = links["leaf00->spine00"] * fabric.n_vls
    free[[b0, b1]] = 0.0
    new_flows = np.zeros(fabric.flows.rate.size)  # no rate last tick: every entry starts anew
    # (credits scaled by one factor, the rule this case was worked out for: what it holds
    # to account is the grouping of the buffers, not how their room is shared)
    sol = fabric._tick.solve(
        idx, backlog, capacity, free, 1.0, new_flows, None, None, max_min=False
    )

    def entry(flow: int, link: str) -> int:
        (e,) = np.flatnonzero((idx.flow == flow) & (idx.link == links[link]))
        return int(e)

    a, f, h = 0, 1, 2
    assert fabric.flows.src[h] == topo.nodes.index["gpu0002"]  # the slots are in order
    rates = sol.padded[
        [
            entry(a, "gpu0000->leaf00"),
            entry(a, "leaf00->spine00"),
            entry(a, "spine00->leaf01"),
            entry(f, "gpu0000->leaf00"),
            entry(f, "leaf00->gpu0001"),
            entry(h, "gpu0002->leaf00"),
            entry(h, "leaf00->gpu0001"),
        ]
    ]
    assert rates == pytest.approx([5.0, 5.0, 5.0, 5.0, 5.0, 100.0, 25.0], rel=1e-12)
    assert sol.alpha[[b0, b1]] == pytest.approx([0.25, 0.25], rel=1e-12)
