"""The tick's rates, compiled: max-min link sharing, exact conservation and credits.

The same rules, in the same order, as the numpy reference (``fabric_core.tick.step``,
whose module docstring gives the physics): Gauss-Seidel over link ranks (Jacobi
sweeps when a hand-made route breaks up*/down*), progressive filling per link,
conservation upstream first, one Newton-solved credit factor per short buffer
(downstream buffers first), and a second pass that re-offers what credits took
away. Written as loops over the entries of each link and each buffer, which is
both the clearest way to say it and, compiled, some 10-50 times faster than the
vectorised reference on small and large fabrics alike.
"""

from __future__ import annotations

import numpy as np
from numba import prange
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import (
    inline_kernel,
    kernel,
    parallel_kernel,
    specialised_kernel,
)
from fabric_core.tick.kernels.blocks import block
from fabric_core.tick.kernels.sorting import argsort_into

_F = NDArray[np.float64]
_I = NDArray[np.intp]

#: The reference's constants (``fabric_core.tick.step``): rounds of progressive filling,
#: Jacobi sweeps, their tolerance (of line rate) and Newton steps per credit factor.
WATERFILL_ROUNDS = 16
MAX_SWEEPS = 7
SWEEP_TOLERANCE = 1e-6
NEWTON_ITERATIONS = 12
#: A rate cut by more than this fraction is "cut by credits" (re-offered in pass two).
CUT_FRACTION = 1e-9
#: Elements between the starts of two threads' scratch rows, at least, and its multiple:
#: rows that share a cache line (64 bytes) make the cores take the line from each other at
#: every write (false sharing). With the rows side by side the parallel fills took as long
#: as the serial ones on the 10k fat-tree; 64 elements are a line even of booleans.
SCRATCH_ROW_PAD = 64


@kernel  # not inline_kernel (see there): inlined by numba, it made the rounds 6x slower
def _share(left: float, count: int) -> float:
    """Fair share of ``left`` among ``count`` entries (±inf for none)."""
    if count > 0:
        return left / count
    return np.inf if left >= 0 else -np.inf


@kernel
def _row_stride(longest: int) -> int:
    """Elements from one thread's scratch row to the next for rows of ``longest``: whole
    cache lines, and one to spare, since the buffer need not start on a line."""
    lines = (longest + SCRATCH_ROW_PAD - 1) // SCRATCH_ROW_PAD
    return (lines + 1) * SCRATCH_ROW_PAD


@inline_kernel
def fill_link(
    ents: _I,
    lo: int,
    hi: int,
    demand: _F,
    capacity: float,
    out: _F,
    want: _F,
    unsat: NDArray[np.bool_],
) -> tuple[float, float]:
    """Max-min rates of the entries ``ents[lo:hi]`` of one link (into ``out``).

    Progressive filling: every round the entries whose demand is at most the fair
    share of what is left are satisfied, which raises the share of the rest.
    Returns the link's (level, share): the rate of the unsatisfied entries (or the
    capacity left when all are satisfied), and the same but infinite then.
    ``want`` and ``unsat`` are scratch space (at least ``hi - lo`` long): the rounds
    work on the link's demands gathered there, not scattered over the entries.
    """
    k = hi - lo
    for i in range(k):
        want[i] = demand[ents[lo + i]]
        unsat[i] = True
    left = capacity
    count = k
    share = _share(left, count)
    for _ in range(WATERFILL_ROUNDS):
        taken = 0.0
        n_sat = 0
        for i in range(k):
            if unsat[i] and want[i] <= share:
                unsat[i] = False
                taken += want[i]
                n_sat += 1
        if n_sat == 0:
            break
        left = max(left - taken, 0.0)
        count -= n_sat
        share = _share(left, count)
    for i in range(k):
        out[ents[lo + i]] = min(share, want[i]) if unsat[i] else want[i]
    return (share if count > 0 else left), share


@kernel
def conserve_by_hop(rate: _F, held: _F, prev_pad: _I, hop: _I) -> None:
    """Clip each hop, upstream first, to what it holds plus what arrives (in place),
    hop by hop: where a route breaks up*/down*, entry order is not upstream first.
    (On a feed-forward fabric the solve clips rank by rank, in its own loop.)"""
    n = held.size
    max_hop = 0
    for e in range(n):
        max_hop = max(max_hop, hop[e])
    for h in range(max_hop + 1):
        for e in range(n):
            if hop[e] == h:
                rate[e] = min(rate[e], held[e] + rate[prev_pad[e]])


#: Breakpoints from which a credit level's walk sorts them by merging (below: insertion,
#: which is faster for the one to three inflows most short buffers have)
INSERTION_SORT_MOST = 32


@inline_kernel
def buffer_credit_level(
    ins: _F,
    outs: _F,
    have: _F,
    k: int,
    room: float,
    tau: float,
    tol: float,
    at: _F,
    step: _F,
    order: _I,
    other: _I,
) -> float:
    """The credit level of a short buffer whose ``k`` inflows (rates ``ins``, their next
    hops' rates ``outs`` and holdings ``have``) share its ``room`` max-min: the largest
    ``lam`` with ``(1 + tau) * sum(min(ins, lam))
    - (1 - tau) * sum(min(outs, have + min(ins, lam))) - room <= tol``, where the net
    inflow reaches 0 if it crosses ``tol`` inside a stretch; infinite if it never passes
    ``tol`` (``fabric_core.tick.step.credit_levels``: the same breakpoints, walked in order,
    the same sums in the same order, so the same levels). ``tau`` is the credit loop's
    share of the tick (``step.credit_levels``). ``at``, ``step``, ``order`` and
    ``other`` are scratch of ``3 * k`` at least. Inlined into the solve: a call per buffer,
    its nine arrays counted up and down, made the default scenario's solve twice as slow."""
    drained = 0.0
    m = 0
    for i in range(k):
        drained += min(outs[i], have[i])
        start = min(max(outs[i] - have[i], 0.0), ins[i])  # where the drain stops following
        if tau > 0.0 and ins[i] > 0.0:  # the loop's bytes rise with the inflow from 0
            at[m] = 0.0
            step[m] = 2.0 * tau
            m += 1
        if start < ins[i]:
            at[m] = start
            step[m] = 1.0 - tau
            at[m + 1] = ins[i]
            step[m + 1] = -1.0 - tau
            m += 2
        elif tau > 0.0 and ins[i] > 0.0:
            at[m] = ins[i]
            step[m] = -2.0 * tau
            m += 1
    if m <= INSERTION_SORT_MOST:
        for j in range(m):
            moving = j
            i = j
            while i > 0 and at[moving] < at[order[i - 1]]:
                order[i] = order[i - 1]
                i -= 1
            order[i] = moving
    else:
        argsort_into(at, m, order, other)
    g = -(1.0 - tau) * drained - room
    level = np.inf
    x = 0.0
    slope = 0.0
    for j in range(m):
        e = order[j]
        rise = slope * (at[e] - x)
        if g + rise > tol:  # g passes tol before this breakpoint: it reaches 0 at
            level = x + max(-g, 0.0) / slope if slope > 0 else x
            break
        g += rise
        x = at[e]
        slope += step[e]
    return level  # (one way out: numba inlines a kernel with several slowly, see _share)


def solve_tick(
    link: _I,
    ent_link: _I,
    prev_pad: _I,
    nxt_pad: _I,
    first: _I,
    hop: _I,
    key_ptr: _I,
    used_links: _I,
    rank_ptr: _I,
    link_ptr: _I,
    link_ent: _I,
    used_bufs: _I,
    buf_group_ptr: _I,
    buf_ptr: _I,
    buf_ent: _I,
    feedforward: bool,
    buf_pos: _I,
    keys_per_rank: int,
    threads: int,
    backlog: _F,
    capacity: _F,
    free_bytes: _F,
    loop_s: _F,
    dt: float,
    pos: _I,
    rate_table: _F,
    entry_cap: _F,
    credits: bool,
    max_min: bool,
    level: _F,
    share: _F,
    first_share: _F,
    alpha: _F,
    credit_level: _F,
    stale_links: _I,
    stale_bufs: _I,
) -> _F:
    """Rates of all entries for one tick (padded), and in place each used link's
    fair-share level and first-pass share and each used buffer's credit factor.

    ``rate_table`` is the flow table's rates, flat (last tick's, 0 for new flows), read at
    each entry's place ``pos``: an entry starts from last tick's rate, a new one from its
    line rate, at most what the flow holds per tick. ``entry_cap`` is the most each entry
    may carry (PFC, DCQCN, late start; inf for none), or empty when none has a cap. The
    links and buffers with entries come from the index (``kernels.index.entry_index``:
    ``used_links`` by rank, ``ent_link`` each entry's; ``used_bufs`` in groups of one
    (rank, lane), whose buffers share no entry); ``buf_pos`` is every buffer's place in the
    order credits are settled where a route breaks up*/down* (the reference's: lane, then
    rank, downstream first). ``threads``: the number of blocks a rank's links and a group's
    buffers are split into, each with scratch of its own (1 for the serial solve, the most
    threads numba may use for the parallel one), its rows on cache lines of their own.

    Compiled twice (``solve_tick_serial``, ``solve_tick_parallel``): the ``prange``
    loops are those whose iterations touch disjoint entries, links or buffers, so
    with ``parallel=True`` both cores share them and the results are the same, bit
    for bit. Where a route breaks up*/down* (not ``feedforward``) the sweeps, the
    conservation and the credit factors run one at a time in either.

    ``credits``: hold the inflows of each short buffer back to what it can take; with
    ``max_min`` (the credit fabric) they share it max-min, each capped at the buffer's
    credit level (``fabric_core.tick.step.credit_levels``), otherwise (PFC) they are all
    scaled by one factor.

    ``level``, ``share``, ``first_share`` (per link), ``alpha`` and ``credit_level`` (per
    buffer) hold the last solve's results, which differ from a link's capacity, infinity,
    infinity, 1 and infinity only at ``stale_links`` and ``stale_bufs`` (the links and
    buffers its entries used): those are put back first, so every link and buffer without
    entries reads as none (level the capacity it had when last used, share infinite,
    alpha 1, no credit level) and a solve costs what its entries use, not the fabric.
    ``free_bytes`` is read at the used buffers only, and so is ``loop_s``: what the tick
    adds to each buffer's credit loop per byte/s in and out (``LinkBook.loop_share_s``),
    whose bytes take credits too (``fabric_core.tick.step.credit_levels``); empty for none
    (PFC, which has no credit loop).
    """
    n = link.size
    n_links = capacity.size
    for li in stale_links:
        level[li] = capacity[li]
        share[li] = first_share[li] = np.inf
    for b in stale_bufs:
        alpha[b] = 1.0
        credit_level[b] = np.inf
    held = backlog / dt
    rate = np.empty(n + 1)
    rate[n] = 0.0
    for e in prange(n):
        warm = rate_table[pos[e]]
        rate[e] = warm if warm > 0 else min(capacity[link[e]], held[first[e]])
    # (filled here rather than by the caller: a tick without caps allocates nothing for them)
    cap_demand = np.full(n, np.inf) if entry_cap.size == 0 else entry_cap.copy()
    demand = np.empty(n)
    n_used = used_links.size
    dirty = np.zeros(n_used, dtype=np.bool_)  # pass two: used links whose demands changed
    new = np.empty(n)
    # only links and buffers that carry entries are worked on (the others keep level =
    # capacity, share = inf, alpha = 1): a pass costs what the traffic uses, not the fabric
    n_ranks = rank_ptr.size - 1
    n_max = 0  # the most entries on one link: the size of a fill's scratch
    for k in range(n_used):
        n_max = max(n_max, link_ptr[k + 1] - link_ptr[k])
    # the used buffers, downstream first, in groups whose credit factors can be found at
    # once: one (rank, lane) each on a feed-forward fabric (a buffer's inflows are entries
    # of its own link; their next hops, which it reads, are on higher ranks and the same or
    # higher lanes), taken from the last; one buffer each otherwise, in the reference's
    # order, where a next hop may be another buffer's inflow of the same rank
    n_ub = used_bufs.size
    ordered = np.empty(n_ub, dtype=np.intp)  # used buffers (their number in the index)
    if feedforward:
        n_groups = buf_group_ptr.size - 1
        used_group_ptr = np.empty(n_groups + 1, dtype=np.intp)
        used_group_ptr[0] = 0
        j = 0
        for grp in range(n_groups - 1, -1, -1):
            for kb in range(buf_group_ptr[grp], buf_group_ptr[grp + 1]):
                ordered[j] = kb
                j += 1
            used_group_ptr[n_groups - grp] = j
    else:
        n_groups = n_ub
        place = np.empty(n_ub, dtype=np.intp)
        for kb in range(n_ub):
            place[kb] = buf_pos[used_bufs[kb]]
        argsort_into(place, n_ub, ordered, np.empty(n_ub, dtype=np.intp))
        used_group_ptr = np.arange(n_ub + 1)
    nb_max = 0  # the most inflows of one buffer: the size of a credit factor's scratch
    for kb in range(n_ub):
        nb_max = max(nb_max, buf_ptr[kb + 1] - buf_ptr[kb])
    # scratch of the fills and of the credit factors, a row per block of links or
    # buffers worked on at once (small: it stays in cache), the rows on cache lines of
    # their own
    fill_row, credit_row = _row_stride(n_max), _row_stride(nb_max)
    want = np.empty(threads * fill_row)
    unsat = np.empty(threads * fill_row, dtype=np.bool_)
    inflows = np.empty(threads * credit_row)
    drains = np.empty(threads * credit_row)
    holds = np.empty(threads * credit_row)
    # (max-min credits: each inflow's two breakpoints, their slope steps and order)
    event_row = _row_stride(3 * nb_max) if max_min else 0
    event_at = np.empty(threads * event_row)
    event_step = np.empty(threads * event_row)
    event_order = np.empty(threads * event_row, dtype=np.intp)
    event_other = np.empty(threads * event_row, dtype=np.intp)
    before = np.empty(n)
    # (the sweeps' tolerance: read only where a route breaks up*/down*)
    tol = 0.0 if feedforward else SWEEP_TOLERANCE * max(capacity.max() if n_links else 1.0, 1.0)
    changed_from = 0
    for pass_no in range(2):
        if feedforward:
            # Gauss-Seidel by rank: each link sees the final rates of its upstream hops
            for r in range(n_ranks):
                lo, hi = key_ptr[r * keys_per_rank], key_ptr[(r + 1) * keys_per_rank]
                if lo == hi or hi <= changed_from:
                    continue
                # demands in entry order (held, cap_demand and demand are read in
                # sequence), and in pass two the links whose demands changed: threads may
                # race here, each writing True, read only after the loop
                for e in prange(lo, hi):
                    d = min(held[e] + rate[prev_pad[e]], cap_demand[e])
                    if pass_no > 0 and d != demand[e]:
                        dirty[ent_link[e]] = True
                    demand[e] = d
                # the rank's used links in ``threads`` blocks, one scratch row each
                for t in prange(threads):
                    w = want[t * fill_row : t * fill_row + n_max]
                    u = unsat[t * fill_row : t * fill_row + n_max]
                    k0, k1 = block(rank_ptr[r], rank_ptr[r + 1], t, threads)
                    for k in range(k0, k1):
                        li = used_links[k]
                        lo_l, hi_l = link_ptr[k], link_ptr[k + 1]
                        if pass_no > 0 and not dirty[k]:
                            # the same demands as in pass one: the same fill, so its rates
                            # are taken back (credits may have trimmed them by less than
                            # CUT_FRACTION) instead of worked out again
                            for i in range(lo_l, hi_l):
                                e = link_ent[i]
                                rate[e] = before[e]
                            continue
                        level[li], share[li] = fill_link(
                            link_ent, lo_l, hi_l, demand, capacity[li], rate, w, u
                        )
        else:
            for _ in range(MAX_SWEEPS):
                for e in range(n):
                    demand[e] = min(held[e] + rate[prev_pad[e]], cap_demand[e])
                for k in range(n_used):
                    li = used_links[k]
                    level[li], share[li] = fill_link(
                        link_ent,
                        link_ptr[k],
                        link_ptr[k + 1],
                        demand,
                        capacity[li],
                        new,
                        want,
                        unsat,
                    )
                moved = 0.0
                for e in range(n):
                    moved = max(moved, abs(new[e] - rate[e]))
                    rate[e] = new[e]
                if moved <= tol:
                    break
            # (not needed by rank: there every fill is at most its demand, which is at most
            # what the entry holds plus its upstream hop's final rate)
            conserve_by_hop(rate, held, prev_pad, hop)
        if pass_no == 0:
            for k in range(n_used):
                first_share[used_links[k]] = share[used_links[k]]
        if not credits:
            break
        if pass_no == 0:  # (what pass two takes back, and the cuts are measured from)
            for e in prange(n):
                before[e] = rate[e]
        # One credit factor per short buffer, downstream first, one (lane, rank) group's
        # buffers at once. The net inflow of a buffer whose inflows are scaled by ``al``
        # is convex and piecewise linear in ``al`` (the drain of a flow cut through
        # follows its inflow), so Newton's method from 1 finds the largest admissible
        # factor; ``alpha`` keeps each buffer's smallest. Each buffer's inflows, and their
        # next hops' rates and holdings, are gathered once at its own place in ``buf_ent``
        # (Newton walks them several times). Written out here, not called: a call per
        # buffer (twelve array arguments) made the default scenario's solve 1.6x slower,
        # numba's inline="always" 1.5x.
        for grp in range(n_groups):
            # the group's buffers in ``threads`` blocks, one scratch row each
            for t in prange(threads):
                ins = inflows[t * credit_row : t * credit_row + nb_max]
                outs = drains[t * credit_row : t * credit_row + nb_max]
                have = holds[t * credit_row : t * credit_row + nb_max]
                lo_e = t * event_row
                ev_at = event_at[lo_e : lo_e + event_row]
                ev_step = event_step[lo_e : lo_e + event_row]
                ev_order = event_order[lo_e : lo_e + event_row]
                ev_other = event_other[lo_e : lo_e + event_row]
                g0, g1 = block(used_group_ptr[grp], used_group_ptr[grp + 1], t, threads)
                for j in range(g0, g1):
                    kb = ordered[j]
                    b = used_bufs[kb]
                    lo, k = buf_ptr[kb], buf_ptr[kb + 1] - buf_ptr[kb]
                    inflow = 0.0
                    drain = 0.0
                    for i in range(k):
                        e = buf_ent[lo + i]
                        ins[i], outs[i], have[i] = rate[e], rate[nxt_pad[e]], held[nxt_pad[e]]
                        inflow += ins[i]
                        drain += min(outs[i], have[i] + ins[i])
                    room = free_bytes[b] / dt
                    tau = loop_s[b] / dt if max_min and loop_s.size > 0 else 0.0
                    g = (1.0 + tau) * inflow - (1.0 - tau) * drain - room
                    ctol = 1e-12 * (inflow + room) + 1e-9
                    if tau > 0.0 and inflow > 0.0:
                        # an inflow through the empty part of the buffer goes no faster
                        # than its room over twice the loop's share (in a steady state its
                        # room per round trip): a ceiling for the sub-tick finish
                        # (``finish_within_tick``) where the tick's average fits
                        loop_rate = free_bytes[b] / (2.0 * loop_s[b])
                        credit_level[b] = min(credit_level[b], loop_rate)
                    # (past one tick of delay the drain alone may pass the room: with no
                    # inflow there is nothing to hold back)
                    if g <= ctol or (max_min and inflow <= 0.0):
                        continue
                    if max_min:
                        lam = buffer_credit_level(
                            ins, outs, have, k, room, tau, ctol, ev_at, ev_step, ev_order,
                            ev_other,
                        )  # fmt: skip
                        allowed = 0.0
                        for i in range(k):
                            ins[i] = min(ins[i], lam)
                            allowed += ins[i]
                            rate[buf_ent[lo + i]] = ins[i]
                        alpha[b] = min(alpha[b], allowed / inflow)
                        credit_level[b] = min(credit_level[b], lam)
                        continue
                    al = 1.0
                    pending = True
                    for _ in range(NEWTON_ITERATIONS):
                        slope = inflow
                        for i in range(k):
                            if have[i] + al * ins[i] < outs[i]:
                                slope -= ins[i]
                        step = g / slope if slope > 0 else 0.0
                        al = min(max(al - step, 0.0), 1.0)
                        drain = 0.0
                        for i in range(k):
                            drain += min(outs[i], have[i] + al * ins[i])
                        g = al * inflow - drain - room
                        pending = g > ctol
                        if not pending:
                            break
                    if pending:
                        # not converged (rare): the drain that cannot shrink any further
                        safe = 0.0
                        for i in range(k):
                            safe += min(outs[i], have[i])
                        al = min(al, (safe + room) / inflow if inflow > 0 else 0.0)
                    alpha[b] = min(alpha[b], al)
                    for i in range(k):
                        rate[buf_ent[lo + i]] = ins[i] * al
        if feedforward:
            # conservation rank by rank: every upstream hop is on a lower rank, so the
            # entries of one rank can be clipped at once
            for r in range(n_ranks):
                for e in prange(key_ptr[r * keys_per_rank], key_ptr[(r + 1) * keys_per_rank]):
                    rate[e] = min(rate[e], held[e] + rate[prev_pad[e]])
        else:
            conserve_by_hop(rate, held, prev_pad, hop)
        if pass_no == 1:
            break  # the last pass: nothing reads the cuts it would find
        changed_from = n
        for e in prange(n):
            if rate[e] < before[e] * (1 - CUT_FRACTION):
                changed_from = min(changed_from, e)
                cap_demand[e] = min(cap_demand[e], rate[e])
        if changed_from == n:
            break
    return rate


solve_tick_serial = kernel(solve_tick)
solve_tick_parallel = parallel_kernel(solve_tick)


@kernel
def credit_room(
    bufs: _I,
    buffer_bytes: _F,
    occupancy: _F,
    into_endpoint: NDArray[np.bool_],
    endless: float,
    free: _F,
    delay: _F,
    loop_bytes: _F,
    loop_at: _F,
    loop_share: _F,
    now: float,
    dt: float,
) -> None:
    """The credits of the buffers ``bufs`` for the tick from ``now``, into ``free``: the
    free space less what the credit loop still holds at the tick's end (never below 0);
    ``endless`` for the queues into an endpoint (the NIC sinks at line rate, no loop). And
    into ``loop_share`` what the tick adds to each loop per byte/s in and out.

    A credit loop (``delay``, the cable's one-way delay ``t``; ``loop_bytes`` as of
    ``loop_at``) holds the bytes on their way in and the credits on their way back,
    ``(x + y)·t`` in a steady state. It is kept as a first-order lag of time constant
    ``2t`` (a byte's credit is out for a round trip): what it held decays by
    ``a = exp(-elapsed / 2t)``, and the tick adds ``(1 - a)·t`` per byte/s of inflow and
    drain (``credit_loop_fill``), so an idle loop lets its buffer's credits out at line
    rate first, as a real sender spends those it holds. (``credit_room_parallel`` shares
    the buffers over the cores.)"""
    for i in prange(bufs.size):
        b = bufs[i]
        if into_endpoint[b]:
            free[b] = endless
            loop_share[b] = 0.0
            continue
        t = delay[b]
        if t > 0.0:
            loop_bytes[b] *= np.exp(-(now + dt - loop_at[b]) / (2.0 * t))
            loop_at[b] = now + dt
            loop_share[b] = -np.expm1(-dt / (2.0 * t)) * t
        else:
            loop_share[b] = 0.0
        free[b] = max(buffer_bytes[b] - occupancy[b] - loop_bytes[b], 0.0)


@kernel
def credit_loop_fill(bufs: _I, inflow: _F, drain: _F, loop_share: _F, loop_bytes: _F) -> None:
    """What the tick's bytes add to the credit loops of the buffers ``bufs``: their inflow
    and drain times the loop's share of the tick (``credit_room``), in place."""
    for i in range(bufs.size):
        b = bufs[i]
        loop_bytes[b] += loop_share[b] * (inflow[b] + drain[b])


#: ``credit_room`` over the cores
credit_room_parallel = specialised_kernel(credit_room, "credit_room_parallel", parallel=True)
