"""Credits shared max-min on the credit fabric, scaled under PFC (docs/MODEL.md, "Credits").

A short buffer's inflows get at most one credit level ``lam`` on the credit fabric (its
upstream port hands the credits out packet by packet, flow after flow), so an inflow that
wants less than the level keeps it; under PFC a pause stops the whole priority, so every
inflow is scaled by one factor. Both admit exactly what the buffer can take.
"""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fabric_core.tick.kernels.solve import buffer_credit_level
from fabric_core.tick.step import BufferGroup, credit_levels, enforce_credits


def _net(a: np.ndarray, c: np.ndarray, d: np.ndarray, room: float, tau: float = 0.0) -> float:
    """What a buffer gains beyond its room at inflows ``a`` (next hops at ``c``, holding
    ``d``), with its credit loop's bytes both ways (``tau``: the loop's one-way delay in
    ticks): positive if it would overfill."""
    return float((1 + tau) * a.sum() - (1 - tau) * np.minimum(c, d + a).sum() - room)


def _one_buffer(a: list[float], c: list[float], d: list[float]) -> tuple[Any, Any, Any]:
    """Entries 0..n-1 (rates ``a``) feed buffer 0; entry n + i, the next hop of entry i,
    drains it at rate ``c[i]`` and holds ``d[i]`` (bytes/s): the index view
    ``enforce_credits`` reads, the padded rates and the held rates."""
    n = len(a)
    idx = SimpleNamespace(
        buffer_groups=[BufferGroup(0, n, np.array([0]), np.zeros(n, dtype=np.intp))],
        nxt_pad=np.r_[np.arange(n, 2 * n), [2 * n] * n].astype(np.intp),
    )
    return idx, np.array([*a, *c, 0.0]), np.array([0.0] * n + list(d) + [0.0])


def test_a_flow_that_wants_less_than_the_level_keeps_its_rate_beside_a_congested_one() -> None:
    """A message of 1 B/s cut through to an idle next hop (100 B/s) beside a flow of 10 B/s
    whose next hop drains 4 B/s from 6 held, into a full buffer: the congested flow may put
    in only what its next hop takes, 4 B/s, and that is the level; the message, below it,
    keeps its 1 B/s. Scaled by one factor (PFC) both would get 0.4 of their want, the
    message 0.4 B/s: the last bytes of a message would then take ever longer to send."""
    idx, rate, held = _one_buffer(a=[1.0, 10.0], c=[100.0, 4.0], d=[0.0, 6.0])
    shared = rate.copy()
    alpha, level = enforce_credits(idx, shared, held, np.array([0.0]), dt=1.0, max_min=True)
    assert level[0] == pytest.approx(4.0, rel=1e-12)
    assert shared[:2] == pytest.approx([1.0, 4.0], rel=1e-12)
    assert alpha[0] == pytest.approx(5.0 / 11.0, rel=1e-12)  # the share of the want let in
    assert _net(shared[:2], shared[2:4], held[2:4], 0.0) == pytest.approx(0.0, abs=1e-12)
    scaled = rate.copy()
    pfc_alpha, pfc_level = enforce_credits(
        idx, scaled, held, np.array([0.0]), dt=1.0, max_min=False
    )
    assert pfc_alpha[0] == pytest.approx(0.4, rel=1e-12)
    assert scaled[:2] == pytest.approx([0.4, 4.0], rel=1e-12)
    assert np.isinf(pfc_level[0])


def test_a_buffer_with_room_for_every_want_holds_nothing_back() -> None:
    idx, rate, held = _one_buffer(a=[1.0, 10.0], c=[100.0, 4.0], d=[0.0, 6.0])
    before = rate.copy()
    alpha, level = enforce_credits(idx, rate, held, np.array([7.0]), dt=1.0, max_min=True)
    assert alpha[0] == 1.0 and np.isinf(level[0])
    assert rate.tolist() == before.tolist()


_rate = st.floats(0.0, 1e3, allow_nan=False, allow_infinity=False)


def _tolerance(a: np.ndarray, room: float) -> float:
    """The rounding ``enforce_credits`` allows a buffer: its shortness test's."""
    return 1e-12 * (float(a.sum()) + room) + 1e-9


@st.composite
def _short_buffers(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    """A few buffers, each with one to six inflows and rates on a scale of its own (bytes
    a second to hundreds of GB/s: a group's buffers differ that much), whose room is less
    than the net inflow of every want (so each is short, as every buffer
    ``credit_levels`` is given is), and a credit loop of none, under a tick, or over one
    (``tau``, its one-way delay in ticks)."""
    n_bufs = draw(st.integers(1, 4))
    buf, a, c, d, room, tau = [], [], [], [], [], []
    for k in range(n_bufs):
        n = draw(st.integers(1, 15))  # (past 32 breakpoints the compiled walk merge-sorts)
        scale = draw(st.sampled_from([1.0, 1e3, 1e8, 1e11]))
        ak = [scale * draw(st.floats(0.01, 1e3)) for _ in range(n)]
        ck = [scale * draw(_rate) for _ in range(n)]
        dk = [scale * draw(_rate) for _ in range(n)]
        tk = draw(st.sampled_from([0.0, 0.01, 0.5]) | st.floats(0.0, 3.0))
        net = _net(np.array(ak), np.array(ck), np.array(dk), 0.0, tk)
        assume(net > 1e-3 * (sum(ak) + 1.0))  # short even with no room at all
        room.append(draw(st.floats(0.0, 0.99)) * net)
        tau.append(tk)
        buf += [k] * n
        a += ak
        c += ck
        d += dk
    return (
        np.array(buf, dtype=np.intp),
        np.array(a),
        np.array(c),
        np.array(d),
        np.array(room),
        np.array(tau),
    )


@settings(max_examples=300, deadline=None)
@given(_short_buffers())
def test_the_credit_level_is_the_largest_that_fits_in_both_solvers(
    case: tuple[np.ndarray, ...],
) -> None:
    """At the level each short buffer takes its room (to the rounding allowed), a level
    any higher would overfill it, and the compiled solve's level is the reference's, bit
    for bit (the same sums in the same order), whatever the other buffers' scale."""
    buf, a, c, d, room, tau = case
    tol = np.array([_tolerance(a[buf == k], room[k]) for k in range(room.size)])
    level = credit_levels(buf, a, c, d, room, tol, tau)
    for k in range(room.size):
        mine = buf == k
        ak, ck, dk = a[mine], c[mine], d[mine]
        scale = (1 + tau[k]) * (ak.sum() + ck.sum()) + room[k] + 1.0
        at = _net(np.minimum(ak, level[k]), ck, dk, room[k], tau[k])
        if level[k] > 0:  # (at 0 the drain alone may pass the room, past a tick's loop)
            assert abs(at) <= tol[k] + 1e-12 * scale
        above = level[k] * (1 + 1e-6) + 1e-6 * scale
        assert _net(np.minimum(ak, above), ck, dk, room[k], tau[k]) > 0
        n = int(mine.sum())
        scratch = [np.empty(3 * n), np.empty(3 * n), np.empty(3 * n, np.intp)]
        compiled = buffer_credit_level(
            ak, ck, dk, n, float(room[k]), float(tau[k]), float(tol[k]), *scratch,
            np.empty(3 * n, np.intp),
        )  # fmt: skip
        assert compiled == level[k]


@pytest.mark.parametrize("nudge", [-1e-6, 0.0, 1e-6])
def test_a_stretch_where_the_buffer_neither_fills_nor_drains_gives_its_far_end(
    nudge: float,
) -> None:
    """Two inflows into a full buffer with 4.096 GB/s of room: the first's next hop drains
    1.6545e10 of its 2.0641e10 B/s, the second's 2.2651e10 of 2.8995e10. Between the first's
    want and the second's drain the net inflow stays at 0 (the first has its want, the
    second is cut through: what comes in goes on), so every level there fits, and the
    level is its far end, 2.2651e10, whichever side of 0 the rounding puts that stretch
    (a random run met this case and the two solvers took opposite ends, 9 % apart)."""
    a = np.array([2.0641e10, 2.8995e10])
    c = np.array([1.6545e10, 2.2651e10])
    d = np.zeros(2)
    room = np.array([a[0] - c[0] + nudge])
    tol = np.array([_tolerance(a, float(room[0]))])
    level = credit_levels(np.zeros(2, dtype=np.intp), a, c, d, room, tol)
    scratch = [np.empty(4), np.empty(4), np.empty(4, np.intp), np.empty(4, np.intp)]
    compiled = buffer_credit_level(a, c, d, 2, float(room[0]), 0.0, float(tol[0]), *scratch)
    assert level[0] == compiled == c[1]


def test_a_buffer_short_only_within_rounding_holds_nothing_back() -> None:
    """Net inflow above the room by less than the allowed rounding: no level."""
    a, c, d = np.array([10.0, 5.0]), np.array([4.0, 100.0]), np.zeros(2)
    room = np.array([6.0 - 1e-10])
    tol = np.array([_tolerance(a, float(room[0]))])
    level = credit_levels(np.zeros(2, dtype=np.intp), a, c, d, room, tol)
    assert np.isinf(level[0])


def test_one_busy_buffer_does_not_make_every_buffer_cost_what_it_does() -> None:
    """The reference sums each buffer's rises along a row of its own; the rows are made in
    blocks of buffers with about as many breakpoints, so 2,000 short buffers of one inflow
    beside one of 2,000 take memory in proportion to their breakpoints, not 2,000 rows as
    long as the busy one's (a 64 MB table, a review found in session 31)."""
    small, busy = 2000, 2000
    buf = np.r_[np.zeros(busy, dtype=np.intp), np.arange(1, small + 1)]
    a = np.linspace(1.0, 2.0, buf.size)
    c = d = np.zeros(buf.size)
    room = np.full(small + 1, 0.5)
    tol = 1e-12 * room + 1e-9
    tracemalloc.start()
    try:
        level = credit_levels(buf, a, c, d, room, tol)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 8 * (2 * buf.size + room.size)  # some dozens of arrays that long
    # each buffer's level fits its room: the busy one shares 0.5 B/s among 2,000 inflows
    assert level[0] == pytest.approx(0.5 / busy, rel=1e-9)
    assert level[1:] == pytest.approx(np.full(small, 0.5), rel=1e-9)
