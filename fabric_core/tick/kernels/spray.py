"""Sprayed flows' sub-flows, compiled: their paths (``routing.spray``) and their bytes
(``split_sprayed``), in one loop over the flows of a batch.

The rules, and their reasons, are those of ``fabric_core.net.routing.spray``: a flow is
split into one sub-flow per packet, at most ``ways``; they take consecutive usable
up*/down* candidates from a hashed offset, listed so that neighbours climb to different
spines. The numpy versions stay the reference (the reference solver runs them, and the
compiled tick on a file topology); the tests hold this one to them exactly, path for
path and byte for byte. Compiled, a batch costs a loop over its flows instead of some
forty numpy calls, which on a sprayed fabric was a quarter of every tick.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.route_rules import MAX_HOPS, UNUSABLE_COST
from fabric_core.tick.kernels._jit import inline_kernel, kernel
from fabric_core.tick.kernels.route import candidate_cost, flow_hash

_F = NDArray[np.float64]
_I32 = NDArray[np.int32]


@kernel
def _candidate_cost(
    a: int,
    b: int,
    c: int,
    d: int,
    occupancy: _F,
    n_vls: int,
    bandwidth_Bps: _F,
    known_down: NDArray[np.bool_],
) -> float:
    """The reference's cost of a candidate crossing links ``a`` to ``d``, summed in its
    order (``UNUSABLE_COST`` or more where one is down; a missing link, -1, reads the
    last, as numpy's indexing does)."""
    occ, bw, down = occupancy, bandwidth_Bps, known_down
    total = candidate_cost(occ, n_vls, bw, down, a) + candidate_cost(occ, n_vls, bw, down, b)
    total += candidate_cost(occ, n_vls, bw, down, c)
    return total + candidate_cost(occ, n_vls, bw, down, d)


@inline_kernel
def _column(
    usable: NDArray[np.bool_], n_usable: int, h: np.uint64, way: int, order: NDArray[np.intp]
) -> int:
    """The candidate of sub-flow ``way`` (``routing.spray``'s ``choose``): the ``way``-th
    usable candidate after the hashed offset, in ``order``; the first when none is
    usable. ``usable`` is by place in ``order``."""
    n = order.size
    if n_usable == n:  # the usual case, no link down: the k-th usable is the k-th
        return int(order[np.int64((h % np.uint64(n) + np.uint64(way)) % np.uint64(n))])
    m = np.uint64(max(n_usable, 1))
    want = np.int64((h % m + np.uint64(way)) % m)
    rank = -1
    for p in range(n):
        if usable[p]:
            rank += 1
            if rank == want:
                return int(order[p])
    return int(order[want % n])


@kernel
def spray_flows(
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    size: _F,
    ways: int,
    mtu_bytes: float,
    occupancy: _F,
    n_vls: int,
    bandwidth_Bps: _F,
    known_down: NDArray[np.bool_],
    ep_uplink: _I32,
    ep_downlink: _I32,
    ep_leaf: _I32,
    node_pod: _I32,
    switch_index: _I32,
    switch_link: _I32,
    spines_by_pod: _I32,
    cores_by_slot: _I32,
    planes: int,
    tiers: int,
    every_usable: bool,
) -> tuple[_I32, NDArray[np.int8], NDArray[np.intp], NDArray[np.int64], _F]:
    """Sub-flows of sprayed flows: (path, hops, flow of each sub-flow, sub-flows per
    flow, bytes per sub-flow), as ``routing.spray`` then ``routing.split_sprayed`` give
    them. A candidate is unusable where the reference's cost of it reaches
    ``UNUSABLE_COST``: a link routing knows is down on it, or a link it lacks.
    ``every_usable``: the topology has every candidate and no link is known down, so no
    candidate is costed (the reference's own shortcut, ``by_hash``)."""
    n = src.size
    n_sub = np.empty(n, dtype=np.int64)
    rows = 0
    for f in range(n):
        packets = np.ceil(size[f] / mtu_bytes)
        n_sub[f] = np.int64(min(max(packets, 1.0), float(ways)))
        rows += n_sub[f]
    path = np.full((MAX_HOPS, rows), -1, dtype=np.int32)
    hops = np.zeros(rows, dtype=np.int8)
    of = np.empty(rows, dtype=np.intp)
    sub_size = np.empty(rows)
    sw, sl = switch_index, switch_link
    n_slots = spines_by_pod.shape[2]
    per = cores_by_slot.shape[2]
    q = (occupancy, n_vls, bandwidth_Bps, known_down)
    # candidates in the reference's order: spines by slot; across pods core-major, so
    # that neighbours use different spines
    spine_order = np.arange(n_slots)
    core_order = np.empty(n_slots * per, dtype=np.intp)
    for r in range(n_slots * per):
        core_order[r] = (r % n_slots) * per + r // n_slots
    usable = np.empty(n_slots * per if tiers == 3 else n_slots, dtype=np.bool_)
    row = 0
    for f in range(n):
        h = flow_hash(src[f], dst[f], key[f])
        plane = int(np.int64(h >> np.uint64(40)) % planes) if planes > 1 else 0
        up, down = ep_uplink[src[f], plane], ep_downlink[dst[f], plane]
        ls, ld = ep_leaf[src[f], plane], ep_leaf[dst[f], plane]
        k = n_sub[f]
        share = size[f] / k
        for i in range(k):
            of[row + i] = f
            sub_size[row + i] = size[f] - (k - 1) * share if i == k - 1 else share
            path[0, row + i] = up
        if ls == ld:  # endpoint -> leaf -> endpoint
            for i in range(k):
                path[1, row + i] = down
                hops[row + i] = 2
        elif tiers == 2 or node_pod[ls] == node_pod[ld]:
            # up to a spine of the pod, down to the destination leaf
            spines = spines_by_pod[plane, node_pod[ls]]
            n_usable = n_slots  # (``_column`` reads ``usable`` only when some is not)
            if not every_usable:
                n_usable = 0
                for j in range(n_slots):
                    l_up, l_dn = sl[sw[ls], sw[spines[j]]], sl[sw[spines[j]], sw[ld]]
                    c = _candidate_cost(l_up, l_dn, up, down, *q)
                    usable[j] = l_up >= 0 and l_dn >= 0 and c < UNUSABLE_COST
                    n_usable += usable[j]
            for i in range(k):
                s = spines[_column(usable[:n_slots], n_usable, h, i, spine_order)]
                path[1, row + i] = sl[sw[ls], sw[s]]
                path[2, row + i] = sl[sw[s], sw[ld]]
                path[3, row + i] = down
                hops[row + i] = 4
        else:
            # leaf -> spine (slot j) -> core (group j) -> spine (slot j, dst pod) -> leaf
            from_pod = spines_by_pod[plane, node_pod[ls]]
            to_pod = spines_by_pod[plane, node_pod[ld]]
            cores = cores_by_slot[plane]
            n_usable = n_slots * per
            if not every_usable:
                n_usable = 0
                for p in range(n_slots * per):
                    j, m = divmod(core_order[p], per)
                    sa, sb, cr = sw[from_pod[j]], sw[to_pod[j]], sw[cores[j, m]]
                    l1, l2, l3, l4 = sl[sw[ls], sa], sl[sa, cr], sl[cr, sb], sl[sb, sw[ld]]
                    c = _candidate_cost(l1, l2, l3, l4, *q)
                    usable[p] = l2 >= 0 and l3 >= 0 and c < UNUSABLE_COST
                    n_usable += usable[p]
            for i in range(k):
                j, m = divmod(_column(usable, n_usable, h, i, core_order), per)
                sa, sb, cr = sw[from_pod[j]], sw[to_pod[j]], sw[cores[j, m]]
                path[1, row + i] = sl[sw[ls], sa]
                path[2, row + i] = sl[sa, cr]
                path[3, row + i] = sl[cr, sb]
                path[4, row + i] = sl[sb, sw[ld]]
                path[5, row + i] = down
                hops[row + i] = 6
        row += k
    return path, hops, of, n_sub, sub_size
