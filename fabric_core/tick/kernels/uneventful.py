"""Uneventful ticks in one call: the compiled tick's kernels, run tick after tick, with no
Python between them.

A tick in which no flow starts or ends, no command is due, no fault is open and no
PFC watchdog or deadlock needs reporting does nothing that needs Python: it is the
same kernels, in the same order, with the same arguments as ``Fabric.step`` calls
them one by one (``fabric_core.runtime.uneventful`` decides when ticks are uneventful
and writes back what this returns). Running them here saves the per-tick cost of
calling a dozen kernels from Python, which on a small fabric is most of a tick.

The results are those of ``Fabric.step`` bit for bit: the same operations on the same
arrays in the same order, and the same draws from the same generator (numba draws from a
``numpy.random.Generator`` with numpy's own algorithms and state).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import kernel
from fabric_core.tick.kernels.move import credit_wait, move_step
from fabric_core.tick.kernels.pfc import entry_caps, pfc_after_tick, pfc_limits, share_buffer
from fabric_core.tick.kernels.slots import start_limits
from fabric_core.tick.kernels.solve import credit_loop_fill, credit_room, solve_tick_serial

_F = NDArray[np.float64]
_I = NDArray[np.intp]
_B = NDArray[np.bool_]

#: ``uneventful_ticks``' reasons to stop, as it returns them
STOP_HORIZON = 0  # the next tick could be eventful (or the ticks asked for are run)
STOP_DONE = 1  # the last tick finished flows: Python completes them and the tick
STOP_PFC = 2  # the last tick fired a PFC watchdog or left a paused queue stopped (and
# may have finished flows too)


@kernel
def uneventful_ticks(
    most: int,
    horizon_s: float,
    now: float,
    tick: int,
    epoch_tick: int,
    epoch_s: float,
    dt: float,
    delivered: float,
    dropped: float,
    # the entry index (``EntryIndex`` and its ``IndexCsr``), the solve's buffer order
    pos: _I,
    hop: _I,
    flow: _I,
    link: _I,
    queue: _I,
    prev_pad: _I,
    nxt_pad: _I,
    buf_pad: _I,
    drains_pad: _I,
    first: _I,
    heads: _I,
    key_ptr: _I,
    used_links: _I,
    rank_ptr: _I,
    link_ptr: _I,
    link_ent: _I,
    ent_link: _I,
    used_bufs: _I,
    buf_group_ptr: _I,
    buf_ptr: _I,
    buf_ent: _I,
    lane_buf: _I,
    feedforward: bool,
    places: _I,
    keys_per_rank: int,
    # the flow table: flat per-hop backlog and rate, per slot, 2-D for routing's load, and
    # per slot the bytes owed a resend
    backlog_table: _F,
    rate_table: _F,
    delivered_f: _F,
    size: _F,
    start_s: _F,
    fixed_latency_s: _F,
    active: _B,
    path2d: NDArray[np.int32],
    backlog2d: NDArray[np.float64],
    hops: NDArray[np.int8],
    resend_bytes: _F,
    live_end: int,
    # the link book and the move's sums (in place), the counters (in place)
    link_rate: _F,
    occ_pad: _F,
    drain_pad: _F,
    inflow_pad: _F,
    lb_occ: _F,
    lb_drain: _F,
    buffer_bytes: _F,
    into_endpoint: _B,
    dq_open: _I,
    dq_seen: _B,
    dq_bytes: _F,
    dq_s: _F,
    dq_avg: _F,
    free: _F,
    credit_delay: _F,
    loop_bytes: _F,
    loop_at: _F,
    loop_share: _F,
    link_load_bytes: _F,
    track_load: bool,
    tx_bytes: _F,
    tx_packets: _F,
    retransmitted: _F,
    error_recovery: _F,
    symbol_errors: _F,
    transmit_wait: _F,
    discards: _F,
    pause_frames: _F,
    pause_seconds: _F,
    pause_frames_vl: _F,
    pause_seconds_vl: _F,
    ecn_marked: _F,
    cnp_handled: _F,
    link_paused: _B,
    # the solve's kept results (in place) and the links and buffers last written
    level: _F,
    share: _F,
    first_share: _F,
    alpha: _F,
    credit_level: _F,
    s_stale_links: _I,
    s_stale_bufs: _I,
    m_stale_links: _I,
    m_stale_bufs: _I,
    # the links as the faults leave them (none open), and their line rates
    cap: _F,
    goodput: _F,
    ber: _F,
    stormed: _B,
    to_endpoint: _B,
    line_rate: _F,
    roce: bool,
    # RoCE's PFC queues (in place; empty on a credit fabric)
    xoff: _F,
    xon: _F,
    reaction_s: _F,
    q_paused: _B,
    paused_since_s: _F,
    resume_s: _F,
    watchdog_until_s: _F,
    q_buffer: _F,
    frames_owed: _F,
    frames_sent: _F,
    switch_of: _I,
    pool: _F,
    share_alpha: float,
    q_mtu: float,
    headroom: _F,
    # RoCE's DCQCN senders, per flow slot (in place; empty on a credit fabric)
    rc: _F,
    rt: _F,
    dc_alpha: _F,
    since_cut_s: _F,
    since_alpha_s: _F,
    since_dec_s: _F,
    since_inc_s: _F,
    stage: _F,
    cwnd: _F,
    rng: np.random.Generator,
    # the profile
    mtu: float,
    n_vls: int,
    endless_room: float,
    kmin_s: float,
    kmax_s: float,
    pmax: float,
    refresh_fraction: float,
    watchdog_s: float,
    watchdog_recovery_s: float,
    dcqcn_params: _F,
    cc_mode: int,
    draws: bool,
    swift_target_s: float,
    swift_ai: float,
    swift_beta: float,
    swift_max_mdf: float,
) -> Any:
    """Run at most ``most`` ticks from ``now`` (tick number ``tick``), stopping before
    a tick whose start is within half a tick of ``horizon_s`` (the earliest time a
    workload, a scheduled command or a fault could act) and after a tick that needs
    Python (``STOP_DONE``, ``STOP_PFC``: that tick has run up to the end of its flow
    control, and Python finishes it).

    At least one entry is in flight (``Fabric`` passes idle ticks itself). The arrays are
    those ``Fabric.step`` hands the kernels, passed one by one (a call
    with tuples of arrays costs several times more to dispatch), in the groups
    ``fabric_core.runtime.uneventful`` builds them in.
    ``delivered`` and ``dropped`` are the fabric's totals so far, added to tick by tick
    as ``Fabric.step`` adds to them. Returns (ticks started, why it stopped, the start
    time of each tick started and the bytes delivered by then, the time after the last
    whole tick, the totals, the CNPs sent, and the last
    tick's: rates, new backlog, finished flows, queues whose watchdog fired, whether a
    paused queue's sender is stopped, the pause tick (send share, room, ignoring),
    occupancy, departure cycles under way and credit-starved links).
    """
    n = link.size
    n_bufs = occ_pad.size - 1
    t_start = np.empty(most)
    d_start = np.empty(most)
    cnps = 0
    blocked = False
    stop = STOP_HORIZON
    started = 0
    rate = np.zeros(n + 1)
    new_backlog = np.zeros(n)
    done = np.zeros(0, dtype=np.intp)
    fired = np.zeros(0, dtype=np.intp)
    send = np.zeros(0)
    room = np.zeros(0)
    ignoring = np.zeros(0, dtype=np.bool_)
    no_caps = np.zeros(0)  # the solve's entry caps when none has one
    starved = link_paused
    while started < most and now + 0.5 * dt < horizon_s:
        t_start[started] = now
        d_start[started] = delivered
        started += 1
        # 5. the rates, under PFC and DCQCN or under the credits
        backlog = backlog_table[pos]
        limit, late = start_limits(heads, flow, link, start_s, cap, n, now, dt)
        if roce:
            if share_alpha != 0.0:
                share_buffer(
                    switch_of, lb_occ, pool, share_alpha, q_mtu, headroom, xoff, xon, q_buffer
                )
            send, room, ignoring = pfc_limits(
                xoff, xon, reaction_s, q_paused, paused_since_s, resume_s,
                watchdog_until_s, lb_occ, lb_drain, cap, stormed, to_endpoint, now, dt,
            )  # fmt: skip
            entry_cap = entry_caps(send, queue, drains_pad, link, flow, heads, backlog, cap, rc)
            if late:
                entry_cap = np.minimum(entry_cap, limit)
            room_or_credits = room
        else:
            credit_room(
                used_bufs, buffer_bytes, lb_occ, into_endpoint, endless_room, free,
                credit_delay, loop_bytes, loop_at, loop_share, now, dt,
            )  # fmt: skip
            entry_cap = limit if late else no_caps
            room_or_credits = free
        rate = solve_tick_serial(
            link, ent_link, prev_pad, nxt_pad, first, hop, key_ptr, used_links, rank_ptr,
            link_ptr, link_ent, used_bufs, buf_group_ptr, buf_ptr, buf_ent, feedforward,
            places, keys_per_rank, 1, backlog, cap, room_or_credits, loop_share, dt, pos,
            rate_table, entry_cap,
            True, not roce, level, share, first_share, alpha, credit_level, s_stale_links,
            s_stale_bufs,
        )  # fmt: skip
        s_stale_links, s_stale_bufs = used_links, used_bufs
        # 6. bytes, buffers, counters
        new_backlog, arrival, got, done, dq_open = move_step(
            rate, prev_pad, nxt_pad, link, drains_pad, buf_pad, pos, flow, backlog,
            backlog_table, rate_table, delivered_f, size, dt, link_rate, occ_pad,
            drain_pad, inflow_pad, m_stale_links, m_stale_bufs, track_load, active, path2d,
            backlog2d, hops, link_load_bytes, used_bufs, dq_open, dq_seen, dq_bytes, dq_s,
            dq_avg, used_links, goodput, ber, roce, mtu, tx_bytes, tx_packets, retransmitted,
            error_recovery, symbol_errors, heads, resend_bytes,
        )  # fmt: skip
        m_stale_links, m_stale_bufs = used_links, used_bufs
        lb_occ = occ_pad[:n_bufs]
        lb_drain = drain_pad[:n_bufs]
        inflow = inflow_pad[:n_bufs]
        delivered += got
        # 7. PFC, ECN and DCQCN, or the waits for credit
        if roce:
            rand = rng.random(heads.size) if draws else np.zeros(0)
            lost, lb_occ, fired, blocked, n_cnp = pfc_after_tick(
                rate[:n], arrival, new_backlog, alpha, send, ignoring, stormed, rand, pos,
                hop, flow, link, queue, drains_pad, heads, inflow, lb_drain, backlog_table,
                lb_occ, line_rate, live_end, fixed_latency_s, q_buffer, xoff, xon,
                reaction_s, q_paused, paused_since_s, resume_s, watchdog_until_s,
                frames_owed, frames_sent, discards, resend_bytes, pause_frames,
                pause_seconds, pause_frames_vl, pause_seconds_vl, transmit_wait,
                ecn_marked, cnp_handled, link_paused, rc, rt, dc_alpha, since_cut_s,
                since_alpha_s, since_dec_s, since_inc_s, stage, cwnd, mtu, kmin_s,
                kmax_s, pmax, refresh_fraction, watchdog_s, watchdog_recovery_s,
                dcqcn_params, cc_mode, swift_target_s, swift_ai, swift_beta,
                swift_max_mdf, now, dt,
            )  # fmt: skip
            dropped += lost
            cnps += n_cnp
            if fired.size > 0 or blocked:
                stop = STOP_PFC
        else:
            credit_loop_fill(used_bufs, inflow, lb_drain, loop_share, loop_bytes)
            starved = np.zeros(transmit_wait.size, dtype=np.bool_)
            credit_wait(
                alpha, inflow, used_links, lane_buf, buf_ptr, buf_ent, new_backlog, n_vls,
                dt, transmit_wait, starved,
            )  # fmt: skip
        if done.size > 0 and stop == STOP_HORIZON:
            stop = STOP_DONE
        if stop != STOP_HORIZON:
            break
        # 8. the tick ends: its length as a product, as ``Fabric._finish_tick`` has it
        tick += 1
        now = epoch_s + (tick - epoch_tick) * dt
    return (
        started, stop, t_start[:started], d_start[:started], now, delivered, dropped,
        cnps, rate, new_backlog, done, fired, blocked, send, room, ignoring, lb_occ,
        dq_open, starved,
    )  # fmt: skip
