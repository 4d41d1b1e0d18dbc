"""Core speed: ticks/s and hop-updates/s (one (hop, flow) entry solved and moved = one update).

    python benchmarks/bench_core.py [--ticks N] [--warmup N] [--repeat N] [--json FILE]
                                    [--sizes default,1k,10k]

Fabrics: the bundled default scenario (also on ``native-800g``, which sprays); a ~1k-endpoint and a ~10k-endpoint 3-tier fat-tree
with all-to-all traffic (every GPU keeps ``outstanding`` 1 MiB flows to uniformly random
peers, so every pair of pods exchanges traffic). The warm-up runs into the steady state (at
least ``--warmup`` ticks, and until as many flows have finished as are in flight), where
flows finish and new ones start every tick (the flow index is rebuilt every tick);
the figures are the best of ``--repeat`` runs of ``--ticks`` ticks (the machine is shared,
so the best run is the least disturbed one). Runs on one core (numpy is single-threaded
here). Not a test: it prints figures for the README.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from fabric_core.fabric import Fabric
from fabric_core.profiles import NATIVE_400G
from fabric_core.scenario import load_scenario
from fabric_core.topology import fat_tree
from fabric_core.workloads.traffic import Bulk


def default_fabric(profile: str | None = None) -> Fabric:
    return Fabric.from_scenario(load_scenario("default", profile=profile))


def fat_tree_fabric(
    pods: int, leaves: int, spines: int, cores: int, gpus: int, outstanding: int
) -> Fabric:
    topo = fat_tree(
        NATIVE_400G,
        pods=pods,
        leaves_per_pod=leaves,
        spines_per_pod=spines,
        cores_per_spine=cores,
        gpus_per_leaf=gpus,
    )
    wl = Bulk(name="all-to-all", traffic_class="bulk", size_bytes=1024**2, outstanding=outstanding)
    return Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=1)


SIZES: dict[str, Callable[[], Fabric]] = {
    "default": default_fabric,
    # the same on native-800g: packet spraying carries each flow as up to 8 sub-flows
    "default-spray": lambda: default_fabric("native-800g"),
    # 8 pods x 8 leaves x 16 GPUs = 1,024 GPUs; 8 spines/pod, 8 cores per spine group
    "1k": lambda: fat_tree_fabric(8, 8, 8, 8, 16, 4),
    # 16 pods x 20 leaves x 32 GPUs = 10,240 GPUs; 16 spines/pod, 16 cores per group
    "10k": lambda: fat_tree_fabric(16, 20, 16, 16, 32, 2),
}


#: Longest warm-up, ticks (the 1k fabric turns its flows over in about 600).
MAX_WARMUP = 3000


def bench(name: str, ticks: int, warmup: int, repeat: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    fabric = SIZES[name]()
    build = time.perf_counter() - t0
    # steady state: as many flows finished as there are in flight (each replaced about once)
    fabric.run_ticks(warmup)
    while fabric.completed_flows < fabric.flows.n_parents and fabric.tick < MAX_WARMUP:
        fabric.run_ticks(10)
    runs = []
    for _ in range(repeat):
        h0, c0 = fabric.hop_updates, fabric.completed_flows
        t0 = time.perf_counter()
        fabric.run_ticks(ticks)
        wall = time.perf_counter() - t0
        runs.append((wall, fabric.hop_updates - h0, fabric.completed_flows - c0))
    wall, updates, completed = min(runs)
    return {
        "fabric": name,
        "endpoints": int(fabric.topo.endpoints.size),
        "links": len(fabric.topo.links),
        "entries_per_tick": updates / ticks,
        "flows_in_flight": fabric.flows.n_parents,
        "completions_per_tick": completed / ticks,
        "build_seconds": build,
        "warmup_ticks": fabric.tick - repeat * ticks,
        "ticks_per_second": ticks / wall,
        "hop_updates_per_second": updates / wall,
        "ms_per_tick": wall / ticks * 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=200, help="least ticks before measuring")
    ap.add_argument("--repeat", type=int, default=3, help="measured runs; the best counts")
    ap.add_argument(
        "--sizes", default="default,default-spray,1k,10k", help="of: " + ",".join(SIZES)
    )
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    rows = [bench(s, args.ticks, args.warmup, args.repeat) for s in args.sizes.split(",")]
    print(
        f"{'fabric':<13} {'endpoints':>9} {'links':>7} {'flows':>7} {'done/tick':>9} "
        f"{'entries/tick':>12} {'ms/tick':>9} {'ticks/s':>9} {'hop-updates/s':>14}"
    )
    for r in rows:
        print(
            f"{r['fabric']:<13} {r['endpoints']:>9} {r['links']:>7} {r['flows_in_flight']:>7} "
            f"{r['completions_per_tick']:>9.1f} {r['entries_per_tick']:>12.0f} "
            f"{r['ms_per_tick']:>9.2f} {r['ticks_per_second']:>9.1f} {r['hop_updates_per_second']:>14.3g}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
