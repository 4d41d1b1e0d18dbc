"""Fault detection and credit loss, held to the profile's figures (``recovery.py``).

Each expectation comes from the fault catalogue (docs/FAULTS.md) and the profile, not
from the code: a credit loss leaks the sender's share of the downstream buffer by
``loss_fraction`` of every byte carried, the credit watchdog detects it after
``credit_watchdog_s`` and a link retrain ``link_retrain_s`` later restores the credits;
a link down is detected after ``fault_detect_s`` on the native fabric (fast reroute).
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np
import pytest

from fabric_core.commands import InjectFault
from fabric_core.faults.recovery import RECOVERY_WINDOW_S, delivered_rate, reroute
from fabric_core.net.profiles import get_profile
from fabric_core.runtime.fabric import SOLVERS, Fabric, Solver
from fabric_core.runtime.snapshot import LinkStatus
from fabric_core.units import parse_duration, parse_size
from tests.helpers import profile, scripted_fabric, small_leaf_spine, step_resending

BIG = 1e12
BUFFER = 64 * 1024
DT = 1e-6


def one_flow(**overrides: float) -> Fabric:
    prof = profile(buffer_per_vl_bytes=BUFFER, **overrides)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    fabric, _ = scripted_fabric(topo, prof, [("gpu0001", "gpu0000", BIG, 0.0)], dt_s=DT)
    fabric.run_ticks(5)
    return fabric


def test_credit_loss_leaks_the_buffer_with_the_bytes_carried_until_the_retrain() -> None:
    fabric = one_flow(credit_watchdog_s=200e-6, link_retrain_s=100e-6)
    link = int(fabric.topo.links.index["gpu0001->leaf00"])
    lanes = slice(link * fabric.n_vls, (link + 1) * fabric.n_vls)
    base = fabric.buffer_bytes[lanes].copy()
    port_buffer = float(base.sum())
    loss = 0.01
    fabric.apply(
        InjectFault(kind="credit_loss", target="gpu0001->leaf00", params={"loss_fraction": loss})
    )
    t0 = fabric.sim_time_s
    tx0 = float(fabric.counters["tx_bytes_total"][link])
    fabric.run_ticks(50)
    carried = float(fabric.counters["tx_bytes_total"][link]) - tx0
    assert carried > 0
    # the usable buffer shrinks by loss x bytes carried (over the whole port), never grows
    factor = max(1 - loss * carried / port_buffer, 1e-3)
    np.testing.assert_allclose(fabric.buffer_bytes[lanes], base * factor, rtol=0.05)
    assert (fabric.buffer_bytes[lanes] < base).all()
    snap = fabric.snapshot()
    assert snap.link_state.status[link] == LinkStatus.DEGRADED
    (fault,) = snap.faults
    assert fault.state == "active" and fault.time_to_detect_s is None
    # the watchdog: detected after credit_watchdog_s, mitigated (retrained) after
    # link_retrain_s more; the credits come back in full
    while fabric.snapshot().faults[0].time_to_detect_s is None:
        fabric.step()
        assert fabric.sim_time_s - t0 < 1e-3, "never detected"
    fault = fabric.snapshot().faults[0]
    assert fault.time_to_detect_s == pytest.approx(200e-6, abs=1.5 * DT)
    while fabric.snapshot().faults[0].state in ("active", "detected"):
        fabric.step()
        assert fabric.sim_time_s - t0 < 2e-3, "never retrained"
    fabric.run_ticks(2)
    fault = fabric.snapshot().faults[0]
    assert fault.mitigated_at_s is not None
    assert fault.mitigated_at_s - fault.injected_at_s == pytest.approx(300e-6, abs=1.5 * DT)
    assert fabric.snapshot().link_state.status[link] == LinkStatus.UP
    np.testing.assert_allclose(fabric.buffer_bytes[lanes], base, rtol=1e-12)


def test_a_link_down_is_detected_after_the_profiles_detection_time() -> None:
    prof_detect = 50e-6
    fabric = one_flow(fault_detect_s=prof_detect, reroute_s=80e-6)
    t0 = fabric.sim_time_s
    fabric.apply(InjectFault(kind="link_down", target="gpu0001->leaf00"))
    link = int(fabric.topo.links.index["gpu0001->leaf00"])
    back = int(fabric.topo.links.index["leaf00->gpu0001"])
    fabric.run_ticks(10)
    snap = fabric.snapshot()
    assert snap.faults[0].time_to_detect_s is None  # not before its time
    assert snap.link_state.link_downed_total[link] == 1
    assert snap.link_state.link_downed_total[back] == 1
    while fabric.snapshot().faults[0].time_to_detect_s is None:
        fabric.step()
        assert fabric.sim_time_s - t0 < 1e-3, "never detected"
    assert fabric.snapshot().faults[0].time_to_detect_s == pytest.approx(prof_detect, abs=1.5 * DT)
    fabric.run_ticks(20)
    assert fabric.snapshot().link_state.link_downed_total[link] == 1  # counted once


# --- each fault kind's timeline, from the profile's figures (mutation survivors, issue 23)


def _until(fabric: Fabric, cond, limit_s: float = 5e-3) -> None:  # type: ignore[no-untyped-def]
    t0 = fabric.sim_time_s
    while not cond():
        fabric.step()
        assert fabric.sim_time_s - t0 < limit_s, "not reached"


def test_a_degraded_link_is_detected_and_mitigated_at_the_detection_time() -> None:
    fabric = one_flow(fault_detect_s=40e-6)
    fabric.apply(InjectFault(kind="link_degraded", target="gpu0001->leaf00"))
    fabric.run_ticks(20)
    assert fabric.snapshot().faults[0].time_to_detect_s is None  # not before its time
    _until(fabric, lambda: fabric.snapshot().faults[0].detected_at_s is not None)
    fault = fabric.snapshot().faults[0]
    assert fault.time_to_detect_s == pytest.approx(40e-6, abs=1.5 * DT)
    assert fault.mitigated_at_s == fault.detected_at_s  # the retries absorb the errors


def test_a_pfc_storm_on_a_credit_fabric_is_detected_at_the_detection_time_not_mitigated() -> None:
    fabric = one_flow(fault_detect_s=40e-6)
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0001"))
    fabric.run_ticks(20)
    assert fabric.snapshot().faults[0].time_to_detect_s is None
    _until(fabric, lambda: fabric.snapshot().faults[0].detected_at_s is not None)
    fault = fabric.snapshot().faults[0]
    # 40 µs is a whole number of ticks after the injection: on that very tick, not the next
    assert fault.time_to_detect_s == pytest.approx(40e-6, abs=0.5 * DT)
    assert fault.mitigated_at_s is None  # the stuck NIC returns no credits until cleared


def test_an_incast_is_detected_when_more_than_a_buffer_waits_for_its_target() -> None:
    prof = profile(buffer_per_vl_bytes=BUFFER)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=8)
    fabric, _ = scripted_fabric(topo, prof, [], dt_s=DT)
    size = 1e6  # 4 senders x 1 MB into one 400G port: far more than a 64 KiB buffer waits
    fabric.apply(
        InjectFault(
            kind="incast",
            target="gpu0000",
            params={"senders": 4, "size_bytes": size, "period_s": 1.0},
        )
    )
    _until(fabric, lambda: fabric.snapshot().faults[0].detected_at_s is not None)
    events = [e for e in fabric.snapshot().events if e.kind == "fault_detected"]
    assert events and "B queued for gpu0000" in events[-1].message  # (KiB, MiB: bytes)
    # ("incast on gpu0000 detected by its port after 1 µs (f0): 145 KiB queued for gpu0000")
    queued = parse_size(events[-1].message.split("): ")[1].split(" queued")[0])
    assert queued > BUFFER


def test_the_timeline_events_say_how_long_after_the_injection() -> None:
    fabric = one_flow(fault_detect_s=40e-6)
    t0 = fabric.sim_time_s
    fabric.apply(InjectFault(kind="link_degraded", target="gpu0001->leaf00"))
    _until(fabric, lambda: fabric.snapshot().faults[0].mitigated_at_s is not None)
    fault = fabric.snapshot().faults[0]
    assert fault.injected_at_s == pytest.approx(t0)
    by_kind = {e.kind: e.message for e in fabric.snapshot().events}
    for kind, at in (
        ("fault_detected", fault.detected_at_s),
        ("fault_mitigated", fault.mitigated_at_s),
    ):
        assert at is not None
        # written as the console writes a duration: three significant digits
        said = parse_duration(by_kind[kind].split(" after ")[1].split(" (")[0])
        assert said == pytest.approx(at - fault.injected_at_s, rel=5e-3)
        assert by_kind[kind].split(" after ")[1].split(" ")[1] in ("ns", "µs", "ms", "s")


def test_a_spine_link_down_reroutes_without_losing_or_doubling_a_byte_and_recovers() -> None:
    """A 2-spine fabric: a finite flow loses its spine link mid-way; the bytes in the
    network are resent from the source once (go-back-N), the flow delivers exactly its
    size, and the fault is recovered once throughput is back (within the profile's
    detection and reroute times plus the measuring window)."""
    prof = profile(buffer_per_vl_bytes=BUFFER, fault_detect_s=20e-6, reroute_s=30e-6)
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=1)
    size = 40e6
    fabric, (wl,) = scripted_fabric(topo, prof, [("gpu0000", "gpu0001", size, 0.0)], dt_s=DT)
    fabric.run_ticks(50)
    slot = int(np.flatnonzero(fabric.flows.active)[0])
    path = fabric.flows.path[: fabric.flows.hops[slot], slot]
    uplink = next(int(li) for li in path if fabric.topo.links.name[li].startswith("leaf00->spine"))
    fabric.apply(InjectFault(kind="link_down", target=fabric.topo.links.name[uplink]))
    _until(fabric, lambda: len(wl.finished) == 1, limit_s=20e-3)
    assert fabric.delivered_bytes == pytest.approx(size, rel=1e-12)
    resent = float(fabric.counters["retransmitted_bytes_total"].sum())
    assert 0 < resent < BUFFER * 4  # what was in the network: a few buffers, not the flow
    _until(fabric, lambda: fabric.snapshot().faults[0].recovered_at_s is not None, 1e-3)
    # nothing was delivered while the link was down and unknown (detection + reroute), so
    # the delivered rate over the 100 µs window ending at the mitigation is below 90 % of
    # the rate before the failure: recovery comes later, once the window holds enough
    fault = fabric.snapshot().faults[0]
    assert fault.mitigated_at_s is not None and fault.recovered_at_s is not None
    assert fault.recovered_at_s > fault.mitigated_at_s + 10e-6


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_reroute_counts_what_it_sends_again_as_the_nic_sends_it(solver: Solver) -> None:
    """Native fast reroute: the bytes a flow had past its source go back to it and are
    sent again. The link table counts them retransmitted as the NIC sends them, tick by
    tick at its rate (no link resends more in a tick than it sends), not all at the
    reroute; in all, what the NIC sent past the flow's size."""
    prof = profile(buffer_per_vl_bytes=BUFFER, fault_detect_s=20e-6, reroute_s=30e-6)
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=1)
    size = 40e6
    fabric, (wl,) = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0001", size, 0.0)], dt_s=DT, solver=solver
    )
    fabric.run_ticks(50)
    slot = int(np.flatnonzero(fabric.flows.active)[0])
    nic = int(fabric.flows.path[0, slot])
    uplink = next(
        int(li)
        for li in fabric.flows.path[: fabric.flows.hops[slot], slot]
        if fabric.topo.links.name[li].startswith("leaf00->spine")
    )
    fabric.apply(InjectFault(kind="link_down", target=fabric.topo.links.name[uplink]))
    resend_ticks = 0
    while not wl.finished:
        resent, _ = step_resending(fabric, nic)
        resend_ticks += resent > 0
        assert fabric.sim_time_s < 20e-3
    assert fabric.faults.faults["f0"].mitigated_at_s is not None
    assert resend_ticks > 1
    ls = fabric.snapshot().link_state
    resent_total = float(ls.retransmitted_bytes_total[nic])
    assert 0 < resent_total == pytest.approx(float(ls.tx_bytes_total[nic]) - size, rel=1e-9)


def test_a_nic_keeps_the_bytes_queued_for_its_own_dead_link() -> None:
    """On lossy Ethernet, until routing knows, switches forward into a dead port and lose
    what they held for it; a NIC whose own link goes down keeps its unsent bytes."""
    prof = dataclasses.replace(get_profile("roce-400g"), fault_detect_s=20e-6)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=3)
    rows = [("gpu0001", "gpu0000", BIG, 0.0), ("gpu0002", "gpu0000", BIG, 0.0)]
    for dead, lost in (("gpu0001->leaf00", False), ("leaf00->gpu0000", True)):
        fabric, _ = scripted_fabric(topo, prof, rows, dt_s=DT)
        fabric.run_ticks(20)
        link = int(fabric.topo.links.index[dead])
        fabric.apply(InjectFault(kind="link_down", target=dead))
        fabric.run_ticks(10)
        discarded = float(fabric.counters["discards_bytes_total"][link])
        assert (discarded > 0) == lost, (dead, discarded)


def test_a_reroute_counts_the_bytes_resent_against_the_failed_link_even_link_zero() -> None:
    """``recovery.reroute``: a moved flow's bytes past its source are sent again, and
    counted against the failed link it crossed; link 0 (the first in the table, here
    gpu0000's own uplink) is a link like any other."""
    prof = profile(buffer_per_vl_bytes=BUFFER)
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=2)
    # gpu0003 shares gpu0002's port, so gpu0000's bytes queue in the switches on the way
    flows = [("gpu0000", "gpu0002", BIG, 0.0), ("gpu0003", "gpu0002", BIG, 0.0)]
    fabric, _ = scripted_fabric(topo, prof, flows, dt_s=DT)
    fabric.run_ticks(10)
    assert topo.links.name[0] == "gpu0000->leaf00"
    slot = int(np.flatnonzero(fabric.flows.active & (fabric.flows.path[0] == 0))[0])
    past_source = float(fabric.flows.backlog[1:, slot].sum())
    assert past_source > 0  # bytes queued in the switches along the path
    moved, resent = reroute(fabric, np.array([0]))
    assert moved == 1  # gpu0003's flow does not cross link 0
    assert resent[0] == pytest.approx(past_source, rel=1e-12)
    assert resent.sum() == resent[0]


def test_the_recovery_rate_is_measured_over_four_ticks_when_the_window_is_shorter() -> None:
    """At a 50 µs tick, RECOVERY_WINDOW_S (100 µs) is two ticks: the rate is taken over
    four (200 µs). With the delivered bytes k² at tick k (k = 0..10, 50 µs apart), the
    rate ending at tick 10 is (10² - 6²) B / 200 µs = 320,000 B/s; over five ticks it
    would be (10² - 5²) / 250 µs = 300,000 B/s, over two (10² - 8²) / 100 µs = 360,000."""
    tick = 50e-6
    assert 4 * tick > RECOVERY_WINDOW_S
    history = deque((k * tick, float(k * k)) for k in range(11))
    assert delivered_rate(history, 10 * tick, tick) == pytest.approx(320_000.0, rel=1e-9)
    # at a 1 µs tick the window is RECOVERY_WINDOW_S itself, 100 ticks: (299² - 199²) B
    fine = deque((k * 1e-6, float(k * k)) for k in range(300))
    assert delivered_rate(fine, 299e-6, 1e-6) == pytest.approx((299**2 - 199**2) / 100e-6, rel=1e-9)
