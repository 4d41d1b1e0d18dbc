"""The vectorised tick of the credit-based fabric: rates per (hop, flow), exact credits.

Each tick solves, for every (hop, flow) entry ``e`` of the flow table, the rate
``r[e]`` at which the flow's bytes cross that hop's link, then moves bytes. It
works in rates, not bytes moved hop by hop, so a credit-limited link is not
capped at buffer/dt (see DESIGN.md, "Model notes"). The rules:

1. **Link sharing** (max-min, per flow): each link's bandwidth is shared by
   water-filling among the entries on it; an entry's demand is what it holds
   (``backlog/dt``) plus what arrives from its previous hop. Sweeps start from
   line rate and only the demand pulls rates down, so coarse ticks do not
   collapse to a low fixed point.
2. **Conservation**, exact: a hop never sends more than it holds plus what
   arrives (``r[e]·dt <= B[e] + r[prev]·dt``), enforced in hop order.
3. **Credits**, exact: the bytes sent into a downstream buffer (link, VL) in a
   tick never exceed its free space plus what it drains in the same tick. All
   inflows into a short buffer are scaled by one factor ``alpha`` (upstream
   arbitration hands out the credits in proportion), which is what slows a
   victim flow that shares the VL with a congested one. ``alpha`` accounts
   for the drain shrinking when the inflow shrinks (a flow cut through);
   buffers are processed downstream-first in the order of the acyclic buffer
   dependency graph (up*/down* routing), so fixing one never breaks another.
4. Capacity that credits took away from one flow is offered again to the
   others on the same link (a second pass with the credit-limited flows capped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import NDArray

from fabric_core.flows import FlowTable
from fabric_core.routing import MAX_HOPS

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


_Floats = NDArray[np.float64]  # built once: cast() on a subscripted type costs per call


def sum_by(index: NDArray[np.intp], weights: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """Sum ``weights`` into ``n`` bins by ``index`` (``np.bincount``, typed as floats)."""
    return cast(_Floats, np.bincount(index, weights=weights, minlength=n))


@dataclass
class EntryIndex:
    """Flat view of the active (hop, flow) entries; rebuilt when the flow set changes."""

    version: int
    hop: NDArray[np.intp]
    flow: NDArray[np.intp]
    link: NDArray[np.intp]
    prev: NDArray[np.intp]  # entry of the previous hop, -1 at the source
    nxt: NDArray[np.intp]  # entry of the next hop, -1 at the last hop
    buf: NDArray[np.intp]  # downstream buffer (link * VLs + vl), -1 at the last hop
    queue: NDArray[np.intp]  # (link, vl) of the entry, also at the last hop (PFC pauses it)
    hop_bounds: NDArray[np.intp]  # entries of hop h are hop_bounds[h]:hop_bounds[h+1]
    link_groups: list[NDArray[np.intp]]  # all entries, by the rank of their link, upstream first
    group_links: list[NDArray[np.intp]]  # the links of each of those groups
    group_local_link: list[NDArray[np.intp]]  # each entry's link as an index into those
    group_prev: list[NDArray[np.intp]]  # each entry's previous-hop entry (-1 at hop 0)
    first: NDArray[np.intp]  # for every entry, the entry of the same flow at hop 0
    feedforward: bool  # every path climbs the link ranks: one forward sweep settles the rates
    # entries with a downstream buffer, by buffer rank, downstream first
    rank_groups: list[NDArray[np.intp]]
    rank_group_bufs: list[NDArray[np.intp]]  # the buffers each rank group feeds
    rank_group_local: list[NDArray[np.intp]]  # each entry's buffer as an index into those
    last: NDArray[np.intp]  # last-hop entry of each active flow
    last_flow: NDArray[np.intp]

    @property
    def size(self) -> int:
        """Number of entries."""
        return int(self.link.size)


def build_index(flows: FlowTable, link_rank: NDArray[np.int64], n_vls: int) -> EntryIndex:
    """Flatten the flow table's active entries (hop-major order)."""
    valid = (flows.path >= 0) & flows.active[None, :]
    hop, flow = np.nonzero(valid)  # row-major: hop-major order
    n = hop.size
    ids = np.full(flows.path.shape, -1, dtype=np.intp)
    ids[hop, flow] = np.arange(n)
    prev = np.where(hop > 0, ids[np.maximum(hop - 1, 0), flow], -1)
    nxt_hop = np.minimum(hop + 1, MAX_HOPS - 1)
    nxt = np.where(hop + 1 < MAX_HOPS, ids[nxt_hop, flow], -1)
    link = flows.path[hop, flow].astype(np.intp)
    vl = flows.vl[hop, flow].astype(np.intp)
    queue = link * n_vls + vl
    buf = np.where(nxt >= 0, queue, -1)
    hop_bounds = np.searchsorted(hop, np.arange(MAX_HOPS + 1))
    has_buf = np.flatnonzero(nxt >= 0)
    # buffers are ordered by (lane, link rank): a path may change lane (a reroute that breaks
    # up*/down* moves up a lane), so along every path the buffer ranks still increase
    ranks = vl[has_buf] * (int(link_rank.max(initial=0)) + 1) + link_rank[link[has_buf]]
    rank_groups = [has_buf[ranks == k] for k in np.unique(ranks)[::-1]]
    compact = [np.unique(buf[g], return_inverse=True) for g in rank_groups]
    entry_rank = link_rank[link]
    order = np.argsort(entry_rank, kind="stable")
    bounds = np.flatnonzero(np.diff(entry_rank[order])) + 1
    link_groups = np.split(order, bounds) if n else []
    group_compact = [np.unique(link[g], return_inverse=True) for g in link_groups]
    has_prev = prev >= 0
    feedforward = bool((entry_rank[prev[has_prev]] < entry_rank[has_prev]).all())
    last = np.flatnonzero(nxt < 0)
    return EntryIndex(
        version=flows.version,
        hop=hop,
        flow=flow,
        link=link,
        prev=prev,
        nxt=nxt,
        buf=buf,
        queue=queue,
        hop_bounds=hop_bounds,
        link_groups=link_groups,
        group_links=[u for u, _ in group_compact],
        group_local_link=[inv.astype(np.intp) for _, inv in group_compact],
        group_prev=[prev[g] for g in link_groups],
        first=_first_entry(prev),
        feedforward=feedforward,
        rank_groups=rank_groups,
        rank_group_bufs=[u for u, _ in compact],
        rank_group_local=[inv.astype(np.intp) for _, inv in compact],
        last=last,
        last_flow=flow[last],
    )


def waterfill(
    demand: NDArray[np.float64], link: NDArray[np.intp], capacity: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Max-min fair rates of entries sharing links.

    Returns:
        the rate of every entry and each link's fair-share level (the rate of the
        entries whose demand exceeds it).
    """
    n_links = capacity.size
    left = capacity.astype(np.float64, copy=True)
    unsat = np.ones(demand.size, dtype=bool)
    rate = demand.copy()  # satisfied entries keep their demand
    for _ in range(WATERFILL_ROUNDS):
        count = sum_by(link, unsat.astype(np.float64), n_links)
        level = np.divide(left, count, out=left.copy(), where=count > 0)
        sat = unsat & (demand <= level[link])
        if not sat.any():
            break
        left -= sum_by(link, np.where(sat, demand, 0.0), n_links)
        np.maximum(left, 0.0, out=left)
        unsat &= ~sat
    count = sum_by(link, unsat.astype(np.float64), n_links)
    level = np.divide(left, count, out=left.copy(), where=count > 0)
    np.copyto(rate, np.minimum(level[link], demand), where=unsat)
    return rate, level


def enforce_conservation(
    idx: EntryIndex, rate: NDArray[np.float64], backlog: NDArray[np.float64], dt: float
) -> None:
    """Clip each hop, in hop order, to what it holds plus what arrives (in place)."""
    b = idx.hop_bounds
    np.minimum(rate[b[0] : b[1]], backlog[b[0] : b[1]] / dt, out=rate[b[0] : b[1]])
    for h in range(1, MAX_HOPS):
        lo, hi = b[h], b[h + 1]
        if lo == hi:
            break
        cap = backlog[lo:hi] / dt + rate[idx.prev[lo:hi]]
        np.minimum(rate[lo:hi], cap, out=rate[lo:hi])


def enforce_credits(
    idx: EntryIndex,
    rate: NDArray[np.float64],
    backlog: NDArray[np.float64],
    free_bytes: NDArray[np.float64],
    dt: float,
) -> NDArray[np.float64]:
    """Scale inflows so no downstream buffer overfills (in place); returns alpha per buffer.

    For buffer ``b`` fed by entries ``e`` (rate ``a``) whose next hops drain it
    (rate ``c``, holding ``d·dt`` bytes), the net inflow after scaling the
    inflows by ``alpha`` is ``alpha·sum(a) - sum(min(c, d + alpha·a))``: convex
    and piecewise linear in ``alpha``, so Newton's method from ``alpha = 1``
    approaches the largest admissible ``alpha`` from above, exactly once every
    flow is in its final regime.
    """
    alpha = np.ones(free_bytes.size)
    free_rate = free_bytes / dt
    for group, bufs, local in zip(
        idx.rank_groups, idx.rank_group_bufs, idx.rank_group_local, strict=True
    ):
        nxt = idx.nxt[group]
        a = rate[group]
        c = rate[nxt]
        d = backlog[nxt] / dt
        nb = bufs.size
        inflow = sum_by(local, a, nb)
        room = free_rate[bufs]
        g = inflow - sum_by(local, np.minimum(c, d + a), nb) - room
        tol = 1e-12 * (inflow + room) + 1e-9
        short = g > tol
        if not short.any():
            continue
        # Newton on the entries of the short buffers only
        sel = np.flatnonzero(short[local])
        sb, sl = np.unique(local[sel], return_inverse=True)
        aa, cc, dd = a[sel], c[sel], d[sel]
        n_short = sb.size
        inflow_s, room_s, g_s = inflow[sb], room[sb], g[sb]
        tol_s = tol[sb]
        al = np.ones(n_short)
        pending = g_s > tol_s
        for _ in range(NEWTON_ITERATIONS):
            through = (dd + al[sl] * aa) < cc  # flows whose drain follows their inflow
            slope = inflow_s - sum_by(sl, np.where(through, aa, 0.0), n_short)
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
        group_alpha = np.ones(nb)
        group_alpha[sb] = al
        np.minimum.at(alpha, bufs, group_alpha)
        rate[group] = a * group_alpha[local]
        np.minimum(rate[nxt], d + rate[group], out=rate[nxt])
    return alpha


@dataclass
class Solution:
    """The rates of one tick and what the snapshot reports about them."""

    rate: NDArray[np.float64]  # per entry
    level: NDArray[np.float64]  # per link: fair-share level of the unsatisfied entries
    alpha: NDArray[np.float64]  # per buffer: fraction of the wanted inflow credits allowed


def solve(
    idx: EntryIndex,
    backlog: NDArray[np.float64],
    capacity: NDArray[np.float64],
    free_bytes: NDArray[np.float64],
    dt: float,
    warm: NDArray[np.float64] | None = None,
    entry_cap: NDArray[np.float64] | None = None,
    credits: bool = True,
) -> Solution:
    """Rates of all entries for one tick (see the module docstring).

    Args:
        entry_cap: the most each entry may carry this tick (PFC pauses, DCQCN
            sender rates); None = no limit.
        credits: enforce credit flow control (False on a PFC fabric).
        warm: last tick's rate of each entry (0 for new entries). Sweeps start
            from it (steady state then converges in one sweep); new entries
            start from the most they could carry (their link's line rate, at
            most what the flow holds per tick), never from zero.
    """
    link = idx.link
    start = capacity[link].copy()
    if warm is not None:
        first_hop_backlog = backlog[idx.first]
        start = np.where(warm > 0, warm, np.minimum(start, first_hop_backlog / dt))
    rate = start
    level = capacity.copy()
    cap_demand = np.full(idx.size, np.inf) if entry_cap is None else entry_cap.copy()
    alpha = np.ones(free_bytes.size)
    # Sweeps stop when no rate moves by more than a millionth of line rate; the exact
    # enforcement that follows makes conservation and credits hold to rounding anyway.
    tol = SWEEP_TOLERANCE * float(capacity.max(initial=1.0))
    for _ in range(2):  # second pass re-offers capacity that credits took away
        if idx.feedforward:
            # Gauss-Seidel by link rank: each link's entries see the final rates of their
            # upstream hops, so one sweep gives the max-min rates of this pass exactly.
            # (water-filling runs on each group's own links, numbered locally, so its
            # per-link arrays are the group's size, not the fabric's)
            held = backlog / dt
            for group, links, local, prev in zip(
                idx.link_groups, idx.group_links, idx.group_local_link, idx.group_prev, strict=True
            ):
                arrival = np.where(prev >= 0, rate[np.maximum(prev, 0)], 0.0)
                demand = np.minimum(held[group] + arrival, cap_demand[group])
                rate[group], lv = waterfill(demand, local, capacity[links])
                level[links] = lv
        else:
            for _ in range(MAX_SWEEPS):
                arrival = np.where(idx.prev >= 0, rate[idx.prev], 0.0)
                demand = np.minimum(backlog / dt + arrival, cap_demand)
                new, level = waterfill(demand, link, capacity)
                converged = bool(np.abs(new - rate).max(initial=0.0) <= tol)
                rate = new
                if converged:
                    break
        enforce_conservation(idx, rate, backlog, dt)
        if not credits:
            break
        before = rate.copy()
        # the credit factor of the first pass is the one that held rates down; later
        # passes see those rates as caps, so keep the smallest
        alpha = np.minimum(alpha, enforce_credits(idx, rate, backlog, free_bytes, dt))
        enforce_conservation(idx, rate, backlog, dt)
        cut = rate < before * (1 - 1e-9)
        if not cut.any():
            break
        cap_demand = np.where(cut, rate, cap_demand)
    return Solution(rate=rate, level=level, alpha=alpha)


def _first_entry(prev: NDArray[np.intp]) -> NDArray[np.intp]:
    """For every entry, the entry of the same flow at hop 0 (walking ``prev``)."""
    first = np.arange(prev.size)
    for _ in range(MAX_HOPS - 1):
        p = prev[first]
        if (p < 0).all():
            break
        first = np.where(p >= 0, p, first)
    return first


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
    slowed by its buffer's credit factor. A flow ends at the latest of its hops.
    """
    n_links = capacity.size
    rate = sol.rate
    link = idx.link
    elastic = ~finishing & (rate >= sol.level[link] * (1 - 1e-6)) & (rate > 0)
    held = ~finishing & ~elastic
    available = np.maximum(capacity - sum_by(link, np.where(held, rate, 0.0), n_links), 0.0)
    n_elastic = np.bincount(link, weights=elastic, minlength=n_links)
    fin = np.flatnonzero(finishing)
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
    alpha = np.where(idx.buf[fin] >= 0, sol.alpha[np.maximum(idx.buf[fin], 0)], 1.0)[order]
    speed = available[fl] * np.maximum(alpha, 1e-12)
    t_sorted = np.divide(work, speed, out=np.full(fl.size, dt), where=speed > 0)
    out = np.zeros(idx.size)
    out[fin[order]] = t_sorted
    return out
