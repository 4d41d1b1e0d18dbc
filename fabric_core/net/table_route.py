"""Routing on a file topology by its up*/down* tables (``fabric_core.net.updown``), in numpy:
the reference ``kernels.table_route`` is held to.

A flow walks from its source's switch to its destination's, taking at each switch
one of the links on a shortest legal path (up while it may, down once it has gone
down). The choice is per hop, as a switch's adaptive routing makes it: a hashed
candidate (ECMP) or the less loaded of two hashed candidates (adaptive: "power of
two choices" by the link's queueing delay), each hop with its own hash of the flow.
Links known to be down are avoided by walking the tables of the fabric without
them; a pair they disconnect keeps the healthy tables (its flows wait, as on a
built fabric when every candidate is down).
"""

from __future__ import annotations

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
from fabric_core.net.updown import UNREACHABLE, UpDown

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def hop_hash(h: NDArray[np.uint64], step: int) -> NDArray[np.uint64]:
    """The flow's hash for its ``step``-th switch hop (splitmix64 of ``h`` + step)."""
    with np.errstate(over="ignore"):
        x = h + _GOLDEN * np.uint64(step + 1)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def _pick(
    valid: NDArray[np.bool_], cost: NDArray[np.float64], h: NDArray[np.uint64], adaptive: bool
) -> NDArray[np.intp]:
    """Column per row among the ``valid`` ones: the hashed usable one (cost below
    ``UNUSABLE_COST``), or the less loaded of two (adaptive); the first valid if none is usable.
    ``kernels.route.pick`` on each row's valid columns."""
    usable = valid & (cost < UNUSABLE_COST)
    n = np.maximum(usable.sum(axis=1), 1).astype(np.uint64)
    rank = np.cumsum(usable, axis=1) - 1
    first_valid = valid.argmax(axis=1)

    def kth(k: NDArray[np.uint64]) -> NDArray[np.intp]:
        hit = usable & (rank == k.astype(np.intp)[:, None])
        return cast("NDArray[np.intp]", np.where(hit.any(axis=1), hit.argmax(axis=1), first_valid))

    first = kth(h % n)
    if not adaptive:
        return first
    second = kth((h >> np.uint64(17)) % n)
    rows = np.arange(valid.shape[0])
    c1 = np.floor(cost[rows, first] / ADAPTIVE_COST_QUANTUM_S)
    c2 = np.floor(cost[rows, second] / ADAPTIVE_COST_QUANTUM_S)
    return cast("NDArray[np.intp]", np.where(c2 < c1, second, first))


def route(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    *,
    mode: str,
    link_cost: NDArray[np.float64],
) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """``routing.route`` on a file topology: ``path[hop, flow]`` and hops per flow."""
    ud = topo.updown
    assert ud is not None, "a file topology carries its up*/down* tables"
    f = src.size
    path = np.full((MAX_HOPS, f), -1, dtype=np.int32)
    nh = np.zeros(f, dtype=np.int8)
    if f == 0:
        return path, nh
    h = flow_hash(src, dst, key)
    cost = np.where(np.isfinite(link_cost), link_cost, UNUSABLE_COST)
    blocked = cost >= UNUSABLE_COST
    any_h, down_h = ud.dist_any, ud.dist_down
    any_d, down_d = ud.tables(blocked)
    sw = topo.switch_index
    cur = sw[topo.ep_leaf[src, 0]].astype(np.intp)
    goal = sw[topo.ep_leaf[dst, 0]].astype(np.intp)
    degraded = any_d[cur, goal] < UNREACHABLE
    rem = np.where(degraded, any_d[cur, goal], any_h[cur, goal]).astype(np.int64)
    climbing = np.ones(f, dtype=bool)
    path[0] = topo.ep_uplink[src, 0]
    nh[:] = rem + 2
    for step in range(MAX_HOPS - 2):
        live = np.flatnonzero(rem > 0)
        if live.size == 0:
            break
        c, g, r = cur[live], goal[live], rem[live]
        links = ud.adj_link[c]  # [n, width]
        nxt = np.maximum(ud.adj_row[c], 0)
        deg = degraded[live][:, None]
        d_any = np.where(deg, any_d[nxt, g[:, None]], any_h[nxt, g[:, None]])
        d_down = np.where(deg, down_d[nxt, g[:, None]], down_h[nxt, g[:, None]])
        up = ud.adj_up[c]
        on_path = np.where(up, climbing[live][:, None] & (d_any == r[:, None] - 1),
                           d_down == r[:, None] - 1)  # fmt: skip
        valid = (links >= 0) & on_path & ~(deg & blocked[np.maximum(links, 0)])
        k = _pick(valid, cost[np.maximum(links, 0)], hop_hash(h[live], step), mode == "adaptive")
        rows = np.arange(live.size)
        path[step + 1, live] = links[rows, k]
        climbing[live] &= up[rows, k]
        cur[live] = nxt[rows, k]
        rem[live] -= 1
    path[nh - 1, np.arange(f)] = topo.ep_downlink[dst, 0]
    return path, nh


def spray_ways(ud: UpDown) -> int:
    """Sub-flows of a sprayed flow on a file topology: the most up links of a switch
    (the widest first choice), capped at ``SPRAY_MAX_WAYS``."""
    ups = ud.adj_up.sum(axis=1)
    return int(min(max(int(ups.max(initial=1)), 1), SPRAY_MAX_WAYS))


def spray(
    topo: Topology,
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    *,
    ways: int,
    link_cost: NDArray[np.float64],
) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """``routing.spray`` on a file topology: sub-flow ``i`` of flow ``f`` (column
    ``f * ways + i``) takes the ECMP walk of its own key, so the sub-flows spread over
    the shortest legal paths by hash (evenly only on average)."""
    sub = np.repeat(key * ways, ways) + np.tile(np.arange(ways, dtype=np.int64), key.size)
    return route(
        topo, np.repeat(src, ways), np.repeat(dst, ways), sub, mode="ecmp", link_cost=link_cost
    )
