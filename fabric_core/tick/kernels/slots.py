"""The flow table's slot bookkeeping, compiled: work that grows with the flows that start
and finish, never with the table's capacity (which stays at the largest burst seen)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import kernel
from fabric_core.tick.kernels.sorting import sorted_copy, stable_argsort

_I = NDArray[np.intp]


@kernel
def lowest_free(active: NDArray[np.bool_], held: NDArray[np.bool_], n: int) -> _I:
    """The ``n`` lowest slots neither active nor held (fewer when the table is full).

    Lowest first keeps the flows in flight packed at the start of the table, so this
    scan stops after about as many slots as there are flows in flight.
    """
    out = np.empty(n, dtype=np.intp)
    k = 0
    for s in range(active.size):
        if k == n:
            break
        if not active[s] and not held[s]:
            out[k] = s
            k += 1
    return out[:k]


@kernel
def live_end(active: NDArray[np.bool_], end: int) -> int:
    """One past the highest active slot below ``end`` (0 if none)."""
    while end > 0 and not active[end - 1]:
        end -= 1
    return end


@kernel
def retire(
    parent: _I,
    pending: NDArray[np.int32],
    latest_finish_s: NDArray[np.float64],
    held: NDArray[np.bool_],
    slots: _I,
    finish_s: NDArray[np.float64],
) -> _I:
    """Count finished sub-flows against their flows (in place); returns the heads of the
    flows that are now whole, in the order their first sub-flow appears in ``slots``.

    A head that finishes before its siblings is held (out of the solve, not reusable)
    until the last one is done.
    """
    heads = np.empty(slots.size, dtype=np.intp)
    for i in range(slots.size):
        h = parent[slots[i]]
        heads[i] = h
        latest_finish_s[h] = max(latest_finish_s[h], finish_s[i])
        pending[h] -= 1
    # each head once, in the order of its first appearance (np.unique's return_index)
    by_head = stable_argsort(heads)
    firsts = np.empty(slots.size, dtype=np.intp)
    n_heads = 0
    for k in range(by_head.size):
        if k == 0 or heads[by_head[k]] != heads[by_head[k - 1]]:
            firsts[n_heads] = by_head[k]
            n_heads += 1
    firsts = sorted_copy(firsts[:n_heads])
    order = np.empty(n_heads, dtype=np.intp)
    for j in range(n_heads):
        order[j] = heads[firsts[j]]
    for s in slots:
        if parent[s] == s:
            held[s] = True
    whole = np.empty(n_heads, dtype=np.intp)
    n_whole = 0
    for j in range(n_heads):
        h = order[j]
        if pending[h] <= 0:
            whole[n_whole] = h
            n_whole += 1
            held[h] = False
    return whole[:n_whole]


@kernel
def start_limits(
    heads: _I,
    flow: _I,
    link: _I,
    start_s: NDArray[np.float64],
    capacity: NDArray[np.float64],
    n: int,
    now: float,
    dt: float,
) -> tuple[NDArray[np.float64], bool]:
    """The most each of ``n`` entries may carry when its flow is ready only inside this
    tick (it sends for the part of the tick it exists), and whether any is (if none, the
    limits are not worked out: an empty array). Flows start at tick boundaries, so hardly
    a tick has one: filling the limits regardless took 0.1 ms of a 10k fat-tree's tick."""
    late = False
    limit = np.empty(0)
    for e in heads:
        ready = (now + dt - start_s[flow[e]]) / dt
        if ready < 1:
            if not late:  # the first late flow: the limits are worked out from here on
                late = True
                limit = np.full(n, np.inf)
            limit[e] = min(max(ready, 0.0), 1.0) * capacity[link[e]]
    return limit, late


@kernel
def fill_slots(
    slots: _I,
    counts: NDArray[np.int64],
    # the table (in place): per (hop, slot), then per slot
    path: NDArray[np.int32],
    vl: NDArray[np.int8],
    backlog: NDArray[np.float64],
    rate: NDArray[np.float64],
    parent: _I,
    pending: NDArray[np.int32],
    latest_finish_s: NDArray[np.float64],
    active: NDArray[np.bool_],
    hops: NDArray[np.int8],
    cls: NDArray[np.int16],
    workload: NDArray[np.int16],
    size: NDArray[np.float64],
    delivered: NDArray[np.float64],
    start_s: NDArray[np.float64],
    extra_latency_s: NDArray[np.float64],
    fixed_latency_s: NDArray[np.float64],
    wait_s: NDArray[np.float64],
    parent_size: NDArray[np.float64],
    tag: NDArray[np.int64],
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    resend_bytes: NDArray[np.float64],
    # the new flows, one row each
    new_path: NDArray[np.int32],
    new_vl: NDArray[np.int8],
    new_hops: NDArray[np.int8],
    new_cls: int,
    new_workload: int,
    new_size: NDArray[np.float64],
    new_start_s: NDArray[np.float64],
    new_extra_latency_s: NDArray[np.float64],
    new_parent_size: NDArray[np.float64],
    new_tag: NDArray[np.int64],
    new_src: NDArray[np.int64],
    new_dst: NDArray[np.int64],
) -> None:
    """Write new flows into their slots (``FlowTable.add``): ``counts`` sub-flows per
    flow, the first of each its head; every flow's bytes wait at hop 0, none of them
    owed a resend (``resend_bytes``: a slot's last flow may have ended owing a residue)."""
    row = 0
    for c in counts:
        head = slots[row]
        pending[head] = c
        latest_finish_s[head] = -np.inf
        for _ in range(c):
            s = slots[row]
            parent[s] = head
            active[s] = True
            for h in range(path.shape[0]):
                path[h, s] = new_path[h, row]
                vl[h, s] = new_vl[h, row]
                backlog[h, s] = 0.0
                rate[h, s] = 0.0
            backlog[0, s] = new_size[row]
            hops[s] = new_hops[row]
            cls[s] = new_cls
            workload[s] = new_workload
            size[s] = new_size[row]
            delivered[s] = 0.0
            start_s[s] = new_start_s[row]
            extra_latency_s[s] = new_extra_latency_s[row]
            fixed_latency_s[s] = 0.0
            wait_s[s] = 0.0
            parent_size[s] = new_parent_size[row]
            tag[s] = new_tag[row]
            src[s] = new_src[row]
            dst[s] = new_dst[row]
            resend_bytes[s] = 0.0
            row += 1


@kernel
def complete_flows(
    done: _I,
    t_fluid: NDArray[np.float64],
    now: float,
    dt: float,
    # the table (in place)
    path: NDArray[np.int32],
    backlog: NDArray[np.float64],
    rate: NDArray[np.float64],
    active: NDArray[np.bool_],
    size: NDArray[np.float64],
    delivered: NDArray[np.float64],
    start_s: NDArray[np.float64],
    wait_s: NDArray[np.float64],
    parent_size: NDArray[np.float64],
    fixed_latency_s: NDArray[np.float64],
    extra_latency_s: NDArray[np.float64],
    parent: _I,
    pending: NDArray[np.int32],
    latest_finish_s: NDArray[np.float64],
    held: NDArray[np.bool_],
    bandwidth_Bps: NDArray[np.float64],
) -> tuple[_I, NDArray[np.float64], float]:
    """Finish the (sub-)flows in ``done``, whose last bytes left inside the tick at
    ``t_fluid`` (``finish_times``), and free their slots.

    A flow finishes when its fluid bytes are through or when the whole flow has
    crossed its source NIC after the FIFO wait it found, whichever is later, plus the
    costs the fluid model does not carry. Returns the heads of the flows now whole,
    their finish times, and the bytes rounding left in the network (delivered now).
    """
    finish = np.empty(done.size)
    rounding = 0.0
    for i in range(done.size):
        f = done[i]
        fluid_end = now + min(t_fluid[i], dt)
        # the whole flow crosses the source NIC, sprayed or not
        fifo_end = start_s[f] + wait_s[f] + parent_size[f] / bandwidth_Bps[path[0, f]]
        finish[i] = max(fluid_end, fifo_end) + fixed_latency_s[f] + extra_latency_s[f]
        rounding += size[f] - delivered[f]
        delivered[f] = size[f]
    whole = retire(parent, pending, latest_finish_s, held, done, finish)
    for f in done:
        active[f] = False
        for h in range(path.shape[0]):
            path[h, f] = -1
            backlog[h, f] = 0.0
            rate[h, f] = 0.0
    whole_finish = np.empty(whole.size)
    for i in range(whole.size):
        whole_finish[i] = latest_finish_s[whole[i]]
    return whole, whole_finish, rounding


@kernel
def by_workload(workload: NDArray[np.int16], n_workloads: int) -> tuple[_I, _I]:
    """The flows of each workload, in the order given: ``order`` lists the places of
    workload 0's flows, then workload 1's, ... (a stable counting sort; workload -1, no
    workload, left out) and ``bounds[w]`` is where workload ``w``'s end in it."""
    bounds = np.zeros(n_workloads, dtype=np.intp)
    for w in workload:
        if w >= 0:
            bounds[w] += 1
    for w in range(1, n_workloads):
        bounds[w] += bounds[w - 1]
    fill = np.zeros(n_workloads, dtype=np.intp)  # (no workload: a fault's flows only)
    for w in range(1, n_workloads):
        fill[w] = bounds[w - 1]
    order = np.empty(bounds[n_workloads - 1] if n_workloads else 0, dtype=np.intp)
    for i in range(workload.size):
        w = workload[i]
        if w >= 0:
            order[fill[w]] = i
            fill[w] += 1
    return order, bounds
