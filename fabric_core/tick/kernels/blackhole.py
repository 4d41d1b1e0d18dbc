"""Bytes forwarded into a dead port, compiled: one pass over the hops of the flows in flight.

On lossy Ethernet a switch keeps forwarding into a link that has died until routing
learns of it (``fabric_core.faults.recovery``); what it queued for that link is lost, and
go-back-N sends it again from the source once the sender's ACK timeout is up (noted in
the flow table's ``resend_bytes``, counted retransmitted as the source sends it:
``kernels.move.count_resends``). The pass
costs a read of the flow table's paths and no Python work per flow, so a fabric with
thousands of flows stuck behind a dead link pays microseconds a tick for it, not a
millisecond. The flows that lost bytes wait out of the solve until their timeout is up
(``lose_at_dead_links``), then are put back in flight (``resend_due``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import kernel
from fabric_core.tick.kernels.pairwise import numpy_sum


@kernel
def drop_at_dead_links(
    path: NDArray[np.int32],
    active: NDArray[np.bool_],
    backlog: NDArray[np.float64],
    dead: NDArray[np.bool_],
    lost_by_link: NDArray[np.float64],
    resend_bytes: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Put the bytes queued for a ``dead`` link (hop >= 1) back at their flow's source.

    Hop 0 keeps its bytes: a NIC knows its own link is down. Only the slots ``active``
    covers are read (the flow table's ``live_end``: no flow is in flight past it, and
    the slots past it, which the waiting flows of a long fault keep, cost nothing).
    Adds the bytes lost per dead link to ``lost_by_link`` and per flow slot to
    ``resend_bytes`` (go-back-N sends them again), and returns the bytes of each (hop,
    flow) dropped, hop-major and in slot order (zeros included: the order
    ``numpy.nonzero`` gives, so the caller's sum is the one it was), and the slots of
    the flows that lost bytes, ascending.
    """
    max_hops = path.shape[0]
    cap = active.size
    # the flows in flight that cross a dead link past their source, in slot order: one
    # look at each slot (most of a long fault's slots hold flows waiting for their ACK
    # timeout, not in flight), then the hop-major passes over those few
    crossing = np.empty(cap, dtype=np.intp)
    n_crossing = 0
    n = 0
    for f in range(cap):
        if not active[f]:
            continue
        hits = 0
        for h in range(1, max_hops):
            li = path[h, f]
            if li >= 0 and dead[li]:
                hits += 1
        if hits:
            crossing[n_crossing] = f
            n_crossing += 1
            n += hits
    lost = np.empty(n)
    k = 0
    losers = np.zeros(cap, dtype=np.bool_)
    n_losers = 0
    for h in range(1, max_hops):
        for i in range(n_crossing):
            f = crossing[i]
            li = path[h, f]
            if li >= 0 and dead[li]:
                b = backlog[h, f]
                lost[k] = b
                k += 1
                if b != 0.0:
                    if not losers[f]:
                        losers[f] = True
                        n_losers += 1
                    lost_by_link[li] += b
                    resend_bytes[f] += b
                    backlog[h, f] = 0.0
                    backlog[0, f] += b
    slots = np.empty(n_losers, dtype=np.intp)
    k = 0
    for i in range(n_crossing if n_losers else 0):  # (the losers cross: in slot order)
        if losers[crossing[i]]:
            slots[k] = crossing[i]
            k += 1
    return lost, slots


@kernel
def lose_at_dead_links(
    path: NDArray[np.int32],
    active: NDArray[np.bool_],
    backlog: NDArray[np.float64],
    rate: NDArray[np.float64],
    held: NDArray[np.bool_],
    resend_s: NDArray[np.float64],
    dead: NDArray[np.bool_],
    resend_at_s: float,
    discards_by_link: NDArray[np.float64],
    resend_bytes: NDArray[np.float64],
) -> tuple[float, NDArray[np.float64], NDArray[np.intp]]:
    """One tick of lossy Ethernet before routing knows of the ``dead`` links
    (``faults.recovery._blackhole``, and ``kernels.busy`` tick by tick).

    What was queued for a dead link is dropped and put back at its source
    (``drop_at_dead_links``; ``active`` covers the slots to ``live_end``). A sender hears
    neither ACK nor NAK for it, so each flow that lost bytes goes back to its source
    whole (go-back-N: its bytes past the source summed hop by hop, its rates 0) and is
    held, out of the solve, until ``resend_at_s``, its local ACK timeout; the table's
    counts are the caller's (``FlowTable.held_for_resend``). Adds the bytes lost per
    link to ``discards_by_link`` and the bytes to send again to ``resend_bytes`` (per
    flow slot, the dropped bytes first, then each flow's put back: the source sends them
    again when its timeout is up, and they are counted retransmitted then, not here).
    Returns the bytes dropped (their numpy sum), the bytes lost per link and the slots
    held, ascending.
    """
    lost_by_link = np.zeros(dead.size)
    lost, slots = drop_at_dead_links(path, active, backlog, dead, lost_by_link, resend_bytes)
    for li in range(dead.size):
        discards_by_link[li] += lost_by_link[li]
    max_hops = path.shape[0]
    for i in range(slots.size):
        s = slots[i]
        in_network = 0.0
        for h in range(1, max_hops):
            in_network += backlog[h, s]
            backlog[h, s] = 0.0
        backlog[0, s] += in_network
        for h in range(max_hops):
            rate[h, s] = 0.0
        active[s] = False
        held[s] = True
        resend_s[s] = resend_at_s
        resend_bytes[s] += in_network
    return numpy_sum(lost), lost_by_link, slots


@kernel
def resend_due(
    resend_s: NDArray[np.float64],
    active: NDArray[np.bool_],
    held: NDArray[np.bool_],
    due_by_s: float,
    earliest_s: float,
) -> tuple[int, int, float]:
    """Put back in flight the flows whose ACK timeout is up by ``due_by_s`` (the tick's
    start and ``flows.RESEND_EPS_S``; ``resend_s``, per slot: inf for a flow not
    waiting), as ``FlowTable.resend_due`` and ``kernels.busy`` count them. Returns how many, the last one's slot and the earliest resend left
    (``earliest_s``, unchanged, when none was due). Reads the whole table: called only
    when ``earliest_s`` has come."""
    n_due = 0
    last_due = -1
    for s in range(resend_s.size):
        if resend_s[s] <= due_by_s:
            active[s] = True
            held[s] = False
            resend_s[s] = np.inf
            n_due += 1
            last_due = s
    if n_due == 0:
        return 0, -1, earliest_s
    left = np.inf
    for s in range(resend_s.size):
        left = min(left, resend_s[s])
    return n_due, last_due, left
