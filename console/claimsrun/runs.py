"""Building and running the emulator for the claims: bundled scenarios, with the settings applied.

Every run goes through ``run_scenario`` (a fabric from a scenario table, run with
``fabric_core.reports.run.run_for``, the same library call as ``fabtop run``) or one of
the two probes below, so each figure is a field of a run report or of a
workload's KPIs. Runs shared between claims (C8 and C10 both read the link-failure
recovery) are cached per ``Settings``.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from typing import Any

from console.claimsrun.model import Settings, Tick
from fabric_core.endpoints.model import EndpointParams
from fabric_core.net.profiles import Profile, get_profile
from fabric_core.net.topology import leaf_spine
from fabric_core.reports.bringup import ProbeAllToAll
from fabric_core.reports.endpoints_doc import probe
from fabric_core.reports.run import report_of, run_for
from fabric_core.reports.storage import STORAGE_KINDS
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.workloads.kvcache import KvCache
from fabric_core.workloads.traffic import Scripted

ENDPOINT_KINDS = ("moe", "pd")

_CACHE: dict[str, dict[str, Any]] = {}

#: The longest a drained run goes on after its window (``run_scenario``'s ``drain``).
DRAIN_MAX_S = 2.0


def bundled(name: str) -> dict[str, Any]:
    """A bundled scenario's table (a deep copy: callers change it)."""
    return copy.deepcopy(load_scenario(name).raw)


def profile(name: str, settings: Settings) -> Profile:
    """A profile with the settings' overrides for it."""
    return get_profile(name).with_overrides(**dict(settings.profile_overrides.get(name, {})))


def apply(raw: dict[str, Any], settings: Settings, *, prof: str | None = None) -> dict[str, Any]:
    """``raw`` on profile ``prof`` (default: its own) with the settings' parameters applied."""
    raw = copy.deepcopy(raw)
    if prof is not None:
        raw["profile"] = prof
    name = str(raw.get("profile", "native-400g"))
    over = settings.profile_overrides.get(name)
    if over:
        raw["profile_overrides"] = {**raw.get("profile_overrides", {}), **over}
    if settings.seed is not None:
        raw["seed"] = settings.seed
    for t in raw.get("workload", []):
        if t.get("kind") in ENDPOINT_KINDS and settings.endpoint:
            over = dict(settings.endpoint)
            # the workload's own control / data_path keys win over its endpoint table
            for key in ("control", "data_path"):
                if key in over:
                    t[key] = over.pop(key)
            t["endpoint"] = {**t.get("endpoint", {}), **over}
        if t.get("kind") in STORAGE_KINDS and settings.storage:
            t["storage"] = {**t.get("storage", {}), **settings.storage}
    return raw


def set_workloads(raw: dict[str, Any], kinds: tuple[str, ...], **keys: Any) -> dict[str, Any]:
    """Set ``keys`` in every workload of one of ``kinds`` (a path, a depth, a rate)."""
    for t in raw.get("workload", []):
        if t.get("kind") in kinds:
            t.update(keys)
    return raw


def run_scenario(
    raw: dict[str, Any],
    duration_s: float,
    settings: Settings,
    tick: Tick,
    *,
    label: str,
    prof: str | None = None,
    cache: bool = False,
    drain: bool = False,
) -> dict[str, Any]:
    """Run one scenario table for ``duration_s``; the ``fabtop run --json`` report.

    ``drain``: the workloads start nothing after ``duration_s`` and the run goes on until
    every KV request they started is done (at most ``DRAIN_MAX_S`` more), so that a
    latency percentile counts every request of the window, not just those quick enough
    to end in it (a slow path's restores would otherwise be left out, and its
    percentiles be those of the fast requests)."""
    table = apply(raw, settings, prof=prof)
    key = repr((sorted(table.items(), key=str), duration_s, settings.key(), drain))
    if cache and key in _CACHE:
        return _CACHE[key]
    fabric = Fabric.from_scenario(parse_scenario(table, label))
    report = _run_drained(fabric, duration_s, label) if drain else run_for(fabric, duration_s)
    report["deadlocks"] = fabric.deadlocks
    tick(label)
    if cache:
        _CACHE[key] = report
    return report


def _run_drained(fabric: Fabric, duration_s: float, label: str) -> dict[str, Any]:
    """``run_for``'s report of a run whose workloads stop at ``duration_s`` and which goes
    on until their KV requests are done (its ``run`` figures are the whole run's)."""
    wall0, hop0 = time.perf_counter(), fabric.hop_updates
    fabric.run_ticks(max(1, math.ceil(duration_s / fabric.dt_s - 1e-9)))
    for wl in fabric.workloads:
        wl.stop()
    step = max(1, round(1e-3 / fabric.dt_s))  # (checked every simulated ms)
    end = fabric.sim_time_s + DRAIN_MAX_S
    while _kv_outstanding(fabric) and fabric.sim_time_s < end:
        fabric.run_ticks(step)
    left = _kv_outstanding(fabric)
    if left:  # a percentile of the requests done would not be the window's
        raise RuntimeError(
            f"{label}: {left} KV requests still under way {DRAIN_MAX_S:g} s after the window"
        )
    return report_of(fabric, fabric.tick, fabric.hop_updates - hop0, time.perf_counter() - wall0)


def _kv_outstanding(fabric: Fabric) -> int:
    """KV restores and offloads not done yet, over the fabric's KV cache workloads."""
    return sum(
        wl.store.outstanding for wl in fabric.workloads if isinstance(wl, KvCache) and wl.store
    )


def kpi(report: Mapping[str, Any], workload: str, name: str) -> float:
    """A workload KPI of a report (NaN when the run did not produce it)."""
    v = report.get("workloads", {}).get(workload, {}).get("kpis", {}).get(name)
    return float("nan") if v is None else float(v)


def message_latency(prof: Profile, size_bytes: float, switch_hops: int) -> float:
    """One message alone on an idle fabric over 1 (same leaf) or 3 switches (leaf, spine,
    leaf): ``fabric_core.reports.compare.message_latency`` on a profile object, so that the
    settings' overrides reach it."""
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    idx = topo.nodes.index
    dst = "gpu0001" if switch_hops == 1 else "gpu0002"
    wl = Scripted(
        name="probe", traffic_class="probe", flows=[(idx["gpu0000"], idx[dst], size_bytes, 0.0)]
    )
    fabric = Fabric(topo, prof, [wl], dt_s=1e-6, seed=1)
    while not wl.finished and fabric.sim_time_s < 1.0:
        fabric.step()
    _, start, finish = wl.finished[0]
    return float(finish - start)


def endpoint_probe(
    prof: Profile, params: EndpointParams, size_bytes: float, burst: int
) -> ProbeAllToAll:
    """Two GPUs on one leaf send ``burst`` messages of ``size_bytes`` to each other through
    the endpoint model (``fabric_core.reports.endpoints_doc.probe``, on any profile)."""
    return probe(params, size_bytes, burst, prof)


def clear_cache() -> None:
    """Forget cached runs (a new ``fabtop claims`` invocation starts clean)."""
    _CACHE.clear()
