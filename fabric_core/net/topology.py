"""Topologies: endpoints (GPU + NIC, storage targets), switches in tiers, directed links.

Builders for 2-tier leaf-spine, 3-tier fat-tree (pods + cores), rail-optimised
and multi-plane fabrics. Every cable is two directed links named ``a->b`` and
``b->a``. The routing tables the vectorised path builder needs (which leaf an
endpoint hangs off in each plane, switch-to-switch link ids) are built here too.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.net.scaleup import ScaleUpParams
from fabric_core.net.tables import LinkTable, NodeTable
from fabric_core.net.updown import UpDown, build_updown

TIER_ENDPOINT, TIER_LEAF, TIER_SPINE, TIER_CORE = 0, 1, 2, 3
_TIER_WORD = {TIER_LEAF: "leaf", TIER_SPINE: "spine", TIER_CORE: "core"}


@dataclass
class _Builder:
    profile: Profile
    names: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    tiers: list[int] = field(default_factory=list)
    planes: list[int] = field(default_factory=list)
    pods: list[int] = field(default_factory=list)
    slot: list[int] = field(default_factory=list)  # spine index within its pod / core group
    links: list[tuple[int, int]] = field(default_factory=list)

    def node(
        self, name: str, kind: str, tier: int, plane: int = 0, pod: int = 0, slot: int = 0
    ) -> int:
        self.names.append(name)
        self.kinds.append(kind)
        self.tiers.append(tier)
        self.planes.append(plane)
        self.pods.append(pod)
        self.slot.append(slot)
        return len(self.names) - 1

    def cable(self, a: int, b: int) -> None:
        self.links.append((a, b))
        self.links.append((b, a))


@dataclass(frozen=True)
class Topology:
    """A built fabric: node and link tables plus the routing tables."""

    kind: str
    nodes: NodeTable
    links: LinkTable
    endpoints: NDArray[np.int32]  # node ids of GPUs and storage targets, GPUs first
    gpus: NDArray[np.int32]
    storage: NDArray[np.int32]
    planes: int
    ep_uplink: NDArray[np.int32]  # [endpoint node id, plane] -> link id endpoint->leaf (-1 none)
    ep_downlink: NDArray[np.int32]  # [endpoint node id, plane] -> link id leaf->endpoint
    ep_leaf: NDArray[np.int32]  # [endpoint node id, plane] -> leaf node id
    switch_index: NDArray[np.int32]  # node id -> row in switch_link (-1 for endpoints)
    switch_link: NDArray[np.int32]  # [switch row, switch row] -> link id (-1 none)
    node_pod: NDArray[np.int32]
    node_slot: NDArray[np.int32]
    spines_by_pod: NDArray[np.int32]  # [plane, pod, slot] -> spine node id
    cores_by_slot: NDArray[np.int32]  # [plane, slot, k] -> core node id
    tiers: int  # 2 or 3 (a file topology: its highest switch tier)
    #: a file topology's up*/down* tables (routed by ``table_route``); None for the builders
    updown: UpDown | None = None
    #: GPUs per node (scale-up domain: NVLink through an NVSwitch): GPUs ``k·g .. k·g+g-1``
    #: of ``gpus`` form node ``k``; 1 = none, every peer over the NIC (``with_scaleup``)
    gpus_per_node: int = 1
    #: the scale-up domain's link class (``fabric_core.net.scaleup``)
    scaleup: ScaleUpParams = field(default_factory=ScaleUpParams)

    @property
    def n_links(self) -> int:
        """Number of directed links."""
        return len(self.links)

    @functools.cached_property
    def has_every_candidate(self) -> bool:
        """``every_candidate_present(self)``, worked out the first time it is asked (a
        topology is not changed in place; ``dataclasses.replace`` makes a new one)."""
        return every_candidate_present(self)

    def node_domains(self) -> NDArray[np.int64]:
        """The scale-up domain (node) of every node id: ``k // gpus_per_node`` for the k-th
        GPU, -1 for storage targets and switches."""
        out = np.full(len(self.nodes.name), -1, dtype=np.int64)
        out[self.gpus] = np.arange(self.gpus.size) // self.gpus_per_node
        return out


def with_scaleup(
    topo: Topology, gpus_per_node: int, params: ScaleUpParams | None = None
) -> Topology:
    """``topo`` with its GPUs grouped into nodes of ``gpus_per_node`` consecutive GPUs.

    Raises:
        ValueError: ``gpus_per_node`` < 1, not a divisor of the GPU count, or (on a
            rail-optimised fabric) not a multiple of a server's GPUs.
    """
    check_gpus_per_node(gpus_per_node, int(topo.gpus.size))
    return dataclasses.replace(topo, gpus_per_node=gpus_per_node, scaleup=params or ScaleUpParams())


def check_gpus_per_node(gpus_per_node: int, n_gpus: int, rails: int = 0, counted: str = "") -> None:
    """Check a node size against the fabric's GPU count (``counted`` says how it is
    counted, for the message) and, with rails, against a server's GPUs.

    Raises:
        ValueError: naming the rule broken.
    """
    if gpus_per_node < 1:
        raise ValueError(f"must be >= 1, got {gpus_per_node}")
    if n_gpus % gpus_per_node:
        raise ValueError(
            f"must divide the GPU count ({n_gpus}{': ' + counted if counted else ''}) so "
            f"that every node is whole, got {gpus_per_node}"
        )
    if rails and gpus_per_node > 1 and gpus_per_node % rails:
        raise ValueError(
            f"must be a multiple of rails ({rails}: the GPUs of one server) so that a node "
            f"holds whole servers, got {gpus_per_node}"
        )


def _finish(
    b: _Builder, kind: str, tiers: int, planes: int, words: list[str] | None = None
) -> Topology:
    """The tables of what ``b`` holds; ``words`` names each node's role in link tiers
    (``"leaf-spine"``), by default from its kind and tier."""
    names = tuple(b.names)
    node_index = {n: i for i, n in enumerate(names)}
    tier = np.array(b.tiers, dtype=np.int8)
    nodes = NodeTable(
        name=names,
        kind=tuple(b.kinds),
        tier=tier,
        plane=np.array(b.planes, dtype=np.int16),
        index=node_index,
    )
    ends = np.array(b.links, dtype=np.int32).reshape(-1, 2)
    src, dst = ends[:, 0].copy(), ends[:, 1].copy()
    lname = tuple(f"{names[a]}->{names[c]}" for a, c in b.links)
    short = {"gpu": "gpu", "storage": "stor"}
    if words is None:
        words = [short.get(k) or _TIER_WORD[t] for k, t in zip(b.kinds, b.tiers, strict=True)]
    # each link's tier pair ("leaf-spine") and cable length, worked out once per pair of
    # node words, not once per link
    vocab, word_id = np.unique(np.array(words, dtype=object), return_inverse=True)
    pair = word_id[src] * vocab.size + word_id[dst]
    kinds, pair_id = np.unique(pair, return_inverse=True)
    pair_word = np.array(
        [f"{vocab[k // vocab.size]}-{vocab[k % vocab.size]}" for k in kinds], dtype=object
    )
    ltier = tuple(pair_word[pair_id])
    p = b.profile
    cable = np.array([p.cable_m(t) for t in pair_word])[pair_id]
    link_index = dict(zip(lname, range(len(lname)), strict=True))
    # every cable is two links, added one after the other (``_Builder.cable``)
    reverse = np.arange(src.size, dtype=np.int32) ^ 1
    links = LinkTable(
        name=lname,
        src=src,
        dst=dst,
        tier=ltier,
        bandwidth_Bps=np.full(src.size, p.link_bandwidth_Bps),
        prop_delay_s=cable * p.propagation_s_per_m,
        # the ingress buffer per lane: credits, or a PFC queue's per priority
        buffer_bytes=np.full(
            src.size, p.buffer_per_vl_bytes if p.flow_control == "credit" else p.pfc_buffer_bytes
        ),
        reverse=reverse,
        index=link_index,
    )
    n = len(names)
    is_ep = tier == TIER_ENDPOINT
    kinds = np.array(b.kinds)
    gpus = np.flatnonzero(kinds == "gpu").astype(np.int32)
    storage = np.flatnonzero(kinds == "storage").astype(np.int32)
    ep_up = np.full((n, planes), -1, dtype=np.int32)
    ep_down = np.full((n, planes), -1, dtype=np.int32)
    ep_leaf = np.full((n, planes), -1, dtype=np.int32)
    switch_index = np.full(n, -1, dtype=np.int32)
    switch_index[~is_ep] = np.arange(int((~is_ep).sum()), dtype=np.int32)
    n_sw = int((~is_ep).sum())
    switch_link = np.full((n_sw, n_sw), -1, dtype=np.int32)
    plane_arr = np.array(b.planes)
    ids = np.arange(src.size, dtype=np.int32)
    up = is_ep[src]  # an endpoint's cable up to its leaf, in the leaf's plane
    ep_up[src[up], plane_arr[dst[up]]] = ids[up]
    ep_leaf[src[up], plane_arr[dst[up]]] = dst[up]
    down = ~up & is_ep[dst]
    ep_down[dst[down], plane_arr[src[down]]] = ids[down]
    between = ~up & ~down  # switch to switch
    switch_link[switch_index[src[between]], switch_index[dst[between]]] = ids[between]
    pod = np.array(b.pods, dtype=np.int32)
    slot = np.array(b.slot, dtype=np.int32)
    spine_ids = np.flatnonzero(tier == TIER_SPINE)
    n_pods = int(pod[spine_ids].max()) + 1 if spine_ids.size else 1
    n_slots = int(slot[spine_ids].max()) + 1 if spine_ids.size else 1
    spines_by_pod = np.full((planes, n_pods, n_slots), -1, dtype=np.int32)
    for spine in spine_ids:
        spines_by_pod[plane_arr[spine], pod[spine], slot[spine]] = spine
    core_ids = np.flatnonzero(tier == TIER_CORE)
    per_slot = max(1, int(np.bincount(slot[core_ids]).max()) if core_ids.size else 1)
    cores_by_slot = np.full((planes, n_slots, per_slot), -1, dtype=np.int32)
    fill = np.zeros((planes, n_slots), dtype=np.int32)
    for core in core_ids:
        pl, sl = plane_arr[core], slot[core]
        cores_by_slot[pl, sl, fill[pl, sl]] = core
        fill[pl, sl] += 1
    return Topology(
        kind=kind,
        nodes=nodes,
        links=links,
        endpoints=np.concatenate([gpus, storage]).astype(np.int32),
        gpus=gpus,
        storage=storage,
        planes=planes,
        ep_uplink=ep_up,
        ep_downlink=ep_down,
        ep_leaf=ep_leaf,
        switch_index=switch_index,
        switch_link=switch_link,
        node_pod=pod,
        node_slot=slot,
        spines_by_pod=spines_by_pod,
        cores_by_slot=cores_by_slot,
        tiers=tiers,
    )


def every_candidate_present(topo: Topology) -> bool:
    """Whether every up*/down* candidate of every flow of ``topo`` exists with a finite
    cost while no link is known down (``route_flows``' ``complete``): every link has
    bandwidth, every (plane, pod, slot) its spine and every (plane, slot, k) its core,
    every leaf is cabled both ways to each spine of its pod and plane, and on 3 tiers
    every spine to each core of its slot. True of the built fat-trees; worked out once
    per topology (``Topology.has_every_candidate``)."""
    if not (topo.links.bandwidth_Bps > 0).all():
        return False
    spines, cores = topo.spines_by_pod, topo.cores_by_slot
    if (spines < 0).any() or (topo.tiers == 3 and (cores < 0).any()):
        return False
    sw, sl = topo.switch_index, topo.switch_link
    for plane in range(topo.planes):
        leaves = np.unique(topo.ep_leaf[topo.endpoints, plane])
        if (leaves < 0).any():
            return False
        a, b = sw[leaves][:, None], sw[spines[plane, topo.node_pod[leaves]]]
        if (sl[a, b] < 0).any() or (sl[b, a] < 0).any():
            return False
        if topo.tiers == 3:
            s, c = sw[spines[plane]][:, :, None], sw[cores[plane]][None, :, :]
            if (sl[s, c] < 0).any() or (sl[c, s] < 0).any():
                return False
    return True


def _check_positive(**values: int) -> None:
    for key, value in values.items():
        if value < 1:
            raise ValueError(f"{key} must be >= 1, got {value}")


def _endpoints(b: _Builder, n_gpus: int, n_storage: int) -> tuple[list[int], list[int]]:
    gpus = [b.node(f"gpu{i:04d}", "gpu", TIER_ENDPOINT) for i in range(n_gpus)]
    stor = [b.node(f"stor{i:02d}", "storage", TIER_ENDPOINT) for i in range(n_storage)]
    return gpus, stor


def leaf_spine(
    profile: Profile,
    *,
    leaves: int,
    spines: int,
    gpus_per_leaf: int,
    storage_targets: int = 0,
    planes: int = 1,
    rails: int = 0,
) -> Topology:
    """A 2-tier leaf-spine (every leaf cabled to every spine of its plane).

    Oversubscription is ``gpus_per_leaf / spines`` (one uplink per spine).
    ``planes`` > 1 builds independent planes; every endpoint has one port in
    each. ``rails`` > 0 makes it rail-optimised: GPUs come in servers of
    ``rails`` GPUs and GPU ``r`` of every server hangs off the rail-``r`` leaf
    of its group (so ``leaves`` must be a multiple of ``rails``). Storage
    targets hang off the leaves round-robin.
    """
    _check_positive(leaves=leaves, spines=spines, gpus_per_leaf=gpus_per_leaf, planes=planes)
    if rails and leaves % rails:
        raise ValueError(f"leaves ({leaves}) must be a multiple of rails ({rails})")
    b = _Builder(profile)
    gpus, stor = _endpoints(b, leaves * gpus_per_leaf, storage_targets)

    def tag(plane: int) -> str:
        return f"p{plane}" if planes > 1 else ""

    for p in range(planes):
        lv = [b.node(f"{tag(p)}leaf{i:02d}", "switch", TIER_LEAF, p) for i in range(leaves)]
        sp = [b.node(f"{tag(p)}spine{i:02d}", "switch", TIER_SPINE, p, 0, i) for i in range(spines)]
        for i, g in enumerate(gpus):
            if rails:
                server, rail = divmod(i, rails)
                servers_per_group = gpus_per_leaf
                group = server // servers_per_group
                leaf = group * rails + rail
            else:
                leaf = i // gpus_per_leaf
            b.cable(g, lv[leaf])
        for i, s in enumerate(stor):
            b.cable(s, lv[i % leaves])
        for leaf in lv:
            for s in sp:
                b.cable(leaf, s)
    kind = "rail-optimised" if rails else ("multi-plane" if planes > 1 else "leaf-spine")
    return _finish(b, kind, tiers=2, planes=planes)


def fat_tree(
    profile: Profile,
    *,
    pods: int,
    leaves_per_pod: int,
    spines_per_pod: int,
    cores_per_spine: int,
    gpus_per_leaf: int,
    storage_targets: int = 0,
) -> Topology:
    """A 3-tier fat-tree: pods of leaves and spines; spine ``j`` of every pod
    is cabled to the ``cores_per_spine`` cores of core group ``j``."""
    _check_positive(
        pods=pods,
        leaves_per_pod=leaves_per_pod,
        spines_per_pod=spines_per_pod,
        cores_per_spine=cores_per_spine,
        gpus_per_leaf=gpus_per_leaf,
    )
    b = _Builder(profile)
    gpus, stor = _endpoints(b, pods * leaves_per_pod * gpus_per_leaf, storage_targets)
    leaves = []
    for pod in range(pods):
        lv = [
            b.node(f"leaf{pod * leaves_per_pod + i:02d}", "switch", TIER_LEAF, 0, pod)
            for i in range(leaves_per_pod)
        ]
        sp = [
            b.node(f"spine{pod * spines_per_pod + j:02d}", "switch", TIER_SPINE, 0, pod, j)
            for j in range(spines_per_pod)
        ]
        for leaf in lv:
            for s in sp:
                b.cable(leaf, s)
        leaves.extend(lv)
    cores = [
        [
            b.node(f"core{j * cores_per_spine + k:02d}", "switch", TIER_CORE, 0, 0, j)
            for k in range(cores_per_spine)
        ]
        for j in range(spines_per_pod)
    ]
    spine_ids = [i for i, t in enumerate(b.tiers) if t == TIER_SPINE]
    for s in spine_ids:
        for c in cores[b.slot[s]]:
            b.cable(s, c)
    for i, g in enumerate(gpus):
        b.cable(g, leaves[i // gpus_per_leaf])
    for i, s in enumerate(stor):
        b.cable(s, leaves[i % len(leaves)])
    return _finish(b, "fat-tree", tiers=3, planes=1)


#: Node roles of a topology of any shape: the endpoint kinds, and switch roles that
#: name link classes (``leaf-spine``) and cable lengths; the tiers come from up*/down*.
ROLES = ("gpu", "storage", "leaf", "spine", "core", "switch")

#: Directed links a topology may have at most, generated or read from a file: about 7
#: times the bundled cluster-100k (602,240 links in 1.02 GiB at its peak, README
#: "Performance", Scale), so some 7.5 GiB. A few digits more in a scenario would otherwise
#: build for minutes and run out of memory.
MAX_LINKS = 1 << 22
#: Switches a topology may have at most: routing keeps a switch-by-switch table of the
#: links between them (``Topology.switch_link``, 4 bytes a pair), 1 GiB at this many; the
#: bundled cluster-100k has 7,296 switches (213 MB). 100,000 leaves asked for 37 GiB and
#: failed in numpy's allocation with a traceback.
MAX_SWITCHES = 1 << 14


def from_cables(
    profile: Profile,
    nodes: list[tuple[str, str]],
    cables: list[tuple[int, int]],
    *,
    roots: list[int] | None,
    max_switch_hops: int,
) -> Topology:
    """A topology of any shape: ``nodes`` as (name, role in ``ROLES``), ``cables``
    between node ids (each endpoint has exactly one, to a switch).

    The links are oriented up*/down* from ``roots`` (``fabric_core.net.updown``); a
    node's tier is its height in that orientation (endpoints 0, then rising along
    every up link), so link ranks and the lane rule read it as on a built fabric.

    Raises:
        UpDownError: the graph cannot be routed up*/down* (the message says why).
    """
    b = _Builder(profile)
    for name, role in nodes:
        kind = role if role in ("gpu", "storage") else "switch"
        b.node(name, kind, TIER_ENDPOINT if kind != "switch" else TIER_LEAF)
    for a, c in cables:
        b.cable(a, c)
    is_sw = np.array([k == "switch" for k in b.kinds])
    switch_index = np.full(len(nodes), -1, dtype=np.int32)
    switch_index[is_sw] = np.arange(int(is_sw.sum()), dtype=np.int32)
    src = np.array([a for a, _ in b.links], dtype=np.int32)
    dst = np.array([c for _, c in b.links], dtype=np.int32)
    ep_switch = np.full(len(nodes), -1, dtype=np.int32)
    ep_switch[src[~is_sw[src]]] = dst[~is_sw[src]]
    ud = build_updown(tuple(b.names), switch_index, src, dst, ep_switch, roots, max_switch_hops)
    b.tiers = [int(t) for t in ud.tier]
    words = [{"gpu": "gpu", "storage": "stor"}.get(role, role) for _, role in nodes]
    topo = _finish(b, "file", tiers=max(b.tiers), planes=1, words=words)
    return dataclasses.replace(topo, updown=ud)
