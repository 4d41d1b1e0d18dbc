"""Up*/down* orientation and shortest-path tables of an arbitrary switch graph.

The UPDN rule of OpenSM (``doc/current-routing.txt``, ``osm_ucast_updn.c``): switches
get levels by a breadth-first search from the root switches; a link is *up* when it
goes to a lower level, or, between switches of the same level, to the lower node id
(OpenSM's GUID tie-break); endpoint uplinks are up and downlinks down. A legal path
never takes an up link after a down link, so the links' buffers, ordered by (up links
by rising tier, then down links by falling tier), form no cycle and credit flow
control cannot deadlock.

``UpDown`` holds, per pair of switches, the switch hops of the shortest legal path
(``dist_any``) and of the shortest down-only one (``dist_down``): a router walks a
flow from its source's switch, taking at each step any link on a shortest legal
path (``fabric_core.net.table_route``, ``fabric_core.tick.kernels.table_route``). Tables for
a fabric with links known to be down are computed on demand on the graph without
them (with the same orientation, so old and new paths together stay deadlock-free)
and kept until the set of down links changes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

#: ``dist_*`` of a pair with no legal path.
UNREACHABLE = 10_000


class UpDownError(ValueError):
    """A graph up*/down* cannot route; the message says why."""


@dataclass
class UpDown:
    """Orientation and tables of one topology (switch rows are ``Topology.switch_index``)."""

    roots: tuple[int, ...]  # node ids of the root switches
    level: NDArray[np.int32]  # per node: BFS level from the roots (-1 for endpoints)
    tier: NDArray[np.int8]  # per node: 0 endpoints, strictly rising along every up link
    link_up: NDArray[np.bool_]  # per directed link: it goes up
    adj_link: NDArray[np.int32]  # [switch row, k]: the k-th switch-to-switch out-link, -1 pad
    adj_row: NDArray[np.int32]  # [switch row, k]: the switch row it leads to
    adj_up: NDArray[np.bool_]  # [switch row, k]: that link goes up
    dist_any: NDArray[np.int16]  # [from row, to row]: switch hops, shortest legal path
    dist_down: NDArray[np.int16]  # [from row, to row]: switch hops, shortest down-only path
    _sw_src: NDArray[np.intp] = field(repr=False)  # switch-to-switch links: source row
    _sw_dst: NDArray[np.intp] = field(repr=False)
    _sw_link: NDArray[np.intp] = field(repr=False)  # their link ids
    _cache: dict[bytes, tuple[NDArray[np.int16], NDArray[np.int16]]] = field(
        default_factory=dict, repr=False
    )
    #: the longest path routing can hold, in switch hops (``routing.MAX_HOPS`` − 2)
    max_switch_hops: int = UNREACHABLE

    def tables(self, blocked: NDArray[np.bool_]) -> tuple[NDArray[np.int16], NDArray[np.int16]]:
        """(``dist_any``, ``dist_down``) on the graph without the ``blocked`` links."""
        if not blocked[self._sw_link].any():
            return self.dist_any, self.dist_down
        key = np.packbits(blocked).tobytes()
        if key not in self._cache:
            if len(self._cache) > 16:  # a flapping fabric: keep the memory bounded
                self._cache.clear()
            keep = ~blocked[self._sw_link]
            d_any, d_down = _distances(
                self.dist_any.shape[0],
                self._sw_src[keep],
                self._sw_dst[keep],
                self.link_up[self._sw_link[keep]],
            )
            # a detour longer than a path can be (the healthy fabric's are checked at
            # build) is no detour: routing keeps the healthy path, and a flow waits at
            # the dead link as it would on a partitioned fabric
            long = self.max_switch_hops
            self._cache[key] = (
                np.where(d_any > long, UNREACHABLE, d_any).astype(np.int16),
                np.where(d_down > long, UNREACHABLE, d_down).astype(np.int16),
            )
        return self._cache[key]


def _distances(
    n_sw: int, src: NDArray[np.intp], dst: NDArray[np.intp], up: NDArray[np.bool_]
) -> tuple[NDArray[np.int16], NDArray[np.int16]]:
    """Shortest legal (up* then down*) and down-only switch hops between all switch
    pairs, by relaxing every link until nothing changes (at most ``n_sw`` rounds)."""
    down = np.full((n_sw, n_sw), UNREACHABLE, dtype=np.int16)
    np.fill_diagonal(down, 0)
    dn_s, dn_d = src[~up], dst[~up]
    up_s, up_d = src[up], dst[up]
    for _ in range(n_sw):
        new = down.copy()
        np.minimum.at(new, dn_s, np.minimum(down[dn_d] + 1, UNREACHABLE).astype(np.int16))
        if np.array_equal(new, down):
            break
        down = new
    any_ = down.copy()
    for _ in range(n_sw):
        new = any_.copy()
        np.minimum.at(new, up_s, np.minimum(any_[up_d] + 1, UNREACHABLE).astype(np.int16))
        if np.array_equal(new, any_):
            break
        any_ = new
    return any_, down


def _bfs(n: int, nbrs: list[list[int]], sources: list[int]) -> NDArray[np.int32]:
    """Hop distance from the nearest of ``sources`` (-1 unreached) over ``nbrs``."""
    dist = np.full(n, -1, dtype=np.int32)
    q = deque(sources)
    for s in sources:
        dist[s] = 0
    while q:
        a = q.popleft()
        for b in nbrs[a]:
            if dist[b] < 0:
                dist[b] = dist[a] + 1
                q.append(b)
    return dist


def build_updown(
    names: tuple[str, ...],
    switch_index: NDArray[np.int32],
    link_src: NDArray[np.int32],
    link_dst: NDArray[np.int32],
    ep_switch: NDArray[np.int32],
    roots: list[int] | None,
    max_switch_hops: int,
) -> UpDown:
    """Orient the links from ``roots`` (node ids; None: chosen as below) and build the
    tables, checking that every pair of endpoints has a legal path of at most
    ``max_switch_hops`` switch-to-switch hops.

    With no roots given, the roots are the switches farthest from any endpoint (the
    spines of a leaf-spine, the cores of a fat-tree: OpenSM's auto-detection looks
    for the same top of the tree); if some pair has no legal path with all of them as
    roots, the first of them alone (one root always connects a connected graph).

    Raises:
        UpDownError: disconnected switches, or a pair with no legal path or a
        longer one than allowed.
    """
    sw_nodes = np.flatnonzero(switch_index >= 0)
    n_sw = sw_nodes.size
    if n_sw == 0:
        raise UpDownError("no switches")
    is_sw_link = (switch_index[link_src] >= 0) & (switch_index[link_dst] >= 0)
    sw_link = np.flatnonzero(is_sw_link).astype(np.intp)
    s_row = switch_index[link_src[sw_link]].astype(np.intp)
    d_row = switch_index[link_dst[sw_link]].astype(np.intp)
    nbrs: list[list[int]] = [[] for _ in range(n_sw)]
    for a, b in zip(s_row.tolist(), d_row.tolist(), strict=True):
        nbrs[a].append(b)
    leaf_rows = sorted({int(switch_index[s]) for s in ep_switch.tolist() if s >= 0})
    if roots is None:
        to_edge = _bfs(n_sw, nbrs, leaf_rows)
        far = np.flatnonzero(to_edge == to_edge.max()).tolist()
        candidates = [far, far[:1]] if len(far) > 1 else [far]
    else:
        candidates = [[int(switch_index[r]) for r in roots]]
    error: UpDownError | None = None
    for i, root_rows in enumerate(candidates):
        try:
            return _orient(
                names, sw_nodes, switch_index, link_src, link_dst, sw_link, s_row, d_row,
                nbrs, leaf_rows, root_rows, max_switch_hops,
            )  # fmt: skip
        except UpDownError as exc:
            if i == len(candidates) - 1 or "disconnected" in str(exc):
                raise
            error = exc
    raise error or UpDownError("no roots")  # not reached: the loop returns or raises


def _orient(
    names: tuple[str, ...],
    sw_nodes: NDArray[np.intp],
    switch_index: NDArray[np.int32],
    link_src: NDArray[np.int32],
    link_dst: NDArray[np.int32],
    sw_link: NDArray[np.intp],
    s_row: NDArray[np.intp],
    d_row: NDArray[np.intp],
    nbrs: list[list[int]],
    leaf_rows: list[int],
    root_rows: list[int],
    max_switch_hops: int,
) -> UpDown:
    """``build_updown`` for one choice of roots (switch rows)."""
    n_sw = sw_nodes.size
    level = _bfs(n_sw, nbrs, root_rows)
    if (level < 0).any():
        lost = names[sw_nodes[int(np.flatnonzero(level < 0)[0])]]
        raise UpDownError(
            f"the fabric is disconnected: switch {lost} has no path to the root "
            f"{names[sw_nodes[root_rows[0]]]}"
        )
    # a link is up towards a lower (level, node id): a strict total order of switches
    key = level.astype(np.int64) * (int(sw_nodes.max()) + 1) + sw_nodes
    n = switch_index.size
    link_up = switch_index[link_src] < 0  # endpoint uplinks go up, downlinks down
    link_up[sw_link] = key[d_row] < key[s_row]
    tier_sw = np.ones(n_sw, dtype=np.int64)
    up_into: list[list[int]] = [[] for _ in range(n_sw)]
    for a, b, u in zip(s_row.tolist(), d_row.tolist(), link_up[sw_link].tolist(), strict=True):
        if u:
            up_into[b].append(a)
    for r in np.argsort(-key, kind="stable").tolist():  # bottom first
        below = up_into[r]
        if below:
            tier_sw[r] = 1 + max(int(tier_sw[m]) for m in below)
    tier = np.zeros(n, dtype=np.int8)
    tier[sw_nodes] = tier_sw
    lvl = np.full(n, -1, dtype=np.int32)
    lvl[sw_nodes] = level
    dist_any, dist_down = _distances(n_sw, s_row, d_row, link_up[sw_link])
    roots = ", ".join(names[sw_nodes[r]] for r in root_rows)
    rows = np.array(leaf_rows, dtype=np.intp)
    pair = dist_any[np.ix_(rows, rows)].astype(np.int64)  # between switches with endpoints
    for bad, too_long in ((pair >= UNREACHABLE, False), (pair > max_switch_hops, True)):
        if not bad.any():
            continue
        i, j = np.argwhere(bad)[0]
        a, b = names[sw_nodes[rows[i]]], names[sw_nodes[rows[j]]]
        if not too_long:
            raise UpDownError(
                f"no up*/down* path from {a} to {b} with root(s) {roots}: every path between "
                "them turns down then up; name a single root (a `root` line) or cable them"
            )
        raise UpDownError(
            f"the shortest up*/down* path from {a} to {b} (root(s) {roots}) has "
            f"{pair[i, j] + 2} hops, more than routing.MAX_HOPS = {max_switch_hops + 2}"
        )
    deg = np.bincount(s_row, minlength=n_sw)
    width = max(int(deg.max(initial=0)), 1)
    adj_link = np.full((n_sw, width), -1, dtype=np.int32)
    adj_row = np.full((n_sw, width), -1, dtype=np.int32)
    adj_up = np.zeros((n_sw, width), dtype=np.bool_)
    fill = np.zeros(n_sw, dtype=np.intp)
    for li, a, b in zip(sw_link.tolist(), s_row.tolist(), d_row.tolist(), strict=True):
        adj_link[a, fill[a]], adj_row[a, fill[a]] = li, b
        adj_up[a, fill[a]] = link_up[li]
        fill[a] += 1
    return UpDown(
        roots=tuple(int(sw_nodes[r]) for r in root_rows),
        level=lvl,
        tier=tier,
        link_up=link_up,
        adj_link=adj_link,
        adj_row=adj_row,
        adj_up=adj_up,
        dist_any=dist_any,
        dist_down=dist_down,
        _sw_src=s_row,
        _sw_dst=d_row,
        _sw_link=sw_link,
        max_switch_hops=max_switch_hops,
    )
