"""Wall time of the reroute after a link failure, against the tick, in one run.

Usage: ``python benchmarks/bench_reroute.py [--scenario cluster-100k] [--profile P]``

Builds the scenario, runs it until flows are in flight, then takes down the leaf-spine
link that the most flows cross (a link no flow crosses reroutes nothing). The fault is
injected through the command path, as ``fabtop`` and MQTT do; recovery detects it and
calls ``recovery.reroute`` for the flows that cross it, which is timed here (a wrapper
around the very function recovery calls). The tick is timed beside it, before the fault
and through the recovery, so the figure printed is the reroute's own cost and its ratio
to a tick of the same fabric.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_core.commands import InjectFault
from fabric_core.faults import recovery
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario


def most_crossed_link(fabric: Fabric) -> tuple[int, int]:
    """The leaf-spine link the most active flows cross, and their number."""
    fl = fabric.flows
    links = fabric.topo.links
    path = fl.path[:, fl.active]
    counts = np.bincount(path[path >= 0], minlength=len(links))
    leaf_spine = np.array([tier == "leaf-spine" for tier in links.tier])
    counts[~leaf_spine] = -1
    link = int(np.argmax(counts))
    return link, int(counts[link])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="cluster-100k")
    ap.add_argument("--profile", help="run the scenario on this profile instead of its own")
    ap.add_argument("--warmup", type=int, default=20, help="ticks before the fault")
    ap.add_argument("--max-ticks", type=int, default=2000, help="ticks to wait for the reroute")
    args = ap.parse_args()

    t0 = time.perf_counter()
    fabric = Fabric.from_scenario(load_scenario(args.scenario, profile=args.profile))
    print(f"{args.scenario}: {len(fabric.topo.links):,} links, built in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
    ticks: list[float] = []
    for _ in range(args.warmup):
        t = time.perf_counter()
        fabric.run_ticks(1)
        ticks.append(time.perf_counter() - t)
    link, crossing = most_crossed_link(fabric)
    name = fabric.topo.links.name[link]

    calls: list[tuple[float, int]] = []
    original = recovery.reroute

    def timed(host: Any, links: Any) -> Any:
        t = time.perf_counter()
        out = original(host, links)
        calls.append((time.perf_counter() - t, out[0]))
        return out

    recovery.reroute = timed  # type: ignore[assignment]
    fabric.apply(InjectFault(kind="link_down", target=name))
    fault_ticks: list[float] = []
    for _ in range(args.max_ticks):
        t = time.perf_counter()
        fabric.run_ticks(1)
        fault_ticks.append(time.perf_counter() - t)
        if calls:
            break
    recovery.reroute = original
    if not calls:
        print(f"no reroute within {args.max_ticks} ticks of taking {name} down")
        return 1
    wall, moved = calls[0]
    tick = statistics.median(ticks[len(ticks) // 2 :])
    print(
        f"{name} down ({crossing:,} active flows crossed it): detected and rerouted after "
        f"{len(fault_ticks)} ticks ({len(fault_ticks) * fabric.dt_s * 1e6:.0f} µs simulated)"
    )
    print(
        f"reroute {wall * 1e3:.1f} ms wall for {moved:,} flows moved; the tick before the fault "
        f"{tick * 1e3:.1f} ms (median), the tick that rerouted {fault_ticks[-1] * 1e3:.1f} ms; "
        f"reroute / tick = {wall / tick:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
