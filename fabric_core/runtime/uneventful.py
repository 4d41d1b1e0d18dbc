"""Ticks at once: a fabric's uneventful ticks in one compiled call.

A tick is uneventful when nothing in it needs Python: no flow starts (every workload
says it is quiet until later, ``Workload.quiet_until``), no command is due, no fault
is open or being recovered from (but links or switches down that are behind their
whole timeline, on a credit fabric: ``Fabric._faults_at_rest``), no flow waits to be
resent, and the solve is the serial one (fewer than ``PARALLEL_FROM_ENTRIES`` entries;
the faster-of-two choice times the solves from Python). ``Fabric.run_ticks`` decides that
(``Fabric._run_uneventful``); its kernels then run back to back in
``kernels.uneventful.uneventful_ticks``, which stops before the next tick that could be
eventful and after a tick that finishes flows or has a PFC watchdog or deadlock to
report; ``Fabric.step`` is not called for those ticks, and the fabric writes back what it
would have left: the link book, the solution, the tick and time, the throughput window
and the delivered-bytes history. This module hands the kernel its arguments from the
fabric's parts and reads what it returns. The ticks' results are the same bit for bit
(``tests/test_uneventful.py`` holds a fabric run this way to one run tick by tick).

What it saves is the per-tick cost of calling a dozen kernels from Python: most of a
small fabric's tick (``benchmarks/bench_core.py``, ``incast-100g``), and all but nothing
of a busy one's, whose flows start and end every tick.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.tick.flows import FlowTable
from fabric_core.tick.kernels import groups
from fabric_core.tick.lazy import LazyModule
from fabric_core.tick.links import LinkBook
from fabric_core.tick.pfc import SENDER_FIELDS, PauseTick
from fabric_core.tick.roce import CC_MODES, RoceFlowControl
from fabric_core.tick.step import ENDLESS_ROOM_BYTES, EntryIndex

if TYPE_CHECKING:
    from fabric_core.tick.kernels import uneventful as uneventful_kernels
    from fabric_core.tick.kernels.tick import CompiledTick
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    uneventful_kernels = LazyModule("fabric_core.tick.kernels.uneventful")

F64 = NDArray[np.float64]

#: a fabric whose ticks run one by one (tests and benchmarks compare the two)
ENABLED = True
#: the fewest ticks worth a call: calling the kernel costs about what a small fabric's
#: tick does (some 20 us to hand it its 140 arguments, as much again to gather them)
MIN_TICKS = 3
#: the most ticks to one call (the call keeps a start time and a byte count per tick)
MOST_TICKS = 1 << 16
#: while this returns True the ticks run one by one and new flows start step by step:
#: another process is still compiling the kernels that do them at once into the cache
#: (the first run after an install, ``kernels.warmup.DEFERRABLE``), and calling one here
#: would compile it a second time
held_back: Callable[[], bool] | None = None


def waiting_for_kernel() -> bool:
    """Whether ``held_back`` still holds the deferred kernels back, the ticks-at-once ones
    and the one-call start (and forget it once it does not)."""
    global held_back
    if held_back is None:
        return False
    if held_back():
        return True
    held_back = None
    return False


class KernelGroups(NamedTuple):
    """``kernels.uneventful.uneventful_ticks``' arguments in the groups they come in: the
    clock and totals (``head``), the entry index, the flow table, the link book, the
    solve's kept results, the links' state with RoCE's queues and senders (``rest``), the
    fabric's generator and the profile's figures. ``kernels.busy.busy_ticks`` takes them
    as groups (the generator apart: numba types a tuple that holds one in Python, element
    by element, 0.6 ms a call where it is numba's own ``typeof`` otherwise)."""

    head: tuple[Any, ...]
    entries: tuple[Any, ...]
    flow_table: tuple[Any, ...]
    link_book: tuple[Any, ...]
    solved: tuple[Any, ...]
    rest: tuple[Any, ...]
    rng: np.random.Generator
    profile: tuple[Any, ...]

    def flat(self) -> list[Any]:
        """The arguments one after the other, as ``uneventful_ticks`` takes them."""
        return [
            *self.head, *self.entries, *self.flow_table, *self.link_book, *self.solved,
            *self.rest, self.rng, *self.profile,
        ]  # fmt: skip


def kernel_groups(
    *,
    most: int,
    horizon_s: float,
    clock: tuple[float, int, int, float, float],
    totals: tuple[float, float],
    idx: EntryIndex,
    layout: CompiledTick,
    flows: FlowTable,
    links: LinkBook,
    cap: F64,
    goodput: F64,
    stormed: NDArray[np.bool_],
    ber: F64,
    to_endpoint: NDArray[np.bool_],
    endpoint_queues: NDArray[np.bool_],
    bandwidth_Bps: F64,
    roce: RoceFlowControl | None,
    profile: Profile,
    n_vls: int,
    rng: np.random.Generator,
) -> KernelGroups:
    """``kernels.uneventful.uneventful_ticks``' arguments, in its order and groups: the arrays
    ``Fabric.step`` hands the kernels, from the fabric's parts (``clock``: now, the tick,
    the tick and time the tick length took over at, the tick length; ``totals``: the
    bytes delivered and dropped so far)."""
    fl, lb, p = flows, links, profile
    csr = idx.csr
    c = lb.counters
    places = layout.buffer_places() if not idx.feedforward else np.zeros(0, dtype=np.intp)
    index = (
        idx.pos, idx.hop, idx.flow, idx.link, idx.queue, idx.prev_pad, idx.nxt_pad,
        idx.buf_pad, idx.drains_pad, idx.first, idx.heads, csr.key_ptr, csr.used_links,
        csr.rank_ptr, csr.link_ptr, csr.link_ent, csr.ent_link, csr.used_bufs,
        csr.buf_group_ptr, csr.buf_ptr, csr.buf_ent, csr.lane_buf, idx.feedforward, places,
        2 * layout.n_vls,
    )  # fmt: skip
    flow_table = (
        fl.backlog.reshape(-1), fl.rate.reshape(-1), fl.delivered, fl.size, fl.start_s,
        fl.fixed_latency_s, fl.active[: fl.live_end], fl.path, fl.backlog, fl.hops,
        fl.resend_bytes, fl.live_end,
    )  # fmt: skip
    link_rate, occ_pad, drain_pad, inflow_pad = layout._sums
    free = layout._free[0] if layout._free else np.zeros(0)
    link_book = (
        link_rate, occ_pad, drain_pad, inflow_pad, lb.occupancy,
        lb.buffer_drain, lb.buffer_bytes, endpoint_queues, lb.dq_open, lb.dq_seen,
        lb.dq_bytes, lb.dq_s, lb.dq_avg_Bps, free, lb.credit_delay, lb.loop_bytes,
        lb.loop_at_s, lb.credit_loop_s(roce is None), layout.link_load_bytes,
        layout.track_load, c["tx_bytes_total"], c["tx_packets_total"],
        c["retransmitted_bytes_total"], c["link_error_recovery_total"],
        c["symbol_errors_total"], c["transmit_wait_seconds_total"], c["discards_bytes_total"],
        c["pause_frames_total"], c["pause_seconds_total"],
        lb.pause_vl["pause_frames_vl_total"].reshape(-1),
        lb.pause_vl["pause_seconds_vl_total"].reshape(-1), c["ecn_marked_packets_total"],
        c["cnp_handled_total"], lb.paused,
    )  # fmt: skip
    solved = (*layout._solved, *layout._solved_stale, *layout._stale)
    link_state = (cap, goodput, ber, stormed, to_endpoint, bandwidth_Bps)
    if roce is not None:
        q, dc = roce.pfc, roce.dcqcn
        pfc = (
            q.xoff, q.xon, q.reaction_s, q.paused, q.paused_since_s, q.resume_s,
            q.watchdog_until_s, q.buffer, q.frames_owed, q.frames_sent, q.switch_of,
            q.shared_pool, float(q.alpha), float(q.mtu), q.headroom,
        )  # fmt: skip
        dcqcn = tuple(getattr(dc, name) for name in SENDER_FIELDS)
        dcqcn_params = roce.dcqcn_params(p)
    else:  # (not read on a credit fabric; typed as on RoCE)
        e, ei, eb = np.zeros(0), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.bool_)
        pfc = (e, e, e, eb, e, e, e, e, e, e, ei, e, 0.0, 0.0, e)
        dcqcn = (e,) * len(SENDER_FIELDS)
        dcqcn_params = e
    cc = CC_MODES[p.congestion_control]
    scalars = (
        float(p.mtu_bytes), n_vls, ENDLESS_ROOM_BYTES, p.ecn_kmin_s, p.ecn_kmax_s,
        p.ecn_pmax, p.pfc_refresh_fraction, p.pfc_watchdog_s, p.pfc_watchdog_recovery_s,
        dcqcn_params, cc, cc == CC_MODES["dcqcn"], p.swift_target_delay_s,
        float(p.swift_ai_packets), p.swift_beta, p.swift_max_mdf,
    )  # fmt: skip
    rest = (*link_state, roce is not None, *pfc, *dcqcn)
    # (the kernels read members by their place in these: ``kernels.groups``)
    assert len(index) == len(groups.INDEX) and len(flow_table) == len(groups.FLOW_TABLE)
    assert len(link_book) == len(groups.LINK_BOOK) and len(solved) == len(groups.SOLVED)
    assert len(rest) == len(groups.REST)
    now, tick, epoch_tick, epoch_s, dt = clock
    return KernelGroups(
        head=(most, horizon_s, now, tick, epoch_tick, epoch_s, dt, *totals),
        entries=index,
        flow_table=flow_table,
        link_book=link_book,
        solved=solved,
        rest=rest,
        rng=rng,
        profile=scalars,
    )


@dataclass(frozen=True)
class TicksRun:
    """What one call of ``uneventful_ticks`` did (see it for each field)."""

    started: int
    #: the ticks run whole; one fewer than started when the last needs Python to finish
    whole: int
    t_start: F64
    d_start: F64
    end_s: float
    delivered: float
    dropped: float
    cnps: int
    rate: F64
    new_backlog: F64
    done: NDArray[np.intp]
    fired: NDArray[np.intp]
    blocked: bool
    pause: PauseTick
    occupancy: F64
    dq_open: NDArray[np.intp]
    starved: NDArray[np.bool_]


def run_kernel(groups: KernelGroups) -> TicksRun:
    """Call ``uneventful_ticks`` with ``kernel_groups``' arguments."""
    return ticks_run(uneventful_kernels.uneventful_ticks(*groups.flat()))


def ticks_run(result: tuple[Any, ...]) -> TicksRun:
    """``uneventful_ticks``' result, by name (``kernels.busy`` returns its last tick's)."""
    (
        started, stop, t_start, d_start, end_s, delivered, dropped, cnps, rate,
        new_backlog, done, fired, blocked, send, room, ignoring, occupancy, dq_open, starved,
    ) = result  # fmt: skip
    started = int(started)
    return TicksRun(
        started=started,
        whole=started if stop == uneventful_kernels.STOP_HORIZON else started - 1,
        t_start=t_start,
        d_start=d_start,
        end_s=float(end_s),
        delivered=float(delivered),
        dropped=float(dropped),
        cnps=int(cnps),
        rate=rate,
        new_backlog=new_backlog,
        done=done,
        fired=fired,
        blocked=bool(blocked),
        pause=PauseTick(send_fraction=send, room_bytes=room, ignoring=ignoring),
        occupancy=occupancy,
        dq_open=dq_open,
        starved=starved,
    )


def idle_starts(
    now: float, tick: int, epoch_tick: int, epoch_s: float, dt: float, most: int
) -> F64:
    """The start times of the next ``most`` ticks and the end of the last, as
    ``Fabric._finish_tick`` works them out (the first is ``now``)."""
    ticks = tick + np.arange(most + 1)
    starts = np.asarray(epoch_s + (ticks - epoch_tick) * dt, dtype=np.float64)
    starts[0] = now
    return starts


def extend(record: deque[tuple[float, float]], times: NDArray[Any], values: NDArray[Any]) -> None:
    """Append (time, value) pairs to ``record``, only as many as it keeps."""
    keep = -(record.maxlen or times.size)
    record.extend(zip(times[keep:].tolist(), values[keep:].tolist(), strict=True))
