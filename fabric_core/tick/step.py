"""The vectorised tick of the credit-based fabric: rates per (hop, flow), exact credits.

Each tick solves, for every (hop, flow) entry ``e`` of the flow table, the rate
``r[e]`` at which the flow's bytes cross that hop's link, then moves bytes. It
works in rates, not bytes moved hop by hop, so a credit-limited link is not
capped at buffer/dt (see DESIGN.md, "Model notes"). The rules:

1. **Link sharing** (max-min, per flow): each link's bandwidth is shared by
   water-filling among the entries on it; an entry's demand is what it holds
   (``backlog/dt``) plus what arrives from its previous hop. Sweeps start from
   last tick's rates (new entries from line rate) and only the demand pulls
   rates down, so coarse ticks do not collapse to a low fixed point.
2. **Conservation**, exact: a hop never sends more than it holds plus what
   arrives (``r[e]·dt <= B[e] + r[prev]·dt``), enforced upstream first.
3. **Credits**, exact: the bytes sent into a downstream buffer (link, VL) in a
   tick never exceed its free space plus what it drains in the same tick. On the
   credit fabric the upstream port hands the credits out packet by packet, one
   flow after another, so a short buffer's inflows share what it can take max-min:
   each gets at most one credit level ``lambda`` (``max_min``). A credit comes back
   over the link after the bytes it stood for leave the buffer, so the bytes on the
   link's way in and the credits on their way back take room too (the link book's
   credit loops, ``tick.links.LinkBook``): in a steady state through an empty buffer a
   lane carries at most its buffer per round trip (``credit_levels``; ``loop_s``, what
   the tick adds to the loop per byte/s). Under PFC a pause
   stops every flow of the priority for the same time, so there all inflows into
   a short buffer are scaled by one factor ``alpha`` (the upstream sends for that
   share of the tick). Either slows a victim flow that shares the VL with a
   congested one. Both account for the drain shrinking when the inflow shrinks
   (a flow cut through); buffers are processed downstream-first in the order of
   the acyclic buffer dependency graph (up*/down* routing), so fixing one never
   breaks another.
4. Capacity that credits took away from one flow is offered again to the
   others on the same link (a second pass with the credit-limited flows capped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.routing import MAX_HOPS
from fabric_core.tick.flows import FlowTable

#: Water-filling rounds per max-min solve (each round settles the flows whose demand
#: is below the current fair share; 4 settles all but pathological mixes).
WATERFILL_ROUNDS = 16
#: Most Jacobi sweeps per solve: a change of demand travels one hop per sweep, so
#: one more than the longest path settles any change; a warm start usually needs one.
MAX_SWEEPS = MAX_HOPS + 1
SWEEP_TOLERANCE = 1e-6
#: Newton iterations for the credit factor of a buffer (piecewise linear: converges
#: in as many steps as flows change regime; the rest is caught by the final check).
NEWTON_ITERATIONS = 12
#: The room (credits, or PFC's bound) of a queue with no bound this tick, more than any
#: tick moves: into a NIC, which sinks at line rate, or a pause the PFC watchdog ignores.
ENDLESS_ROOM_BYTES = 1e30


_Floats = NDArray[np.float64]  # built once: cast() on a subscripted type costs per call


def sum_by(
    index: NDArray[np.intp], weights: NDArray[np.float64] | NDArray[np.bool_], n: int
) -> NDArray[np.float64]:
    """Sum ``weights`` into ``n`` bins by ``index`` (``np.bincount``, typed as floats;
    boolean weights count)."""
    return cast(_Floats, np.bincount(index, weights=weights, minlength=n))


@dataclass(frozen=True)
class RankLayout:
    """Links numbered by rank, once per topology.

    Every link has a rank (its place along any up*/down* path); the links of one
    rank never share an entry's path twice, so the solver works on one rank at a
    time with per-link arrays the size of that rank, indexed by ``local``.
    """

    rank: NDArray[np.int64]  # per link
    local: NDArray[np.intp]  # per link: its index among the links of its rank
    links: list[NDArray[np.intp]]  # per rank value: the links of that rank

    @classmethod
    def of(cls, link_rank: NDArray[np.int64]) -> RankLayout:
        """The layout for links of the given ranks (small non-negative integers)."""
        n_ranks = int(link_rank.max(initial=0)) + 1
        links = [np.flatnonzero(link_rank == r) for r in range(n_ranks)]
        local = np.zeros(link_rank.size, dtype=np.intp)
        for members in links:
            local[members] = np.arange(members.size)
        return cls(rank=link_rank, local=local, links=links)


@dataclass(frozen=True)
class RankGroup:
    """The entries on links of one rank: a contiguous slice of the entry order."""

    lo: int
    hi: int
    links: NDArray[np.intp]  # the links of this rank
    local: NDArray[np.intp]  # each entry's link as an index into ``links``


@dataclass(frozen=True)
class BufferGroup:
    """The entries feeding the buffers of one (lane, rank): a contiguous slice."""

    lo: int
    hi: int
    bufs: NDArray[np.intp]  # the buffers (link * lanes + lane) of this lane and rank
    local: NDArray[np.intp]  # each entry's buffer as an index into ``bufs``


@dataclass
class EntryIndex:
    """Flat view of the active (hop, flow) entries; rebuilt when the flow set changes.

    Entries are ordered by (link rank, lane), so the entries of one rank, and those
    feeding the buffers of one (lane, rank), are contiguous slices: the solver works
    on views instead of gathering. Index arrays ending in ``_pad`` point at a padding
    slot (``size`` for entry arrays, the number of buffers for buffer arrays) instead
    of -1, so gathers and sums need no mask.
    """

    version: int
    hop: NDArray[np.intp]
    flow: NDArray[np.intp]
    pos: NDArray[np.intp]  # flat index of (hop, flow) in the flow table's per-hop arrays
    link: NDArray[np.intp]
    queue: NDArray[np.intp]  # (link, vl) of the entry, also at the last hop (PFC pauses it)
    prev_pad: NDArray[np.intp]  # entry of the previous hop (the padding entry at the source)
    nxt_pad: NDArray[np.intp]  # entry of the next hop (the padding entry at the last hop)
    buf_pad: NDArray[np.intp]  # downstream buffer, link * VLs + vl (padding at the last hop)
    drains_pad: NDArray[np.intp]  # the buffer the entry drains (its previous hop's buffer)
    heads: NDArray[np.intp]  # entries at hop 0
    first: NDArray[np.intp]  # for every entry, the entry of the same flow at hop 0
    feedforward: bool  # every path climbs the link ranks: one forward sweep settles the rates
    rank_groups: list[RankGroup]  # by link rank, upstream first
    buffer_groups: list[BufferGroup]  # entries with a downstream buffer, downstream first
    hop_groups: list[NDArray[np.intp]]  # entries by hop (conservation when not feedforward)
    last: NDArray[np.intp]  # last-hop entry of each active flow
    last_flow: NDArray[np.intp]
    #: the compiled solver's groups (``fabric_core.tick.kernels.tick``); None on the reference
    csr: Any = None

    @property
    def size(self) -> int:
        """Number of entries."""
        return int(self.link.size)


def build_index(flows: FlowTable, layout: RankLayout, n_vls: int) -> EntryIndex:
    """Flatten the flow table's active entries, ordered by (link rank, lane).

    Runs whenever the set of flows changes (most ticks of a busy fabric), so it
    works on flat positions in the flow table and avoids masks and 2-D indexing.
    """
    cap = flows.capacity
    valid = np.zeros((MAX_HOPS + 1, cap), dtype=bool)  # one more row: "no next hop"
    np.greater_equal(flows.path, 0, out=valid[:MAX_HOPS])
    valid[:MAX_HOPS] &= flows.active[None, :]
    flat_valid = valid.reshape(-1)
    pos0 = np.flatnonzero(flat_valid)  # hop-major positions hop * cap + flow
    link0 = flows.path.reshape(-1)[pos0]
    vl0 = flows.vl.reshape(-1)[pos0]
    fed0 = flat_valid[pos0 + cap]  # a next hop: the entry feeds a switch buffer
    # key: (rank, lane, feeds a buffer)
    key = ((layout.rank[link0] * n_vls + vl0) * 2 + fed0).astype(np.uint16)
    order = np.argsort(key, kind="stable")  # a radix sort on 16-bit keys
    key, pos = key[order], pos0[order]
    link = link0[order].astype(np.intp)
    fed = fed0[order]
    hop, flow = np.divmod(pos, cap)
    n = pos.size
    # entry ids by position, shifted one row down: row 0 and the last row hold "none" (n)
    ids = np.full((MAX_HOPS + 2) * cap, n, dtype=np.intp)
    ids[pos + cap] = np.arange(n)
    prev_pad = ids[pos]
    nxt_pad = ids[pos + 2 * cap]
    queue = link * n_vls + vl0[order]
    n_bufs = layout.rank.size * n_vls
    buf_pad = np.where(fed, queue, n_bufs)
    drains_pad = np.append(buf_pad, n_bufs)[prev_pad]
    # slices of equal key: one (rank, lane, fed) each
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if n else np.zeros(0, np.intp)
    bounds = np.r_[starts, n]
    local = layout.local[link]  # each entry's link, numbered among the links of its rank
    spans: list[list[int]] = []  # [rank, lo, hi] of each rank's entries
    buffer_slices: list[tuple[tuple[int, int], BufferGroup]] = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        rank_lane, is_fed = divmod(int(key[lo]), 2)
        rank, lane = divmod(rank_lane, n_vls)
        if spans and spans[-1][0] == rank:
            spans[-1][2] = hi
        else:
            spans.append([rank, lo, hi])
        if is_fed:
            bufs = layout.links[rank] * n_vls + lane
            buffer_slices.append(((lane, rank), BufferGroup(lo, hi, bufs, local[lo:hi])))
    rank_groups = [RankGroup(lo, hi, layout.links[r], local[lo:hi]) for r, lo, hi in spans]
    # buffers downstream first: (lane, rank) rises along every path, also on a path
    # that moves up a lane at a down->up turn (see paths.lanes)
    buffer_slices.sort(key=lambda t: t[0], reverse=True)
    entry_rank = layout.rank[link]
    feedforward = bool((np.append(entry_rank, -1)[prev_pad] < entry_rank).all())
    hop_groups = [np.flatnonzero(hop == h) for h in range(MAX_HOPS)] if not feedforward else []
    last = np.flatnonzero(~fed)
    return EntryIndex(
        version=flows.version,
        hop=hop,
        flow=flow,
        pos=pos,
        link=link,
        queue=queue,
        prev_pad=prev_pad,
        nxt_pad=nxt_pad,
        buf_pad=buf_pad,
        drains_pad=drains_pad,
        heads=np.flatnonzero(hop == 0),
        first=ids[cap + flow],
        feedforward=feedforward,
        rank_groups=rank_groups,
        buffer_groups=[g for _, g in buffer_slices],
        hop_groups=hop_groups,
        last=last,
        last_flow=flow[last],
    )


def waterfill(
    demand: NDArray[np.float64],
    link: NDArray[np.intp],
    capacity: NDArray[np.float64],
    guess: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Max-min fair rates of entries sharing links.

    Args:
        guess: a fair share per link to start from (last tick's ``share``): the
            entries at or below it are taken as satisfied, which usually leaves one
            check to do. A link whose guess proves too high restarts from scratch.

    Returns:
        the rate of every entry; each link's level (the rate of the entries whose
        demand exceeds it, or the capacity left when every entry is satisfied);
        and its share (the level, or infinity when every entry is satisfied).
    """
    n_links = capacity.size
    if guess is None:
        unsat = np.ones(demand.size, dtype=bool)
        left = capacity.astype(np.float64, copy=True)
    else:
        unsat = demand > guess[link]
        left = capacity - sum_by(link, demand * ~unsat, n_links)
    count = sum_by(link, unsat, n_links)
    share = _share(left, count)
    if guess is not None:
        # Entries guessed satisfied but above the share they imply go back to the
        # unsatisfied (each such move raises the share). Once none is above it, the
        # satisfied set is part of the true one (the share is at most the true level:
        # sum(min(demand, share)) <= capacity), and the rounds below finish the job.
        for _ in range(WATERFILL_ROUNDS):
            over = np.flatnonzero(~unsat & (demand > share[link] * (1 + 1e-12)))
            if over.size == 0:
                break
            left += sum_by(link[over], demand[over], n_links)
            count += np.bincount(link[over], minlength=n_links)
            unsat[over] = True
            share = _share(left, count)
    # Rounds: the unsatisfied entries at or below the share are satisfied, which
    # raises the share of the rest. They work on the unsatisfied entries only and
    # update the per-link sums by the few entries that change.
    cand = np.flatnonzero(unsat)
    c_link, c_demand = link[cand], demand[cand]
    for _ in range(WATERFILL_ROUNDS):
        sat = c_demand <= share[c_link]
        if not sat.any():
            break
        s = np.flatnonzero(sat)
        left -= sum_by(c_link[s], c_demand[s], n_links)
        np.maximum(left, 0.0, out=left)
        count -= np.bincount(c_link[s], minlength=n_links)
        share = _share(left, count)
        keep = ~sat
        cand, c_link, c_demand = cand[keep], c_link[keep], c_demand[keep]
    rate = demand.copy()
    rate[cand] = np.minimum(share[c_link], c_demand)
    return rate, np.where(count > 0, share, left), share


def _share(left: NDArray[np.float64], count: NDArray[np.float64]) -> NDArray[np.float64]:
    """Fair share of what is left among ``count`` entries: infinite where there are
    none and the capacity suffices, minus infinity where it does not."""
    out = np.where(left >= 0, np.inf, -np.inf)
    return np.divide(left, count, out=out, where=count > 0)


def enforce_conservation(
    idx: EntryIndex, rate: NDArray[np.float64], held: NDArray[np.float64]
) -> None:
    """Clip each hop, upstream first, to what it holds plus what arrives (in place).

    ``rate`` is padded (a zero after the last entry); ``held`` is backlog / dt.
    """
    if idx.feedforward:
        for g in idx.rank_groups:
            cap = held[g.lo : g.hi] + rate[idx.prev_pad[g.lo : g.hi]]
            np.minimum(rate[g.lo : g.hi], cap, out=rate[g.lo : g.hi])
    else:
        for group in idx.hop_groups:
            rate[group] = np.minimum(rate[group], held[group] + rate[idx.prev_pad[group]])


def credit_levels(
    buf: NDArray[np.intp],
    a: NDArray[np.float64],
    c: NDArray[np.float64],
    d: NDArray[np.float64],
    room: NDArray[np.float64],
    tol: NDArray[np.float64],
    tau: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """The credit level of each short buffer when its inflows share its credits max-min.

    Buffer ``k`` (of ``room.size``) is fed by the entries ``i`` with ``buf[i] == k``, at
    rates ``a`` wanted, whose next hops drain it at rate ``c`` holding ``d·dt`` bytes.
    With every inflow capped at ``lam``, the inflow ``x(lam) = sum(min(a, lam))`` and the
    drain ``y(lam) = sum(min(c, d + min(a, lam)))``, the buffer's credits hold at the end
    of the tick what it holds plus ``(x - y)·dt``, and what the tick adds to its credit
    loop: the bytes on the link's way in and the credits on their way back for the bytes
    that left it, ``(x + y)·s`` (``s`` the loop's share of the tick, ``LinkBook``'s
    ``loop_share_s``; the loop's older bytes are out of ``room`` already). With
    ``tau = s / dt`` (per buffer; 0, the default, where credits come back at once) they
    fit its room when
    ``g(lam) = (1 + tau)·x - (1 - tau)·y - room <= 0``: piecewise linear and
    non-decreasing, each inflow adding a slope of ``2·tau`` up to ``s = min(max(c - d, 0),
    a)`` (where its drain no longer follows it), then ``1 + tau`` up to ``a`` (its whole
    want). The level is the largest ``lam`` with ``g(lam) <= tol`` (the rounding the
    shortness test allows, so that a stretch where ``g`` is flat at 0 gives its far end
    whatever the rounding), found by walking those breakpoints in order; where ``g``
    crosses it inside a stretch, the level is where ``g`` reaches 0 (0 if ``g(0)`` is
    above it already). A buffer that is not short within ``tol`` gets an infinite level
    (nothing held back).

    The sums run as the compiled solve's do (``kernels.solve.buffer_credit_level``):
    ``g(0)`` from the drains in entry order, then each stretch's rise in turn, one buffer
    at a time (a running sum over all the buffers would carry their rounding into the
    small ones), so both give the same levels.
    """
    n = room.size
    t = np.zeros(n) if tau is None else tau
    t_in = t[buf]
    g0 = -(1.0 - t) * sum_by(buf, np.minimum(c, d), n) - room
    start = np.minimum(np.maximum(c - d, 0.0), a)
    has = start < a
    # the breakpoints, three places per inflow: its loop from 0 (a slope of 2·tau), where
    # its drain stops following (1 - tau more) and its want (back to 0; where the drain
    # follows it all the way, the loop's 2·tau only). Inflow by inflow, in that order,
    # as the compiled walk pushes them, so that a stable sort leaves equal places in the
    # same order in both (their slopes then sum alike, to the last bit).
    loop = (t_in > 0) & (a > 0)
    valid = np.stack([loop, has, has | loop], axis=1).ravel()
    ev_buf = np.repeat(buf, 3)[valid]
    ev_x = np.stack([np.zeros(a.size), start, a], axis=1).ravel()[valid]
    ev_step = np.stack(
        [2.0 * t_in, 1.0 - t_in, np.where(has, -1.0 - t_in, -2.0 * t_in)], axis=1
    ).ravel()[valid]
    order = np.lexsort((ev_x, ev_buf))
    ev_buf, ev_x, ev_step = ev_buf[order], ev_x[order], ev_step[order]
    first = np.r_[True, ev_buf[1:] != ev_buf[:-1]] if ev_buf.size else np.zeros(0, bool)
    x_before = np.where(first, 0.0, np.r_[0.0, ev_x[:-1]])
    # the slope before each breakpoint (the steps before it in its buffer) and g at each
    # (g(0), then the rises): running sums along a row per buffer, restarted at every
    # buffer, as the compiled walk adds them (with tau a buffer's steps need not sum to
    # exactly 0, so one running sum over all would carry a rounding from buffer to buffer);
    # the rows in blocks of buffers with about as many breakpoints (up to a power of two),
    # so that one busy buffer does not make every row as long as its own
    starts = np.flatnonzero(first)
    at_start = np.zeros(n, dtype=np.intp)
    at_start[ev_buf[starts]] = starts
    place = np.arange(ev_buf.size) - at_start[ev_buf] + 1
    width = np.ones(n, dtype=np.intp) << np.ceil(
        np.log2(np.bincount(ev_buf, minlength=n) + 1.0)
    ).astype(np.intp)
    slope = np.empty(ev_buf.size)
    g_at = np.empty(ev_buf.size)
    ev_width = width[ev_buf]
    for w in np.unique(ev_width).tolist():
        bufs = np.flatnonzero(width == w)
        row_of = np.zeros(n, dtype=np.intp)
        row_of[bufs] = np.arange(bufs.size)
        ev = np.flatnonzero(ev_width == w)
        at = (row_of[ev_buf[ev]], place[ev])
        steps = np.zeros((bufs.size, w))
        steps[at] = ev_step[ev]
        slope[ev] = np.cumsum(steps, axis=1)[at[0], at[1] - 1]
        rows = np.zeros((bufs.size, w))
        rows[:, 0] = g0[bufs]
        rows[at] = slope[ev] * (ev_x[ev] - x_before[ev])
        g_at[ev] = np.cumsum(rows, axis=1)[at]
    # the first breakpoint past which g is above tol, in each buffer: g crosses it before
    over = np.flatnonzero(g_at > tol[ev_buf])
    crossing = np.full(n, -1, dtype=np.intp)
    if over.size:
        lead = np.r_[True, ev_buf[over][1:] != ev_buf[over][:-1]]
        crossing[ev_buf[over][lead]] = over[lead]
    level = np.full(n, np.inf)
    j = crossing[crossing >= 0]
    g_before = np.where(first[j], g0[ev_buf[j]], g_at[j - 1])
    climb = np.divide(
        np.maximum(-g_before, 0.0), slope[j], out=np.zeros(j.size), where=slope[j] > 0
    )
    level[crossing >= 0] = x_before[j] + climb
    return level


def enforce_credits(
    idx: EntryIndex,
    rate: NDArray[np.float64],
    held: NDArray[np.float64],
    free_bytes: NDArray[np.float64],
    dt: float,
    max_min: bool = True,
    loop_s: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Hold the inflows back so no downstream buffer overfills (in place); returns, per
    buffer, the share of the wanted inflow allowed (``alpha``) and the credit level
    (infinite where nothing was held back and no credit loop bounds it: a used buffer
    fed over a cable gets at most its room over twice the loop's share of the tick, the
    sub-tick finish's ceiling).

    For buffer ``b`` fed by entries ``e`` (rate ``a``) whose next hops drain it
    (rate ``c``, holding ``d·dt`` bytes): with ``max_min`` (the credit fabric) each
    inflow is capped at the buffer's credit level (``credit_levels``, whose room counts
    what the tick adds to the credit loop, ``loop_s`` per buffer: None for none), and
    ``alpha`` is the share of the inflow left. Otherwise (PFC) every inflow is scaled by ``alpha``:
    the net inflow is then ``alpha·sum(a) - sum(min(c, d + alpha·a))``, convex and
    piecewise linear in ``alpha``, so Newton's method from ``alpha = 1`` approaches the
    largest admissible ``alpha`` from above, exactly once every flow is in its final
    regime. The next hops are clipped afterwards by ``enforce_conservation``.
    """
    alpha = np.ones(free_bytes.size)
    credit_level = np.full(free_bytes.size, np.inf)
    free_rate = free_bytes / dt
    loop = max_min and loop_s is not None and loop_s.size > 0
    for grp in idx.buffer_groups:
        lo, hi, bufs, local = grp.lo, grp.hi, grp.bufs, grp.local
        nxt = idx.nxt_pad[lo:hi]  # all real: these entries feed a buffer
        a = rate[lo:hi]
        c = rate[nxt]
        d = held[nxt]
        nb = bufs.size
        inflow = sum_by(local, a, nb)
        room = free_rate[bufs]
        # the credit loop's one-way delay in ticks (the compiled solve's ``tau``)
        tau = loop_s[bufs] / dt if loop and loop_s is not None else np.zeros(nb)
        g = (1.0 + tau) * inflow - (1.0 - tau) * sum_by(local, np.minimum(c, d + a), nb) - room
        tol = 1e-12 * (inflow + room) + 1e-9
        short = g > tol
        if max_min:  # (with no inflow there is nothing to hold back)
            short &= inflow > 0
            # an inflow through the empty part of a buffer goes no faster than its room over
            # twice the loop's share (in a steady state its room per round trip): a
            # ceiling for the sub-tick finish where the tick's average fits
            looped = (tau > 0) & (inflow > 0)
            if looped.any():
                lb = bufs[looped]
                loop_rate = free_bytes[lb] / (2.0 * cast(_Floats, loop_s)[lb])
                credit_level[lb] = np.minimum(credit_level[lb], loop_rate)
        if not short.any():
            continue
        # the entries of the short buffers only, numbered compactly
        sb = np.flatnonzero(short)
        compact = np.zeros(nb, dtype=np.intp)
        compact[sb] = np.arange(sb.size)
        sel = np.flatnonzero(short[local])
        sl = compact[local[sel]]
        aa, cc, dd = a[sel], c[sel], d[sel]
        n_short = sb.size
        inflow_s, room_s, g_s = inflow[sb], room[sb], g[sb]
        if max_min:
            lam = credit_levels(sl, aa, cc, dd, room_s, tol[sb], tau[sb])
            allowed = np.minimum(aa, lam[sl])
            al = np.divide(
                sum_by(sl, allowed, n_short), inflow_s, out=np.ones(n_short), where=inflow_s > 0
            )
            alpha[bufs[sb]] = np.minimum(alpha[bufs[sb]], al)
            credit_level[bufs[sb]] = np.minimum(credit_level[bufs[sb]], lam)
            a[sel] = allowed  # ``a`` is a view: this writes the rates
            continue
        tol_s = tol[sb]
        al = np.ones(n_short)
        pending = g_s > tol_s
        for _ in range(NEWTON_ITERATIONS):
            through = (dd + al[sl] * aa) < cc  # flows whose drain follows their inflow
            slope = inflow_s - sum_by(sl, aa * through, n_short)
            step = np.divide(g_s, slope, out=np.zeros(n_short), where=pending & (slope > 0))
            al = np.clip(al - step, 0.0, 1.0)
            g_s = al * inflow_s - sum_by(sl, np.minimum(cc, dd + al[sl] * aa), n_short) - room_s
            pending = g_s > tol_s
            if not pending.any():
                break
        if pending.any():
            # Not converged (rare): fall back to the drain that cannot shrink any further.
            safe = sum_by(sl, np.minimum(cc, dd), n_short)
            fallback = np.divide(safe + room_s, inflow_s, out=np.zeros(n_short), where=inflow_s > 0)
            al = np.where(pending, np.minimum(al, fallback), al)
        alpha[bufs[sb]] = np.minimum(alpha[bufs[sb]], al)
        a[sel] = aa * al[sl]  # ``a`` is a view: this writes the rates
    return alpha, credit_level


@dataclass
class Solution:
    """The rates of one tick and what the snapshot reports about them."""

    padded: NDArray[np.float64]  # per entry, then a zero (see EntryIndex)
    level: NDArray[np.float64]  # per link: fair-share level of the unsatisfied entries
    alpha: NDArray[np.float64]  # per buffer: fraction of the wanted inflow credits allowed
    share: NDArray[np.float64]  # per link: first pass's level, infinite where all are satisfied
    #: per buffer: the most an inflow may carry where credits are shared max-min (at most
    #: its room per round trip where a credit loop feeds it, infinite where neither holds
    #: it back); None where inflows are scaled by ``alpha`` (PFC)
    credit_level: NDArray[np.float64] | None = None

    @property
    def rate(self) -> NDArray[np.float64]:
        """Rate of every entry, bytes/s."""
        return self.padded[:-1]


def solve(
    idx: EntryIndex,
    backlog: NDArray[np.float64],
    capacity: NDArray[np.float64],
    free_bytes: NDArray[np.float64],
    dt: float,
    warm: NDArray[np.float64] | None = None,
    entry_cap: NDArray[np.float64] | None = None,
    credits: bool = True,
    warm_share: NDArray[np.float64] | None = None,
    max_min: bool = True,
    loop_s: NDArray[np.float64] | None = None,
) -> Solution:
    """Rates of all entries for one tick (see the module docstring).

    Args:
        entry_cap: the most each entry may carry this tick (PFC pauses, DCQCN
            sender rates); None = no limit.
        credits: hold inflows back to what each downstream buffer can take (its
            credits on the credit fabric, PFC's bound on RoCE).
        max_min: share a short buffer's room among its inflows max-min (the credit
            fabric) instead of scaling them all by one factor (PFC).
        warm: last tick's rate of each entry (0 for new entries). Sweeps start
            from it (steady state then converges in one sweep); new entries
            start from the most they could carry (their link's line rate, at
            most what the flow holds per tick), never from zero.
        warm_share: last tick's fair share per link (``Solution.share``):
            water-filling starts from it (the result does not depend on it, only
            the work does).
        loop_s: per buffer, what the tick adds to its credit loop per byte/s in and out
            (``LinkBook.loop_share_s``), whose bytes take credits too
            (``credit_levels``); None for none (PFC).
    """
    n = idx.size
    link = idx.link
    held = backlog / dt
    rate = np.empty(n + 1)
    rate[n] = 0.0
    start = capacity[link]
    if warm is not None:
        start = np.where(warm > 0, warm, np.minimum(start, held[idx.first]))
    rate[:n] = start
    level = capacity.copy()
    share = np.full(capacity.size, np.inf) if warm_share is None else warm_share.copy()
    cap_demand = entry_cap
    alpha = np.ones(free_bytes.size)
    credit_level = np.full(free_bytes.size, np.inf)
    # Sweeps stop when no rate moves by more than a millionth of line rate; the exact
    # enforcement that follows makes conservation and credits hold to rounding anyway.
    tol = SWEEP_TOLERANCE * float(capacity.max(initial=1.0))
    changed_from = 0  # entries before this one keep their rates in a later pass
    first_share: NDArray[np.float64] | None = None
    for _ in range(2):  # second pass re-offers capacity that credits took away
        if idx.feedforward:
            # Gauss-Seidel by link rank: each link's entries see the final rates of their
            # upstream hops, so one sweep gives the max-min rates of this pass exactly.
            # A rank wholly upstream of every change of the first pass keeps its rates.
            for g in idx.rank_groups:
                if g.hi <= changed_from:
                    continue
                demand = held[g.lo : g.hi] + rate[idx.prev_pad[g.lo : g.hi]]
                if cap_demand is not None:
                    np.minimum(demand, cap_demand[g.lo : g.hi], out=demand)
                guess = share[g.links] if warm_share is not None else None
                rate[g.lo : g.hi], level[g.links], share[g.links] = waterfill(
                    demand, g.local, capacity[g.links], guess
                )
        else:
            for _ in range(MAX_SWEEPS):
                demand = held + rate[idx.prev_pad]
                if cap_demand is not None:
                    np.minimum(demand, cap_demand, out=demand)
                new, level, share = waterfill(demand, link, capacity)
                converged = bool(np.abs(new - rate[:n]).max(initial=0.0) <= tol)
                rate[:n] = new
                if converged:
                    break
        enforce_conservation(idx, rate, held)
        if first_share is None:
            first_share = share.copy()
        if not credits:
            break
        before = rate[:n].copy()
        # the credit factor of the first pass is the one that held rates down; later
        # passes see those rates as caps, so keep the smallest
        allowed, lam = enforce_credits(idx, rate, held, free_bytes, dt, max_min, loop_s)
        alpha = np.minimum(alpha, allowed)
        credit_level = np.minimum(credit_level, lam)
        enforce_conservation(idx, rate, held)
        cut = rate[:n] < before * (1 - 1e-9)
        if not cut.any():
            break
        changed_from = int(np.argmax(cut))
        capped = np.where(cut, rate[:n], np.inf)
        cap_demand = capped if cap_demand is None else np.minimum(cap_demand, capped)
        # the first pass's shares are the best guess for the second, and for the next
        # tick's first pass (which sees no credit caps either)
        warm_share = first_share
    assert first_share is not None
    levels = credit_level if max_min else None  # (None: PFC's one factor, ``alpha``)
    return Solution(padded=rate, level=level, alpha=alpha, share=first_share, credit_level=levels)


def finish_within_tick(
    idx: EntryIndex,
    sol: Solution,
    capacity: NDArray[np.float64],
    finishing: NDArray[np.bool_],
    dt: float,
) -> NDArray[np.float64]:
    """When, inside the tick, each finishing entry has sent its last byte (seconds).

    Rates are tick averages; a flow that empties inside the tick really sent
    faster and stopped early. On each link, the finishing entries share the
    capacity as in processor sharing with the elastic entries (those at the
    fair-share level, which would yield), while entries held down elsewhere keep
    their rate: entry ``e`` with ``b`` bytes finishes at
    ``(sum over finishing o of min(b_o, b) + b * (1 + elastic)) / available``,
    slowed by its buffer's credit factor (under PFC), or no sooner than ``b`` at its
    buffer's credit level (credits shared max-min). A flow ends at the latest of its
    hops.
    """
    n_links = capacity.size
    rate = sol.rate
    link = idx.link
    fin = np.flatnonzero(finishing)
    # the other entries on the links of the finishing ones
    on_fin_link = np.zeros(n_links, dtype=bool)
    on_fin_link[link[fin]] = True
    near = np.flatnonzero(on_fin_link[link] & ~finishing)
    near_link, near_rate = link[near], rate[near]
    elastic = (near_rate >= sol.level[near_link] * (1 - 1e-6)) & (near_rate > 0)
    available = np.maximum(capacity - sum_by(near_link, near_rate * ~elastic, n_links), 0.0)
    n_elastic = np.bincount(near_link, weights=elastic, minlength=n_links)
    b = rate[fin] * dt
    order = np.lexsort((b, link[fin]))
    fl, fb = link[fin][order], b[order]
    group_start = np.r_[0, np.flatnonzero(np.diff(fl)) + 1]
    group_of = np.repeat(np.arange(group_start.size), np.diff(np.r_[group_start, fl.size]))
    csum = np.cumsum(fb)
    before = csum - fb - np.r_[0.0, csum][group_start][group_of]  # smaller entries' bytes
    pos = np.arange(fl.size) - group_start[group_of]
    size = np.diff(np.r_[group_start, fl.size])[group_of]
    after = size - pos - 1
    work = before + fb * (after + 1 + n_elastic[fl])
    if sol.credit_level is None:
        alpha = np.append(sol.alpha, 1.0)[idx.buf_pad[fin]][order]  # no buffer: not slowed
        speed = available[fl] * np.maximum(alpha, 1e-12)
    else:
        speed = available[fl]
    # A hop that can send nothing takes the whole tick, unless it had nothing left to
    # send: its last byte went before the tick, so it sets no time within it.
    stalled = np.where(work > 0, dt, 0.0)
    t_sorted = np.divide(work, speed, out=stalled, where=speed > 0)
    if sol.credit_level is not None:
        # credits let the entry's bytes through no faster than its buffer's level (or its
        # own rate, where the second pass let it past the level of the first)
        lam = np.append(sol.credit_level, np.inf)[idx.buf_pad[fin]][order]
        ceiling = np.maximum(lam, rate[fin][order])
        bound = np.divide(fb, ceiling, out=np.zeros(fb.size), where=ceiling > 0)
        np.maximum(t_sorted, bound, out=t_sorted)
    out = np.zeros(idx.size)
    out[fin[order]] = t_sorted
    return out


@dataclass
class Moved:
    """What a tick's byte move leaves: per entry, per link, per buffer, per flow."""

    new_backlog: NDArray[np.float64]  # per entry, after the tick
    arrival: NDArray[np.float64]  # per entry: the rate arriving from its previous hop
    link_rate: NDArray[np.float64]
    occupancy: NDArray[np.float64]  # per buffer: bytes waiting in it
    drain: NDArray[np.float64]  # per buffer: rate leaving it
    inflow: NDArray[np.float64]  # per buffer: rate entering it
    delivered_bytes: float  # arrived at their destinations this tick
    done: NDArray[np.intp]  # flows whose bytes have all arrived, in entry order
