"""A multi-plane topology cut into its planes: each plane a topology of its own.

Plane ``p`` of a multi-plane build holds every endpoint (each has one port in each plane)
and plane ``p``'s switches and cables. Its own topology is the same builder's one-plane
fabric: the same endpoints in the same order, the same switches without the plane's
name prefix (``p1leaf03`` is ``leaf03``), the same cables. The cut maps the plane's nodes
and links to the whole fabric's, and gives the plane's links the whole fabric's
per-link settings (bandwidth, propagation, buffer: a scenario's ``[links]`` entries),
so a plane's links are the very links they stand for.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.net.topology import Topology, leaf_spine


class PlaneCutError(ValueError):
    """A fabric that cannot be run one engine per plane (the message says why)."""


@dataclass(frozen=True)
class PlaneCut:
    """One plane of a multi-plane fabric as a topology of its own, and where its nodes
    and links are in the whole fabric."""

    plane: int
    topo: Topology
    #: per plane node id: the whole fabric's node id
    node_global: NDArray[np.int64]
    #: per plane link id: the whole fabric's link id
    link_global: NDArray[np.int64]


def plane_topology(profile: Profile, topology: dict[str, object]) -> Topology:
    """One plane of the fabric a scenario's ``[topology]`` table describes: the same
    builder with ``planes = 1``.

    Raises:
        PlaneCutError: the table is not a multi-plane leaf-spine.
    """
    problem = plane_cut_problem(topology)
    if problem is not None:
        raise PlaneCutError(problem)
    t = {k: v for k, v in topology.items() if k not in ("kind", "planes", "gpus_per_node")}
    t.pop("scaleup", None)
    return leaf_spine(profile, planes=1, **t)  # type: ignore[arg-type]


def plane_cut_problem(topology: dict[str, object]) -> str | None:
    """Why the fabric a scenario's ``[topology]`` table describes cannot be cut at its
    planes, without building it (None: it can, as far as the table says)."""
    planes = int(topology.get("planes", 1))  # type: ignore[call-overload]
    if planes < 2:
        return f"the fabric has {planes} plane: one engine per plane needs two or more"
    if int(topology.get("gpus_per_node", 1)) > 1 or topology.get("scaleup"):  # type: ignore[call-overload]
        return (
            "a fabric with scale-up domains (gpus_per_node > 1) cannot be cut at its planes: "
            "its NVLink traffic belongs to no plane"
        )
    kind = topology.get("kind")
    if kind != "leaf-spine":
        return f"a {kind} topology has no planes to cut (multi-plane is leaf-spine)"
    return None


def _map_links(
    whole: Topology,
    one_plane: Topology,
    node_global: NDArray[np.int64],
    links_of_plane: NDArray[np.intp],
) -> NDArray[np.int64]:
    """Per link of ``one_plane``, the whole fabric's link it stands for: the link of
    ``links_of_plane`` between the same two nodes (``node_global`` maps them). A fabric
    has one link per direction between two nodes, so the pair names it; matched by a
    sort, not by name, since a 100k-GPU fabric has 1.6 million links.

    Raises:
        PlaneCutError: a link of the plane has no counterpart in ``one_plane``.
    """
    node_local = np.full(len(whole.nodes), -1, dtype=np.int64)
    node_local[node_global] = np.arange(node_global.size)
    n = max(node_global.size, 1)
    lt = one_plane.links
    keys = lt.src.astype(np.int64) * n + lt.dst
    order = np.argsort(keys, kind="stable")
    links = whole.links
    a, b = node_local[links.src[links_of_plane]], node_local[links.dst[links_of_plane]]
    want = a * n + b
    hit = order[np.searchsorted(keys, want, sorter=order).clip(max=keys.size - 1)]
    found = (a >= 0) & (b >= 0) & (keys[hit] == want)
    if not found.all():
        g = int(links_of_plane[np.argmin(found)])
        raise PlaneCutError(f"link {links.name[g]} has no counterpart in a plane")
    link_global = np.full(len(lt), -1, dtype=np.int64)
    link_global[hit] = links_of_plane
    return link_global


def cut_planes(whole: Topology, one_plane: Topology) -> list[PlaneCut]:
    """``whole``'s planes, each as ``one_plane`` (built by ``plane_topology``) with the
    whole fabric's per-link settings.

    Raises:
        PlaneCutError: ``one_plane`` is not the shape of ``whole``'s planes.
    """
    nodes, links = whole.nodes, whole.links
    is_ep = nodes.tier == 0
    link_plane = np.where(is_ep[links.src], nodes.plane[links.dst], nodes.plane[links.src])
    cuts = []
    for p in range(whole.planes):
        prefix = f"p{p}"

        def local(name: str, switch: bool, prefix: str = prefix) -> str:
            if switch and not name.startswith(prefix):
                raise PlaneCutError(f"switch {name} of plane {prefix} lacks its plane's prefix")
            return name[len(prefix) :] if switch else name

        node_global = np.full(len(one_plane.nodes), -1, dtype=np.int64)
        in_plane = np.flatnonzero(is_ep | (nodes.plane == p))
        for g in in_plane.tolist():
            name = local(nodes.name[g], not is_ep[g])
            i = one_plane.nodes.index.get(name)
            if i is None:
                raise PlaneCutError(f"node {nodes.name[g]} has no counterpart {name} in a plane")
            node_global[i] = g
        if (node_global < 0).any():
            raise PlaneCutError(f"plane {p} of the fabric is not the shape of a one-plane build")
        link_global = _map_links(whole, one_plane, node_global, np.flatnonzero(link_plane == p))
        if (link_global < 0).any():
            raise PlaneCutError(f"plane {p} of the fabric is not the shape of a one-plane build")
        lt = one_plane.links
        settings = dataclasses.replace(
            lt,
            bandwidth_Bps=links.bandwidth_Bps[link_global].copy(),
            prop_delay_s=links.prop_delay_s[link_global].copy(),
            buffer_bytes=links.buffer_bytes[link_global].copy(),
        )
        topo = dataclasses.replace(one_plane, links=settings)
        cuts.append(PlaneCut(p, topo, node_global, link_global))
    return cuts
