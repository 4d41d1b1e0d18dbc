"""PFC's clocks and the formulas behind its counters, held to values worked out by hand.

Each test pins one rule that the incast tests of ``test_strength_pfc.py`` cannot tell
apart from a neighbour: when a pause with no queue rise begins, when one begins on a queue
that creeps up by less than a byte a tick, when the watchdog fires, how many PAUSE
frames a long pause carries, when a queue that stops exactly at XON resumes, when a paused
queue less than a byte above XON resumes and that one which does not drain does not, and
Swift's cut and its once-per-RTT limit (``scripts/mutate`` found each of them unguarded). The
clock tests run a fabric on both solvers with a tick of 2^-20 s, so every simulated
time is exact in binary and "the watchdog fires when the pause is exactly its period
old" can be asserted with ``==``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.commands import InjectFault
from fabric_core.net.profiles import ROCE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import SOLVERS, Fabric, Solver
from fabric_core.tick.kernels import pfc as pfc_kernels
from fabric_core.tick.pfc import (
    PAUSE_QUANTA,
    QUANTUM_BITS,
    Dcqcn,
    PfcQueues,
    pause_accounting,
    pause_limits,
    swift_update,
    update_pause,
)
from tests.helpers import scripted_fabric

DT = 2.0**-20  # about 0.95 µs; every multiple of it is exact in binary
WATCHDOG = 16 * DT


def _idle_roce(solver: Solver) -> Fabric:
    """Three GPUs on one leaf, the PFC watchdog at 16 ticks; one long flow from gpu0000 to
    gpu0002 (a tick with no flow in flight has nothing to solve), none into gpu0001."""
    prof = dataclasses.replace(ROCE_400G, pfc_watchdog_s=WATCHDOG, pfc_watchdog_recovery_s=WATCHDOG)
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=3)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0002", 1e9, 0.0)], dt_s=DT, solver=solver
    )
    return fabric


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_storm_pauses_from_the_tick_it_starts_and_the_watchdog_fires_its_period_later(
    solver: Solver,
) -> None:
    fabric = _idle_roce(solver)
    fabric.run_ticks(64)
    injected = fabric.sim_time_s
    assert injected == 64 * DT
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0001"))
    fabric.step()
    pfc = fabric.pfc
    assert pfc is not None
    into_nic = np.flatnonzero(pfc.paused)
    assert into_nic.size > 0
    # nothing flows into the stormed NIC, so its queue does not rise: the pause is dated at
    # the start of the tick in which the storm began, not at its end
    assert pfc.paused_since_s[into_nic].tolist() == [injected] * into_nic.size
    fabric.run_ticks(30)
    fault = fabric.faults.faults["f0"]
    # the watchdog fires in the tick that begins when the pause is exactly 16 ticks old
    assert fault.detected_at_s == injected + WATCHDOG


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_queue_creeping_up_under_a_byte_a_tick_pauses_at_its_xoff_crossing_inside_the_tick(
    solver: Solver,
) -> None:
    """The pause of a queue that crosses XOFF begins at the crossing, found inside the tick
    from the queue's net rate, however slowly it rises: here by half a byte a tick, a
    sender about 11 ppm faster than the port its bytes leave by (Ethernet clocks may
    differ by 100 ppm). Its sender then stops a reaction time after that instant, so the
    port's pause time in the next tick follows from the crossing too."""
    # a static XOFF of 4 KiB and a quarter byte (the crossing falls inside a tick), above
    # a fixed headroom; no congestion control, only PFC
    xoff = 4096.25
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_buffer_mode="static",
        pfc_headroom_bytes=65536.0,
        pfc_buffer_bytes=65536.0 + xoff,
        congestion_control="none",
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    links = topo.links.index
    into_leaf, out_of_leaf = links["gpu0001->leaf00"], links["leaf00->gpu0000"]
    # the link to the sink is slower by what carries 2^19 payload bytes/s (payload
    # capacity = line rate x MTU / (MTU + headers)): the leaf's queue of gpu0001's bytes
    # rises at r = 2^19 B/s, half a byte per tick of 2^-20 s
    eff = prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    topo.links.bandwidth_Bps[out_of_leaf] -= 2.0**19 / eff
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0001", "gpu0000", 1e9, 0.0)], dt_s=DT, solver=solver
    )
    pfc = fabric.pfc
    assert pfc is not None
    v = fabric.n_vls
    fabric.step()
    lane = into_leaf * v + int(np.argmax(fabric.occupancy[into_leaf * v : (into_leaf + 1) * v]))
    assert fabric.occupancy[lane] == 0.5  # the queue fills from the flow's start at t = 0
    # it holds r t and reaches XOFF at t = XOFF / r = 4096.25 B / 2^19 B/s = 8192.5 ticks:
    # in the tick [8192, 8193) ticks, half-way through it (it rises 4096 -> 4096.5 B)
    fabric.run_ticks(8191)
    assert fabric.occupancy[lane] == 4096.0 and not pfc.paused[lane]
    fabric.step()
    assert pfc.paused[lane]
    assert pfc.paused_since_s[lane] == 8192.5 * DT  # not the tick's start, 8192 ticks
    # the sender stops a reaction time R (pfc_reaction_s + the cable's round trip, about
    # 1.08 ticks) after the crossing, at 8192.5 + R ticks: in the next tick [8193, 8194) it
    # sends for 8192.5 + R - 8193 ticks and is stopped for the rest, (1.5 ticks - R); it
    # does not resume within it (its 4096.5 B drain to XON = 0 in about 0.09 ticks, and
    # the sender resumes R after that)
    reaction = prof.pfc_reaction_s + 2 * topo.links.prop_delay_s[into_leaf]
    assert fabric.counters["pause_seconds_total"][into_leaf] == 0.0
    fabric.step()
    paused_s = fabric.counters["pause_seconds_total"][into_leaf]
    assert paused_s == pytest.approx(1.5 * DT - reaction, rel=1e-9)


def _one_queue(line_rate: float, xoff: float, xon: float, reaction_s: float) -> PfcQueues:
    def one(v: float) -> np.ndarray:
        return np.array([v])

    return PfcQueues(
        buffer=one(2 * xoff),
        xoff=one(xoff),
        xon=one(xon),
        reaction_s=one(reaction_s),
        line_rate_Bps=one(line_rate),
        paused=np.array([False]),
        paused_since_s=one(0.0),
        resume_s=one(-1.0),
        watchdog_until_s=one(-1.0),
        frames_owed=one(0.0),
        frames_sent=one(0.0),
        headroom=one(0.0),
        switch_of=np.array([-1]),
        shared_pool=np.zeros(0),
        alpha=0.0,
        mtu=9000.0,
    )


def test_a_pause_of_three_and_a_half_refresh_periods_carries_four_frames() -> None:
    line = 50e9
    refresh = ROCE_400G.pfc_refresh_fraction * PAUSE_QUANTA * QUANTUM_BITS / (8 * line)
    # one pause lasts S = (XOFF - XON + A * reaction) / drain = 9000 B / drain; the drain
    # is chosen so that S = 3.5 refresh periods
    drain = 9000.0 / (3.5 * refresh)
    q = _one_queue(line, xoff=1e6, xon=1e6 - 9000.0, reaction_s=0.0)
    q.paused[:] = True
    # the sender ran half the tick at line rate (A = line > drain: the queue cycles) and
    # was stopped the other half; the tick is two pauses long, so it was stopped for one
    dt = 2 * 3.5 * refresh
    _, frames = pause_accounting(
        q,
        np.array([0.5]),
        np.array([1.0]),
        np.array([0.5 * line]),
        np.array([drain]),
        ROCE_400G,
        dt,
    )
    # a pause opens with one PAUSE frame and is refreshed once per period within it:
    # 1 + floor(3.5) = 4 frames for the one pause
    assert frames.tolist() == [4.0]


def test_a_queue_that_stops_exactly_at_xon_with_balanced_flow_resumes_a_reaction_later() -> None:
    q = _one_queue(50e9, xoff=1e6, xon=5e5, reaction_s=3e-6)
    q.paused[:] = True
    now, dt = 1e-3, 1e-6
    # in as fast as out (net rate 0) and sitting at XON: the pause ends now, and the
    # sender resumes one reaction time later (no 0/0 for the instant it crossed XON)
    update_pause(
        q,
        np.array([5e5]),
        np.array([0.0]),
        np.array([False]),
        np.array([False]),
        ROCE_400G,
        now,
        dt,
    )
    assert not q.paused[0]
    assert q.resume_s[0] == pytest.approx(now + 3e-6, rel=1e-12)


def _send_share(solver: Solver, q: PfcQueues, occupancy: float, drain: float) -> float:
    """The send share ``pause_limits`` (reference) or ``pfc_limits`` (compiled) gives
    the sender of ``q``'s one queue on a link of 10 B/s, at 10 s in a tick of 2 s."""
    occ, dr, cap, no = np.array([occupancy]), np.array([drain]), np.array([10.0]), np.array([False])
    now, dt = 10.0, 2.0
    if solver == "reference":
        return float(pause_limits(q, occ, dr, cap, no, now, dt).send_fraction[0])
    share, _, _ = pfc_kernels.pfc_limits(
        q.xoff, q.xon, q.reaction_s, q.paused, q.paused_since_s, q.resume_s,
        q.watchdog_until_s, occ, dr, cap, no, no, now, dt,
    )  # fmt: skip
    return float(share[0])


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_paused_queue_half_a_byte_above_xon_resumes_when_that_half_byte_has_drained(
    solver: Solver,
) -> None:
    """A paused queue 0.5 B above XON that drains at 1 B/s reaches XON 0.5 s into a tick
    of 2 s; with no reaction time its sender resumes then and sends for the 1.5 s left:
    a send share of 0.75 (its pause began long ago, so none before). A remainder under a
    byte is drained like any other (a 1-byte floor would give 1 s and 0.5)."""
    q = _one_queue(10.0, xoff=100.0, xon=50.0, reaction_s=0.0)
    q.paused[:] = True
    assert _send_share(solver, q, occupancy=50.5, drain=1.0) == 0.75


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("occupancy", [0.0, 50.0, 60.0])
def test_a_paused_queue_that_does_not_drain_does_not_resume_within_the_tick(
    solver: Solver, occupancy: float
) -> None:
    """A paused queue with no drain never reaches XON at that rate: its sender sends
    nothing this tick (share 0, not NaN), above XON or at or below it (there the pause
    ends at the tick's pause update, not inside the tick)."""
    q = _one_queue(10.0, xoff=100.0, xon=50.0, reaction_s=0.0)
    q.paused[:] = True
    assert _send_share(solver, q, occupancy=occupancy, drain=0.0) == 0.0


def _swift(since_cut_s: float, cwnd: float) -> Dcqcn:
    dc = Dcqcn.empty(1)
    dc.cwnd[:] = cwnd
    dc.since_cut_s[:] = since_cut_s
    return dc


def test_swift_cuts_by_beta_times_the_excess_delay_over_the_delay_once_per_rtt() -> None:
    p = ROCE_400G
    line, base_rtt, dt = 50e9, 10e-6, 1e-6
    delay = 2 * p.swift_target_delay_s  # twice the target: the excess is half the delay
    rtt = base_rtt + delay
    w = 200e3
    dc = _swift(since_cut_s=rtt, cwnd=w)  # an RTT since the last cut: a cut is due
    swift_update(
        dc, np.array([0]), np.array([delay]), np.array([base_rtt]), np.array([line]), p, dt
    )
    # cwnd x (1 - beta * (delay - target) / delay) = 1 - 0.8 * 0.5 = 0.6, above 1 - max_mdf
    factor = max(1 - p.swift_beta * 0.5, 1 - p.swift_max_mdf)
    assert factor == pytest.approx(0.6)
    assert dc.cwnd[0] == pytest.approx(w * factor, rel=1e-12)
    assert dc.since_cut_s[0] == 0.0
    # a tick later the delay is still high, but less than an RTT has passed: no second cut
    # (and above the target the window does not grow either)
    swift_update(
        dc, np.array([0]), np.array([delay]), np.array([base_rtt]), np.array([line]), p, dt
    )
    assert dc.cwnd[0] == pytest.approx(w * factor, rel=1e-12)
    assert dc.since_cut_s[0] == pytest.approx(dt)
