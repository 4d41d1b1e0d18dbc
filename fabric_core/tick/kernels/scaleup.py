"""The scale-up domain's fluid model, compiled: messages share NVLink ports max-min fairly.

Every GPU has one egress and one ingress port of capacity ``cap`` (bytes/s); the switch
between them (NVSwitch) is non-blocking, so a message from GPU ``a`` to GPU ``b`` uses
exactly two resources: ``a``'s egress and ``b``'s ingress. ``advance`` runs the fluid
model exactly over ``[t0, t1)``: between two events (a message starts or finishes) the
rates are the max-min fair allocation over the ports (progressive filling), and they are
computed again at every event. So the result does not depend on how the interval is cut
into ticks, only on the messages' start times and sizes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import kernel

_F = NDArray[np.float64]
_I = NDArray[np.int64]

#: A message with less than this fraction of its bytes left is done (floating point).
DONE_FRACTION = 1e-9
#: A port with less than this fraction of its capacity left is saturated.
SATURATED = 1e-12


@kernel
def max_min_rates(
    src: _I,
    dst: _I,
    active: NDArray[np.bool_],
    n_ports: int,
    cap: float,
    rate: _F,
) -> None:
    """Max-min fair rates of the active messages (into ``rate``; 0 for the others).

    Progressive filling: all unfrozen messages rise together by the smallest fair share
    left at any port they use; the ports that fill freeze their messages; repeat until
    every message is frozen (at most one round per port).
    """
    m = src.size
    e_cnt = np.zeros(n_ports, dtype=np.int64)
    i_cnt = np.zeros(n_ports, dtype=np.int64)
    e_room = np.full(n_ports, cap)
    i_room = np.full(n_ports, cap)
    frozen = np.ones(m, dtype=np.bool_)
    left = 0
    for k in range(m):
        rate[k] = 0.0
        if active[k]:
            frozen[k] = False
            e_cnt[src[k]] += 1
            i_cnt[dst[k]] += 1
            left += 1
    while left > 0:
        share = np.inf
        for p in range(n_ports):
            if e_cnt[p] > 0:
                share = min(share, e_room[p] / e_cnt[p])
            if i_cnt[p] > 0:
                share = min(share, i_room[p] / i_cnt[p])
        for p in range(n_ports):
            e_room[p] -= share * e_cnt[p]
            i_room[p] -= share * i_cnt[p]
        tol = SATURATED * cap
        for k in range(m):
            if not frozen[k]:
                rate[k] += share
        for k in range(m):
            if not frozen[k] and (e_room[src[k]] <= tol or i_room[dst[k]] <= tol):
                frozen[k] = True
                e_cnt[src[k]] -= 1
                i_cnt[dst[k]] -= 1
                left -= 1


@kernel
def advance(
    src: _I,
    dst: _I,
    size: _F,
    left: _F,
    start: _F,
    done_at: _F,
    n_ports: int,
    cap: float,
    t0: float,
    t1: float,
) -> int:
    """Move the messages' bytes over ``[t0, t1)``, event by event (in place).

    ``left`` holds each message's bytes still to move; a message moves from its
    ``start``. A message whose last byte moves in the interval gets ``left = 0`` and
    ``done_at`` = that moment (others keep theirs). Returns the number of events.
    """
    m = src.size
    rate = np.zeros(m)
    active = np.zeros(m, dtype=np.bool_)
    t = t0
    events = 0
    while t < t1:
        n_active = 0
        next_start = np.inf
        for k in range(m):
            active[k] = False
            if left[k] > 0.0:
                if start[k] <= t:
                    active[k] = True
                    n_active += 1
                elif start[k] < next_start:
                    next_start = start[k]
        if n_active == 0:
            if next_start >= t1:
                break
            t = next_start
            continue
        max_min_rates(src, dst, active, n_ports, cap, rate)
        events += 1
        h_finish = np.inf
        for k in range(m):
            if active[k]:
                h_finish = min(h_finish, left[k] / rate[k])
        h = min(h_finish, min(next_start, t1) - t)
        finishing = h_finish <= h
        t_new = t + h
        for k in range(m):
            if active[k]:
                rest = left[k] - rate[k] * h
                # the messages that end this step: exactly (within rounding) the earliest
                if rest <= DONE_FRACTION * size[k] or (
                    finishing and left[k] / rate[k] <= h_finish * (1.0 + 1e-12)
                ):
                    left[k] = 0.0
                    done_at[k] = t_new
                else:
                    left[k] = rest
        t = t_new
    return events
