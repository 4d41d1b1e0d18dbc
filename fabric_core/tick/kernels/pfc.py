"""RoCEv2 flow control in the tick, compiled: PFC limits before the solve, then drops,
pause transitions, ECN marks, CNPs and DCQCN after it.

The rules and their sources are in ``fabric_core.tick.pfc`` (whose numpy functions stay
the reference); these kernels do the same per queue, per entry and per flow in one
pass each, so a RoCE tick costs a few calls instead of some sixty array operations.
Random draws (which flows' CNPs get through) are made by the caller with the
fabric's generator, in the reference's order, so both solvers see the same run.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.tick.kernels._jit import inline_kernel, kernel
from fabric_core.tick.pfc import (
    FRESH_SENDER,
    PAUSE_QUANTA,
    QUANTUM_BITS,
    SENDER_RC,
    SENDER_RT,
    STOP_EPS,
    SWIFT_MIN_RATE_FRACTION,
)
from fabric_core.tick.step import ENDLESS_ROOM_BYTES

_F = NDArray[np.float64]
_I = NDArray[np.intp]
_B = NDArray[np.bool_]


@kernel
def start_senders(slots: _I, line_rate_Bps: _F, senders: tuple[_F, ...]) -> None:
    """New flows' DCQCN senders in ``slots`` (``senders``: ``pfc.Dcqcn``'s arrays in the
    order of ``pfc.SENDER_FIELDS``) start fresh (``pfc.FRESH_SENDER``) at their first hop's
    line rate: ``pfc.Dcqcn.start`` per slot."""
    for i in range(slots.size):
        s = slots[i]
        for j in range(len(FRESH_SENDER)):
            senders[j][s] = FRESH_SENDER[j]
        senders[SENDER_RC][s] = line_rate_Bps[i]
        senders[SENDER_RT][s] = line_rate_Bps[i]


@kernel
def pfc_limits(
    xoff: _F,
    xon: _F,
    reaction_s: _F,
    paused: _B,
    paused_since_s: _F,
    resume_s: _F,
    watchdog_until_s: _F,
    occupancy: _F,
    drain_Bps: _F,
    link_cap_Bps: _F,
    forced: _B,
    to_endpoint: _B,
    now: float,
    dt: float,
) -> tuple[_F, _F, _B]:
    """Per queue: (share of the tick its sender may send, bytes it may still take,
    whether the watchdog ignores its pause); ``pfc.pause_limits``, with the room of a
    queue into a NIC unlimited (the NIC sinks at line rate)."""
    nq = occupancy.size
    send = np.empty(nq)
    room = np.empty(nq)
    ignoring = np.empty(nq, dtype=np.bool_)
    n_vls = nq // link_cap_Bps.size
    for li in range(link_cap_Bps.size):  # per link, then its lanes
        cap = link_cap_Bps[li]
        endpoint = to_endpoint[li]
        for q in range(li * n_vls, (li + 1) * n_vls):
            ignoring[q] = watchdog_until_s[q] >= now
            room[q] = max(xoff[q] + cap * reaction_s[q] - occupancy[q], 0.0)
            if paused[q]:
                to_xon = (
                    max(occupancy[q] - xon[q], 0.0) / drain_Bps[q] if drain_Bps[q] > 0 else np.inf
                )
                stop_in = paused_since_s[q] + reaction_s[q] - now  # the sender stops late
                before = min(max(stop_in / dt, 0.0), 1.0)
                after = min(max(1 - (to_xon + reaction_s[q]) / dt, 0.0), 1.0)
                send[q] = min(before + after, 1.0)
            else:  # resumes a reaction time after XON
                send[q] = min(max((now + dt - resume_s[q]) / dt, 0.0), 1.0)
            if forced[q]:
                send[q] = 0.0
            if ignoring[q]:
                send[q] = 1.0
                room[q] = ENDLESS_ROOM_BYTES
            if endpoint:
                room[q] = ENDLESS_ROOM_BYTES
    return send, room, ignoring


@kernel
def share_buffer(
    switch_of: _I,
    occupancy: _F,
    pool: _F,
    alpha: float,
    mtu: float,
    headroom: _F,
    xoff: _F,
    xon: _F,
    buffer: _F,
) -> None:
    """The shared buffer's thresholds for this tick, in place (``pfc.PfcQueues.share``):
    XOFF = alpha × the switch's pool still free, XON an MTU below, the drop limit the
    headroom above XOFF or above what the queue holds, whichever is higher."""
    used = np.zeros(pool.size)
    for q in range(switch_of.size):
        if switch_of[q] >= 0:
            used[switch_of[q]] += occupancy[q]
    for q in range(switch_of.size):
        w = switch_of[q]
        if w >= 0:
            x = alpha * max(pool[w] - used[w], 0.0)
            xoff[q] = x
            xon[q] = max(x - mtu, 0.0)
            buffer[q] = max(x, occupancy[q]) + headroom[q]


@kernel
def entry_caps(
    send: _F,
    queue: _I,
    drains_pad: _I,
    link: _I,
    flow: _I,
    heads: _I,
    backlog: _F,
    capacity: _F,
    dcqcn_rc: _F,
) -> _F:
    """The most each entry may carry this tick: its share of the tick times line rate,
    with head-of-line blocking (``pfc.hol_send_fraction``), the senders paced by DCQCN."""
    n = queue.size
    nq = send.size
    worst = np.ones(nq + 1)  # per queue: the least share of any flow holding bytes in it
    for e in range(n):
        up = drains_pad[e]
        if up < nq and backlog[e] > 0:
            worst[up] = min(worst[up], send[queue[e]])
    cap = np.empty(n)
    for e in range(n):
        cap[e] = min(send[queue[e]], worst[drains_pad[e]]) * capacity[link[e]]
    for e in heads:
        cap[e] = min(cap[e], dcqcn_rc[flow[e]])
    return cap


@kernel
def pfc_after_tick(
    # the tick: per entry, then the index
    rate: _F,
    arrival: _F,
    new_backlog: _F,
    alpha: _F,
    send: _F,
    ignoring: _B,
    forced: _B,
    rand: _F,
    pos: _I,
    hop: _I,
    flow: _I,
    link: _I,
    queue: _I,
    drains_pad: _I,
    heads: _I,
    inflow: _F,
    drain: _F,
    backlog_table: _F,
    occupancy: _F,
    line_rate_Bps: _F,
    n_slots: int,  # the flow slots in use (``live_end``): every entry's flow is below it
    fixed_latency_s: _F,
    # PFC queues (in place)
    buffer: _F,
    xoff: _F,
    xon: _F,
    reaction_s: _F,
    paused: _B,
    paused_since_s: _F,
    resume_s: _F,
    watchdog_until_s: _F,
    frames_owed: _F,
    frames_sent: _F,
    # per-link counters (in place), and per flow slot the bytes at the source owed a
    # resend (``FlowTable.resend_bytes``, in place: go-back-N's, counted as they are sent)
    discards: _F,
    resend_bytes: _F,
    pause_frames: _F,
    pause_seconds: _F,
    pause_frames_vl: _F,
    pause_seconds_vl: _F,
    transmit_wait: _F,
    ecn_marked: _F,
    cnp_handled: _F,
    link_paused: _B,
    # DCQCN senders, per flow slot (in place)
    rc: _F,
    rt: _F,
    dc_alpha: _F,
    since_cut_s: _F,
    since_alpha_s: _F,
    since_dec_s: _F,
    since_inc_s: _F,
    stage: _F,
    cwnd: _F,
    # the profile
    mtu: float,
    kmin_s: float,
    kmax_s: float,
    pmax: float,
    refresh_fraction: float,
    watchdog_s: float,
    watchdog_recovery_s: float,
    dcqcn: _F,
    cc_mode: int,
    swift_target_s: float,
    swift_ai: float,
    swift_beta: float,
    swift_max_mdf: float,
    now: float,
    dt: float,
) -> tuple[float, _F, _I, bool, int]:
    """What follows a RoCE tick once bytes have moved (``roce.RoceFlowControl.after_tick``):

    1. bytes past a queue's buffer are dropped from this tick's arrivals, in
       proportion, and the senders go back N from their first byte lost
       (``roce.go_back_n``);
    2. pause time and frames from the tick's rates (``pfc.pause_accounting``), pause
       transitions and the watchdog (``pfc.update_pause``), counters;
    3. ECN marks by the egress queue of the port;
    4. the senders' congestion control (``cc_mode``, ``roce.CC_MODES``): for DCQCN at
       most one CNP per flow and interval (``rand``: one uniform draw per head entry),
       its cut and recovery (``pfc.Dcqcn.update``); for Swift its AIMD on the flow's
       queueing delay (``pfc.swift_update``); for none, nothing.

    Returns (bytes dropped, occupancy after drops, queues whose watchdog fired,
    whether any queue is paused with its sender stopped (a deadlock candidate),
    CNPs sent).
    """
    n = rate.size
    nq = occupancy.size
    n_links = pause_frames.size
    V = nq // n_links
    # 1. overflow: what does not fit is dropped from this tick's arrivals
    dropped = 0.0
    overflow = False
    for q in range(nq):
        if occupancy[q] - buffer[q] > 1e-9:
            overflow = True
            break
    if overflow:
        total_arrived = np.zeros(nq + 1)
        for e in range(n):
            total_arrived[drains_pad[e]] += arrival[e] * dt
        share = np.zeros(n)
        resent = np.zeros(n_slots)
        # per slot its furthest hop with a drop: its first byte lost (``roce.go_back_n``)
        drop_hop = np.full(n_slots, -1, dtype=np.intp)
        for e in range(n):
            up = drains_pad[e]
            if up < nq and total_arrived[up] > 0:
                # only what arrives is dropped (admission at enqueue)
                excess = min(max(occupancy[up] - buffer[up], 0.0), total_arrived[up])
                share[e] = min(excess * (arrival[e] * dt) / total_arrived[up], new_backlog[e])
            new_backlog[e] -= share[e]
            resent[flow[e]] += share[e]
            if share[e] > 0:
                drop_hop[flow[e]] = max(drop_hop[flow[e]], hop[e])
        # go-back-N from the first byte lost: what is past it arrives; what the flow has
        # between its source and it was sent after it, which the receiver discards
        for e in range(n):
            if 0 < hop[e] < drop_hop[flow[e]]:
                resent[flow[e]] += new_backlog[e]
                new_backlog[e] = 0.0
        for e in heads:
            new_backlog[e] += resent[flow[e]]
            resend_bytes[flow[e]] += resent[flow[e]]
        occupancy = np.zeros(nq + 1)
        for e in range(n):
            backlog_table[pos[e]] = new_backlog[e]
            up = drains_pad[e]
            if up < nq:
                discards[up // V] += share[e]
            dropped += share[e]
            occupancy[up] += new_backlog[e]
        occupancy = occupancy[:nq]
    # 2. pause time and frames from this tick's rates (``pfc.pause_accounting``), then the
    # transitions and the watchdog (``pfc.update_pause``); frames are received by the
    # link's sender
    fired = np.empty(nq, dtype=np.intp)
    n_fired = 0
    blocked = False
    for li in range(n_links):
        link_paused[li] = False
        worst_stop = 0.0
        stopped_sum = 0.0
        lr = line_rate_Bps[li]
        for v in range(V):
            q = li * V + v
            sending = send[q] * alpha[q]
            if (
                sending > 1 - STOP_EPS
                and not paused[q]
                and not forced[q]
                and alpha[q] >= 1 - 1e-9
                and occupancy[q] <= xoff[q]
            ):
                # the usual queue: it sent all the tick and does not pause, so there is
                # nothing to count and no transition (the steps below would add zeros)
                frames_owed[q] = frames_sent[q]
                continue
            stopped = 0.0 if sending > 1 - STOP_EPS else min(max(1 - sending, 0.0), 1.0)
            frames = 0.0
            if stopped > 0:  # (the usual queue sends all the tick: nothing to count)
                refresh = refresh_fraction * PAUSE_QUANTA * QUANTUM_BITS / (8.0 * lr)
                a_rate = inflow[q] / sending if sending > 0 and inflow[q] > 0 else lr
                hysteresis = xoff[q] - xon[q] + a_rate * reaction_s[q]
                cycles = drain[q] > 0 and a_rate > drain[q]  # else no new pause: refreshes
                pause_s = max(hysteresis / drain[q] if cycles else np.inf, 1e-9)
                if np.isfinite(pause_s):
                    per_stopped_s = (1 + np.floor(pause_s / refresh)) / pause_s
                else:
                    per_stopped_s = 1 / refresh
                frames_owed[q] += stopped * dt * per_stopped_s
                sent = np.ceil(frames_owed[q] - 1e-9)
                frames = sent - frames_sent[q]
                frames_sent[q] = sent
            elif not paused[q]:
                frames_owed[q] = frames_sent[q]
            hit = alpha[q] < 1 - 1e-9 and not ignoring[q]
            start = (hit or occupancy[q] > xoff[q] or forced[q]) and not paused[q]
            stop = paused[q] and occupancy[q] <= xon[q] and not forced[q] and not hit
            paused[q] = (paused[q] or start) and not stop
            if start:  # at the XOFF crossing, found inside the tick from the net rate
                rise = (inflow[q] - drain[q]) * dt
                into = (xoff[q] - (occupancy[q] - rise)) / rise if rise > 0 else 0.0
                paused_since_s[q] = now + min(max(into, 0.0), 1.0) * dt
            if stop:  # the sender resumes a reaction time after the XON crossing
                fall = (drain[q] - inflow[q]) * dt
                above = ((occupancy[q] + fall) - xon[q]) / fall if fall > 0 else 0.0
                resume_s[q] = now + min(max(above, 0.0), 1.0) * dt + reaction_s[q]
            if paused[q] and now - paused_since_s[q] >= watchdog_s and watchdog_until_s[q] < now:
                watchdog_until_s[q] = now + watchdog_recovery_s
                paused_since_s[q] = now + watchdog_recovery_s
                fired[n_fired] = q
                n_fired += 1
            pause_frames[li] += frames
            pause_seconds_vl[q] += stopped * dt
            pause_frames_vl[q] += frames
            worst_stop = max(worst_stop, stopped)
            stopped_sum += stopped
            link_paused[li] = link_paused[li] or paused[q]
            blocked = blocked or (send[q] <= 0 and paused[q])
        pause_seconds[li] += stopped_sum * dt
        transmit_wait[li] += worst_stop * dt
    # 3. ECN by the egress queue of the port a packet leaves (``pfc.egress_bytes``); bytes
    # leaving a NIC are not marked
    egress = np.zeros(nq)
    for e in range(n):
        if drains_pad[e] < nq:
            egress[queue[e]] += new_backlog[e]
    unmarked = np.zeros(n_slots)
    for e in range(n):
        p = 0.0
        if drains_pad[e] < nq:
            occ = egress[queue[e]]
            kmin = kmin_s * line_rate_Bps[link[e]]
            kmax = kmax_s * line_rate_Bps[link[e]]
            if occ <= kmin:
                p = 0.0
            elif occ >= kmax:
                p = 1.0
            else:
                p = pmax * (occ - kmin) / max(kmax - kmin, 1e-9)
        if p > 0:  # (most packets meet a short queue: log1p(-0) adds nothing)
            ecn_marked[link[e]] += rate[e] * dt / mtu * p
            unmarked[flow[e]] += np.log1p(-min(p, 1 - 1e-12))
    n_cnp = 0
    if cc_mode == 1:
        for i in range(heads.size):
            e = heads[i]
            f = flow[e]
            (
                rc[f], rt[f], dc_alpha[f], since_alpha_s[f], since_dec_s[f], since_inc_s[f],
                stage[f], cuts,
            ) = _dcqcn_update(
                unmarked[f], rate[e] / mtu, line_rate_Bps[link[e]], rand[i], rc[f], rt[f],
                dc_alpha[f], since_alpha_s[f], since_dec_s[f], since_inc_s[f], stage[f],
                dcqcn, dt,
            )  # fmt: skip
            cnp_handled[link[e]] += cuts
            n_cnp += cuts
    elif cc_mode == 2:
        delay = np.zeros(n_slots)  # per flow: the egress queues ahead, over their speed
        for e in range(n):
            if drains_pad[e] < nq:
                delay[flow[e]] += egress[queue[e]] / line_rate_Bps[link[e]]
        for e in heads:  # Swift's window (``pfc.swift_update``)
            f = flow[e]
            line = line_rate_Bps[link[e]]
            base_rtt = 2 * fixed_latency_s[f]
            rtt = base_rtt + delay[f]
            w = cwnd[f] if cwnd[f] > 0 else line * base_rtt
            since = since_cut_s[f] + dt
            if delay[f] > swift_target_s:
                if since >= rtt:
                    cut = 1 - swift_beta * (delay[f] - swift_target_s) / max(delay[f], 1e-15)
                    w *= max(cut, 1 - swift_max_mdf)
                    since = 0.0
            else:
                w += swift_ai * mtu * (dt / rtt)
            w = min(w, line * rtt)
            cwnd[f] = w
            rc[f] = min(max(w / rtt, line * SWIFT_MIN_RATE_FRACTION), line)
            since_cut_s[f] = since
    return dropped, occupancy, fired[:n_fired], blocked, n_cnp


#: ``dcqcn_params``' layout, as the kernel reads it
_G, _T_ALPHA, _T_DEC, _T_INC, _F_STEPS, _AI, _HAI, _MIN_RATE, _CLAMP, _CNP_INTERVAL = range(10)


def dcqcn_params(p: Profile) -> _F:
    """A profile's DCQCN parameters packed for the kernel (``pfc.Dcqcn``)."""
    return np.array(
        [
            p.dcqcn_g,
            p.dcqcn_alpha_interval_s,
            p.dcqcn_decrease_interval_s,
            p.dcqcn_timer_s,
            float(p.dcqcn_fast_recovery_steps),
            p.dcqcn_ai_at_25g_Bps,
            p.dcqcn_hai_at_25g_Bps,
            p.dcqcn_min_rate_Bps,
            float(p.dcqcn_clamp_target),
            p.cnp_interval_s,
        ]
    )


@kernel
def _feedback_probability(
    log_unmarked: float, pps: float, interval_s: float, cnp_interval_s: float
) -> float:
    """``pfc.feedback_probability`` for one sender."""
    q: float = -np.expm1(log_unmarked * pps * interval_s)
    if cnp_interval_s > interval_s:
        q *= interval_s / cnp_interval_s
    return q


@kernel
def _binomial_draw(trials: int, prob: float, u: float) -> int:
    """``pfc.binomial_draw`` for one sender."""
    if prob >= 1.0:
        return trials
    term = (1.0 - prob) ** trials
    cum = term
    ratio = prob / max(1.0 - prob, 1e-300)
    k = 0
    for j in range(trials):
        if u < cum:
            break
        k += 1
        term = term * (trials - j) / (j + 1) * ratio
        cum += term
    return k


@inline_kernel
def _dcqcn_update(
    log_unmarked: float,
    pps: float,
    line_rate: float,
    u: float,
    r_c: float,
    r_t: float,
    al: float,
    since_alpha_s: float,
    since_dec_s: float,
    s_inc: float,
    st: float,
    prm: _F,
    dt: float,
) -> tuple[float, float, float, float, float, float, float, int]:
    """One tick of one DCQCN sender (``pfc.Dcqcn.update``): alpha's updates, the
    decrease checks that find feedback, then the increase events.

    Takes the sender's state (current and target rate, alpha, the time into its alpha
    and decrease intervals, into its increase timer (negative: not started) and its
    stage) and returns the new one, then the cuts: numbers, not the state's arrays, which
    in this per-sender loop numba counted up and down on every call (an MoE burst's PFC
    kernel took 438 µs instead of 135; ``departure.departure_rate``)."""
    g = prm[_G]
    ta, td, ti = prm[_T_ALPHA], prm[_T_DEC], prm[_T_INC]
    started = s_inc >= 0
    sa, sd = since_alpha_s + dt, since_dec_s + dt
    k_a, k_d = np.floor(sa / ta), np.floor(sd / td)
    sa -= k_a * ta
    sd -= k_d * td
    # Two shortcuts, exact: inside an alpha interval (k_a = 0) the decay is 1 and alpha
    # stays as it is; with no packet marked this tick (log_unmarked = 0) the feedback
    # probability is 0 and the draw gives no cut. They spare those senders an expm1 and
    # a pow each (an MoE burst, whose senders are mostly marked, gains 7 %).
    if started and k_a > 0:
        decay = (1 - g) ** k_a
        al = decay * al + _feedback_probability(log_unmarked, pps, ta, prm[_CNP_INTERVAL]) * (
            1 - decay
        )
    cuts = 0
    if log_unmarked < 0:
        q_d = _feedback_probability(log_unmarked, pps, td, prm[_CNP_INTERVAL])
        cuts = _binomial_draw(int(k_d), q_d, u)
    if cuts > 0:
        if not started:
            al = 1.0
        clamp = prm[_CLAMP] > 0
        if clamp or st != 0:
            r_t = r_c
        if clamp:
            r_t = r_c * (1 - al / 2) ** (cuts - 1)
        r_c = max(r_c * (1 - al / 2) ** cuts, prm[_MIN_RATE])
        st = 0.0
        s_inc = sd
    elif started:
        s_inc += dt
    if s_inc >= 0:
        k_i = np.floor(s_inc / ti)
        s_inc -= k_i * ti
        scale = line_rate / 25e9 * 8
        fr = prm[_F_STEPS]
        for _ in range(int(min(k_i, 64))):
            if st == fr:
                r_t = min(r_t + scale * prm[_AI], line_rate)
            elif st > fr:
                r_t = min(r_t + scale * prm[_HAI], line_rate)
            r_c = (r_t + r_c) / 2
            st += 1
    return min(r_c, line_rate), r_t, al, sa, sd, s_inc, st, cuts
