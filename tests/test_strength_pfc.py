"""PFC's accounting on a RoCE incast, held to what the counters mean (both solvers).

A PFC pause stops a port's sender on one priority; the port counts the time it was
stopped (per priority, and in all), the pause frames that kept it stopped (one per
refresh interval at least, 802.1Qbb: a pause lasts 65535 quanta of 512 bit times and is
refreshed before it runs out), and the time it waited to send at all (PortXmitWait: the
most stopped of its priorities). Written against ``Fabric`` and its counters, so that
they hold whatever the PFC kernels look like inside (``scripts/mutate`` runs them first
for the PFC modules).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.net.profiles import ROCE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.tick.pfc import PAUSE_QUANTA, QUANTUM_BITS
from fabric_core.workloads.traffic import Scripted
from tests.helpers import SOLVERS

SHALLOW = 512 * 1024
SIZE = 4 * 1024**2


def incast(
    solver: Solver,
    senders: int = 4,
    headroom: float = 0.0,
    *,
    buffer: float = SHALLOW,
    size: float = SIZE,
) -> tuple[Fabric, Scripted]:
    """``senders`` GPUs each send ``size`` bytes (4 MiB) to gpu0000 on one leaf, shallow
    static PFC buffers, PFC alone (DCQCN would cut the senders before the buffers fill:
    ``test_dcqcn.py``)."""
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_buffer_mode="static",
        pfc_buffer_bytes=buffer,
        pfc_headroom_bytes=headroom,
        congestion_control="none",
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=senders + 1)
    idx = topo.nodes.index
    flows = [(idx[f"gpu{k:04d}"], idx["gpu0000"], size, 0.0) for k in range(1, senders + 1)]
    wl = Scripted(name="incast", traffic_class="bulk", flows=flows)
    return Fabric(topo, prof, [wl], dt_s=1e-6, seed=1, solver=solver), wl


def run(fabric: Fabric, wl: Scripted, n: int) -> None:
    for _ in range(5000):
        if len(wl.finished) >= n:
            return
        fabric.step()
    pytest.fail("the incast never finished")


@pytest.mark.parametrize("solver", SOLVERS)
def test_pause_time_frames_and_wait_agree_per_port_and_priority(solver: Solver) -> None:
    fabric, wl = incast(solver)
    run(fabric, wl, 4)
    c = fabric.counters
    v = fabric.n_vls
    seconds = np.asarray(c["pause_seconds_total"])
    frames = np.asarray(c["pause_frames_total"])
    per_vl_s = np.asarray(fabric.pause_vl["pause_seconds_vl_total"])
    per_vl_f = np.asarray(fabric.pause_vl["pause_frames_vl_total"])
    wait = np.asarray(c["transmit_wait_seconds_total"])
    elapsed = fabric.sim_time_s
    links = fabric.topo.links.index
    senders = [links[f"gpu{k:04d}->leaf00"] for k in range(1, 5)]
    assert (seconds[senders] > 0).all()  # PFC acted on every sender
    # the per-priority counters add up to the port's; one priority carries the traffic, so
    # the port waited exactly as long as it was paused
    np.testing.assert_allclose(per_vl_s.reshape(-1, v).sum(axis=1), seconds, rtol=1e-12)
    np.testing.assert_allclose(per_vl_f.reshape(-1, v).sum(axis=1), frames, rtol=1e-12)
    np.testing.assert_allclose(wait, seconds, rtol=1e-9, atol=1e-15)
    assert (seconds <= elapsed * (1 + 1e-12)).all()
    # frames: whole numbers, none without a pause, and at least one per refresh interval
    # of pause (a pause frame holds the sender for 65535 quanta of 512 bits; the switch
    # refreshes it before it runs out)
    assert np.array_equal(frames, np.round(frames))
    assert ((frames > 0) == (seconds > 0)).all()
    line = fabric.topo.links.bandwidth_Bps
    quantum_s = PAUSE_QUANTA * QUANTUM_BITS / (8 * line)
    assert (frames[senders] >= seconds[senders] / quantum_s[senders]).all()
    # the receiving side: the downlink to the sink and the sink's NIC are never paused
    assert seconds[links["leaf00->gpu0000"]] == 0


def test_both_solvers_count_the_same_pause_time_frames_and_wait() -> None:
    """The compiled PFC kernels against the numpy reference (their oracle) on the incast,
    counter by counter. A tick in which a sender stops or resumes part of the way through
    counts only the part it was stopped (its send share's complement), which the random
    fabrics of the lockstep tests rarely reach: here the senders pause and resume inside
    ticks throughout (about 228 us of pause per sender in 343 us)."""
    ref, ref_wl = incast("reference")
    comp, comp_wl = incast("compiled")
    run(ref, ref_wl, 4)
    run(comp, comp_wl, 4)
    assert comp.sim_time_s == ref.sim_time_s
    for name in ("pause_seconds_total", "pause_frames_total", "transmit_wait_seconds_total"):
        np.testing.assert_allclose(comp.counters[name], ref.counters[name], rtol=1e-9, err_msg=name)
    for name in ("pause_seconds_vl_total", "pause_frames_vl_total"):
        np.testing.assert_allclose(comp.pause_vl[name], ref.pause_vl[name], rtol=1e-9, err_msg=name)
    stopped = np.asarray(ref.counters["pause_seconds_total"])
    dt = ref.dt_s
    assert not np.allclose(stopped / dt, np.round(stopped / dt))  # parts of ticks, not whole


@pytest.mark.parametrize("solver", SOLVERS)
def test_the_incast_is_paced_by_pause_the_downlink_stays_busy(solver: Solver) -> None:
    """With PFC and enough headroom nothing is dropped, every byte arrives once, and the
    incast takes its bytes over the downlink's payload rate (it is busy throughout): the
    senders' pauses only ever take what the downlink could not carry."""
    fabric, wl = incast(solver)
    run(fabric, wl, 4)
    assert fabric.dropped_bytes == 0
    assert fabric.counters["retransmitted_bytes_total"].sum() == 0
    p = fabric.profile
    payload = p.link_bandwidth_Bps * p.mtu_bytes / (p.mtu_bytes + p.header_bytes)
    last = max(f for _, _, f in wl.finished)
    assert last == pytest.approx(4 * SIZE / payload, rel=0.03)
    # each sender was paused for about the share of the run it could not send:
    # 3/4 of the time at line rate would be too much for one quarter of the downlink
    links = fabric.topo.links.index
    paused = fabric.counters["pause_seconds_total"][links["gpu0001->leaf00"]]
    assert paused > 0.25 * last


@pytest.mark.parametrize("solver", SOLVERS)
def test_drops_past_the_buffer_are_shared_by_the_senders_and_resent(solver: Solver) -> None:
    """Too little headroom: bytes past the buffer are dropped from what arrived, every
    sender losing some (they all overfill the same way), discards counted where they happened (the senders' ingress ports),
    every dropped byte resent (go-back-N) and every byte delivered exactly once."""
    fabric, wl = incast(solver, headroom=2000.0)
    run(fabric, wl, 4)
    assert fabric.dropped_bytes > 0
    links = fabric.topo.links.index
    discards = np.asarray(fabric.counters["discards_bytes_total"])
    senders = [links[f"gpu{k:04d}->leaf00"] for k in range(1, 5)]
    assert discards.sum() == pytest.approx(fabric.dropped_bytes, rel=1e-9)
    assert discards[senders].sum() == pytest.approx(fabric.dropped_bytes, rel=1e-9)
    assert (discards[senders] > 0.5 * discards[senders].mean()).all()
    resent = np.asarray(fabric.counters["retransmitted_bytes_total"])
    assert resent.sum() >= fabric.dropped_bytes * (1 - 1e-9)
    assert fabric.delivered_bytes == pytest.approx(4 * SIZE, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_shared_buffer_sets_the_thresholds_of_a_switch_listed_first(solver: Solver) -> None:
    """Broadcom's dynamic threshold on every switch, whatever its place in the node list:
    a topology file may name a switch first (node 0). Two GPUs send into a third through
    that switch; each of its ingress queues pauses at alpha x the pool still free."""
    from fabric_core.net.topology import from_cables

    alpha, switch_buffer = 0.25, 2e6
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_buffer_mode="shared",
        switch_buffer_bytes=switch_buffer,
        pfc_alpha=alpha,
        congestion_control="none",
    )
    nodes = [("sw0", "switch"), ("gpu0", "gpu"), ("gpu1", "gpu"), ("gpu2", "gpu")]
    topo = from_cables(prof, nodes, [(1, 0), (2, 0), (3, 0)], roots=None, max_switch_hops=4)
    flows = [(2, 1, 1e9, 0.0), (3, 1, 1e9, 0.0)]
    fabric = Fabric(topo, prof, [Scripted("incast", "bulk", flows=flows)], dt_s=1e-6, seed=1)
    fabric.run_ticks(49)
    q = fabric.roce.pfc if fabric.roce else None
    assert q is not None
    # a tick sets the thresholds from the occupancy at its start
    used = float(fabric.occupancy[q.switch_of == 0].sum())
    fabric.step()
    assert used > 0  # the incast holds bytes at the switch
    V, pool = fabric.n_vls, float(q.shared_pool[0])
    for k in (1, 2):
        qi = topo.links.index[f"gpu{k}->sw0"] * V
        assert q.xoff[qi] == pytest.approx(alpha * (pool - used), rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_pause_ends_when_the_queue_drains_to_an_xon_of_zero(solver: Solver) -> None:
    """XON is XOFF less an MTU, floored at 0: with a buffer barely above its headroom a
    queue resumes only once empty. It must resume then (occupancy <= XON), not wait for an
    occupancy below 0: once the incast is over, no port stays paused and no more pause
    time is counted."""
    headroom = 64 * 1024.0
    # XOFF 4 KiB above the headroom, XON 0 (the MTU is 9000 B)
    fabric, wl = incast(solver, 2, headroom, buffer=headroom + 4096.0, size=256 * 1024.0)
    q = fabric.roce.pfc if fabric.roce else None
    assert q is not None
    links = fabric.topo.links.index
    into_leaf = [links[f"gpu{k:04d}->leaf00"] * fabric.n_vls for k in (1, 2)]
    assert (q.xon[into_leaf] == 0).all() and (q.xoff[into_leaf] > 0).all()
    run(fabric, wl, 2)
    paused_s = fabric.counters["pause_seconds_total"].copy()  # the counters grow in place
    assert paused_s.sum() > 0  # the incast paused the senders
    fabric.run_ticks(100)  # the buffers are empty: the pauses end
    assert not fabric.paused.any()
    np.testing.assert_array_equal(fabric.counters["pause_seconds_total"], paused_s)
