"""The compiled move's sub-tick finish times, held to figures derived by hand (issue 23,
session 19).

``kernels.move.finish_times`` times a flow that ends inside the tick by processor sharing
on each link: the finishing entries share what the entries held down elsewhere leave of
the capacity. ``kernels.move.credit_wait`` counts a link's PortXmitWait: the share of
the tick its most held-back lane could not send, a lane being held back when credits cut
what wanted in and it had data. ``kernels.move.move_bytes`` lists a flow as done when
what is left of it is at most a billionth of it plus 1e-6 B (``DONE_FRACTION``,
``DONE_BYTES``: the rounding of rate x dt). With rates of a few B/s the figures are exact, so an
error of 1 B/s shows. ``scripts/mutate`` runs this file first in the ``kernels.move``
subset.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from fabric_core.tick.kernels.move import credit_wait, finish_times, move_bytes


def _one_link(rates: list[float], level: float, capacity: float, done: list[int]) -> float:
    """Entries of flows 0, 1, ... on link 0, each its flow's last hop (no buffer
    downstream, so no credit factor slows it); dt = 1 s. The finish time of ``done``'s
    only flow."""
    n = len(rates)
    out = finish_times(
        np.array([*rates, 0.0]),
        np.array([level]),
        np.ones(4),  # alpha of four buffers: none is read (buf_pad = 4 = n_bufs)
        np.zeros(0),  # no credit levels: alpha slows (none here)
        np.full(n, 4, dtype=np.intp),
        np.arange(n, dtype=np.intp),
        np.full(n, n, dtype=np.intp),  # prev_pad: each entry its flow's only hop
        np.arange(n, dtype=np.intp),  # last: every entry is a last hop
        np.arange(n, dtype=np.intp),  # last_flow
        np.array([0], dtype=np.intp),
        np.array([0, n], dtype=np.intp),
        np.arange(n, dtype=np.intp),
        np.zeros(n, dtype=np.intp),
        np.array([capacity]),
        np.array(done, dtype=np.intp),
        n,
        1.0,
    )
    assert out.size == 1
    return float(out[0])


def _two_hops(rates: list[float], level: list[float], capacity: list[float]) -> NDArray[np.float64]:
    """Flow 0's entry 0 on link 0, then entry 1, its last hop, on link 1, with ``rates``
    (no buffer downstream of either is read, so no credit factor slows them); dt = 1 s.
    The flow's finish time, as ``finish_times`` gives it."""
    out: NDArray[np.float64] = finish_times(
        np.array([*rates, 0.0]),
        np.array(level),
        np.ones(4),
        np.zeros(0),
        np.full(2, 4, dtype=np.intp),
        np.array([0, 0], dtype=np.intp),
        np.array([2, 0], dtype=np.intp),  # prev_pad: entry 1 is the hop after entry 0
        np.array([1], dtype=np.intp),  # last: flow 0's last hop, found from there
        np.array([0], dtype=np.intp),  # last_flow
        np.array([0, 1], dtype=np.intp),
        np.array([0, 1, 2], dtype=np.intp),
        np.array([0, 1], dtype=np.intp),
        np.array([0, 1], dtype=np.intp),
        np.array(capacity),
        np.array([0], dtype=np.intp),
        2,
        1.0,
    )
    return out


def test_a_flow_finishing_alone_on_a_link_ends_at_its_bytes_over_the_capacity() -> None:
    """Flow 0 sent 1 B in the tick (1 B/s) on a link of 2 B/s and nothing else is on it:
    sent at the whole capacity, its 1 B takes 1 / 2 = 0.5 s."""
    assert _one_link([1.0], level=2.0, capacity=2.0, done=[0]) == pytest.approx(0.5, rel=1e-12)


def test_a_flow_finishing_beside_a_held_down_one_has_the_capacity_it_leaves() -> None:
    """Flow 0 finishes (1 B in the tick); flow 1 carries 1 B/s, below the link's level of
    2 B/s, so it is held down elsewhere and keeps its rate. The link has 3 B/s: flow 0 has
    3 - 1 = 2 B/s and its 1 B takes 1 / 2 = 0.5 s (the held-down rate summed from 1 B/s
    instead of 0 would leave it 1 B/s: 1 s)."""
    t = _one_link([1.0, 1.0], level=2.0, capacity=3.0, done=[0])
    assert t == pytest.approx(0.5, rel=1e-12)


def _wait(alpha: float, inflow: float, queued: float) -> tuple[float, bool]:
    """One link (0), one lane, dt = 1 s, whose buffer credits cut by ``alpha``, with an
    ``inflow`` (B/s) and one entry feeding it with ``queued`` bytes: (PortXmitWait in
    seconds, starved)."""
    transmit_wait = np.zeros(1)
    starved = np.zeros(1, dtype=np.bool_)
    credit_wait(
        np.array([alpha]),  # alpha per buffer (link 0, lane 0)
        np.array([inflow, 0.0]),  # inflow per buffer, and the pad
        np.array([0], dtype=np.intp),  # used links
        np.array([0], dtype=np.intp),  # lane_buf: link 0's lane 0 is used buffer 0
        np.array([0, 1], dtype=np.intp),  # buf_ptr
        np.array([0], dtype=np.intp),  # buf_ent: entry 0 feeds it
        np.array([queued]),  # entry 0's backlog
        1,
        1.0,
        transmit_wait,
        starved,
    )
    return float(transmit_wait[0]), bool(starved[0])


def test_a_lane_fed_a_trickle_that_credits_cut_waits_its_share_of_the_tick() -> None:
    """Credits let through half of what wanted in (alpha = 0.5), an inflow of 0.5 B/s,
    and the entry feeding the buffer has nothing queued. The lane had data (an inflow),
    so the link waits 1 - 0.5 = 0.5 of the tick: 0.5 s, and it is starved. (Data read
    as an inflow over 1 B/s instead of over 0 would leave it idle: no wait.)"""
    wait, starved = _wait(alpha=0.5, inflow=0.5, queued=0.0)
    assert wait == pytest.approx(0.5, rel=1e-12)
    assert starved


def test_a_lane_whose_upstream_was_starved_in_its_turn_does_not_wait() -> None:
    """Credits stopped the lane altogether (alpha = 0), but nothing wanted in: no inflow
    and nothing queued for the buffer (its upstream was starved in its turn). It had no
    data, so the link does not wait (0 s) and is not starved; with 2 B queued it waits
    the whole tick, 1 s. (A backlog of 0 read as data would make it wait 1 s.)"""
    assert _wait(alpha=0.0, inflow=0.0, queued=0.0) == (0.0, False)
    assert _wait(alpha=0.0, inflow=0.0, queued=2.0) == (1.0, True)


def _left_after_last_bytes(size: float, left_before: float, rate: float) -> tuple[float, bool]:
    """A one-hop flow of ``size`` bytes with ``left_before`` bytes still to deliver, all
    of them queued at its hop, sends ``rate`` B/s for dt = 1 s: (what is left, done)."""
    delivered = np.array([size - left_before])
    _, _, got, done = move_bytes(
        np.array([rate, 0.0]),  # padded rates
        np.array([1], dtype=np.intp),  # prev_pad: no upstream hop
        np.array([1], dtype=np.intp),  # nxt_pad: the last hop
        np.array([0], dtype=np.intp),  # link
        np.array([1], dtype=np.intp),  # drains_pad: the pad buffer (one buffer, #0)
        np.array([1], dtype=np.intp),  # buf_pad: the pad
        np.array([0], dtype=np.intp),  # pos
        np.array([0], dtype=np.intp),  # flow
        np.array([left_before]),  # backlog
        np.zeros(1),
        np.zeros(1),
        delivered,
        np.array([size]),
        1.0,
        np.zeros(1),
        np.zeros(2),
        np.zeros(2),
        np.zeros(2),
        np.zeros(0, dtype=np.intp),
        np.zeros(0, dtype=np.intp),
    )
    assert got == rate
    return size - float(delivered[0]), list(done) == [0]


def test_a_flow_with_at_most_a_billionth_of_itself_left_is_done() -> None:
    """A flow of 2^30 B (1,073,741,824) is done when at most 2^30 x 1e-9 + 1e-6 =
    1.073742824 B is left: with 1.5 B left it sends 0.5 B and has 1 B left, done; had it
    sent 0.25 B, 1.25 B would be left, not done. (The fraction of the flow read as
    1e-9 / size would leave it at 1e-6 B: 1 B left is not done.) All sums exact in
    binary."""
    size = float(2**30)
    assert _left_after_last_bytes(size, 1.5, 0.5) == (1.0, True)
    assert _left_after_last_bytes(size, 1.5, 0.25) == (1.25, False)


def test_a_hop_on_a_down_link_that_carried_nothing_sets_no_finish_time() -> None:
    """Flow 0's last bytes were past its first hop when that link went down (capacity 0,
    the entry's rate 0): that hop sent nothing in the tick, its last byte went before it.
    The flow ends when its second hop, alone on a link of 2 B/s, has sent its 1 B: at
    0.5 s, not at the tick's end (1 s), which a stalled hop is given only when it still
    had bytes to send."""
    out = _two_hops([0.0, 1.0], level=[0.0, 2.0], capacity=[0.0, 2.0])  # link 0 down
    assert out.tolist() == [pytest.approx(0.5, rel=1e-12)]


def test_a_flow_ends_at_its_slowest_hop_upstream_of_its_last() -> None:
    """Flow 0 crosses link 0 (2 B/s) then link 1 (4 B/s), 1 B on each in the tick: its
    first hop sends its 1 B in 0.5 s, its last in 0.25 s, and the flow ends at its latest
    hop, 0.5 s. The first hop is found from the last one upstream (timing the last hop
    alone would give 0.25 s)."""
    out = _two_hops([1.0, 1.0], level=[2.0, 4.0], capacity=[2.0, 4.0])
    assert out.tolist() == [pytest.approx(0.5, rel=1e-12)]
