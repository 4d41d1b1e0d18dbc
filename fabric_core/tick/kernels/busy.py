# ruff: noqa: RUF005  (tuples joined with ``+``: see ``busy_ticks``)
"""Busy ticks in one call: the ticks in which flows start and finish, run with no Python
between them when only compiled workloads act in them.

``kernels.uneventful`` runs a tick's steps 4-7 tick after tick while nothing starts or
ends. On a busy fabric something does every tick: the default scenario's RPC probes
arrive some 2.6 a tick and its background flows end and are replaced about every other
tick, so each tick went through Python, where the workloads meet the fabric (their draws,
each batch of flows started, the completions handed back): about half of such a tick.
Here those steps run in the kernel too, for the workloads it knows (``workloads.traffic``'s
``Bulk``, ``Rpc`` and ``AllToAll``, at most one of each): per tick,

1. the workloads' new flows, in the fabric's order of workloads, as their ``generate``
   makes them (the same draws from the same generator, the same peers and tags), each
   batch started as ``Fabric.start_flows`` starts it (``kernels.start.start_routed``;
   on RoCE, its DCQCN senders at line rate, ``kernels.pfc.start_senders``);
2. the fault tracking (``faults.recovery.track``) of a RoCE link-down: the flows whose ACK
   timeout is up sent again; until routing knows of the link, the bytes forwarded into it
   lost and their flows held for their ACK timeout (``kernels.blackhole``); once it is
   rerouted, its recovery measured (``delivered_rate``). The fault's detection, its
   reroute and its recovery are Python's (their events): the run stops before each;
3. the entry index, rebuilt when the flows changed (``kernels.index.entry_index``);
4. steps 4-7, by ``kernels.uneventful.uneventful_ticks`` for one tick: on RoCE its PFC,
   ECN and DCQCN, the CNPs' draws from the fabric's generator as Python draws them;
5. the flows that ended retired and reported, as ``Fabric._complete`` does
   (``kernels.finish.finish_flows``), their latencies filed in the workloads'
   histograms and the background's senders topped up at the next tick;
6. the tick's end.

The results are those of ``Fabric.step`` bit for bit (``tests/test_busy.py``): the same
kernels on the same arrays in the same order, and numpy's sums where Python summed with
numpy (``kernels.pairwise``). It stops before a tick that needs Python (the flow table
or the fabric-wide cap full, an index that could reach ``PARALLEL_FROM_ENTRIES``, nothing
in flight, a step of a fault's timeline) and after a tick in which a flow of another
workload ends or, on RoCE, a PFC watchdog fires or a paused queue's sender is stopped
(Python reports them).
``fabric_core.runtime.busy`` decides when to call it and writes back what it returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.flows import RESEND_EPS_S
from fabric_core.tick.kernels._jit import inline_kernel, kernel
from fabric_core.tick.kernels.blackhole import lose_at_dead_links, resend_due
from fabric_core.tick.kernels.finish import finish_flows as _finish_flows
from fabric_core.tick.kernels.groups import (
    FT_ACTIVE,
    FT_AFTER_ACTIVE,
    FT_BACKLOG2D,
    FT_LIVE_END,
    FT_RESEND_BYTES,
    FT_START_S,
    IX_BUF_PAD,
    IX_ENT_LINK,
    IX_FEEDFORWARD,
    IX_FLOW,
    IX_KEYS_PER_RANK,
    IX_LINK_ENT,
    IX_LINK_PTR,
    IX_PLACES,
    IX_POS,
    IX_PREV_PAD,
    IX_USED_BUFS,
    IX_USED_LINKS,
    LB_AFTER_DQ_OPEN,
    LB_AFTER_DRAIN,
    LB_DISCARDS,
    LB_DQ_OPEN,
    LB_DRAIN,
    LB_DRAIN_PAD,
    LB_OCC,
    LB_PAUSED,
    REST_CAP,
    REST_LINE_RATE,
    REST_RC,
    REST_ROCE,
    REST_SENDERS_END,
    RESULT_CNPS,
    RESULT_DELIVERED,
    RESULT_DONE,
    RESULT_DQ_OPEN,
    RESULT_DROPPED,
    RESULT_OCCUPANCY,
    RESULT_RATE,
    RESULT_STARVED,
    RESULT_STOP,
    SV_ALPHA,
    SV_CREDIT_LEVEL,
    SV_LEVEL,
    SV_M_STALE_BUFS,
    SV_M_STALE_LINKS,
    SV_S_STALE_BUFS,
    SV_S_STALE_LINKS,
)
from fabric_core.tick.kernels.histogram import SUM, observe_values
from fabric_core.tick.kernels.index import (
    PART_BUF,
    PART_BUF_ENT,
    PART_BUF_GROUP_PTR,
    PART_BUF_PTR,
    PART_DRAINS,
    PART_ELINK,
    PART_FEEDFORWARD,
    PART_FIRST,
    PART_FLOW,
    PART_HEADS,
    PART_HOP,
    PART_KEY_PTR,
    PART_LANE_BUF,
    PART_LAST,
    PART_LAST_FLOW,
    PART_LENT,
    PART_LINK,
    PART_LINK_PTR,
    PART_NXT,
    PART_POS,
    PART_PREV,
    PART_QUEUE,
    PART_RANK_PTR,
    PART_USED_BUFS,
    PART_USED_LINKS,
    entry_index,
)
from fabric_core.tick.kernels.pairwise import numpy_sum
from fabric_core.tick.kernels.pfc import start_senders
from fabric_core.tick.kernels.slots import live_end as slots_live_end
from fabric_core.tick.kernels.slots import lowest_free
from fabric_core.tick.kernels.start import start_routed as _start_routed
from fabric_core.tick.kernels.traffic import (
    count_finished,
    count_started,
    hotspot_peers,
    random_peers,
    top_up,
    uniform_peers,
)
from fabric_core.tick.kernels.uneventful import STOP_PFC as ONE_STOP_PFC
from fabric_core.tick.kernels.uneventful import uneventful_ticks as _uneventful_ticks

_F = NDArray[np.float64]
_I = NDArray[np.intp]
_I64 = NDArray[np.int64]

#: The kernels called with argument groups spread out (``*group``), whose lengths mypy
#: cannot count
uneventful_ticks: Any = _uneventful_ticks
start_routed: Any = _start_routed
finish_flows: Any = _finish_flows

#: ``busy_ticks``' reasons to stop, as it returns them
STOP_HORIZON = 0  # the ticks asked for are run, or the next could be another's to act
STOP_BEFORE = 1  # the next tick needs Python (it has not started: Python runs it)
STOP_REPORT = 2  # the last tick finished flows of another workload: Python reports them
# (the tick has run through its flow control, as ``uneventful.STOP_DONE`` leaves it)
STOP_ERROR = 3  # a batch could not be routed or filed: Python runs the tick and says why


@inline_kernel
def _observe_many(counts: _I64, stats: _F, ring: _F, values: _F, bounds_s: _F) -> None:
    """``Histogram.observe_many``: numpy's sum of several values, then each filed."""
    if values.size == 0:
        return
    if values.size > 1:
        stats[SUM] += numpy_sum(values)
    observe_values(counts, stats, ring, values, bounds_s)


@inline_kernel
def _part(buf: _I, bounds: _I, i: int) -> _I:
    """Part ``i`` of ``kernels.index.PARTS`` in the buffer ``entry_index`` returns, by its
    ``bounds`` (a view)."""
    return buf[bounds[2 * i] : bounds[2 * i + 1]]


@inline_kernel
def _arrivals_before(t: _F, start: int, end_s: float) -> int:
    """``bisect_left(t, end_s, start)``: the first arrival from ``start`` on at ``end_s``
    or later (``t.size`` if none)."""
    k = start
    while k < t.size and t[k] < end_s:
        k += 1
    return k


@inline_kernel
def _delivered_rate(
    hist_t: _F,
    hist_d: _F,
    t_start: _F,
    d_start: _F,
    started: int,
    now: float,
    delivered: float,
    window_s: float,
    time_eps_s: float,
    kept: int,
) -> float:
    """``faults.recovery.delivered_rate`` at the start of the tick at ``now``, its history
    being ``hist_*`` (the fault tracking's, from before the call), then this call's ticks
    (``t_start``, ``d_start``, ``started`` of them), then (now, delivered), of which the
    history keeps the last ``kept`` (its deque's length): the same entries looked at in
    the same order, the same arithmetic."""
    start_at = now - window_s + time_eps_s
    found = False
    reached = False
    t0 = d0 = 0.0
    older = kept - 1  # (the entries before (now, delivered) the history still holds)
    for i in range(started - 1, max(started - 1 - older, -1), -1):
        t0, d0, found = t_start[i], d_start[i], True
        if t0 <= start_at:
            reached = True
            break
    older -= started
    if not reached:
        for j in range(hist_t.size - 1, max(hist_t.size - 1 - older, -1), -1):
            t0, d0, found = hist_t[j], hist_d[j], True
            if t0 <= start_at:
                break
    if not found or now <= t0:
        return 0.0
    return (delivered - d0) / (now - t0)


@kernel
def busy_ticks(
    most: int,
    horizon_s: float,
    now: float,
    tick: int,
    epoch_tick: int,
    epoch_s: float,
    dt: float,
    delivered: float,
    dropped: float,
    # ``uneventful_ticks``' argument groups, as ``runtime.uneventful.kernel_groups`` makes
    # them: the index, the flow table, the link book, the solve's kept results, the rest
    # either side of the fabric's generator (numba types a tuple that holds a generator
    # in Python, element by element: 0.6 ms a call)
    index: Any,
    flow_table: Any,
    link_book: Any,
    solved: Any,
    rest: Any,
    rng: np.random.Generator,
    profile: Any,
    # the index's last-hop entries and their flows (``finish_flows``), its size and version
    last: _I,
    last_flow: _I,
    version: int,
    index_version: int,
    # what the index is rebuilt from (``entry_index``): the flow table's paths, lanes and
    # activity, the links' ranks and the scratch
    rebuild: Any,
    # the flows: in flight, one past the last, the fabric-wide cap, the bytes injected,
    # the flows completed and the hop-updates so far
    n_flows: int,
    live_end: int,
    most_flows: int,
    injected: float,
    completed: int,
    hop_updates: int,
    most_entries: int,
    max_hops: int,
    held: NDArray[np.bool_],
    workload_of: NDArray[np.int16],
    tag_of: _I64,
    src_of: _I64,
    parent_size: _F,
    # ``start_routed``'s fixed arguments, either side of the buffers' occupancy and drain
    host_s: float,
    no_extra: _F,
    start_a: Any,
    start_b: Any,
    # ``finish_flows``' fixed arguments, and the latency histograms per class
    finish_fixed: Any,
    class_hist: Any,
    bounds_s: _F,
    # the background bulk workload (its place among the workloads, -1 if none), its
    # fixed arguments and its state (running, owed a top-up, next tag, bytes delivered)
    bulk_at: int,
    bulk: Any,
    bulk_rng: np.random.Generator,
    bulk_running: bool,
    bulk_owed: bool,
    bulk_seq: int,
    bulk_delivered: float,
    # the RPC workload likewise: its fixed arguments, its generator, its state (running,
    # next tag, sent) and its arrivals (``workloads.arrivals.PoissonArrivals``: the rate
    # and places, the block drawn (times, places, uniform numbers), the next arrival in
    # it and the last drawn, and how many it draws at a time)
    rpc_at: int,
    rpc: Any,
    rpc_rng: np.random.Generator,
    rpc_running: bool,
    rpc_seq: int,
    rpc_sent: int,
    rpc_rate: float,
    rpc_places: int,
    rpc_block: int,
    r_t: _F,
    r_at: _I64,
    r_u: _F,
    rpc_next: int,
    rpc_last_s: float,
    # the MoE all-to-all (``workloads.traffic.AllToAll``): its place (-1 if none), its
    # fixed arguments (its two latency histograms' arrays, the messages' and the rounds';
    # its ranks, message size, period, lane and class), whether it runs, and its rounds'
    # state (one in flight, its messages left, its start, the next round's start, the last
    # round's length, the rounds started)
    a_at: int,
    alltoall: Any,
    a_running: bool,
    a_busy: bool,
    a_left: int,
    a_round_start: float,
    a_next_s: float,
    a_last_round_s: float,
    a_round: int,
    # on RoCE, links down that routing does not know of yet (``recovery._blackhole``):
    # per link, the flow table's 2-D rates and resend times, the local
    # ACK timeout, the flows waiting for theirs and the earliest resend, and the faults
    # that count their lost bytes (their links, as offsets into ``fault_links``, and
    # their bytes lost so far, in place)
    dead: NDArray[np.bool_],
    rate2d: NDArray[np.float64],
    resend_s: _F,
    ack_timeout_s: float,
    n_waiting: int,
    next_resend_s: float,
    fault_ptr: _I,
    fault_links: _I,
    fault_lost: _F,
    # a link-down rerouted and not recovered yet: the delivered rate at which one counts
    # as recovered (inf: none), the fault tracking's history back over the window it is
    # measured over (times, bytes delivered by then), that window, the slack of a time
    # reached and the entries the history keeps (``faults.recovery``'s ``delivered_rate``)
    recovered_at_Bps: float,
    hist_t: _F,
    hist_d: _F,
    window_s: float,
    time_eps_s: float,
    history_kept: int,
) -> Any:
    """Run at most ``most`` ticks from ``now`` (tick ``tick``), stopping before a tick
    whose start is within half a tick of ``horizon_s`` (when a workload not compiled
    here, a command or a fault could act) and where the module docstring says.

    Returns the ticks started, why it stopped, the start time of each tick and the bytes
    delivered by then, the time after the last whole tick, the totals (delivered,
    dropped, injected, completed, hop-updates), the flow table's count, end and version,
    the last index built here (its buffer and bounds, empty if none was) and its
    version, the last tick's ``uneventful_ticks`` result, the workloads' states, the
    RPC's block of arrivals, and the links and buffers the last tick run used (the next
    tick's to clear: the index may have been rebuilt after it), the batches of flows
    started, the all-to-all's rounds (as its arguments have them), the CNPs sent, and
    the flows waiting for their ACK timeout and the earliest resend.
    """
    # (what changes from tick to tick, or is read here, of the groups)
    drain_pad, lb_occ, lb_drain = link_book[LB_DRAIN_PAD], link_book[LB_OCC], link_book[LB_DRAIN]
    dq_open, link_paused = link_book[LB_DQ_OPEN], link_book[LB_PAUSED]
    level, alpha, credit_level = solved[SV_LEVEL], solved[SV_ALPHA], solved[SV_CREDIT_LEVEL]
    s_stale_l, s_stale_b = solved[SV_S_STALE_LINKS], solved[SV_S_STALE_BUFS]
    m_stale_l, m_stale_b = solved[SV_M_STALE_LINKS], solved[SV_M_STALE_BUFS]
    cap, line_rate, roce = rest[REST_CAP], rest[REST_LINE_RATE], rest[REST_ROCE]
    senders = rest[REST_RC:REST_SENDERS_END]  # RoCE's DCQCN senders, per flow slot
    # the finish times' credit levels: none on RoCE, whose solve keeps none (``Solution``)
    finish_levels = np.zeros(0) if roce else credit_level
    path, vl, active_all, link_rank, n_ranks, n_vls, link_slot, buf_slot = rebuild
    (
        b_senders, b_pool, b_in_flight, b_outstanding, b_hotspots, b_fraction, b_size,
        b_lane, b_cls, b_counts, b_stats, b_ring,
    ) = bulk  # fmt: skip
    b_rng = bulk_rng
    r_senders, r_pool, r_size, r_lane, r_cls, r_counts, r_stats, r_ring = rpc
    (
        am_counts, am_stats, am_ring, ar_counts, ar_stats, ar_ring, a_ranks, a_size,
        a_period, a_lane, a_cls,
    ) = alltoall  # fmt: skip
    rpc_on = rpc_at >= 0 and rpc_running and r_senders.size > 0 and rpc_rate > 0
    in_order = np.sort(np.array([bulk_at, rpc_at, a_at]))  # (-1: none)
    a_messages = a_ranks.size * (a_ranks.size - 1)  # a round's
    t_start = np.empty(most)
    d_start = np.empty(most)
    built_buf = np.zeros(0, dtype=np.intp)
    built_bounds = np.zeros(0, dtype=np.intp)
    n_entries = index[IX_POS].size
    stop = STOP_HORIZON
    started = 0
    batches = 0  # started: each admitted whole by the fabric-wide cap, which then has room
    cnps = 0  # sent (RoCE's DCQCN)
    any_dead = False
    for li in range(dead.size):
        any_dead = any_dead or dead[li]
    # a result of the type the loop's ticks give, for a call that runs none: numba needs
    # the name bound on every path (a call that runs no tick: its arguments, once a call)
    one = uneventful_ticks(
        0,
        horizon_s,
        now,
        tick,
        epoch_tick,
        epoch_s,
        dt,
        delivered,
        dropped,
        *index,
        *flow_table,
        *link_book,
        *solved,
        *rest,
        rng,
        *profile,
    )  # fmt: skip
    while started < most and now + 0.5 * dt < horizon_s:
        # -- a fault that this tick's tracking finds recovered: Python's (its event)
        if recovered_at_Bps < np.inf:
            rate_now = _delivered_rate(
                hist_t, hist_d, t_start, d_start, started, now, delivered, window_s,
                time_eps_s, history_kept,
            )  # fmt: skip
            if rate_now >= recovered_at_Bps:
                stop = STOP_BEFORE
                break
        # -- what the tick will start, known before anything is drawn: else Python runs it
        n_bulk = 0
        if bulk_at >= 0 and bulk_running and bulk_owed:
            for i in range(b_senders.size):
                n_bulk += max(b_outstanding - b_in_flight[b_senders[i]], 0)
        n_rpc = 0
        if rpc_on:
            # ``PoissonArrivals.take``'s draws, ahead of the tick: a block more while none
            # is left to take or all that are come before the tick's end, after what is
            # left of the last (the same draws in the same order, the same arrays)
            while rpc_next >= r_t.size or rpc_last_s < now + dt:
                gaps = rpc_rng.exponential(1.0 / rpc_rate, rpc_block)
                new_t = np.empty(rpc_block)
                total = 0.0
                for i in range(rpc_block):
                    total += gaps[i]
                    new_t[i] = rpc_last_s + total
                new_at = rpc_rng.integers(0, rpc_places, rpc_block)
                new_u = rpc_rng.random(rpc_block)
                r_t = np.concatenate((r_t[rpc_next:], new_t))
                r_at = np.concatenate((r_at[rpc_next:], new_at))
                r_u = np.concatenate((r_u[rpc_next:], new_u))
                rpc_next = 0
                rpc_last_s = new_t[rpc_block - 1]
            n_rpc = _arrivals_before(r_t, rpc_next, now + dt) - rpc_next
        # (``AllToAll.generate``: a round when none is in flight and its start has come)
        n_round = 0
        if a_at >= 0 and a_running and not a_busy and now + 1e-15 >= a_next_s:
            n_round = a_messages
        n_new = n_bulk + n_rpc + n_round
        if n_entries == 0 and n_new == 0:
            stop = STOP_BEFORE  # nothing in flight: Python passes the idle ticks
            break
        if n_new > 0 and (
            n_flows + n_new > most_flows
            or n_entries + n_new * max_hops >= most_entries
            or lowest_free(active_all, held, n_new).size < n_new
        ):
            stop = STOP_BEFORE  # the cap, a large index or a full table: Python
            break
        t_start[started] = now
        d_start[started] = delivered
        started += 1
        # -- 2. the workloads' new flows, in the fabric's order of workloads
        for at in in_order:
            if at < 0:
                continue
            if at == bulk_at:
                if not (bulk_running and bulk_owed):
                    continue
                src = top_up(b_senders, b_in_flight, b_outstanding)
                bulk_owed = False
                if src.size == 0:
                    continue
                n = src.size
                dst = random_peers(src, b_pool, b_rng.integers(0, b_pool.size - 1, size=n))
                if b_hotspots > 0 and b_fraction > 0:
                    u = b_rng.random(n)
                    hot_pick = b_rng.integers(0, b_hotspots, size=n)
                    hotspot_peers(src, dst, b_pool, u, hot_pick, b_fraction)
                count_started(b_in_flight, src)
                tag = np.arange(bulk_seq, bulk_seq + n)
                bulk_seq += n
                size_bytes, lane, cls = b_size, b_lane, b_cls
            elif at == a_at:
                if n_round == 0:
                    continue
                # every rank to every other: rank i's messages go to ranks i+1, i+2, ...
                # (mod n), in rank order (``AllToAll.generate``'s repeat and tile)
                n = a_messages
                src = np.empty(n, dtype=np.int64)
                dst = np.empty(n, dtype=np.int64)
                k = 0
                for i in range(a_ranks.size):
                    for j in range(1, a_ranks.size):
                        src[k] = a_ranks[i]
                        dst[k] = a_ranks[(i + j) % a_ranks.size]
                        k += 1
                a_busy = True
                a_round_start = now
                a_left = n
                a_next_s = now + a_period
                a_round += 1
                tag = np.full(n, a_round, dtype=np.int64)
                size_bytes, lane, cls = a_size, a_lane, a_cls
            else:
                if not rpc_on or n_rpc == 0:
                    continue
                sender = r_at[rpc_next : rpc_next + n_rpc]
                u = r_u[rpc_next : rpc_next + n_rpc]
                rpc_next += n_rpc
                rows = uniform_peers(r_senders, sender, u, r_pool)
                src = rows[0].copy()
                dst = rows[1].copy()
                n = src.size
                tag = np.arange(rpc_seq, rpc_seq + n)
                rpc_seq += n
                rpc_sent += n
                size_bytes, lane, cls = r_size, r_lane, r_cls
            size = np.empty(n)
            size.fill(size_bytes)
            ready = np.empty(n)
            ready.fill(now)
            flow_bytes = numpy_sum(size)
            slots = lowest_free(active_all, held, n)
            if slots.size < n:
                stop = STOP_ERROR  # (checked before the tick: cannot happen)
                break
            top = start_routed(
                src, dst, size, ready, no_extra, host_s, tag, lane, cls, at, slots, lb_occ,
                *start_a, lb_drain, *start_b,
            )  # fmt: skip
            if top >= n_vls:
                stop = STOP_ERROR
                break
            if roce:  # (``RoceFlowControl.start_flows``: at the first hop's line rate)
                first_rate = np.empty(n)
                for i in range(n):
                    first_rate[i] = line_rate[path[0, slots[i]]]
                start_senders(slots, first_rate, senders)
            version += 1
            n_flows += n
            live_end = max(live_end, slots[n - 1] + 1)
            injected += flow_bytes
            batches += 1
        if stop == STOP_ERROR:
            break
        # -- 3. (fault tracking) the flows whose ACK timeout is up sent again
        # (``FlowTable.resend_due``); on RoCE, until routing knows of a dead link, what was
        # queued for it lost and its flows held for their ACK timeout (``recovery.track``'s
        # ``_blackhole``)
        if n_waiting > 0 and now >= next_resend_s - RESEND_EPS_S:
            n_due, last_due, next_resend_s = resend_due(
                resend_s, active_all, held, now + RESEND_EPS_S, next_resend_s
            )
            if n_due > 0:
                n_waiting -= n_due
                version += 1
                live_end = max(live_end, last_due + 1)
        if any_dead:
            resend_at = now + ack_timeout_s
            lost, lost_by_link, held_slots = lose_at_dead_links(
                path, active_all[:live_end], flow_table[FT_BACKLOG2D], rate2d, held, resend_s,
                dead, resend_at, link_book[LB_DISCARDS], flow_table[FT_RESEND_BYTES],
            )  # fmt: skip
            dropped += lost
            if held_slots.size > 0:
                n_waiting += held_slots.size
                next_resend_s = min(next_resend_s, resend_at)
                version += 1
                live_end = slots_live_end(active_all, live_end)
            for j in range(fault_ptr.size - 1):
                fault_lost[j] += numpy_sum(
                    lost_by_link[fault_links[fault_ptr[j] : fault_ptr[j + 1]]]
                )
        # -- 4. the index, rebuilt when the flows changed
        if index_version != version:
            built_buf, built_bounds = entry_index(
                path, vl, active_all[:live_end], link_rank, n_ranks, n_vls, link_slot, buf_slot
            )
            # (in ``groups.INDEX``'s order; copies of the two lists the next tick clears)
            b, at_ = built_buf, built_bounds
            index = (
                _part(b, at_, PART_POS), _part(b, at_, PART_HOP), _part(b, at_, PART_FLOW),
                _part(b, at_, PART_LINK), _part(b, at_, PART_QUEUE), _part(b, at_, PART_PREV),
                _part(b, at_, PART_NXT), _part(b, at_, PART_BUF), _part(b, at_, PART_DRAINS),
                _part(b, at_, PART_FIRST), _part(b, at_, PART_HEADS),
                _part(b, at_, PART_KEY_PTR), _part(b, at_, PART_USED_LINKS).copy(),
                _part(b, at_, PART_RANK_PTR), _part(b, at_, PART_LINK_PTR),
                _part(b, at_, PART_LENT), _part(b, at_, PART_ELINK),
                _part(b, at_, PART_USED_BUFS).copy(), _part(b, at_, PART_BUF_GROUP_PTR),
                _part(b, at_, PART_BUF_PTR), _part(b, at_, PART_BUF_ENT),
                _part(b, at_, PART_LANE_BUF), _part(b, at_, PART_FEEDFORWARD)[0] != 0,
                index[IX_PLACES], index[IX_KEYS_PER_RANK],
            )  # fmt: skip
            last = _part(b, at_, PART_LAST)
            last_flow = _part(b, at_, PART_LAST_FLOW)
            index_version = version
            n_entries = index[IX_POS].size
            if n_entries == 0:
                # (the index handed in was older than the last flows' end, and nothing
                # started: an idle tick, which Python passes. Its fault tracking may have
                # held the flows still in flight at a dead link: the caller writes that
                # back, and Python's step of the tick finds nothing more to lose)
                started -= 1
                stop = STOP_BEFORE
                break
            if not index[IX_FEEDFORWARD]:
                stop = STOP_ERROR  # (a generated topology's routes climb the ranks)
                break
        # -- 5-7. the rates, the bytes, the flow control: one tick of ``uneventful_ticks``
        # (tuples joined with ``+``: numba's reading of a loop cannot take ``(*a, b)``
        # into a name it had already)
        flow_table = (
            flow_table[:FT_ACTIVE]
            + (active_all[:live_end],)
            + flow_table[FT_AFTER_ACTIVE:FT_LIVE_END]
            + (live_end,)
        )
        link_book = (
            link_book[:LB_OCC]
            + (lb_occ, lb_drain)
            + link_book[LB_AFTER_DRAIN:LB_DQ_OPEN]
            + (dq_open,)
            + link_book[LB_AFTER_DQ_OPEN:LB_PAUSED]
            + (link_paused,)
        )
        solved = solved[:SV_S_STALE_LINKS] + (s_stale_l, s_stale_b, m_stale_l, m_stale_b)
        one = uneventful_ticks(
            1, np.inf, now, tick, epoch_tick, epoch_s, dt, delivered, dropped, *index,
            *flow_table, *link_book, *solved, *rest, rng, *profile,
        )  # fmt: skip
        delivered, dropped = one[RESULT_DELIVERED], one[RESULT_DROPPED]
        cnps += one[RESULT_CNPS]
        lb_occ = one[RESULT_OCCUPANCY]  # the move's, or PFC's after its drops
        lb_drain = drain_pad[: drain_pad.size - 1]
        dq_open = one[RESULT_DQ_OPEN]
        link_paused = one[RESULT_STARVED]
        s_stale_l = m_stale_l = index[IX_USED_LINKS]
        s_stale_b = m_stale_b = index[IX_USED_BUFS]
        hop_updates += n_entries
        if one[RESULT_STOP] == ONE_STOP_PFC:
            stop = STOP_REPORT  # a PFC watchdog fired or a sender is blocked: Python reports
            break
        # -- 8. the flows whose bytes have all arrived
        done = one[RESULT_DONE]
        if done.size > 0:
            for i in range(done.size):
                w = workload_of[done[i]]
                if w < 0 or (w != bulk_at and w != rpc_at and w != a_at):
                    stop = STOP_REPORT  # another workload's (or a fault's): Python
            if stop == STOP_REPORT:
                break
            whole, finish, rounding, end, filed = finish_flows(
                one[RESULT_RATE], level, alpha, finish_levels, index[IX_BUF_PAD],
                index[IX_FLOW], index[IX_PREV_PAD], last, last_flow, index[IX_USED_LINKS],
                index[IX_LINK_PTR], index[IX_LINK_ENT], index[IX_ENT_LINK], cap, done, now, dt,
                *finish_fixed, live_end, *class_hist, bounds_s,
            )  # fmt: skip
            if not filed:
                stop = STOP_ERROR
                break
            version += 1  # (``FlowTable.retired``: rows were freed)
            live_end = end
            n_flows -= whole.size
            delivered += rounding
            completed += whole.size
            for at in in_order:
                if at < 0:
                    continue
                k = 0
                for i in range(whole.size):
                    if workload_of[whole[i]] == at:
                        k += 1
                if k == 0:
                    continue
                heads = np.empty(k, dtype=np.intp)
                latency = np.empty(k)
                last_s = -np.inf  # the last to finish
                k = 0
                for i in range(whole.size):
                    if workload_of[whole[i]] == at:
                        heads[k] = whole[i]
                        latency[k] = finish[i] - flow_table[FT_START_S][whole[i]]
                        last_s = max(last_s, finish[i])
                        k += 1
                if at == bulk_at:
                    count_finished(b_in_flight, src_of[heads])
                    bulk_owed = True
                    bulk_delivered += numpy_sum(parent_size[heads])
                    _observe_many(b_counts, b_stats, b_ring, latency, bounds_s)
                elif at == rpc_at:
                    _observe_many(r_counts, r_stats, r_ring, latency, bounds_s)
                else:  # ``AllToAll.on_complete``: and a round's length once it is all in
                    a_left -= k
                    _observe_many(am_counts, am_stats, am_ring, latency, bounds_s)
                    if a_left == 0 and a_busy:
                        a_busy = False
                        a_last_round_s = last_s - a_round_start
                        _observe_many(
                            ar_counts, ar_stats, ar_ring, np.full(1, a_last_round_s), bounds_s
                        )
        # -- the tick's end (``Fabric._finish_tick``)
        tick += 1
        now = epoch_s + (tick - epoch_tick) * dt
    return (
        started, stop, t_start[:started], d_start[:started], now, delivered, dropped,
        injected, completed, hop_updates, n_flows, live_end, version, built_buf,
        built_bounds, index_version, one, (bulk_owed, bulk_seq, bulk_delivered),
        (rpc_seq, rpc_sent, rpc_next, rpc_last_s), r_t, r_at, r_u,
        (s_stale_l, s_stale_b, m_stale_l, m_stale_b), batches,
        (a_busy, a_left, a_round_start, a_next_s, a_last_round_s, a_round), cnps,
        (n_waiting, next_resend_s),
    )  # fmt: skip
