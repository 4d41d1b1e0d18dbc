"""The flow table's ``live_end``: one past its highest active slot, which bounds the
kernels' passes over the slots (the entry index, the load in flight, the finish times).

A burst grows the table; when it has finished, the flows in flight are packed at the
start again (slots are taken lowest first) and ``live_end`` falls back with them, while the
capacity stays. A ``live_end`` too low would hide flows from the solver: they would
never move or finish.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.runtime.fabric import Solver
from tests.helpers import SOLVERS, profile, scripted_fabric, small_leaf_spine


@pytest.mark.parametrize("solver", SOLVERS)
def test_live_end_follows_the_highest_active_slot_through_a_burst(solver: Solver) -> None:
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=4)
    gpus = [n for n in topo.nodes.name if n.startswith("gpu")]
    # a long flow from the start, a burst of 60 short ones at 5 µs, another long one after
    burst = [(gpus[i % 4], gpus[4 + (i % 4)], 4096.0, 5e-6) for i in range(60)]
    flows = [(gpus[0], gpus[5], 8e6, 0.0), *burst, (gpus[1], gpus[6], 8e6, 40e-6)]
    fabric, (main,) = scripted_fabric(topo, prof, flows, dt_s=1e-6, solver=solver)
    table = fabric.flows
    burst_capacity = 0
    for _ in range(80):
        fabric.step()
        in_use = np.flatnonzero(table.active)
        assert table.live_end == (int(in_use[-1]) + 1 if in_use.size else 0)
        burst_capacity = max(burst_capacity, table.capacity)
    assert burst_capacity >= 62  # the burst grew the table
    # the burst is over; the two long flows hold the two lowest slots, and are still moving
    assert len(main.finished) == 60
    assert table.live_end == 2 < table.capacity
    before = table.delivered[:2].copy()
    fabric.step()
    assert np.all(table.delivered[:2] > before)


@pytest.mark.parametrize("solver", SOLVERS)
def test_live_end_is_zero_once_every_flow_has_finished(solver: Solver) -> None:
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    flows = [("gpu0000", "gpu0002", 1e6, 0.0), ("gpu0001", "gpu0003", 2e6, 1e-6)]
    fabric, (main,) = scripted_fabric(topo, prof, flows, dt_s=1e-6, solver=solver)
    fabric.run_ticks(3)
    assert fabric.flows.live_end == 2  # both in flight, in slots 0 and 1
    fabric.run_ticks(100)  # 1 and 2 MB at 50 GB/s: 20 and 40 µs
    assert len(main.finished) == 2
    assert fabric.flows.live_end == 0
