"""Side by side: the same scenario, seed and workload on two fabric profiles.

``compare_scenario`` runs a scenario on the native credit fabric and on RoCEv2
and tabulates what differs (latency per class, throughput, drops, pauses, ECN
marks, deadlocks). ``latency_by_size`` measures a lone message of each size
across 1 and 3 switch hops on an idle fabric of each profile: serialisation,
per-hop forwarding, store-and-forward, headers and NIC costs all come from the
profiles' parameters — nothing is written in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fabric_core.net.profiles import get_profile
from fabric_core.net.topology import leaf_spine
from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.workloads.traffic import Scripted

DEFAULT_PROFILES = ("native-400g", "roce-400g")
MESSAGE_SIZES = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)

ProgressFn = Callable[[str, float, float], None]


def compare_scenario(
    scenario: str,
    duration_s: float,
    *,
    profiles: Sequence[str] = DEFAULT_PROFILES,
    seed: int | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Run ``scenario`` on each profile (same seed) and return both reports and a summary."""
    reports = {}
    for name in profiles:
        fabric = Fabric.from_scenario(load_scenario(scenario, profile=name, seed=seed))

        def step(done: float, total: float, name: str = name) -> None:
            if progress is not None:
                progress(name, done, total)

        reports[name] = run_for(fabric, duration_s, step)
        reports[name]["deadlocks"] = fabric.deadlocks
    # what ran: whole ticks (``run_for``), the same on both where their ticks are
    simulated = {r["run"]["simulated_seconds"] for r in reports.values()}
    return {
        "scenario": scenario,
        "duration_seconds": simulated.pop() if len(simulated) == 1 else duration_s,
        "profiles": list(profiles),
        "reports": reports,
        "classes": _class_table(reports),
        "fabric": _fabric_table(reports),
    }


def _class_table(reports: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    classes: dict[str, dict[str, dict[str, Any]]] = {}
    for prof, r in reports.items():
        for cls, row in r["classes"].items():
            classes.setdefault(cls, {})[prof] = row
    return classes


def _fabric_table(reports: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for prof, r in reports.items():
        out[prof] = {
            "throughput_bytes_per_second": r["totals"]["throughput_bytes_per_second"],
            "completed_flows": r["totals"]["completed_flows"],
            "dropped_bytes": r["totals"]["dropped_bytes"],
            "retransmitted_bytes": r["links"]["retransmitted_bytes"],
            "pause_frames": r["links"]["pause_frames"],
            "ecn_marked_packets": r["links"]["ecn_marked_packets"],
            "deadlocks": r["deadlocks"],
        }
    return out


def message_latency(
    profile_name: str, size_bytes: float, switch_hops: int, dt_s: float = 1e-6
) -> float:
    """Latency of one message alone on an idle fabric, across 1 or 3 switches."""
    if switch_hops not in (1, 3):
        raise ValueError("switch_hops must be 1 (same leaf) or 3 (leaf, spine, leaf)")
    prof = get_profile(profile_name)
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    idx = topo.nodes.index
    dst = "gpu0001" if switch_hops == 1 else "gpu0002"
    wl = Scripted(
        name="probe", traffic_class="probe", flows=[(idx["gpu0000"], idx[dst], size_bytes, 0.0)]
    )
    fabric = Fabric(topo, prof, [wl], dt_s=dt_s, seed=1)
    while not wl.finished:
        fabric.step()
    _, start, finish = wl.finished[0]
    return finish - start


def latency_by_size(
    profiles: Sequence[str] = DEFAULT_PROFILES, sizes: Sequence[int] = MESSAGE_SIZES
) -> list[dict[str, Any]]:
    """Rows of (size, hops, latency per profile, the first profile's advantage)."""
    rows = []
    for hops in (1, 3):
        for size in sizes:
            lat = {p: message_latency(p, size, hops) for p in profiles}
            first, second = lat[profiles[0]], lat[profiles[-1]]
            rows.append(
                {
                    "size_bytes": size,
                    "switch_hops": hops,
                    "latency_seconds": lat,
                    "reduction": 1 - first / second if second > 0 else 0.0,
                }
            )
    return rows
