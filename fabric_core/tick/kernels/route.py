"""New flows' paths, lanes and fixed costs, compiled: one loop over the flows of a batch.

The rules are ``fabric_core.net.routing`` (up*/down* candidates, ECMP hash or adaptive
"power of two choices"), ``fabric_core.net.paths.lanes`` and
``fabric_core.net.paths.fixed_costs``, whose docstrings give the reasons; the numpy
versions there stay the reference, and the tests hold these to them exactly.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.routing import ADAPTIVE_COST_QUANTUM_S, MAX_HOPS
from fabric_core.tick.kernels._jit import inline_kernel, kernel, specialised_kernel
from fabric_core.tick.kernels.departure import departure_rate
from fabric_core.tick.kernels.sorting import sorted_copy

_BIG = 1e30
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))

_F = NDArray[np.float64]
_I32 = NDArray[np.int32]
_I = NDArray[np.intp]


@kernel
def flow_hash(src: int, dst: int, key: int) -> np.uint64:
    """``route_rules.flow_hash(src, dst, key)`` for one flow (splitmix64 finaliser, wrapping)."""
    h = np.uint64(0)
    for a in (src, dst, key):
        h ^= np.uint64(a) + _MIX[0] + (h << np.uint64(6))
        h ^= h >> np.uint64(30)
        h *= _MIX[1]
        h ^= h >> np.uint64(27)
        h *= _MIX[2]
        h ^= h >> np.uint64(31)
    return h


@kernel
def _kth_usable(cost: _F, k: np.uint64, all_usable: bool) -> np.int64:
    """Column of the ``k``-th usable candidate (cost below ``_BIG``); ``k`` mod the
    number of candidates when there is no such column."""
    # every return is an int64: numba unifies int64 with uint64 as a float
    if all_usable:
        return np.int64(k)
    rank = -1
    for c in range(cost.size):
        if cost[c] < _BIG:
            rank += 1
            if rank == np.int64(k):
                return np.int64(c)
    return np.int64(k % np.uint64(cost.size))


@kernel
def pick(cost: _F, h: np.uint64, adaptive: bool) -> np.int64:
    """``routing._pick`` for one flow: a hashed usable candidate (ECMP), or the less
    loaded of two (adaptive)."""
    n_usable = 0
    for c in range(cost.size):
        if cost[c] < _BIG:
            n_usable += 1
    all_usable = n_usable == cost.size
    n = np.uint64(max(n_usable, 1))
    first = _kth_usable(cost, h % n, all_usable)
    if not adaptive:
        return first
    second = _kth_usable(cost, (h >> np.uint64(17)) % n, all_usable)
    c1 = np.floor(cost[first] / ADAPTIVE_COST_QUANTUM_S)
    c2 = np.floor(cost[second] / ADAPTIVE_COST_QUANTUM_S)
    return second if c2 < c1 else first


#: Whether ``route_flows`` routes between pods (False in ``route_flows_in_pods``)
ACROSS_PODS = True

#: More links known down than this and routing costs every candidate of a flow (as the
#: reference does) instead of finding the few it may not use (``route_flows``): a
#: switch's worth of down links, past which both cost about the same
MAX_DOWN_SHORTCUT = 64


@inline_kernel
def _skip(k: np.int64, bad: NDArray[np.int64], n_bad: int) -> np.int64:
    """The ``k``-th candidate (from 0) not in ``bad[:n_bad]`` (ascending, distinct)."""
    for i in range(n_bad):
        if bad[i] > k:
            break
        k += 1
    return k


@inline_kernel
def _two_choices(
    h: np.uint64, n_total: int, bad: NDArray[np.int64], n_bad: int
) -> tuple[np.int64, np.int64]:
    """``pick``'s two hashed candidates among ``n_total``, of which ``bad[:n_bad]`` are
    unusable: the ``h``-th and the ``h >> 17``-th usable, modulo their number (both the
    first candidate when none is usable, as ``_kth_usable`` gives)."""
    n_ok = n_total - n_bad
    if n_ok <= 0:
        return np.int64(0), np.int64(0)
    k1 = _skip(np.int64(h % np.uint64(n_ok)), bad, n_bad)
    k2 = _skip(np.int64((h >> np.uint64(17)) % np.uint64(n_ok)), bad, n_bad)
    return k1, k2


@kernel
def _unusable_spines(
    known_down: NDArray[np.bool_],
    sw: _I32,
    sl: _I32,
    leaf_a: int,
    leaf_b: int,
    spines: _I32,
    up: int,
    down: int,
    bad: NDArray[np.int64],
) -> int:
    """Into ``bad``, ascending: the spines (slots) of a flow between two leaves of one pod
    whose path crosses a known-down link; all of them when the flow's own link at either
    end is down (its every candidate then costs ``_BIG``). Returns how many."""
    n = spines.size
    if known_down[up] or known_down[down]:
        for j in range(n):
            bad[j] = j
        return n
    n_bad = 0
    for j in range(n):
        s = spines[j]
        if known_down[sl[sw[leaf_a], sw[s]]] or known_down[sl[sw[s], sw[leaf_b]]]:
            bad[n_bad] = j
            n_bad += 1
    return n_bad


@kernel
def _unusable_paths(
    known_down: NDArray[np.bool_],
    down_links: _I,
    link_src: _I32,
    link_dst: _I32,
    sw: _I32,
    sl: _I32,
    leaf_a: int,
    leaf_b: int,
    from_pod: _I32,
    to_pod: _I32,
    cores: _I32,
    bad: NDArray[np.int64],
) -> int:
    """Into ``bad``, ascending: the candidates ``slot * per + k`` of a flow between pods
    that cross a known-down link: every core of a slot whose leaf-spine link at either end
    is down, and each (slot, core) whose spine-core link on either side is one of
    ``down_links``. Returns how many."""
    n_slots, per = cores.shape
    n_bad = 0
    for j in range(n_slots):
        sa, sb = from_pod[j], to_pod[j]
        if known_down[sl[sw[leaf_a], sw[sa]]] or known_down[sl[sw[sb], sw[leaf_b]]]:
            for m in range(per):
                bad[n_bad] = j * per + m
                n_bad += 1
            continue
        start = n_bad
        for d in down_links:
            for m in range(per):
                core = cores[j, m]
                if (link_src[d] == sa and link_dst[d] == core) or (
                    link_src[d] == core and link_dst[d] == sb
                ):
                    bad[n_bad] = j * per + m
                    n_bad += 1
        if n_bad - start > 1:  # a (slot, core) both of whose links are down, once
            run = sorted_copy(bad[start:n_bad])
            for i in range(run.size):
                bad[start + i] = run[i]
            kept = start + 1
            for i in range(start + 1, n_bad):
                if bad[i] != bad[kept - 1]:
                    bad[kept] = bad[i]
                    kept += 1
            n_bad = kept
    return n_bad


@inline_kernel
def _less_loaded(first: np.int64, c_first: float, second: np.int64, c_second: float) -> np.int64:
    """``pick``'s adaptive choice between two candidates and their costs: the second only
    if it is a whole quantum less loaded."""
    c1 = np.floor(c_first / ADAPTIVE_COST_QUANTUM_S)
    c2 = np.floor(c_second / ADAPTIVE_COST_QUANTUM_S)
    return second if c2 < c1 else first


@inline_kernel
def _via_spine(
    q: tuple[_F, int, _F, NDArray[np.bool_], _F],
    sw: _I32,
    sl: _I32,
    leaf_a: int,
    spine: int,
    leaf_b: int,
    c_up: float,
    c_down: float,
) -> float:
    """Cost of the path leaf ``leaf_a`` -> ``spine`` -> leaf ``leaf_b`` with the
    endpoints' own links (``c_up``, ``c_down``), summed in ``routing.route``'s order."""
    up, down = sl[sw[leaf_a], sw[spine]], sl[sw[spine], sw[leaf_b]]
    return _load_cost(q, up) + _load_cost(q, down) + c_up + c_down


@inline_kernel
def _via_core(
    q: tuple[_F, int, _F, NDArray[np.bool_], _F],
    sw: _I32,
    sl: _I32,
    leaf_a: int,
    spine_a: int,
    core: int,
    spine_b: int,
    leaf_b: int,
) -> float:
    """Cost of the switch hops leaf -> spine -> core -> spine -> leaf (without the
    endpoints' links), summed in ``routing.route``'s order."""
    c1 = _load_cost(q, sl[sw[leaf_a], sw[spine_a]])
    c4 = _load_cost(q, sl[sw[spine_b], sw[leaf_b]])
    return (
        c1
        + _load_cost(q, sl[sw[spine_a], sw[core]])
        + _load_cost(q, sl[sw[core], sw[spine_b]])
        + c4
    )


@kernel
def route_flows(
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    key: NDArray[np.int64],
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
    adaptive: bool,
    size_bytes: _F,
    link_load_bytes: _F,
    complete: bool,
    down_links: _I,
    link_src: _I32,
    link_dst: _I32,
) -> tuple[_I32, NDArray[np.int8]]:
    """``routing.route``: ``path[hop, flow]`` (-1 past the end) and hops per flow; a
    link's cost is its ``link_cost`` plus, adaptive, its expected load at line rate:
    ``link_load_bytes`` (the bytes flows in flight still have to send over it; empty:
    none) and the bytes this batch has placed on it before the flow (``size_bytes`` per
    flow, in order, added to ``link_load_bytes`` in place; empty: none counted).

    ``complete``: the topology has every candidate (``every_candidate_present``);
    ``down_links``: the links known down, ascending. A flow then reads the costs of its
    two hashed choices only: its unusable candidates are those that cross a known-down
    link (none while ``down_links`` is empty, where its k-th usable candidate is its k-th),
    found from the few down links, and the k-th usable is counted past them. Otherwise
    (an incomplete topology, or more than ``MAX_DOWN_SHORTCUT`` links down) it costs every
    candidate to count the usable ones, as the reference does: on a 3-tier fabric slots ×
    cores per slot of them. Both ways make the same choice.

    ``route_flows_in_pods`` is this kernel compiled without the routes between pods
    (``ACROSS_PODS``), for a 2-tier fabric, whose routes all stay in their pod: it compiles
    in 3 s instead of 10, most of a first start."""
    n = src.size
    path = np.full((MAX_HOPS, n), -1, dtype=np.int32)
    nh = np.zeros(n, dtype=np.int8)
    n_slots = spines_by_pod.shape[2]
    per = cores_by_slot.shape[2]
    cost4 = np.empty(n_slots)
    cost6 = np.empty(n_slots * per)
    shortcut = complete and down_links.size <= MAX_DOWN_SHORTCUT
    # the unusable candidates of one flow, ascending (room for a slot's repeats)
    bad = np.empty(max(n_slots * per, n_slots) + 2 * down_links.size, dtype=np.int64)
    sw, sl = switch_index, switch_link
    # the expected load (routing.route): without it every flow of a burst sees the same
    # queues and the burst herds onto the spine that looked idle
    has_load = adaptive and link_load_bytes.size == bandwidth_Bps.size
    placed = link_load_bytes if has_load else np.zeros(bandwidth_Bps.size)
    count_placed = adaptive and size_bytes.size == n
    q = (occupancy, n_vls, bandwidth_Bps, known_down, placed)
    if n_vls > 1 and 2 * n * n_slots >= bandwidth_Bps.size:
        # a large batch reads each link many times: its lanes' bytes are summed once, in
        # the same order as ``link_cost`` sums them (the same costs)
        queued = np.empty(bandwidth_Bps.size)
        for li in range(queued.size):
            s = occupancy[li * n_vls]
            for v in range(1, n_vls):
                s += occupancy[li * n_vls + v]
            queued[li] = s
        q = (queued, 1, bandwidth_Bps, known_down, placed)
    for f in range(n):
        h = flow_hash(src[f], dst[f], key[f])
        plane = int(np.int64(h >> np.uint64(40)) % planes) if planes > 1 else 0
        up, down = ep_uplink[src[f], plane], ep_downlink[dst[f], plane]
        ls, ld = ep_leaf[src[f], plane], ep_leaf[dst[f], plane]
        c_up = _load_cost(q, up)
        c_down = _load_cost(q, down)
        path[0, f] = up
        if ls == ld:  # endpoint -> leaf -> endpoint
            path[1, f] = down
            nh[f] = 2
        elif tiers == 2 or node_pod[ls] == node_pod[ld]:
            # up to a spine of the pod, down to the destination leaf
            spines = spines_by_pod[plane, node_pod[ls]]
            if shortcut:
                n_bad = 0
                if down_links.size:
                    n_bad = _unusable_spines(known_down, sw, sl, ls, ld, spines, up, down, bad)
                k, k2 = _two_choices(h, n_slots, bad, n_bad)
                if adaptive:
                    c1 = _via_spine(q, sw, sl, ls, spines[k], ld, c_up, c_down)
                    c2 = _via_spine(q, sw, sl, ls, spines[k2], ld, c_up, c_down)
                    k = _less_loaded(k, c1, k2, c2)
            else:
                for j in range(n_slots):
                    s = spines[j]
                    if sl[sw[ls], sw[s]] < 0 or sl[sw[s], sw[ld]] < 0:
                        cost4[j] = _BIG
                    else:
                        cost4[j] = _via_spine(q, sw, sl, ls, s, ld, c_up, c_down)
                k = pick(cost4, h, adaptive)
            s = spines[k]
            path[1, f] = sl[sw[ls], sw[s]]
            path[2, f] = sl[sw[s], sw[ld]]
            path[3, f] = down
            nh[f] = 4
        elif ACROSS_PODS:
            # leaf -> spine (slot j) -> core (group j) -> spine (slot j, dst pod) -> leaf
            from_pod, to_pod = (
                spines_by_pod[plane, node_pod[ls]],
                spines_by_pod[plane, node_pod[ld]],
            )
            cores = cores_by_slot[plane]
            if shortcut:
                n_bad = 0
                if down_links.size:
                    n_bad = _unusable_paths(
                        known_down, down_links, link_src, link_dst, sw, sl, ls, ld,
                        from_pod, to_pod, cores, bad,
                    )  # fmt: skip
                k, k2 = _two_choices(h, n_slots * per, bad, n_bad)
                if adaptive:
                    j, m = divmod(k, per)
                    c1 = _via_core(q, sw, sl, ls, from_pod[j], cores[j, m], to_pod[j], ld)
                    j, m = divmod(k2, per)
                    c2 = _via_core(q, sw, sl, ls, from_pod[j], cores[j, m], to_pod[j], ld)
                    k = _less_loaded(k, c1, k2, c2)
            else:
                for j in range(n_slots):
                    sa, sb = from_pod[j], to_pod[j]
                    for m in range(per):
                        cr = cores[j, m]
                        if sl[sw[sa], sw[cr]] < 0 or sl[sw[cr], sw[sb]] < 0:
                            cost6[j * per + m] = _BIG
                        else:
                            cost6[j * per + m] = _via_core(q, sw, sl, ls, sa, cr, sb, ld)
                k = pick(cost6, h, adaptive)
            j, m = divmod(k, per)
            sa = spines_by_pod[plane, node_pod[ls], j]
            sb = spines_by_pod[plane, node_pod[ld], j]
            cr = cores_by_slot[plane, j, m]
            path[1, f] = sl[sw[ls], sw[sa]]
            path[2, f] = sl[sw[sa], sw[cr]]
            path[3, f] = sl[sw[cr], sw[sb]]
            path[4, f] = sl[sw[sb], sw[ld]]
            path[5, f] = down
            nh[f] = 6
        if count_placed:
            for hop in range(nh[f]):
                placed[path[hop, f]] += size_bytes[f]
    return path, nh


@inline_kernel
def link_cost(
    occupancy: _F, n_vls: int, bandwidth_Bps: _F, known_down: NDArray[np.bool_], li: int
) -> float:
    """Adaptive routing's cost of link ``li``: the queueing delay of the bytes waiting
    for it (all lanes), infinite when routing knows it is down (``tick.reference.ReferenceTick``)."""
    if known_down[li]:
        return np.inf
    queued: float = occupancy[li * n_vls]
    for v in range(1, n_vls):
        queued += occupancy[li * n_vls + v]
    return float(queued / bandwidth_Bps[li])


@kernel
def link_costs(occupancy: _F, n_vls: int, bandwidth_Bps: _F, known_down: NDArray[np.bool_]) -> _F:
    """``link_cost`` of every link (for spraying on a file topology, which stays in numpy)."""
    out = np.empty(bandwidth_Bps.size)
    for li in range(out.size):
        out[li] = link_cost(occupancy, n_vls, bandwidth_Bps, known_down, li)
    return out


@inline_kernel
def _cost(
    occupancy: _F, n_vls: int, bandwidth_Bps: _F, known_down: NDArray[np.bool_], li: int
) -> float:
    """A link's routing cost as the reference reads it: ``_BIG`` for one that must not
    be used, and a missing link (-1) reads the last link."""
    if li < 0:
        li += bandwidth_Bps.size
    c = link_cost(occupancy, n_vls, bandwidth_Bps, known_down, li)
    return c if np.isfinite(c) else _BIG


@kernel
def link_loads(
    active: NDArray[np.bool_],
    path: _I32,
    backlog: _F,
    hops: NDArray[np.int8],
    out: _F,
) -> None:
    """``routing.link_loads`` into ``out``: per link, the bytes the active flows crossing
    it have not yet sent over it (a flow's backlog at that hop and every hop before)."""
    out[:] = 0.0
    for f in range(active.size):
        if not active[f]:
            continue
        left = 0.0
        for h in range(hops[f]):
            left += backlog[h, f]
            out[path[h, f]] += left


@inline_kernel
def _load_cost(
    q: tuple[_F, int, _F, NDArray[np.bool_], _F],
    li: int,
) -> float:
    """``_cost`` plus the bytes ``q[4]`` this batch has already placed on the link, at its
    line rate (``routing.route`` adds them the same way, in the same order)."""
    occupancy, n_vls, bandwidth_Bps, known_down, placed = q
    if li < 0:
        li += bandwidth_Bps.size
    base = _cost(occupancy, n_vls, bandwidth_Bps, known_down, li)
    return float(base + placed[li] / bandwidth_Bps[li])


#: ``_cost`` for the table router of file topologies (``kernels.table_route``)
candidate_cost = _cost


@kernel
def lanes_and_costs(
    path: _I32,
    hops: NDArray[np.int8],
    vl0: NDArray[np.int8],
    size: _F,
    node_tier: NDArray[np.int8],
    link_src: _I32,
    link_dst: _I32,
    prop_delay_s: _F,
    bandwidth_Bps: _F,
    occupancy: _F,
    drain_Bps: _F,
    cycle_s: _F,
    avg_Bps: _F,
    paused: NDArray[np.bool_],
    n_vls: int,
    credit: bool,
    cut_through: bool,
    switch_latency_s: float,
    endpoint_fixed_s: float,
    pcie_Bps: float,
    inline_bytes: float,
    inline_saving_s: float,
    mtu_bytes: float,
    header_bytes: float,
) -> tuple[NDArray[np.int8], _F, _F, int]:
    """``paths.lanes`` and ``paths.fixed_costs`` for new flows: (lane per hop, fixed
    latency, FIFO wait, highest lane used). ``endpoint_fixed_s`` and ``pcie_Bps`` are
    ``endpoint_costs.data_path_fixed_s`` and ``endpoint_costs.pcie_Bps`` of the profile; a
    flow of at most ``inline_bytes`` is sent inline, ``inline_saving_s`` (the payload's DMA
    read) sooner.
    A queue's bytes wait at its departure rate (``kernels.departure.departure_rate`` of
    ``drain_Bps``, ``cycle_s`` and ``avg_Bps``), worked out for the buffers on the path
    only."""
    max_hops, n = path.shape
    vl = np.empty((max_hops, n), dtype=np.int8)
    fixed = np.empty(n)
    wait = np.empty(n)
    top = 0
    for f in range(n):
        lane = vl0[f]
        prop = 0.0
        saf = 0.0
        w = 0.0
        pkt = min(size[f], mtu_bytes) + header_bytes
        was_up = False
        for h in range(max_hops):
            li = path[h, f]
            if li < 0:
                vl[h, f] = lane
                continue
            up = node_tier[link_dst[li]] > node_tier[link_src[li]]
            if credit and h > 0 and path[h - 1, f] >= 0 and up and not was_up:
                lane += 1  # a down->up turn moves up a lane (paths.lanes)
            was_up = up
            vl[h, f] = lane
            top = max(top, lane)
            prop += prop_delay_s[li]
            # the hop feeds a switch buffer, read unless the lane is past the last (the
            # route is then refused: ``top``), where it would read another link's
            if h + 1 < max_hops and path[h + 1, f] >= 0 and lane < n_vls:
                q = li * n_vls + lane
                if not cut_through or (not credit and (occupancy[q] > 0 or paused[q])):
                    saf += pkt / bandwidth_Bps[li]
                leave = departure_rate(drain_Bps[q], cycle_s[q], avg_Bps[q])
                w += occupancy[q] / max(leave, bandwidth_Bps[li] * 1e-3)
        # the payload crosses PCIe pipelined with the first link (paths.fixed_costs)
        line = bandwidth_Bps[max(path[0, f], 0)] * mtu_bytes / (mtu_bytes + header_bytes)
        rate = max(size[f] / pcie_Bps - size[f] / line, 0.0)
        endpoint = endpoint_fixed_s - (inline_saving_s if size[f] <= inline_bytes else 0.0)
        fixed[f] = prop + (hops[f] - 1.0) * switch_latency_s + endpoint + rate + saf
        wait[f] = w
    return vl, fixed, wait, top


#: ``route_flows`` on a 2-tier fabric: the same kernel with no routes between pods in its
#: machine code (numba leaves out a branch whose condition is a constant False). Made
#: last: the copy reads the module's names as they are now, every kernel it calls among them
route_flows_in_pods = specialised_kernel(route_flows, "route_flows_in_pods", ACROSS_PODS=False)
