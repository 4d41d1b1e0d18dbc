"""Up*/down* routing on leaf-spine and fat-tree fabrics, vectorised over flows.

A path climbs from the source endpoint to the lowest tier where source and
destination meet, then descends: such paths never turn down-then-up, so the
buffer dependency graph is acyclic and credit flow control cannot deadlock
(the UPDN argument, opensm ``doc/current-routing.txt``). The choice among
equal-cost paths is:

* ``ecmp``: a hash of the flow (static per flow, so collisions and
  polarisation happen, as with RoCE ECMP);
* ``adaptive``: the less loaded of two hashed candidates when the flow starts, the
  load being the queues the fabric holds plus the bytes the flows routed before it in
  the same batch have put on each link (``route``'s ``size_bytes``): a burst started
  in one tick spreads instead of herding onto the link that looked idle;
* ``spray`` (function ``spray``): packet spraying, in the fluid model. A flow
  becomes ``spray_ways`` sub-flows on distinct candidates (at most
  ``SPRAY_MAX_WAYS``), so its bytes are spread evenly over the equal-cost paths;
  the fabric splits the bytes and reports one completion per flow
  (``Fabric.start_flows``, ``FlowTable.finish``). Reordering costs are not
  modelled; docs/MODEL.md has the details.

Links that are down are never chosen while any candidate avoids them (that is
"routes have converged"; until then the caller keeps the old paths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.route_rules import (
    ADAPTIVE_COST_QUANTUM_S,
    MAX_HOPS,
    SPRAY_MAX_WAYS,
    UNUSABLE_COST,
    flow_hash,
)
from fabric_core.net.topology import Topology

__all__ = [
    "ADAPTIVE_COST_QUANTUM_S",
    "MAX_HOPS",
    "SPRAY_MAX_WAYS",
    "UNUSABLE_COST",
    "flow_hash",
    "link_loads",
    "route",
    "spray",
    "spray_ways",
]


def _pick(costs: NDArray[np.float64], key: NDArray[np.uint64], mode: str) -> NDArray[np.intp]:
    """Column per row: the less loaded of two hashed candidates (adaptive), or one hashed
    candidate (ecmp); both only among usable candidates."""
    n = costs.shape[1]
    usable = costs < UNUSABLE_COST
    if usable.all():  # the usual case, no link down: the k-th usable candidate is column k
        n_usable = np.full(costs.shape[0], n, dtype=np.uint64)

        def kth_usable(k: NDArray[np.uint64]) -> NDArray[np.intp]:
            return k.astype(np.intp)

    else:
        n_usable = np.maximum(usable.sum(axis=1), 1).astype(np.uint64)
        rank = np.cumsum(usable, axis=1) - 1

        def kth_usable(k: NDArray[np.uint64]) -> NDArray[np.intp]:
            hit = usable & (rank == k.astype(np.intp)[:, None])
            fallback = (k % np.uint64(n)).astype(np.intp)
            return cast("NDArray[np.intp]", np.where(hit.any(axis=1), hit.argmax(axis=1), fallback))

    first = kth_usable(key % n_usable)
    if mode != "adaptive":
        return first
    # Adaptive: the less loaded of two candidates ("power of two choices"). Taking the
    # single least-loaded one would send a whole batch of flows started in the same tick
    # (an all-to-all phase) onto one spine, since they all see the same queue lengths.
    second = kth_usable((key >> np.uint64(17)) % n_usable)
    rows = np.arange(costs.shape[0])
    c1 = np.floor(costs[rows, first] / ADAPTIVE_COST_QUANTUM_S)
    c2 = np.floor(costs[rows, second] / ADAPTIVE_COST_QUANTUM_S)
    return cast("NDArray[np.intp]", np.where(c2 < c1, second, first))


_Chooser = Callable[[NDArray[np.float64], NDArray[np.uint64], NDArray[np.intp]], NDArray[np.intp]]
_HashChooser = Callable[[NDArray[np.uint64], NDArray[np.intp]], NDArray[np.intp]]


def route(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    *,
    mode: str,
    link_cost: NDArray[np.float64],
    plane: NDArray[np.int64] | None = None,
    size_bytes: NDArray[np.float64] | None = None,
    link_load_bytes: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """Paths for many (src, dst) endpoint pairs at once.

    Args:
        topo: the topology.
        src, dst: endpoint node ids (arrays of equal length).
        key: per-flow hash key (ECMP; tie-breaks for adaptive).
        mode: ``"ecmp"`` or ``"adaptive"``.
        link_cost: per-link cost for adaptive routing; ``inf`` (or > 1e30)
            marks a link that must not be used.
        plane: plane per flow (multi-plane); hashed when None.
        size_bytes: bytes per flow (adaptive). Flows are then routed in order, each
            seeing on every link, besides ``link_cost``, the bytes of the flows routed
            before it at that link's line rate: the load this batch has placed. A
            switch's adaptive routing sees its egress queues fill as a burst arrives;
            a cost read once per tick would not, and a whole burst would take the
            candidate that looked idle. None (or ECMP): costs as given.
        link_load_bytes: per link, the bytes flows already in flight still have to send
            over it (``link_loads``), added to its cost at line rate (adaptive). A flow's
            path is fixed when it starts, so its bytes still at the NIC are load its
            links will carry, though no switch queue holds them yet: counting only the
            queues, every tick's new flows would take the links whose queues the last
            tick's flows have not reached yet. With ``size_bytes`` the batch's bytes are
            added to it in place.

    Returns:
        ``path[hop, flow]`` link ids (-1 past the end) and hops per flow.
    """
    if topo.updown is not None:  # a file topology: walk its up*/down* tables
        from fabric_core.net import table_route  # imports this module: only when used

        return table_route.route(topo, src, dst, key, mode=mode, link_cost=link_cost)

    def choose(
        c: NDArray[np.float64], h: NDArray[np.uint64], order: NDArray[np.intp]
    ) -> NDArray[np.intp]:
        return _pick(c, h, mode)[:, None]

    if mode != "adaptive":
        path, nh = _paths(topo, src, dst, key, link_cost, plane, 1, choose)
        return path[:, :, 0], nh[:, 0]
    bandwidth = topo.links.bandwidth_Bps
    load = np.zeros(bandwidth.size) if link_load_bytes is None else link_load_bytes
    base = np.where(np.isfinite(link_cost), link_cost, UNUSABLE_COST)
    cost = base + load / bandwidth
    if size_bytes is None:
        path, nh = _paths(topo, src, dst, key, cost, plane, 1, choose)
        return path[:, :, 0], nh[:, 0]
    return _route_in_order(topo, src, dst, key, base, load, cost, plane, size_bytes, choose)


def link_loads(
    active: NDArray[np.bool_],
    path: NDArray[np.int32],
    backlog: NDArray[np.float64],
    hops: NDArray[np.int8],
    n_links: int,
) -> NDArray[np.float64]:
    """Per link, the bytes the active flows crossing it have not yet sent over it: at hop
    ``h`` a flow still has its backlog at ``h`` and at every hop before to send there
    (the expected load adaptive routing adds to the queues; ``route``)."""
    slots = np.flatnonzero(active)
    p = path[:, slots].T  # [flow, hop]: summed flow by flow, as the kernel does
    left = np.cumsum(backlog[:, slots].T, axis=1)
    on = np.arange(p.shape[1])[None, :] < hops[slots, None].astype(np.intp)
    return cast("NDArray[np.float64]", np.bincount(p[on], weights=left[on], minlength=n_links))


def _route_in_order(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    base: NDArray[np.float64],
    load: NDArray[np.float64],
    cost: NDArray[np.float64],
    plane: NDArray[np.int64] | None,
    size_bytes: NDArray[np.float64],
    choose: _Chooser,
) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """``route`` one flow after another, each flow's bytes added to ``load`` on the links
    it takes (and ``cost = base + load / bandwidth`` kept up to date there) before the
    next is routed: the reference ``kernels.route.route_flows`` is held to (a loop over
    flows, as the dependence is sequential)."""
    bandwidth = topo.links.bandwidth_Bps
    path = np.full((MAX_HOPS, src.size), -1, dtype=np.int32)
    nh = np.zeros(src.size, dtype=np.int8)
    for f in range(src.size):
        one = slice(f, f + 1)
        pl = None if plane is None else plane[one]
        p, n = _paths(topo, src[one], dst[one], key[one], cost, pl, 1, choose)
        path[:, f], nh[f] = p[:, 0, 0], n[0, 0]
        links = p[: n[0, 0], 0, 0]
        load[links] += size_bytes[f]
        cost[links] = base[links] + load[links] / bandwidth[links]
    return path, nh


def spray_ways(topo: Topology) -> int:
    """Sub-flows a sprayed flow is split into on ``topo`` (see ``SPRAY_MAX_WAYS``).

    The number of equal-cost up*/down* candidates of the widest pair (spines on a
    2-tier fabric, spines × cores per spine across pods on a 3-tier one), capped at
    ``SPRAY_MAX_WAYS`` and, past the spine count, rounded down to a multiple of it so
    that every spine carries the same number of sub-flows. A file topology:
    ``table_route.spray_ways``.
    """
    if topo.updown is not None:
        from fabric_core.net import table_route

        return table_route.spray_ways(topo.updown)
    spines = int(topo.spines_by_pod.shape[2])
    widest = spines * int(topo.cores_by_slot.shape[2]) if topo.tiers == 3 else spines
    ways = min(widest, SPRAY_MAX_WAYS)
    if spines <= ways < widest:
        ways -= ways % spines
    return max(ways, 1)


def spray(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    *,
    ways: int,
    link_cost: NDArray[np.float64],
) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """Paths of sprayed flows: ``ways`` sub-flows per flow, on distinct candidates.

    Sub-flow ``i`` of flow ``f`` is column ``f * ways + i``. The sub-flows of a flow
    take consecutive usable candidates from a hashed offset, ordered so that
    consecutive candidates climb to different spines: with ``ways`` from
    ``spray_ways`` every spine (and, up to the cap, every core) of the pair gets the
    same share. Pairs with fewer usable candidates than ``ways`` (same leaf, down
    links) reuse candidates round-robin. All sub-flows of a flow stay in one plane.

    Returns:
        ``path[hop, sub-flow]`` link ids (-1 past the end) and hops per sub-flow.
    """
    if topo.updown is not None:
        from fabric_core.net import table_route

        return table_route.spray(topo, src, dst, key, ways=ways, link_cost=link_cost)
    steps = np.arange(ways, dtype=np.uint64)

    def by_hash(h: NDArray[np.uint64], order: NDArray[np.intp]) -> NDArray[np.intp]:
        """Every candidate usable: the ``ways`` consecutive ones from the hashed offset."""
        n = np.uint64(order.size)
        return order[(((h % n)[:, None] + steps[None, :]) % n).astype(np.intp)]

    def choose(
        c: NDArray[np.float64], h: NDArray[np.uint64], order: NDArray[np.intp]
    ) -> NDArray[np.intp]:
        c = c[:, order]
        n = c.shape[1]
        usable = c < UNUSABLE_COST
        if usable.all():  # the usual case, no link down: the k-th usable candidate is column k
            return by_hash(h, order)
        n_usable = np.maximum(usable.sum(axis=1), 1).astype(np.uint64)
        rank = np.cumsum(usable, axis=1) - 1
        want = ((h % n_usable)[:, None] + steps[None, :]) % n_usable[:, None]  # [flows, ways]
        hit = usable[:, None, :] & (rank[:, None, :] == want.astype(np.intp)[:, :, None])
        fallback = (want % np.uint64(n)).astype(np.intp)
        col = np.where(hit.any(axis=2), hit.argmax(axis=2), fallback)
        return cast("NDArray[np.intp]", order[col])

    # with no link down on a fabric that has every candidate, every candidate is usable
    usable = topo.has_every_candidate and bool((link_cost < UNUSABLE_COST).all())
    path, nh = _paths(
        topo, src, dst, key, link_cost, None, ways, choose, by_hash if usable else None
    )
    return path.reshape(MAX_HOPS, -1), nh.reshape(-1)


#: Sprayed flows' sub-flows: (path, hops, flow of each sub-flow, sub-flows per flow, bytes
#: per sub-flow)
SubFlows = tuple[
    NDArray[np.int32], NDArray[np.int8], NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]
]


def split_sprayed(
    path: NDArray[np.int32],
    hops: NDArray[np.int8],
    size: NDArray[np.float64],
    ways: int,
    mtu_bytes: float,
) -> SubFlows:
    """The sub-flows of flows sprayed ``ways`` ways (``spray``'s paths): (path, hops,
    flow of each sub-flow, sub-flows per flow, bytes per sub-flow).

    A flow uses ``ways`` paths, or one per packet when it has fewer packets (a
    one-packet message has one path). The bytes are split evenly; the last sub-flow
    takes the rounding, so the sub-flows add up to the flow exactly.
    """
    packets = np.ceil(size / mtu_bytes)
    n_sub = np.clip(packets, 1, ways).astype(np.int64)
    rows = np.flatnonzero((np.arange(ways)[None, :] < n_sub[:, None]).ravel())
    of = rows // ways
    share = size / n_sub
    last = rows % ways == n_sub[of] - 1
    sub_size = np.where(last, size[of] - (n_sub[of] - 1) * share[of], share[of])
    return path[:, rows], hops[rows], of, n_sub, sub_size


def sprayed(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    size: NDArray[np.float64],
    *,
    ways: int,
    mtu_bytes: float,
    link_cost: NDArray[np.float64],
) -> SubFlows:
    """Sprayed flows' sub-flows: ``spray``'s paths, split by ``split_sprayed`` (the
    reference ``kernels.spray.spray_flows`` is held to)."""
    path, hops = spray(topo, src, dst, key, ways=ways, link_cost=link_cost)
    return split_sprayed(path, hops, size, ways, mtu_bytes)


def _paths(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    link_cost: NDArray[np.float64],
    plane: NDArray[np.int64] | None,
    ways: int,
    choose: _Chooser,
    by_hash: _HashChooser | None = None,
) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """``path[hop, flow, way]`` and ``hops[flow, way]``: ``choose(cost, hash, order)``
    gives, per flow, ``ways`` candidate columns of ``cost[flow, candidate]``; ``order``
    lists the candidates so that neighbours climb to different spines. ``by_hash(hash,
    order)``, where every candidate is usable, gives the same columns without their costs:
    then only the chosen candidates' links are looked up."""
    f = src.size
    path = np.full((MAX_HOPS, f, ways), -1, dtype=np.int32)
    nh = np.zeros((f, ways), dtype=np.int8)
    if f == 0:
        return path, nh
    h = flow_hash(src, dst, key)
    if plane is None:
        plane = (
            (h >> np.uint64(40)).astype(np.int64) % topo.planes
            if topo.planes > 1
            else np.zeros(f, np.int64)
        )
    cost = np.where(np.isfinite(link_cost), link_cost, UNUSABLE_COST)
    up = topo.ep_uplink[src, plane]
    down = topo.ep_downlink[dst, plane]
    ls = topo.ep_leaf[src, plane]
    ld = topo.ep_leaf[dst, plane]
    path[0] = up[:, None]
    same_leaf = ls == ld
    # 2 hops: endpoint -> leaf -> endpoint
    path[1, same_leaf] = down[same_leaf, None]
    nh[same_leaf] = 2
    sw = topo.switch_index
    sl = topo.switch_link
    pod_s = topo.node_pod[ls]
    pod_d = topo.node_pod[ld]
    same_pod = ~same_leaf & (pod_s == pod_d)
    if topo.tiers == 2:
        same_pod = ~same_leaf
    spines = topo.spines_by_pod  # [plane, pod, slot]
    n_slots = spines.shape[2]
    # 4 hops: up to a spine of the pod, down to the destination leaf
    idx = np.flatnonzero(same_pod)
    if idx.size:
        cand = spines[plane[idx], pod_s[idx], :]  # [n, slots]
        rows = np.arange(idx.size)[:, None]
        if by_hash is not None:  # the columns first, then only their links
            spine = cand[rows, by_hash(h[idx], np.arange(n_slots))]  # [n, ways]
            path[1, idx] = sl[sw[ls[idx]][:, None], sw[spine]]
            path[2, idx] = sl[sw[spine], sw[ld[idx]][:, None]]
        else:
            l_up = sl[sw[ls[idx]][:, None], sw[cand]]
            l_dn = sl[sw[cand], sw[ld[idx]][:, None]]
            c = cost[l_up] + cost[l_dn] + cost[up[idx]][:, None] + cost[down[idx]][:, None]
            c = np.where((l_up < 0) | (l_dn < 0), UNUSABLE_COST, c)
            k = choose(c, h[idx], np.arange(n_slots))  # [n, ways]
            path[1, idx] = l_up[rows, k]
            path[2, idx] = l_dn[rows, k]
        path[3, idx] = down[idx, None]
        nh[idx] = 4
    # 6 hops: leaf -> spine(slot j) -> core (group j) -> spine(slot j, dst pod) -> leaf
    idx = np.flatnonzero(~same_leaf & ~same_pod)
    if idx.size:
        cores = topo.cores_by_slot  # [plane, slot, k]
        per = cores.shape[2]
        pl = plane[idx]
        sa = spines[pl, pod_s[idx], :]  # [n, slots]
        sb = spines[pl, pod_d[idx], :]
        # candidate j * per + m; listed core-major so that neighbours use different spines
        r = np.arange(n_slots * per)
        order = (r % n_slots) * per + r // n_slots
        rows = np.arange(idx.size)[:, None]
        if by_hash is not None:  # the columns first, then only their links
            j, m = np.divmod(by_hash(h[idx], order), per)  # [n, ways]
            a, b, core = sw[sa[rows, j]], sw[sb[rows, j]], sw[cores[pl[:, None], j, m]]
            path[1, idx] = sl[sw[ls[idx]][:, None], a]
            path[2, idx] = sl[a, core]
            path[3, idx] = sl[core, b]
            path[4, idx] = sl[b, sw[ld[idx]][:, None]]
        else:
            cr = cores[pl, :, :]  # [n, slots, per]
            l1 = sl[sw[ls[idx]][:, None], sw[sa]]  # [n, slots]
            l4 = sl[sw[sb], sw[ld[idx]][:, None]]
            l2 = sl[sw[sa][:, :, None], sw[cr]]  # [n, slots, per]
            l3 = sl[sw[cr], sw[sb][:, :, None]]
            c = cost[l1][:, :, None] + cost[l2] + cost[l3] + cost[l4][:, :, None]
            c = np.where((l2 < 0) | (l3 < 0), UNUSABLE_COST, c).reshape(idx.size, n_slots * per)
            j, m = np.divmod(choose(c, h[idx], order), per)
            path[1, idx] = l1[rows, j]
            path[2, idx] = l2[rows, j, m]
            path[3, idx] = l3[rows, j, m]
            path[4, idx] = l4[rows, j]
        path[5, idx] = down[idx, None]
        nh[idx] = 6
    return path, nh
