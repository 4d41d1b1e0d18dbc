"""DCQCN's reaction point as the HPCC repository runs it (``pfc.Dcqcn``, issue 22 item 8).

The sender is driven directly: ``log_unmarked`` = -inf means every packet is marked
(feedback in every interval), 0 means none is.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.net.profiles import get_profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.kernels.pfc import _dcqcn_update, _feedback_probability, dcqcn_params
from fabric_core.tick.pfc import Dcqcn, binomial_draw, feedback_probability
from fabric_core.workloads.traffic import Scripted

P = get_profile("roce-400g")
LINE = P.link_bandwidth_Bps
MARKED, CLEAN = -np.inf, 0.0


def _sender(n: int = 1) -> Dcqcn:
    dc = Dcqcn.empty(n)
    dc.start(np.arange(n), np.full(n, LINE))
    return dc


def _tick(dc: Dcqcn, log_unmarked: float, dt: float, prof=P, u: float = 0.5) -> float:  # type: ignore[no-untyped-def]
    n = dc.rc.size
    cuts = dc.update(
        np.arange(n),
        np.full(n, log_unmarked),
        np.full(n, LINE * dt),
        np.full(n, LINE),
        np.full(n, u),
        prof,
        dt,
    )
    return float(cuts.sum())


def test_persistent_marks_cut_at_every_decrease_check_down_to_the_floor() -> None:
    dc = _sender()
    dt = P.dcqcn_decrease_interval_s
    assert _tick(dc, MARKED, dt) == 1
    assert dc.rc[0] == pytest.approx(LINE / 2)  # the first cut sets alpha to 1
    assert _tick(dc, MARKED, dt) == 1
    assert dc.rc[0] == pytest.approx(LINE / 4)  # alpha stays 1 while every update sees marks
    for _ in range(40):
        _tick(dc, MARKED, dt)
    assert dc.rc[0] == pytest.approx(P.dcqcn_min_rate_Bps)


def test_no_marks_no_cut_and_alpha_stays_idle_before_the_first_cut() -> None:
    dc = _sender()
    for _ in range(100):
        assert _tick(dc, CLEAN, 8e-6) == 0
    assert dc.rc[0] == LINE and dc.alpha[0] == 1.0 and dc.since_inc_s[0] < 0


def test_recovery_follows_the_timer_fast_recovery_then_additive_then_hyper() -> None:
    prof = dataclasses.replace(P, dcqcn_fast_recovery_steps=1)
    dc = _sender()
    _tick(dc, MARKED, 4e-6, prof)  # one cut: rc = line/2, rt = line (no clamp at stage 0)
    _tick(dc, MARKED, 4e-6, prof)  # rc = line/4
    rc0, rt0 = float(dc.rc[0]), float(dc.rt[0])
    assert rt0 == LINE
    t = 0.0
    while t < prof.dcqcn_timer_s - 8e-6:  # just short of the timer: nothing moves
        _tick(dc, CLEAN, 4e-6, prof)
        t += 4e-6
    assert dc.rc[0] == rc0 and dc.stage[0] == 0
    for _ in range(3):
        _tick(dc, CLEAN, 4e-6, prof)
    assert dc.stage[0] == 1
    assert dc.rc[0] == pytest.approx((rc0 + rt0) / 2)  # fast recovery
    # a cut after an increase clamps the target to the rate before it
    before = float(dc.rc[0])
    _tick(dc, MARKED, 4e-6, prof)
    assert dc.rt[0] == pytest.approx(before) and dc.stage[0] == 0
    # stage F: additive increase of 5 Mb/s per 25 Gb/s of line rate, then hyper of 50
    ai = prof.dcqcn_ai_at_25g_Bps * LINE / (25e9 / 8)
    hai = prof.dcqcn_hai_at_25g_Bps * LINE / (25e9 / 8)
    rts, periods = [], []
    for stage in (1, 2, 3):
        ticks = 0
        while dc.stage[0] < stage:
            _tick(dc, CLEAN, 4e-6, prof)
            ticks += 1
        rts.append(float(dc.rt[0]))
        periods.append(ticks * 4e-6)
    assert periods == pytest.approx([prof.dcqcn_timer_s] * 3, abs=4e-6)  # one timer each
    assert rts[0] == pytest.approx(before)  # stage 0: fast recovery leaves the target
    assert rts[1] - rts[0] == pytest.approx(ai)
    assert rts[2] - rts[1] == pytest.approx(hai)


@pytest.mark.parametrize("q", [0.05, 0.3, 0.8])
def test_the_cuts_per_check_do_not_depend_on_the_tick(q: float) -> None:
    """Feedback at chance q per check: a tick of 1, 4 or 16 µs cuts q per check on average."""
    n = 20000
    rng = np.random.default_rng(1)
    td = P.dcqcn_decrease_interval_s
    pps = LINE / P.mtu_bytes
    log_unmarked = np.log1p(-q) / (pps * td)  # q = 1 - exp(log_unmarked * pps * td)
    assert feedback_probability(log_unmarked, pps, td, 0.0) == pytest.approx(q)
    for dt in (td, 4 * td, 16 * td):
        trials = np.full(n, np.floor(dt / td + 1e-9))
        cuts = binomial_draw(trials, np.full(n, q), rng.random(n))
        assert cuts.mean() / trials[0] == pytest.approx(q, rel=0.05)
        assert cuts.var() == pytest.approx(trials[0] * q * (1 - q), rel=0.1)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_cnp_rate_limit_thins_the_feedback_in_proportion(compiled: bool) -> None:
    """A receiver that sends at most one CNP per 50 us reaches a 4 us check at most 4/50
    of the time; a limit shorter than the check does not thin it. Half the packets
    marked (1e6 packets a second, log of 1/2 each for a 1 us check) gives 1/2, and 1/8
    with a limit of 4 us (the kernel, ``kernels.pfc``, and the reference alike)."""
    chance = _feedback_probability if compiled else feedback_probability
    assert chance(MARKED, 1e7, 4e-6, 50e-6) == pytest.approx(4 / 50)
    assert chance(MARKED, 1e7, 4e-6, 2e-6) == pytest.approx(1.0)
    assert chance(-np.log(2.0), 1e6, 1e-6, 0.0) == pytest.approx(0.5, rel=1e-12)
    assert chance(-np.log(2.0), 1e6, 1e-6, 4e-6) == pytest.approx(0.125, rel=1e-12)


@pytest.mark.parametrize("clamp", [False, True])
@pytest.mark.parametrize("dt", [3e-6, 9e-6, 17e-6])
def test_the_compiled_sender_is_the_reference(dt: float, clamp: bool) -> None:
    """Ticks shorter and longer than the 4 µs decrease check (a long tick draws several
    cuts at once), with the target clamped at every cut or only after an increase."""
    rng = np.random.default_rng(7)
    n = 64
    prof = dataclasses.replace(P, dcqcn_clamp_target=clamp)
    ref, comp = _sender(n), _sender(n)
    prm = dcqcn_params(prof)
    multi = 0
    per_check = LINE / P.mtu_bytes * P.dcqcn_decrease_interval_s  # packets per check
    for tick in range(400 + int(2e-3 / dt)):
        # feedback in a check at a chance drawn from 0..0.2, in one tick of five; then
        # 2 ms without any, through fast recovery, additive and hyper increase
        chance = 0.2 * rng.random(n)
        feedback = rng.random(n) < (0.2 if tick < 400 else 0.0)
        marks = np.where(feedback, np.log1p(-chance) / per_check, 0.0)
        u = rng.random(n)
        sent = np.full(n, LINE * dt)
        cuts = ref.update(np.arange(n), marks, sent, np.full(n, LINE), u, prof, dt)
        multi += int((cuts > 1).sum())
        for f in range(n):
            c = comp
            (
                c.rc[f], c.rt[f], c.alpha[f], c.since_alpha_s[f], c.since_dec_s[f],
                c.since_inc_s[f], c.stage[f], comp_cuts,
            ) = _dcqcn_update(
                marks[f], LINE / P.mtu_bytes, LINE, u[f], c.rc[f], c.rt[f], c.alpha[f],
                c.since_alpha_s[f], c.since_dec_s[f], c.since_inc_s[f], c.stage[f], prm, dt,
            )  # fmt: skip
            assert comp_cuts == cuts[f]
    assert (multi > 0) == (dt > 2 * P.dcqcn_decrease_interval_s)  # several cuts in a tick
    assert (ref.stage >= 3).all()  # every sender went through the increase stages
    for name in ("rc", "rt", "alpha", "since_inc_s", "stage"):
        np.testing.assert_allclose(getattr(comp, name), getattr(ref, name), rtol=1e-9)


def _incast_done_s(dt: float) -> float:
    topo = leaf_spine(P, leaves=2, spines=1, gpus_per_leaf=8)
    g = topo.gpus
    flows = [(int(g[i]), int(g[15]), 8e6, 0.0) for i in range(8)]
    fabric = Fabric(topo, P, [Scripted(name="w", traffic_class="a", flows=flows)], dt_s=dt, seed=3)
    ticks = 0
    while ticks < 10 or fabric.flows.active.any():
        fabric.step()
        ticks += 1
    assert fabric.roce is not None and fabric.roce.dcqcn.cnps_total > 100
    return ticks * dt


def test_an_incast_under_dcqcn_ends_at_the_same_time_at_1_and_8_us_ticks() -> None:
    """8 senders × 8 MB into one 400G port: DCQCN keeps PFC away (no pause) and the
    incast takes longer than its line-rate bound, the same at both ticks."""
    fine, coarse = _incast_done_s(1e-6), _incast_done_s(8e-6)
    bound = 8 * 8e6 / LINE
    assert bound < fine < 2 * bound
    assert coarse == pytest.approx(fine, rel=0.05)
