"""A scenario's ``[links]`` table: bandwidth, propagation delay and buffer per link class
and per named link, applied over the profile's values.

Classes, by the roles of a cable's ends (``LinkTable.tier``, both directions):

* ``host``: an endpoint (GPU or storage target) and its switch;
* ``leaf_spine``: a leaf and a spine;
* ``spine_core``: a spine and a core.

``[links.named."a-b"]`` sets one cable (both directions), ``[links.named."a->b"]`` one
direction. Later wins: profile, class, a topology file's own cable settings, named
cable, named direction. ``buffer`` is ``LinkTable.buffer_bytes``, the ingress buffer per
lane at the link's downstream end (credits on the native fabric, the PFC queue per
priority on RoCE).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.topofile import LinkSettings, parse_link_settings, with_link_values
from fabric_core.net.topology import Topology


def _host(a: str, b: str) -> bool:
    return a in ("gpu", "stor") or b in ("gpu", "stor")


#: class name -> does a link between roles (a, b) belong to it
CLASSES: dict[str, Callable[[str, str], bool]] = {
    "host": _host,
    "leaf_spine": lambda a, b: {a, b} == {"leaf", "spine"},
    "spine_core": lambda a, b: {a, b} == {"spine", "core"},
}


@dataclass
class LinkConfig:
    """A parsed ``[links]`` table."""

    classes: dict[str, LinkSettings] = field(default_factory=dict)
    named: dict[str, LinkSettings] = field(default_factory=dict)  # as written

    def __bool__(self) -> bool:
        return bool(self.classes or self.named)


def parse_links(table: Any) -> LinkConfig:
    """Validate a ``[links]`` table (values, class names; link names need the topology).

    Raises:
        ValueError: ``links.<key>: reason``.
    """
    if not isinstance(table, Mapping):
        raise ValueError('links: must be a table ([links.host], [links.named."a-b"], ...)')
    cfg = LinkConfig()
    accepted = ", ".join([*CLASSES, "named"])
    for key, value in table.items():
        where = f"links.{key}"
        if key not in CLASSES and key != "named":
            raise ValueError(f"links: unknown class {key!r}; accepted: {accepted}")
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: must be a table")
        if key != "named":
            cfg.classes[key] = parse_link_settings(dict(value), where)
            continue
        for name, sub in value.items():
            at = f'links.named."{name}"'
            if not isinstance(sub, Mapping):
                raise ValueError(f"{at}: must be a table (bandwidth, delay, buffer)")
            cfg.named[str(name)] = parse_link_settings(dict(sub), at)
    return cfg


def _resolve(topo: Topology, name: str) -> list[int]:
    """Link ids a named entry sets: ``a->b`` one direction, ``a-b`` both (node names may
    hold ``-``, so every split into two known nodes is tried).

    Raises:
        ValueError: no such link, or an ambiguous name.
    """
    index = topo.links.index
    if "->" in name:
        if name not in index:
            raise ValueError(f"no link {name!r} in this topology")
        return [index[name]]
    found = []
    for i in [i for i, ch in enumerate(name) if ch == "-"]:
        a, b = name[:i], name[i + 1 :]
        if f"{a}->{b}" in index:
            found.append([index[f"{a}->{b}"], index[f"{b}->{a}"]])
    if not found:
        raise ValueError(
            f"no cable {name!r} in this topology (write 'a-b' for a cable, 'a->b' for one direction)"
        )
    if len(found) > 1:
        raise ValueError(f"{name!r} names more than one cable; write 'a->b' for one direction")
    return found[0]


def _set(
    arrays: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
    where: NDArray[np.intp] | list[int],
    s: LinkSettings,
) -> None:
    for arr, value in zip(arrays, (s.bandwidth_Bps, s.prop_delay_s, s.buffer_bytes), strict=True):
        if value is not None:
            arr[where] = value


def apply_classes(topo: Topology, cfg: LinkConfig, kind: str) -> Topology:
    """``topo`` with the class settings of ``cfg``.

    Raises:
        ValueError: a class with no link in ``topo`` (``kind`` names the topology).
    """
    if not cfg.classes:
        return topo
    links = topo.links
    arrays = (links.bandwidth_Bps.copy(), links.prop_delay_s.copy(), links.buffer_bytes.copy())
    roles = [t.split("-", 1) for t in links.tier]
    for name, s in cfg.classes.items():
        member = np.flatnonzero([CLASSES[name](a, b) for a, b in roles])
        if member.size == 0:
            raise ValueError(f"links.{name}: no link of this class in this {kind} topology")
        _set(arrays, member, s)
    return with_link_values(topo, *arrays)


def apply_named(topo: Topology, cfg: LinkConfig) -> Topology:
    """``topo`` with the named-link settings of ``cfg`` (cables first, then directions).

    Raises:
        ValueError: ``links.named."x": reason`` for a name that is no link.
    """
    if not cfg.named:
        return topo
    links = topo.links
    arrays = (links.bandwidth_Bps.copy(), links.prop_delay_s.copy(), links.buffer_bytes.copy())
    resolved = []
    for name, s in cfg.named.items():
        try:
            resolved.append((len(ids := _resolve(topo, name)), ids, s))
        except ValueError as exc:
            raise ValueError(f'links.named."{name}": {exc.args[0]}') from None
    for _, ids, s in sorted(resolved, key=lambda r: -r[0]):  # cables, then directions
        _set(arrays, ids, s)
    return with_link_values(topo, *arrays)
