"""What a flow's path implies: its virtual lanes, pinned routes, and the costs the fluid
model does not carry (propagation, switching, the endpoints' NIC and PCIe data path,
store-and-forward, the FIFO wait)."""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import CommandError, unknown
from fabric_core.net import endpoint_costs
from fabric_core.net.profiles import Profile
from fabric_core.net.routing import MAX_HOPS
from fabric_core.net.topology import Topology


def lanes(
    topo: Topology, flow_control: str, n_vls: int, path: NDArray[np.int32], vl: NDArray[np.int8]
) -> NDArray[np.int8]:
    """Virtual lane on every hop of ``path[hop, flow]``, starting from ``vl``.

    On the credit fabric a path that turns from down to up (it breaks up*/down*)
    moves up one lane at the turn, so the buffer dependency graph stays acyclic
    (as LASH / dateline routing do); PFC priorities do not change along a path.
    """
    out = np.repeat(vl[None, :], path.shape[0], axis=0)
    if flow_control != "credit" or path.shape[1] == 0:
        return out
    tier = topo.nodes.tier
    valid = path >= 0
    safe = np.where(valid, path, 0)
    goes_up = tier[topo.links.dst[safe]] > tier[topo.links.src[safe]]
    turn = np.zeros_like(valid)
    turn[1:] = valid[1:] & goes_up[1:] & ~goes_up[:-1] & valid[:-1]
    out = out + np.cumsum(turn, axis=0).astype(np.int8)
    if (out[valid] >= n_vls).any():
        raise CommandError("a route turns down-up more often than there are virtual lanes")
    return out


class StaticRoutes:
    """Paths pinned between endpoint pairs (a misconfiguration; may break up*/down*)."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.routes: dict[tuple[int, int], list[int]] = {}
        self._keys = np.zeros(0, dtype=np.int64)

    def __bool__(self) -> bool:
        return bool(self.routes)

    def add(self, src: str, dst: str, via: list[str]) -> None:
        """Pin flows from ``src`` to ``dst`` to the path through the switches ``via``.

        Raises:
            CommandError / ValueError: an unknown node, a missing link, too many hops.
        """
        nodes = self.topo.nodes.index
        names = [src, *via, dst]
        for n in names:
            if n not in nodes:
                raise unknown("node", n, nodes)
        links = []
        for a, b in itertools.pairwise(names):
            li = self.topo.links.index.get(f"{a}->{b}")
            if li is None:
                raise ValueError(f"no link {a}->{b}")
            links.append(li)
        if len(links) > MAX_HOPS:
            raise ValueError(f"route has {len(links)} hops; at most {MAX_HOPS}")
        self.routes[(nodes[src], nodes[dst])] = links
        n_nodes = len(self.topo.nodes)
        self._keys = np.array([s * n_nodes + d for s, d in self.routes], dtype=np.int64)

    def apply(
        self,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        path: NDArray[np.int32],
        hops: NDArray[np.int8],
    ) -> None:
        """Overwrite the routed paths of the pinned pairs (in place)."""
        keys = src * len(self.topo.nodes) + dst
        hit = np.flatnonzero(np.isin(keys, self._keys))
        for i in hit.tolist():  # only flows of misconfigured pairs: a handful
            links = self.routes[(int(src[i]), int(dst[i]))]
            path[:, i] = -1
            path[: len(links), i] = links
            hops[i] = len(links)


def fixed_costs(
    topo: Topology,
    profile: Profile,
    path: NDArray[np.int32],
    hops: NDArray[np.int8],
    size: NDArray[np.float64],
    queue: NDArray[np.intp],
    occupancy: NDArray[np.float64],
    drain: NDArray[np.float64],
    paused: NDArray[np.bool_],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(fixed latency, FIFO wait) of flows starting now on ``path[hop, flow]``.

    ``queue[hop, flow]`` is each hop's (link, lane) buffer; ``occupancy``,
    ``drain`` (bytes/s) and ``paused`` describe those buffers now.
    """
    p = profile
    valid = path >= 0
    safe = np.where(valid, path, 0)
    links = topo.links
    prop = np.where(valid, links.prop_delay_s[safe], 0.0).sum(axis=0)
    switches = hops.astype(np.float64) - 1
    # the endpoints' data path (endpoint_costs): NIC pipelines, the payload's DMA read round
    # trip and DMA write; the payload crosses PCIe pipelined with the wire, so PCIe slower
    # than the first link's payload rate adds size / pcie - size / payload rate
    line = links.bandwidth_Bps[safe[0]] * p.mtu_bytes / (p.mtu_bytes + p.header_bytes)
    pcie = endpoint_costs.pcie_Bps(p)
    rate = np.maximum(size / pcie - size / line, 0.0)
    # a payload of at most inline_bytes rides in the work request: no DMA read
    inline = endpoint_costs.inline_saving_s(p, size)
    fixed = (
        prop + switches * p.switch_latency_s + endpoint_costs.data_path_fixed_s(p) - inline + rate
    )
    has_buf = valid.copy()
    has_buf[:-1] &= valid[1:]
    has_buf[-1] = False
    occ = occupancy[queue]
    # store-and-forward: every switch receives a whole packet before sending it on;
    # Ethernet cut-through falls back to it where the egress is busy or paused
    pkt = np.minimum(size, p.mtu_bytes) + p.header_bytes
    if not p.cut_through:
        saf = has_buf
    elif p.flow_control == "pfc":
        saf = has_buf & ((occ > 0) | paused[queue])
    else:
        saf = np.zeros_like(has_buf)
    fixed = fixed + (saf * pkt[None, :] / links.bandwidth_Bps[safe]).sum(axis=0)
    # FIFO wait: the bytes already queued in each buffer on the path, at its drain rate
    rate = np.maximum(drain[queue], links.bandwidth_Bps[safe] * 1e-3)
    wait = np.where(has_buf, occ / rate, 0.0).sum(axis=0)
    return fixed, wait
