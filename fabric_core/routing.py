"""Up*/down* routing on leaf-spine and fat-tree fabrics, vectorised over flows.

A path climbs from the source endpoint to the lowest tier where source and
destination meet, then descends: such paths never turn down-then-up, so the
buffer dependency graph is acyclic and credit flow control cannot deadlock
(the UPDN argument, opensm ``doc/current-routing.txt``). The choice among
equal-cost paths is:

* ``ecmp``: a hash of the flow (static per flow, so collisions and
  polarisation happen, as with RoCE ECMP);
* ``adaptive``: the less loaded of two hashed candidates when the flow starts.

Packet spraying (a flow split over every candidate) is not modelled: a profile that
asks for ``spray`` is routed adaptively, per flow.

Links that are down are never chosen while any candidate avoids them (that is
"routes have converged"; until then the caller keeps the old paths).
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import NDArray

from fabric_core.topology import Topology

MAX_HOPS = 6

_BIG = 1e30

#: Adaptive routing treats candidate paths whose queueing delay differs by less
#: than this as equally good (a model choice: about two 4 KiB packets at 400 Gb/s).
ADAPTIVE_COST_QUANTUM_S = 100e-9


def _hash(*arrays: NDArray[np.int64]) -> NDArray[np.uint64]:
    """A cheap, deterministic 64-bit mix (splitmix64 finaliser) of integer arrays."""
    h = np.zeros(arrays[0].shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for a in arrays:
            h ^= a.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15) + (h << np.uint64(6))
            h ^= h >> np.uint64(30)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(27)
            h *= np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(31)
    return h


def _pick(costs: NDArray[np.float64], key: NDArray[np.uint64], mode: str) -> NDArray[np.intp]:
    """Column per row: the less loaded of two hashed candidates (adaptive), or one hashed
    candidate (ecmp); both only among usable candidates."""
    n = costs.shape[1]
    usable = costs < _BIG
    n_usable = np.maximum(usable.sum(axis=1), 1).astype(np.uint64)
    rank = np.cumsum(usable, axis=1) - 1

    def kth_usable(k: NDArray[np.uint64]) -> NDArray[np.intp]:
        hit = usable & (rank == k.astype(np.intp)[:, None])
        fallback = (k % np.uint64(n)).astype(np.intp)
        return cast(NDArray[np.intp], np.where(hit.any(axis=1), hit.argmax(axis=1), fallback))

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
    return cast(NDArray[np.intp], np.where(c2 < c1, second, first))


def route(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    *,
    mode: str,
    link_cost: NDArray[np.float64],
    plane: NDArray[np.int64] | None = None,
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

    Returns:
        ``path[hop, flow]`` link ids (-1 past the end) and hops per flow.
    """
    f = src.size
    path = np.full((MAX_HOPS, f), -1, dtype=np.int32)
    nh = np.zeros(f, dtype=np.int8)
    if f == 0:
        return path, nh
    h = _hash(src, dst, key)
    if plane is None:
        plane = (
            (h >> np.uint64(40)).astype(np.int64) % topo.planes
            if topo.planes > 1
            else np.zeros(f, np.int64)
        )
    cost = np.where(np.isfinite(link_cost), link_cost, _BIG)
    up = topo.ep_uplink[src, plane]
    down = topo.ep_downlink[dst, plane]
    ls = topo.ep_leaf[src, plane]
    ld = topo.ep_leaf[dst, plane]
    path[0] = up
    same_leaf = ls == ld
    # 2 hops: endpoint -> leaf -> endpoint
    path[1, same_leaf] = down[same_leaf]
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
        l_up = sl[sw[ls[idx]][:, None], sw[cand]]
        l_dn = sl[sw[cand], sw[ld[idx]][:, None]]
        c = cost[l_up] + cost[l_dn] + cost[up[idx]][:, None] + cost[down[idx]][:, None]
        c = np.where((l_up < 0) | (l_dn < 0), _BIG, c)
        k = _pick(c, h[idx], mode)
        rows = np.arange(idx.size)
        path[1, idx] = l_up[rows, k]
        path[2, idx] = l_dn[rows, k]
        path[3, idx] = down[idx]
        nh[idx] = 4
    # 6 hops: leaf -> spine(slot j) -> core (group j) -> spine(slot j, dst pod) -> leaf
    idx = np.flatnonzero(~same_leaf & ~same_pod)
    if idx.size:
        cores = topo.cores_by_slot  # [plane, slot, k]
        per = cores.shape[2]
        pl = plane[idx]
        sa = spines[pl, pod_s[idx], :]  # [n, slots]
        sb = spines[pl, pod_d[idx], :]
        cr = cores[pl, :, :]  # [n, slots, per]
        l1 = sl[sw[ls[idx]][:, None], sw[sa]]  # [n, slots]
        l4 = sl[sw[sb], sw[ld[idx]][:, None]]
        l2 = sl[sw[sa][:, :, None], sw[cr]]  # [n, slots, per]
        l3 = sl[sw[cr], sw[sb][:, :, None]]
        c = cost[l1][:, :, None] + cost[l2] + cost[l3] + cost[l4][:, :, None]
        c = np.where((l2 < 0) | (l3 < 0), _BIG, c).reshape(idx.size, n_slots * per)
        k = _pick(c, h[idx], mode)
        j, m = np.divmod(k, per)
        rows = np.arange(idx.size)
        path[1, idx] = l1[rows, j]
        path[2, idx] = l2[rows, j, m]
        path[3, idx] = l3[rows, j, m]
        path[4, idx] = l4[rows, j]
        path[5, idx] = down[idx]
        nh[idx] = 6
    return path, nh
