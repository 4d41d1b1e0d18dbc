"""Groups of nodes for the fabric map of a large fabric: pods, and groups of cores.

A tier of thousands of switches cannot be drawn a cell per switch, so the map draws a cell
per group and drills down into one. The groups come from the cabling alone (the node and
link tables every snapshot carries, MQTT-decoded ones included), so they hold for built
and file topologies alike:

* a **pod** is a set of leaves and spines joined by leaf-spine cables (a connected
  component of that graph); an endpoint belongs to the pod of the leaf its first uplink
  reaches;
* cores are grouped by the lowest-numbered spine they are cabled to: in a fat-tree the
  cores of group ``j`` serve spine ``j`` of every pod, so that spine tells the groups
  apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fabric_core.runtime.snapshot import LinkTable, NodeTable

TIER_ENDPOINT, TIER_LEAF, TIER_SPINE, TIER_CORE = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class NodeGroups:
    """Each node's group (-1: none) and each group's name."""

    of_node: NDArray[np.int32]
    names: tuple[str, ...]


def node_groups(nodes: NodeTable, links: LinkTable) -> NodeGroups:
    """Pods (leaves, spines and their endpoints) and core groups of a fabric."""
    tier = np.asarray(nodes.tier)
    n = tier.size
    src = np.asarray(links.src, dtype=np.intp)
    dst = np.asarray(links.dst, dtype=np.intp)
    of_node = np.full(n, -1, dtype=np.int32)
    pod_label = _components(n, *_between(tier, src, dst, TIER_LEAF, TIER_SPINE))
    in_pod = (tier == TIER_LEAF) | (tier == TIER_SPINE)
    pods = np.unique(pod_label[in_pod])  # labels are each pod's lowest node: pod order
    of_node[in_pod] = np.searchsorted(pods, pod_label[in_pod])
    names = [f"pod {p}" for p in range(pods.size)]
    # an endpoint joins the pod of the first leaf it is cabled to
    up_src, up_dst = _between(tier, src, dst, TIER_ENDPOINT, TIER_LEAF)
    first = np.unique(up_src, return_index=True)[1]
    of_node[up_src[first]] = of_node[up_dst[first]]
    # a core's group: the lowest spine it is cabled to
    core_src, core_dst = _between(tier, src, dst, TIER_CORE, TIER_SPINE)
    if core_src.size:
        lowest = np.full(n, n, dtype=np.intp)
        np.minimum.at(lowest, core_src, core_dst)
        cores = np.flatnonzero((tier == TIER_CORE) & (lowest < n))
        keys, group = np.unique(lowest[cores], return_inverse=True)
        of_node[cores] = len(names) + group
        names += [f"core group {g}" for g in range(keys.size)]
    return NodeGroups(of_node=of_node, names=tuple(names))


def _between(
    tier: NDArray[np.int8], src: NDArray[np.intp], dst: NDArray[np.intp], a: int, b: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The links from tier ``a`` to tier ``b``: (tier-``a`` end, tier-``b`` end)."""
    keep = (tier[src] == a) & (tier[dst] == b)
    return src[keep], dst[keep]


def _components(n: int, a: NDArray[np.intp], b: NDArray[np.intp]) -> NDArray[np.intp]:
    """Each node's connected component over the edges ``a``-``b``, labelled by its lowest
    node (min-label propagation with pointer jumping: a few passes on a fat-tree)."""
    label = np.arange(n, dtype=np.intp)
    while True:
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, low)
        np.minimum.at(new, b, low)
        new = new[new]  # jump to the label's label
        if np.array_equal(new, label):
            return label
        label = new
