"""RoCE flow control against hand-computed expectations: ECN marking by queue depth, PFC
hysteresis (pause past XOFF, resume at XON), head-of-line blocking of a victim flow.

Each runs through the public ``Fabric`` on both solvers, so the compiled kernels
(``kernels/pfc.py``) and the numpy reference (``fabric_core/tick/pfc.py``) are each held to it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from fabric_core.commands import InjectFault
from fabric_core.net.profiles import ROCE_400G, Profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.tick.pfc import ecn_probability
from fabric_core.workloads.traffic import Scripted
from tests.helpers import SOLVERS

KIB = 1024.0
KMIN, KMAX, PMAX = 50 * KIB, 300 * KIB, 0.2
BUFFER, HEADROOM, JUMBO = 512 * KIB, 100 * KIB, 9000.0
XOFF = BUFFER - HEADROOM  # 421,888 B
XON = XOFF - JUMBO  # 412,888 B: one Ethernet MTU below XOFF


def red(queue_bytes: float) -> float:
    """RED marking as DCQCN configures it: 0 up to Kmin, linear to Pmax at Kmax, 1 past it."""
    if queue_bytes <= KMIN:
        return 0.0
    if queue_bytes >= KMAX:
        return 1.0
    return PMAX * (queue_bytes - KMIN) / (KMAX - KMIN)


def test_ecn_probability_at_kmin_midway_and_kmax() -> None:
    q = np.array([0.0, KMIN, (KMIN + KMAX) / 2, KMAX - 1, KMAX, 2 * KMAX])
    kmin, kmax = np.full(q.size, KMIN), np.full(q.size, KMAX)
    # midway: Pmax / 2; one byte short of Kmax: just under Pmax; at and past Kmax: 1
    want = [0.0, 0.0, 0.1, 0.2 * (KMAX - 1 - KMIN) / (KMAX - KMIN), 1.0, 1.0]
    assert ecn_probability(q, kmin, kmax, PMAX) == pytest.approx(want, rel=1e-12)


def _incast(solver: Solver, **overrides: Any) -> tuple[Fabric, Scripted]:
    """Three GPUs of one leaf send 4 MiB each to a fourth: its downlink is the bottleneck,
    the three ingress queues at the leaf fill, PFC pauses the senders, ECN marks."""
    params: dict[str, Any] = {
        "pfc_buffer_mode": "static",
        "pfc_buffer_bytes": BUFFER,
        "pfc_headroom_bytes": HEADROOM,
        "ecn_kmin_s": KMIN / ROCE_400G.link_bandwidth_Bps,
        "ecn_kmax_s": KMAX / ROCE_400G.link_bandwidth_Bps,
        "ecn_pmax": PMAX,
    }
    prof: Profile = dataclasses.replace(ROCE_400G, **{**params, **overrides})
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    idx = topo.nodes.index
    flows = [(idx[f"gpu{k:04d}"], idx["gpu0003"], 4.0 * 1024**2, 0.0) for k in range(3)]
    wl = Scripted(name="incast", traffic_class="bulk", flows=flows)
    return Fabric(topo, prof, [wl], dt_s=1e-6, seed=1, solver=solver), wl


@pytest.mark.parametrize("solver", SOLVERS)
def test_ecn_marks_follow_the_queue_depth_below_kmin_on_the_ramp_and_past_kmax(
    solver: Solver,
) -> None:
    """Each tick, the packets leaving onto the bottleneck are marked with RED's
    probability of its egress queue: every byte at the leaf waiting for that port, in
    whichever of the three ingress buffers it sits (switches mark on the output queue).
    The queue fills from empty past Kmax, so all three regimes are crossed (0.1 µs
    ticks: it fills at 100 GB/s)."""
    fabric, _ = _incast(solver)
    fabric.set_dt(1e-7)
    links = fabric.topo.links.index
    out = links["leaf00->gpu0003"]
    queues = [links[f"gpu{k:04d}->leaf00"] for k in range(3)]
    seen = {"below": 0, "ramp": 0, "above": 0}
    prev = fabric.snapshot().link_state
    for _ in range(100):
        fabric.step()
        now = fabric.snapshot().link_state
        packets = now.tx_packets_total[out] - prev.tx_packets_total[out]
        marks = now.ecn_marked_packets_total[out] - prev.ecn_marked_packets_total[out]
        egress = sum(float(now.queue_bytes[q]) for q in queues)
        assert packets > 0
        assert marks == pytest.approx(packets * red(egress), rel=1e-6, abs=1e-9)
        seen["below" if egress <= KMIN else "above" if egress >= KMAX else "ramp"] += 1
        prev = now
    assert min(seen.values()) >= 3, seen


@pytest.mark.parametrize("solver", SOLVERS)
def test_pfc_pauses_past_xoff_and_resumes_only_at_xon(solver: Solver) -> None:
    """Hysteresis with a jumbo MTU (XON 9,000 B below XOFF): a sender is paused once its
    ingress queue passes XOFF, stays paused while the queue drains through (XON, XOFF],
    and resumes only once it is at or below XON; no byte is dropped (the headroom holds
    what is in flight)."""
    # no ECN: DCQCN would slow the senders and pause them less often
    fabric, wl = _incast(solver, ethernet_mtu_bytes=JUMBO, ecn_kmin_s=1.0, ecn_kmax_s=2.0)
    links = fabric.topo.links.index
    queues = [links[f"gpu{k:04d}->leaf00"] for k in range(3)]
    paused = np.zeros(3, dtype=bool)
    resumes = held_between = 0
    while len(wl.finished) < 3:
        fabric.step()
        now = fabric.snapshot().link_state
        depth, is_paused = now.queue_bytes[queues], now.paused[queues].astype(bool)
        for k in range(3):
            if is_paused[k] and not paused[k]:
                assert depth[k] >= XOFF - 1e-6, (k, depth[k])
            if paused[k] and not is_paused[k]:
                resumes += 1
                assert depth[k] <= XON + 1e-6, (k, depth[k])
            if paused[k] and is_paused[k] and XON < depth[k] <= XOFF:
                held_between += 1
        paused = is_paused
    assert resumes >= 10 and held_between >= 5, (resumes, held_between)
    assert fabric.dropped_bytes == 0


@pytest.mark.parametrize("solver", SOLVERS)
def test_head_of_line_blocking_stops_the_victim_whose_own_egress_is_free(
    solver: Solver,
) -> None:
    """gpu0000 sends two long flows on one leaf: the culprit to gpu0002, the victim to
    gpu0001. A PFC storm from gpu0002 stops the leaf's port to it; the culprit's bytes
    then sit at the head of gpu0000's ingress queue and the victim's packets wait behind
    them, though its own egress never sees a pause frame. The buffer (64 MiB) is far from
    XOFF in the window, so the victim is not paused at its NIC: it is stopped by head-of-
    line blocking alone (without it, it would go on at its half of the NIC's rate)."""
    prof = dataclasses.replace(ROCE_400G, pfc_buffer_mode="static", pfc_buffer_bytes=64 * 1024**2)
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    idx, links = topo.nodes.index, topo.links.index
    both = [
        (idx["gpu0000"], idx["gpu0002"], 1e12, 0.0),
        (idx["gpu0000"], idx["gpu0001"], 1e12, 0.0),
    ]
    fabric = Fabric(
        topo,
        prof,
        [Scripted(name="long", traffic_class="bulk", flows=both)],
        dt_s=1e-6,
        seed=1,
        solver=solver,
    )
    fabric.run_ticks(100)

    def victim_rate(ticks: int) -> float:
        before = float(fabric.flows.delivered[1])
        fabric.run_ticks(ticks)
        return (float(fabric.flows.delivered[1]) - before) / (ticks * fabric.dt_s)

    payload = prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    assert victim_rate(50) == pytest.approx(payload / 2, rel=0.01)  # half the NIC each
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0002"))
    fabric.run_ticks(5)  # what was already past the leaf's ingress drains
    assert victim_rate(100) <= 1e-3 * payload
    ls = fabric.snapshot().link_state
    assert ls.pause_frames_total[links["leaf00->gpu0002"]] > 0
    assert ls.pause_frames_total[links["leaf00->gpu0001"]] == 0  # the victim's egress
    assert ls.pause_frames_total[links["gpu0000->leaf00"]] == 0  # and its NIC: not paused
