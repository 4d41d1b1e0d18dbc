"""Ticks at once: the fabric runs its uneventful ticks in one compiled call.

A tick is uneventful when nothing in it needs Python: no flow starts (every workload
says it is quiet until later, ``Workload.quiet_until``), no command is due, no fault
is open or being recovered from, no flow waits to be resent, and the solve is the
serial one (fewer than ``PARALLEL_FROM_ENTRIES`` entries; the faster-of-two choice
times the solves from Python). Its kernels then run back to back in
``kernels.uneventful.uneventful_ticks``, which stops before the next tick that could be
eventful and after a tick that finishes flows or has a PFC watchdog or deadlock to
report; ``Fabric.step`` is not called for those ticks, and this module writes back what
it would have left: the link book, the solution, the tick and time, the throughput
window and the delivered-bytes history. The ticks' results are the same bit for bit
(``tests/test_uneventful.py`` holds a fabric run this way to one run tick by tick).

What it saves is the per-tick cost of calling a dozen kernels from Python: most of a
small fabric's tick (``benchmarks/bench_core.py``, ``incast-100g``), and all but nothing
of a busy one's, whose flows start and end every tick.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.routing import MAX_HOPS
from fabric_core.tick.lazy import LazyModule
from fabric_core.tick.pfc import PauseTick
from fabric_core.tick.roce import CC_MODES
from fabric_core.tick.step import ENDLESS_ROOM_BYTES, EntryIndex, Solution

if TYPE_CHECKING:
    from fabric_core.runtime.fabric import Fabric
    from fabric_core.tick.kernels import tick as tick_kernels
    from fabric_core.tick.kernels import uneventful as uneventful_kernels
    from fabric_core.tick.kernels.tick import CompiledTick
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    tick_kernels = LazyModule("fabric_core.tick.kernels.tick")
    uneventful_kernels = LazyModule("fabric_core.tick.kernels.uneventful")

F64 = NDArray[np.float64]

#: a fabric whose ticks run one by one (tests and benchmarks compare the two)
ENABLED = True
#: the fewest ticks worth a call: calling the kernel costs about what a small fabric's
#: tick does (some 20 us to hand it its 140 arguments, as much again to gather them)
MIN_TICKS = 3
#: the most ticks to one call (the call keeps a start time and a byte count per tick)
MOST_TICKS = 1 << 16


def horizon_s(fabric: Fabric) -> float:
    """The earliest time a workload or a scheduled command could act."""
    now, dt = fabric.sim_time_s, fabric.dt_s
    first = min((wl.quiet_until(now, dt) for wl in fabric.workloads), default=np.inf)
    if fabric.schedule:
        first = min(first, fabric.schedule[0][0])
    return float(first)


def run(fabric: Fabric, most: int) -> int:
    """Run up to ``most`` uneventful ticks in one compiled call; returns how many ran (0
    when the next tick may be eventful: the caller steps it)."""
    layout = fabric._tick
    f = fabric
    most = min(most, MOST_TICKS)
    if (
        not ENABLED
        or most < MIN_TICKS
        or fabric.solver != "compiled"
        or f.ibcc is not None
        or not f.faults.settled()
        or f.flows.n_waiting
    ):
        return 0
    status, goodput, cap, stormed = f._link_conditions()
    if f.faults.seen_status is not status or stormed.any():
        return 0
    horizon = horizon_s(f)
    if f.sim_time_s + 0.5 * f.dt_s >= horizon:
        return 0
    idx = f._current_index()
    if idx.size == 0:
        return _run_idle(f, most, horizon)
    assert isinstance(layout, tick_kernels.CompiledTick)
    if (
        idx.size >= tick_kernels.PARALLEL_FROM_ENTRIES
        or not layout._sums
        or not layout._solved
        or (f.roce is None and not layout._free)
    ):
        return 0
    return _run(f, layout, idx, most, horizon, goodput, cap, stormed)


def _run_idle(f: Fabric, most: int, horizon: float) -> int:
    """Ticks with nothing in flight: only the time passes (``Fabric.step``'s early
    return), worked out for all of them at once."""
    dt = f.dt_s
    ticks = f.tick + np.arange(most + 1)
    # each tick's start, as ``Fabric._finish_tick`` has it (the first is the present)
    starts = f._epoch_s + (ticks - f._epoch_tick) * dt
    starts[0] = f.sim_time_s
    n = int(np.count_nonzero(starts[:most] + 0.5 * dt < horizon))
    if n == 0:
        return 0
    f.link_book.link_rate[:] = 0.0
    delivered = f.delivered_bytes
    _extend(f.faults.delivered_history, starts[:n], np.full(n, delivered))
    _extend(f._window, starts[1 : n + 1], np.full(n, delivered))
    f.tick += n
    f.sim_time_s = float(starts[n])
    return n


def _run(
    f: Fabric,
    layout: CompiledTick,
    idx: EntryIndex,
    most: int,
    horizon: float,
    goodput: F64,
    cap: F64,
    stormed: NDArray[np.bool_],
) -> int:
    fl, lb, p = f.flows, f.link_book, f.profile
    csr = idx.csr
    c = lb.counters
    dt = f.dt_s
    places = layout.buffer_places() if not idx.feedforward else np.zeros(0, dtype=np.intp)
    index = (
        idx.pos, idx.hop, idx.flow, idx.link, idx.queue, idx.prev_pad, idx.nxt_pad,
        idx.buf_pad, idx.drains_pad, idx.first, idx.heads, csr.key_ptr, csr.used_links,
        csr.rank_ptr, csr.link_ptr, csr.link_ent, csr.ent_link, csr.used_bufs,
        csr.buf_group_ptr, csr.buf_ptr, csr.buf_ent, csr.lane_buf, idx.feedforward, places,
        2 * layout.n_vls,
    )  # fmt: skip
    flows = (
        fl.backlog.reshape(-1), fl.rate.reshape(-1), fl.delivered, fl.size, fl.start_s,
        fl.fixed_latency_s, fl.active[: fl.live_end], fl.path, fl.backlog, fl.hops,
        fl.live_end,
    )  # fmt: skip
    link_rate, occ_pad, drain_pad, inflow_pad = layout._sums
    free = layout._free[0] if layout._free else np.zeros(0)
    links = (
        link_rate, occ_pad, drain_pad, inflow_pad, lb.link_rate, lb.occupancy,
        lb.buffer_drain, lb.buffer_bytes, f._endpoint_queues, lb.dq_open, lb.dq_seen,
        lb.dq_bytes, lb.dq_s, lb.dq_avg_Bps, free, layout.link_load_bytes,
        layout.track_load, c["tx_bytes_total"], c["tx_packets_total"],
        c["retransmitted_bytes_total"], c["link_error_recovery_total"],
        c["symbol_errors_total"], c["transmit_wait_seconds_total"], c["discards_bytes_total"],
        c["pause_frames_total"], c["pause_seconds_total"],
        lb.pause_vl["pause_frames_vl_total"].reshape(-1),
        lb.pause_vl["pause_seconds_vl_total"].reshape(-1), c["ecn_marked_packets_total"],
        c["cnp_handled_total"], lb.paused,
    )  # fmt: skip
    level, share, first_share, alpha = layout._solved
    solved = (level, share, first_share, alpha, *layout._solved_stale, *layout._stale)
    conditions = (cap, goodput, f.faults.ber, stormed, f.to_endpoint, f.topo.links.bandwidth_Bps)
    roce = f.roce
    if roce is not None:
        q, dc = roce.pfc, roce.dcqcn
        pfc = (
            q.xoff, q.xon, q.reaction_s, q.paused, q.paused_since_s, q.resume_s,
            q.watchdog_until_s, q.buffer, q.frames_owed, q.frames_sent, q.switch_of,
            q.shared_pool, float(q.alpha), float(q.mtu), q.headroom,
        )  # fmt: skip
        dcqcn = (
            dc.rc, dc.rt, dc.alpha, dc.since_cut_s, dc.since_alpha_s, dc.since_dec_s,
            dc.since_inc_s, dc.stage, dc.cwnd,
        )  # fmt: skip
        dcqcn_params = roce._dcqcn_params(p)
    else:  # (not read on a credit fabric; typed as on RoCE)
        e, ei, eb = np.zeros(0), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.bool_)
        pfc = (e, e, e, eb, e, e, e, e, e, e, ei, e, 0.0, 0.0, e)
        dcqcn = (e,) * 9
        dcqcn_params = e
    cc = CC_MODES[p.congestion_control]
    scalars = (
        float(p.mtu_bytes), f.n_vls, ENDLESS_ROOM_BYTES, p.ecn_kmin_s, p.ecn_kmax_s,
        p.ecn_pmax, p.pfc_refresh_fraction, p.pfc_watchdog_s, p.pfc_watchdog_recovery_s,
        dcqcn_params, cc, cc == CC_MODES["dcqcn"], p.swift_target_delay_s,
        float(p.swift_ai_packets), p.swift_beta, p.swift_max_mdf, MAX_HOPS,
    )  # fmt: skip
    args: list[Any] = [
        most, horizon, f.sim_time_s, f.tick, f._epoch_tick, f._epoch_s, dt,
        f.delivered_bytes, f.dropped_bytes, *index, *flows, *links, *solved,
        *conditions, roce is not None, *pfc, *dcqcn, f.rng, *scalars,
    ]  # fmt: skip
    (
        started,
        stop,
        t_start,
        d_start,
        end_s,
        delivered,
        dropped,
        cnps,
        moved,
        rate,
        new_backlog,
        done,
        fired,
        blocked,
        send,
        room,
        ignoring,
        occupancy,
        dq_open,
        starved,
    ) = uneventful_kernels.uneventful_ticks(*args)
    started = int(started)
    if started == 0:
        return 0
    whole = started if stop == uneventful_kernels.STOP_HORIZON else started - 1
    # what the ticks' Python would have kept: the history each tick's fault tracking
    # appends at its start, the window each whole tick appends at its end
    _extend(f.faults.delivered_history, t_start, d_start)
    _extend(
        f._window, np.append(t_start[1:], end_s)[:whole], np.append(d_start[1:], delivered)[:whole]
    )
    f.delivered_bytes = delivered
    f.dropped_bytes = dropped
    f.hop_updates += idx.size * started
    f.tick += whole
    f.sim_time_s = float(end_s)
    if moved:
        lb.link_rate = link_rate
        lb.occupancy = occupancy if roce is not None else occ_pad[: lb.occupancy.size]
        lb.buffer_drain = drain_pad[: lb.buffer_drain.size]
        lb.dq_open = dq_open
        layout._stale[:] = [csr.used_links, csr.used_bufs]
        layout._solved_stale[:] = [csr.used_links, csr.used_bufs]
        f.solution = Solution(padded=rate, level=level, alpha=alpha, share=first_share)
        if roce is not None:
            roce.dcqcn.cnps_total += cnps
            roce._pause = PauseTick(send_fraction=send, room_bytes=room, ignoring=ignoring)
            if whole:  # a tick with no paused queue stopped clears the deadlock watch
                roce._deadlock_set = frozenset()
        else:
            lb.paused = starved
    if stop == uneventful_kernels.STOP_HORIZON:
        return started
    # the last tick needs Python: what Fabric.step does after the flow control
    now = float(end_s)
    if roce is not None:
        roce.report_after_tick(f, idx, new_backlog, fired, blocked)
    if done.size:
        sol = f.solution
        assert sol is not None
        f._complete(idx, sol, cap, done, now, dt)
    f._finish_tick(f.faults.seen_status, dt)
    return started


def _extend(record: deque[tuple[float, float]], times: NDArray[Any], values: NDArray[Any]) -> None:
    """Append (time, value) pairs to ``record``, only as many as it keeps."""
    keep = -(record.maxlen or times.size)
    record.extend(zip(times[keep:].tolist(), values[keep:].tolist(), strict=True))
