"""Scenarios: TOML files that say what to build and run (topology, profile, workloads, faults).

Validation errors name the key at fault (``topology.spines: must be >= 1``).
Bundled scenarios live in ``fabric_core/scenarios/``; ``load_scenario`` takes
a bundled name or a path.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from fabric_core.commands import MAX_FAULT_DURATION_S, MAX_TICK_S, MIN_TICK_S
from fabric_core.faults.book import FAULT_KINDS
from fabric_core.net.link_classes import LinkConfig, apply_classes, apply_named, parse_links
from fabric_core.net.profiles import Profile, check_pfc, check_routing, get_profile
from fabric_core.net.scaleup import ScaleUpParams
from fabric_core.net.topofile import TopologySpec, load_topology
from fabric_core.net.topology import (
    MAX_LINKS,
    MAX_SWITCHES,
    Topology,
    check_gpus_per_node,
    fat_tree,
    leaf_spine,
    with_scaleup,
)
from fabric_core.runtime.unitless import unitless_notes
from fabric_core.textfile import TextFileError, plain_text, read_text, text_sha256
from fabric_core.units import parse_duration
from fabric_core.workloads import Workload, build_workload
from fabric_core.workloads.fields import whole


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the file and key."""


_TOP_KEYS = {
    "name",
    "description",
    "cluster",
    "seed",
    "dt",
    "profile",
    "topology",
    "profile_overrides",
    "classes",
    "workload",
    "fault",
    "route",
    "links",
}
_TOPO_KEYS = {
    "leaf-spine": {
        "kind",
        "leaves",
        "spines",
        "gpus_per_leaf",
        "storage_targets",
        "planes",
        "rails",
    },
    "fat-tree": {
        "kind",
        "pods",
        "leaves_per_pod",
        "spines_per_pod",
        "cores_per_spine",
        "gpus_per_leaf",
        "storage_targets",
    },
    # a topology file (fabric_core.net.topofile), relative to the scenario
    "file": {"kind", "path"},
}
#: keys of every kind: the scale-up domain (fabric_core.net.scaleup): GPUs per node, and
#: overrides of its link class (``scaleup = { latency_s = 2e-6 }``)
_SCALEUP_KEYS = {"gpus_per_node", "scaleup"}
for _keys in _TOPO_KEYS.values():
    _keys |= _SCALEUP_KEYS


@dataclass(frozen=True)
class ScheduledFault:
    """A fault a scenario injects at a simulated time."""

    at_s: float
    kind: str
    target: str
    params: Mapping[str, float | str]
    duration_s: float | None


@dataclass(frozen=True)
class StaticRoute:
    """A pinned path between two endpoints through named switches."""

    src: str
    dst: str
    via: list[str]


@dataclass(frozen=True)
class InputFile:
    """A file a scenario was loaded from: its role (``scenario``: the TOML itself,
    ``topology``: the file ``topology.path`` names), the path read and the sha256 of its
    text (``textfile.text_sha256``)."""

    role: str
    path: str
    sha256: str


@dataclass
class Scenario:
    """A parsed, validated scenario (build a fabric from it with ``Fabric.from_scenario``)."""

    name: str
    description: str
    source: str
    raw: dict[str, Any]
    cluster: str
    seed: int
    dt_s: float
    profile: Profile
    topology: dict[str, Any]
    classes: dict[str, int] = field(default_factory=dict)
    faults: list[ScheduledFault] = field(default_factory=list)
    routes: list[StaticRoute] = field(default_factory=list)
    links: LinkConfig = field(default_factory=LinkConfig)  # [links]: per class and named
    topology_file: TopologySpec | None = None  # kind = "file": the parsed file
    # the files read to load it, so that a record can say which changed since its run
    inputs: list[InputFile] = field(default_factory=list)
    #: a warning for each duration the file writes without a unit (``runtime.unitless``)
    unit_notes: list[str] = field(default_factory=list)

    def build_topology(self) -> Topology:
        """The topology this scenario describes, its ``[links]`` settings applied.

        Raises:
            ValueError: a ``[links]`` entry that names no link, or a file topology
                that up*/down* cannot route (``topofile.TopologyFileError``).
        """
        t = dict(self.topology)
        kind = t.pop("kind")
        gpus_per_node = t.pop("gpus_per_node", 1)
        scaleup = ScaleUpParams().with_overrides(**t.pop("scaleup", {}))
        if self.topology_file is not None:
            topo = self.topology_file.build(self.profile)
        elif kind == "leaf-spine":
            topo = leaf_spine(self.profile, **t)
        else:
            topo = fat_tree(self.profile, **t)
        topo = apply_classes(topo, self.links, kind)
        if self.topology_file is not None:
            topo = self.topology_file.apply_settings(topo)  # a cable's own values beat its class
        return with_scaleup(apply_named(topo, self.links), gpus_per_node, scaleup)

    def build_workloads(self) -> list[Workload]:
        """Fresh workload objects (a fabric owns its workloads)."""
        out = []
        for i, table in enumerate(self.raw.get("workload", [])):
            out.append(build_workload(table, f"workload[{i}]"))
        return out


def bundled_dir() -> Path:
    """Folder of the bundled scenarios."""
    return Path(str(resources.files("fabric_core") / "scenarios"))


def list_scenarios() -> list[tuple[str, str]]:
    """(name, description) of every bundled scenario."""
    out = []
    for path in sorted(bundled_dir().glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text())
            out.append((path.stem, str(data.get("description", ""))))
        except tomllib.TOMLDecodeError:
            out.append((path.stem, "(unreadable)"))
    return out


#: The largest scenario file read: the bundled ones are a few KiB; a long fault schedule
#: or a table of named links stays far below.
MAX_SCENARIO_BYTES = 4 << 20


def load_scenario(
    name_or_path: str | Path,
    *,
    profile: str | None = None,
    seed: int | None = None,
    dt: str | float | None = None,
) -> Scenario:
    """Load and validate a bundled scenario (by name) or a TOML file (by path).

    ``profile``, ``seed`` and ``dt`` override the file's values.

    Raises:
        ScenarioError: naming the file and the key at fault.
    """
    if not str(name_or_path).strip():  # (Path("") is ".", which was then "a directory")
        names = ", ".join(n for n, _ in list_scenarios())
        raise ScenarioError(f"no scenario named: the name is empty; bundled: {names}")
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        candidate = bundled_dir() / f"{name_or_path}.toml"
        if not candidate.exists():
            names = ", ".join(n for n, _ in list_scenarios())
            raise ScenarioError(
                f"no bundled scenario {str(name_or_path)!r} and no such file; bundled: {names}"
            )
        path = candidate
    try:
        text = read_text(path, MAX_SCENARIO_BYTES)
    except TextFileError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    try:
        scn = _parse(data, str(path), profile=profile, seed=seed, dt=dt)
    except ScenarioError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        msg = exc.args[0] if exc.args else str(exc)
        raise ScenarioError(f"{path}: {msg}") from None
    scn.inputs.insert(0, InputFile("scenario", str(path), text_sha256(text)))
    return scn


def parse_scenario(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    """Validate an already-parsed scenario table."""
    try:
        return _parse(data, source, profile=None, seed=None, dt=None)
    except (ValueError, KeyError, TypeError) as exc:
        msg = exc.args[0] if exc.args else str(exc)
        raise ScenarioError(f"{source}: {msg}") from None


def _bare_tick_hint(given: object, seconds: float) -> str:
    """For a tick written without a unit (``dt = 5``, ``dt = "5"``), read as seconds and
    out of range: that it was, and the tick of that number in a unit that is in range
    (``dt = "5us"``) if one is; nothing for a tick written with a unit."""
    if isinstance(given, bool) or not isinstance(given, int | float | str):
        return ""
    text = str(given).strip()
    try:
        float(text)
    except ValueError:
        return ""  # (it has a unit)
    for unit, scale in (("us", 1e-6), ("ns", 1e-9), ("ms", 1e-3)):
        if MIN_TICK_S <= seconds * scale <= MAX_TICK_S:
            return (
                f' (a duration without a unit is seconds: write the unit, e.g. dt = "{text}{unit}")'
            )
    return " (a duration without a unit is seconds)"


def _tables(data: Mapping[str, Any], key: str) -> list[Any]:
    """``data[key]``, an array of tables (``[[key]]``), or none."""
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"{key}: must be an array of tables ([[{key}]]), got {value!r}")
    return value


#: The keys of a ``[[fault]]`` table, in the order the docs write them
_FAULT_KEYS = ("at", "kind", "target", "params", "duration")


def _params_hint(f: dict[str, Any], extra: list[str]) -> str:
    """For unknown keys of a ``[[fault]]`` table that are a fault's parameters (``ber``
    beside ``kind``, a common slip): where they go, ``params = { ber = 1e-06 }``; the
    kind's own parameters, or any kind's if the kind is not one."""
    kind = FAULT_KINDS.get(str(f.get("kind")))
    known = set(kind.params) if kind else {p for k in FAULT_KINDS.values() for p in k.params}
    params = [key for key in extra if key in known]
    if not params:
        return ""
    values = ", ".join(f"{key} = {_toml_number(f[key])}" for key in params)
    named = ", ".join(params)
    whose = kind.name if kind else "a fault kind"
    are = "is a parameter" if len(params) == 1 else "are parameters"
    return f" ({named} {are} of {whose}: write params = {{ {values} }})"


def _toml_number(value: object) -> str:
    """A parameter's value as the hint writes it: the number given, else an ellipsis."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return "…"


def _scheduled_fault(f: Any, where: str) -> ScheduledFault:
    """One ``[[fault]]`` table, its errors named ``where.key``."""
    if not isinstance(f, dict):
        raise ValueError(f"{where}: must be a table ([[fault]]), got {f!r}")
    extra = sorted(set(f) - set(_FAULT_KEYS))
    if extra:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(extra)}; accepted: {', '.join(_FAULT_KEYS)}"
            + _params_hint(f, extra)
        )
    for key in ("at", "kind", "target"):
        if key not in f:
            raise ValueError(f"{where}.{key}: missing")
    params = f.get("params", {})
    if not isinstance(params, dict):
        raise ValueError(f"{where}.params: must be a table of names and values, got {params!r}")

    def duration(key: str, allow_zero: bool) -> float:
        try:
            return parse_duration(f[key], allow_zero=allow_zero)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}.{key}: {exc}") from None

    lasting = duration("duration", allow_zero=False) if "duration" in f else None
    if lasting is not None and lasting > MAX_FAULT_DURATION_S:
        # (the limit a fault command has: a scheduled fault is applied as one)
        raise ValueError(
            f"{where}.duration: at most {MAX_FAULT_DURATION_S:g} s, as a fault command's, "
            f"got {lasting:g} s"
        )
    return ScheduledFault(
        at_s=duration("at", allow_zero=True),
        kind=str(f["kind"]),
        target=str(f["target"]),
        params=dict(params),
        duration_s=lasting,
    )


#: The longest ``name`` and ``description`` (a name is shown in the console's header and
#: every report line; the longest bundled one has 20 characters)
MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 4096


def _description(value: object) -> str:
    """The scenario's ``description`` (none: empty), with line breaks and tabs allowed."""
    if value is None or value == "":
        return ""
    return plain_text(value, "description", MAX_DESCRIPTION_CHARS, allowed="\n\t")


#: A cluster's name: one MQTT topic level (``fabtop/<cluster>/...``) and a label value
CLUSTER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # (fullmatch: no trailing newline)


def _cluster(value: object) -> str:
    """The scenario's ``cluster``, checked here rather than when ``fabtop serve`` has
    started its engine and exporter and then meets it in a topic."""
    if not isinstance(value, str) or not CLUSTER_NAME.fullmatch(value):
        raise ValueError(
            f"cluster: {value!r} must be 1-64 characters among letters, digits, '_', '.', '-' "
            "(it is an MQTT topic level)"
        )
    return value


def _int(
    table: Mapping[str, Any], key: str, where: str, default: int | None = None, low: int = 0
) -> int:
    """``table[key]`` (or ``default``) as a whole number of at least ``low``, read as the
    workloads' counts are (``fields.whole``); errors named ``where.key``."""
    if table.get(key, default) is None:
        raise ValueError(f"{where}.{key}: missing (an integer is required)")
    try:
        return whole(table, key, 0 if default is None else default, minimum=low)
    except ValueError as exc:
        raise ValueError(f"{where}.{exc}") from None


def _check_size(kind: str, t: Mapping[str, int]) -> None:
    """Refuse a generated topology too large to build (``MAX_LINKS``, ``MAX_SWITCHES``),
    before building it: each endpoint has a cable to its leaf (one per plane), every leaf
    one to every spine of its plane (pod), every spine one to each core of its group; a
    cable is two links."""
    if kind == "file":
        return  # its links are listed in the file, which counts them as it is read
    stor = t.get("storage_targets", 0)
    if kind == "leaf-spine":
        planes = t.get("planes", 1)
        endpoints = t["leaves"] * t["gpus_per_leaf"] + stor
        cables = planes * (endpoints + t["leaves"] * t["spines"])
        switches = planes * (t["leaves"] + t["spines"])
    else:
        leaves = t["pods"] * t["leaves_per_pod"]
        endpoints = leaves * t["gpus_per_leaf"] + stor
        spines = t["pods"] * t["spines_per_pod"]
        cables = endpoints + leaves * t["spines_per_pod"] + spines * t["cores_per_spine"]
        switches = leaves + spines + t["spines_per_pod"] * t["cores_per_spine"]
    if switches > MAX_SWITCHES:
        raise ValueError(
            f"topology: {switches:,} switches; at most {MAX_SWITCHES:,} fit (routing keeps a "
            "table of the links between every two switches; the bundled cluster-100k has "
            "7,296)"
        )
    if 2 * cables > MAX_LINKS:
        raise ValueError(
            f"topology: {2 * cables:,} links ({endpoints:,} endpoints); at most {MAX_LINKS:,} "
            "fit (the bundled cluster-100k has 602,240)"
        )


def _check_scaleup(
    topo: Mapping[str, Any], checked: dict[str, Any], spec: TopologySpec | None
) -> None:
    """``topology.gpus_per_node`` against the GPU count, ``topology.scaleup``'s overrides
    (both into ``checked``)."""
    if "scaleup" in topo:
        table = topo["scaleup"]
        if not isinstance(table, dict):
            raise ValueError(
                "topology.scaleup: must be a table of scale-up parameters "
                "(scaleup = { latency_s = 2e-6 })"
            )
        try:
            ScaleUpParams().with_overrides(**table)
        except ValueError as exc:
            raise ValueError(f"topology.scaleup: {exc.args[0]}") from None
        checked["scaleup"] = dict(table)
    g = checked.get("gpus_per_node", 1)
    rails = checked.get("rails", 0)
    if rails and checked["kind"] == "leaf-spine" and checked["leaves"] % rails:
        raise ValueError(
            f"topology.rails: the leaves ({checked['leaves']}) must be a multiple of rails "
            f"({rails}): GPU r of each server hangs off the rail-r leaf of its group"
        )
    if spec is not None:
        n_gpus = sum(1 for _, role in spec.nodes if role == "gpu")
        what = "the gpu nodes of the file"
    elif checked["kind"] == "leaf-spine":
        n_gpus = checked["leaves"] * checked["gpus_per_leaf"]
        what = f"{checked['leaves']} leaves x {checked['gpus_per_leaf']} gpus_per_leaf"
    else:
        n_gpus = checked["pods"] * checked["leaves_per_pod"] * checked["gpus_per_leaf"]
        what = (
            f"{checked['pods']} pods x {checked['leaves_per_pod']} leaves_per_pod x "
            f"{checked['gpus_per_leaf']} gpus_per_leaf"
        )
    if n_gpus < 1:
        raise ValueError(f"topology: {what} make no GPU; a fabric needs at least 1")
    try:
        check_gpus_per_node(g, n_gpus, rails, counted=what)
    except ValueError as exc:
        raise ValueError(f"topology.gpus_per_node: {exc.args[0]}") from None


def _parse(
    data: dict[str, Any], source: str, *, profile: str | None, seed: int | None, dt: Any
) -> Scenario:
    extra = sorted(set(data) - _TOP_KEYS)
    if extra:
        raise ValueError(
            f"unknown key(s) {', '.join(extra)}; accepted: {', '.join(sorted(_TOP_KEYS))}"
        )
    prof_name = profile or data.get("profile", "native-400g")
    try:
        prof = get_profile(str(prof_name))
    except KeyError as exc:
        raise ValueError(f"profile: {exc.args[0]}") from None
    overrides = data.get("profile_overrides", {})
    if not isinstance(overrides, dict):
        raise ValueError("profile_overrides: must be a table")
    try:
        prof = prof.with_overrides(**overrides)
    except KeyError as exc:
        raise ValueError(f"profile_overrides: {exc.args[0]}") from None
    except ValueError as exc:  # a value the profile refuses (the RoCE MTU, ...)
        raise ValueError(f"profile_overrides.{exc.args[0]}") from None
    try:
        check_pfc(prof)
    except ValueError as exc:
        raise ValueError(f"profile_overrides.{exc.args[0]}") from None
    try:
        check_routing(prof)
    except ValueError as exc:
        where = "profile_overrides." if "routing" in overrides else f"profile {prof.name!r}: "
        raise ValueError(f"{where}{exc.args[0]}") from None
    topo = data.get("topology")
    if not isinstance(topo, dict):
        raise ValueError("topology: missing table [topology]")
    kind = topo.get("kind")
    if kind not in _TOPO_KEYS:
        raise ValueError(f"topology.kind: unknown {kind!r}; known: {', '.join(_TOPO_KEYS)}")
    extra = sorted(set(topo) - _TOPO_KEYS[kind])
    if extra:
        raise ValueError(
            f"topology: unknown key(s) {', '.join(extra)} for {kind!r}; accepted: {', '.join(sorted(_TOPO_KEYS[kind]))}"
        )
    checked: dict[str, Any] = {"kind": kind}
    spec = None
    if kind == "file":
        if not isinstance(topo.get("path"), str):
            raise ValueError("topology.path: missing (the topology file, relative to the scenario)")
        base = Path(source).parent if Path(source).exists() else Path()
        try:
            spec = load_topology(base / topo["path"])
        except ValueError as exc:
            raise ValueError(f"topology.path: {exc.args[0]}") from None
        checked["path"] = str(base / topo["path"])
    for key in _TOPO_KEYS[kind] - {"kind", "path", "scaleup"}:
        if key in topo:
            checked[key] = _int(
                topo, key, "topology", low=0 if key in ("storage_targets", "rails") else 1
            )
    required = _TOPO_KEYS[kind] - {"kind", "path", "storage_targets", "planes", "rails"}
    missing = sorted(required - _SCALEUP_KEYS - set(checked))
    if missing:
        raise ValueError(f"topology.{missing[0]}: missing (an integer is required)")
    _check_scaleup(topo, checked, spec)
    _check_size(kind, checked)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"the seed given (--seed) must be a non-negative integer, got {seed!r}")
    seed_value = seed if seed is not None else _int(data, "seed", "scenario", default=1)
    given_dt = dt if dt is not None else data.get("dt", "1us")
    try:
        dt_value = parse_duration(given_dt)
    except ValueError as exc:
        raise ValueError(f"dt: {exc}") from None
    if not MIN_TICK_S <= dt_value <= MAX_TICK_S:  # (dt = 5 is 5 s: it once ran one tick of 5 s)
        raise ValueError(
            f"dt: the tick must be between {MIN_TICK_S:g} and {MAX_TICK_S:g} s, got "
            f"{dt_value:g} s{_bare_tick_hint(given_dt, dt_value)}"
        )
    classes = data.get("classes", {})
    if not isinstance(classes, dict) or not all(isinstance(v, int) for v in classes.values()):
        raise ValueError("classes: must map class names to virtual lane numbers")
    for name, vl in classes.items():
        if not 0 <= vl < prof.virtual_lanes:
            raise ValueError(
                f"classes.{name}: virtual lane must be in 0..{prof.virtual_lanes - 1} (the "
                f"profile's {prof.virtual_lanes}), got {vl}"
            )
    named: dict[str, int] = {}
    for i, table in enumerate(_tables(data, "workload")):
        workload = build_workload(table, f"workload[{i}]")  # validates
        # reports, telemetry, metrics and the start/stop commands know a workload by name
        if workload.name in named:
            raise ValueError(
                f"workload[{i}].name: {workload.name!r} is already the name of "
                f"workload[{named[workload.name]}]; each workload needs a name of its own"
            )
        named[workload.name] = i
        if classes and workload.traffic_class not in classes:
            # (a class of its own gets a lane of its own: a misspelt one would go unnoticed)
            raise ValueError(
                f"workload[{i}].class: {workload.traffic_class!r} is not one of the scenario's "
                f"[classes] ({', '.join(classes)})"
            )
    faults = [_scheduled_fault(f, f"fault[{i}]") for i, f in enumerate(_tables(data, "fault"))]
    routes = []
    for i, r in enumerate(_tables(data, "route")):
        where = f"route[{i}]"
        if not isinstance(r, dict) or set(r) != {"src", "dst", "via"}:
            raise ValueError(f"{where}: needs exactly the keys src, dst, via")
        if not isinstance(r["via"], list) or not all(isinstance(v, str) for v in r["via"]):
            raise ValueError(f"{where}.via: must be a list of switch names")
        routes.append(StaticRoute(str(r["src"]), str(r["dst"]), list(r["via"])))
    scn = Scenario(
        name=plain_text(data.get("name", Path(source).stem), "name", MAX_NAME_CHARS),
        description=_description(data.get("description")),
        source=source,
        raw=data,
        cluster=_cluster(data.get("cluster", "fabtop")),
        seed=seed_value,
        dt_s=dt_value,
        profile=prof,
        topology=checked,
        classes=dict(classes),
        faults=sorted(faults, key=lambda f: f.at_s),
        routes=routes,
        links=parse_links(data.get("links", {})),
        topology_file=spec,
        inputs=[] if spec is None else [InputFile("topology", spec.source, spec.sha256)],
        unit_notes=unitless_notes(data, file_dt=dt is None),
    )
    if scn.links or spec is not None:
        scn.build_topology()  # link names, classes and up*/down* are checked at load
    return scn
