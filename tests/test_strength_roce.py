"""RoCE flow control in the tick (``fabric_core.tick.roce``), held to figures derived by
hand (both solvers).

Written against ``Fabric`` and its public state after whole ticks (occupancy, counters,
events, ``deadlocks``), not against the glue's lines: ``scripts/mutate`` runs them first
for the PFC modules, each to fail on a one-line bug that the broader tests let through.
"""

from __future__ import annotations

import dataclasses

import pytest

from fabric_core.commands import InjectFault
from fabric_core.net.profiles import ROCE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.workloads.traffic import Scripted
from tests.helpers import SOLVERS, scripted_fabric

HEADROOM = 64 * 1024.0


def shared_incast(solver: Solver, alpha: float, switch_buffer: float) -> Fabric:
    """gpu0001 and gpu0002 send to gpu0000 on one leaf (one spine), the leaf's ports
    sharing ``switch_buffer`` with a fixed 64 KiB headroom per queue, PFC alone."""
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_buffer_mode="shared",
        switch_buffer_bytes=switch_buffer,
        pfc_alpha=alpha,
        pfc_headroom_bytes=HEADROOM,
        congestion_control="none",
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=3)
    idx = topo.nodes.index
    flows = [(idx[f"gpu000{k}"], idx["gpu0000"], 1e9, 0.0) for k in (1, 2)]
    wl = Scripted(name="incast", traffic_class="bulk", flows=flows)
    return Fabric(topo, prof, [wl], dt_s=1e-6, seed=1, solver=solver)


@pytest.mark.parametrize("solver", SOLVERS)
def test_with_alpha_one_each_of_two_congested_queues_holds_a_third_of_the_pool(
    solver: Solver,
) -> None:
    """Broadcom's dynamic threshold with alpha = 1: a queue pauses at the whole shared
    buffer still free. The leaf reserves the headroom of every queue into it (4 links in:
    3 GPUs and the spine, each with ``V`` lanes): pool = S - 4 V x 64 KiB. Two congested
    ingress queues holding x each settle where x = alpha (pool - 2x): x = pool / 3 (the
    thresholds follow the occupancy every tick; frozen at an empty switch's, alpha x
    pool, each would take the whole pool)."""
    switch_buffer = 4e6
    fabric = shared_incast(solver, 1.0, switch_buffer)
    V = fabric.n_vls
    pool = switch_buffer - 4 * V * HEADROOM
    fabric.run_ticks(300)  # each queue fills at R/2 = 25 GB/s: a third of the pool in ~40 us
    links = fabric.topo.links.index
    held = [float(fabric.occupancy[links[f"gpu000{k}->leaf00"] * V]) for k in (1, 2)]
    assert held == pytest.approx([pool / 3, pool / 3], rel=0.05)
    assert fabric.dropped_bytes == 0
    assert fabric.counters["pause_frames_total"].sum() > 0


@pytest.mark.parametrize("solver", SOLVERS)
def test_an_incast_that_pauses_its_senders_is_no_deadlock(solver: Solver) -> None:
    """PFC pauses both senders of the incast, but the paused queues drain into the
    receiver: there is no cycle of paused queues, so the fabric counts no deadlock and
    reports none."""
    fabric = shared_incast(solver, 1 / 8, 4e6)
    fabric.run_ticks(300)
    assert fabric.counters["pause_frames_total"].sum() > 0
    assert fabric.deadlocks == 0
    assert not [e for e in fabric.events if e.kind == "deadlock"]


@pytest.mark.parametrize("solver", SOLVERS)
def test_the_watchdog_reports_each_priority_of_a_storming_nics_link(solver: Solver) -> None:
    """A NIC in a PFC storm pauses every priority of the link into it; the PFC watchdog
    (50 us) fires on each of them 50 us after the pause began, and its event names the
    link and the priority: one event for each of priorities 0 to V - 1 of
    leaf00 -> gpu0001, none elsewhere."""
    prof = dataclasses.replace(ROCE_400G, pfc_watchdog_s=50e-6)
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0001", 1e9, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.run_ticks(5)
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0001"))
    fabric.run_ticks(80)
    fired = [e for e in fabric.events if e.kind == "pfc_watchdog"]
    assert {e.target for e in fired} == {"leaf00->gpu0001"}
    named = sorted(int(e.message.split(" priority ")[1].split(":")[0]) for e in fired)
    assert named == list(range(fabric.n_vls))
    for e in fired:
        assert 50e-6 <= e.time_s - 5e-6 <= 53e-6


@pytest.mark.parametrize("solver", SOLVERS)
def test_swifts_window_of_an_uncongested_flow_is_one_bandwidth_delay_product(
    solver: Solver,
) -> None:
    """Swift keeps ``cwnd`` bytes in flight and sends at cwnd / RTT. A lone flow meets no
    queue: its RTT is the base RTT, twice its one-way fixed latency F, and its window is
    capped at what line rate keeps in flight over it, one bandwidth-delay product
    R x 2F (here 50 GB/s x 2 x 2.19 us = 219 kB), so it paces at line rate."""
    prof = dataclasses.replace(ROCE_400G, congestion_control="swift")
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0002", 1e9, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.run_ticks(20)
    assert fabric.roce is not None
    slot = 0  # the only flow
    one_way = float(fabric.flows.fixed_latency_s[slot])
    rate = prof.link_bandwidth_Bps
    assert fabric.roce.dcqcn.cwnd[slot] == pytest.approx(rate * 2 * one_way, rel=1e-12)
    assert fabric.roce.dcqcn.rc[slot] == pytest.approx(rate, rel=1e-12)
