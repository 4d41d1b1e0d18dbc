"""Credit starvation, the credit fabric's "paused": which links wait, and for how long."""

from __future__ import annotations

import pytest

from fabric_core.runtime.fabric import Solver
from tests.helpers import SOLVERS, profile, scripted_fabric, small_leaf_spine


@pytest.mark.parametrize("solver", SOLVERS)
def test_in_an_incast_the_senders_links_are_starved_half_the_time(solver: Solver) -> None:
    """Two GPUs send to a third on one leaf: the downlink is the bottleneck, the two
    ingress buffers at the leaf are full and give each sender credit for half a link.
    Exactly the two senders' links are starved, and each waits (PortXmitWait) half of
    every tick; the downlink, busy at line rate, does not wait."""
    prof = profile(buffer_per_vl_bytes=64 * 1024)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    incast = [("gpu0001", "gpu0000", 1e12, 0.0), ("gpu0002", "gpu0000", 1e12, 0.0)]
    fabric, _ = scripted_fabric(topo, prof, incast, dt_s=1e-6, solver=solver)
    fabric.run_ticks(50)  # the buffers are full
    before = fabric.snapshot().link_state
    ticks = 100
    fabric.run_ticks(ticks)
    after = fabric.snapshot().link_state
    names = list(topo.links.index)
    starved = {n for n in names if after.paused[topo.links.index[n]]}
    assert starved == {"gpu0001->leaf00", "gpu0002->leaf00"}
    for name, i in topo.links.index.items():
        waited = after.transmit_wait_seconds_total[i] - before.transmit_wait_seconds_total[i]
        want = 0.5 * ticks * 1e-6 if name in starved else 0.0
        assert waited == pytest.approx(want, rel=1e-9, abs=1e-15), name
