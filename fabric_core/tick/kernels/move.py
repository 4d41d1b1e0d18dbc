"""After the rates: bytes move, per-link and per-buffer sums, finished flows, sub-tick finish.

Two compiled passes over the entries replace the reference's dozen array calls
(``Fabric.step`` on the reference solver): ``move_bytes`` carries every entry's
bytes one tick and sums what the snapshot and the next tick need (``move_step``: it and
what follows it in every tick, in one call);
``finish_times`` times the flows that ended inside the tick (processor sharing
among the finishing entries of a link, see ``fabric_core.tick.step.finish_within_tick``).
"""

from __future__ import annotations

import numpy as np
from numba import prange
from numpy.typing import NDArray

from fabric_core.tick.flows import DONE_BYTES, DONE_FRACTION, RESIDUE_BYTES
from fabric_core.tick.kernels._jit import inline_kernel, kernel, specialised_kernel
from fabric_core.tick.kernels.departure import update_departures_at
from fabric_core.tick.kernels.route import link_loads
from fabric_core.tick.kernels.sorting import argsort_into

_F = NDArray[np.float64]
_I = NDArray[np.intp]


@inline_kernel
def move_bytes(
    rate: _F,
    prev_pad: _I,
    nxt_pad: _I,
    link: _I,
    drains_pad: _I,
    buf_pad: _I,
    pos: _I,
    flow: _I,
    backlog: _F,
    backlog_table: _F,
    rate_table: _F,
    delivered: _F,
    size: _F,
    dt: float,
    link_rate: _F,
    occupancy: _F,
    drain: _F,
    inflow: _F,
    stale_links: _I,
    stale_bufs: _I,
) -> tuple[_F, _F, float, _I]:
    """One tick of bytes: (new backlog, arrival, bytes delivered, finished flows), and in
    place each link's rate and each buffer's occupancy, drain and inflow.

    ``rate`` is padded (a zero after the last entry). Writes each entry's backlog
    and rate back into the flow table (``*_table``: its flat per-hop arrays) and
    adds the last hops' bytes to ``delivered``; a flow whose bytes have all
    arrived is listed, in entry order. The per-link and per-buffer sums (the buffers'
    with one more slot, the pad) hold the last tick's, which are not 0 only at
    ``stale_links`` and ``stale_bufs`` (the links and buffers its entries used): those
    are cleared first, so a tick costs what its entries use, not the fabric.

    Written in passes that the cores can share with the same results bit for bit, where
    its caller is compiled over them (``move_step_parallel``; inlined there): each
    entry's bytes (every iteration writes its own places), then the sums, each still
    entry by entry in entry order, in two tasks that write apart: the links' rates and
    the buffers' inflows; the buffers' occupancy and drain with the deliveries. Compiled
    serially the passes cost what one did (the default scenario's quiet tick: 12.2 µs
    either way; the 10k fat-tree's: 1.22 ms against 1.26).
    """
    n = link.size
    n_bufs = occupancy.size - 1
    for li in stale_links:
        link_rate[li] = 0.0
    for b in stale_bufs:
        occupancy[b] = drain[b] = inflow[b] = 0.0
    occupancy[n_bufs] = drain[n_bufs] = inflow[n_bufs] = 0.0
    new_backlog = np.empty(n)
    arrival = np.empty(n)
    for e in prange(n):
        arrival[e] = rate[prev_pad[e]]
        b = backlog[e] + (arrival[e] - rate[e]) * dt
        if b < RESIDUE_BYTES:
            b = 0.0
        new_backlog[e] = b
        backlog_table[pos[e]] = b
        rate_table[pos[e]] = rate[e]
    got = np.zeros(1)
    done = np.empty(n, dtype=np.intp)
    n_done = np.zeros(1, dtype=np.intp)
    for task in prange(2):
        if task == 0:
            for e in range(n):
                link_rate[link[e]] += rate[e]
                inflow[buf_pad[e]] += rate[e]
            continue
        delivered_now = 0.0
        finished = 0
        for e in range(n):
            occupancy[drains_pad[e]] += new_backlog[e]
            drain[drains_pad[e]] += rate[e]
            if nxt_pad[e] == n:
                f = flow[e]
                delivered[f] += rate[e] * dt
                delivered_now += rate[e] * dt
                if size[f] - delivered[f] <= DONE_FRACTION * size[f] + DONE_BYTES:
                    done[finished] = f
                    finished += 1
        got[0] = delivered_now
        n_done[0] = finished
    return new_backlog, arrival, got[0], done[: n_done[0]]


@kernel
def finish_times(
    rate: _F,
    level: _F,
    alpha: _F,
    credit_level: _F,
    buf_pad: _I,
    flow: _I,
    prev_pad: _I,
    last: _I,
    last_flow: _I,
    used_links: _I,
    link_ptr: _I,
    link_ent: _I,
    ent_link: _I,
    capacity: _F,
    done: _I,
    cap: int,
    dt: float,
) -> _F:
    """When, inside the tick, each flow in ``done`` sent its last byte (seconds).

    On each link the finishing entries share the capacity as in processor sharing
    with the elastic entries (at the fair-share level: they would yield), while
    entries held down elsewhere keep their rate: an entry with ``b`` bytes ends at
    ``(sum over finishing o of min(b_o, b) + b (1 + elastic)) / available``,
    slowed by its buffer's credit factor ``alpha`` (under PFC: ``credit_level`` empty) or
    no sooner than ``b`` at its buffer's ``credit_level`` (credits shared max-min). A
    flow ends at its latest hop. The links are
    the index's used ones (``kernels.index.entry_index``: ``link_ptr`` by used link);
    ``last`` and ``last_flow`` are its last-hop entries and their flows, and the flows in
    ``done`` are among them.
    """
    n = flow.size
    n_bufs = alpha.size
    max_min = credit_level.size > 0
    is_done = np.zeros(cap, dtype=np.bool_)
    # each finished flow's place in ``done``, read only where ``is_done`` (so not cleared:
    # a tick's time per finished flow, not per slot of the table)
    at_done = np.empty(cap, dtype=np.intp)
    for i in range(done.size):
        is_done[done[i]] = True
        at_done[done[i]] = i
    # the links the finished flows cross, from each one's last hop upstream: a pass over
    # the flows' last hops instead of over every entry (a few flows end in a tick)
    # (listed as found: a pass over the links they cross, not over every used link; the
    # links' order does not matter, each adds to a flow's time by a maximum)
    hot = np.zeros(used_links.size, dtype=np.bool_)
    hot_links = np.empty(used_links.size, dtype=np.intp)
    n_hot = 0
    for i in range(last.size):
        if is_done[last_flow[i]]:
            e = last[i]
            while e < n:
                k = ent_link[e]
                if not hot[k]:
                    hot[k] = True
                    hot_links[n_hot] = k
                    n_hot += 1
                e = prev_pad[e]
    t_done = np.zeros(done.size)  # each finished flow's time: its latest hop's
    # a link's finishing entries, their bytes and their order (scratch, for the longest)
    n_max = 0
    for j in range(n_hot):
        k = hot_links[j]
        n_max = max(n_max, link_ptr[k + 1] - link_ptr[k])
    fin = np.empty(n_max, dtype=np.intp)
    b = np.empty(n_max)
    order = np.empty(n_max, dtype=np.intp)
    scratch = np.empty(n_max, dtype=np.intp)
    for j in range(n_hot):
        k = hot_links[j]
        li = used_links[k]
        lo, hi = link_ptr[k], link_ptr[k + 1]
        held_down = 0.0
        n_elastic = 0
        # 0 as an index, not the literal 0: numba would compile argsort_into for that too
        n_fin = lo - lo
        for i in range(lo, hi):
            e = link_ent[i]
            if is_done[flow[e]]:
                n_fin += 1
            elif rate[e] >= level[li] * (1 - 1e-6) and rate[e] > 0:
                n_elastic += 1
            else:
                held_down += rate[e]
        available = max(capacity[li] - held_down, 0.0)
        j = 0
        for i in range(lo, hi):
            e = link_ent[i]
            if is_done[flow[e]]:
                fin[j] = e
                b[j] = rate[e] * dt
                j += 1
        argsort_into(b, n_fin, order, scratch)
        smaller = 0.0  # bytes of the finishing entries that end before this one
        for j in range(n_fin):
            e = fin[order[j]]
            after = n_fin - j - 1
            work = smaller + b[order[j]] * (after + 1 + n_elastic)
            smaller += b[order[j]]
            into = buf_pad[e] < n_bufs
            a = alpha[buf_pad[e]] if into and not max_min else 1.0
            speed = available * max(a, 1e-12)
            # stalled: the whole tick, unless nothing was left to send here
            t = work / speed if speed > 0 else (dt if work > 0 else 0.0)
            if max_min and into:
                # credits let its bytes through no faster than its buffer's level (or its
                # own rate, where the second pass let it past the level of the first)
                ceiling = max(credit_level[buf_pad[e]], rate[e])
                if ceiling > 0:
                    t = max(t, b[order[j]] / ceiling)
            i = at_done[flow[e]]
            t_done[i] = max(t_done[i], t)
    return t_done


@kernel
def move_step(
    # the tick's bytes (``move_bytes``)
    rate: _F,
    prev_pad: _I,
    nxt_pad: _I,
    link: _I,
    drains_pad: _I,
    buf_pad: _I,
    pos: _I,
    flow: _I,
    backlog: _F,
    backlog_table: _F,
    rate_table: _F,
    delivered: _F,
    size: _F,
    dt: float,
    link_rate: _F,
    occupancy: _F,
    drain: _F,
    inflow: _F,
    stale_links: _I,
    stale_bufs: _I,
    # adaptive routing's load in flight (``route.link_loads``), when ``track_load``
    track_load: bool,
    active: NDArray[np.bool_],
    path: NDArray[np.int32],
    backlog2d: _F,
    hops: NDArray[np.int8],
    link_load_bytes: _F,
    # the buffers' departure cycles (``departure.update_departures_at``, in place)
    used_bufs: _I,
    dq_open: _I,
    dq_seen: NDArray[np.bool_],
    dq_bytes: _F,
    dq_s: _F,
    dq_avg: _F,
    # the per-link counters (``link_counters``, in place); ``go_back_n``: RoCE's bit
    # errors are resent from the flows' sources (``count_bit_error_resends``)
    used_links: _I,
    goodput: _F,
    ber: _F,
    go_back_n: bool,
    mtu: float,
    tx_bytes: _F,
    tx_packets: _F,
    retransmitted: _F,
    error_recovery: _F,
    symbol_errors: _F,
    # go-back-N's resends (``count_resends``): the hop-0 entries, and per flow slot the
    # bytes at its source owed a resend (in place)
    heads: _I,
    resend_bytes: _F,
) -> tuple[_F, _F, float, _I, _I]:
    """What every tick does once its rates are known, in ``Fabric.step``'s order: the
    bytes move (``move_bytes``), adaptive routing's load is counted again, the departure
    cycles of the buffers the entries use go on, and the links' counters add the tick
    (``link_counters``, go-back-N's resends of bit errors where there are some:
    ``count_bit_error_resends``, then the resends the sources owed: ``count_resends``).
    Returns ``move_bytes``' result and the departure cycles under way. One call, not
    four: on the default scenario's quiet ticks the step took 28.5 µs as four calls and
    their Python, 22.0 as one (bench_breakdown's timers on).

    ``move_step_parallel`` is this kernel over the cores, the same bit for bit: the
    bytes' passes as ``move_bytes`` splits them, then the links' load and counters
    beside the buffers' departure cycles (they write apart). On the 10k fat-tree the
    step took 2.5 ms on one core, 1.5 on two (replayed).
    """
    new_backlog, arrival, got, done = move_bytes(
        rate, prev_pad, nxt_pad, link, drains_pad, buf_pad, pos, flow, backlog,
        backlog_table, rate_table, delivered, size, dt, link_rate, occupancy, drain,
        inflow, stale_links, stale_bufs,
    )  # fmt: skip
    n_bufs = occupancy.size - 1
    cycles = np.empty(dq_open.size + used_bufs.size, dtype=np.intp)
    n_cycles = np.zeros(1, dtype=np.intp)
    for task in prange(2):
        if task == 0:
            if track_load:
                link_loads(active, path, backlog2d, hops, link_load_bytes)
            errors = link_counters(
                used_links, link_rate, goodput, ber, go_back_n, mtu, dt, tx_bytes,
                tx_packets, retransmitted, error_recovery, symbol_errors,
            )  # fmt: skip
            if errors and go_back_n:
                count_bit_error_resends(link, flow, path, rate, goodput, dt, retransmitted)
            count_resends(heads, link, flow, rate, new_backlog, dt, resend_bytes, retransmitted)
            continue
        n_cycles[0] = update_departures_at(
            drain[:n_bufs], occupancy[:n_bufs], dt, used_bufs, dq_open, dq_seen, dq_bytes,
            dq_s, dq_avg, cycles,
        )  # fmt: skip
    return new_backlog, arrival, got, done, cycles[: n_cycles[0]]


@inline_kernel
def retries_per_byte(goodput: float) -> float:
    """Bytes sent again per byte of new data a link with ``goodput`` carries (the share
    left for new data under bit errors; floored at 1e-12, a link all but dead)."""
    return 1 / max(goodput, 1e-12) - 1


@kernel
def link_counters(
    links: _I,
    link_rate: _F,
    goodput: _F,
    ber: _F,
    go_back_n: bool,
    mtu: float,
    dt: float,
    tx_bytes: _F,
    tx_packets: _F,
    retransmitted: _F,
    error_recovery: _F,
    symbol_errors: _F,
) -> bool:
    """The per-link counters of a tick (in place) at ``links``, the links that carried
    something (at the others every term is 0): bytes and packets sent, and what bit
    errors cost (the retries on top of the goodput, the symbols hit). A retry is
    retransmitted on the link that sends it: here, by link-level retry; under go-back-N
    (``go_back_n``) the flows' sources resend, and ``count_bit_error_resends`` counts it
    there. Returns whether a link counted has bit errors."""
    errors = False
    for li in links:
        carried = link_rate[li] * dt
        tx_bytes[li] += carried
        tx_packets[li] += carried / mtu
        resent = carried * retries_per_byte(goodput[li])
        if not go_back_n:
            retransmitted[li] += resent
        error_recovery[li] += resent / mtu
        symbol_errors[li] += carried * 8 * ber[li]
        errors = errors or goodput[li] < 1.0
    return errors


@kernel
def count_bit_error_resends(
    link: _I,
    flow: _I,
    path: NDArray[np.int32],
    rate: _F,
    goodput: _F,
    dt: float,
    retransmitted: _F,
) -> None:
    """Go-back-N's resends of bit errors (RoCE), counted on the link that sends them:
    a packet a link corrupts is resent by the flow's source with the round trip of
    packets after it (``Fabric._goodput``), so what each entry's link costs its flow (its
    bytes this tick × ``retries_per_byte``) is retransmitted on the flow's first link
    (``path[0, flow]``), in place, as the resends of drops are (``count_resends``)."""
    for e in range(link.size):
        g = goodput[link[e]]
        if g < 1.0:
            retransmitted[path[0, flow[e]]] += rate[e] * dt * retries_per_byte(g)


@kernel
def count_resends(
    heads: _I,
    link: _I,
    flow: _I,
    rate: _F,
    new_backlog: _F,
    dt: float,
    resend_bytes: _F,
    retransmitted: _F,
) -> None:
    """Count go-back-N's resends when they are sent: a source sends the bytes it owes a
    resend (``resend_bytes``, per flow slot, in place) before new ones, so of what each
    hop-0 entry in ``heads`` sent this tick (its rate × ``dt``) up to what its flow owes
    is retransmitted on the entry's link. What is owed never exceeds what is left at the
    source (``new_backlog``: its rounding to 0 leaves nothing to resend)."""
    for e in heads:
        f = flow[e]
        owed = resend_bytes[f]
        if owed > 0.0:
            resent = min(owed, rate[e] * dt)
            retransmitted[link[e]] += resent
            resend_bytes[f] = min(owed - resent, new_backlog[e])


@kernel
def credit_wait(
    alpha: _F,
    inflow: _F,
    used_links: _I,
    lane_buf: _I,
    buf_ptr: _I,
    buf_ent: _I,
    backlog: _F,
    n_vls: int,
    dt: float,
    transmit_wait: _F,
    starved: NDArray[np.bool_],
) -> None:
    """Credit starvation per link (in place): a link waits for the tick's share its most
    held-back lane could not send. A lane is held back when its buffer cut what wanted in
    (``alpha`` < 1) and it had data: an inflow, or, when credits stopped it altogether
    (``alpha`` = 0), bytes queued for that buffer (the ``backlog`` of the entries feeding
    it, ``buf_ent[buf_ptr[kb]:buf_ptr[kb + 1]]`` of its number ``kb`` in the index). A
    lane whose upstream was starved in its turn has neither. Only links with entries can
    be held back (a buffer no entry feeds keeps ``alpha`` = 1); ``starved`` is False for
    the others on entry. (``credit_wait_parallel`` shares the links over the cores.)"""
    for k in prange(used_links.size):
        li = used_links[k]
        worst = 1.0
        for v in range(n_vls):
            b = li * n_vls + v
            if alpha[b] >= 1 - 1e-9:
                continue
            had_data = inflow[b] > 0
            kb = lane_buf[k * n_vls + v]
            if kb >= 0:
                i = buf_ptr[kb]
                while not had_data and i < buf_ptr[kb + 1]:
                    had_data = backlog[buf_ent[i]] > 0
                    i += 1
            if had_data:
                worst = min(worst, alpha[b])
        starved[li] = worst < 1 - 1e-9
        transmit_wait[li] += (1 - worst) * dt


#: ``move_step`` over the cores (see there; made last, since a copy takes the module's
#: names as they are when it is made)
move_step_parallel = specialised_kernel(move_step, "move_step_parallel", parallel=True)
#: ``credit_wait`` over the cores
credit_wait_parallel = specialised_kernel(credit_wait, "credit_wait_parallel", parallel=True)
