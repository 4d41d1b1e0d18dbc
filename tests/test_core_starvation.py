"""Credit starvation, the credit fabric's "paused": which links wait, and for how long."""

from __future__ import annotations

import pytest

from fabric_core.commands import InjectFault
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


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_lane_credits_stop_altogether_waits_the_whole_tick(solver: Solver) -> None:
    """One spine, and its link down to the destination's leaf fails: the flow has no
    other path, the spine's buffer for it fills and stops draining, then the leaf's.
    From then on the two links before the dead one have data and no credit at all: each
    waits every tick whole (PortXmitWait counts time with data to send and no credit)
    and shows starved, though its lane's inflow is 0 (it was read as "nothing wanted in",
    and such a link as idle)."""
    prof = profile(buffer_per_vl_bytes=64 * 1024)
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0002", 1e12, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.run_ticks(20)
    fabric.apply(InjectFault(kind="link_down", target="spine00->leaf01"))
    fabric.run_ticks(15)  # both buffers before the dead link fill (64 KiB at 50 GB/s: 2 ticks)
    before = fabric.counters["transmit_wait_seconds_total"].copy()
    sent = fabric.counters["tx_bytes_total"].copy()
    ticks = 20
    fabric.run_ticks(ticks)
    waited = fabric.counters["transmit_wait_seconds_total"] - before
    for name in ("gpu0000->leaf00", "leaf00->spine00"):
        i = topo.links.index[name]
        # nothing gets through: less than a byte in 20 ticks (the room the credit loop held
        # for bytes on the cable and in the switch while the buffer filled comes back to
        # the sender by a factor of about a third a tick here: a vanishing trickle)
        assert fabric.counters["tx_bytes_total"][i] - sent[i] < 1.0, name
        assert waited[i] == pytest.approx(ticks * 1e-6, rel=1e-9), name
        assert fabric.link_book.paused[i], name
    for name in ("spine00->leaf00", "leaf01->gpu0002", "gpu0002->leaf01"):
        assert waited[topo.links.index[name]] == 0.0, name
