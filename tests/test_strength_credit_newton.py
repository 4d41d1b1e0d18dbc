"""A full buffer whose credit factor Newton cannot find in ``NEWTON_ITERATIONS`` steps.

The credit factor of a buffer is the root of its net inflow, convex and piecewise
linear in the factor: each inflow whose next hop is held down by its own link adds a
kink. Newton from 1 crosses one kink a step when the kinks fall geometrically, so 13
inflows into a full buffer, each next link slower than the last by a factor 0.3, leave
it unconverged after 12 steps. The solve must then fall back to a factor that cannot
overfill the buffer: what the drains give at the least (what the next hops hold, here
nothing) plus the room (here none). Built as one index by hand and solved by the
kernels themselves (``kernels.solve``), serial and parallel: no fabric reaches this
case on purpose, and the fallback is what keeps the buffers bounded if one does.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.tick.kernels._jit import MOST_THREADS
from fabric_core.tick.kernels.solve import (
    NEWTON_ITERATIONS,
    solve_tick_parallel,
    solve_tick_serial,
)

K = 13  # inflows into the full buffer
DT = 1e-6
#: the inflows' rates (B/s), falling by 0.77 each, and the kink of each: the factor
#: below which its next hop is no longer held down by its link (0.3, 0.09, ...)
RATE = 1e9 * 0.77 ** np.arange(K)
KINK = 0.3 ** (np.arange(K) + 1.0)


def _newton_steps(a: np.ndarray, c: np.ndarray, room: float) -> int:
    """Steps Newton takes from 1 on sum(a) x - sum(min(c, x a)) - room (next hops hold
    nothing), or a step more than allowed if it has not converged by then."""
    inflow = a.sum()
    tol = 1e-12 * (inflow + room) + 1e-9
    x, g = 1.0, inflow - np.minimum(c, a).sum() - room
    for step in range(1, NEWTON_ITERATIONS + 1):
        slope = inflow - a[x * a < c].sum()
        x = min(max(x - g / slope, 0.0), 1.0)
        g = x * inflow - np.minimum(c, x * a).sum() - room
        if g <= tol:
            return step
    return NEWTON_ITERATIONS + 1


def _solve(kernel):  # type: ignore[no-untyped-def]
    """Flow i: hop 0 on link 0 into buffer 0 (full), hop 1 on link 1 + i, its last,
    of capacity KINK[i] * RATE[i]. One lane; link 0 on rank 0, the others on rank 1."""
    n = 2 * K
    u, v = np.arange(K), np.arange(K, n)
    i = np.intp
    link = np.concatenate([np.zeros(K, i), 1 + u])
    prev_pad = np.concatenate([np.full(K, n, i), u])
    nxt_pad = np.concatenate([v, np.full(K, n, i)])
    first = np.concatenate([u, u]).astype(i)
    hop = np.concatenate([np.zeros(K, i), np.ones(K, i)])
    # keys (rank, lane, feeds a buffer): the hops 0 feed buffer 0, the hops 1 feed none
    key_ptr = np.array([0, 0, K, n, n], i)
    # the used links (numbered as the entries name them: link 0, then 1 + i) by rank
    used_links = np.arange(K + 1, dtype=i)
    rank_ptr = np.array([0, 1, K + 1], i)
    link_ptr = np.concatenate([[0], K + np.arange(K + 1)]).astype(i)
    link_ent = np.arange(n, dtype=i)
    ent_link = link.copy()
    # the one used buffer, buffer 0, in a group of its own, fed by the hops 0
    used_bufs = np.array([0], i)
    buf_group_ptr = np.array([0, 1], i)
    buf_ptr = np.array([0, K], i)
    buf_ent = u.astype(i)
    buf_pos = np.arange(K + 1, dtype=i)[::-1].copy()  # (read only off a feed-forward fabric)
    backlog = np.concatenate([RATE * DT, np.zeros(K)])  # the senders hold one tick's worth
    capacity = np.concatenate([[10 * RATE.sum()], KINK * RATE])
    free_bytes = np.concatenate([[0.0], np.full(K, np.inf)])  # buffer 0 is full
    alpha = np.ones(K + 1)  # the solve's results, written in place
    none = np.zeros(0, i)
    rate = kernel(
        link, ent_link, prev_pad, nxt_pad, first, hop, key_ptr, used_links, rank_ptr, link_ptr,
        link_ent, used_bufs, buf_group_ptr, buf_ptr, buf_ent, True, buf_pos, 2, MOST_THREADS,
        backlog, capacity, free_bytes, np.zeros(0), DT, np.arange(n, dtype=i), np.zeros(n), np.full(n, np.inf),
        True, False,
        capacity.copy(), np.full(K + 1, np.inf), np.full(K + 1, np.inf), alpha,
        np.full(K + 1, np.inf), none, none,
    )  # fmt: skip
    return rate[:K], rate[K:n], alpha[0]


def test_the_case_is_one_newton_does_not_converge_on() -> None:
    assert _newton_steps(RATE, KINK * RATE, 0.0) > NEWTON_ITERATIONS


@pytest.mark.parametrize(
    "kernel", [solve_tick_serial, solve_tick_parallel], ids=["serial", "parallel"]
)
def test_an_unconverged_credit_factor_still_cannot_overfill_the_buffer(kernel) -> None:  # type: ignore[no-untyped-def]
    into, out = _solve(kernel)[:2]
    # a full buffer takes in at most what leaves it (the kernel's own tolerance on the
    # net inflow is 1e-12 of the inflow: an overfill beyond it is a bug)
    assert into.sum() - out.sum() <= 1e-12 * RATE.sum()
    assert np.all(into >= 0) and np.all(out <= KINK * RATE * (1 + 1e-12))
    # and the largest factor that fits is the smallest kink: the solve stays below it
    assert _solve(kernel)[2] <= KINK.min()
