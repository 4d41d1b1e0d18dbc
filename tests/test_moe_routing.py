"""Adaptive routing spreads a burst (issue 15): an MoE dispatch's messages start in the
same tick and see the same queues, so without counting the load the burst itself places
they all take the candidate that looked idle."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.net.profiles import get_profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from tests.helpers import SOLVERS

MSG_BYTES = 7408.0  # a DeepEP FP8 dispatch message at hidden 7168


def _uplink_spread(solver: Solver, sized: bool) -> float:
    """Worst leaf's busiest uplink over its mean, for one EP64-sized burst routed at once
    (64 GPUs on 16 leaves × 4 spines, 128 messages each to random peers), with spine00's
    links idle and the others' holding one packet: the herding case."""
    prof = get_profile("native-400g")
    topo = leaf_spine(prof, leaves=16, spines=4, gpus_per_leaf=4)
    fabric = Fabric(topo, prof, [], dt_s=1e-6, seed=1, solver=solver)
    rng = np.random.default_rng(7)
    gpus = topo.gpus.astype(np.int64)
    src = np.repeat(gpus, 128)
    dst = gpus[(np.searchsorted(gpus, src) + rng.integers(1, gpus.size, src.size)) % gpus.size]
    sw, sl = topo.switch_index, topo.switch_link
    leaves = np.unique(topo.ep_leaf[gpus, 0])
    spines = topo.spines_by_pod[0, 0]
    uplinks = sl[sw[leaves][:, None], sw[spines][None, :]]  # [leaf, spine]
    downlinks = sl[sw[spines][:, None], sw[leaves][None, :]].T
    busy = np.concatenate([uplinks[:, 1:].ravel(), downlinks[:, 1:].ravel()])
    n_links = len(topo.links)
    occupancy = np.zeros(n_links * fabric.n_vls)
    occupancy[busy * fabric.n_vls] = 4096.0
    key = np.arange(src.size, dtype=np.int64)
    size = np.full(src.size, MSG_BYTES) if sized else None
    down = np.zeros(n_links, dtype=bool)
    path, hops = fabric._tick.route(topo, src, dst, key, True, occupancy, fabric.n_vls, down, size)
    load = np.bincount(path[1][hops > 2], minlength=n_links).astype(float)
    per_leaf = load[uplinks]
    return float((per_leaf.max(axis=1) / per_leaf.mean(axis=1)).max())


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_burst_spreads_over_the_spines_by_its_own_load(solver: Solver) -> None:
    # without the burst's own load: every message whose two candidates include the idle
    # spine00 takes it, 7/16 of the burst instead of 1/4 (the +35 % of issue 15)
    assert _uplink_spread(solver, sized=False) > 1.5
    assert _uplink_spread(solver, sized=True) < 1.1
