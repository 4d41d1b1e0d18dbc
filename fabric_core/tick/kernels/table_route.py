"""New flows' paths on a file topology, compiled: ``fabric_core.net.table_route.route`` as one
loop over flows and hops (the numpy version there stays the reference; the tests hold
this one to it exactly)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.routing import MAX_HOPS
from fabric_core.net.updown import UNREACHABLE
from fabric_core.tick.kernels._jit import kernel
from fabric_core.tick.kernels.route import candidate_cost, flow_hash, pick

_I32 = NDArray[np.int32]
_I16 = NDArray[np.int16]
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


@kernel
def hop_hash(h: np.uint64, step: int) -> np.uint64:
    """``table_route.hop_hash`` for one flow."""
    x = h + _GOLDEN * np.uint64(step + 1)
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


@kernel
def table_route_flows(
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
    occupancy: NDArray[np.float64],
    n_vls: int,
    bandwidth_Bps: NDArray[np.float64],
    known_down: NDArray[np.bool_],
    ep_uplink: _I32,
    ep_downlink: _I32,
    ep_leaf: _I32,
    switch_index: _I32,
    adj_link: _I32,
    adj_row: _I32,
    adj_up: NDArray[np.bool_],
    any_h: _I16,
    down_h: _I16,
    any_d: _I16,
    down_d: _I16,
    adaptive: bool,
) -> tuple[_I32, NDArray[np.int8]]:
    """``path[hop, flow]`` and hops per flow: each flow walks the shortest legal paths
    (``*_d`` tables: without the known-down links; ``*_h``: all links, for pairs those
    disconnect), one hashed or less loaded candidate per hop."""
    n = src.size
    path = np.full((MAX_HOPS, n), -1, dtype=np.int32)
    nh = np.zeros(n, dtype=np.int8)
    width = adj_link.shape[1]
    cand = np.empty(width, dtype=np.int64)  # column of each candidate
    cost = np.empty(width)
    for f in range(n):
        h = flow_hash(src[f], dst[f], key[f])
        cur = switch_index[ep_leaf[src[f], 0]]
        goal = switch_index[ep_leaf[dst[f], 0]]
        degraded = any_d[cur, goal] < UNREACHABLE
        t_any = any_d if degraded else any_h
        t_down = down_d if degraded else down_h
        rem = int(t_any[cur, goal])
        path[0, f] = ep_uplink[src[f], 0]
        nh[f] = rem + 2
        climbing = True
        step = 0
        while rem > 0:
            m = 0
            for k in range(width):
                li = adj_link[cur, k]
                if li < 0:
                    continue
                nxt = adj_row[cur, k]
                if adj_up[cur, k]:
                    ok = climbing and t_any[nxt, goal] == rem - 1
                else:
                    ok = t_down[nxt, goal] == rem - 1
                if ok and not (degraded and known_down[li]):
                    cand[m] = k
                    cost[m] = candidate_cost(occupancy, n_vls, bandwidth_Bps, known_down, li)
                    m += 1
            k = cand[pick(cost[:m], hop_hash(h, step), adaptive)]
            path[step + 1, f] = adj_link[cur, k]
            climbing = climbing and adj_up[cur, k]
            cur = adj_row[cur, k]
            rem -= 1
            step += 1
        path[nh[f] - 1, f] = ep_downlink[dst[f], 0]
    return path, nh
