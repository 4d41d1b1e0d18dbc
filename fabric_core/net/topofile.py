"""Topology files: any fabric as a list of nodes and cables, as packet simulators take.

One statement per line; ``#`` starts a comment::

    node gpu0 gpu                 # name, role: gpu | storage | leaf | spine | core | switch
    node leaf0 leaf
    link gpu0 leaf0 bandwidth=400G delay=15ns buffer=128KiB   # a cable; settings optional
    root spine0 spine1            # optional: up*/down* roots (default: chosen, see updown)

Nodes are declared before the cables that use them. Every endpoint has one cable, to a
switch; switches may be cabled any way (two leaves directly, a ring). A cable's
settings apply to both directions and override the profile and the scenario's link
classes; the scenario's ``[links.named]`` override them in turn. Errors name the
line and the reason (``lab.topo:7: unknown node 'leaf9'``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.net.routing import MAX_HOPS
from fabric_core.net.topology import MAX_LINKS, ROLES, Topology, from_cables
from fabric_core.net.updown import UpDownError
from fabric_core.textfile import TextFileError, read_text, text_sha256
from fabric_core.units import parse_duration, parse_rate, parse_size

_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*")
#: The longest cable delay a link may have: 200 km of fibre (at 5 ns/m), beyond the reach
#: of long-haul InfiniBand (NVIDIA's MetroX-2 spans up to 40 km). A delay written without
#: a unit is seconds (``delay = "5"``), and five seconds of cable would hold a credit link
#: to its buffer per ten seconds: refused, with the unit to write.
MAX_CABLE_DELAY_S = 1e-3


class TopologyFileError(ValueError):
    """A topology file that cannot be used; the message names the file, line and reason."""


@dataclass
class LinkSettings:
    """Per-link values a file or a scenario sets (None: keep what is there)."""

    bandwidth_Bps: float | None = None
    prop_delay_s: float | None = None
    buffer_bytes: float | None = None


def parse_link_settings(values: dict[str, object], where: str) -> LinkSettings:
    """``bandwidth``, ``delay`` and ``buffer`` from text with units.

    Raises:
        ValueError: ``where.key: reason`` for an unknown key or a bad value.
    """
    out = LinkSettings()
    for key, value in values.items():
        at = f"{where}.{key}"
        if key not in ("bandwidth", "delay", "buffer"):
            raise ValueError(f"{where}: unknown key {key!r}; accepted: bandwidth, delay, buffer")
        if not isinstance(value, str):
            raise ValueError(f"{at}: must be text with a unit (e.g. '400G', '500ns', '4MB')")
        try:
            if key == "bandwidth":
                out.bandwidth_Bps = parse_rate(value)
            elif key == "delay":
                out.prop_delay_s = parse_duration(value, allow_zero=True)
                if out.prop_delay_s > MAX_CABLE_DELAY_S:
                    raise ValueError(_too_long(value, out.prop_delay_s))
            else:
                out.buffer_bytes = parse_size(value)
                if out.buffer_bytes <= 0:
                    raise ValueError(f"a buffer must be > 0, got {value!r}")
        except ValueError as exc:
            raise ValueError(f"{at}: {exc.args[0]}") from None
    return out


def _too_long(text: str, seconds: float) -> str:
    """Why a cable delay of ``seconds`` (written ``text``) is refused, and, for one written
    without a unit, the unit it likely lacks."""
    km = seconds / 5e-9 / 1e3
    bare = re.fullmatch(r"\s*[0-9.eE+-]+\s*", text) is not None
    hint = (
        f"; a delay without a unit is seconds: write one, e.g. '{text.strip()}ns'" if bare else ""
    )
    return (
        f"{text!r} is {km:,.0f} km of fibre; a cable's delay must be at most "
        f"{MAX_CABLE_DELAY_S * 1e3:g} ms (200 km){hint}"
    )


@dataclass
class TopologySpec:
    """A parsed file: nodes (name, role), cables (node ids) with their settings, roots."""

    source: str
    nodes: list[tuple[str, str]] = field(default_factory=list)
    cables: list[tuple[int, int]] = field(default_factory=list)
    settings: list[LinkSettings] = field(default_factory=list)
    roots: list[int] | None = None
    #: of the text parsed (UTF-8): a record keeps it, so that a replay can say the file
    #: changed since the run (fabric_core.reports.record)
    sha256: str = ""

    def build(self, profile: Profile) -> Topology:
        """The topology, with the profile's link values (``apply_settings`` adds the file's).

        Raises:
            TopologyFileError: up*/down* cannot route it (naming why).
        """
        try:
            return from_cables(
                profile, self.nodes, self.cables, roots=self.roots, max_switch_hops=MAX_HOPS - 2
            )
        except UpDownError as exc:
            raise TopologyFileError(f"{self.source}: {exc.args[0]}") from None

    def apply_settings(self, topo: Topology) -> Topology:
        """``topo`` (built by ``build``) with the cables' own settings."""
        links = topo.links
        bw, delay, buf = (
            links.bandwidth_Bps.copy(),
            links.prop_delay_s.copy(),
            links.buffer_bytes.copy(),
        )
        for i, s in enumerate(self.settings):
            both = [2 * i, 2 * i + 1]  # from_cables adds a cable as a->b, then b->a
            if s.bandwidth_Bps is not None:
                bw[both] = s.bandwidth_Bps
            if s.prop_delay_s is not None:
                delay[both] = s.prop_delay_s
            if s.buffer_bytes is not None:
                buf[both] = s.buffer_bytes
        return with_link_values(topo, bw, delay, buf)


def with_link_values(
    topo: Topology,
    bandwidth_Bps: NDArray[np.float64],
    prop_delay_s: NDArray[np.float64],
    buffer_bytes: NDArray[np.float64],
) -> Topology:
    """``topo`` with new per-link bandwidth, delay and buffer arrays."""
    links = dataclasses.replace(
        topo.links,
        bandwidth_Bps=bandwidth_Bps,
        prop_delay_s=prop_delay_s,
        buffer_bytes=buffer_bytes,
    )
    return dataclasses.replace(topo, links=links)


def parse_topology(text: str, source: str) -> TopologySpec:
    """Parse a topology file's text (``source`` names it in errors).

    Raises:
        TopologyFileError: ``source:line: reason``.
    """
    spec = TopologySpec(source, sha256=text_sha256(text))
    index: dict[str, int] = {}
    declared: dict[str, int] = {}  # node -> line
    cabled: dict[int, int] = {}  # endpoint -> line of its cable
    pairs: dict[frozenset[int], int] = {}
    root_line = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue

        def fail(reason: str, line: int = n) -> TopologyFileError:
            return TopologyFileError(f"{source}:{line}: {reason}")

        stmt, args = words[0], words[1:]
        if stmt == "node":
            if len(spec.nodes) >= MAX_LINKS:  # (each node needs a cable: two links)
                raise fail(f"more than {MAX_LINKS:,} nodes; a topology has at most as many links")
            if len(args) != 2:
                raise fail("expected `node NAME ROLE`")
            name, role = args
            if not _NAME.fullmatch(name):
                raise fail(f"bad node name {name!r}: letters, digits, '_', '.', '-' only")
            if name in index:
                raise fail(f"node {name!r} declared twice (first on line {declared[name]})")
            if role not in ROLES:
                raise fail(f"unknown role {role!r} for {name}; known: {', '.join(ROLES)}")
            index[name], declared[name] = len(spec.nodes), n
            spec.nodes.append((name, role))
        elif stmt == "link":
            if len(args) < 2:
                raise fail("expected `link A B [bandwidth=..] [delay=..] [buffer=..]`")
            if 2 * (len(spec.cables) + 1) > MAX_LINKS:
                raise fail(
                    f"more than {MAX_LINKS:,} links (a cable is two); at most that many fit "
                    "(the bundled cluster-100k has 602,240)"
                )
            ends = []
            for name in args[:2]:
                if name not in index:
                    raise fail(f"unknown node {name!r} (declare it with a `node` line first)")
                ends.append(index[name])
            a, b = ends
            if a == b:
                raise fail(f"a cable from {args[0]} to itself")
            if frozenset(ends) in pairs:
                first = pairs[frozenset(ends)]
                raise fail(
                    f"a second cable between {args[0]} and {args[1]} (first on line {first}): "
                    "parallel cables are not modelled"
                )
            is_ep = [spec.nodes[e][1] in ("gpu", "storage") for e in ends]
            if all(is_ep):
                raise fail(f"a cable between two endpoints ({args[0]}, {args[1]})")
            for e, ep in zip(ends, is_ep, strict=True):
                if ep and e in cabled:
                    raise fail(
                        f"endpoint {spec.nodes[e][0]} has a second cable (first on line "
                        f"{cabled[e]}): an endpoint has one port on a file topology"
                    )
            values: dict[str, object] = {}
            for kv in args[2:]:
                key, eq, value = kv.partition("=")
                if not eq or not value:
                    raise fail(f"expected KEY=VALUE, got {kv!r}")
                values[key] = value
            try:
                settings = parse_link_settings(values, "link")
            except ValueError as exc:
                raise fail(exc.args[0]) from None
            for e, ep in zip(ends, is_ep, strict=True):
                if ep:
                    cabled[e] = n
            pairs[frozenset(ends)] = n
            spec.cables.append((a, b))
            spec.settings.append(settings)
        elif stmt == "root":
            if not args:
                raise fail("expected `root SWITCH [SWITCH ...]`")
            if root_line:
                raise fail(f"a second `root` line (first on line {root_line})")
            for name in args:
                if name not in index:
                    raise fail(f"unknown node {name!r} (declare it with a `node` line first)")
                if spec.nodes[index[name]][1] in ("gpu", "storage"):
                    raise fail(f"root {name} is an endpoint; a root is a switch")
            spec.roots, root_line = [index[name] for name in args], n
        else:
            raise fail(f"unknown statement {stmt!r}; known: node, link, root")
    if not any(role == "gpu" for _, role in spec.nodes):
        raise TopologyFileError(f"{source}: no `gpu` node")
    for i, (name, role) in enumerate(spec.nodes):
        if role in ("gpu", "storage") and i not in cabled:
            raise TopologyFileError(
                f"{source}:{declared[name]}: endpoint {name} has no cable to a switch"
            )
    return spec


#: The largest topology file read: a file of ``MAX_LINKS`` links (a `link` line of some
#: 40 bytes a cable, two links) is about 90 MB.
MAX_TOPOLOGY_BYTES = 128 << 20


def load_topology(path: Path) -> TopologySpec:
    """Read and parse a topology file.

    Raises:
        TopologyFileError: unreadable, or as ``parse_topology``.
    """
    try:
        text = read_text(path, MAX_TOPOLOGY_BYTES)
    except TextFileError as exc:
        raise TopologyFileError(f"{path}: {exc}") from None
    return parse_topology(text, str(path))
