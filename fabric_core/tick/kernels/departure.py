"""Each buffer's average departure rate, measured PIE's way (one compiled pass a tick).

A new message's FIFO wait is the bytes queued ahead of it over the rate they leave at.
The rate of the tick it starts in is a poor estimate where a queue alternates between
paused (PFC) or credit-starved and draining: it can be all but zero for a tick and the
link's rate the next. PIE (RFC 8033, §5.2) estimates a queue's delay as its length over
an average departure rate, measured over *departure cycles*: a cycle starts when the
queue holds at least ``DQ_THRESHOLD_BYTES`` and ends once that many bytes have left; its
rate is folded into the average. Until a cycle ends the average stands, but never above
what the cycle under way already shows (``DQ_THRESHOLD_BYTES`` over its time so far), so
a queue that stopped draining is seen to have stopped.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import inline_kernel, kernel

#: Bytes a departure cycle spans (PIE's dq_threshold, 2^14 bytes; RFC 8033 §5.2).
DQ_THRESHOLD_BYTES = 16384.0
#: Weight of a finished cycle's rate in the average (PIE averages its departure rate
#: the same way; the weight is a choice).
CYCLE_WEIGHT = 0.25

_F = NDArray[np.float64]
_I = NDArray[np.intp]


@inline_kernel
def _measure(b: int, drain_Bps: _F, dt: float, cycle_bytes: _F, cycle_s: _F, avg_Bps: _F) -> bool:
    """One tick of buffer ``b``'s cycle under way (in place); True while it goes on."""
    cycle_bytes[b] += drain_Bps[b] * dt
    cycle_s[b] += dt
    if cycle_bytes[b] < DQ_THRESHOLD_BYTES:
        return True
    rate = cycle_bytes[b] / cycle_s[b]
    avg_Bps[b] = (
        rate if avg_Bps[b] == 0.0 else ((1 - CYCLE_WEIGHT) * avg_Bps[b] + CYCLE_WEIGHT * rate)
    )
    cycle_bytes[b] = 0.0
    cycle_s[b] = 0.0
    return False


@kernel
def update_departures(
    drain_Bps: _F,
    occupancy: _F,
    dt: float,
    cycle_bytes: _F,
    cycle_s: _F,
    avg_Bps: _F,
) -> None:
    """One tick of every buffer's departure-rate measurement (in place): ``drain_Bps``
    is this tick's rate out of each buffer, ``occupancy`` what it holds after it."""
    for b in range(drain_Bps.size):
        if cycle_s[b] == 0.0 and occupancy[b] < DQ_THRESHOLD_BYTES:
            continue  # too short a queue to measure (and to wait behind)
        _measure(b, drain_Bps, dt, cycle_bytes, cycle_s, avg_Bps)


@kernel
def update_departures_at(
    drain_Bps: _F,
    occupancy: _F,
    dt: float,
    candidates: _I,
    open_cycles: _I,
    seen: NDArray[np.bool_],
    cycle_bytes: _F,
    cycle_s: _F,
    avg_Bps: _F,
    out: _I,
) -> int:
    """``update_departures`` at the buffers it changes, not at every buffer: those with a
    cycle under way (``open_cycles``, every buffer whose ``cycle_s`` is not 0) and those
    whose queue may start one, which hold bytes this tick (``candidates``, repeats and
    out-of-range pads allowed; ``seen`` is all False, and left so). The same arithmetic
    buffer by buffer, so the same results; a tick costs what the traffic touches, not the
    fabric. Writes the buffers with a cycle under way after the tick into ``out`` (room
    for ``open_cycles`` and ``candidates``) and returns how many."""
    n_bufs = drain_Bps.size
    n_out = 0
    for b in open_cycles:
        seen[b] = True
        if _measure(b, drain_Bps, dt, cycle_bytes, cycle_s, avg_Bps):
            out[n_out] = b
            n_out += 1
    for b in candidates:
        if b >= n_bufs or seen[b]:
            continue
        seen[b] = True
        if occupancy[b] < DQ_THRESHOLD_BYTES:
            continue  # too short a queue to measure (and to wait behind)
        if _measure(b, drain_Bps, dt, cycle_bytes, cycle_s, avg_Bps):
            out[n_out] = b
            n_out += 1
    for b in open_cycles:
        seen[b] = False
    for b in candidates:
        if b < n_bufs:
            seen[b] = False
    return n_out


@inline_kernel
def departure_rate(drain_Bps: float, cycle_s: float, avg_Bps: float) -> float:
    """The rate a buffer's queued bytes leave at, for a FIFO-wait estimate, from its
    figures (this tick's drain rate, the cycle under way and the average): the average
    (capped by the cycle under way), or this tick's rate where nothing was measured.

    Takes a buffer's numbers, not the arrays: a helper given arrays in a kernel's
    inner loop costs a reference count up and down per array and call, which numba does
    not always take out (it made ``route.lanes_and_costs`` five times slower)."""
    rate: float = avg_Bps if avg_Bps > 0 else drain_Bps
    if cycle_s > 0:
        rate = min(rate, DQ_THRESHOLD_BYTES / cycle_s)
    return rate


@kernel
def departure_rates(drain_Bps: _F, cycle_s: _F, avg_Bps: _F) -> _F:
    """``departure_rate`` of every buffer."""
    out = np.empty(drain_Bps.size)
    for b in range(drain_Bps.size):
        out[b] = departure_rate(drain_Bps[b], cycle_s[b], avg_Bps[b])
    return out
